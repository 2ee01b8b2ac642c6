-- dlua.train.progress against a scripted clock and a captured output: the ETA
-- (steady pace, after a resume, with an evaluation's time inside an interval,
-- with the eval and checkpoint time it is told of extrapolated: the numbers are
-- worked out by hand below), lines cut to the width with the objective first,
-- eval lines kept above the live line, the eval indicator, piped output, and
-- the study line.
local progress = require "dlua.train.progress"
local proc = require "dlua.util.proc"

-- an output that records what is written
local function sink()
  local s = {buf = {}}
  function s.write(self, ...) for _, x in ipairs({...}) do self.buf[#self.buf + 1] = tostring(x) end return self end
  function s.flush() end
  function s.text(self) return table.concat(self.buf) end
  -- every line drawn: "\r\27[K" starts the line again, "\n" ends it
  function s.screen_lines(self)
    local lines = {}
    for chunk in (self:text() .. "\n"):gmatch("([^\n]*)\n") do
      for part in (chunk .. "\r\27[K"):gmatch("(.-)\r\27%[K") do
        if part ~= "" then lines[#lines + 1] = part end
      end
    end
    return lines
  end
  return s
end

local function scripted()
  local c = {t = 0}
  c.fn = function() return c.t end
  return c
end

describe("progress ETA", function()
  it("is the remaining steps times the time per step at a steady pace", function()
    local c, out = scripted(), sink()
    local p = progress.new{total = 100, every = 10, out = out, tty = false, clock = c.fn}
    assert.is_nil(p:eta(0))
    c.t = 1.0
    p:train(10, {loss = 1, lr = 0.1, examples_per_s = 100})
    assert.near(9.0, p:eta(10), 1e-12)                  -- 90 steps x 0.1 s
    assert.truthy(out:text():find("ETA 9s", 1, true))
    c.t = 2.0
    p:train(20, {loss = 1})
    assert.near(8.0, p:eta(20), 1e-12)
  end)

  it("times only the steps since a resume and counts what is left from the current step", function()
    local c, out = scripted(), sink()
    c.t = 500                                             -- the clock is far from 0 at a resume
    local p = progress.new{total = 2000, every = 10, out = out, tty = false, clock = c.fn, start_step = 1000}
    c.t = 501
    p:train(1010, {loss = 1})
    assert.near(99.0, p:eta(1010), 1e-12)                -- 990 steps x 0.1 s (the old ETA said 0s)
    assert.truthy(out:text():find("step 1010/2000", 1, true))
    assert.truthy(out:text():find("ETA 1m39s", 1, true))
    p:restart(1500)                                       -- restart: the same after a second resume
    c.t = 503
    p:train(1520, {loss = 1})
    assert.near(480 * 0.1, p:eta(1520), 1e-12)
  end)

  it("includes the time of an evaluation between two updates, through the moving average", function()
    local c, out = scripted(), sink()
    local p = progress.new{total = 100, every = 10, out = out, tty = false, clock = c.fn, horizon = 20}
    c.t = 1; p:train(10, {loss = 1})                      -- 0.1 s per step
    c.t = 2; p:train(20, {loss = 1})
    assert.near(0.1 * 80, p:eta(20), 1e-12)
    c.t = 2 + 5 + 1; p:train(30, {loss = 1})              -- a 5 s eval, then 10 steps in 1 s: 0.6 s per step
    -- the average moves 10/20 of the way from 0.1 to 0.6: 0.35 s per step, 70 steps left
    assert.near(0.35 * 70, p:eta(30), 1e-12)
    c.t = 9; p:train(40, {loss = 1})                      -- back to 0.1: halfway again, 0.225
    assert.near(0.225 * 60, p:eta(40), 1e-12)
  end)

  -- what dl.train does: a train update at step s, then the eval of step s, then its checkpoint
  it("counts eval and checkpoint time: the mean so far times the evals and checkpoints left", function()
    local c = scripted()
    local p = progress.new{total = 100, every = 10, eval_every = 20, checkpoint_every = 50, out = sink(), tty = false,
                           clock = c.fn, horizon = 10}
    c.t = 1; p:train(10, {loss = 1})                      -- 0.1 s per training step
    c.t = 2; p:train(20, {loss = 1})
    assert.near(0.1 * 80, p:eta(20), 1e-12)                -- no eval measured yet
    c.t = 5; p:spent("eval", 3)                           -- the eval of step 20 took 3 s
    c.t = 6; p:train(30, {loss = 1})                      -- 10 steps in 1 s: the 3 s are not training time
    assert.near(0.1, p.sps, 1e-12)
    -- 70 steps x 0.1 s + 4 evals left (40, 60, 80, 100) x 3 s
    assert.near(7 + 4 * 3, p:eta(30), 1e-12)
    c.t = 7; p:train(40, {loss = 1})
    c.t = 8; p:spent("eval", 1)                           -- eval at 40: 1 s, the mean is 2 s
    c.t = 9; p:train(50, {loss = 1})
    c.t = 11; p:spent("eval", 2)                          -- eval at 50? no: every 20; a caller's extra eval counts too
    c.t = 13; p:spent("checkpoint", 2)                    -- the checkpoint of step 50: 2 s
    -- 50 steps x 0.1 + 3 evals left (60, 80, 100) x 2 s mean + 1 checkpoint left (100) x 2 s
    assert.near(5 + 3 * 2 + 1 * 2, p:eta(50), 1e-12)
    c.t = 14; p:train(60, {loss = 1})
    assert.near(0.1, p.sps, 1e-12)
    -- a time policy (no checkpoint_every): the last step, and the rate so far (1 in 60 steps) x 40 steps
    p.checkpoint_every = nil
    assert.near(4 + 2 * 2 + (1 + 40 / 60) * 2, p:eta(60), 1e-12)
    assert.error_matches(function() p:spent("evaluation", 1) end,
      'progress:spent: kind must be "eval" or "checkpoint", got evaluation')
  end)

  it("defaults the horizon to ten updates or two evaluation intervals", function()
    assert.equal(100, progress.new{total = 10, every = 10, out = sink(), tty = false}.horizon)
    assert.equal(400, progress.new{total = 10, every = 10, eval_every = 200, out = sink(), tty = false}.horizon)
  end)

  it("formats times", function()
    assert.equal("?", progress.fmt_time(nil))
    assert.equal("59s", progress.fmt_time(59.4))
    assert.equal("1m39s", progress.fmt_time(99))
    assert.equal("2h05m", progress.fmt_time(7500))
  end)
end)

describe("progress lines", function()
  local long_metrics = {}
  for i = 1, 12 do long_metrics[string.format("valid/loss_%02d", i)] = i / 7 end

  it("never reach the terminal's last column, at any width", function()
    for _, width in ipairs({40, 80, 200}) do
      local c, out = scripted(), sink()
      local p = progress.new{total = 1000, every = 10, out = out, tty = true, width = width, clock = c.fn}
      for s = 10, 100, 10 do
        c.t = s / 10
        p:train(s, {loss = 0.123456, lr = 0.001, examples_per_s = 123456})
        if s % 50 == 0 then
          for i = 1, 5 do p:eval_progress("valid", i, 5) end
          p:eval(s, long_metrics)
        end
      end
      p:message("warning: a message above the live line")
      p:finish()
      local lines = out:screen_lines()
      assert.is_true(#lines > 10)
      for _, l in ipairs(lines) do
        if l:match("^step") then assert.is_true(#l <= width - 1, width .. ": " .. #l .. " columns: " .. l) end
      end
    end
  end)

  it("cuts to width - 1", function()
    assert.equal("abc", progress.fit("abcdef", 4))
    assert.equal("abc", progress.fit("abc", 4))
    assert.equal("abcdef", progress.fit("abcdef", nil))
  end)

  it("shows which set and batch an evaluation is at, on a terminal", function()
    local c, out = scripted(), sink()
    local p = progress.new{total = 100, every = 10, out = out, tty = true, width = 200, clock = c.fn,
                           objective = "valid/loss"}
    c.t = 1; p:train(10, {loss = 0.5})
    p:eval_progress("valid", 3, 5)
    local lines = out:screen_lines()
    assert.equal("step 10/100  ETA 9s  eval valid 3/5", lines[#lines])
    p:eval(10, {["valid/loss"] = 0.25})
    lines = out:screen_lines()
    assert.equal("step 10/100  valid/loss 0.2500@10  ETA 9s  loss 0.5000  lr 0  0 ex/s", lines[#lines])
  end)

  it("keeps each eval as a line above the live line on a terminal, the objective first", function()
    local c, out = scripted(), sink()
    local p = progress.new{total = 100, every = 10, out = out, tty = true, width = 200, clock = c.fn,
                           objective = "valid/accuracy"}
    c.t = 1; p:train(10, {loss = 0.5})
    p:eval(10, {["valid/loss"] = 0.25, ["valid/accuracy"] = 0.75, ["a/loss"] = 0.5, ["valid/top2"] = 1})
    c.t = 2; p:train(20, {loss = 0.4})
    p:eval(20, {["valid/loss"] = 0.2, ["valid/accuracy"] = 0.8, ["a/loss"] = 0.4})
    c.t = 3; p:train(30, {loss = 0.3})
    p:finish()
    -- the live line is cleared ("\r\27[K"), the eval line written and ended, then the live line drawn again
    local text = out:text()
    local e1 = text:find("\r\27[Keval at step 10: valid/accuracy 0.7500, a/loss 0.5000, valid/loss 0.2500\n", 1, true)
    local e2 = text:find("\r\27[Keval at step 20: valid/accuracy 0.8000, a/loss 0.4000, valid/loss 0.2000\n", 1, true)
    assert.truthy(e1, text)
    assert.truthy(e2, text)
    assert.truthy(text:find("\r\27[Kstep 30/100  valid/accuracy 0.8000@20  ETA 7s  loss 0.3000", e2, true), text)
    -- every line that ends in "\n" stays on the screen: both evals and the last live line
    local kept = {}
    for l in text:gmatch("([^\r\n]*)\n") do kept[#kept + 1] = l:gsub("^\27%[K", "") end
    assert.same({"eval at step 10: valid/accuracy 0.7500, a/loss 0.5000, valid/loss 0.2500",
                 "eval at step 20: valid/accuracy 0.8000, a/loss 0.4000, valid/loss 0.2000",
                 "step 30/100  valid/accuracy 0.8000@20  ETA 7s  loss 0.3000  lr 0  0 ex/s"}, kept)
  end)

  it("shows the objective within 80 columns, however many metrics there are", function()
    local c, out = scripted(), sink()
    local p = progress.new{total = 100000, every = 10, out = out, tty = true, width = 80, clock = c.fn,
                           objective = "ema/test/accuracy"}
    local m = {["ema/test/accuracy"] = 0.91234}
    for i = 1, 12 do m[string.format("s%02d/loss", i)] = i / 7 end
    c.t = 1; p:train(10, {loss = 0.123456, lr = 0.001, examples_per_s = 123456})
    p:eval(10, m)
    c.t = 2; p:train(20, {loss = 0.123456, lr = 0.001, examples_per_s = 123456})
    p:eval_progress("test", 3, 5)
    local lines = out:screen_lines()
    local eval_line, live, ind
    for _, l in ipairs(lines) do
      assert.is_true(#l <= 79, l)
      if l:match("^eval at") then eval_line = l end
      if l:match("^step 20/") and not l:match("eval test") then live = l end
      if l:match("eval test 3/5$") then ind = l end
    end
    assert.equal("eval at step 10: ema/test/accuracy 0.9123, ", eval_line:sub(1, 43))
    assert.equal("step 20/100000  ema/test/accuracy 0.9123@10  ETA 2h46m  loss 0.1235  lr 0.001  ", live)
    assert.equal("step 20/100000  ema/test/accuracy 0.9123@10  ETA 2h46m  eval test 3/5", ind)
  end)

  it("piped: one line per update without the eval suffix, each eval on its own line", function()
    local c, out = scripted(), sink()
    local p = progress.new{total = 30, every = 10, out = out, tty = false, clock = c.fn}
    c.t = 1; p:train(10, {loss = 0.5})
    p:eval_progress("valid", 1, 2)                        -- nothing piped
    p:eval(10, {["valid/loss"] = 0.25, ["valid/accuracy"] = 0.75})
    c.t = 2; p:train(20, {loss = 0.4})
    p:finish()
    assert.equal("step 10/30  loss 0.5000  lr 0  0 ex/s  ETA 2s\n" ..
                 "eval at step 10: valid/accuracy 0.7500, valid/loss 0.2500\n" ..
                 "step 20/30  loss 0.4000  lr 0  0 ex/s  ETA 1s\n", out:text())
  end)

  it("quiet shows warnings only", function()
    local out = sink()
    local p = progress.new{total = 30, every = 10, out = out, tty = false, quiet = true}
    p:train(10, {loss = 0.5})
    p:eval(10, {["valid/loss"] = 0.25})
    p:message("resuming")
    p:message("warning: kept")
    assert.equal("warning: kept\n", out:text())
  end)

  it("reads the width from the terminal, 80 when there is none, and again after SIGWINCH", function()
    local p = progress.new{total = 30, every = 10, out = sink(), tty = true}
    assert.equal(proc.term_width(1) or 80, p:width())
    local reads = 0
    local real = proc.term_width
    proc.term_width = function() reads = reads + 1; return 123 end
    p.cached_width = nil
    assert.equal(123, p:width())
    assert.equal(123, p:width())
    assert.equal(1, reads)                                -- cached until the window changes
    proc.catch()
    proc.kill(proc.getpid(), "WINCH")
    assert.equal(123, p:width())
    assert.equal(2, reads)
    proc.release()
    proc.term_width = real
  end)

  it("checks its options", function()
    assert.has_error(function() progress.new{totl = 3} end,
      "progress.new: unknown option 'totl' (valid: checkpoint_every, clock, eval_every, every, horizon, objective, " ..
      "out, quiet, start_step, total, tty, width); did you mean 'total'?")
  end)
end)

-- dl.train against a scripted clock: the test hooks (proc.test_pause) advance it by 1 s per
-- training step, 10 s per eval batch and 5 s per checkpoint, so every ETA is known exactly
describe("progress of dl.train", function()
  it("predicts the time its evals and checkpoints take (scripted clock)", function()
    local dl = require "dlua"
    local core, fs = require "dlua.core", require "dlua.util.fs"
    local H2 = dofile("tests/lua/helpers.lua")
    local t = 0
    local cost = {step = 1, eval = 10, checkpoint = 5}
    local real_clock, real_pause = core.clock, proc.test_pause
    core.clock = function() return t end
    proc.test_pause = function(phase) t = t + (cost[phase] or 0) end
    local dir = H2.tmpdir("eta")
    dl.seed(1)
    local x = dl.randn(80, 4)
    local y = x:matmul(dl.randn(4, 3)):argmax(2)
    local batch = {image = x:narrow(1, 1, 8), label = y:narrow(1, 1, 8)}
    local va = dl.data.tensors{image = x:narrow(1, 41, 40), label = y:narrow(1, 41, 40)}
    local model = dl.nn.Sequential{dl.nn.Linear(4, 3)}
    local so = io.stdout
    io.stdout = io.open(dir .. "/out.txt", "w")
    local ok, err = pcall(dl.train, {model = model, loss = dl.nn.CrossEntropy(), data = function() return batch end, steps = 40,
      optimizer = dl.optim.SGD{params = model:parameters(), lr = 0.1}, log_every = 10, tracking = false, dir = dir,
      eval = {every = 10, sets = {valid = va}, batch_size = 40}, checkpoint = {every = 20}})
    io.stdout:close()
    io.stdout = so
    core.clock, proc.test_pause = real_clock, real_pause
    assert(ok, err)
    local text = fs.read(dir .. "/out.txt")
    -- step 10: 30 steps x 1 s (no eval measured yet); step 20: 20 s + 2 evals (30, 40) x 10 s;
    -- step 30: 10 s + 1 eval x 10 s + 1 checkpoint (40) x 5 s = what is left exactly
    assert.truthy(text:find("step 10/40 [^\n]-ETA 30s"), text)
    assert.truthy(text:find("step 20/40 [^\n]-ETA 40s"), text)
    assert.truthy(text:find("step 30/40 [^\n]-ETA 25s"), text)
    fs.rm_rf(dir)
  end)
end)

describe("study progress", function()
  it("counts trials, shows the best so far and an ETA from the mean trial time", function()
    local s = progress.study{total = 12, jobs = 2, metric = "valid/accuracy"}
    assert.equal("trials 0/12 done, 0 running, 12 pending  ETA ?", s:line{pending = 12})
    s:finished(10)
    s:finished(20)
    -- mean 15 s x (5 pending + 2 running / 2) / 2 jobs = 45 s
    assert.near(45, s:eta(5, 2), 1e-12)
    assert.equal("trials 3/12 done, 2 running, 5 pending, 1 pruned, 1 interrupted  best valid/accuracy 0.9100 (t003)" ..
      "  ETA 45s", s:line({done = 3, running = 2, pending = 5, pruned = 1, interrupted = 1}, {id = "t003", value = 0.91}))
  end)
end)

-- In a real terminal: tmux runs a training process in a pane 80 and 200 columns
-- wide (and one resized from 200 to 70 mid-run: SIGWINCH); the pane is captured
-- many times while the run goes (evaluations are slowed with DLUA_TEST_PAUSE so
-- their indicator is on screen for a while). No progress row may fill the pane's
-- width (a progress line that wrapped would; the final summary lines may), and
-- `eval valid i/5` must show up. At 80 columns the objective (valid/accuracy,
-- the default of a classification loss) must show on the live line, and every
-- eval's line must still be on the screen when the run ends.
local H = dofile("tests/lua/helpers.lua")
local fs = require "dlua.util.fs"
local util = require "dlua.util"
local core = require "dlua.core"

local TMUX = (function()
  local p = io.popen("command -v tmux 2>/dev/null")
  local s = p:read("l")
  p:close()
  return s
end)()

local EXE = H.EXE

local TTY_EXPERIMENT = [[
local dl = require "dlua"
local nn, optim, data = dl.nn, dl.optim, dl.data
return dl.experiment{
  name = "tty", hparams = {lr = 0.1, steps = 60, batch_size = 8},
  build = function(hp)
    local s0, c0 = dl.rng_state()
    dl.seed(5)
    local x = dl.randn(160, 6)
    local y = x:matmul(dl.randn(6, 3)):argmax(2)
    dl.rng_state(s0, c0)
    local tr, va = data.tensors{image = x, label = y}:split{120, 40, seed = 0}
    local model = nn.Sequential{nn.Linear(6, 3)}
    return {model = model, loss = nn.CrossEntropy(),
      optimizer = optim.SGD{params = model:parameters(), lr = hp.lr, momentum = 0.9},
      data = tr:shuffle{seed = hp.data_seed}:batch(hp.batch_size), steps = hp.steps, log_every = 2,
      eval = {every = 10, batch_size = 8, sets = {valid = va}, metrics = {"loss", "accuracy", "top2"}},
      checkpoint = {every = 10}}
  end}
]]

-- without tmux these are reported pending, with the reason
local it_tmux = TMUX and it or function(name) pending(name .. ": skipped, tmux is not installed (scripts/setup.sh)") end

describe("progress in a terminal (tmux)", function()
  local dir, socket
  setup(function()
    dir = H.tmpdir("tty")
    H.spit(dir .. "/tty.lua", TTY_EXPERIMENT)
    socket = "dlua-spec-" .. util.getpid()
  end)
  teardown(function()
    if TMUX then os.execute(string.format("%s -L %s kill-server 2>/dev/null", TMUX, socket)) end
    fs.rm_rf(dir)
  end)

  local function tmux(fmt, ...)
    local p = io.popen(string.format("%s -L %s " .. fmt .. " 2>&1", TMUX, socket, ...))
    local s = p:read("a")
    p:close()
    return s
  end

  -- runs the experiment in a pane `width` columns wide; resize = {after = s, width = w}
  -- changes the width mid-run. Returns every distinct row seen and the rows seen after the resize.
  local function watch(name, width, resize)
    local cmd = string.format("cd %s && DLUA_TEST_PAUSE=eval=0.06,step=0.01 %s tty.lua --out %s --no-track " ..
      "--threads 1; echo finished-run; sleep 30", H.shquote(dir), H.shquote(EXE), name)
    tmux("new-session -d -s %s -x %d -y 30 %s", name, width, H.shquote(cmd))
    local seen, after, t0 = {}, {}, core.clock()
    local resized, last = false, ""
    while core.clock() - t0 < 60 do
      if resize and not resized and core.clock() - t0 > resize.after then
        tmux("resize-window -t %s -x %d", name, resize.width)
        resized = true
        core._sleep(0.05)
      end
      local screen = tmux("capture-pane -p -t %s", name)
      last = screen
      for row in screen:gmatch("([^\n]*)\n") do
        seen[#seen + 1] = row
        if resized then after[#after + 1] = row end
      end
      if screen:find("finished-run", 1, true) then break end
      core._sleep(0.03)
    end
    tmux("kill-session -t %s", name)
    return seen, after, last
  end

  local function check(rows, width)
    local indicator, lines, in_ckpt = false, 0, false
    for _, row in ipairs(rows) do
      if row:match("^step ") then       -- a progress line that wrapped would fill its first row
        lines = lines + 1
        assert.is_true(#row <= width - 1, string.format("a progress row fills the %d columns: %s", width, row))
      else                              -- the only other rows: the final messages (the checkpoint line may wrap)
        if row:match("^best checkpoint") or row:match("^last checkpoint") then in_ckpt = true
        elseif row:match("^run directory") then in_ckpt = false end
        assert.is_true(#row <= width - 1 or in_ckpt, string.format("a row fills the %d columns: %s", width, row))
      end
      if row:match("eval valid %d/5$") then indicator = true end
    end
    assert.is_true(lines > 0, "no progress line was captured")
    assert.is_true(indicator, "the eval indicator never showed")
  end

  for _, width in ipairs({80, 200}) do
    it_tmux("fits " .. width .. " columns, shows the eval indicator and the objective, and keeps the eval lines", function()
      local seen, _, last = watch("w" .. width, width)
      check(seen, width)
      local objective = false
      for _, row in ipairs(seen) do
        if row:match("^step %d+/60  valid/accuracy %d%.%d%d%d%d@%d+  ETA ") then objective = true end
      end
      assert.is_true(objective, "the objective never led the live line")
      local evals = {}
      for row in last:gmatch("([^\n]*)\n") do
        local step = row:match("^eval at step (%d+): valid/accuracy %d%.%d%d%d%d, ")
        if step then evals[#evals + 1] = tonumber(step) end
      end
      assert.same({10, 20, 30, 40, 50, 60}, evals, last)
    end)
  end

  it_tmux("re-reads the width after the terminal shrinks (SIGWINCH)", function()
    local _, after = watch("shrink", 200, {after = 0.8, width = 70})
    local progress_rows = 0
    for _, row in ipairs(after) do
      if row:match("^step ") then
        progress_rows = progress_rows + 1
        assert.is_true(#row <= 69, "after the resize a progress row is " .. #row .. " columns: " .. row)
      end
    end
    assert.is_true(progress_rows > 0)
  end)
end)

describe("losses and metrics the user reads (dlua.util.fmt_metric)", function()
  local util = require "dlua.util"

  it("prints large, tiny and non-finite values in a readable form, the usual ones with four decimals", function()
    assert.same({"0.1235", "2.3026", "0.0000", "5.63e+15", "-1.23e+05", "1.00e-05", "nan", "inf", "-inf", "16", "x"},
      {util.fmt_metric(0.123456), util.fmt_metric(2.302585), util.fmt_metric(0.0), util.fmt_metric(5628516456334496.0),
       util.fmt_metric(-123456.7), util.fmt_metric(1e-5), util.fmt_metric(0 / 0), util.fmt_metric(math.huge),
       util.fmt_metric(-math.huge), util.fmt_metric(16), util.fmt_metric("x")})
    assert.same({"nan", "inf", "0.3333"}, {util.fmt4(-(0 / 0)), util.fmt4(1 / 0), util.fmt4(1 / 3)})
  end)

  it("is what the progress lines, the eval line and the summary print for a diverged loss", function()
    local c, out = scripted(), sink()
    local p = progress.new{total = 100, every = 10, out = out, tty = false, clock = c.fn, objective = "valid/loss"}
    c.t = 1
    p:train(10, {loss = 5628516456334496.0, lr = 0.1, examples_per_s = 100})
    p:eval(10, {["valid/loss"] = 0 / 0, ["valid/accuracy"] = 0.1})
    c.t = 2
    p:train(20, {loss = math.huge, lr = 0.1, examples_per_s = 100})
    local text = out:text()
    assert.truthy(text:find("loss 5.63e+15  lr 0.1", 1, true), text)
    assert.truthy(text:find("eval at step 10: valid/loss nan, valid/accuracy 0.1000", 1, true), text)
    assert.truthy(text:find("loss inf  lr 0.1", 1, true), text)
    assert.is_nil(text:find("5628516456334496", 1, true), text)
  end)
end)
