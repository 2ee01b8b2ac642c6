-- The gradient search of dl.search's acquisition (issue 35 item 2): the GP's
-- posterior and log EI gradients in the input (engine/search/gp_acq.c) against
-- central finite differences and the plain EI, the projected ascent of
-- dlua.search.acqopt against known optima and a dense grid, mixed spaces kept
-- on their lattice, determinism and option errors.
local S = require("dlua").search
local gp = require "dlua.search.gp"
local acqopt = require "dlua.search.acqopt"
local batch = require "dlua.search.batch"

local function data(n, d, seed, f)
  local r = S.rng("acqopt-spec", seed)
  local X, y = {}, {}
  for i = 1, n do
    local x = {}
    for k = 1, d do x[k] = r:uniform() end
    X[i], y[i] = x, f(x)
  end
  return X, y
end

local function smooth(x) return math.sin(3 * x[1]) + (x[2] - 0.3) ^ 2 - 0.5 * x[3] end

local function shifted(x, k, h)
  local p = {table.unpack(x)}
  p[k] = p[k] + h
  return p
end

describe("the GP's gradients in the input (gp_acq.c)", function()
  local X, y = data(30, 3, 1, smooth)
  local m = gp.fit(X, y)
  local pts = {{0.3, 0.4, 0.5}, {0.9, 0.1, 0.2}, {0.05, 0.95, 0.6}}
  local h = 1e-6

  it("predict_grad's mean and variance are predict's, its gradients their finite differences", function()
    local mu, var, dm, dv = m.c:predict_grad(pts)
    local mu2, var2 = m:predict_many(pts)
    for s = 1, #pts do
      assert.near(mu2[s], mu[s], 1e-12 * (1 + math.abs(mu2[s])))
      assert.near(var2[s], var[s], 1e-9 * var2[s])
      for k = 1, 3 do
        local mp, vp = m:predict(shifted(pts[s], k, h))
        local mm, vm = m:predict(shifted(pts[s], k, -h))
        assert.near((mp - mm) / (2 * h), dm[s][k], 1e-5 * (1 + math.abs(dm[s][k])))
        assert.near((vp - vm) / (2 * h), dv[s][k], 1e-5 * (1e-3 + math.abs(dv[s][k])))
      end
    end
  end)

  it("log EI is the log of EI where EI is representable, and its gradient the finite differences", function()
    local mu, var = m:predict_many(pts)
    for s = 1, #pts do
      for _, z in ipairs({1.5, 0, -2, -6}) do
        local best = mu[s] + z * math.sqrt(var[s])
        local v, g = m.c:log_ei({pts[s]}, best, true)
        assert.near(math.log(m.c:ei({pts[s]}, best)[1]), v[1], 1e-6 * (1 + math.abs(v[1])))
        for k = 1, 3 do
          local fd = (m.c:log_ei({shifted(pts[s], k, h)}, best)[1] - m.c:log_ei({shifted(pts[s], k, -h)}, best)[1])
            / (2 * h)
          assert.near(fd, g[1][k], 1e-4 * (1 + math.abs(fd)))
        end
      end
    end
  end)

  it("log EI stays finite, continuous and differentiable in the far tail where EI underflows", function()
    local mu, var = m:predict_many({pts[1]})
    local sd = math.sqrt(var[1])
    assert.equal(0, m.c:ei({pts[1]}, mu[1] - 60 * sd)[1])
    local v, g = m.c:log_ei({pts[1]}, mu[1] - 60 * sd, true)
    -- log h(z) ~ -z^2 / 2 - log sqrt(2 pi) - 2 log |z| (the leading terms) at z = -60
    local lead = math.log(sd) - 1800 - 0.5 * math.log(2 * math.pi) - 2 * math.log(60)
    assert.near(lead, v[1], 1e-3 * math.abs(lead))
    local fd = (m.c:log_ei({shifted(pts[1], 2, h)}, mu[1] - 60 * sd)[1]
      - m.c:log_ei({shifted(pts[1], 2, -h)}, mu[1] - 60 * sd)[1]) / (2 * h)
    assert.near(fd, g[1][2], 1e-4 * math.abs(fd))
    -- the two branches meet at z = -12
    local a = m.c:log_ei({pts[1]}, mu[1] - (12 - 1e-9) * sd)[1]
    local b = m.c:log_ei({pts[1]}, mu[1] - (12 + 1e-9) * sd)[1]
    assert.near(a, b, 1e-6 * math.abs(a))
  end)

  it("cross_cov's covariances give the variance a noise-free belief leaves (var(a | b) = var a - cov^2 / var b)", function()
    local a, b = {0.3, 0.4, 0.5}, {0.35, 0.42, 0.5}
    local mu, var, cov = m.c:cross_cov({a, b}, {b})
    assert.near(var[2], cov[2][1], 1e-12)
    local mu2 = m:predict_many({a, b})
    assert.near(mu2[1], mu[1], 1e-12)
    local _, va = m:believe(b):predict(a)
    assert.near(var[1] - cov[1][1] ^ 2 / var[2], va, 1e-3 * var[1])
  end)

  it("rejects points of the wrong width and a missing best, naming them", function()
    assert.error_matches(function() m.c:log_ei({{0.1, 0.2}}, 0) end, "log_ei: Xs%[1%] has 2 features, expected 3")
    assert.error_matches(function() m.c:log_ei({{0.1, 0.2, 0.3}}) end, "number expected")
    assert.error_matches(function() m.c:predict_grad({{0.1, 0.2, 0.3}}, true) end, "argument")
    assert.error_matches(function() m.c:cross_cov({{0.1, 0.2, 0.3}}, {{0.1, 0.2}}) end,
      "cross_cov: Zs%[1%] has 2 features, expected 3")
    assert.error_matches(function() m.c:log_ei({{0.1, 0.2, 0.3}}, 0, "yes") end, "boolean expected")
  end)
end)

