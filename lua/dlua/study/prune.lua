--- dlua.study.prune: stopping trials early, judged inside each trial at each of
-- its evals (as Optuna's trial.should_prune()): the agent starts a search trial
-- with `--prune FILE` (the settings below, written into the trial's directory),
-- the runner turns FILE into dl.train's on_eval hook (M.judge), and at every
-- eval the hook takes the journal's lock, replays it and applies the rule to the
-- trial's objective so far against the trials completed by then. A study with
-- one trial at a time therefore prunes the same trials at the same steps on
-- every run, and a trial too fast for any poll is judged too. Two rules, both
-- within one scientific value (trials of another value are never compared):
--
--   prune = {algorithm = "median", warmup = 10, min_trials = 3}
--     a trial whose objective at an eval step after `warmup` steps is worse than
--     the median of the completed trials' objective at that same step (at least
--     `min_trials` of them evaluated there) is stopped: status `pruned`.
--   prune = {algorithm = "asha", min_steps = 10, reduction = 3}
--     asynchronous successive halving: rungs at min_steps * reduction^k steps
--     below the trials' step budget. A trial reaching a rung continues when its
--     objective there is in the top 1/reduction (rounded down) of the trials
--     that reached the rung so far; otherwise it is paused (status `pruned`,
--     its checkpoints kept). A paused trial that later is in that top part is
--     promoted before any new trial starts: it resumes from its checkpoint
--     (--resume) and ends bit-identical to a trial never paused.
--
-- A decision is journal events written by the trial under the lock (finish with
-- status "pruned" and, for asha, "rung"; the agent writes "promote"), after which
-- the trial checkpoints and ends (dl.train's status "stopped"); the agent finds
-- the finish already written. Decisions survive a SIGKILL of the agent; seed
-- re-runs are never pruned. Pruning is for exploitation: exploration
-- (quasirandom, random, grid) needs complete trials (playbook 2.2), and the study
-- says so when one prunes.
local util = require "dlua.util"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local algorithms = require "dlua.search.algorithms"
local core = require "dlua.core"
local common = require "dlua.study.common"
local journal = require "dlua.study.journal"

local M = {}

local better = common.better

--- The keys of the prune table (dl.study's option check).
M.SPEC = {algorithm = true, warmup = true, min_trials = true, min_steps = true, reduction = true}

--- The warning of a study that prunes while exploring (nil when it does not): a
-- non-adaptive algorithm (its row in dlua.search.algorithms) explores.
function M.exploration_warning(study)
  local row = algorithms.ALGORITHMS[study.algorithm]
  if not study.prune or not row or row.adaptive then return nil end
  return string.format("the %s study prunes trials (%s): an exploration study needs complete trials to show " ..
    "which hyperparameters matter (playbook 2.2, FAQ 'why quasi-random search'); prune in the exploitation " ..
    "(bayes) phase", study.algorithm, study.prune.algorithm)
end

--- check(p, study, fail, warn) -> the prune settings as plain data:
-- {algorithm, warmup, min_trials} or {algorithm, min_steps, reduction, rungs}.
-- fail(msg) raises; warn(msg) keeps a warning.
function M.check(p, study, fail, warn)
  if type(p) ~= "table" then fail("dl.study: prune must be a table, e.g. {algorithm = \"median\"}") end
  local alg = p.algorithm
  if alg ~= "median" and alg ~= "asha" then
    local near = type(alg) == "string" and util.nearest(alg, {"asha", "median"})
    fail(string.format("dl.study: prune.algorithm must be \"median\" or \"asha\", got %s%s", tostring(alg),
      near and ("; did you mean '" .. near .. "'?") or ""))
  end
  local function int(key, min, default)
    local v = p[key]
    if v == nil then return default end
    local why, n = util.integer_problem(v, min)
    if why then fail(string.format("dl.study: prune.%s %s", key, why)) end
    return n
  end
  local out = {algorithm = alg}
  if alg == "median" then
    for _, k in ipairs({"min_steps", "reduction"}) do
      if p[k] ~= nil then fail(string.format("dl.study: prune.%s belongs to asha, not median", k)) end
    end
    out.warmup, out.min_trials = int("warmup", 0, 0), int("min_trials", 1, 3)
  else
    for _, k in ipairs({"warmup", "min_trials"}) do
      if p[k] ~= nil then fail(string.format("dl.study: prune.%s belongs to median, not asha", k)) end
    end
    out.min_steps = int("min_steps", 1, nil)
    if not out.min_steps then fail("dl.study: prune.min_steps is required for asha (the first rung's steps)") end
    local r = p.reduction == nil and 3 or p.reduction
    if type(r) ~= "number" or r <= 1 then
      fail("dl.study: prune.reduction must be a number > 1, got " .. tostring(p.reduction))
    end
    out.reduction = r
    local max = study.max_steps
    if not max then fail("dl.study: prune asha needs the trials' step budget (steps = N in the study)") end
    local rungs = M.rungs(out, max)
    if #rungs == 0 then
      fail(string.format("dl.study: prune.min_steps = %d is not below the step budget %d: no rung", out.min_steps, max))
    end
    out.rungs = rungs
  end
  local w = M.exploration_warning({prune = out, algorithm = study.algorithm})
  if w then warn(w) end
  return out
end

--- rungs(p, max) -> the asha rungs' step budgets: p.min_steps * p.reduction^k
-- (rounded) below max.
function M.rungs(p, max)
  local rungs, s = json.array(), p.min_steps
  while s < max do
    rungs[#rungs + 1] = math.floor(s + 0.5)
    s = s * p.reduction
  end
  return rungs
end

--- curve(dir, metric) -> {{step, value}, ...}: the objective at every eval of
-- the run directory dir, by step (a NaN is left out; a step logged twice keeps
-- its last value).
function M.curve(dir, metric)
  local split, field = "eval", metric
  local tm = metric:match("^train/(.+)$")
  if tm then split, field = "train", tm end
  local by, steps = {}, {}
  for line in (fs.read(dir .. "/metrics.jsonl") or ""):gmatch("[^\n]+") do
    local e = json.decode(line)
    if type(e) == "table" and e.split == split and math.type(e.step) == "integer" then
      local v = e[field]
      if type(v) == "number" and v == v then
        if by[e.step] == nil then steps[#steps + 1] = e.step end
        by[e.step] = v
      end
    end
  end
  table.sort(steps)
  local out = json.array()
  for i, s in ipairs(steps) do out[i] = json.array({s, by[s]}) end
  return out
end

local function value_at(curve, step)
  for _, p in ipairs(curve or {}) do if p[1] == step then return p[2] end end
end

--- median(values) -> the median of a non-empty list of numbers.
function M.median(vals)
  local s = util.copy(vals)
  table.sort(s)
  local n = #s
  if n % 2 == 1 then return s[(n + 1) // 2] end
  return (s[n // 2] + s[n // 2 + 1]) / 2
end

--- median_rule(p, mode, curve, completed, from) -> nil, or {step, value, median,
-- n}: the first eval step of curve after from (and after p.warmup) where the
-- trial's objective is worse than the median of the completed curves' values at
-- that step, with at least p.min_trials of them.
function M.median_rule(p, mode, curve, completed, from)
  for _, pt in ipairs(curve) do
    local step, v = pt[1], pt[2]
    if step > (from or -1) and step > p.warmup then
      local vals = {}
      for _, c in ipairs(completed) do
        local x = value_at(c, step)
        if x ~= nil then vals[#vals + 1] = x end
      end
      if #vals >= p.min_trials then
        local m = M.median(vals)
        if better(m, v, mode) and m ~= v then return {step = step, value = v, median = m, n = #vals} end
      end
    end
  end
end

--- rung_value(curve, budget) -> the objective and its step at the last eval at or
-- before the rung's step budget, once the curve has an eval at or past it (else
-- nil); when no eval lies at or before the rung (evals sparser than the first
-- rung: eval_every 400, min_steps 200), the first eval past it, so the rung is
-- judged late rather than never.
function M.rung_value(curve, budget)
  local last = curve[#curve]
  if not last or last[1] < budget then return nil end
  local v, s
  for _, pt in ipairs(curve) do if pt[1] <= budget then v, s = pt[2], pt[1] end end
  if v == nil then
    for _, pt in ipairs(curve) do if pt[1] >= budget then return pt[2], pt[1] end end
  end
  return v, s
end

--- in_top(records, id, reduction, mode) -> is trial id among the best
-- floor(#records / reduction) of the rung's records {trial, value} (ties: by id)?
function M.in_top(records, id, reduction, mode)
  local list = util.copy(records)
  table.sort(list, function(a, b)
    if a.value == b.value then return a.trial < b.trial end
    return better(a.value, b.value, mode)
  end)
  local k = math.floor(#list / reduction)
  for i = 1, k do if list[i].trial == id then return true end end
  return false
end

--- promotable(study, st, group) -> the ids of paused trials (of group, or of every
-- group when nil) that the asha rule now promotes, best first within each rung,
-- top rung first.
function M.promotable(study, st, group)
  local p = study.prune
  if not p or p.algorithm ~= "asha" then return {} end
  local out = {}
  for k = #p.rungs, 1, -1 do
    for gi, records in pairs(st.rungs[k] or {}) do
      if group == nil or group == gi then
        for _, r in ipairs(records) do
          local t = st.trials[r.trial]
          local f = t and t.finish
          if f and f.status == "pruned" and f.rung == k and M.in_top(records, r.trial, p.reduction, study.objective.mode)
          then
            out[#out + 1] = r.trial
          end
        end
      end
    end
  end
  return out
end

--------------------------------------------------------- judged in the trial

-- the rule on trial tr's curve (tr: {trial, group}; the journal events under the
-- lock, append writes one): nil, or the decision {step, value, message[, rung]};
-- asha appends a rung event for each rung newly reached
local function decide(p, objective, tr, curve, events, append)
  local st = journal.replay(events)
  local mode, metric = objective.mode, objective.metric
  if p.algorithm == "median" then
    local done = {}
    for _, x in pairs(st.trials) do
      local f = x.finish
      if f and f.status == "done" and f.group == tr.group and f.kind ~= "seed" and f.curve then
        done[#done + 1] = f.curve
      end
    end
    local m = M.median_rule(p, mode, curve, done)
    if m then
      return {step = m.step, value = m.value, message = string.format("pruned at step %d: %s %.6g is worse than " ..
        "the median %.6g of %d completed trial(s)", m.step, metric, m.value, m.median, m.n)}
    end
    return nil
  end
  local s = st.trials[tr.trial]
  for k, budget in ipairs(p.rungs) do
    if not (s.rungs and s.rungs[k]) then
      local v, vs = M.rung_value(curve, budget)
      if v == nil then break end
      append({event = "rung", trial = tr.trial, group = tr.group, rung = k, step = vs, value = v})
      local records = journal.replay(events).rungs[k][tr.group]
      if not M.in_top(records, tr.trial, p.reduction, mode) then
        return {step = vs, value = v, rung = k, message = string.format("paused at rung %d (%d steps): %s %.6g " ..
          "is not in the top 1/%g of the %d trial(s) there", k, budget, metric, v, p.reduction, #records)}
      end
    end
  end
end

--- trial_settings(study_dir, record, study) -> what a trial needs to judge itself
-- (the agent writes it as JSON into the trial's directory and passes `--prune
-- FILE`): the study directory, the trial's finish record (trial, owner, group,
-- kind, dir, hp, ...: the fields of its finish event the agent knows), the
-- objective and the prune settings.
function M.trial_settings(study_dir, record, study)
  return {study = study_dir, record = record, prune = study.prune,
          objective = {metric = study.objective.metric, mode = study.objective.mode}}
end

--- judge(path) -> on_eval, dl.train's hook for a study trial (path: the file of
-- M.trial_settings). At each eval step the hook takes the journal's lock and,
-- while the trial's claim is still its agent's, applies the rule; when the rule
-- stops the trial it writes the finish event (status "pruned") and returns the
-- reason, and dl.train checkpoints and stops. The median rule judges the
-- objective at the eval (its last value at or before the step) once; asha each
-- rung once. Returns nil (no hook) with a warning on stderr when the study's
-- journal is not reachable from this process (an MPI rank on a host without the
-- study's file system): that trial runs to its end.
function M.judge(path)
  local cfg = json.decode(fs.read(path) or "")
  local rec = type(cfg) == "table" and cfg.record
  if type(rec) ~= "table" or type(cfg.study) ~= "string" or type(cfg.prune) ~= "table" or
     type(cfg.objective) ~= "table" or type(rec.trial) ~= "string" or type(rec.dir) ~= "string" then
    error("--prune: " .. path .. " is not a study trial's pruning settings (dlua.study.prune.trial_settings)", 0)
  end
  local j = journal.open(cfg.study)
  if not fs.exists(j.path) then
    io.stderr:write(string.format("dlua: warning: --prune: the study's journal %s is not reachable from here; " ..
      "this trial is not judged and runs to its end\n", j.path))
    return nil
  end
  local p, objective, t0, judged = cfg.prune, cfg.objective, core.clock(), nil
  return function(step)
    local curve, cur = json.array(), nil
    for _, pt in ipairs(M.curve(rec.dir, objective.metric)) do
      if pt[1] <= step then curve[#curve + 1] = pt; cur = pt end
    end
    if not cur or (p.algorithm == "median" and judged and cur[1] <= judged) then return nil end
    judged = cur[1]
    local d = j:locked(function(events, append)
      local s = journal.replay(events).trials[rec.trial]
      if not s or s.owner ~= rec.owner or not s.running then return nil end   -- the claim passed on
      local d = decide(p, objective, rec, p.algorithm == "median" and {cur} or curve, events, append)
      if d then
        local e = util.copy(rec)
        e.event, e.status, e.value, e.step, e.steps = "finish", "pruned", d.value, d.step, step
        e.wall, e.message, e.rung, e.curve = core.clock() - t0, d.message, d.rung, curve
        append(e)
      end
      return d
    end)
    return d and d.message or nil
  end
end

return M
