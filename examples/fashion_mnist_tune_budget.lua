-- examples/fashion_mnist_tune_budget.lua -- round 3 of the main job's tuning (issue 22; the
-- log is docs/tuning-fashion-mnist.md). Winograd convolutions made a training step about
-- 1.9x faster, so the 10-minute budget that fixed 7000 steps in rounds 1-2 now buys about
-- 11000 (2,800 examples/s at batch 128, with 11 evaluations). The playbook's step 2 again:
-- is this job compute-bound, i.e. does training longer at the tuned configuration pay?
--   scientific: steps (7000, the old budget; 11000, the new one): allow_step_search, since
--               the step budget is the question of this round
--   nuisance:   none searched: lr, weight decay, label smoothing and dropout stay at round
--               2's best (the main job's defaults); 2 seeds re-run each group's trial, so
--               the adoption test sees the seed noise
--   fixed:      channels 32 (48 would train 1,650 examples/s: 7000 steps in the budget),
--               eval every 1000; the test set is evaluated too (test_eval), since this
--               round confirms a configuration and selects on validation only
--   metric:     valid/accuracy of the best checkpoint (retrospective), maximised
--
--   dlua examples/fashion_mnist_tune_budget.lua          # 2 groups x (1 trial + 2 seeds), 2 at a time
--   dlua report runs/fashion-mnist-budget
local dl = require "dlua"

return dl.study{
  name = "fashion-mnist-budget",
  goal = "with the faster engine, does the 10-minute budget (11000 steps) beat the old 7000?",
  experiment = "fashion_mnist.lua",
  scientific = {steps = {7000, 11000}},
  allow_step_search = true,
  fixed = {eval_every = 1000, workers = 1, test_eval = true, channels = 32, ema = 0, crop = 0, tolerance = 0},   -- as this round ran
  trials = 1, seeds = 2, algorithm = "grid", parallel = 2,
  objective = {metric = "valid/accuracy", mode = "max"},
}
