-- recipes/report.lua -- the report and the diagnosis of a finished (or running) study, run or
-- directory of runs (playbook 2.5, "extracting insight from experimental results"): writes a
-- self-contained HTML page and prints the checklist. The page is interactive (uPlot curves
-- with hover values, zoom, log y, smoothing, one trial highlighted everywhere; works offline
-- from file://); --static writes inline SVG only (CI artefacts, papers, PDFs); --watch keeps
-- rewriting it while a study runs, and the open page reloads itself. Because trials keep
-- their whole history, another metric or aggregation re-ranks everything without rerunning
-- (--metric valid/loss, --aggregate final).
--
--   dlua recipes/report.lua DIR [--metric M] [--mode max|min] [--aggregate best|final]
--        [--out FILE] [--top K] [--isolate name,name] [--pareto m1,m2] [--static]
--        [--watch [--interval S] [--timeout S]] [--screenshot PNG]
local dl = require "dlua"
local probe = require "dlua.study.probe"

local USAGE = [[
usage: dlua report DIR [flags]
  DIR                a study directory (runs/<study>), a run directory or a directory of runs
  --metric M         rank by another metric (e.g. valid/loss, train/loss; default: the study's objective)
  --mode max|min     its direction (default: min for ...loss/...error, else max)
  --aggregate A      best (over evals, default) or final (the last eval)
  --out FILE         the HTML file (default DIR/report.html)
  --top K            trials highlighted in the training curves (3)
  --isolate a,b      isolation plots for these hyperparameters too (continuous ones bucketed)
  --pareto m1,m2     the Pareto front of two metrics (directions from their names)
  --static           inline SVG only, no script but the table sorting (CI artefacts, papers, PDFs)
  --watch            rewrite the report as trials log and finish, until the study is finished;
                     the open page reloads itself (--interval S between checks, 2; --timeout S)
  --screenshot PNG   also render the page in headless Chromium and save a screenshot]]

probe.main(function()
  local args = {}
  for i = 1, #arg do args[i] = arg[i] end
  local cli = require "dlua.cli"
  local o = cli.parse(args, nil, {extra = {"--metric", "--mode", "--aggregate", "--top", "--isolate", "--screenshot",
    "--pareto", "--interval", "--timeout"}, switches = {"--static", "--watch"}, shared = {"--out"},
    command = "dlua report"})
  local static, watch = o.extra.static == true, o.extra.watch == true
  if o.help or #o.positional ~= 1 then
    print(USAGE)
    if not o.help then os.exit(1) end
    return
  end
  local dir = o.positional[1]
  local function list(s)
    if not s then return nil end
    local t = {}
    for n in s:gmatch("[^,]+") do t[#t + 1] = n end
    return t
  end
  local opts = {metric = o.extra.metric, mode = o.extra.mode, aggregate = o.extra.aggregate}
  local ropts = {metric = opts.metric, mode = opts.mode, aggregate = opts.aggregate, out = o.out,
                 top = probe.number("top", o.extra.top, nil, {int = 1}), isolate = list(o.extra.isolate), pareto = list(o.extra.pareto),
                 static = static or nil, watch = watch or nil}
  ropts.interval = probe.number("interval", o.extra.interval, nil, {above = 0})
  ropts.timeout = probe.number("timeout", o.extra.timeout, nil, {above = 0})
  if (ropts.interval or ropts.timeout) and not watch then error("--interval and --timeout go with --watch", 0) end
  local path = dl.report(dir, ropts)
  if watch then return end
  dl.diagnose(dir, opts)
  print("report: " .. path)
  if o.extra.screenshot then
    local ok, msg = require("dlua.report").screenshot(path, o.extra.screenshot)
    if not ok then error("--screenshot: " .. msg, 0) end
    print("screenshot: " .. o.extra.screenshot)
  end
end)
