--- dlua.data.pipeline: a pipeline is a description: a dataset and a list of
-- stages (shuffle, shard, map, select, batch, cache, and the settings
-- prefetch, workers, seed, repeat). Chaining a stage returns a new pipeline
-- (the old one is unchanged); stages are checked where they are added (a map
-- after batch, a second batch, a cache after a shuffle are errors). p:iter()
-- hands the description to the engine (dlua.data.iterator); the position, the
-- statistics and the waiting time of its iterators stay with the pipeline.
local core = require "dlua.core"
local util = require "dlua.util"
local check_mod = require "dlua.data.check"
local transforms = require "dlua.data.transforms"
local worker = require "dlua.data.worker"
local iterator = require "dlua.data.iterator"

local M = {}

local errorf, check, options, check_int = check_mod.errorf, check_mod.check, check_mod.options, check_mod.check_int
local is_tensor = util.is_tensor

local Pipeline = {__name = "dlua.data.Pipeline"}
Pipeline.__index = Pipeline
M.Pipeline = Pipeline

local AFTER_BATCH = {prefetch = true, workers = true, ["repeat"] = true, seed = true}

local function new_pipeline(source, stages, default_seed)
  return setmetatable({source = source, stages = stages, _default_seed = default_seed,
    _pos = {epoch = 1, batch = 0}, _wait = 0, _skipped = 0}, Pipeline)
end

function M.is_pipeline(x) return getmetatable(x) == Pipeline end

