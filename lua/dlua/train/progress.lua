--- dlua.progress: live progress of long work. On a terminal one line is
-- rewritten in place (step/total, loss, examples/s, ETA, last eval); when
-- stdout is not a terminal (logs, CI) a plain line is printed every
-- `every` steps instead. quiet = true silences everything but warnings.
local core = require "dlua.core"

local M = {}
local P = {}
P.__index = P

--- progress.new{total = steps, every = N, quiet = false, out = io.stdout, tty = auto}
function M.new(o)
  local self = setmetatable({}, P)
  self.total, self.every, self.quiet = o.total, o.every or 100, o.quiet
  self.out = o.out or io.stdout
  if o.tty == nil then self.tty = core.isatty(1) else self.tty = o.tty end
  self.t0 = core.clock()
  self.last_eval = ""
  self.live = false
  return self
end

local function fmt_time(s)
  if s ~= s or s == math.huge then return "?" end
  if s >= 3600 then return string.format("%dh%02dm", s // 3600, (s % 3600) // 60) end
  if s >= 60 then return string.format("%dm%02ds", s // 60, math.floor(s % 60)) end
  return string.format("%.0fs", s)
end
M.fmt_time = fmt_time

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

function P:train(step, e)
  if self.quiet then return end
  local el = core.clock() - self.t0
  local eta = step > 0 and el / step * (self.total - step) or 0 / 0
  local line = string.format("step %d/%d  loss %.4f  lr %.3g  %.0f ex/s  ETA %s%s", step, self.total, e.loss,
    e.lr or 0, e.examples_per_s or 0, fmt_time(eta), self.last_eval)
  if self.tty then
    self.out:write("\r\27[K", line)
    self.live = true
  else
    self.out:write(line, "\n")
  end
  self.out:flush()
end

function P:eval(step, metrics, key)
  local parts = {}
  for k, v in pairs(metrics) do
    if type(v) == "number" and (not key or k == key or k:match("accuracy$") or k:match("loss$")) then
      parts[#parts + 1] = string.format("%s %.4f", k, v)
    end
  end
  table.sort(parts)
  self.last_eval = "  | eval@" .. step .. ": " .. table.concat(parts, ", ")
  if not self.quiet and not self.tty then self:message("eval at step " .. step .. ": " .. table.concat(parts, ", ")) end
end

function P:finish()
  if self.live then self.out:write("\n"); self.live = false end
  self.out:flush()
end

return M
