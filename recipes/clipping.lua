-- recipes/clipping.lua -- a gradient-clipping threshold from the unclipped gradient
-- norms (playbook FAQ, "gradient clipping").
-- Goal: a clipping threshold just above the typical gradient norm.
--   1. a reference run without clipping logs the global gradient L2 norm of every step
--      (dl.train records it before any clipping)
--   2. threshold = the 90th percentile of those norms (--percentile)
--   3. a run with clip = threshold reports the fraction of updates clipped; above 50%
--      clipping is "extremely aggressive", an lr cut in disguise: lower the lr instead
--   fixed: every hyperparameter but clip (--set k=v); the report of the reference run
--   has the norm vs step and its histogram
--
--   dlua recipes/clipping.lua [EXPERIMENT] [--steps 300] [--percentile 90]
--        [--eval-examples 1000] [--out runs/clipping] [--set k=v] [--seed N] [--threads N]
local dl = require "dlua"
local probe = require "dlua.study.probe"
local A = require "dlua.report.analysis"

local function last_eval(t, metric)
  local xs, ys = A.curve(t, metric)
  return ys[#ys]
end

local USAGE = [[
usage: dlua clipping [EXPERIMENT] [flags]
  --steps N           steps of each run (300)
  --percentile P      the threshold's percentile of the unclipped norms (90)
  --eval-examples N   validation examples per eval (1000)
  --out DIR           where the two runs go (runs/clipping); finished runs are reused
  --set k=v           any other hyperparameter; --seed N the seed; --threads N compute threads (2)]]

probe.main(function()
  local args = {}
  for i = 1, #arg do args[i] = arg[i] end
  local o, exp, path = probe.recipe_args(args, {"--percentile", "--eval-examples"},
    {command = "dlua clipping", uses = {"--steps", "--out"}})
  if o.help then print(USAGE); return end
  if o.set.clip then error("--set clip: the recipe sets clip itself", 0) end
  local steps = o.steps or 300
  local pct = probe.number("percentile", o.extra.percentile, 90)
  if pct <= 0 or pct >= 100 then error("--percentile: expected a number between 0 and 100", 0) end
  local out = o.out or "runs/clipping"
  local v = probe.variant(path, {tag = "clipping", clip = true, eval_sets = {"valid"},
    eval_examples = probe.number("eval-examples", o.extra["eval-examples"], 1000, {int = 1}), eval_every = math.max(1, steps // 5)})
  local ref = {dir = out .. "/reference"}
  local r1 = probe.train(v, probe.overrides(o, {clip = 0.0, steps = steps}), {dir = ref.dir, steps = steps})
  if r1.status == "failed" then error("the reference run failed: " .. tostring(r1.message), 0) end
  local g = A.grad_norms(ref)
  if #g.values == 0 then error("the reference run recorded no gradient norms", 0) end
  local q = function(p) return A.quantile(g.values, p) end
  local lam = q(pct / 100)
  local mx, at = -math.huge, nil
  for i, x in ipairs(g.values) do if x > mx then mx, at = x, g.steps[i] end end
  local above = 0
  for _, x in ipairs(g.values) do if x > lam then above = above + 1 end end
  print(string.format("unclipped gradient norms of %d steps%s (%s): p50 %.4g, p90 %.4g, p99 %.4g, max %.4g at step %d",
    #g.values, g.per_step and "" or " (log steps only)", ref.dir, q(0.5), q(0.9), q(0.99), mx, at))
  print(string.format("recommended clipping threshold: %.4g (the %s%s percentile); it would clip %d of %d steps of " ..
    "the reference run (%.1f%%)", lam, probe.fmt(pct), pct == 90 and "th" or "th", above, #g.values, 100 * above / #g.values))
  local cl = {dir = string.format("%s/clip-p%s", out, probe.fmt(pct))}
  local r2 = probe.train(v, probe.overrides(o, {clip = lam, steps = steps}), {dir = cl.dir, steps = steps})
  local g2 = A.grad_norms(cl)
  local frac
  if g2.clipped and g2.clip_steps and g2.clip_steps > 0 then
    frac = g2.clipped / g2.clip_steps
    print(string.format("with clip = %.4g: %d of %d updates clipped (%.1f%%)%s", lam, g2.clipped, g2.clip_steps,
      100 * frac, r2.status ~= "done" and (" before it " .. r2.status) or ""))
    if frac > 0.5 then
      print("warning: more than 50% of updates clipped is extremely aggressive clipping, in effect a smaller " ..
        "learning rate: lower the lr instead")
    end
  else
    print(string.format("with clip = %.4g: the run %s (%s)", lam, r2.status, tostring(r2.message)))
  end
  print(string.format("  %-16s %-9s %14s %14s %16s", "run", "status", "train loss", "valid/loss", "valid/accuracy"))
  for _, row in ipairs({{"no clipping", r1, ref}, {string.format("clip %.4g", lam), r2, cl}}) do
    local t = row[3]
    print(string.format("  %-16s %-9s %14s %14s %16s", row[1], row[2].status,
      probe.fmt(last_eval(t, "train/loss") or 0 / 0), probe.fmt(last_eval(t, "valid/loss") or 0 / 0),
      probe.fmt(last_eval(t, "valid/accuracy") or 0 / 0)))
  end
  print("if instability remains, clip harder (a smaller threshold); longer warmup sometimes fixes what clipping does not")
  print("report (gradient norm vs step, histogram): " .. dl.report(ref.dir))
end)
