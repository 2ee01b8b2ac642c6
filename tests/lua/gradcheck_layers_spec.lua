-- Every layer of dl.nn passes dl.autograd.gradcheck in float64 (docs/api/nn.md's claim):
-- each class dl.nn exports (the same walk as silent_spec's "nn's constructors") has a
-- small instance here, converted with m:to("float64"); its input and every parameter are
-- checked against central differences at gradcheck's default tolerances (eps 1e-6,
-- atol 1e-5, rtol 1e-3), which float32 arithmetic anywhere in the layer would miss.
-- A class that cannot be checked goes in UNCHECKABLE with the reason; there are none.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local nn = dl.nn

local function labels() return dl.tensor({1, 3, 2, 3}) end
local function target() dl.seed(9); return dl.rand(4, 3):double() end

-- name -> {build = function() -> module, input = function() -> x (float), rest = function() -> extra
-- arguments (not checked: labels, targets), ids = true when the input is not differentiable}
local CASES = {
  Linear = {build = function() return nn.Linear(3, 2) end, input = function() return dl.randn(4, 3) end},
  Conv2d = {build = function() return nn.Conv2d(4, 6, 3, {stride = {2, 1}, padding = 1, dilation = {1, 2}, groups = 2}) end,
            input = function() return dl.randn(2, 4, 6, 7) end},
  MaxPool2d = {build = function() return nn.MaxPool2d(3, {stride = 2, padding = 1}) end,
               input = function() return dl.randn(2, 3, 7, 6) end},
  AvgPool2d = {build = function() return nn.AvgPool2d(3, {stride = 2, padding = 1}) end,
               input = function() return dl.randn(2, 3, 7, 6) end},
  AdaptiveAvgPool2d = {build = function() return nn.AdaptiveAvgPool2d(2) end, input = function() return dl.randn(2, 3, 4, 6) end},
  ReLU = {build = function() return nn.ReLU() end, input = function() return dl.randn(3, 4) end},
  GELU = {build = function() return nn.GELU() end, input = function() return dl.randn(3, 4) end},
  Tanh = {build = function() return nn.Tanh() end, input = function() return dl.randn(3, 4) end},
  Sigmoid = {build = function() return nn.Sigmoid() end, input = function() return dl.randn(3, 4) end},
  Softmax = {build = function() return nn.Softmax(2) end, input = function() return dl.randn(3, 4) end},
  Flatten = {build = function() return nn.Flatten() end, input = function() return dl.randn(2, 3, 2) end},
  -- training mode: the mask comes from the seeded stream, reseeded before every call
  Dropout = {build = function() return nn.Dropout(0.3) end, input = function() return dl.randn(4, 5) end},
  Embedding = {build = function() return nn.Embedding(5, 3) end, input = function() return dl.tensor({{1, 5}, {2, 2}}) end,
               ids = true},
  LayerNorm = {build = function() return nn.LayerNorm(4) end, input = function() return dl.randn(3, 4) end},
  BatchNorm = {build = function() return nn.BatchNorm(3) end, input = function() return dl.randn(6, 3, 2, 2) end},
  Sequential = {build = function() return nn.Sequential{nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)} end,
                input = function() return dl.randn(4, 3) end},
  Residual = {build = function() return nn.Residual(nn.Linear(3, 3)) end, input = function() return dl.randn(4, 3) end},
  MultiheadAttention = {build = function() return nn.MultiheadAttention(4, 2, {dropout = 0.2}) end,
                        input = function() return dl.randn(2, 3, 4) end},
  TransformerEncoderLayer = {build = function() return nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 6}) end,
                             input = function() return dl.randn(2, 3, 4) end},
  CrossEntropy = {build = function() return nn.CrossEntropy({label_smoothing = 0.1}) end,
                  input = function() return dl.randn(4, 3) end, rest = labels},
  NLL = {build = function() return nn.NLL() end, input = function() return dl.randn(4, 3) end, rest = labels},
  BCEWithLogits = {build = function() return nn.BCEWithLogits() end, input = function() return dl.randn(4, 3) end,
                   rest = target},
  MSE = {build = function() return nn.MSE() end, input = function() return dl.randn(4, 3) end, rest = target},
  Huber = {build = function() return nn.Huber({delta = 0.5}) end, input = function() return dl.randn(4, 3) end,
           rest = target},
  SmoothL1 = {build = function() return nn.SmoothL1({beta = 0.5}) end, input = function() return dl.randn(4, 3) end,
              rest = target},
}
local UNCHECKABLE = {}   -- name -> reason

local function classes() return H.nn_classes(nn) end

-- gradcheck of x (unless ids) and every parameter of m: fn(x, p1, ..., pn) puts the
-- parameters gradcheck hands it into their modules, reseeds, and calls m
local function check(m, x, rest, ids)
  local owner = {}
  for _, e in ipairs(m:named_modules()) do owner[e[1]] = e[2] end
  local slots, inputs = {}, {x}
  for _, e in ipairs(m:named_parameters()) do
    local prefix, key = e[1]:match("^(.*)%.([^.]+)$")
    if not prefix then prefix, key = "", e[1] end
    slots[#slots + 1] = {owner[prefix], key}
    inputs[#inputs + 1] = e[2]
  end
  local dtype
  local ok, rep = dl.autograd.gradcheck(function(xx, ...)
    local ps = {...}
    for i, s in ipairs(slots) do s[1][s[2]] = ps[i] end
    dl.seed(5)
    local input = ids and x or xx
    local y = rest and m(input, rest) or m(input)
    dtype = y:dtype()
    return y
  end, inputs)
  return ok, rep, dtype, #slots
end

describe("every nn layer in float64", function()
  it("has a gradcheck case here or a stated reason why not", function()
    local missing = {}
    for _, name in ipairs(classes()) do
      if not CASES[name] and not UNCHECKABLE[name] then missing[#missing + 1] = name end
    end
    assert.are.same({}, missing)
    for name in pairs(CASES) do assert(nn[name], "a case for a class dl.nn does not export: " .. name) end
    assert.is_true(#classes() >= 25)
  end)

  for _, name in ipairs(classes()) do
    local c = CASES[name]
    if c then
      it("gradchecks " .. name .. ": input and parameters", function()
        dl.seed(1)
        local m = c.build():to("float64")
        local x = c.input()
        if not c.ids then x = x:double() end
        local rest = c.rest and c.rest() or nil
        local ok, rep, dtype, np = check(m, x, rest, c.ids)
        assert(ok, rep)
        assert.are.equal("float64", dtype)
        assert.are.equal(#m:parameters(), np)
      end)
    end
  end

  it("fails a layer whose backward is wrong (the check can fail)", function()
    local Bad = nn.Module:extend("BadScale")
    function Bad:init() self.weight = self:parameter(dl.ones(3)) end
    function Bad:forward(x) return x * self.weight:detach() + self.weight * 0 end
    dl.seed(1)
    local ok, rep = check(Bad():to("float64"), dl.randn(2, 3):double())
    assert.is_false(ok)
    assert.truthy(rep:find("input 2", 1, true), rep)
  end)
end)
