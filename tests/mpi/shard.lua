-- tests/mpi/shard.lua: the data sharding dl.train applies under mpirun -np 2
-- (dl.dist.shard_pipeline); prints "ok <check>" lines, raises on a failure.
--  1. a shuffle with the same seed on every rank: the shard comes after it, and at
--     every step the two per-rank batches together are exactly the one-process
--     global batch (as sets), over two epochs.
--  2. a per-rank shuffle seed: the shard comes first; within an epoch the ranks'
--     examples are disjoint and cover the dataset, and the orders differ.
local dl = require "dlua"
local dist, data = dl.dist, dl.data
dl.threads(1)
assert(dist.world() == 2, "run with mpirun -np 2")
local rank = dist.rank()
local n, B = 100, 20                              -- 5 global batches of 20 per epoch; 10 per rank per batch
local ds = data.tensors{id = dl.arange(1, n + 1, 1, {dtype = "int64"})}

local function ids(batch) local t = batch.id:totable(); table.sort(t); return t end
local function key(t) return table.concat(t, ",") end

-- 1
local global = ds:shuffle{seed = 9}:batch(B)
local mine = dist.shard_pipeline(global, rank, 2)
assert(mine._dist_mode == "after-shuffle", "expected the shard after the shuffle, got " .. tostring(mine._dist_mode))
local it_g, it_m = global:iter{epochs = 2}, mine:iter{epochs = 2}
local steps = 0
while true do
  local g, m = it_g(), it_m()
  if not g then assert(not m, "the shard has more batches than the global pipeline"); break end
  assert(m.id:size(1) == B // 2, "per-rank batch " .. m.id:size(1))
  local both = dist.allgather_object(m.id:totable())
  local u = {}
  for _, part in ipairs(both) do for _, v in ipairs(part) do u[#u + 1] = v end end
  table.sort(u)
  if key(u) ~= key(ids(g)) then error("step " .. steps + 1 .. ": the ranks' batches are not the global batch", 0) end
  steps = steps + 1
end
assert(steps == 2 * n // B, "steps " .. steps)
io.stdout:write("ok after-shuffle ", steps, " steps\n")

-- 2
local per_rank = dist.shard_pipeline(ds:shuffle{seed = 9 + rank}:batch(B), rank, 2)
assert(per_rank._dist_mode == "before-shuffle", "expected the shard first, got " .. tostring(per_rank._dist_mode))
local seen = {}
for b in per_rank:iter{epochs = 1} do for _, v in ipairs(b.id:totable()) do seen[#seen + 1] = v end end
local both = dist.allgather_object(seen)
local count = {}
for _, part in ipairs(both) do for _, v in ipairs(part) do count[v] = (count[v] or 0) + 1 end end
for i = 1, n do
  if count[i] ~= 1 then error(string.format("example %d read %s times in one epoch", i, tostring(count[i] or 0)), 0) end
end
io.stdout:write("ok before-shuffle disjoint and covering\n")
