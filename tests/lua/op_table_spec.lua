-- The core's op table (engine/ops/ops.h DL_OP_TABLE, listed by core._ops()) against
-- finite differences: every differentiable op must have a gradcheck case here,
-- and the case must record a node of that op, so an op added to the table
-- without a case, or a case that stops reaching its op, fails this spec.
local dl = require "dlua"
local core = require "dlua.core"

local pos = function(...) return dl.rand(...) + 0.5 end
local idx = function(t) return dl.tensor(t, {dtype = "int64"}) end
-- float32 kernels: central differences with a coarser step (as in conv_spec)
local f32 = {eps = 1e-2, atol = 2e-3, rtol = 1e-2}

local Square = dl.autograd.Function{
  forward = function(ctx, x) ctx.x = x; return x * x end,
  backward = function(ctx, g) return g * ctx.x * 2 end,
}

-- name -> {fn, inputs [, gradcheck opts]}; fn's result is the op's own output
local cases = {
  add = {function(a, b) return a + b end, function() return {dl.randn(3, 4), dl.randn(4)} end},
  sub = {function(a, b) return a - b end, function() return {dl.randn(3, 1), dl.randn(3, 4)} end},
  mul = {function(a, b) return a * b end, function() return {dl.randn(3, 4), dl.randn(3, 1)} end},
  div = {function(a, b) return a / b end, function() return {dl.randn(2, 3), pos(3)} end},
  pow = {function(a, b) return a:pow(b) end, function() return {pos(2, 3), dl.randn(3)} end},
  maximum = {function(a, b) return a:maximum(b) end, function() return {dl.randn(3, 4), dl.randn(4)} end},
  minimum = {function(a, b) return a:minimum(b) end, function() return {dl.randn(3, 4), dl.randn(4)} end},
  neg = {function(a) return a:neg() end, function() return {dl.randn(3, 4)} end},
  exp = {function(a) return a:exp() end, function() return {dl.randn(3, 4)} end},
  log = {function(a) return a:log() end, function() return {pos(3, 4)} end},
  sqrt = {function(a) return a:sqrt() end, function() return {pos(3, 4)} end},
  abs = {function(a) return a:abs() end, function() return {dl.tensor({{-1.5, 0.7}, {2.1, -0.3}})} end},
  relu = {function(a) return a:relu() end, function() return {dl.tensor({{-1.5, 0.7}, {2.1, -0.3}})} end},
  sigmoid = {function(a) return a:sigmoid() end, function() return {dl.randn(3, 4)} end},
  tanh = {function(a) return a:tanh() end, function() return {dl.randn(3, 4)} end},
  gelu = {function(a) return a:gelu() end, function() return {dl.randn(3, 4)} end},
  sign = {function(a) return a:sign() end, function() return {dl.tensor({-1.5, 0.7, 2.1})} end},
  square = {function(a) return a:square() end, function() return {dl.randn(3, 4)} end},
  rsqrt = {function(a) return a:rsqrt() end, function() return {pos(3, 4)} end},
  sin = {function(a) return a:sin() end, function() return {dl.randn(3, 4) * 3} end},
  cos = {function(a) return a:cos() end, function() return {dl.randn(3, 4) * 3} end},
  tan = {function(a) return a:tan() end, function() return {dl.rand(3, 4) * 2.6 - 1.3} end},
  asin = {function(a) return a:asin() end, function() return {dl.rand(3, 4) * 1.8 - 0.9} end},
  acos = {function(a) return a:acos() end, function() return {dl.rand(3, 4) * 1.8 - 0.9} end},
  atan = {function(a) return a:atan() end, function() return {dl.randn(3, 4) * 2} end},
  sinh = {function(a) return a:sinh() end, function() return {dl.randn(3, 4)} end},
  cosh = {function(a) return a:cosh() end, function() return {dl.randn(3, 4)} end},
  asinh = {function(a) return a:asinh() end, function() return {dl.randn(3, 4) * 2} end},
  acosh = {function(a) return a:acosh() end, function() return {pos(3, 4) + 0.7} end},
  atanh = {function(a) return a:atanh() end, function() return {dl.rand(3, 4) * 1.8 - 0.9} end},
  expm1 = {function(a) return a:expm1() end, function() return {dl.randn(3, 4)} end},
  log1p = {function(a) return a:log1p() end, function() return {dl.rand(3, 4) * 3 - 0.5} end},
  log2 = {function(a) return a:log2() end, function() return {pos(3, 4)} end},
  log10 = {function(a) return a:log10() end, function() return {pos(3, 4)} end},
  erf = {function(a) return a:erf() end, function() return {dl.randn(3, 4)} end},
  erfc = {function(a) return a:erfc() end, function() return {dl.randn(3, 4)} end},
  erfinv = {function(a) return a:erfinv() end, function() return {dl.rand(3, 4) * 1.8 - 0.9} end},
  softplus = {function(a) return a:softplus() end, function() return {dl.randn(3, 4) * 4} end},
  silu = {function(a) return a:silu() end, function() return {dl.randn(3, 4) * 3} end},
  mish = {function(a) return a:mish() end, function() return {dl.randn(3, 4) * 3} end},
  log_sigmoid = {function(a) return a:log_sigmoid() end, function() return {dl.randn(3, 4) * 4} end},
  exp2 = {function(a) return a:exp2() end, function() return {dl.randn(3, 4)} end},
  -- piecewise constant: the gradient is 0 (as torch's); inputs away from the steps
  floor = {function(a) return a:floor() end, function() return {dl.tensor({-1.5, -0.3, 0.4, 2.7})} end},
  ceil = {function(a) return a:ceil() end, function() return {dl.tensor({-1.5, -0.3, 0.4, 2.7})} end},
  round = {function(a) return a:round() end, function() return {dl.tensor({-1.3, -0.3, 0.4, 2.7})} end},
  trunc = {function(a) return a:trunc() end, function() return {dl.tensor({-1.5, -0.3, 0.4, 2.7})} end},
  scale = {function(a) return a:scale(0.5, 2) end, function() return {dl.randn(5)} end},
  clamp = {function(a) return a:clamp(-0.5, 0.5) end, function() return {dl.tensor({-1, -0.2, 0.3, 0.9})} end},
  where = {function(a, b) return dl.where(a:gt(0), a, b) end, function() return {dl.randn(3, 4), dl.randn(4)} end},
  cast = {function(a) return a:float() end, function() return {dl.randn(3)} end, f32},
  sum = {function(a) return a:sum(2) end, function() return {dl.randn(3, 4)} end},
  mean = {function(a) return a:mean({1, 3}) end, function() return {dl.randn(2, 3, 4)} end},
  max = {function(a) return a:max(2) end, function() return {dl.randn(3, 4)} end},
  min = {function(a) return a:min(1) end, function() return {dl.randn(3, 4)} end},
  var = {function(a) return a:var(1) end, function() return {dl.randn(4, 3)} end},
  logsumexp = {function(a) return a:logsumexp(2) end, function() return {dl.randn(3, 5)} end},
  softmax = {function(a) return a:softmax(1) end, function() return {dl.randn(3, 4)} end},
  log_softmax = {function(a) return a:log_softmax(2) end, function() return {dl.randn(4, 6)} end},
  reshape = {function(a) return a:transpose(1, 2):reshape(2, 6) end, function() return {dl.randn(3, 4)} end},
  permute = {function(a) return a:permute(3, 1, 2) end, function() return {dl.randn(2, 3, 4)} end},
  narrow = {function(a) return a:narrow(2, 2, 2) end, function() return {dl.randn(3, 4)} end},
  expand = {function(a) return a:expand(3, 4) end, function() return {dl.randn(1, 4)} end},
  clone = {function(a) return a:transpose(1, 2):clone() end, function() return {dl.randn(3, 4)} end},
  cat = {function(a, b) return dl.cat({a, b, a}, 2) end, function() return {dl.randn(2, 3), dl.randn(2, 3)} end},
  gather = {function(a) return a:gather(2, idx({{1, 3}, {2, 2}, {4, 1}})) end, function() return {dl.randn(3, 4)} end},
  index_select = {function(a) return a:index_select(1, idx({3, 1, 3})) end, function() return {dl.randn(3, 4)} end},
  scatter_add = {function(a, s) return a:scatter_add(1, idx({{1, 2}, {1, 1}}), s) end,
    function() return {dl.randn(2, 2), dl.randn(2, 2)} end},
  matmul = {function(a, b) return a:matmul(b) end, function() return {dl.randn(2, 3, 4), dl.randn(4, 5)} end},
  linear = {function(x, w, b) return x:linear(w, b) end, function() return {dl.randn(2, 3, 4), dl.randn(5, 4), dl.randn(5)} end},
  conv2d = {function(x, w, b) return dl.conv2d(x:float(), w:float(), b:float(), {padding = 1, stride = {1, 2}}) end,
    function() return {dl.randn(2, 2, 4, 5), dl.randn(3, 2, 3, 3), dl.randn(3)} end, f32},
  max_pool2d = {function(x) return dl.max_pool2d(x:float(), 2) end, function() return {dl.randn(1, 2, 4, 4)} end, f32},
  avg_pool2d = {function(x) return dl.avg_pool2d(x:float(), 3, {stride = 2, padding = 1}) end,
    function() return {dl.randn(1, 2, 5, 5)} end, f32},
  batch_norm = {function(x, w, b) return core.batch_norm(x, w, b) end,
    function() return {dl.randn(6, 3, 2, 2), pos(3), dl.randn(3)} end},
  scaled_dot_product_attention = {function(q, k, v)
      local keep = dl.tensor({1, 1, 1, 0, 1, 1, 1, 1}, {dtype = "uint8"}):reshape(2, 1, 1, 4)
      return q:scaled_dot_product_attention(k, v, {causal = true, mask = keep, scale = 0.7})
    end, function() return {dl.randn(2, 2, 5, 3), dl.randn(2, 2, 4, 3), dl.randn(2, 2, 4, 2)} end},
  ["function"] = {function(a) return Square(a) end, function() return {dl.randn(3)} end},
}

describe("dlua op table", function()
  local ops = core._ops()

  it("lists every differentiable op once, with its forward, backward and Lua name", function()
    assert.is_true(#ops >= 74)
    local seen = {}
    for _, o in ipairs(ops) do
      assert.is_nil(seen[o.name], "op listed twice: " .. o.name)
      seen[o.name] = true
      assert.matches("^dl_", o.forward)
      assert.matches("^dl_bw_", o.backward)
      assert.is_string(o.lua)
    end
    for name in pairs(cases) do assert.is_true(seen[name], "a case for an op the table does not list: " .. name) end
  end)

  for _, o in ipairs(ops) do
    it("gradchecks " .. o.name .. " (" .. o.lua .. ")", function()
      local c = cases[o.name]
      assert(c, "op '" .. o.name .. "' (" .. o.forward .. ", Lua " .. o.lua .. ") has no gradcheck case in op_table_spec.lua")
      dl.seed(17)
      local inputs = c[2]()
      -- the case reaches its op: the output's node is the op's own
      local xs = {}
      for i, x in ipairs(inputs) do xs[i] = x:double():requires_grad(true) end
      assert.are.equal(o.name, c[1](table.unpack(xs)):grad_fn())
      local ok, report = dl.autograd.gradcheck(c[1], inputs, c[3])
      assert(ok, report)
    end)
  end
end)
