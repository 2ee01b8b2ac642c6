--- dlua.data.dataset: a dataset has a length, named fields and random access
-- (`#ds`, `ds:get(i)`), over storage the engine holds; subsets and splits share
-- it. Chaining a pipeline stage on a dataset (`ds:shuffle{seed = 1}`) starts a
-- pipeline (dlua.data.pipeline). data.tensors builds one from tensors; the file
-- readers are in dlua.data.readers.
local core = require "dlua.core"
local util = require "dlua.util"
local check_mod = require "dlua.data.check"
local pipeline = require "dlua.data.pipeline"

local M = {}

local errorf, check, check_int = check_mod.errorf, check_mod.check, check_mod.check_int
local is_tensor = util.is_tensor

local Dataset = {__name = "dlua.data.Dataset"}
Dataset.__index = Dataset
M.Dataset = Dataset

--- wrap(ud [, classes]) -> the dataset over the engine dataset ud; classes
-- ({field = {name, ...}}, from data.csv's class fields) is kept as ds.classes
-- and passed on to subsets and splits.
function M.wrap(ud, classes) return setmetatable({_ud = ud, classes = classes}, Dataset) end
local wrap = M.wrap

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
    for i = 1, #indices do check_int("subset", "index " .. i, indices[i], 1) end   -- 1.5 is no position
    indices = core.tensor(indices, {dtype = "int64"})
  end
  return wrap(check(2, pcall(core._ds_subset, self._ud, indices)), self.classes)
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
  local parts = util.check_integer("split", 1, #spec, "the number of parts", 1, 64)
  for i = 1, parts do valid[i] = true end               -- the parts, positional
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
  for i, ud in ipairs(parts) do out[i] = wrap(ud, self.classes) end
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

--- ds:take(n) -> the dataset of the first n examples (all of them when it has
-- fewer), sharing storage: a small copy for a dry run or a smoke test.
function Dataset:take(n)
  n = check_int("take", "count", n, 1)
  local idx = {}
  for i = 1, math.min(n, #self) do idx[i] = i end
  return self:subset(idx)
end

-- datasets chain into pipelines
for _, name in ipairs({"shuffle", "map", "select", "batch", "shard", "prefetch", "workers", "seed", "cache",
                       "repeat_", "iter"}) do
  local stage = pipeline.Pipeline[name]
  local info = debug.getinfo(util.unwrap(stage), "u")
  -- as many arguments as the pipeline stage takes (map takes any number)
  local decl = util.declared(stage)                  -- and the stage's declared types
  Dataset[name] = util.strict_method("Dataset:" .. name, function(self, ...) return stage(pipeline.of(self), ...) end,
    not info.isvararg and info.nparams - 1 or math.huge, decl and decl.types)
end
Dataset["repeat"] = Dataset.repeat_
util.strict_table("Dataset:", Dataset, true, {
  column = {"string"}, get = {"number"}, split = {"table"}, subset = {"table|tensor"}, take = {"number"},
})

return M
