--- dlua.study.spec: dl.study{...}, the study as a description. The spec is
-- checked against the experiment it names (hyperparameter names, their types
-- against the experiment's defaults, the roles, the budget, the objective), and
-- the study becomes plain data (study.json) and back. The methods that plan
-- trials come from dlua.study.plan; the ones that run a study (run, main, help)
-- are added by dlua.study, which sits above the modules they use.
local util = require "dlua.util"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local experiment = require "dlua.train.experiment"
local search = require "dlua.search"
local common = require "dlua.study.common"
local plan = require "dlua.study.plan"

local M = {}

local sorted_keys, copy, fmtv, safe, scalar = util.sorted_keys, util.copy, common.format_value, common.safe,
  common.scalar

local Study = {}
Study.__index = Study
M.Study = Study

Study.plan, Study.trial_hparams, Study.trial_args, Study.command = plan.plan, plan.trial_hparams, plan.trial_args,
  plan.command

-- the spec's keys (util.check_options); objective may also be a metric name alone
local SPEC = {algorithm = true, allow_step_search = true, description = true, experiment = true, fixed = true,
              goal = true, grid_points = true, init = true, jobs = true, name = true, nuisance = true,
              objective = {metric = true, mode = true}, parallel = true, scientific = true, seed = true,
              seeds = true, steps = true, trials = true}

local function check_type_against(exp, name, v, role)
  local def = exp.hparams[name]
  if def == nil then return end                          -- seed and friends
  local td, tv = type(def), type(v)
  if td ~= tv then
    error(string.format("dl.study: %s %s = %s is a %s, but the experiment's default (%s) is a %s", role, name,
      tostring(v), tv, tostring(def), td), 4)
  end
  if math.type(def) == "integer" and math.type(v) ~= "integer" and not (v == math.floor(v)) then
    error(string.format("dl.study: %s %s = %s is not an integer, but the experiment's default (%d) is one " ..
      "(use dl.search.int or integer values)", role, name, tostring(v), def), 4)
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

--- dl.study{...} --> a study (run by `dlua STUDYFILE` or study:run()); see the header.
function M.study(spec)
  if type(spec) ~= "table" then error("dl.study: expected a table, got " .. type(spec), 2) end
  util.check_options("dl.study", spec, SPEC, 2)
  if type(spec.name) ~= "string" or not spec.name:match("^[%w_%.%-]+$") then
    error("dl.study: name must be a non-empty string of letters, digits, '_', '-' and '.', got " ..
      tostring(spec.name), 2)
  end
  local info = debug.getinfo(2, "S")
  local script = info and info.source and info.source:match("^@(.*)$")
  local self = setmetatable({_dlua_kind = "study", name = spec.name, goal = spec.goal,
                             description = spec.description, script = script, warnings = {}}, Study)
  local function warn(msg) self.warnings[#self.warnings + 1] = msg end

  -- the experiment (loaded to check names and types; its build is not called)
  local exp_path = spec.experiment
  if type(exp_path) == "table" and exp_path.path then exp_path = exp_path.path end
  if type(exp_path) ~= "string" then
    error("dl.study: experiment must be the path of an experiment file (a script returning dl.experiment{...})", 2)
  end
  if not fs.exists(exp_path) and script and fs.exists(fs.dirname(script) .. "/" .. exp_path) then
    exp_path = fs.dirname(script) .. "/" .. exp_path
  end
  local exp = experiment.load(exp_path)
  self.experiment, self.experiment_abs = exp_path, common.abspath(exp_path)
  local valid = sorted_keys(exp.hparams)
  local function check_name(name, role)
    if exp.hparams[name] == nil and name ~= "seed" then
      error(string.format("dl.study: %s hyperparameter '%s' is not a hyperparameter of %s (valid: %s)", role,
        tostring(name), exp_path, table.concat(valid, ", ")), 3)
    end
  end

  -- roles
  local sci, fixed, roles = {}, {}, {}
  for name, v in pairs(spec.scientific or {}) do
    check_name(name, "scientific")
    local vals = v
    if search.is_param(v) then
      if not v.values then
        error(string.format("dl.study: scientific %s must list its values (a list, dl.search.discrete or " ..
          "dl.search.choice), got %s", name, v:describe()), 2)
      end
      vals = v.values
    elseif scalar(v) then vals = {v} end
    if type(vals) ~= "table" or #vals == 0 then
      error(string.format("dl.study: scientific %s must be a non-empty list of values", name), 2)
    end
    for _, x in ipairs(vals) do
      if not scalar(x) then error(string.format("dl.study: scientific %s: values must be numbers, strings or booleans", name), 2) end
      check_type_against(exp, name, x, "scientific")
    end
    sci[name] = {table.unpack(vals)}
    roles[name] = "scientific"
  end
  for name, v in pairs(spec.fixed or {}) do
    check_name(name, "fixed")
    if not scalar(v) then
      error(string.format("dl.study: fixed %s must be a plain value (search spaces belong in nuisance)", name), 2)
    end
    check_type_against(exp, name, v, "fixed")
    if roles[name] then error(string.format("dl.study: %s is both %s and fixed", name, roles[name]), 2) end
    fixed[name] = v
    roles[name] = "fixed"
  end
  local context = {}
  for k, v in pairs(sci) do context[k] = v end
  for k, v in pairs(fixed) do context[k] = v end
  local manual = type(spec.trials) == "table"
  local ok, space = pcall(search.space, spec.nuisance or {}, {context = context})
  if not ok then error("dl.study: nuisance: " .. tostring(space):gsub("^dl%.search%.space: ", ""), 2) end
  for _, name in ipairs(space.names) do
    check_name(name, "nuisance")
    if roles[name] then error(string.format("dl.study: %s is both %s and nuisance", name, roles[name]), 2) end
    roles[name] = "nuisance"
  end
  for _, d in ipairs(space.dims) do
    local p = d.param
    if p.kind == "uniform" or p.kind == "log_uniform" then
      local def = exp.hparams[d.name]
      if math.type(def) == "integer" then
        error(string.format("dl.study: nuisance %s samples real numbers, but the experiment's default (%d) is an " ..
          "integer (use dl.search.int)", d.name, def), 2)
      end
      if def ~= nil and type(def) ~= "number" then
        error(string.format("dl.study: nuisance %s samples numbers, but the experiment's default is a %s",
          d.name, type(def)), 2)
      end
    elseif p.kind == "int" then
      check_type_against(exp, d.name, p.lo, "nuisance")
    else
      for _, x in ipairs(p.values) do check_type_against(exp, d.name, x, "nuisance") end
    end
  end
  for _, f in ipairs(space.fixed) do check_type_against(exp, f.name, f.value, "nuisance") end
  self.space, self.sci, self.fixed = space, sci, fixed
  self.groups, self.sci_names = expand_groups(sci)

  -- the step budget is never searched; the batch size is not tuned by validation metric
  local sampled_steps = roles.steps == "scientific" or roles.steps == "nuisance"
  if sampled_steps and not spec.allow_step_search then
    error("dl.study: steps is searched (" .. roles.steps .. "); the playbook picks one step budget for all " ..
      "trials (section 3): put it in fixed, or set allow_step_search = true", 2)
  end
  self.allow_step_search = spec.allow_step_search or false
  if roles.batch_size == "nuisance" then
    warn("batch_size is a nuisance hyperparameter, tuned by the validation metric; the playbook chooses the " ..
      "batch size for training speed (FAQ: why not tune the batch size for validation performance): make it " ..
      "scientific (re-tuning the rest for each value) or fixed")
  end
  if not spec.goal and not spec.description then
    warn("study " .. spec.name .. " has no goal: the playbook gives every round one narrow goal (section 2.3)")
  end

  -- algorithm, budget, objective
  local alg = spec.algorithm or (manual and "manual" or "quasirandom")
  if manual then
    if spec.algorithm and spec.algorithm ~= "manual" then
      error("dl.study: a list of trials is a manual study; algorithm must be \"manual\" or left out", 2)
    end
    if #space.dims > 0 then error("dl.study: a manual study (a list of trials) takes no nuisance search space", 2) end
    self.manual = {}
    for i, t in ipairs(spec.trials) do
      if type(t) ~= "table" then error(string.format("dl.study: trial %d must be a table of hyperparameters", i), 2) end
      local hp = {}
      for k, v in pairs(t) do
        check_name(k, "trial " .. i)
        if roles[k] == "scientific" or roles[k] == "fixed" then
          error(string.format("dl.study: trial %d sets %s, which is %s", i, k, roles[k]), 2)
        end
        if not scalar(v) then error(string.format("dl.study: trial %d: %s must be a plain value", i, k), 2) end
        check_type_against(exp, k, v, "trial " .. i)
        hp[k] = v
      end
      self.manual[i] = hp
    end
    self.trials = #spec.trials
  else
    if not search.ALGORITHMS[alg] then
      error(string.format("dl.study: unknown algorithm '%s' (valid: bayes, grid, manual, quasirandom, random)",
        tostring(alg)), 2)
    end
    for _, w in ipairs(search.warnings(space, alg)) do warn(w) end
    local n = spec.trials
    if alg == "grid" then
      local g = #search.grid_points(space, spec.grid_points)
      if n and n > g then warn(string.format("grid has %d points; %d trials requested, running %d", g, n, g)) end
      n = math.min(n or g, g)
    end
    if math.type(n) ~= "integer" or n < 1 then
      error("dl.study: trials must be a positive integer (trials per scientific value) or a list of trials, got " ..
        tostring(spec.trials), 2)
    end
    self.trials = n
  end
  self.algorithm = alg
  self.grid_points = spec.grid_points
  self.seed = spec.seed or 0
  if math.type(self.seed) ~= "integer" then error("dl.study: seed must be an integer, got " .. tostring(spec.seed), 2) end
  self.init = spec.init
  local obj = spec.objective
  if type(obj) == "string" then obj = {metric = obj} end
  if type(obj) ~= "table" or type(obj.metric) ~= "string" then
    error("dl.study: objective = {metric = \"valid/accuracy\", mode = \"max\"} is required", 2)
  end
  local mode = obj.mode or common.default_mode(obj.metric)
  if mode ~= "max" and mode ~= "min" then
    error(string.format("dl.study: objective.mode must be \"max\" or \"min\" (got %s for metric %s)", tostring(obj.mode),
      obj.metric), 2)
  end
  self.objective = {metric = obj.metric, mode = mode}
  -- trials at a time: default one per core (each trial then gets cores / jobs threads)
  local par = spec.parallel or spec.jobs or util.cores()
  if math.type(par) ~= "integer" or par < 1 then error("dl.study: parallel must be a positive integer", 2) end
  self.parallel = par
  if spec.steps ~= nil and (math.type(spec.steps) ~= "integer" or spec.steps < 1) then
    error("dl.study: steps must be a positive integer (the step budget of every trial)", 2)
  end
  if spec.steps and roles.steps then
    error("dl.study: steps is given both as the study's step budget and as a " .. roles.steps .. " hyperparameter", 2)
  end
  self.steps = spec.steps
  self.seeds = spec.seeds or 0
  if math.type(self.seeds) ~= "integer" or self.seeds < 0 then error("dl.study: seeds must be an integer >= 0", 2) end
  return self
end

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
    allow_step_search = self.allow_step_search,
  }
end

--- fingerprint(rec) -> what may not change between runs into one directory (the
-- trial budget may), as 16 hex digits.
function M.fingerprint(rec)
  local t = copy(rec)
  t.trials, t.goal, t.description, t.script, t.experiment, t.nuisance_description, t.seeds = nil, nil, nil, nil,
    nil, nil, nil
  return string.format("%016x", search.hash_string(json.encode(t)))
end

--- from_record(rec) -> the study a record describes (for agents and results).
function M.from_record(rec)
  local self = setmetatable({_dlua_kind = "study", warnings = {}}, Study)
  for _, k in ipairs({"name", "goal", "description", "script", "experiment", "experiment_abs", "fixed",
                      "manual", "trials", "algorithm", "seed", "init", "grid_points", "objective", "steps",
                      "seeds", "allow_step_search"}) do
    self[k] = rec[k]
  end
  self.sci = rec.scientific or {}
  self.sci_names = rec.scientific_names or {}
  self.groups = {}
  for i, g in ipairs(rec.groups or {}) do
    self.groups[i] = {values = g.values or {}, tag = g.tag, label = g.label, index = i}
  end
  self.space = search.space_from_table(rec.nuisance or {})
  self.parallel = 1
  self.fixed = self.fixed or {}
  return self
end

return M
