-- The PyTorch-familiar Module API (issue 20, item 5): module:to(dtype), the module
-- tree (children, modules, named_modules, apply), freezing honoured by every
-- optimizer, and parameter groups (per-group lr and weight decay, set_lr,
-- state_dict, optim.param_groups) checked against the update formulas in double.
local dl = require "dlua"
local nn, optim = dl.nn, dl.optim

local KINDS = {"SGD", "Adam", "NAdam", "AdamW", "Adagrad", "RMSProp"}

local function names_of(list)
  local out = {}
  for i, nm in ipairs(list) do out[i] = nm[1] end
  return out
end

local function class(m) return getmetatable(m).__name end

describe("module:to(dtype)", function()
  it("converts float parameters and buffers in place, keeps integer buffers and requires_grad, returns the module", function()
    dl.seed(1)
    local m = nn.Sequential{nn.Linear(3, 4), nn.BatchNorm(4)}
    local w32 = m[1].weight:totable()
    m[1].bias:requires_grad(false)
    assert.are.equal(m, m:to("float64"))
    for _, np in ipairs(m:named_parameters()) do assert.are.equal("float64", np[2]:dtype(), np[1]) end
    assert.are.equal("float64", m[2].running_mean:dtype())
    assert.are.equal("float64", m[2].running_var:dtype())
    assert.are.equal("int64", m[2].num_batches_tracked:dtype())
    assert.is_true(m[1].weight:requires_grad())
    assert.is_false(m[1].bias:requires_grad())
    assert.are.same(w32, m[1].weight:totable())          -- float32 values are exact in float64
    m:to("float32")
    assert.are.equal("float32", m[1].weight:dtype())
    assert.are.equal("float32", m[2].running_var:dtype())
    assert.are.same(w32, m[1].weight:totable())
  end)

  it("keeps a parameter shared by two modules shared", function()
    local a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    b.weight = a.weight                                   -- tied (a plain reassignment of a parameter field)
    local m = nn.Sequential{a, b}:to("float64")
    assert.are.equal("float64", m[1].weight:dtype())
    assert.is_true(rawequal(m[1].weight, m[2].weight))
  end)

  it("runs the forward in float64 afterwards", function()
    dl.seed(2)
    local m = nn.Sequential{nn.Linear(3, 2), nn.LayerNorm(2)}:to("float64")
    local y = m(dl.randn(5, 3):to("float64"))
    assert.are.equal("float64", y:dtype())
  end)

  it("rejects other dtypes naming the function", function()
    local m = nn.Linear(2, 2)
    assert.has_error(function() m:to("int64") end, "to: dtype must be 'float32' or 'float64', got 'int64'")
    assert.has_error(function() m:to(64) end, "to: dtype must be 'float32' or 'float64', got number")
  end)

  it("keeps a float64 BatchNorm's moving averages in float64", function()
    dl.seed(6)
    local bn = nn.BatchNorm(2):to("float64")
    local x = dl.randn(5, 2):to("float64")
    bn(x)
    local cols = x:transpose(1, 2):totable()
    for c = 1, 2 do
      local mean, ss = 0, 0
      for _, v in ipairs(cols[c]) do mean = mean + v / 5 end
      for _, v in ipairs(cols[c]) do ss = ss + (v - mean) ^ 2 end
      assert.is_true(math.abs(bn.running_mean:totable()[c] - 0.1 * mean) < 1e-15)
      assert.is_true(math.abs(bn.running_var:totable()[c] - (0.9 + 0.1 * ss / 4)) < 1e-15)
    end
  end)

  it("lets a BatchNorm moved to float64 pass gradcheck (input, weight and bias; training and eval)", function()
    dl.seed(3)
    local bn = nn.BatchNorm(3):to("float64")
    local x = dl.randn(6, 3, 2, 2):to("float64")
    local w = dl.rand(3):to("float64") + 0.5
    local b = dl.randn(3):to("float64")
    local function f(xx, ww, bb)
      bn.weight, bn.bias = ww, bb                          -- the checked copies become the parameters
      return bn(xx)
    end
    local ok, report = dl.autograd.gradcheck(f, {x, w, b})
    assert(ok, report)
    bn:eval()
    ok, report = dl.autograd.gradcheck(f, {x, w, b})
    assert(ok, report)
  end)
end)

