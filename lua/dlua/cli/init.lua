--- dlua.cli: runs what a script returns, the top of the Lua library.
--
--   dlua examples/fashion_mnist.lua [--out DIR] [--steps N] [--set key=value]...
--        [--resume [--override]] [--seed N] [--threads N] [--trace FILE] [--quiet]
--        [--check-determinism N] [--prune FILE] [--help]
--
-- `--set` values are typed by the default's type (numbers, integers, booleans,
-- strings); unknown flags, unknown hyperparameters and bad values are errors
-- naming the flag. dlua calls cli.run(obj, script) when a script's main chunk
-- returns a dl.experiment (or a dl.study).
--
-- The flags themselves are parsed by dlua.train.flags (re-exported here as
-- cli.parse, cli.typed, cli.help, cli.command, cli.default_out, cli.FLAGS); a
-- study's trials over ranks by dlua.study.ranks; this file adds the run, the
-- determinism check and, after a study, its report and diagnosis.
local core = require "dlua.core"
local util = require "dlua.util"
local proc = require "dlua.util.proc"
local blame = require "dlua.util.blame"
local fs = require "dlua.util.fs"
local flags = require "dlua.train.flags"
local checkpoint = require "dlua.train.checkpoint"
local data = require "dlua.data"
local ranks = require "dlua.study.ranks"
local launch = require "dlua.study.launch"
local prune = require "dlua.study.prune"
local report = require "dlua.report"
local diagnose = require "dlua.report.diagnose"

local M = {}

M.FLAGS, M.typed, M.parse, M.help, M.command, M.default_out = flags.FLAGS, flags.typed, flags.parse, flags.help,
  flags.command, flags.default_out
--- The number of online CPUs (util.cores).
M.cores = util.cores

--- Compares two state dicts; returns nil when identical, else the first differing name.
local function first_difference(a, b)
  local names = {}
  for k in pairs(a) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    local x, y = a[k], b[k]
    if not y or (x - y):abs():max():item() ~= 0 then
      local d = y and (x:double() - y:double()):abs():max():item() or nil
      return k, d
    end
  end
end

