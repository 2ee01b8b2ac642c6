-- examples/fashion_mnist_study.lua -- a tuning study over examples/fashion_mnist.lua,
-- the playbook's way (section 2):
-- Goal: is Adam better than SGD with Nesterov momentum for this CNN at a short budget,
-- once each optimizer's own hyperparameters are re-tuned?
--   scientific: optimizer (what we compare)
--   nuisance:   lr (a separate range per optimizer: adam's lr is not nesterov's lr),
--               momentum (nesterov only), weight_decay -- 8 quasi-random points, the
--               same points for both optimizers
--   fixed:      everything else (batch size 64, width 64, warmup 10, 60 steps): the
--               caveat is that the answer holds for this short budget and batch size
--   metric:     valid/accuracy of the best checkpoint (retrospective), maximised
--
--   dlua examples/fashion_mnist_study.lua                 # 2 x 8 trials, 2 at a time
--   dlua examples/fashion_mnist_study.lua --trials 16 --steps 400 --out runs/longer
--   dlua examples/fashion_mnist_study.lua --create        # then, on several machines:
--   dlua agent runs/fashion-mnist-optimizer --count 4
-- Re-running the same command skips finished trials and resumes interrupted ones.
-- Before the first trial a one-step dry run checks that the experiment reports the
-- objective (a misspelled metric is an error naming this file and line).
local dl = require "dlua"
local S = dl.search

return dl.study{
  name = "fashion-mnist-optimizer",
  goal = "is adam better than nesterov momentum for the CNN at 60 steps, each re-tuned?",
  experiment = "fashion_mnist.lua",                 -- next to this file: runs from any directory
  scientific = {optimizer = {"nesterov", "adam"}},
  nuisance = {
    lr = S.switch("optimizer", {nesterov = S.log_uniform(1e-3, 0.5), adam = S.log_uniform(1e-4, 1e-2)}),
    momentum = S.uniform(0.8, 0.99):when{optimizer = "nesterov"},
    weight_decay = S.log_uniform(1e-5, 1e-2),
  },
  fixed = {batch_size = 64, width = 64, warmup = 10, eval_every = 60, workers = 1, steps = 60, test_eval = false,
           crop = 0, tolerance = 0},
  trials = 8, algorithm = "quasirandom", seed = 7, parallel = 2,
  objective = {metric = "valid/accuracy", mode = "max"},
}
