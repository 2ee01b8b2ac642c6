-- Every differentiable op against central finite differences (float64), on
-- shapes that broadcast and on non-contiguous views; plus the tape's rules.
local dl = require "dlua"

local function check(name, fn, inputs, opts)
  it("gradchecks " .. name, function()
    dl.seed(11)
    local ok, report = dl.autograd.gradcheck(fn, inputs(), opts)
    assert(ok, report)
  end)
end

local pos = function(...) return (dl.rand(...) + 0.5) end

describe("dlua.autograd gradcheck", function()
  -- binary ops with broadcasting: [3, 4] with [4] and [3, 1]
  check("add with broadcasting", function(a, b) return a + b end, function() return {dl.randn(3, 4), dl.randn(4)} end)
  check("sub with broadcasting", function(a, b) return a - b end, function() return {dl.randn(3, 1), dl.randn(3, 4)} end)
  check("mul with broadcasting", function(a, b) return a * b end, function() return {dl.randn(3, 4), dl.randn(3, 1)} end)
  check("div with broadcasting", function(a, b) return a / b end, function() return {dl.randn(2, 3), pos(3)} end)
  check("pow in both arguments", function(a, b) return a:pow(b) end, function() return {pos(2, 3), dl.randn(3)} end)
  check("maximum and minimum", function(a, b) return a:maximum(b) + a:minimum(b) * 2 end,
    function() return {dl.randn(3, 4), dl.randn(4)} end)
  check("scalar arithmetic", function(a) return (2 * a - 1) / 3 + a:scale(0.5, 2) end, function() return {dl.randn(5)} end)
  -- unary ops
  for _, op in ipairs({"neg", "exp", "tanh", "sigmoid", "gelu", "square"}) do
    check(op, function(a) return a[op](a) end, function() return {dl.randn(3, 4)} end)
  end
  check("log, sqrt, rsqrt", function(a) return a:log() + a:sqrt() + a:rsqrt() end, function() return {pos(3, 4)} end)
  check("abs and relu away from 0", function(a) return a:abs() + a:relu() end,
    function() return {dl.tensor({{-1.5, 0.7}, {2.1, -0.3}})} end)
  check("clamp", function(a) return a:clamp(-0.5, 0.5) end, function() return {dl.tensor({-1, -0.2, 0.3, 0.9})} end)
  check("where", function(a, b) return dl.where(a:gt(0), a, b) end, function() return {dl.randn(3, 4), dl.randn(4)} end)
  -- reductions
  check("sum over dims with keepdim", function(a) return a:sum(2, true) * a end, function() return {dl.randn(3, 4)} end)
  check("mean over several dims", function(a) return a:mean({1, 3}) end, function() return {dl.randn(2, 3, 4)} end)
  check("max and min over a dim", function(a) return a:max(2) + a:min(1):sum() end, function() return {dl.randn(3, 4)} end)
  check("var", function(a) return a:var(1) + a:var(2, {correction = 0}) :sum() end, function() return {dl.randn(4, 3)} end)
  check("logsumexp", function(a) return a:logsumexp(2) end, function() return {dl.randn(3, 5)} end)
  check("softmax over dim 1 and 2", function(a) return a:softmax(1) + a:softmax(2) end, function() return {dl.randn(3, 4)} end)
  check("log_softmax", function(a) return a:log_softmax(2) end, function() return {dl.randn(4, 6)} end)
  -- matmul
  check("matmul", function(a, b) return a:matmul(b) end, function() return {dl.randn(3, 4), dl.randn(4, 2)} end)
  check("matmul of transposed views", function(a, b) return a:transpose():matmul(b:transpose()) end,
    function() return {dl.randn(4, 3), dl.randn(2, 4)} end)
  check("batched matmul with broadcast", function(a, b) return a:matmul(b) end,
    function() return {dl.randn(2, 3, 4), dl.randn(4, 5)} end)
  check("batched matmul, broadcast batch", function(a, b) return a:matmul(b) end,
    function() return {dl.randn(2, 1, 3, 4), dl.randn(3, 4, 2)} end)
  check("matrix-vector and dot", function(a, v) return a:matmul(v) + v:matmul(v) end,
    function() return {dl.randn(3, 4), dl.randn(4)} end)
  -- views and shape ops on non-contiguous inputs
  check("reshape of a transpose", function(a) return a:transpose(1, 2):reshape(2, 6) * dl.arange(6) end,
    function() return {dl.randn(3, 4)} end)
  check("permute", function(a) return a:permute(3, 1, 2):contiguous() end, function() return {dl.randn(2, 3, 4)} end)
  check("narrow and select", function(a) return a:narrow(2, 2, 2):select(1, 2) end, function() return {dl.randn(3, 4)} end)
  check("expand", function(a) return a:expand(3, 4) * dl.arange(12):reshape(3, 4) end, function() return {dl.randn(1, 4)} end)
  check("squeeze, unsqueeze, flatten", function(a) return a:unsqueeze(1):squeeze():flatten() end,
    function() return {dl.randn(3, 1, 4)} end)
  check("indexing t[i]", function(a) return a[2] * a[-1] end, function() return {dl.randn(3, 4)} end)
  check("clone and cast (through float32)", function(a) return a:clone():float():double() end,
    function() return {dl.randn(3)} end, {eps = 1e-2, rtol = 1e-2})
  -- indexing ops
  check("gather", function(a) return a:gather(2, dl.tensor({{1, 3}, {2, 2}, {4, 1}}, {dtype = "int64"})) end,
    function() return {dl.randn(3, 4)} end)
  check("index_select", function(a) return a:index_select(1, dl.tensor({3, 1, 3}, {dtype = "int64"})) end,
    function() return {dl.randn(3, 4)} end)
  check("scatter_add", function(a, s) return a:scatter_add(1, dl.tensor({{1, 2}, {1, 1}}, {dtype = "int64"}), s) end,
    function() return {dl.randn(2, 2), dl.randn(2, 2)} end)
  check("cat and stack", function(a, b) return dl.cat({a, b, a}, 2):sum(2) + dl.stack({a, b}, 3):sum({2, 3}) end,
    function() return {dl.randn(2, 3), dl.randn(2, 3)} end)
end)

