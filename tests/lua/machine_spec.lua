-- dl.machine() (engine/core/cpu.c, engine/lua/lua_machine.c): the CPU and the kernel paths
-- a run used, checked against /proc/cpuinfo (an independent reader) and against the
-- switches that force each path, in real subprocesses; a switch that only changes how
-- threads wait (DLUA_POOL_SPIN_US) leaves a training step's bits unchanged.
local dl = require "dlua"
local json = require "dlua.util.json"
local H = dofile("tests/lua/helpers.lua")

local function cpuinfo(field)
  local f = io.open("/proc/cpuinfo")
  if not f then return nil end
  for l in f:lines() do
    local k, v = l:match("^([^:]-)%s*:%s*(.*)$")
    if k == field then f:close(); return v end
  end
  f:close()
end

-- runs a Lua snippet in a fresh dlua with env assignments; returns its stdout
local function run_with(env, code)
  local dir = H.tmpdir("machine")
  H.spit(dir .. "/s.lua", code)
  local p = io.popen(string.format("cd %s && env %s %s s.lua 2>&1; echo \"rc=$?\"", dir, env, H.EXE))
  local out = p:read("a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  assert.are.equal(0, rc, out)
  return (out:gsub("rc=%d+%s*$", ""))
end

local PRINT = 'print(require("dlua.util.json").encode(require("dlua").machine()))'

describe("dl.machine", function()
  it("names the CPU, its cores and its SIMD flags as /proc/cpuinfo does", function()
    local m = dl.machine()
    local name = cpuinfo("model name")
    if name then assert.are.equal((name:gsub("%s+$", "")), m.cpu) end
    local vendor = cpuinfo("vendor_id")
    if vendor then assert.are.equal(vendor, m.vendor) end
    local fam = cpuinfo("cpu family")
    if fam then assert.are.equal(tonumber(fam), m.family) end
    local model = cpuinfo("model")
    if model then assert.are.equal(tonumber(model), m.model) end
    local p = io.popen("nproc"); local n = tonumber(p:read("a")); p:close()
    assert.are.equal(n, m.cores)
    local flags = {}
    for f in (cpuinfo("flags") or ""):gmatch("%S+") do flags[f] = true end
    flags["sse4.2"] = flags.sse4_2
    local have = {}
    for _, f in ipairs(m.simd) do have[f] = true end
    for _, f in ipairs({"sse4.2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq",
                        "avx512_vnni", "avx512_bf16"}) do
      assert.are.equal(flags[f] == true, have[f] == true, f)
    end
    -- the conv kernels follow the CPU: AVX-512 where it has it, else AVX2 with FMA
    assert.are.equal(have.avx512f and "avx512" or have.avx2 and have.fma and "avx2" or "portable", m.kernels.conv)
    assert.are.equal(dl.threads(), m.kernels.threads)
    assert.is_string(m.kernels.blas)
  end)

  it("refuses arguments", function()
    local ok, err = pcall(dl.machine, 1)
    assert.is_false(ok)
    assert.matches("bad argument #1 to '[%w.]*machine' %(no more than 0 arguments expected, got 1%)", err)
  end)

  it("reports each switch and the path it forces", function()
    local m = json.decode(run_with("DLUA_CONV_WINOGRAD=0 DLUA_POOL_SPIN_US=0", PRINT))
    assert.are.equal("0", m.switches.DLUA_CONV_WINOGRAD)
    assert.is_false(m.kernels.winograd)
    assert.are.equal(0, m.kernels.pool_spin_us)
    m = json.decode(run_with("DLUA_CONV_SIMD=portable", PRINT))
    assert.are.equal("portable", m.kernels.conv)
    assert.is_false(m.kernels.winograd)
    m = json.decode(run_with("DLUA_FLUSH_SUBNORMALS=0", PRINT))
    assert.is_false(m.kernels.flush_subnormals)
    m = json.decode(run_with("DLUA_POOL_SPIN_US=250", PRINT))
    assert.are.equal(250, m.kernels.pool_spin_us)
  end)

  -- three training steps of a small CNN (a first layer for the direct kernel, a 16-channel
  -- 3x3 layer for Winograd, 2x2 pooling, a Linear layer: every product through gemm.c), the
  -- parameters' bits printed; THREADS is replaced
  local STEPS = [[
local dl = require "dlua"
dl.threads(THREADS); dl.seed(3)
local nn = dl.nn
local m = nn.Sequential{nn.Conv2d(1, 16, 3, {padding = 1}), nn.ReLU(), nn.Conv2d(16, 16, 3, {padding = 1}),
  nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 49, 10)}
local opt = dl.optim.SGD{params = m:parameters(), lr = 0.1, momentum = 0.9}
local labels = {}
for i = 1, 64 do labels[i] = i % 10 + 1 end
local x, y = dl.randn(64, 1, 14, 14), dl.tensor(labels, {dtype = "int64"})
for _ = 1, 3 do
  opt:zero_grad(); local l = nn.CrossEntropy()(m(x), y); l:backward(); opt:step()
end
local out = {}
for _, p in ipairs(m:parameters()) do
  for i = 1, p:numel() do out[#out + 1] = string.format("%a", p:get_flat(i)) end
end
print(table.concat(out, ","))]]

  -- asserts STEPS gives ref's bits with the switch var set to each path, at 1 and 2 threads;
  -- returns each path's dl.machine()
  local function assert_steps_bits(var, paths, ref)
    local machines = {}
    for _, p in ipairs(paths) do
      for _, t in ipairs({"1", "2"}) do
        assert.are.equal(ref, run_with(var .. "=" .. p, (STEPS:gsub("THREADS", t))), p .. " at " .. t .. " threads")
      end
      machines[p] = json.decode(run_with(var .. "=" .. p, PRINT))
    end
    return machines
  end

  it("gives the same bits whether the pool's threads poll or sleep", function()
    local code = STEPS:gsub("THREADS", "2")
    local a = run_with("DLUA_POOL_SPIN_US=0", code)
    local b = run_with("DLUA_POOL_SPIN_US=100000", code)
    assert.is_true(#a > 1000)
    assert.are.equal(a, b)
  end)

  it("gives the same bits on every matrix-product path the CPU runs, at 1 and 2 threads", function()
    local vector = H.vector_paths()
    local paths = {"portable", table.unpack(vector)}
    local ref = run_with("DLUA_GEMM=portable", (STEPS:gsub("THREADS", "1")))
    assert.is_true(#ref > 1000)
    for p, m in pairs(assert_steps_bits("DLUA_GEMM", paths, ref)) do
      assert.are.equal(p, m.kernels.gemm)
      assert.are.equal(p, m.switches.DLUA_GEMM)
      -- a forced path measures nothing
      assert.are.same({}, m.kernels.gemm_gflops)
    end
    -- OpenBLAS sums in its own order: the same run, other bits (the spec can tell paths apart)
    assert.are_not.equal(ref, run_with("DLUA_GEMM=blas", (STEPS:gsub("THREADS", "1"))))
    -- auto times the own kernels the CPU runs and takes the fastest of them (never OpenBLAS,
    -- whose bits differ, unless the CPU runs none)
    local k = json.decode(run_with("", PRINT)).kernels
    local best, best_rate = "blas", 0
    for _, p in ipairs(vector) do
      assert.is_true(k.gemm_gflops[p] > 1, p)
      if k.gemm_gflops[p] > best_rate then best, best_rate = p, k.gemm_gflops[p] end
    end
    assert.are.equal(best, k.gemm)
  end)

  it("gives the same bits on every vector convolution path the CPU runs, at 1 and 2 threads", function()
    local paths = H.vector_paths()
    if #paths == 0 then return end
    local ref = run_with("DLUA_CONV_SIMD=" .. paths[1], (STEPS:gsub("THREADS", "1")))
    assert.is_true(#ref > 1000)
    for p, m in pairs(assert_steps_bits("DLUA_CONV_SIMD", paths, ref)) do
      assert.are.equal(p, m.kernels.conv)
      assert.is_true(m.kernels.winograd)
      -- a forced path runs Winograd as forced and measures nothing
      assert.are.equal(p, m.kernels.winograd_path)
      assert.are.same({}, m.kernels.winograd_seconds)
    end
    if #paths == 2 then
      -- a run as on an AVX2 CPU (products and convolutions on AVX2) gives the default run's bits
      assert.are.equal(run_with("", (STEPS:gsub("THREADS", "2"))),
        run_with("DLUA_GEMM=avx2 DLUA_CONV_SIMD=avx2", (STEPS:gsub("THREADS", "2"))))
      -- auto times Winograd on both sets and takes the faster
      local k = json.decode(run_with("", PRINT)).kernels
      assert.is_true(k.winograd_seconds.avx2 > 0 and k.winograd_seconds.avx512 > 0)
      assert.are.equal(k.winograd_seconds.avx2 < k.winograd_seconds.avx512 and "avx2" or "avx512", k.winograd_path)
    end
    assert.are.equal("off", json.decode(run_with("DLUA_CONV_WINOGRAD=0", PRINT)).kernels.winograd_path)
    -- the portable loops take im2col for every layer: other bits (the spec can tell paths apart)
    assert.are_not.equal(ref, run_with("DLUA_CONV_SIMD=portable", (STEPS:gsub("THREADS", "1"))))
  end)

  -- every switch of lua_machine.c's table, each with values it must refuse and the message
  local REFUSED = {
    {"DLUA_CONV_SIMD", {"avx1024", "0"}, ": no such convolution path %(valid: auto, avx512, avx2, portable%)"},
    {"DLUA_GEMM", {"avx1024", "AVX2"}, ": no such matrix%-product path %(valid: auto, [%w, ]*portable, blas%)"},
    {"DLUA_CONV_WINOGRAD", {"off", "false", "2", " 0"}, ": not a switch value %(valid: 0, 1%)"},
    {"DLUA_FLUSH_SUBNORMALS", {"no", "00"}, ": not a switch value %(valid: 0, 1%)"},
    {"DLUA_DIST", {"false"}, ": not a switch value %(valid: 0, 1%)"},
    {"DLUA_DEBUG", {"yes", "true"}, ": not a switch value %(valid: 0, 1%)"},
    {"DLUA_POOL_SPIN_US", {"abc", "-5", "1000001", "50us", "1.5", "99999999999999999999999"},
     ": not a whole number from 0 to 1000000"},
  }

  it("refuses a malformed value of every switch, naming it and the valid values, before computing", function()
    local dir = H.tmpdir("machine-refuse")
    H.spit(dir .. "/s.lua", 'require "dlua"; print("ran")\n' .. PRINT)
    for _, r in ipairs(REFUSED) do
      for _, v in ipairs(r[2]) do
        local p = io.popen(string.format("cd %s && env %s=%s %s s.lua 2>&1; echo \"rc=$?\"", dir, r[1], H.shquote(v),
                                         H.EXE))
        local out = p:read("a")
        p:close()
        assert.are_not.equal("0", out:match("rc=(%d+)%s*$"), r[1] .. "=" .. v)
        assert.matches(r[1] .. "=" .. v:gsub("%p", "%%%0") .. r[3], out)
        assert.is_nil(out:match("ran"), out)
      end
    end
  end)

  it("takes the values the switches document, and an empty one as unset", function()
    local m = json.decode(run_with("DLUA_CONV_WINOGRAD=1 DLUA_FLUSH_SUBNORMALS=1 DLUA_DIST=1 DLUA_DEBUG=0 " ..
                                   "DLUA_POOL_SPIN_US=1000000 DLUA_GEMM=auto DLUA_CONV_SIMD=auto", PRINT))
    assert.is_true(m.kernels.winograd)
    assert.is_true(m.kernels.flush_subnormals)
    assert.are.equal(1000000, m.kernels.pool_spin_us)
    assert.are.equal("1", m.switches.DLUA_DIST)
    assert.are.equal("0", m.switches.DLUA_DEBUG)
    m = json.decode(run_with("DLUA_CONV_WINOGRAD= DLUA_FLUSH_SUBNORMALS= DLUA_POOL_SPIN_US= DLUA_GEMM= " ..
                             "DLUA_CONV_SIMD= DLUA_DIST= DLUA_DEBUG=", PRINT))
    assert.is_true(m.kernels.winograd)
    assert.is_true(m.kernels.flush_subnormals)
    assert.are.equal(1000, m.kernels.pool_spin_us)
  end)

  it("is recorded in the run's result.json", function()
    local dir = H.tmpdir("machine-run")
    H.spit(dir .. "/exp.lua", H.fixture("toy_experiment.lua"))
    local out, rc = H.run(dir, "exp.lua --steps 2 --out run --quiet")
    assert.are.equal(0, rc, out)
    local r = json.decode(H.slurp(dir .. "/run/result.json"))
    assert.are.equal(dl.machine().cpu, r.machine.cpu)
    assert.is_table(r.machine.kernels)
  end)
end)
