--- dlua.study.fidelity: the bayes GP's observations in a pruned study with
-- prune.model = "rungs" (BOHB-like multi-fidelity). By default (model "final")
-- the GP sees each finished trial's objective, and a pruned trial as an
-- infeasible point, so while few trials have run their whole budget the model
-- has few values. With "rungs" the GP is fitted at one budget: the largest of
-- the rungs' step budgets (of any hyperband bracket) and the trials' full budget
-- at which at least `need` finished trials have a value (BOHB fits its model at
-- the largest budget with enough observations). A trial's value at a rung is its
-- objective there as pruning recorded it (dlua.study.prune.rung_value of the
-- curve in its finish event); at the full budget a completed trial's objective.
-- A trial that stopped below that budget, diverged or failed is infeasible there.
local util = require "dlua.util"
local prune = require "dlua.study.prune"

local M = {}

--- need(d) -> the values a budget needs before the GP is fitted there: d + 2 in a
-- d-dimensional space (BOHB's default minimum is d + 1).
function M.need(d) return d + 2 end

--- budgets(p, max) -> the step budgets a trial of prune settings p can have a
-- value at, ascending: every rung (asha's, or every hyperband bracket's) and max.
function M.budgets(p, max)
  local set = {[max] = true}
  for _, br in ipairs(p.brackets or {{rungs = p.rungs or {}}}) do
    for _, s in ipairs(br.rungs) do set[s] = true end
  end
  return util.sorted_keys(set)
end

-- trial f's value at budget b (max: the full budget), or nil
local function value_at(f, b, max)
  if b == max then return f.status == "done" and f.value or nil end
  local v = f.curve and prune.rung_value(f.curve, b)
  if v ~= nil and (f.status == "done" or (f.steps or f.step or 0) >= b) then return v end
end

--- history(p, max, finished, need) -> hist, budget: the GP's history and the
-- budget it is taken at. finished: {{u =, status =, value =, curve =, steps =}}
-- (the group's finished search trials: status done, pruned, diverged or
-- failed; curve {{step, value}}); need: the values a budget must have. Below
-- `need` at every budget the history is the default one (done trials' values,
-- the others infeasible) at the full budget.
function M.history(p, max, finished, need)
  local budgets = M.budgets(p, max)
  local pick = max
  for i = #budgets, 1, -1 do
    local n = 0
    for _, f in ipairs(finished) do if value_at(f, budgets[i], max) ~= nil then n = n + 1 end end
    if n >= need then pick = budgets[i]; break end
  end
  local hist = {}
  for _, f in ipairs(finished) do hist[#hist + 1] = {u = f.u, value = value_at(f, pick, max)} end
  return hist, pick
end

return M
