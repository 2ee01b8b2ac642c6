--- dlua.cli.study: `dlua study ...` (recipes/study.lua): a study from a study file or
-- from role flags on the command line, run (over MPI ranks when there are several, by
-- dlua.study.ranks), then reported and diagnosed: dlua.cli.run_study, as for `dlua STUDYFILE`.
--
--   --scientific name=v1,v2        compared; one group of trials per value (repeatable,
--                                  a name once)
--   --nuisance name=KIND:...       searched anew for every scientific value (repeatable;
--                                  KIND log, uniform, int, intlog, choice, discrete;
--                                  @parent=value makes it conditional: a name again only
--                                  with another parent value)
--   --fixed name=value             held constant (repeatable, a name once)
--   --objective METRIC[:max|min]   --name, --goal, --algorithm, --search-seed, --experiment
--
-- The flags are parsed by dlua.train.flags.parse_flags with the study's own (dlua.study.run),
-- so an unknown flag names the nearest of all of them; any flag but these three given
-- twice is an error naming both values. Values are typed like the
-- experiment's defaults (dlua.train.flags.typed).
local lfs = require "lfs"
local fs = require "dlua.util.fs"
local blame = require "dlua.util.blame"
local search = require "dlua.search"
local flags = require "dlua.train.flags"
local experiment = require "dlua.train.experiment"
local study = require "dlua.study"
local run = require "dlua.study.run"
local cli = require "dlua.cli"

local M = {}

-- A flag table is a declaration, one row a flag ({flag, metavar, help, int/many}) read by
-- train/flags.lua's one parser; the command-line tables look alike by design.
M.ROLE_FLAGS = {
  {"--experiment", "FILE", "the experiment (default: the first argument, else examples/fashion_mnist.lua)"},
  {"--name", "NAME", "the study's name (required with role flags)"},
  {"--goal", "TEXT", "the question the study answers"},
  {"--scientific", "K=V1,V2", "a scientific hyperparameter and its values", many = true},
  {"--nuisance", "K=SPEC", "a nuisance hyperparameter's range", many = true},
  {"--fixed", "K=V", "a fixed hyperparameter", many = true},
  {"--objective", "METRIC[:MODE]", "the metric (default valid/accuracy:max)"},
  {"--algorithm", "A", "quasirandom (default), random, grid or bayes"},
  {"--search-seed", "N", "the search's seed (default 0)", int = true},
  {"--no-report", nil, "no report and diagnosis after the study"},
}

M.USAGE = [==[
usage: dlua study STUDYFILE [study flags]
       dlua study [EXPERIMENT] --name NAME [--scientific k=v1,v2]... [--nuisance k=SPEC]...
            [--fixed k=v]... [--objective METRIC[:max|min]] [--goal TEXT] [--algorithm A] [--search-seed N]
            [--no-report] [study flags]
  SPEC: log:A:B (log-uniform), uniform:A:B, int:A:B, intlog:A:B, choice:v1,v2, discrete:v1,v2;
        append @parent=value for a parameter that exists only where parent has that value
  study flags: --out DIR --trials N --parallel P --steps N --threads N --count N --lease S --create --quiet
  the study ends with its report (DIR/NAME/report.html) and the diagnosis; --no-report skips them]==]

local function fail(msg) error(msg, 0) end

