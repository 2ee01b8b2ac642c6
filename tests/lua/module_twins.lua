-- Each class dl.nn exports (layers, containers, attention and losses) and its PyTorch twin,
-- for tests/lua/differential_modules_spec.lua (issue 34, item 1). The spec walks dl.nn's
-- classes, so a new module without a twin here fails by name.
--
--   Name = {build = function() -> the dlua module (drawn after dl.seed(7)),
--           torch = "a Python expression building torch's module",
--           inputs = function() -> the random case's inputs (float64; int64 labels and ids
--                    are 1-based, as dlua's: the call subtracts 1),
--           call = "the Python output of m, a, b, ..." (default "m(a)"),
--           lua = function(m, a, b, ...) -> the dlua output (default m(a, b, ...)),
--           grad = {true, false, ...}: which inputs get gradients (default: every float one),
--           eval = true: both modules in eval mode (default: training),
--           prep = function(m): sets what build leaves at defaults (running statistics),
--           rename = function(dlua name) -> torch's name of a parameter or buffer,
--           buffers = true: float buffers compared after the forward (running statistics),
--           foreign_buffers = true: dlua's buffers are not torch's (not copied),
--           edge = {{label, function() -> inputs, key = value, ...}, ...}: edge cases, whose
--                  keys (build, torch, call, lua, ...) override the twin's,
--           tol = {f64 = ..., f32 = ...}, norm = true (errors relative to the largest magnitude),
--           differs = "why": dlua deliberately differs from torch; `torch`/`call` is the
--                     documented rule written in torch instead of torch's own module}
-- Parameters and buffers are copied from the dlua module into torch's by name, so both
-- start from the same values; torch's module must have no parameter dlua's lacks.
-- Losses cover each reduction, class weights with label smoothing and pos_weight here;
-- losses_spec.lua adds dlua's per-example weights and BCE against exact math (mpmath).
local dl = require "dlua"
local nn = dl.nn

local function T(v) return dl.tensor(v, {dtype = "float64"}) end
local function I(v) return dl.tensor(v, {dtype = "int64"}) end
local function R(...) return dl.randn(...):double() end
local function U(...) return dl.rand(...):double() end
local INF = math.huge

-- tolerances: norm-wise for sums of products; float32 may also be twice torch's own error
local NORM = {f64 = 1e-13, f32 = 1e-6}
local ELEM = {f64 = 1e-14, f32 = 3e-7}
local EXACT = {f64 = 0, f32 = 0}

local M = {}

-- dlua's Sequential names children 1, 2, ...; torch's 0, 1, ...
local function seq_names(n) return (n:gsub("^(%d+)", function(d) return tostring(tonumber(d) - 1) end)) end

---------------------------------------------------------------- layers

M.Linear = {build = function() return nn.Linear(3, 2) end, torch = "torch.nn.Linear(3, 2)",
  inputs = function() return {R(4, 3)} end, tol = NORM, norm = true,
  edge = {{"3-d", function() return {R(2, 3, 3)} end},
    {"size-1", function() return {R(1, 1)} end, build = function() return nn.Linear(1, 1) end, torch = "torch.nn.Linear(1, 1)"},
    {"size-0", function() return {R(0, 3)} end},
    {"no-bias", function() return {R(4, 3)} end, build = function() return nn.Linear(3, 2, {bias = false}) end,
      torch = "torch.nn.Linear(3, 2, bias=False)"}}}

M.Conv2d = {build = function() return nn.Conv2d(4, 6, 3, {stride = {2, 1}, padding = 1, dilation = {1, 2}, groups = 2}) end,
  torch = "torch.nn.Conv2d(4, 6, 3, stride=(2, 1), padding=1, dilation=(1, 2), groups=2)",
  inputs = function() return {R(2, 4, 6, 7)} end, tol = NORM, norm = true,
  edge = {{"1x1-no-bias", function() return {R(2, 3, 4, 4)} end, build = function() return nn.Conv2d(3, 2, 1, {bias = false}) end,
      torch = "torch.nn.Conv2d(3, 2, 1, bias=False)"},
    {"size-1", function() return {R(1, 1, 1, 1)} end, build = function() return nn.Conv2d(1, 1, 1) end,
      torch = "torch.nn.Conv2d(1, 1, 1)"},
    -- 3x3, stride 1: the Winograd path in float32
    {"3x3-same", function() return {R(2, 4, 8, 8)} end, build = function() return nn.Conv2d(4, 5, 3, {padding = 1}) end,
      torch = "torch.nn.Conv2d(4, 5, 3, padding=1)"},
    {"rect-kernel", function() return {R(1, 2, 5, 6)} end, build = function() return nn.Conv2d(2, 3, {2, 3}, {stride = 2}) end,
      torch = "torch.nn.Conv2d(2, 3, (2, 3), stride=2)"}}}

local TIES = {{{{1, 1, 2, 0, 5}, {1, 1, 2, 2, 5}, {0, 0, 3, 3, -1}, {0, 0, 3, 3, -1}}}}
for _, p in ipairs({"MaxPool2d", "AvgPool2d"}) do
  M[p] = {build = function() return nn[p](3, {stride = 2, padding = 1}) end,
    torch = "torch.nn." .. p .. "(3, stride=2, padding=1)", inputs = function() return {R(2, 3, 7, 6)} end,
    tol = ELEM, norm = true,
    edge = {{"ties", function() return {T(TIES)} end, build = function() return nn[p](2) end, torch = "torch.nn." .. p .. "(2)"},
      {"size-1", function() return {R(1, 1, 2, 2)} end, build = function() return nn[p](2) end, torch = "torch.nn." .. p .. "(2)"},
      {"rect", function() return {R(2, 2, 5, 6)} end, build = function() return nn[p]({2, 3}, {stride = {1, 2}}) end,
        torch = "torch.nn." .. p .. "((2, 3), stride=(1, 2))"}}}
end

M.AdaptiveAvgPool2d = {build = function() return nn.AdaptiveAvgPool2d(2) end, torch = "torch.nn.AdaptiveAvgPool2d(2)",
  inputs = function() return {R(2, 3, 4, 6)} end, tol = ELEM, norm = true,
  edge = {{"global", function() return {R(2, 3, 5, 3)} end, build = function() return nn.AdaptiveAvgPool2d(1) end,
    torch = "torch.nn.AdaptiveAvgPool2d(1)"}, {"size-1", function() return {R(1, 1, 1, 1)} end,
    build = function() return nn.AdaptiveAvgPool2d(1) end, torch = "torch.nn.AdaptiveAvgPool2d(1)"}}}

-- activations: random, extreme magnitudes and the points where the derivative is a convention
local function activation(name, torch, extremes, tol)
  M[name] = {build = function() return nn[name]() end, torch = torch, inputs = function() return {R(3, 4)} end,
    tol = tol or ELEM,
    edge = {{"extremes", function() return {T({extremes})} end}, {"size-1", function() return {R(1, 1)} end},
      {"size-0", function() return {R(0, 3)} end}}}
end
local MID = {-700, -80, -30, -1, -1e-30, -0.0, 0, 1e-30, 1, 30, 80, 700}
activation("ReLU", "torch.nn.ReLU()", {-1e300, -1e30, -1, -1e-30, -0.0, 0, 1e-30, 1, 1e30, 1e300})
activation("GELU", "torch.nn.GELU()", {-40, -10, -1, -1e-30, 0, 1e-30, 1, 10, 1e30}, {f64 = 3e-14, f32 = 3e-7})
-- the gradient 1 - y^2 from the rounded output (op_twins.lua's tanh)
activation("Tanh", "torch.nn.Tanh()", MID, {f64 = 3e-11, f32 = 3e-7})
activation("Sigmoid", "torch.nn.Sigmoid()", MID)

M.Softmax = {build = function() return nn.Softmax(2) end, torch = "torch.nn.Softmax(1)", inputs = function() return {R(3, 5)} end,
  tol = {f64 = 1e-14, f32 = 1e-6}, norm = true,
  edge = {{"default-dim", function() return {R(2, 3, 4)} end, build = function() return nn.Softmax() end,
      torch = "torch.nn.Softmax(-1)"},
    {"large-rows", function() return {T({{1e6, 1e6 - 1, 1e6 - 3}, {100, 99, 97}, {-1e4, 0, -1e4}})} end},
    {"size-1", function() return {R(4, 1)} end}}}

M.Flatten = {build = function() return nn.Flatten() end, torch = "torch.nn.Flatten()", inputs = function() return {R(2, 3, 2)} end,
  tol = EXACT, edge = {{"4-d", function() return {R(2, 1, 3, 2)} end}, {"size-1", function() return {R(1, 1, 1, 1)} end},
    {"2-d", function() return {R(3, 4)} end},
    -- torch's Flatten raises on a 1-d input (no dim 1); dlua's returns it (docs/api/nn.md)
    {"1-d", function() return {R(3)} end, call = "a"}}}

-- training-mode masks come from dlua's seeded stream and torch's own: only p = 0 and eval compare
M.Dropout = {build = function() return nn.Dropout(0.3) end, torch = "torch.nn.Dropout(0.3)", inputs = function() return {R(3, 4)} end,
  eval = true, tol = EXACT,
  edge = {{"train-p0", function() return {R(3, 4)} end, build = function() return nn.Dropout(0) end, torch = "torch.nn.Dropout(0)",
    eval = false}, {"size-1", function() return {R(1, 1)} end}}}

M.Embedding = {build = function() return nn.Embedding(5, 3) end, torch = "torch.nn.Embedding(5, 3)", call = "m(a - 1)",
  inputs = function() return {I({{1, 5, 2}, {2, 2, 4}})} end, tol = EXACT,
  edge = {{"repeats", function() return {I({3, 3, 3, 1})} end}, {"size-1", function() return {I({{5}})} end},
    {"size-0", function() return {I({})} end}}}

-- normalisation of values near 1000 with spread 0.01: the twin takes x - 1000 (exact in
-- float64, and normalising is shift-invariant), so torch's reference loses nothing; any
-- algorithm centring x itself loses |mean| / std = 1e5 ulp (torch's own modules on x: 8.8e-12
-- in the values, 2.5e-10 in the gradients in float64; 2.5e-3 (LayerNorm) and 3.7e-3
-- (BatchNorm) in float32 values, where 1e5 ulp is 6e-3)
local OFFSET = {f64 = 1e-9, f32 = 1.2e-2}

-- outputs of order 1: errors relative to max(|y|, 1) (floor), as a LayerNorm(1) gives 0
-- exactly where torch gives 2.4e-14
M.LayerNorm = {build = function() return nn.LayerNorm(4) end, torch = "torch.nn.LayerNorm(4)", floor = 1,
  prep = function(m) m.weight:copy_(dl.rand(4):scale(1, 0.5)); m.bias:copy_(dl.randn(4)) end,
  inputs = function() return {R(3, 4)} end, tol = NORM, norm = true,
  edge = {{"3-d", function() return {R(2, 3, 4)} end},
    {"no-affine-eps", function() return {R(3, 5)} end, build = function() return nn.LayerNorm(5, {affine = false, eps = 1e-3}) end,
      torch = "torch.nn.LayerNorm(5, eps=1e-3, elementwise_affine=False)", prep = false},
    {"offset", function() return {R(3, 4):scale(0.01, 1000)} end, call = "m(a - 1000)", tol = OFFSET},
    {"size-1", function() return {R(1, 1)} end, build = function() return nn.LayerNorm(1) end, torch = "torch.nn.LayerNorm(1)",
      prep = false}}}

-- training: torch's BatchNorm1d / 2d, running statistics compared after the forward;
-- eval: from running statistics set to random values
local function bn_prep(m)
  local C = m.num_features
  m.running_mean:copy_(dl.randn(C)); m.running_var:copy_(dl.rand(C):scale(2, 0.5))
  m.weight:copy_(dl.rand(C):scale(1, 0.5)); m.bias:copy_(dl.randn(C))
end
-- groups of k consecutive examples, the last one taking the remainder (docs/batchnorm.md)
local GHOST = "torch.cat([F.batch_norm(a[i:j], None, None, m.weight, m.bias, True) for i, j in ((0, 4), (4, 10))])"
M.BatchNorm = {build = function() return nn.BatchNorm(3) end, torch = "torch.nn.BatchNorm2d(3)", prep = bn_prep,
  inputs = function() return {R(6, 3, 2, 2)} end, tol = NORM, norm = true, buffers = true,
  edge = {{"2-d", function() return {R(5, 3)} end, torch = "torch.nn.BatchNorm1d(3)"},
    {"momentum-no-affine", function() return {R(4, 2, 3, 1)} end, build = function() return nn.BatchNorm(2, {momentum = 0.3, affine = false}) end,
      torch = "torch.nn.BatchNorm2d(2, momentum=0.3, affine=False)", prep = false},
    {"eval", function() return {R(4, 3, 2, 2)} end, eval = true},
    {"eval-2-d-size-1", function() return {R(1, 3)} end, eval = true, torch = "torch.nn.BatchNorm1d(3)"},
    {"offset", function() return {R(8, 3):scale(0.01, 1000)} end, torch = "torch.nn.BatchNorm1d(3)", call = "m(a - 1000)",
      buffers = false, tol = OFFSET},
    {"virtual-batch", function() return {R(10, 3)} end, build = function() return nn.BatchNorm(3, {virtual_batch = 4}) end,
      torch = "torch.nn.BatchNorm1d(3)", call = GHOST, buffers = false,
      differs = "virtual_batch (ghost batch norm) is not in torch: the twin normalises each group with F.batch_norm"},
    -- replicas: each shard of the batch normalised alone; synced, the batch as one
    {"replicas", function() return {R(8, 3)} end, build = function() return nn.BatchNorm(3, {replicas = 2}) end,
      torch = "torch.nn.BatchNorm1d(3)", call = "torch.cat([F.batch_norm(a[i:i + 4], None, None, m.weight, m.bias, True) " ..
        "for i in (0, 4)])", buffers = false, foreign_buffers = true},
    {"replicas-sync", function() return {R(8, 3)} end, build = function() return nn.BatchNorm(3, {replicas = 2, sync = true}) end,
      torch = "torch.nn.BatchNorm1d(3)", buffers = false, foreign_buffers = true}}}

---------------------------------------------------------------- containers

M.Sequential = {build = function() return nn.Sequential{nn.Conv2d(2, 3, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    nn.Linear(12, 2), nn.Tanh()} end,
  torch = "torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(), " ..
    "torch.nn.Linear(12, 2), torch.nn.Tanh())",
  rename = seq_names, inputs = function() return {R(2, 2, 4, 4)} end, tol = NORM, norm = true,
  edge = {{"empty", function() return {R(2, 3)} end, build = function() return nn.Sequential{} end, torch = "torch.nn.Sequential()"},
    {"size-1", function() return {R(1, 2, 4, 4)} end}}}

M.Residual = {build = function() return nn.Residual(nn.Linear(3, 3)) end, torch = "torch.nn.Linear(3, 3)", call = "m(a) + a",
  rename = function(n) return (n:gsub("^body%.", "")) end, inputs = function() return {R(4, 3)} end, tol = NORM, norm = true,
  differs = "torch has no residual module: the twin is f(x) + x written out",
  edge = {{"shortcut", function() return {R(4, 3)} end, build = function() return nn.Residual(nn.Tanh(), nn.Linear(3, 3)) end,
    call = "torch.tanh(a) + m(a)", rename = function(n) return (n:gsub("^shortcut%.", "")) end}}}

---------------------------------------------------------------- attention

local CAUSAL = "torch.ones(a.shape[1], a.shape[1]).triu(1).bool()"
M.MultiheadAttention = {build = function() return nn.MultiheadAttention(4, 2) end,
  torch = "torch.nn.MultiheadAttention(4, 2, batch_first=True)", call = "m(a, a, a, need_weights=False)[0]",
  lua = function(m, a) return (m(a)) end, inputs = function() return {R(2, 3, 4)} end, tol = NORM, norm = true,
  prep = function(m) m.in_proj_bias:copy_(dl.randn(12)); m.out_proj.bias:copy_(dl.randn(4)) end,
  edge = {{"cross", function() return {R(2, 3, 4), R(2, 5, 4), R(2, 5, 4)} end, call = "m(a, b, c, need_weights=False)[0]",
      lua = function(m, a, b, c) return (m(a, b, c)) end},
    {"causal", function() return {R(2, 4, 4)} end, build = function() return nn.MultiheadAttention(4, 2, {causal = true}) end,
      call = "m(a, a, a, attn_mask=" .. CAUSAL .. ", need_weights=False)[0]"},
    {"weights", function() return {R(2, 3, 4)} end, call = "m(a, a, a)[1]",
      lua = function(m, a) return select(2, m(a, nil, nil, {need_weights = true})) end},
    {"key-padding", function() return {R(2, 3, 4), dl.tensor({{0, 0, 1}, {0, 0, 0}}, {dtype = "uint8"})} end,
      call = "m(a, a, a, key_padding_mask=b, need_weights=False)[0]",
      lua = function(m, a, b) return (m(a, nil, nil, {key_padding_mask = b})) end},
    {"seq-first", function() return {R(3, 2, 4)} end, build = function() return nn.MultiheadAttention(4, 1, {batch_first = false}) end,
      torch = "torch.nn.MultiheadAttention(4, 1)"},
    {"size-1", function() return {R(1, 1, 4)} end}}}

M.TransformerEncoderLayer = {build = function() return nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 6}) end,
  torch = "torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, batch_first=True)", eval = true,
  inputs = function() return {R(2, 3, 4)} end, tol = NORM, norm = true,
  edge = {{"norm-first-gelu", function() return {R(2, 3, 4)} end,
      build = function() return nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 6, norm_first = true, activation = "gelu"}) end,
      torch = "torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, batch_first=True, norm_first=True, activation='gelu')"},
    {"padding-mask", function() return {R(2, 3, 4), dl.tensor({{0, 1, 1}, {0, 0, 0}}, {dtype = "uint8"})} end,
      call = "m(a, src_key_padding_mask=b)", lua = function(m, a, b) return m(a, {src_key_padding_mask = b}) end},
    {"train-p0", function() return {R(2, 3, 4)} end, eval = false,
      build = function() return nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 6, dropout = 0}) end,
      torch = "torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0, batch_first=True)"}}}

