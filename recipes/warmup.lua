-- recipes/warmup.lua -- learning-rate warmup the way the playbook's FAQ prescribes
-- ("how to apply learning rate warmup").
-- Goal: the shortest warmup that lets the base learning rate go an order of magnitude
-- above the one where training becomes unstable.
--   1. unstable_base_learning_rate: constant-lr runs of --probe-steps steps at lr,
--      lr x factor, lr x factor^2, ... until one is unstable (it diverges, or its
--      training loss ends above where it started); or give it with --unstable-lr
--   2. base_learning_rate = --multiplier x unstable (10; the procedure can be repeated
--      at 100)
--   3. warmup_steps swept over orders of magnitude (10, 100, 1000, ...; at most 10% of
--      --max-steps, the run's max_train_steps), each run ramping the lr from 0 to the
--      base lr over warmup_steps, then constant for post_warmup_steps = 2 x warmup_steps
--   4. the shortest stable warmup is the answer: prepend it to the baseline schedule
--      (total steps = max_train_steps + warmup_steps); more than 5% of max_train_steps
--      suggests max_train_steps may need to grow
--   fixed: every other hyperparameter (--set k=v)
--
--   dlua recipes/warmup.lua [EXPERIMENT] [--lr 0.05] [--factor 3] [--tries 6] [--probe-steps 100]
--        [--unstable-lr X] [--multiplier 10] [--warmups 10,100] [--max-steps N]
--        [--eval-examples 1000] [--out runs/warmup] [--set k=v] [--seed N] [--threads N]
local dl = require "dlua"
local probe = require "dlua.study.probe"
local A = require "dlua.report.analysis"

local USAGE = [[
usage: dlua warmup [EXPERIMENT] [flags]
  --unstable-lr X     skip step 1: the learning rate known to be unstable
  --lr X              step 1 starts here (the experiment's lr); --factor F multiplies it each try (3)
  --tries N           step 1 gives up after N learning rates (6); --probe-steps N steps each (100)
  --multiplier M      base lr = M x the unstable lr (10)
  --warmups a,b,...   warmup_steps to try (default: 10, 100, 1000, ... up to 10% of --max-steps)
  --max-steps N       the run's max_train_steps (the experiment's steps)
  --eval-examples N   validation examples per eval (1000)
  --out DIR           where the runs go (runs/warmup); finished runs are reused
  --set k=v           any other hyperparameter; --seed N the seed; --threads N compute threads (2)]]

-- stable: finished, and the training loss ended below where it started
local function verdict(r, t)
  if r.status ~= "done" then return false, r.status .. (r.message and (": " .. r.message) or "") end
  local xs, ys = A.curve(t, "train/loss")
  if #ys < 2 then return true, "done" end
  if ys[#ys] >= ys[1] then
    return false, string.format("no progress: training loss %s at the end, %s at step %d", dl.util.fmt_metric(ys[#ys]),
      dl.util.fmt_metric(ys[1]), xs[1])
  end
  return true, string.format("training loss %s -> %s", dl.util.fmt_metric(ys[1]), dl.util.fmt_metric(ys[#ys]))
end

probe.main(function()
  local args = {}
  for i = 1, #arg do args[i] = arg[i] end
  local o, exp, path = probe.recipe_args(args, {"--lr", "--factor", "--tries", "--probe-steps", "--unstable-lr",
    "--multiplier", "--warmups", "--max-steps", "--eval-examples"}, {command = "dlua warmup", uses = {"--out"}})
  if o.help then print(USAGE); return end
  for _, k in ipairs({"lr", "warmup", "steps"}) do
    if o.set[k] then error(string.format("--set %s: the recipe sets %s itself (see --help)", k, k), 0) end
  end
  local out = o.out or "runs/warmup"
  local max_steps = probe.number("max-steps", o.extra["max-steps"], exp.hparams.steps, {int = 1})
  local ev = probe.number("eval-examples", o.extra["eval-examples"], 1000, {int = 1})
  local multiplier = probe.number("multiplier", o.extra.multiplier, 10, {above = 0})
  local warmups = o.extra.warmups and probe.number_list("warmups", o.extra.warmups, {int = 1})

  -- 1. the unstable base learning rate
  local unstable = probe.number("unstable-lr", o.extra["unstable-lr"], nil, {above = 0})
  for _, k in ipairs({"lr", "factor", "tries", "probe-steps"}) do    -- step 1's flags, which --unstable-lr skips
    if unstable and o.extra[k] then error(string.format("--%s applies to step 1, which --unstable-lr skips", k), 0) end
  end
  if not unstable then
    local lr = probe.number("lr", o.extra.lr, exp.hparams.lr, {above = 0})
    local factor = probe.number("factor", o.extra.factor, 3, {above = 0})
    local tries = probe.number("tries", o.extra.tries, 6, {int = 1})
    local psteps = probe.number("probe-steps", o.extra["probe-steps"], 100, {int = 1})
    local pexp = probe.variant(path, {tag = "lr-probe", schedule = "constant", eval_sets = {"valid"}, eval_examples = ev,
      eval_every = psteps, log_every = math.max(1, psteps // 20), divergence = {factor = 3}})
    print(string.format("step 1: the unstable learning rate (constant lr, %d steps each, x%s per try)", psteps,
      probe.fmt(factor)))
    for k = 0, tries - 1 do
      local try_lr = lr * factor ^ k
      local dir = string.format("%s/lr-probe/lr-%s", out, probe.fmt(try_lr))
      local r = probe.train(pexp, probe.overrides(o, {lr = try_lr, steps = psteps}), {dir = dir, steps = psteps})
      local stable, why = verdict(r, {dir = dir})
      print(string.format("  lr %-10s %s  %s", probe.fmt(try_lr), stable and "stable  " or "UNSTABLE", why))
      if not stable then unstable = try_lr; break end
    end
    if not unstable then
      print(string.format("no unstable learning rate up to %s in %d steps: early instability does not limit this " ..
        "workload's learning rate at this budget (give --unstable-lr to run step 2 anyway)", probe.fmt(lr * factor ^ (tries - 1)),
        psteps))
      return
    end
  end
  local base = multiplier * unstable
  -- 2-3. warmup over orders of magnitude at 10x the unstable rate
  if not warmups then
    warmups = {}
    local w = 10
    while w <= 0.1 * max_steps do warmups[#warmups + 1] = w; w = w * 10 end
    if #warmups == 0 then warmups = {math.max(1, math.floor(0.1 * max_steps))} end
  end
  table.sort(warmups)
  print(string.format("step 2: unstable_base_learning_rate %s; base_learning_rate %s x %s = %s", probe.fmt(unstable),
    probe.fmt(multiplier), probe.fmt(unstable), probe.fmt(base)))
  print(string.format("step 3: warmup_steps in {%s} (at most 10%% of max_train_steps %d), then 2 x warmup steps at " ..
    "the base lr", table.concat(warmups, ", "), max_steps))
  local wexp = probe.variant(path, {tag = "warmup", schedule = "warmup_constant", steps_from_warmup = true,
    eval_sets = {"valid"}, eval_examples = ev, divergence = {factor = 3}})
  print(string.format("  %12s %8s  %-9s %s", "warmup_steps", "steps", "verdict", "detail"))
  local shortest
  for _, w in ipairs(warmups) do
    local total = 3 * w
    local evals = math.max(1, total // 5)
    local dir = string.format("%s/warmup/warmup-%d", out, w)
    local over = probe.overrides(o, {lr = base, warmup = math.tointeger(w), post_warmup = math.tointeger(2 * w),
      eval_every = exp.hparams.eval_every and evals or nil})
    local r = probe.train(wexp, over, {dir = dir})
    local stable, why = verdict(r, {dir = dir})
    print(string.format("  %12d %8d  %-9s %s", w, total, stable and "stable" or "UNSTABLE", why))
    if stable and not shortest then shortest = w end
  end
  if shortest then
    print(string.format("shortest stable warmup at lr %s: %d steps. Prepend it to the baseline schedule (total steps " ..
      "%d + %d = %d) and compare with the baseline using the best checkpoint of each.", probe.fmt(base), shortest,
      max_steps, shortest, max_steps + shortest))
    if shortest > 0.05 * max_steps then
      print(string.format("note: %d warmup steps are more than 5%% of max_train_steps (%d): max_train_steps may need " ..
        "to grow", shortest, max_steps))
    end
  else
    print(string.format("no warmup in {%s} trains stably at %s (%s x the unstable lr): try longer warmups (--warmups), " ..
      "a smaller --multiplier, or gradient clipping (recipes/clipping.lua)", table.concat(warmups, ", "), probe.fmt(base),
      probe.fmt(multiplier)))
  end
  print("report: " .. dl.report(out .. "/warmup"))
end)
