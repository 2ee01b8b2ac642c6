-- The losses against torch's functional losses in float64 (issue 34, item 3): CrossEntropy
-- and NLL with class weights and label smoothing, BCEWithLogits with pos_weight and weight,
-- MSE, Huber and SmoothL1, each under every reduction, values and gradients; then their
-- option and argument errors, and the initialisers orthogonal and trunc_normal by their
-- statistical properties.
local dl = require "dlua"
local nn = dl.nn
local TW = dofile("tests/lua/torch_twin.lua")
local lit, flat, rel_err = TW.lit, TW.flat, TW.rel_err

local function near(got, want, tol, what)
  local e, at = rel_err(got, want, 1e-300)
  assert(e <= tol, string.format("%s: relative error %.3g at %d (got %.17g, want %.17g) above %g", what, e, at,
    got[at] or 0, want[at] or 0, tol))
end

local function leaf(v) return dl.tensor(v, {dtype = "float64"}):requires_grad(true) end
local function f64(v) return dl.tensor(v, {dtype = "float64"}) end

-- fixed inputs (written out, so the torch side reads the same numbers)
local LOGITS = {{0.3, -1.2, 2.5, 0.1}, {-0.7, 0.4, 0.0, 1.9}, {3.1, -2.2, 0.5, -0.4}, {0.0, 0.8, -1.5, 1.1},
                {-3.0, 2.2, 1.7, -0.9}}
