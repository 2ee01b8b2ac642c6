--- dlua.train.progress: live progress of a training run and of a study.
--
-- A run (progress.new): on a terminal one line is rewritten in place, the
-- objective (the metric that ranks checkpoints) first after the step:
--
--   step 1200/5000  valid/accuracy 0.8812@1000  ETA 1m42s  loss 0.4312  lr 0.01  5230 ex/s
--
-- cut to the terminal's width minus one column, so it never wraps (the width
-- is read with TIOCGWINSZ and re-read after a SIGWINCH); while an evaluation
-- runs the line says so (`eval valid 3/5`, batch 3 of 5). Every eval prints a
-- line of its own (`eval at step 1000: valid/accuracy 0.8812, valid/loss 0.3310`,
-- the objective first), kept above the live line on a terminal. When stdout is
-- no terminal (a log, CI) each log_every step prints one plain line. quiet =
-- true prints only warnings.
--
-- The ETA counts the three costs of what is left: (total - step) x a moving
-- average of the training time per step, + the mean eval time so far x the
-- evals left, + the mean checkpoint time so far x the checkpoints left. The
-- caller reports eval and checkpoint time with p:spent(kind, seconds); the
-- training time of an interval between updates is its wall time minus what
-- was spent in it. Evals left: the multiples of eval_every after step, and the
-- last step; checkpoints left: the multiples of checkpoint_every and the last
-- step, or (a time policy, no checkpoint_every) the last step and as many
-- more as were written per step so far. After a resume only the steps done
-- since the resume (from start_step) are timed. The training average is
-- exponential with a horizon of `horizon` steps: an interval of d steps moves
-- it by min(1, d / horizon) of the way to that interval's time per step (the
-- first interval sets it). clock = fn injects the clock (a scripted one in
-- the specs).
--
-- A study (progress.study): one line per event with trials done / running /
-- pending / pruned / interrupted / failed, the best so far and an ETA:
--   trials 3/12 done, 2 running, 7 pending, 1 interrupted  best valid/accuracy 0.9100 (t003)  ETA 2m10s
-- where ETA = mean trial wall time x (pending + running / 2) / jobs.
local core = require "dlua.core"
local util = require "dlua.util"
local proc = require "dlua.util.proc"

local fmtm = util.fmt_metric     -- every loss and metric the user reads

local M = {}
local P = {}
P.__index = P

