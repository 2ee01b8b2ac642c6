-- tests/browser/check_report.lua -- loads a static dl.report page ({static = true}) in headless Chromium (Debian's
-- chromium) and checks what the browser rendered: the expected SVG plots with the
-- right number of marks, each mark laid out inside its plot, the trials table sorting
-- on a click, and no JavaScript error or console error. A negative control (a page
-- with a deliberate error) checks that errors are caught at all.
--
--   dlua tests/browser/check_report.lua [--screenshot PNG] [--keep]
-- Prints "browser: ok" and exits 0, or prints each problem and exits 1. Run from the
-- repository root (tests/lua/report_spec.lua runs it in the busted suite).
local dl = require "dlua"
local F = dofile("tests/lua/report_fixtures.lua")
local A = require "dlua.report.analysis"
local report = require "dlua.report"
local S, fs, json = dl.search, dl.fs, dl.json

local screenshot, keep
do
  local i = 1
  while arg[i] do
    if arg[i] == "--screenshot" then screenshot = arg[i + 1]; i = i + 1
    elseif arg[i] == "--keep" then keep = true
    else io.stderr:write("usage: dlua tests/browser/check_report.lua [--screenshot PNG] [--keep]\n"); os.exit(1) end
    i = i + 1
  end
end

local chromium = report.chromium()
if not chromium then
  print("browser: chromium not found (scripts/setup.sh installs Debian's chromium)")
  os.exit(1)
end

local shq = dl.util.shell_quote

