--- dl.nn.BatchNorm: batch normalisation with ghost batches, replicas and
-- moving averages that are synchronised before they are used or saved.
-- The numerical work is one C op (dl.batch_norm, engine/ops/batchnorm.c); this
-- file holds the module: its options, parameters and buffers, and the
-- synchronisation of the moving averages across replicas (and, through the
-- hook BatchNorm.set_rank_mean installs, across ranks). See docs/batchnorm.md.
local core = require "dlua.core"
local util = require "dlua.util"
local module = require "dlua.nn.module"

local BatchNorm = module.Module:extend("BatchNorm", {init = {"number", "table?"}})

local function shape_str(t) return "[" .. table.concat(t:shape(), ", ") .. "]" end

local function positive_int(what, v)
  local why, n = util.integer_problem(v, 1)
  if why then error(string.format("BatchNorm: %s %s", what, why), 4) end
  return n
end

--- nn.BatchNorm(C [, {virtual_batch = false, sync = false, momentum = 0.1, eps = 1e-5,
-- affine = true, replicas = 1}]): normalises [N, C] or [N, C, H, W] per channel.
-- Training normalises each statistics group with its batch mean and biased variance and
-- updates running = (1 - momentum) * running + momentum * stat (stat: the mean over the
-- replica's groups of the group means, and of the unbiased group variances); evaluation
-- uses the mean over replicas of the running averages.
-- virtual_batch = k: groups of k consecutive examples per replica; the last group also
-- takes the N mod k remaining ones (200 with k = 64: 64, 64, 72); a shard of fewer than k
-- examples is one group. replicas = R: the batch is R equal shards, each with its own
-- moving averages (running_mean, running_var are [R, C] when R > 1). sync = true: group g
-- of every replica shares one mean and variance.
-- @usage local bn = nn.BatchNorm(32, {virtual_batch = 64})
function BatchNorm:init(C, opts)
  C = positive_int("num_features", C)
  opts = module.options("BatchNorm", opts, {virtual_batch = false, sync = false, momentum = 0.1, eps = 1e-5,
                                         affine = true, replicas = 1}, {virtual_batch = "number|boolean", sync = "boolean"})
  local vb = opts.virtual_batch
  if vb ~= false then vb = positive_int("virtual_batch", vb) end
  local R = positive_int("replicas", opts.replicas)
  if type(opts.momentum) ~= "number" or opts.momentum < 0 or opts.momentum > 1 then
    error("BatchNorm: momentum must be a number in [0, 1], got " .. tostring(opts.momentum), 3)
  end
  if type(opts.eps) ~= "number" or opts.eps <= 0 then
    error("BatchNorm: eps must be a positive number, got " .. tostring(opts.eps), 3)
  end
  if type(opts.sync) ~= "boolean" or type(opts.affine) ~= "boolean" then
    error("BatchNorm: sync and affine must be booleans", 3)
  end
  rawset(self, "num_features", C)
  rawset(self, "replicas", R)
  rawset(self, "opts", {virtual_batch = vb, sync = opts.sync, momentum = opts.momentum, eps = opts.eps,
                        replicas = R, training = true})
  if opts.affine then
    self.weight = self:parameter(core.ones(C))
    self.bias = self:parameter(core.zeros(C))
  end
  local shape = R == 1 and {C} or {R, C}
  self.running_mean = self:buffer(core.zeros(shape))
  self.running_var = self:buffer(core.ones(shape))
  self.num_batches_tracked = self:buffer(core.tensor(0, {dtype = "int64"}))
end

function BatchNorm:forward(x)
  local s = x:shape()
  if #s ~= 2 and #s ~= 4 then
    error(string.format("BatchNorm: input %s must be [N, C] or [N, C, H, W]", shape_str(x)), 2)
  end
  if s[2] ~= self.num_features then
    error(string.format("BatchNorm: input %s has %d channels but running_mean %s has %d",
      shape_str(x), s[2], shape_str(self.running_mean), self.num_features), 2)
  end
  if self.training and s[1] % self.replicas ~= 0 then
    error(string.format("BatchNorm: a batch of %d examples (input %s) does not split into %d equal replicas",
      s[1], shape_str(x), self.replicas), 2)
  end
  local o = self.opts
  o.training = self.training
  o.running_mean, o.running_var = self.running_mean, self.running_var
  local y = core.batch_norm(x, self._params.weight, self._params.bias, o)
  o.running_mean, o.running_var = nil, nil
  if self.training then
    local n = self.num_batches_tracked
    n:fill_(n:item() + 1)
  end
  return y
end

-- the hook averaging across ranks: nil (one process) or fn(t) -> the mean of t over ranks
local rank_mean = nil

--- BatchNorm.set_rank_mean(fn) -> the previous hook: fn(t) takes a float32 or float64 tensor
-- and returns its mean over all ranks; nil removes the hook (one process). The
-- data-parallel layer of dl.train installs it (train/data_parallel.lua), since
-- this layer sits below the collectives' users and must not call up to them.
-- @usage nn.BatchNorm.set_rank_mean(function(t) return dl.dist.allreduce(t, "mean") end)
function BatchNorm.set_rank_mean(fn)
  if fn ~= nil and type(fn) ~= "function" then
    error("BatchNorm.set_rank_mean: expected a function or nil, got " .. type(fn), 2)
  end
  local prev = rank_mean
  rank_mean = fn
  return prev
end

--- Replaces every replica's running_mean and running_var by the mean over replicas
-- (and over ranks when a rank_mean hook is set), so evaluation and checkpoints see
-- one set of averages, never replica 0's alone. Returns self.
-- @usage bn:sync_moving_averages()
function BatchNorm:sync_moving_averages()
  local hook = rank_mean
  if self.replicas == 1 and not hook then return self end
  local prev = core.set_grad_enabled(false)
  for _, name in ipairs({"running_mean", "running_var"}) do
    local t = self[name]
    local avg = self.replicas > 1 and t:mean(1) or t:clone()
    if hook then avg = hook(avg) end
    t:copy_(avg)                                 -- broadcast over the replica rows
  end
  core.set_grad_enabled(prev)
  return self
end

function BatchNorm:extra_repr()
  local o, parts = self.opts, {tostring(self.num_features)}
  if o.virtual_batch then parts[#parts + 1] = "virtual_batch=" .. o.virtual_batch end
  if self.replicas > 1 then parts[#parts + 1] = "replicas=" .. self.replicas end
  if o.sync then parts[#parts + 1] = "sync" end
  return table.concat(parts, ", ")
end

--- nn.sync_batchnorm(model): calls sync_moving_averages on every BatchNorm in the model
-- (the training loop does this before every eval and every checkpoint); returns how many.
-- @usage nn.sync_batchnorm(model); local sd = model:state_dict()
function BatchNorm.sync_all(model)
  local count = 0
  local function visit(m)
    if m.sync_moving_averages then             -- BatchNorm and its subclasses
      m:sync_moving_averages()
      count = count + 1
    end
    for _, k in ipairs(m._order) do
      if m._modules[k] then visit(m._modules[k]) end
    end
  end
  visit(model)
  return count
end

return BatchNorm
