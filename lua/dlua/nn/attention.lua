--- dlua.nn.attention: nn.MultiheadAttention and nn.TransformerEncoderLayer, exported by
-- dl.nn. Both match torch's modules of the same names (parameters named as torch names
-- them, so a torch state_dict loads as it is) and run attention through the fused kernel
-- t:scaled_dot_product_attention (engine/ops/attention.c); with attention dropout in
-- training they take the composed path (softmax, dropout, matmul) instead.
-- Layouts: batch_first (the default here, not torch's) is [N, T, E]; otherwise [T, N, E].
-- Masks follow torch's modules: a uint8 (boolean) attn_mask or key_padding_mask is
-- non-zero where a position is NOT attended; a float mask is added to the scores.
-- The layers these build on (Linear, LayerNorm, Dropout, ReLU, GELU) live in nn/init.lua,
-- above this file, which hands them in: require("dlua.nn.attention")(layers).
local core = require "dlua.core"
local init = require "dlua.nn.init_fns"
local module = require "dlua.nn.module"
local util = require "dlua.util"

local Module, options, check_size = module.Module, module.options, module.check_size

local function shape_str(t) return "[" .. table.concat(t:shape(), ", ") .. "]" end

-- level: the caller of forward, through Module's call wrapper
local function fail(name, fmt, ...) error(string.format(name .. ": " .. fmt, ...), 3) end

-- a mask in torch's module convention (uint8: non-zero = masked out; float: added) as what
-- the kernel takes (uint8: non-zero = keep; float: added), with its sizes as given
local function kernel_mask(m, dtype)
  if m:dtype() == "uint8" then return m:eq(0) end
  return m:to(dtype)
end

-- the two masks combined into one broadcastable to [N, H, T, S], or nil
local function combine(a, b, dtype)
  if not a then return b end
  if not b then return a end
  if a:dtype() == "uint8" and b:dtype() == "uint8" then return a * b end
  local function add(m) return m:dtype() == "uint8" and core.where(m, 0, -math.huge):to(dtype) or m end
  return add(a) + add(b)
end

return function(layers)
  local M = {}

  ------------------------------------------------------------------ MultiheadAttention

  local MHA = Module:extend("MultiheadAttention", {init = {"number", "number", "table?"}, forward = {
    "tensor", "tensor?", "tensor?", "table?"}})
  M.MultiheadAttention = MHA

  --- nn.MultiheadAttention(embed_dim, num_heads [, {bias = true, dropout = 0, causal = false,
  -- batch_first = true}]): torch's nn.MultiheadAttention. in_proj_weight [3E, E] (q, k, v
  -- stacked) and in_proj_bias [3E], out_proj a Linear(E, E); initialised as torch does
  -- (xavier_uniform in_proj_weight, zero biases).
  function MHA:init(embed_dim, num_heads, opts)
    local E = check_size("MultiheadAttention", "embed_dim", embed_dim)
    local H = check_size("MultiheadAttention", "num_heads", num_heads)
    opts = options("MultiheadAttention", opts, {bias = true, dropout = 0, causal = false, batch_first = true})
    if E % H ~= 0 then
      error(string.format("MultiheadAttention: num_heads %d must divide embed_dim %d", H, E), 3)
    end
    if opts.dropout < 0 or opts.dropout >= 1 then
      error("MultiheadAttention: dropout must be in [0, 1), got " .. opts.dropout, 3)
    end
    rawset(self, "embed_dim", E)
    rawset(self, "num_heads", H)
    rawset(self, "dropout", opts.dropout)
    rawset(self, "causal", opts.causal)
    rawset(self, "batch_first", opts.batch_first)
    self.in_proj_weight = self:parameter(init.xavier_uniform(core.empty(3 * E, E)))
    if opts.bias then self.in_proj_bias = self:parameter(core.zeros(3 * E)) end
    self.out_proj = layers.Linear(E, E, {bias = opts.bias})
    if opts.bias then init.zeros(self.out_proj.bias) end
  end

  local forward_keys = {key_padding_mask = "tensor", attn_mask = "tensor", need_weights = "boolean"}

  --- mha(query [, key, value] [, {key_padding_mask =, attn_mask =, need_weights = false}])
  -- query [N, T, E], key [N, S, E], value [N, S, E] (key and value default to query);
  -- key_padding_mask [N, S]; attn_mask [T, S] or [N * num_heads, T, S]. Returns the
  -- output [N, T, E], and with need_weights also the attention weights averaged over the
  -- heads [N, T, S] (computed again from the scores, so it costs a [N, H, T, S] tensor).
  function MHA:forward(query, key, value, opts)
    util.check_options("MultiheadAttention:forward", opts, forward_keys, 2)
    opts = opts or {}
    key, value = key or query, value or key or query
    local E, H, name = self.embed_dim, self.num_heads, "MultiheadAttention"
    for _, p in ipairs({{"query", query}, {"key", key}, {"value", value}}) do
      if p[2]:dim() ~= 3 or p[2]:size(3) ~= E then
        fail(name, "%s %s must be [%s, %d]", p[1], shape_str(p[2]), self.batch_first and "N, L" or "L, N", E)
      end
    end
    if not self.batch_first then query, key, value = query:transpose(1, 2), key:transpose(1, 2), value:transpose(1, 2) end
    local N, T, S = query:size(1), query:size(2), key:size(2)
    if key:size(1) ~= N or value:size(1) ~= N or value:size(2) ~= S then
      fail(name, "key %s and value %s do not match query %s", shape_str(key), shape_str(value), shape_str(query))
    end
    local d = E // H
    local w, b = self.in_proj_weight, self._params.in_proj_bias
    local function proj(x, i)                              -- x [N, L, E] -> [N, H, L, d]
      local y = x:linear(w:narrow(1, (i - 1) * E + 1, E), b and b:narrow(1, (i - 1) * E + 1, E))
      return y:reshape(N, x:size(2), H, d):permute(1, 3, 2, 4)
    end
    local q, k, v = proj(query, 1), proj(key, 2), proj(value, 3)
    local mask
    local kpm, am = opts.key_padding_mask, opts.attn_mask
    if kpm then
      if kpm:dim() ~= 2 or kpm:size(1) ~= N or kpm:size(2) ~= S then
        fail(name, "key_padding_mask %s must be [N, S] = [%d, %d]", shape_str(kpm), N, S)
      end
      mask = kernel_mask(kpm, q:dtype()):reshape(N, 1, 1, S)
    end
    if am then
      if am:dim() == 2 and am:size(1) == T and am:size(2) == S then
        am = kernel_mask(am, q:dtype())
      elseif am:dim() == 3 and am:size(1) == N * H and am:size(2) == T and am:size(3) == S then
        am = kernel_mask(am, q:dtype()):reshape(N, H, T, S)
      else
        fail(name, "attn_mask %s must be [T, S] = [%d, %d] or [N * num_heads, T, S] = [%d, %d, %d]",
          shape_str(am), T, S, N * H, T, S)
      end
      mask = combine(mask, am, q:dtype())
    end
    local scale = 1 / math.sqrt(d)
    local o, weights
    local drop = self.training and self.dropout > 0
    if drop or opts.need_weights then                      -- composed: the weights are needed
      local s = q:matmul(k:transpose(3, 4)):scale(scale)   -- [N, H, T, S]
      if self.causal then
        local later = core.arange(S):reshape(1, S):gt(core.arange(T):reshape(T, 1))   -- key j after query i
        s = s + core.where(later, -math.huge, 0):to(s:dtype())
      end
      if mask then s = mask:dtype() == "uint8" and core.where(mask, s, -math.huge) or s + mask end
      local p = s:softmax(4)
      weights = opts.need_weights and p:mean(2) or nil
      if drop then
        local keep = core.rand(p:shape()):ge(self.dropout):to(p:dtype())
        p = p * keep:scale(1 / (1 - self.dropout))
      end
      o = p:matmul(v)
    else
      o = q:scaled_dot_product_attention(k, v, {causal = self.causal, mask = mask, scale = scale})
    end
    o = self.out_proj(o:permute(1, 3, 2, 4):reshape(N, T, E))
    if not self.batch_first then o = o:transpose(1, 2) end
    return o, weights
  end

  function MHA:extra_repr()
    return string.format("embed_dim=%d, num_heads=%d%s", self.embed_dim, self.num_heads, self.causal and ", causal" or "")
  end

  ------------------------------------------------------------------ TransformerEncoderLayer

  local TEL = Module:extend("TransformerEncoderLayer", {init = {"number", "number", "table?"},
    forward = {"tensor", "table?"}})
  M.TransformerEncoderLayer = TEL

  local ACTIVATIONS = {relu = "ReLU", gelu = "GELU"}

  --- nn.TransformerEncoderLayer(d_model, nhead [, {dim_feedforward = 2048, dropout = 0.1,
  -- activation = "relu" | "gelu", norm_first = false, layer_norm_eps = 1e-5,
  -- batch_first = true, causal = false}]): torch's TransformerEncoderLayer, children named
  -- as torch's: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2.
  function TEL:init(d_model, nhead, opts)
    d_model = check_size("TransformerEncoderLayer", "d_model", d_model)
    nhead = check_size("TransformerEncoderLayer", "nhead", nhead)
    opts = options("TransformerEncoderLayer", opts, {dim_feedforward = 2048, dropout = 0.1, activation = "relu",
      norm_first = false, layer_norm_eps = 1e-5, batch_first = true, causal = false}, {activation = "string"})
    local ff = check_size("TransformerEncoderLayer", "dim_feedforward", opts.dim_feedforward)
    if not ACTIVATIONS[opts.activation] then
      error(string.format("TransformerEncoderLayer: activation must be 'relu' or 'gelu', got '%s'", opts.activation), 3)
    end
    if opts.dropout < 0 or opts.dropout >= 1 then
      error("TransformerEncoderLayer: dropout must be in [0, 1), got " .. opts.dropout, 3)
    end
    if d_model % nhead ~= 0 then
      error(string.format("TransformerEncoderLayer: nhead %d must divide d_model %d", nhead, d_model), 3)
    end
    rawset(self, "norm_first", opts.norm_first)
    rawset(self, "batch_first", opts.batch_first)
    self.self_attn = MHA(d_model, nhead, {dropout = opts.dropout, batch_first = true, causal = opts.causal})
    self.linear1 = layers.Linear(d_model, ff)
    self.dropout = layers.Dropout(opts.dropout)
    self.linear2 = layers.Linear(ff, d_model)
    self.norm1 = layers.LayerNorm(d_model, {eps = opts.layer_norm_eps})
    self.norm2 = layers.LayerNorm(d_model, {eps = opts.layer_norm_eps})
    self.dropout1 = layers.Dropout(opts.dropout)
    self.dropout2 = layers.Dropout(opts.dropout)
    self.activation = layers[ACTIVATIONS[opts.activation]]()
  end

  local tel_keys = {src_mask = "tensor", src_key_padding_mask = "tensor"}

  --- layer(src [, {src_mask =, src_key_padding_mask =}]): src [N, T, d_model] (batch_first);
  -- the masks as MultiheadAttention's attn_mask and key_padding_mask.
  function TEL:forward(src, opts)
    util.check_options("TransformerEncoderLayer:forward", opts, tel_keys, 2)
    opts = opts or {}
    local x = self.batch_first and src or src:transpose(1, 2)
    local m = {attn_mask = opts.src_mask, key_padding_mask = opts.src_key_padding_mask}
    local function sa(y) return self.dropout1((self.self_attn(y, y, y, m))) end
    local function ff(y) return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(y))))) end
    if self.norm_first then
      x = x + sa(self.norm1(x))
      x = x + ff(self.norm2(x))
    else
      x = self.norm1(x + sa(x))
      x = self.norm2(x + ff(x))
    end
    return self.batch_first and x or x:transpose(1, 2)
  end

  return M
end
