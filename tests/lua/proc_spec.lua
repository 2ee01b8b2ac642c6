-- dlua.util.proc: children started without a shell (exit codes, 128 + signal,
-- output appended to files, the environment, process groups, exact error
-- messages), interrupts caught as a flag, sleeps that wake on them (and a
-- dlua child in util.sleep that a SIGINT ends at once, which the shell's
-- sleep used to swallow), and a child that cannot outlive its parent.
local proc = require "dlua.util.proc"
local util = require "dlua.util"
local core = require "dlua.core"
local fs = require "dlua.util.fs"
local H = dofile("tests/lua/helpers.lua")

local EXE = H.EXE

-- a process that ended: gone, or a zombie nobody reaped
local function ended(pid)
  local s = fs.read("/proc/" .. pid .. "/stat")
  return s == nil or s:match("%) (%a)") == "Z"
end

local function wait_until(pred, seconds)
  local t0 = core.clock()
  while core.clock() - t0 < seconds do
    if pred() then return true end
    proc.sleep(0.01)
  end
  return pred()
end

describe("proc.spawn", function()
  local dir
  before_each(function() dir = H.tmpdir("proc") end)
  after_each(function() fs.rm_rf(dir) end)

  it("runs a program with its output appended to a file and reports its exit status", function()
    local log = dir .. "/out.log"
    local p = proc.spawn({"sh", "-c", "echo out; echo err >&2; exit 7"}, {stdout = log, stderr = "stdout"})
    assert.is_true(p.pid > 0)
    assert.same({7}, {p:wait()})
    assert.equal(7, p.code)
    assert.is_nil(p.signal)
    p = proc.spawn({"sh", "-c", "echo $DL_SPEC_VAR; pwd"}, {stdout = log, env = {DL_SPEC_VAR = "from env"}, cwd = dir})
    assert.equal(0, (p:wait()))
    assert.equal("out\nerr\nfrom env\n" .. dir .. "\n", H.slurp(log))
  end)

  it("tells a running child from an ended one and ends a whole process group", function()
    local pidfile = dir .. "/grandchild"
    local p = proc.spawn({"sh", "-c", "sleep 30 & echo $! > " .. pidfile .. ".t; mv " .. pidfile .. ".t " .. pidfile ..
      "; wait"})
    assert.is_nil(p:poll())
    assert.is_nil(p:wait(0.05))
    assert.is_true(p:alive())
    assert.is_true(wait_until(function() return fs.exists(pidfile) end, 5))
    local gpid = tonumber(H.slurp(pidfile))
    assert.is_false(ended(gpid))
    p:kill("TERM")
    assert.same({143, "SIGTERM"}, {p:wait(5)})
    assert.is_true(wait_until(function() return ended(gpid) end, 5), "the grandchild outlived the group signal")
    assert.is_false(p:alive())
    p:kill("TERM")                                    -- reaped: nothing happens
  end)

  it("ends a child whose parent died (parent-death signal)", function()
    local pidfile = dir .. "/child"
    local script = dir .. "/parent.lua"
    H.spit(script, string.format([[
      local proc = require "dlua.util.proc"
      local p = proc.spawn({"sleep", "30"})
      local f = io.open(%q, "w"); f:write(p.pid); f:close()
      os.exit(0)   -- without waiting: the child is left behind
    ]], pidfile))
    local parent = proc.spawn({EXE, script})
    assert.equal(0, (parent:wait(10)))
    local child = tonumber(H.slurp(pidfile))
    assert.is_true(wait_until(function() return ended(child) end, 5), "the child outlived its parent")
  end)

  it("names the program, the file or the option in its errors", function()
    assert.has_error(function() proc.spawn({"dl-no-such-program-xyz"}) end,
      "cannot start 'dl-no-such-program-xyz': not found in PATH")
    assert.has_error(function() proc.spawn({"sh"}, {stdout = dir .. "/no/such/dir/x.log"}) end,
      "cannot start 'sh': cannot open '" .. dir .. "/no/such/dir/x.log': No such file or directory")
    assert.has_error(function() proc.spawn({"sh"}, {cwd = dir .. "/nope"}) end,
      "cannot start 'sh': cannot change to directory '" .. dir .. "/nope': No such file or directory")
    assert.has_error(function() proc.spawn({"sh"}, {stdot = "x"}) end,
      "proc.spawn: unknown option 'stdot' (valid: cwd, death_signal, env, group, stderr, stdout); did you mean 'stdout'?")
    assert.has_error(function() proc.spawn("sh") end,
      "proc.spawn: expected a list of strings (the program and its arguments), got string")
    assert.has_error(function() proc.spawn({"sh", 3}) end,
      "bad argument #1 to 'proc.spawn' (element 2 is a number, expected a string)")
    assert.has_error(function() proc.spawn({}) end,
      "bad argument #1 to 'proc.spawn' (expected a list with the program and its arguments)")
    assert.has_error(function() proc.spawn({"sh"}, {death_signal = "FOO"}) end,
      "bad argument #2 to 'proc.spawn' (option 'death_signal' (unknown signal 'FOO'))")
    assert.has_error(function() proc.kill(proc.getpid(), "NOPE") end,
      "bad argument #2 to 'proc.kill' (unknown signal 'NOPE'; expected one of: CHLD, CONT, HUP, INT, KILL, QUIT, " ..
      "STOP, TERM, USR1, USR2, WINCH)")
    assert.has_error(function() proc.sleep(-1) end, "bad argument #1 to 'proc.sleep' (expected a number of seconds " ..
      ">= 0, got -1.0)")
    assert.has_error(function() proc.exit_code("SIGHUP") end,
      "proc.exit_code: expected \"SIGINT\" or \"SIGTERM\", got SIGHUP")
  end)
end)

