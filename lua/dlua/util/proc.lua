--- dlua.util.proc: signals, sleeps that wake on them, the terminal's width and
-- child processes (engine/sys/proc.c): the one way dlua interrupts cleanly and
-- starts, watches and stops trial processes. Nothing here runs a shell.
--
--   local proc = require "dlua.util.proc"
--   proc.catch()                                  -- SIGINT/SIGTERM now set a flag
--   local p = proc.spawn({"dlua", "exp.lua", "--quiet"}, {stdout = "run/trial.log", stderr = "stdout"})
--   while not p:poll() do
--     if proc.interrupted() then p:kill("INT") end   -- forwarded to the trial's process group
--     proc.wait_event(1)                          -- wakes when a child ends or a signal arrives
--   end
--   print(p.code, p.signal)                        -- 130, nil: the trial stopped cleanly
--   proc.release()
--
-- Signals: while caught, the first SIGINT or SIGTERM only sets a flag
-- (proc.interrupted() returns "SIGINT" or "SIGTERM" and the count); the
-- second stops the process at once with the default action. A signal ignored
-- when catching starts stays ignored. proc.exit_code(name) is the status a
-- process interrupted by it exits with (130, 143), as a shell reports it.
--
-- Processes: spawn runs argv (argv[1] searched in PATH) with stdin from
-- /dev/null, stdout/stderr appended to files, in its own process group (a
-- terminal's Ctrl-C reaches the parent, which forwards it), and with SIGTERM
-- sent to it when the parent dies (Linux), so it cannot outlive the parent.
local core = require "dlua.core"
local util = require "dlua.util"
local fs = require "dlua.util.fs"

local M = {}

-- calls core function f, re-raising its error at the caller's caller, named as name
local function call(name, f, ...)
  local r = table.pack(pcall(f, ...))
  if not r[1] then
    local msg = tostring(r[2]):gsub("'dlua%.core%._[%w_]+'", "'" .. name .. "'")
    error(msg, 3)
  end
  return table.unpack(r, 2, r.n)
end

--------------------------------------------------------------------- signals

--- proc.catch(): from now on SIGINT and SIGTERM set a flag instead of ending
-- the process (the second one still ends it); SIGWINCH and SIGCHLD wake
-- proc.wait_event. Nests with proc.release(). An interrupt stays pending until
-- proc.clear(): a script looping over several runs stops each at its first step,
-- and the next signal ends the process.
function M.catch() call("proc.catch", core._signal_catch) end

--- proc.release(): undoes one proc.catch (the last restores the dispositions).
function M.release() call("proc.release", core._signal_release) end

--- proc.interrupted() -> "SIGINT" | "SIGTERM" | nil, count: the first
-- interrupting signal caught, and how many were.
function M.interrupted() return core._signal_pending() end

--- proc.clear(): forgets caught interrupts.
function M.clear() core._signal_clear() end

--- proc.exit_code(name) -> 130 for "SIGINT", 143 for "SIGTERM" (128 + the number).
function M.exit_code(name)
  if name == "SIGINT" then return 130 elseif name == "SIGTERM" then return 143 end
  error(string.format("proc.exit_code: expected \"SIGINT\" or \"SIGTERM\", got %s", tostring(name)), 2)
end

--- proc.sleep(seconds) -> interrupted: sleeps, returning true at once (or
-- early) when an interrupt is caught, false after the full time.
function M.sleep(s) return call("proc.sleep", core._sleep, s) end

--- proc.wait_event(seconds) -> woke: waits until a child changes state, a
-- signal is caught or the time passes (false). Spurious wake-ups happen.
function M.wait_event(s) return call("proc.wait_event", core._wait_event, s) end

--- proc.winch_count() -> how many SIGWINCH were caught (re-read the width when it changes).
function M.winch_count() return core._signal_winch() end

--- proc.term_width([fd]) -> columns of the terminal on fd (default 1), or nil.
function M.term_width(fd) return call("proc.term_width", core._term_width, fd) end

--- proc.exe_path() -> the dlua executable running now, as a command a user
-- can paste: arg[-n] (the interpreter's own argv[0]) made absolute when it
-- names a path ("build/dlua" -> "/src/dlua/build/dlua"), kept as it is when it
-- was found on PATH ("dlua"); else $DLUA_EXE, else "dlua".
-- @usage proc.exe_path() --> "/home/me/dlua/build/dlua"
function M.exe_path()
  local i = -1
  while arg and arg[i - 1] do i = i - 1 end
  local a = arg and arg[i]
  if a and a ~= "" then
    if a:find("/", 1, true) then return fs.abspath(a) end
    return a
  end
  return os.getenv("DLUA_EXE") or "dlua"
end

--- proc.getpid() -> this process's id.
function M.getpid() return core._getpid() end

--- proc.alive(pid) -> does process pid exist (a zombie counts)?
function M.alive(pid) return call("proc.alive", core._proc_alive, pid) end

--- proc.kill(pid, sig [, group]): sends sig ("INT", "TERM", "KILL", ...) to pid
-- or (group = true) to its process group; an ended process is no error.
function M.kill(pid, sig, group) return call("proc.kill", core._proc_signal, pid, sig, group or false) end

--- proc.test_pause(phase, step): a test hook that widens a window so a spec can
-- send a signal inside it. DLUA_TEST_PAUSE="step=0.05,eval=0.5,checkpoint=0.5"
-- sleeps that long at each such point, the full time even after an interrupt (the
-- window stays open for a second signal); with DLUA_TEST_PAUSE_MARK=FILE each pause
-- first appends "<phase> <step>" to FILE. Without the variable it does nothing.
local pauses
function M.test_pause(phase, step)
  if pauses == nil then
    pauses = {}
    for k, v in (os.getenv("DLUA_TEST_PAUSE") or ""):gmatch("(%w+)=([%d.]+)") do pauses[k] = tonumber(v) end
  end
  local s = pauses[phase]
  if not s then return end
  local mark = os.getenv("DLUA_TEST_PAUSE_MARK")
  if mark then
    local f = io.open(mark, "a")
    if f then f:write(phase, " ", tostring(step), "\n"); f:close() end
  end
  local t_end = core.clock() + s
  while core.clock() < t_end do core._wait_event(t_end - core.clock()) end
end

------------------------------------------------------------------- processes

local Proc = {}
Proc.__index = Proc
Proc.__name = "dlua.Proc"

local SPAWN = {cwd = "string", env = "table", group = "boolean", death_signal = true, stderr = "string",
               stdout = "string"}

--- proc.spawn(argv, opts) -> p: starts argv (a list of strings) and returns at
-- once. opts: cwd, stdout (a file, appended), stderr (a file, or "stdout"),
-- env ({NAME = value} set on top of this environment), group (default true:
-- its own process group), death_signal (default "TERM"; false for none).
-- p.pid; p:poll() -> nil while it runs, else code, signal (also p.code and
-- p.signal: the exit status, or 128 + the signal that ended it, and that
-- signal's name); p:wait(); p:kill(sig) (its process group when it has one).
-- @usage local p = proc.spawn({"dlua", "x.lua"}, {stdout = "x.log", stderr = "stdout"}); p:wait()
function M.spawn(argv, opts)
  if type(argv) ~= "table" then error("proc.spawn: expected a list of strings (the program and its arguments), got " ..
    type(argv), 2) end
  opts = util.check_options("proc.spawn", opts, SPAWN, 2)
  local pid = call("proc.spawn", core._proc_spawn, argv, opts)
  return setmetatable({pid = pid, argv = util.copy(argv), group = opts.group ~= false, t0 = core.clock()}, Proc)
end

function Proc:poll()
  if self.code then return self.code, self.signal end
  local code, sig = call("proc.poll", core._proc_poll, self.pid, false)
  if code then self.code, self.signal, self.t1 = code, sig, core.clock() end
  return code, sig
end

--- p:wait([timeout]) -> code, signal; with a timeout, nil when it still runs
-- then (it wakes on child events and interrupts, so a caller can react).
function Proc:wait(timeout)
  if self.code then return self.code, self.signal end
  if not timeout then
    local code, sig = call("proc.wait", core._proc_poll, self.pid, true)
    self.code, self.signal, self.t1 = code, sig, core.clock()
    return code, sig
  end
  local deadline = core.clock() + timeout
  while true do
    local code, sig = self:poll()
    if code then return code, sig end
    local left = deadline - core.clock()
    if left <= 0 then return nil end
    M.wait_event(math.min(left, 0.5))
  end
end

--- p:kill(sig): sig ("INT", "TERM", ...) to the process (its process group when
-- spawned with one); nothing once it was reaped.
function Proc:kill(sig)
  if self.code then return end
  call("proc.kill", core._proc_signal, self.pid, sig, self.group)
end

function Proc:alive() return self.code == nil and core._proc_alive(self.pid) end

return M