local function check_determinism(exp, o, script)
  local results = {}
  for r = 1, 2 do
    local dir = string.format("%s/dlua-determinism-%d-%d", os.getenv("TMPDIR") or "/tmp",
      math.floor(core.clock() * 1000) % 100000000, r)
    local res = exp:run(o.set, {dir = dir, quiet = true, steps = o.check_determinism, tracking = false})
    if res.status ~= "done" then error(string.format("--check-determinism: run %d %s: %s", r, res.status,
      tostring(res.message)), 0) end
    local cfg_model = checkpoint.load(res.latest)
    results[r] = cfg_model
    fs.rm_rf(dir)
  end
  local a, b = {}, {}
  for k, t in pairs(results[1]) do if k:match("^model/") then a[k] = t end end
  for k, t in pairs(results[2]) do if k:match("^model/") then b[k] = t end end
  local name, diff = first_difference(a, b)
  if name then
    print(string.format("%s: NOT deterministic: after %d steps parameter %s differs (max abs difference %s)",
      script, o.check_determinism, name:sub(7), tostring(diff)))
    return false
  end
  print(string.format("%s: deterministic: %d steps twice from the same state give identical parameters (%d tensors)",
    script, o.check_determinism, #(function() local l = {} for k in pairs(a) do l[#l + 1] = k end return l end)()))
  return true
end

--- report_study(res): a finished study's report and the playbook's diagnosis
-- (docs/api/report.md), printed as `report: PATH`; a failure of either is a warning.
-- Nothing for nil (--help, or a rank serving trials) or a study only created.
function M.report_study(res)
  if not res or not res.dir or res.ran == nil then return end
  local ok, path = pcall(report.report, res.dir)
  if ok then print("report: " .. path) else io.stderr:write("dlua: warning: no report: ", tostring(path), "\n") end
  local dok, derr = pcall(diagnose.diagnose, res.dir)
  if not dok then io.stderr:write("dlua: warning: no diagnosis: ", tostring(derr), "\n") end
end

--- run_study(obj, args, script [, report]): a study's trials (over MPI ranks by
-- dlua.study.ranks; alone, study:main with args), then its report and diagnosis unless
-- report is false; after an interrupt it exits 130 / 143 (no report of half a study, the
-- next run continues). Returns dl.study_results (nil for --help).
function M.run_study(obj, args, script, report)
  local res = ranks.run_study(obj, args, script)
  if res and res.interrupted then os.exit(proc.exit_code(res.interrupted)) end
  if report ~= false then M.report_study(res) end
  return res
end

local run_checked

--- Runs an experiment (or a study) returned by a script; exits non-zero on failure.
-- Errors are printed as one line ("dlua: file:line: message"), led by the user's
-- file and line when the mistake has one (never by a file of the library: a
-- training failure names the script); DLUA_DEBUG=1 adds the traceback, library
-- frames included.
function M.run(obj, script)
  local tb
  local ok, res = xpcall(run_checked, function(e)
    if type(e) == "table" and e.failed_run then tb = e.traceback or e.message; return e.message end
    tb = blame.traceback(tostring(e), 2)
    return blame.message(e, 2)
  end, obj, script)
  if ok then return res end
  io.stderr:write("dlua: ", tostring(res), "\n")
  if blame.debug() then io.stderr:write(tb, "\n") end
  os.exit(1)
end

--- finish(res, script): what `dlua SCRIPT` does once the script's main chunk returned
-- res, the one path for dlua.c and `dlua run` / the recipe commands: an experiment or
-- a study is run (M.run); anything else must not have been given dlua's flags unless
-- the script read arg (dlua.train.flags.check_unused raises a one-line usage error).
function M.finish(res, script)
  if type(res) == "table" and type(res._dlua_kind) == "string" then return M.run(res, script) end
  flags.check_unused(script)
end

function run_checked(obj, script)
  local args = {}
  for i = 1, #(arg or {}) do args[i] = arg[i] end
  if obj._dlua_kind == "study" then return M.run_study(obj, args, script) end
  local o = M.parse(args, obj.hparams)
  if o.help then print(M.help(obj, script)); return end
  if #o.positional > 0 then error(string.format("unexpected argument '%s' (see --help)", o.positional[1]), 0) end
  core.threads(o.threads or util.cores())
  if o.seed then o.set.seed = o.seed end
  obj.path = obj.path or script
  if o.check_determinism then
    if not check_determinism(obj, o, script) then os.exit(1) end
    return
  end
  if not o.out then o.out = M.default_out(obj.name, o.resume) end
  local trace = o.trace and data.trace
  if trace then trace.start(o.trace) end
  local hp = obj:resolve(o.set)
  if o.steps then hp.steps = o.steps end
  local tracking = nil
  if o.no_track then tracking = false end
  local on_eval = o.prune and prune.judge(o.prune) or nil     -- a study's trial judges its pruning
  if o.override and not o.resume then error("--override applies to --resume only (see --help)", 0) end
  local res = obj:run(o.set, {dir = o.out, resume = o.resume, override = o.override, quiet = o.quiet, steps = o.steps,
                              command = M.command(script, obj, hp, o), tracking = tracking, on_eval = on_eval,
                              objective = o.objective})
  if trace then trace.stop() end
  if res.status == "failed" then                    -- "file:line: training failed: step N: what"
    local loc, rest = blame.split(tostring(res.message))
    error({failed_run = true, message = string.format("%s: training failed: %s", loc or script, rest),
           traceback = res.traceback}, 0)
  end
  if res.status == "diverged" then
    io.stderr:write(string.format("%s: diverged: %s\n", script, tostring(res.message)))
    os.exit(3)
  end
  if res.status == "interrupted" then                 -- 130 (SIGINT) or 143 (SIGTERM), as a shell reports it
    io.stderr:write("dlua: resume with: ", M.resume_command(script, args, o.out), "\n")
    os.exit(proc.exit_code(res.signal))
  end
  return res
end

--- The command that continues a run: the dlua that runs now (as launch.exe_path
-- finds it: "dlua" only when it was started from PATH), the script and its
-- arguments as given, with --out DIR (the run directory used) and --resume added
-- when missing.
function M.resume_command(script, args, out)
  local parts, has_out, has_resume = {util.shell_quote(launch.exe_path()), util.shell_quote(script)}, false, false
  for _, a in ipairs(args) do
    if a == "--out" or a:match("^%-%-out=") then has_out = true end
    if a == "--resume" then has_resume = true end
    parts[#parts + 1] = util.shell_quote(a)
  end
  if not has_out then parts[#parts + 1] = "--out " .. util.shell_quote(out) end
  if not has_resume then parts[#parts + 1] = "--resume" end
  return table.concat(parts, " ")
end

return M
