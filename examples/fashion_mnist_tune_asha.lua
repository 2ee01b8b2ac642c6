-- examples/fashion_mnist_tune_asha.lua -- examples/fashion_mnist_tune.lua's exploration
-- study, the same 8 points, with ASHA pruning: rungs at 400 and 800 steps (and the full
-- 1600), on the study's evals (every 400 steps); a trial goes on past a rung when it is in
-- the top half of the trials that reached it, else it pauses and may be promoted later
-- (pause = true: the rule of the recorded run in docs/benchmarks.md; without it a trial
-- below the cut stops for good and the first trials at a rung go on, docs/studies.md).
-- The question for issue 18: does pruning find the same best validation accuracy for at
-- most half the training steps? (docs/tuning-fashion-mnist.md: a first run with rungs at
-- 200 and 600, between the evals, made no rung decision at all, which is fixed since.)
--   dlua examples/fashion_mnist_tune_asha.lua
local dl = require "dlua"
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"

local spec = dofile(here .. "fashion_mnist_tune_spec.lua")()
spec.name = "fashion-mnist-tune-asha"
spec.prune = {algorithm = "asha", min_steps = 400, reduction = 2, pause = true}
return dl.study(spec)
