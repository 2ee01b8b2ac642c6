--- dlua.report: a study (or a run, or a directory of runs) as one
-- self-contained HTML page, the playbook's "automate generically useful
-- plots" (section 2.5).
--
--   dl.report("runs/fashion-mnist-optimizer")            -- .../report.html, interactive
--   dl.report(dir, {static = true})                      -- inline SVG only (CI artefacts, papers, PDFs)
--   dl.report(dir, {watch = true})                       -- rewrites it as trials (the run) log, until the study (run) is done
--   dl.report(dir, {metric = "valid/loss", aggregate = "final", out = "r.html", top = 5})
--
-- The interactive page (dlua.report.html) draws the training curves with the
-- vendored uPlot (hover values, zoom, pan, log y, smoothing, legend toggles,
-- one trial highlighted everywhere) next to the SVG views (dlua.report.static,
-- dlua.report.views): optimisation history, importance, pruned trials, Pareto
-- front, axis, isolation, gradient-norm and parallel-coordinate plots, the
-- diagnosis (dlua.report.diagnose) and the sortable trials table. Either page
-- fetches nothing. Everything is recomputed from the stored histories, so
-- another metric or aggregation needs no rerun.
local A = require "dlua.report.analysis"
local static = require "dlua.report.static"
local html = require "dlua.report.html"
local diagnose = require "dlua.report.diagnose"
local svg = require "dlua.report.svg"
local data = require "dlua.report.data"
local fs = require "dlua.util.fs"
local util = require "dlua.util"
local lfs = require "lfs"
local core = require "dlua.core"

local M = {}

local OPTIONS = {metric = "string", mode = "string", aggregate = "string", out = "string", top = "integer>=1",
  isolate = "table", title = "string", static = "boolean", watch = "boolean", interval = "number", timeout = "number",
  pareto = "table", quiet = "boolean"}

-- the options that only the watcher reads, and what they mean
local WATCH_ONLY = {interval = "seconds between the watcher's checks", timeout = "seconds after which the watcher stops",
  quiet = "the watcher prints nothing; without watch dl.report prints nothing anyway"}

local PARETO_FORM = 'exactly two metrics ({"valid/accuracy", "valid/loss"}, or entries {metric =, mode = "min" | "max"})'

-- the type of v as an error names it
local function kind(v) return math.type(v) == "float" and "number" or math.type(v) or type(v) end

-- nil, or the problem of a table that must be a list of what: a key other than 1..n
local function keys_problem(name, what, list)
  local k = util.list_stray_key(list)
  if k ~= nil then return string.format("option '%s' must be a list of %s, got the key %s", name, what, tostring(k)) end
end

-- nil, or the problem of a list option (every key 1..n, every value a string)
local function list_problem(name, what, list)
  local bad = keys_problem(name, what, list)
  if bad then return bad end
  for i = 1, #list do
    if type(list[i]) ~= "string" then
      return string.format("option '%s' must be a list of %s (strings), got %s at %d", name, what, kind(list[i]), i)
    end
  end
end

-- nil, or the problem of the pareto option's form (not yet its metrics: they need the study)
local function pareto_problem(p)
  local bad = keys_problem("pareto", PARETO_FORM, p)
  if bad then return bad end
  local n = #p
  if n ~= 2 then
    return string.format("option 'pareto' must be a list of %s, got %d entr%s", PARETO_FORM, n, n == 1 and "y" or "ies")
  end
  local names = {}
  for i = 1, 2 do
    local o, at = p[i], string.format("pareto[%d]", i)
    if type(o) == "table" and getmetatable(o) == nil then
      -- the one option checker, on the entry as a nested option named at (its message without the prefix
      -- dl.report adds), and the one wording of a choice
      bad = util.option_problem("dl.report", {[at] = o}, {[at] = {metric = true, mode = true}})
      if bad then return (bad:gsub("^dl%.report: ", "")) end
      if type(o.metric) ~= "string" or o.metric == "" then
        return string.format("option '%s.metric' must be a metric name (a string), got %s", at,
          o.metric == "" and "an empty string" or kind(o.metric))
      end
      bad = util.choice_problem(at .. ".mode", o.mode, {"min", "max"})
      if bad then return bad end
      names[i] = o.metric
    elseif type(o) == "string" and o ~= "" then
      names[i] = o
    else
      return string.format("option '%s' must be a metric name or {metric =, mode =}, got %s", at,
        o == "" and "an empty string" or kind(o))
    end
  end
  if names[1] == names[2] then return string.format("option 'pareto' names %s twice (%s)", names[1], PARETO_FORM) end
