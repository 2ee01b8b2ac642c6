--- examples/models/transformer.lua: a small pre-norm Transformer encoder classifier,
-- with multi-head self-attention written here in Lua: the projections and heads from
-- Linear, reshape and permute, the attention itself the engine's fused kernel
-- (t:scaled_dot_product_attention), or batched matmul and softmax when attention dropout
-- is on in training. (dl.nn.MultiheadAttention is the torch-compatible layer.)
--
--   local transformer = dofile("examples/models/transformer.lua")
--   local model = transformer.build{vocab = 100, seq_len = 32, d_model = 64, heads = 4, layers = 2, classes = 2}
--   local logits = model(ids [, mask])   -- ids: int [N, T] 1-based token ids, T <= seq_len
--                                        -- mask: [N, T], 1 for real tokens, 0 for padding
--
-- Layout: token embedding + learned positional embedding (+ a learned CLS token in
-- front when hp.pool = "cls"), dropout, hp.layers blocks of
--   x = x + Dropout(MHA(LN(x), mask))
--   x = x + Dropout(W2 GELU(W1 LN(x)))          (W1: d_model -> mlp_ratio * d_model)
-- then a final LayerNorm, pooling (the mean over unmasked positions, or the CLS
-- position) and a Linear head. Padding positions are excluded as attention keys
-- and from the mean; when hp.pad_id is set and no mask is passed, the mask is
-- ids ~= pad_id. It does not do causal masking or decoding.
local dl = require "dlua"
local nn = dl.nn

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local hparams = dofile(here .. "hp.lua")
local rules = hparams.rules

local M = {}

