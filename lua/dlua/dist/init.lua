--- dlua.dist: several processes (MPI ranks) working as one: the collectives and
-- the checks built only on them (replicated parameters, sharded eval sums). The
-- data-parallel state dl.train keeps under mpirun is in train/data_parallel.lua,
-- the dispatch of study trials over ranks in study/ranks.lua; dl.dist (dlua/init.lua)
-- shows all three as one table. See docs/distributed.md.
--
--   mpirun -np 2 dlua examples/fashion_mnist.lua --steps 200
--
--   dl.dist.rank()                    -- 0-based, as MPI numbers ranks
--   dl.dist.world()                   -- number of ranks (1 without mpirun)
--   dl.dist.allreduce(t, "mean")      -- a new tensor: the mean of t over all ranks
--   dl.dist.broadcast(t, 0)           -- t now holds rank 0's values (in place)
--   dl.dist.barrier()
--
-- MPI starts on first use when the process was launched by mpirun (or another
-- MPI launcher); a plain `dlua` is a world of one where every collective is a
-- local identity, so the same code runs either way. This file does not
-- train and knows no pipeline, model class or study: it sits just above util.
local core = require "dlua.core"
local util = require "dlua.util"
local json = require "dlua.util.json"

local M = {}

local OPS = {sum = true, mean = true, max = true, min = true}

local is_tensor = util.is_tensor

---------------------------------------------------------------- collectives

--- Was dlua built with MPI (DLUA_WITH_MPI)?
function M.available() return core._dist_available() end

--- This process's 0-based rank (0 without mpirun).
-- @usage if dl.dist.rank() == 0 then print("lead") end
function M.rank() return core._dist_rank() end

--- The number of ranks (1 without mpirun).
function M.world() return core._dist_world() end

--- Is this rank 0, the one that logs and writes files?
function M.is_lead() return core._dist_rank() == 0 end

-- op (default "sum") checked against OPS, blaming the caller of dl.dist.<fname>
local function reduce_op(fname, op)
  op = op or "sum"
  if not OPS[op] then
    error(string.format("dl.dist.%s: unknown op '%s' (sum, mean, max, min)", fname, tostring(op)), 3)
  end
  return op
end

--- allreduce(t [, op = "sum"]) -> a new tensor shaped like t: the elementwise
-- "sum", "mean", "max" or "min" of t over all ranks (every rank calls it, with
-- the same shape and dtype). t is not modified.
-- @usage local g = dl.dist.allreduce(grad, "mean")
function M.allreduce(t, op)
  if not is_tensor(t) then error("dl.dist.allreduce: expected a tensor, got " .. type(t), 2) end
  return core._dist_allreduce(t, reduce_op("allreduce", op))
end

--- allreduce_many({t1, t2, ...} [, op]) -> {r1, r2, ...}: the same as one
-- allreduce per tensor, but packed into a few large buffers (one collective
-- per dtype and 32 MB bucket). The results are views of those buffers.
function M.allreduce_many(list, op)
  if type(list) ~= "table" then error("dl.dist.allreduce_many: expected a list of tensors", 2) end
  return core._dist_allreduce_many(list, reduce_op("allreduce_many", op))
end

--- broadcast(t, root) -> t, holding root's values (copied in place on the other
-- ranks; every rank passes a tensor of the same shape and dtype).
-- @usage dl.dist.broadcast(w, 0)
function M.broadcast(t, root)
  if not is_tensor(t) then error("dl.dist.broadcast: expected a tensor, got " .. type(t), 2) end
  root = root or 0
  if math.type(root) ~= "integer" or root < 0 or root >= M.world() then
    error(string.format("dl.dist.broadcast: root %s is not a rank (0..%d)", tostring(root), M.world() - 1), 2)
  end
  return core._dist_broadcast(t, root)
end

--- barrier(): returns once every rank has called it.
function M.barrier() core._dist_barrier() end

--- broadcast_string(s, root) -> root's string on every rank (s is ignored elsewhere).
function M.broadcast_string(s, root) return core._dist_bcast_string(s, root or 0) end

