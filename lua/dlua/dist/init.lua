--- dl.dist: several processes (MPI ranks) working as one: the collectives, the
-- data-parallel pieces dl.train uses when it runs under mpirun, and the
-- dispatch of study trials over ranks. See docs/distributed.md.
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
-- train: dl.train calls M.data_parallel(config) when world() > 1 and keeps its
-- own loop.
local core = require "dlua.core"
local json = require "dlua.util.json"

local M = {}

local OPS = {sum = true, mean = true, max = true, min = true}

local function is_tensor(x) return getmetatable(x) == core.Tensor end

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

--- allreduce(t [, op = "sum"]) -> a new tensor shaped like t: the elementwise
-- "sum", "mean", "max" or "min" of t over all ranks (every rank calls it, with
-- the same shape and dtype). t is not modified.
-- @usage local g = dl.dist.allreduce(grad, "mean")
function M.allreduce(t, op)
  if not is_tensor(t) then error("dl.dist.allreduce: expected a tensor, got " .. type(t), 2) end
  op = op or "sum"
  if not OPS[op] then
    error(string.format("dl.dist.allreduce: unknown op '%s' (sum, mean, max, min)", tostring(op)), 2)
  end
  return core._dist_allreduce(t, op)
end

--- allreduce_many({t1, t2, ...} [, op]) -> {r1, r2, ...}: the same as one
-- allreduce per tensor, but packed into a few large buffers (one collective
-- per dtype and 32 MB bucket). The results are views of those buffers.
function M.allreduce_many(list, op)
  if type(list) ~= "table" then error("dl.dist.allreduce_many: expected a list of tensors", 2) end
  op = op or "sum"
  if not OPS[op] then
    error(string.format("dl.dist.allreduce_many: unknown op '%s' (sum, mean, max, min)", tostring(op)), 2)
  end
  return core._dist_allreduce_many(list, op)
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

------------------------------------------------------------- data parallel

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
-- pipelines the same way)
local function with_stages(p, stages)
  return setmetatable({source = p.source, stages = stages, _default_seed = p._default_seed,
    _pos = {epoch = p._pos.epoch, batch = p._pos.batch}, _wait = 0}, getmetatable(p))
end

--- shard_pipeline(p, rank, world) -> the rank's part of pipeline p, whose batch stage
-- states the global batch. Each rank gets global / world examples per batch
-- (an error unless divisible). When every shuffle stage has the same seed on every
-- rank, the shard is taken after the shuffles (every-world-th example of the
-- common order: together the ranks see exactly the examples of the global batch,
-- a new split every epoch); otherwise before them (a fixed split that each rank
-- shuffles with its own seed). Disjoint and covering either way.
function M.shard_pipeline(p, rank, world)
  local data = require "dlua.data"
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
  local common = M.same_on_all(json.encode(seeds))
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
  require("dlua.nn.batchnorm").rank_mean = function(t)
    if M.world() == 1 then return t end
    return M.allreduce(t, "mean")
  end
end

