--- dlua.train.progress: live progress of a training run and of a study.
--
-- A run (progress.new): on a terminal one line is rewritten in place:
--
--   step 1200/5000  loss 0.4312  lr 0.01  5230 ex/s  ETA 1m42s  | eval@1000: valid/accuracy 0.8812
--
-- cut to the terminal's width minus one column, so it never wraps (the width
-- is read with TIOCGWINSZ and re-read after a SIGWINCH); while an evaluation
-- runs the line says so (`eval valid 3/5`, batch 3 of 5). When stdout is no
-- terminal (a log, CI) each log_every step prints one plain line without the
-- eval suffix, and every eval prints its own line. quiet = true prints only
-- warnings.
--
-- The ETA is (total - step) x a moving average of the wall time per step,
-- measured between updates, so the time spent in evaluations and checkpoints
-- between two updates counts; after a resume only the steps done since the
-- resume (from start_step) are timed. The average is exponential with a
-- horizon of `horizon` steps: an interval of d steps moves it by
-- min(1, d / horizon) of the way to that interval's time per step (the
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
                 clock = "callable", start_step = "integer", horizon = "number", eval_every = "integer"}

--- progress.new{total = steps, every = N, quiet = false, out = io.stdout, tty = auto,
-- width = auto, clock = core.clock, start_step = 0, horizon = auto, eval_every = N}
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
  self.sps = nil                                -- seconds per step (moving average)
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
  return self.sps * (self.total - step)
end

-- takes the time of the steps since the last update into the moving average
function P:tick(step)
  local now = self.clock()
  local ds = step - self.last_step
  if ds <= 0 then return end
  local per = (now - self.last_t) / ds
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
  self.line = string.format("step %d/%d  loss %.4f  lr %.3g  %.0f ex/s  ETA %s", step, self.total, e.loss,
    e.lr or 0, e.examples_per_s or 0, fmt_time(self:eta(step)))
  if self.tty then
    self:draw(self.line .. self.last_eval)
  else
    self.out:write(self.line, "\n")
    self.out:flush()
  end
end

--- p:eval_progress(set, i, n): batch i of n of evaluation set `set` is done
-- (a terminal shows `eval valid 3/5` on the live line; piped, nothing).
function P:eval_progress(set, i, n)
  if self.quiet or not self.tty then return end
  self:draw(string.format("%s  eval %s %d/%d", self.line or "evaluating", set, i, n))
end

--- p:eval(step, metrics, key): an evaluation finished; on a terminal its summary
-- follows the live line, piped it is a line of its own.
function P:eval(step, metrics, key)
  local parts = {}
  for k, v in pairs(metrics) do
    if type(v) == "number" and (not key or k == key or k:match("accuracy$") or k:match("loss$")) then
      parts[#parts + 1] = string.format("%s %.4f", k, v)
    end
  end
  table.sort(parts)
  self.last_eval = "  | eval@" .. step .. ": " .. table.concat(parts, ", ")
  if self.quiet then return end
  if self.tty then
    if self.line then self:draw(self.line .. self.last_eval) end
  else
    self:message("eval at step " .. step .. ": " .. table.concat(parts, ", "))
  end
end

function P:finish()
  if self.live then self.out:write("\n"); self.live = false end
  self.out:flush()
end

------------------------------------------------------------------- a study

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
    s = s .. string.format("  best %s %.4f (%s)", self.metric or "value", best.value, tostring(best.id))
  end
  return s .. "  ETA " .. fmt_time(self:eta(c.pending or 0, c.running or 0))
end

return M
