-- recipes/early_instability.lua -- the playbook's check for very early instability
-- (FAQ, "how can optimization failures be debugged and mitigated?"): some models are
-- unstable right at the start and then recover, which an eval every few hundred steps
-- never shows.
-- Goal: does training at 2 x the current best learning rate have an early loss spike?
--   run:    ~500 steps (--steps) at --factor (2) x the best lr, evaluating every step on
--           a fixed subset of the validation set (--eval-examples) and logging the
--           training loss every step; everything else as in the best configuration
--           (the experiment's defaults, --set k=v, or the best trial of --from STUDY_DIR)
--   flags:  a rise of the loss more than 10% above its running minimum (an engine
--           choice): the eval loss on the fixed subset, and the training loss smoothed
--           with an EMA of 0.1, whose rise must also exceed 6 x the EMA's own noise
--           (batch-to-batch variation); and whether it recovered (fell back below the
--           minimum before the spike)
--   fixes:  warmup (recipes/warmup.lua), clipping (recipes/clipping.lua)
--
--   dlua recipes/early_instability.lua [EXPERIMENT] [--lr X | --from STUDY_DIR] [--factor 2]
--        [--steps 500] [--eval-examples 256] [--out runs/early-instability] [--set k=v] [--seed N]
--        [--threads N]
local dl = require "dlua"
local probe = require "dlua.study.probe"
local A = require "dlua.report.analysis"

local USAGE = [[
usage: dlua early-instability [EXPERIMENT] [flags]
  --lr X              the current best learning rate (default: the experiment's lr)
  --from DIR          take the best trial of a study directory (its lr and hyperparameters)
  --factor F          run at F x the best lr (2)
  --steps N           steps (500); --eval-examples N validation examples evaluated every step (256)
  --out DIR           the run directory's parent (runs/early-instability)
  --set k=v           any other hyperparameter; --seed N the seed; --threads N compute threads (2)]]

local M_RISE = 0.10

-- the largest rise of ys above its running minimum: {rise, from_step, peak_step, recovered_step}
local function worst_rise(xs, ys)
  local best = {rise = 0}
  local min_v, min_i = math.huge, nil
  for i = 1, #ys do
    if ys[i] < min_v then min_v, min_i = ys[i], i end
    local r = (ys[i] - min_v) / math.max(math.abs(min_v), 1e-12)
    if r > best.rise then best = {rise = r, from = min_i, peak = i, min = min_v} end
  end
  if best.peak then
    for j = best.peak + 1, #ys do
      if ys[j] <= best.min then best.recovered = j; break end
    end
    best.from_step, best.peak_step = xs[best.from], xs[best.peak]
    best.recovered_step = best.recovered and xs[best.recovered]
    best.peak_value = ys[best.peak]
  end
  return best
end

local function ema(ys, a)
  local out, s = {}, nil
  for i, y in ipairs(ys) do s = s and (1 - a) * s + a * y or y; out[i] = s end
  return out
end

-- the noise of an EMA(a) of a series: the std of the series around its EMA, times sqrt(a / (2 - a))
local function ema_noise(ys, sm, a)
  local n, ss = 0, 0
  for i = #ys // 2 + 1, #ys do n, ss = n + 1, ss + (ys[i] - sm[i]) ^ 2 end
  if n < 2 then return 0 end
  return math.sqrt(ss / (n - 1)) * math.sqrt(a / (2 - a))
end

-- w from worst_rise; noise: a rise must also exceed 6 x this (the smoothed training loss)
local function describe(name, w, noise)
  local need = M_RISE
  if noise and w.min and w.min > 0 then need = math.max(M_RISE, 6 * noise / w.min) end
  if not w.peak or w.rise <= need then
    return false, string.format("%s: no rise above %.0f%% of its running minimum (largest %.1f%%)", name, 100 * need,
      100 * (w.rise or 0))
  end
  return true, string.format("%s rises %.0f%% above its minimum %.4g (step %d) to %.4g at step %d, %s", name,
    100 * w.rise, w.min, w.from_step, w.peak_value, w.peak_step,
    w.recovered_step and string.format("and recovers by step %d", w.recovered_step) or "and does not recover")
end

probe.main(function()
  local args = {}
  for i = 1, #arg do args[i] = arg[i] end
  local o, exp, path = probe.recipe_args(args, {"--lr", "--from", "--factor", "--eval-examples"},
    {command = "dlua early-instability", uses = {"--steps", "--out"}})
  if o.help then print(USAGE); return end
  local over = {}
  local lr = probe.number("lr", o.extra.lr, nil, {above = 0})
  local source = "--lr"
  if o.extra.from then
    local d = A.load(o.extra.from)
    if not d.best then error(o.extra.from .. " has no feasible trial", 0) end
    for k, v in pairs(d.best.hp) do
      if exp.hparams[k] ~= nil and k ~= "steps" and k ~= "eval_every" then over[k] = v end
    end
    lr = lr or d.best.hp.lr
    source = "the best trial " .. d.best.id .. " of " .. o.extra.from
  end
  if not lr then lr, source = exp.hparams.lr, "the experiment's default" end
  if not lr then error(path .. " has no lr hyperparameter", 0) end
  for k, v in pairs(o.set) do over[k] = v end
  local factor = probe.number("factor", o.extra.factor, 2, {above = 0})
  local steps = o.steps or 500
  over.lr = factor * lr
  local v = probe.variant(path, {tag = "early-instability", eval_sets = {"valid"}, eval_every = 1, log_every = 1,
    eval_examples = probe.number("eval-examples", o.extra["eval-examples"], 256, {int = 1}), checkpoint_every = steps})
  local dir = string.format("%s/lr-%s", o.out or "runs/early-instability", probe.fmt(over.lr))
  print(string.format("early instability check: %d steps at %s x the best lr %s (%s) = %s, evaluating every step",
    steps, probe.fmt(factor), probe.fmt(lr), source, probe.fmt(over.lr)))
  local r = probe.train(v, over, {dir = dir, steps = steps})
  local t = {dir = dir}
  local ex, ey = A.curve(t, "valid/loss")
  local tx, ty = A.curve(t, "train/loss")
  local any = false
  if r.status == "diverged" then
    print(string.format("verdict: UNSTABLE: the run diverged (%s); fix early instability before using this lr " ..
      "(warmup: recipes/warmup.lua; clipping: recipes/clipping.lua)", tostring(r.message)))
    any = true
  elseif r.status ~= "done" then
    error("the run failed: " .. tostring(r.message), 0)
  end
  local w1 = worst_rise(ex, ey)
  local f1, m1 = describe("validation loss (fixed subset, every step)", w1)
  local sm = ema(ty, 0.1)
  local w2 = worst_rise(tx, sm)
  local f2, m2 = describe("training loss (EMA 0.1, every step)", w2, ema_noise(ty, sm, 0.1))
  print("  " .. m1)
  print("  " .. m2)
  if r.status == "done" then
    local early, later = false, false
    for _, x in ipairs({{f1, w1}, {f2, w2}}) do
      if x[1] then
        if x[2].peak_step <= 0.2 * steps then early = true else later = true end
      end
    end
    local fx = probe.fmt(factor) .. " x the best lr"
    if early then
      print(string.format("verdict: early instability at %s (in the first 20%% of the steps; it shows only when " ..
        "evaluating this often): warmup or clipping may allow higher learning rates (recipes/warmup.lua, " ..
        "recipes/clipping.lua)", fx))
    elseif later then
      print(string.format("verdict: no early instability at %s, but a loss spike later in the run (the playbook's " ..
        "sudden mid-training instability): gradient clipping is the usual fix (recipes/clipping.lua)", fx))
    else
      print(string.format("verdict: no early instability at %s: the losses fell without a spike", fx))
    end
  end
  local last = ey[#ey]
  if last then print(string.format("final validation loss %s after %d steps", dl.util.fmt_metric(last), ex[#ex])) end
  print("report: " .. dl.report(dir))
  return any
end)
