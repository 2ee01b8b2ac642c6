-- Bad input from Lua: every case must raise a Lua error with a clear message,
-- never crash. A fuzz loop feeds every tensor function hostile arguments.
local dl = require "dlua"

describe("dlua.tensor errors", function()
  it("names both shapes when matmul inner dims differ", function()
    assert.error_matches(function() dl.zeros(3, 4):matmul(dl.zeros(5, 6)) end,
      "matmul: shapes %[3, 4%] and %[5, 6%] do not match %(4 != 5%)")
  end)

  it("names op and shapes for broadcasting failures", function()
    assert.error_matches(function() return dl.zeros(3, 4) + dl.zeros(5, 6) end,
      "add: shapes %[3, 4%] and %[5, 6%] cannot be broadcast")
    assert.error_matches(function() return dl.zeros(2) * dl.zeros(3) end, "mul: shapes %[2%] and %[3%]")
  end)

  it("points the error at the caller's line", function()
    local ok, err = pcall(function() return dl.zeros(2):reshape(3) end)
    assert.is_false(ok)
    assert.truthy(err:find("errors_spec.lua:%d+: reshape: shape %[3%] is invalid for 2 elements"))
  end)

  it("checks dimensions, 1-based and negative", function()
    local t = dl.zeros(2, 3)
    assert.error_matches(function() t:sum(3) end, "bad argument #1 to 'sum' %(dimension 3 out of range for a 2%-d tensor%)")
    assert.error_matches(function() t:sum(0) end, "dimension 0 out of range")
    assert.error_matches(function() t:sum(-3) end, "dimension %-3 out of range")
    assert.are.same({2}, t:sum(-1):shape())
  end)

  it("checks indices", function()
    local t = dl.zeros(2, 3)
    assert.error_matches(function() return t[3] end, "index 3 out of range for dimension 1 of size 2")
    assert.error_matches(function() return t:select(2, 4) end,
      "bad argument #2 to 'select' (index 4 out of range for dimension 2 of size 3)", nil, true)
    assert.error_matches(function() return dl.select(t, 2, 4) end, "bad argument #3 to 'select' (index 4", nil, true)
    assert.error_matches(function() return t:narrow(2, 2, 5) end,
      "bad argument #2 to 'narrow' (start 2 and length 5 out of range for dimension 2 of size 3)", nil, true)
    assert.error_matches(function() return dl.tensor(3):narrow(1, 1, 1) end,
      "calling 'narrow' on bad self (cannot narrow a 0-d tensor)", nil, true)
    assert.error_matches(function() return dl.zeros(0):max() end, "calling 'max' on bad self (cannot reduce an empty tensor)",
      nil, true)
    assert.error_matches(function() return dl.zeros(2, 0):max(2) end,
      "bad argument #1 to 'max' (cannot reduce over a dimension of size 0)", nil, true)
    assert.error_matches(function() return dl.tensor(3):softmax() end,
      "calling 'softmax' on bad self (expected at least a 1-d tensor)", nil, true)
    assert.error_matches(function() return dl.cat({dl.tensor(1), dl.tensor(2)}) end,
      "bad argument #1 to 'cat' (cannot concatenate 0-d tensors (use stack))", nil, true)
    assert.error_matches(function() t:copy_(dl.zeros(4)) end,
      "bad argument #1 to 'copy_' (source shape [4] cannot be broadcast to [2, 3])", nil, true)
    assert.error_matches(function() dl.zeros(2):requires_grad(true):add_(1) end,
      "calling 'add_' on bad self (in-place change of a tensor that requires grad (wrap it in dl.no_grad))", nil, true)
    assert.error_matches(function() return t:item() end, "calling 'item' on bad self %(tensor of shape %[2, 3%] has 6 elements")
  end)

  it("checks sizes and options", function()
    assert.error_matches(function() dl.zeros(2.5) end, "bad argument #1 to 'zeros' %(size 2.5 is not an integer%)")
    assert.error_matches(function() dl.zeros(-1, 2) end, "negative")
    assert.error_matches(function() dl.zeros(2, {dtype = "float16"}) end, "unknown dtype 'float16'")
    assert.error_matches(function() dl.zeros(2, {dtyp = "float32"}) end, "unknown option 'dtyp'")
    assert.error_matches(function() dl.zeros(1e6, 1e6) end, "out of memory")
    assert.error_matches(function() dl.zeros(1e9, 1e9) end, "tensor: shape %[1000000000, 1000000000%] overflows")
    assert.error_matches(function() dl.tensor({{1, 2}, {3}}) end, "ragged nested table")
    assert.error_matches(function() dl.tensor({1, "x"}) end, "element %[2%] is a string")
  end)

  it("rejects wrong types with the expected type named", function()
    assert.error_matches(function() dl.zeros(2):matmul("x") end, "dlua.Tensor, number or table expected, got string")
    assert.error_matches(function() dl.sum(nil) end, "dlua.Tensor expected, got nil")
    assert.error_matches(function() dl.zeros(2):requires_grad(true):add_(1) end, "in%-place")
    assert.error_matches(function() dl.zeros(2, {dtype = "int32"}):requires_grad(true) end, "only float tensors")
  end)

  it("checks index values of gather/index_select/one_hot", function()
    local t = dl.zeros(3, 4)
    assert.error_matches(function() t:index_select(1, {4}) end, "index_select: index 4 out of range for dimension 1 of size 3")
    assert.error_matches(function() t:index_select(1, {0}) end, "indices are 1%-based")
    assert.error_matches(function() t:index_select(1, {0 / 0}) end, "bad argument #2 to 'index_select' %(index %-?nan is not an integer%)")
    assert.error_matches(function() t:index_select(1, {1e300}) end, "out of range")
    assert.error_matches(function() t:index_select(1, {1.5}) end, "not an integer")
    assert.error_matches(function() dl.one_hot(dl.tensor({1, 11}), 10) end, "bad argument #1 to 'one_hot' (label 11 out of range for 10 classes)", nil, true)
    assert.error_matches(function() t:gather(2, dl.tensor({{5}}, {dtype = "int64"})) end, "gather: index 5 out of range")
  end)

  it("refuses released tensors", function()
    local t = dl.zeros(2)
    t:release()
    t:release()  -- idempotent
    assert.error_matches(function() return t + 1 end, "released")
    assert.truthy(tostring(t):find("released"))
  end)
end)

