--- dl.data: datasets and the threaded input pipeline.
--
-- A dataset has a length, named fields and random access (`#ds`,
-- `ds:get(i)`). Chaining methods on it builds a pipeline description
-- (`ds:shuffle{seed = 1}:map(t):batch(128):workers(2)`), which runs in C
-- when iterated: worker threads apply the transforms, a bounded queue
-- holds ready batches, and the consumer pulls them in order. Randomness
-- comes from (data seed, epoch, example id), so the batches are the same
-- for any number of workers. See docs/api/data.md.
--
-- This file is also loaded into the pipeline's worker Lua states (to
-- rebuild Lua map functions there), so it requires nothing but dlua.core and dlua.util.
local core = require "dlua.core"
local util = require "dlua.util"

local M = {}

local DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
local INSTALL_HINT = " (install the data with: apt-get install dataset-fashion-mnist," ..
  " or set DLUA_FASHION_MNIST to its directory)"

--- The wait fraction above which a pipeline warns that training is input-bound.
M.input_bound_threshold = 0.10
--- Batches a pipeline must have handed out before it judges.
M.input_bound_min_batches = 20

------------------------------------------------------------------ helpers

local is_tensor = util.is_tensor

local function errorf(level, fmt, ...) error(string.format(fmt, ...), level >= 0 and level + 1 or 0) end

-- re-raises a failed pcall at `level` above the caller
local function check(level, ok, ...)
  if not ok then error((...), level + 1) end
  return ...
end

-- rejects keys not in `valid` (a list or a util.check_options spec) at `level` above the caller
local function options(fname, opts, valid, level)
  local checked = util.check_options(fname, opts, valid, (level or 2) + 1)
  return checked                                   -- (not a tail call: the level counts this frame)
end

local function is_int(v) return math.type(v) == "integer" or (type(v) == "number" and v == math.floor(v)) end

local function check_int(fname, what, v, lo, level)
  if not is_int(v) or v < lo then
    errorf((level or 2) + 1, "%s: %s must be an integer >= %d, got %s", fname, what, lo, tostring(v))
  end
  return math.tointeger(v)
end

------------------------------------------------------------------ datasets

local Dataset = {__name = "dlua.data.Dataset"}
Dataset.__index = Dataset
M.Dataset = Dataset

local function wrap(ud) return setmetatable({_ud = ud}, Dataset) end

--- Is `x` a dataset?
function M.is_dataset(x) return getmetatable(x) == Dataset end

function Dataset.__len(self) return core._ds_len(self._ud) end