end

-- nil, or the problem of the options that need no data
local function shape_problem(opts)
  if opts.static and opts.watch then return "static and watch exclude each other (a static page cannot reload)" end
  for _, k in ipairs({"interval", "quiet", "timeout"}) do
    if opts[k] ~= nil and not opts.watch then
      return string.format("option '%s' goes with watch = true (%s), got %s without it", k, WATCH_ONLY[k], tostring(opts[k]))
    end
  end
  for _, k in ipairs({"interval", "timeout"}) do
    if opts[k] ~= nil and not (opts[k] > 0) then
      return string.format("option '%s' must be > 0 seconds, got %s", k, tostring(opts[k]))
    end
  end
  if opts.isolate then
    local p = list_problem("isolate", "hyperparameter names", opts.isolate)
    if p then return p end
  end
  if opts.pareto then return pareto_problem(opts.pareto) end
end

-- a sorted list of at most 20 names, and "..." after them
local function listing(names)
  local out = {}
  for i = 1, math.min(#names, 20) do out[i] = names[i] end
  if #names > 20 then out[#out + 1] = string.format("... %d more", #names - 20) end
  return #out > 0 and table.concat(out, ", ") or "none"
end

-- nil, or the problem of isolate and pareto against the loaded data d: isolate
-- names a hyperparameter the study varies, pareto metrics that its trials recorded
local function data_problem(d, opts)
  if opts.isolate and #opts.isolate > 0 then
    local varied, names, all = {}, {}, {}
    for _, dim in ipairs(static.axis_dims(d)) do
      if not varied[dim.name] then varied[dim.name] = true; names[#names + 1] = dim.name end
    end
    for _, t in ipairs(d.trials) do for k in pairs(t.hp or {}) do all[k] = true end end
    for _, n in ipairs(opts.isolate) do
      if not varied[n] then
        local cands = {}
        for _, v in ipairs(names) do cands[#cands + 1] = v end
        for _, v in ipairs(A.sorted_keys(all)) do cands[#cands + 1] = v end
        local hint = not all[n] and util.nearest(n, cands)
        return string.format("option 'isolate': '%s' %s %s (varied: %s)%s", n,
          all[n] and "does not vary in" or "is not a hyperparameter of", d.dir, listing(names),
          hint and ("; did you mean '" .. hint .. "'?") or "")
      end
    end
  end
  if opts.pareto then
    if d.kind == "run" then
      return "option 'pareto' needs a study or a directory of runs (a Pareto front of one run is one point), got the run " .. d.dir
    end
    local seen, names = {}, {}
    for _, t in ipairs(d.trials) do
      for _, n in ipairs(A.series_names(t)) do
        if not seen[n] then seen[n] = true; names[#names + 1] = n end
      end
    end
    table.sort(names, A.name_less)
    for _, o in ipairs(opts.pareto) do
      local m = type(o) == "table" and o.metric or o
      if not seen[m] then
        local hint = util.nearest(m, names)
        local shown = {}
        for _, n in ipairs(names) do if not n:find("/per_class/", 1, true) then shown[#shown + 1] = n end end
        return string.format("option 'pareto': no trial of %s recorded '%s' (metrics: %s)%s", d.dir, m, listing(shown),
          hint and ("; did you mean '" .. hint .. "'?") or "")
      end
    end
  end
end

--- The page for loaded data and its findings (a string): static (inline SVG)
-- when opts.static, else interactive.
function M.render(d, findings, opts)
  opts = opts or {}
  if opts.static then return static.render(d, findings, opts) end
  return html.render(d, findings, opts)
end

-- loads, diagnoses and writes the page once; the path
-- (an option that does not fit the data is an error {option = message}, not a string)
local function write(dir, opts, watch)
  local d = A.load(dir, opts)
  local bad = data_problem(d, opts)
  if bad then error({option = bad}, 0) end
  local findings = diagnose.check(d)
  local ropts = {}
  for k, v in pairs(opts) do ropts[k] = v end
  ropts.watch = watch
  local out = opts.out or (d.dir .. "/report.html")
  fs.write_atomic(out, M.render(d, findings, ropts))
  return out, d
end

-- what changes when a trial logs or finishes: sizes and times of the files the report reads
local function signature(dir)
  local parts = {}
  local function add(path)
    local a = lfs.attributes(path)
    if a then parts[#parts + 1] = string.format("%s:%d:%d", path, a.size, a.modification) end
  end
  for _, f in ipairs({"journal.jsonl", "trials.csv", "results.json", "study.json", "metrics.jsonl", "result.json"}) do
    add(dir .. "/" .. f)
  end
  for _, name in ipairs(fs.list(dir)) do
    if fs.is_dir(dir .. "/" .. name) then add(dir .. "/" .. name .. "/metrics.jsonl"); add(dir .. "/" .. name .. "/result.json") end
  end
  return table.concat(parts, "|")
end

-- is there nothing more to wait for: a study with results.json newer than its
-- journal (dl.study writes it on completion), a run with a result.json that
-- names a status and is not older than its metrics.jsonl (dl.train writes it
-- when the run ends; a resumed run appends to metrics.jsonl after the old one)
local function finished(dir)
  local res, jr = lfs.attributes(dir .. "/results.json"), lfs.attributes(dir .. "/journal.jsonl")
  if fs.exists(dir .. "/study.json") then return res ~= nil and (jr == nil or res.modification >= jr.modification) end
  local r, m = lfs.attributes(dir .. "/result.json"), lfs.attributes(dir .. "/metrics.jsonl")
  if not (r and m and r.modification >= m.modification) then return false end
  local result = A.read_json(dir .. "/result.json")
  return result ~= nil and type(result.status) == "string"
end

-- a page for a study that has no readable trial yet; it polls like the report
local function waiting_page(dir, why, w)
  return string.format('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>waiting - dlua report</title>' ..
    '</head><body><h1>dlua report: waiting</h1><p>%s</p><script>window.DLUA_WATCH = %s;' ..
    'window.dluaWatch = function (s) { if (s.stamp !== window.DLUA_WATCH.stamp) location.reload(); };' ..
    'setInterval(function () { var s = document.createElement("script"); s.src = window.DLUA_WATCH.file + "?" + Date.now();' ..
    ' s.onload = s.onerror = function () { s.remove(); }; document.head.appendChild(s); }, window.DLUA_WATCH.interval);' ..
    '</script></body></html>\n', svg.escape(dir .. ": " .. why), data.encode(w))
end

-- the watch loop: rewrite the page and its sibling stamp script whenever the
-- files change, until the study (run) is finished or opts.timeout seconds passed
local function watch(dir, opts)
  dir = dir:gsub("/+$", "")
  local out = opts.out or (dir .. "/report.html")
  local file = out:match("([^/]*)$") .. ".watch.js"
  local interval = opts.interval or 2
  local start, n, last = core.clock(), 0, nil
  local function say(fmt, ...) if not opts.quiet then print(string.format(fmt, ...)) end end
  while true do
    local sig = signature(dir)
    local done = finished(dir)
    if sig ~= last then
      n = n + 1
      local w = {file = file, stamp = string.format("%d-%d", os.time(), n), interval = math.floor(interval * 1000), done = done}
      local ok, err = pcall(write, dir, opts, w)
      -- an option the finished study (run) does not fit: an error; until then the page and the line say it
      if not ok and type(err) == "table" and done then return nil, err.option end
      if type(err) == "table" then err = "option problem: " .. err.option end
      if not ok then
        fs.write_atomic(out, waiting_page(dir, tostring(err), w))
        say("report: %s (waiting: %s)", out, tostring(err))
      else
        say("report: %s (update %d%s)", out, n, done and ", finished" or "")
      end
      fs.write_atomic(out:gsub("[^/]*$", "") .. file, html.watch_script(w.stamp, done))
      last = sig
    end
    if done or (opts.timeout and core.clock() - start >= opts.timeout) then break end
    util.sleep(interval)
  end
  return out
end

--- dl.report(dir [, {metric =, mode =, aggregate = "best" | "final", out =,
-- top = 3, isolate = {names}, title =, pareto = {metric, metric}, static =
-- false, watch = false, interval = 2, timeout =, quiet =}]) --> path of the
-- HTML file (default dir/report.html). dir: a study directory, a run
-- directory or a directory of run directories. watch: rewrite the page (and
-- <out>.watch.js, which the open page polls to reload itself) whenever a
-- trial (the run) logs or finishes, every `interval` seconds, until the study
-- is finished (its results.json; a run: its result.json, not older than its
-- metrics.jsonl) or `timeout` seconds passed; prints a line per rewrite unless
-- quiet (interval, timeout and quiet go with watch only). Every option is
-- checked: top a positive integer, isolate names the study varies, pareto two
-- distinct metrics its trials recorded (docs/api/report.md).
-- @usage print(dl.report("runs/fashion-mnist-optimizer"))
function M.report(dir, opts)
  opts = util.check_options("dl.report", opts, OPTIONS, 2)
  local bad = shape_problem(opts)
  if bad then error("dl.report: " .. bad, 2) end
  if opts.watch then
    if type(dir) ~= "string" or not fs.is_dir(dir) then error("dl.report: " .. tostring(dir) .. " is not a directory", 2) end
    local path, err = watch(dir, opts)
    if not path then error("dl.report: " .. err, 2) end
    return path
  end
  local ok, out = pcall(write, dir, opts, nil)
  if not ok then error("dl.report: " .. (type(out) == "table" and out.option or tostring(out)), 2) end
  return out
end

------------------------------------------------------------ in a browser

local shq = util.shell_quote

--- The headless Chromium to render reports with: $DLUA_CHROMIUM, else the first
-- of chromium, chromium-browser, google-chrome on the PATH; nil when none.
function M.chromium()
  local env = os.getenv("DLUA_CHROMIUM")
  if env and env ~= "" then return env end
  for _, name in ipairs({"chromium", "chromium-browser", "google-chrome"}) do
    local p = io.popen("command -v " .. name .. " 2>/dev/null")
    local path = p and p:read("l")
    if p then p:close() end
    if path and path ~= "" then return path end
  end
end

--- Renders an HTML file in headless Chromium and saves a PNG screenshot:
-- true, or nil and a message. opts: width (1280), height (2400).
function M.screenshot(html, png, opts)
  opts = util.check_options("report.screenshot", opts, {width = "integer", height = "integer"}, 2)
  local exe = M.chromium()
  if not exe then return nil, "no chromium found (install Debian's chromium: scripts/setup.sh)" end
  local abs = html:sub(1, 1) == "/" and html or (lfs.currentdir() .. "/" .. html)
  local pabs = png:sub(1, 1) == "/" and png or (lfs.currentdir() .. "/" .. png)
  local cmd = string.format("%s --headless --disable-gpu --no-sandbox --hide-scrollbars --window-size=%d,%d " ..
    "--screenshot=%s %s 2>&1", shq(exe), opts.width or 1280, opts.height or 2400, shq(pabs), shq("file://" .. abs))
  local p = io.popen(cmd)
  local out = p:read("a")
  local ok = p:close()
  if not ok or not fs.exists(pabs) then return nil, "chromium failed: " .. out end
  return true
end

return M