local LABELS = {1, 4, 2, 2, 3}
local CW = {0.5, 1.0, 2.0, 0.25}                    -- class weights
local PW = {0.7, 1.3, 0.2, 2.0, 1.0}                -- per-example weights (dlua's third argument)
local V = {1.5, -0.5, 2.0, 0.25, 1.0}               -- backward weights for reduction = "none"
local X = {{-60, -2.5, 0}, {0.3, 1.7, 45}, {-0.8, 0, 3.2}, {12, -12, 0.01}}   -- BCE logits, large ones too
local Y = {{0, 1, 0.5}, {1, 0.2, 0}, {0.7, 1, 1}, {0, 0, 0.9}}
local POS = {2.0, 0.5, 1.5}
local BW = {{1, 0.5, 2}, {0.1, 1, 1}, {3, 1, 0}, {1, 1, 1}}
local P = {{0.3, -2.0, 1.1}, {4.0, 0.05, -0.6}, {0.0, 2.5, -1.2}, {0.9, -0.95, 3.0}}   -- regression inputs
local Q = {{0.0, -0.2, 0.9}, {1.0, 0.0, 0.4}, {0.0, 0.5, -1.0}, {1.7, 0.0, 0.1}}
local VE = {{1, 2, 3}, {-1, 0.5, 2}, {0.25, -2, 1}, {1.5, 1, -1}}                      -- elementwise backward weights

-- each case: a name, the dlua loss (module, inputs as Lua tables, extra arguments), the
-- torch expression of x (the differentiated input) and its other inputs
local cases = {}
local function case(name, make, args, torch_expr, backw, exact)
  cases[#cases + 1] = {name = name, make = make, args = args, torch = torch_expr, backw = backw, exact = exact}
end

for _, r in ipairs({"mean", "sum", "none"}) do
  local bw = r == "none" and V or nil
  local red = "reduction='" .. r .. "'"
  for _, eps in ipairs({0, 0.1}) do
    local ls = "label_smoothing=" .. eps
    case(string.format("CrossEntropy %s smoothing %g", r, eps),
      function() return nn.CrossEntropy{reduction = r, label_smoothing = eps} end, {LOGITS, LABELS},
      string.format("F.cross_entropy(x, lab, %s, %s)", red, ls), bw)
    case(string.format("CrossEntropy %s smoothing %g class weights", r, eps),
      function() return nn.CrossEntropy{reduction = r, label_smoothing = eps, weight = f64(CW)} end, {LOGITS, LABELS},
      string.format("F.cross_entropy(x, lab, weight=cw, %s, %s)", red, ls), bw)
  end
  case("NLL " .. r, function() return nn.NLL{reduction = r} end, {LOGITS, LABELS},
    string.format("F.nll_loss(x, lab, %s)", red), bw)
  case("NLL " .. r .. " class weights", function() return nn.NLL{reduction = r, weight = f64(CW)} end, {LOGITS, LABELS},
    string.format("F.nll_loss(x, lab, weight=cw, %s)", red), bw)
  local ebw = r == "none" and VE or nil
  -- BCE's values also against exact math (mpmath, 100 digits): torch's own lose 3e-11 at
  -- x = -12 (a cancellation) and give 0 for the 1e-27 at x = -60
  case("BCEWithLogits " .. r, function() return nn.BCEWithLogits{reduction = r} end, {X, Y},
    string.format("F.binary_cross_entropy_with_logits(x, y, %s)", red), ebw,
    string.format("bce_exact(%s, %s, None, None, '%s')", lit(X), lit(Y), r))
  case("BCEWithLogits " .. r .. " pos_weight and weight",
    function() return nn.BCEWithLogits{reduction = r, pos_weight = f64(POS), weight = f64(BW)} end, {X, Y},
    string.format("F.binary_cross_entropy_with_logits(x, y, weight=T(%s), pos_weight=T(%s), %s)", lit(BW), lit(POS),
      red), ebw, string.format("bce_exact(%s, %s, %s, %s, '%s')", lit(X), lit(Y), lit(POS), lit(BW), r))
  case("MSE " .. r, function() return nn.MSE{reduction = r} end, {P, Q}, string.format("F.mse_loss(x, y, %s)", red), ebw)
  for _, d in ipairs({1, 0.5}) do
    case(string.format("Huber %s delta %g", r, d), function() return nn.Huber{reduction = r, delta = d} end, {P, Q},
      string.format("F.huber_loss(x, y, %s, delta=%g)", red, d), ebw)
  end
  for _, b in ipairs({1, 0.3, 0}) do
    -- beta = 0 is the L1 loss (torch's words); torch 1.13's smooth_l1_loss(beta=0) has the
    -- gradient -1 at d = 0 where its l1_loss, abs and dlua have sign(0) = 0
    case(string.format("SmoothL1 %s beta %g", r, b), function() return nn.SmoothL1{reduction = r, beta = b} end, {P, Q},
      b == 0 and string.format("F.l1_loss(x, y, %s)", red) or string.format("F.smooth_l1_loss(x, y, %s, beta=%g)", red, b),
      ebw)
  end
end
-- dlua's per-example weights (the train loop's padding weights) on top of class weights
-- and smoothing, against the definition written in torch: sum(w_i l_i) / sum(w_i cw[y_i])
for _, r in ipairs({"mean", "sum", "none"}) do
  local tail = ({mean = ".sum() / (pw * cw[lab]).sum()", sum = ".sum()", none = ""})[r]
  case("CrossEntropy " .. r .. " per-example weights, class weights, smoothing 0.2",
    function() return nn.CrossEntropy{reduction = r, label_smoothing = 0.2, weight = f64(CW)} end,
    {LOGITS, LABELS, PW},
    "(F.cross_entropy(x, lab, weight=cw, reduction='none', label_smoothing=0.2) * pw)" .. tail,
    r == "none" and V or nil)
end

describe("losses against torch's functional losses (float64, values and gradients)", function()
  local torch
  setup(function()
    local py = TW.script()
    py:add("lab = torch.tensor(" .. lit(LABELS) .. ") - 1; cw = T(" .. lit(CW) .. "); pw = T(" .. lit(PW) .. ")")
    py:add(table.concat({
      "import mpmath",
      "mpmath.mp.dps = 100",
      "def bce_exact(X, Y, P, W, red):",
      "    v = []",
      "    for i, row in enumerate(X):",
      "        for j, x in enumerate(row):",
      "            x, y = mpmath.mpf(x), mpmath.mpf(Y[i][j])",
      "            p, w = mpmath.mpf(P[j] if P else 1), mpmath.mpf(W[i][j] if W else 1)",
      "            v.append(w * ((1 - y) * x + (1 + (p - 1) * y) * mpmath.log1p(mpmath.exp(-x))))",
      "    if red == 'sum': v = [mpmath.fsum(v)]",
      "    if red == 'mean': v = [mpmath.fsum(v) / len(v)]",
      "    return torch.tensor([float(e) for e in v])",
    }, "\n"))
    for i, c in ipairs(cases) do
      local y = c.args[2]
      local other = type(y[1]) == "table" and "y = T(" .. lit(y) .. "); " or ""
      py:add(string.format("%sx = T(%s, True); l = %s; out('v%d', l); l.backward(%s); out('g%d', x.grad)", other,
        lit(c.args[1]), c.torch, i, c.backw and "T(" .. lit(c.backw) .. ")" or "", i))
      if c.exact then py:add(string.format("out('e%d', %s)", i, c.exact)) end
    end
    torch = py:run()
  end)

  for i, c in ipairs(cases) do
    it("computes " .. c.name .. " as torch does", function()
      local x = leaf(c.args[1])
      local other = c.args[2]
      other = type(other[1]) == "table" and f64(other) or dl.tensor(other)
      local loss = c.make()
      local l = c.args[3] and loss(x, other, f64(c.args[3])) or loss(x, other)
      if c.exact then
        near(flat(l), torch["e" .. i], 1e-15, c.name .. " value against exact math")
        local e = rel_err(flat(l), torch["v" .. i], 1e-6)
        assert(e < 1e-10, c.name .. " value against torch's: " .. e)
      else
        near(flat(l), torch["v" .. i], 1e-14, c.name .. " value")
      end
      if c.backw then l = (l * f64(c.backw)):sum() end
      l:backward()
      near(flat(x.grad), torch["g" .. i], 1e-13, c.name .. " gradient")
    end)
  end

  it("keeps the default CrossEntropy and MSE the formulas they were (mean over examples)", function()
    local logits, labels = f64(LOGITS), dl.tensor(LABELS)
    local want = -logits:log_softmax(2):gather(2, labels:reshape(5, 1)):mean()
    assert.are.equal(want:item(), nn.CrossEntropy()(logits, labels):item())
    assert.are.equal(((f64(P) - f64(Q)):square():mean()):item(), nn.MSE()(f64(P), f64(Q)):item())
  end)

  it("stays finite for logits of +-1e4 (BCEWithLogits) and for float32 inputs", function()
    local x = dl.tensor({{1e4, -1e4, 0}}):requires_grad(true)
    local l = nn.BCEWithLogits{reduction = "none"}(x, dl.tensor({{0, 1, 1}}))
    assert.are.same({1e4, 1e4}, {l:totable()[1][1], l:totable()[1][2]})
    assert(math.abs(l:totable()[1][3] - math.log(2)) < 1e-7)
    l:sum():backward()
    assert.are.same({1, -1, -0.5}, x.grad:totable()[1])
  end)
end)

describe("loss options and arguments", function()
  it("rejects a reduction other than mean, sum and none, naming the loss", function()
    for _, name in ipairs({"CrossEntropy", "NLL", "BCEWithLogits", "MSE", "Huber", "SmoothL1"}) do
      assert.error_matches(function() nn[name]{reduction = "avg"} end,
        name .. ": reduction must be 'mean', 'sum' or 'none', got 'avg'", nil, true)
      assert.error_matches(function() nn[name]{reduction = 1} end, name .. ": option 'reduction'", nil, true)
    end
  end)

  it("rejects unknown option keys, listing the valid ones", function()
    assert.error_matches(function() nn.Huber{beta = 1} end,
      "Huber: unknown option 'beta' (valid: delta, reduction)", nil, true)
    assert.error_matches(function() nn.SmoothL1{delta = 1} end,
      "SmoothL1: unknown option 'delta' (valid: beta, reduction)", nil, true)
    assert.error_matches(function() nn.BCEWithLogits{posweight = dl.ones(2)} end,
      "BCEWithLogits: unknown option 'posweight' (valid: pos_weight, reduction, weight); did you mean 'pos_weight'?",
      nil, true)
    assert.error_matches(function() nn.NLL{label_smoothing = 0.1} end,
      "NLL: unknown option 'label_smoothing' (valid: reduction, weight)", nil, true)
  end)

  it("checks widths, class weights and shapes, naming the loss", function()
    assert.error_matches(function() nn.Huber{delta = 0} end, "Huber: delta must be finite and > 0, got 0", nil, true)
    assert.error_matches(function() nn.SmoothL1{beta = -1} end, "SmoothL1: beta must be finite and >= 0, got -1", nil, true)
    assert.error_matches(function() nn.CrossEntropy{weight = dl.ones(2, 2)} end,
      "CrossEntropy: weight must be a 1-d float tensor of class weights, got float32 [2, 2]", nil, true)
    assert.error_matches(function() nn.NLL{weight = dl.tensor({1, -1})} end, "NLL: class weights must be non-negative",
      nil, true)
    assert.error_matches(function() nn.CrossEntropy{weight = dl.ones(3)}(dl.zeros(2, 4), dl.tensor({1, 2})) end,
      "CrossEntropy: weight [3] has one weight per class, but the logits [2, 4] have 4 classes", nil, true)
    assert.error_matches(function() nn.NLL()(dl.zeros(2, 4), dl.tensor({1, 5})) end,
      "NLL: label 5 at position 2 of the batch is outside [1, 4]", nil, true)
    assert.error_matches(function() nn.NLL()(dl.zeros(4), dl.tensor({1, 5})) end,
      "NLL: log-probabilities must be [N, C], got [4]", nil, true)
    assert.error_matches(function() nn.Huber()(dl.zeros(4, 1), dl.zeros(4)) end,
      "Huber: input [4, 1] and target [4] differ in shape", nil, true)
    assert.error_matches(function() nn.BCEWithLogits{pos_weight = dl.ones(3)}(dl.zeros(2, 4), dl.zeros(2, 4)) end,
      "BCEWithLogits: pos_weight [3] does not broadcast to the input [2, 4]", nil, true)
    assert.error_matches(function() nn.BCEWithLogits{weight = dl.ones(3, 2, 4)}(dl.zeros(2, 4), dl.zeros(2, 4)) end,
      "BCEWithLogits: weight [3, 2, 4] does not broadcast to the input [2, 4]", nil, true)
    assert.error_matches(function() nn.BCEWithLogits()(dl.zeros(2), {0, 1}) end,
      "BCEWithLogits: input and target must be tensors, got a tensor and table", nil, true)
  end)
end)

describe("nn.init.orthogonal and nn.init.trunc_normal", function()
  local function gram(m, rows_le_cols)
    if rows_le_cols then return m:matmul(m:transpose(1, 2)) end
    return m:transpose(1, 2):matmul(m)
  end
  local function max_off_identity(g, gain)
    local worst = 0
    for i, row in ipairs(g:totable()) do
      for j, v in ipairs(row) do worst = math.max(worst, math.abs(v - (i == j and gain * gain or 0))) end
    end
    return worst
  end

  it("fills a tensor with orthonormal rows (rows <= cols) or columns, times the gain, to 1e-5", function()
    dl.seed(3)
    for _, c in ipairs({{{6, 4}, 1}, {{4, 6}, 1}, {{8, 2, 3}, 1}, {{3, 5}, 2.5}, {{64, 64}, 1}}) do
      local shape, gain = c[1], c[2]
      local t = dl.empty(table.unpack(shape))
      assert.are.equal(t, nn.init.orthogonal(t, gain))
      local rows = shape[1]
      local m = t:reshape(rows, -1):double()
      local cols = m:size(2)
      local g = gram(m, rows <= cols)
      assert(max_off_identity(g, gain) < 1e-5, "orthogonality of " .. table.concat(shape, "x"))
    end
    local t = nn.init.orthogonal(dl.empty(5, 7, {dtype = "float64"}))
    assert(max_off_identity(gram(t, true), 1) < 1e-13)
  end)

  it("draws from the same seed the same matrix, and spreads entries as N(0, 1/n) for n x n", function()
    dl.seed(11)
    local a = nn.init.orthogonal(dl.empty(64, 64))
    dl.seed(11)
    local b = nn.init.orthogonal(dl.empty(64, 64))
    assert.are.same(a:totable(), b:totable())
    -- an orthogonal 64x64 has sum of squares exactly 64, so the std of its entries is 1/8
    -- up to the mean; the mean of 4096 entries of a Haar matrix is within 4/64^1.5 of 0
    assert(math.abs(a:mean():item()) < 4 / 512)
    assert(math.abs(math.sqrt(a:var():item()) - 1 / 8) < 1e-3)
    assert.are_not.same(a:totable(), nn.init.orthogonal(dl.empty(64, 64)):totable())
  end)

  it("draws a truncated normal within [a, b] with the truncated distribution's mean and std", function()
    dl.seed(5)
    local n = 200000
    for _, c in ipairs({{0, 1, -2, 2}, {1, 2, -1, 4}, {0, 0.02, -0.04, 0.04}, {0, 1, 0.5, 3}}) do
      local mean, std, a, b = table.unpack(c)
      local t = nn.init.trunc_normal(dl.empty(n), mean, std, a, b)
      assert(t:min():item() >= a and t:max():item() <= b)
      -- exact moments of N(mean, std^2) truncated to [a, b]: alpha, beta standardised,
      -- Z = Phi(beta) - Phi(alpha), m = mean + std (phi(alpha) - phi(beta)) / Z,
      -- var = std^2 (1 + (alpha phi(alpha) - beta phi(beta)) / Z - ((phi(alpha) - phi(beta)) / Z)^2)
      local al, be = (a - mean) / std, (b - mean) / std
      local e = dl.tensor({al / math.sqrt(2), be / math.sqrt(2)}, {dtype = "float64"}):erf():totable()
      local Z = (e[2] - e[1]) / 2
      local function phi(z) return math.exp(-z * z / 2) / math.sqrt(2 * math.pi) end
      local d = (phi(al) - phi(be)) / Z
      local m = mean + std * d
      local sd = std * math.sqrt(1 + (al * phi(al) - be * phi(be)) / Z - d * d)
      local got_m, got_sd = t:double():mean():item(), math.sqrt(t:double():var():item())
      assert(math.abs(got_m - m) < 5 * sd / math.sqrt(n), string.format("mean %g, want %g", got_m, m))
      assert(math.abs(got_sd - sd) < 0.01 * sd, string.format("std %g, want %g", got_sd, sd))
    end
  end)

  it("rejects what it cannot fill, naming the initialiser", function()
    assert.error_matches(function() nn.init.orthogonal(dl.empty(4)) end,
      "nn.init.orthogonal: expected a tensor of 2 or more dimensions, got 1", nil, true)
    assert.error_matches(function() nn.init.orthogonal(dl.zeros(2, 2, {dtype = "int32"})) end,
      "nn.init.orthogonal: expected a float tensor, got int32 tensor", nil, true)
    assert.error_matches(function() nn.init.orthogonal(dl.empty(2, 2), "big") end,
      "bad argument #2 to 'nn.init.orthogonal' (number or nil expected, got string)", nil, true)
    assert.error_matches(function() nn.init.orthogonal(dl.empty(2, 2), 0 / 0) end,
      "nn.init.orthogonal: gain must be a finite number, got", nil, true)
    assert.error_matches(function() nn.init.trunc_normal(dl.empty(3), 0, 1, 2, -2) end,
      "nn.init.trunc_normal: a (2) must be below b (-2)", nil, true)
    assert.error_matches(function() nn.init.trunc_normal(dl.empty(3), 0, 0) end,
      "nn.init.trunc_normal: std must be positive, got 0", nil, true)
    assert.error_matches(function() nn.init.trunc_normal(dl.empty(3), 0 / 0) end,
      "nn.init.trunc_normal: mean must be a finite number, got", nil, true)
  end)
end)
