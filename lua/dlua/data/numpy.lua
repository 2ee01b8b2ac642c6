--- dlua.data.numpy: NumPy arrays as tensors and datasets, the way Python users
-- hand data over: `.npy` files (np.save; memory-mapped where the layout allows)
-- and `.npz` archives (np.savez, np.savez_compressed). The engine reads and
-- checks the files (engine/io/npy.c, npz.c: which dtypes become which, and
-- what is refused); these functions check their options, build the datasets
-- and name the files in their errors.
--
-- Class labels: NumPy data usually stores them 0-based, dlua's are 1-based.
-- As with data.csv, the fields stored 0-based are named in `zero_based`; they
-- must hold integers >= 0 and become int32 with 1 added. Nothing is shifted
-- silently.
local core = require "dlua.core"
local util = require "dlua.util"
local check_mod = require "dlua.data.check"
local dataset = require "dlua.data.dataset"

local M = {}

local errorf, check, options = check_mod.errorf, check_mod.check, check_mod.options
local wrap = dataset.wrap

local INT32_MAX = 2147483647

-- "; did you mean 'x'?" or ""
local function hint(word, words)
  local near = type(word) == "string" and util.nearest(word, words)
  return near and ("; did you mean '" .. near .. "'?") or ""
end

-- t (field `name` of `what`) shifted from 0-based to 1-based int32 labels
local function one_based(fn, what, name, t)
  if t:dtype() == "float32" or t:dtype() == "float64" then
    errorf(3, "%s: zero_based field '%s' (%s) is %s; 0-based labels must be integers", fn, name, what, t:dtype())
  end
  if t:numel() > 0 then
    local lo, hi = t:min():item(), t:max():item()
    if lo < 0 or hi >= INT32_MAX then
      errorf(3, "%s: zero_based field '%s' (%s) holds %d; 0-based labels must lie in [0, %d)", fn, name, what,
        lo < 0 and lo or hi, INT32_MAX)
    end
  end
  return t:to("int32"):scale(1, 1)
end

-- opts.zero_based checked against the fields: a set of names
local function zero_based_set(fn, zb, fields)
  local set = {}
  if zb == nil then return set end
  if type(zb) ~= "table" or util.is_tensor(zb) then
    errorf(3, "%s: zero_based must be a list of field names, got %s", fn, type(zb))
  end
  local names = util.sorted_keys(fields)
  for i, f in ipairs(zb) do
    if type(f) ~= "string" then errorf(3, "%s: zero_based[%d] must be a field name, got %s", fn, i, type(f)) end
    if fields[f] == nil then
      errorf(3, "%s: zero_based names '%s', which is not a field (fields: %s)%s", fn, f, table.concat(names, ", "),
        hint(f, names))
    end
    set[f] = true
  end
  return set
end

-- the dataset of fields {name = tensor} read from whats {name = "file"}, labels shifted
local function build(fn, names, ts, whats, zb)
  local n0, first
  for i, name in ipairs(names) do
    local t = ts[i]
    if t:dim() == 0 then
      errorf(3, "%s: field '%s' (%s) is a 0-d array; dimension 1 must index the examples", fn, name, whats[name])
    end
    if n0 == nil then
      n0, first = t:size(1), name
    elseif t:size(1) ~= n0 then
      errorf(3, "%s: field '%s' (%s) has %d examples (dimension 1) but field '%s' (%s) has %d", fn, name,
        whats[name], t:size(1), first, whats[first], n0)
    end
    if zb[name] then ts[i] = one_based(fn, whats[name], name, t) end
  end
  return wrap(check(3, pcall(core._ds_new, names, ts)))
end

--- data.read_npy(path [, {mmap = true}]) -> the array of a .npy file as a tensor
-- of the same shape (0-d included). float32/float64/int32/int64/uint8 arrays
-- keep their dtype; float16 becomes float32, int8/int16/uint16 int32, uint32
-- and uint64 int64, bool uint8 (0/1); big-endian arrays are byte-swapped and
-- Fortran-order ones transposed into C order. With `mmap` (the default) the
-- tensor views the memory-mapped file when no conversion is needed
-- (copy-on-write: changing the tensor never changes the file).
-- @usage local x = data.read_npy("x_train.npy")
function M.read_npy(path, opts)
  if type(path) ~= "string" then errorf(2, "read_npy: path must be a string, got %s", type(path)) end
  opts = options("read_npy", opts, {mmap = "boolean"})
  return check(2, pcall(core._read_npy, path, opts.mmap ~= false))
end

