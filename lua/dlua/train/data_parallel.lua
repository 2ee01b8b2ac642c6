--- dlua.train.data_parallel: what dl.train keeps when it runs under mpirun
-- (world() > 1): the rank's shard of the data pipeline, the fused gradient
-- allreduce, BatchNorm's moving averages averaged over ranks (through the hook
-- nn.BatchNorm.set_rank_mean), and the checks that keep the ranks in step. Built
-- on the collectives of dlua.dist; dl.dist shows these functions too.
local core = require "dlua.core"
local json = require "dlua.util.json"
local dist = require "dlua.dist"
local data = require "dlua.data"
local BatchNorm = require "dlua.nn.batchnorm"

local M = {}

-- pipelines the same way)
local function with_stages(p, stages)
  return setmetatable({source = p.source, stages = stages, _default_seed = p._default_seed,
    _pos = {epoch = p._pos.epoch, batch = p._pos.batch}, _wait = 0, _skipped = 0}, getmetatable(p))
end

--- shard_pipeline(p, rank, world) -> the rank's part of pipeline p, whose batch stage
-- states the global batch. Each rank gets global / world examples per batch
-- (an error unless divisible). When every shuffle stage has the same seed on every
-- rank, the shard is taken after the shuffles (every-world-th example of the
-- common order: together the ranks see exactly the examples of the global batch,
-- a new split every epoch); otherwise before them (a fixed split that each rank
-- shuffles with its own seed). Disjoint and covering either way.
function M.shard_pipeline(p, rank, world)
  if not data.is_pipeline(p) then return p end
  local batch_at, last_shuffle, last_cache
  for i, st in ipairs(p.stages) do
    if st.op == "batch" then batch_at = i end
    if st.op == "shuffle" then last_shuffle = i end
    if st.op == "cache" then last_cache = i end
    if st.op == "shard" and st.world > 1 then
      error(string.format("dl.train: the data pipeline is already sharded (shard{rank = %d, world = %d}); under " ..
        "mpirun dl.train shards it itself: give the whole pipeline with the global batch size", st.rank, st.world), 0)
    end
  end
  if not batch_at then
    error("dl.train: under mpirun (world " .. world .. ") the data pipeline needs a :batch(n) stage: n is the " ..
      "global batch, split over the ranks", 0)
  end
  local b = p.stages[batch_at]
  if b.size % world ~= 0 then
    error(string.format("dl.train: the global batch size %d does not divide over %d ranks (per-rank batch = " ..
      "global / world); choose a batch size that is a multiple of %d", b.size, world, world), 0)
  end
  local seeds = {}
  for _, st in ipairs(p.stages) do
    if st.op == "shuffle" then seeds[#seeds + 1] = st.seed or p:data_seed() end
  end
  local common = dist.same_on_all(json.encode(seeds))
  local at = (common and last_shuffle or 0)
  if last_cache and last_cache > at then at = last_cache end
  local stages = {}
  for i = 1, at do stages[#stages + 1] = p.stages[i] end
  stages[#stages + 1] = {op = "shard", rank = rank, world = world}
  for i = at + 1, #p.stages do
    local st = p.stages[i]
    if i == batch_at then
      st = {op = "batch", size = b.size // world, pad = b.pad, drop_remainder = b.drop_remainder}
    end
    stages[#stages + 1] = st
  end
  local out = with_stages(p, stages)
  out._dist_mode = common and "after-shuffle" or "before-shuffle"
  return out
end


local DP = {}
DP.__index = DP

--- data_parallel_hooks(): BatchNorm's moving averages are averaged over ranks whenever
-- nn.sync_batchnorm runs (dl.train: before every eval and checkpoint). Idempotent.
function M.data_parallel_hooks()
  BatchNorm.set_rank_mean(function(t)
    if dist.world() == 1 then return t end
    return dist.allreduce(t, "mean")
  end)
end

--- data_parallel(config) -> the state dl.train keeps when world() > 1: the rank's
-- shard of config.data (dp.data), the fused gradient allreduce, the moving-average
-- hook of BatchNorm, and the checks that keep the ranks in step. Verifies that the
-- model's initial parameters are identical on every rank (the init seed is
-- shared); a mismatch is an error on every rank.
function M.data_parallel(config)
  local world, rank = dist.world(), dist.rank()
  local self = setmetatable({world = world, rank = rank, lead = rank == 0, seconds = 0, calls = 0,
                             params = config.model:parameters()}, DP)
  dist.check_replicated(config.model, "dl.train: the initial parameters",
    "; every rank must build the model right after the same dl.seed (hp.init_seed): the init seed is shared, " ..
    "only the data seed differs per rank")
  self.data = M.shard_pipeline(config.data, rank, world)
  M.data_parallel_hooks()
  -- the default random stream (dropout, ...) differs per rank from here on; rank 0 keeps
  -- the single-process stream
  local seed, counter = core.rng_state()
  if rank > 0 then core.rng_state((seed + rank * 0x9E3779B97F4A7C15) & 0x7fffffffffffffff, counter) end
  return self
end

--- dp:mean_loss(v) -> the mean of the number v over ranks (every rank decides on
-- divergence from the same value).
function DP:mean_loss(v)
  local t = dist.allreduce(core.tensor({v}, {dtype = "float64"}), "mean")
  return t:totable()[1]
end

--- dp:reduce_grads(): replaces every parameter's gradient by its mean over ranks, in
-- one fused allreduce (a parameter without a gradient on a rank counts as zero there;
-- it stays without one only if no rank has one).
function DP:reduce_grads()
  local t0 = core.clock()
  local list, present = {}, {}
  for i, p in ipairs(self.params) do
    local g = p.grad
    present[i] = g and 1 or 0
    list[i] = g or core.zeros(p:shape(), {dtype = p:dtype()})
  end
  list[#list + 1] = core.tensor(present, {dtype = "float32"})
  local out = dist.allreduce_many(list, "mean")
  local has = out[#out]:totable()
  for i, p in ipairs(self.params) do
    if has[i] > 0 then p.grad = out[i] end
  end
  self.seconds = self.seconds + (core.clock() - t0)
  self.calls = self.calls + 1
end

--- dp:agree(ok, msg): every rank learns whether all ranks succeeded; errors on all
-- of them with the first failing rank's message otherwise.
function DP:agree(ok, msg)
  local all = dist.allgather_object({ok = ok and true or false, msg = msg and tostring(msg) or nil})
  for r, a in ipairs(all) do
    if not a.ok then error(string.format("rank %d: %s", r - 1, tostring(a.msg)), 0) end
  end
end

--- dp:gather_state(data_state) -> JSON text with every rank's random stream and data
-- position (a checkpoint's "dist" metadata; each rank resumes its own).
function DP:gather_state(data_state)
  local seed, counter = core.rng_state()
  local mine = {rng = {seed = seed, counter = counter}, pipeline = data_state and data_state() or {}}
  return json.encode({world = self.world, ranks = dist.allgather_object(mine)})
end

--- dp:restore_state(meta, data_set_state): this rank's random stream and data position
-- from a checkpoint written by the same number of ranks.
function DP:restore_state(meta, data_set_state)
  local d = meta.dist and json.decode(meta.dist)
  if not d then
    error(string.format("dl.train: the checkpoint was written by one process; resuming it under mpirun " ..
      "(world %d) would give every rank rank 0's data order", self.world), 0)
  end
  if d.world ~= self.world then
    error(string.format("dl.train: the checkpoint was written by %d ranks; resume it with mpirun -np %d " ..
      "(this run has %d)", d.world, d.world, self.world), 0)
  end
  local mine = d.ranks[self.rank + 1]
  core.rng_state(mine.rng.seed, mine.rng.counter)
  if data_set_state then data_set_state(mine.pipeline) end
end

--- dp:resume_point(find) -> path, tensors, meta: rank 0 runs find() (reads its run
-- directory); every rank receives the same checkpoint by broadcast, so the other
-- ranks need no access to rank 0's files.
function DP:resume_point(find)
  local head
  local path, tensors, meta
  if self.lead then
    path, tensors, meta = find()
    head = {path = path}
    if path then
      local names = {}
      for k in pairs(tensors) do names[#names + 1] = k end
      table.sort(names)
      local specs = {}
      for i, k in ipairs(names) do specs[i] = {name = k, dtype = tensors[k]:dtype(), shape = tensors[k]:shape()} end
      head.tensors, head.meta = specs, meta
    end
  end
  head = dist.broadcast_object(head, 0)
  if not head.path then return nil end
  if not self.lead then
    path, meta, tensors = head.path, head.meta, {}
    for _, s in ipairs(head.tensors) do
      tensors[s.name] = core.zeros(#s.shape > 0 and s.shape or {}, {dtype = s.dtype})
    end
  end
  for _, s in ipairs(head.tensors) do
    local t = tensors[s.name]
    if not t:is_contiguous() then t = t:contiguous(); tensors[s.name] = t end
    dist.broadcast(t, 0)
  end
  return path, tensors, meta
end

--- dp:share_ledger(ledger): the other ranks take rank 0's checkpoint ledger and never
-- write it.
function DP:share_ledger(ledger)
  local d = dist.broadcast_object(ledger.data, 0)
  if not self.lead then
    d.evals = json.array(d.evals or {})
    d.checkpoints = json.array(d.checkpoints or {})
    ledger.data = d
    ledger.save = function() end
  end
  return ledger
end


DP.eval_shard = function() return dist.eval_shard() end

return M
