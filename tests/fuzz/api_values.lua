--- api_values.lua -- what the Lua API fuzzer (api_fuzz.lua) calls and with what.
--
-- Three parts, all deterministic from the (seed, call) pair a generator is given:
--   rng(seed, i)        a SplitMix64 stream for call i: the same arguments every run
--   sandbox(scratch)    confines the process to its scratch directory before `require "dlua"`
--                       (io.open/io.lines/io.output, os.remove/rename/tmpname, lfs writes refuse
--                       paths outside it; os.execute, io.popen, os.exit and lfs.chdir raise)
--   targets(dl)         every function reachable from `require "dlua"`: module functions found
--                       by walking the returned tables (recursively, with metatables), and the
--                       methods of instances the factories below build (nn modules, optimizers,
--                       schedules, data sets, pipelines, iterators, search spaces, ...), minus
--                       the EXCLUDED ones, sorted by name
--   args(r, target)     hostile arguments for one call, each with a printable description
--
-- Generated strings never contain "/" and are never "." or "..", so a path argument can only
-- name something inside the scratch directory the worker runs in (the C core opens files
-- itself, below the sandbox's reach).
local M = {}

------------------------------------------------------------------------ rng

local Rng = {}
Rng.__index = Rng

--- A SplitMix64 stream keyed by (seed, i).
function M.rng(seed, i)
  local r = setmetatable({s = seed * 0x5851F42D4C957F2D + i * 0x14057B7EF767814F + 1}, Rng)
  for _ = 1, 4 do r:next() end
  return r
end

function Rng:next()
  self.s = self.s + 0x9E3779B97F4A7C15
  local z = self.s
  z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
  z = (z ~ (z >> 27)) * 0x94D049BB133111EB
  return z ~ (z >> 31)
end

function Rng:int(n) return (self:next() >> 1) % n + 1 end          -- 1..n
function Rng:chance(p) return (self:next() >> 11) / 2 ^ 53 < p end
function Rng:pick(list) return list[self:int(#list)] end

------------------------------------------------------------------------ sandbox

--- Confines file access of this process to scratch (an absolute directory, the cwd).
function M.sandbox(scratch)
  local function inside(p)
    if type(p) ~= "string" then return true end        -- let the real function reject it
    if p == "/dev/null" then return true end
    local rel = p
    if p:sub(1, 1) == "/" then
      if p:sub(1, #scratch + 1) ~= scratch .. "/" and p ~= scratch then return false end
      rel = p:sub(#scratch + 2)
    elseif p:sub(1, 1) == "~" then
      return false
    end
    for part in rel:gmatch("[^/]+") do
      if part == ".." then return false end
    end
    return true
  end
  local function guard(name, f, nargs)
    return function(...)
      local a = table.pack(...)
      for k = 1, nargs do
        if not inside(a[k]) then error(string.format("api_fuzz sandbox: %s outside the scratch dir: %s", name, tostring(a[k])), 2) end
      end
      return f(...)
    end
  end
  local function refuse(name) return function() error("api_fuzz sandbox: " .. name .. " is disabled", 2) end end
  io.open = guard("io.open", io.open, 1)
  io.lines = guard("io.lines", io.lines, 1)
  local output, input = io.output, io.input
  io.output = function(f, ...) if type(f) == "string" then error("api_fuzz sandbox: io.output(path) is disabled", 2) end return output(f, ...) end
  io.input = function(f, ...) if type(f) == "string" and not inside(f) then error("api_fuzz sandbox: io.input outside", 2) end return input(f, ...) end
  os.remove = guard("os.remove", os.remove, 1)
  os.rename = guard("os.rename", os.rename, 2)
  os.tmpname = function() return scratch .. "/tmpname-" .. tostring(math.random(1 << 30)) end
  local real = {exit = os.exit, execute = os.execute, popen = io.popen}
  os.execute = refuse("os.execute (process spawning)")
  io.popen = refuse("io.popen (process spawning)")
  os.exit = refuse("os.exit")
  local lfs = require "lfs"
  for _, k in ipairs({"mkdir", "rmdir", "touch", "lock_dir", "attributes", "symlinkattributes", "dir"}) do
    if lfs[k] then lfs[k] = guard("lfs." .. k, lfs[k], 1) end
  end
  if lfs.link then lfs.link = guard("lfs.link", lfs.link, 2) end
  lfs.chdir = refuse("lfs.chdir")
  return real
end

------------------------------------------------------------------------ targets

-- Not called, with the reason. Everything else reachable is.
M.EXCLUDED = {
  ["dl.study"] = "starts trial agents as background processes (os.execute) and polls them with sleep",
  ["dl.dist.run_study"] = "runs a study across processes (agents, sleep polling)",
  ["dl.dist.serve_trials"] = "a trial server loop that waits for MPI peers (sleep polling)",
  ["dl.dist.trial_pool"] = "hands trials to MPI peers and waits for them (sleep polling)",
  ["dl.report"] = "renders with headless chromium (io.popen)",
  ["dl.batch_size_sweep"] = "runs one training job per batch size (minutes per call)",
  ["dl.data.fashion_mnist"] = "reads the 30 MB Fashion-MNIST set from /usr/share (outside the scratch dir, seconds per call)",
  ["dl.data.fashion_mnist_tensors"] = "as dl.data.fashion_mnist",
  ["core._proc_spawn"] = "starts any program on PATH with the arguments it is given (dlua.util.proc)",
  ["core._proc_signal"] = "sends a signal to any process id it is given",
  ["core._signal_catch"] = "makes SIGINT/SIGTERM set a flag: a worker would outlive the driver's kill",
  ["core._sleep"] = "sleeps as long as it is asked (up to 1e9 s): a hang by design",
  ["core._wait_event"] = "as core._sleep",
  ["dl.util.sleep"] = "as core._sleep",
}

local function walk(v, name, seen, out, depth)
  if depth > 6 then return end
  if type(v) == "function" then
    if not out[v] then out[v] = name end
    return
  end
  if type(v) == "userdata" and type(getmetatable(v)) == "table" then
    return walk(getmetatable(v), name .. "<mt>", seen, out, depth + 1)
  end
  if type(v) ~= "table" or seen[v] then return end
  seen[v] = true
  local keys = {}
  for k in pairs(v) do if type(k) == "string" then keys[#keys + 1] = k end end
  table.sort(keys)
  for _, k in ipairs(keys) do walk(rawget(v, k), name .. "." .. k, seen, out, depth + 1) end
  local mt = getmetatable(v)
  if type(mt) == "table" then
    walk(mt, name .. "<mt>", seen, out, depth + 1)
    if type(rawget(mt, "__index")) == "table" then walk(rawget(mt, "__index"), name, seen, out, depth + 1) end
  end
end

-- Instances whose methods are targets: name -> function(dl) returning a fresh one.
local function factories(dl)
  local nn, data, search = dl.nn, dl.data, dl.search
  local function params() return nn.Linear(3, 2):parameters() end
  local function ds() return data.tensors{x = dl.rand(6, 3), y = dl.arange(1, 7, 1, {dtype = "int64"})} end
  local f = {
    Linear = function() return nn.Linear(3, 2) end,
    Conv2d = function() return nn.Conv2d(1, 2, 3) end,
    BatchNorm = function() return nn.BatchNorm(3) end,
    LayerNorm = function() return nn.LayerNorm(3) end,
    Embedding = function() return nn.Embedding(5, 2) end,
    Dropout = function() return nn.Dropout(0.5) end,
    MaxPool2d = function() return nn.MaxPool2d(2) end,
    AvgPool2d = function() return nn.AvgPool2d(2) end,
    AdaptiveAvgPool2d = function() return nn.AdaptiveAvgPool2d(1) end,
    Sequential = function() return nn.Sequential{nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)} end,
    Residual = function() return nn.Residual(nn.Linear(3, 3)) end,
    CrossEntropy = function() return nn.CrossEntropy() end,
    MSE = function() return nn.MSE() end,
    Softmax = function() return nn.Softmax() end,
    SGD = function() return dl.optim.SGD{params = params(), lr = 0.1, momentum = 0.9} end,
    Adam = function() return dl.optim.Adam{params = params(), lr = 0.01} end,
    AdamW = function() return dl.optim.AdamW{params = params(), lr = 0.01} end,
    schedule = function() return dl.optim.schedule.cosine{steps = 10, warmup = 2} end,
    Dataset = ds,
    Pipeline = function() return ds():batch(2) end,
    Iterator = function() return ds():batch(2):iter() end,
    Rng = function() return search.rng(1) end,
    Halton = function() return search.halton_sequence(2, 1) end,
    Space = function() return search.space{lr = search.log_uniform(1e-3, 1), n = search.int(1, 4)} end,
    Suggester = function() return search.suggester(search.space{lr = search.uniform(0, 1)}, {seed = 1}) end,
    Evaluator = function() return dl.metrics.evaluator{} end,
    Function = function()
      return dl.autograd.Function{forward = function(_, x) return x * 2 end, backward = function(_, g) return g * 2 end}
    end,
  }
  local order = {"Sequential", "Linear", "Conv2d", "BatchNorm", "LayerNorm", "Embedding", "Residual", "Dropout",
    "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "CrossEntropy", "MSE", "Softmax", "SGD", "Adam", "AdamW",
    "schedule", "Dataset", "Pipeline", "Iterator", "Rng", "Halton", "Space", "Suggester", "Evaluator", "Function"}
  return f, order
end

--- Sorted list of {name, fn, factory = name or nil} and the factories that failed.
function M.targets(dl)
  local out = {}
  walk(dl, "dl", {}, out, 0)
  -- the C module itself is one `require` away: its private entry points (`_ds_new`, ...) too
  walk(require "dlua.core", "core", {}, out, 0)
  local list, seen = {}, {}
  for fn, name in pairs(out) do
    if not M.EXCLUDED[name] then list[#list + 1] = {name = name, fn = fn}; seen[fn] = true end
  end
  local failed = {}
  local fac, fnames = factories(dl)
  local taken = {}          -- an inherited method is a target once, on the first factory that has it
  for _, k in ipairs(fnames) do
    local ok, obj = pcall(fac[k])
    if not ok or (type(obj) ~= "table" and type(obj) ~= "userdata" and type(obj) ~= "function") then
      failed[#failed + 1] = k .. ": " .. tostring(obj)
    else
      local m = {}
      walk(obj, k, {}, m, 0)
      if type(obj) == "function" then m[obj] = k end
      for fn, name in pairs(m) do
        -- methods of the instance (own or inherited), called with a fresh instance as self
        if not taken[fn] then
          taken[fn] = true
          list[#list + 1] = {name = k .. ":" .. name:gsub("^[^.<]*", ""):gsub("^<mt>", ""):gsub("^%.", ""), fn = fn, factory = k}
        end
      end
    end
  end
  table.sort(list, function(a, b) return a.name < b.name end)
  M.factory = fac
  return list, failed
end

------------------------------------------------------------------------ values

local DTYPES = {"float32", "float64", "int32", "int64", "uint8"}
local SHAPES = {{}, {0}, {3}, {2, 3}, {0, 3}, {3, 0}, {2, 1, 3}, {1, 1, 1, 1}, {2, 3, 4}, {1, 2, 1, 2, 1, 2, 1, 2}}

local function numel(shape) local n = 1; for _, s in ipairs(shape) do n = n * s end; return n end

-- a fresh tensor: dtype, shape, contiguous or not (transpose, narrow, expand, select), maybe
-- NaN/inf values or requires_grad; returns it and its description
local function tensor(dl, r)
  local d = r:pick(DTYPES)
  local shape = r:pick(SHAPES)
  local n = numel(shape)
  local ok, t = pcall(function()
    local base = dl.arange(0, n, 1, {dtype = d})
    if #shape == 0 then return dl.tensor(r:pick({0, 1, -3, 2.5}), {dtype = d}) end
    return base:reshape(table.unpack(shape))
  end)
  if not ok then ok, t = pcall(dl.zeros, 2, 3) end
  if not ok then return nil, "nil --[[tensor creation failed: " .. tostring(t) .. "]]" end
  local how = {}
  if (d == "float32" or d == "float64") and r:chance(0.2) then
    pcall(function() t:fill_(r:pick({0 / 0, 1 / 0, -1 / 0, 1e38, -0.0})) end)
    how[#how + 1] = "filled with a special value"
  end
  local k = r:int(6)
  if k == 1 and t:dim() >= 2 then
    local ok2, v = pcall(t.transpose, t, 1, t:dim()); if ok2 then t = v; how[#how + 1] = "transposed" end
  elseif k == 2 and t:dim() >= 1 and t:size(t:dim()) >= 2 then
    local ok2, v = pcall(t.narrow, t, t:dim(), 2, 1); if ok2 then t = v; how[#how + 1] = "narrowed" end
  elseif k == 3 and t:dim() >= 1 then
    local sh = t:shape(); sh[#sh + 1] = 1
    local ok2, v = pcall(function() local u = t:reshape(table.unpack(sh)); sh[#sh] = 3; return u:expand(table.unpack(sh)) end)
    if ok2 then t = v; how[#how + 1] = "expanded" end
  end
  if r:chance(0.15) and (d == "float32" or d == "float64") then
    pcall(dl.requires_grad, t, true); how[#how + 1] = "requires_grad"
  end
  local okd, desc = pcall(function()
    return string.format("tensor(%s [%s]%s%s)", t:dtype(), table.concat(t:shape(), ", "),
      t:is_contiguous() and "" or " non-contiguous", #how > 0 and " " .. table.concat(how, ", ") or "")
  end)
  return t, okd and desc or "tensor(?)"
end

local GOOD_STRINGS = {"", "x", "y", "image", "label", "weight", "float32", "float64", "int32", "int64", "uint8",
  "sum", "mean", "none", "min", "max", "relu", "f.txt", "sub/dir/f.txt", "ck.safetensors", "a.csv", "run",
  "train/loss", "quasirandom", "bayes", "grid"}

local function garbage(r)
  local k = r:int(7)
  if k == 1 then return string.rep("x", r:pick({100, 4097, 100000})) end
  if k == 2 then return "\0\1\2\255" end
  if k == 3 then return "%s%s%n%d" end
  if k == 4 then return "\xff\xfe\xc3\x28" end
  if k == 5 then return "nan" end
  local n, b = r:int(12), {}
  for j = 1, n do
    local c = r:int(255)
    if c == 47 or c == 46 then c = 120 end            -- no "/" and no ".": no path escapes
    b[j] = string.char(c)
  end
  return table.concat(b)
end

local NUMBERS = {0, 1, 2, 3, -1, -2, 0.5, -0.0, 1 / 0, -1 / 0, 0 / 0, 2 ^ 31, 1 << 31, 1 << 32, 1 << 53,
  1 << 62, (1 << 62) + 1, math.maxinteger, math.mininteger, -(1 << 62), 1e308, 4.9e-324, 65537, 2 ^ 62, 1e18, 7}

-- proxies: __index that collects garbage, answers differently on each read, __len that lies
local function proxy(dl, r)
  local k = r:int(4)
  local base = {2, 3, lr = 0.1, dtype = "float32", x = true}
  if k == 1 then
    return setmetatable({}, {__index = function(_, key) collectgarbage(); collectgarbage(); return base[key] end,
      __len = function() collectgarbage(); return 2 end}), "proxy(__index runs collectgarbage)"
  elseif k == 2 then
    local n = 0
    return setmetatable({}, {__index = function(_, key)
      n = n + 1
      if type(key) == "number" then return n == 1 and 2 or (1 << 40) end
      return base[key]
    end, __len = function() n = n + 1; return n == 1 and 1 or 4096 end}), "proxy(answers differently each read)"
  elseif k == 3 then
    local t = {}
    local ok, x = pcall(dl.zeros, 2)
    return setmetatable(t, {__index = function(_, key) if type(key) == "number" and key <= 2 then return ok and x or 1 end end,
      __len = function() return math.maxinteger end}), "proxy(__len = maxinteger)"
  end
  return setmetatable({}, {__index = function() error("proxy __index raised") end, __len = function() error("proxy __len raised") end}),
    "proxy(__index and __len raise)"
end

-- a list that reads as tensors once and then changes: the second read of element i is a
-- bigger tensor, a non-tensor, or nil, and the first read of any element collects garbage
-- (a binding must read a table once, into C values, and keep what it uses anchored)
local function shifty_list(dl, r)
  local reads, kind = {}, r:int(3)
  local ok, first = pcall(function()
    local t = dl.rand(2, 3); dl.requires_grad(t, true); (t * 2):sum():backward(); return t
  end)
  local ok2, big = pcall(dl.rand, 64, 64)
  local n = r:int(3)
  return setmetatable({}, {
    __len = function() return n end,
    __index = function(_, i)
      if type(i) ~= "number" or i < 1 or i > n then return nil end
      reads[i] = (reads[i] or 0) + 1
      if reads[i] == 1 then collectgarbage(); return ok and first or nil end
      if kind == 1 then return ok2 and big or nil elseif kind == 2 then return "not a tensor" end
      return nil
    end}), "shifty_list(tensors first, then " .. ({"a bigger tensor", "a string", "nil"})[kind] .. ")"
end

-- structure for the C entry points that take tables: per argument a generator name; a call
-- with a signature fills every argument from it and then makes one of them hostile
local SIG = {
  list = function(dl, r)
    if r:chance(0.5) then return shifty_list(dl, r) end
    local a, da = tensor(dl, r)
    local b, db = tensor(dl, r)
    return {a, b}, "{" .. da .. ", " .. db .. "}"
  end,
  names = function(_, r)
    if r:chance(0.5) then
      local n = 0
      return setmetatable({}, {__len = function() return 2 end, __index = function(_, i)
        n = n + 1; collectgarbage(); if type(i) == "number" and i <= 2 then return n <= 2 and ("f" .. i) or {} end
      end}), "proxy names (strings once, then tables)"
    end
    return {"x", "y"}, '{"x", "y"}'
  end,
  rule = function(dl, r)
    local k = r:pick({"SGD", "Adam", "NAdam", "AdamW", "Adagrad", "RMSProp"})
    return dl.optim_new(k), string.format("optim_new(%q)", k)
  end,
  states = function(dl, r)
    if r:chance(0.5) then local l, d = shifty_list(dl, r); return {l}, "{" .. d .. "}" end
    return {{}, {}}, "{{}, {}}"
  end,
  lr = function(_, r) local v = r:pick({0.1, 0, -1, 1 / 0}); return v, tostring(v) end,
  step = function(_, r) local v = r:int(3); return v, tostring(v) end,
  dim = function(_, r) local v = r:int(3) - 1; return v, tostring(v) end,
}
local SIGNATURES = {
  ["dl.optim_update"] = {"rule", "list", "states", "lr", "step"},
  ["core._ds_new"] = {"names", "list"},
  ["dl.cat"] = {"list", "dim"},
  ["dl.stack"] = {"list", "dim"},
  ["dl.backward"] = {"list", "list"},
}

local function table_value(dl, r, depth)
  local k = r:int(12)
  if k == 1 then return {}, "{}" end
  if k == 2 then return {2, 3}, "{2, 3}" end
  if k == 3 then return {{1, 2}, {3}}, "{{1, 2}, {3}} --[[ragged]]" end
  if k == 4 then local t = {1, 2}; t[3] = t; return t, "t = {1, 2, t} --[[cyclic]]" end
  if k == 5 then return {dtype = r:pick(DTYPES)}, "{dtype = ...}" end
  if k == 6 then return {bogus_key = 1, lr = 0.1, seed = 1}, "{bogus_key = 1, lr = 0.1, seed = 1}" end
  if k == 7 then return {1, nil, 3, [1 << 40] = 4}, "{1, nil, 3, [2^40] = 4} --[[sparse]]" end
  if k == 8 then return proxy(dl, r) end
  if k == 9 then return {0 / 0, 1 / 0, -1}, "{nan, inf, -1}" end
  if k == 10 and depth < 2 then
    local a, da = M.value(dl, r, depth + 1)
    local b, db = M.value(dl, r, depth + 1)
    return {a, b, x = a, image = b}, "{" .. da .. ", " .. db .. ", x = .., image = ..}"
  end
  if k == 11 then
    local t = {}
    for j = 1, 200 do t[j] = {j} end
    return t, "{{1}, ..., {200}}"
  end
  local t = {}
  local x = t
  for _ = 1, 300 do x[1] = {}; x = x[1] end
  return t, "{{{...}}} --[[300 deep]]"
end

local function misc(dl, r)
  local k = r:int(9)
  if k == 1 then return io.stdout, "io.stdout" end
  if k == 2 then return coroutine.create(function() end), "coroutine" end
  if k == 3 then local c = coroutine.create(function() end); coroutine.resume(c); return c, "dead coroutine" end
  if k == 4 then return function() end, "function() end" end
  if k == 5 then return function() error("callback raised") end, "function() error() end" end
  if k == 6 then return function(...) collectgarbage(); return ... end, "function(...) collectgarbage(); return ... end" end
  if k == 7 then return function() return 0 / 0, {}, "x" end, "function() return nan, {}, 'x' end" end
  if k == 8 then return coroutine.running(), "coroutine.running()" end
  return print, "print"
end

--- One hostile value and its description.
function M.value(dl, r, depth)
  depth = depth or 0
  local k = r:int(20)
  if k <= 2 then return nil, "nil" end
  if k == 3 then return r:chance(0.5), "boolean" end
  if k <= 7 then
    local v = r:pick(NUMBERS)
    return v, (v ~= v) and "0/0" or string.format(math.type(v) == "integer" and "%d" or "%.17g", v)
  end
  if k <= 9 then local s = r:pick(GOOD_STRINGS); return s, string.format("%q", s) end
  if k == 10 then local s = garbage(r); return s, string.format("%q", s):sub(1, 60) end
  if k <= 14 then return tensor(dl, r) end
  if k <= 17 then return table_value(dl, r, depth) end
  if k == 18 and M.factory then
    local names = {}
    for n in pairs(M.factory) do names[#names + 1] = n end
    table.sort(names)
    local n = r:pick(names)
    local ok, obj = pcall(M.factory[n])
    if ok then return obj, "<" .. n .. ">" end
  end
  return misc(dl, r)
end

-- plausible values that get past the first argument checks
local function plausible(dl, r)
  local k = r:int(8)
  if k <= 3 then local v = r:int(4) - 1; return v, tostring(v) end
  if k <= 5 then return tensor(dl, r) end
  if k == 6 then return {2, 3}, "{2, 3}" end
  if k == 7 then local s = r:pick(GOOD_STRINGS); return s, string.format("%q", s) end
  return nil, "nil"
end

-- sizes, counts and indices that overflow a product, wrap a cast or exhaust memory
local SIZE_ATTACKS = {1 << 62, (1 << 62) + 1, -(1 << 62), math.maxinteger, math.mininteger, 1 << 32, (1 << 32) - 1,
  1 << 31, 1 << 40, -1, -2, 0, 2 ^ 62, 2 ^ 63, 1e18, 0 / 0, 1 / 0, -1 / 0, 1e9}

-- one hostile value, weighted toward what breaks C: sizes, then structures, then the rest
local function hostile(dl, r)
  local k = r:int(10)
  if k <= 3 then
    local v = r:pick(SIZE_ATTACKS)
    return v, (v ~= v) and "0/0" or string.format(math.type(v) == "integer" and "%d" or "%.17g", v)
  end
  if k <= 5 then return table_value(dl, r, 0) end
  if k == 6 then return tensor(dl, r) end
  if k == 7 then local s = garbage(r); return s, string.format("%q", s):sub(1, 60) end
  return M.value(dl, r, 0)
end

--- Arguments for target t: a packed table and its description. Four shapes of call, so that
-- both the first checks and the code behind them are reached: sizes (a tensor or nothing, then
-- integers of which about half overflow or wrap: what shape code meets; 25%), every argument
-- plausible but one hostile (35%), all plausible (15%), all drawn from everything (25%).
-- Methods get a fresh instance as self most of the time; one call in ten gets a junk extra
-- argument.
function M.args(dl, r, t)
  local a, d = {}, {}
  local n, start = r:pick({0, 1, 2, 2, 3, 3, 3, 4, 5, 6, 7}), 1
  local mode = r:int(20)
  if t.factory and r:chance(0.85) then
    local ok, obj = pcall(M.factory[t.factory])
    a[1], d[1] = ok and obj or nil, ok and "<" .. t.factory .. ">" or "nil --[[factory failed]]"
    start, n = 2, n + 1
  elseif r:chance(0.6) then
    a[1], d[1] = tensor(dl, r)                      -- most dl.* functions take a tensor first
    start, n = 2, math.max(n, 1)
  end
  local sig = SIGNATURES[t.name]
  if sig and r:chance(0.5) then                     -- structured: every argument as expected, then one hostile
    for j, g in ipairs(sig) do a[j], d[j] = SIG[g](dl, r) end
    n = #sig
    if r:chance(0.5) then local j = r:int(n); a[j], d[j] = hostile(dl, r) end
  elseif mode <= 5 then                             -- sizes
    n = math.max(n, start)
    for j = start, n do
      if r:chance(0.5) then
        local v = r:pick(SIZE_ATTACKS)
        a[j], d[j] = v, (v ~= v) and "0/0" or string.format(math.type(v) == "integer" and "%d" or "%.17g", v)
      else
        local v = r:pick({1, 2, 3, 4, -1, 0}); a[j], d[j] = v, tostring(v)
      end
    end
  else
    local bad = mode <= 12 and n >= 1 and r:int(n) or nil
    for j = start, n do
      if mode > 15 then a[j], d[j] = M.value(dl, r, 0)
      else a[j], d[j] = plausible(dl, r) end
    end
    if bad then a[bad], d[bad] = hostile(dl, r) end
  end
  if r:chance(0.1) then n = n + 1; a[n], d[n] = "junk", '"junk" --[[extra]]' end
  a.n = n
  for j = 1, n do d[j] = d[j] or "nil" end
  return a, table.concat(d, ", ", 1, n)
end

return M
