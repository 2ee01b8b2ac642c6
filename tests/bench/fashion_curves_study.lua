-- tests/bench/fashion_curves_study.lua -- the unpruned Fashion-MNIST study whose recorded curves
-- tests/bench/asha_replay_fashion.lua replays for every pruning rule (issue 35): 40 quasi-random
-- trials of the CNN (examples/fashion_mnist.lua at 16 channels: about a minute a trial at load 5
-- on the EPYC; 2026-12-04's recording took 65 minutes, two agents at load 13-22), 900 steps
-- each, evaluated every 100 steps, one trial at a time. The exploration study's table
-- (examples/fashion_mnist_tune_spec.lua) with flip fixed at 0 and wider lr and weight decay ranges, so that some trials are bad early (what pruning is for).
--   build/dlua tests/bench/fashion_curves_study.lua --out /tmp/hb_runs --threads 1
--   build/dlua tests/bench/asha_replay_fashion.lua tests/bench/fashion_curves_study.lua \
--     /tmp/hb_runs/fashion-mnist-curves
local dl = require "dlua"
local S = dl.search
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"

local spec = dofile(here .. "../../examples/fashion_mnist_tune_spec.lua")()
spec.name, spec.goal = "fashion-mnist-curves", "record 40 unpruned learning curves for the pruning replay"
spec.experiment, spec.scientific = here .. "../../examples/fashion_mnist.lua", nil
spec.nuisance.lr, spec.nuisance.weight_decay = S.log_uniform(0.01, 1.0), S.log_uniform(1e-5, 1e-2)
spec.fixed = {batch_size = 128, steps = 900, warmup = 50, eval_every = 100, workers = 1, test_eval = false,
              channels = 16, width = 128, crop = 0, ema = 0}
spec.trials, spec.seed, spec.parallel = 40, 35, 1
return dl.study(spec)
