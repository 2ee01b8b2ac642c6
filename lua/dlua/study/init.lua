--- dlua.study: tuning studies (playbook section 2): scientific hyperparameters
-- (what is compared), nuisance ones (searched anew for each scientific value,
-- with the same nuisance points for every value), fixed ones; trials run as
-- dlua subprocesses in their own run directories, several at a time, and the
-- study is resumable and shareable between agents.
--
--   return dl.study{
--     name = "bn-virtual-batch", goal = "does the ghost batch size matter once lr is re-tuned?",
--     experiment = "examples/fashion_mnist.lua",
--     scientific = {virtual_batch = {16, 64}},
--     nuisance = {lr = dl.search.log_uniform(1e-3, 1), momentum = dl.search.uniform(0.8, 0.99)},
--     fixed = {batch_size = 128}, trials = 8, algorithm = "quasirandom", seed = 7,
--     objective = {metric = "valid/accuracy", mode = "max"}, parallel = 2, seeds = 3,
--   }
--
-- Files in the study directory <root>/<name>/ (docs/studies.md):
--   study.json      the study as data (spaces, roles, seed, objective), fingerprinted
--   journal.jsonl   append-only events (claim, renew, suggest, finish, complete),
--                   written under an fcntl lock on journal.lock
--   trials.csv      one row per finished trial, rewritten after every trial
--   results.json    the per-scientific-value report of the last completion
--   <trial id>/     each trial's run directory (dl.train's files, trial.log, exit)
-- and one row per completed study in <root>/studies.csv.
--
-- Trials are dispatched by M.launch (one local subprocess per trial); a
-- rank-aware version (MPI, DESIGN.md section 6) replaces that one function.
local lfs = require "lfs"
local core = require "dlua.core"
local util = require "dlua.util"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local track = require "dlua.train.track"
local experiment = require "dlua.train.experiment"
local search = require "dlua.search"

local M = {}

------------------------------------------------------------------- helpers

local function warn_stderr(msg) io.stderr:write("dlua: warning: ", msg, "\n") end

local sorted_keys, copy = util.sorted_keys, util.copy

local function scalar(v) local t = type(v); return t == "number" or t == "string" or t == "boolean" end

--- The process id of this dlua (Linux /proc), or nil.
M.getpid = util.getpid
local hostname = util.hostname

local function pid_alive(pid)
  if not pid then return false end
  if not fs.is_dir("/proc/self") then return true end     -- cannot tell: trust the lease
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return false end
  local s = f:read("l") or ""
  f:close()
  return not s:match("^%d+ %b() Z")                       -- a zombie is dead
end

local sleep, cores = util.sleep, util.cores

--- Shell quoting for one argument (only when needed): util.shell_quote.
local shq = util.shell_quote
M.shell_quote = shq

--- A value as --set text: numbers round-trip exactly, in the shortest form.
function M.format_value(v)
  if math.type(v) == "integer" then return string.format("%d", v) end
  if type(v) == "number" then
    for p = 15, 17 do
      local s = string.format("%." .. p .. "g", v)
      if tonumber(s) == v then return s end
    end
  end
  return tostring(v)
end
local fmtv = M.format_value

local function safe(s) return (tostring(s):gsub("[^%w%.%-]", "_")) end

local function abspath(p)
  if p:sub(1, 1) == "/" then return p end
  return lfs.currentdir() .. "/" .. p
end

-------------------------------------------------------------- the study spec

local Study = {}
Study.__index = Study

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

local function default_mode(metric)
  if metric:match("loss$") or metric:match("error$") then return "min" end
  if metric:match("accuracy$") or metric:match("top%d+$") then return "max" end
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
  self.experiment, self.experiment_abs = exp_path, abspath(exp_path)
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
  local mode = obj.mode or default_mode(obj.metric)
  if mode ~= "max" and mode ~= "min" then
    error(string.format("dl.study: objective.mode must be \"max\" or \"min\" (got %s for metric %s)", tostring(obj.mode),
      obj.metric), 2)
  end
  self.objective = {metric = obj.metric, mode = mode}
  -- trials at a time: default one per core (each trial then gets cores / jobs threads)
  local par = spec.parallel or spec.jobs or cores()
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

------------------------------------------------------------- study as data

--- The study as plain data (study.json); M.from_record rebuilds it.
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

-- what may not change between runs into one directory (the trial budget may)
local function fingerprint(rec)
  local t = copy(rec)
  t.trials, t.goal, t.description, t.script, t.experiment, t.nuisance_description, t.seeds = nil, nil, nil, nil,
    nil, nil, nil
  return string.format("%016x", search.hash_string(json.encode(t)))
end

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

--------------------------------------------------------------- the plan

local function trial_id(group, j) return string.format("%s_t%03d", group.tag, j) end

