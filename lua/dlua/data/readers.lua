--- dlua.data.readers: datasets from files: IDX / IDX.gz pairs (the MNIST
-- family), Fashion-MNIST from its usual directory, CSV tables (numbers, and
-- class names turned into 1-based classes), and
-- Fashion-MNIST as in-memory tensors. The engine reads and checks the files
-- (CSV: engine/io/csv.c, gzip through zlib, class names included);
-- these functions check their options and name the files in their errors.
local core = require "dlua.core"
local check_mod = require "dlua.data.check"
local dataset = require "dlua.data.dataset"

local M = {}

local errorf, check, options, check_int = check_mod.errorf, check_mod.check, check_mod.options, check_mod.check_int
local wrap = dataset.wrap

local DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
local INSTALL_HINT = " (install the data with: apt-get install dataset-fashion-mnist," ..
  " or set DLUA_FASHION_MNIST to its directory)"

--- data.idx{images = path, labels = path [, limit = n]}: an IDX / IDX.gz pair
-- (the MNIST family). Images [N, H, W] become uint8 [N, 1, H, W]; labels,
-- stored 0-based, become 1-based int32. `limit` reads only the first n
-- examples (streaming: the rest is never decompressed).
-- @usage local ds = data.idx{images = "t10k-images-idx3-ubyte.gz", labels = "t10k-labels-idx1-ubyte.gz"}
function M.idx(opts)
  opts = options("idx", opts, {"images", labels = "string", "limit"})
  if type(opts.images) ~= "string" then errorf(2, "idx: option 'images' must be a path, got %s", type(opts.images)) end
  local limit = opts.limit
  if limit ~= nil then limit = check_int("idx", "limit", limit, 0) end
  local x = check(2, pcall(core._read_idx, opts.images, limit))
  if x:dim() == 3 then x = x:reshape(x:size(1), 1, x:size(2), x:size(3)) end
  local names, ts = {"image"}, {x}
  if opts.labels ~= nil then
    local y = check(2, pcall(core._read_idx, opts.labels, limit))
    if y:dim() ~= 1 then
      errorf(2, "idx: labels %s must have 1 dimension (one label per image), got %d", opts.labels, y:dim())
    end
    if y:size(1) ~= x:size(1) then
      errorf(2, "idx: %s has %d images but %s has %d labels", opts.images, x:size(1), opts.labels, y:size(1))
    end
    names[2], ts[2] = "label", y:int():scale(1, 1)
  end
  return wrap(check(2, pcall(core._ds_new, names, ts)))
end

local fm_cache = setmetatable({}, {__mode = "v"})

