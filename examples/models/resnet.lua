--- examples/models/resnet.lua: a reference ResNet family (ResNet-18-style basic blocks)
-- whose depth, width and normalisation come from an hp table.
--
--   local resnet = dofile("examples/models/resnet.lua")
--   local model = resnet.build{stages = {2, 2, 2, 2}, width = 64, norm = "batch"}  -- ResNet-18 layout
--   local logits = model(x)                      -- x is [N, in_channels, H, W]
--
-- Layout: stem, then one stage per entry of hp.stages (stage i has stages[i] basic
-- blocks of width * 2^(i-1) channels; stages after the first start with a stride-2
-- block), then global average pooling and a Linear head.
--
-- A basic block is two 3x3 convolutions with a shortcut:
--   pre-norm (default, He et al. 2016 "identity mappings"):
--     y = shortcut(x) + conv(relu(norm(conv(relu(norm(x))))))   -- x + f(Norm(x))
--     the network ends in norm -> relu before the pool; the small stem is a bare conv
--   post-norm (hp.post_norm = true, the original ResNet):
--     y = relu(shortcut(x) + norm(conv(relu(norm(conv(x))))))
--     the small stem is conv -> norm -> relu
--   the "imagenet" stem is conv7x7/2 -> norm -> relu -> maxpool3x3/2 in both forms
-- The shortcut is the identity, or a 1x1 conv with the block's stride when the
-- channels or the resolution change (followed by a norm in the post-norm form; the
-- pre-norm form projects x itself, keeping norms off the shortcut path).
-- hp.zero_init zeroes the last layer of each branch (the second conv in pre-norm;
-- the last norm's scale in post-norm, or the conv when norm = "none"), so every
-- block with an identity shortcut starts as the identity.
--
-- hp.norm: "batch" (nn.BatchNorm, looked up when the model is built), "layer" (a
-- channel LayerNorm, M.ChannelLayerNorm: at every position (n, h, w) the C values are
-- normalised, with a per-channel scale and shift), or "none" (convs then get biases).
-- It does not do bottleneck blocks (ResNet-50 and up).
local dl = require "dlua"
local nn = dl.nn

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local hparams = dofile(here .. "hp.lua")
local rules = hparams.rules

local M = {}

--- The defaults: ResNet-18 (stages {2, 2, 2, 2}, width 64) on 1-channel 28x28 images
-- with the small (CIFAR-style) stem.
M.defaults = {
  in_channels = 1,         -- input channels
  classes = 10,            -- logits
  stages = {2, 2, 2, 2},   -- basic blocks per stage ({2, 2, 2, 2}: ResNet-18, {3, 4, 6, 3}: ResNet-34)
  width = 64,              -- channels of the stem and the first stage (doubling per stage)
  stem = "small",          -- "small": conv3x3 stride 1; "imagenet": conv7x7 stride 2 + maxpool3x3 stride 2
  norm = "batch",          -- "batch" | "layer" | "none"
  post_norm = false,       -- false: pre-norm blocks x + f(Norm(x)); true: the classic post-norm block
  zero_init = false,       -- zero the last layer of each residual branch (blocks start as identity)
  init = "kaiming",        -- conv weights: "kaiming" (He normal, fan_in) | "default" (Conv2d's own)
  norm_eps = 1e-5,         -- epsilon of the norm layers
  bn_momentum = false,     -- BatchNorm momentum (false: nn.BatchNorm's default)
  virtual_batch = false,   -- BatchNorm ghost-batch size (false: the whole batch)
}

M.checks = {
  in_channels = rules.positive, classes = rules.positive, stages = rules.list_of(rules.positive),
  width = rules.positive, stem = rules.one_of{"small", "imagenet"},
  norm = rules.one_of{"batch", "layer", "none"}, post_norm = rules.boolean, zero_init = rules.boolean,
  init = rules.one_of{"kaiming", "default"}, norm_eps = rules.positive_number,
  bn_momentum = rules.optional(rules.positive_number), virtual_batch = rules.optional(rules.positive),
}

-------------------------------------------------------------------- ChannelLayerNorm

local ChannelLayerNorm = nn.Module:extend("ChannelLayerNorm")
M.ChannelLayerNorm = ChannelLayerNorm

--- ChannelLayerNorm(C [, {eps = 1e-5}]) on [N, C, H, W]: each position's C values are
-- normalised to mean 0, variance 1 (population variance), then scaled by weight[c]
-- and shifted by bias[c] (weight 1, bias 0 at init). Written from tensor ops.
function ChannelLayerNorm:init(c, opts)
  opts = nn._options("ChannelLayerNorm", opts, {eps = 1e-5})
  rawset(self, "channels", c)
  rawset(self, "eps", opts.eps)
  self.weight = self:parameter(dl.ones(c))
  self.bias = self:parameter(dl.zeros(c))
end

function ChannelLayerNorm:forward(x)
  local s = x:shape()
  local c = self.channels
  if #s ~= 4 or s[2] ~= c then
    error(string.format("ChannelLayerNorm: input [%s] must be [N, %d, H, W]", table.concat(s, ", "), c), 2)
  end
  -- The means over C are taken as a [1, C] averaging row times [N, C, H*W] (a batched
  -- matmul) rather than x:mean(2): a reduction over a middle dimension is the engine's
  -- slow strided path today, and this is about 1.7x faster forward + backward.
  local h = x:reshape(s[1], c, -1)                         -- [N, C, HW]
  local avg = dl.full(1 / c, 1, c)                         -- [1, C]
  local xc = h - avg:matmul(h)                             -- minus the mean [N, 1, HW]
  local y = xc * (avg:matmul(xc:square()) + self.eps):rsqrt()
  return (y * self.weight:reshape(1, c, 1) + self.bias:reshape(1, c, 1)):reshape(s)
end

function ChannelLayerNorm:extra_repr() return tostring(self.channels) end

-- its ONNX export (dl.onnx.export): normalised over the channel axis, then the per-channel
-- scale and shift as [C, 1, 1] constants
dl.onnx.register(ChannelLayerNorm, function(g, m, x)
  local c = m.channels
  local y = g:node("Mul", {g:layer_norm(x, {1}, m.eps), g:const(m.weight:reshape(c, 1, 1), "weight")})
  return g:node("Add", {y, g:const(m.bias:reshape(c, 1, 1), "bias")})
end)

-------------------------------------------------------------------- building blocks

local function norm_factory(hp)
  if hp.norm == "none" then return nil end
  if hp.norm == "layer" then
    return function(c) return ChannelLayerNorm(c, {eps = hp.norm_eps}) end
  end
  local BatchNorm = nn.BatchNorm            -- resolved now: it may land after this file was loaded
  if not BatchNorm then
    error("resnet: hp.norm = 'batch' needs nn.BatchNorm, which this dlua does not have yet" ..
      " (use norm = 'layer' or 'none')", 3)
  end
  local bn_opts = {eps = hp.norm_eps}
  if hp.bn_momentum then bn_opts.momentum = hp.bn_momentum end
  if hp.virtual_batch then bn_opts.virtual_batch = hp.virtual_batch end
  return function(c) return BatchNorm(c, bn_opts) end
end

local function zero_(t) dl.no_grad(function() t:zero_() end) end

-- zeroes the scale of a norm layer or the weight (and bias) of a conv
local function zero_layer(m)
  local w = m._params.weight
  if not w then
    error(string.format("resnet: zero_init: %s has no 'weight' parameter to zero", getmetatable(m).__name), 4)
  end
  zero_(w)
  if getmetatable(m) == nn.Conv2d and m._params.bias then zero_(m._params.bias) end
end

local function conv(hp, cin, cout, k, stride)
  local c = nn.Conv2d(cin, cout, k, {stride = stride, padding = k // 2, bias = hp.norm == "none"})
  if hp.init == "kaiming" then nn.init.kaiming_normal(c.weight) end
  return c
end

--- One basic block from cin to cout channels with the given stride (1 or 2).
-- Returns an nn.Residual (pre-norm) or nn.Sequential{nn.Residual, nn.ReLU} (post-norm).
local function basic_block(hp, norm, cin, cout, stride)
  local body, shortcut = {}, nil
  local project = stride ~= 1 or cin ~= cout
  if not hp.post_norm then
    if norm then body[#body + 1] = norm(cin) end
    body[#body + 1] = nn.ReLU()
    body[#body + 1] = conv(hp, cin, cout, 3, stride)
    if norm then body[#body + 1] = norm(cout) end
    body[#body + 1] = nn.ReLU()
    body[#body + 1] = conv(hp, cout, cout, 3, 1)
    if project then shortcut = conv(hp, cin, cout, 1, stride) end
  else
    body[#body + 1] = conv(hp, cin, cout, 3, stride)
    if norm then body[#body + 1] = norm(cout) end
    body[#body + 1] = nn.ReLU()
    body[#body + 1] = conv(hp, cout, cout, 3, 1)
    if norm then body[#body + 1] = norm(cout) end
    if project then
      shortcut = norm and nn.Sequential{conv(hp, cin, cout, 1, stride), norm(cout)} or conv(hp, cin, cout, 1, stride)
    end
  end
  if hp.zero_init then zero_layer(body[#body]) end
  local block = nn.Residual(nn.Sequential(body), shortcut)
  if hp.post_norm then return nn.Sequential{block, nn.ReLU()} end
  return block
end
M.basic_block = basic_block

--- Builds the network: nn.Sequential{stem, stage 1, ..., stage S, head}, where the
-- stem, each stage and the head are nn.Sequentials (parameter names such as
-- "2.1.body.3.weight": stage 1, block 1, third layer of the branch). hp overrides
-- M.defaults; unknown keys raise unless opts.strict == false. The resolved table is
-- kept as model.hp.
function M.build(hp, opts)
  hp = hparams.resolve("resnet", M.defaults, M.checks, hp, opts)
  local norm = norm_factory(hp)

  local stem = {}
  if hp.stem == "small" then
    stem[1] = conv(hp, hp.in_channels, hp.width, 3, 1)
  else
    stem[1] = conv(hp, hp.in_channels, hp.width, 7, 2)
  end
  if hp.post_norm or hp.stem == "imagenet" then
    if norm then stem[#stem + 1] = norm(hp.width) end
    stem[#stem + 1] = nn.ReLU()
  end
  if hp.stem == "imagenet" then stem[#stem + 1] = nn.MaxPool2d(3, {stride = 2, padding = 1}) end

  local layers = {nn.Sequential(stem)}
  local cin = hp.width
  for i, blocks in ipairs(hp.stages) do
    local cout = hp.width << (i - 1)
    local stage = {}
    for b = 1, blocks do
      stage[b] = basic_block(hp, norm, cin, cout, (b == 1 and i > 1) and 2 or 1)
      cin = cout
    end
    layers[#layers + 1] = nn.Sequential(stage)
  end

  local head = {}
  if not hp.post_norm then
    if norm then head[#head + 1] = norm(cin) end
    head[#head + 1] = nn.ReLU()
  end
  head[#head + 1] = nn.AdaptiveAvgPool2d(1)
  head[#head + 1] = nn.Flatten()
  head[#head + 1] = nn.Linear(cin, hp.classes)
  layers[#layers + 1] = nn.Sequential(head)

  local model = nn.Sequential(layers)
  rawset(model, "hp", hp)
  return model
end

return M
