-- recipes/max_steps.lua -- an initial max_train_steps from a learning-rate sweep
-- (playbook section 3.1, "algorithm for picking an initial candidate for
-- max_train_steps using a learning rate sweep").
-- Goal: the number of steps the fastest learning rate needs to fit the training set.
--   swept:  lr over a grid (--lrs), each trial N steps (--steps), a constant learning
--           rate (the experiment's schedule replaced), no regularisation (weight_decay,
--           label_smoothing, dropout set to 0); augmentation, if the experiment has
--           any, is its own to switch off (--set)
--   fixed:  everything else; one step budget for all trials
--   metric: the training loss (the train log's window means); "fitting the training
--           set" is reaching --target, since a few minutes on two cores do not reach
--           zero training error
--   checks: the fastest learning rate is not at an end of the grid (a grid that is
--           too small everywhere deceives)
-- The sweep is a dl.study (manual trials): parallel, resumable, with report and diagnosis.
--
--   dlua recipes/max_steps.lua [EXPERIMENT] [--lrs 0.01,0.03,0.1,0.3,1] [--steps 400]
--        [--target 0.3] [--out runs] [--name max-steps] [--parallel P] [--set k=v] [--seed N]
--        [--threads N] [--quiet]
local dl = require "dlua"
local probe = require "dlua.study.probe"
local A = require "dlua.report.analysis"

local USAGE = [[
usage: dlua max-steps [EXPERIMENT] [flags]
  --lrs a,b,...     the learning-rate grid (0.01,0.03,0.1,0.3,1)
  --steps N         steps of every trial (400)
  --target L        the training loss that counts as fitting the training set (0.3)
  --out DIR         runs root (runs): the study goes to DIR/NAME
  --name NAME       study name (max-steps)
  --parallel P      trials at a time (cores); --threads N per trial; --set k=v any other hyperparameter
  --seed N          the trials' seed
  --quiet           no progress lines]]

probe.main(function()
  local args = {}
  for i = 1, #arg do args[i] = arg[i] end
  local o, exp, path = probe.recipe_args(args, {"--lrs", "--target", "--name", "--parallel"},
    {command = "dlua max-steps", uses = {"--steps", "--out", "--quiet"}})
  if o.help then print(USAGE); return end
  if exp.hparams.lr == nil then error(path .. " has no lr hyperparameter", 0) end
  if o.set.lr then error("--set lr: the learning rate is what this recipe sweeps (use --lrs)", 0) end
  local lrs = o.extra.lrs and probe.number_list("lrs", o.extra.lrs, {above = 0}) or {0.01, 0.03, 0.1, 0.3, 1.0}
  table.sort(lrs)
  local steps = o.steps or 400
  local target = probe.number("target", o.extra.target, 0.3)
  local name = o.extra.name or "max-steps"
  local root = o.out or "runs"
  local sdir = root .. "/" .. name
  local every = math.max(1, steps // 6)
  local variant = probe.write_variant(sdir .. "/experiment.lua", path, {tag = "max-steps", schedule = "constant",
    no_regularization = true, log_every = math.max(1, steps // 60), eval_sets = {"valid"}, eval_examples = 1000,
    eval_every = every, checkpoint_every = every})
  local trials = {}
  for i, lr in ipairs(lrs) do trials[i] = {lr = lr + 0.0} end
  local st = dl.study{name = name, goal = string.format("steps to reach training loss %g at a constant lr, no " ..
    "regularisation: the initial max_train_steps", target), experiment = variant, trials = trials, fixed = o.set,
    steps = steps, objective = {metric = "train/loss", mode = "min"},
    parallel = probe.number("parallel", o.extra.parallel, nil, {int = 1})}
  local res = st:run{out = root, quiet = o.quiet, threads = o.threads}
  print(require("dlua.study").format_results(res))
  -- per lr: the first logged step whose (window-mean) training loss reaches the target
  local d = A.load(sdir)
  local by_lr = {}
  for _, t in ipairs(d.trials) do by_lr[t.hp.lr] = t end
  print(string.format("\nlr sweep for max_train_steps: constant lr, no regularisation, %d steps per trial; target: " ..
    "training loss <= %g", steps, target))
  print(string.format("  %10s  %-9s %12s %12s %16s", "lr", "status", "final loss", "best loss", "steps to target"))
  local fastest
  for _, lr in ipairs(lrs) do
    local t = by_lr[lr]
    local reach, final, best
    if t then
      local xs, ys = A.curve(t, "train/loss")
      for i = 1, #xs do
        if not reach and ys[i] <= target then reach = xs[i] end
        best = best and math.min(best, ys[i]) or ys[i]
      end
      final = ys[#ys]
      if reach and t.status == "done" then
        if not fastest or reach < fastest.step then fastest = {lr = lr, step = reach, t = t, lrs = {lr}}
        elseif reach == fastest.step then table.insert(fastest.lrs, lr) end
      end
    end
    print(string.format("  %10s  %-9s %12s %12s %16s", probe.fmt(lr), t and t.status or "missing",
      final and dl.util.fmt_metric(final) or "-", best and dl.util.fmt_metric(best) or "-",
      reach and tostring(reach) or "-"))
  end
  if not fastest then
    print(string.format("no learning rate reached training loss %g in %d steps: raise --steps (the playbook starts " ..
      "from any configuration that fits the training set in N steps) or relax --target", target, steps))
  else
    local names = {}
    for i, lr in ipairs(fastest.lrs) do names[i] = probe.fmt(lr) end
    print(string.format("initial max_train_steps: %d (lr %s reached training loss %g first%s)", fastest.step,
      table.concat(names, " and "), target, #names == 1 and (", trial " .. fastest.t.id) or ", at the same log step"))
    local interior = false
    for _, lr in ipairs(fastest.lrs) do if lr ~= lrs[1] and lr ~= lrs[#lrs] then interior = true end end
    if interior then
      print(string.format("check: the fastest lr (%s) is inside the grid [%s, %s]", table.concat(names, " and "),
        probe.fmt(lrs[1]), probe.fmt(lrs[#lrs])))
    elseif fastest.lr == lrs[#lrs] then
      print(string.format("warning: the fastest lr %s is the largest of the grid: extend --lrs upwards before " ..
        "trusting this number", probe.fmt(fastest.lr)))
    elseif fastest.lr == lrs[1] then
      print(string.format("warning: the fastest lr %s is the smallest of the grid: extend --lrs downwards before " ..
        "trusting this number", probe.fmt(fastest.lr)))
    else
      print(string.format("check: the fastest lr (%s) is inside the grid [%s, %s]", probe.fmt(fastest.lr), probe.fmt(lrs[1]),
        probe.fmt(lrs[#lrs])))
    end
  end
  print("report: " .. dl.report(sdir))
  dl.diagnose(sdir)
end)
