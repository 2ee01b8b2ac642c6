-- Record shards stream in bounded memory (issue 32): a shard set several times larger than
-- a resident-memory budget goes through one epoch of training, and the process's peak
-- resident memory (VmHWM) is compared with the budget.
--
--   dlua tests/bench/shards_memory.lua [DIR] [GIB] [BUDGET_MIB]
--
-- Writes (once) GIB GiB (default 1) of shards of 224x224 RGB noise images as PNG (about 150
-- KB each: noise does not compress) into DIR (default $TMPDIR/dlua-bench-shards), 500 to a
-- shard, generating one shard's images at a time; then, in a fresh process, trains a small
-- model (global average pool, linear) for one epoch over them with shuffle{shards = true},
-- 2 workers and batch 32, and prints the data size, the peak resident memory and the budget.
local dl = require "dlua"
local data, T, nn = dl.data, dl.data.transforms, dl.nn

local dir = arg[1] or ((os.getenv("TMPDIR") or "/tmp") .. "/dlua-bench-shards")
local gib = tonumber(arg[2] or "1")
local budget = tonumber(arg[3] or "256")

local function vm(key)
  for line in io.lines("/proc/self/status") do
    local v = line:match("^" .. key .. ":%s+(%d+) kB")
    if v then return tonumber(v) / 1024 end
  end
end

local function bytes_of(d)
  local n = 0
  for f in require("lfs").dir(d) do
    if f:match("%.tar$") then n = n + require("lfs").attributes(d .. "/" .. f, "size") end
  end
  return n
end

if os.getenv("DLUA_SHARDS_MEMORY_PHASE") ~= "train" then
  if not dl.fs.is_dir(dir) or bytes_of(dir) < gib * 2 ^ 30 * 0.95 then
    dl.fs.rm_rf(dir)
    local per, k, written = 500, 0, 0
    dl.seed(7)
    while written < gib * 2 ^ 30 do
      local images = (dl.rand(per, 3, 224, 224) * 256):byte()
      local labels = (dl.rand(per) * 10):int() + 1
      data.pack{dataset = data.tensors{image = images, label = labels}, dir = dir, per_shard = per,
                prefix = string.format("part%04d", k)}
      k = k + 1
      written = bytes_of(dir)
      io.stderr:write(string.format("\rwrote %.2f GiB", written / 2 ^ 30))
    end
    io.stderr:write("\n")
  end
  -- the training in a process of its own, so the generator's memory does not count
  local exe = arg[-1]
  local rc = os.execute(string.format("DLUA_SHARDS_MEMORY_PHASE=train %s %s %s %s %s", exe, arg[0], dir, gib, budget))
  os.exit(rc and 0 or 1)
end

local ds = data.shards{dir = dir, fields = {image = "png", label = "cls"}, zero_based = {"label"}}
local model = nn.Sequential{nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 10)}
local pipe = ds:shuffle{seed = 1, shards = true, window = 256}:map(T.scale(1 / 255)):batch(32):workers(2)
local t0 = dl.clock()
local r = dl.train{model = model, loss = nn.CrossEntropy(), optimizer = dl.optim.SGD{params = model:parameters(), lr = 0.1},
  data = pipe, steps = #pipe, quiet = true, tracking = false,
  dir = (os.getenv("TMPDIR") or "/tmp") .. "/dlua-bench-shards-run", checkpoint = {every = #pipe}}
local size = bytes_of(dir)
print(string.format("shards %.2f GiB (%d examples in %d files), one epoch of %d steps in %.1f s (%.0f images/s): " ..
  "peak resident memory %.0f MiB, budget %d MiB (data %.1fx the budget); status %s", size / 2 ^ 30, #ds, #ds.shards,
  r.steps, dl.clock() - t0, #ds / (dl.clock() - t0), vm("VmHWM"), budget, size / 2 ^ 20 / budget, r.status))
