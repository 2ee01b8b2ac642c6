-- Optimizers against the playbook's update rules written out in double precision
-- (docs/optimizers.md), schedules against their formulas, and clipping.
local dl = require "dlua"
local optim = dl.optim

-- quadratic f(p) = 0.5 * sum a_i p_i^2, gradient a_i p_i
local A = {0.5, 2.0, -1.0, 3.0}
local P0 = {1.0, -0.5, 0.25, 2.0}

-- The formulas in double precision on a flat list of parameters p; grad(p) gives the gradient.
local function ref_run(kind, o, steps, p0, grad)
  local p, s1, s2 = {}, {}, {}
  for i = 1, #p0 do p[i] = p0[i]; s1[i] = kind == "RMSProp" and 1 or 0; s2[i] = 0 end
  local trace = {}
  for t = 1, steps do
    local gs = grad(p)
    for i = 1, #p do
      local g = gs[i]
      local wd = o.weight_decay or 0
      if kind ~= "AdamW" then g = g + wd * p[i] end
      if kind == "SGD" then
        local mu = o.momentum or 0
        if mu == 0 then p[i] = p[i] - o.lr * g
        else
          s1[i] = mu * s1[i] + g
          if o.nesterov then p[i] = p[i] - o.lr * (mu * s1[i] + g) else p[i] = p[i] - o.lr * s1[i] end
        end
      elseif kind == "Adam" or kind == "NAdam" or kind == "AdamW" then
        local b1, b2, eps = o.beta1 or 0.9, o.beta2 or 0.999, o.eps or 1e-8
        if kind == "AdamW" then p[i] = p[i] - o.lr * (o.weight_decay or 0.01) * p[i] end
        s1[i] = b1 * s1[i] + (1 - b1) * g
        s2[i] = b2 * s2[i] + (1 - b2) * g * g
        local b = math.sqrt(1 - b2 ^ t) / (1 - b1 ^ t)
        local num = kind == "NAdam" and (b1 * s1[i] + (1 - b1) * g) or s1[i]
        p[i] = p[i] - o.lr * b * num / (math.sqrt(s2[i]) + eps)
      elseif kind == "Adagrad" then
        s1[i] = s1[i] + g * g
        p[i] = p[i] - o.lr * g / (math.sqrt(s1[i]) + (o.eps or 1e-10))
      elseif kind == "RMSProp" then
        local rho, mu, eps = o.rho or 0.99, o.momentum or 0, o.eps or 1e-8
        s1[i] = rho * s1[i] + (1 - rho) * g * g
        s2[i] = mu * s2[i] + o.lr / math.sqrt(s1[i] + eps) * g
        p[i] = p[i] - s2[i]
      end
    end
    trace[t] = {table.unpack(p)}
  end
  return trace
end

local function quadratic_grad(p)                 -- gradient of 0.5 * sum a_i p_i^2, by hand
  local g = {}
  for i = 1, #p do g[i] = A[i] * p[i] end
  return g
end

local function dl_run(kind, o, steps, dtype)
  local like = {dtype = dtype or "float32"}
  local p = dl.tensor(P0, like):requires_grad(true)
  local a = dl.tensor(A, like)
  local opts = {params = {p}}
  for k, v in pairs(o) do opts[k] = v end
  local opt = optim[kind](opts)
  local trace = {}
  for t = 1, steps do
    opt:zero_grad();
    ((p * p * a):sum() * 0.5):backward()
    opt:step()
    trace[t] = p:totable()
  end
  return trace, opt
end

