--- dlua.study.site: where a dl.study{...} call is, so that a mistake in a study
-- names the study file and line ("my_study.lua:23: dl.study: ...")
-- rather than a frame inside the library.
--
-- The usual `return dl.study{...}` is a tail call: the study file's frame is
-- gone by the time dl.study runs. Then the file is the one being loaded by
-- site.load_file, or the script dlua runs (the only frame below dl.study is
-- dlua's C main), and the line is found in the file's text: the line of the
-- `study{` / `study(` call, or of the offending key after it.
local fs = require "dlua.util.fs"

local M = {}

local loading = {}                      -- files load_file is running, innermost last

--- load_file(path, ...) -> what the file's main chunk returns (called with ...), with
-- path known as the study file to the dl.study calls it makes. Errors as loadfile
-- and the chunk do.
function M.load_file(path, ...)
  local chunk, err = loadfile(path)
  if not chunk then error(err, 0) end
  loading[#loading + 1] = path
  local res = table.pack(pcall(chunk, ...))
  table.remove(loading)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

--- of_caller(level) -> {script =, line =, src =}: the call site of the function
-- at `level` (1: the function calling of_caller), as far as it can be known
-- (fields may be nil).
function M.of_caller(level)
  level = level + 1                                  -- this function's frame
  if not debug.getinfo(level, "t").istailcall then
    local c = debug.getinfo(level + 1, "Sl")
    if c and c.what ~= "C" then
      return {script = c.source:match("^@(.*)$"), src = c.short_src, line = c.currentline}
    end
    return {}
  end
  if #loading > 0 then return {script = loading[#loading]} end
  local c, below = debug.getinfo(level + 1, "S"), debug.getinfo(level + 2, "S")
  if c and c.what == "C" and not below and type(arg) == "table" and type(arg[0]) == "string" then
    return {script = arg[0]}                         -- the script dlua runs
  end
  return {}
end

-- the lines of the file, comments removed (a "--" inside a string is rare in a study file)
local function code_lines(path)
  local text = path and fs.read(path)
  if not text then return nil end
  local lines = {}
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = (l:gsub("%-%-.*$", "")) end
  return lines
end

local function escape(s) return (tostring(s):gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")) end

-- does line hold needle: {key = name} (name = or ["name"] =) or {value = s} (a string literal)?
local function holds(line, needle)
  if needle.key then
    local k = escape(needle.key)
    return line:find("%f[%w_]" .. k .. "%f[^%w_]%s*=") or line:find("%[%s*[\"']" .. k .. "[\"']%s*%]%s*=")
  end
  if needle.value then
    local v = escape(needle.value)
    return line:find("\"" .. v .. "\"") or line:find("'" .. v .. "'")
  end
end

--- locate(site [, needle]) -> "file:line", or nil when neither is known: the line
-- of needle ({key = name} or {value = string}) at or after the dl.study call,
-- else the line of the call.
function M.locate(site, needle)
  if not site then return nil end
  local file = site.script or site.src
  local lines = code_lines(site.script)
  local line = site.line
  if lines and not line then
    for i, l in ipairs(lines) do
      if l:find("study%s*[{(]") then line = i; break end
    end
  end
  if lines and needle then
    for i = line or 1, #lines do
      if holds(lines[i], needle) then line = i; break end
    end
  end
  if not file then return nil end
  return line and (file .. ":" .. line) or file
end

return M