-- text typed like the experiment's default of name
local function typed(exp, name, text)
  if exp.hparams[name] == nil then
    local names = {}
    for k in pairs(exp.hparams) do names[#names + 1] = k end
    table.sort(names)
    fail(string.format("'%s' is not a hyperparameter of %s (valid: %s)", name, exp.path, table.concat(names, ", ")))
  end
  return flags.typed(name, text, exp.hparams[name])
end

local function list(exp, name, text)
  local out = {}
  for part in text:gmatch("[^,]+") do out[#out + 1] = typed(exp, name, part) end
  return out
end

-- one --nuisance name=SPEC[@parent=value] -> name, parameter, condition
local function nuisance_param(exp, arg)
  local name, spec = arg:match("^([%w_]+)=(.+)$")
  if not name then fail(string.format("--nuisance: expected name=SPEC, got '%s'", arg)) end
  local cond
  local body, parent, pval = spec:match("^(.-)@([%w_]+)=(.+)$")
  if body then spec, cond = body, {parent = parent, value = pval} end
  local kind, rest = spec:match("^(%a+):(.+)$")
  if not kind then fail(string.format("--nuisance %s: expected KIND:..., got '%s'", name, spec)) end
  local function two(int)
    local a, b = rest:match("^([^:]+):([^:]+)$")
    a, b = tonumber(a), tonumber(b)
    if int then a, b = a and math.tointeger(a), b and math.tointeger(b) end
    if not a or not b then
      fail(string.format("--nuisance %s: expected %s:A:B with %s A and B, got '%s'", name, kind,
        int and "integers" or "numbers", spec))
    end
    return a, b
  end
  -- a range dl.search refuses (A above B, ...): its message, led by the flag
  local function param(fn, ...)
    local ok, p = pcall(fn, ...)
    if not ok then fail(string.format("--nuisance %s=%s: %s", name, spec, (tostring(p):gsub("^[^:]*:%d+: ", "")))) end
    return p
  end
  local p
  if kind == "log" then p = param(search.log_uniform, two())
  elseif kind == "uniform" then p = param(search.uniform, two())
  elseif kind == "int" or kind == "intlog" then
    local a, b = two(true)
    p = param(search.int, a, b, {log = kind == "intlog"})
  elseif kind == "choice" then p = param(search.choice, list(exp, name, rest))
  elseif kind == "discrete" then p = param(search.discrete, list(exp, name, rest))
  else fail(string.format("--nuisance %s: unknown kind '%s' (valid: choice, discrete, int, intlog, log, uniform)", name, kind)) end
  if cond and exp.hparams[cond.parent] ~= nil then   -- (not `and typed(...) or`: a typed false would fall through)
    cond.value = typed(exp, cond.parent, cond.value)
  end
  return name, p, cond
end

-- the nuisance flags as a space: one range per name, or several with @parent=value
-- each (a switch: a range per parent value)
local function nuisance(exp, given)
  local by_name, order, nui = {}, {}, {}
  for _, s in ipairs(given) do
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
        if branches[e.cond.value] ~= nil then
          fail(string.format("--nuisance %s given twice for @%s=%s", k, parent, tostring(e.cond.value)))
        end
        branches[e.cond.value] = e.param
      end
      nui[k] = search.switch(parent, branches)
    end
  end
  return nui
end

--- study_from_flags(o) -> the dl.study the role flags of o (parse_flags' result) describe
function M.study_from_flags(o)
  local exp_path = o.experiment or o.positional[1] or "examples/fashion_mnist.lua"
  -- a path on the command line is from the current directory (dl.study would look next to the recipe first)
  if exp_path:sub(1, 1) ~= "/" and fs.exists(exp_path) then exp_path = lfs.currentdir() .. "/" .. exp_path end
  local exp = experiment.load(exp_path)
  if not o.name then fail("--name is required when the study is given on the command line (see --help)") end
  local sci, fixed, given = {}, {}, {scientific = {}, fixed = {}}
  -- a name once per role flag: never "the last one wins"
  local function once(flag, k, v)
    local prev = given[flag][k]
    if prev then fail(string.format("--%s %s given twice (%s and %s)", flag, k, prev, v)) end
    given[flag][k] = v
  end
  for _, s in ipairs(o.scientific or {}) do
    local k, v = s:match("^([%w_]+)=(.+)$")
    if not k then fail(string.format("--scientific: expected name=v1,v2, got '%s'", s)) end
    once("scientific", k, v)
    sci[k] = list(exp, k, v)
  end
  for _, s in ipairs(o.fixed or {}) do
    local k, v = s:match("^([%w_]+)=(.*)$")
    if not k then fail(string.format("--fixed: expected name=value, got '%s'", s)) end
    once("fixed", k, v)
    fixed[k] = typed(exp, k, v)
  end
  local objective = {metric = "valid/accuracy", mode = "max"}
  if o.objective then
    local m, mode = o.objective:match("^(.-):(%a+)$")
    objective = m and {metric = m, mode = mode} or {metric = o.objective}
  end
  return study.study{name = o.name, goal = o.goal, experiment = exp_path, scientific = sci,
    nuisance = nuisance(exp, o.nuisance or {}), fixed = fixed, trials = 8, algorithm = o.algorithm or "quasirandom",
    seed = o.search_seed or 0, objective = objective}
end

-- the study's own flags among what parse_flags read (role flags and --no-report taken
-- out), as arguments again, with the positional ones after the first
local function study_args(o, from)
  local roles, rest = {}, {}
  for _, f in ipairs(M.ROLE_FLAGS) do roles[f[1]] = true end
  for _, g in ipairs(o.given) do
    if not roles[g[1]] then table.move(g.args, 1, #g.args, #rest + 1, rest) end
  end
  for i = from, #o.positional do rest[#rest + 1] = o.positional[i] end
  return rest
end

local function main(args)
  if #args == 0 or args[1] == "--help" or args[1] == "-h" then
    print(M.USAGE)
    os.exit(#args == 0 and 1 or 0)
  end
  local all = {}
  for _, f in ipairs(M.ROLE_FLAGS) do all[#all + 1] = f end
  for _, f in ipairs(run.STUDY_FLAGS) do all[#all + 1] = f end
  local o = flags.parse_flags(args, all, nil, "dlua study")
  local by_flags = false                        -- a role flag: the study is on the command line
  for _, g in ipairs(o.given) do
    for _, f in ipairs(M.ROLE_FLAGS) do if f[1] == g[1] and f[1] ~= "--no-report" then by_flags = true end end
  end
  local obj, script, rest
  if not by_flags and args[1]:sub(1, 2) ~= "--" then
    obj = study.load_file(args[1])              -- its dl.study call then knows its file (relative paths, errors)
    if type(obj) == "table" and obj._dlua_kind == "experiment" then
      fail(args[1] .. " is an experiment: give the study's roles as flags (--name, --scientific, --nuisance, " ..
        "--fixed; see --help)")
    elseif not study.is_study(obj) then
      fail(args[1] .. " does not return a dl.study{...}")
    end
    script, rest = args[1], study_args(o, 2)
  else
    obj, script, rest = M.study_from_flags(o), "recipes/study.lua", study_args(o, o.experiment and 1 or 2)
  end
  if o.help then print(obj:help(script)); return end
  cli.run_study(obj, rest, script, not o.no_report)
end

--- main(args): `dlua study ARGS...`; errors are one line "dlua: message", exit status 1,
-- led by the user's file:line as for `dlua STUDYFILE` (dlua.util.blame: a library's
-- location is replaced by the user's, or dropped)
function M.main(args)
  local ok, err = xpcall(main, function(e) return blame.message(e, 2) end, args)
  if not ok then
    io.stderr:write("dlua: ", tostring(err), "\n")
    os.exit(1)
  end
end

return M
