--- dlua.study.launch: starting a trial as a local dlua process, and the
-- questions about processes an agent asks (is this pid alive, which dlua to run).
-- A rank-aware dispatcher (dlua.study.ranks) passes its own launch function to
-- study:run / study:main instead of this one; both have the same contract.
local lfs = require "lfs"
local core = require "dlua.core"
local proc = require "dlua.util.proc"
local fs = require "dlua.util.fs"

local M = {}

local Handle = {}
Handle.__index = Handle

--- launch(exe, args, dir [, {agent_pid =}]) -> handle: starts `exe args...` (no
-- shell: dlua.util.proc) in the current directory, with its output in
-- dir/trial.log and its pid in dir/trial.pid. The trial leads its own process
-- group, so a terminal's Ctrl-C reaches the agent, which forwards it
-- (handle:kill); it gets SIGTERM when the agent dies, so a killed study leaves no
-- orphan writing into a run directory that a resumed study will reuse. The
-- handle's :poll() is nil while it runs and then the exit code (128 + signal
-- when a signal ended it); handle.t0 is the start time (core.clock). Errors
-- name the program when it cannot be started.
function M.launch(exe, args, dir, opts)
  fs.mkdir_p(dir)
  os.remove(dir .. "/result.json")
  local argv = {exe}
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local p = proc.spawn(argv, {cwd = lfs.currentdir(), stdout = dir .. "/trial.log", stderr = "stdout"})
  fs.write_atomic(dir .. "/trial.pid", p.pid .. "\n")
  return setmetatable({dir = dir, t0 = core.clock(), proc = p, opts = opts}, Handle)
end

function Handle:poll() return (self.proc:poll()) end

--- handle:kill(sig): sig ("INT", "TERM") to the trial's process group.
function Handle:kill(sig) self.proc:kill(sig) end

--- pid_alive(pid) -> is the process pid alive (not a zombie)? True when /proc
-- cannot tell (then the caller trusts the lease); false for nil.
function M.pid_alive(pid)
  if not pid then return false end
  if not fs.is_dir("/proc/self") then return true end
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return false end
  local s = f:read("l") or ""
  f:close()
  return not s:match("^%d+ %b() Z")
end

--- exe_path([opts]) -> the dlua executable trials run: opts.exe, else the one
-- running now (dlua.util.proc.exe_path: arg[-n], made absolute), else
-- $DLUA_EXE, else "dlua".
function M.exe_path(opts)
  if opts and opts.exe then return opts.exe end
  return proc.exe_path()
end

return M