-- A small float64 network: tanh(x W1 + b1) W2, mean squared error against fixed targets.
local X = dl.randn({8, 3}, {dtype = "float64"})
local Y = dl.randn({8, 2}, {dtype = "float64"})
local SHAPES = {{3, 4}, {4}, {4, 2}}
local function net_loss(ps) return ((((X:matmul(ps[1]) + ps[2]):tanh()):matmul(ps[3]) - Y) ^ 2):mean() end
local function flatten(ts)
  local flat = {}
  for _, t in ipairs(ts) do
    for _, v in ipairs(t:reshape(-1):totable()) do flat[#flat + 1] = v end
  end
  return flat
end
local function unflatten(flat)                    -- fresh float64 leaves holding flat's values
  local ts, k = {}, 0
  for j, sh in ipairs(SHAPES) do
    local n = 1
    for _, d in ipairs(sh) do n = n * d end
    local vals = {}
    for i = 1, n do vals[i] = flat[k + i] end
    k = k + n
    ts[j] = dl.tensor(vals, {dtype = "float64"}):reshape(sh):contiguous():requires_grad(true)
  end
  return ts
end
dl.seed(11)
local NET0 = flatten({dl.randn(SHAPES[1], {dtype = "float64"}), dl.randn(SHAPES[2], {dtype = "float64"}),
                      dl.randn(SHAPES[3], {dtype = "float64"})})
local function net_grad(flat)                     -- the engine's autograd on the reference's own values
  local ts = unflatten(flat)
  net_loss(ts):backward()
  local gs = {}
  for j, t in ipairs(ts) do gs[j] = t.grad end
  return flatten(gs)
end
local function net_run(kind, o, steps)
  local ps = unflatten(NET0)
  local opts = {params = ps}
  for k, v in pairs(o) do opts[k] = v end
  local opt = optim[kind](opts)
  local trace = {}
  for t = 1, steps do
    opt:zero_grad()
    net_loss(ps):backward()
    opt:step()
    trace[t] = flatten(ps)
  end
  return trace
end

local function assert_close(want, got, rel, abs)
  for t = 1, #want do
    for i = 1, #want[t] do
      local w, g = want[t][i], got[t][i]
      assert(math.abs(w - g) <= rel * math.abs(w) + abs,
        string.format("step %d element %d: got %.17g, formula %.17g", t, i, g, w))
    end
  end
end

local cases = {
  {"SGD", {lr = 0.1}},
  {"SGD", {lr = 0.05, momentum = 0.9}},
  {"SGD", {lr = 0.05, momentum = 0.9, nesterov = true, weight_decay = 0.01}},
  {"Adam", {lr = 0.01}},
  {"Adam", {lr = 0.01, beta1 = 0.8, beta2 = 0.95, eps = 1e-3, weight_decay = 0.1}},
  {"NAdam", {lr = 0.01}},
  {"AdamW", {lr = 0.01, weight_decay = 0.1}},
  {"Adagrad", {lr = 0.1}},
  {"RMSProp", {lr = 0.01}},
  {"RMSProp", {lr = 0.01, momentum = 0.9, rho = 0.9, eps = 1e-6}},
}

describe("dlua.optim update rules", function()
  it("has a formula and a case for every optimizer of the table (core.optim_table)", function()
    local covered = {}
    for _, c in ipairs(cases) do covered[c[1]] = true end
    local src = io.open("tests/lua/optim_spec.lua"):read("a")
    for _, row in ipairs(require("dlua.core").optim_table()) do
      assert.is_true(covered[row.name] == true, row.name .. " has no case in optim_spec.lua")
      assert.truthy(src:find('kind == "' .. row.name .. '"', 1, true), row.name .. " has no formula in ref_run")
    end
  end)

  for _, c in ipairs(cases) do
    local kind, o = c[1], c[2]
    local label = {}
    for k, v in pairs(o) do label[#label + 1] = k .. "=" .. tostring(v) end
    table.sort(label)
    local name = string.format("%s{%s}", kind, table.concat(label, ", "))
    it(name .. " follows its formula for 100 steps on a quadratic (float64, 1e-6 relative)", function()
      assert_close(ref_run(kind, o, 100, P0, quadratic_grad), dl_run(kind, o, 100, "float64"), 1e-6, 1e-12)
    end)
    it(name .. " follows its formula for 100 steps on a small network (float64, 1e-6 relative)", function()
      assert_close(ref_run(kind, o, 100, NET0, net_grad), net_run(kind, o, 100), 1e-6, 1e-12)
    end)
    it(name .. " in float32 stays within float32 rounding of the formula", function()
      -- float32 parameters and state against the float64 trace
      assert_close(ref_run(kind, o, 100, P0, quadratic_grad), dl_run(kind, o, 100), 1e-5, 1e-5)
    end)
  end

  it("changes the learning rate between steps and round-trips its state", function()
    local _, opt = dl_run("Adam", {lr = 0.01}, 5)
    opt:set_lr(0.5)
    assert.are.equal(0.5, opt:lr())
    local sd = opt:state_dict()
    assert.are.equal(5, sd.step)
    assert.truthy(sd["1.m"] and sd["1.v"])
    local p2 = dl.tensor(P0):requires_grad(true)
    local opt2 = optim.Adam{params = {p2}}
    opt2:load_state_dict(sd)
    assert.are.equal(5, opt2.t)
    assert.are.same(sd["1.v"]:totable(), opt2:state_dict()["1.v"]:totable())
  end)

  it("updates large parameters in chunks over threads with exactly the serial result", function()
    local saved = dl.threads()
    local function run(threads, kind)
      dl.threads(threads)
      dl.seed(5)
      local ps = {dl.randn(300001):requires_grad(true), dl.randn(7):requires_grad(true),
                  dl.randn(70000):requires_grad(true)}
      local opt = optim[kind]{params = ps, lr = 0.01}
      for _ = 1, 3 do
        opt:zero_grad()
        local l = 0
        for _, p in ipairs(ps) do l = l + (p * p):sum() + p:sum() end
        l:backward()
        opt:step()
      end
      return ps
    end
    for _, kind in ipairs({"SGD", "Adam", "RMSProp"}) do
      local one, two = run(1, kind), run(2, kind)
      for i = 1, 3 do
        assert.is_true((one[i] - two[i]):abs():max():item() == 0, kind .. " parameter " .. i)
      end
    end
    -- and the chunked path computes the rule: one SGD step is p - lr (2p + 1)
    dl.threads(2)
    dl.seed(9)
    local p = dl.randn(200000):requires_grad(true)
    local want = p - (p * 2 + 1) * 0.01
    local opt = optim.SGD{params = {p}, lr = 0.01};
    ((p * p):sum() + p:sum()):backward()
    opt:step()
    assert((p - want):abs():max():item() < 1e-6)
    dl.threads(saved)
  end)

  it("rejects unknown and mistyped options", function()
    assert.error_matches(function() optim.SGD{lr = 0.1, momentun = 0.9} end, "SGD: unknown option 'momentun'")
    assert.error_matches(function() optim.Adam{lr = "0.1"} end, "option 'lr' %(number expected, got string%)")
  end)
end)

describe("dlua.optim.schedule", function()
  it("warms up linearly and decays by the formula", function()
    local c = optim.schedule.cosine{warmup = 100, steps = 3000, final = 0}
    assert.are.equal(0, c(0))
    assert.are.equal(0.5, c(50))
    assert.are.equal(1, c(100))
    assert(math.abs(c(1550) - 0.5) < 1e-12)
    assert(math.abs(c(3000)) < 1e-12)
    local l = optim.schedule.linear{steps = 10, final = 0.1}
    assert(math.abs(l(5) - 0.55) < 1e-12)
    assert.are.equal(1, optim.schedule.constant()(123))
    local r = optim.schedule.rsqrt{warmup = 100}
    assert(math.abs(r(400) - 0.5) < 1e-12)
    local pw = optim.schedule.piecewise{boundaries = {10, 20}, values = {1, 0.1, 0.01}}
    assert.are.same({1, 0.1, 0.1, 0.01}, {pw(9), pw(10), pw(19), pw(25)})
    assert.truthy(tostring(c):find("cosine"))
    assert.error_matches(function() optim.schedule.cosine{}(5) end, "steps is not set")
  end)
end)

describe("dlua.optim.clip_grad_norm", function()
  it("returns the pre-clip norm and scales to max_norm", function()
    local a, b = dl.zeros(2):requires_grad(true), dl.zeros(1):requires_grad(true)
    a.grad = dl.tensor({3, 0})
    b.grad = dl.tensor({4})
    assert.are.equal(5, optim.clip_grad_norm({a, b}, 1))
    assert(math.abs(a.grad:totable()[1] - 0.6) < 1e-6)
    assert(math.abs(b.grad:totable()[1] - 0.8) < 1e-6)
    assert(math.abs(optim.clip_grad_norm({a, b}, 10) - 1) < 1e-6)
  end)
end)
