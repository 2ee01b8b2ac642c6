-- Numerics against PyTorch in float64 (issue 34, items 2 and 3): the softmax family on rows
-- of large logits, torch's gradient conventions at ties and at pow(0, b), and every
-- elementwise op added for positional encodings and custom layers, value and gradient.
-- torch is the outside reference (tests/lua/torch_twin.lua); the softmax rows are also
-- checked against exact math.
local dl = require "dlua"
local TW = dofile("tests/lua/torch_twin.lua")
local lit, flat, rel_err = TW.lit, TW.flat, TW.rel_err

local function leaf(v, dtype) return dl.tensor(v, {dtype = dtype or "float64"}):requires_grad(true) end

-- asserts got (list) within tol of want (list), relative to max(|want|, floor)
local function near(got, want, tol, what, floor)
  local e, at = rel_err(got, want, floor)
  assert(e <= tol, string.format("%s: relative error %.3g at %d (got %.17g, want %.17g) above %g", what, e, at,
    got[at] or 0, want[at] or 0, tol))
end

describe("softmax, log_softmax, logsumexp and CrossEntropy on rows of large logits", function()
  local CS = {1, 100, 1e4, 1e6}
  -- the row [c, c-1, c-3] (exact in float32 for these c): the answer does not depend on c
  local L = math.log(1 + math.exp(-1) + math.exp(-3))
  local LOGP = {-L, -1 - L, -3 - L}
  local P = {math.exp(-L), math.exp(-1 - L), math.exp(-3 - L)}
  local function rows() local r = {} for i, c in ipairs(CS) do r[i] = {c, c - 1, c - 3} end return r end
  local function rep(t) local r = {} for i = 1, #CS do for _, v in ipairs(t) do r[#r + 1] = v end end return r end
  local labels = {1, 2, 3, 1}
  local onehot = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 0, 0}}

  -- dlua's values and gradients for one dtype: log_softmax (gradient of sum(logp * onehot)),
  -- softmax (of sum(p * onehot)), logsumexp (of its sum) and CrossEntropy (mean, labels)
  local function dlua_side(dtype)
    local r = {}
    local x = leaf(rows(), dtype)
    local y = x:log_softmax(2)
    r.logp = flat(y); (y * dl.tensor(onehot, {dtype = dtype})):sum():backward(); r.glogp = flat(x.grad)
    x = leaf(rows(), dtype); y = x:softmax(2)
    r.p = flat(y); (y * dl.tensor(onehot, {dtype = dtype})):sum():backward(); r.gp = flat(x.grad)
    x = leaf(rows(), dtype); y = x:logsumexp(2)
    r.lse = flat(y); y:sum():backward(); r.glse = flat(x.grad)
    x = leaf(rows(), dtype); y = dl.nn.CrossEntropy()(x, dl.tensor(labels))
    r.ce = {y:item()}; y:backward(); r.gce = flat(x.grad)
    return r
  end

  local torch
  setup(function()
    torch = TW.script():add(table.concat({
      "X = " .. lit(rows()), "oh = T(" .. lit(onehot) .. ")",
      "x = T(X, True); y = F.log_softmax(x, 1); out('logp', y); (y * oh).sum().backward(); out('glogp', x.grad)",
      "x = T(X, True); y = F.softmax(x, 1); out('p', y); (y * oh).sum().backward(); out('gp', x.grad)",
      "x = T(X, True); y = torch.logsumexp(x, 1); out('lse', y); y.sum().backward(); out('glse', x.grad)",
      "x = T(X, True); y = F.cross_entropy(x, torch.tensor(" .. lit(labels) .. ") - 1); out('ce', y); " ..
        "y.backward(); out('gce', x.grad)",
    }, "\n")):run()
  end)

  it("float32 stays within 1e-6 relative of torch's float64 and of exact math for c up to 1e6", function()
    local r = dlua_side("float32")
    for _, k in ipairs({"logp", "glogp", "p", "gp", "lse", "glse", "ce", "gce"}) do
      near(r[k], torch[k], 1e-6, "float32 " .. k .. " against torch")
    end
    near(r.logp, rep(LOGP), 1e-6, "float32 log_softmax against exact math")
    near(r.p, rep(P), 1e-6, "float32 softmax against exact math")
    near(r.ce, {(L + (1 + L) + (3 + L) + L) / 4}, 1e-6, "float32 CrossEntropy against exact math")
    -- the gradients of log_softmax picked at the label: onehot - softmax
    local g = {}
    for i = 1, #CS do for j = 1, 3 do g[#g + 1] = onehot[i][j] - P[j] end end
    near(r.glogp, g, 1e-6, "float32 log_softmax gradient against exact math")
  end)

  it("float64 agrees with torch and exact math to rounding", function()
    local r = dlua_side("float64")
    for _, k in ipairs({"logp", "glogp", "p", "gp", "lse", "ce", "gce"}) do
      near(r[k], torch[k], 1e-14, "float64 " .. k .. " against torch")
    end
    near(r.logp, rep(LOGP), 1e-15, "float64 log_softmax against exact math")
    -- logsumexp's gradient is the softmax: torch's own, exp(x - result) with the result rounded
    -- at the scale of c, is 1.8e-11 off at c = 1e6, so here exact math is the reference
    near(r.glse, rep(P), 1e-15, "float64 logsumexp gradient against exact math")
    near(r.glse, torch.glse, 1e-10, "float64 logsumexp gradient against torch")
  end)

  it("gives a row of -inf NaN, as torch does, and a -inf entry probability 0", function()
    local x = dl.tensor({{0, -math.huge, 1}}, {dtype = "float32"})
    local p = x:softmax(2):totable()[1]
    assert.are.equal(0, p[2])
    assert(math.abs(p[3] - 1 / (1 + math.exp(-1))) < 1e-7)
    assert.are.equal(-math.huge, x:log_softmax(2):totable()[1][2])
    local nan = dl.tensor({{-math.huge, -math.huge}}):log_softmax(2):totable()[1][1]
    assert.is_true(nan ~= nan)
  end)