describe("the projected gradient ascent (acqopt.ascend)", function()
  local space = S.space{a = S.uniform(0, 1), b = S.uniform(-5, 5), c = S.log_uniform(1e-3, 1)}
  local free = acqopt.free_dims(space)
  local lo0, hi0 = {0, 0, 0}, {0.999, 0.999, 0.999}
  local function cube() return lo0, hi0 end

  it("reaches the maximum of a concave function from the corners, and its projection when outside the box", function()
    local c = {0.3, 0.7, 0.55}
    local function f(xs)
      local v, g = {}, {}
      for i, x in ipairs(xs) do
        v[i], g[i] = 0, {}
        for k = 1, 3 do
          v[i] = v[i] - (x[k] - c[k]) ^ 2 * k
          g[i][k] = -2 * (x[k] - c[k]) * k
        end
      end
      return v, g
    end
    local us = acqopt.ascend(space, {{0, 0, 0}, {0.99, 0.99, 0.99}, {0, 0.99, 0.5}}, f,
      {free = free, scale = {0.2, 0.2, 0.2}, bounds = cube})
    for _, u in ipairs(us) do
      for k = 1, 3 do assert.near(c[k], u[k], 1e-3) end
    end
    local boxed = acqopt.ascend(space, {{0.5, 0.5, 0.5}}, f,
      {free = free, scale = {0.2, 0.2, 0.2}, bounds = function() return {0.4, 0, 0}, {0.9, 0.6, 0.999} end})
    assert.near(0.4, boxed[1][1], 1e-9)
    assert.near(0.6, boxed[1][2], 1e-9)
    assert.near(0.55, boxed[1][3], 1e-3)
  end)

  it("finds the maximum of a GP's log EI that a dense grid finds, to within the grid's spacing", function()
    local X, y = data(12, 2, 3, function(x) return (x[1] - 0.62) ^ 2 + 2 * (x[2] - 0.27) ^ 2 end)
    local m = gp.fit(X, y)
    local best = math.huge
    for _, v in ipairs(m:observed_mean()) do best = math.min(best, v) end
    local sp2 = S.space{p = S.uniform(0, 1), q = S.uniform(0, 1)}
    local gbest, gu = -math.huge, nil
    for i = 0, 200 do
      local row = {}
      for j = 0, 200 do row[j + 1] = {i / 200 * 0.999, j / 200 * 0.999} end
      local v = m.c:log_ei(row, best)
      for j = 1, #row do if v[j] > gbest then gbest, gu = v[j], row[j] end end
    end
    local starts = {}
    local r = S.rng("acqopt-spec-starts", 1)
    for i = 1, 8 do starts[i] = {r:uniform(), r:uniform()} end
    local us, vals = acqopt.ascend(sp2, starts, function(xs) return m.c:log_ei(xs, best, true) end,
      {free = acqopt.free_dims(sp2), scale = {math.exp(m.theta[1]), math.exp(m.theta[2])},
       bounds = function() return {0, 0}, {0.999, 0.999} end})
    local top = 1
    for i = 2, #vals do if vals[i] > vals[top] then top = i end end
    assert.is_true(vals[top] >= gbest - 1e-9)
    assert.is_true(math.abs(us[top][1] - gu[1]) < 0.01 and math.abs(us[top][2] - gu[2]) < 0.01)
  end)

  it("moves only the unconditional continuous coordinates of a mixed space", function()
    local mixed = S.space{x = S.uniform(0, 1), n = S.int(1, 20), kind = S.choice{"a", "b", "c"},
                          lr = S.log_uniform(1e-5, 1e-1)}
    local fr = acqopt.free_dims(mixed)
    local moved = {}
    for _, d in ipairs(fr) do moved[mixed.dims[d.k].name] = true end
    assert.same({x = true, lr = true}, moved)
    local function f(xs)
      local v, g = {}, {}
      for i, x in ipairs(xs) do
        v[i], g[i] = 0, {}
        for k = 1, #x do v[i], g[i][k] = v[i] - (x[k] - 0.5) ^ 2, -2 * (x[k] - 0.5) end
      end
      return v, g
    end
    local u0 = {0.1, 0.1, 0.9, 0.9}
    local us = acqopt.ascend(mixed, {u0}, f, {free = fr, scale = {0.3, 0.3},
      bounds = function() return {0, 0, 0, 0}, {0.999, 0.999, 0.999, 0.999} end})
    for k, d in ipairs(mixed.dims) do
      if moved[d.name] then assert.near(0.5, us[1][k], 1e-3) else assert.equal(u0[k], us[1][k]) end
    end
  end)
end)

