-- Output warping (dlua.search.warp, issue 35 item 1): the log warp's exact values,
-- monotonicity, inverse and invariance to the objective's units; the "auto" rule
-- against the likelihoods computed here; the `warp` option of bayes (what the GP is
-- fitted to, the reported estimate in the objective's units, determinism, rejection).
local S = require("dlua").search
local warp = require "dlua.search.warp"

local function near(a, b, tol, what)
  assert(math.abs(a - b) <= tol * math.max(1, math.abs(b)),
    string.format("%s: %.17g against %.17g", what or "value", a, b))
end

describe("dlua.search.warp log", function()
  it("maps y to log(1 + (y - min) / (median - min)) exactly", function()
    assert.are.equal(1, warp.KAPPA)
    local y = {3, 1, 2, 11, 5}                     -- min 1, median 3: s = 2
    local w = warp.choose("log", y)
    assert.are.equal("log", w.kind)
    assert.are.equal(1, w.min)
    assert.are.equal(2, w.scale)
    local z = w:apply_all(y)
    local want = {math.log(2), 0, math.log(1.5), math.log(6), math.log(3)}
    for i = 1, #y do near(z[i], want[i], 1e-15, "z" .. i) end
    -- an even count: the median is the mean of the middle two; all at the minimum but one: the maximum
    assert.are.equal(2, warp.log({1, 2, 4, 10}).scale)
    assert.are.equal(4, warp.log({1, 1, 1, 5}).scale)
    assert.are.equal("none", warp.log({2, 2, 2}).kind)
  end)

  it("is strictly increasing and its inverse gives the values back", function()
    local w = warp.log({0.5, 7, 30, 1e4, 3e5})
    local prev = -math.huge
    for k = 0, 200 do
      local v = 0.5 + (10 ^ (k / 30) - 1)          -- 0.5 up to ~4.6e6, denser near the minimum
      local z = w:apply(v)
      assert(z > prev, "not increasing at " .. v)
      prev = z
      near(w:inverse(z), v, 1e-12, "inverse at " .. v)
    end
    assert.are.equal(0, w:apply(0.5))
    assert.is_true(w:covers(0.5))
    assert.is_false(w:covers(0.49))
  end)

  it("does not depend on the objective's units or offset: w(a y + b) = w(y)", function()
    local y = {4, 9, 1.5, 200, 37, 8}
    local z = warp.log(y):apply_all(y)
    local y2 = {}
    for i, v in ipairs(y) do y2[i] = 1e-3 * v - 17 end
    local z2 = warp.log(y2):apply_all(y2)
    for i = 1, #y do near(z2[i], z[i], 1e-9, "z" .. i) end
  end)

  it("the identity maps both ways unchanged", function()
    local w = warp.choose("none", {1, 50, 3})
    assert.are.equal("none", w.kind)
    assert.are.equal(-3.5, w:apply(-3.5))
    assert.are.equal(-3.5, w:inverse(-3.5))
  end)
end)

describe("dlua.search.warp auto", function()
  -- the profile log-likelihoods of an i.i.d. normal model, written out here
  local function loglik_none(y)
    local n, m, ss = #y, 0, 0
    for _, v in ipairs(y) do m = m + v end
    m = m / n
    for _, v in ipairs(y) do ss = ss + (v - m) ^ 2 end
    return -n / 2 * math.log(ss / n)
  end
  local function loglik_log(y, mn, s)
    local z, jac = {}, 0
    for i, v in ipairs(y) do
      z[i] = math.log(1 + (v - mn) / s)
      jac = jac - math.log(s + v - mn)
    end
    return loglik_none(z) + jac
  end

  it("computes the likelihoods of both candidates", function()
    local y = {3, 1, 2, 11, 5}
    near(warp.loglik(warp.none(), y), loglik_none(y), 1e-12, "identity")
    near(warp.loglik(warp.log(y), y), loglik_log(y, 1, 2), 1e-12, "log")
  end)

  it("chooses the log for skewed values and the identity for symmetric ones", function()
    local r = S.rng("warp-spec")
    local skewed, symmetric = {}, {}
    for i = 1, 40 do
      skewed[i] = math.exp(3 * r:normal())
      symmetric[i] = r:normal()
    end
    assert.is_true(loglik_log(skewed, warp.log(skewed).min, warp.log(skewed).scale) > loglik_none(skewed))
    assert.are.equal("log", warp.choose("auto", skewed).kind)
    assert.is_true(loglik_log(symmetric, warp.log(symmetric).min, warp.log(symmetric).scale) <
      loglik_none(symmetric))
    assert.are.equal("none", warp.choose("auto", symmetric).kind)
    assert.are.equal("auto", warp.DEFAULT)
    assert.are.equal("log", warp.choose(nil, skewed).kind)
    -- fewer than 3 values: nothing to choose from
    assert.are.equal("none", warp.choose("log", {1, 1e6}).kind)
  end)
end)

describe("dl.search bayes warp option", function()
  local space = S.space{x = S.uniform(-2, 2), y = S.uniform(-1, 3)}
  local function rosen(hp) return 100 + 100 * (hp.y - hp.x ^ 2) ^ 2 + (1 - hp.x) ^ 2 end

  local function run(opts, n, mode)
    local o = {algorithm = "bayes", seed = 4}
    for k, v in pairs(opts) do o[k] = v end
    o.mode = mode
    local s = S.suggester(space, o)
    local pts = {}
    for _ = 1, n do
      local sg = s:suggest(1)[1]
      pts[#pts + 1] = sg.u
      local v = rosen(sg.hp)
      s:observe(sg, mode == "max" and -v or v)
    end
    return s, pts
  end

  it("fits the GP to the warped values and says which warp served", function()
    local r = S.rng("warp-spec-history")
    local history = {}
    for i = 1, 12 do
      local u = {r:uniform(), r:uniform()}
      history[i] = {u = u, value = rosen(space:point(u))}
    end
    local signed = {}
    for i, h in ipairs(history) do signed[i] = -h.value end
    local _, info = S.bayes_suggest(space, history, {}, 1, {seed = 1, mode = "max", warp = "log"})
    assert.are.equal("log", info.warp)
    local z = warp.log(signed):apply_all(signed)
    assert.are.same(z, info.model.y)
    local _, plain = S.bayes_suggest(space, history, {}, 1, {seed = 1, mode = "max", warp = "none"})
    assert.are.equal("none", plain.warp)
    assert.are.same(signed, plain.model.y)
  end)

  it("reports the estimate in the objective's units, minimising or maximising", function()
    local s = run({warp = "log"}, 20, "min")
    local b = s:best()
    -- the warped scale puts the best near 0; the estimate is the value's, within 1% of it
    assert(math.abs(b.estimate - b.value) < 0.01 * b.value,
      string.format("estimate %.6g, value %.6g", b.estimate, b.value))
    local m = run({warp = "log"}, 20, "max")
    local bm = m:best()
    assert.are.same(b.u, bm.u)
    near(bm.estimate, -b.estimate, 1e-6, "max estimate")
  end)

  it("is deterministic and changes the choices", function()
    local _, a = run({warp = "log"}, 14, "min")
    local _, b = run({warp = "log"}, 14, "min")
    local _, c = run({warp = "none"}, 14, "min")
    assert.are.same(a, b)
    assert.are_not.same(a, c)
  end)

  it("rejects an unknown warp by message, from bayes_suggest and the suggester", function()
    assert.error_matches(function() S.bayes_suggest(space, {}, {}, 1, {warp = "rank"}) end,
      "dl.search.bayes_suggest: option 'warp' must be \"auto\", \"log\" or \"none\", got \"rank\"")
    assert.error_matches(function() S.suggester(space, {algorithm = "bayes", warp = "Log"}) end,
      "dl.search.suggester: option 'warp' must be \"auto\", \"log\" or \"none\", got \"Log\"")
    assert.error_matches(function() S.suggester(space, {algorithm = "bayes", warp = true}) end,
      "dl.search.suggester: option 'warp'")
  end)
end)

describe("dl.search bayes warp under noise", function()
  local space = S.space{x = S.uniform(0, 1), y = S.uniform(0, 1)}
  -- skewed values (exp(4 x) + y): "auto" warps them, unless the GP explains the raw values better
  -- (under material noise, which the log would stretch near the best value)
  local function history(sd)
    local r = S.rng("warp-spec-noise")
    local h = {}
    for i = 1, 30 do
      local u = {r:uniform(), r:uniform()}
      h[i] = {u = u, value = math.exp(4 * u[1]) + u[2] + sd * r:normal()}
    end
    return h
  end

  it("chooses between the log and the raw values by the GP's likelihood, the Jacobian included", function()
    local gp = require "dlua.search.gp"
    local bayes = require "dlua.search.bayes"
    local seen = {}
    for _, case in ipairs({{30, 0}, {30, 8}, {150, 0}, {150, 8}}) do
      local n, sd = case[1], case[2]
      local r = S.rng("warp-spec-likelihood", n, sd)
      local h = {}
      for i = 1, n do
        local u = {r:uniform(), r:uniform()}
        h[i] = {u = u, value = math.exp(4 * u[1]) + u[2] + sd * r:normal()}
      end
      local X, y = bayes._observations(space, h, 1)
      local w = warp.choose("auto", y)
      assert.are.equal("log", w.kind)                              -- the screen picks the log
      -- by hand: both fits on every n / 128-th observation (all of them up to 128)
      local Xs, ys = {}, {}
      local m = math.min(n, bayes._COMPARE_POINTS)
      for k = 1, m do
        local i = ((k - 1) * n) // m + 1
        Xs[k], ys[k] = X[i], y[i]
      end
      local mw, mr = gp.fit(Xs, w:apply_all(ys), {dim = 2}), gp.fit(Xs, ys, {dim = 2})
      local lw, lr = mw.lml - m * math.log(mw.sd), mr.lml - m * math.log(mr.sd)
      for i = 1, m do lw = lw - math.log(w.scale + ys[i] - w.min) end
      local want = lw > lr and "log" or "none"
      local fit = bayes._surrogate(X, y, {}, 2)
      assert.are.equal(want, fit.warp.kind, string.format("n %d sd %g: log %.3f, raw %.3f", n, sd, lw, lr))
      assert.are.equal(n, #fit.X)                                  -- the model holds every observation
      seen[want] = true
    end
    assert.is_true(seen.log and seen.none, "both choices occur")
  end)

  it("keeps the raw values under material noise by default, and warps when asked", function()
    local _, clean = S.bayes_suggest(space, history(0), {}, 1, {seed = 1})
    assert.are.equal("log", clean.warp)
    local signed = {}
    for i, h in ipairs(history(8)) do signed[i] = h.value end
    assert.are.equal("log", warp.choose("auto", signed).kind)        -- skewed: the values alone would warp
    local _, noisy = S.bayes_suggest(space, history(8), {}, 1, {seed = 1})
    assert.are.equal("none", noisy.warp)
    assert.is_true(math.exp(noisy.theta[4] - noisy.theta[3]) >= 1e-2)   -- the noise rule of dlua.search.nei
    local _, forced = S.bayes_suggest(space, history(8), {}, 1, {seed = 1, warp = "log"})
    assert.are.equal("log", forced.warp)
  end)
end)