end)

describe("gradient conventions (as torch defines them)", function()
  -- runs f on float64 leaves made of inputs, backward of sum(f(...) * w); the gradients, flat
  local function grads(f, inputs, w)
    local xs = {}
    for i, v in ipairs(inputs) do xs[i] = leaf(v) end
    local y = f(table.unpack(xs))
    ;(y * dl.tensor(w, {dtype = "float64"})):sum():backward()
    local g = {}
    for i, x in ipairs(xs) do g[i] = flat(x.grad) end
    return g
  end

  local A, B = {{1, 2, 3}, {-0.5, 4, 4}}, {1, 5, 3}
  local W = {{1, 2, 3}, {4, 5, 6}}
  local X = {{1, 3, 3}, {2, 2, 0}, {5, 5, 5}}
  local PA, PB = {0, 0, 0, 0, 2, 0, -1}, {0, 2, 0.5, -1, 0, 1, 2}
  local X3 = {{{1, 3, 3}, {2, 2, 0}}, {{5, 5, 5}, {0, 1, 1}}}

  local torch
  setup(function()
    torch = TW.script():add(table.concat({
      "def two(f, A, B, W, n):",
      "    a, b = T(A, True), T(B, True); (f(a, b) * T(W)).sum().backward(); out(n + '_a', a.grad); out(n + '_b', b.grad)",
      "two(torch.maximum, " .. lit(A) .. ", " .. lit(B) .. ", " .. lit(W) .. ", 'maximum')",
      "two(torch.minimum, " .. lit(A) .. ", " .. lit(B) .. ", " .. lit(W) .. ", 'minimum')",
      "two(torch.pow, " .. lit(PA) .. ", " .. lit(PB) .. ", " .. lit({1, 1, 1, 1, 1, 1, 1}) .. ", 'pow')",
      "X = " .. lit(X),
      "x = T(X, True); v, i = x.max(dim=1); (v * T([1, 2, 3])).sum().backward(); out('max_dim', x.grad); out('max_idx', i + 1)",
      "x = T(X, True); v, i = x.min(dim=0); (v * T([1, 2, 3])).sum().backward(); out('min_dim', x.grad); out('min_idx', i + 1)",
      "x = T(X, True); x.max().backward(); out('max_all', x.grad)",
      "x = T(X, True); x.amin(dim=(0, 1)).backward(); out('min_all', x.grad)",
      "X3 = " .. lit(X3),
      "x = T(X3, True); x.max(2, keepdim=True)[0].sum().backward(); out('max3', x.grad)",
      "x = T(X3, True); x.min(1)[0].sum().backward(); out('min3', x.grad)",
    }, "\n")):run()
  end)

  it("splits the gradient of maximum and minimum evenly at ties (broadcast operand summed back)", function()
    local g = grads(function(a, b) return a:maximum(b) end, {A, B}, W)
    assert.are.same(torch.maximum_a, g[1]); assert.are.same(torch.maximum_b, g[2])
    -- ties at [1][1] and [1][3] (b = {1, 5, 3} broadcast over the rows): half to each side
    assert.are.same({0.5, 0, 1.5, 0, 0, 6}, g[1]); assert.are.same({4.5, 7, 1.5}, g[2])
    g = grads(function(a, b) return a:minimum(b) end, {A, B}, W)
    assert.are.same(torch.minimum_a, g[1]); assert.are.same(torch.minimum_b, g[2])
  end)

  it("sends the gradient of max(d) and min(d) to the index they return, and splits it for max() and min()", function()
    local x = leaf(X)
    local v, i = x:max(2)
    assert.are.same(torch.max_idx, flat(i))
    ;(v * dl.tensor({1, 2, 3}, {dtype = "float64"})):sum():backward()
    assert.are.same(torch.max_dim, flat(x.grad))
    x = leaf(X)
    v, i = x:min(1)
    assert.are.same(torch.min_idx, flat(i))
    ;(v * dl.tensor({1, 2, 3}, {dtype = "float64"})):sum():backward()
    assert.are.same(torch.min_dim, flat(x.grad))
    x = leaf(X3); x:max(3, true):sum():backward()
    assert.are.same(torch.max3, flat(x.grad))
    x = leaf(X3); x:min(2):sum():backward()
    assert.are.same(torch.min3, flat(x.grad))
    x = leaf(X); x:max():backward()
    assert.are.same(torch.max_all, flat(x.grad))
    x = leaf(X); x:min({1, 2}):backward()
    assert.are.same(torch.min_all, flat(x.grad))
  end)

  it("gives pow's gradients at base 0 as torch does (0 where torch gives 0, inf where it gives inf)", function()
    local g = grads(function(a, b) return a:pow(b) end, {PA, PB}, {1, 1, 1, 1, 1, 1, 1})
    near(g[1], torch.pow_a, 1e-15, "d pow / d base")
    near(g[2], torch.pow_b, 1e-15, "d pow / d exponent")
    assert.are.same({0, 0, math.huge, -math.huge, 0, 1, -2}, g[1])
    for i = 1, 6 do assert.is_true(g[2][i] == g[2][i], "no NaN in d pow / d exponent at a base >= 0") end
  end)
end)

