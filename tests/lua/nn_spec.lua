-- dl.nn modules: the Module protocol, layers and losses against hand-computed values.
local dl = require "dlua"
local nn = dl.nn

local function close(a, b, tol) return math.abs(a - b) <= (tol or 1e-5) * (1 + math.abs(b)) end

describe("dlua.nn.Module", function()
  it("names parameters with stable dotted names and counts them", function()
    local m = nn.Sequential{nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3, {bias = false})}
    local names = {}
    for i, np in ipairs(m:named_parameters()) do names[i] = np[1] end
    assert.are.same({"1.weight", "1.bias", "3.weight"}, names)
    assert.are.equal(4 * 8 + 8 + 24, m:num_parameters())
    assert.truthy(tostring(m):find("Linear%(4 %-> 8%)  %[40 params%]"))
  end)

  it("propagates train/eval to children", function()
    local m = nn.Sequential{nn.Linear(2, 2), nn.Sequential{nn.Dropout(0.5)}}
    m:eval()
    assert.is_false(m[2][1].training)
    m:train()
    assert.is_true(m[2][1].training)
  end)

  it("round-trips a state_dict and refuses mismatched keys by name", function()
    dl.seed(1)
    local a = nn.Sequential{nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)}
    dl.seed(2)
    local b = nn.Sequential{nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)}
    local x = dl.randn(5, 3)
    assert.are_not.same(a(x):totable(), b(x):totable())
    b:load_state_dict(a:state_dict())
    assert.are.same(a(x):totable(), b(x):totable())
    local sd = a:state_dict()
    sd["3.bias"] = nil
    sd["9.weight"] = dl.zeros(1)
    sd["1.weight"] = dl.zeros(2, 2)
    local ok, err = pcall(b.load_state_dict, b, sd)
    assert.is_false(ok)
    assert.truthy(err:find("missing keys: 3.bias", 1, true))
    assert.truthy(err:find("unexpected keys: 9.weight", 1, true))
    assert.truthy(err:find("1.weight (expected [4, 3], got [2, 2])", 1, true))
  end)

  it("trains a layer written in Lua with no backward code", function()
    local Scale = nn.Module:extend("Scale")
    function Scale:init(n) self.alpha = self:parameter(dl.ones(n)) end
    function Scale:forward(x) return x * self.alpha end
    local s = Scale(3)
    local target = dl.tensor({2, -1, 0.5})
    for _ = 1, 200 do
      s:zero_grad()
      local loss = nn.MSE()(s(dl.ones(4, 3)), dl.ones(4, 1) * target)   -- the target per example: [4, 3]
      loss:backward()
      dl.no_grad(function() s.alpha:add_(s.alpha.grad, -0.1) end)
    end
    local got = s.alpha:totable()
    for i = 1, 3 do assert(close(got[i], target:totable()[i], 1e-3)) end
  end)

  it("rejects unknown options with the valid keys listed", function()
    assert.error_matches(function() nn.Linear(2, 3, {biass = true}) end, "Linear: unknown option 'biass' %(valid: bias%)")
    assert.error_matches(function() nn.Linear(0, 3) end, "in_features must be a positive integer")
  end)
end)

