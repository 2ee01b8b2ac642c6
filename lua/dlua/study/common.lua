--- dlua.study.common: the small helpers the study modules share: values as
-- --set text, names safe for directories, "better" by mode, the default mode of
-- a metric, absolute paths and warnings on stderr.
local fs = require "dlua.util.fs"

local M = {}

--- A value as --set text: numbers round-trip exactly, in the shortest form.
-- @usage common.format_value(0.1) --> "0.1"
function M.format_value(v)
  if math.type(v) == "integer" then return string.format("%d", v) end
  if type(v) == "number" then
    for p = 15, 17 do
      local s = string.format("%." .. p .. "g", v)
      if tonumber(s) == v then return s end
    end
  end
  return tostring(v)
end

--- s with every character but letters, digits, '.' and '-' made '_' (a directory name).
function M.safe(s) return (tostring(s):gsub("[^%w%.%-]", "_")) end

--- Is a better than b under mode ("min" or "max")? Anything beats nil.
function M.better(a, b, mode)
  if b == nil then return true end
  if mode == "min" then return a < b end
  return a > b
end

--- The mode a metric's name implies ("min" for *loss and *error, "max" for
-- *accuracy and *topK), or nil.
function M.default_mode(metric)
  if metric:match("loss$") or metric:match("error$") then return "min" end
  if metric:match("accuracy$") or metric:match("top%d+$") then return "max" end
end

--- p made absolute against the current directory (dlua.util.fs.abspath).
M.abspath = fs.abspath

--- Is v a number, a string or a boolean?
function M.scalar(v) local t = type(v); return t == "number" or t == "string" or t == "boolean" end

--- Writes "dlua: warning: msg" to stderr.
function M.warn(msg) io.stderr:write("dlua: warning: ", msg, "\n") end

return M