local root = F.tmpdir("browser")
local problems = {}
local function problem(fmt, ...) problems[#problems + 1] = string.format(fmt, ...) end

-- captures errors before any script of the page runs
local CAPTURE = [[<script>
window.__dluaErrors = [];
window.addEventListener('error', function (e) { window.__dluaErrors.push('error: ' + e.message); });
window.addEventListener('unhandledrejection', function (e) { window.__dluaErrors.push('rejection: ' + e.reason); });
(function () { var ce = console.error, cw = console.warn;
  console.error = function () { window.__dluaErrors.push('console.error: ' + Array.prototype.join.call(arguments, ' ')); ce.apply(console, arguments); };
  console.warn = function () { window.__dluaErrors.push('console.warn: ' + Array.prototype.join.call(arguments, ' ')); cw.apply(console, arguments); };
})();
</script>]]

-- runs after the page's own scripts: counts what is laid out, sorts the table, reports
local CHECK = [[<script>
window.addEventListener('load', function () {
  var out = {figures: {}, errors: window.__dluaErrors, svgs: document.querySelectorAll('svg').length};
  function inside(el, svg) {
    var r = el.getBoundingClientRect(), s = svg.getBoundingClientRect();
    return (r.width > 0 || r.height > 0) && r.left >= s.left - 1 && r.right <= s.right + 1 && r.top >= s.top - 1 && r.bottom <= s.bottom + 1;
  }
  var figs = document.querySelectorAll('figure[id]');
  for (var i = 0; i < figs.length; i++) {
    var f = figs[i], svg = f.querySelector('svg'), counts = {};
    if (!svg) continue;                                  // the importance bars are HTML
    var rect = svg.getBoundingClientRect();
    var sels = {pt: 'circle.pt', infeasible: 'path.infeasible', curve: 'polyline.curve', best: 'polyline.best',
                pc: 'polyline.pc-line', pcbad: 'polyline.pc-infeasible', bar: 'rect.bar', bound: 'line.bound',
                errorbar: 'path.errorbar', gn: 'polyline.gn'};
    for (var k in sels) {
      var els = svg.querySelectorAll(sels[k]), n = 0;
      for (var j = 0; j < els.length; j++) if (inside(els[j], svg)) n++;
      counts[k] = n; counts[k + '_all'] = els.length;
    }
    counts.width = rect.width; counts.height = rect.height;
    out.figures[f.id] = counts;
  }
  var table = document.getElementById('trials-table'), heads = table.tHead.rows[0].cells, col = -1;
  for (var c = 0; c < heads.length; c++) if (heads[c].textContent === window.__dluaMetric) col = c;
  out.rows = table.tBodies[0].rows.length;
  try {
    if (col >= 0 && out.rows > 0) {
      var rows = table.tBodies[0].rows;
      heads[col].click();
      out.sortAscFirst = rows[0].getAttribute('data-trial');
      heads[col].click();
      out.sortDescFirst = rows[0].getAttribute('data-trial');
      out.sortDescLast = rows[rows.length - 1].getAttribute('data-trial');
    }
  } catch (e) { out.errors.push('check: ' + e); }
  var pre = document.createElement('pre');
  pre.id = 'dlua-test-result';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>]]

local function harness(src, dst, metric)
  local html = assert(fs.read(src))
  local a = html:find("<head>", 1, true)
  html = html:sub(1, a + 5) .. CAPTURE .. string.format("<script>window.__dluaMetric = %s;</script>", json.encode(metric)) ..
    html:sub(a + 6)
  local b = html:find("</body>", 1, true)
  html = html:sub(1, b - 1) .. CHECK .. html:sub(b)
  F.write(dst, html)
end

-- loads a page; returns the decoded result, the browser's log
local function load(page)
  local prof = root .. "/profile-" .. tostring(math.random(1, 1e9))
  local cmd = string.format("%s --headless --disable-gpu --no-sandbox --no-first-run --user-data-dir=%s " ..
    "--enable-logging=stderr --v=0 --virtual-time-budget=10000 --window-size=1280,2000 --dump-dom %s 2>%s",
    shq(chromium), shq(prof), shq("file://" .. page), shq(root .. "/chromium.log"))
  local p = io.popen(cmd)
  local dom = p:read("a")
  p:close()
  local log = fs.read(root .. "/chromium.log") or ""
  local text = dom:match('<pre id="dlua%-test%-result">(.-)</pre>')
  if not text then return nil, log, dom end
  text = text:gsub("&lt;", "<"):gsub("&gt;", ">"):gsub("&quot;", '"'):gsub("&amp;", "&")
  return json.decode(text), log, dom
end

-- console messages the browser logged (--enable-logging=stderr): errors of the page
local function console_errors(log)
  local out = {}
  for line in log:gmatch("[^\n]+") do
    if line:find("CONSOLE", 1, true) or line:find("Uncaught", 1, true) then out[#out + 1] = line end
  end
  return out
end

------------------------------------------------------------- the study page

local dir = F.study(root, {scientific = {optimizer = {"sgd", "adam"}}, trials = 8,
  nuisance = {lr = S.log_uniform(1e-4, 1e-1), momentum = S.uniform(0.8, 0.99):when{optimizer = "sgd"}},
  value = function(hp) if hp.lr > 0.03 then return nil end return 0.5 + 0.1 * math.log(hp.lr / 1e-4, 10) end,
  seeds = {[1] = {0.8, 0.81, 0.79}}})
local page = dl.report(dir, {static = true})
local d = A.load(dir)

-- expectations, from the data
local search, feasible, infeasible, sgd = 0, 0, 0, 0
for _, t in ipairs(d.trials) do
  if t.kind == "search" then
    search = search + 1
    if t.feasible then feasible = feasible + 1 else infeasible = infeasible + 1 end
    if t.hp.optimizer == "sgd" then sgd = sgd + 1 end
  end
end
local worst = d.search_ranking[#d.search_ranking]
for _, t in ipairs(d.ranking) do if t.value < worst.value then worst = t end end
-- a curve of one point (a run that diverged before its second log line) is drawn as a dot
local function lines(metric)
  local n = 0
  for _, t in ipairs(d.trials) do if #A.curve(t, metric) >= 2 then n = n + 1 end end
  return n
end
local expect = {
  ["axis-lr"] = {pt = feasible + 1, infeasible = infeasible, bound = 2},           -- + the ring around the best
  ["axis-momentum"] = {bound = 2},
  ["axis-optimizer"] = {pt = feasible + 1, infeasible = infeasible},
  ["curves-train-loss"] = {curve = lines("train/loss"), best = 3},
  ["curves-valid-accuracy"] = {curve = lines("valid/accuracy"), best = 3},
  ["curves-valid-loss"] = {curve = lines("valid/loss"), best = 3},
  ["isolation-optimizer"] = {pt = 2, errorbar = 1},
  ["parallel"] = {pc = search, pcbad = infeasible},
  ["gradnorm-steps"] = {gn = 1},
  ["gradnorm-hist"] = {},
  ["best-step-hist"] = {},
  ["bootstrap"] = {},
}
-- the axis ring is a circle of class best-ring, not pt
expect["axis-lr"].pt, expect["axis-optimizer"].pt = feasible, feasible

local hp = root .. "/harness.html"
harness(page, hp, d.metric)
local res, log = load(hp)
if not res then
  problem("the page did not finish loading in chromium (no result element); log:\n%s", log)
else
  for id, want in pairs(expect) do
    local got = res.figures[id]
    if not got then
      problem("figure %s is missing", id)
    else
      if not (got.width > 100 and got.height > 100) then problem("figure %s is laid out %sx%s", id, got.width, got.height) end
      for k, n in pairs(want) do
        if got[k] ~= n then problem("figure %s: %d %s rendered inside the plot, expected %d (%d in the DOM)", id, got[k], k, n,
          got[k .. "_all"]) end
      end
    end
  end
  if res.figures["axis-momentum"] then
    local m = res.figures["axis-momentum"]
    if m.pt + m.infeasible ~= sgd then problem("axis-momentum: %d marks, expected %d (sgd trials)", m.pt + m.infeasible, sgd) end
  end
  if res.rows ~= #d.trials then problem("the trials table has %d rows, expected %d", res.rows, #d.trials) end
  local by_id = {}
  for _, t in ipairs(d.trials) do by_id[t.id] = t end
  local a, z = by_id[res.sortAscFirst or ""], by_id[res.sortDescFirst or ""]
  if not a or a.value ~= worst.value then
    problem("sorting ascending puts %s first, expected a trial with the lowest value %s (%s)", tostring(res.sortAscFirst),
      tostring(worst.value), worst.id)
  end
  if not z or z.value ~= d.ranking[1].value then
    problem("sorting descending puts %s first, expected a trial with the best value %s (%s)", tostring(res.sortDescFirst),
      tostring(d.ranking[1].value), d.ranking[1].id)
  end
  local last = res.sortDescLast and d.trials[1] and nil
  for _, t in ipairs(d.trials) do if t.id == res.sortDescLast then last = t end end
  if not last or last.feasible then problem("sorting keeps infeasible trials (no value) last; last is %s", tostring(res.sortDescLast)) end
  for _, e in ipairs(res.errors) do problem("page error: %s", e) end
end
for _, l in ipairs(console_errors(log)) do problem("browser console: %s", l) end

------------------------------------------------------------ negative control

local bad = root .. "/bad.html"
F.write(bad, "<!DOCTYPE html><html><head></head><body><p>x</p><table id=\"trials-table\"><thead><tr><th>a</th></tr></thead>" ..
  "<tbody></tbody></table><script>undefinedFunction();</script><script>console.error('boom')</script></body></html>")
local bh = root .. "/bad-harness.html"
harness(bad, bh, "a")
local bres, blog = load(bh)
if not bres or #bres.errors < 2 then
  problem("the negative control's two errors were not caught (got %s)", bres and json.encode(bres.errors) or "no result")
end
if #console_errors(blog) == 0 then problem("the negative control's console error is not in the browser log") end

if screenshot then
  local ok, msg = report.screenshot(page, screenshot, {width = 1280, height = 2400})
  if not ok then problem("screenshot: %s", msg) end
end

if not keep then fs.rm_rf(root) else print("kept " .. root) end
if #problems > 0 then
  for _, p in ipairs(problems) do print("browser: " .. p) end
  os.exit(1)
end
print(string.format("browser: ok (%d plots, %d trials, %d svg elements; sorting and error capture checked)",
  #(function() local l = {} for k in pairs(res.figures) do l[#l + 1] = k end return l end)(), #d.trials, res.svgs))