describe("dlua.nn layers", function()
  it("computes Linear as x W^T + b", function()
    local m = nn.Linear(2, 3)
    dl.no_grad(function()
      m.weight:copy_(dl.tensor({{1, 2}, {3, 4}, {5, 6}}))
      m.bias:copy_(dl.tensor({0.5, -1, 2}))
    end)
    assert.are.same({{1 + 4 + 0.5, 3 + 8 - 1, 5 + 12 + 2}}, m(dl.tensor({{1, 2}})):totable())
    assert.error_matches(function() m(dl.zeros(4, 5)) end, "Linear: input of shape %[4, 5%] does not end in 2 features")
  end)

  it("gradchecks Linear, LayerNorm and GELU", function()
    dl.seed(3)
    local lin, ln = nn.Linear(4, 3), nn.LayerNorm(3)
    local ok, rep = dl.autograd.gradcheck(function(x, w, b) return x:matmul(w:transpose()) + b end,
      {dl.randn(2, 4), lin.weight, lin.bias})
    assert(ok, rep)
    -- the fused op the layer runs: 3-D input, with and without bias, a transposed-view input
    ok, rep = dl.autograd.gradcheck(function(x, w, b) return dl.linear(x, w, b) end,
      {dl.randn(2, 3, 4), lin.weight, lin.bias})
    assert(ok, rep)
    ok, rep = dl.autograd.gradcheck(function(x, w) return dl.linear(x:transpose(), w) end, {dl.randn(4, 5), lin.weight})
    assert(ok, rep)
    -- and it equals the composition it replaces on a product large enough to be split over threads
    local x, w, b = dl.randn(300, 200), dl.randn(100, 200), dl.randn(100)
    assert((dl.linear(x, w, b) - (x:matmul(w:transpose()) + b)):abs():max():item() < 1e-4)
    assert.error_matches(function() dl.linear(dl.zeros(2, 5), lin.weight) end,
      "linear: input %[2, 5%] does not match weight %[3, 4%]")
    assert.error_matches(function() dl.linear(dl.zeros(2, 4), lin.weight, dl.zeros(4)) end,
      "linear: input %[2, 4%] does not match weight %[3, 4%] and its bias")
    ok, rep = dl.autograd.gradcheck(function(x) return ln(x):gelu() end, {dl.randn(5, 3)})
    assert(ok, rep)
  end)

  it("normalises with LayerNorm to zero mean and unit variance", function()
    local y = nn.LayerNorm(4)(dl.tensor({{1, 2, 3, 4}, {10, 10, 10, 14}}))
    for _, row in ipairs(y:totable()) do
      local m, v = 0, 0
      for _, x in ipairs(row) do m = m + x / 4 end
      for _, x in ipairs(row) do v = v + (x - m) ^ 2 / 4 end
      assert(math.abs(m) < 1e-5 and math.abs(v - 1) < 1e-3)
    end
  end)

  it("drops with inverted scaling in training and is the identity in eval", function()
    dl.seed(4)
    local d = nn.Dropout(0.25)
    local y = d(dl.ones(100000))
    local kept = y:gt(0):float():mean():item()
    assert(math.abs(kept - 0.75) < 0.01)
    assert(close(y:max():item(), 1 / 0.75))
    d:eval()
    assert.are.equal(100000, d(dl.ones(100000)):sum():item())
  end)

  it("looks up 1-based ids with Embedding", function()
    local e = nn.Embedding(5, 2)
    local out = e(dl.tensor({{5, 1}}, {dtype = "int64"}))
    assert.are.same({1, 2, 2}, out:shape())
    assert.are.same(e.weight[5]:totable(), out[1][1]:totable())
  end)

  -- Sequential runs a ReLU followed by a MaxPool2d as the pool first (a quarter of the ReLU's
  -- work); values on a grid of halves make ties and zeros common in the windows
  for _, c in ipairs({{"2x2", {2}}, {"3x3 stride 2 padding 1 (overlapping)", {3, {stride = 2, padding = 1}}}}) do
    it("runs ReLU, MaxPool2d " .. c[1] .. " as pool then ReLU, bit-identical with its gradients", function()
      local core = require "dlua.core"
      dl.seed(11)
      local v = dl.randn({2 * 3 * 9 * 8}):totable()
      for i = 1, #v do v[i] = math.floor(v[i] * 2 + 0.5) / 2 end
      local x0 = dl.tensor(v):reshape(2, 3, 9, 8)
      local x1, x2 = x0:clone():requires_grad(true), x0:clone():requires_grad(true)
      local y1 = nn.Sequential{nn.ReLU(), nn.MaxPool2d(table.unpack(c[2]))}(x1)
      local y2 = x2:relu():max_pool2d(table.unpack(c[2]))
      local g = dl.randn(y2:shape())
      assert.are.equal("relu", y1:grad_fn())
      assert.are.equal("max_pool2d", y2:grad_fn())
      assert.are.equal(core._tensor_bytes(y2), core._tensor_bytes(y1))
      assert.is_true(x0:le(0):sum():item() > 50)
      ;(y1 * g):sum():backward()
      ;(y2 * g):sum():backward()
      assert.are.equal(core._tensor_bytes(x2.grad), core._tensor_bytes(x1.grad))
      assert.is_true(x1.grad:ne(0):sum():item() > 20)
    end)
  end

  it("initialises bit-identically from the same seed", function()
    dl.seed(9)
    local a = nn.Linear(10, 10).weight:totable()
    dl.seed(9)
    assert.are.same(a, nn.Linear(10, 10).weight:totable())
  end)
end)