local function fmt_time(s)
  if s == nil or s ~= s or s == math.huge or s < 0 then return "?" end
  if s >= 3600 then return string.format("%dh%02dm", s // 3600, (s % 3600) // 60) end
  if s >= 60 then return string.format("%dm%02ds", s // 60, math.floor(s % 60)) end
  return string.format("%.0fs", s)
end
M.fmt_time = fmt_time

--- progress.fit(line, width) -> line cut to width - 1 columns (the last column
-- is left free: a terminal wraps a line that fills it). No width: unchanged.
function M.fit(line, width)
  if not width or width < 2 then return line end
  if #line > width - 1 then return line:sub(1, width - 1) end
  return line
end

local OPTIONS = {total = "integer", every = "integer", quiet = true, out = true, tty = "boolean", width = "integer",
                 clock = "callable", start_step = "integer", horizon = "number", eval_every = "integer",
                 objective = "string", checkpoint_every = "integer"}

--- progress.new{total = steps, every = N, quiet = false, out = io.stdout, tty = auto,
-- width = auto, clock = core.clock, start_step = 0, horizon = auto, eval_every = N,
-- objective = "valid/accuracy", checkpoint_every = N}
-- @usage local p = progress.new{total = 1000, every = 50}; p:train(50, {loss = 0.3})
function M.new(o)
  o = util.check_options("progress.new", o, OPTIONS, 2)
  local self = setmetatable({}, P)
  self.total, self.every, self.quiet = o.total, o.every or 100, o.quiet
  self.out = o.out or io.stdout
  if o.tty == nil then self.tty = self.out == io.stdout and core.isatty(1) else self.tty = o.tty end
  self.fixed_width = o.width
  self.clock = o.clock or core.clock
  self.horizon = o.horizon or math.max(10 * self.every, 2 * (o.eval_every or 0))
  self.eval_every, self.checkpoint_every, self.objective = o.eval_every, o.checkpoint_every, o.objective
  self.last_eval = ""
  self.line = nil                               -- the live line (train part), for the eval indicator
  self.live = false
  self:restart(o.start_step or 0)
  return self
end

--- p:restart(step): timing starts again at step (after a resume).
function P:restart(step)
  self.start_step = step
  self.last_t, self.last_step = self.clock(), step
  self.sps = nil                                -- seconds per training step (moving average)
  self.aside = 0                                -- eval and checkpoint seconds since the last update
  self.cost = {eval = {seconds = 0, n = 0}, checkpoint = {seconds = 0, n = 0}}
end

--- p:spent(kind, seconds): an eval ("eval") or a checkpoint ("checkpoint") took
-- seconds; the ETA extrapolates them and leaves them out of the training time.
function P:spent(kind, seconds)
  local c = self.cost[kind]
  if not c then error("progress:spent: kind must be \"eval\" or \"checkpoint\", got " .. tostring(kind), 2) end
  c.seconds, c.n = c.seconds + seconds, c.n + 1
  self.aside = self.aside + seconds
end

-- the multiples of every in (step, total], and total itself when it is not one
local function left(every, step, total)
  if step >= total then return 0 end
  local n = every and (total // every - step // every) or 0
  if not every or total % every ~= 0 then n = n + 1 end
  return n
end

--- p:width() -> the terminal's width (re-read after a SIGWINCH), 80 if unknown, nil when piped.
function P:width()
  if not self.tty then return nil end
  if self.fixed_width then return self.fixed_width end
  local w = proc.winch_count()
  if self.cached_width == nil or w ~= self.winch then
    self.winch = w
    self.cached_width = proc.term_width(1) or 80
  end
  return self.cached_width
end

--- p:eta(step) -> seconds left (nil before the first timed interval)
function P:eta(step)
  if not self.sps then return nil end
  local t = self.sps * (self.total - step)
  local ev, ck = self.cost.eval, self.cost.checkpoint
  if ev.n > 0 then t = t + ev.seconds / ev.n * left(self.eval_every, step, self.total) end
  if ck.n > 0 then
    local n = left(self.checkpoint_every, step, self.total)
    if not self.checkpoint_every and step < self.total then    -- a time policy: the rate so far, and the last
      n = 1 + (ck.n / math.max(1, step - self.start_step)) * (self.total - step)
    end
    t = t + ck.seconds / ck.n * n
  end
  return t
end

-- takes the training time of the steps since the last update into the moving average
function P:tick(step)
  local now = self.clock()
  local ds = step - self.last_step
  if ds <= 0 then return end
  local per = math.max(0, now - self.last_t - self.aside) / ds
  self.aside = 0
  if not self.sps then self.sps = per
  else self.sps = self.sps + math.min(1, ds / self.horizon) * (per - self.sps) end
  self.last_t, self.last_step = now, step
end

function P:draw(text)
  self.out:write("\r\27[K", M.fit(text, self:width()))
  self.live = true
  self.out:flush()
end

function P:clear()
  if self.live then self.out:write("\r\27[K"); self.live = false end
end

--- a line above the live one (warnings always show)
function P:message(msg)
  if self.quiet and not msg:match("^warning") then return end
  self:clear()
  self.out:write(msg, "\n")
  self.out:flush()
end

--- p:train(step, {loss =, lr =, examples_per_s =}): the update at a log step.
function P:train(step, e)
  self:tick(step)
  if self.quiet then return end
  local rest = string.format("loss %s  lr %.3g  %.0f ex/s", fmtm(e.loss), e.lr or 0, e.examples_per_s or 0)
  local eta = "ETA " .. fmt_time(self:eta(step))
  if self.tty then
    self.live_parts = {step = step, eta = eta, rest = rest}
    self.line = self:compose()
    self:draw(self.line)
  else
    self.line = string.format("step %d/%d  %s  %s", step, self.total, rest, eta)
    self.out:write(self.line, "\n")
    self.out:flush()
  end
end

-- the live line: the objective and the ETA first (they stay within any width), then
-- `tail`, by default the loss, lr and throughput
function P:compose(tail)
  local l = self.live_parts
  if not l then return nil end
  return string.format("step %d/%d  %s%s  %s", l.step, self.total, self.last_eval, l.eta, tail or l.rest)
end

--- p:eval_progress(set, i, n): batch i of n of evaluation set `set` is done
-- (a terminal shows `eval valid 3/5` on the live line; piped, nothing).
function P:eval_progress(set, i, n)
  if self.quiet or not self.tty then return end
  local ind = string.format("eval %s %d/%d", set, i, n)
  self:draw(self:compose(ind) or "evaluating  " .. ind)
end

--- p:eval(step, metrics [, key]): an evaluation finished: a line of its own
-- (the objective, key or the one given to new, first; then the accuracy and loss
-- metrics by name), above the live line on a terminal, which then shows the
-- objective's value.
function P:eval(step, metrics, key)
  key = key or self.objective
  local parts = {}
  for k, v in pairs(metrics) do
    if type(v) == "number" and k ~= key and (k:match("accuracy$") or k:match("loss$")) then
      parts[#parts + 1] = string.format("%s %s", k, fmtm(v))
    end
  end
  table.sort(parts)
  local kv = key and metrics[key]
  if type(kv) == "number" then
    table.insert(parts, 1, string.format("%s %s", key, fmtm(kv)))
    self.last_eval = string.format("%s %s@%d  ", key, fmtm(kv), step)
  end
  if self.quiet then return end
  local text = "eval at step " .. step .. ": " .. table.concat(parts, ", ")
  if self.tty then
    self:clear()
    self.out:write(M.fit(text, self:width()), "\n")
    self.line = self:compose()
    if self.line then self:draw(self.line) else self.out:flush() end
  else
    self:message(text)
  end
end

--- p:summary(result, ranking): the end of a run: the cost split, the checkpoint it
-- selects ("best checkpoint by <metric>" only when ranking, dlua.train.policy's,
-- ranks the kept ones; else "last checkpoint"), whether the best eval has none,
-- and the run directory. result is dl.train's.
function P:summary(result, ranking)
  local cost = result.cost
  self:message(string.format("time: %.1fs (train %.0f%%, eval %.0f%%, checkpoints %.0f%% (%d), waiting for input " ..
    "%.0f%%)", cost.seconds, 100 * cost.train_fraction, 100 * cost.eval_fraction, 100 * cost.checkpoint_fraction,
    result.checkpoints.written, 100 * cost.input_fraction))
  local b, be = result.best, result.best_eval
  if b then
    local parts = {}
    for k, v in pairs(b.metrics or {}) do
      if type(v) == "number" then parts[#parts + 1] = string.format("%s %s", k, fmtm(v)) end
    end
    table.sort(parts)
    if b.selected == "best" then
      self:message(string.format("best checkpoint by %s%s: step %d (%s) %s", ranking.metric,
        ranking.source == "config" and "" or " (" .. (ranking.source == "default" and "the default" or "the objective") ..
        ")", b.step, table.concat(parts, ", "), b.checkpoint))
      if be and be.step < b.step and be.value ~= b.value and (result.checkpoints.tolerance or 0) > 0 then
        self:message(string.format("the best eval, step %d (%s %s), is within checkpoint.tolerance (%g) of the " ..
          "later one selected", be.step, ranking.metric, fmtm(be.value), result.checkpoints.tolerance))
      elseif be and not be.checkpoint and be.value ~= b.value then
        self:message(string.format("the best eval, step %d (%s %s), has no checkpoint (set checkpoint.keep_best " ..
          "to write every new best)", be.step, ranking.metric, fmtm(be.value)))
      end
    else
      self:message(string.format("last checkpoint (none ranked: set checkpoint.metric to keep the best): " ..
        "step %d (%s) %s", b.step, table.concat(parts, ", "), b.checkpoint))
    end
  end
  self:message("run directory: " .. result.dir)
end

function P:finish()
  if self.live then self.out:write("\n"); self.live = false end
  self.out:flush()
end

------------------------------------------------------------------- a study

-- a class: its metatable, the option types its constructor checks (util.check_options),
-- the constructor; the library's classes open alike by design
local S = {}
S.__index = S

local STUDY = {total = "integer", jobs = "integer", clock = "callable", metric = "string"}

--- progress.study{total = trials, jobs = 1, metric = "valid/accuracy", clock = core.clock}
-- s:finished(wall) records a finished trial's wall time; s:line(counts, best)
-- formats counts = {done, running, pending, pruned, interrupted, failed} and
-- best = {id =, value =} (or nil).
function M.study(o)
  o = util.check_options("progress.study", o, STUDY, 2)
  return setmetatable({total = o.total, jobs = o.jobs or 1, metric = o.metric, clock = o.clock or core.clock,
                       walls = 0, nwall = 0}, S)
end

function S:finished(wall)
  self.walls, self.nwall = self.walls + wall, self.nwall + 1
end

--- s:eta(pending, running) -> seconds (nil before a trial finished)
function S:eta(pending, running)
  if self.nwall == 0 then return nil end
  return self.walls / self.nwall * (pending + running / 2) / self.jobs
end

function S:line(c, best)
  local parts = {string.format("trials %d/%d done", c.done or 0, self.total or 0),
                 string.format("%d running", c.running or 0), string.format("%d pending", c.pending or 0)}
  for _, k in ipairs({"pruned", "interrupted", "failed"}) do
    if (c[k] or 0) > 0 then parts[#parts + 1] = string.format("%d %s", c[k], k) end
  end
  local s = table.concat(parts, ", ")
  if best and best.value then
    s = s .. string.format("  best %s %s (%s)", self.metric or "value", fmtm(best.value), tostring(best.id))
  end
  return s .. "  ETA " .. fmt_time(self:eta(c.pending or 0, c.running or 0))
end

return M