describe("elementwise functions against torch", function()
  local WIDE = {-15, -3, -1, -1e-5, 0, 1e-6, 0.5, 2, 15}
  local UNIT = {-0.99, -0.7, -0.2, 0, 0.3, 0.8, 0.999}
  -- name, inputs, torch expression of x (float64 inputs, so values and gradients compare to rounding)
  local OPS = {
    {"sin", {-10, -3.14, -1, -0.1, 0, 0.5, 2, 7, 100}, "torch.sin(x)"},
    {"cos", {-10, -3.14, -1, -0.1, 0, 0.5, 2, 7, 100}, "torch.cos(x)"},
    {"tan", {-1.5, -1, -0.3, 0, 0.2, 1.2, 1.55}, "torch.tan(x)"},
    {"asin", UNIT, "torch.asin(x)"}, {"acos", UNIT, "torch.acos(x)"}, {"atan", WIDE, "torch.atan(x)"},
    {"sinh", WIDE, "torch.sinh(x)"}, {"cosh", WIDE, "torch.cosh(x)"}, {"asinh", WIDE, "torch.asinh(x)"},
    -- torch's gradient 1 / sqrt(x^2 - 1) loses 2e-14 near 1; dlua's 1 / sqrt((x - 1)(x + 1)) does not
    {"acosh", {1.001, 1.5, 3, 10, 1e3}, "torch.acosh(x)", gtol = 1e-13,
     exact = function(x) return 1 / math.sqrt((x - 1) * (x + 1)) end}, {"atanh", UNIT, "torch.atanh(x)"},
    -- torch's gradient is expm1(x) + 1, 1e-10 off at x = -15: the exact e^x is the reference
    {"expm1", WIDE, "torch.expm1(x)", gtol = 1e-9, exact = math.exp}, {"log1p", {-0.9, -1e-6, 0, 1e-8, 0.5, 3, 1e4}, "torch.log1p(x)"},
    {"log2", {1e-5, 0.3, 1, 2, 1e3}, "torch.log2(x)"}, {"log10", {1e-5, 0.3, 1, 2, 1e3}, "torch.log10(x)"},
    {"erf", WIDE, "torch.erf(x)"}, {"erfc", {-3, -1, 0, 0.5, 2, 5, 10}, "torch.erfc(x)"},
    -- at 0.999 erfinv's condition number is 200: one ulp of the input is 2e-14 of the result
    {"erfinv", UNIT, "torch.erfinv(x)", tol = 3e-14, gtol = 1e-13},
    -- torch's softplus returns x itself above its threshold 20; dlua's is log(1 + e^x) everywhere
    {"softplus", {-30, -15, -3, -1e-5, 0, 0.5, 2, 15, 19.5}, "F.softplus(x)"},
    {"silu", WIDE, "F.silu(x)"}, {"mish", WIDE, "F.mish(x)"}, {"log_sigmoid", WIDE, "F.logsigmoid(x)"},
    {"exp2", {-20, -1.5, 0, 0.3, 10, 100}, "torch.exp2(x)"},
    -- piecewise constant, gradient 0; round takes halves to even (as torch.round)
    {"floor", {-2.5, -1.5, -0.2, 0, 0.5, 1.5, 2.7}, "torch.floor(x)", keeps = true},
    {"ceil", {-2.5, -1.5, -0.2, 0, 0.5, 1.5, 2.7}, "torch.ceil(x)", keeps = true},
    {"round", {-2.5, -1.5, -0.5, -0.2, 0.5, 1.5, 2.5, 2.7}, "torch.round(x)", keeps = true},
    {"trunc", {-2.5, -1.5, -0.2, 0, 0.5, 1.5, 2.7}, "torch.trunc(x)", keeps = true},
  }
  local W = {}      -- the backward's weights: distinct, so a misplaced gradient shows
  for i = 1, 12 do W[i] = 1 + i / 8 end
  local function w_of(n) return {table.unpack(W, 1, n)} end

  local torch
  setup(function()
    local py = TW.script()
    for _, o in ipairs(OPS) do
      local n = #o[2]
      py:add(string.format("x = T(%s, True); y = %s; out('%s', y); (y * T(%s)).sum().backward(); out('%s_g', x.grad)",
        lit(o[2]), o[3], o[1], lit(w_of(n)), o[1]))
      -- float32: torch's float64 on the float32 inputs, what the float32 kernel should round
      py:add(string.format("x = T(%s).float().double(); out('%s_f32', %s)", lit(o[2]), o[1], o[3]))
    end
    torch = py:run()
  end)

  for _, o in ipairs(OPS) do
    local name, xs = o[1], o[2]
    it("computes " .. name .. " and its gradient as torch does in float64, and rounds once in float32", function()
      local x = leaf(xs)
      local y = x[name](x)
      assert.are.equal(name, y:grad_fn())
      near(flat(y), torch[name], o.tol or 2e-15, name .. " float64 value", 1e-300)
      ;(y * dl.tensor(w_of(#xs), {dtype = "float64"})):sum():backward()
      near(flat(x.grad), torch[name .. "_g"], o.gtol or 1e-14, name .. " float64 gradient", 1e-300)
      if o.exact then
        local want = {}
        for i, v in ipairs(xs) do want[i] = o.exact(v) * W[i] end
        near(flat(x.grad), want, 1e-15, name .. " float64 gradient against exact math", 1e-300)
      end
      local y32 = dl.tensor(xs, {dtype = "float32"})[name](dl.tensor(xs, {dtype = "float32"}))
      assert.are.equal("float32", y32:dtype())
      -- (float32 subnormals flush to zero: errors below 1e-37 are measured against 1e-37)
      near(flat(y32), torch[name .. "_f32"], 6e-8, name .. " float32 value", 1e-37)
    end)
  end

  it("gives float32 results for integer tensors, like exp (floor, ceil, round, trunc keep the dtype)", function()
    local i = dl.tensor({0, 1, 2}, {dtype = "int32"})
    for _, o in ipairs(OPS) do assert.are.equal(o.keeps and "int32" or "float32", i[o[1]](i):dtype(), o[1]) end
    assert.are.same({-3, 0, 7}, dl.tensor({-3, 0, 7}, {dtype = "int64"}):round():totable())
    local s = dl.tensor({0, 1}, {dtype = "int64"}):sin():totable()
    assert.are.equal(0, s[1]); assert.is_true(math.abs(s[2] - math.sin(1)) < 6e-8)
  end)

  it("maps the edges of the domains as torch does (inf at erfinv(+-1), NaN outside)", function()
    local e = dl.tensor({-1, 1, 1.5, -2}, {dtype = "float64"}):erfinv():totable()
    assert.are.equal(-math.huge, e[1]); assert.are.equal(math.huge, e[2])
    assert.is_true(e[3] ~= e[3] and e[4] ~= e[4])
    local s = dl.tensor({-800, 800}, {dtype = "float64"}):softplus():totable()
    assert.are.same({0, 800}, s)
  end)
end)
