--- dlua.data.shards: record shards in the WebDataset convention (POSIX tar files
-- whose consecutive members sharing a key are one example: 000123.png and
-- 000123.cls) as datasets that stay on disk, and `data.pack`, which writes them.
-- The engine scans the shards' headers into one offset per example
-- (engine/data/shards.c) and reads an example's members when it is read, on the
-- pipeline's worker threads; memory holds that index and the batches in flight,
-- whatever the shards' size. `shuffle{shards = true}` permutes the shards every
-- epoch and mixes examples in a bounded buffer; `shard{by = "shards"}` gives
-- each rank whole shards.
local lfs = require "lfs"
local core = require "dlua.core"
local fs = require "dlua.util.fs"
local util = require "dlua.util"
local check_mod = require "dlua.data.check"
local dataset = require "dlua.data.dataset"

local M = {}

local errorf, check, options = check_mod.errorf, check_mod.check, check_mod.options

local IMAGE_EXTS = {png = true, jpg = true, jpeg = true}

-- the shard files: files (a list) or dir (its *.tar files, sorted)
local function shard_paths(opts)
  if (opts.files == nil) == (opts.dir == nil) then
    errorf(3, "shards: give exactly one of files (a list of .tar paths) and dir (a folder of .tar files)")
  end
  local out = {}
  if opts.files ~= nil then
    if type(opts.files) ~= "table" or #opts.files == 0 then
      errorf(3, "shards: files must be a non-empty list of paths, got %s", type(opts.files))
    end
    for i, p in ipairs(opts.files) do
      if type(p) ~= "string" then errorf(3, "shards: files[%d] is a %s, expected a path", i, type(p)) end
      out[i] = p
    end
    return out
  end
  if type(opts.dir) ~= "string" then errorf(3, "shards: dir must be a path, got %s", type(opts.dir)) end
  local ok, iter, state = pcall(lfs.dir, opts.dir)
  if not ok then errorf(3, "shards: cannot list '%s': %s", opts.dir, (tostring(iter):gsub("^[^:]*: ", ""))) end
  for name in iter, state do
    if name:match("%.tar$") and name:sub(1, 1) ~= "." then out[#out + 1] = opts.dir .. "/" .. name end
  end
  table.sort(out)
  if #out == 0 then errorf(3, "shards: no .tar files in '%s'", opts.dir) end
  return out
end

-- fields = {image = "png;jpg;jpeg", label = "cls"} -> the engine's field list, sorted by name
local function field_specs(fields, zero_based)
  if type(fields) ~= "table" or next(fields) == nil then
    errorf(3, "shards: fields must map field names to member extensions, e.g. {image = \"png;jpg\", label = \"cls\"}")
  end
  local zb = {}
  for i, f in ipairs(zero_based or {}) do
    if type(f) ~= "string" or fields[f] == nil then
      errorf(3, "shards: zero_based[%d] names '%s', which is not one of the fields", i, tostring(f))
    end
    zb[f] = true
  end
  local names = {}
  for k in pairs(fields) do
    if type(k) ~= "string" then errorf(3, "shards: field names must be strings, got %s", type(k)) end
    names[#names + 1] = k
  end
  table.sort(names)
  local out = {}
  for _, name in ipairs(names) do
    local spec = fields[name]
    if type(spec) ~= "string" or spec == "" then
      errorf(3, "shards: fields.%s must be extensions such as \"png;jpg\" or \"cls\", got %s", name, type(spec))
    end
    local exts, kind = {}, nil
    for e in spec:gmatch("[^;]+") do
      local k = IMAGE_EXTS[e:lower()] and "image" or (e == "cls" and "class") or nil
      if not k then
        errorf(3, "shards: fields.%s: extension '%s' is not one dlua reads (png, jpg, jpeg for images; cls for " ..
          "class labels)", name, e)
      end
      if kind and k ~= kind then errorf(3, "shards: fields.%s mixes image and class extensions", name) end
      kind = k
      exts[#exts + 1] = e
    end
    if zb[name] and kind ~= "class" then errorf(3, "shards: zero_based names '%s', which is not a class field", name) end
    out[#out + 1] = {name, kind, exts, zb[name] and 1 or 0}
  end
  return out
end

--- data.shards{dir = path | files = {paths}, fields = {name = "ext;ext", ...} [, channels = 3]
-- [, on_error = "fail" | "skip"] [, zero_based = {"label"}]}: a dataset over record shards.
-- A field is read from the member with one of its extensions: "png", "jpg", "jpeg" decode to
-- uint8 [channels, H, W] (as data.images: gray replicated, alpha dropped, or PIL's luma for 1
-- channel); "cls" is a decimal class label (int32). WebDataset writes class labels 0-based:
-- list such fields in zero_based to get dlua's 1-based labels (data.pack writes them
-- 0-based). An example without one of the fields is an error naming the shard and key (with
-- on_error = "skip" it is left out, and the count is ds.incomplete); an unreadable member is
-- an error naming the shard, member and offset when its example is read, or skipped.
-- @usage local ds = data.shards{dir = "shards/train", fields = {image = "png", label = "cls"},
--          zero_based = {"label"}}
function M.shards(opts)
  opts = options("shards", opts, {"dir", "files", "fields", "channels", "on_error", "zero_based"})
  local paths = shard_paths(opts)
  if opts.zero_based ~= nil and type(opts.zero_based) ~= "table" then
    errorf(2, "shards: zero_based must be a list of field names, got %s", type(opts.zero_based))
  end
  local specs = field_specs(opts.fields, opts.zero_based)
  local channels = opts.channels or 3
  if channels ~= 1 and channels ~= 3 then errorf(2, "shards: channels must be 1 or 3, got %s", tostring(channels)) end
  local on_error = opts.on_error or "fail"
  if on_error ~= "fail" and on_error ~= "skip" then
    errorf(2, "shards: on_error must be \"fail\" or \"skip\", got %s", tostring(on_error))
  end
  local ud, incomplete = check(2, pcall(core._ds_shards, paths, specs, channels, on_error == "skip"))
  local ds = dataset.wrap(ud, nil)
  rawset(ds, "incomplete", incomplete)
  rawset(ds, "shards", paths)
  return ds
end

-- the bytes of a uint8 image tensor [C, H, W] as PNG
local function png_bytes(t)
  return core._png_encode(t)
end

-- an example's fields as tar members {name, bytes}: images as PNG, integer scalars as .cls
-- (0-based: label - 1 when the field is in one_based), other tensors refused
local function members(key, ex, names, one_based, fmt)
  local out = {}
  for _, name in ipairs(names) do
    local v = ex[name]
    if util.is_tensor(v) then
      if v:dim() == 0 then
        local x = v:item()
        if math.type(x) ~= "integer" and x ~= math.floor(x) then
          errorf(4, "pack: field '%s' of example '%s' is %s, not a class label", name, key, tostring(x))
        end
        x = math.tointeger(x) - (one_based[name] and 1 or 0)
        out[#out + 1] = {key .. "." .. (fmt[name] or "cls"), tostring(x)}
      elseif v:dtype() == "uint8" and v:dim() == 3 then
        out[#out + 1] = {key .. "." .. (fmt[name] or "png"), png_bytes(v)}
      else
        errorf(4, "pack: field '%s' is a %s tensor of shape [%s]: pack writes uint8 [C, H, W] images and scalar labels",
          name, v:dtype(), table.concat(v:shape(), ", "))
      end
    elseif math.type(v) == "integer" then
      out[#out + 1] = {key .. "." .. (fmt[name] or "cls"), tostring(v - (one_based[name] and 1 or 0))}
    else
      errorf(4, "pack: field '%s' of example '%s' is a %s", name, key, type(v))
    end
  end
  return out
end

--- data.pack{dataset = ds, dir = path, per_shard = 10000 [, prefix = "shard"] [, fields =]
-- [, one_based = {"label"}] [, on_shard = fn(path, examples)]} --> {files = {...}, examples = n}:
-- writes ds as record shards dir/<prefix>-000000.tar, ... of per_shard examples each, in
-- dataset order: key = the 1-based example number, zero-padded ("000000001"); uint8
-- [C, H, W] fields as lossless PNG, scalar labels as .cls text, written 0-based (label - 1)
-- for the fields in one_based (default: fields named "label"), as WebDataset and PyTorch
-- expect. Each shard is written atomically; a failed write leaves the shards before it.
function M.pack(opts)
  opts = options("pack", opts, {"dataset", "dir", "per_shard", "prefix", "fields", "one_based", "on_shard"})
  local ds = opts.dataset
  if not dataset.is_dataset(ds) then errorf(2, "pack: dataset must be a data dataset, got %s", type(ds)) end
  if type(opts.dir) ~= "string" then errorf(2, "pack: dir must be a path, got %s", type(opts.dir)) end
  local per = opts.per_shard or 10000
  if math.type(per) ~= "integer" or per < 1 then errorf(2, "pack: per_shard must be a positive integer, got %s", tostring(per)) end
  local prefix = opts.prefix or "shard"
  if type(prefix) ~= "string" or not prefix:match("^[%w_%-]+$") then
    errorf(2, "pack: prefix must be letters, digits, '_' and '-', got %s", tostring(prefix))
  end
  local names = opts.fields
  if names == nil then
    names = {}
    for i, f in ipairs(ds:fields()) do names[i] = f.name end
  end
  local one_based = {}
  for _, f in ipairs(opts.one_based or {"label"}) do one_based[f] = true end
  fs.mkdir_p(opts.dir)
  local files, n, batch, k = {}, #ds, {}, 0
  local function flush()
    if #batch == 0 then return end
    local path = string.format("%s/%s-%06d.tar", opts.dir, prefix, #files)
    core._tar_write(path, batch)
    files[#files + 1] = path
    if opts.on_shard then opts.on_shard(path, k) end
    batch = {}
  end
  -- a dataset of image files (data.images, unsplit): the files go in as they are (a JPEG
  -- stays a JPEG), under their own extension
  local src_files = rawget(ds, "files")
  for i = 1, n do
    local key = string.format("%09d", i)
    local ex = ds:get(i)
    local copied
    if src_files and ex.image ~= nil then
      local path = src_files.root .. "/" .. src_files.paths[i]
      local bytes = fs.read(path)
      if not bytes then errorf(2, "pack: cannot read '%s'", path) end
      local ext = (path:match("%.([%w]+)$") or "png"):lower()
      batch[#batch + 1] = {key .. "." .. (ext == "jpeg" and "jpg" or ext), bytes}
      copied = "image"
    end
    local rest = {}
    for _, name in ipairs(names) do if name ~= copied then rest[#rest + 1] = name end end
    for _, m in ipairs(members(key, ex, rest, one_based, {})) do batch[#batch + 1] = m end
    k = k + 1
    if k % per == 0 then flush() end
  end
  flush()
  return {files = files, examples = n}
end

return M
