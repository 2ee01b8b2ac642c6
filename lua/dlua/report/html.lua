--- dlua.report.html: the interactive report, one self-contained HTML file
-- that works offline and from file://: the vendored uPlot (vendor/uplot, its
-- JS and CSS inlined), the page's own script and styles (report/assets/app.js,
-- app.css, inlined), the data of the curve plots (dlua.report.data, a
-- JavaScript literal) and the SVG views of dlua.report.static and
-- dlua.report.views, which the script makes clickable. Nothing is fetched;
-- in watch mode the page also loads one sibling script, <out>.watch.js, that
-- the watcher rewrites (M.watch_stamp).
--
--   local page = html.render(d, findings, {top = 3, watch = {file = "report.html.watch.js", stamp = "...", interval = 2000}})
local data = require "dlua.report.data"
local static = require "dlua.report.static"
local svg = require "dlua.report.svg"
local fs = require "dlua.util.fs"
local util = require "dlua.util"

local M = {}

local esc = svg.escape

-- this file's directory: the assets sit next to it, the vendored code three levels up
local HERE = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "."

local cache = {}

--- The text of an asset: "app.js", "app.css" (report/assets/) or "uPlot.iife.min.js",
-- "uPlot.min.css" (vendor/uplot/ three levels above this file in the source tree;
-- report/vendor/ beside it when installed, where CMake puts them). Raises naming
-- the path when it is missing (scripts/vendor.sh restores the vendored files).
function M.asset(name)
  if cache[name] then return cache[name] end
  local path = HERE .. "/assets/" .. name
  if name:match("^uPlot") then
    path = HERE .. "/vendor/" .. name
    if not fs.exists(path) then path = HERE .. "/../../../vendor/uplot/" .. name end
  end
  local s = fs.read(path)
  if not s then error(string.format("dl.report: cannot read %s (scripts/vendor.sh restores vendor/uplot)", path), 0) end
  if name:match("%.js$") and s:find("</script", 1, true) then
    error(string.format("dl.report: %s contains </script and cannot be inlined", path), 0)
  end
  cache[name] = s
  return s
end

local function curve_figure(c)
  return string.format('<figure class="figure uplot-fig" id="%s" data-kind="curves"><div class="fig-title">%s</div>' ..
    '<div class="plot-host"></div><figcaption></figcaption></figure>', esc(c.id), esc(c.title))
end

-- a group of the logged series: a picker and the plot of the picked series
local function series_figure(g, curves)
  local o = {string.format('<figure class="figure uplot-fig series-fig" id="%s" data-kind="series" data-group="%s">' ..
    '<div class="fig-title">%s</div><div class="series-pick"><select aria-label="series of %s">', esc(g.id), esc(g.name),
    esc(g.label), esc(g.label))}
  for _, m in ipairs(g.metrics) do
    o[#o + 1] = string.format('<option value="%s">%s</option>', esc(m), esc(curves[m].title))
  end
  o[#o + 1] = string.format('</select> <span class="series-n">%d series</span></div><div class="plot-host"></div>' ..
    '<figcaption></figcaption></figure>', #g.metrics)
  return table.concat(o)
end

--- The interactive page (a string) for loaded data d and its findings. opts:
-- top (3), isolate, pareto, title, watch = {file =, stamp =, interval = ms, done =}.
function M.render(d, findings, opts)
  opts = opts or {}
  local model = data.build(d, opts)
  local title = static.title(d, opts)
  local o = {}
  local function w(...) for i = 1, select("#", ...) do o[#o + 1] = select(i, ...) end end
  w('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>', esc(title), ' - dlua report</title>',
    '<meta name="viewport" content="width=device-width,initial-scale=1"><style>', M.asset("uPlot.min.css"), static.CSS,
    M.asset("app.css"), "</style></head><body>")
  w("<h1>", esc(title), "</h1>", static.meta_html(d))
  if opts.watch then
    w('<p id="watching">', opts.watch.done and ("the " .. (d.kind == "run" and "run" or "study") .. " is finished") or
      "watching: the page reloads itself when the report is rewritten", "</p>")
  end
  w('<p class="meta">sections: <a href="#diagnosis">diagnosis</a>')
  local secs = static.svg_sections(d, findings, opts)
  if #model.curves > 0 then w(' · <a href="#curves">curves</a>') end
  if #model.series.groups > 0 then w(' · <a href="#series">every logged series</a>') end
  for _, s in ipairs(secs) do w(' · <a href="#', s.id, '">', esc(s.heading:lower()), "</a>") end
  w(' · <a href="#trials">trials</a></p>')
  w('<h2 id="diagnosis">Diagnosis</h2>', static.findings_html(findings))
  if #model.curves > 0 then
    w('<h2 id="curves">Training curves</h2>')
    w('<div class="controls"><label><input type="checkbox" id="ctl-log"> log y</label>',
      '<label><input type="checkbox" id="ctl-clip" checked> clip outliers</label>',
      '<label>smoothing <input type="range" id="ctl-smooth" min="0" max="0.99" step="0.01" value="0"> ',
      '<span id="smooth-v">0.00</span></label><button type="button" id="ctl-reset">reset zoom</button>',
      '<span>show: <button type="button" id="ctl-all">all</button> <button type="button" id="ctl-best">best ',
      tostring(model.top), '</button> <button type="button" id="ctl-none">none</button></span></div>')
    w('<div id="legend"></div><div id="selection"></div><div class="grid" id="curve-grid">')
    for _, c in ipairs(model.curves) do w(curve_figure(c)) end
    w("</div>")
  else
    w('<div id="selection"></div>')
  end
  if #model.series.groups > 0 then
    w('<h2 id="series">Every logged series</h2><p class="meta">each scalar the ', d.kind == "run" and "run" or "trials",
      ' logged in metrics.jsonl, grouped by prefix; pick one in a group to draw it', d.kind == "run" and "" or
      " for every trial (select a trial to pick it out)", '</p><div class="grid" id="series-grid">')
    for _, g in ipairs(model.series.groups) do w(series_figure(g, model.series.curves)) end
    w("</div>")
  end
  for _, sec in ipairs(secs) do
    w('<h2 id="', sec.id, '">', esc(sec.heading), "</h2>")
    if sec.note then w('<p class="meta">', esc(sec.note), "</p>") end
    w('<div class="grid">', table.concat(sec.figs), "</div>")
  end
  w('<h2 id="trials">Trials</h2><p class="meta">click a column heading to sort, a row to highlight the trial</p>',
    '<div class="table-wrap">', static.table_html(d), "</div>")
  w('<p class="meta">generated by dlua ', esc(util.VERSION), " from the stored histories; curves drawn with uPlot ",
    "(MIT, vendored)</p>")
  w('<div id="tip"></div>')
  w("<script>window.DLUA = ", data.encode(model), ";")
  if opts.watch then w("window.DLUA_WATCH = ", data.encode(opts.watch), ";") end
  w("</script><script>", M.asset("uPlot.iife.min.js"), "</script><script>", static.JS, "</script><script>",
    M.asset("app.js"), "</script></body></html>\n")
  return table.concat(o)
end

--- The sibling script a watched page polls: it reports the current stamp.
function M.watch_script(stamp, done)
  return string.format("window.dluaWatch && window.dluaWatch(%s);\n", data.encode({stamp = stamp, done = done or false}))
end

return M
