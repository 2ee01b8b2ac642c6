--- dlua.report.stats: the statistics of the report and the diagnosis, on plain
-- numbers and trial tables (no files): quantiles, least squares, the bootstrap
-- of the best value vs the number of trials, positions and buckets in a
-- dimension's sampling scale, robust y-ranges for many curves
-- and the Pareto front of two objectives.
-- dlua.report.analysis re-exports every function (A.quantile, A.bucket, ...).
local util = require "dlua.util"
local search = require "dlua.search"

local M = {}

local finite = util.finite
M.finite = finite

--- Is a better than b under mode (b == nil: any finite a is better)?
function M.better(a, b, mode)
  if not finite(a) then return false end
  if b == nil then return true end
  if mode == "min" then return a < b end
  return a > b
end
------------------------------------------------------------------ statistics

--- Quantile p in [0, 1] of a list (linear interpolation between order
-- statistics, numpy's default); nil for an empty list.
function M.quantile(values, p)
  local v = {}
  for _, x in ipairs(values) do if finite(x) then v[#v + 1] = x end end
  if #v == 0 then return nil end
  table.sort(v)
  local h = (#v - 1) * p + 1
  local lo = math.floor(h)
  local hi = math.min(#v, lo + 1)
  return v[lo] + (h - lo) * (v[hi] - v[lo])
end

function M.mean(values)
  local s, n = 0, 0
  for _, x in ipairs(values) do if finite(x) then s, n = s + x, n + 1 end end
  return n > 0 and s / n or nil
end

--- Least-squares line through (xs, ys): slope, intercept, residual standard
-- deviation (n - 2 degrees of freedom; nil below 3 points).
function M.linear_fit(xs, ys)
  local n = #xs
  if n < 2 then return 0, ys[1] or 0, nil end
  local mx, my = 0, 0
  for i = 1, n do mx, my = mx + xs[i], my + ys[i] end
  mx, my = mx / n, my / n
  local sxx, sxy = 0, 0
  for i = 1, n do sxx, sxy = sxx + (xs[i] - mx) ^ 2, sxy + (xs[i] - mx) * (ys[i] - my) end
  local slope = sxx > 0 and sxy / sxx or 0
  local icpt = my - slope * mx
  if n < 3 then return slope, icpt, nil end
  local ss = 0
  for i = 1, n do ss = ss + (ys[i] - (icpt + slope * xs[i])) ^ 2 end
  return slope, icpt, math.sqrt(ss / (n - 2))
end

--- Bootstrap of the best value vs the number of trials (playbook FAQ "how many
-- trials", Figure 3): values is the list of a group's trials, a number for a
-- feasible trial and false for an infeasible one. For each k in ks, R samples
-- of k trials drawn with replacement; the best feasible value of each sample.
-- Returns {{k =, q1 =, median =, q3 =, none = fraction of samples without a
-- feasible trial}, ...}. Seeded (opts.seed, default 0): the same input gives
-- the same numbers.
function M.bootstrap(values, opts)
  opts = opts or {}
  local n = #values
  local mode = opts.mode or "max"
  local R = opts.samples or 500
  local rng = search.rng("bootstrap", opts.seed or 0, n)
  local ks = opts.ks
  if not ks then
    ks = {}
    local k = 1
    while k < n do
      ks[#ks + 1] = k
      k = math.max(k + 1, math.floor(k * 1.5 + 0.5))
    end
    ks[#ks + 1] = n
  end
  local out = {}
  for _, k in ipairs(ks) do
    local bests, none = {}, 0
    for _ = 1, R do
      local best
      for _ = 1, k do
        local v = values[rng:int(n) + 1]
        if v and M.better(v, best, mode) then best = v end
      end
      if best == nil then none = none + 1 else bests[#bests + 1] = best end
    end
    out[#out + 1] = {k = k, q1 = M.quantile(bests, 0.25), median = M.quantile(bests, 0.5),
                     q3 = M.quantile(bests, 0.75), none = none / R}
  end
  return out
end

--- The position of v in a dimension's sampling scale, in [0, 1]: log for
-- log-scaled ones, the value's cell for discrete ones. nil when unknown.
function M.unit(dim, v)
  if v == nil then return nil end
  if dim.values then
    for i, x in ipairs(dim.values) do
      if x == v then return #dim.values > 1 and (i - 1) / (#dim.values - 1) or 0.5 end
    end
    return nil
  end
  if type(v) ~= "number" or not finite(dim.lo) or not finite(dim.hi) or dim.hi <= dim.lo then return nil end
  if dim.log then
    if v <= 0 or dim.lo <= 0 then return nil end
    return (math.log(v) - math.log(dim.lo)) / (math.log(dim.hi) - math.log(dim.lo))
  end
  return (v - dim.lo) / (dim.hi - dim.lo)
end

--- Bucket index (1..n) of v in a continuous dimension: equal-width buckets
-- of its sampling scale between its bounds (log scale for log-scaled ones).
function M.bucket(dim, v, n)
  local u = M.unit(dim, v)
  if u == nil then return nil end
  return math.max(1, math.min(n, math.floor(u * n) + 1))
end

--- The value at the edge of bucket b (0..n) of a continuous dimension.
function M.bucket_edge(dim, b, n)
  local u = b / n
  if dim.log then return math.exp(math.log(dim.lo) + u * (math.log(dim.hi) - math.log(dim.lo))) end
  return dim.lo + u * (dim.hi - dim.lo)
end

--- Does dimension dim apply to hyperparameters hp (its conditions hold)?
function M.active(dim, hp)
  if not hp or hp[dim.name] == nil then return false end
  for parent, vals in pairs(dim.cond or {}) do
    local ok = false
    for _, v in ipairs(vals) do if hp[parent] == v then ok = true end end
    if not ok then return false end
  end
  return true
end

------------------------------------------------------------ report views

--- A y-range for many curves that one diverging trial does not flatten:
-- series is a list of value lists (one per trial). The top (bottom) is the
-- upper (lower) fence over the trials' maxima (minima), Q3 + 3 IQR (Q1 - 3 IQR;
-- the IQR taken as at least 5% of |Q3| (|Q1|), so maxima that nearly agree do
-- not clip a trial a little above them),
-- so the curves' common start stays in view and only trials far above the
-- others are clipped. Returns lo, hi, the list of clipped series indices; with
-- fewer than 4 series nothing is clipped.
function M.robust_range(series)
  local maxs, mins, lo, hi = {}, {}, math.huge, -math.huge
  for i, ys in ipairs(series) do
    local a, b = math.huge, -math.huge
    for _, v in ipairs(ys) do if finite(v) then a, b = math.min(a, v), math.max(b, v) end end
    if b >= a then mins[#mins + 1], maxs[#maxs + 1] = a, b; lo, hi = math.min(lo, a), math.max(hi, b) end
    series[i].min, series[i].max = a, b
  end
  if hi < lo then return nil, nil, {} end
  if #maxs >= 4 then
    local q1, q3 = M.quantile(maxs, 0.25), M.quantile(maxs, 0.75)
    local top = q3 + 3 * math.max(q3 - q1, 0.05 * math.abs(q3))
    local p1, p3 = M.quantile(mins, 0.25), M.quantile(mins, 0.75)
    local bottom = p1 - 3 * math.max(p3 - p1, 0.05 * math.abs(p1))
    hi, lo = math.min(hi, top), math.max(lo, bottom)
  end
  local clipped = {}
  for i, ys in ipairs(series) do if ys.max > hi or ys.min < lo then clipped[#clipped + 1] = i end end
  return lo, hi, clipped
end

--- The non-dominated trials of two objectives {{metric =, mode =}, {...}}:
-- points = {{trial =, x =, y =}} (every trial with both values), front = the
-- indices into points on the Pareto front (dl.search.pareto_front: equal points
-- are on it together), sorted by x.
function M.pareto(points, modes)
  local vals = {}
  for i, p in ipairs(points) do vals[i] = {p.x, p.y} end
  for i = 1, 2 do
    if modes[i] ~= "min" and modes[i] ~= "max" then
      error(string.format('report.pareto: mode %d must be "min" or "max", got %s', i, tostring(modes[i])), 2)
    end
  end
  local front = search.pareto_front(vals, {modes[1], modes[2]})
  table.sort(front, function(a, b) return points[a].x < points[b].x end)
  return front
end

return M
