-- examples/fashion_mnist_tune_fast.lua -- round 5 of the main job's tuning (issue 37; the log
-- is docs/tuning-fashion-mnist.md, section 8): the main job in half the training time.
-- Measured first (section 8): a step of batch 128 is 92% of the run; channels 16 make a step
-- about 0.8x as long, a narrower FC layer or another batch size no faster per example. So the
-- budget is steps: 5000 steps (2.2x fewer than 11000) and 5 evals instead of 11 (0.46x the time).
-- Goal of this round: at 5000 steps, what does a narrower network cost in validation
-- accuracy for what it saves per step, and which EMA decay (horizon) suits the shorter run?
--   scientific: channels (16, 32) and ema (0.998: a 500-step horizon; 0.999: 1000 steps).
--               The EMA decay does not change the trajectory (only the averaged weights that
--               are evaluated beside it), so its two groups differ by the average alone
--   nuisance:   none searched: lr, weight decay, label smoothing and dropout stay at round
--               2's best (the main job's defaults)
--   fixed:      steps 5000, eval every 1000 on validation only (test_eval = false: the test
--               set stays unseen while tuning), batch 128, width 256
--   objectives: ema/valid/accuracy of the best checkpoint (max; the averaged weights rank the
--               main job's checkpoints, section 7) and train/time_per_step (min)
--
--   dlua examples/fashion_mnist_tune_fast.lua --threads 1      # 4 trials, one at a time
--   dlua report runs/fashion-mnist-fast
local dl = require "dlua"

return dl.study{
  name = "fashion-mnist-fast",
  goal = "at 5000 steps (half the training time), what do channels 16 cost against 32, and which EMA decay?",
  experiment = "fashion_mnist.lua",
  scientific = {channels = {16, 32}, ema = {0.998, 0.999}},
  fixed = {steps = 5000, eval_every = 1000, workers = 1, test_eval = false, crop = 0, tolerance = 0},  -- as it ran
  trials = 1, algorithm = "grid", parallel = 1,
  objective = {{metric = "ema/valid/accuracy", mode = "max"}, {metric = "train/time_per_step", mode = "min"}},
}
