-- examples/fashion_mnist_tune.lua -- how the main job's configuration was found (issue 22):
-- dlua's own recipes, the playbook's order (PLAYBOOK.md sections 1-3; the log with every
-- number is docs/tuning-fashion-mnist.md):
--   1. batch size: recipes/batch_size.lua -> 128 (throughput stops growing beyond it)
--   2. step budget: compute-bound -- what 10 minutes of 2 cores train at that throughput
--   3. this study: an exploration round at a short budget (1600 steps), quasi-random
--   4. examples/fashion_mnist_tune_bayes.lua: exploitation, Bayesian, warm-started from 3
-- Goal of this round: does mirroring the training images (flip) help this CNN once the
-- regularisation is re-tuned for each choice?
--   scientific: flip (0 = off, 0.5 = mirror half of the training images)
--   nuisance:   lr, weight_decay, label_smoothing, dropout -- 4 quasi-random points, the
--               same points for both values of flip
--   fixed:      batch 128, 1600 steps (3.7 epochs), warmup 100, SGD Nesterov 0.9, cosine
--               decay, channels 32, width 256, no random crops; the caveat: answers for
--               1600 steps, checked again at the full budget
--   metric:     valid/accuracy of the best checkpoint (retrospective), maximised; the test
--               set stays unseen (test_eval = false)
--
--   dlua examples/fashion_mnist_tune.lua                  # 8 trials, 2 at a time
--   dlua examples/fashion_mnist_tune_asha.lua             # the same points with ASHA pruning
--   dlua report runs/fashion-mnist-tune
-- The study's table is examples/fashion_mnist_tune_spec.lua, shared by both files.
local dl = require "dlua"
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"

return dl.study(dofile(here .. "fashion_mnist_tune_spec.lua")())
