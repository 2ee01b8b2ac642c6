--- dlua.search.pareto: several objectives at once. Which points are
-- non-dominated (the Pareto front), and ParEGO's scalarisation (Knowles 2006),
-- which lets the one-objective bayes search of dlua.search.bayes serve several
-- objectives: every suggestion draws its own weights, turns each observation's
-- objective values into one number, and the GP and expected improvement work on
-- that number as on any objective. Over many suggestions the weights cover the
-- simplex, so the points chosen spread along the whole front instead of one
-- trade-off. This file keeps no state and fits no model.
--
--   local front, ties = pareto.pareto_front({{0.9, 2.0}, {0.8, 1.0}, {0.7, 3.0}}, {"max", "min"})
--   --> {1, 2}, {}          (the third is dominated by the first)
--   local w = pareto.parego_weights(2, seed, step)                 -- e.g. {0.31, 0.69}
--   local scalar = pareto.parego(history, {"max", "min"}, w)       -- {{u =, value =}} to minimise
local util = require "dlua.util"
local rngs = require "dlua.search.rng"

local M = {}

--- rho of the augmented Chebyshev scalarisation (Knowles 2006 uses 0.05): the
-- small weighted sum that makes weakly dominated points score worse.
M.PAREGO_RHO = 0.05

-- modes must be a non-empty list of "min" / "max"; returns their count
local function check_modes(fn, modes)
  if type(modes) ~= "table" or #modes == 0 then
    error(string.format("%s: modes must be a non-empty list of \"min\" or \"max\"", fn), 3)
  end
  for j, m in ipairs(modes) do
    if m ~= "min" and m ~= "max" then
      error(string.format("%s: modes[%d] must be \"min\" or \"max\", got %s", fn, j, tostring(m)), 3)
    end
  end
  return #modes
end

-- values must be a list of k numbers (not NaN)
local function check_values(fn, what, v, k)
  local ok = type(v) == "table" and #v == k
  for j = 1, ok and k or 0 do ok = ok and type(v[j]) == "number" and v[j] == v[j] end
  if not ok then error(string.format("%s: %s must be a list of %d numbers (one per mode)", fn, what, k), 3) end
end

-- a dominates b (both checked): at least as good in every objective and better in one
local function dominates(a, b, modes)
  local strictly = false
  for j, m in ipairs(modes) do
    local x, y = a[j], b[j]
    if m == "min" then x, y = -x, -y end
    if x < y then return false end
    if x > y then strictly = true end
  end
  return strictly
end

--- dominates(a, b, modes) -> true when the values a dominate b: at least as
-- good in every objective (by modes, "min" or "max" each) and better in at least
-- one. Equal values dominate neither way.
-- @usage pareto.dominates({0.9, 1.0}, {0.8, 1.0}, {"max", "min"}) --> true
function M.dominates(a, b, modes)
  local k = check_modes("dl.search.dominates", modes)
  check_values("dl.search.dominates", "a", a, k)
  check_values("dl.search.dominates", "b", b, k)
  return dominates(a, b, modes)
end

