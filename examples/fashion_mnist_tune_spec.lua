-- examples/fashion_mnist_tune_spec.lua -- the table of the exploration study of
-- examples/fashion_mnist_tune.lua (which explains each choice), shared with its ASHA twin
-- examples/fashion_mnist_tune_asha.lua: a fresh table per call.
local S = require("dlua").search

return function()
  return {
    name = "fashion-mnist-tune",
    goal = "does flipping help the CNN at 1600 steps once lr and regularisation are re-tuned for each choice?",
    experiment = "fashion_mnist.lua",
    scientific = {flip = {0.0, 0.5}},
    nuisance = {
      lr = S.log_uniform(0.02, 0.3),
      weight_decay = S.log_uniform(1e-4, 2e-3),
      label_smoothing = S.uniform(0.0, 0.2),
      dropout = S.uniform(0.0, 0.5),
    },
    fixed = {batch_size = 128, steps = 1600, warmup = 100, eval_every = 400, workers = 1, test_eval = false,
             channels = 32, width = 256, crop = 0, ema = 0, tolerance = 0},   -- ema, tolerance: the raw weights
             -- and the best checkpoint, as these rounds ran
    trials = 4, algorithm = "quasirandom", seed = 22, parallel = 2,
    objective = {metric = "valid/accuracy", mode = "max"},
  }
end
