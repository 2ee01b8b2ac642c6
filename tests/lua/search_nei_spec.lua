-- Noisy expected improvement (dlua.search.nei over engine/search/gp_nei.c, issue 35
-- item 1): against an independent Monte-Carlo estimate of the joint posterior, against
-- analytic EI without noise, its base samples, the `acquisition` option of bayes and
-- the fit's noise level on synthetic data.
local S = require("dlua").search
local gp = require "dlua.search.gp"
local nei = require "dlua.search.nei"
local H = dofile("tests/lua/helpers.lua")

local function data(n, seed, noise)
  local r = S.rng("nei-spec", seed)
  local X, y = {}, {}
  for i = 1, n do
    X[i] = {r:uniform(), r:uniform()}
    y[i] = math.sin(5 * X[i][1]) + X[i][2] ^ 2 + noise * r:normal()
  end
  return X, y
end

-- lower Cholesky factor of a small symmetric positive-definite matrix (lists of rows)
local function cholesky(A)
  local n, L = #A, {}
  for i = 1, n do
    L[i] = {}
    for j = 1, n do L[i][j] = 0 end
  end
  for j = 1, n do
    local s = A[j][j]
    for k = 1, j - 1 do s = s - L[j][k] ^ 2 end
    L[j][j] = math.sqrt(s)
    for i = j + 1, n do
      local t = A[i][j]
      for k = 1, j - 1 do t = t - L[i][k] * L[j][k] end
      L[i][j] = t / L[j][j]
    end
  end
  return L
end