--- pareto_front(points, modes) -> front, ties: the indices of the points no
-- other point dominates, ascending, and for each of them that shares its exact
-- values with other front points, ties[i] = those indices (ascending). Equal
-- points are on the front together (neither dominates the other) or off it
-- together. points is a list of value lists, #modes numbers each. O(n^2 k).
-- @usage pareto.pareto_front({{1, 1}, {1, 1}, {2, 2}}, {"min", "min"}) --> {1, 2}, {[1] = {2}, [2] = {1}}
function M.pareto_front(points, modes)
  local fn = "dl.search.pareto_front"
  local k = check_modes(fn, modes)
  if type(points) ~= "table" then error(fn .. ": points must be a list of value lists", 2) end
  for i, p in ipairs(points) do check_values(fn, string.format("points[%d]", i), p, k) end
  local front = {}
  for i, p in ipairs(points) do
    local dominated = false
    for j, q in ipairs(points) do
      if j ~= i and dominates(q, p, modes) then dominated = true; break end
    end
    if not dominated then front[#front + 1] = i end
  end
  local ties = {}
  for _, i in ipairs(front) do
    for _, j in ipairs(front) do
      if i ~= j and not dominates(points[i], points[j], modes) and not dominates(points[j], points[i], modes) then
        local same = true
        for c = 1, k do same = same and points[i][c] == points[j][c] end
        if same then ties[i] = ties[i] or {}; table.insert(ties[i], j) end
      end
    end
  end
  return front, ties
end

--- parego_weights(k, seed, step) -> k weights >= 0 summing to 1, drawn
-- uniformly on the simplex (normalised exponentials) from a stream keyed by
-- (seed, step): suggestion `step` of a study always gets the same weights.
-- Knowles draws from a fixed grid of weight vectors; uniform draws give the
-- same coverage without a grid resolution to choose.
-- @usage pareto.parego_weights(2, 7, 12) --> {w, 1 - w}
function M.parego_weights(k, seed, step)
  k = util.check_integer("dl.search.parego_weights", 1, k, "k", 1, 1000)
  util.check_integer("dl.search.parego_weights", 2, seed, "seed", math.mininteger, math.maxinteger)
  util.check_integer("dl.search.parego_weights", 3, step, "step", math.mininteger, math.maxinteger)
  local r = rngs.rng("parego-weights", seed, step)
  local w, s = {}, 0
  for j = 1, k do
    w[j] = -math.log(1 - r:uniform())                  -- Exp(1); 1 - U is in (0, 1]
    s = s + w[j]
  end
  for j = 1, k do w[j] = s > 0 and w[j] / s or 1 / k end
  return w
end

--- parego(history, modes, weights) -> {{u =, value =}}: history's observations
-- {u =, values = list of #modes numbers, or nil (infeasible)} scalarised for a
-- search that minimises. Each objective is turned into a cost (negated for
-- "max") and normalised to [0, 1] over the feasible observations (an objective
-- with one value throughout is 0); the value is the augmented Chebyshev
--   max_j (w_j z_j) + rho * sum_j (w_j z_j),   rho = M.PAREGO_RHO,
-- whose minima over the weights are the Pareto front (also its non-convex parts,
-- which a plain weighted sum misses). Infeasible observations stay infeasible
-- (value nil). Other fields of each entry are kept.
function M.parego(history, modes, weights)
  local fn = "dl.search.parego"
  local k = check_modes(fn, modes)
  check_values(fn, "weights", weights, k)
  if type(history) ~= "table" then error(fn .. ": history must be a list of {u =, values =}", 2) end
  local lo, hi = {}, {}
  for i, h in ipairs(history) do
    if type(h) ~= "table" then error(string.format("%s: history[%d] must be a table {u =, values =}", fn, i), 2) end
    if h.values ~= nil then
      check_values(fn, string.format("history[%d].values", i), h.values, k)
      for j, m in ipairs(modes) do
        local c = m == "max" and -h.values[j] or h.values[j]
        lo[j], hi[j] = math.min(lo[j] or c, c), math.max(hi[j] or c, c)
      end
    end
  end
  local out = {}
  for i, h in ipairs(history) do
    local e = {}
    for key, v in pairs(h) do e[key] = v end
    e.value = nil
    if h.values ~= nil then
      local mx, sum = -math.huge, 0
      for j, m in ipairs(modes) do
        local c = m == "max" and -h.values[j] or h.values[j]
        local z = hi[j] > lo[j] and (c - lo[j]) / (hi[j] - lo[j]) or 0
        mx, sum = math.max(mx, weights[j] * z), sum + weights[j] * z
      end
      e.value = mx + M.PAREGO_RHO * sum
    end
    out[i] = e
  end
  return out
end

return M
