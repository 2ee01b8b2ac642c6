--- dlua.study.importance: per-hyperparameter importance of a study's finished
-- trials. A local stand-in for dl.search.importance(space, history), which the
-- search package is adding; once that lands on main, dlua.study.results calls it
-- and this file goes (same contract).
--
--   importance(space, history [, context]) -> nil (fewer than d + 2 feasible
--   observations, or nothing sampled) or {
--     {name =, gp =, fanova =}, ...}   -- one per nuisance name, by gp, largest first
--   gp:      the fitted GP's inverse squared length scales (ARD), summed over a
--            name's features (a choice's one-hot block, a switch's branches),
--            as fractions of their total: a dimension the objective ignores
--            gets a long length scale, so a share near 0.
--   fanova:  model-free, the first-order share of the variance (fANOVA-style
--            main effect by binning): the variance of the per-bin means of the
--            objective along the name's coordinate (bins: its values for
--            discrete dimensions, else min(5, n / 3) equal cells) over the
--            total variance; 0 when all values are equal.
-- history: {{u =, value = number or nil}}; infeasible (nil) entries are left out.
local gp = require "dlua.search.gp"

local M = {}

local function variance(ys)
  local n, s = #ys, 0
  for _, y in ipairs(ys) do s = s + y end
  local m = s / n
  local q = 0
  for _, y in ipairs(ys) do q = q + (y - m) ^ 2 end
  return q / n, m
end

-- the share of the variance of ys that the bins of coordinate k explain
local function main_effect(us, ys, k, levels)
  local total, mean = variance(ys)
  if total <= 0 then return 0 end
  local nb = levels or math.max(2, math.min(5, #ys // 3))
  local sum, cnt = {}, {}
  for i, u in ipairs(us) do
    local b = math.min(nb - 1, math.floor((u[k] or 0.5) * nb))
    sum[b] = (sum[b] or 0) + ys[i]
    cnt[b] = (cnt[b] or 0) + 1
  end
  local between = 0
  for b, c in pairs(cnt) do between = between + c * (sum[b] / c - mean) ^ 2 end
  return between / #ys / total
end

function M.importance(space, history, context)
  local X, y, us = {}, {}, {}
  for _, h in ipairs(history) do
    if h.value ~= nil and h.value == h.value then
      X[#X + 1] = space:encode(h.u, context)
      y[#y + 1] = h.value
      us[#us + 1] = h.u
    end
  end
  if space.d == 0 or #y < space.d + 2 then return nil end
  local ok, model = pcall(gp.fit, X, y, {dim = space.features})
  local theta = ok and model.theta or nil
  local by, names = {}, {}
  for _, d in ipairs(space.dims) do
    local e = by[d.name]
    if not e then e = {name = d.name, gp = 0, fanova = 0}; by[d.name] = e; names[#names + 1] = d.name end
    local width = d.param.kind == "choice" and #d.param.values or 1
    for f = d.feature, d.feature + width - 1 do
      if theta then e.gp = e.gp + math.exp(-2 * theta[f]) end
    end
    e.fanova = e.fanova + main_effect(us, y, d.index, d.param:levels())
  end
  local total = 0
  for _, e in pairs(by) do total = total + e.gp end
  local out = {}
  for _, n in ipairs(names) do
    local e = by[n]
    e.gp = (theta and total > 0) and e.gp / total or nil
    e.fanova = math.min(1, e.fanova)
    out[#out + 1] = e
  end
  table.sort(out, function(a, b)
    local ka, kb = a.gp or a.fanova, b.gp or b.fanova
    if ka == kb then return a.name < b.name end
    return ka > kb
  end)
  return out
end

return M