-- the .npy members of the archive at path, without ".npy" (others are not arrays)
local function npz_arrays(path)
  local out = {}
  for _, m in ipairs(check(3, pcall(core._npz_members, path))) do
    local stem = m:match("^(.+)%.npy$")
    if stem then out[#out + 1] = stem end
  end
  return out
end

--- data.read_npz(path [, {members = {...}}]) -> {name = tensor}: the arrays of a
-- .npz archive (np.savez, np.savez_compressed), by member name without
-- ".npy"; all of them, or the members listed (".npy" may be left out). Converted as read_npy does;
-- always read into memory (never mapped), each member's CRC-32 checked.
-- @usage local d = data.read_npz("mnist.npz"); print(d.x_train:shape()[1])
function M.read_npz(path, opts)
  if type(path) ~= "string" then errorf(2, "read_npz: path must be a string, got %s", type(path)) end
  opts = options("read_npz", opts, {members = "table"})
  local all = npz_arrays(path)
  local have, names = {}, {}
  for _, m in ipairs(all) do have[m] = true end
  for i, m in ipairs(opts.members or all) do
    if type(m) ~= "string" then errorf(2, "read_npz: members[%d] must be a member name, got %s", i, type(m)) end
    names[i] = m:match("^(.+)%.npy$") or m
    if not have[names[i]] then
      errorf(2, "npz: '%s' has no member '%s' (members: %s)%s", path, m, table.concat(all, ", "), hint(names[i], all))
    end
  end
  local ts = check(2, pcall(core._read_npz, path, names))
  local out = {}
  for i, m in ipairs(names) do out[m] = ts[i] end
  return out
end

local NPY_OPTIONS = {"mmap", "zero_based"}

--- data.npy{field = path, ... [, zero_based = {field, ...}, mmap = true]}: a
-- dataset whose fields are .npy files, one per field, with equal first
-- dimensions (dimension 1 indexes the examples). Arrays are read as
-- read_npy reads them (mapped by default); `zero_based` lists the fields
-- stored 0-based (class labels, usually, in NumPy data), which become int32
-- with 1 added.
-- @usage local ds = data.npy{image = "x.npy", label = "y.npy", zero_based = {"label"}}
function M.npy(opts)
  if type(opts) ~= "table" or util.is_tensor(opts) then
    errorf(2, "npy: expected a table {field = path, ...}, got %s", type(opts))
  end
  local files, names = {}, {}
  for k, v in pairs(opts) do
    if type(k) ~= "string" then errorf(2, "npy: field names must be strings, got %s", type(k)) end
    local is_option = k == "mmap" or k == "zero_based"
    if not is_option then
      if type(v) ~= "string" then
        errorf(2, "npy: field '%s' must be a path (a string), got %s (options: %s)%s", k, type(v),
          table.concat(NPY_OPTIONS, ", "), hint(k, NPY_OPTIONS))
      end
      files[k], names[#names + 1] = v, k
    end
  end
  if #names == 0 then errorf(2, "npy: no fields given: data.npy{image = \"x.npy\", label = \"y.npy\"}") end
  if opts.mmap ~= nil and type(opts.mmap) ~= "boolean" then
    errorf(2, "npy: option 'mmap' must be boolean, got %s", type(opts.mmap))
  end
  table.sort(names)
  local zb = zero_based_set("npy", opts.zero_based, files)
  local ts, whats = {}, {}
  for i, name in ipairs(names) do
    ts[i] = check(2, pcall(core._read_npy, files[name], opts.mmap ~= false))
    whats[name] = "'" .. files[name] .. "'"
  end
  return build("npy", names, ts, whats, zb)
end

--- data.npz{path = p [, fields = {field = member, ...}, zero_based = {field, ...}]}:
-- a dataset from the arrays of a .npz archive: `fields` maps each field to a
-- member name (without ".npy"); without it every array is a field of its
-- member's name. First dimensions must agree. `zero_based` as in data.npy.
-- @usage local train = data.npz{path = "mnist.npz", fields = {image = "x_train", label = "y_train"}, zero_based = {"label"}}
function M.npz(opts)
  opts = options("npz", opts, {path = "string", fields = "table", zero_based = "table"})
  if opts.path == nil then errorf(2, "npz: option 'path' is required (the .npz file)") end
  local all = npz_arrays(opts.path)
  local fields = opts.fields
  if fields == nil then
    fields = {}
    for _, m in ipairs(all) do fields[m] = m end
  end
  local names, have = {}, {}
  for _, m in ipairs(all) do have[m] = true end
  for k, v in pairs(fields) do
    if type(k) ~= "string" then errorf(2, "npz: fields must map field names to members, got a %s key", type(k)) end
    if type(v) ~= "string" then errorf(2, "npz: fields.%s must be a member name, got %s", k, type(v)) end
    local m = v:match("^(.+)%.npy$") or v
    if not have[m] then
      errorf(2, "npz: '%s' has no member '%s' (members: %s)%s", opts.path, v, table.concat(all, ", "), hint(m, all))
    end
    names[#names + 1] = k
  end
  if #names == 0 then errorf(2, "npz: '%s' holds no arrays", opts.path) end
  table.sort(names)
  local zb = zero_based_set("npz", opts.zero_based, fields)
  local members, whats = {}, {}
  for i, name in ipairs(names) do
    members[i] = fields[name]
    whats[name] = string.format("'%s' member '%s'", opts.path, fields[name])
  end
  local ts = check(2, pcall(core._read_npz, opts.path, members))
  return build("npz", names, ts, whats, zb)
end

return M
