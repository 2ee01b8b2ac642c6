-- examples/fashion_mnist_tune_bayes.lua -- step 4 of examples/fashion_mnist_tune.lua:
-- the exploitation round. The exploration round answered its question (flip: see
-- docs/tuning-fashion-mnist.md), so flip is fixed at its answer here and the same
-- nuisance space is searched by the Bayesian algorithm, warm-started from the
-- exploration round's compatible trials (their points and values feed the GP; they are
-- not run again). Same budget (1600 steps), same objective (valid/accuracy). The
-- exploration's diagnosis put the best lr (0.28) at the upper edge of [0.02, 0.3] for both
-- flip values ("raise the upper bound and rerun"): lr's range goes up to 1 here, which
-- keeps every earlier point inside the space, so all of them warm-start the GP.
--   dlua examples/fashion_mnist_tune.lua                  # first: runs/fashion-mnist-tune
--   dlua examples/fashion_mnist_tune_bayes.lua            # then this, from the same directory
local dl = require "dlua"
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"

local spec = dofile(here .. "fashion_mnist_tune_spec.lua")()
spec.name = "fashion-mnist-tune-bayes"
spec.goal = "the best lr and regularisation for the CNN without flips at 1600 steps"
spec.scientific = nil
spec.fixed.flip = 0.0                           -- the exploration's answer: 0.9272 vs 0.9234
spec.nuisance.lr = dl.search.log_uniform(0.02, 1.0)
spec.algorithm = "bayes"
spec.trials = 4
spec.warm_start = "runs/fashion-mnist-tune"
return dl.study(spec)
