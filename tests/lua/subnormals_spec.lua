--- Subnormal floats (engine/core/fpenv.c): every thread that computes flushes subnormal results to
--- zero and reads subnormal inputs as zero, on x86; DLUA_FLUSH_SUBNORMALS=0 (in a subprocess)
--- keeps IEEE gradual underflow. Results are read as raw bits, since reading a subnormal through
--- a thread that treats it as zero would hide it.
local dl = require "dlua"
local core = require "dlua.core"
local H = dofile("tests/lua/helpers.lua")

local x86 = (io.popen("uname -m"):read("l") or ""):match("^x86_64$") ~= nil
local N = 1 << 20                      -- past ops_elem's PAR_MIN: split over the pool

-- prints, for 2 threads and 40 repeats: how many results had non-zero bits in 2x of the
-- smallest-but-one subnormal (bits 0x100, exact doubling gives 0x200), in 1e-30 * 1e-10 (a
-- subnormal product of normal floats), and the bits of the first doubled element
local script = [[
  local dl = require "dlua"
  local core = require "dlua.core"
  dl.threads(2)
  local n = tonumber(arg[1])
  local sub = core._tensor_from_bytes(string.rep(string.pack("<I4", 0x100), n), "float32", {n})
  local a, b = dl.full(1e-30, n), dl.full(1e-10, n)
  local nonzero_double, nonzero_product, first = 0, 0, nil
  for _ = 1, 40 do
    local d = core._tensor_bytes(sub * 2)
    local p = core._tensor_bytes(a * b)
    first = string.unpack("<I4", d)
    if d:find("[^\0]") then nonzero_double = nonzero_double + 1 end
    if p:find("[^\0]") then nonzero_product = nonzero_product + 1 end
  end
  print(string.format("double=%d product=%d first=%d lua=%s", nonzero_double, nonzero_product, first,
    tostring(1e-310 * 1 > 0)))
]]

local function run(env)
  local dir = H.tmpdir("subnormals")
  H.spit(dir .. "/run.lua", script)
  local p = io.popen(string.format("cd %s && %s%s run.lua %d 2>&1; echo rc=$?", dir, env, H.EXE, N))
  local out = p:read("a")
  p:close()
  assert(out:match("rc=0"), out)
  return out
end

describe("dlua subnormal floats", function()
  it("are flushed to zero by the Lua thread and the pool's workers, in every repeat", function()
    local out = run("")
    if x86 then
      assert.truthy(out:find("double=0 product=0 first=0 lua=false", 1, true), out)
    else
      assert.truthy(out:find("double=40 product=40 first=512 lua=true", 1, true), out)
    end
  end)

  it("keep IEEE gradual underflow with DLUA_FLUSH_SUBNORMALS=0", function()
    local out = run("DLUA_FLUSH_SUBNORMALS=0 ")
    assert.truthy(out:find("double=40 product=40 first=512 lua=true", 1, true), out)
  end)

  it("are flushed in backward passes too, in this (the Lua) thread", function()
    -- y = 1e-20 * sum(w * x) with x = 1e-20: the forward's y (4e-40) and the backward's dy/dw
    -- (1e-40 each) are subnormal
    local w = dl.ones(4):requires_grad(true)
    local y = (w * dl.full(1e-20, 4)):sum() * 1e-20
    y:backward()
    local g, v = core._tensor_bytes(w.grad), core._tensor_bytes(y:detach())
    if x86 then
      assert.are.equal(string.rep("\0", 16), g)
      assert.are.equal(string.rep("\0", 4), v)
    else
      assert.is_truthy(g:find("[^\0]") and v:find("[^\0]"))
    end
  end)
end)