describe("proc signals", function()
  after_each(function() proc.clear() end)

  it("turns the first SIGINT into a flag and wakes a sleep at once", function()
    proc.catch()
    assert.is_nil((proc.interrupted()))
    local t0 = core.clock()
    assert.is_false(proc.sleep(0.05))
    assert.is_true(core.clock() - t0 >= 0.049)
    proc.kill(proc.getpid(), "INT")
    assert.same({"SIGINT", 1}, {proc.interrupted()})
    t0 = core.clock()
    assert.is_true(proc.sleep(10))
    assert.is_true(core.clock() - t0 < 0.5)
    assert.is_true(util.sleep(10))                      -- util.sleep is the same C sleep
    proc.release()
    assert.equal(130, proc.exit_code("SIGINT"))
    assert.equal(143, proc.exit_code("SIGTERM"))
  end)

  it("ends a dlua child sleeping in util.sleep at the first SIGINT (os.execute's sleep swallowed it)", function()
    local p = proc.spawn({EXE, "-e", "require('dlua.util').sleep(30)"})
    proc.sleep(0.3)
    local t0 = core.clock()
    p:kill("INT")
    assert.same({130, "SIGINT"}, {p:wait(5)})
    assert.is_true(core.clock() - t0 < 2)
  end)

  it("stops a catching child at the second signal without waiting for it", function()
    -- the child catches, sees the first SIGTERM, and keeps working until a second one
    local p = proc.spawn({EXE, "-e", [[
      local proc = require "dlua.util.proc"
      proc.catch()
      while not proc.interrupted() do proc.sleep(1) end
      io.stdout:write("first ", (proc.interrupted()), "\n"); io.stdout:flush()
      while true do proc.sleep(1) end]]}, {stdout = "/dev/null"})
    proc.sleep(0.3)
    p:kill("TERM")
    assert.is_nil(p:wait(0.3))                          -- still running after the first
    p:kill("INT")
    assert.same({130, "SIGINT"}, {p:wait(5)})
  end)

  it("wakes wait_event when a child ends", function()
    proc.catch()
    local p = proc.spawn({"sleep", "0.2"})
    local t0 = core.clock()
    while not p:poll() do proc.wait_event(10) end
    assert.is_true(core.clock() - t0 < 2)
    proc.release()
  end)
end)