describe("the module tree", function()
  local function model()
    return nn.Sequential{nn.Linear(2, 3), nn.Residual(nn.Sequential{nn.Linear(3, 3), nn.ReLU()}), nn.Linear(3, 1)}
  end

  it("names every module as PyTorch's named_modules does, depth-first pre-order", function()
    local m = model()
    local nm = m:named_modules()
    assert.are.same({"", "1", "2", "2.body", "2.body.1", "2.body.2", "3"}, names_of(nm))
    local classes = {}
    for i, e in ipairs(nm) do classes[i] = class(e[2]) end
    assert.are.same({"Sequential", "Linear", "Residual", "Sequential", "Linear", "ReLU", "Linear"}, classes)
    assert.are.equal(m, nm[1][2])
    assert.are.equal(m[2].body[1], nm[5][2])
    local mods = m:modules()
    assert.are.equal(7, #mods)
    for i = 1, 7 do assert.are.equal(nm[i][2], mods[i]) end
  end)

  it("lists only the direct children, in registration order", function()
    local m = model()
    local ch = m:children()
    assert.are.equal(3, #ch)
    assert.are.equal(m[1], ch[1]); assert.are.equal(m[2], ch[2]); assert.are.equal(m[3], ch[3])
    assert.are.same({"1", "2", "3"}, names_of(m:named_children()))
    assert.are.same({}, nn.ReLU():children())
  end)

  it("lists a module reachable twice once, under its first name", function()
    local shared = nn.Linear(2, 2)
    local m = nn.Sequential{shared, nn.ReLU(), shared}
    assert.are.same({"", "1", "2"}, names_of(m:named_modules()))
  end)

  it("applies fn to the children before the module itself and returns the module", function()
    local m = model()
    local seen = {}
    local index = {}
    for _, e in ipairs(m:named_modules()) do index[e[2]] = e[1] end
    assert.are.equal(m, m:apply(function(x) seen[#seen + 1] = index[x] end))
    assert.are.same({"1", "2.body.1", "2.body.2", "2.body", "2", "3", ""}, seen)
    assert.has_error(function() m:apply(3) end, "bad argument #1 to 'Module:apply' (callable expected, got integer)")
  end)

  it("initialises through apply", function()
    local m = model()
    m:apply(function(x) if class(x) == "Linear" then nn.init.constant(x.weight, 0.5) end end)
    for _, np in ipairs(m:named_parameters()) do
      if np[1]:match("weight$") then
        for _, v in ipairs(np[2]:reshape(-1):totable()) do assert.are.equal(0.5, v) end
      end
    end
  end)
end)

describe("freezing", function()
  -- one step of kind on two Linear layers with a loss through both; returns the
  -- layers' parameters before and after
  local function step_with(kind, freeze)
    dl.seed(4)
    local m = nn.Sequential{nn.Linear(3, 3), nn.Linear(3, 1)}
    freeze(m)
    local before = {}
    for i, p in ipairs(m:parameters()) do before[i] = p:totable() end
    local opt = optim[kind]{params = m:parameters(), lr = 0.1}
    local loss = m(dl.randn(4, 3)):square():mean()
    loss:backward()
    for _, p in ipairs(m:parameters()) do          -- a stale gradient must not move a frozen tensor either
      if not p:requires_grad() then p.grad = dl.ones(p:shape()) end
    end
    opt:step()
    local after = {}
    for i, p in ipairs(m:parameters()) do after[i] = p:totable() end
    return before, after
  end

  for _, kind in ipairs(KINDS) do
    it("is honoured by " .. kind .. " (module:freeze and param:requires_grad(false))", function()
      local before, after = step_with(kind, function(m) m[1]:freeze() end)
      assert.are.same(before[1], after[1]); assert.are.same(before[2], after[2])
      assert.are_not.same(before[3], after[3]); assert.are_not.same(before[4], after[4])
      before, after = step_with(kind, function(m) m[2].bias:requires_grad(false) end)
      assert.are_not.same(before[3], after[3])
      assert.are.same(before[4], after[4])
    end)
  end

  it("is undone by unfreeze", function()
    local before, after = step_with("SGD", function(m) m:freeze(); m:unfreeze() end)
    for i = 1, 4 do assert.are_not.same(before[i], after[i]) end
  end)

  it("is shown by tostring", function()
    local m = nn.Sequential{nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)}
    m[1]:freeze()
    m[3].bias:requires_grad(false)
    assert.are.equal(table.concat({
      "Sequential  [67 params, 43 frozen]",
      "  1: Linear(4 -> 8)  [40 params, 40 frozen]",
      "  2: ReLU",
      "  3: Linear(8 -> 3)  [27 params, 3 frozen]",
    }, "\n"), tostring(m))
    m:unfreeze()
    assert.are.equal("Sequential  [67 params]", tostring(m):match("^[^\n]*"))
  end)
end)

describe("parameter groups", function()
  -- a float64 model whose parameters fall into both halves of param_groups
  local function model()
    dl.seed(5)
    return nn.Sequential{nn.Linear(3, 4), nn.LayerNorm(4), nn.Tanh(), nn.Linear(4, 2)}:to("float64")
  end
  local X = dl.randn(8, 3):to("float64")
  local Y = dl.randn(8, 2):to("float64")

  local function flat(t) return t:reshape(-1):totable() end

  local function close(expected, got, what)
    for i = 1, #expected do
      local e, g = expected[i], got[i]
      assert(math.abs(e - g) <= 1e-12 + 1e-9 * math.abs(e),
        string.format("%s element %d: expected %.17g, got %.17g", what, i, e, g))
    end
  end

  it("splits decay / no-decay the usual way (biases and norm parameters without decay)", function()
    local m = nn.Sequential{nn.Conv2d(1, 2, 3), nn.BatchNorm(2), nn.Flatten(), nn.Linear(2, 2), nn.LayerNorm(2)}
    local g = optim.param_groups(m, {weight_decay = 5e-4})
    assert.are.equal(2, #g)
    assert.are.equal(5e-4, g[1].weight_decay); assert.are.equal(0, g[2].weight_decay)
    local names = {}
    for _, np in ipairs(m:named_parameters()) do names[np[2]] = np[1] end
    local function group_names(list)
      local out = {}
      for i, p in ipairs(list) do out[i] = names[p] end
      return out
    end
    assert.are.same({"1.weight", "4.weight"}, group_names(g[1].params))
    assert.are.same({"1.bias", "2.weight", "2.bias", "4.bias", "5.weight", "5.bias"}, group_names(g[2].params))
    assert.has_error(function() optim.param_groups(m, {weight_dacay = 1}) end,
      "optim.param_groups: unknown option 'weight_dacay' (valid: weight_decay); did you mean 'weight_decay'?")
  end)

  it("updates each group of SGD with momentum by its own lr and weight decay (float64, 5 steps)", function()
    local m = model()
    local split = optim.param_groups(m, {weight_decay = 0.05})
    split[2].lr = 0.02
    local opt = optim.SGD{params = split, lr = 0.1, momentum = 0.9}
    local hp = {{lr = 0.1, wd = 0.05}, {lr = 0.02, wd = 0}}
    local buf = {}
    for step = 1, 5 do
      opt:zero_grad()
      nn.MSE()(m(X), Y):backward()
      local expected = {}
      for gi, group in ipairs(split) do
        for i, p in ipairs(group.params) do
          local key = gi .. "." .. i
          local theta, g = flat(p), flat(p.grad)
          buf[key] = buf[key] or {}
          local e = {}
          for k = 1, #theta do
            local d = g[k] + hp[gi].wd * theta[k]                    -- coupled L2
            buf[key][k] = 0.9 * (buf[key][k] or 0) + d              -- v <- mu v + g (v0 = 0)
            e[k] = theta[k] - hp[gi].lr * buf[key][k]
          end
          expected[key] = e
        end
      end
      opt:step()
      for gi, group in ipairs(split) do
        for i, p in ipairs(group.params) do close(expected[gi .. "." .. i], flat(p), "step " .. step .. " group " .. gi) end
      end
    end
  end)

  it("updates each group of AdamW with its own decoupled weight decay (float64, 5 steps)", function()
    local m = model()
    local split = optim.param_groups(m, {weight_decay = 0.1})
    local opt = optim.AdamW{params = split, lr = 0.01}
    local wd = {0.1, 0}
    local s = {}
    for t = 1, 5 do
      opt:zero_grad()
      nn.MSE()(m(X), Y):backward()
      local expected = {}
      for gi, group in ipairs(split) do
        for i, p in ipairs(group.params) do
          local key = gi .. "." .. i
          local theta, g = flat(p), flat(p.grad)
          s[key] = s[key] or {m = {}, v = {}}
          local e = {}
          for k = 1, #theta do
            local th = theta[k] - 0.01 * wd[gi] * theta[k]
            local mk = 0.9 * (s[key].m[k] or 0) + 0.1 * g[k]
            local vk = 0.999 * (s[key].v[k] or 0) + 0.001 * g[k] * g[k]
            s[key].m[k], s[key].v[k] = mk, vk
            e[k] = th - 0.01 * math.sqrt(1 - 0.999 ^ t) / (1 - 0.9 ^ t) * mk / (math.sqrt(vk) + 1e-8)
          end
          expected[key] = e
        end
      end
      opt:step()
      for gi, group in ipairs(split) do
        for i, p in ipairs(group.params) do close(expected[gi .. "." .. i], flat(p), "step " .. t .. " group " .. gi) end
      end
    end
  end)

  it("scales every group with set_lr (keeping its ratio to the default) and sets one with set_lr(lr, g)", function()
    local a = dl.tensor({1.0}, {dtype = "float64"}):requires_grad(true)
    local b = dl.tensor({1.0}, {dtype = "float64"}):requires_grad(true)
    local opt = optim.SGD{params = {{params = {a}}, {params = {b}, lr = 0.01}}, lr = 0.1}
    local function step()
      local before = {a:item(), b:item()}
      a.grad = dl.tensor({1.0}, {dtype = "float64"}); b.grad = dl.tensor({1.0}, {dtype = "float64"})
      opt:step()
      return before[1] - a:item(), before[2] - b:item()    -- the rates used (gradient 1)
    end
    local ra, rb = step()
    assert.is_true(math.abs(ra - 0.1) < 1e-15 and math.abs(rb - 0.01) < 1e-15)
    opt:set_lr(0.05)
    assert.are.equal(0.05, opt:lr()); assert.are.equal(0.05, opt:lr(1)); assert.is_true(math.abs(opt:lr(2) - 0.005) < 1e-18)
    ra, rb = step()
    assert.is_true(math.abs(ra - 0.05) < 1e-15 and math.abs(rb - 0.005) < 1e-15)
    opt:set_lr(0.3, 2)
    ra, rb = step()
    assert.is_true(math.abs(ra - 0.05) < 1e-15 and math.abs(rb - 0.3) < 1e-15)
    assert.has_error(function() opt:set_lr(0.1, 3) end, "SGD: set_lr: no group 3 (2 groups)")
    -- a group attached after set_lr: its own rate as given, the ratio taken to the default then
    local c = dl.tensor({1.0}, {dtype = "float64"}):requires_grad(true)
    opt:attach({{params = {c}, lr = 0.02}})
    assert.are.equal(0.02, opt:lr(3))
    opt:set_lr(0.1)
    assert.is_true(math.abs(opt:lr(3) - 0.04) < 1e-17)
    assert.is_true(math.abs(opt:lr(2) - 0.01) < 1e-17)
    assert.has_error(function() opt:lr(0) end, "SGD: lr: no group 0 (3 groups)")
  end)

  it("round-trips state_dict with groups (state, per-group lr, step)", function()
    local function run(opt, m, steps)
      for _ = 1, steps do
        opt:zero_grad(); nn.MSE()(m(X), Y):backward(); opt:step()
      end
    end
    local m1 = model()
    local o1 = optim.Adam{params = optim.param_groups(m1, {weight_decay = 0.01}), lr = 0.01}
    run(o1, m1, 3)
    o1:set_lr(0.004, 2)
    local sd = o1:state_dict()
    assert.are.equal(2, sd.groups); assert.are.equal(0.01, sd["group.1.lr"]); assert.are.equal(0.004, sd["group.2.lr"])
    local m2 = model()
    m2:load_state_dict(m1:state_dict())
    local o2 = optim.Adam{params = optim.param_groups(m2, {weight_decay = 0.01}), lr = 0.01}
    o2:load_state_dict(sd)
    assert.are.equal(0.004, o2:lr(2)); assert.are.equal(3, o2.t)
    run(o1, m1, 2); run(o2, m2, 2)
    local p1, p2 = m1:parameters(), m2:parameters()
    for i = 1, #p1 do assert.are.same(p1[i]:totable(), p2[i]:totable()) end
    local o3 = optim.Adam{params = m2:parameters(), lr = 0.01}
    assert.has_error(function() o3:load_state_dict(sd) end,
      "Adam: state was saved with 2 parameter groups, this optimizer has 1")
  end)

  it("accepts per-group keys strictly, naming the group", function()
    local p = dl.zeros(2):requires_grad(true)
    assert.has_error(function() optim.SGD{params = {{params = {p}, weight_dacay = 0}}, lr = 0.1} end,
      "SGD: unknown option 'weight_dacay' in params.1 (valid: lr, momentum, nesterov, params, weight_decay); did you mean 'weight_decay'?")
    assert.has_error(function() optim.Adam{params = {{params = {p}}, {params = {p}, beta3 = 1}}} end,
      "Adam: unknown option 'beta3' in params.2 (valid: beta1, beta2, eps, lr, params, weight_decay); did you mean 'beta1'?")
    assert.has_error(function() optim.SGD{params = {{params = {p}, lr = "big"}}} end,
      "SGD: option 'lr' in params.1 (number expected, got string)")
    assert.has_error(function() optim.SGD{params = {{params = {p}, lr = -1}}} end,
      "SGD: lr in params.1 must be non-negative, got -1")
    assert.has_error(function() optim.SGD{params = {{params = {p}}, p}} end,
      "SGD: params.2 is not a group {params = {...}, ...} like params.1")
    assert.has_error(function() optim.SGD{params = {{params = {p}, lr = 0.1}}, lr = 0} end,
      "SGD: lr in params.1 is 0.1 while the default lr is 0 (set_lr keeps each group's ratio to the default)")
    assert.has_error(function() optim.SGD{params = {{params = {p, 3}}}} end,
      "SGD: parameter 2 in params.1 is not a tensor")
  end)

  it("gives a per-group option other than lr and weight decay to that group only (momentum)", function()
    local a = dl.tensor({1.0}, {dtype = "float64"}):requires_grad(true)
    local b = dl.tensor({1.0}, {dtype = "float64"}):requires_grad(true)
    local opt = optim.SGD{params = {{params = {a}, momentum = 0.5}, {params = {b}}}, lr = 1}
    for _ = 1, 2 do
      a.grad = dl.tensor({1.0}, {dtype = "float64"}); b.grad = dl.tensor({1.0}, {dtype = "float64"})
      opt:step()
    end
    assert.are.equal(1 - 1 - 1.5, a:item())   -- v = 1, then 0.5 * 1 + 1
    assert.are.equal(1 - 1 - 1, b:item())
  end)
end)
