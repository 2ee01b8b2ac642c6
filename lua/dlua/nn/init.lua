--- dl.nn: modules (layers and losses) built from tensor ops.
-- A module declares parameters with `self:parameter(t)` and submodules by
-- assigning them to fields (or listing them in a container); everything
-- else (parameter lists, dotted names, train/eval, state dicts) follows.
-- Layers written here are differentiable through the tensor autograd with
-- no backward code; Conv2d, pooling and attention call C kernels. The base class lives in
-- nn/module.lua, BatchNorm in nn/batchnorm.lua, the losses in nn/losses.lua, attention in
-- nn/attention.lua (all below this file).
local core = require "dlua.core"
local init = require "dlua.nn.init_fns"
local module = require "dlua.nn.module"
local BatchNorm = require "dlua.nn.batchnorm"
local losses = require "dlua.nn.losses"
local attention = require "dlua.nn.attention"
local util = require "dlua.util"

local M = {}

local Module = module.Module
M.Module = Module
local options, check_size = module.options, module.check_size
local is_tensor = util.is_tensor
M._options = options

-------------------------------------------------------------------- containers

local Sequential = Module:extend("Sequential", {init = {"table"}, add = {"module"}})
M.Sequential = Sequential

--- nn.Sequential{m1, m2, ...}: applies the modules in order; children are named 1, 2, ...
function Sequential:init(list)
  if type(list) ~= "table" or getmetatable(list) then
    error("Sequential: expected a list of modules", 3)
  end
  for i, m in ipairs(list) do
    if type(m) ~= "table" or not m._modules then
      error(string.format("Sequential: element %d is not a module", i), 3)
    end
    self[i] = m
  end
  rawset(self, "n", #list)
end

-- A ReLU followed by a MaxPool2d runs as the pool first: relu is nondecreasing, so
-- max(relu(x)) = relu(max(x)), and the backward sends each gradient to the same element
-- through the same mask, so values and gradients are bit-identical, while the ReLU and
-- its backward touch a quarter of the elements (a 2x2 pool). Only the exact classes: a
-- subclass may do more than it says.
local function pool_first(a, b)
  return getmetatable(a) == M.ReLU and getmetatable(b) == M.MaxPool2d
end

function Sequential:forward(x)
  local mods, i = self._modules, 1
  while i <= self.n do
    local m = mods[i]
    if pool_first(m, mods[i + 1]) then
      x = m(mods[i + 1](x))
      i = i + 2
    else
      x = m(x)
      i = i + 1
    end
  end
  return x
end

function Sequential:add(m)
  rawset(self, "n", self.n + 1)
  self[self.n] = m
  return self
end

local Residual = Module:extend("Residual", {init = {"callable", "callable?"}})
M.Residual = Residual

--- nn.Residual(f [, shortcut]): x -> f(x) + shortcut(x) (identity by default).
function Residual:init(f, shortcut)
  self.body = f
  if shortcut then self.shortcut = shortcut end
end

function Residual:forward(x)
  local s = self._modules.shortcut and self._modules.shortcut(x) or x
  return self.body(x) + s
end

-------------------------------------------------------------------- layers

local Linear = Module:extend("Linear", {init = {"number", "number", "table?"}})
M.Linear = Linear

--- nn.Linear(in, out [, {bias = true}]): y = x W^T + b, W is [out, in].
-- Default init (as PyTorch): W, b ~ U(-1/sqrt(in), 1/sqrt(in)).
function Linear:init(n_in, n_out, opts)
  n_in, n_out = check_size("Linear", "in_features", n_in), check_size("Linear", "out_features", n_out)
  opts = options("Linear", opts, {bias = true})
  self.in_features, self.out_features = n_in, n_out
  local bound = 1 / math.sqrt(n_in)
  self.weight = self:parameter(init.uniform(core.empty(n_out, n_in), -bound, bound))
  if opts.bias then self.bias = self:parameter(init.uniform(core.empty(n_out), -bound, bound)) end
end

function Linear:forward(x)
  local s = x:shape()
  if #s < 1 or s[#s] ~= self.in_features then
    error(string.format("Linear: input of shape [%s] does not end in %d features",
      table.concat(s, ", "), self.in_features), 2)
  end
  return core.linear(x, self.weight, self._params.bias)
end

function Linear:extra_repr() return string.format("%d -> %d", self.in_features, self.out_features) end

local Conv2d = Module:extend("Conv2d", {init = {"number", "number", "number|table", "table?"}})
M.Conv2d = Conv2d

local function pair(v) return type(v) == "table" and v or {v, v} end

--- nn.Conv2d(in, out, kernel [, {stride = 1, padding = 0, dilation = 1, groups = 1, bias = true}])
-- on [N, in, H, W]; kernel, stride, padding, dilation are a number or {h, w}.
-- Default init (as PyTorch): W, b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in/groups * kh * kw.
function Conv2d:init(n_in, n_out, kernel, opts)
  n_in, n_out = check_size("Conv2d", "in_channels", n_in), check_size("Conv2d", "out_channels", n_out)
  opts = options("Conv2d", opts, {stride = 1, padding = 0, dilation = 1, groups = 1, bias = true},
                 {stride = "number|table", padding = "number|table", dilation = "number|table", groups = "integer"})
  local k = pair(kernel)
  check_size("Conv2d", "kernel", k[1]); check_size("Conv2d", "kernel", k[2])
  if n_in % opts.groups ~= 0 or n_out % opts.groups ~= 0 then
    error(string.format("Conv2d: groups %d must divide in_channels %d and out_channels %d", opts.groups, n_in, n_out), 3)
  end
  rawset(self, "conv", {stride = opts.stride, padding = opts.padding, dilation = opts.dilation, groups = opts.groups})
  rawset(self, "desc", string.format("%d -> %d, %dx%d", n_in, n_out, k[1], k[2]))
  local fan_in = n_in // opts.groups * k[1] * k[2]
  local bound = 1 / math.sqrt(fan_in)
  self.weight = self:parameter(init.uniform(core.empty(n_out, n_in // opts.groups, k[1], k[2]), -bound, bound))
  if opts.bias then self.bias = self:parameter(init.uniform(core.empty(n_out), -bound, bound)) end
end

function Conv2d:forward(x)
  if self._params.bias then return core.conv2d(x, self.weight, self._params.bias, self.conv) end
  return core.conv2d(x, self.weight, self.conv)
end

function Conv2d:extra_repr() return self.desc end

local function pool_class(name, fn)
  local cls = Module:extend(name, {init = {"number|table", "table?"}})
  --- nn.MaxPool2d(kernel [, {stride = kernel, padding = 0}]) and nn.AvgPool2d alike
  function cls:init(kernel, opts)
    opts = options(name, opts, {stride = false, padding = 0}, {stride = "number|table", padding = "number|table"})
    rawset(self, "kernel", kernel)
    rawset(self, "opts", {stride = opts.stride or nil, padding = opts.padding})
  end
  function cls:forward(x) return core[fn](x, self.kernel, self.opts) end
  function cls:extra_repr() return tostring(type(self.kernel) == "table" and table.concat(self.kernel, "x") or self.kernel) end
  M[name] = cls
end
pool_class("MaxPool2d", "max_pool2d")
pool_class("AvgPool2d", "avg_pool2d")

local AdaptiveAvgPool2d = Module:extend("AdaptiveAvgPool2d", {init = {"number|table?"}})
M.AdaptiveAvgPool2d = AdaptiveAvgPool2d
--- nn.AdaptiveAvgPool2d(1): global average pooling [N, C, H, W] -> [N, C, 1, 1]
-- (output sizes other than 1 divide H and W evenly: an AvgPool2d with kernel = stride = H/out).
function AdaptiveAvgPool2d:init(out) rawset(self, "out", pair(out or 1)) end
function AdaptiveAvgPool2d:forward(x)
  local s = x:shape()
  if #s ~= 4 then error(string.format("AdaptiveAvgPool2d: input [%s] must be [N, C, H, W]", table.concat(s, ", ")), 2) end
  if self.out[1] == 1 and self.out[2] == 1 then return x:mean({3, 4}, true) end
  if s[3] % self.out[1] ~= 0 or s[4] % self.out[2] ~= 0 then
    error(string.format("AdaptiveAvgPool2d: %dx%d does not divide into %dx%d", s[3], s[4], self.out[1], self.out[2]), 2)
  end
  local k = {s[3] // self.out[1], s[4] // self.out[2]}
  return core.avg_pool2d(x, k, {stride = k})
end

local function activation(name, method)
  local cls = Module:extend(name)
  cls.forward = function(_, x) return x[method](x) end
  M[name] = cls
end
activation("ReLU", "relu")
activation("GELU", "gelu")
activation("Tanh", "tanh")
activation("Sigmoid", "sigmoid")

local Softmax = Module:extend("Softmax", {init = {"integer?"}})
M.Softmax = Softmax
function Softmax:init(dim) rawset(self, "dim", dim or -1) end
function Softmax:forward(x) return x:softmax(self.dim) end

local Flatten = Module:extend("Flatten")
M.Flatten = Flatten
--- nn.Flatten(): [N, ...] -> [N, prod(...)]
function Flatten:forward(x)
  if x:dim() < 2 then return x end
  return x:flatten(2)
end

local Dropout = Module:extend("Dropout", {init = {"number?"}})
M.Dropout = Dropout
--- nn.Dropout(p): zeroes elements with probability p in training and scales the
-- rest by 1/(1-p) (inverted dropout); the identity in eval mode. Masks come from
-- the default seeded stream (dl.seed).
function Dropout:init(p)
  p = p or 0.5
  if type(p) ~= "number" or p < 0 or p >= 1 then error("Dropout: p must be in [0, 1), got " .. tostring(p), 3) end
  rawset(self, "p", p)
end
function Dropout:forward(x)
  if not self.training or self.p == 0 then return x end
  local keep = core.rand(x:shape()):ge(self.p):to(x:dtype())
  return x * keep:scale(1 / (1 - self.p))
end
function Dropout:extra_repr() return "p=" .. self.p end

local Embedding = Module:extend("Embedding", {init = {"number", "number"}})
M.Embedding = Embedding
--- nn.Embedding(n, dim): looks up rows of a [n, dim] table by 1-based ids; weight ~ N(0, 1).
function Embedding:init(n, dim)
  n, dim = check_size("Embedding", "num_embeddings", n), check_size("Embedding", "dim", dim)
  self.weight = self:parameter(core.randn(n, dim))
end
function Embedding:forward(ids)
  local s = ids:shape()
  local flat = ids:reshape(-1)
  local out = self.weight:index_select(1, flat)
  s[#s + 1] = self.weight:size(2)
  return out:reshape(s)
end

local LayerNorm = Module:extend("LayerNorm", {init = {"number", "table?"}})
M.LayerNorm = LayerNorm
--- nn.LayerNorm(n [, {eps = 1e-5, affine = true}]): normalises the last dim.
function LayerNorm:init(n, opts)
  n = check_size("LayerNorm", "size", n)
  opts = options("LayerNorm", opts, {eps = 1e-5, affine = true})
  rawset(self, "size", n)
  rawset(self, "eps", opts.eps)
  if opts.affine then
    self.weight = self:parameter(core.ones(n))
    self.bias = self:parameter(core.zeros(n))
  end
end
function LayerNorm:forward(x)
  local s = x:shape()
  if s[#s] ~= self.size then
    error(string.format("LayerNorm: input of shape [%s] does not end in %d", table.concat(s, ", "), self.size), 2)
  end
  local mu = x:mean(-1, true)
  local xc = x - mu
  local y = xc * (xc:square():mean(-1, true) + self.eps):rsqrt()
  if self._params.weight then y = y * self._params.weight + self._params.bias end
  return y
end

-------------------------------------------------------------------- attention

-- MultiheadAttention, TransformerEncoderLayer (nn/attention.lua), built on the layers above
for name, cls in pairs(attention{Linear = Linear, LayerNorm = LayerNorm, Dropout = Dropout, ReLU = M.ReLU,
  GELU = M.GELU}) do M[name] = cls end

-------------------------------------------------------------------- losses

-- CrossEntropy, NLL, BCEWithLogits, MSE, Huber, SmoothL1 (nn/losses.lua)
for name, cls in pairs(losses) do M[name] = cls end

local function shape_str(t) return "[" .. table.concat(t:shape(), ", ") .. "]" end

-------------------------------------------------------------------- metrics

--- accuracy(logits, labels [, weights]) -> fraction of argmax == label (weighted);
-- logits [N, C], labels and weights [N].
function M.accuracy(logits, labels, weights)
  if not is_tensor(logits) or logits:dim() ~= 2 then
    error(string.format("accuracy: logits must be [N, C], got %s",
      is_tensor(logits) and shape_str(logits) or type(logits)), 2)
  end
  local n = logits:size(1)
  if not is_tensor(labels) or labels:dim() ~= 1 or labels:size(1) ~= n then
    error(string.format("accuracy: labels %s must be [%d], one per row of the logits %s",
      is_tensor(labels) and shape_str(labels) or type(labels), n, shape_str(logits)), 2)
  end
  if weights and (not is_tensor(weights) or weights:dim() ~= 1 or weights:size(1) ~= n) then
    error(string.format("accuracy: weights %s must be [%d], one per row of the logits %s",
      is_tensor(weights) and shape_str(weights) or type(weights), n, shape_str(logits)), 2)
  end
  local hit = logits:argmax(2):eq(labels):float()
  if weights then
    local w = weights:float()
    return (hit * w):sum():item() / math.max(w:sum():item(), 1e-12)
  end
  return hit:mean():item()
end

M.init = init
M.BatchNorm = BatchNorm
M.sync_batchnorm = BatchNorm.sync_all

-- every exported function refuses extra arguments (util.strict)
util.strict_table("nn.", M, false, {
  _options = {"string", "any?", "table", "table?"}, accuracy = {"tensor", "tensor", "tensor?"}, sync_batchnorm = {"module"},
})

return M