describe("bayes with the gradient search (acq_starts)", function()
  local P = dofile("tests/bench/search_problems.lua")
  local space = S.space{x1 = S.uniform(-10, 10), x2 = S.uniform(-10, 10), x3 = S.uniform(-10, 10),
                        x4 = S.uniform(-10, 10), x5 = S.uniform(-10, 10)}
  local function levy(hp) return P.levy({hp.x1, hp.x2, hp.x3, hp.x4, hp.x5}) end

  local function run(opts, n, q)
    local s = S.suggester(space, opts)
    local out = {}
    while #out < n do
      local batch = s:suggest(q)
      for _, sg in ipairs(batch) do out[#out + 1] = sg.u end
      for _, sg in ipairs(batch) do s:observe(sg, levy(sg.hp)) end
    end
    return out, s
  end

  it("gives the same suggestions for the same seed, batches of distinct points, no ascent in batches unless asked", function()
    local a = run({algorithm = "bayes", seed = 3, mode = "min", acq_starts = 8}, 24, 4)
    local b = run({algorithm = "bayes", seed = 3, mode = "min", acq_starts = 8}, 24, 4)
    assert.same(a, b)
    local c = run({algorithm = "bayes", seed = 3, mode = "min"}, 24, 4)
    assert.are_not.same(a, c)
    assert.same(c, run({algorithm = "bayes", seed = 3, mode = "min", acq_starts = 0}, 24, 4))
    for i = 13, 24, 4 do              -- each batch after the 12 initial points
      for j = i, i + 3 do
        for l = j + 1, i + 3 do
          local dist = 0
          for k = 1, 5 do dist = dist + (a[j][k] - a[l][k]) ^ 2 end
          assert.is_true(dist > 1e-8)
        end
      end
    end
  end)

  it("scores at least as high as the candidates alone", function()
    local hist = {}
    local r = S.rng("acqopt-spec-hist", 2)
    for i = 1, 15 do
      local u = {}
      for k = 1, 5 do u[k] = r:uniform() end
      hist[i] = {u = u, value = levy(space:point(u))}
    end
    local _, with = S.bayes_suggest(space, hist, {}, 1, {seed = 1, step = 16, mode = "min", init = 10})
    local _, without = S.bayes_suggest(space, hist, {}, 1, {seed = 1, step = 16, mode = "min", init = 10,
                                                            acq_starts = 0})
    assert.is_true(with.ei[1] >= without.ei[1])
  end)

  it("batch = \"qei\": distinct, deterministic batches; q-EI of a point with itself is its EI", function()
    local o = {algorithm = "bayes", seed = 5, mode = "min", batch = "qei"}
    local a = run(o, 20, 4)
    assert.same(a, (run(o, 20, 4)))
    assert.are_not.same(a, (run({algorithm = "bayes", seed = 5, mode = "min"}, 20, 4)))
    for i = 13, 20, 4 do
      for j = i, i + 3 do
        for l = j + 1, i + 3 do
          local dist = 0
          for k = 1, 5 do dist = dist + (a[j][k] - a[l][k]) ^ 2 end
          assert.is_true(dist > 1e-8)
        end
      end
    end
    -- a point already in the batch adds nothing: q-EI({x, x}) = EI(x), up to the Monte Carlo error
    local X, y = data(20, 3, 4, smooth)
    local m = gp.fit(X, y)
    local x = {0.5, 0.3, 0.9}
    local mx, vx = m:predict(x)
    local best = mx + 0.5 * math.sqrt(vx)                 -- z = 0.5: EI well above 0
    local ei = m:ei_many({x}, best)[1]
    local q = batch.qei(m, best, S.rng("acqopt-spec-qei", 1), 2)
    q.add(x)
    local v = q.raw({x}, {0})[1]
    assert.is_true(ei > 0)
    assert.near(ei, v, 0.25 * ei)
    -- and a far point adds its own improvement: more than either alone
    local far = q.raw({{0.05, 0.95, 0.1}}, {0})[1]
    assert.is_true(far >= v - 1e-15)
  end)

  it("rejects a bad acq_starts, batch and unknown refiner options by name", function()
    assert.error_matches(function() S.suggester(space, {algorithm = "bayes", batch = "liar"}) end,
      "option 'batch' must be \"qei\" or \"believer\", got \"liar\"")
    assert.error_matches(function() S.suggester(space, {algorithm = "bayes", acq_starts = -1}) end,
      "option 'acq_starts' must be a non%-negative integer, got %-1")
    assert.error_matches(function() S.suggester(space, {algorithm = "bayes", acq_starts = "8"}) end,
      "option 'acq_starts' must be a non%-negative integer, got string")
    assert.error_matches(function() acqopt.refiner(space, {bogus = 1}) end,
      "unknown option 'bogus' %(valid: acq, context, log_ei, points, region, region_starts, starts, theta%)")
  end)
end)
