-- recipes/report.lua -- the report and the diagnosis of a finished study, run or
-- directory of runs (playbook 2.5, "extracting insight from experimental results"):
-- writes a self-contained HTML page with inline SVG plots and prints the checklist.
-- Because trials keep their whole history, another metric or aggregation re-ranks
-- everything without rerunning (--metric valid/loss, --aggregate final).
--
--   dlua recipes/report.lua DIR [--metric M] [--mode max|min] [--aggregate best|final]
--        [--out FILE] [--top K] [--isolate name,name] [--screenshot PNG]
local dl = require "dlua"
local probe = require "dlua.study.probe"

local USAGE = [[
usage: dlua recipes/report.lua DIR [flags]
  DIR                a study directory (runs/<study>), a run directory or a directory of runs
  --metric M         rank by another metric (e.g. valid/loss, train/loss; default: the study's objective)
  --mode max|min     its direction (default: min for ...loss/...error, else max)
  --aggregate A      best (over evals, default) or final (the last eval)
  --out FILE         the HTML file (default DIR/report.html)
  --top K            trials highlighted in the training curves (3)
  --isolate a,b      isolation plots for these hyperparameters too (continuous ones bucketed)
  --screenshot PNG   also render the page in headless Chromium and save a screenshot]]

probe.main(function()
  local args = {}
  for i = 1, #arg do args[i] = arg[i] end
  local cli = require "dlua.cli"
  local o = cli.parse(args, nil, {extra = {"--metric", "--mode", "--aggregate", "--top", "--isolate", "--screenshot"}})
  if o.help or #o.positional ~= 1 then
    print(USAGE)
    if not o.help then os.exit(1) end
    return
  end
  local dir = o.positional[1]
  local iso
  if o.extra.isolate then
    iso = {}
    for n in o.extra.isolate:gmatch("[^,]+") do iso[#iso + 1] = n end
  end
  local opts = {metric = o.extra.metric, mode = o.extra.mode, aggregate = o.extra.aggregate}
  local ropts = {metric = opts.metric, mode = opts.mode, aggregate = opts.aggregate, out = o.out,
                 top = probe.number("top", o.extra.top), isolate = iso}
  local path = dl.report(dir, ropts)
  dl.diagnose(dir, opts)
  print("report: " .. path)
  if o.extra.screenshot then
    local ok, msg = require("dlua.report").screenshot(path, o.extra.screenshot)
    if not ok then error("--screenshot: " .. msg, 0) end
    print("screenshot: " .. o.extra.screenshot)
  end
end)
