-- Each row of the op table (engine/ops/ops.h DL_OP_TABLE, listed by core._ops()) and its
-- PyTorch twin, for tests/lua/differential_spec.lua (issue 34, item 1). A row without a twin
-- here fails that spec by name, so a new op cannot land without one.
--
--   name = {lua = function(a, b, ...) -> the dlua result (a tensor),
--           torch = "a Python expression of a, b, ... (F32 is True in the float32 run)",
--           inputs = function() -> the random case's inputs (float64; int64 indices are
--                    1-based, as dlua's: the torch expression subtracts 1; uint8 becomes bool),
--           edge = {{label, function() -> inputs [, lua = ..., torch = ...]}, ...},
--           grad = true | false, tol = {f64 = ..., f32 = ...} (worst error allowed),
--           norm = true: errors relative to the output's largest magnitude (a sum of
--                  products: rounding is bounded norm-wise), else to each element,
--           floor = f: with norm, errors relative to at least f (docs/api/tensor.md states
--                   attention's float32 error relative to max(|x|, 1)),
--           differs = "why": dlua deliberately differs from torch; `torch` is the
--                     documented rule instead of torch's own function}
-- The spec adds to every case whose inputs have a float input of 2 or more dimensions a
-- non-contiguous run of it (each such input passed as a transposed view of a leaf).
local dl = require "dlua"
local core = require "dlua.core"

local function T(v) return dl.tensor(v, {dtype = "float64"}) end
local function I(v) return dl.tensor(v, {dtype = "int64"}) end
local function randn(...) return dl.randn(...):double() end
local function rand(...) return dl.rand(...):double() end
local function uniform(lo, hi, ...) return rand(...) * (hi - lo) + lo end

-- float32 tolerances: one rounding of an exact result is 2^-24 = 6e-8 relative; a kernel
-- that rounds its argument reduction or composes two roundings gets a few of those
local E32 = {f64 = 2e-15, f32 = 1.2e-7}       -- correctly rounded to within an ulp or so
local E32G = {f64 = 1e-14, f32 = 3e-7}        -- value and gradient, a few roundings
local NORM = {f64 = 1e-14, f32 = 1e-6}        -- reductions and products, norm-wise

local M = {}

-- unary elementwise rows: random inputs in the domain, size-0 and size-1 dims, extreme
-- magnitudes and the points where torch defines the derivative by convention
local function unary(name, expr, gen, extremes, opts)
  opts = opts or {}
  local edge = {
    {"size-0", function() return {randn(0, 3)} end},
    {"size-1", function() return {gen(1, 1, 1)} end},
    {"extremes", function() return {T(extremes)} end},
  }
  if opts.points then edge[#edge + 1] = {"non-smooth", function() return {T(opts.points)} end} end
  M[name] = {lua = function(a) return a[name](a) end, torch = expr, inputs = function() return {gen(3, 4)} end,
    edge = edge, grad = true, tol = opts.tol or E32G, differs = opts.differs}
end

local R = function(...) return randn(...) * 2 end
local POS = function(...) return rand(...) * 3 + 0.05 end
local UNIT = function(...) return uniform(-0.95, 0.95, ...) end
local BIG = {-1e300, -1e30, -1e-30, -1e-300, 0, 1e-300, 1e-30, 1e30, 1e300}
local BIGPOS = {1e-300, 1e-30, 1e-8, 1e30, 1e300}
local MID = {-700, -80, -30, -1e-30, 0, 1e-30, 30, 80, 700}

unary("neg", "-a", R, BIG)
unary("exp", "torch.exp(a)", R, MID)
unary("log", "torch.log(a)", POS, BIGPOS)
unary("sqrt", "torch.sqrt(a)", POS, BIGPOS)
unary("rsqrt", "torch.rsqrt(a)", POS, BIGPOS)
unary("abs", "torch.abs(a)", R, BIG, {points = {-0.0, 0, -1, 1}})
unary("relu", "F.relu(a)", R, BIG, {points = {-0.0, 0, -1, 1}})
unary("sign", "torch.sign(a)", R, BIG, {points = {-0.0, 0, -1, 1}})
unary("square", "torch.square(a)", R, {-1e30, -1e-30, 0, 1e-30, 1e30, 1e200})
unary("sigmoid", "torch.sigmoid(a)", R, MID)
-- the gradient 1 - y^2 comes from the rounded output: near |x| = 6 an ulp of y is eps / (1 - y^2)
-- of it (7.6e-12 for torch at x = 6.38, 1.2e-11 for dlua, against exact math)
unary("tanh", "torch.tanh(a)", R, MID, {tol = {f64 = 3e-11, f32 = 3e-7}})
-- x * Phi(x) for x < 0 cancels in 1 + erf: 5e-15 (dlua) and 6e-15 (torch) at x = -2.57
unary("gelu", "F.gelu(a)", R, {-40, -10, -1e-30, 0, 1e-30, 10, 1e30}, {tol = {f64 = 3e-14, f32 = 3e-7}})
unary("sin", "torch.sin(a)", R, {-1e5, -100, -1e-30, 0, 1e-30, 3.14, 100, 1e5})
unary("cos", "torch.cos(a)", R, {-1e5, -100, -1e-30, 0, 1e-30, 3.14, 100, 1e5})
unary("tan", "torch.tan(a)", function(...) return uniform(-1.3, 1.3, ...) end, {-1.5, -1e-30, 0, 1e-30, 1.5, 100})
unary("asin", "torch.asin(a)", UNIT, {-1, -0.999, -1e-30, 0, 1e-30, 0.999, 1})
unary("acos", "torch.acos(a)", UNIT, {-1, -0.999, -1e-30, 0, 1e-30, 0.999, 1})
unary("atan", "torch.atan(a)", R, BIG)
unary("sinh", "torch.sinh(a)", R, MID)
unary("cosh", "torch.cosh(a)", R, MID)
unary("asinh", "torch.asinh(a)", R, {-1e30, -1e-30, 0, 1e-30, 1e30})
unary("acosh", "torch.acosh(a)", function(...) return rand(...) * 3 + 1.2 end, {1.5, 10, 1e10, 1e30})
unary("atanh", "torch.atanh(a)", UNIT, {-0.999, -1e-30, 0, 1e-30, 0.999})
-- torch's gradient is expm1(x) + 1, which loses e^x's low digits far below 0
unary("expm1", "torch.expm1(a.detach()) + (torch.exp(a) - torch.exp(a).detach())", R, {-80, -30, -1e-30, 0, 1e-30, 30, 80},
  {differs = "torch's gradient is expm1(x) + 1, which is 0 below x = -37 and loses e^x's digits far below 0; " ..
    "dlua's is e^x (tests/lua/numerics_spec.lua); the twin's gradient is e^x"})
unary("log1p", "torch.log1p(a)", function(...) return rand(...) * 3 - 0.5 end, {-0.9, -1e-30, 0, 1e-30, 1e30})
unary("log2", "torch.log2(a)", POS, BIGPOS)
unary("log10", "torch.log10(a)", POS, BIGPOS)
unary("erf", "torch.erf(a)", R, {-30, -3, -1e-30, 0, 1e-30, 3, 30})
unary("erfc", "torch.erfc(a)", R, {-30, -3, -1e-30, 0, 1e-30, 3, 10, 26})
-- near +-1 erfinv's condition number is large: an ulp of the input is several of the result;
-- torch's gradient at -0.999 is 4.4e-14 off exact math, dlua's 1.3e-15
unary("erfinv", "torch.erfinv(a)", UNIT, {-0.999, -1e-30, 0, 1e-30, 0.999}, {tol = {f64 = 1e-13, f32 = 1e-6}})
unary("softplus", "F.softplus(a, threshold=40)", R, {-800, -30, -1e-30, 0, 1e-30, 25, 30, 800},
  {differs = "torch's softplus returns x itself above x = 20; dlua's is ln(1 + e^x) everywhere " ..
    "(docs/api/tensor.md); the twin moves torch's threshold to 40, where ln(1 + e^x) rounds to x"})
unary("silu", "F.silu(a)", R, {-800, -30, -1e-30, 0, 1e-30, 30, 1e30})
unary("mish", "F.mish(a)", R, {-800, -30, -1e-30, 0, 1e-30, 30, 1e30})
unary("log_sigmoid", "F.logsigmoid(a)", R, {-800, -30, -1e-30, 0, 1e-30, 30, 800})
unary("exp2", "torch.exp2(a)", R, {-1100, -100, -1e-30, 0, 1e-30, 100, 1100})
for _, n in ipairs({"floor", "ceil", "round", "trunc"}) do
  unary(n, "torch." .. n .. "(a)", function(...) return randn(...) * 4 end, {-1e300, -1e30, -2.5, -0.5, 0, 0.5, 1.5, 2.5, 1e30},
    {points = {-2, -1.5, -1, -0.5, -0.0, 0, 0.5, 1, 1.5, 2}})
end

-- binary rows: broadcasting, size-0 and size-1 dims, extremes and ties
local function binary(name, expr, lua, ga, gb, opts)
  opts = opts or {}
  local edge = {
    {"broadcast", function() return {ga(2, 1, 4), gb(3, 1)} end},
    {"size-0", function() return {ga(0, 4), gb(4)} end},
    {"size-1", function() return {ga(1), gb(1, 1)} end},
    {"scalar-like", function() return {ga(3), gb(1)} end},
  }
  for _, e in ipairs(opts.edge or {}) do edge[#edge + 1] = e end
  M[name] = {lua = lua, torch = expr, inputs = function() return {ga(3, 4), gb(4)} end, edge = edge,
    grad = true, tol = opts.tol or E32G, differs = opts.differs}
end

local XA = T({-1e300, -1e30, -1e-30, 0, 1e-30, 1e30, 1e300, 3})
local XB = T({1e-300, 1e30, -1e-30, 2, 1e30, -1e30, 1e-300, -3})
binary("add", "a + b", function(a, b) return a + b end, R, R, {edge = {{"extremes", function() return {XA, XB} end}}})
binary("sub", "a - b", function(a, b) return a - b end, R, R, {edge = {{"extremes", function() return {XA, XB} end}}})
binary("mul", "a * b", function(a, b) return a * b end, R, R, {edge = {{"extremes", function() return {XA, XB} end}}})
-- float32 d/db = -a/b^2 summed over the broadcast: 4.2e-7 where torch's float32 is at 6e-8
binary("div", "a / b", function(a, b) return a / b end, R, POS, {tol = {f64 = 1e-14, f32 = 6e-7}, edge = {
  {"extremes", function() return {XA, T({1e-300, 1e30, -1e-30, 2, 1e30, -1e30, 1e300, -3})} end},
  {"by-zero", function() return {T({1, -1, 0}), T({0, 0, 1})} end}}})
binary("pow", "torch.pow(a, b)", function(a, b) return a:pow(b) end, POS, R, {edge = {
  {"base-0", function() return {T({0, 0, 0, 0, 2, 0, -1}), T({0, 2, 0.5, -1, 0, 1, 2})} end},
  {"extremes", function() return {T({1e-30, 1e30, 1e-300, 2, 0.5}), T({2, -0.5, 0.5, 1000, -2000})} end}}})
for _, n in ipairs({"maximum", "minimum"}) do
  binary(n, "torch." .. n .. "(a, b)", function(a, b) return a[n](a, b) end, R, R, {edge = {
    {"ties", function() return {T({{1, 2, 3}, {-0.5, 4, 4}}), T({1, 5, 3})} end},
    {"extremes", function() return {XA, XB} end}}})
end

M.scale = {lua = function(a) return a:scale(0.5, 2) end, torch = "a * 0.5 + 2", inputs = function() return {R(3, 4)} end,
  edge = {{"size-0", function() return {randn(2, 0)} end}, {"extremes", function() return {T({-1e300, -1e-30, 0, 1e30})} end}},
  grad = true, tol = E32G}
M.clamp = {lua = function(a) return a:clamp(-0.5, 0.5) end, torch = "torch.clamp(a, -0.5, 0.5)",
  inputs = function() return {R(3, 4)} end,
  edge = {{"at-bounds", function() return {T({-1, -0.5, 0, 0.5, 1})} end},
    {"size-0", function() return {randn(0, 2)} end}, {"extremes", function() return {T({-1e300, -1e-30, 1e30})} end},
    {"lo-only", function() return {R(5)} end, lua = function(a) return a:clamp(0) end, torch = "torch.clamp(a, min=0)"}},
  grad = true, tol = E32G}
M.where = {lua = function(c, a, b) return dl.where(c, a, b) end, torch = "torch.where(a, b, c)",
  inputs = function() return {R(3, 4):gt(0), R(3, 4), R(4)} end,
  edge = {{"broadcast", function() return {R(2, 1, 1):gt(0), R(3, 1), R(4)} end},
    {"size-0", function() return {R(0, 4):gt(0), R(0, 4), R(4)} end}},
  grad = true, tol = E32G}
M.cast = {lua = function(a) return a:dtype() == "float32" and a:to("float64") or a:to("float32") end,
  torch = "a if F32 else a.float().double()", inputs = function() return {R(3, 4)} end,
  edge = {{"extremes", function() return {T({1e300, 1e-300, 1e-40, -1e30, 0.1})} end},
    {"size-0", function() return {randn(0)} end}},
  grad = true, tol = {f64 = 0, f32 = 0}}

-- reductions: over one and several dimensions, keepdim, size-0, size-1, ties
local function red(name, lua_dim, torch_dim, lua_all, torch_all, opts)
  opts = opts or {}
  local edge = {
    {"all", function() return {R(3, 4)} end, lua = lua_all, torch = torch_all},
    {"size-1", function() return {R(1, 4, 1)} end},
    {"extremes", function() return {T(opts.extremes or {{{1e300, -1e300, 1e-300}, {1e30, 1e-30, -1e30}}})} end},
  }
  for _, e in ipairs(opts.edge or {}) do edge[#edge + 1] = e end
  M[name] = {lua = lua_dim, torch = torch_dim, inputs = function() return {R(3, 4, 5)} end, edge = edge,
    grad = true, tol = opts.tol or NORM, norm = true, differs = opts.differs}
end
red("sum", function(a) return a:sum({1, 3}) end, "a.sum((0, 2))", function(a) return a:sum() end, "a.sum()",
  {edge = {{"size-0", function() return {randn(0, 3)} end, lua = function(a) return a:sum(1) end, torch = "a.sum(0)"}}})
red("mean", function(a) return a:mean(2, true) end, "a.mean(1, keepdim=True)", function(a) return a:mean() end, "a.mean()")
red("var", function(a) return a:var(2) end, "a.var(1)", function(a) return a:var({correction = 0}) end,
  "a.var(unbiased=False)")
-- the documented rule: logsumexp's value, and a gradient softmax(x) from x - max
local function lse(d)
  local p = string.format("(lambda e: e / e.sum(%s, keepdim=True))(torch.exp(a.detach() - a.detach().amax(%s, keepdim=True)))", d, d)
  return string.format("(lambda p: torch.logsumexp(a.detach(), %s) + ((p * a).sum(%s) - (p * a).sum(%s).detach()))(%s)", d, d, d, p)
end
red("logsumexp", function(a) return a:logsumexp(3) end, lse("2"), function(a) return a:logsumexp({1, 2}) end, lse("(0, 1)"),
  {edge = {{"large-rows", function() return {T({{1e6, 1e6 - 1, 1e6 - 3}, {-1e4, 0, -1e4}})} end,
    lua = function(a) return a:logsumexp(2) end, torch = lse("1")},
    -- a row with +inf: torch's exp(x - result) is 0 off the infinite entries, NaN on them
    {"inf-rows", function() return {T({{1, math.huge, 2}, {math.huge, math.huge, 0}, {math.huge, -math.huge, 0},
      {-math.huge, 0, 1}})} end, lua = function(a) return a:logsumexp(2) end, torch = "torch.logsumexp(a, 1)"}},
   extremes = {{{1e30, -1e30, 1e-30}, {1e20, 1e-30, -1e20}}},
   differs = "torch's gradient exp(x - result) takes the result rounded at the scale of x (1.1e-11 off at " ..
     "x = 1e6 in float64); dlua's is softmax(x) from x - max (docs/api/tensor.md): the twin's gradient is that"})
for _, n in ipairs({"max", "min"}) do
  red(n, function(a) return (a[n](a, 2)) end, "a." .. n .. "(1).values", function(a) return a[n](a) end, "a." .. n .. "()",
    {edge = {{"ties-dim", function() return {T({{1, 3, 3}, {2, 2, 0}, {5, 5, 5}})} end,
      lua = function(a) return (a[n](a, 2)) end, torch = "a." .. n .. "(1).values"},
      {"ties-all", function() return {T({{1, 5, 3}, {5, 2, 0}, {0, 5, 0}})} end}}})
end
for _, n in ipairs({"softmax", "log_softmax"}) do
  M[n] = {lua = function(a) return a[n](a, 2) end, torch = "F." .. n .. "(a, 1)", inputs = function() return {R(3, 5)} end,
    edge = {{"large-rows", function() return {T({{1e6, 1e6 - 1, 1e6 - 3}, {100, 99, 97}, {-1e4, 0, -1e4}})} end},
      {"size-1", function() return {R(4, 1)} end}, {"size-0", function() return {randn(0, 3)} end},
      {"inf-rows", function() return {T({{1, math.huge, 2}, {-math.huge, 0, 1}})} end},
      {"dim-1", function() return {R(3, 4)} end, lua = function(a) return a[n](a, 1) end, torch = "F." .. n .. "(a, 0)"}},
    grad = true, tol = {f64 = 1e-14, f32 = 1e-6}, norm = true}
end

-- views and copies
M.reshape = {lua = function(a) return a:reshape(2, 6) end, torch = "a.reshape(2, 6)", inputs = function() return {R(3, 4)} end,
  edge = {{"size-0", function() return {randn(0, 4)} end, lua = function(a) return a:reshape(4, 0) end, torch = "a.reshape(4, 0)"},
    {"to-0d", function() return {R(1, 1)} end, lua = function(a) return a:reshape({}) end, torch = "a.reshape(())"}},
  grad = true, tol = {f64 = 0, f32 = 0}}
M.permute = {lua = function(a) return a:permute(3, 1, 2) end, torch = "a.permute(2, 0, 1)", inputs = function() return {R(2, 3, 4)} end,
  edge = {{"size-0", function() return {randn(2, 0, 3)} end}}, grad = true, tol = {f64 = 0, f32 = 0}}
M.narrow = {lua = function(a) return a:narrow(2, 2, 2) end, torch = "a.narrow(1, 1, 2)", inputs = function() return {R(3, 4)} end,
  edge = {{"empty", function() return {R(3, 4)} end, lua = function(a) return a:narrow(2, 3, 0) end, torch = "a.narrow(1, 2, 0)"}},
  grad = true, tol = {f64 = 0, f32 = 0}}
M.expand = {lua = function(a) return a:expand(3, 4) end, torch = "a.expand(3, 4)", inputs = function() return {R(1, 4)} end,
  edge = {{"new-dims", function() return {R(4)} end, lua = function(a) return a:expand(2, 3, 4) end, torch = "a.expand(2, 3, 4)"},
    {"to-0", function() return {R(1, 4)} end, lua = function(a) return a:expand(0, 4) end, torch = "a.expand(0, 4)"}},
  grad = true, tol = {f64 = 0, f32 = 0}}
M.clone = {lua = function(a) return a:clone() end, torch = "a.clone()", inputs = function() return {R(3, 4)} end,
  edge = {{"size-0", function() return {randn(0, 4)} end}}, grad = true, tol = {f64 = 0, f32 = 0}}
M.cat = {lua = function(a, b) return dl.cat({a, b, a}, 2) end, torch = "torch.cat([a, b, a], 1)",
  inputs = function() return {R(2, 3), R(2, 4)} end,
  edge = {{"size-0", function() return {randn(2, 0), R(2, 2)} end}, {"dim-1", function() return {R(1, 3), R(2, 3)} end,
    lua = function(a, b) return dl.cat({a, b}, 1) end, torch = "torch.cat([a, b], 0)"}},
  grad = true, tol = {f64 = 0, f32 = 0}}
M.gather = {lua = function(a, i) return a:gather(2, i) end, torch = "torch.gather(a, 1, b - 1)",
  inputs = function() return {R(3, 4), I({{1, 3}, {2, 2}, {4, 1}})} end,
  edge = {{"size-0", function() return {R(3, 4), dl.zeros(3, 0):to("int64")} end}}, grad = true, tol = {f64 = 0, f32 = 0}}
M.index_select = {lua = function(a, i) return a:index_select(1, i) end, torch = "torch.index_select(a, 0, b - 1)",
  inputs = function() return {R(3, 4), I({3, 1, 3})} end,
  edge = {{"size-0", function() return {R(3, 4), dl.zeros(0):to("int64")} end}}, grad = true, tol = {f64 = 0, f32 = 0}}
M.scatter_add = {lua = function(a, i, s) return a:scatter_add(1, i, s) end, torch = "a.scatter_add(0, b - 1, c)",
  inputs = function() return {R(2, 3), I({{1, 2, 2}, {1, 1, 2}}), R(2, 3)} end,
  edge = {{"repeats", function() return {R(3, 2), I({{1, 1}, {1, 1}, {3, 1}}), R(3, 2)} end}},
  grad = true, tol = E32G}

-- products
M.matmul = {lua = function(a, b) return a:matmul(b) end, torch = "torch.matmul(a, b)",
  inputs = function() return {R(2, 3, 4), R(4, 5)} end,
  edge = {{"vec-vec", function() return {R(4), R(4)} end}, {"mat-vec", function() return {R(3, 4), R(4)} end},
    {"broadcast", function() return {R(2, 1, 3, 4), R(5, 4, 2)} end}, {"size-0-k", function() return {randn(3, 0), randn(0, 2)} end},
    {"size-0-m", function() return {randn(0, 3), R(3, 2)} end}, {"size-1", function() return {R(1, 1), R(1, 1)} end},
    {"extremes", function() return {T({{1e150, 1e-150}, {1e-30, 1}}), T({{1e-150, 1}, {1e150, 1e30}})} end}},
  grad = true, tol = NORM, norm = true}
M.linear = {lua = function(x, w, b) return x:linear(w, b) end, torch = "F.linear(a, b, c)",
  inputs = function() return {R(2, 3, 4), R(5, 4), R(5)} end,
  edge = {{"size-0", function() return {randn(0, 4), R(5, 4), R(5)} end}, {"size-1", function() return {R(1, 1), R(1, 1), R(1)} end}},
  grad = true, tol = NORM, norm = true}
M.conv2d = {lua = function(x, w, b) return dl.conv2d(x, w, b, {padding = 1, stride = {1, 2}}) end,
  torch = "F.conv2d(a, b, c, padding=1, stride=(1, 2))",
  inputs = function() return {R(2, 2, 4, 5), R(3, 2, 3, 3), R(3)} end,
  edge = {{"1x1", function() return {R(1, 3, 4, 4), R(2, 3, 1, 1), R(2)} end,
    lua = function(x, w, b) return dl.conv2d(x, w, b) end, torch = "F.conv2d(a, b, c)"},
    {"3x3-winograd", function() return {R(1, 4, 8, 8), R(4, 4, 3, 3), R(4)} end,
      lua = function(x, w, b) return dl.conv2d(x, w, b, {padding = 1}) end,
      torch = "F.conv2d(a, b, c, padding=1)"}},
  grad = true, tol = {f64 = 1e-14, f32 = 5e-7}, norm = true}
M.max_pool2d = {lua = function(x) return dl.max_pool2d(x, 2) end, torch = "F.max_pool2d(a, 2)",
  inputs = function() return {R(2, 2, 4, 4)} end,
  edge = {{"ties", function() return {T({{{{1, 1, 2, 0}, {1, 1, 2, 2}, {0, 0, 3, 3}, {0, 0, 3, 3}}}})} end}},
  grad = true, tol = {f64 = 0, f32 = 0}}
M.avg_pool2d = {lua = function(x) return dl.avg_pool2d(x, 3, {stride = 2, padding = 1}) end,
  torch = "F.avg_pool2d(a, 3, stride=2, padding=1)", inputs = function() return {R(1, 2, 5, 5)} end,
  edge = {{"2x2", function() return {R(2, 1, 4, 6)} end, lua = function(x) return dl.avg_pool2d(x, 2) end,
    torch = "F.avg_pool2d(a, 2)"}},
  grad = true, tol = {f64 = 1e-15, f32 = 3e-7}, norm = true}
M.batch_norm = {lua = function(x, w, b) return core.batch_norm(x, w, b) end,
  torch = "F.batch_norm(a, None, None, b, c, training=True, eps=1e-5)",
  inputs = function() return {R(6, 3, 2, 2), POS(3), R(3)} end,
  edge = {{"2d", function() return {R(5, 4), POS(4), R(4)} end}},
  grad = true, tol = NORM, norm = true}
M.scaled_dot_product_attention = {
  lua = function(q, k, v, keep) return q:scaled_dot_product_attention(k, v, {causal = true, mask = keep, scale = 0.7}) end,
  torch = "torch.softmax((0.7 * a @ b.transpose(-2, -1)).masked_fill(~(d & torch.ones(a.shape[-2], b.shape[-2])" ..
    ".tril().bool()), -inf), -1) @ c",
  inputs = function() return {R(2, 2, 5, 3), R(2, 2, 4, 3), R(2, 2, 4, 2),
    dl.tensor({1, 1, 1, 0, 1, 1, 1, 1}, {dtype = "uint8"}):reshape(2, 1, 1, 4)} end,
  edge = {{"size-1", function() return {R(1, 1, 1, 2), R(1, 1, 1, 2), R(1, 1, 1, 3), dl.ones(1, 1, 1, 1):to("uint8")} end}},
  grad = true, tol = {f64 = 1e-14, f32 = 1e-6}, norm = true, floor = 1}

local Square = dl.autograd.Function{
  forward = function(ctx, x) ctx.x = x; return x * x end,
  backward = function(ctx, g) return g * ctx.x * 2 end,
}
M["function"] = {lua = function(a) return Square(a) end, torch = "a * a", inputs = function() return {R(3, 4)} end,
  edge = {{"size-0", function() return {randn(0, 2)} end}}, grad = true, tol = E32G}

return M
