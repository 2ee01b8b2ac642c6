--- dlua.data.iterator: a running pipeline. p:iter() starts the engine's
-- pipeline (worker threads, a bounded queue) and returns an iterator; it hands
-- out batches in order, keeps the statistics of waiting for input, warns once
-- when training is input-bound, and gives the position a checkpoint stores. On
-- close (also break, __close, __gc) it joins the workers and tells its
-- pipeline where it stopped.
local util = require "dlua.util"
local core = require "dlua.core"

local M = {}

--- When an iterator warns that training is input-bound: waiting for input more
-- than `threshold` of the step time, judged after `min_batches` batches
-- (dl.data.input_bound_threshold and dl.data.input_bound_min_batches set these).
M.input_bound = {threshold = 0.10, min_batches = 20}

local Iter = {__name = "dlua.data.Iterator"}
Iter.__index = Iter
M.Iterator = Iter

--- new(h, pipe, seed, cache_info) -> the iterator over the engine pipeline h of
-- pipeline pipe (which it tells its position, statistics and waiting time when it
-- closes), with data seed seed.
function M.new(h, pipe, seed, cache_info)
  return setmetatable({_h = h, _pipe = pipe, _seed = seed, _warned = false, _next_check = 100, _n = 0,
    cache = cache_info, epoch = pipe._pos.epoch}, Iter)
end

local function stats_of(raw)
  if not raw then return nil end
  local st = {batches = raw.batches, wait = raw.wait, startup = raw.startup, span = raw.span,
    workers = raw.workers, prefetch = raw.prefetch, stages = raw.stages, skipped = raw.skipped,
    first_skip = raw.first_skip}
  st.wait_fraction = raw.span > 0 and math.min(1, raw.wait / raw.span) or 0
  local slow, best = nil, -1
  for _, x in ipairs(raw.stages) do
    if x.seconds > best then slow, best = x.name, x.seconds end
  end
  st.slowest = slow
  st.slowest_seconds = best
  return st
end

--- it:stats() -> {batches =, wait =, startup =, span =, wait_fraction =, slowest =,
-- stages = {{name =, seconds =}, ...}, workers =, prefetch =, skipped =, first_skip =}:
-- skipped counts the examples left out as unreadable (first_skip: why the first). wait is the time
-- the consumer blocked for batches 2.. (startup: for batch 1); span runs from
-- batch 1's arrival to the latest batch's; wait_fraction = wait / span.
function Iter:stats()
  if self._h then return stats_of(core._pipe_stats(self._h)) end
  return self._final
end

--- summary(st) -> the one-line summary of statistics st (of it:stats(); nil: not run).
function M.summary(st)
  if not st then return "input pipeline: not run" end
  local per_batch = st.batches > 0 and st.slowest_seconds / st.batches * 1000 or 0
  return string.format("input pipeline: %d batches; waited %.1f%% of step time for input (%.3f s of %.3f s, " ..
    "first batch %.3f s); slowest stage: %s (%.2f ms per batch); %d workers, prefetch %d%s",
    st.batches, 100 * st.wait_fraction, st.wait, st.span, st.startup, st.slowest or "-", per_batch,
    st.workers, st.prefetch, (st.skipped or 0) > 0 and string.format("; %d examples skipped (first: %s)",
      st.skipped, st.first_skip or "?") or "")
end

--- it:summary() -> the one-line summary of it:stats().
function Iter:summary() return M.summary(self:stats()) end

local function maybe_warn(it, st)
  if it._warned or not st or st.batches < M.input_bound.min_batches then return end
  if st.wait_fraction <= M.input_bound.threshold then return end
  it._warned = true
  local w = it._pipe._warn
  if w == false then return end
  local msg = string.format("dlua: warning: training is input-bound: it waited for input %.0f%% of step time " ..
    "(%d batches); slowest stage: %s; try :workers(n) (now %d), a deeper :prefetch(n) (now %d) or :cache(path) " ..
    "for deterministic preprocessing", 100 * st.wait_fraction, st.batches, st.slowest or "-", st.workers, st.prefetch)
  if type(w) == "function" then w(msg) else io.stderr:write(msg, "\n") end
end

-- closes the C side; remembers the position and the final statistics
local function finish(it)
  if not it._h then return end
  local e, b = core._pipe_position(it._h)
  it._final = stats_of(core._pipe_stats(it._h))
  core._pipe_close(it._h)
  it._h = nil
  local p = it._pipe
  if e then p._pos = {epoch = e, batch = b} end
  p._wait = p._wait + (it._final and (it._final.wait + it._final.startup) or 0)
  p._skipped = p._skipped + (it._final and it._final.skipped or 0)
  p._first_skip = p._first_skip or (it._final and it._final.first_skip)
  if it._final then p._last_stats = it._final end
  if p._it == it then p._it = nil end
  maybe_warn(it, it._final)
end

--- it() / it:next() -> batch, epoch | nil at the end. A batch is a table of
-- tensors (field name -> [n, ...]) plus `weight` when batched.
function Iter:next()
  if not self._h then return nil end
  local ok, batch, epoch = pcall(core._pipe_next, self._h)
  if not ok then
    finish(self)
    error(batch, 2)
  end
  if batch == nil then
    finish(self)
    return nil
  end
  self.epoch = epoch
  self._n = self._n + 1
  if self._n >= self._next_check then
    self._next_check = self._next_check * 10
    maybe_warn(self, self:stats())
  end
  return batch, epoch
end
Iter.__call = Iter.next

--- it:close(): stops and joins the workers (also on break, __close and __gc).
function Iter:close() finish(self) end
Iter.__close = Iter.close
Iter.__gc = Iter.close

--- it:state() -> {epoch =, batch =, seed =}: the position of the next batch.
function Iter:state()
  if self._h then
    local e, b = core._pipe_position(self._h)
    return {epoch = e, batch = b, seed = self._seed}
  end
  return self._pipe:state()
end


-- every exported function refuses extra arguments (util.strict)
util.strict_table("Iterator:", Iter, true, {})

return M
