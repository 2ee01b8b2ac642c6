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

local OPTIONS = {metric = "string", mode = "string", aggregate = "string", out = "string", top = "integer",
  isolate = "table", title = "string", static = "boolean", watch = "boolean", interval = "number", timeout = "number",
  pareto = "table", quiet = "boolean"}

--- The page for loaded data and its findings (a string): static (inline SVG)
-- when opts.static, else interactive.
function M.render(d, findings, opts)
  opts = opts or {}
  if opts.static then return static.render(d, findings, opts) end
  return html.render(d, findings, opts)
end

-- loads, diagnoses and writes the page once; the path
local function write(dir, opts, watch)
  local d = A.load(dir, opts)
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
-- quiet.
-- @usage print(dl.report("runs/fashion-mnist-optimizer"))
function M.report(dir, opts)
  opts = util.check_options("dl.report", opts, OPTIONS, 2)
  if opts.static and opts.watch then error("dl.report: static and watch exclude each other (a static page cannot reload)", 2) end
  if opts.interval and not (opts.interval > 0) then error("dl.report: interval must be > 0 seconds", 2) end
  if opts.watch then
    if type(dir) ~= "string" or not fs.is_dir(dir) then error("dl.report: " .. tostring(dir) .. " is not a directory", 2) end
    return watch(dir, opts)
  end
  local ok, out = pcall(write, dir, opts, nil)
  if not ok then error("dl.report: " .. tostring(out), 2) end
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