describe("dlua.tensor fuzz", function()
  local hostile = {
    nil, 0, -1, 1, 2, 3, 1.5, -1e18, 1e18, math.huge, -math.huge, 0 / 0, "", "x", {}, {1, 2}, {{1}, {2, 3}},
    true, false, function() end, dl.zeros(0), dl.zeros(2, 3), dl.zeros(3, {dtype = "int32"}), dl.ones(1),
    dl.zeros(2, 3):transpose(), dl.tensor(5), dl.zeros(1, 1, 1, 1, 1, 1, 1, 1), coroutine.create(function() end),
  }
  local nh = 28
  local names = {}
  for k, v in pairs(dl) do
    if type(v) == "function" and k ~= "no_grad" and k ~= "enable_grad" and k ~= "threads" and k ~= "seed"
      and k ~= "set_grad_enabled" and k ~= "memory_limit" and k ~= "rng_state" and k ~= "memory_trim"
      and k ~= "release" then
      names[#names + 1] = k
    end
  end
  table.sort(names)

  it("survives every function called with hostile arguments", function()
    local calls, errors = 0, 0
    local rng = 12345
    local function pick()
      rng = (rng * 1103515245 + 12345) % 2147483648
      return hostile[rng % nh + 1]
    end
    local prev_limit = dl.memory.limit(256 * 2 ^ 20)
    for _, name in ipairs(names) do
      for _ = 1, 60 do
        local a, b, c, d = pick(), pick(), pick(), pick()
        local ok, err = pcall(dl[name], a, b, c, d)
        calls = calls + 1
        if not ok then
          errors = errors + 1
          assert(type(err) == "string" and #err > 0, name .. " raised a non-string error")
          assert(not err:find("%%"), name .. " leaked a format directive: " .. err)
        end
      end
    end
    dl.memory.limit(prev_limit)
    assert(calls > 1000)
    assert(errors > 0)
    assert.is_true(dl.is_grad_enabled())
  end)
end)
