--- dlua.util.blame: a user's mistake in the user's terms. An error raised inside
-- the library (a file under lua/dlua/) because of something the user wrote should
-- lead with the user's file and line, and a traceback should show the user's
-- frames; the library's own frames are for whoever debugs the library, so they
-- appear only with DLUA_DEBUG=1 (the message is the same either way). The dlua executable's message handler, dlua.cli
-- and dl.train's loop all go through here; nothing else rewrites messages.
--
--   blame.message(msg [, level])    msg led by the user's file:line
--   blame.traceback(msg [, level])  that, plus the user's frames
--   blame.split(msg)                "file:line", "rest" (nil, msg without a location)
--
-- It holds no policy beyond that: it prints nothing and requires nothing.
local M = {}

-- the directory holding dlua/ (this file is <LIBDIR>/dlua/util/blame.lua)
local here = debug.getinfo(1, "S").source
M.LIBDIR = here:match("^@(.*)/dlua/util/blame%.lua$")

--- Is DLUA_DEBUG "1"? Then nothing is rewritten or hidden. (dlua.core refuses any value but
-- "", "0" and "1" when it loads: engine/lua/lua_machine.c's table of switches.)
function M.debug()
  return os.getenv("DLUA_DEBUG") == "1"
end

--- Is a chunk source ("@path") a file of the library?
function M.is_library(source)
  if not M.LIBDIR or type(source) ~= "string" then return false end
  local prefix = "@" .. M.LIBDIR .. "/dlua/"
  return source:sub(1, #prefix) == prefix
end

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

-- is a location's file (a chunk's short_src, maybe cut to "...tail") a library file?
local function library_path(p)
  if not M.LIBDIR then return false end
  local tail = p:gsub("^%.%.%.", "")
  local from = 1
  while true do
    local i = tail:find("dlua/", from, true)
    if not i then return false end
    local full = M.LIBDIR .. "/" .. tail:sub(i)
    if full:sub(-#tail) == tail and exists(full) then return true end
    from = i + 1
  end
end

--- split(msg) -> "file:line", rest when msg starts with a location, else nil, msg.
-- @usage blame.split("x.lua:3: boom") --> "x.lua:3", "boom"
function M.split(msg)
  if type(msg) ~= "string" then return nil, msg end
  local loc, rest = msg:match("^([^\n]-:%d+): (.*)$")
  if loc and not loc:find(": ", 1, true) then return loc, rest end
  return nil, msg
end

-- the frames from level up (level relative to the caller of the caller)
local function frames(level)
  local out = {}
  while true do
    local info = debug.getinfo(level, "Sln")
    if not info then return out end
    out[#out + 1] = info
    level = level + 1
  end
end

local function is_user(info)
  return info.what ~= "C" and info.currentline and info.currentline > 0 and not M.is_library(info.source)
end

--- user_location([level]) -> "file:line" of the innermost frame outside the
-- library (and not C) at or above level (1: the caller), or nil when there is none.
function M.user_location(level)
  for _, info in ipairs(frames((level or 1) + 2)) do
    if is_user(info) then return info.short_src .. ":" .. info.currentline end
  end
end

-- msg with a library location replaced by where (or dropped when where is nil)
local function relocate(msg, where)
  local loc, rest = M.split(msg)
  if not loc or not library_path(loc:match("^(.*):%d+$")) then return msg end
  return where and (where .. ": " .. rest) or rest
end

--- message(msg [, level]) -> msg led by the user's location: a message that starts
-- with a library file:line gets the innermost user frame's instead (at or above
-- level, 1 = the caller), or no location when no user frame is on the stack. Other
-- messages and non-strings come back unchanged (DLUA_DEBUG changes only tracebacks:
-- where the library raised it is their first library frame).
-- @usage xpcall(f, function(e) return blame.message(e, 2) end)
function M.message(msg, level)
  if type(msg) ~= "string" then return msg end
  return relocate(msg, M.user_location((level or 1) + 1))
end

local function frame_line(info)
  local where
  if info.what == "main" then where = "main chunk"
  elseif info.name then where = "function '" .. info.name .. "'"
  else where = string.format("function <%s:%d>", info.short_src, info.linedefined) end
  return string.format("\n\t%s:%d: in %s", info.short_src, info.currentline, where)
end

--- traceback(msg [, level]) -> message(msg, level) and "stack traceback:" with the
-- user's frames only, and how many library frames were left out; under
-- DLUA_DEBUG, every frame (debug.traceback).
function M.traceback(msg, level)
  level = (level or 1) + 1
  msg = relocate(msg, M.user_location(level))
  if M.debug() then return debug.traceback(msg, level) end
  local out, hidden = {msg, "\nstack traceback:"}, 0
  for _, info in ipairs(frames(level + 1)) do
    if is_user(info) then out[#out + 1] = frame_line(info)
    elseif M.is_library(info.source) then hidden = hidden + 1 end
  end
  if hidden > 0 then
    out[#out + 1] = string.format("\n\t(%d frame%s of the dlua library left out; DLUA_DEBUG=1 shows them)", hidden,
      hidden == 1 and "" or "s")
  end
  return table.concat(out)
end

return M
