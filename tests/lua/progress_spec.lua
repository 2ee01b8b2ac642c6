-- dlua.train.progress against a scripted clock and a captured output: the ETA
-- (steady pace, after a resume, with an evaluation's time inside an interval:
-- the numbers are worked out by hand below), lines cut to the width, the eval
-- indicator, piped output without the eval suffix, and the study line.
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
    local p = progress.new{total = 100, every = 10, out = out, tty = true, width = 200, clock = c.fn}
    c.t = 1; p:train(10, {loss = 0.5})
    p:eval_progress("valid", 3, 5)
    local lines = out:screen_lines()
    assert.equal("step 10/100  loss 0.5000  lr 0  0 ex/s  ETA 9s  eval valid 3/5", lines[#lines])
    p:eval(10, {["valid/loss"] = 0.25})
    lines = out:screen_lines()
    assert.equal("step 10/100  loss 0.5000  lr 0  0 ex/s  ETA 9s  | eval@10: valid/loss 0.2500", lines[#lines])
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
      "progress.new: unknown option 'totl' (valid: clock, eval_every, every, horizon, out, quiet, start_step, " ..
      "total, tty, width); did you mean 'total'?")
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
