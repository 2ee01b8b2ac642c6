-- Strictness of the C binding (issue 16): every function of dlua.core, and
-- every tensor method, rejects a junk extra argument and a string where an
-- options table goes, naming the function and the argument; option tables
-- reject unknown keys, nested ones too; lists given to a binding are read
-- exactly once and stay alive while it uses them.
local core = require "dlua.core"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir("strict")

-- fixtures, fresh for every call
local function T() return core.zeros(2, 3) end
local function DS() return core._ds_new({"x"}, {core.arange(8):reshape(4, 2)}) end
local function IMG() return core.ones(1, 1, 4, 4) end

local idx_path = dir .. "/three.idx"
H.spit(idx_path, "\0\0\8\1" .. string.pack(">I4", 3) .. "abc")
local npy_path, npz_path = dir .. "/two.npy", dir .. "/two.npz"
H.spit(npy_path, H.npy("<f4", {2}, string.pack("<ff", 1, 2)))
H.spit(npz_path, H.zip_stored({{"x.npy", H.npy("<f4", {2}, string.pack("<ff", 1, 2))}}))
local csv_path = dir .. "/two.csv"
H.spit(csv_path, "a,b\n1,2\n")
local ckpt_path = dir .. "/w.ckpt"
local cache_path = dir .. "/ds.cache"
local tar_path = dir .. "/r.tar"
core._tar_write(tar_path, {{"0.cls", "1"}, {"1.cls", "2"}})

