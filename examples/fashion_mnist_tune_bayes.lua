-- examples/fashion_mnist_tune_bayes.lua -- step 4 of examples/fashion_mnist_tune.lua:
-- the exploitation round. The exploration round answered its question (flip: see
-- docs/tuning-fashion-mnist.md), so flip is fixed at its answer here and the same
-- nuisance space is searched by the Bayesian algorithm, warm-started from the
-- exploration round's compatible trials (their points and values feed the GP; they are
-- not run again). Same budget (1600 steps), same objective (valid/accuracy).
--   dlua examples/fashion_mnist_tune.lua                  # first: runs/fashion-mnist-tune
--   dlua examples/fashion_mnist_tune_bayes.lua            # then this, from the same directory
local dl = require "dlua"
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"

local spec = dofile(here .. "fashion_mnist_tune_spec.lua")()
spec.name = "fashion-mnist-tune-bayes"
spec.goal = "the best lr and regularisation for the CNN with flip = FLIP at 1600 steps"
spec.scientific = nil
spec.fixed.flip = FLIP
spec.algorithm = "bayes"
spec.trials = 4
spec.warm_start = "runs/fashion-mnist-tune"
return dl.study(spec)
