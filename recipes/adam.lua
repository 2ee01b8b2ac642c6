-- recipes/adam.lua -- an Adam study whose tuned hyperparameters follow the playbook's
-- trial-budget rule (FAQ, "how should Adam's hyperparameters be tuned?"):
--   fewer than 10 trials:  lr
--   10 to 25:              lr, beta1
--   26 to 50:              lr, beta1, eps
--   more than 50:          lr, beta1, eps, beta2
-- tuned jointly, in one search space (tuning_playbook#71: changing beta1 means
-- re-tuning lr). The ranges are engine choices after the AlgoPerf NAdamW space: lr
-- log-uniform [1e-4, 1e-2]; 1 - beta1 log-uniform [4e-3, 0.1]; eps log-uniform [1e-10,
-- 1e-5]; 1 - beta2 log-uniform [1e-4, 0.1]; the others fixed at 0.9, 0.999, 1e-8.
--   nuisance: the tier's hyperparameters (quasi-random); fixed: everything else
--   (--set k=v); metric: valid/accuracy of the best checkpoint
-- The experiment's optimizer is replaced by dl.optim.Adam (the playbook's epsilon-hat
-- form) with these hyperparameters, through a generated variant experiment file.
--
--   dlua recipes/adam.lua [EXPERIMENT] [--trials 8] [--steps N] [--name adam] [--out runs]
--        [--parallel P] [--set k=v] [--seed N] [--threads N] [--quiet]
local dl = require "dlua"
local probe = require "dlua.study.probe"
local S = dl.search

local USAGE = [[
usage: dlua adam [EXPERIMENT] [flags]
  --trials N        the trial budget; it decides what is tuned (8: lr only)
  --steps N         steps of every trial (the experiment's)
  --name NAME       study name (adam-N); --out DIR runs root (runs)
  --parallel P      trials at a time (cores); --threads N per trial; --set k=v any other hyperparameter
  --seed N          the trials' seed
  --quiet           no progress lines]]

--- The tier of the playbook's rule for n trials: the names tuned.
local function tier(n)
  if n < 10 then return {"lr"} end
  if n <= 25 then return {"lr", "one_minus_beta1"} end
  if n <= 50 then return {"lr", "one_minus_beta1", "eps"} end
  return {"lr", "one_minus_beta1", "eps", "one_minus_beta2"}
end

local RANGES = {lr = S.log_uniform(1e-4, 1e-2), one_minus_beta1 = S.log_uniform(4e-3, 0.1),
                eps = S.log_uniform(1e-10, 1e-5), one_minus_beta2 = S.log_uniform(1e-4, 0.1)}

probe.main(function()
  local args = {}
  for i = 1, #arg do args[i] = arg[i] end
  local o, exp, path = probe.recipe_args(args, {"--trials", "--name", "--parallel"},
    {command = "dlua adam", uses = {"--steps", "--out", "--quiet"}})
  if o.help then print(USAGE); return end
  local n = probe.number("trials", o.extra.trials, 8, {int = 1})
  local names = tier(n)
  local name = o.extra.name or ("adam-" .. n)
  local root = o.out or "runs"
  local sdir = root .. "/" .. name
  local steps = o.steps or exp.hparams.steps or 1000
  local variant = probe.write_variant(sdir .. "/experiment.lua", path, {tag = "adam", optimizer = "adam",
    hparams = {one_minus_beta1 = 0.1, one_minus_beta2 = 0.001, eps = 1e-8}, eval_sets = {"valid"},
    eval_every = math.max(1, steps // 6)})
  local space = {}
  for _, k in ipairs(names) do
    if o.set[k] ~= nil then error(string.format("--set %s: %s is tuned at %d trials", k, k, n), 0) end
    space[k] = RANGES[k]
  end
  print(string.format("%d trials: tuning %s%s (the playbook's Adam rule: <10 lr; 10-25 + beta1; 26-50 + eps; " ..
    "more + beta2)", n, table.concat(names, ", "), #names > 1 and " jointly, in one search space" or ""))
  local st = dl.study{name = name, goal = string.format("Adam with %s tuned%s in %d trials", table.concat(names, ", "),
      #names > 1 and " jointly" or "", n),
    experiment = variant, nuisance = space, fixed = o.set, trials = n, algorithm = "quasirandom", seed = 0,
    steps = o.steps, objective = {metric = "valid/accuracy", mode = "max"},
    parallel = probe.number("parallel", o.extra.parallel, nil, {int = 1})}
  local res = st:run{out = root, quiet = o.quiet, threads = o.threads}
  print(require("dlua.study").format_results(res))
  if res.best then
    local hp = res.best.hp
    local parts = {}
    for _, k in ipairs(names) do parts[#parts + 1] = string.format("%s %s", k, probe.fmt(hp[k])) end
    if hp.one_minus_beta1 then parts[#parts + 1] = string.format("(beta1 %s)", probe.fmt(1 - hp.one_minus_beta1)) end
    if hp.one_minus_beta2 and names[4] then parts[#parts + 1] = string.format("(beta2 %s)", probe.fmt(1 - hp.one_minus_beta2)) end
    print("best Adam hyperparameters: " .. table.concat(parts, ", "))
  end
  print("report: " .. dl.report(sdir))
  dl.diagnose(sdir)
end)