--- ds:get(i) -> {field = value}: example i (1-based); 0-d fields are numbers,
-- the others tensors (views of the dataset's storage).
-- @usage fm.train:get(1) --> {image = <uint8 1x28x28>, label = 10}
function Dataset:get(i)
  return check(2, pcall(core._ds_get, self._ud, i))
end

--- ds:fields() -> {{name =, dtype =, shape = {...}}, ...}, shape of one example.
function Dataset:fields()
  return core._ds_fields(self._ud)
end

--- ds:column(name) -> the whole field as one tensor [#ds, ...], in example order.
function Dataset:column(name)
  return check(2, pcall(core._ds_column, self._ud, name))
end

--- ds:subset(indices) -> a dataset of the examples at the 1-based indices
-- (a list or an integer tensor), sharing storage.
function Dataset:subset(indices)
  if type(indices) == "table" and not is_tensor(indices) then
    indices = core.tensor(indices, {dtype = "int64"})
  end
  return wrap(check(2, pcall(core._ds_subset, self._ud, indices)))
end

--- ds:split{n1, n2, ... [, seed = s]} -> datasets: disjoint parts of the given
-- counts, or fractions of #ds when all are below 1 (fractions that add up to
-- 1 give the rounding to the last part). With a seed the examples are
-- permuted first (the same seed gives the same parts); without one the
-- parts are consecutive.
-- @usage local train, valid = fm.train:split{55000, 5000, seed = 0}
function Dataset:split(spec)
  if type(spec) ~= "table" or #spec == 0 then
    errorf(2, "split: expected a table of counts or fractions, got %s", type(spec))
  end
  local valid = {seed = true}
  for i = 1, #spec do valid[i] = true end               -- the parts, positional
  util.check_options("split", spec, valid, 2)
  local n, counts = #self, {}
  local fractions, sum = true, 0
  for i, v in ipairs(spec) do
    if type(v) ~= "number" or v < 0 then errorf(2, "split: part %d must be a non-negative number, got %s", i, tostring(v)) end
    if v >= 1 then fractions = false end
    sum = sum + v
  end
  if fractions then
    if sum > 1 + 1e-9 then errorf(2, "split: the fractions add up to %g, more than 1", sum) end
    local used = 0
    for i, v in ipairs(spec) do
      counts[i] = math.floor(v * n + 1e-9)
      used = used + counts[i]
    end
    if math.abs(sum - 1) < 1e-9 then counts[#counts] = counts[#counts] + (n - used) end
  else
    for i, v in ipairs(spec) do counts[i] = check_int("split", "count " .. i, v, 0) end
  end
  local seed = spec.seed
  if seed ~= nil then seed = check_int("split", "seed", seed, 0) end
  local parts = check(2, pcall(core._ds_split, self._ud, counts, seed))
  local out = {}
  for i, ud in ipairs(parts) do out[i] = wrap(ud) end
  return table.unpack(out)
end

function Dataset:__tostring()
  local f = {}
  for _, x in ipairs(self:fields()) do
    f[#f + 1] = string.format("%s: %s [%s]", x.name, x.dtype, table.concat(x.shape, ", "))
  end
  return string.format("Dataset(%d examples; %s)", #self, table.concat(f, "; "))
end

--- data.tensors{name = tensor, ...}: a dataset over tensors whose dimension 1
-- indexes the examples (labels are taken as they are, 1-based).
-- @usage local ds = data.tensors{x = dl.randn(100, 4), label = dl.ones(100, {dtype = "int32"})}
function M.tensors(fields)
  if type(fields) ~= "table" or is_tensor(fields) then
    errorf(2, "tensors: expected a table of named tensors, got %s", type(fields))
  end
  local names, ts = {}, {}
  for k in pairs(fields) do
    if type(k) ~= "string" then errorf(2, "tensors: field names must be strings, got %s", type(k)) end
    names[#names + 1] = k
  end
  table.sort(names)
  for i, k in ipairs(names) do
    if not is_tensor(fields[k]) then errorf(2, "tensors: field '%s' is a %s, expected a tensor", k, type(fields[k])) end
    ts[i] = fields[k]
  end
  return wrap(check(2, pcall(core._ds_new, names, ts)))
end

--- data.idx{images = path, labels = path [, limit = n]}: an IDX / IDX.gz pair
-- (the MNIST family). Images [N, H, W] become uint8 [N, 1, H, W]; labels,
-- stored 0-based, become 1-based int32. `limit` reads only the first n
-- examples (streaming: the rest is never decompressed).
-- @usage local ds = data.idx{images = "t10k-images-idx3-ubyte.gz", labels = "t10k-labels-idx1-ubyte.gz"}
function M.idx(opts)
  opts = options("idx", opts, {"images", "labels", "limit"})
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
  opts = options("fashion_mnist", opts, {"dir", "limit"})
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

--- data.csv{path = p [, header = true, delimiter = ",", missing = v, fields =, types =, zero_based =]}:
-- a numeric CSV or CSV.gz table as a dataset. By default every column is a
-- field named by the header; `fields = {x = {"a", "b"}, label = "c"}` groups
-- columns (by name, or 1-based number) into fields. A field is int32 when all
-- its values are written as integers, else float32, unless `types =
-- {field = dtype}` says. `zero_based = {"label"}` adds 1 to fields stored
-- 0-based (labels are 1-based in dlua). Empty values are errors naming the
-- line unless `missing` gives the value to use.
-- @usage local ds = data.csv{path = "iris.csv", fields = {x = {1, 2, 3, 4}, label = "species"}, zero_based = {"label"}}
function M.csv(opts)
  opts = options("csv", opts, {"path", "header", "delimiter", "missing", "fields", "types", "zero_based"})
  if type(opts.path) ~= "string" then errorf(2, "csv: option 'path' must be a path, got %s", type(opts.path)) end
  if opts.delimiter ~= nil and (type(opts.delimiter) ~= "string" or #opts.delimiter ~= 1) then
    errorf(2, "csv: delimiter must be one character")
  end
  if opts.missing ~= nil and type(opts.missing) ~= "number" then errorf(2, "csv: missing must be a number") end
  local names, integral, values, problems = check(2, pcall(core._read_csv, opts.path,
    {header = opts.header ~= false, delimiter = opts.delimiter, missing = opts.missing}))
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
  return wrap(check(2, pcall(core._ds_new, fnames, ts)))
end

------------------------------------------------------------------ transforms

local Transform = {__name = "dlua.data.Transform"}
Transform.__index = Transform
local T = {}
M.transforms = T

local function transform(desc) return setmetatable(desc, Transform) end

local function field_of(opts, default) return opts.field or default or "image" end

local function pair(fname, what, v)
  if type(v) == "number" then v = {v, v} end
  if type(v) ~= "table" or #v ~= 2 or not is_int(v[1]) or not is_int(v[2]) or v[1] < 0 or v[2] < 0 then
    errorf(3, "%s: %s must be a non-negative integer or {h, w}", fname, what)
  end
  return {math.tointeger(v[1]), math.tointeger(v[2])}
end

local function probability(fname, what, v)
  if v == true then return 0.5 end
  if v == false or v == nil then return 0 end
  if type(v) ~= "number" or v < 0 or v > 1 then errorf(3, "%s: %s must be a boolean or a probability", fname, what) end
  return v
end

--- transforms.cast(dtype [, {field = "image"}]): converts the field's values.
function T.cast(dtype, opts)
  opts = options("cast", opts, {"field"})
  local ok = ({float32 = 1, float64 = 1, int32 = 1, int64 = 1, uint8 = 1})[dtype]
  if not ok then errorf(2, "cast: unknown dtype '%s' (valid: float32, float64, int32, int64, uint8)", tostring(dtype)) end
  return transform{kind = "cast", dtype = dtype, field = field_of(opts)}
end

--- transforms.scale(s [, {field = "image"}]): float32 x * s (uint8 images: scale(1/255)).
function T.scale(s, opts)
  opts = options("scale", opts, {"field"})
  if type(s) ~= "number" then errorf(2, "scale: factor must be a number, got %s", type(s)) end
  return transform{kind = "scale", scale = s, field = field_of(opts)}
end

--- transforms.normalize{mean =, std = [, field = "image"]}: float32 (x - mean) / std,
-- with one value for all channels or one per channel (dimension 1 of the field).
function T.normalize(opts)
  opts = options("normalize", opts, {"mean", "std", "field"})
  local mean = type(opts.mean) == "number" and {opts.mean} or opts.mean
  local std = type(opts.std) == "number" and {opts.std} or opts.std
  if type(mean) ~= "table" or type(std) ~= "table" or #mean ~= #std or #mean == 0 then
    errorf(2, "normalize: mean and std must be numbers or lists of the same length")
  end
  for _, s in ipairs(std) do if type(s) ~= "number" or s <= 0 then errorf(2, "normalize: std values must be positive") end end
  return transform{kind = "normalize", mean = mean, std = std, field = field_of(opts)}
end

--- transforms.random_crop(size [, {padding = 0, fill = 0, field = "image"}]): pads
-- each side by `padding`, then crops a random size x size (or {h, w}) window.
function T.random_crop(size, opts)
  opts = options("random_crop", opts, {"padding", "fill", "field"})
  local sz = pair("random_crop", "size", size)
  if sz[1] < 1 or sz[2] < 1 then errorf(2, "random_crop: size must be positive") end
  return transform{kind = "random_crop", size = sz,
    padding = check_int("random_crop", "padding", opts.padding or 0, 0), fill = opts.fill or 0, field = field_of(opts)}
end

--- transforms.flip{horizontal = true, vertical = false [, field = "image"]}: mirrors
-- with probability 0.5 for `true`, or the probability given.
function T.flip(opts)
  opts = options("flip", opts, {"horizontal", "vertical", "field"})
  local h = opts.horizontal
  if h == nil then h = true end
  return transform{kind = "flip", horizontal = probability("flip", "horizontal", h),
    vertical = probability("flip", "vertical", opts.vertical), field = field_of(opts)}
end

--- transforms.hflip([p = 0.5]) and transforms.vflip([p = 0.5]): one-direction flips.
function T.hflip(p) return T.flip{horizontal = p or 0.5, vertical = false} end
function T.vflip(p) return T.flip{horizontal = false, vertical = p or 0.5} end

--- transforms.random_translate(max [, {fill = 0, field = "image"}]): shifts by
-- a random whole number of pixels in [-max, max] (or {rows, cols}).
function T.random_translate(max, opts)
  opts = options("random_translate", opts, {"fill", "field"})
  return transform{kind = "random_translate", max = pair("random_translate", "max", max), fill = opts.fill or 0,
    field = field_of(opts)}
end

--- transforms.random_affine{degrees = 0, translate = 0, scale = {1, 1} [, fill = 0, field = "image"]}:
-- rotates by up to +-degrees, shifts by up to translate x the size, zooms by
-- a factor in scale, about the centre, with bilinear interpolation.
function T.random_affine(opts)
  opts = options("random_affine", opts, {"degrees", "translate", "scale", "fill", "field"})
  local sc = opts.scale or {1, 1}
  if type(sc) == "number" then sc = {sc, sc} end
  if type(sc) ~= "table" or type(sc[1]) ~= "number" or type(sc[2]) ~= "number" or sc[1] <= 0 or sc[2] < sc[1] then
    errorf(2, "random_affine: scale must be {lo, hi} with 0 < lo <= hi")
  end
  return transform{kind = "random_affine", degrees = opts.degrees or 0, translate = opts.translate or 0,
    scale = sc, fill = opts.fill or 0, field = field_of(opts)}
end

--- transforms.one_hot(classes [, {field = "label"}]): a 1-based label -> float32 [classes].
function T.one_hot(classes, opts)
  opts = options("one_hot", opts, {"field"})
  return transform{kind = "one_hot", classes = check_int("one_hot", "classes", classes, 1), field = field_of(opts, "label")}
end

------------------------------------------------------------------ Lua functions for worker states

-- A Lua map function is sent to the worker states as a plan: its bytecode
-- and, for every upvalue, a plain description of the value. Plans are
-- built here in the main state and rebuilt by M._worker_load in each
-- worker state; upvalues are copies there (changes do not come back).

local function module_names()
  local byval = {}
  for name, mod in pairs(package.loaded) do
    if type(mod) == "table" and (byval[mod] == nil or #name < #byval[mod]) then byval[mod] = name end
  end
  return byval
end

local STD = {"math", "string", "table", "utf8", "os", "io", "coroutine", "debug", "_G"}

local function find_cfunction(f, mods)
  for _, name in ipairs(STD) do
    local mod = package.loaded[name]
    if type(mod) == "table" then
      for k, v in pairs(mod) do if v == f then return name, k end end
    end
  end
  for mod, name in pairs(mods) do
    for k, v in pairs(mod) do if v == f then return name, k end end
  end
end

local function plan_of(v, where, st)
  local tv = type(v)
  if v == nil then return {t = "nil"} end
  if tv == "boolean" or tv == "number" or tv == "string" then return {t = "v", v = v} end
  if st.ids[v] then return {t = "ref", id = st.ids[v]} end
  if v == _G then return {t = "G"} end
  if tv == "table" and st.mods[v] then return {t = "mod", name = st.mods[v]} end
  if is_tensor(v) then
    return {t = "tensor", dtype = v:dtype(), shape = v:shape(), bytes = core._tensor_bytes(v)}
  end
  if tv == "function" then
    local info = debug.getinfo(v, "S")
    if info.what == "C" then
      local mod, key = find_cfunction(v, st.mods)
      if not mod then st.fail(where, "a C function that is not a field of a loaded module") end
      return {t = "cfn", mod = mod, key = key}
    end
    st.n = st.n + 1
    local id = st.n
    st.ids[v] = id
    local p = {t = "fn", id = id, code = string.dump(v), name = "=" .. info.short_src, ups = {}}
    local i = 1
    while true do
      local name, val = debug.getupvalue(v, i)
      if not name then break end
      -- globals are the worker state's own
      p.ups[i] = name == "_ENV" and {t = "G"}
        or plan_of(val, (where ~= "" and where .. ", " or "") .. "upvalue '" .. name .. "'", st)
      i = i + 1
    end
    return p
  end
  if tv == "table" then
    if getmetatable(v) ~= nil then st.fail(where, "a table with a metatable (an object)") end
    st.n = st.n + 1
    local id = st.n
    st.ids[v] = id
    local p = {t = "table", id = id, entries = {}}
    for k, x in pairs(v) do
      local kp = plan_of(k, where .. " key", st)
      p.entries[#p.entries + 1] = {kp, plan_of(x, where .. "." .. tostring(k), st)}
    end
    return p
  end
  st.fail(where, "a " .. tv)
end

local function plan_function(f, level)
  local info = debug.getinfo(f, "S")
  local origin = info.what == "C" and "a C function" or string.format("the function defined at %s:%d", info.short_src,
    info.linedefined)
  local st = {ids = {}, n = 0, mods = module_names()}
  st.fail = function(where, what)
    errorf(-1, "map: cannot copy %s into the worker Lua states: %s is %s (nil, booleans, numbers, " ..
      "strings, tensors, plain tables, Lua functions and loaded modules can be copied)", origin, where, what)
  end
  if info.what == "C" then errorf(level + 1, "map: cannot copy a C function into the worker Lua states; wrap it in a Lua function") end
  local ok, plan = pcall(plan_of, f, "", st)
  if not ok then error(plan, level + 2) end
  return plan, string.format("lua %s:%d", info.short_src, info.linedefined)
end

--- Rebuilds a plan made by plan_function (in a worker state).
function M._worker_load(plan)
  local built = {}
  local function build(p)
    local t = p.t
    if t == "nil" then return nil end
    if t == "v" then return p.v end
    if t == "ref" then return built[p.id] end
    if t == "G" then return _G end
    if t == "mod" then return (require(p.name)) end
    if t == "cfn" then return (require(p.mod))[p.key] end
    if t == "tensor" then return core._tensor_from_bytes(p.bytes, p.dtype, p.shape) end
    if t == "table" then
      local out = {}
      built[p.id] = out
      for _, e in ipairs(p.entries) do
        local k = build(e[1])
        if k ~= nil then out[k] = build(e[2]) end
      end
      return out
    end
    if t == "fn" then
      local f = assert(load(p.code, p.name, "b"))
      built[p.id] = f
      for i, u in ipairs(p.ups) do debug.setupvalue(f, i, (build(u))) end
      return f
    end
    error("bad plan entry " .. tostring(t))
  end
  return build(plan)
end

------------------------------------------------------------------ pipelines

local Pipeline = {__name = "dlua.data.Pipeline"}
Pipeline.__index = Pipeline
M.Pipeline = Pipeline

local AFTER_BATCH = {prefetch = true, workers = true, ["repeat"] = true, seed = true}

local function new_pipeline(source, stages, default_seed)
  return setmetatable({source = source, stages = stages, _default_seed = default_seed,
    _pos = {epoch = 1, batch = 0}, _wait = 0}, Pipeline)
end

function M.is_pipeline(x) return getmetatable(x) == Pipeline end

local function as_pipeline(x)
  if getmetatable(x) == Pipeline then return x end
  return new_pipeline(x, {}, core.seed())
end

-- a copy of p with stage appended (after checking where it may go)
-- (settings: prefetch, workers, seed, repeat replace an earlier one)
local function extend(p, stage, level)
  level = level + 2
  local op = stage.op
  local batched = false
  for _, s in ipairs(p.stages) do
    if s.op == "batch" then batched = true end
    if s.op == op and (op == "batch" or op == "cache") then
      errorf(level, "%s: the pipeline already has a %s stage", op, op)
    end
  end
  if batched and not AFTER_BATCH[op] then
    errorf(level, "%s: comes after batch; %s the examples before batching them", op, op)
  end
  if op == "cache" then
    for _, s in ipairs(p.stages) do
      if s.op == "shuffle" or s.op == "shard" then
        errorf(level, "cache: comes after %s; the cache stores examples in dataset order, so put it first", s.op)
      end
      if s.op == "map" and s.random then
        errorf(level, "cache: comes after the random transform '%s'; a cache stores deterministic preprocessing only", s.name)
      end
    end
  end
  local stages = {}
  for _, s in ipairs(p.stages) do
    if s.op ~= op or not AFTER_BATCH[op] then stages[#stages + 1] = s end
  end
  stages[#stages + 1] = stage
  return new_pipeline(p.source, stages, p._default_seed)
end

local RANDOM = {random_crop = true, flip = true, random_translate = true, random_affine = true}

--- p:shuffle{seed = s [, window = w]}: a fresh permutation every epoch, from
-- (seed, epoch). With a window, a shuffle buffer of w examples instead (for
-- data too large to permute; order is random only within about w examples).
-- Without a seed it uses the pipeline's data seed.
function Pipeline:shuffle(opts)
  opts = options("shuffle", opts, {"seed", "window"})
  local seed = opts.seed
  if seed ~= nil then seed = check_int("shuffle", "seed", seed, 0) end
  local window = opts.window and check_int("shuffle", "window", opts.window, 1) or 0
  return extend(self, {op = "shuffle", seed = seed, window = window}, 1)
end

--- p:map(t1 [, t2, ...]): per-example transforms in order: data.transforms.*
-- (run in C on the worker threads) or Lua functions fn(example, info) ->
-- example, run in per-worker Lua states (see docs/api/data.md).
function Pipeline:map(...)
  local n = select("#", ...)
  if n == 0 then errorf(2, "map: expected a transform or a function") end
  local p = self
  for i = 1, n do
    local t = select(i, ...)
    local stage
    if getmetatable(t) == Transform then
      stage = {op = "map", desc = t, name = t.kind, random = RANDOM[t.kind] or false}
    elseif type(t) == "function" then
      local plan, name = plan_function(t, 1)
      stage = {op = "map", desc = {kind = "lua", plan = plan, name = name}, name = name, random = false}
    else
      errorf(2, "map: argument %d is a %s, expected a data.transforms value or a function", i, type(t))
    end
    p = extend(p, stage, 1)
  end
  return p
end

--- p:select{"image", "label"}: keeps only these fields (drop unused ones early).
function Pipeline:select(fields)
  if type(fields) == "string" then fields = {fields} end
  if type(fields) ~= "table" or #fields == 0 then errorf(2, "select: expected a list of field names") end
  for _, f in ipairs(fields) do
    if type(f) ~= "string" then errorf(2, "select: field names must be strings, got %s", type(f)) end
  end
  local copy = {table.unpack(fields)}
  return extend(self, {op = "map", desc = {kind = "select", fields = copy}, name = "select", random = false}, 1)
end

--- p:batch(n [, {pad = false, drop_remainder = false}]): stacks n examples
-- into each batch and adds a float32 `weight` field (1 for real examples).
-- The last batch of an epoch is shorter, or dropped, or padded to n with
-- copies of its examples that carry weight 0.
function Pipeline:batch(n, opts)
  opts = options("batch", opts, {"pad", "drop_remainder"})
  n = check_int("batch", "size", n, 1)
  if opts.pad and opts.drop_remainder then errorf(2, "batch: pad and drop_remainder exclude each other") end
  return extend(self, {op = "batch", size = n, pad = opts.pad and true or false,
    drop_remainder = opts.drop_remainder and true or false}, 1)
end

--- p:shard{rank = r, world = w} (or {r, w}): keeps every w-th example starting
-- at 0-based rank r: disjoint shards that cover the data. Put it before
-- shuffle (or shuffle with the same seed on every rank); the rank is mixed
-- into the augmentation keys, so ranks draw different augmentations.
function Pipeline:shard(opts)
  if type(opts) ~= "table" then errorf(2, "shard: expected {rank = r, world = w}") end
  local rank, world = opts.rank or opts[1], opts.world or opts[2]
  util.check_options("shard", opts, {rank = true, world = true, [1] = true, [2] = true}, 2)
  world = check_int("shard", "world", world, 1)
  rank = check_int("shard", "rank", rank, 0)
  if rank >= world then errorf(2, "shard: rank %d is not in 0..%d (world %d)", rank, world - 1, world) end
  return extend(self, {op = "shard", rank = rank, world = world}, 1)
end

--- p:prefetch(depth): ready batches kept ahead of the consumer (default 2).
function Pipeline:prefetch(depth)
  return extend(self, {op = "prefetch", depth = check_int("prefetch", "depth", depth, 1)}, 1)
end

--- p:workers(n): worker threads (default 1; 0 produces on the consumer's thread).
function Pipeline:workers(n)
  return extend(self, {op = "workers", n = check_int("workers", "count", n, 0)}, 1)
end

--- p:seed(s): the data seed (augmentations, and shuffles without their own seed).
function Pipeline:seed(s)
  return extend(self, {op = "seed", seed = check_int("seed", "seed", s, 0)}, 1)
end

--- p:cache(path): stores the result of the stages before it (the dataset and
-- deterministic maps) in a file on first use and reads it back afterwards.
-- A stale (different source or stages) or corrupt file is rebuilt.
function Pipeline:cache(path)
  if type(path) ~= "string" then errorf(2, "cache: expected a path, got %s", type(path)) end
  return extend(self, {op = "cache", path = path}, 1)
end

--- p:repeat_([epochs]) (also p["repeat"]): iterate that many epochs by default,
-- or forever without a count.
function Pipeline:repeat_(epochs)
  if epochs ~= nil then epochs = check_int("repeat", "epochs", epochs, 1) end
  return extend(self, {op = "repeat", epochs = epochs or math.huge}, 1)
end
Pipeline["repeat"] = Pipeline.repeat_

-- the pipeline's settings, gathered from its stages
local function settings(p)
  local s = {index = {}, maps = {}, batch = nil, workers = 1, prefetch = 2, epochs = 1, cache = nil, rank = 0}
  local seed, first_shuffle_seed
  for _, st in ipairs(p.stages) do
    local op = st.op
    if op == "shuffle" then
      s.index[#s.index + 1] = st
      if first_shuffle_seed == nil then first_shuffle_seed = st.seed end
    elseif op == "shard" then
      s.index[#s.index + 1] = st
      s.rank = st.rank
    elseif op == "map" then
      s.maps[#s.maps + 1] = st
    elseif op == "batch" then s.batch = st
    elseif op == "workers" then s.workers = st.n
    elseif op == "prefetch" then s.prefetch = st.depth
    elseif op == "repeat" then s.epochs = st.epochs
    elseif op == "seed" then seed = st.seed
    elseif op == "cache" then s.cache = st; s.cache_at = #s.maps
    end
  end
  s.seed = seed or first_shuffle_seed or p._default_seed or 0
  return s
end

--- p:data_seed() -> the data seed the pipeline uses.
function Pipeline:data_seed() return settings(self).seed end

local function examples_per_epoch(p, s)
  local n = #p.source
  for _, st in ipairs(s.index) do
    if st.op == "shard" then n = n > st.rank and (n - st.rank - 1) // st.world + 1 or 0 end
  end
  return n
end

--- #p: batches per epoch (examples, when not batched).
function Pipeline.__len(self)
  local s = settings(self)
  local n = examples_per_epoch(self, s)
  if not s.batch then return n end
  return s.batch.drop_remainder and n // s.batch.size or (n + s.batch.size - 1) // s.batch.size
end

-- canonical text of a value (sorted keys), for fingerprints
local function canon(v, out)
  local tv = type(v)
  if tv == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    out[#out + 1] = "{"
    for _, k in ipairs(keys) do
      out[#out + 1] = tostring(k) .. "="
      canon(v[k], out)
      out[#out + 1] = ","
    end
    out[#out + 1] = "}"
  elseif tv == "string" then
    out[#out + 1] = string.format("%q", v)
  else
    out[#out + 1] = tostring(v)
  end
  return out
end

local function cache_note(p, msg)
  local w = p._warn
  if w == false then return end
  if type(w) == "function" then w(msg) else io.stderr:write(msg, "\n") end
end

-- the dataset behind stage `cache` (built, or read back), and the maps after it
local function resolve_cache(p, s, level)
  local st = s.cache
  local prefix = {}
  for i = 1, s.cache_at do prefix[i] = s.maps[i].desc end
  if not st._resolved then
    local src = p.source._ud
    local fp = string.format("dlua-cache-v1 source=%08x examples=%d stages=%08x", core._ds_checksum(src), #p.source,
      core._crc32(table.concat(canon(prefix, {}))))
    local ud, status, msg = core._cache_load(st.path, fp)
    local info = {path = st.path, status = "loaded"}
    if not ud then
      info.status = status == "missing" and "built" or "rebuilt"
      info.reason = status ~= "missing" and msg or nil
      if info.reason then cache_note(p, "dlua: pipeline " .. msg .. "; rebuilding it") end
      local builder = new_pipeline(p.source, {}, p._default_seed)
      for i = 1, s.cache_at do builder = extend(builder, s.maps[i], level) end
      builder = extend(builder, {op = "batch", size = 256, pad = false, drop_remainder = false}, level)
      builder = extend(builder, {op = "workers", n = s.workers}, level)
      local parts = {}
      local it = builder:iter{warn = false}
      for batch in it do
        for k, v in pairs(batch) do
          if k ~= "weight" then
            parts[k] = parts[k] or {}
            parts[k][#parts[k] + 1] = is_tensor(v) and v or core.tensor({v})
          end
        end
      end
      local names, ts = {}, {}
      for k in pairs(parts) do names[#names + 1] = k end
      table.sort(names)
      for i, k in ipairs(names) do ts[i] = #parts[k] == 1 and parts[k][1] or core.cat(parts[k], 1) end
      if #names == 0 then errorf(level, "cache: the dataset is empty") end
      ud = check(level, pcall(core._ds_new, names, ts, core._ds_ids(src)))
      check(level, pcall(core._cache_save, st.path, ud, fp))
    end
    st._resolved = {ud = ud, info = info}
  end
  local rest = {}
  for i = s.cache_at + 1, #s.maps do rest[#rest + 1] = s.maps[i] end
  return st._resolved.ud, rest, st._resolved.info
end

--- p:cache_info() -> {path =, status = "loaded" | "built" | "rebuilt", reason =}
-- once the pipeline has been iterated; nil before, or without a cache stage.
function Pipeline:cache_info()
  local s = settings(self)
  return s.cache and s.cache._resolved and s.cache._resolved.info or nil
end

local Iter = {__name = "dlua.data.Iterator"}
Iter.__index = Iter
M.Iterator = Iter

--- p:iter([{epochs = 1, warn = true}]) -> iterator: for batch, epoch in p:iter{epochs = 2} do ... end.
-- Starts where the pipeline's position is (see p:state()): `epochs` counts
-- the epoch it starts in, even when partly consumed; `epochs = math.huge`,
-- or a :repeat_() stage with no count, runs forever. `warn`: false to
-- silence the input-bound warning, or a function that receives it.
-- Each call continues from where the previous iterator stopped, so an outer
-- `for epoch = 1, E do for b in p:iter() do ... end end` sees fresh shuffles.
function Pipeline:iter(opts)
  opts = options("iter", opts, {"epochs", "warn"})
  if self._it then self._it:close() end
  local s = settings(self)
  local epochs = opts.epochs or s.epochs
  if epochs ~= math.huge then epochs = check_int("iter", "epochs", epochs, 1) end
  if opts.warn ~= nil then self._warn = opts.warn end
  local ud, maps = self.source._ud, s.maps
  local cache_info
  if s.cache then ud, maps, cache_info = resolve_cache(self, s, 2) end
  local transforms = {}
  local first = #s.maps - #maps                 -- maps the cache replaced keep their numbers
  for i, m in ipairs(maps) do
    local d = {}
    for k, v in pairs(m.desc) do d[k] = v end
    d.name = d.name or m.name
    d.stage = first + i
    transforms[i] = d
  end
  local index = {}
  for i, st in ipairs(s.index) do
    index[i] = st.op == "shard" and {kind = "shard", rank = st.rank, world = st.world}
      or {kind = "shuffle", seed = st.seed or s.seed, window = st.window}
  end
  local spec = {
    index = index, transforms = transforms,
    batch = s.batch and s.batch.size or 0, pad = s.batch and s.batch.pad, drop_remainder = s.batch and s.batch.drop_remainder,
    workers = s.workers, prefetch = s.prefetch, seed = s.seed, rank = s.rank,
    start_epoch = self._pos.epoch, start_batch = self._pos.batch, epochs = epochs == math.huge and -1 or epochs,
  }
  local h = check(2, pcall(core._pipe_new, ud, spec))
  local it = setmetatable({_h = h, _pipe = self, _seed = s.seed, _warned = false, _next_check = 100, _n = 0,
    cache = cache_info, epoch = self._pos.epoch}, Iter)
  self._it = it
  return it, nil, nil, it
end

local function stats_of(raw)
  if not raw then return nil end
  local st = {batches = raw.batches, wait = raw.wait, startup = raw.startup, span = raw.span,
    workers = raw.workers, prefetch = raw.prefetch, stages = raw.stages}
  st.wait_fraction = raw.span > 0 and math.min(1, raw.wait / raw.span) or 0
  local slow, best = nil, -1
  for _, x in ipairs(raw.stages) do
    if x.seconds > best then slow, best = x.name, x.seconds end
  end
  st.slowest = slow
  st.slowest_seconds = best
  return st
end

--- it:stats() -> {batches =, wait =, startup =, span =, wait_fraction =, slowest =,
-- stages = {{name =, seconds =}, ...}, workers =, prefetch =}. wait is the time
-- the consumer blocked for batches 2.. (startup: for batch 1); span runs from
-- batch 1's arrival to the latest batch's; wait_fraction = wait / span.
function Iter:stats()
  if self._h then return stats_of(core._pipe_stats(self._h)) end
  return self._final
end

local function summary(st)
  if not st then return "input pipeline: not run" end
  local per_batch = st.batches > 0 and st.slowest_seconds / st.batches * 1000 or 0
  return string.format("input pipeline: %d batches; waited %.1f%% of step time for input (%.3f s of %.3f s, " ..
    "first batch %.3f s); slowest stage: %s (%.2f ms per batch); %d workers, prefetch %d",
    st.batches, 100 * st.wait_fraction, st.wait, st.span, st.startup, st.slowest or "-", per_batch,
    st.workers, st.prefetch)
end

--- it:summary() -> the one-line summary of it:stats().
function Iter:summary() return summary(self:stats()) end

local function maybe_warn(it, st)
  if it._warned or not st or st.batches < M.input_bound_min_batches then return end
  if st.wait_fraction <= M.input_bound_threshold then return end
  it._warned = true
  local w = it._pipe._warn
  if w == false then return end
  local msg = string.format("dlua: warning: training is input-bound: it waited for input %.0f%% of step time " ..
    "(%d batches); slowest stage: %s; try :workers(n) (now %d), a deeper :prefetch(n) (now %d) or :cache(path) " ..
    "for deterministic preprocessing", 100 * st.wait_fraction, st.batches, st.slowest or "-", st.workers, st.prefetch)
  if type(w) == "function" then w(msg) else io.stderr:write(msg, "\n") end
end

-- closes the C side; remembers the position and the final statistics
local function finish(it)
  if not it._h then return end
  local e, b = core._pipe_position(it._h)
  it._final = stats_of(core._pipe_stats(it._h))
  core._pipe_close(it._h)
  it._h = nil
  local p = it._pipe
  if e then p._pos = {epoch = e, batch = b} end
  p._wait = p._wait + (it._final and (it._final.wait + it._final.startup) or 0)
  if it._final then p._last_stats = it._final end
  if p._it == it then p._it = nil end
  maybe_warn(it, it._final)
end

--- it() / it:next() -> batch, epoch | nil at the end. A batch is a table of
-- tensors (field name -> [n, ...]) plus `weight` when batched.
function Iter:next()
  if not self._h then return nil end
  local ok, batch, epoch = pcall(core._pipe_next, self._h)
  if not ok then
    finish(self)
    error(batch, 2)
  end
  if batch == nil then
    finish(self)
    return nil
  end
  self.epoch = epoch
  self._n = self._n + 1
  if self._n >= self._next_check then
    self._next_check = self._next_check * 10
    maybe_warn(self, self:stats())
  end
  return batch, epoch
end
Iter.__call = Iter.next

--- it:close(): stops and joins the workers (also on break, __close and __gc).
function Iter:close() finish(self) end
Iter.__close = Iter.close
Iter.__gc = Iter.close

--- it:state() -> {epoch =, batch =, seed =}: the position of the next batch.
function Iter:state()
  if self._h then
    local e, b = core._pipe_position(self._h)
    return {epoch = e, batch = b, seed = self._seed}
  end
  return self._pipe:state()
end

--- p:state() -> {epoch =, batch =, seed =}: the position of the next batch this
-- pipeline hands out (epoch 1-based, batch = batches already taken in it),
-- plain values a checkpoint can store.
function Pipeline:state()
  if self._it and self._it._h then return self._it:state() end
  return {epoch = self._pos.epoch, batch = self._pos.batch, seed = settings(self).seed}
end

--- p:set_state(s): the next iter() starts at s (from p:state()); an active
-- iterator is closed. Refuses a state saved with another data seed.
function Pipeline:set_state(s)
  if type(s) ~= "table" then errorf(2, "set_state: expected a table from state(), got %s", type(s)) end
  local epoch = check_int("set_state", "epoch", s.epoch, 1)
  local batch = check_int("set_state", "batch", s.batch or 0, 0)
  local seed = settings(self).seed
  if s.seed ~= nil and s.seed ~= seed then
    errorf(2, "set_state: the state was saved with data seed %s, this pipeline's is %s", tostring(s.seed), tostring(seed))
  end
  local per = #self
  if per > 0 and batch > per then errorf(2, "set_state: batch %d is past the %d batches of an epoch", batch, per) end
  if per > 0 and batch == per then epoch, batch = epoch + 1, 0 end
  if self._it then self._it:close() end
  self._pos = {epoch = epoch, batch = batch}
end

--- p:reset(): back to the start of epoch 1.
function Pipeline:reset() self:set_state{epoch = 1, batch = 0} end

--- p:stats() / p:summary(): of the active iterator, else of the last one.
function Pipeline:stats()
  if self._it then return self._it:stats() end
  return self._last_stats
end

function Pipeline:summary() return summary(self:stats()) end

--- p:wait_time() -> seconds the consumer has spent waiting for this
-- pipeline's batches, over all its iterators (for cost accounting).
function Pipeline:wait_time()
  local live = 0
  if self._it and self._it._h then
    local st = self._it:stats()
    live = st.wait + st.startup
  end
  return self._wait + live
end

function Pipeline:__tostring()
  local ops = {}
  for _, s in ipairs(self.stages) do ops[#ops + 1] = s.op == "map" and "map(" .. s.name .. ")" or s.op end
  return string.format("Pipeline(%d examples: %s)", #self.source, table.concat(ops, " -> "))
end

-- datasets chain into pipelines
for _, name in ipairs({"shuffle", "map", "select", "batch", "shard", "prefetch", "workers", "seed", "cache",
                       "repeat_", "iter"}) do
  Dataset[name] = function(self, ...) return Pipeline[name](as_pipeline(self), ...) end
end
Dataset["repeat"] = Dataset.repeat_

------------------------------------------------------------------ trace

local trace = {}
M.trace = trace

--- dl.trace.start(path): records spans (pipeline stages, waits for input,
-- dl.trace.span) until stop() writes them to path as Chrome trace-event JSON.
function trace.start(path)
  if type(path) ~= "string" then errorf(2, "trace.start: expected a path, got %s", type(path)) end
  check(2, pcall(core._trace_start, path))
end

--- dl.trace.stop() -> path, spans written (nil when not recording).
function trace.stop() return check(2, pcall(core._trace_stop)) end

--- dl.trace.active() -> recording?, path
function trace.active() return core._trace_active() end

local Span = {__name = "dlua.trace.Span"}
Span.__index = Span
function Span:close()
  if self.t0 then
    core._trace_span(self.name, self.t0, core._trace_now(), self.cat)
    self.t0 = nil
  end
end
Span.__close = Span.close

--- dl.trace.span(name [, fn, ...]): with fn, runs fn(...) inside a span and
-- returns its results; without, returns a span to close (`local s <close> =
-- dl.trace.span("forward")`). Spans are on the main thread, category "train".
function trace.span(name, fn, ...)
  if type(name) ~= "string" then errorf(2, "trace.span: name must be a string, got %s", type(name)) end
  local s = setmetatable({name = name, t0 = core._trace_now(), cat = "train"}, Span)
  if fn == nil then return s end
  local res = table.pack(pcall(fn, ...))
  s:close()
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

------------------------------------------------------------------ in-memory Fashion-MNIST

--- Loads Fashion-MNIST into memory: returns {train = {x =, y =}, test = {x =, y =}}
-- with x float32 [N, 1, 28, 28] scaled to [0, 1] and y int64 1-based labels
-- (the IDX files store 0-based labels). The directory is opts.dir, else
-- $DLUA_FASHION_MNIST, else Debian's dataset-fashion-mnist location.
-- @usage local fm = dl.data.fashion_mnist_tensors(); print(fm.train.x:shape()[1]) --> 60000
function M.fashion_mnist_tensors(opts)
  opts = opts or {}
  local dir = opts.dir or os.getenv("DLUA_FASHION_MNIST") or DEFAULT_DIR
  local function part(images, labels)
    local ok, x = pcall(core.read_idx, dir .. "/" .. images)
    if not ok then error(x .. INSTALL_HINT, 3) end
    local y = core.read_idx(dir .. "/" .. labels)
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
