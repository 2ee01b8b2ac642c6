-- recipes/study.lua -- a quasi-random study (playbook section 2: scientific, nuisance
-- and fixed hyperparameters), ending with the report and the diagnosis.
-- The roles come from a study file (returning dl.study{...}; the same as `dlua
-- STUDYFILE`, for study files kept as data) or from the command line:
--   scientific:  compared; one group of trials per value (--scientific name=v1,v2)
--   nuisance:    searched anew for every scientific value, the same quasi-random points
--                for each (--nuisance name=log:A:B | uniform:A:B | int:A:B | choice:v1,v2,
--                with @parent=value for a conditional one)
--   fixed:       held constant, the caveat on the conclusion (--fixed name=value)
--   budget:      --trials per scientific value, --steps per trial (one value for all)
--   metric:      --objective valid/accuracy[:max|:min] (the best eval, retrospectively)
--
--   dlua recipes/study.lua STUDYFILE [study flags]
--   dlua recipes/study.lua [EXPERIMENT] --name NAME --scientific optimizer=nesterov,adam \
--        --nuisance lr=log:1e-3:0.5 --nuisance momentum=uniform:0.8:0.99@optimizer=nesterov \
--        --fixed width=64 --trials 8 --steps 60 [--goal TEXT] [--objective M[:mode]]
--        [--algorithm A, a row of dl.search.algorithm_names()] [--search-seed N] [--no-report] [study flags]
-- Study flags: --out DIR --trials N --parallel P --steps N --threads N --count N --lease S
-- --create --resume --quiet (docs/api/study.md). Under mpirun the trials are spread
-- over the ranks; rank 0 writes the report.
local study = require "dlua.study"
local ranks = require "dlua.study.ranks"
local cli = require "dlua.cli"
local fs = require "dlua.util.fs"
local lfs = require "lfs"

local ROLE_FLAGS = {["--experiment"] = true, ["--name"] = true, ["--goal"] = true, ["--scientific"] = true,
                    ["--nuisance"] = true, ["--fixed"] = true, ["--objective"] = true, ["--algorithm"] = true,
                    ["--search-seed"] = true}

local USAGE = [==[
usage: dlua recipes/study.lua STUDYFILE [study flags]
       dlua recipes/study.lua [EXPERIMENT] --name NAME [--scientific k=v1,v2]... [--nuisance k=SPEC]...
            [--fixed k=v]... [--objective METRIC[:max|min]] [--goal TEXT] [--algorithm A] [--search-seed N]
            [--no-report] [study flags]
  SPEC: log:A:B (log-uniform), uniform:A:B, int:A:B, intlog:A:B, choice:v1,v2, discrete:v1,v2;
        append @parent=value for a parameter that exists only where parent has that value
  study flags: --out DIR --trials N --parallel P --steps N --threads N --count N --lease S --create --quiet
  the study ends with its report (DIR/NAME/report.html) and the diagnosis; --no-report skips them]==]

local function fail(msg) error(msg, 0) end

