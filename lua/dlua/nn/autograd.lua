--- dl.autograd: Lua-defined differentiable functions and gradient checking.
local core = require "dlua.core"
local util = require "dlua.util"

local M = {}

local is_tensor = util.is_tensor

--- Defines a differentiable function from a forward and a backward in Lua.
-- `forward(ctx, ...)` runs with recording off and returns one tensor; it may
-- stash values in `ctx` (a plain table). `backward(ctx, grad)` returns one
-- gradient (or nil) per tensor argument, in order.
-- @usage
-- local Square = dl.autograd.Function{
--   forward = function(ctx, x) ctx.x = x; return x * x end,
--   backward = function(ctx, g) return g * ctx.x * 2 end,
-- }
-- local y = Square(x)
function M.Function(spec)
  if type(spec) ~= "table" or type(spec.forward) ~= "function" or type(spec.backward) ~= "function" then
    error("autograd.Function: expected {forward = function, backward = function}", 2)
  end
  util.check_options("autograd.Function", spec, {forward = "function", backward = "function", name = "string"}, 2)
  local name = spec.name or "function"
  return setmetatable({}, {
    __call = function(_, ...)
      local args = table.pack(...)
      local inputs = {}
      for i = 1, args.n do
        if is_tensor(args[i]) then inputs[#inputs + 1] = args[i] end
      end
      local ctx = {}
      local prev = core.set_grad_enabled(false)
      local ok, out = pcall(spec.forward, ctx, ...)
      core.set_grad_enabled(prev)
      if not ok then error(out, 0) end
      if not is_tensor(out) then
        error(name .. ": forward must return a tensor, got " .. type(out), 2)
      end
      if #inputs == 0 then return out end
      if #inputs > 4 then
        error(string.format("%s: %d tensor inputs, 1 to 4 supported", name, #inputs), 2)
      end
      return core.record_function(out, inputs, function(g) return spec.backward(ctx, g) end, name)
    end,
  })
end

--- Compares analytic gradients of `fn(inputs...)` with central finite differences.
-- Inputs are converted to float64 copies that require grad; the output is
-- reduced to a scalar with fixed random weights. Returns true, or false and a
-- report naming the input, element, and both values.
-- opts: eps (1e-6), atol (1e-5), rtol (1e-3)
-- @usage assert(dl.autograd.gradcheck(function(x) return x:tanh() end, {dl.randn(3, 4)}))
function M.gradcheck(fn, inputs, opts)
  opts = util.check_options("gradcheck", opts, {eps = "number", atol = "number", rtol = "number"}, 2)
  local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
  local xs = {}
  for i, x in ipairs(inputs) do
    if is_tensor(x) and (x:dtype() == "float32" or x:dtype() == "float64") then
      xs[i] = x:to("float64"):detach():requires_grad(true)
    else
      xs[i] = x
    end
  end
  local out = fn(table.unpack(xs, 1, #inputs))
  if not is_tensor(out) then error("gradcheck: fn must return a tensor", 2) end
  -- fixed weights in [0.5, 1.5) so every output element matters
  local n = out:numel()
  local w = core.empty(out:shape(), {dtype = "float64"})
  for k = 1, n do w:set_flat(k, 0.5 + ((k * 7919) % 1000) / 1000) end
  local function scalar(o) return (o:to("float64") * w):sum() end
  local loss = scalar(out)
  loss:backward()
  local prev = core.set_grad_enabled(false)
  local report
  for i, x in ipairs(xs) do
    if is_tensor(x) and x:requires_grad() then
      local g = x.grad
      for k = 1, x:numel() do
        local v = x:get_flat(k)
        x:set_flat(k, v + eps)
        local fp = scalar(fn(table.unpack(xs, 1, #inputs))):item()
        x:set_flat(k, v - eps)
        local fm = scalar(fn(table.unpack(xs, 1, #inputs))):item()
        x:set_flat(k, v)
        local num = (fp - fm) / (2 * eps)
        local ana = g and g:get_flat(k) or 0
        if math.abs(num - ana) > atol + rtol * math.abs(num) then
          report = string.format("gradcheck: input %d element %d: analytic %.10g, numeric %.10g (|diff| %.3g)",
            i, k, ana, num, math.abs(num - ana))
          break
        end
      end
    end
    if report then break end
  end
  core.set_grad_enabled(prev)
  if report then return false, report end
  return true
end


-- every exported function refuses extra arguments (util.strict)
util.strict_table("autograd.", M, false, {Function = {"table"}, gradcheck = {"callable", "table", "table?"}})

return M