--- data.fashion_mnist([{dir =, limit =}]) -> {train = dataset, test = dataset}
-- with fields image (uint8 [1, 28, 28]) and label (1..10). The directory is
-- opts.dir, else $DLUA_FASHION_MNIST, else Debian's dataset-fashion-mnist
-- location; without the files the error says how to install them.
-- @usage local fm = data.fashion_mnist(); print(#fm.train, fm.train:get(1).label) --> 60000 10
function M.fashion_mnist(opts)
  opts = options("fashion_mnist", opts, {dir = "string", "limit"})
  local dir = opts.dir or os.getenv("DLUA_FASHION_MNIST") or DEFAULT_DIR
  local key = dir .. "\0" .. tostring(opts.limit)
  if fm_cache[key] then return fm_cache[key] end
  local function part(images, labels)
    local ok, ds = pcall(M.idx, {images = dir .. "/" .. images, labels = dir .. "/" .. labels, limit = opts.limit})
    if not ok then
      if tostring(ds):find("cannot open", 1, true) then ds = ds .. INSTALL_HINT end
      error(ds, 3)
    end
    return ds
  end
  local fm = {
    train = part("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    test = part("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
  }
  fm_cache[key] = fm
  return fm
end

-- opts.classes checked: {field = column name or number} (the engine's text columns)
local function class_columns(opts)
  local cl = opts.classes
  if type(cl) ~= "table" then errorf(3, "csv: classes must be a list of field names, got %s", type(cl)) end
  local out = {}
  for i, f in ipairs(cl) do
    if type(f) ~= "string" then errorf(3, "csv: classes[%d] must be a field name, got %s", i, type(f)) end
    local c = f
    if opts.fields ~= nil then
      c = type(opts.fields) == "table" and opts.fields[f] or nil
      if c == nil then errorf(3, "csv: classes names '%s', which is not a field", f) end
      if type(c) == "table" then
        errorf(3, "csv: classes names '%s', a field of %d columns (a class field is one column)", f, #c)
      end
    elseif opts.header == false then
      c = math.tointeger(tonumber(f)) or f
    end
    out[f] = c
  end
  return out
end

-- The engine's "'setosa' is not a number" with how to read a column of class names.
local function not_a_number_hint(msg, opts)
  msg = tostring(msg)
  local colname, colnum = msg:match("column '(.-)' %((%d+)%): '.*' is not a number$")
  if not colname then return msg end
  local field = colname
  if type(opts.fields) == "table" then
    field = nil
    for f, c in pairs(opts.fields) do
      if c == colname or c == tonumber(colnum) then field = f end
    end
  end
  if not field then return msg end
  return string.format("%s (if the column holds class names, add classes = {\"%s\"})", msg, field)
end

--- data.csv{path = p [, header = true, delimiter = ",", missing = v, fields =, types =, zero_based =]}:
-- a numeric CSV or CSV.gz table as a dataset. By default every column is a
-- field named by the header; `fields = {x = {"a", "b"}, label = "c"}` groups
-- columns (by name, or 1-based number) into fields. A field is int32 when all
-- its values are written as integers, else float32, unless `types =
-- {field = dtype}` says. `zero_based = {"label"}` adds 1 to fields stored
-- 0-based (labels are 1-based in dlua). Empty values are errors naming the
-- line unless `missing` gives the value to use. `classes = {"label"}` names
-- fields of one column that hold class names ("setosa"): their sorted unique
-- names are the vocabulary, ds.classes.label = {"setosa", ...}, and the field
-- holds each name's 1-based position in it (int32).
-- @usage local ds = data.csv{path = "iris.csv", fields = {x = {1, 2, 3, 4}, label = "species"}, classes = {"label"}}
function M.csv(opts)
  opts = options("csv", opts, {path = true, header = "boolean", delimiter = "string", missing = "number", fields = "table",
    types = "table", zero_based = "table", classes = "table"})
  if type(opts.path) ~= "string" then errorf(2, "csv: option 'path' must be a path, got %s", type(opts.path)) end
  if opts.delimiter ~= nil and (type(opts.delimiter) ~= "string" or #opts.delimiter ~= 1) then
    errorf(2, "csv: delimiter must be one character")
  end
  if opts.missing ~= nil and type(opts.missing) ~= "number" then errorf(2, "csv: missing must be a number") end
  local read_opts = {header = opts.header ~= false, delimiter = opts.delimiter, missing = opts.missing}
  if opts.classes ~= nil then read_opts.text = class_columns(opts) end
  local ok, names, integral, values, problems, vocab = pcall(core._read_csv, opts.path, read_opts)
  if not ok then error(not_a_number_hint(names, opts), 2) end
  local col = {}
  for i, n in ipairs(names) do col[n] = i end
  local function column(f, c)
    local i = math.type(c) == "integer" and c or col[c]
    if not i or i < 1 or i > #names then
      errorf(3, "csv: field '%s' names column '%s', which '%s' does not have (columns: %s)", f, tostring(c),
        opts.path, table.concat(names, ", "))
    end
    return i
  end
  local spec, order = opts.fields, {}
  if spec == nil then
    spec = {}
    for i, n in ipairs(names) do spec[n] = i; order[i] = n end
  else
    if type(spec) ~= "table" then errorf(2, "csv: fields must be a table") end
    for k in pairs(spec) do order[#order + 1] = k end
    table.sort(order)
  end
  local types = opts.types or {}
  local zb = {}
  for _, f in ipairs(opts.zero_based or {}) do zb[f] = true end
  for f in pairs(zb) do if spec[f] == nil then errorf(2, "csv: zero_based names '%s', which is not a field", f) end end
  for f in pairs(types) do if spec[f] == nil then errorf(2, "csv: types names '%s', which is not a field", f) end end
  for f in pairs(vocab) do
    if zb[f] then errorf(2, "csv: field '%s' is in both classes and zero_based (class indices start at 1)", f) end
  end
  local fnames, ts = {}, {}
  for k, f in ipairs(order) do
    local s = spec[f]
    local t, allint
    if type(s) == "table" then
      local idx = {}
      allint = true
      for j, c in ipairs(s) do
        idx[j] = column(f, c)
        allint = allint and integral[idx[j]]
      end
      t = values:index_select(2, core.tensor(idx, {dtype = "int64"}))
    else
      local i = column(f, s)
      allint = integral[i]
      t = values:select(2, i)
    end
    local dtype = types[f] or (allint and "int32" or "float32")
    for _, c in ipairs(type(s) == "table" and s or {s}) do        -- refused, not saturated
      local why = problems[column(f, c)] and problems[column(f, c)][dtype]
      if why then errorf(2, "%s (field '%s')", why, f) end
    end
    local ok, r = pcall(function() return t:to(dtype) end)
    if not ok then errorf(2, "csv: field '%s': %s", f, r) end
    if zb[f] then r = r:scale(1, 1) end
    fnames[k], ts[k] = f, r
  end
  return wrap(check(2, pcall(core._ds_new, fnames, ts)), next(vocab) and vocab or nil)
end


--- Loads Fashion-MNIST into memory: returns {train = {x =, y =}, test = {x =, y =}}
-- with x float32 [N, 1, 28, 28] scaled to [0, 1] and y int64 1-based labels
-- (the IDX files store 0-based labels). The directory is opts.dir, else
-- $DLUA_FASHION_MNIST, else Debian's dataset-fashion-mnist location; opts.limit
-- keeps the first n examples of each part.
-- @usage local fm = dl.data.fashion_mnist_tensors(); print(fm.train.x:shape()[1]) --> 60000
function M.fashion_mnist_tensors(opts)
  opts = options("fashion_mnist_tensors", opts, {dir = "string", limit = true})
  local limit = opts.limit
  if limit ~= nil then limit = check_int("fashion_mnist_tensors", "limit", limit, 0) end
  local dir = opts.dir or os.getenv("DLUA_FASHION_MNIST") or DEFAULT_DIR
  local function read(path)
    if limit then return core._read_idx(path, limit) end
    return core.read_idx(path)
  end
  local function part(images, labels)
    local ok, x = pcall(read, dir .. "/" .. images)
    if not ok then error(x .. INSTALL_HINT, 3) end
    local y = read(dir .. "/" .. labels)
    if y:size(1) ~= x:size(1) then
      error(string.format("fashion_mnist: %s has %d images but %s has %d labels", images, x:size(1),
        labels, y:size(1)), 3)
    end
    return {x = x:float():scale(1 / 255):reshape(x:size(1), 1, x:size(2), x:size(3)), y = y:long():scale(1, 1)}
  end
  return {
    train = part("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    test = part("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
  }
end

return M