---------------------------------------------------------------- losses

-- one case per reduction (the twin's random case is "mean"), with the given options
local function loss_edges(make, torch, extra)
  local e = {}
  for _, r in ipairs({"sum", "none"}) do
    e[#e + 1] = {r, function() return extra.inputs() end, build = function() return make(r) end, torch = torch(r)}
  end
  for _, x in ipairs(extra) do e[#e + 1] = x end
  return e
end

local function classes_twin(name, tname, opts_lua, opts_py, logits)
  local function make(r) local o = opts_lua(); o.reduction = r; return nn[name](o) end
  local function torch(r) return string.format("torch.nn.%s(%sreduction='%s')", tname, opts_py, r) end
  local inputs = function() return {R(5, 4), I({1, 4, 2, 2, 3})} end
  return {build = function() return make("mean") end, torch = torch("mean"), call = "m(a, b - 1)", inputs = inputs,
    grad = {true}, tol = NORM, norm = true, edge = loss_edges(make, torch, {inputs = inputs,
      {"size-1", function() return {R(1, 4), I({2})} end},
      {"large-rows", function() return {T(logits), I({1, 2, 3})} end}})}
end
local CW = "weight=torch.tensor([0.5, 1.0, 2.0, 0.25]), "
local BIG = {{1e6, 1e6 - 1, 1e6 - 3}, {100, 99, 97}, {-1e4, 0, -1e4}}
M.CrossEntropy = classes_twin("CrossEntropy", "CrossEntropyLoss", function() return {} end, "", BIG)
M.NLL = classes_twin("NLL", "NLLLoss", function() return {} end, "", {{-1e6, -1, -3}, {-1e-30, 0, -700}, {-2, -2, -2}})
-- class weights with label smoothing: torch weights the smoothing term per class
local cw_ls = classes_twin("CrossEntropy", "CrossEntropyLoss",
  function() return {weight = T({0.5, 1.0, 2.0, 0.25}), label_smoothing = 0.1} end, CW .. "label_smoothing=0.1, ", BIG)
local nll_cw = classes_twin("NLL", "NLLLoss", function() return {weight = T({0.5, 1.0, 2.0, 0.25})} end, CW, BIG)
for _, pair in ipairs({{M.CrossEntropy, cw_ls, "weights-smoothing"}, {M.NLL, nll_cw, "class-weights"}}) do
  local into, from, tag = pair[1], pair[2], pair[3]
  table.insert(into.edge, {tag, from.inputs, build = from.build, torch = from.torch})
  for _, e in ipairs(from.edge) do
    if e[1] ~= "large-rows" then
      local c = {tag .. "-" .. e[1], e[2]}
      for k, v in pairs(e) do if type(k) == "string" then c[k] = v end end
      c.build, c.torch = c.build or from.build, c.torch or from.torch
      table.insert(into.edge, c)
    end
  end
end

-- elementwise losses: input and target of one shape, gradients of both
local function pair_twin(name, tname, opts_lua, opts_py, points)
  local function make(r) local o = opts_lua(); o.reduction = r; return nn[name](o) end
  local function torch(r) return string.format("torch.nn.%s(%sreduction='%s')", tname, opts_py, r) end
  local inputs = function() return {R(4, 3), R(4, 3)} end
  return {build = function() return make("mean") end, torch = torch("mean"), call = "m(a, b)", inputs = inputs,
    tol = NORM, norm = true, edge = loss_edges(make, torch, {inputs = inputs,
      {"non-smooth", function() return {T(points[1]), T(points[2])} end},
      {"size-1", function() return {R(1, 1), R(1, 1)} end}})}
end
local D = {{{0, 1, -1, 0.5, 2, -0.3}}, {{0, 0, 0, 0, 1, 0.2}}}       -- d = 0, +-1 (delta), 0.5, 1, -0.5
M.MSE = pair_twin("MSE", "MSELoss", function() return {} end, "", D)
M.Huber = pair_twin("Huber", "HuberLoss", function() return {delta = 0.5} end, "delta=0.5, ", D)
M.SmoothL1 = pair_twin("SmoothL1", "SmoothL1Loss", function() return {beta = 0.5} end, "beta=0.5, ", D)
-- beta = 0 is the L1 loss: torch 1.13's smooth_l1_loss(beta=0) has the gradient -1 at d = 0
-- where its l1_loss and dlua have sign(0) = 0 (losses_spec.lua)
table.insert(M.SmoothL1.edge, {"beta-0", function() return {T(D[1]), T(D[2])} end,
  build = function() return nn.SmoothL1{beta = 0} end, torch = "torch.nn.L1Loss()",
  differs = "beta = 0 is compared with torch's L1Loss (torch's SmoothL1Loss(beta=0) gives -1 at d = 0)"})

-- targets in [0, 1]; the gradient in the target too
local function bce_inputs() return {R(4, 3):scale(3), U(4, 3)} end
M.BCEWithLogits = {build = function() return nn.BCEWithLogits() end, torch = "torch.nn.BCEWithLogitsLoss()", call = "m(a, b)",
  inputs = bce_inputs, tol = NORM, norm = true,
  edge = {{"sum", bce_inputs, build = function() return nn.BCEWithLogits{reduction = "sum"} end,
      torch = "torch.nn.BCEWithLogitsLoss(reduction='sum')"},
    {"none-pos-weight-weight", bce_inputs,
      build = function() return nn.BCEWithLogits{reduction = "none", pos_weight = T({2, 0.5, 1.5}), weight = T({{1, 0.5, 2}})} end,
      torch = "torch.nn.BCEWithLogitsLoss(reduction='none', pos_weight=torch.tensor([2, 0.5, 1.5]), " ..
        "weight=torch.tensor([[1, 0.5, 2]]))"},
    {"mean-pos-weight", bce_inputs, build = function() return nn.BCEWithLogits{pos_weight = T({2, 0.5, 1.5})} end,
      torch = "torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2, 0.5, 1.5]))"},
    -- torch's own value loses 3e-11 relative at x = -12 and is 0 for 1e-27 at x = -60: the
    -- extremes are compared per reduction "sum", where those terms are below rounding
    {"extremes", function() return {T({{-1e4, -60, -12, 0, 12, 60, 1e4}}), T({{0, 0, 1, 0.5, 0, 1, 1}})} end,
      build = function() return nn.BCEWithLogits{reduction = "sum"} end, torch = "torch.nn.BCEWithLogitsLoss(reduction='sum')"},
    {"size-1", function() return {R(1, 1), U(1, 1)} end}}}

return M
