--- dlua.fs: the few file-system operations the training loop and studies need,
-- on LuaFileSystem. Writes that replace a file are atomic: a temporary file
-- in the same directory, flushed and fsynced, renamed over the target, then
-- the directory fsynced, so a crash leaves the old or the new file, never a
-- mixture.
local lfs = require "lfs"
local core = require "dlua.core"

local M = {}

--- Creates dir and its parents; errors with the reason when it cannot.
function M.mkdir_p(dir)
  local path = ""
  for part in dir:gmatch("[^/]+") do
    path = (path == "" and dir:sub(1, 1) == "/") and "/" .. part or (path == "" and part or path .. "/" .. part)
    local mode = lfs.attributes(path, "mode")
    if mode == nil then
      local ok, err = lfs.mkdir(path)
      if not ok and lfs.attributes(path, "mode") ~= "directory" then
        error(string.format("cannot create directory %s: %s", path, tostring(err)), 2)
      end
    elseif mode ~= "directory" then
      error(string.format("cannot create directory %s: a file of that name exists", path), 2)
    end
  end
  return dir
end

function M.exists(path) return lfs.attributes(path, "mode") ~= nil end
function M.is_dir(path) return lfs.attributes(path, "mode") == "directory" end

--- Whole file as a string, or nil, message.
function M.read(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local s = f:read("a")
  f:close()
  return s
end

local function dirname(path) return path:match("^(.*)/[^/]*$") or "." end
M.dirname = dirname

--- Replaces path's contents with s atomically (see the header).
function M.write_atomic(path, s)
  local tmp = string.format("%s.tmp.%d", path, math.floor(core.clock() * 1e6) % 1000000007)
  local f, err = io.open(tmp, "wb")
  if not f then error(string.format("cannot write %s: %s", path, tostring(err)), 2) end
  local ok, werr = f:write(s)
  if ok then ok, werr = f:flush() end
  f:close()
  if ok then core.fsync(tmp) end
  if not ok then
    os.remove(tmp)
    error(string.format("cannot write %s: %s", path, tostring(werr)), 2)
  end
  local rok, rerr = os.rename(tmp, path)
  if not rok then
    os.remove(tmp)
    error(string.format("cannot write %s: %s", path, tostring(rerr)), 2)
  end
  core.fsync(dirname(path))
end

--- Sorted names in dir (no . and ..); {} when dir does not exist.
function M.list(dir)
  local out = {}
  if not M.is_dir(dir) then return out end
  for name in lfs.dir(dir) do
    if name ~= "." and name ~= ".." then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

--- Keeps only the lines of a text file for which keep(line) is true (atomically).
function M.filter_lines(path, keep)
  local s = M.read(path)
  if not s then return end
  local out = {}
  for line in s:gmatch("[^\n]+") do
    if keep(line) then out[#out + 1] = line .. "\n" end
  end
  M.write_atomic(path, table.concat(out))
end

function M.remove_matching(path) os.remove(path) end

--- Appends one line with a single write on a file opened for appending, so
-- lines from processes finishing at once never interleave (POSIX O_APPEND).
function M.append_line(path, line)
  local f, err = io.open(path, "ab")
  if not f then error(string.format("cannot append to %s: %s", path, tostring(err)), 2) end
  f:setvbuf("full", #line + 2)
  f:write(line, "\n")
  f:close()
end

--- Removes a directory tree (used by tests and --check-determinism's scratch runs).
function M.rm_rf(path)
  local mode = lfs.attributes(path, "mode")
  if mode == "directory" then
    for name in lfs.dir(path) do
      if name ~= "." and name ~= ".." then M.rm_rf(path .. "/" .. name) end
    end
    lfs.rmdir(path)
  elseif mode then
    os.remove(path)
  end
end

return M