-- typed like the experiment's default of name
local function typed(exp, name, text)
  if exp.hparams[name] == nil then
    local names = {}
    for k in pairs(exp.hparams) do names[#names + 1] = k end
    table.sort(names)
    fail(string.format("'%s' is not a hyperparameter of %s (valid: %s)", name, exp.path, table.concat(names, ", ")))
  end
  return cli.typed(name, text, exp.hparams[name])
end

local function list(exp, name, text)
  local out = {}
  for part in text:gmatch("[^,]+") do out[#out + 1] = typed(exp, name, part) end
  return out
end

-- one --nuisance name=SPEC[@parent=value]
local function nuisance_param(exp, arg)
  local S = require("dlua").search
  local name, spec = arg:match("^([%w_]+)=(.+)$")
  if not name then fail(string.format("--nuisance: expected name=SPEC, got '%s'", arg)) end
  local cond
  local body, parent, pval = spec:match("^(.-)@([%w_]+)=(.+)$")
  if body then spec, cond = body, {parent = parent, value = pval} end
  local kind, rest = spec:match("^(%a+):(.+)$")
  if not kind then fail(string.format("--nuisance %s: expected KIND:..., got '%s'", name, spec)) end
  local p
  local function two()
    local a, b = rest:match("^([^:]+):([^:]+)$")
    a, b = tonumber(a), tonumber(b)
    if not a or not b then fail(string.format("--nuisance %s: expected %s:A:B, got '%s'", name, kind, spec)) end
    return a, b
  end
  if kind == "log" then p = S.log_uniform(two())
  elseif kind == "uniform" then p = S.uniform(two())
  elseif kind == "int" or kind == "intlog" then
    local a, b = two()
    p = S.int(math.tointeger(a), math.tointeger(b), {log = kind == "intlog"})
  elseif kind == "choice" then p = S.choice(list(exp, name, rest))
  elseif kind == "discrete" then p = S.discrete(list(exp, name, rest))
  else fail(string.format("--nuisance %s: unknown kind '%s' (valid: choice, discrete, int, intlog, log, uniform)", name, kind)) end
  if cond then
    cond.value = exp.hparams[cond.parent] ~= nil and typed(exp, cond.parent, cond.value) or cond.value
  end
  return name, p, cond
end

-- builds dl.study{...} from the role flags; returns the study and the remaining (study) flags
local function study_from_flags(args)
  local dl = require "dlua"
  local rest, roles, positional = {}, {scientific = {}, nuisance = {}, fixed = {}}, {}
  local i = 1
  while i <= #args do
    local a = args[i]
    local flag, inline = a:match("^(%-%-[%w%-]+)=(.*)$")
    flag = flag or a
    if ROLE_FLAGS[flag] then
      local v = inline
      if v == nil then i = i + 1; v = args[i] end
      if v == nil then fail(flag .. ": missing value") end
      local key = flag:sub(3)
      if key == "scientific" or key == "nuisance" or key == "fixed" then table.insert(roles[key], v)
      else roles[key] = v end
    elseif a == "--no-report" then roles.no_report = true
    elseif a:sub(1, 2) ~= "--" and #positional == 0 and not roles.experiment then positional[1] = a
    else
      rest[#rest + 1] = a
    end
    i = i + 1
  end
  local exp_path = roles.experiment or positional[1] or "examples/fashion_mnist.lua"
  -- a path on the command line is from the current directory (dl.study would look next to this recipe first)
  if exp_path:sub(1, 1) ~= "/" and fs.exists(exp_path) then exp_path = lfs.currentdir() .. "/" .. exp_path end
  local exp = require("dlua.train.experiment").load(exp_path)
  if not roles.name then fail("--name is required when the study is given on the command line (see --help)") end
  local sci, nui, fixed = {}, {}, {}
  for _, s in ipairs(roles.scientific) do
    local k, v = s:match("^([%w_]+)=(.+)$")
    if not k then fail(string.format("--scientific: expected name=v1,v2, got '%s'", s)) end
    sci[k] = list(exp, k, v)
  end
  -- one range per name, or several with @parent=value each: a switch (a range per parent value)
  local by_name, order = {}, {}
  for _, s in ipairs(roles.nuisance) do
    local k, p, cond = nuisance_param(exp, s)
    if not by_name[k] then by_name[k] = {}; order[#order + 1] = k end
    table.insert(by_name[k], {param = p, cond = cond})
  end
  for _, k in ipairs(order) do
    local l = by_name[k]
    if #l == 1 then
      nui[k] = l[1].cond and l[1].param:when{[l[1].cond.parent] = l[1].cond.value} or l[1].param
    else
      local parent = l[1].cond and l[1].cond.parent
      local branches = {}
      for _, e in ipairs(l) do
        if not e.cond or e.cond.parent ~= parent then
          fail(string.format("--nuisance %s is given %d times: each needs @%s=value", k, #l, parent or "parent"))
        end
        branches[e.cond.value] = e.param
      end
      nui[k] = dl.search.switch(parent, branches)
    end
  end
  for _, s in ipairs(roles.fixed) do
    local k, v = s:match("^([%w_]+)=(.*)$")
    if not k then fail(string.format("--fixed: expected name=value, got '%s'", s)) end
    fixed[k] = typed(exp, k, v)
  end
  local objective
  if roles.objective then
    local m, mode = roles.objective:match("^(.-):(%a+)$")
    objective = m and {metric = m, mode = mode} or {metric = roles.objective}
  else
    objective = {metric = "valid/accuracy", mode = "max"}
  end
  local seed = roles["search-seed"] and math.tointeger(tonumber(roles["search-seed"]))
  if roles["search-seed"] and not seed then fail("--search-seed: expected an integer") end
  local st = dl.study{name = roles.name, goal = roles.goal, experiment = exp_path, scientific = sci, nuisance = nui,
    fixed = fixed, trials = 8, algorithm = roles.algorithm or "quasirandom", seed = seed or 0, objective = objective}
  return st, rest, roles.no_report
end


local ok, err = pcall(function()
  local args = {}
  for i = 1, #(arg or {}) do args[i] = arg[i] end
  if #args == 0 or args[1] == "--help" or args[1] == "-h" then
    print(USAGE)
    os.exit(#args == 0 and 1 or 0)
  end
  local obj, rest, no_report, script
  local first = args[1]
  local by_flags = false
  for _, a in ipairs(args) do if ROLE_FLAGS[a:match("^(%-%-[%w%-]+)") or a] then by_flags = true end end
  if not by_flags and first:sub(1, 2) ~= "--" then
    obj = study.load_file(first)                  -- its dl.study call then knows its file (relative paths, errors)
    if study.is_study(obj) then
      rest, script = {}, first
      for i = 2, #args do
        if args[i] == "--no-report" then no_report = true else rest[#rest + 1] = args[i] end
      end
    elseif type(obj) == "table" and obj._dlua_kind == "experiment" then
      error(first .. " is an experiment: give the study's roles as flags (--name, --scientific, --nuisance, --fixed; see --help)", 0)
    else
      error(first .. " does not return a dl.study{...}", 0)
    end
  else
    obj, rest, no_report = study_from_flags(args)
    script = "recipes/study.lua"
  end
  for _, a in ipairs(rest) do if a == "--help" then print(obj:help(script)); return end end
  -- under mpirun the ranks share the trials (rank 0 plans and records them); alone, as obj:main
  local res = ranks.run_study(obj, rest, script)
  local created = false
  for _, a in ipairs(rest) do if a == "--create" then created = true end end
  if not no_report and not created then cli.report_study(res) end
end)
if not ok then
  io.stderr:write("dlua: ", (tostring(err):gsub("^[^:]*:%d+: ", "")), "\n")
  os.exit(1)
end
