--- dlua.study.spec: dl.study{...}, the study as a description. The spec is
-- checked against the experiment it names (hyperparameter names, their types
-- against the experiment's defaults, the roles, the budget, the objective's form;
-- whether the experiment reports the objective is dlua.study.dryrun's check), each
-- mistake an error at the study file's line (dlua.study.site), and the study
-- becomes plain data (study.json) and back. The methods that plan
-- trials come from dlua.study.plan; the ones that run a study (run, main, help)
-- are added by dlua.study, which sits above the modules they use.
local util = require "dlua.util"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local experiment = require "dlua.train.experiment"
local search = require "dlua.search"
local spaces = require "dlua.search.space"
local algorithms = require "dlua.search.algorithms"
local common = require "dlua.study.common"
local plan = require "dlua.study.plan"
local site = require "dlua.study.site"
local warm = require "dlua.study.warm"
local prune = require "dlua.study.prune"
local objectives = require "dlua.study.objectives"
local ehvi = require "dlua.search.ehvi"

local M = {}

local sorted_keys, copy, fmtv, safe, scalar = util.sorted_keys, util.copy, common.format_value, common.safe,
  common.scalar

local Study = {}
Study.__index = Study
M.Study = Study

Study.plan, Study.trial_hparams, Study.trial_args, Study.command = plan.plan, plan.trial_hparams, plan.trial_args,
  plan.command

-- the spec's keys (util.check_options); objective may also be a metric name alone, or a
-- list of objectives (its spec is made per call: dlua.study.objectives.spec_of)
local SPEC = {algorithm = true, allow_step_search = "boolean", description = "string", enqueue = true, experiment = true,
              fixed = true, goal = "string", grid_points = true, init = true, jobs = true, name = true, nuisance = true,
              objective = objectives.ENTRY, parallel = true, pareto = ehvi.PARETO, prune = prune.SPEC, scientific = true,
              seed = true, seeds = true, steps = true, trials = true, warm_start = true}

-- the first key of t that spec (a SPEC table) does not know, as a site needle
local function unknown_key(t, spec)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    if spec[k] == nil then return {key = tostring(k)} end
    if type(spec[k]) == "table" and type(t[k]) == "table" then
      local inner = unknown_key(t[k], spec[k])
      if inner then return inner end
    end
  end
end

-- the checks of one dl.study call: cx.fail(needle, msg) raises msg at the study
-- file's line of needle; cx.exp is the experiment, cx.warn(msg) keeps a warning
local function check_type_against(cx, name, v, role)
  local def = cx.exp.hparams[name]
  if def == nil then return end                          -- seed and friends
  local td, tv = type(def), type(v)
  if td ~= tv then
    cx.fail({key = name}, string.format("dl.study: %s %s = %s is a %s, but the experiment's default (%s) is a %s",
      role, name, tostring(v), tv, tostring(def), td))
  end
  if math.type(def) == "integer" and math.type(v) ~= "integer" and not (v == math.floor(v)) then
    cx.fail({key = name}, string.format("dl.study: %s %s = %s is not an integer, but the experiment's default (%d) " ..
      "is one (use dl.search.int or integer values)", role, name, tostring(v), def))
  end
end

-- a hyperparameter name against the experiment's (seed is always one)
local function check_name(cx, name, role)
  local hp = cx.exp.hparams
  if hp[name] ~= nil or name == "seed" then return end
  local valid = sorted_keys(hp)
  local near = type(name) == "string" and util.nearest(name, valid)
  cx.fail({key = tostring(name)}, string.format("dl.study: %s hyperparameter '%s' is not a hyperparameter of %s " ..
    "(valid: %s)%s", role, tostring(name), cx.exp_path, table.concat(valid, ", "),
    near and ("; did you mean '" .. near .. "'?") or ""))
end

-- the experiment file: next to the study file when it is there, else as given (from the current directory)
local function load_experiment(cx, spec, script)
  local path = spec.experiment
  if type(path) == "table" and path.path then path = path.path end
  if type(path) ~= "string" then
    cx.fail({key = "experiment"}, "dl.study: experiment must be the path of an experiment file (a script " ..
      "returning dl.experiment{...})")
  end
  local dir = script and fs.dirname(script)
  if dir and dir ~= "." and path:sub(1, 1) ~= "/" and fs.exists(dir .. "/" .. path) then path = dir .. "/" .. path end
  local ok, exp = pcall(experiment.load, path)
  if not ok then cx.fail({key = "experiment"}, "dl.study: " .. tostring(exp)) end
  cx.exp, cx.exp_path = exp, path
  return path
end

local function scientific_values(cx, name, v)
  local vals = v
  if search.is_param(v) then
    if not v.values then
      cx.fail({key = name}, string.format("dl.study: scientific %s must list its values (a list, " ..
        "dl.search.discrete or dl.search.choice), got %s", name, v:describe()))
    end
    vals = v.values
  elseif scalar(v) then vals = {v} end
  if type(vals) ~= "table" or #vals == 0 then
    cx.fail({key = name}, string.format("dl.study: scientific %s must be a non-empty list of values", name))
  end
  local k = util.list_stray_key(vals)               -- {8, x = 9}: x would be no group at all
  if k ~= nil then
    cx.fail({key = name}, string.format("dl.study: scientific %s: the list of values has the key %s beside " ..
      "its entries 1..%d", name, type(k) == "string" and ("'" .. k .. "'") or tostring(k), #vals))
  end
  for _, x in ipairs(vals) do
    if not scalar(x) then
      cx.fail({key = name}, string.format("dl.study: scientific %s: values must be numbers, strings or booleans", name))
    end
    check_type_against(cx, name, x, "scientific")
  end
  local bad = spaces._values_problem(vals)           -- as dl.search.choice: each value one group
  if bad then cx.fail({key = name}, string.format("dl.study: scientific %s: %s", name, bad)) end
  return {table.unpack(vals)}
end

-- the roles: scientific values, fixed values, the nuisance space; returns sci, fixed, space, roles
local function check_roles(cx, spec)
  local sci, fixed, roles = {}, {}, {}
  for _, name in ipairs(sorted_keys(spec.scientific or {})) do
    check_name(cx, name, "scientific")
    sci[name] = scientific_values(cx, name, spec.scientific[name])
    roles[name] = "scientific"
  end
  for _, name in ipairs(sorted_keys(spec.fixed or {})) do
    local v = spec.fixed[name]
    check_name(cx, name, "fixed")
    if not scalar(v) then
      cx.fail({key = name}, string.format("dl.study: fixed %s must be a plain value (search spaces belong in " ..
        "nuisance)", name))
    end
    check_type_against(cx, name, v, "fixed")
    if roles[name] then cx.fail({key = name}, string.format("dl.study: %s is both %s and fixed", name, roles[name])) end
    fixed[name] = v
    roles[name] = "fixed"
  end
  local context = {}
  for k, v in pairs(sci) do context[k] = v end
  for k, v in pairs(fixed) do context[k] = v end
  local ok, space = pcall(search.space, spec.nuisance or {}, {context = context})
  if not ok then
    cx.fail({key = "nuisance"}, "dl.study: nuisance: " .. tostring(space):gsub("^dl%.search%.space: ", ""))
  end
  for _, name in ipairs(space.names) do
    check_name(cx, name, "nuisance")
    if roles[name] then cx.fail({key = name}, string.format("dl.study: %s is both %s and nuisance", name, roles[name])) end
    roles[name] = "nuisance"
  end
  for _, d in ipairs(space.dims) do
    local p = d.param
    if p.kind == "uniform" or p.kind == "log_uniform" then
      local def = cx.exp.hparams[d.name]
      if math.type(def) == "integer" then
        cx.fail({key = d.name}, string.format("dl.study: nuisance %s samples real numbers, but the experiment's " ..
          "default (%d) is an integer (use dl.search.int)", d.name, def))
      end
      if def ~= nil and type(def) ~= "number" then
        cx.fail({key = d.name}, string.format("dl.study: nuisance %s samples numbers, but the experiment's default " ..
          "is a %s", d.name, type(def)))
      end
    elseif p.kind == "int" then
      check_type_against(cx, d.name, p.lo, "nuisance")
    else
      for _, x in ipairs(p.values) do check_type_against(cx, d.name, x, "nuisance") end
    end
  end
  for _, f in ipairs(space.fixed) do check_type_against(cx, f.name, f.value, "nuisance") end
  return sci, fixed, space, roles
end

-- a manual study's list of trials -> the list of their hyperparameters
local function manual_trials(cx, spec, roles)
  local out = {}
  for i, t in ipairs(spec.trials) do
    if type(t) ~= "table" then
      cx.fail({key = "trials"}, string.format("dl.study: trial %d must be a table of hyperparameters", i))
    end
    local hp = {}
    for _, k in ipairs(sorted_keys(t)) do
      local v = t[k]
      check_name(cx, k, "trial " .. i)
      if roles[k] == "scientific" or roles[k] == "fixed" then
        cx.fail({key = k}, string.format("dl.study: trial %d sets %s, which is %s", i, k, roles[k]))
      end
      if not scalar(v) then cx.fail({key = k}, string.format("dl.study: trial %d: %s must be a plain value", i, k)) end
      check_type_against(cx, k, v, "trial " .. i)
      hp[k] = v
    end
    out[i] = hp
  end
  return out
end

-- the options of some algorithms only: option -> does algorithm row use it?
local ALGORITHM_OPTIONS = {
  init = function(row) return row.adaptive end,
  grid_points = function(row) return row.options ~= nil and row.options.grid_points ~= nil end,
}

-- refuses an option the chosen algorithm (alg: a name, "manual" for a list of trials) does not use
local function check_algorithm_options(cx, spec, alg)
  local row = algorithms.ALGORITHMS[alg]
  for _, k in ipairs(sorted_keys(ALGORITHM_OPTIONS)) do
    if spec[k] ~= nil and not (row and ALGORITHM_OPTIONS[k](row)) then
      local users = {}
      for _, name in ipairs(algorithms.algorithm_names()) do
        if ALGORITHM_OPTIONS[k](algorithms.ALGORITHMS[name]) then users[#users + 1] = name end
      end
      cx.fail({key = k}, string.format("dl.study: option '%s' applies to algorithm %s, not to %s%s: leave it out",
        k, table.concat(users, " and "), alg == "manual" and "a manual study" or ("'" .. alg .. "'"),
        spec.algorithm == nil and alg ~= "manual" and " (the default algorithm)" or ""))
    end
  end
end

-- algorithm and trial budget: sets self.algorithm, self.trials, self.manual, self.grid_points
local function check_budget(cx, self, spec, roles)
  local space = self.space
  local manual = type(spec.trials) == "table"
  local alg = spec.algorithm or (manual and "manual" or "quasirandom")
  if manual then
    if spec.algorithm and spec.algorithm ~= "manual" then
      cx.fail({key = "algorithm"}, "dl.study: a list of trials is a manual study; algorithm must be \"manual\" or " ..
        "left out")
    end
    if #space.dims > 0 then
      cx.fail({key = "nuisance"}, "dl.study: a manual study (a list of trials) takes no nuisance search space")
    end
    self.manual = manual_trials(cx, spec, roles)
    self.trials = #spec.trials
  else
    local row = algorithms.ALGORITHMS[alg]
    if not row then
      local names = algorithms.algorithm_names()
      local near = type(alg) == "string" and util.nearest(alg, names)
      names[#names + 1] = "manual"
      table.sort(names)
      cx.fail({key = "algorithm"}, string.format("dl.study: unknown algorithm '%s' (valid: %s)%s", tostring(alg),
        table.concat(names, ", "), near and ("; did you mean '" .. near .. "'?") or ""))
    end
    if space.conditional and not row.conditional then
      cx.fail({key = "algorithm"}, string.format("dl.study: algorithm '%s' does not serve conditional spaces (the " ..
        "nuisance space has conditional parameters)", alg))
    end
    for _, w in ipairs(row.warnings and row.warnings(space) or {}) do cx.warn(w) end
    if spec.grid_points ~= nil then
      local why, g = util.integer_problem(spec.grid_points, 1)
      if why then cx.fail({key = "grid_points"}, "dl.study: grid_points " .. why) end
      self.grid_points = g
    end
    local n = spec.trials
    local queued = spec.enqueue and #spec.enqueue or 0
    if row.finite then
      local g = row.count(space, {grid_points = self.grid_points}) + queued
      if n and n > g then cx.warn(string.format("%s has %d points; %d trials requested, running %d", alg, g, n, g)) end
      n = math.min(n or g, g)
    end
    if math.type(n) ~= "integer" or n < 1 then
      cx.fail({key = "trials"}, "dl.study: trials must be a positive integer (trials per scientific value) or a " ..
        "list of trials, got " .. tostring(spec.trials))
    end
    if queued > n then
      cx.fail({key = "enqueue"}, string.format("dl.study: enqueue lists %d trials, more than trials = %d (the " ..
        "enqueued trials count in the budget of each scientific value)", queued, n))
    end
    self.trials = n
  end
  self.algorithm = alg
  check_algorithm_options(cx, spec, alg)
end

-- enqueue, warm_start, prune: sets self.enqueue, self.warm_start, self.prune
local function check_warm(cx, self, spec, where)
  if spec.enqueue ~= nil then
    if self.manual then cx.fail({key = "enqueue"}, "dl.study: a manual study (a list of trials) takes no enqueue") end
    self.enqueue = warm.check_enqueue(self.space, spec.enqueue, function(msg) cx.fail({key = "enqueue"}, msg) end)
  end
  if spec.warm_start ~= nil then
    local path = spec.warm_start
    if type(path) ~= "string" then
      cx.fail({key = "warm_start"}, "dl.study: warm_start must be the directory of an earlier study (a string)")
    end
    local dir = where.script and fs.dirname(where.script)
    if dir and dir ~= "." and path:sub(1, 1) ~= "/" and fs.exists(dir .. "/" .. path .. "/study.json") then
      path = dir .. "/" .. path
    end
    if not fs.exists(path .. "/study.json") then
      cx.fail({key = "warm_start"}, "dl.study: warm_start: " .. path .. " holds no study.json (the directory of " ..
        "an earlier study, e.g. runs/earlier-study)")
    end
    local row = algorithms.ALGORITHMS[self.algorithm]
    if not (row and row.adaptive) then
      cx.warn("warm_start feeds an earlier study's trials to an adaptive algorithm's model (bayes); algorithm " ..
        self.algorithm .. " does not use them")
    end
    self.warm_start = common.abspath(path)
    if self.init == nil then self.init = 0 end      -- the earlier trials replace the quasirandom start
  end
  if spec.prune ~= nil then
    if #self.objectives > 1 then
      local names = {}
      for i, o in ipairs(self.objectives) do names[i] = o.metric end
      cx.fail({key = "prune"}, string.format("dl.study: prune stops a trial by one objective, and this study has %d " ..
        "(%s): a trial behind on one may be on the Pareto front; leave prune out", #names, table.concat(names, ", ")))
    end
    self.prune = prune.check(spec.prune, self, function(msg) cx.fail({key = "prune"}, msg) end, cx.warn)
  end
end

-- parallel, steps, seed, seeds, init, grid_points
local function check_settings(cx, self, spec, roles)
  self.seed = spec.seed or 0
  if math.type(self.seed) ~= "integer" then
    cx.fail({key = "seed"}, "dl.study: seed must be an integer, got " .. tostring(spec.seed))
  end
  if spec.init ~= nil and (math.type(spec.init) ~= "integer" or spec.init < 0) then
    cx.fail({key = "init"}, "dl.study: init must be an integer >= 0 (the adaptive algorithm's initial points), got " ..
      tostring(spec.init))
  end
  self.init = spec.init
  -- trials at a time: default one per core (each trial then gets cores / jobs threads); an
  -- algorithm that suggests one point at a time (its row's batches = false) runs one trial at a time
  local row = algorithms.ALGORITHMS[self.algorithm]
  local single = row and row.adaptive and not row.batches
  if spec.parallel ~= nil and spec.jobs ~= nil and spec.parallel ~= spec.jobs then
    cx.fail({key = "jobs"}, string.format("dl.study: parallel = %s and jobs = %s: jobs is another name of " ..
      "parallel (trials at a time); give one", tostring(spec.parallel), tostring(spec.jobs)))
  end
  local par = spec.parallel or spec.jobs or (single and 1) or util.cores()
  if math.type(par) ~= "integer" or par < 1 then
    cx.fail({key = spec.jobs and "jobs" or "parallel"}, "dl.study: " .. (spec.parallel == nil and spec.jobs and
      "jobs" or "parallel") .. " must be a positive integer, got " .. tostring(par))
  end
  if single and par > 1 then
    cx.fail({key = spec.jobs and "jobs" or "parallel"}, string.format("dl.study: algorithm '%s' suggests one point " ..
      "at a time (no batches): parallel must be 1, got %d", self.algorithm, par))
  end
  self.parallel = par
  if spec.steps ~= nil and (math.type(spec.steps) ~= "integer" or spec.steps < 1) then
    cx.fail({key = "steps"}, "dl.study: steps must be a positive integer (the step budget of every trial)")
  end
  if spec.steps and roles.steps then
    cx.fail({key = "steps"}, "dl.study: steps is given both as the study's step budget and as a " .. roles.steps ..
      " hyperparameter")
  end
  self.steps = spec.steps
  self.seeds = spec.seeds or 0
  if math.type(self.seeds) ~= "integer" or self.seeds < 0 then
    cx.fail({key = "seeds"}, "dl.study: seeds must be an integer >= 0")
  end
end

-- the scientific groups: cartesian product of the value lists (names sorted)
local function expand_groups(sci)
  local names = sorted_keys(sci)
  local groups = {{values = {}}}
  for _, name in ipairs(names) do
    local nxt = {}
    for _, g in ipairs(groups) do
      for _, v in ipairs(sci[name]) do
        local vals = copy(g.values)
        vals[name] = v
        nxt[#nxt + 1] = {values = vals}
      end
    end
    groups = nxt
  end
  local seen = {}
  for i, g in ipairs(groups) do
    local parts, label = {}, {}
    for _, name in ipairs(names) do
      parts[#parts + 1] = safe(name) .. "-" .. safe(fmtv(g.values[name]))
      label[#label + 1] = name .. "=" .. fmtv(g.values[name])
    end
    local tag = #parts > 0 and table.concat(parts, "_") or "trial"
    if seen[tag] then tag = tag .. "-g" .. i end
    seen[tag] = true
    g.tag, g.label, g.index = tag, #label > 0 and table.concat(label, " ") or "(all)", i
  end
  return groups, names
end

--- dl.study{...} --> a study (run by `dlua STUDYFILE` or study:run()); see dlua.study.
-- A mistake is an error naming the study file and the line of the offending key
-- (or of the call): "study.lua:12: dl.study: nuisance hyperparameter 'lrr' is not a
-- hyperparameter of exp.lua (valid: ...); did you mean 'lr'?". An experiment path
-- is taken relative to the study file when the file is there, else as given.
function M.study(spec)
  local where = site.of_caller(1)
  local self = setmetatable({_dlua_kind = "study", script = where.script, warnings = {}, _site = where}, Study)
  local cx = {warn = function(msg) self.warnings[#self.warnings + 1] = msg end}
  function cx.fail(needle, msg)
    local loc = site.locate(where, needle)
    error(loc and (loc .. ": " .. msg) or msg, 0)
  end
  if type(spec) ~= "table" then cx.fail(nil, "dl.study: expected a table, got " .. type(spec)) end
  local keys = {}
  for k, v in pairs(SPEC) do keys[k] = v end
  keys.objective = objectives.spec_of(spec.objective)
  local bad = util.option_problem("dl.study", spec, keys)
  if bad then cx.fail(unknown_key(spec, keys), bad) end
  if type(spec.name) ~= "string" or not spec.name:match("^[%w_%.%-]+$") then
    cx.fail({key = "name"}, "dl.study: name must be a non-empty string of letters, digits, '_', '-' and '.', got " ..
      tostring(spec.name))
  end
  self.name, self.goal, self.description = spec.name, spec.goal, spec.description

  -- the experiment (loaded to check names and types; its build is not called here)
  local exp_path = load_experiment(cx, spec, where.script)
  self.experiment, self.experiment_abs = exp_path, common.abspath(exp_path)
  local sci, fixed, space, roles = check_roles(cx, spec)
  self.space, self.sci, self.fixed = space, sci, fixed
  self.groups, self.sci_names = expand_groups(sci)

  -- the step budget is never searched; the batch size is not tuned by validation metric
  local sampled_steps = roles.steps == "scientific" or roles.steps == "nuisance"
  if sampled_steps and not spec.allow_step_search then
    cx.fail({key = "steps"}, "dl.study: steps is searched (" .. roles.steps .. "); the playbook picks one step " ..
      "budget for all trials (section 3): put it in fixed, or set allow_step_search = true")
  end
  self.allow_step_search = spec.allow_step_search or false
  if roles.batch_size == "nuisance" then
    cx.warn("batch_size is a nuisance hyperparameter, tuned by the validation metric; the playbook chooses the " ..
      "batch size for training speed (FAQ: why not tune the batch size for validation performance): make it " ..
      "scientific (re-tuning the rest for each value) or fixed")
  end
  if not spec.goal and not spec.description then
    cx.warn("study " .. spec.name .. " has no goal: the playbook gives every round one narrow goal (section 2.3)")
  end
  check_budget(cx, self, spec, roles)
  self.objectives = objectives.check(spec.objective, function(msg) cx.fail({key = "objective"}, msg) end)
  self.objective = self.objectives[1]
  local row = algorithms.ALGORITHMS[self.algorithm]
  if row and #self.objectives > 1 and not row.objectives then
    cx.fail({key = "algorithm"}, string.format("dl.study: algorithm '%s' serves one objective, and this study has %d",
      self.algorithm, #self.objectives))
  end
  local bad = ehvi._pareto_problem(spec.pareto, #self.objectives)
  if bad then cx.fail({key = "pareto"}, "dl.study: " .. bad) end
  self.pareto = spec.pareto
  check_settings(cx, self, spec, roles)
  self.max_steps = self.steps or (math.type(fixed.steps) == "integer" and fixed.steps) or
    (math.type(cx.exp.hparams.steps) == "integer" and cx.exp.hparams.steps) or nil
  check_warm(cx, self, spec, where)
  return self
end

--- where(study [, needle]) -> "file:line" of the study's dl.study call (or of
-- needle in it: {key = name} or {value = string}), or nil when unknown.
function M.where(study, needle) return site.locate(study._site, needle) end

function M.is_study(x) return getmetatable(x) == Study end

--- study:record() -> the study as plain data (study.json); from_record rebuilds it.
function Study:record()
  local groups = {}
  for i, g in ipairs(self.groups) do groups[i] = {values = g.values, tag = g.tag, label = g.label} end
  return {
    version = 1, name = self.name, goal = self.goal, description = self.description, script = self.script,
    experiment = self.experiment, experiment_abs = self.experiment_abs, groups = groups,
    scientific_names = self.sci_names, scientific = self.sci, fixed = self.fixed,
    nuisance = self.space:to_table(), nuisance_description = self.space:describe(),
    manual = self.manual, trials = self.trials, algorithm = self.algorithm, seed = self.seed, init = self.init,
    grid_points = self.grid_points, objective = self.objective, steps = self.steps, seeds = self.seeds,
    allow_step_search = self.allow_step_search, enqueue = self.enqueue, warm_start = self.warm_start,
    prune = self.prune, max_steps = self.max_steps, pareto = self.pareto,
    objectives = #self.objectives > 1 and self.objectives or nil,     -- one objective: study.json as before
  }
end

--- fingerprint(rec) -> what may not change between runs into one directory (the
-- trial budget may), as 16 hex digits.
function M.fingerprint(rec)
  local t = copy(rec)
  t.trials, t.goal, t.description, t.script, t.experiment, t.nuisance_description, t.seeds = nil, nil, nil, nil,
    nil, nil, nil
  t.max_steps = nil                 -- derived (steps, fixed, the experiment): directories of earlier versions resume
  if type(t.prune) == "table" and t.prune.brackets then   -- hyperband's split: derived, and from trials too
    t.prune = copy(t.prune)
    t.prune.brackets = nil
  end
  return string.format("%016x", search.hash_string(json.encode(t)))
end

--- from_record(rec) -> the study a record describes (for agents and results).
function M.from_record(rec)
  local self = setmetatable({_dlua_kind = "study", warnings = {}}, Study)
  for _, k in ipairs({"name", "goal", "description", "script", "experiment", "experiment_abs", "fixed",
                      "manual", "trials", "algorithm", "seed", "init", "grid_points", "objective", "steps",
                      "seeds", "allow_step_search", "enqueue", "warm_start", "prune", "max_steps", "pareto"}) do
    self[k] = rec[k]
  end
  self.sci = rec.scientific or {}
  self.sci_names = rec.scientific_names or {}
  self.groups = {}
  for i, g in ipairs(rec.groups or {}) do
    self.groups[i] = {values = g.values or {}, tag = g.tag, label = g.label, index = i}
  end
  self.space = search.space_from_table(rec.nuisance or {})
  self.objectives = objectives.of_record(rec)
  self.parallel = 1
  self.fixed = self.fixed or {}
  return self
end

return M
