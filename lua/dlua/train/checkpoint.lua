--- dl.checkpoint: safetensors-compatible checkpoint files.
-- A checkpoint is a map of named tensors plus a map of string metadata,
-- written atomically (temporary file, fsync, rename, fsync of the directory)
-- with a CRC-32 per tensor and one over the header, so a torn or corrupted
-- file is refused instead of loaded. Standard safetensors readers can read
-- the weights; standard safetensors files (without dlua's checksums) load
-- too. Loading never executes anything from the file. The format is
-- specified in docs/formats.md ("Checkpoints"); the training loop's
-- retention and resume policy is not here.
local core = require "dlua.core"
local util = require "dlua.util"

local M = {}

local RESERVED = {crc32 = true, format = true, format_version = true, header_crc32 = true}

local is_tensor = util.is_tensor

-- s with control and non-ASCII bytes as \ddd, for messages about bad UTF-8
local function printable(s)
  return (s:gsub("[^\32-\126]", function(c) return "\\" .. c:byte() end))
end

local function check_string(fn, what, s)
  if type(s) ~= "string" then
    error(string.format("checkpoint.%s: %s must be a string, got %s", fn, what, type(s)), 3)
  end
end

--- Writes `tensors` (name -> tensor) and `meta` (string -> string, optional)
-- to `path`, atomically. Returns true, or nil and a message naming the path
-- and the system error when the file cannot be written (an existing file at
-- `path` is then left untouched). Raises on bad arguments: a name or key
-- that is not a UTF-8 string, the name "__metadata__", a metadata key dlua
-- writes itself (crc32, format, format_version, header_crc32), a value that
-- is not a tensor (or a string, in meta). Tensors of any dtype and strides
-- are written contiguously; autograd state is not saved.
-- @usage assert(dl.checkpoint.save("ck.safetensors", {["0.weight"] = w}, {step = "100"}))
function M.save(path, tensors, meta)
  check_string("save", "path", path)
  if type(tensors) ~= "table" then
    error("checkpoint.save: tensors must be a table of name -> tensor, got " .. type(tensors), 2)
  end
  for name, t in pairs(tensors) do
    if type(name) ~= "string" then
      error(string.format("checkpoint.save: tensor names must be strings, got %s key %s", type(name),
        tostring(name)), 2)
    end
    if not utf8.len(name) then
      error(string.format("checkpoint.save: tensor name '%s' is not valid UTF-8", printable(name)), 2)
    end
    if name == "__metadata__" then error("checkpoint.save: '__metadata__' cannot name a tensor", 2) end
    if not is_tensor(t) then
      error(string.format("checkpoint.save: value for '%s' is a %s, expected a tensor", name, type(t)), 2)
    end
  end
  if meta ~= nil then
    if type(meta) ~= "table" then error("checkpoint.save: meta must be a table of strings, got " .. type(meta), 2) end
    for k, v in pairs(meta) do
      if type(k) ~= "string" or type(v) ~= "string" then
        error(string.format("checkpoint.save: meta must map strings to strings, got %s -> %s (key %s)", type(k),
          type(v), tostring(k)), 2)
      end
      if RESERVED[k] then
        error(string.format("checkpoint.save: meta key '%s' is reserved (dlua writes it)", k), 2)
      end
      if not utf8.len(k) or not utf8.len(v) then
        error(string.format("checkpoint.save: meta entry '%s' is not valid UTF-8", printable(k)), 2)
      end
    end
  end
  local ok, res, msg = pcall(core._checkpoint_save, path, tensors, meta)
  if not ok then error(res, 2) end
  return res, msg
end

--- Reads a checkpoint: returns `tensors, meta` (name -> new tensor, and the
-- string metadata without dlua's own keys), or nil and a message
-- "checkpoint: '<path>': <reason>" for a missing, truncated, corrupt
-- ("checksum mismatch for tensor 'x'") or malformed file. Plain safetensors
-- files from other tools load too (their metadata is returned whole; they
-- have no checksums to verify).
-- @usage local tensors, meta = assert(dl.checkpoint.load("ck.safetensors"))
function M.load(path)
  check_string("load", "path", path)
  return core._checkpoint_load(path)
end

--- Reads only the header: returns `meta, info` or nil, message. No data byte
-- is read, so checksums are not verified (use verify). info has format
-- ("dlua-checkpoint" or "safetensors"), format_version, checksummed,
-- header_bytes, data_bytes, and tensors: a list, by name, of
-- {name =, dtype =, shape =, offsets = {begin, end}}.
-- @usage local meta, info = assert(dl.checkpoint.read_meta(path)); print(meta.step, #info.tensors)
function M.read_meta(path)
  check_string("read_meta", "path", path)
  return core._checkpoint_read_meta(path)
end

--- Checks a whole file without keeping its tensors: true, or nil and the
-- reason load would give. For a plain safetensors file (no checksums) it
-- checks the structure and that every data byte is present.
-- @usage if not dl.checkpoint.verify(path) then ... fall back to an older checkpoint ... end
function M.verify(path)
  check_string("verify", "path", path)
  return core._checkpoint_verify(path)
end


-- every exported function refuses extra arguments (util.strict)
util.strict_table("checkpoint.", M, false, {
  load = {"string"}, read_meta = {"string"}, save = {"string", "any", "table?"}, verify = {"string"},
})

return M
