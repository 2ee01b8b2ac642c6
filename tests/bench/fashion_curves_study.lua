-- tests/bench/fashion_curves_study.lua -- the unpruned Fashion-MNIST study whose recorded curves
-- tests/bench/asha_replay_fashion.lua replays for every pruning rule (issue 35): 40 quasi-random
-- trials of the CNN (examples/fashion_mnist.lua at 16 channels, so 40 trials run in about 40
-- minutes on 2 busy cores), 900 steps each, evaluated every 100 steps, one trial at a time.
--   build/dlua tests/bench/fashion_curves_study.lua --out /tmp/hb_runs --threads 1
--   build/dlua tests/bench/asha_replay_fashion.lua tests/bench/fashion_curves_study.lua /tmp/hb_runs/fashion-mnist-curves
local dl = require "dlua"
local S = dl.search
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"

return dl.study{
  name = "fashion-mnist-curves",
  goal = "record 40 unpruned learning curves for the pruning replay",
  experiment = here .. "../../examples/fashion_mnist.lua",
  nuisance = {
    lr = S.log_uniform(0.01, 1.0),
    weight_decay = S.log_uniform(1e-5, 1e-2),
    label_smoothing = S.uniform(0.0, 0.2),
    dropout = S.uniform(0.0, 0.5),
  },
  fixed = {batch_size = 128, steps = 900, warmup = 50, eval_every = 100, workers = 1, test_eval = false,
           channels = 16, width = 128, crop = 0, ema = 0},
  trials = 40, algorithm = "quasirandom", seed = 35, parallel = 1,
  objective = {metric = "valid/accuracy", mode = "max"},
}
