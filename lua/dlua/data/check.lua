--- dlua.data.check: the argument checks the data modules share. level counts
-- like error()'s, seen from the function calling these helpers.
local util = require "dlua.util"

local M = {}

--- errorf(level, fmt, ...): raises string.format(fmt, ...) at level above the
-- caller (a negative level: no position).
function M.errorf(level, fmt, ...) error(string.format(fmt, ...), level >= 0 and level + 1 or 0) end

--- check(level, ok, ...) -> ...: re-raises a failed pcall at level above the caller.
function M.check(level, ok, ...)
  if not ok then error((...), level + 1) end
  return ...
end

--- options(fname, opts, valid [, level]) -> opts or {}: util.check_options at
-- level above the caller (default 2: the blame lands on its caller).
function M.options(fname, opts, valid, level)
  local checked = util.check_options(fname, opts, valid, (level or 2) + 1)
  return checked                                   -- (not a tail call: the level counts this frame)
end

--- Is v a whole number?
function M.is_int(v) return math.type(v) == "integer" or (type(v) == "number" and v == math.floor(v)) end

--- check_int(fname, what, v, lo [, level [, hi]]) -> v as an integer; errors unless v is
-- a whole number >= lo (and <= hi) ("take: count must be a positive integer, got 0": util.integer_problem).
function M.check_int(fname, what, v, lo, level, hi)
  local why, n = util.integer_problem(v, lo, hi)
  if why then M.errorf((level or 2) + 1, "%s: %s %s", fname, what, why) end
  return n
end

return M
