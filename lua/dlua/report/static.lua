--- dlua.report.static: the report as one page of inline SVG plots, no script
-- but the table sorting (dl.report(dir, {static = true}), `--static`: CI
-- artefacts, papers, PDFs), and the SVG sections the interactive page
-- (dlua.report.html) embeds next to its uPlot curves. The playbook's
-- "automate generically useful plots" (section 2.5):
--   - training curves (train loss, the objective, the validation loss) of every
--     trial, the best few highlighted, pruned trials ending at their rung;
--   - basic hyperparameter-axis plots: the objective against every varied
--     hyperparameter, one point per trial, log axes for log-scaled ones, the
--     search-space bounds drawn, infeasible trials as red crosses;
--   - isolation plots: the best trial per scientific value (continuous values
--     bucketed), with the spread of seed re-runs as error bars;
--   - the gradient norm of the best trial against the step, and its histogram;
--   - parallel coordinates over the varied hyperparameters, coloured by the
--     objective, inactive values on their own "n/a" band;
--   - the best-checkpoint step histogram and the bootstrap of the best value vs
--     the number of trials;
--   - the diagnosis (dlua.report.diagnose) and the trials table, sortable by any column.
-- Every mark of a trial carries data-trial="<id>" so the interactive page can
-- highlight a trial everywhere.
local A = require "dlua.report.analysis"
local svg = require "dlua.report.svg"
local views = require "dlua.report.views"
local util = require "dlua.util"

local M = {}

local esc, fmtn, PALETTE = svg.escape, svg.format_number, svg.PALETTE

local function slug(s) return (tostring(s):gsub("[^%w]+", "-"):gsub("^%-+", ""):gsub("%-+$", "")) end

local function fv(v) return v == nil and "" or util.fmt4(v) end

