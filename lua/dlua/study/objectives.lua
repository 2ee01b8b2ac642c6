--- dlua.study.objectives: what a study optimises. One objective,
--   objective = {metric = "valid/accuracy", mode = "max"}   (or a metric name alone),
-- or several, each a different metric:
--   objective = {{metric = "valid/accuracy", mode = "max"}, {metric = "train/time_per_step", mode = "min"}}
-- The first of a list is the primary objective: the per-scientific-value best,
-- the seed re-runs, the adoption test and the progress line use it, as they use
-- the one objective of a single-objective study. Every completed trial has a
-- value of each objective (each the best over the trial's evals by its own mode,
-- or the final one), and the results list the Pareto front: the completed trials
-- no other completed trial dominates (dl.search.pareto_front; trials with equal
-- values are on it together and say so). This file checks the option and
-- computes and prints fronts; reading values from run directories is
-- dlua.study.results', choosing points the algorithm row's (bayes: EHVI or ParEGO).
local search = require "dlua.search"
local common = require "dlua.study.common"

local M = {}

--- The keys of one objective (dl.study's option check).
M.ENTRY = {metric = true, mode = true}

-- one entry of a list of objectives: {metric =, mode =}, or any other value for M.check
-- to judge (a metric name; anything else is its error, naming objective[i])
local LIST_ENTRY = {metric = true, mode = true, ["|"] = "any"}

--- spec_of(obj) -> the option spec of the value of objective (util.check_options):
-- M.ENTRY for one objective, one entry spec per entry of a list (the keys of M.ENTRY
-- too, so a table mixing both forms reaches M.check's message); any other value
-- (a metric name, or a wrong one) is M.check's to judge.
function M.spec_of(obj)
  if type(obj) ~= "table" then return true end
  if obj[1] == nil then return M.ENTRY end
  local s = {metric = true, mode = true}
  for i = 1, #obj do s[i] = LIST_ENTRY end
  return s
end

local REQUIRED = "dl.study: objective = {metric = \"valid/accuracy\", mode = \"max\"} is required"

-- one objective (a metric name or {metric, mode}); name is how messages call it
local function entry(o, name, fail)
  if type(o) == "string" then o = {metric = o} end
  if type(o) ~= "table" or type(o.metric) ~= "string" then return nil end
  local mode = o.mode or common.default_mode(o.metric)
  if mode ~= "max" and mode ~= "min" then
    fail(string.format("dl.study: %s.mode must be \"max\" or \"min\" (got %s for metric %s)", name,
      tostring(o.mode), o.metric))
  end
  return {metric = o.metric, mode = mode}
end

--- check(obj, fail) -> the objectives as a list of {metric, mode} (one entry for
-- a single objective). fail(msg) raises. A mode left out is the metric's
-- default (common.default_mode: min for *loss / *error, max for *accuracy /
-- *topK), else an error.
function M.check(obj, fail)
  if type(obj) ~= "table" or obj[1] == nil then
    local o = entry(obj, "objective", fail)
    if not o then
      fail(obj == nil and REQUIRED or (REQUIRED .. " (or a metric name alone), got " ..
        (type(obj) == "table" and "a table without metric" or tostring(obj))))
    end
    return {o}
  end
  if obj.metric ~= nil or obj.mode ~= nil then
    fail("dl.study: objective is either {metric =, mode =} or a list of them, not both in one table")
  end
  local out, seen = {}, {}
  for i = 1, #obj do
    local name = string.format("objective[%d]", i)
    local o = entry(obj[i], name, fail)
    if not o then
      fail(string.format("dl.study: %s must be a metric name or {metric = \"valid/accuracy\", mode = \"max\"}, " ..
        "got %s", name, type(obj[i])))
    end
    if seen[o.metric] then
      fail(string.format("dl.study: %s repeats metric %s (objective[%d]); each objective is another metric", name,
        o.metric, seen[o.metric]))
    end
    seen[o.metric] = i
    out[i] = o
  end
  return out
end

--- modes(objectives) -> their modes, in order.
function M.modes(objectives)
  local out = {}
  for i, o in ipairs(objectives) do out[i] = o.mode end
  return out
end

--- same(a, b) -> do two lists of objectives name the same metrics and modes, in order?
function M.same(a, b)
  if type(a) ~= "table" or type(b) ~= "table" or #a ~= #b then return false end
  for i = 1, #a do
    if type(a[i]) ~= "table" or a[i].metric ~= b[i].metric or a[i].mode ~= b[i].mode then return false end
  end
  return true
end

--- of_record(rec) -> the objectives of a study record (study.json): its
-- objectives list, else its one objective.
function M.of_record(rec)
  if type(rec.objectives) == "table" and #rec.objectives > 0 then return rec.objectives end
  return {rec.objective}
end

--- front(trials, objectives) -> the Pareto front of trials (each with .values,
-- one number per objective, and .id): a list of {trial, ties = ids of the
-- other trials with the same values, or nil}, by the primary objective, best
-- first (ties by id).
function M.front(trials, objectives)
  local modes = M.modes(objectives)
  local pts = {}
  for i, t in ipairs(trials) do pts[i] = t.values end
  local idx, ties = search.pareto_front(pts, modes)
  local out = {}
  for _, i in ipairs(idx) do
    local tied
    for _, j in ipairs(ties[i] or {}) do tied = tied or {}; tied[#tied + 1] = trials[j].id end
    if tied then table.sort(tied) end
    out[#out + 1] = {trial = trials[i], ties = tied}
  end
  table.sort(out, function(a, b)
    local x, y = a.trial.values[1], b.trial.values[1]
    if x == y then return a.trial.id < b.trial.id end
    return common.better(x, y, modes[1])
  end)
  return out
end

--- format_front(res, short_hp) -> the lines of the Pareto front of
-- dl.study_results' res (res.objectives, res.front, res.completed); short_hp(t)
-- is a trial's nuisance values as text.
function M.format_front(res, short_hp)
  local names = {}
  for i, o in ipairs(res.objectives) do names[i] = string.format("%s (%s)", o.metric, o.mode) end
  local lines = {string.format("Pareto front by %s (%s over evals): %d of %d completed trial(s)",
    table.concat(names, ", "), res.aggregate, #res.front, res.completed)}
  local head = {string.format("  %-28s %-24s", "trial", "scientific")}
  for _, o in ipairs(res.objectives) do head[#head + 1] = string.format("%14s", o.metric) end
  head[#head + 1] = "  nuisance"
  lines[#lines + 1] = table.concat(head, " ")
  for _, e in ipairs(res.front) do
    local t = e.trial
    local g = res.groups[t.group]
    local row = {string.format("  %-28s %-24s", t.id, g and g.label or "-")}
    for j = 1, #res.objectives do row[#row + 1] = string.format("%14s", string.format("%.6g", t.values[j])) end
    row[#row + 1] = "  " .. short_hp(t) .. (e.ties and ("  (same values as " .. table.concat(e.ties, ", ") .. ")") or "")
    lines[#lines + 1] = table.concat(row, " ")
  end
  return lines
end

--- record(front) -> the front as plain data for results.json: {{id, group, values, ties}}.
function M.record(front)
  local out = {}
  for i, e in ipairs(front) do
    local vals = {}
    for j, v in ipairs(e.trial.values) do vals[j] = v end
    out[i] = {id = e.trial.id, group = e.trial.group, values = vals, ties = e.ties}
  end
  return out
end

return M
