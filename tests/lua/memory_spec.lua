-- The caching allocator as seen from Lua: stats, steady state, limit, GC pressure.
local dl = require "dlua"

-- runs `code` in a fresh dlua process (its own allocator cache and Lua heap); returns its output
-- with "rc=<exit status>" appended
local function run_fresh(code)
  local exe = os.getenv("DLUA_EXE") or "build/dlua"
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(code)
  f:close()
  local p = io.popen(exe .. " " .. script .. " 2>&1; echo rc=$?")
  local out = p:read("a")
  p:close()
  os.remove(script)
  return out
end

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
    local out = run_fresh([[
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
    local a0, a1, peak, in_use = out:match("^(%d+)%s+(%d+)%s+(%d+)%s+(%d+)")
    assert.truthy(a0, out)
    -- no new system allocations in the steady state, in-use bounded
    assert.are.equal(tonumber(a0), tonumber(a1))
    assert(tonumber(in_use) <= tonumber(peak), string.format("in use %s > warm peak %s", in_use, peak))
  end)

  -- blocks of 1 MiB and more are split: memory a one-off temporary left in the cache serves
  -- later requests of smaller classes instead of new memory beside it
  it("cuts smaller blocks from a larger cached one before asking the system", function()
    local out = run_fresh([[
local dl = require "dlua"
local big = dl.empty(1 << 24)                    -- 64 MiB, then freed into the cache
big = nil
collectgarbage(); collectgarbage()
local s0 = dl.memory.stats()
local t = {}
for i = 1, 4 do t[i] = dl.empty(1 << 22) end     -- four of 16 MiB
local s1 = dl.memory.stats()
print(s0.in_use + s0.cached, s1.in_use + s1.cached, s1.splits - s0.splits, t[4]:fill_(1):sum():item())
]])
    local h0, h1, splits, sum = out:match("^(%d+)%s+(%d+)%s+(%d+)%s+(%S+)")
    assert.truthy(h0, out)
    -- the 64 MiB block is split into 16 + 16 + 32, the 32 into 16 + 16: two splits, and the bytes
    -- the allocator holds grow by the four tensors' headers only (a fresh block each: +64 MiB)
    assert.are.equal(2, tonumber(splits), out)
    assert(tonumber(h1) - tonumber(h0) < 2 ^ 20, out)
    assert.are.equal(2 ^ 22, tonumber(sum), out)
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
  -- backward drops each node's inputs once it has run, and collects the forward's dead
  -- boxes first, so an activation is freed after its last use rather than at the end
  it("frees each activation during backward after its last use", function()
    local out = run_fresh([[
local dl = require "dlua"
local n = 1 << 21                                -- 8 MiB of float32
local x = dl.ones(4 * n):requires_grad(true)     -- 32 MiB
local function forward()                         -- 32 MiB (x * 2), then nine of 8 MiB
  local h = (x * 2):view(4, n):sum(1)
  for _ = 1, 8 do h = h * 1.5 end
  return h:sum()
end
local loss = forward()
local start = dl.memory.stats().in_use
dl.memory.reset_peak()
loss:backward()
print(start, dl.memory.stats().peak, x.grad:sum():item())
]])
    local start, peak, gsum = out:match("^(%d+)%s+(%d+)%s+(%S+)")
    assert.truthy(start, out)
    -- the gradient of x is 2 * 1.5^8 everywhere
    assert.are.equal(4 * 2 ^ 21 * 2 * 1.5 ^ 8, tonumber(gsum), out)
    -- walking down the chain, each 8 MiB gradient replaces an 8 MiB activation; at the bottom the
    -- 32 MiB gradients of x * 2 and of x come after the nine activations above are gone. The
    -- walk needs at most one 8 MiB gradient (plus headers) beyond what the forward held; keeping
    -- every activation to the end needed 64 MiB more
    assert(tonumber(peak) - tonumber(start) <= 8 * 2 ^ 20 + 2 ^ 20, out)
  end)

  -- add and sub need only their inputs' shapes, relu its output: their nodes keep edges
  -- (grad_fn and shape, no data), so the inputs' memory goes once Lua drops them
  it("keeps no input of add, sub or relu alive on the tape", function()
    dl.seed(3)
    local x = dl.randn(1 << 20):requires_grad(true)           -- 4 MiB
    collectgarbage(); collectgarbage()
    local base = dl.memory.stats().in_use
    local loss = (((x * 2):relu() + x * 3) - x * 0.5):sum()
    collectgarbage(); collectgarbage()
    local held = dl.memory.stats().in_use - base
    -- held: relu's output (its mask) and sub's result (sum's input), 4 MiB each; kept inputs
    -- would add x * 2, x * 3, the add's result and x * 0.5
    assert(held <= 8 * 2 ^ 20 + 2 ^ 20, string.format("%d bytes held by the tape", held))
    loss:backward()
    local want = dl.where(x:gt(0), dl.full(4.5, 1 << 20), dl.full(2.5, 1 << 20))
    assert.are.equal(0, (x.grad - want):abs():max():item())
  end)

  it("frees a chain of 150,000 recorded ops without recursion", function()
    local out = run_fresh([[
local dl = require "dlua"
local x = dl.ones(1):requires_grad(true)
local y = x
for _ = 1, 150000 do y = y * 1.0 end
local before = dl.memory.stats().in_use
y = nil
collectgarbage(); collectgarbage()
print("freed", before, dl.memory.stats().in_use)
]])
    assert.truthy(out:match("rc=0"), out)
    local before, after = out:match("freed%s+(%d+)%s+(%d+)")
    assert.truthy(before, out)
    assert(tonumber(after) < tonumber(before) / 100, out)
  end)
end)
