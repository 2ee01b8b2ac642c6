--- dlua.train.metrics: evaluation of a model on whole sets with exact weighting.
--
-- Every metric is accumulated as a weighted sum and a weight total over
-- batches, so padded examples (weight 0) change nothing and the result is
-- exactly the mean over the real examples whatever the batch size.
-- Built-in metrics: "loss", "accuracy", "top5" (any "topK"), "per_class"
-- (correct and total per class: "k of n correct"). A user metric is a
-- function(output, target, weight) returning (weighted sum, weight total).
-- @usage local ev = metrics.evaluator{model = m, loss = nn.CrossEntropy()}
--        ev:run("valid", valid_set, step) --> {loss = 0.31, accuracy = 0.89, ...}
local core = require "dlua.core"
local util = require "dlua.util"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"

local M = {}

local is_tensor = util.is_tensor

-- batches of a set in order, the last one padded with weight-0 examples
-- set: a dataset/pipeline with :batch, or {input = tensor, target = tensor} in memory
-- shard {rank =, world =}: only the batches bi with (bi - 1) % world == rank (several
-- processes, docs/distributed.md); the iterator also returns bi, and batches()
-- returns the number of batches of the whole set second
local function batches(set, bs, fields, sample, shard)
  local function mine(bi) return not shard or (bi - 1) % shard.world == shard.rank end
  if type(set) == "table" and set.batch and not is_tensor(set) then
    local src = set
    if sample and sample < #set then            -- a fixed sample: the same examples at every eval, every trial
      if not src.subset then error("evaluate: sample = n needs a dataset (before :map), not a pipeline", 0) end
      local seed, counter = core.rng_state()
      core.rng_state(0x5eed, 0)
      local idx = core.randperm(#set):narrow(1, 1, sample)
      core.rng_state(seed, counter)
      src = src:subset(idx)
    end
    local n = #src
    local nb = (n + bs - 1) // bs
    local ids
    if shard and src.subset then                -- this rank's whole batches, the same as one process forms
      ids = {}
      local idx = {}
      for bi = shard.rank + 1, nb, shard.world do
        ids[#ids + 1] = bi
        for i = (bi - 1) * bs + 1, math.min(bi * bs, n) do idx[#idx + 1] = i end
      end
      if #idx == 0 then return function() return nil end, nb end
      src = src:subset(idx)
    elseif shard then
      nb = #src:batch(bs, {pad = true})
    end
    local it = src:batch(bs, {pad = true}):iter{epochs = 1, warn = false}
    local k = 0
    return function()
      while true do
        local b = it()
        if b == nil then return nil end
        k = k + 1
        local bi = ids and ids[k] or k
        if ids or mine(bi) then return b[fields.input], b[fields.target], b[fields.weight], bi end
      end
    end, nb
  end
  local x = set[fields.input] or set.input or set.x or set[1]
  local y = set[fields.target] or set.target or set.y or set[2]
  if not is_tensor(x) then error("evaluate: a set must be a dataset or {input = tensor, target = tensor}", 0) end
  local n = x:size(1)
  local idx
  if sample and sample < n then                 -- a fixed sample: the same examples at every eval
    local seed, counter = core.rng_state()
    core.rng_state(0x5eed, 0)
    idx = core.randperm(n):narrow(1, 1, sample)
    core.rng_state(seed, counter)
    n = sample
  end
  local pos = 0
  local nb, bi = (n + bs - 1) // bs, 0
  return function()
    while pos < n and not mine(bi + 1) do pos, bi = pos + bs, bi + 1 end
    if pos >= n then return nil end
    bi = bi + 1
    local m = math.min(bs, n - pos)
    local xb, yb
    if idx then
      local ib = idx:narrow(1, pos + 1, m)
      xb, yb = x:index_select(1, ib), y and y:index_select(1, ib)
    else
      xb, yb = x:narrow(1, pos + 1, m), y and y:narrow(1, pos + 1, m)
    end
    local w = core.ones(m)
    if m < bs then                               -- pad to the full batch with weight 0
      local pad = bs - m
      local function padded(t, fill)
        local sh = t:shape()
        sh[1] = pad
        return core.cat({t, core.full(fill, sh, {dtype = t:dtype()})}, 1)
      end
      -- padded labels must still be valid class indices: integer labels pad with class 1
      local int_labels = yb and yb:dtype() ~= "float32" and yb:dtype() ~= "float64"
      xb, yb = padded(xb, 0), yb and padded(yb, int_labels and 1 or 0)
      w = padded(w, 0)
    end
    pos = pos + m
    return xb, yb, w, bi
  end, nb
end
M.batches = batches

local builtin = {}

function builtin.loss(out, y, w, ctx)
  local l = ctx.loss(out, y, w)
  local ws = w:sum():item()
  return l:item() * ws, ws
end

function builtin.accuracy(out, y, w)
  local hit = out:argmax(2):eq(y:reshape(-1)):float()
  return (hit * w):sum():item(), w:sum():item()
end

local function topk(k)
  return function(out, y, w)
    local n = out:size(1)
    local truth = out:gather(2, y:reshape(n, 1))
    local rank = out:gt(truth):float():sum(2):reshape(n)   -- classes scoring above the true one
    local hit = rank:lt(k):float()
    return (hit * w):sum():item(), w:sum():item()
  end
end

local Evaluator = {}
Evaluator.__index = Evaluator

--- metrics.evaluator{model, loss, metrics = {"loss", "accuracy", ...}, batch_size = 256,
--  sample = n, fields = {input =, target =, weight =}, forward = fn, predictions = {indices =}, dir =}
local EVALUATOR = {
  model = true, loss = true, metrics = "table", batch_size = "integer>=1", sample = "integer>=1",
  fields = {input = true, target = true, weight = true}, forward = "callable",
  predictions = {indices = "table", set = "string"}, dir = "string", shard = "table",
}
M.EVALUATOR_OPTIONS = EVALUATOR

function M.evaluator(o)
  util.check_options("metrics.evaluator", o, EVALUATOR, 2)
  o = o or {}
  local self = setmetatable({}, Evaluator)
  self.model, self.loss = o.model, o.loss
  self.batch_size = o.batch_size or 256
  self.sample = o.sample
  self.fields = o.fields or {input = "image", target = "label", weight = "weight"}
  self.forward = o.forward
  self.predictions = o.predictions
  self.dir = o.dir
  self.metrics = o.metrics or {"loss", "accuracy"}
  self.shard = o.shard                          -- several ranks: see batches() and finish_shard()
  for _, m in pairs(self.metrics) do
    if type(m) == "string" and not (builtin[m] or m == "per_class" or m:match("^top%d+$")) then
      error(string.format("evaluate: unknown metric '%s' (built in: loss, accuracy, topK, per_class; " ..
        "or pass a function)", m), 3)
    end
  end
  return self
end

-- (a local, not a method: nb and the tables come from Evaluator:run, never from a caller)
local function finish_shard(self, shard, nb, per_batch, sums, totals, per_total, per_correct)
  local names = {}
  for key, m in pairs(self.metrics) do
    local mname = type(key) == "string" and key or m
    if mname ~= "per_class" then names[#names + 1] = mname end
  end
  table.sort(names)
  if #names > 0 and nb > 0 then
    local flat = {}
    for k, mname in ipairs(names) do
      local pb = per_batch[mname] or {}
      for bi = 1, nb do
        local e = pb[bi]
        local base = (k - 1) * 3 * nb
        flat[base + bi] = e and e[1] or 0
        flat[base + nb + bi] = e and e[2] or 0
        flat[base + 2 * nb + bi] = e and 1 or 0
      end
    end
    local all = shard.sum(core.tensor(flat, {dtype = "float64"})):totable()
    for k, mname in ipairs(names) do
      local base = (k - 1) * 3 * nb
      for bi = 1, nb do
        if all[base + 2 * nb + bi] > 0 then
          sums[mname] = (sums[mname] or 0) + all[base + bi]
          totals[mname] = (totals[mname] or 0) + all[base + nb + bi]
        end
      end
    end
  end
  local wants_per_class = false
  for _, m in pairs(self.metrics) do if m == "per_class" then wants_per_class = true end end
  if wants_per_class then
    local c = math.tointeger(shard.max(per_total and #per_total or 0))
    if c > 0 then
      local flat = {}
      for k = 1, c do
        flat[k] = per_total and per_total[k] or 0
        flat[c + k] = per_correct and per_correct[k] or 0
      end
      local all = shard.sum(core.tensor(flat, {dtype = "float64"})):totable()
      per_total, per_correct = {}, {}
      for k = 1, c do per_total[k], per_correct[k] = all[k], all[c + k] end
    end
  end
  return per_total, per_correct
end

--- ev:run(name, set, step) --> table of metric values (per_class as {correct = {...}, total = {...}})
function Evaluator:run(name, set, step)
  local sums, totals = {}, {}
  local per_correct, per_total
  local pred_idx = self.predictions and self.predictions.indices
  local want = {}
  if pred_idx and (not self.predictions.set or self.predictions.set == name) then
    for _, i in ipairs(pred_idx) do want[i] = true end
  end
  local preds = {}
  local pos = 0
  local shard = self.shard
  local per_batch = shard and {} or nil         -- [mname] = {[bi] = {s, t}}
  local iter, nb = batches(set, self.batch_size, self.fields, self.sample, shard)
  local done, real = 0, 0                       -- real: the examples seen (not padding), counted for predictions
  for x, y, w, bi in iter, nb do
    if shard then pos = (bi - 1) * self.batch_size end
    local out = self.forward and self.forward(self.model, {[self.fields.input] = x, [self.fields.target] = y})
      or self.model(x)
    w = w and w:reshape(-1):float() or core.ones(out:size(1))
    for key, m in pairs(self.metrics) do
      local mname = type(key) == "string" and key or m
      local s, t
      if type(m) == "function" then s, t = m(out, y, w)
      elseif m == "per_class" then
        local c = out:size(2)
        local oh = core.one_hot(y:reshape(-1), c):float() * w:reshape(-1, 1)
        local hit = out:argmax(2):eq(y:reshape(-1)):float():reshape(-1, 1)
        local tot, cor = oh:sum(1):totable(), (oh * hit):sum(1):totable()
        per_total, per_correct = per_total or {}, per_correct or {}
        for k = 1, c do
          per_total[k] = (per_total[k] or 0) + tot[k]
          per_correct[k] = (per_correct[k] or 0) + cor[k]
        end
      elseif m:match("^top%d+$") then s, t = topk(tonumber(m:match("%d+")))(out, y, w)
      else s, t = builtin[m](out, y, w, self) end
      if s and per_batch then
        per_batch[mname] = per_batch[mname] or {}
        per_batch[mname][bi] = {s, t}
      elseif s then
        sums[mname] = (sums[mname] or 0) + s
        totals[mname] = (totals[mname] or 0) + t
      end
    end
    if next(want) then
      local n = out:size(1)
      local wl = w:totable()
      local am = out:argmax(2):totable()
      local probs = out:softmax(2)
      local yl = y and y:reshape(-1):totable()
      for r = 1, n do
        local idx = pos + r
        if wl[r] > 0 then real = real + 1 end
        if wl[r] > 0 and want[idx] then
          preds[#preds + 1] = {index = idx, label = yl and yl[r], prediction = am[r],
                               probabilities = json.array(probs:select(1, r):totable())}
        end
      end
      pos = pos + n
    end
    done = done + 1
    if self.on_batch then self.on_batch(name, bi or done, nb) end   -- dl.train's progress line
  end
  if shard then
    per_total, per_correct = finish_shard(self, shard, nb, per_batch, sums, totals, per_total, per_correct)
    preds = shard.gather(preds)
    table.sort(preds, function(a, b) return a.index < b.index end)
  end
  if next(want) then                            -- an index past the set would write nothing: an error
    local got, missing = {}, {}
    for _, p in ipairs(preds) do got[p.index] = true end
    for _, i in ipairs(pred_idx) do if not got[i] then missing[#missing + 1] = tostring(i) end end
    if #missing > 0 then
      error(string.format("evaluate: eval.predictions.indices names example%s %s, but the set %s has %s examples%s",
        #missing == 1 and "" or "s", table.concat(missing, ", "), name, shard and "fewer" or tostring(real),
        self.sample and " in its sample (sample = " .. self.sample .. ")" or ""), 0)
    end
  end
  local res = {}
  for k, s in pairs(sums) do res[k] = totals[k] > 0 and s / totals[k] or 0 / 0 end
  if per_total then
    local correct, total = json.array(), json.array()
    for k = 1, #per_total do
      correct[k], total[k] = math.floor(per_correct[k] + 0.5), math.floor(per_total[k] + 0.5)
    end
    res.per_class = {correct = correct, total = total}
  end
  if #preds > 0 and self.dir and (not shard or shard.lead) then
    fs.mkdir_p(self.dir .. "/predictions")
    fs.write_atomic(string.format("%s/predictions/%s-%09d.json", self.dir, name, step or 0),
      json.encode({set = name, step = step, predictions = preds}) .. "\n")
  end
  return res
end

-- several ranks: each filled per_batch for its own batches; one sum over ranks of
-- a [3 * metrics, nb] table (s, t and presence per batch; every entry has one
-- contributor) gives every rank all batches, which are then added in batch order
-- exactly as one process adds them. Per-class counts are integers: summed directly.


-- every exported function refuses extra arguments (util.strict)
util.strict_table("Evaluator:", Evaluator, true, {run = {"string", "table|function", "integer?"}})
util.strict_table("metrics.", M, false, {
  batches = {"table", "integer", "table?", "integer?", "table?"}, evaluator = {"table"},
})

return M