--- with_stages(p, stages) -> a pipeline over p's source with these stages, at p's
-- position (data parallelism rewrites a pipeline's stages this way).
function M.with_stages(p, stages)
  local q = new_pipeline(p.source, stages, p._default_seed)
  q._pos = {epoch = p._pos.epoch, batch = p._pos.batch}
  return q
end

--- of(x) -> x as a pipeline (a dataset becomes a pipeline without stages).
function M.of(x)
  if getmetatable(x) == Pipeline then return x end
  return new_pipeline(x, {}, core.seed())
end

-- a copy of p with stage appended (after checking where it may go)
-- (settings: prefetch, workers, seed, repeat replace an earlier one)
local function extend(p, stage, level)
  level = level + 2
  local op = stage.op
  local batched = false
  for _, s in ipairs(p.stages) do
    if s.op == "batch" then batched = true end
    if s.op == op and (op == "batch" or op == "cache") then
      errorf(level, "%s: the pipeline already has a %s stage", op, op)
    end
  end
  if batched and not AFTER_BATCH[op] then
    errorf(level, "%s: comes after batch; %s the examples before batching them", op, op)
  end
  if op == "cache" then
    for _, s in ipairs(p.stages) do
      if s.op == "shuffle" or s.op == "shard" then
        errorf(level, "cache: comes after %s; the cache stores examples in dataset order, so put it first", s.op)
      end
      if s.op == "map" and s.random then
        errorf(level, "cache: comes after the random transform '%s'; a cache stores deterministic preprocessing only", s.name)
      end
    end
  end
  local stages = {}
  for _, s in ipairs(p.stages) do
    if s.op ~= op or not AFTER_BATCH[op] then stages[#stages + 1] = s end
  end
  stages[#stages + 1] = stage
  return new_pipeline(p.source, stages, p._default_seed)
end


--- p:shuffle{seed = s [, window = w]}: a fresh permutation every epoch, from
-- (seed, epoch). With a window, a shuffle buffer of w examples instead (for
-- data too large to permute; order is random only within about w examples).
-- Without a seed it uses the pipeline's data seed.
-- With shards = true (a data.shards dataset, first among the shuffles and shards): the
-- shards' order is permuted every epoch and their examples mixed in a buffer of
-- `window` examples (default 1000), as WebDataset does; reads stay within a few shards.
function Pipeline:shuffle(opts)
  opts = options("shuffle", opts, {"seed", "window", shards = "boolean"})
  local seed = opts.seed
  if seed ~= nil then seed = check_int("shuffle", "seed", seed, 0) end
  local window = opts.window and check_int("shuffle", "window", opts.window, 1) or (opts.shards and 1000 or 0)
  if opts.shards then
    return extend(extend(self, {op = "shuffle", seed = seed, blocks = true}, 1), {op = "shuffle", seed = seed,
      window = window}, 1)
  end
  return extend(self, {op = "shuffle", seed = seed, window = window}, 1)
end

--- p:map(t1 [, t2, ...]): per-example transforms in order: data.transforms.*
-- (run in C on the worker threads) or Lua functions fn(example, info) ->
-- example, run in per-worker Lua states (see docs/api/data.md).
function Pipeline:map(...)
  local n = select("#", ...)
  if n == 0 then errorf(2, "map: expected a transform or a function") end
  local p = self
  for i = 1, n do
    local t = select(i, ...)
    local stage
    if transforms.is_transform(t) then
      stage = {op = "map", desc = t, name = t.kind, random = transforms.RANDOM[t.kind] or false}
    elseif type(t) == "function" then
      local plan, name = worker.plan_function(t, 1)
      stage = {op = "map", desc = {kind = "lua", plan = plan, name = name}, name = name, random = false}
    else
      errorf(2, "map: argument %d is a %s, expected a data.transforms value or a function", i, type(t))
    end
    p = extend(p, stage, 1)
  end
  return p
end

--- p:select{"image", "label"}: keeps only these fields (drop unused ones early).
function Pipeline:select(fields)
  if type(fields) == "string" then fields = {fields} end
  if type(fields) ~= "table" or #fields == 0 then errorf(2, "select: expected a list of field names") end
  for _, f in ipairs(fields) do
    if type(f) ~= "string" then errorf(2, "select: field names must be strings, got %s", type(f)) end
  end
  local copy = {table.unpack(fields)}
  return extend(self, {op = "map", desc = {kind = "select", fields = copy}, name = "select", random = false}, 1)
end

--- p:batch(n [, {pad = false, drop_remainder = false}]): stacks n examples
-- into each batch and adds a float32 `weight` field (1 for real examples).
-- The last batch of an epoch is shorter, or dropped, or padded to n with
-- copies of its examples that carry weight 0.
function Pipeline:batch(n, opts)
  opts = options("batch", opts, {pad = "boolean", drop_remainder = "boolean"})
  n = check_int("batch", "size", n, 1)
  if opts.pad and opts.drop_remainder then errorf(2, "batch: pad and drop_remainder exclude each other") end
  return extend(self, {op = "batch", size = n, pad = opts.pad and true or false,
    drop_remainder = opts.drop_remainder and true or false}, 1)
end

--- p:shard{rank = r, world = w} (or {r, w}): keeps every w-th example starting
-- at 0-based rank r: disjoint shards that cover the data. Put it before
-- shuffle (or shuffle with the same seed on every rank); the rank is mixed
-- into the augmentation keys, so ranks draw different augmentations.
-- With by = "shards" (a data.shards dataset): each rank keeps whole record shards, shard
-- s (0-based) on rank s % world, so ranks read disjoint files.
function Pipeline:shard(opts)
  if type(opts) ~= "table" then errorf(2, "shard: expected {rank = r, world = w}") end
  util.check_options("shard", opts, {rank = true, world = true, by = "string", [1] = true, [2] = true}, 2)
  if (opts[1] ~= nil or opts[2] ~= nil) and (opts.rank ~= nil or opts.world ~= nil) then
    errorf(2, "shard: give the rank and world as {rank = r, world = w} or as {r, w}, not both")
  end
  local rank, world = opts.rank or opts[1], opts.world or opts[2]
  world = check_int("shard", "world", world, 1)
  rank = check_int("shard", "rank", rank, 0)
  if rank >= world then errorf(2, "shard: rank %d is not in 0..%d (world %d)", rank, world - 1, world) end
  if opts.by ~= nil and opts.by ~= "examples" and opts.by ~= "shards" then
    errorf(2, "shard: by must be \"examples\" or \"shards\", got \"%s\"", opts.by)
  end
  return extend(self, {op = "shard", rank = rank, world = world, blocks = opts.by == "shards" or nil}, 1)
end

--- p:prefetch(depth): ready batches kept ahead of the consumer (default 2).
function Pipeline:prefetch(depth)
  return extend(self, {op = "prefetch", depth = check_int("prefetch", "depth", depth, 1, 2, 1 << 20)}, 1)
end

--- p:workers(n): worker threads (default 1; 0 produces on the consumer's thread).
function Pipeline:workers(n)
  return extend(self, {op = "workers", n = check_int("workers", "count", n, 0, 2, 1024)}, 1)
end

--- p:seed(s): the data seed (augmentations, and shuffles without their own seed).
function Pipeline:seed(s)
  return extend(self, {op = "seed", seed = check_int("seed", "seed", s, 0)}, 1)
end

--- p:cache(path): stores the result of the stages before it (the dataset and
-- deterministic maps) in a file on first use and reads it back afterwards.
-- A stale (different source or stages) or corrupt file is rebuilt.
function Pipeline:cache(path)
  if type(path) ~= "string" then errorf(2, "cache: expected a path, got %s", type(path)) end
  return extend(self, {op = "cache", path = path}, 1)
end

--- p:repeat_([epochs]) (also p["repeat"]): iterate that many epochs by default,
-- or forever without a count.
function Pipeline:repeat_(epochs)
  if epochs ~= nil then epochs = check_int("repeat", "epochs", epochs, 1) end
  return extend(self, {op = "repeat", epochs = epochs or math.huge}, 1)
end
Pipeline["repeat"] = Pipeline.repeat_

--- p:take(n) -> the same pipeline over the first n examples of its dataset (all
-- of them when it has fewer): a small copy for a dry run or a smoke test. The
-- stages stay, so shuffles and shards act within those n examples; a cache stage
-- is left out (its file holds the whole dataset; the maps before it run instead,
-- with the same results).
-- @usage for b in valid:map(T.scale(1 / 255)):take(16):batch(16):iter() do ... end
function Pipeline:take(n)
  n = check_int("take", "count", n, 1)
  local src = self.source
  local idx = {}
  for i = 1, math.min(n, #src) do idx[i] = i end
  local stages = {}
  for _, st in ipairs(self.stages) do if st.op ~= "cache" then stages[#stages + 1] = st end end
  return new_pipeline(src:subset(idx), stages, self._default_seed)
end

-- the pipeline's settings, gathered from its stages
local function settings(p)
  local s = {index = {}, maps = {}, batch = nil, workers = 1, prefetch = 2, epochs = 1, cache = nil, rank = 0}
  local seed, first_shuffle_seed
  for _, st in ipairs(p.stages) do
    local op = st.op
    if op == "shuffle" then
      s.index[#s.index + 1] = st
      if first_shuffle_seed == nil then first_shuffle_seed = st.seed end
    elseif op == "shard" then
      s.index[#s.index + 1] = st
      s.rank = st.rank
    elseif op == "map" then
      s.maps[#s.maps + 1] = st
    elseif op == "batch" then s.batch = st
    elseif op == "workers" then s.workers = st.n
    elseif op == "prefetch" then s.prefetch = st.depth
    elseif op == "repeat" then s.epochs = st.epochs
    elseif op == "seed" then seed = st.seed
    elseif op == "cache" then s.cache = st; s.cache_at = #s.maps
    end
  end
  s.seed = seed or first_shuffle_seed or p._default_seed or 0
  return s
end

--- p:data_seed() -> the data seed the pipeline uses.
function Pipeline:data_seed() return settings(self).seed end

local function examples_per_epoch(p, s)
  local n = #p.source
  for _, st in ipairs(s.index) do
    local blocks = st.op == "shard" and st.blocks and p.source._ud and core._ds_blocks(p.source._ud)
    if blocks then                                -- the examples of the shards kept
      n = 0
      for b = st.rank + 1, #blocks - 1, st.world do n = n + blocks[b + 1] - blocks[b] end
    elseif st.op == "shard" then
      n = n > st.rank and (n - st.rank - 1) // st.world + 1 or 0
    end
  end
  return n
end

--- #p: batches per epoch (examples, when not batched).
function Pipeline.__len(self)
  local s = settings(self)
  local n = examples_per_epoch(self, s)
  if not s.batch then return n end
  return s.batch.drop_remainder and n // s.batch.size or (n + s.batch.size - 1) // s.batch.size
end

-- canonical text of a value (sorted keys), for fingerprints
local function canon(v, out)
  local tv = type(v)
  if tv == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    out[#out + 1] = "{"
    for _, k in ipairs(keys) do
      out[#out + 1] = tostring(k) .. "="
      canon(v[k], out)
      out[#out + 1] = ","
    end
    out[#out + 1] = "}"
  elseif tv == "string" then
    out[#out + 1] = string.format("%q", v)
  else
    out[#out + 1] = tostring(v)
  end
  return out
end

local function cache_note(p, msg)
  local w = p._warn
  if w == false then return end
  if type(w) == "function" then w(msg) else io.stderr:write(msg, "\n") end
end

-- the dataset behind stage `cache` (built, or read back), and the maps after it
local function resolve_cache(p, s, level)
  local st = s.cache
  local prefix = {}
  for i = 1, s.cache_at do prefix[i] = s.maps[i].desc end
  if not st._resolved then
    local src = p.source._ud
    local fp = string.format("dlua-cache-v1 source=%08x examples=%d stages=%08x", core._ds_checksum(src), #p.source,
      core._crc32(table.concat(canon(prefix, {}))))
    local ud, status, msg = core._cache_load(st.path, fp)
    local info = {path = st.path, status = "loaded"}
    if not ud then
      info.status = status == "missing" and "built" or "rebuilt"
      info.reason = status ~= "missing" and msg or nil
      if info.reason then cache_note(p, "dlua: pipeline " .. msg .. "; rebuilding it") end
      local builder = new_pipeline(p.source, {}, p._default_seed)
      for i = 1, s.cache_at do builder = extend(builder, s.maps[i], level) end
      builder = extend(builder, {op = "batch", size = 256, pad = false, drop_remainder = false}, level)
      builder = extend(builder, {op = "workers", n = s.workers}, level)
      local parts = {}
      local it = builder:iter{warn = false}
      for batch in it do
        for k, v in pairs(batch) do
          if k ~= "weight" then
            parts[k] = parts[k] or {}
            parts[k][#parts[k] + 1] = is_tensor(v) and v or core.tensor({v})
          end
        end
      end
      local skipped, why = builder:skipped()
      if skipped > 0 then
        errorf(level, "cache: %d examples could not be read (the first: %s); a cache holds every example of its" ..
          " source, so fix or remove those files, or use on_error = \"fail\" to find them", skipped, why)
      end
      local names, ts = {}, {}
      for k in pairs(parts) do names[#names + 1] = k end
      table.sort(names)
      for i, k in ipairs(names) do ts[i] = #parts[k] == 1 and parts[k][1] or core.cat(parts[k], 1) end
      if #names == 0 then errorf(level, "cache: the dataset is empty") end
      ud = check(level, pcall(core._ds_new, names, ts, core._ds_ids(src)))
      check(level, pcall(core._cache_save, st.path, ud, fp))
    end
    st._resolved = {ud = ud, info = info}
  end
  local rest = {}
  for i = s.cache_at + 1, #s.maps do rest[#rest + 1] = s.maps[i] end
  return st._resolved.ud, rest, st._resolved.info
end

--- p:cache_info() -> {path =, status = "loaded" | "built" | "rebuilt", reason =}
-- once the pipeline has been iterated; nil before, or without a cache stage.
function Pipeline:cache_info()
  local s = settings(self)
  return s.cache and s.cache._resolved and s.cache._resolved.info or nil
end

--- p:iter([{epochs = 1, warn = true}]) -> iterator: for batch, epoch in p:iter{epochs = 2} do ... end.
-- Starts where the pipeline's position is (see p:state()): `epochs` counts
-- the epoch it starts in, even when partly consumed; `epochs = math.huge`,
-- or a :repeat_() stage with no count, runs forever. `warn`: false to
-- silence the input-bound warning, or a function that receives it.
-- Each call continues from where the previous iterator stopped, so an outer
-- `for epoch = 1, E do for b in p:iter() do ... end end` sees fresh shuffles.
function Pipeline:iter(opts)
  opts = options("iter", opts, {epochs = "number", warn = "boolean|function"})
  if self._it then self._it:close() end
  local s = settings(self)
  local epochs = opts.epochs or s.epochs
  if epochs ~= math.huge then epochs = check_int("iter", "epochs", epochs, 1) end
  if opts.warn ~= nil then self._warn = opts.warn end
  local ud, maps = self.source._ud, s.maps
  local cache_info
  if s.cache then ud, maps, cache_info = resolve_cache(self, s, 2) end
  local descs = {}
  local first = #s.maps - #maps                 -- maps the cache replaced keep their numbers
  for i, m in ipairs(maps) do
    local d = {}
    for k, v in pairs(m.desc) do d[k] = v end
    d.name = d.name or m.name
    d.stage = first + i
    descs[i] = d
  end
  local index = {}
  for i, st in ipairs(s.index) do
    index[i] = st.op == "shard" and {kind = "shard", rank = st.rank, world = st.world, blocks = st.blocks}
      or {kind = "shuffle", seed = st.seed or s.seed, window = st.window, blocks = st.blocks}
  end
  local spec = {
    index = index, transforms = descs,
    batch = s.batch and s.batch.size or 0, pad = s.batch and s.batch.pad, drop_remainder = s.batch and s.batch.drop_remainder,
    workers = s.workers, prefetch = s.prefetch, seed = s.seed, rank = s.rank,
    start_epoch = self._pos.epoch, start_batch = self._pos.batch, epochs = epochs == math.huge and -1 or epochs,
  }
  local h = check(2, pcall(core._pipe_new, ud, spec))
  local it = iterator.new(h, self, s.seed, cache_info)
  self._it = it
  return it, nil, nil, it
end

--- p:state() -> {epoch =, batch =, seed =}: the position of the next batch this
-- pipeline hands out (epoch 1-based, batch = batches already taken in it),
-- plain values a checkpoint can store.
function Pipeline:state()
  if self._it and self._it._h then return self._it:state() end
  return {epoch = self._pos.epoch, batch = self._pos.batch, seed = settings(self).seed}
end

--- p:set_state(s): the next iter() starts at s (from p:state()); an active
-- iterator is closed. Refuses a state saved with another data seed.
function Pipeline:set_state(s)
  if type(s) ~= "table" then errorf(2, "set_state: expected a table from state(), got %s", type(s)) end
  local epoch = check_int("set_state", "epoch", s.epoch, 1)
  local batch = check_int("set_state", "batch", s.batch or 0, 0)
  local seed = settings(self).seed
  if s.seed ~= nil and s.seed ~= seed then
    errorf(2, "set_state: the state was saved with data seed %s, this pipeline's is %s", tostring(s.seed), tostring(seed))
  end
  local per = #self
  if per > 0 and batch > per then errorf(2, "set_state: batch %d is past the %d batches of an epoch", batch, per) end
  if per > 0 and batch == per then epoch, batch = epoch + 1, 0 end
  if self._it then self._it:close() end
  self._pos = {epoch = epoch, batch = batch}
end

--- p:reset(): back to the start of epoch 1.
function Pipeline:reset() self:set_state{epoch = 1, batch = 0} end

--- p:stats() / p:summary(): of the active iterator, else of the last one.
function Pipeline:stats()
  if self._it then return self._it:stats() end
  return self._last_stats
end

function Pipeline:summary() return iterator.summary(self:stats()) end

--- p:wait_time() -> seconds the consumer has spent waiting for this
-- pipeline's batches, over all its iterators (for cost accounting).
function Pipeline:wait_time()
  local live = 0
  if self._it and self._it._h then
    local st = self._it:stats()
    live = st.wait + st.startup
  end
  return self._wait + live
end

--- p:skipped() -> examples its iterators have left out because the dataset's
-- source could not read them (data.images with on_error = "skip"), counted
-- each time one is met (once per epoch), and why the first was skipped.
function Pipeline:skipped()
  local n, why = self._skipped, self._first_skip
  if self._it and self._it._h then
    local st = self._it:stats()
    n, why = n + st.skipped, why or st.first_skip
  end
  return n, why
end

function Pipeline:__tostring()
  local ops = {}
  for _, s in ipairs(self.stages) do ops[#ops + 1] = s.op == "map" and "map(" .. s.name .. ")" or s.op end
  return string.format("Pipeline(%d examples: %s)", #self.source, table.concat(ops, " -> "))
end

-- every exported function refuses extra arguments (util.strict)
-- positional types, declared once; "number" where check_int names the range of a count
util.strict_table("Pipeline:", Pipeline, true, {
  batch = {"number", "table?"}, cache = {"string"}, iter = {"table?"}, prefetch = {"number"}, ["repeat"] = {"number?"},
  repeat_ = {"number?"}, seed = {"number"}, select = {"table|string"}, set_state = {"table"}, shard = {"table"},
  shuffle = {"table?"}, take = {"number"}, workers = {"number"},
})

return M
