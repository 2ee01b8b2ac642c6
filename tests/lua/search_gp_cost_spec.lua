-- The cost paths of dl.search's GP (issue 35 item 5): the incremental path
-- (rank-one extensions of the factor at fixed hyperparameters) against an
-- independent solve of the same GP, the coarse-start fit against the exact
-- multi-start fit, the suggester's use of the incremental path and its
-- determinism.
local S = require("dlua").search
local gp = require "dlua.search.gp"
local bayes = require "dlua.search.bayes"
local H = dofile("tests/lua/helpers.lua")

local function data(n, seed, noise)
  local r = S.rng("gp-cost-spec", seed)
  local X, y = {}, {}
  for i = 1, n do
    X[i] = {r:uniform(), r:uniform()}
    y[i] = math.sin(5 * X[i][1]) + X[i][2] ^ 2 + noise * r:normal()
  end
  return X, y
end

-- the posterior mean and variance at x of the GP with m's hyperparameters and
-- standardisation conditioned on all of (X, y), by an independent solve
local function reference(m, X, y, x)
  local ls = {math.exp(m.theta[1]), math.exp(m.theta[2])}
  local sf2, sn2 = math.exp(m.theta[3]), math.exp(m.theta[4])
  local K, ys, k = {}, {}, {}
  for i = 1, #X do
    K[i] = {}
    for j = 1, #X do K[i][j] = H.matern52(X[i], X[j], ls, sf2) + (i == j and sn2 + 1e-9 or 0) end
    ys[i] = (y[i] - m.mean) / m.sd
    k[i] = H.matern52(x, X[i], ls, sf2)
  end
  local a, b = H.solve(K, ys), H.solve(K, k)
  local mu, q = 0, 0
  for i = 1, #X do mu, q = mu + k[i] * a[i], q + k[i] * b[i] end
  return m.mean + m.sd * mu, m.sd ^ 2 * (sf2 - q)
end

describe("dl.search GP cost paths", function()
  it("extends a model by the exact posterior of all its points at the same hyperparameters", function()
    local X, y = data(24, 1, 0.1)
    local X0, y0 = {table.unpack(X, 1, 16)}, {table.unpack(y, 1, 16)}
    local m0 = gp.fit(X0, y0)
    assert.is_true(m0:extends(X, y))
    local m = m0:extend(X, y)
    assert.are.equal(24, m.c:points())
    assert.are.same(m0.theta, m.theta)
    for _, x in ipairs({{0.1, 0.2}, {0.5, 0.5}, {0.9, 0.7}, X[20]}) do
      local mu, var = m:predict(x)
      local rmu, rvar = reference(m, X, y, x)
      assert(math.abs(mu - rmu) < 1e-9 * (1 + math.abs(rmu)), string.format("mean %.17g vs %.17g", mu, rmu))
      assert(math.abs(var - rvar) < 1e-9 * (1 + rvar), string.format("var %.17g vs %.17g", var, rvar))
    end
    -- observed means in the order of X, the new points included
    local om = m:observed_mean()
    assert.are.equal(24, #om)
    assert(math.abs(om[20] - (m:predict(X[20]))) < 1e-9)
    -- not a prefix: another value, or fewer points
    local y2 = {table.unpack(y)}
    y2[3] = y2[3] + 1
    assert.is_false(m0:extends(X, y2))
    assert.is_false(m:extends(X0, y0))
    assert.is_false(m0:believe({0.5, 0.5}):extends(X, y))   -- a belief is no observation
    assert.has_error(function() m0:extend(X, y2) end,
      "dlua.gp: extend: the model's observations are not the first ones of (X, y)")
  end)

  it("gives the exact fit's posterior from a coarse start (to 1e-3 of y's spread)", function()
    local X, y = data(90, 2, 0.05)
    local exact = gp.fit(X, y, {coarse_points = 0})
    local coarse = gp.fit(X, y, {coarse_points = 30})
    assert(coarse.lml >= exact.lml - 1e-3, string.format("lml %.6f vs exact %.6f", coarse.lml, exact.lml))
    for _, x in ipairs({{0.1, 0.2}, {0.5, 0.5}, {0.9, 0.7}, {0.3, 0.95}}) do
      local a, va = exact:predict(x)
      local b, vb = coarse:predict(x)
      assert(math.abs(a - b) < 1e-3 * exact.sd, string.format("mean %g vs %g", a, b))
      assert(math.abs(va - vb) < 1e-3 * exact.sd ^ 2, string.format("var %g vs %g", va, vb))
    end
  end)

  it("takes new observations incrementally in the suggester, deterministically", function()
    local space = S.space{a = S.uniform(0, 1), b = S.uniform(0, 1)}
    local function run()
      local s = S.suggester(space, {algorithm = "bayes", seed = 5})
      for i = 1, bayes._INCREMENTAL_FROM do
        local u = S.halton(i, 2, {seed = 3})
        s:observe({u = u}, math.sin(5 * u[1]) + u[2] ^ 2)
      end
      local got, fitted = {}, {}
      for k = 1, 3 do
        local sg = s:suggest(1)[1]
        got[k] = sg.u
        fitted[k] = s.fit.model.fitted
        s:observe(sg, math.sin(5 * sg.u[1]) + sg.u[2] ^ 2)
      end
      return got, fitted, s
    end
    local a, fa, s = run()
    local b = run()
    assert.are.same(a, b)                           -- same seed, same bits
    local n = bayes._INCREMENTAL_FROM
    assert.are.same({n, n, n}, fa)                  -- one fit, then two extensions
    assert.are.equal(n + 2, #s.fit.model.X)
    -- the extended model is the one a direct call gets from the model option
    assert.has_error(function() S.bayes_suggest(space, s.history, {}, 1, {model = {}}) end,
      "dl.search.bayes_suggest: option 'model' must be info.model of an earlier call")
  end)
end)
