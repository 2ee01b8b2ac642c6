--- dlua.report.data: what the interactive page's script draws, as one table
-- written into the page as a JavaScript literal (M.encode):
--   {title, kind, metric, mode, aggregate, top,
--    trials = {{id, status, value, step, rank, order, pruned, rung, feasible, kind, color, best}},
--    curves = {{id, metric, title, single, x = {...}, series = {{t = trial index (0-based), y = {...}}},
--               lo, hi, clipped = {trial indices}, minpos}},
--    series = {groups = {{id, name, label, metrics = {names}}}, curves = {[name] = curve plot}}}
-- curves are the plots drawn at once (training loss, the objective, its loss);
-- series holds every scalar series any trial logged (dlua.report.analysis
-- names them: train/X, <set>/<metric>, ema/..., <set>/per_class/<k>,
-- data/...), grouped by prefix (M.group_of), each a curve plot the page draws
-- when it is picked in its group's figure.
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

-- the groups of the logged series, in the order the page shows them
local GROUP_RANK = {train = 1, lr = 2, valid = 3, test = 4, ema = 90, ["per-class"] = 91, speed = 92, data = 93}
local GROUP_LABEL = {train = "training loss and gradients (train log lines)", lr = "learning rate",
  ema = "averaged weights (EMA)", ["per-class"] = "per-class accuracy", speed = "throughput", data = "input data"}

--- The group of a series name: "per-class" (<set>/per_class/<k>), "lr"
-- (train/lr), "ema" (ema/...), "speed" (train/examples_per_s,
-- train/time_per_step), else its prefix ("train", "valid", "test", "data",
-- any eval set's name), "other" without one.
function M.group_of(name)
  if name:match("/per_class/%d+$") then return "per-class" end
  if name == "train/lr" then return "lr" end
  if name:match("^ema/") then return "ema" end
  if name == "train/examples_per_s" or name == "train/time_per_step" then return "speed" end
  return name:match("^([^/]+)/") or "other"
end

local function series_label(name)
  local set, k = name:match("^(.-)/per_class/(%d+)$")
  if set then return string.format("%s: accuracy of class %s", set, k) end
  return name
end

-- every series any trial logged, grouped: {groups =, curves =}
local function series_model(d)
  local seen, names = {}, {}
  for _, t in ipairs(d.trials) do
    for _, n in ipairs(A.series_names(t)) do if not seen[n] then seen[n] = true; names[#names + 1] = n end end
  end
  table.sort(names, A.name_less)
  local groups, by, curves = {}, {}, {}
  for _, n in ipairs(names) do
    local c = curve_plot(d, n, series_label(n), d.trials)
    if c then
      c.id = "series-" .. slug(n)
      curves[n] = c
      local g = M.group_of(n)
      if not by[g] then
        by[g] = {id = "group-" .. slug(g), name = g, label = GROUP_LABEL[g] or ("eval set " .. g), metrics = {}}
        groups[#groups + 1] = by[g]
      end
      by[g].metrics[#by[g].metrics + 1] = n
    end
  end
  table.sort(groups, function(a, b)
    local ra, rb = GROUP_RANK[a.name] or 10, GROUP_RANK[b.name] or 10
    if ra ~= rb then return ra < rb end
    return a.name < b.name
  end)
  for _, g in ipairs(groups) do g.metrics = M.list(g.metrics) end
  return {groups = M.list(groups), curves = curves}
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
    trials = M.list(trials), curves = M.list(curves), series = series_model(d)}
end

return M