-- One valid call per function: args() returns its arguments. run = false: the
-- valid call is not made (it would block in a world of one), only the junk call.
-- after(): undoes a valid call's effect on global state.
local valid = {
  -- tensor creation and information
  arange = {args = function() return 0, 4 end},
  dim = {args = function() return T() end},
  dtype = {args = function() return T() end},
  empty = {args = function() return 2, 3 end},
  full = {args = function() return 1.5, 2, 3 end},
  get_flat = {args = function() return T(), 1 end},
  is_contiguous = {args = function() return T() end},
  item = {args = function() return core.ones(1) end},
  numel = {args = function() return T() end},
  ones = {args = function() return 2 end},
  rand = {args = function() return 2 end},
  randn = {args = function() return 2 end},
  randperm = {args = function() return 3 end},
  release = {args = function() return T() end},
  set_flat = {args = function() return T(), 1, 5 end},
  shape = {args = function() return T() end},
  size = {args = function() return T(), 1 end},
  stride = {args = function() return T() end},
  tensor = {args = function() return {1, 2} end},
  tostring = {args = function() return T() end},
  totable = {args = function() return T() end},
  zeros = {args = function() return 2, 3 end},
  -- ops
  abs = {args = function() return T() end},
  mish = {args = function() return T() end},
  log_sigmoid = {args = function() return T() end},
  exp2 = {args = function() return T() end},
  floor = {args = function() return T() end},
  ceil = {args = function() return T() end},
  round = {args = function() return T() end},
  trunc = {args = function() return T() end},
  acos = {args = function() return T() end},
  acosh = {args = function() return T() end},
  asin = {args = function() return T() end},
  asinh = {args = function() return T() end},
  atan = {args = function() return T() end},
  atanh = {args = function() return T() end},
  cos = {args = function() return T() end},
  cosh = {args = function() return T() end},
  erf = {args = function() return T() end},
  erfc = {args = function() return T() end},
  erfinv = {args = function() return T() end},
  expm1 = {args = function() return T() end},
  log10 = {args = function() return T() end},
  log1p = {args = function() return T() end},
  log2 = {args = function() return T() end},
  silu = {args = function() return T() end},
  sin = {args = function() return T() end},
  sinh = {args = function() return T() end},
  softplus = {args = function() return T() end},
  tan = {args = function() return T() end},
  add = {args = function() return T(), 1 end},
  add_ = {args = function() return T(), 1 end},
  argmax = {args = function() return T() end},
  argmin = {args = function() return T() end},
  byte = {args = function() return T() end},
  cat = {args = function() return {T(), T()} end},
  clamp = {args = function() return T(), 0, 1 end},
  clone = {args = function() return T() end},
  contiguous = {args = function() return T() end},
  copy_ = {args = function() return T(), T() end},
  div = {args = function() return T(), 2 end},
  double = {args = function() return T() end},
  eq = {args = function() return T(), T() end},
  exp = {args = function() return T() end},
  expand = {args = function() return core.zeros(1, 3), 2, 3 end},
  fill_ = {args = function() return T(), 1 end},
  flatten = {args = function() return T() end},
  float = {args = function() return T() end},
  gather = {args = function() return T(), 2, {{1}, {2}} end},
  ge = {args = function() return T(), 0 end},
  gelu = {args = function() return T() end},
  gt = {args = function() return T(), 0 end},
  index_select = {args = function() return T(), 1, {1} end},
  int = {args = function() return T() end},
  le = {args = function() return T(), 0 end},
  linear = {args = function() return T(), core.zeros(4, 3) end},
  log = {args = function() return core.ones(2) end},
  log_softmax = {args = function() return T() end},
  logsumexp = {args = function() return T() end},
  long = {args = function() return T() end},
  lt = {args = function() return T(), 0 end},
  matmul = {args = function() return T(), core.zeros(3, 2) end},
  max = {args = function() return T() end},
  maximum = {args = function() return T(), T() end},
  mean = {args = function() return T() end},
  min = {args = function() return T() end},
  minimum = {args = function() return T(), T() end},
  mul = {args = function() return T(), 2 end},
  narrow = {args = function() return T(), 1, 1, 1 end},
  ne = {args = function() return T(), T() end},
  neg = {args = function() return T() end},
  one_hot = {args = function() return {1, 2}, 3 end},
  permute = {args = function() return T(), 2, 1 end},
  pow = {args = function() return T(), 2 end},
  relu = {args = function() return T() end},
  reshape = {args = function() return T(), 3, 2 end},
  rsqrt = {args = function() return core.ones(2) end},
  scale = {args = function() return T(), 2 end},
  scaled_dot_product_attention = {args = function() return core.ones(1, 1, 2, 3), core.ones(1, 1, 2, 3), core.ones(1, 1, 2, 3) end},
  scatter_add = {args = function() return T(), 1, {{1, 1, 1}}, core.ones(1, 3) end},
  select = {args = function() return T(), 1, 1 end},
  sigmoid = {args = function() return T() end},
  sign = {args = function() return T() end},
  softmax = {args = function() return T() end},
  sqrt = {args = function() return T() end},
  square = {args = function() return T() end},
  squeeze = {args = function() return T() end},
  stack = {args = function() return {T(), T()} end},
  sub = {args = function() return T(), 1 end},
  sum = {args = function() return T() end},
  tanh = {args = function() return T() end},
  to = {args = function() return T(), "int64" end},
  transpose = {args = function() return T() end},
  unsqueeze = {args = function() return T(), 1 end},
  var = {args = function() return T() end},
  view = {args = function() return T(), 6 end},
  where = {args = function() return T():gt(0), T(), T() end},
  zero_ = {args = function() return T() end},
  -- convolution
  avg_pool2d = {args = function() return IMG(), 2 end},
  conv2d = {args = function() return IMG(), core.ones(1, 1, 3, 3) end},
  max_pool2d = {args = function() return IMG(), 2 end},
  -- autograd
  backward = {args = function() return core.ones(2, {requires_grad = true}):sum() end},
  detach = {args = function() return T() end},
  grad_fn = {args = function() return T() end},
  is_grad_enabled = {args = function() end},
  is_leaf = {args = function() return T() end},
  record_function = {args = function() return T(), {T()}, function(g) return g end, "identity" end},
  requires_grad = {args = function() return T() end},
  set_grad_enabled = {args = function() return true end},
  -- system
  clock = {args = function() end},
  machine = {args = function() end},
  isatty = {args = function() return 1 end},
  memory_limit = {args = function() end},
  memory_reset_peak = {args = function() end},
  memory_stats = {args = function() end},
  memory_trim = {args = function() end},
  rng_state = {args = function() end},
  seed = {args = function() end},
  threads = {args = function() end},
  -- optimizers, batch norm
  optim_new = {args = function() return "SGD" end},
  optim_table = {args = function() end},
  optim_update = {args = function() return core.optim_new("SGD"), {}, {{}}, 0.1, 1 end},
  batch_norm = {args = function() return core.ones(4, 3), nil, nil end},
  -- datasets, readers, cache
  _cache_load = {args = function() return cache_path, "fp" end},
  _cache_save = {args = function() return cache_path, DS(), "fp" end},
  _crc32 = {args = function() return "abc" end},
  _csv_rows = {args = function() return "a,b\n1,2\n" end},
  _fileio_append = {args = function() return dir .. "/append.txt", "x\n" end},
  _fileio_fail_from = {args = function() return 0 end},
  _fileio_fsync = {args = function() return dir end},
  _fileio_replace = {args = function() return dir .. "/replace.txt", "x" end},
  _fileio_write_count = {args = function() end},
  _onnx_write = {args = function()
    return dir .. "/m.onnx", {inputs = {{name = "x", dims = {-1, 2}, dynamic = "batch"}},
      outputs = {{name = "y", dims = {-1, 2}, dynamic = "batch"}}, nodes = {{op = "Relu", inputs = {"x"}, outputs = {"y"}}}}
  end},
  _tar_read = {args = function() return tar_path end},
  _ds_shards = {args = function() return {tar_path}, {{"label", "class", {"cls"}, 1}}, 3, false end},
  _ds_blocks = {args = function() return DS() end},
  _png_encode = {args = function() return core.zeros({1, 2, 2}, {dtype = "uint8"}) end},
  _tar_write = {args = function() return dir .. "/w.tar", {{"a.cls", "1"}} end},
  _ops = {args = function() end},
  _gp_fit = {args = function() return {{0.1}, {0.5}, {0.9}}, {1, 2, 3} end},
  _gp_objective = {args = function() return {{0.1}, {0.5}, {0.9}}, {1, 2, 3}, {0, 0, -2} end},
  _ds_checksum = {args = function() return DS() end},
  _ds_column = {args = function() return DS(), "x" end},
  _ds_fields = {args = function() return DS() end},
  _ds_get = {args = function() return DS(), 1 end},
  _ds_ids = {args = function() return DS() end},
  _ds_images = {args = function() return dir, {"a.png"}, core.tensor({1}, {dtype = "int32"}), 3, false end},
  _ds_len = {args = function() return DS() end},
  _ds_new = {args = function() return {"x"}, {T()} end},
  _ds_split = {args = function() return DS(), {2, 2} end},
  _ds_subset = {args = function() return DS(), core.tensor({1, 2}, {dtype = "int64"}) end},
  _read_csv = {args = function() return csv_path end},
  _read_idx = {args = function() return idx_path end},
  _read_npy = {args = function() return npy_path end},
  _read_npz = {args = function() return npz_path, {"x"} end},
  _npz_members = {args = function() return npz_path end},
  read_idx = {args = function() return idx_path end},
  _tensor_bytes = {args = function() return T() end},
  _tensor_from_bytes = {args = function() return string.pack("<ff", 1, 2), "float32", {2} end},
  -- pipeline, trace
  _pipe_new = {args = function() return DS(), {batch = 2} end},
  _pipe_next = {args = function() return core._pipe_new(DS(), {batch = 2}) end},
  _pipe_position = {args = function() return core._pipe_new(DS(), {batch = 2}) end},
  _pipe_stats = {args = function() return core._pipe_new(DS(), {batch = 2}) end},
  _pipe_close = {args = function() return core._pipe_new(DS(), {batch = 2}) end},
  _tf_apply = {args = function() return T(), {kind = "scale", scale = 2, field = "image"}, 0 end},
  _trace_active = {args = function() end},
  _trace_now = {args = function() end},
  _trace_span = {args = function() return "span", 0, 1, "train" end},
  _trace_start = {args = function() return dir .. "/trace.json" end, after = function() core._trace_stop() end},
  _trace_stop = {args = function() end},
  -- checkpoints
  _checkpoint_save = {args = function() return ckpt_path, {w = T()}, {k = "v"} end},
  _checkpoint_load = {args = function() return ckpt_path end},
  _checkpoint_read_meta = {args = function() return ckpt_path end},
  _checkpoint_verify = {args = function() return ckpt_path end},
  -- multi-process (a world of one here)
  _dist_allgather = {args = function() return "x" end},
  _dist_allreduce = {args = function() return T() end},
  _dist_allreduce_many = {args = function() return {T()} end},
  _dist_available = {args = function() end},
  _dist_barrier = {args = function() end},
  _dist_bcast_string = {args = function() return "x", 0 end},
  _dist_broadcast = {args = function() return T(), 0 end},
  _dist_checksum = {args = function() return {T()} end},
  _dist_probe = {args = function() return 0 end, run = false},
  _dist_rank = {args = function() end},
  _dist_recv = {args = function() return 0 end, run = false},
  _dist_send = {args = function() return 0, "x" end, run = false},
  _dist_solo = {args = function() return 1 end, after = function() core._dist_solo(-1) end},
  _dist_stats = {args = function() end},
  _dist_world = {args = function() end},
  -- signals, sleeps, processes (lua_proc.c)
  _getpid = {args = function() end},
  _proc_alive = {args = function() return core._getpid() end},
  _proc_poll = {args = function() return core._proc_spawn({"true"}), true end},
  _proc_signal = {args = function() return core._getpid(), "CONT" end},
  _proc_spawn = {args = function() return {"true"}, {stdout = dir .. "/spawn.log"} end,
                 after = function() end},
  _signal_catch = {args = function() end, after = function() core._signal_release() end},
  _signal_clear = {args = function() end},
  _signal_pending = {args = function() end},
  _signal_release = {args = function() end},
  _signal_winch = {args = function() end},
  _sleep = {args = function() return 0 end},
  _term_width = {args = function() return 1 end},
  _wait_event = {args = function() return 0 end},
}