describe("dlua.nn losses", function()
  local logits = dl.tensor({{2, 1, 0}, {0, 0, 3}, {1, 1, 1}})
  local labels = dl.tensor({1, 3, 2}, {dtype = "int64"})
  local L = logits:totable()
  local function nll(i, c)
    local s = 0
    for j = 1, 3 do s = s + math.exp(L[i][j]) end
    return -(L[i][c] - math.log(s))
  end

  it("computes cross entropy from logits", function()
    local want = (nll(1, 1) + nll(2, 3) + nll(3, 2)) / 3
    assert(close(nn.CrossEntropy()(logits, labels):item(), want))
  end)

  it("applies label smoothing", function()
    local eps, want = 0.1, 0
    for i, c in ipairs({1, 3, 2}) do
      local u = 0
      for j = 1, 3 do u = u + nll(i, j) / 3 end
      want = want + ((1 - eps) * nll(i, c) + eps * u) / 3
    end
    assert(close(nn.CrossEntropy({label_smoothing = eps})(logits, labels):item(), want))
  end)

  it("ignores weight-0 examples and averages over the weight sum", function()
    local w = dl.tensor({1, 1, 0})
    local want = (nll(1, 1) + nll(2, 3)) / 2
    assert(close(nn.CrossEntropy()(logits, labels, w):item(), want))
    assert(close(nn.accuracy(logits, labels, w), 1.0))
    assert(close(nn.accuracy(logits, labels), 2 / 3))
  end)

  it("names the mismatch when labels do not fit", function()
    assert.error_matches(function() nn.CrossEntropy()(logits, dl.tensor({1, 2})) end,
      "CrossEntropy: labels %[2%] must be %[3%], one per row of the logits %[3, 3%]")
    assert.error_matches(function() nn.CrossEntropy()(dl.zeros(3), labels) end, "logits must be %[N, C%], got %[3%]")
    -- [N, 1] labels hold the right count but the wrong rank: refused, not reshaped
    assert.error_matches(function() nn.CrossEntropy()(logits, dl.tensor({{1}, {3}, {2}})) end,
      "CrossEntropy: labels %[3, 1%] must be %[3%], one per row of the logits %[3, 3%]")
    assert.error_matches(function() nn.CrossEntropy()(logits, {1, 3, 2}) end, "CrossEntropy: labels must be a tensor, got table")
    assert.error_matches(function() nn.CrossEntropy()(logits, labels, dl.ones(3, 1)) end,
      "CrossEntropy: weights %[3, 1%] must be %[3%], one per row of the logits %[3, 3%]")
  end)

  it("names a label outside [1, classes], its value and its position in the batch", function()
    local ok, err = pcall(function() local l = nn.CrossEntropy()(dl.zeros(4, 10), dl.tensor({1, 2, 11, 4})); return l end)
    assert.is_false(ok)
    assert.are.equal("nn_spec.lua:" .. (debug.getinfo(1, "l").currentline - 2) ..
      ": CrossEntropy: label 11 at position 3 of the batch is outside [1, 10]", err:match("[^/]*$"))
    assert.error_matches(function() nn.CrossEntropy()(dl.zeros(4, 10), dl.tensor({1, 0, 3, 4})) end,
      "CrossEntropy: label 0 at position 2 of the batch is outside %[1, 10%] %(class labels are 1%-based; labels " ..
      "stored 0%-based, as in most CSV and NumPy files, are read with zero_based, e%.g%. data%.csv{%.%.%., " ..
      "zero_based = {\"label\"}}, or shifted with labels %+ 1%)$")
    assert.error_matches(function() nn.CrossEntropy()(dl.zeros(2, 3), dl.tensor({3, -1}, {dtype = "int64"})) end,
      "CrossEntropy: label %-1 at position 2 of the batch is outside %[1, 3%]$")
    -- the edges 1 and C are labels
    assert(close(nn.CrossEntropy()(dl.zeros(2, 3), dl.tensor({1, 3})):item(), math.log(3)))
  end)

  it("checks the shapes accuracy compares", function()
    assert.error_matches(function() nn.accuracy(logits, dl.tensor({{1}, {3}, {2}})) end,
      "accuracy: labels %[3, 1%] must be %[3%], one per row of the logits %[3, 3%]")
    assert.error_matches(function() nn.accuracy(logits, labels, dl.ones(2)) end,
      "accuracy: weights %[2%] must be %[3%], one per row of the logits %[3, 3%]")
  end)
end)

describe("dlua.nn.MSE", function()
  it("refuses input and target of different shapes instead of broadcasting them", function()
    local x = dl.zeros(4, 1) + {{1}, {2}, {3}, {4}}
    local ok, err = pcall(function() local l = nn.MSE()(x, dl.tensor({1, 2, 3, 4})); return l end)
    assert.is_false(ok)
    assert.are.equal("nn_spec.lua:" .. (debug.getinfo(1, "l").currentline - 2) ..
      ": MSE: input [4, 1] and target [4] differ in shape", err:match("[^/]*$"))
    assert.error_matches(function() nn.MSE()(x, 1) end, "MSE: input and target must be tensors, got a tensor and number")
  end)

  it("computes the mean squared difference once the shapes match", function()
    local x = dl.zeros(4, 1) + {{1}, {2}, {3}, {4}}
    assert.are.equal(0, nn.MSE()(x, dl.tensor({1, 2, 3, 4}):reshape(4, 1)):item())
    -- ((1-2)^2 + (2-0)^2 + (3-3)^2 + (4-1)^2) / 4 = (1 + 4 + 0 + 9) / 4 = 3.5
    assert.are.equal(3.5, nn.MSE()(x, dl.tensor({{2}, {0}, {3}, {1}})):item())
  end)
end)
