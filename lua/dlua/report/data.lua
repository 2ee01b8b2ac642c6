--- dlua.report.data: what the interactive page's script draws, as one table
-- written into the page as a JavaScript literal (M.encode):
--   {title, kind, metric, mode, aggregate, top,
--    trials = {{id, status, value, step, rank, order, pruned, rung, feasible, kind, color, best}},
--    curves = {{id, metric, title, single, x = {...}, series = {{t = trial index (0-based), y = {...}}},
--               lo, hi, clipped = {trial indices}, minpos}}}
-- A curve plot has one x array (the union of the steps every trial logged,
-- or, when no trial has more than one point, the trials' numbers: a study that
-- evaluates once per trial gets its values against the trial, not a column of
-- dots at one step) and per trial a y array aligned with it (null where the
-- trial has no value). lo and hi are the robust y-range (dlua.report.stats:
-- one diverging trial does not flatten the others); clipped lists the trials
-- that leave it. Values are written exactly (dlua.util.json: the shortest of
-- %.15g / %.17g that reads back the same), so a tooltip shows what metrics.jsonl holds.
local A = require "dlua.report.analysis"
local svg = require "dlua.report.svg"
local json = require "dlua.util.json"

local M = {}

local PALETTE = svg.PALETTE

--------------------------------------------------------------------- encoding

--- Marks t as an array of n entries (nil entries are written as null).
function M.list(t, n) return json.array(t, n or #t) end

--- The JavaScript literal of v (JSON, safe inside a <script> element).
function M.encode(v) return json.encode(v, {script = true}) end

------------------------------------------------------------------------ model

local function slug(s) return (tostring(s):gsub("[^%w]+", "-"):gsub("^%-+", ""):gsub("%-+$", "")) end

local function curve_metrics(d)
  local out, seen = {}, {}
  local function add(m, label)
    if not seen[m] then seen[m] = true; out[#out + 1] = {m, label} end
  end
  add("train/loss", "training loss")
  add(d.metric, d.metric)
  local lm = A.loss_metric(d)
  if lm then add(lm, lm) end
  return out
end

-- one curve plot, or nil when no trial logged the metric
local function curve_plot(d, metric, label, trials)
  local per, maxn = {}, 0
  for i, t in ipairs(trials) do
    local xs, ys = A.curve(t, metric)
    if #xs > 0 then per[#per + 1] = {i = i, xs = xs, ys = ys} end
    maxn = math.max(maxn, #xs)
  end
  if #per == 0 then return nil end
  local single = maxn <= 1 and d.kind ~= "run"
  local xset, x = {}, {}
  for _, c in ipairs(per) do
    if single then c.xs = {trials[c.i].order or c.i} end
    for _, s in ipairs(c.xs) do if not xset[s] then xset[s] = true; x[#x + 1] = s end end
  end
  table.sort(x)
  local pos = {}
  for k, s in ipairs(x) do pos[s] = k end
  local series, values = {}, {}
  local minpos = math.huge
  for _, c in ipairs(per) do
    local y = {}
    for k, s in ipairs(c.xs) do
      y[pos[s]] = c.ys[k]
      if c.ys[k] > 0 then minpos = math.min(minpos, c.ys[k]) end
    end
    series[#series + 1] = {t = c.i - 1, y = M.list(y, #x)}
    values[#values + 1] = c.ys
  end
  local lo, hi, clipped = A.robust_range(values)
  local cl = {}
  for _, k in ipairs(clipped) do cl[#cl + 1] = series[k].t end
  return {id = "curves-" .. slug(metric), metric = metric, title = single and (label .. " per trial (one eval each)")
    or (label .. " vs step"), xlabel = single and "trial (in the order they finished)" or "step", single = single,
    x = M.list(x), series = M.list(series), lo = lo, hi = hi, clipped = M.list(cl),
    minpos = minpos < math.huge and minpos or nil}
end

--- The page's data for loaded data d (dlua.report.analysis.load): see the header.
function M.build(d, opts)
  local top = opts.top or 3
  local trials = {}
  for i, t in ipairs(d.trials) do
    local best = t.rank and t.rank <= top and t.kind ~= "seed"
    local color = best and PALETTE[(t.rank - 1) % #PALETTE + 1] or (t.pruned and "#e8a45c") or
      ((not t.feasible) and "#e39a9a") or "#b5b5b5"
    trials[i] = {id = t.id, status = t.status, value = t.value, step = t.step, rank = t.rank, order = t.order or i,
      pruned = t.pruned or false, rung = t.rung, feasible = t.feasible, kind = t.kind, color = color, best = best or false}
  end
  local curves = {}
  for _, m in ipairs(curve_metrics(d)) do
    local c = curve_plot(d, m[1], m[2], d.trials)
    if c then curves[#curves + 1] = c end
  end
  return {kind = d.kind, metric = d.metric, mode = d.mode, aggregate = d.aggregate, top = top,
    trials = M.list(trials), curves = M.list(curves)}
end

return M
