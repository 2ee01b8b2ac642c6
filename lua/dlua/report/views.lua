--- dlua.report.views: the study-level views of the report beyond the
-- playbook's plots, drawn as inline SVG (dlua.report.svg) so the static and
-- the interactive page share them; every mark of a trial carries
-- data-trial="<id>":
--   - optimisation history: each trial's objective against its number (the
--     order the trials finished in) and the best so far;
--   - hyperparameter importance: the study's own numbers per group
--     (dl.study_results, dl.search.importance), as results.json and the summary show them;
--   - pruned trials: the value each pruned trial had at its rung next to the
--     values the other trials had at that step;
--   - the Pareto front of two objectives (opts.pareto or study.json "objectives").
--
--   local figs = views.history(d)   -- {"<figure ...>"} or {}
local A = require "dlua.report.analysis"
local svg = require "dlua.report.svg"
local search = require "dlua.search"
local util = require "dlua.util"

local M = {}

local esc, fmtn, PALETTE = svg.escape, svg.format_number, svg.PALETTE

local function fv(v) return v == nil and "" or util.fmt4(v) end

--- The optimisation history: {figure} (empty without a feasible trial).
function M.history(d)
  local trials = A.search_trials(d)
  table.sort(trials, function(a, b) return (a.order or 0) < (b.order or 0) end)
  local xs, ys, ids, titles, bx, by, ix, iid, itl = {}, {}, {}, {}, {}, {}, {}, {}, {}
  local best
  for n, t in ipairs(trials) do
    if t.feasible then
      xs[#xs + 1], ys[#ys + 1], ids[#ids + 1] = n, t.value, t.id
      titles[#titles + 1] = string.format("#%d %s: %s = %s", n, t.id, d.metric, fv(t.value))
      if A.better(t.value, best, d.mode) then best = t.value end
    elseif not t.pruned then
      ix[#ix + 1], iid[#iid + 1] = n, t.id
      itl[#itl + 1] = string.format("#%d %s: %s", n, t.id, t.status)
    end
    if best then bx[#bx + 1], by[#by + 1] = n, best end
  end
  if #xs == 0 then return {} end
  -- the best so far as a staircase
  local sx, sy = {}, {}
  for i = 1, #bx do
    if i > 1 and by[i] ~= by[i - 1] then sx[#sx + 1], sy[#sy + 1] = bx[i], by[i - 1] end
    sx[#sx + 1], sy[#sy + 1] = bx[i], by[i]
  end
  local p = svg.plot{id = "history", kind = "history", title = "optimisation history: " .. d.metric .. " vs trial",
    x = {label = "trial (in the order they finished)", min = 0.5, max = #trials + 0.5}, y = {label = d.metric}}
  p:line(sx, sy, {class = "best-so-far", color = PALETTE[4], width = 2})
  p:points(xs, ys, {class = "pt hist", color = PALETTE[1], titles = titles, trials = ids, r = 3})
  if #ix > 0 then p:points(ix, nil, {marker = "cross", class = "infeasible", titles = itl, trials = iid}) end
  p:legend({{label = "best so far", color = PALETTE[4]}, {label = "trial", color = PALETTE[1]}})
  p.caption = string.format("%d feasible trial(s), %d infeasible (red crosses on the bottom edge); best %s after %d trial(s)",
    #xs, #ix, fv(best), (function() for i, v in ipairs(by) do if v == best then return bx[i] end end end)())
  return {p:render()}
end

--- The study's importance per group (dl.study_results' groups[i].importance,
-- dl.search.importance: the numbers the printed summary and results.json hold):
-- {{label =, items = {{name =, share =, trials =}}}}, or nil when no group has one.
function M.importance_data(d)
  local out = {}
  for _, g in ipairs(d.groups or {}) do
    if type(g.importance) == "table" and #g.importance > 0 then out[#out + 1] = {label = g.label, items = g.importance} end
  end
  return #out > 0 and out or nil
end

--- Importance as horizontal bars (HTML), one block per scientific value: {figure} or {}.
function M.importance(d)
  local imp = M.importance_data(d)
  if not imp then return {} end
  local o = {'<figure class="figure wide-ok" id="importance"><div class="fig-title">hyperparameter importance for ',
    esc(d.metric), ' (', esc(search.importance_method), ')</div>'}
  for _, grp in ipairs(imp) do
    if #imp > 1 then o[#o + 1] = '<div class="imp-group">' .. esc(grp.label) .. '</div>' end
    o[#o + 1] = string.format('<div class="imp" data-group="%s">', esc(grp.label))
    for _, it in ipairs(grp.items) do
      o[#o + 1] = string.format('<div class="imp-row" data-name="%s"><span class="imp-name">%s</span><span class="imp-bar">' ..
        '<span style="width:%.1f%%"></span></span><span class="imp-v">%.3f</span></div>', esc(it.name), esc(it.name),
        100 * it.share, it.share)
    end
    o[#o + 1] = "</div>"
  end
  o[#o + 1] = "<figcaption>the study's own numbers (dl.search.importance, as in results.json and the printed summary): " ..
    "each hyperparameter's first-order share of the variance of a GP's posterior mean fitted to the group's trials " ..
    "(a functional ANOVA), over the region where it is active; a parameter inactive in a group's trials has none</figcaption></figure>"
  return {table.concat(o)}
end

--- Pruned trials: value at the rung vs the others' values at that step: {figure} or {}.
function M.pruned(d)
  local rungs, pruned = {}, {}
  for _, t in ipairs(d.trials) do
    if t.pruned and t.rung and t.rung_value then pruned[#pruned + 1] = t; rungs[t.rung] = true end
  end
  if #pruned == 0 then return {} end
  local p = svg.plot{id = "pruned", kind = "pruned", title = "pruned trials at their rung: " .. d.metric,
    x = {label = "step"}, y = {label = d.metric}}
  local ox, oy, oid, ot = {}, {}, {}, {}
  for _, t in ipairs(d.trials) do
    if not t.pruned then
      local xs, ys = A.curve(t, d.metric)
      for i, s in ipairs(xs) do
        if rungs[s] then
          ox[#ox + 1], oy[#oy + 1], oid[#oid + 1] = s, ys[i], t.id
          ot[#ot + 1] = string.format("%s (%s) at step %d: %s", t.id, t.status, s, fv(ys[i]))
        end
      end
    end
  end
  local px, py, pid, pt = {}, {}, {}, {}
  local per = {}
  for _, t in ipairs(pruned) do
    px[#px + 1], py[#py + 1], pid[#pid + 1] = t.rung, t.rung_value, t.id
    pt[#pt + 1] = string.format("%s pruned at step %d: %s", t.id, t.rung, fv(t.rung_value))
    per[t.rung] = (per[t.rung] or 0) + 1
  end
  p:points(ox, oy, {class = "pt kept", color = "#9a9a9a", r = 3, titles = ot, trials = oid})
  p:points(px, py, {marker = "cross", class = "rung", color = "#e07b00", titles = pt, trials = pid})
  p:legend({{label = "pruned trial at its rung", color = "#e07b00"}, {label = "other trials at that step", color = "#9a9a9a"}})
  local parts = {}
  for _, s in ipairs(A.sorted_keys(per)) do parts[#parts + 1] = string.format("%d at step %d", per[s], s) end
  p.caption = string.format("%d pruned trial(s): %s; their curves end at the rung in the training curves", #pruned,
    table.concat(parts, ", "))
  return {p:render()}
end

-- a trial's aggregate value of a metric (best over evals by mode, or the final eval)
local function aggregate(t, metric, mode, how)
  local xs, ys = A.curve(t, metric)
  if #ys == 0 then return nil end
  if how == "final" then return ys[#ys] end
  local b
  for _, v in ipairs(ys) do if A.better(v, b, mode) then b = v end end
  return b
end

--- The two objectives of a Pareto view: opts.pareto ({"m1", "m2"} or
-- {{metric =, mode =}, ...}) or study.json's "objectives"; nil otherwise.
function M.objectives(d, opts)
  local list = opts.pareto or (d.record and d.record.objectives)
  if type(list) ~= "table" or #list ~= 2 then return nil end
  local out = {}
  for i, o in ipairs(list) do
    if type(o) == "string" then o = {metric = o} end
    if type(o) ~= "table" or type(o.metric) ~= "string" then return nil end
    out[i] = {metric = o.metric, mode = o.mode or A.default_mode(o.metric)}
  end
  return out
end

--- The Pareto front of two objectives: {figure} or {}.
function M.pareto(d, opts)
  local obj = M.objectives(d, opts)
  if not obj then return {} end
  local pts = {}
  for _, t in ipairs(A.search_trials(d)) do
    if t.status == "done" then
      local x, y = aggregate(t, obj[1].metric, obj[1].mode, d.aggregate), aggregate(t, obj[2].metric, obj[2].mode, d.aggregate)
      if x and y then pts[#pts + 1] = {trial = t, x = x, y = y} end
    end
  end
  if #pts == 0 then return {} end
  local front = A.pareto(pts, {obj[1].mode, obj[2].mode})
  local on = {}
  for _, i in ipairs(front) do on[i] = true end
  local p = svg.plot{id = "pareto", kind = "pareto", title = string.format("Pareto front: %s (%s) vs %s (%s)",
    obj[2].metric, obj[2].mode, obj[1].metric, obj[1].mode), x = {label = obj[1].metric}, y = {label = obj[2].metric}}
  local fx, fy = {}, {}
  for _, i in ipairs(front) do fx[#fx + 1], fy[#fy + 1] = pts[i].x, pts[i].y end
  p:line(fx, fy, {class = "front", color = PALETTE[4], width = 1.5})
  local xs, ys, ids, tl, cs = {}, {}, {}, {}, {}
  for i, q in ipairs(pts) do
    xs[#xs + 1], ys[#ys + 1], ids[#ids + 1] = q.x, q.y, q.trial.id
    cs[#cs + 1] = on[i] and PALETTE[4] or "#9a9a9a"
    tl[#tl + 1] = string.format("%s: %s = %s, %s = %s%s", q.trial.id, obj[1].metric, fv(q.x), obj[2].metric, fv(q.y),
      on[i] and " (on the front)" or "")
  end
  p:points(xs, ys, {class = "pt pareto", colors = cs, titles = tl, trials = ids})
  p.caption = string.format("%d trial(s), %d on the front (red, joined); %s over evals", #pts, #front, d.aggregate)
  return {p:render()}
end

M.fmtn = fmtn
return M