--- broadcast_object(v, root) -> root's value (plain data: JSON) on every rank.
function M.broadcast_object(v, root)
  root = root or 0
  local s = core._dist_bcast_string(M.rank() == root and json.encode(v) or nil, root)
  return json.decode(s)
end

--- allgather_object(v) -> {rank 0's v, rank 1's v, ...} on every rank (plain data).
function M.allgather_object(v)
  local out = {}
  for i, s in ipairs(core._dist_allgather(json.encode({v = v}))) do out[i] = json.decode(s).v end
  return out
end

--- checksum({t1, t2, ...}) -> 16 hex digits over the tensors' dtypes, shapes and bytes
-- (local: compare it across ranks with allgather_object).
function M.checksum(list) return core._dist_checksum(list) end

--- solo(fn, ...) -> fn(...): runs fn as a world of one (rank 0 of 1; collectives are
-- local). A study trial running inside a rank trains alone this way.
function M.solo(fn, ...)
  core._dist_solo(1)
  local res = table.pack(pcall(fn, ...))
  core._dist_solo(-1)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

--- stats() -> {allreduce_seconds, allreduce_calls, allreduce_bytes, broadcast_seconds,
-- broadcast_calls} since the process started.
function M.stats() return core._dist_stats() end

--- The same value on every rank? Returns true, or false and the list of
-- {rank =, value =} (0-based ranks) that differ from rank 0's.
function M.same_on_all(s)
  local all = core._dist_allgather(tostring(s))
  local bad = {}
  for i = 2, #all do if all[i] ~= all[1] then bad[#bad + 1] = {rank = i - 1, value = all[i]} end end
  return #bad == 0, bad, all[1]
end

------------------------------------------------------------ replicas

local function state_tensors(model)
  local sd = model:state_dict()
  local names = {}
  for k in pairs(sd) do names[#names + 1] = k end
  table.sort(names)
  local list = {}
  for i, k in ipairs(names) do list[i] = sd[k] end
  return list, names
end

--- check_replicated(model, what): errors on every rank unless the model's parameters
-- and buffers are bitwise identical on all ranks (checksum compared across ranks).
function M.check_replicated(model, what, hint)
  local list = state_tensors(model)
  local ok, bad, h0 = M.same_on_all(M.checksum(list))
  if ok then return h0 end
  local parts = {}
  for _, b in ipairs(bad) do parts[#parts + 1] = string.format("rank %d has %s", b.rank, b.value) end
  error(string.format("%s differ across ranks (parameter checksum: rank 0 has %s, %s)%s", what, h0,
    table.concat(parts, ", "), hint or ""), 0)
end

-- a copy of pipeline p with stages replaced (p is immutable; data.lua builds
--- eval_shard() -> the `shard` option of metrics.evaluator: rank r evaluates the
-- batches r + 1, r + 1 + world, ... of each set, and the per-batch sums are summed
-- in batch order on every rank, exactly as one process would.
function M.eval_shard()
  return {
    rank = M.rank(), world = M.world(), lead = M.is_lead(),
    sum = function(t) return M.allreduce(t, "sum") end,
    max = function(v) return M.allreduce(core.tensor({v}, {dtype = "float64"}), "max"):totable()[1] end,
    gather = function(list)
      local out = {}
      for _, part in ipairs(M.allgather_object(json.array(list))) do
        for _, x in ipairs(part) do out[#out + 1] = x end
      end
      return out
    end,
  }
end


-- every exported function refuses extra arguments (util.strict)
util.strict_table("dist.", M, false, {
  allgather_object = {"any"}, allreduce = {"tensor", "string?"}, allreduce_many = {"table", "string?"},
  broadcast = {"tensor", "integer?"}, broadcast_object = {"any?", "integer?"}, broadcast_string = {"string?", "integer?"},
  checksum = {"table"}, same_on_all = {"string"}, check_replicated = {"module", "string", "string?"},
})

return M