local CSS = [[
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
.meta{color:#555}.meta code{background:#f4f4f4;padding:1px 4px;border-radius:3px}
.grid{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0;border:1px solid #e4e4e4;border-radius:4px;padding:6px;background:#fff}
figcaption{font-size:12px;color:#555;max-width:460px;margin-top:2px}
ul.findings{list-style:none;padding:0}ul.findings li{margin:3px 0;padding:4px 8px;border-left:4px solid #aaa;background:#fafafa}
li.warn{border-color:#d62728!important;background:#fff3f3!important}li.note{border-color:#ff7f0e!important;background:#fff8ef!important}
li.ok{border-color:#2ca02c!important}.lvl{font-weight:600;display:inline-block;width:3.2em}.chk{color:#555}
table.sortable{border-collapse:collapse;font-size:12px}table.sortable th{cursor:pointer;background:#f0f0f0;position:sticky;top:0}
table.sortable th,table.sortable td{border:1px solid #ddd;padding:3px 6px;text-align:right;white-space:nowrap}
table.sortable td.s{text-align:left}tr.infeasible td{color:#b22}tr.pruned td{color:#b76e1e}tr.best td{font-weight:600}
th[data-dir=asc]::after{content:" \25B2"}th[data-dir=desc]::after{content:" \25BC"}
]]

local JS = [[
(function(){
  function key(td){var v=td.getAttribute('data-v');return v===null?td.textContent:v;}
  function sortBy(table,col,th){
    var tb=table.tBodies[0],rows=Array.prototype.slice.call(tb.rows);
    var asc=th.getAttribute('data-dir')!=='asc';
    rows.sort(function(a,b){
      var x=key(a.cells[col]),y=key(b.cells[col]);
      if(x===''&&y==='')return 0; if(x==='')return 1; if(y==='')return -1;
      var nx=parseFloat(x),ny=parseFloat(y),c;
      if(!isNaN(nx)&&!isNaN(ny)&&isFinite(x)&&isFinite(y))c=nx-ny;else c=x<y?-1:(x>y?1:0);
      return asc?c:-c;});
    rows.forEach(function(r){tb.appendChild(r);});
    var ths=table.tHead.rows[0].cells;
    for(var i=0;i<ths.length;i++)ths[i].removeAttribute('data-dir');
    th.setAttribute('data-dir',asc?'asc':'desc');
  }
  var tables=document.querySelectorAll('table.sortable');
  for(var t=0;t<tables.length;t++){
    (function(table){
      var ths=table.tHead.rows[0].cells;
      for(var i=0;i<ths.length;i++){(function(i){ths[i].addEventListener('click',function(){sortBy(table,i,ths[i]);});})(i);}
    })(tables[t]);
  }
  window.dluaSortTable=function(id,col){var t=document.getElementById(id);sortBy(t,col,t.tHead.rows[0].cells[col]);};
})();
]]

------------------------------------------------------------------- sections

local function curves_section(d, top)
  local figs = {}
  local best = {}
  local ranking = d.search_ranking
  for i = 1, math.min(top, #ranking) do best[ranking[i].id] = i end
  local metrics = {{"train/loss", "training loss"}, {d.metric, d.metric}}
  local lm = A.loss_metric(d)
  if lm and lm ~= d.metric then metrics[#metrics + 1] = {lm, lm} end
  for _, m in ipairs(metrics) do
    local metric, label = m[1], m[2]
    local p = svg.plot{id = "curves-" .. slug(metric), kind = "curves", title = label .. " vs step",
                       x = {label = "step"}, y = {label = metric}}
    local n, legend = 0, {}
    -- the others first (grey, underneath), the best ones on top
    local order = {}
    for _, t in ipairs(d.trials) do if not best[t.id] then order[#order + 1] = t end end
    for i = math.min(top, #ranking), 1, -1 do order[#order + 1] = ranking[i] end
    for _, t in ipairs(order) do
      local xs, ys = A.curve(t, metric)
      if #xs > 0 then
        n = n + 1
        local r = best[t.id]
        p:line(xs, ys, {class = r and "curve best" or (t.pruned and "curve pruned" or "curve"),
          color = r and PALETTE[(r - 1) % #PALETTE + 1] or (t.pruned and "#e8a45c" or "#b5b5b5"),
          width = r and 2.2 or 1, opacity = r and 1 or 0.7, title = string.format("%s (%s%s)", t.id, t.status,
            t.pruned and t.rung and (" at step " .. t.rung) or ""), dash = not t.feasible and not t.pruned, trial = t.id})
        if t.pruned and #xs > 0 then
          p:points({xs[#xs]}, {ys[#ys]}, {marker = "cross", class = "rung", color = "#e8a45c", r = 3, trials = {t.id},
            titles = {string.format("%s pruned at step %s", t.id, tostring(xs[#xs]))}})
        end
        if r then table.insert(legend, 1, {label = string.format("#%d %s", r, t.id), color = PALETTE[(r - 1) % #PALETTE + 1]}) end
      end
    end
    if n > 0 then
      table.sort(legend, function(a, b) return a.label < b.label end)
      p:legend(legend)
      local np = 0
      for _, t in ipairs(d.trials) do if t.pruned then np = np + 1 end end
      p.caption = string.format("%d trial(s); the best %d by %s (%s over evals) in colour, infeasible dashed%s", n,
        math.min(top, #ranking), d.metric, d.aggregate, np > 0 and string.format("; %d pruned (orange, x at the rung)", np) or "")
      figs[#figs + 1] = p:render()
    end
  end
  return figs
end

-- every hyperparameter that varies: searched dimensions (one per path), then scientific names
local function axis_dims(d)
  local out = {}
  for _, dim in ipairs(d.dims) do out[#out + 1] = dim end
  for _, s in ipairs(d.scientific) do
    if #s.values > 1 then
      out[#out + 1] = {name = s.name, path = s.name, values = s.values, role = "scientific", ordered = true}
    end
  end
  return out
end

local function group_color(d, gi)
  if #d.groups <= 1 then return PALETTE[1] end
  return PALETTE[((gi or 1) - 1) % #PALETTE + 1]
end

local function axis_section(d)
  local figs = {}
  for _, dim in ipairs(axis_dims(d)) do
    local cats = dim.values and {} or nil
    if cats then for i, v in ipairs(dim.values) do cats[i] = tostring(v) end end
    local p = svg.plot{id = "axis-" .. slug(dim.path), kind = "axis", title = d.metric .. " vs " .. dim.path,
      x = {label = dim.path, log = dim.log, categories = cats}, y = {label = string.format("%s (%s)", d.metric, d.aggregate)}}
    local fx, fy, ft, fc, ix, it, fid, iid = {}, {}, {}, {}, {}, {}, {}, {}
    local function xval(v)
      if cats then
        for i, c in ipairs(dim.values) do if c == v then return i end end
        return nil
      end
      return v
    end
    for _, t in ipairs(A.search_trials(d)) do
      if A.active(dim, t.hp) and not t.pruned then
        local x = xval(t.hp[dim.name])
        if x then
          if t.feasible then
            fid[#fid + 1] = t.id
            fx[#fx + 1], fy[#fy + 1] = x, t.value
            ft[#ft + 1] = string.format("%s: %s = %s, %s = %s at step %s", t.id, dim.name, fv(t.hp[dim.name]), d.metric,
              fv(t.value), tostring(t.step))
            fc[#fc + 1] = group_color(d, t.group)
          else
            ix[#ix + 1], iid[#iid + 1] = x, t.id
            it[#it + 1] = string.format("%s: %s = %s, %s%s", t.id, dim.name, fv(t.hp[dim.name]), t.status,
              t.message and (": " .. t.message) or "")
          end
        end
      end
    end
    if #fx + #ix > 0 then
      if not dim.values and not dim.observed and dim.lo and dim.hi then
        p:vline(dim.lo, {class = "bound", color = "#555", label = "lower bound " .. fmtn(dim.lo)})
        p:vline(dim.hi, {class = "bound", color = "#555", label = "upper bound " .. fmtn(dim.hi)})
      end
      p:points(fx, fy, {class = "pt", colors = fc, titles = ft, trials = fid})
      if #ix > 0 then p:points(ix, nil, {marker = "cross", class = "infeasible", titles = it, trials = iid}) end
      local bt = d.best
      if bt and A.active(dim, bt.hp) and xval(bt.hp[dim.name]) then
        p:points({xval(bt.hp[dim.name])}, {bt.value}, {class = "best-ring", r = 7, opacity = 0, stroke = "#000",
          titles = {"best: " .. bt.id}, trials = {bt.id}})
      end
      local legend, present = {}, {}
      if #d.groups > 1 then
        for _, t in ipairs(A.search_trials(d)) do if t.feasible and A.active(dim, t.hp) then present[t.group] = true end end
        for gi, g in ipairs(d.groups) do
          if present[gi] then legend[#legend + 1] = {label = g.label, color = group_color(d, gi)} end
        end
        p:legend(legend)
      end
      p.caption = string.format("%d feasible trial(s), %d infeasible (red crosses, on the bottom edge)%s", #fx, #ix,
        (not dim.values and not dim.observed) and string.format("; dashed lines: the search-space bounds [%s, %s]",
          fmtn(dim.lo), fmtn(dim.hi)) or "")
      figs[#figs + 1] = p:render()
    end
  end
  return figs
end

-- isolation: the best trial per value (categorical) or per bucket (continuous)
local function isolation_section(d, names)
  local figs = {}
  local by_name = {}
  for _, dim in ipairs(axis_dims(d)) do by_name[dim.name] = by_name[dim.name] or dim end
  for _, name in ipairs(names) do
    local dim = by_name[name]
    if dim then
      local numeric_many = dim.values and #dim.values > 8 and type(dim.values[1]) == "number"
      local continuous = not dim.values or numeric_many
      local trials = A.search_trials(d)
      local xs, ys, titles, labels, ids = {}, {}, {}, {}, {}
      local ex, elo, ehi, mx, my = {}, {}, {}, {}, {}
      local p
      if not continuous then
        local cats = {}
        for i, v in ipairs(dim.values) do cats[i] = tostring(v) end
        p = svg.plot{id = "isolation-" .. slug(name), kind = "isolation", title = "isolation: best " .. d.metric .. " per " .. name,
          x = {label = name, categories = cats}, y = {label = d.metric}}
        for i, v in ipairs(dim.values) do
          local best
          for _, t in ipairs(trials) do
            if t.feasible and t.hp[name] == v and A.better(t.value, best and best.value, d.mode) then best = t end
          end
          if best then
            xs[#xs + 1], ys[#ys + 1], ids[#ids + 1] = i, best.value, best.id
            titles[#titles + 1] = string.format("%s = %s: best %s (%s)", name, tostring(v), best.id, fv(best.value))
            -- seed re-runs of the best trial of that value's group(s)
            local g = d.groups[best.group]
            if g and g.seeds and g.seeds.n and g.seeds.n >= 2 and g.seeds.std then
              ex[#ex + 1], elo[#elo + 1], ehi[#ehi + 1] = i, g.seeds.mean - g.seeds.std, g.seeds.mean + g.seeds.std
              mx[#mx + 1], my[#my + 1] = i, g.seeds.mean
              labels[#labels + 1] = string.format("%s: seeds n %d, mean %s, std %s", tostring(v), g.seeds.n,
                fv(g.seeds.mean), fv(g.seeds.std))
            end
          end
        end
      else
        local bdim = dim
        if dim.values then
          local lo, hi = math.huge, -math.huge
          for _, v in ipairs(dim.values) do lo, hi = math.min(lo, v), math.max(hi, v) end
          bdim = {lo = lo, hi = hi, log = lo > 0 and hi / lo >= 20}
        end
        local n = 0
        for _, t in ipairs(trials) do if A.active(dim, t.hp) then n = n + 1 end end
        local nb = math.max(2, math.min(8, math.ceil(math.sqrt(n))))
        p = svg.plot{id = "isolation-" .. slug(name), kind = "isolation", title = string.format("isolation: best %s per %s bucket",
          d.metric, name), x = {label = name, log = bdim.log}, y = {label = d.metric}}
        local buckets = {}
        for _, t in ipairs(trials) do
          if t.feasible and A.active(dim, t.hp) then
            local b = A.bucket(bdim, t.hp[name], nb)
            if b and A.better(t.value, buckets[b] and buckets[b].value, d.mode) then buckets[b] = t end
          end
        end
        for b = 1, nb do
          local lo, hi = A.bucket_edge(bdim, b - 1, nb), A.bucket_edge(bdim, b, nb)
          p:vline(lo, {class = "bucket-edge", color = "#ccc", label = "bucket edge " .. fmtn(lo)})
          if b == nb then p:vline(hi, {class = "bucket-edge", color = "#ccc", label = "bucket edge " .. fmtn(hi)}) end
          local t = buckets[b]
          if t then
            local mid = bdim.log and math.sqrt(lo * hi) or (lo + hi) / 2
            xs[#xs + 1], ys[#ys + 1], ids[#ids + 1] = mid, t.value, t.id
            titles[#titles + 1] = string.format("%s in [%s, %s]: best %s (%s = %s, %s)", name, fmtn(lo), fmtn(hi), t.id,
              name, fv(t.hp[name]), fv(t.value))
          end
        end
      end
      if #xs > 0 then
        if continuous then p:line(xs, ys, {class = "iso-line", color = "#999", width = 1}) end
        if #ex > 0 then
          p:errorbars(ex, elo, ehi, {class = "errorbar"})
          p:points(mx, my, {class = "seed-mean", r = 2.5, color = "#000"})
        end
        p:points(xs, ys, {class = "pt iso", titles = titles, r = 5, color = PALETTE[1], trials = ids})
        p.caption = continuous and string.format("best trial per bucket of %s (buckets in its sampling scale)", name)
          or ("best trial per value" .. (#ex > 0 and ("; error bars: mean +- std of the seed re-runs (" ..
            table.concat(labels, "; ") .. ")") or "; no seed re-runs (study seeds >= 2 draws the error bars)"))
        figs[#figs + 1] = p:render()
      end
    end
  end
  return figs
end

local function gradnorm_section(d)
  local t = d.kind == "run" and d.trials[1] or d.best
  if not t then return {} end
  local g = A.grad_norms(t)
  if #g.values == 0 then return {} end
  local lo, hi = math.huge, 0
  for _, v in ipairs(g.values) do if A.finite(v) and v > 0 then lo, hi = math.min(lo, v), math.max(hi, v) end end
  local logy = hi > 0 and lo < math.huge and hi / lo > 50
  local p50, p90, p99 = A.quantile(g.values, 0.5), A.quantile(g.values, 0.9), A.quantile(g.values, 0.99)
  local p = svg.plot{id = "gradnorm-steps", kind = "gradnorm", title = "gradient norm (unclipped) vs step: " .. t.id,
    x = {label = "step"}, y = {label = "global gradient L2 norm", log = logy}}
  p:line(g.steps, g.values, {class = "gn", color = PALETTE[1], width = 1, trial = t.id})
  if p90 then p:hline(p90, {class = "p90", color = "#d62728", label = "90th percentile " .. fmtn(p90)}) end
  local clip = t.hp and type(t.hp.clip) == "number" and t.hp.clip > 0 and t.hp.clip or nil
  if clip then p:hline(clip, {class = "clip", color = "#2ca02c", label = "clipping threshold " .. fmtn(clip)}) end
  local cap = string.format("%d %s; p50 %s, p90 %s, p99 %s", #g.values, g.per_step and "steps (every step)" or
    "log points (the checkpoint with per-step norms was not readable)", fmtn(p50), fmtn(p90), fmtn(p99))
  if g.clipped and g.clip_steps and g.clip_steps > 0 and clip then
    cap = cap .. string.format("; %d of %d updates clipped (%.0f%%)", g.clipped, g.clip_steps, 100 * g.clipped / g.clip_steps)
  end
  p.caption = cap .. "; red: p90 (the playbook's suggested clipping threshold)"
  local edges, counts = svg.histogram(g.values, {bins = 30})
  local h = svg.plot{id = "gradnorm-hist", kind = "histogram", title = "gradient norm histogram: " .. t.id,
    x = {label = "global gradient L2 norm"}, y = {label = "steps"}}
  h:bars(edges, counts, {class = "bar"})
  if p90 then h:vline(p90, {class = "p90", color = "#d62728", label = "90th percentile " .. fmtn(p90)}) end
  h.caption = string.format("%d values in %d bins", #g.values, #counts)
  return {p:render(), h:render()}
end

local function parallel_section(d)
  local dims = axis_dims(d)
  if #dims == 0 then return {} end
  -- one axis per name (the branches of a switch share one)
  local axes, names, index = {}, {}, {}
  for _, dim in ipairs(dims) do
    local a = index[dim.name]
    if not a then
      a = {label = dim.name, name = dim.name, dims = {}}
      index[dim.name] = a
      axes[#axes + 1] = a
      names[#names + 1] = dim.name
    end
    a.dims[#a.dims + 1] = dim
    if dim.values then
      a.categories = a.categories or {}
      a.values = a.values or {}
      for _, v in ipairs(dim.values) do
        local seen = false
        for _, x in ipairs(a.values) do if x == v then seen = true end end
        if not seen then a.values[#a.values + 1] = v; a.categories[#a.categories + 1] = tostring(v) end
      end
    else
      a.log = a.log or dim.log
      if dim.lo then a.min = math.min(a.min or math.huge, dim.lo) end
      if dim.hi then a.max = math.max(a.max or -math.huge, dim.hi) end
    end
  end
  local obj = {label = d.metric}
  local spec_axes = {}
  for i, a in ipairs(axes) do
    spec_axes[i] = {label = a.label, log = a.log, min = a.min, max = a.max, categories = a.categories}
  end
  spec_axes[#spec_axes + 1] = obj
  local vals = {}
  for _, t in ipairs(d.search_ranking) do vals[#vals + 1] = t.value end
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(vals) do lo, hi = math.min(lo, v), math.max(hi, v) end
  local rows = {}
  local trials = A.search_trials(d)
  table.sort(trials, function(a, b)                      -- the best drawn last (on top)
    if a.feasible ~= b.feasible then return not a.feasible end
    if not a.feasible then return a.id < b.id end
    return A.better(b.value, a.value, d.mode)
  end)
  for _, t in ipairs(trials) do
    local v = {}
    for i, a in ipairs(axes) do
      local active = false
      for _, dim in ipairs(a.dims) do if A.active(dim, t.hp) then active = true end end
      local x = active and t.hp[a.name] or nil
      if x ~= nil and a.values then
        local idx
        for k, c in ipairs(a.values) do if c == x then idx = k end end
        x = idx
      end
      v[i] = x
    end
    v[#axes + 1] = t.feasible and t.value or nil
    local color, f = t.pruned and "#aaaaaa" or "#d62728", nil
    if t.feasible then
      f = hi > lo and (t.value - lo) / (hi - lo) or 1
      if d.mode == "min" then f = 1 - f end
      color = svg.color_scale(f)
    end
    local parts = {}
    for i, a in ipairs(axes) do if t.hp[a.name] ~= nil and v[i] ~= nil then parts[#parts + 1] = a.name .. "=" .. fv(t.hp[a.name]) end end
    rows[#rows + 1] = {values = v, color = color, trial = t.id,
      class = t.feasible and "pc-line" or (t.pruned and "pc-line pc-pruned" or "pc-line pc-infeasible"), dash = not t.feasible, width = t == d.best and 3 or 1.4, opacity = t.feasible and 0.85 or 0.6,
      title = string.format("%s: %s; %s = %s", t.id, table.concat(parts, " "), d.metric, t.feasible and fv(t.value) or t.status)}
  end
  return {svg.parallel{id = "parallel", title = "parallel coordinates, coloured by " .. d.metric ..
    " (yellow: best; red dashed: infeasible)", axes = spec_axes, rows = rows, width = math.max(900, 190 * #spec_axes),
    caption = string.format("%d trial(s) over %d varied hyperparameter(s); a value on an axis's n/a mark: inactive or infeasible",
      #rows, #axes)}}
end

local function best_step_section(d, findings)
  local data
  for _, f in ipairs(findings) do if f.check == "best_step" then data = f.data end end
  if not data or #data.fractions == 0 then return {} end
  local edges = {}
  for i = 0, 10 do edges[#edges + 1] = i / 10 end
  local p = svg.plot{id = "best-step-hist", kind = "histogram", title = "best checkpoint step / max steps",
    x = {label = "best step / max steps", min = 0, max = 1}, y = {label = "trials"}}
  p:bars(edges, data.histogram, {class = "bar", color = PALETTE[3]})
  p:vline(0.1, {class = "threshold", color = "#d62728", label = "10%: max steps too high when all fall below"})
  p:vline(0.75, {class = "threshold", color = "#ff7f0e", label = "75%: train longer when most fall above"})
  p.caption = string.format("%d feasible trial(s)%s", #data.fractions,
    data.eval_every and string.format("; evals every %d steps (resolution %.2g)", data.eval_every,
      data.eval_every / data.max_steps) or "")
  return {p:render()}
end

local function bootstrap_section(d, findings)
  local p = svg.plot{id = "bootstrap", kind = "bootstrap", title = "bootstrap: best " .. d.metric .. " vs number of trials",
    x = {label = "trials"}, y = {label = "best " .. d.metric}}
  local any, legend, gi = false, {}, 0
  for _, f in ipairs(findings) do
    if f.check == "trials" and f.data.bootstrap and #f.data.bootstrap >= 2 then
      gi = gi + 1
      local bs = f.data.bootstrap
      local ks, med, q1, q3 = {}, {}, {}, {}
      for _, b in ipairs(bs) do
        if b.median then ks[#ks + 1], med[#med + 1], q1[#q1 + 1], q3[#q3 + 1] = b.k, b.median, b.q1, b.q3 end
      end
      if #ks >= 2 then
        any = true
        local c = PALETTE[(gi - 1) % #PALETTE + 1]
        p:band(ks, q1, q3, {class = "iqr", color = c, opacity = 0.18})
        p:line(ks, med, {class = "boot-median", color = c, width = 2})
        p:points(ks, med, {class = "boot-pt", color = c, r = 2.5})
        legend[#legend + 1] = {label = (#d.groups > 1 and d.groups[gi] and d.groups[gi].label or "all trials") ..
          (f.data.flattened == false and " (not flattened)" or (f.data.flattened and " (flattened)" or "")), color = c}
      end
    end
  end
  if not any then return {} end
  p:legend(legend)
  p.caption = "median and interquartile range of the best value over resampled studies of k trials " ..
    "(with replacement, seeded); a curve still rising at the right edge means more trials would help"
  return {p:render()}
end

local function findings_html(findings)
  local o = {'<ul class="findings">'}
  for _, f in ipairs(findings) do
    o[#o + 1] = string.format('<li class="%s" data-check="%s"><span class="lvl">%s</span> <span class="chk">%s:</span> %s</li>',
      esc(f.level), esc(f.check), esc(f.level), esc(f.check), esc(f.message))
  end
  o[#o + 1] = "</ul>"
  return table.concat(o)
end

local function table_html(d)
  local cols = {}
  local seen = {}
  for _, s in ipairs(d.scientific) do if not seen[s.name] then seen[s.name] = true; cols[#cols + 1] = s.name end end
  for _, dim in ipairs(d.dims) do if not seen[dim.name] then seen[dim.name] = true; cols[#cols + 1] = dim.name end end
  local o = {'<table class="sortable" id="trials-table"><thead><tr>'}
  local heads = {"rank", "trial", "status", d.metric, "step", "steps"}
  if #d.groups > 1 then table.insert(heads, 3, "scientific") end
  for _, c in ipairs(cols) do heads[#heads + 1] = c end
  heads[#heads + 1] = "message"
  for _, h in ipairs(heads) do o[#o + 1] = "<th>" .. esc(h) .. "</th>" end
  o[#o + 1] = "</tr></thead><tbody>"
  local rows = {}
  for _, t in ipairs(d.search_ranking) do rows[#rows + 1] = t end
  for _, t in ipairs(d.ranking) do if t.kind == "seed" then rows[#rows + 1] = t end end
  for _, t in ipairs(d.trials) do if not t.feasible then rows[#rows + 1] = t end end
  for _, t in ipairs(rows) do
    local cls = t.pruned and "pruned" or ((not t.feasible) and "infeasible" or (t == d.best and "best" or ""))
    o[#o + 1] = string.format('<tr class="%s" data-trial="%s">', cls, esc(t.id))
    local function cell(v, text, s)
      o[#o + 1] = string.format('<td%s data-v="%s">%s</td>', s and ' class="s"' or "", esc(v == nil and "" or
        (type(v) == "number" and string.format("%.17g", v) or tostring(v))), esc(text or fv(v)))
    end
    cell(t.rank, t.rank and tostring(t.rank) or "")
    cell(t.id, t.id, true)
    if #d.groups > 1 then cell(d.groups[t.group] and d.groups[t.group].label or "", nil, true) end
    cell(t.status .. (t.kind == "seed" and " (seed)" or "") .. (t.pruned and t.rung and (" at step " .. t.rung) or ""), nil,
      true)
    cell(t.value)
    cell(t.step)
    cell(t.max_steps)
    for _, c in ipairs(cols) do
      local active = false
      local v = t.hp[c]
      for _, dim in ipairs(d.dims) do if dim.name == c and A.active(dim, t.hp) then active = true end end
      for _, s in ipairs(d.scientific) do if s.name == c then active = true end end
      cell(active and v or nil, active and fv(v) or "", type(v) ~= "number")
    end
    cell(t.message or "", t.message or "", true)
    o[#o + 1] = "</tr>"
  end
  o[#o + 1] = "</tbody></table>"
  return table.concat(o)
end

--- The page's title: opts.title, else "study NAME", "run NAME" or "runs in DIR".
function M.title(d, opts)
  return opts.title or (d.kind == "study" and ("study " .. d.name) or (d.kind == "run" and ("run " .. d.name)
    or ("runs in " .. d.dir)))
end

--- The summary under the title: goal, directory, objective, counts, the best trial.
function M.meta_html(d)
  local o = {}
  local function w(...) for i = 1, select("#", ...) do o[#o + 1] = select(i, ...) end end
  local nf, ni, np = 0, 0, 0
  for _, t in ipairs(A.search_trials(d)) do
    if t.feasible then nf = nf + 1 elseif t.pruned then np = np + 1 else ni = ni + 1 end
  end
  w('<p class="meta">')
  if d.goal then w("goal: ", esc(d.goal), "<br>") end
  w("directory <code>", esc(d.dir), "</code>; objective <code>", esc(d.metric), "</code> (", esc(d.aggregate),
    " over evals, ", esc(d.mode), "); ", tostring(nf + ni + np), " trial(s), ", tostring(ni), " infeasible",
    np > 0 and (", " .. np .. " pruned") or "")
  if d.best then
    w('<br>best: <b class="trial-link" data-trial="', esc(d.best.id), '">', esc(d.best.id), "</b> ", esc(d.metric), " = ",
      esc(fv(d.best.value)), " at step ", esc(tostring(d.best.step)))
    if d.best.command then w("<br>reproduce: <code>", esc(d.best.command), "</code>") end
  end
  w("</p>")
  return table.concat(o)
end

--- The SVG sections after the training curves, in page order:
-- {{id =, heading =, figs = {figure html...}, note =}}; empty ones left out.
function M.svg_sections(d, findings, opts)
  local out = {}
  local function section(id, heading, figs, note)
    if #figs > 0 then out[#out + 1] = {id = id, heading = heading, figs = figs, note = note} end
  end
  if d.kind ~= "run" then
    local hist = {}
    for _, f in ipairs(views.history(d)) do hist[#hist + 1] = f end
    for _, f in ipairs(views.importance(d, axis_dims(d))) do hist[#hist + 1] = f end
    section("history", "Optimisation history and importance", hist)
    section("pruned", "Pruned trials", views.pruned(d))
    section("pareto", "Pareto front", views.pareto(d, opts))
  end
  section("axes", "Hyperparameter axis plots", axis_section(d),
    "the objective against each varied hyperparameter, one point per trial (its " .. d.aggregate .. " value)")
  local iso = {}
  for _, s in ipairs(d.scientific) do iso[#iso + 1] = s.name end
  local listed = {}
  for _, n in ipairs(iso) do listed[n] = true end
  for _, n in ipairs(opts.isolate or {}) do
    if not listed[n] then listed[n] = true; iso[#iso + 1] = n end       -- a scientific name given again: once
  end
  section("isolation", "Isolation plots", isolation_section(d, iso))
  section("gradnorm", "Gradient norm", gradnorm_section(d))
  if d.kind ~= "run" then
    section("parallel-coordinates", "Parallel coordinates", parallel_section(d))
    local extra = {}
    for _, f in ipairs(best_step_section(d, findings)) do extra[#extra + 1] = f end
    for _, f in ipairs(bootstrap_section(d, findings)) do extra[#extra + 1] = f end
    section("steps", "Best checkpoint steps and number of trials", extra)
  end
  return out
end

M.CSS, M.JS, M.findings_html, M.table_html, M.curves_section = CSS, JS, findings_html, table_html, curves_section
M.axis_dims = axis_dims

--- The static page for loaded data and its findings (a string).
function M.render(d, findings, opts)
  opts = opts or {}
  local o = {}
  local function w(...) for i = 1, select("#", ...) do o[#o + 1] = select(i, ...) end end
  local title = M.title(d, opts)
  w('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>', esc(title), ' - dlua report</title>',
    '<meta name="viewport" content="width=device-width,initial-scale=1"><style>', CSS, "</style></head><body>")
  w("<h1>", esc(title), "</h1>", M.meta_html(d))
  w('<h2 id="diagnosis">Diagnosis</h2>', findings_html(findings))
  local function section(sec)
    w('<h2 id="', sec.id, '">', esc(sec.heading), "</h2>")
    if sec.note then w('<p class="meta">', esc(sec.note), "</p>") end
    w('<div class="grid">', table.concat(sec.figs), "</div>")
  end
  local curves = curves_section(d, opts.top or 3)
  if #curves > 0 then section({id = "curves", heading = "Training curves", figs = curves}) end
  for _, sec in ipairs(M.svg_sections(d, findings, opts)) do section(sec) end
  w('<h2 id="trials">Trials</h2><p class="meta">click a column heading to sort</p>', table_html(d))
  w('<p class="meta">generated by dlua ', esc(util.VERSION), " from the stored histories</p>")
  w("<script>", JS, "</script></body></html>\n")
  return table.concat(o)
end

return M