-- E[max(min_j f(B_j) - f(x), 0)] under the joint posterior of the GP with m's
-- hyperparameters conditioned on (X, y), by plain Monte Carlo over `draws` joint
-- samples of (f(B), f(x)) from an independent solve: the mean and its standard error
local function reference_nei(m, X, y, B, x, draws)
  local ls = {math.exp(m.theta[1]), math.exp(m.theta[2])}
  local sf2, sn2 = math.exp(m.theta[3]), math.exp(m.theta[4])
  local n = #X
  local K, ys = {}, {}
  for i = 1, n do
    K[i] = {}
    for j = 1, n do K[i][j] = H.matern52(X[i], X[j], ls, sf2) + (i == j and sn2 + 1e-9 or 0) end
    ys[i] = (y[i] - m.mean) / m.sd
  end
  local P = {table.unpack(B)}
  P[#P + 1] = x
  local alpha, kinv = H.solve(K, ys), {}
  local mu, cov = {}, {}
  for a = 1, #P do
    local ka = {}
    for i = 1, n do ka[i] = H.matern52(P[a], X[i], ls, sf2) end
    kinv[a] = H.solve(K, ka)
    mu[a] = 0
    for i = 1, n do mu[a] = mu[a] + ka[i] * alpha[i] end
  end
  for a = 1, #P do
    cov[a] = {}
    for b = 1, #P do
      local q = 0
      for i = 1, n do q = q + H.matern52(P[b], X[i], ls, sf2) * kinv[a][i] end
      cov[a][b] = H.matern52(P[a], P[b], ls, sf2) - q + (a == b and 1e-10 or 0)
    end
  end
  local L = cholesky(cov)
  local r = S.rng("nei-spec-reference")
  local sum, sum2 = 0, 0
  for _ = 1, draws do
    local z, f = {}, {}
    for a = 1, #P do z[a] = r:normal() end
    for a = 1, #P do
      f[a] = mu[a]
      for k = 1, a do f[a] = f[a] + L[a][k] * z[k] end
    end
    local best = math.huge
    for a = 1, #B do best = math.min(best, f[a]) end
    local imp = m.sd * math.max(best - f[#P], 0)
    sum, sum2 = sum + imp, sum2 + imp * imp
  end
  local mean = sum / draws
  return mean, math.sqrt((sum2 / draws - mean * mean) / draws)
end

describe("dlua.search.nei", function()
  it("equals a Monte-Carlo estimate of the joint posterior's expected improvement (noisy GP)", function()
    local X, y = data(30, 1, 0.3)
    local m = gp.fit(X, y)
    assert(m.noise > 0.01, "the fit sees noise: " .. m.noise)
    local B = {X[1], X[2], X[3], X[4], X[5]}
    local e = m:nei(B, nei.base_samples(#B, 2048))
    local xs = {{0.5, 0.5}, {0.9, 0.1}, X[6], {0.2, 0.8}}
    local v = e:eval(xs)
    for i, x in ipairs(xs) do
      local ref, se = reference_nei(m, X, y, B, x, 40000)
      -- the quasi-random estimate's own error is far below the reference's
      assert(math.abs(v[i] - ref) < 4 * se + 1e-4, string.format("point %d: nei %.5f, reference %.5f +- %.5f",
        i, v[i], ref, se))
    end
  end)

  it("is analytic EI below the lowest posterior mean when there is no noise (within Monte-Carlo error)", function()
    local X, y = data(15, 2, 0)
    local m = gp.fit(X, y)
    local best = math.huge
    for _, v in ipairs(m:observed_mean()) do best = math.min(best, v) end
    local e = m:nei(X, nei.base_samples(#X))
    local xs = {{0.5, 0.5}, {0.9, 0.1}, {0.3, 0.3}, {0.05, 0.95}, {0.6, 0.1}}
    local a, b = e:eval(xs), m:ei_many(xs, best)
    for i = 1, #xs do
      assert(math.abs(a[i] - b[i]) <= 0.02 * b[i] + 1e-6 * m.sd, string.format("point %d: nei %.6g, ei %.6g",
        i, a[i], b[i]))
    end
  end)

  it("gives the same bits for the same base samples, and quasi-random normal base samples", function()
    local X, y = data(10, 3, 0.2)
    local m = gp.fit(X, y)
    local xs = {{0.25, 0.75}, {0.7, 0.3}}
    assert.are.same(m:nei(X, nei.base_samples(#X)):eval(xs), gp.fit(X, y):nei(X, nei.base_samples(#X)):eval(xs))
    local z = nei.base_samples(4, 512)
    assert.are.equal(z, nei.base_samples(4, 512))  -- cached: one table per size
    for j = 1, 4 do
      local s, s2 = 0, 0
      for i = 1, 512 do s, s2 = s + z[i][j], s2 + z[i][j] ^ 2 end
      assert(math.abs(s / 512) < 0.02 and math.abs(s2 / 512 - 1) < 0.05, string.format("column %d: mean %.4f, " ..
        "second moment %.4f", j, s / 512, s2 / 512))
    end
    assert(math.abs(gp.normal_quantile(0.975) - 1.959963985) < 1e-8)
    assert(math.abs(gp.normal_quantile(1e-6) + 4.753424309) < 1e-7)
  end)

  it("refuses a bad baseline or base samples, naming the argument", function()
    local X, y = data(6, 4, 0.1)
    local m = gp.fit(X, y)
    assert.error_matches(function() m:nei({}, {{0}}) end, "the baseline Xb needs at least 1 point")
    assert.error_matches(function() m:nei({{0.5}}, {{0}}) end, "Xb%[1%] has 1 features, expected 2")
    assert.error_matches(function() m:nei({{0.5, 0.5}}, {{0, 1}}) end,
      "each base sample needs 1 values %(one per baseline point%), got 2")
    assert.error_matches(function() m:nei({{0.5, 0.5}}, {{0 / 0}}) end, "base sample value 1 is not finite")
  end)
end)

describe("dl.search bayes acquisition option", function()
  local space = S.space{x1 = S.uniform(0, 1), x2 = S.uniform(0, 1)}
  local function history(noise)
    local r, h = S.rng("nei-spec-history"), {}
    for i = 1, 20 do
      local u = S.halton(i, 2, {seed = 5})
      h[i] = {u = u, value = (u[1] - 0.3) ^ 2 + (u[2] - 0.6) ^ 2 + noise * r:normal()}
    end
    return h
  end

  it("uses NEI under noise and EI without it by default, and either when asked", function()
    local _, noisy = S.bayes_suggest(space, history(0.1), {}, 1, {seed = 1})
    local _, clean = S.bayes_suggest(space, history(0), {}, 1, {seed = 1})
    assert.are.equal("nei", noisy.acquisition)
    assert.are.equal("ei", clean.acquisition)
    assert.are.equal("ei", select(2, S.bayes_suggest(space, history(0.1), {}, 1, {seed = 1, acquisition = "ei"}))
      .acquisition)
    assert.are.equal("nei", select(2, S.bayes_suggest(space, history(0), {}, 1, {seed = 1, acquisition = "nei"}))
      .acquisition)
  end)

  it("is deterministic: the same history and seed give the same points, batches included", function()
    local a = S.bayes_suggest(space, history(0.1), {{u = {0.5, 0.5}}}, 3, {seed = 2})
    local b = S.bayes_suggest(space, history(0.1), {{u = {0.5, 0.5}}}, 3, {seed = 2})
    assert.are.same(a, b)
    assert.are.equal(3, #a)
  end)

  it("rejects an unknown acquisition by message, from bayes_suggest and the suggester", function()
    assert.error_matches(function() S.bayes_suggest(space, history(0), {}, 1, {acquisition = "qei"}) end,
      "dl.search.bayes_suggest: option 'acquisition' must be \"auto\", \"ei\" or \"nei\", got \"qei\"")
    assert.error_matches(function() S.suggester(space, {algorithm = "bayes", acquisition = "pi"}) end,
      "dl.search.suggester: option 'acquisition' must be \"auto\", \"ei\" or \"nei\", got \"pi\"")
    assert.error_matches(function() S.suggester(space, {algorithm = "bayes", acquisition = 1}) end,
      "dl.search.suggester: option 'acquisition'")
  end)
end)

describe("dlua.search.gp noise level", function()
  it("recovers a known noise variance on synthetic data (sd 0.1 and 0.3, 80 points)", function()
    for _, sd in ipairs({0.1, 0.3}) do
      local X, y = data(80, 7, sd)
      local m = gp.fit(X, y)
      assert(m.noise > sd ^ 2 / 2 and m.noise < sd ^ 2 * 2,
        string.format("noise sd %.2f: fitted variance %.5f, true %.5f", sd, m.noise, sd ^ 2))
    end
  end)
end)

describe("dl.search.suggester racing", function()
  local space = S.space{x = S.uniform(0, 1)}

  it("evaluates the incumbent again every racing-th adaptive suggestion, at most 4 times", function()
    local s = S.suggester(space, {algorithm = "bayes", seed = 1, init = 4, racing = 3})
    local r = S.rng("nei-spec-racing")
    local raced, counts = 0, {}
    for n = 1, 30 do
      local sg = s:suggest(1)[1]
      if sg.race then
        raced = raced + 1
        assert.are.equal(0, (sg.index - 4) % 3)   -- the 3rd, 6th, ... suggestion after init
        assert.are.same(s:best().u, sg.u)         -- the incumbent by posterior mean
      end
      counts[sg.u[1]] = (counts[sg.u[1]] or 0) + 1
      s:observe(sg, (sg.hp.x - 0.7) ^ 2 + 0.05 * r:normal())
    end
    assert.is_true(raced >= 5, "raced " .. raced)
    for u, c in pairs(counts) do assert(c <= 4, string.format("u = %g evaluated %d times", u, c)) end
    -- without racing no suggestion repeats an observed point
    local q = S.suggester(space, {algorithm = "bayes", seed = 1, init = 4})
    local seen = {}
    for _ = 1, 20 do
      local sg = q:suggest(1)[1]
      assert.is_nil(sg.race)
      assert.is_nil(seen[sg.u[1]])
      seen[sg.u[1]] = true
      q:observe(sg, (sg.hp.x - 0.7) ^ 2 + 0.05 * r:normal())
    end
  end)

  it("rejects racing below 2 and with several objectives", function()
    assert.error_matches(function() S.suggester(space, {algorithm = "bayes", racing = 1}) end,
      "dl.search.suggester: option 'racing' must be an integer >= 2, got 1")
    assert.error_matches(function() S.suggester(space, {algorithm = "bayes", racing = 3, mode = {"min", "max"}}) end,
      "dl.search.suggester: option 'racing' serves one objective, and mode lists 2")
    assert.error_matches(function() S.suggester(space, {algorithm = "bayes", racing = 2.5}) end,
      "dl.search.suggester: option 'racing'")
  end)
end)
