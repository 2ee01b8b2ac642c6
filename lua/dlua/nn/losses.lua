--- dlua.nn.losses: the loss modules, exported by dl.nn. CrossEntropy and NLL
-- take class scores [N, C] and 1-based labels [N]; BCEWithLogits, MSE, Huber and
-- SmoothL1 compare an input with a target of the same shape, elementwise. Every
-- loss takes `reduction = "mean" | "sum" | "none"` (torch's three): the mean over
-- examples (elements), their sum, or the per-example (per-element) losses.
-- Class weights and label smoothing combine as torch combines them (the smoothing
-- term weighted per class, the mean taken over the weights of the labels).
local core = require "dlua.core"
local autograd = require "dlua.nn.autograd"
local module = require "dlua.nn.module"
local util = require "dlua.util"

local M = {}

local Module, options = module.Module, module.options
local is_tensor = util.is_tensor

local function shape_str(t) return "[" .. table.concat(t:shape(), ", ") .. "]" end

local REDUCTIONS = {mean = true, sum = true, none = true}

-- opts.reduction checked (an error at the constructor's caller: init -> constructor -> caller)
local function check_reduction(name, opts)
  if not REDUCTIONS[opts.reduction] then
    error(string.format("%s: reduction must be 'mean', 'sum' or 'none', got '%s'", name, tostring(opts.reduction)), 4)
  end
  return opts.reduction
end

-- a class-weight option: false, or a 1-d float tensor of non-negative weights
local function check_class_weight(name, w)
  if not w then return false end
  if w:dim() ~= 1 or not (w:dtype() == "float32" or w:dtype() == "float64") then
    error(string.format("%s: weight must be a 1-d float tensor of class weights, got %s %s", name, w:dtype(),
      shape_str(w)), 4)
  end
  if w:numel() > 0 and w:min():item() < 0 then error(name .. ": class weights must be non-negative", 4) end
  return w
end

local function reduce(loss, reduction)
  if reduction == "sum" then return loss:sum() end
  if reduction == "none" then return loss end
  return loss:mean()
end

-- labels must be [N] (one per row of the scores) and each in [1, classes]; an
-- error names the loss, the first label out of range and its position in the batch
local function check_labels(name, labels, n, c, level)
  if not is_tensor(labels) then
    error(string.format("%s: labels must be a tensor, got %s", name, type(labels)), level + 1)
  end
  if labels:dim() ~= 1 or labels:size(1) ~= n then
    error(string.format("%s: labels %s must be [%d], one per row of the logits [%d, %d]", name,
      shape_str(labels), n, n, c), level + 1)
  end
  if n == 0 then return end
  local lo, hi = labels:min():item(), labels:max():item()
  if lo >= 1 and hi <= c then return end
  for i, v in ipairs(labels:totable()) do
    if not (v >= 1 and v <= c) then
      local hint = ""
      if v == 0 then
        hint = " (class labels are 1-based; labels stored 0-based, as in most CSV and NumPy files, are read " ..
          "with zero_based, e.g. data.csv{..., zero_based = {\"label\"}}, or shifted with labels + 1)"
      end
      error(string.format("%s: label %s at position %d of the batch is outside [1, %d]%s", name,
        math.tointeger(v) or tostring(v), i, c, hint), level + 1)
    end
  end
end

local function check_scores(name, what, x)
  if not is_tensor(x) or x:dim() ~= 2 then
    error(string.format("%s: %s must be [N, C], got %s", name, what, is_tensor(x) and shape_str(x) or type(x)), 3)
  end
end

-- The negative log-likelihood of logp [N, C] at labels [N], per example, with class weights
-- self.weight and label smoothing eps; reduced over examples, weighted by weights [N] if given.
-- The mean divides by the weights the examples carry: sum of weights[i] * class_weight[label i].
-- (called in tail position from forward, which Module's __call tail-calls: level 2 is the user)
local function nll_loss(self, name, logp, labels, weights, eps)
  local n, c = logp:size(1), logp:size(2)
  check_labels(name, labels, n, c, 2)
  local nll = -logp:gather(2, labels:reshape(n, 1)):reshape(n)
  local cw, wy = self.weight, nil
  if cw then
    if cw:size(1) ~= c then
      error(string.format("%s: weight [%d] has one weight per class, but the logits %s have %d classes", name,
        cw:size(1), shape_str(logp), c), 2)
    end
    cw = cw:to(logp:dtype())
    wy = cw:index_select(1, labels)
    nll = nll * wy
  end
  if eps > 0 then
    if cw then  -- (1 - eps) w_y nll + eps / C * sum_c w_c (-log p_c)
      nll = nll:scale(1 - eps) - (logp * cw):sum(2):scale(eps / c)
    else
      nll = nll:scale(1 - eps) - logp:mean(2):scale(eps)
    end
  end
  local r = self.reduction
  if weights then
    if not is_tensor(weights) or weights:dim() ~= 1 or weights:size(1) ~= n then
      error(string.format("%s: weights %s must be [%d], one per row of the logits [%d, %d]", name,
        is_tensor(weights) and shape_str(weights) or type(weights), n, n, c), 2)
    end
    local w = weights:to(logp:dtype())
    if r == "none" then return nll * w end
    if r == "sum" then return (nll * w):sum() end
    return (nll * w):sum() / (wy and w * wy or w):sum():clamp(1e-12)
  end
  if r == "mean" and wy then return nll:sum() / wy:sum() end
  return reduce(nll, r)
end

-------------------------------------------------------------------- CrossEntropy, NLL

local CrossEntropy = Module:extend("CrossEntropy", {init = {"table?"}})
M.CrossEntropy = CrossEntropy

--- nn.CrossEntropy([{label_smoothing = 0, weight = nil, reduction = "mean"}]):
-- loss(logits [N, C], labels [N] 1-based [, weights [N]]). weight: class weights [C].
-- The mean is over examples, or over the weight sum when weights or class weights are
-- given, so weight-0 (padding) examples contribute nothing.
function CrossEntropy:init(opts)
  opts = options("CrossEntropy", opts, {label_smoothing = 0, weight = false, reduction = "mean"},
                 {weight = "tensor", reduction = "string"})
  if opts.label_smoothing < 0 or opts.label_smoothing >= 1 then
    error("CrossEntropy: label_smoothing must be in [0, 1)", 3)
  end
  rawset(self, "smoothing", opts.label_smoothing)
  rawset(self, "reduction", check_reduction("CrossEntropy", opts))
  rawset(self, "weight", check_class_weight("CrossEntropy", opts.weight))
end

function CrossEntropy:forward(logits, labels, weights)
  check_scores("CrossEntropy", "logits", logits)
  return nll_loss(self, "CrossEntropy", logits:log_softmax(2), labels, weights, self.smoothing)
end

local NLL = Module:extend("NLL", {init = {"table?"}})
M.NLL = NLL

--- nn.NLL([{weight = nil, reduction = "mean"}]): loss(logp [N, C], labels [N] 1-based
-- [, weights [N]]) = -logp[i, label i], on log-probabilities (log_softmax's output):
-- CrossEntropy is log_softmax then NLL.
function NLL:init(opts)
  opts = options("NLL", opts, {weight = false, reduction = "mean"}, {weight = "tensor", reduction = "string"})
  rawset(self, "reduction", check_reduction("NLL", opts))
  rawset(self, "weight", check_class_weight("NLL", opts.weight))
end

function NLL:forward(logp, labels, weights)
  check_scores("NLL", "log-probabilities", logp)
  return nll_loss(self, "NLL", logp, labels, weights, 0)
end

-------------------------------------------------------------------- elementwise losses

-- input and target tensors of one shape (no broadcasting: [4, 1] against [4] would
-- silently compare every input with every target)
local function check_pair(name, input, target)
  if not is_tensor(input) or not is_tensor(target) then
    error(string.format("%s: input and target must be tensors, got %s and %s", name,
      is_tensor(input) and "a tensor" or type(input), is_tensor(target) and "a tensor" or type(target)), 3)
  end
  local a, b = input:shape(), target:shape()
  local same = #a == #b
  for i = 1, #a do same = same and a[i] == b[i] end
  if not same then
    error(string.format("%s: input %s and target %s differ in shape", name, shape_str(input), shape_str(target)), 3)
  end
end

local MSE = Module:extend("MSE", {init = {"table?"}})
M.MSE = MSE
--- nn.MSE([{reduction = "mean"}]): (input - target)^2, reduced over every element;
-- input and target must have the same shape.
-- @usage nn.MSE()(model(x), y)
function MSE:init(opts)
  opts = options("MSE", opts, {reduction = "mean"}, {reduction = "string"})
  rawset(self, "reduction", check_reduction("MSE", opts))
end
function MSE:forward(input, target)
  check_pair("MSE", input, target)
  return reduce((input - target):square(), self.reduction)
end

-- 0.5 d^2 / beta where |d| < beta, |d| - beta / 2 elsewhere (L1 for beta = 0)
local function smooth_l1(input, target, beta)
  local d = input - target
  local ad = d:abs()
  if beta == 0 then return ad end
  return core.where(ad:lt(beta), d:square():scale(0.5 / beta), ad:scale(1, -0.5 * beta))
end

local function width_class(name, key, lo_ok)
  local cls = Module:extend(name, {init = {"table?"}})
  function cls:init(opts)
    opts = options(name, opts, {[key] = 1.0, reduction = "mean"}, {reduction = "string"})
    local v = opts[key]
    if not (v > 0 or (lo_ok and v == 0)) or v == math.huge then
      error(string.format("%s: %s must be %s, got %s", name, key, lo_ok and "finite and >= 0" or "finite and > 0",
        tostring(v)), 3)
    end
    rawset(self, key, v)
    rawset(self, "reduction", check_reduction(name, opts))
  end
  M[name] = cls
  return cls
end

--- nn.Huber([{delta = 1, reduction = "mean"}]): 0.5 d^2 where |d| < delta, else
-- delta (|d| - delta / 2), d = input - target (torch's HuberLoss; delta * SmoothL1 with beta = delta).
local Huber = width_class("Huber", "delta", false)
function Huber:forward(input, target)
  check_pair("Huber", input, target)
  local d, delta = input - target, self.delta
  local ad = d:abs()
  return reduce(core.where(ad:lt(delta), d:square():scale(0.5), ad:scale(delta, -0.5 * delta * delta)), self.reduction)
end

--- nn.SmoothL1([{beta = 1, reduction = "mean"}]): 0.5 d^2 / beta where |d| < beta,
-- else |d| - beta / 2 (torch's SmoothL1Loss; beta = 0 is the L1 loss). Huber / delta.
local SmoothL1 = width_class("SmoothL1", "beta", true)
function SmoothL1:forward(input, target)
  check_pair("SmoothL1", input, target)
  return reduce(smooth_l1(input, target, self.beta), self.reduction)
end

-- The elementwise binary cross entropy of logits x against targets y with the positive
-- term weighted by lw = 1 + (p - 1) y, written so that no term cancels another (each is
-- >= 0 for y in [0, 1], p >= 0):
--   l = relu(x) (1 - y) + relu(-x) p y + lw log(1 + e^-|x|),   p y = lw + y - 1
-- (for p = 1: max(x, 0) - x y + log(1 + e^-|x|)), and its gradient in x the same way:
--   dl/dx = (1 - y) sigmoid(x) - p y sigmoid(-x)   (= sigmoid(x) - y for p = 1)
-- A composition of ops would differentiate the first form into 1 - y - sigmoid(-x), which is 0
-- instead of 1e-27 at x = -60, y = 0; hence a Function with the backward written out.
local bce = autograd.Function{
  name = "bce_with_logits",
  forward = function(ctx, x, y, lw)
    local py = lw and lw + y - 1 or y
    local sp = x:abs():neg():exp():log1p()
    ctx.x, ctx.y, ctx.py, ctx.sp, ctx.has_lw = x, y, py, sp, lw ~= nil
    local l = x:relu() * (1 - y) + x:neg():relu() * py
    return l + (lw and sp * lw or sp)
  end,
  backward = function(ctx, g)
    local x, y = ctx.x, ctx.y
    local gx = g * (x:sigmoid() * (1 - y) - x:neg():sigmoid() * ctx.py)
    local gy = g * x:neg()                                  -- with lw held fixed
    if not ctx.has_lw then return gx, gy end
    return gx, gy, g * (ctx.sp + x:neg():relu())            -- softplus(-x)
  end,
}

local BCEWithLogits = Module:extend("BCEWithLogits", {init = {"table?"}})
M.BCEWithLogits = BCEWithLogits

--- nn.BCEWithLogits([{weight = nil, pos_weight = nil, reduction = "mean"}]): binary cross
-- entropy of sigmoid(input) against target in [0, 1], from the logits without overflow
-- or cancellation: max(x, 0) - x y + log(1 + e^-|x|), with pos_weight p (broadcast along
-- the last dim, [C] for C labels) weighing the positive term: (1 - y) x + (1 + (p - 1) y)
-- log(1 + e^-x). weight (broadcast to the input) rescales each element.
function BCEWithLogits:init(opts)
  opts = options("BCEWithLogits", opts, {weight = false, pos_weight = false, reduction = "mean"},
                 {weight = "tensor", pos_weight = "tensor", reduction = "string"})
  rawset(self, "reduction", check_reduction("BCEWithLogits", opts))
  rawset(self, "weight", opts.weight)
  rawset(self, "pos_weight", opts.pos_weight)
end

-- w must broadcast to the input's shape without growing it
local function check_broadcast(key, w, input)
  local ws, xs = w:shape(), input:shape()
  local ok = #ws <= #xs
  for i = 1, #ws do
    local d = ws[#ws + 1 - i]
    ok = ok and (d == 1 or d == xs[#xs + 1 - i])
  end
  if not ok then
    error(string.format("BCEWithLogits: %s %s does not broadcast to the input %s", key, shape_str(w), shape_str(input)), 3)
  end
end

function BCEWithLogits:forward(input, target)
  check_pair("BCEWithLogits", input, target)
  local dt = input:dtype()
  local y = target:to(dt)
  local l
  if self.pos_weight then
    check_broadcast("pos_weight", self.pos_weight, input)
    local lw = y * (self.pos_weight:to(dt) - 1) + 1
    l = bce(input, y, lw)
  else
    l = bce(input, y)
  end
  if self.weight then
    check_broadcast("weight", self.weight, input)
    l = l * self.weight:to(dt)
  end
  return reduce(l, self.reduction)
end

return M