--- data_parallel(config) -> the state dl.train keeps when world() > 1: the rank's
-- shard of config.data (dp.data), the fused gradient allreduce, the moving-average
-- hook of BatchNorm, and the checks that keep the ranks in step. Verifies that the
-- model's initial parameters are identical on every rank (the init seed is
-- shared); a mismatch is an error on every rank.
function M.data_parallel(config)
  local world, rank = M.world(), M.rank()
  local self = setmetatable({world = world, rank = rank, lead = rank == 0, seconds = 0, calls = 0,
                             params = config.model:parameters()}, DP)
  M.check_replicated(config.model, "dl.train: the initial parameters",
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
  local t = M.allreduce(core.tensor({v}, {dtype = "float64"}), "mean")
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
  local out = M.allreduce_many(list, "mean")
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
  local all = M.allgather_object({ok = ok and true or false, msg = msg and tostring(msg) or nil})
  for r, a in ipairs(all) do
    if not a.ok then error(string.format("rank %d: %s", r - 1, tostring(a.msg)), 0) end
  end
end

--- dp:gather_state(data_state) -> JSON text with every rank's random stream and data
-- position (a checkpoint's "dist" metadata; each rank resumes its own).
function DP:gather_state(data_state)
  local seed, counter = core.rng_state()
  local mine = {rng = {seed = seed, counter = counter}, pipeline = data_state and data_state() or {}}
  return json.encode({world = self.world, ranks = M.allgather_object(mine)})
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
  head = M.broadcast_object(head, 0)
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
    M.broadcast(t, 0)
  end
  return path, tensors, meta
end

--- dp:share_ledger(ledger): the other ranks take rank 0's checkpoint ledger and never
-- write it.
function DP:share_ledger(ledger)
  local d = M.broadcast_object(ledger.data, 0)
  if not self.lead then
    d.evals = json.array(d.evals or {})
    d.checkpoints = json.array(d.checkpoints or {})
    ledger.data = d
    ledger.save = function() end
  end
  return ledger
end

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
DP.eval_shard = function() return M.eval_shard() end

-------------------------------------------------------------------- studies
-- Trials spread over ranks: rank 0 runs the study's agent (journal, trials.csv,
-- results, the tracking row) and starts each trial on the rank with the fewest
-- running; the other ranks run what they are sent and send back the trial's small
-- files (result.json, metrics.jsonl, ...), which rank 0 writes into the trial's
-- directory before the agent reads them. Each trial runs exactly once, on one rank,
-- as a process of its own (a world of one).

local RETURNED = {"result.json", "metrics.jsonl", "trial.log", "hparams.json", "checkpoints/index.json"}

local function sleep(s) os.execute(string.format("sleep %.3f", s)) end

local function hostname()
  local f = io.open("/proc/sys/kernel/hostname")
  local h = f and f:read("l")
  if f then f:close() end
  return h or "localhost"
end

local Pool = {}
Pool.__index = Pool

--- trial_pool(local_launch) -> a pool whose :launch(exe, args, dir, opts) has the
-- contract of dlua.study's launch (a handle with :poll() -> nil | exit code, and .t0),
-- spreading the trials over the ranks. pool:close() stops the serving ranks.
function M.trial_pool(local_launch)
  local self = setmetatable({world = M.world(), running = {}, next_id = 0, done = {}, local_launch = local_launch},
    Pool)
  for r = 0, self.world - 1 do self.running[r] = 0 end
  return self
end

function Pool:pick()
  local best, n = 0, math.huge
  for r = 0, self.world - 1 do
    if self.running[r] < n then best, n = r, self.running[r] end
  end
  return best
end

local function note_dispatch(dir, rank, host)
  local fs = require "dlua.util.fs"
  fs.mkdir_p(dir)
  fs.write_atomic(dir .. "/dispatch.json", json.encode({rank = rank, host = host}) .. "\n")
end

function Pool:pump()
  for r = 1, self.world - 1 do
    while core._dist_probe(r) do
      local m = json.decode(core._dist_recv(r))
      if m and m.op == "done" then self.done[m.id] = m end
    end
  end
end

function Pool:launch(exe, args, dir, opts)
  local fs = require "dlua.util.fs"
  local r = self:pick()
  self.running[r] = self.running[r] + 1
  local pool = self
  if r == 0 then
    local h = self.local_launch(exe, args, dir, opts)
    note_dispatch(dir, 0, hostname())
    local poll = h.poll
    local finished = false
    h.poll = function(hh)
      local code = poll(hh)
      if code and not finished then finished = true; pool.running[0] = pool.running[0] - 1 end
      return code
    end
    return h
  end
  self.next_id = self.next_id + 1
  local id = self.next_id
  fs.mkdir_p(dir)
  os.remove(dir .. "/exit")
  os.remove(dir .. "/result.json")
  core._dist_send(r, json.encode({op = "run", id = id, exe = exe, args = json.array(args), dir = dir}))
  local h = {dir = dir, t0 = core.clock(), rank = r}
  function h.poll()
    if h.code then return h.code end
    pool:pump()
    local m = pool.done[id]
    if not m then return nil end
    pool.done[id] = nil
    for name, text in pairs(m.files or {}) do
      local path = dir .. "/" .. name
      if fs.read(path) ~= text then
        fs.mkdir_p(fs.dirname(path))
        fs.write_atomic(path, text)
      end
    end
    note_dispatch(dir, r, m.host)
    fs.write_atomic(dir .. "/exit", tostring(m.code) .. "\n")
    pool.running[r] = pool.running[r] - 1
    h.code = m.code
    return m.code
  end
  return h
end

function Pool:close()
  for r = 1, self.world - 1 do core._dist_send(r, json.encode({op = "stop"})) end
end

--- serve_trials([launch]) -> trials run: the loop of a rank other than 0 in a
-- distributed study: runs each trial it is sent (with launch, dlua.study's by
-- default) and replies with the exit code and the trial's small files, until rank 0
-- says stop.
function M.serve_trials(launch)
  local fs = require "dlua.util.fs"
  launch = launch or require("dlua.study").launch
  local pid = require("dlua.study").getpid()
  local running, count, host = {}, 0, hostname()
  while true do
    while core._dist_probe(0) do
      local m = json.decode(core._dist_recv(0))
      if m.op == "stop" then return count end
      if m.op == "run" then
        running[#running + 1] = {id = m.id, dir = m.dir, h = launch(m.exe, m.args, m.dir, {agent_pid = pid})}
      end
    end
    local keep = {}
    for _, t in ipairs(running) do
      local code = t.h:poll()
      if code then
        local files = {}
        for _, name in ipairs(RETURNED) do files[name] = fs.read(t.dir .. "/" .. name) end
        core._dist_send(0, json.encode({op = "done", id = t.id, code = code, files = files, host = host}))
        count = count + 1
      else
        keep[#keep + 1] = t
      end
    end
    running = keep
    sleep(0.1)
  end
end

--- run_study(study, args, script): `mpirun -np N dlua STUDYFILE ...`: rank 0 runs
-- study:main with the trials spread over the ranks (one at a time per rank unless
-- --parallel says otherwise); the other ranks serve trials. With one rank it is
-- study:main.
function M.run_study(study, args, script)
  if M.world() == 1 then return study:main(args, script) end
  if not M.is_lead() then
    M.serve_trials()
    return nil
  end
  local smod = require "dlua.study"
  local a, has_parallel = {}, false
  for i, v in ipairs(args or {}) do
    a[i] = v
    if v:match("^%-%-parallel") or v:match("^%-%-jobs") then has_parallel = true end
  end
  if not has_parallel then a[#a + 1] = "--parallel"; a[#a + 1] = tostring(M.world()) end
  local orig = smod.launch
  local pool = M.trial_pool(orig)
  smod.launch = function(...) return pool:launch(...) end
  local ok, res = pcall(study.main, study, a, script)
  smod.launch = orig
  pool:close()
  if not ok then error(res, 0) end
  return res
end

return M
