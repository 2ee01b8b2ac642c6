--- dlua.study.launch: starting a trial as a local dlua process, and the
-- questions about processes an agent asks (is this pid alive, which dlua to run).
-- A rank-aware dispatcher (dlua.study.ranks) passes its own launch function to
-- study:run / study:main instead of this one; both have the same contract.
local lfs = require "lfs"
local core = require "dlua.core"
local util = require "dlua.util"
local fs = require "dlua.util.fs"
local common = require "dlua.study.common"

local M = {}

local shq = util.shell_quote

local Handle = {}
Handle.__index = Handle

local launched = 0

--- launch(exe, args, dir [, {agent_pid =}]) -> handle: starts `exe args...` in the
-- background, in the current directory, with its output in dir/trial.log. The
-- handle's :poll() is nil while it runs and the exit code once it ended (the
-- watchdog writes it to dir/exit.TOKEN, a name of this launch's own, which poll
-- renames to dir/exit: the watchdog of an earlier launch into the same directory
-- that ends late cannot pass its code off as this one's); handle.t0 is the start
-- time (core.clock). A watchdog shell
-- ends the trial when the agent process (agent_pid) dies, so a killed study leaves
-- no orphan writing into a run directory that a resumed study will reuse. Errors
-- when no shell can be started.
function M.launch(exe, args, dir, opts)
  opts = opts or {}
  fs.mkdir_p(dir)
  os.remove(dir .. "/exit")
  os.remove(dir .. "/result.json")
  for _, name in ipairs(fs.list(dir)) do
    if name:match("^exit%.") then os.remove(dir .. "/" .. name) end
  end
  local cmd = {shq(exe)}
  for _, a in ipairs(args) do cmd[#cmd + 1] = shq(a) end
  launched = launched + 1
  local token = string.format("%s-%d-%d", tostring(util.getpid()), launched, math.floor(core.clock() * 1e6))
  local d = shq(dir)
  local watch = opts.agent_pid and string.format(
    "kill -0 %d 2>/dev/null || { kill -TERM $c 2>/dev/null; sleep 1; kill -KILL $c 2>/dev/null; }; ", opts.agent_pid) or ""
  local script = string.format(
    "cd %s || exit 1; %s >%s/trial.log 2>&1 </dev/null & c=$!; echo $c >%s/trial.pid; " ..
    "while kill -0 $c 2>/dev/null; do %ssleep 0.2; done; wait $c; rc=$?; " ..
    "echo $rc >%s/exit.tmp.$$ && mv %s/exit.tmp.$$ %s/exit.%s",
    shq(lfs.currentdir()), table.concat(cmd, " "), d, d, watch, d, d, d, token)
  local ok = os.execute("sh -c " .. shq(script) .. " >/dev/null 2>&1 &")
  if not ok then error("dl.study: cannot start a trial process (sh)", 0) end
  return setmetatable({dir = dir, t0 = core.clock(), token = token}, Handle)
end

function Handle:poll()
  if self.code then return self.code end
  local path = self.dir .. "/exit." .. self.token
  local s = fs.read(path)
  if not s then return nil end
  self.code = tonumber(s:match("%-?%d+")) or -1
  os.rename(path, self.dir .. "/exit")
  return self.code
end

--- handle:stop(): ends the trial now (SIGKILL to the pid in dir/trial.pid; a
-- pruned or paused trial resumes from its checkpoints); poll then reports the
-- exit. A trial that already ended is left alone.
function Handle:stop()
  if self.code then return end
  local pid = tonumber((fs.read(self.dir .. "/trial.pid") or ""):match("%d+"))
  if pid and M.pid_alive(pid) then os.execute(string.format("kill -KILL %d 2>/dev/null", pid)) end
end

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
-- running now (arg[-n], made absolute), else $DLUA_EXE, else "dlua".
function M.exe_path(opts)
  if opts and opts.exe then return opts.exe end
  local i = -1
  while arg and arg[i - 1] do i = i - 1 end
  local a = arg and arg[i]
  if a and a ~= "" then
    if a:find("/") then return common.abspath(a) end
    return a
  end
  return os.getenv("DLUA_EXE") or "dlua"
end

return M