-- where an options table goes: the arguments before it
local options_at = {
  arange = function() return 0, 4 end,
  backward = function() return core.ones(2, {requires_grad = true}):sum(), nil end,
  batch_norm = function() return core.ones(4, 3), nil, nil end,
  conv2d = function() return IMG(), core.ones(1, 1, 3, 3), nil end,
  empty = function() return 2, 3 end,
  full = function() return 1.5, 2, 3 end,
  max_pool2d = function() return IMG(), 2 end,
  ones = function() return 2, 3 end,
  optim_new = function() return "SGD" end,
  rand = function() return 2, 3 end,
  randn = function() return 2, 3 end,
  sum = function() return T(), 1 end,
  tensor = function() return {1, 2} end,
  var = function() return T(), 1 end,
  zeros = function() return 2, 3 end,
  _read_csv = function() return csv_path end,
  _proc_spawn = function() return {"true"} end,
}

local function functions()
  local names = {}
  for k, v in pairs(core) do
    if type(v) == "function" then names[#names + 1] = k end
  end
  table.sort(names)
  return names
end

-- "bad argument #k to 'name'" as a pattern; outside a method call Lua names the
-- function by where package.loaded holds it (dlua.core.NAME or dlua.NAME)
local function blame(k, name)
  return "bad argument #" .. k .. " to '[%w._]*" .. name:gsub("_", "%%_") .. "'"
end

-- Lua names a function called through pcall by a field of package.loaded that
-- holds it; a function re-exported by a library module (dl.fs.fsync is
-- core._fileio_fsync) may be named by that field instead
local function blamed(err, k, name)
  if tostring(err):find(blame(k, name)) then return true end
  for _, mod in pairs(package.loaded) do
    if type(mod) == "table" then
      for key, v in pairs(mod) do
        if v == core[name] and type(key) == "string" and tostring(err):find(blame(k, key)) then return true end
      end
    end
  end
  return false
end

describe("dlua.core strictness", function()
  after_each(function() core.set_grad_enabled(true) end)

  it("has a valid call for every function, so none can skip the checks below", function()
    for _, name in ipairs(functions()) do
      assert(valid[name], "no valid call for dlua.core." .. name .. " in strict_spec.lua")
    end
  end)

  it("accepts each valid call", function()
    for _, name in ipairs(functions()) do
      local v = valid[name]
      if v and v.run ~= false then
        local ok, err = pcall(core[name], v.args())
        assert(ok, name .. ": " .. tostring(err))
        if v.after then v.after() end
      end
    end
  end)

  it("rejects a junk extra argument to every function, naming the function and the argument", function()
    for _, name in ipairs(functions()) do
      local v = valid[name]
      if v then
        local args = table.pack(v.args())
        args[args.n + 1] = "junk"
        local ok, err = pcall(core[name], table.unpack(args, 1, args.n + 1))
        assert(not ok, name .. " accepted a junk extra argument")
        assert(blamed(err, args.n + 1, name), name .. ": " .. tostring(err))
      end
    end
  end)

  it("rejects a junk extra argument to every tensor method, counting arguments as the caller wrote them", function()
    local n = 0
    for _, name in ipairs(functions()) do
      local v = valid[name]
      local args = v and table.pack(v.args())
      if args and core.Tensor == getmetatable(args[1]) then
        local call = assert(load("local t = ...; return t:" .. name .. "(select(2, ...))"))
        args[args.n + 1] = "junk"
        local ok, err = pcall(call, table.unpack(args, 1, args.n + 1))
        assert(not ok, name .. " accepted a junk extra argument as a method")
        assert(tostring(err):find("bad argument #" .. args.n .. " to '" .. name:gsub("_", "%%_") .. "'", 1),
          name .. ": " .. tostring(err))
        n = n + 1
      end
    end
    assert.is_true(n > 80)
  end)

  it("rejects a string where an options table goes, naming the argument", function()
    for name, before in pairs(options_at) do
      local args = table.pack(before())
      args[args.n + 1] = "int64"
      local ok, err = pcall(core[name], table.unpack(args, 1, args.n + 1))
      assert(not ok, name .. " accepted a string for its options")
      assert(tostring(err):find(blame(args.n + 1, name) .. " %(options table expected, got string%)"),
        name .. ": " .. tostring(err))
    end
  end)

  it("honours the dtype option and refuses a bare dtype string", function()
    assert.are.equal("int64", core.zeros(2, 3, {dtype = "int64"}):dtype())
    assert.are.same({{0, 0, 0}, {0, 0, 0}}, core.zeros(2, 3, {dtype = "int64"}):totable())
    assert.are.equal("int64", core.tensor({1, 2}, {dtype = "int64"}):dtype())
    assert.are.equal(math.type(core.tensor({1, 2}, {dtype = "int64"}):totable()[2]), "integer")
    assert.are.equal("float64", core.arange(0, 3, {dtype = "float64"}):dtype())
    assert.are.equal("int32", core.full(7, 2, {dtype = "int32"}):dtype())
    assert.are.equal("float64", core.tensor(core.ones(2), {dtype = "float64"}):dtype())
    assert.error_matches(function() core.zeros(2, 3, "int64") end,
      "bad argument #3 to 'zeros' %(options table expected, got string%)")
    assert.error_matches(function() core.tensor({1, 2}, "int64") end,
      "bad argument #2 to 'tensor' %(options table expected, got string%)")
    assert.error_matches(function() core.zeros(2, {dtype = "int8"}) end,
      "bad argument #2 to 'zeros' %(option 'dtype' %(unknown dtype 'int8'; expected one of: float32, float64, int32, int64, uint8%)%)")
    assert.error_matches(function() core.zeros(2, {requires_grad = 1}) end,
      "option 'requires_grad' %(boolean expected, got number%)")
  end)

  it("rejects unknown option keys, naming the key and listing the valid ones", function()
    local t = core.ones(2, 3)
    assert.error_matches(function() t:var(2, {corection = 0}) end,
      "bad argument #2 to 'var' %(unknown option 'corection'; expected one of: correction, dim, keepdim, unbiased%)")
    assert.error_matches(function() t:sum{dim = 2, keepdm = true} end,
      "bad argument #1 to 'sum' %(unknown option 'keepdm'; expected one of: dim, keepdim%)")
    local loss = core.ones(2, {requires_grad = true}):sum()
    assert.error_matches(function() loss:backward{keep_grpah = true} end,
      "bad argument #1 to 'backward' %(unknown option 'keep_grpah'; expected one of: keep_graph%)")
    assert.error_matches(function() core.conv2d(IMG(), core.ones(1, 1, 3, 3), {strides = 2}) end,
      "unknown option 'strides'; expected one of: dilation, groups, padding, stride")
    assert.error_matches(function() core.optim_new("Adam", {momentum = 0.9}) end,
      "bad argument #2 to 'optim_new' %(unknown option 'momentum'; expected one of: beta1, beta2, eps, lr, weight_decay%)")
    assert.error_matches(function() core.optim_new("Adam", {lr = "0.1"}) end,
      "option 'lr' %(number expected, got string%)")
    assert.error_matches(function() core._read_csv(csv_path, {delim = ";"}) end,
      "unknown option 'delim'; expected one of: delimiter, header, missing")
    assert.error_matches(function() core.zeros(2, {[1] = "int64"}) end, "unknown option %[1%] in 'options'")
    -- the values of the options given are used
    assert.are.same({2, 1}, t:sum{dim = 2, keepdim = true}:shape())
    assert.are.equal(0, t:var(2, {correction = 0}):sum():item())
  end)

  it("rejects unknown keys in nested option tables, naming the path", function()
    local ds = DS()
    assert.error_matches(function() core._pipe_new(ds, {batch = 2, index = {{kind = "shuffle", sed = 1}}}) end,
      "unknown option 'index%[1%]%.sed'; expected one of: blocks, kind, rank, seed, window, world")
    assert.error_matches(function()
      core._pipe_new(ds, {transforms = {{kind = "scale", scale = 2}, {kind = "random_crop", sise = {2, 2}}}})
    end, "unknown option 'transforms%[2%]%.sise'; expected one of: field, fill, kind, name, padding, size, stage")
    assert.error_matches(function() core._pipe_new(ds, {batch = 2, workres = 2}) end, "unknown option 'workres'")
    assert.error_matches(function() core._pipe_new(ds, {batch = "2"}) end, "option 'batch' %(integer expected, got string%)")
  end)

  it("rejects a non-boolean flag and a non-integer size", function()
    assert.error_matches(function() core.set_grad_enabled(1) end,
      "bad argument #1 to 'set_grad_enabled' %(boolean expected, got number%)")
    assert.error_matches(function() T():requires_grad("yes") end,
      "bad argument #1 to 'requires_grad' %(boolean expected, got string%)")
    assert.error_matches(function() T():view(2, 3.5) end, "bad argument #2 to 'view' %(size 3.5 is not an integer%)")
    assert.error_matches(function() T():view(6, "x") end, "bad argument #2 to 'view' %(integer expected, got string%)")
    assert.error_matches(function() core.zeros(2, 3, 4, {dtype = "int64"}, 5) end,
      "bad argument #5 to 'zeros' %(no more than 4 arguments expected, got 5%)")
    assert.error_matches(function() T():item(1) end, "bad argument #1 to 'item' %(no more than 0 arguments expected, got 1%)")
  end)
end)

describe("dlua.core reads each list once and keeps what it read alive", function()
  -- a list of n entries whose __index runs a full collection and answers
  -- differently each time it is asked
  local function proxy(n, answers)
    local reads = 0
    local t = setmetatable({}, {
      __len = function() return n end,
      __index = function(_, i)
        reads = reads + 1
        collectgarbage()
        return answers(i, reads)
      end,
    })
    return t, function() return reads end
  end

  it("optim_update reads parameters and states once (a proxy changing its answer overflowed the heap)", function()
    local small, big = core.zeros(2), core.zeros(1000)
    small.grad = core.ones(2)
    big.grad = core.ones(1000)
    local params, preads = proxy(1, function(_, r) return r == 1 and small or big end)
    local states, sreads = proxy(1, function(_, r) return r == 1 and core.zeros(2) or core.zeros(1) end)
    local rule = core.optim_new("SGD", {momentum = 0.9})
    core.optim_update(rule, params, {states}, 0.5, 1)
    assert.are.equal(1, preads())
    assert.are.equal(1, sreads())
    -- v = 0.9 * 0 + g = 1; p -= 0.5 * v
    assert.are.same({-0.5, -0.5}, small:totable())
    assert.are.equal(0, big:abs():sum():item())
  end)

  it("optim_update refuses a mis-shaped state before touching any parameter", function()
    local a, b = core.zeros(2), core.zeros(3)
    a.grad, b.grad = core.ones(2), core.ones(3)
    local rule = core.optim_new("SGD", {momentum = 0.9})
    assert.error_matches(function() core.optim_update(rule, {a, b}, {{core.zeros(2), core.zeros(2)}}, 0.5, 1) end,
      "SGD: state 1 of parameter 2 is missing or mis%-shaped")
    assert.are.same({0, 0}, a:totable())
  end)

  it("_ds_new keeps names and tensors alive while it builds the dataset (a GC in __index freed them)", function()
    local names, nreads = proxy(2, function(i) return "f" .. i end)
    local fields, freads = proxy(2, function(i) return core.full(i, 3, 2) end)
    local ds = core._ds_new(names, fields)
    collectgarbage()
    assert.are.equal(2, nreads())
    assert.are.equal(2, freads())
    local fs = core._ds_fields(ds)
    assert.are.equal("f1", fs[1].name)
    assert.are.equal("f2", fs[2].name)
    local ex = core._ds_get(ds, 3)
    assert.are.same({1, 1}, ex.f1:totable())
    assert.are.same({2, 2}, ex.f2:totable())
  end)

  it("cat, stack and record_function keep proxied tensors alive", function()
    local list = proxy(3, function(i) return core.full(i, 2) end)
    assert.are.same({1, 1, 2, 2, 3, 3}, core.cat(list):totable())
    local list2 = proxy(2, function(i) return core.full(i, 1) end)
    assert.are.same({{1}, {2}}, core.stack(list2):totable())
  end)

  it("builds a tensor from a nested table reading every entry once", function()
    local reads = 0
    local row = setmetatable({}, {__len = function() return 2 end,
      __index = function(_, i) reads = reads + 1; return reads <= 2 and i or {1, 2, 3} end})
    local t = core.tensor({row, {3, 4}})
    assert.are.same({{1, 2}, {3, 4}}, t:totable())
    assert.are.equal(2, reads)
    assert.error_matches(function() core.tensor({{1, 2}, {3}}) end,
      "bad argument #1 to 'tensor' %(ragged nested table: element %[2%] has 1 entries, expected 2%)")
  end)
end)