--- The planned trials (n per scientific value, default the study's budget), in
-- claim order (trial j of every value before trial j + 1). Each trial is
-- {id, group, j, u (nil for adaptive bayes trials), hp, kind = "search"}.
function Study:plan(n)
  n = n or self.trials
  local out = {}
  local cache = {}
  local init = self.init or math.max(5, self.space.d + 1)
  for j = 1, n do
    local u
    if self.algorithm ~= "manual" and (self.algorithm ~= "bayes" or j <= init) then
      u = search.point(self.space, j, {algorithm = self.algorithm == "bayes" and "quasirandom" or self.algorithm,
                                       seed = self.seed, cache = cache, grid_points = self.grid_points})
    end
    for _, g in ipairs(self.groups) do
      local t = {id = trial_id(g, j), group = g, j = j, u = u, kind = "search"}
      if self.algorithm == "manual" then t.nuisance = copy(self.manual[j])
      elseif u then t.nuisance = self.space:point(u, g.values) end
      out[#out + 1] = t
    end
  end
  return out
end

--- The full hyperparameters a trial sets: fixed, scientific values, nuisance, seed.
function Study:trial_hparams(t)
  local hp = copy(self.fixed)
  for k, v in pairs(t.group.values) do hp[k] = v end
  for k, v in pairs(t.nuisance or {}) do hp[k] = v end
  if t.seed then hp.seed = t.seed end
  return hp
end

--- The command line of a trial: args after the executable (experiment and flags).
function Study:trial_args(hp, extra)
  local args = {self.experiment_abs or self.experiment}
  for _, k in ipairs(sorted_keys(hp)) do
    if k ~= "seed" then args[#args + 1] = "--set"; args[#args + 1] = k .. "=" .. fmtv(hp[k]) end
  end
  if hp.seed then args[#args + 1] = "--seed"; args[#args + 1] = fmtv(hp.seed) end
  if self.steps then args[#args + 1] = "--steps"; args[#args + 1] = tostring(self.steps) end
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  return args
end

--- The exact command that reproduces a trial.
function Study:command(hp)
  local args = self:trial_args(hp)
  args[1] = self.experiment
  local parts = {"dlua"}
  for _, a in ipairs(args) do parts[#parts + 1] = shq(a) end
  if not hp.seed then parts[#parts + 1] = "--seed 0" end
  return table.concat(parts, " ")
end

------------------------------------------------------------------ journal

local Journal = {}
Journal.__index = Journal

local function journal(dir)
  return setmetatable({dir = dir, path = dir .. "/journal.jsonl", lock_path = dir .. "/journal.lock"}, Journal)
end

local function read_events(path)
  local text = fs.read(path)
  local events = {}
  if not text then return events end
  local n = 0
  for line in text:gmatch("[^\n]+") do
    n = n + 1
    local e = json.decode(line)
    if type(e) == "table" and e.event then                              -- a torn line is skipped
      if e.trial ~= nil then                    -- a trial id names a directory: it must stay inside
        fs.checked_path(fs.dirname(path), e.trial, path, string.format("line %d: trial", n))
      end
      events[#events + 1] = e
    end
  end
  return events, text
end

--- Runs fn(events, append) holding the journal's lock (fcntl, released if the
-- process dies); append(e) writes one event line.
function Journal:locked(fn)
  fs.mkdir_p(self.dir)
  local lf = assert(io.open(self.lock_path, "a"))
  local t0 = core.clock()
  while true do
    local ok = lfs.lock(lf, "w")
    if ok then break end
    if core.clock() - t0 > 120 then
      lf:close()
      error("dl.study: could not lock " .. self.lock_path .. " for 120 s", 0)
    end
    sleep(0.02)
  end
  local res = table.pack(pcall(function()
    local events, text = read_events(self.path)
    if text and #text > 0 and text:sub(-1) ~= "\n" then fs.append_line(self.path, "") end  -- end a torn line
    local wrote = false
    local function append(e)                    -- one O_APPEND write per event; a failure raises
      e.time = e.time or os.time()
      fs.append_line(self.path, json.encode(e))
      events[#events + 1] = e
      wrote = true
    end
    local r = table.pack(fn(events, append))
    if wrote then fs.fsync(self.path) end
    return table.unpack(r, 1, r.n)
  end))
  lfs.unlock(lf)
  lf:close()
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

function Journal:events() return (read_events(self.path)) end

-- per-trial state from the events
local function replay(events)
  local st = {trials = {}, suggest = {}, seeds = {}, complete_at = 0, last_finish = 0}
  for i, e in ipairs(events) do
    local id = e.trial
    local t = id and st.trials[id]
    if id and not t then t = {id = id, claims = 0}; st.trials[id] = t end
    if e.event == "claim" then
      t.claims = t.claims + 1
      t.owner, t.host, t.pid, t.lease_until, t.claim_at, t.running = e.owner, e.host, e.pid, e.lease_until, i, true
      t.attempt = e.attempt
    elseif e.event == "renew" then
      if t.owner == e.owner then t.lease_until = e.lease_until end
    elseif e.event == "release" then
      if t.owner == e.owner then t.running = false end
    elseif e.event == "finish" then
      t.finish, t.finish_at, t.running = e, i, false
      t.finishes = (t.finishes or 0) + 1
      st.last_finish = i
    elseif e.event == "suggest" then
      st.suggest[id] = e
    elseif e.event == "seeds" then
      st.seeds[e.group] = e
    elseif e.event == "complete" then
      st.complete_at = i
    end
  end
  return st
end
M._replay = replay

local FINAL = {done = true, diverged = true}

------------------------------------------------------------ trial dispatch

local Handle = {}
Handle.__index = Handle

--- Starts one trial: `exe args...` in the background with its output in
-- dir/trial.log; returns a handle whose :poll() is nil while it runs and the
-- exit code once it ended. A watchdog shell ends the trial when the agent
-- process (agent_pid) dies, so a killed study leaves no orphan writing into a
-- run directory that a resumed study will reuse. This is the one function a
-- rank-aware dispatcher (trials over MPI ranks) replaces.
function M.launch(exe, args, dir, opts)
  opts = opts or {}
  fs.mkdir_p(dir)
  os.remove(dir .. "/exit")
  os.remove(dir .. "/result.json")
  local cmd = {shq(exe)}
  for _, a in ipairs(args) do cmd[#cmd + 1] = shq(a) end
  local d = shq(dir)
  local watch = opts.agent_pid and string.format(
    "kill -0 %d 2>/dev/null || { kill -TERM $c 2>/dev/null; sleep 1; kill -KILL $c 2>/dev/null; }; ", opts.agent_pid) or ""
  local script = string.format(
    "cd %s || exit 1; %s >%s/trial.log 2>&1 </dev/null & c=$!; echo $c >%s/trial.pid; " ..
    "while kill -0 $c 2>/dev/null; do %ssleep 0.2; done; wait $c; rc=$?; " ..
    "echo $rc >%s/exit.tmp && mv %s/exit.tmp %s/exit",
    shq(lfs.currentdir()), table.concat(cmd, " "), d, d, watch, d, d, d)
  local ok = os.execute("sh -c " .. shq(script) .. " >/dev/null 2>&1 &")
  if not ok then error("dl.study: cannot start a trial process (sh)", 0) end
  return setmetatable({dir = dir, t0 = core.clock()}, Handle)
end

function Handle:poll()
  local s = fs.read(self.dir .. "/exit")
  if not s then return nil end
  return tonumber(s:match("%-?%d+")) or -1
end

-------------------------------------------------------------- trial results

local function metric_events(dir)
  local out = {}
  for line in (fs.read(dir .. "/metrics.jsonl") or ""):gmatch("[^\n]+") do
    local e = json.decode(line)
    if type(e) == "table" then out[#out + 1] = e end
  end
  return out
end

local function better(a, b, mode)
  if b == nil then return true end
  if mode == "min" then return a < b end
  return a > b
end

--- The value of metric in a run directory: aggregate "best" (over every
-- eval, by mode; the earliest step on ties) or "final" (the last eval).
-- "train/X" reads field X of the train log lines. Returns value, step, names
-- (the metric names seen, for messages).
function M.run_metric(dir, metric, mode, aggregate)
  local split, field = "eval", metric
  local tm = metric:match("^train/(.+)$")
  if tm then split, field = "train", tm end
  local best, step, names = nil, nil, {}
  for _, e in ipairs(metric_events(dir)) do
    if e.split == split then
      for k in pairs(e) do names[k] = true end
      local v = e[field]
      if type(v) == "number" and v == v then
        if aggregate == "final" then best, step = v, e.step
        elseif better(v, best, mode) then best, step = v, e.step end
      end
    end
  end
  return best, step, names
end

local function tail_line(path)
  local s = fs.read(path) or ""
  local last
  for l in s:gmatch("[^\n]+") do if l:match("%S") then last = l end end
  return last
end

-- the outcome of a finished trial process
local function collect(self, dir, code)
  local r = json.decode(fs.read(dir .. "/result.json") or "") or nil
  local status, message = "failed", nil
  if type(r) == "table" and r.status then
    status, message = r.status, r.message
    if code ~= 0 and code ~= 3 and status == "done" then status = "failed"; message = "exit status " .. code end
  else
    message = tail_line(dir .. "/trial.log") or ("exit status " .. tostring(code))
  end
  local value, step, names = M.run_metric(dir, self.objective.metric, self.objective.mode, "best")
  if status == "done" and value == nil then
    local l = {}
    for k in pairs(names) do if k ~= "step" and k ~= "split" and k ~= "elapsed" then l[#l + 1] = k end end
    table.sort(l)
    status = "failed"
    message = string.format("the run reported no '%s' (eval metrics: %s)", self.objective.metric,
      #l > 0 and table.concat(l, ", ") or "none")
  end
  if status ~= "done" then value, step = nil, nil end
  return {status = status, message = message, value = value, step = step,
          steps = type(r) == "table" and r.steps or nil}
end

---------------------------------------------------------------- the agent

local Agent = {}
Agent.__index = Agent

local function new_agent(study, dir, opts)
  local pid = M.getpid()
  local host = hostname()
  local self = setmetatable({
    study = study, dir = dir, journal = journal(dir), opts = opts, pid = pid, host = host,
    owner = string.format("%s:%s:%d", host, tostring(pid), math.floor(core.clock() * 1e6) % 1000000),
    lease = opts.lease or 60, jobs = opts.jobs or 1, count = opts.count, wait = opts.wait,
    quiet = opts.quiet, exe = opts.exe, running = {}, started = 0, ran = {}, n = opts.trials or study.trials,
  }, Agent)
  self.threads = opts.threads or math.max(1, cores() // self.jobs)
  return self
end

function Agent:say(fmt, ...)
  if not self.quiet then io.stdout:write(string.format("[%s] " .. fmt, self.study.name, ...), "\n"); io.stdout:flush() end
end

-- a trial is held when its latest claim is unfinished and its owner lives
-- (same host: the process exists; other hosts: the lease has not expired).
-- Returns "free", "held" or "wait" (a dead owner's trial process still runs).
function Agent:holder_state(t, now)
  if not t or not t.running then return "free" end
  if t.owner == self.owner then return "held" end
  if t.host == self.host and t.pid then
    if pid_alive(t.pid) and t.lease_until >= now then return "held" end
    local tp = tonumber((fs.read(self.dir .. "/" .. t.id .. "/trial.pid") or ""):match("%d+"))
    if tp and pid_alive(tp) then return "wait" end
    return "free"
  end
  if t.lease_until >= now then return "held" end
  return "free"
end

-- best finished trial of a group from the journal state
local function group_best(study, st, plan_ids, mode)
  local best
  for _, id in ipairs(plan_ids) do
    local t = st.trials[id]
    local f = t and t.finish
    if f and f.status == "done" and f.value ~= nil and (not best or better(f.value, best.value, mode)) then best = f end
  end
  return best
end

--- All trials of the study given the journal: the search plan, plus the seed
-- re-runs of each group's best trial once the group's search trials settled.
function Agent:all_trials(st, session_start)
  local study = self.study
  local plan = study:plan(self.n)
  if study.seeds > 0 then
    local by_group = {}
    for _, t in ipairs(plan) do
      by_group[t.group.index] = by_group[t.group.index] or {}
      table.insert(by_group[t.group.index], t.id)
    end
    for _, g in ipairs(study.groups) do
      local rec = st.seeds[g.index]
      local base
      if rec then base = rec
      else
        local settled = true
        for _, id in ipairs(by_group[g.index] or {}) do
          local t = st.trials[id]
          local f = t and t.finish
          if not f or (not FINAL[f.status] and (t.finish_at or 0) < session_start) or t.running then settled = false end
        end
        local b = settled and group_best(study, st, by_group[g.index] or {}, study.objective.mode)
        if b then base = {group = g.index, base = b.trial, nuisance = b.nuisance, u = b.u, pending = true} end
      end
      if base then
        for s = 1, study.seeds do
          plan[#plan + 1] = {id = string.format("%s_seed%d", base.base, s), group = g, j = s, u = base.u,
                             nuisance = base.nuisance, seed = (study.fixed.seed or 0) + s, kind = "seed",
                             base = base.base, seeds_record = base.pending and base or nil}
        end
      end
    end
  end
  return plan
end

-- picks the next trial to run and records the claim; returns trial or nil, why
function Agent:claim(session_start)
  local study = self.study
  return self.journal:locked(function(events, append)
    local st = replay(events)
    local now = os.time()
    local plan = self:all_trials(st, session_start)
    local why = "none"
    for _, t in ipairs(plan) do
      local s = st.trials[t.id]
      local f = s and s.finish
      local todo = not f or (not FINAL[f.status] and s.finish_at < session_start)
      if todo then
        local h = self:holder_state(s, now)
        if h == "free" then
          if t.seeds_record then
            local r = t.seeds_record
            append({event = "seeds", group = r.group, base = r.base, nuisance = r.nuisance, u = r.u})
          end
          -- the point of an adaptive trial is chosen now, once, and recorded
          local sg = st.suggest[t.id]
          if sg then t.u, t.nuisance = sg.u, sg.nuisance end
          if not t.nuisance then
            local u = self:suggest_bayes(t, st, plan)
            t.u = u
            t.nuisance = study.space:point(u, t.group.values)
            append({event = "suggest", trial = t.id, u = json.array(u), nuisance = t.nuisance})
          end
          append({event = "claim", trial = t.id, owner = self.owner, host = self.host, pid = self.pid,
                  lease_until = now + self.lease, attempt = (s and s.claims or 0) + 1})
          return t
        elseif h == "wait" then why = "wait"
        elseif why ~= "wait" then why = "held" end
      end
    end
    return nil, why
  end)
end

-- bayes: EI under the GP of this group's finished trials, with the group's
-- running trials as kriging believers
function Agent:suggest_bayes(t, st, plan)
  local study = self.study
  local hist, pend = {}, {}
  for _, p in ipairs(plan) do
    if p.group.index == t.group.index and p.kind == "search" and p.id ~= t.id then
      local s = st.trials[p.id]
      local u = p.u or (st.suggest[p.id] and st.suggest[p.id].u)
      if u and s and s.finish and not s.running then
        local v = s.finish.status == "done" and s.finish.value or nil
        hist[#hist + 1] = {u = u, value = v}
      elseif u and s and s.running then
        pend[#pend + 1] = {u = u}
      end
    end
  end
  local feasible = 0
  for _, h in ipairs(hist) do if h.value ~= nil then feasible = feasible + 1 end end
  if feasible < 2 then
    return search.point(study.space, t.j, {algorithm = "quasirandom", seed = study.seed})
  end
  local us = search.bayes_suggest(study.space, hist, pend, 1, {seed = study.seed, step = t.j,
    mode = study.objective.mode, context = t.group.values})
  return us[1]
end

function Agent:start(t)
  local study = self.study
  local hp = study:trial_hparams(t)
  local dir = self.dir .. "/" .. t.id
  local args = study:trial_args(hp, {"--out", dir, "--quiet", "--resume", "--no-track",
                                     "--threads", tostring(self.threads)})
  local h = (self.opts.launch or M.launch)(self.exe, args, dir, {agent_pid = self.pid})
  self.running[#self.running + 1] = {trial = t, handle = h, hp = hp, dir = dir}
  self.started = self.started + 1
  local parts = {}
  for _, k in ipairs(sorted_keys(t.nuisance or {})) do parts[#parts + 1] = k .. "=" .. fmtv(t.nuisance[k]) end
  if t.seed then parts[#parts + 1] = "seed=" .. t.seed end
  self:say("trial %s started (%s%s)", t.id, t.group.label ~= "(all)" and (t.group.label .. "; ") or "",
    table.concat(parts, " "))
end

function Agent:rows(st)
  local study = self.study
  local cols = {"id", "status"}
  local hp_names = {}
  for _, n in ipairs(study.sci_names) do hp_names[#hp_names + 1] = n end
  for _, n in ipairs(study.space.names) do hp_names[#hp_names + 1] = n end
  if study.manual then
    local seen = {}
    for _, t in ipairs(study.manual) do for k in pairs(t) do seen[k] = true end end
    for _, k in ipairs(sorted_keys(seen)) do hp_names[#hp_names + 1] = k end
  end
  for _, n in ipairs(sorted_keys(study.fixed)) do if n ~= "seed" then hp_names[#hp_names + 1] = n end end
  -- hyperparameters as hp.NAME (hp.seed too), apart from the run's own columns: a
  -- hyperparameter named steps or status can never shadow one (csv.DictReader keeps one)
  for _, n in ipairs(hp_names) do cols[#cols + 1] = "hp." .. n end
  for _, c in ipairs({"hp.seed", "best_metric", "best_value", "best_step", "steps_run", "wall_time", "dir", "message"}) do
    cols[#cols + 1] = c
  end
  local fins = {}
  for _, t in pairs(st.trials) do if t.finish then fins[#fins + 1] = t.finish end end
  table.sort(fins, function(a, b)
    if a.group ~= b.group then return a.group < b.group end
    if (a.kind == "seed") ~= (b.kind == "seed") then return a.kind ~= "seed" end
    return a.trial < b.trial
  end)
  local rows = {}
  for i, f in ipairs(fins) do
    local r = {id = f.trial, status = f.status, ["hp.seed"] = f.hp and f.hp.seed or 0, best_metric = study.objective.metric,
               best_value = f.value and fmtv(f.value) or "", best_step = f.step or "", steps_run = f.steps or "",
               wall_time = f.wall and string.format("%.1f", f.wall) or "", dir = f.dir, message = f.message or ""}
    for _, n in ipairs(hp_names) do
      local v = f.hp and f.hp[n]
      r["hp." .. n] = v ~= nil and fmtv(v) or ""
    end
    rows[i] = r
  end
  return rows, cols
end

function Agent:write_trials_csv(st)
  local rows, cols = self:rows(st)
  local lines = {track.csv_row(cols)}
  for _, r in ipairs(rows) do
    local vals = {}
    for i, c in ipairs(cols) do vals[i] = r[c] end
    lines[#lines + 1] = track.csv_row(vals, #cols)
  end
  fs.write_atomic(self.dir .. "/trials.csv", table.concat(lines, "\n") .. "\n")
end

-- all planned trials settled (finished; failed ones count) and none running
function Agent:is_complete(st, session_start)
  for _, t in ipairs(self:all_trials(st, session_start)) do
    local s = st.trials[t.id]
    if not s or not s.finish or s.running then return false end
  end
  if self.study.seeds > 0 then
    for _, g in ipairs(self.study.groups) do
      local any = false
      for _, t in pairs(st.trials) do if t.finish and t.finish.group == g.index and t.finish.status == "done" then any = true end end
      if any and not st.seeds[g.index] then return false end
    end
  end
  return true
end

function Agent:finish(r, code, session_start)
  local study = self.study
  local res = collect(study, r.dir, code)
  local wall = core.clock() - r.handle.t0
  local t = r.trial
  local value_txt = res.value and string.format("%s %.4f at step %s", study.objective.metric, res.value,
    tostring(res.step)) or (res.message or "")
  self:say("trial %s %s: %s (%.1f s)", t.id, res.status, value_txt, wall)
  local completed
  self.journal:locked(function(events, append)
    local st = replay(events)
    local s = st.trials[t.id]
    if not s or s.owner ~= self.owner or not s.running then
      warn_stderr(string.format("trial %s: the claim passed to another agent (lease expired); result dropped", t.id))
      return
    end
    append({event = "finish", trial = t.id, owner = self.owner, status = res.status, value = res.value,
            step = res.step, steps = res.steps, wall = wall, message = res.message, hp = r.hp,
            nuisance = t.nuisance, u = t.u and json.array(t.u) or nil, group = t.group.index, kind = t.kind,
            base = t.base, dir = r.dir})
    st = replay(events)
    self:write_trials_csv(st)
    if self:is_complete(st, session_start) and st.complete_at < st.last_finish then
      append({event = "complete"})
      completed = true
    end
  end)
  self.ran[#self.ran + 1] = {id = t.id, status = res.status, value = res.value}
  if completed then M.complete(study, self.dir, self.opts) end
end

function Agent:renew()
  if #self.running == 0 then return end
  local now = os.time()
  self.journal:locked(function(_, append)
    for _, r in ipairs(self.running) do
      append({event = "renew", trial = r.trial.id, owner = self.owner, lease_until = now + self.lease})
    end
  end)
end

--- The agent loop: claims and runs trials (jobs at a time) until nothing is
-- left to claim (or count trials ran). wait = true (the study runner) also
-- waits for trials other agents hold, reclaiming them when their lease expires.
function Agent:loop()
  local session_start = #self.journal:events() + 1
  local last_renew = core.clock()
  local poll = self.opts.poll or 0.1
  while true do
    local why
    while #self.running < self.jobs and (not self.count or self.started < self.count) do
      local t
      t, why = self:claim(session_start)
      if not t then break end
      self:start(t)
    end
    if #self.running == 0 then
      if why == "wait" or (why == "held" and self.wait) then
        sleep(0.5)
      else
        break
      end
    else
      sleep(poll)
      local keep = {}
      for _, r in ipairs(self.running) do
        local code = r.handle:poll()
        if code then
          self:finish(r, code, session_start)
        else
          keep[#keep + 1] = r
        end
      end
      self.running = keep
      if core.clock() - last_renew > self.lease / 4 then
        self:renew()
        last_renew = core.clock()
      end
    end
  end
  -- a study whose last trial finished without the completion being recorded
  -- (the process died in between) completes now
  local completed = self.journal:locked(function(events, append)
    local st = replay(events)
    if st.last_finish > 0 and st.complete_at < st.last_finish and self:is_complete(st, session_start) then
      append({event = "complete"})
      return true
    end
  end)
  if completed then M.complete(self.study, self.dir, self.opts) end
  return self.ran
end

---------------------------------------------------------------- results

local function mean_std(vals)
  local n = #vals
  if n == 0 then return nil end
  local s = 0
  for _, v in ipairs(vals) do s = s + v end
  local m = s / n
  local q = 0
  for _, v in ipairs(vals) do q = q + (v - m) ^ 2 end
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(vals) do lo = math.min(lo, v); hi = math.max(hi, v) end
  return {n = n, mean = m, std = n > 1 and math.sqrt(q / (n - 1)) or nil, min = lo, max = hi, values = vals}
end

--- dl.study_results(dir [, {metric =, mode =, aggregate = "best" | "final"}]):
-- ranks the finished trials of a study directory from their stored histories
-- (no rerun). Returns {name, metric, mode, aggregate, trials = {...} (by id),
-- ranking = {...} (feasible trials, best first), groups = {{label, values,
-- trials, done, infeasible, best, seeds}}, best, adoption}; each trial
-- {id, group, status, value, step, hp, dir, command}.
function M.results(dir, opts)
  opts = util.check_options("dl.study_results", opts, {metric = "string", mode = "string", aggregate = "string"}, 2)
  local rec = json.decode(fs.read(dir .. "/study.json") or "")
  if type(rec) ~= "table" then error("dl.study_results: " .. dir .. " holds no study.json", 2) end
  local study = M.from_record(rec)
  local metric = opts.metric or study.objective.metric
  local mode = opts.mode or (opts.metric and default_mode(opts.metric)) or study.objective.mode
  if mode ~= "max" and mode ~= "min" then error("dl.study_results: mode must be \"max\" or \"min\"", 2) end
  local aggregate = opts.aggregate or "best"
  if aggregate ~= "best" and aggregate ~= "final" then
    error("dl.study_results: aggregate must be \"best\" or \"final\", got " .. tostring(aggregate), 2)
  end
  local st = replay(journal(dir):events())
  local out = {name = study.name, goal = study.goal or study.description, metric = metric, mode = mode,
               aggregate = aggregate, trials = {}, groups = {}}
  for i, g in ipairs(study.groups) do
    out.groups[i] = {label = g.label, values = g.values, tag = g.tag, trials = 0, done = 0, infeasible = 0,
                     seed_values = {}}
  end
  local ids = sorted_keys(st.trials)
  for _, id in ipairs(ids) do
    local f = st.trials[id].finish
    if f then
      local tdir = dir .. "/" .. id
      local value, step
      if f.status == "done" then
        value, step = M.run_metric(tdir, metric, mode, aggregate)
      end
      local t = {id = id, group = f.group, status = f.status, value = value, step = step, hp = f.hp,
                 nuisance = f.nuisance, dir = tdir, command = study:command(f.hp or {}), kind = f.kind,
                 message = f.message, base = f.base}
      out.trials[#out.trials + 1] = t
      local g = out.groups[f.group]
      if g then
        if t.kind == "seed" then
          if value then g.seed_values[#g.seed_values + 1] = value end
        else
          g.trials = g.trials + 1
          if f.status == "done" and value ~= nil then
            g.done = g.done + 1
            if not g.best or better(value, g.best.value, mode) then g.best = t end
          else
            g.infeasible = g.infeasible + 1
          end
        end
      end
    end
  end
  -- every feasible trial, best first (ties: by id)
  out.ranking = {}
  for _, t in ipairs(out.trials) do if t.value ~= nil and t.status == "done" then out.ranking[#out.ranking + 1] = t end end
  table.sort(out.ranking, function(a, b)
    if a.value == b.value then return a.id < b.id end
    return better(a.value, b.value, mode)
  end)
  for _, g in ipairs(out.groups) do
    g.seeds = mean_std(g.seed_values)
    if g.best and (not out.best or better(g.best.value, out.best.value, mode)) then out.best = g.best end
  end
  -- the adoption test: does the best value beat the runner-up by more than seed noise?
  local ranked = {}
  for _, g in ipairs(out.groups) do if g.best then ranked[#ranked + 1] = g end end
  table.sort(ranked, function(a, b) return better(a.best.value, b.best.value, mode) end)
  if #ranked >= 2 then
    local a, b = ranked[1], ranked[2]
    local ad = {best = a.label, runner_up = b.label}
    if a.seeds and b.seeds and a.seeds.std and b.seeds.std then
      ad.difference = math.abs(a.seeds.mean - b.seeds.mean)
      ad.noise = math.sqrt(a.seeds.std ^ 2 / a.seeds.n + b.seeds.std ^ 2 / b.seeds.n)
      ad.exceeds = ad.difference > 2 * ad.noise and better(a.seeds.mean, b.seeds.mean, mode)
      ad.message = string.format("%s vs %s: difference of seed means %.4g, %s 2 x its standard error %.4g",
        a.label, b.label, ad.difference, ad.exceeds and "exceeds" or "does not exceed", 2 * ad.noise)
    else
      ad.message = string.format("%s vs %s: no seed re-runs (seeds >= 2 measure the trial-to-trial noise)",
        a.label, b.label)
    end
    out.adoption = ad
  end
  return out
end

local function short_hp(t)
  local parts = {}
  for _, k in ipairs(sorted_keys(t.nuisance or {})) do
    local v = t.nuisance[k]
    parts[#parts + 1] = k .. "=" .. (math.type(v) == "float" and string.format("%.4g", v) or tostring(v))
  end
  if t.kind == "seed" or (t.hp and t.hp.seed) then parts[#parts + 1] = "seed=" .. tostring(t.hp.seed) end
  return table.concat(parts, " ")
end

--- The results as a printed table.
function M.format_results(res)
  local lines = {}
  lines[#lines + 1] = string.format("study %s%s", res.name, res.goal and (": " .. res.goal) or "")
  lines[#lines + 1] = string.format("best trial per scientific value by %s (%s over evals, %s)", res.metric,
    res.aggregate, res.mode)
  lines[#lines + 1] = string.format("  %-24s %6s %10s %10s %6s  %-28s %s", "scientific", "trials", "infeasible",
    "best", "step", "trial", "nuisance")
  for _, g in ipairs(res.groups) do
    local b = g.best
    lines[#lines + 1] = string.format("  %-24s %6d %10d %10s %6s  %-28s %s", g.label, g.trials, g.infeasible,
      b and string.format("%.4f", b.value) or "-", b and tostring(b.step) or "-", b and b.id or "-",
      b and short_hp(b) or "")
    if g.seeds then
      lines[#lines + 1] = string.format("  %-24s seeds: n %d, mean %.4f, std %s, min %.4f, max %.4f", "", g.seeds.n,
        g.seeds.mean, g.seeds.std and string.format("%.4f", g.seeds.std) or "-", g.seeds.min, g.seeds.max)
    end
  end
  if res.adoption then lines[#lines + 1] = "adoption: " .. res.adoption.message end
  if res.best then lines[#lines + 1] = "reproduce the best trial: " .. res.best.command end
  return table.concat(lines, "\n")
end

-- the study's row in <root>/studies.csv and results.json, once per completion
function M.complete(study, dir, opts)
  local res = M.results(dir)
  fs.write_atomic(dir .. "/results.json", json.encode({
    metric = res.metric, mode = res.mode, best = res.best and {id = res.best.id, value = res.best.value,
    step = res.best.step, command = res.best.command} or nil, groups = (function()
      local g = {}
      for i, x in ipairs(res.groups) do
        g[i] = {label = x.label, values = x.values, trials = x.trials, infeasible = x.infeasible,
                best = x.best and {id = x.best.id, value = x.best.value, step = x.best.step, hp = x.best.hp} or nil,
                seeds = x.seeds}
      end
      return g
    end)(), adoption = res.adoption}) .. "\n")
  local n = 0
  for _ in ipairs(res.trials) do n = n + 1 end
  local root = opts.root or fs.dirname(dir)
  track.append(root .. "/studies.csv", {
    name = study.name, config = study.script or "", description = study.goal or study.description or "",
    trials = n, best_metric = res.metric, best_value = res.best and fmtv(res.best.value) or "",
    best_step = res.best and res.best.step or "", status = res.best and "done" or "no feasible trial",
    dir = res.best and res.best.dir or dir, command = res.best and res.best.command or "",
  })
end

------------------------------------------------------------- running it

local function exe_path(opts)
  if opts.exe then return opts.exe end
  local i = -1
  while arg and arg[i - 1] do i = i - 1 end
  local a = arg and arg[i]
  if a and a ~= "" then
    if a:find("/") then return abspath(a) end
    return a
  end
  return os.getenv("DLUA_EXE") or "dlua"
end

-- writes study.json, or checks that an existing one describes this study
function Study:prepare(dir, n)
  local rec = self:record()
  rec.trials = n or self.trials
  local fp = fingerprint(rec)
  rec.fingerprint = fp
  local j = journal(dir)
  j:locked(function()
    local old = json.decode(fs.read(dir .. "/study.json") or "")
    if type(old) == "table" and old.fingerprint and old.fingerprint ~= fp then
      error(string.format("dl.study: %s holds study '%s' with another search space, seed, algorithm, roles or " ..
        "step budget; give this study another name or --out directory", dir, tostring(old.name)), 0)
    end
    fs.write_atomic(dir .. "/study.json", json.encode(rec) .. "\n")
  end)
  return rec
end

--- Runs the study: opts.out (runs root, default "runs"), trials, parallel,
-- steps, quiet, threads, exe, lease, count, create, launch (the function that
-- starts a trial, M.launch by default: dlua.study.ranks passes its pool's).
-- Returns dl.study_results.
function Study:run(opts)
  opts = util.check_options("study:run", opts, {out = "string", trials = "integer", parallel = "integer",
    steps = "integer", quiet = "boolean", threads = "integer", exe = "string", lease = "number", count = "integer",
    create = "boolean", poll = "number", launch = "function"}, 2)
  if opts.steps then
    if self.sci.steps or self.space.by_name.steps then
      error("dl.study: --steps conflicts with the study's searched steps", 0)
    end
    if self.fixed.steps then self.fixed.steps = opts.steps else self.steps = opts.steps end
  end
  local root = opts.out or "runs"
  local dir = root .. "/" .. self.name
  for _, w in ipairs(self.warnings) do warn_stderr(w) end
  self:prepare(dir, opts.trials)
  if opts.create then return {dir = dir} end
  local agent = new_agent(self, dir, {jobs = opts.parallel or self.parallel, trials = opts.trials, quiet = opts.quiet,
    threads = opts.threads, exe = exe_path(opts), lease = opts.lease, count = opts.count, wait = opts.count == nil,
    root = root, poll = opts.poll, launch = opts.launch})
  if not opts.quiet then
    agent:say("%d trials per scientific value x %d value(s), %s, seed %d, %d at a time, %d thread(s) each; %s",
      agent.n, #self.groups, self.algorithm, self.seed, agent.jobs, agent.threads, dir)
  end
  agent:loop()
  local res = M.results(dir)
  res.dir, res.ran = dir, agent.ran
  return res
end

local STUDY_FLAGS = {
  {"--out", "DIR", "runs root (default runs): the study writes DIR/<name>/ and a row in DIR/studies.csv"},
  {"--trials", "N", "trials per scientific value (overrides the study's)"},
  {"--parallel", "P", "trials at a time (alias --jobs)"},
  {"--jobs", "P", "trials at a time"},
  {"--steps", "N", "the step budget of every trial"},
  {"--threads", "N", "compute threads per trial (default: cores / parallel)"},
  {"--count", "N", "run at most N trials, then report"},
  {"--lease", "S", "seconds a claimed trial stays reserved without renewal (default 60)"},
  {"--create", nil, "write the study directory and exit (then run it with dlua agent DIR)"},
  {"--resume", nil, "accepted for symmetry: a study always skips finished trials and resumes unfinished ones"},
  {"--quiet", nil, "no progress lines"},
  {"--help", nil, "describe the study and the flags"},
}

local function parse_flags(args, flags, usage)
  local o = {positional = {}}
  local i = 1
  while i <= #args do
    local a = args[i]
    local name, inline = a:match("^(%-%-[%w%-]+)=(.*)$")
    name = name or a
    if a:sub(1, 2) ~= "--" then
      o.positional[#o.positional + 1] = a
    else
      local spec
      for _, f in ipairs(flags) do if f[1] == name then spec = f end end
      if not spec then error(string.format("unknown flag '%s' (%s)", a, usage), 0) end
      local key = name:sub(3):gsub("%-", "_")
      if spec[2] then
        local v = inline
        if v == nil then
          i = i + 1
          v = args[i]
          if v == nil then error(string.format("%s: missing value", name), 0) end
        end
        if spec[2] == "N" or spec[2] == "P" or spec[2] == "S" then
          local n = math.tointeger(tonumber(v))
          if not n or n < (key == "count" and 0 or 1) then
            error(string.format("%s: expected a positive integer, got '%s'", name, v), 0)
          end
          v = n
        end
        o[key] = v
      else
        if inline then error(string.format("%s takes no value", name), 0) end
        o[key] = true
      end
    end
    i = i + 1
  end
  return o
end

local function flags_help(flags)
  local lines = {}
  for _, f in ipairs(flags) do
    lines[#lines + 1] = string.format("  %-18s %s", f[1] .. (f[2] and " " .. f[2] or ""), f[3])
  end
  return table.concat(lines, "\n")
end

function Study:help(script)
  local lines = {string.format("%s: study %s", script, self.name)}
  if self.goal then lines[#lines + 1] = "goal: " .. self.goal end
  lines[#lines + 1] = "experiment: " .. self.experiment
  for _, n in ipairs(self.sci_names) do
    local vals = {}
    for i, v in ipairs(self.sci[n]) do vals[i] = fmtv(v) end
    lines[#lines + 1] = string.format("  scientific %s: %s", n, table.concat(vals, ", "))
  end
  for _, d in ipairs(self.space:describe()) do lines[#lines + 1] = "  nuisance " .. d end
  for _, k in ipairs(sorted_keys(self.fixed)) do lines[#lines + 1] = string.format("  fixed %s = %s", k, fmtv(self.fixed[k])) end
  lines[#lines + 1] = string.format("%d trials per scientific value, %s, seed %d; objective %s (%s)", self.trials,
    self.algorithm, self.seed, self.objective.metric, self.objective.mode)
  lines[#lines + 1] = ""
  lines[#lines + 1] = "flags:"
  lines[#lines + 1] = flags_help(STUDY_FLAGS)
  return table.concat(lines, "\n")
end

--- `dlua STUDYFILE [flags]` (called by dlua.cli.run for a script returning a study):
-- runs it and prints the results table; returns dl.study_results with .dir and .ran
-- (nil for --help). hooks.launch starts a trial (dlua.study.ranks spreads them over
-- ranks). The report and the diagnosis are the caller's (dlua.cli: they sit above).
function Study:main(args, script, hooks)
  hooks = hooks or {}
  local o = parse_flags(args, STUDY_FLAGS, "see --help")
  if o.help then print(self:help(script)); return end
  if #o.positional > 0 then error(string.format("unexpected argument '%s' (see --help)", o.positional[1]), 0) end
  if script and not self.script then self.script = script end
  local res = self:run{out = o.out, trials = o.trials, parallel = o.parallel or o.jobs, steps = o.steps,
                       quiet = o.quiet, threads = o.threads, count = o.count, lease = o.lease, create = o.create,
                       launch = hooks.launch}
  if o.create then
    print(string.format("study directory %s; run trials with: dlua agent %s --count N", res.dir, res.dir))
    return res
  end
  print(M.format_results(res))
  return res
end

local AGENT_FLAGS = {
  {"--count", "N", "run at most N trials (default: until none is left)"},
  {"--jobs", "P", "trials at a time (default 1)"},
  {"--threads", "N", "compute threads per trial (default: cores / jobs)"},
  {"--lease", "S", "seconds a claimed trial stays reserved without renewal (default 60)"},
  {"--quiet", nil, "no progress lines"},
  {"--help", nil, "this text"},
}

--- `dlua agent STUDY_DIR [--count N] [--jobs P] [--lease S] [--threads N] [--quiet]`
function M.agent_main(args, opts)
  opts = opts or {}
  local o = parse_flags(args, AGENT_FLAGS, "see dlua agent --help")
  if o.help or #o.positional ~= 1 then
    print("usage: dlua agent STUDY_DIR [flags]\nclaims and runs trials of the study in STUDY_DIR (written by " ..
      "dlua STUDYFILE or --create), sharing it with other agents\n\nflags:\n" .. flags_help(AGENT_FLAGS))
    if not o.help then os.exit(1) end
    return
  end
  local dir = o.positional[1]:gsub("/+$", "")
  local rec = json.decode(fs.read(dir .. "/study.json") or "")
  if type(rec) ~= "table" then error(string.format("%s holds no study.json (create it with dlua STUDYFILE --create)", dir), 0) end
  local study = M.from_record(rec)
  if not fs.exists(study.experiment_abs or study.experiment) then
    error(string.format("study %s: experiment %s not found", study.name, study.experiment_abs or study.experiment), 0)
  end
  local agent = new_agent(study, dir, {jobs = o.jobs or 1, quiet = o.quiet, threads = o.threads,
    exe = exe_path(opts), lease = o.lease, count = o.count, wait = false, trials = rec.trials, root = fs.dirname(dir)})
  local ran = agent:loop()
  if not o.quiet then
    print(string.format("agent %s ran %d trial(s) of study %s", agent.owner, #ran, study.name))
  end
  return ran
end

return M
