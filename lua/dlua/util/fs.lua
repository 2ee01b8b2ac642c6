--- dlua.util.fs: the few file-system operations the training loop and studies need,
-- on LuaFileSystem and the engine's file I/O module (engine/io/fileio.c). Every
-- write goes through that module, with one policy each:
--   write_atomic  a temporary file (O_EXCL) in the same directory, written,
--                 fsynced, renamed over the target, then the directory fsynced:
--                 a crash leaves the old or the new file, never a mixture
--   append_line   one write(2) on a file opened O_APPEND (lines from processes
--                 appending at once never interleave); not fsynced unless
--                 asked (sync = true) or fs.fsync is called
-- A failed write raises "cannot write '<path>': <reason> (<stage>)" or
-- "cannot append to '<path>': <reason>", naming the file, never silently.
-- Paths read from files (ledgers, indexes, journals) are data: fs.inside
-- keeps them inside their directory.
local lfs = require "lfs"
local core = require "dlua.core"
local util = require "dlua.util"

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
--- path made absolute against the current directory.
function M.abspath(path)
  if path:sub(1, 1) == "/" then return path end
  return lfs.currentdir() .. "/" .. path
end
function M.is_dir(path) return lfs.attributes(path, "mode") == "directory" end

--- Raises "cannot <what> '<path>': not a regular file (<kind>)" when path names a
-- FIFO, device, socket or directory: opening a FIFO would block until a writer came,
-- and dlua reads and writes only regular files as data. Missing is fine.
function M.check_regular(path, what)
  local mode = lfs.attributes(path, "mode")
  if mode and mode ~= "file" then
    error(string.format("cannot %s '%s': not a regular file (%s)", what or "read", path, mode), 2)
  end
end

--- Whole file as a string, or nil, message when it cannot be opened (missing);
-- raises for a path that is not a regular file (M.check_regular).
function M.read(path)
  M.check_regular(path, "read")
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local s = f:read("a")
  f:close()
  return s
end

local function dirname(path) return path:match("^(.*)/[^/]*$") or "." end
M.dirname = dirname

--- Replaces path's contents with s atomically (see the header); raises
-- "cannot write '<path>': <reason> (<stage>)" when it cannot.
-- @usage fs.write_atomic(dir .. "/result.json", json.encode(r) .. "\n")
M.write_atomic = core._fileio_replace

--- Flushes a file or directory to disk; raises "cannot sync '<path>': <reason>".
M.fsync = core._fileio_fsync

--- The path of rel, a relative path read from a file (a ledger entry, a
-- journal's trial id), inside dir; or nil and why it is refused: not a
-- string, empty, absolute, a '..' component, a NUL byte, or an existing
-- symbolic link on the way (it could lead outside dir).
-- @usage local p, why = fs.inside(run_dir .. "/checkpoints", entry.path)
function M.inside(dir, rel)
  if type(rel) ~= "string" then return nil, "is a " .. type(rel) .. ", not a relative path" end
  if rel == "" then return nil, "is empty" end
  if rel:find("\0", 1, true) then return nil, "contains a NUL byte" end
  if rel:sub(1, 1) == "/" then return nil, "is absolute" end
  local path = dir
  for part in rel:gmatch("[^/]+") do
    if part == ".." then return nil, "has a '..' component" end
    if part ~= "." then
      path = path .. "/" .. part
      if lfs.symlinkattributes(path, "mode") == "link" then
        return nil, "passes through the symbolic link " .. path
      end
    end
  end
  return dir .. "/" .. rel
end

--- fs.inside, raising for a refused path: "<file>: <entry> '<rel>' <why>
-- (paths in this file must stay inside <dir>)". file is the file rel was read
-- from and entry names where in it ("checkpoints[2].path").
function M.checked_path(dir, rel, file, entry)
  local p, why = M.inside(dir, rel)
  if not p then
    error(string.format("%s: %s %s %s (paths in this file must stay inside %s)", file, entry,
      type(rel) == "string" and "'" .. rel .. "'" or "", why, dir), 0)
  end
  return p
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

--- Appends line and "\n" with a single write on a file opened for
-- appending, so lines from processes finishing at once never interleave
-- (POSIX O_APPEND). sync = true fsyncs the file after. Raises "cannot append
-- to '<path>': <reason>" on any failure (a full disk, a short write).
-- @usage fs.append_line(dir .. "/metrics.jsonl", json.encode(e))
function M.append_line(path, line, sync)
  if type(line) ~= "string" then
    error("bad argument #2 to 'append_line' (string expected, got " .. type(line) .. ")", 2)
  end
  return core._fileio_append(path, line .. "\n", sync)
end

--- Creates path holding content, whole, unless path exists: the content is
-- written durably to a temporary file that is then hard-linked into place,
-- which fails when path exists, so no process ever sees path without all of
-- content (a CSV header and the first appended row cannot race). Returns true
-- when this call created the file, false when it existed.
function M.create_once(path, content)
  if M.exists(path) then return false end
  local tmp = string.format("%s.new.%d.%d", path, util.getpid() or 0, math.floor(core.clock() * 1e9) % 1000000007)
  M.write_atomic(tmp, content)
  local ok, err = lfs.link(tmp, path)
  os.remove(tmp)
  if ok then return true end
  if M.exists(path) then return false end
  error(string.format("cannot create '%s': %s", path, tostring(err)), 2)
end

--- Test hook of the file I/O module: the n-th data write from now and every
-- later one fail with "No space left on device" (n = 0: off); and the count
-- of data writes so far. For tests of disk-full behaviour only.
function M._fail_writes_from(n) core._fileio_fail_from(n) end
function M._write_count() return core._fileio_write_count() end

--- Removes a directory tree (used by tests and --check-determinism's scratch runs).
-- A symbolic link is removed itself, never followed: what it points to stays.
function M.rm_rf(path)
  local mode = lfs.symlinkattributes(path, "mode")
  if mode == "directory" then
    for name in lfs.dir(path) do
      if name ~= "." and name ~= ".." then M.rm_rf(path .. "/" .. name) end
    end
    lfs.rmdir(path)
  elseif mode then
    os.remove(path)
  end
end


-- every exported function refuses extra arguments (util.strict)
util.strict_table("fs.", M, false, {
  _fail_writes_from = {"integer"}, abspath = {"string"}, append_line = {"string", "string", "boolean?"},
  check_regular = {"string", "string"}, checked_path = {"string", "any?", "string", "string"},
  create_once = {"string", "string"}, dirname = {"string"}, exists = {"string"}, filter_lines = {"string", "callable"},
  inside = {"string", "any?"}, is_dir = {"string"}, list = {"string"}, mkdir_p = {"string"}, read = {"string"},
  remove_matching = {"string"}, rm_rf = {"string"},
})

return M