describe("dlua.autograd tape", function()
  it("accumulates into .grad across backward calls and zeroes with grad = nil", function()
    local x = dl.tensor({1, 2, 3}):requires_grad(true)
    ;(x * x):sum():backward()
    assert.are.same({2, 4, 6}, x.grad:totable())
    ;(x * 3):sum():backward()
    assert.are.same({5, 7, 9}, x.grad:totable())
    x.grad = nil
    assert.is_nil(x.grad)
  end)

  it("takes an explicit gradient for non-scalar outputs", function()
    local x = dl.tensor({1, 2}):requires_grad(true)
    local y = x * 2
    y:backward(dl.tensor({1, 10}))
    assert.are.same({2, 20}, x.grad:totable())
    ;(x * 2):backward({1, 1})                -- a plain table is a gradient too
    assert.are.same({4, 22}, x.grad:totable())
    assert.error_matches(function() (x * 2):backward() end, "one%-element outputs")
  end)

  it("refuses a second backward through a freed graph unless kept", function()
    local x = dl.tensor({1.0}):requires_grad(true)
    local y = (x * 2):sum()
    y:backward({keep_graph = true})
    y:backward()
    assert.are.same({4}, x.grad:totable())
    assert.error_matches(function() y:backward() end, "already been freed")
  end)

  it("records nothing under no_grad and after detach", function()
    local x = dl.randn(3):requires_grad(true)
    local y = dl.no_grad(function() return x * 2 end)
    assert.is_false(y:requires_grad())
    assert.is_false((x:detach() * 2):requires_grad())
    assert.is_true(dl.is_grad_enabled())
    assert.has_error(function() dl.no_grad(function() error("boom") end) end)
    assert.is_true(dl.is_grad_enabled())
  end)

  it("differentiates a function used twice (diamond graph)", function()
    local x = dl.tensor({3.0}):requires_grad(true)
    local h = x * x
    local y = (h + h * x):sum()      -- x^2 + x^3 -> 2x + 3x^2 = 33
    y:backward()
    assert.are.equal(33, x.grad:item())
  end)

  it("runs a Lua-defined autograd.Function", function()
    local Cube = dl.autograd.Function{
      forward = function(ctx, x) ctx.x = x; return x * x * x end,
      backward = function(ctx, g) return g * ctx.x * ctx.x * 3 end,
    }
    local x = dl.tensor({1, 2}):requires_grad(true)
    Cube(x):sum():backward()
    assert.are.same({3, 12}, x.grad:totable())
    local ok, report = dl.autograd.gradcheck(function(a) return Cube(a) end, {dl.randn(4)})
    assert(ok, report)
  end)

  it("reports a Lua backward that returns the wrong shape", function()
    local Bad = dl.autograd.Function{
      forward = function(_, x) return x * 2 end,
      backward = function(_, _) return dl.zeros(5) end,
    }
    local x = dl.zeros(3):requires_grad(true)
    assert.error_matches(function() Bad(x):sum():backward() end,
      "backward of function: gradient 1 has shape %[5%], expected %[3%]")
    local Named = dl.autograd.Function{
      name = "Doubler",
      forward = function(_, y) return y * 2 end,
      backward = function(_, _) return "oops" end,
    }
    assert.error_matches(function() Named(x):sum():backward() end,
      "backward of Doubler: result 1 is a string, expected a tensor or nil")
  end)

  it("gradcheck reports a wrong gradient", function()
    local Wrong = dl.autograd.Function{
      forward = function(_, x) return x * x end,
      backward = function(_, g) return g end,
    }
    local ok, report = dl.autograd.gradcheck(function(a) return Wrong(a) end, {dl.tensor({1, 2})})
    assert.is_false(ok)
    assert.truthy(report:find("analytic"))
  end)
end)