M.defaults = {
  vocab = 1000,          -- token ids are 1..vocab
  seq_len = 64,          -- longest sequence (the positional table's size, plus 1 for CLS)
  d_model = 64,          -- model width
  heads = 4,             -- attention heads (must divide d_model)
  layers = 2,            -- encoder blocks
  mlp_ratio = 4,         -- MLP hidden width = mlp_ratio * d_model
  dropout = 0,           -- on the embeddings and on each residual branch's output
  attn_dropout = 0,      -- on the attention probabilities
  classes = 2,           -- logits
  pool = "mean",         -- "mean" (over unmasked positions) | "cls" (a learned CLS token)
  pad_id = false,        -- a token id treated as padding when no mask is passed (false: none)
  init_std = 0.02,       -- std of the normal init of the token, position and CLS embeddings
  norm_eps = 1e-5,       -- LayerNorm epsilon
}

M.checks = {
  vocab = rules.positive, seq_len = rules.positive, d_model = rules.positive, heads = rules.positive,
  layers = rules.count, mlp_ratio = rules.positive_number, dropout = rules.prob, attn_dropout = rules.prob,
  classes = rules.positive, pool = rules.one_of{"mean", "cls"}, pad_id = rules.optional(rules.positive),
  init_std = rules.positive_number, norm_eps = rules.positive_number,
}

local function shape_str(t) return "[" .. table.concat(t:shape(), ", ") .. "]" end

-- a [N, T] mask of 1/0 as the additive attention bias [N, 1, 1, T]: 0 to keep, -1e9 to drop
local function key_bias(mask)
  local n, t = mask:size(1), mask:size(2)
  return (mask:float() - 1):scale(1e9):reshape(n, 1, 1, t)
end

-------------------------------------------------------------------- MultiHeadAttention

local MultiHeadAttention = nn.Module:extend("MultiHeadAttention")
M.MultiHeadAttention = MultiHeadAttention

--- MultiHeadAttention(d_model, heads [, {dropout = 0}]): self-attention on [N, T, d_model].
-- qkv is one Linear(d_model, 3 d_model) (q, k, v in that order along the output),
-- proj a Linear(d_model, d_model). Per head h with d = d_model / heads:
-- softmax(Q_h K_h^T / sqrt(d) + bias) V_h, the heads concatenated, then proj.
function MultiHeadAttention:init(d_model, heads, opts)
  opts = nn._options("MultiHeadAttention", opts, {dropout = 0})
  if d_model % heads ~= 0 then
    error(string.format("MultiHeadAttention: heads (%d) must divide d_model (%d)", heads, d_model), 3)
  end
  rawset(self, "d_model", d_model)
  rawset(self, "heads", heads)
  self.qkv = nn.Linear(d_model, 3 * d_model)
  self.proj = nn.Linear(d_model, d_model)
  if opts.dropout > 0 then self.drop = nn.Dropout(opts.dropout) end
end

--- x: [N, T, d_model]; mask (optional): [N, T], 1 for keys to attend to, 0 for padding.
function MultiHeadAttention:forward(x, mask)
  local s = x:shape()
  if #s ~= 3 or s[3] ~= self.d_model then
    error(string.format("MultiHeadAttention: input %s must be [N, T, %d]", shape_str(x), self.d_model), 2)
  end
  local n, t, h = s[1], s[2], self.heads
  local d = self.d_model // h
  local qkv = self.qkv(x)                                        -- [N, T, 3 D]
  local function heads_of(i)                                     -- -> [N, H, T, d]
    return qkv:narrow(3, (i - 1) * self.d_model + 1, self.d_model):reshape(n, t, h, d):permute(1, 3, 2, 4)
  end
  local q, k, v = heads_of(1), heads_of(2), heads_of(3)
  local bias
  if mask then
    if mask:dim() ~= 2 or mask:size(1) ~= n or mask:size(2) ~= t then
      error(string.format("MultiHeadAttention: mask %s must be [%d, %d]", shape_str(mask), n, t), 2)
    end
    bias = key_bias(mask):to(q:dtype())
  end
  local o                                                        -- [N, H, T, d]
  if self._modules.drop and self.training then                   -- dropout on the probabilities
    local scores = q:matmul(k:transpose(3, 4)):scale(1 / math.sqrt(d))   -- [N, H, T, T]
    if bias then scores = scores + bias end
    o = self.drop(scores:softmax(4)):matmul(v)
  else                                                           -- the engine's fused kernel
    o = q:scaled_dot_product_attention(k, v, {mask = bias})
  end
  local out = o:permute(1, 3, 2, 4):reshape(n, t, self.d_model)   -- [N, T, D]
  return self.proj(out)
end

function MultiHeadAttention:extra_repr() return string.format("d_model=%d, heads=%d", self.d_model, self.heads) end

-------------------------------------------------------------------- Block

local Block = nn.Module:extend("EncoderBlock")
M.Block = Block

--- Block(hp): x + Dropout(MHA(LN(x))), then x + Dropout(MLP(LN(x))).
function Block:init(hp)
  local hidden = math.floor(hp.mlp_ratio * hp.d_model + 0.5)
  self.ln1 = nn.LayerNorm(hp.d_model, {eps = hp.norm_eps})
  self.attn = MultiHeadAttention(hp.d_model, hp.heads, {dropout = hp.attn_dropout})
  self.ln2 = nn.LayerNorm(hp.d_model, {eps = hp.norm_eps})
  self.fc1 = nn.Linear(hp.d_model, hidden)
  self.fc2 = nn.Linear(hidden, hp.d_model)
  if hp.dropout > 0 then self.drop = nn.Dropout(hp.dropout) end
end

function Block:forward(x, mask)
  local drop = self._modules.drop
  local a = self.attn(self.ln1(x), mask)
  x = x + (drop and drop(a) or a)
  local m = self.fc2(self.fc1(self.ln2(x)):gelu())
  return x + (drop and drop(m) or m)
end

-------------------------------------------------------------------- classifier

local Classifier = nn.Module:extend("TransformerClassifier")
M.Classifier = Classifier

function Classifier:init(hp)
  rawset(self, "hp", hp)
  local extra = hp.pool == "cls" and 1 or 0
  self.tok = nn.Embedding(hp.vocab, hp.d_model)
  nn.init.normal(self.tok.weight, 0, hp.init_std)
  self.pos = self:parameter(nn.init.normal(dl.empty(hp.seq_len + extra, hp.d_model), 0, hp.init_std))
  if extra == 1 then self.cls = self:parameter(nn.init.normal(dl.empty(1, 1, hp.d_model), 0, hp.init_std)) end
  if hp.dropout > 0 then self.drop = nn.Dropout(hp.dropout) end
  local blocks = {}
  for i = 1, hp.layers do blocks[i] = Block(hp) end
  self.blocks = nn.Sequential(blocks)
  self.ln_f = nn.LayerNorm(hp.d_model, {eps = hp.norm_eps})
  self.head = nn.Linear(hp.d_model, hp.classes)
end

--- ids: integer [N, T] (1-based, T <= seq_len); mask (optional): [N, T] of 1/0.
-- Returns logits [N, classes].
function Classifier:forward(ids, mask)
  local hp = self.hp
  if ids:dim() ~= 2 then
    error(string.format("TransformerClassifier: ids %s must be [N, T]", shape_str(ids)), 2)
  end
  local n, t = ids:size(1), ids:size(2)
  if t > hp.seq_len then
    error(string.format("TransformerClassifier: sequence length %d is longer than hp.seq_len %d", t, hp.seq_len), 2)
  end
  if mask == nil and hp.pad_id then mask = ids:ne(hp.pad_id) end
  if mask then
    if mask:dim() ~= 2 or mask:size(1) ~= n or mask:size(2) ~= t then
      error(string.format("TransformerClassifier: mask %s must be [%d, %d] like ids", shape_str(mask), n, t), 2)
    end
    mask = mask:float()
  end
  local x = self.tok(ids)                                       -- [N, T, D]
  if hp.pool == "cls" then
    x = dl.cat({self.cls:expand(n, 1, hp.d_model), x}, 2)       -- [N, T + 1, D]
    if mask then mask = dl.cat({dl.ones(n, 1), mask}, 2) end
    t = t + 1
  end
  x = x + self.pos:narrow(1, 1, t)
  if self._modules.drop then x = self.drop(x) end
  for i = 1, hp.layers do x = self.blocks[i](x, mask) end
  x = self.ln_f(x)
  local pooled
  if hp.pool == "cls" then
    pooled = x:select(2, 1)                                     -- [N, D]
  elseif mask then
    local m = mask:reshape(n, t, 1)
    pooled = (x * m):sum(2) / m:sum(2):clamp(1)                 -- mean over real tokens
  else
    pooled = x:mean(2)
  end
  return self.head(pooled)
end

function Classifier:extra_repr()
  local hp = self.hp
  return string.format("vocab=%d, seq_len=%d, d_model=%d, heads=%d, layers=%d, pool=%s",
    hp.vocab, hp.seq_len, hp.d_model, hp.heads, hp.layers, hp.pool)
end

--- Builds the classifier. hp overrides M.defaults; unknown keys raise unless
-- opts.strict == false. The resolved table is kept as model.hp.
function M.build(hp, opts)
  hp = hparams.resolve("transformer", M.defaults, M.checks, hp, opts)
  if hp.d_model % hp.heads ~= 0 then
    error(string.format("transformer: hp.heads (%d) must divide hp.d_model (%d)", hp.heads, hp.d_model), 2)
  end
  if hp.pad_id and hp.pad_id > hp.vocab then
    error(string.format("transformer: hp.pad_id (%d) is not a token id (1..%d)", hp.pad_id, hp.vocab), 2)
  end
  return Classifier(hp)
end

-------------------------------------------------------------------- ONNX export

-- dl.onnx.export's exporters for the three classes above (docs/export.md): the graph
-- each forward computes, with the padding mask (hp.pad_id) as the additive key bias
-- [N, 1, 1, T] passed from the classifier to its blocks. Export the classifier with
-- {input_shape = {T}, input_dtype = "int64"}: the ids; the graph's T is fixed at export.

-- MultiHeadAttention on x [N, T, D]; bias: the key bias's name or nil
dl.onnx.register(MultiHeadAttention, function(g, m, x, _, bias)
  local D, H = m.d_model, m.heads
  local d = D // H
  local qkv = g:call(m._modules.qkv, "qkv", x)
  local q, kt, v = g:heads(qkv, D, H)
  local scores = g:node("Mul", {g:node("MatMul", {q, kt}), g:scalar(1 / math.sqrt(d), "scale")})
  if bias then scores = g:node("Add", {scores, bias}) end
  local out = g:node("MatMul", {g:node("Softmax", {scores}, {axis = -1}), v})
  out = g:node("Reshape", {g:node("Transpose", {out}, {perm = {0, 2, 1, 3}}), g:int64s({0, 0, D}, "model")})
  return g:call(m._modules.proj, "proj", out)
end)

dl.onnx.register(Block, function(g, m, x, _, bias)
  x = g:node("Add", {x, g:call(m._modules.attn, "attn", g:call(m._modules.ln1, "ln1", x), nil, bias)})
  local h = g:gelu(g:call(m._modules.fc1, "fc1", g:call(m._modules.ln2, "ln2", x)))
  return g:node("Add", {x, g:call(m._modules.fc2, "fc2", h)})
end)

dl.onnx.register(Classifier, function(g, m, ids, sample)
  local hp = m.hp
  local D, t = hp.d_model, sample:size(2)
  local x = g:call(m._modules.tok, "tok", ids, sample)           -- [N, T, D]
  local mask                                                     -- [N, T] float, or nil
  if hp.pad_id then
    local pad = g:const(dl.tensor({hp.pad_id}, {dtype = sample:dtype()}), "pad_id")
    mask = g:node("Cast", {g:node("Not", {g:node("Equal", {ids, pad})})}, {to = 1})
  end
  if hp.pool == "cls" then
    local n = g:node("Slice", {g:node("Shape", {ids}), g:int64s({0}, "zero"), g:int64s({1}, "one"), g:int64s({0}, "axis")})
    local cls = g:node("Expand", {g:const(m.cls, "cls"), g:node("Concat", {n, g:int64s({1, D}, "cls_dims")}, {axis = 0})})
    x = g:node("Concat", {cls, x}, {axis = 1})
    if mask then
      local ones = g:node("Expand", {g:const(dl.ones(1, 1), "ones"), g:node("Concat", {n, g:int64s({1}, "one")}, {axis = 0})})
      mask = g:node("Concat", {ones, mask}, {axis = 1})
    end
    t = t + 1
  end
  x = g:node("Add", {x, g:const(m.pos:narrow(1, 1, t), "pos")})
  local bias
  if mask then
    bias = g:node("Mul", {g:node("Sub", {mask, g:scalar(1, "one")}), g:scalar(1e9, "big")})
    bias = g:node("Reshape", {bias, g:int64s({0, 1, 1, -1}, "bias_dims")})
  end
  for i = 1, hp.layers do x = g:call(m._modules.blocks[i], "blocks." .. i, x, nil, bias) end
  x = g:call(m._modules.ln_f, "ln_f", x)
  local pooled
  if hp.pool == "cls" then
    pooled = g:node("Gather", {x, g:const(dl.tensor(0, {dtype = "int64"}), "first")}, {axis = 1})
  elseif mask then
    local w = g:node("Reshape", {mask, g:int64s({0, -1, 1}, "mask_dims")})
    local axis = g:int64s({1}, "axis")
    local num = g:node("ReduceSum", {g:node("Mul", {x, w}), axis}, {keepdims = 0})
    local den = g:node("Max", {g:node("ReduceSum", {w, axis}, {keepdims = 0}), g:scalar(1, "one")})
    pooled = g:node("Div", {num, den})
  else
    pooled = g:node("ReduceMean", {x}, {axes = {1}, keepdims = 0})
  end
  return g:call(m._modules.head, "head", pooled)
end)

return M
