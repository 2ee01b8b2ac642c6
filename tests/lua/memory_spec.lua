-- The caching allocator as seen from Lua: stats, steady state, limit, GC pressure.
local dl = require "dlua"

describe("dlua.util.memory", function()
  it("reports bytes in use and peak", function()
    collectgarbage()
    local before = dl.memory.stats()
    local t = dl.zeros(1024, 256)           -- 1 MiB of float32
    local s = dl.memory.stats()
    assert(s.in_use >= before.in_use + 1024 * 256 * 4)
    assert(s.peak >= s.in_use)
    t = nil
    collectgarbage()
    assert(dl.memory.stats().in_use < s.in_use)
  end)

  -- in a fresh process: the suite's own Lua heap (every earlier spec's objects) slows the
  -- incremental GC's cycles, which changes how much garbage a steady state holds
  it("does not grow over 1000 forward+backward iterations", function()
    local exe = os.getenv("DLUA_EXE") or "build/dlua"
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write([[
local dl = require "dlua"
dl.seed(1)
local w = dl.randn(256, 128):requires_grad(true)   -- ~0.6 MiB of tensors a step: a GC
local x = dl.randn(128, 256)                       -- cycle every few dozen steps
local function step()
  local loss = (x:matmul(w):tanh() * 0.5):log_softmax(2):mean()
  w.grad = nil
  loss:backward()
end
for _ = 1, 1000 do step() end          -- warm the cache through many GC cycles
local s0 = dl.memory.stats()
for _ = 1, 1000 do step() end
local s1 = dl.memory.stats()
print(s0.system_allocs, s1.system_allocs, s0.peak, s1.in_use)
]])
    f:close()
    local p = io.popen(exe .. " " .. script .. " 2>&1")
    local out = p:read("a")
    p:close()
    os.remove(script)
    local a0, a1, peak, in_use = out:match("^(%d+)%s+(%d+)%s+(%d+)%s+(%d+)")
    assert.truthy(a0, out)
    -- no new system allocations in the steady state, in-use bounded
    assert.are.equal(tonumber(a0), tonumber(a1))
    assert(tonumber(in_use) <= tonumber(peak), string.format("in use %s > warm peak %s", in_use, peak))
  end)

  it("needs no collectgarbage() in a loop that allocates large tensors", function()
    collectgarbage()
    local base = dl.memory.stats().in_use
    for _ = 1, 200 do
      local _ = dl.zeros(1024, 1024) + 1       -- 8 MiB of temporaries each time
    end
    -- without GC pressure 200 iterations would keep ~1.6 GiB alive
    assert(dl.memory.stats().in_use - base < 512 * 2 ^ 20)
  end)

  it("raises a catchable out-of-memory error past the limit", function()
    collectgarbage()
    local in_use = dl.memory.stats().in_use
    local prev = dl.memory.limit(in_use + 4 * 2 ^ 20)
    local ok, err = pcall(dl.zeros, 4096, 4096)
    dl.memory.limit(prev)
    assert.is_false(ok)
    assert.is_true(dl.memory.is_oom(err))
    assert.truthy(err:find("requested 67108864 bytes", 1, true))
    assert.truthy(err:find("limit", 1, true))
    -- the engine is usable afterwards
    assert.are.equal(16, dl.ones(4, 4):sum():item())
  end)

  it("rejects a bad limit", function()
    local ok, err = pcall(function() dl.memory.limit(-5) end)
    assert.is_false(ok)
    assert.truthy(err:find("memory_spec.lua:%d+: memory.limit: bytes must be a positive integer or nil, got %-5"))
  end)
end)

describe("dlua.threads", function()
  it("gives the same results at 1 and 2 threads and restores", function()
    dl.seed(5)
    local a = dl.randn(300, 300)
    dl.threads(1)
    local r1 = (a:exp() + a):sum(2):totable()
    dl.threads(2)
    local r2 = (a:exp() + a):sum(2):totable()
    assert.are.equal(2, dl.threads())
    dl.threads(1)
    assert.are.same(r1, r2)
    assert.error_matches(function() dl.threads(0) end, "between 1 and 256")
  end)
end)

describe("dlua graph release", function()
  -- a recorded chain dropped without a backward (say, `total = total + loss` with grad on):
  -- freeing it used to recurse once per node and overflowed the C stack at ~100k nodes
  it("frees a chain of 150,000 recorded ops without recursion", function()
    local exe = os.getenv("DLUA_EXE") or "build/dlua"
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write([[
local dl = require "dlua"
local x = dl.ones(1):requires_grad(true)
local y = x
for _ = 1, 150000 do y = y * 1.0 end
local before = dl.memory.stats().in_use
y = nil
collectgarbage(); collectgarbage()
print("freed", before, dl.memory.stats().in_use)
]])
    f:close()
    local p = io.popen(exe .. " " .. script .. " 2>&1; echo rc=$?")
    local out = p:read("a")
    p:close()
    os.remove(script)
    assert.truthy(out:match("rc=0"), out)
    local before, after = out:match("freed%s+(%d+)%s+(%d+)")
    assert.truthy(before, out)
    assert(tonumber(after) < tonumber(before) / 100, out)
  end)
end)
