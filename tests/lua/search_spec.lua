-- dl.search: Halton points against an independent computation, seeds and
-- prefixes, uniformity (discrepancy vs pseudo-random), the unit-cube mapping of
-- every parameter type, conditional parameters, validation messages, grid, and
-- the GP / expected-improvement search against random search.
local dl = require "dlua"
local S = dl.search
local gp = require "dlua.search.gp"
local H = dofile("tests/lua/helpers.lua")

-- the radical inverse by exact integer arithmetic: digits of i in base b, each
-- through its permutation, as the numerator over b^m (one rounding at the end)
local function reference_radical_inverse(i, b, perms)
  local m = #perms
  local num, k = 0, i
  for j = 1, m do
    num = num * b + perms[j][k % b + 1]
    k = k // b
  end
  return num / (b ^ m)
end

local function random_perms(b, m, seed)
  math.randomseed(seed)
  local perms = {}
  for j = 1, m do
    local p = {}
    for d = 0, b - 1 do p[d + 1] = d end
    for i = b, 2, -1 do local k = math.random(i); p[i], p[k] = p[k], p[i] end
    perms[j] = p
  end
  return perms
end

describe("dl.search Halton sequence", function()
  it("gives the textbook unscrambled points in bases 2 and 3", function()
    local seq = S.halton_sequence(2, false)
    local want = {{0, 0}, {1 / 2, 1 / 3}, {1 / 4, 2 / 3}, {3 / 4, 1 / 9}, {1 / 8, 4 / 9}, {5 / 8, 7 / 9},
                  {3 / 8, 2 / 9}, {7 / 8, 5 / 9}}
    for i, w in ipairs(want) do
      local p = seq:point(i)
      assert(math.abs(p[1] - w[1]) < 1e-15 and math.abs(p[2] - w[2]) < 1e-15,
        string.format("point %d: (%g, %g) vs (%g, %g)", i, p[1], p[2], w[1], w[2]))
    end
    assert.are.same({2, 3, 5, 7, 11, 13, 17, 19, 23, 29}, S.primes(10))
  end)

  it("applies one permutation per digit position (a hand-computed point)", function()
    -- base 3, index 5 = "12" in base 3: last digit 2, then 1. Digit 1 permuted by
    -- {0->2, 1->0, 2->1}, digit 2 by {0->1, 1->2, 2->0}, every other digit by the identity.
    local perms = S.halton_permutations(3, false, 1)
    perms[1] = {2, 0, 1}
    perms[2] = {1, 2, 0}
    -- digit 1: 2 -> 1 (1/3); digit 2: 1 -> 2 (2/9); higher digits 0 -> 0
    assert(math.abs(S.radical_inverse(5, 3, perms) - (1 / 3 + 2 / 9)) < 1e-15)
    -- index 0: every digit is 0; digit 1 maps it to 2 (2/3), digit 2 to 1 (1/9)
    assert(math.abs(S.radical_inverse(0, 3, perms) - (2 / 3 + 1 / 9)) < 1e-15)
  end)

  it("matches an exact integer computation for random permutations in bases 2, 3, 5, 7", function()
    for _, b in ipairs({2, 3, 5, 7}) do
      local perms = random_perms(b, S.digits(b), b * 17)
      for i = 0, 300 do
        local got, want = S.radical_inverse(i, b, perms), reference_radical_inverse(i, b, perms)
        assert(math.abs(got - want) < 4e-16, string.format("base %d index %d: %.17g vs %.17g", b, i, got, want))
      end
    end
  end)

  it("draws each digit's permutation independently and as a true permutation", function()
    local perms = S.halton_permutations(5, 3, 2)
    assert.are.equal(S.digits(5), #perms)
    local distinct = {}
    for _, p in ipairs(perms) do
      local seen = {}
      for _, d in ipairs(p) do assert(d >= 0 and d < 5 and not seen[d]); seen[d] = true end
      distinct[table.concat(p, ",")] = true
    end
    local n = 0
    for _ in pairs(distinct) do n = n + 1 end
    assert(n > 5, "digit permutations are not independent (" .. n .. " distinct of " .. #perms .. ")")
    -- our generator's points equal the exact computation with its own permutations
    local seq = S.halton_sequence(3, 11)
    for i = 1, 50 do
      local p = seq:point(i)
      for k = 1, 3 do
        local w = reference_radical_inverse(i - 1, seq.bases[k], seq.perms[k])
        assert(math.abs(p[k] - w) < 4e-16)
      end
    end
  end)

  it("is a pure function of (seed, i): same seed same points, other seeds other point sets", function()
    local a, b, c = S.halton_sequence(3, 1), S.halton_sequence(3, 1), S.halton_sequence(3, 2)
    local set_a, set_c = {}, {}
    for i = 1, 16 do
      assert.are.same(a:point(i), b:point(i))
      assert.are.same(a:point(i), S.halton(i, 3, {seed = 1}))
      set_a[#set_a + 1] = a:point(i)[1]
      set_c[#set_c + 1] = c:point(i)[1]
    end
    table.sort(set_a); table.sort(set_c)
    local differ = 0
    for i = 1, 16 do if math.abs(set_a[i] - set_c[i]) > 1e-12 then differ = differ + 1 end end
    assert(differ > 8, "seeds 1 and 2 give the same point set in another order")
    -- trial i's point does not depend on how many are drawn
    local space = S.space{lr = S.log_uniform(1e-4, 1), m = S.uniform(0, 1), opt = S.choice{"a", "b", "c"}}
    local four = S.sample(space, 4, {seed = 9})
    local forty = S.sample(space, 40, {seed = 9})
    for i = 1, 4 do assert.are.same(four[i], forty[i]) end
  end)

  it("passes the Vizier-style uniformity checks", function()
    -- 1-D Kolmogorov-Smirnov distance of 2000 points to U(0, 1)
    local seq = S.halton_sequence(1, 5)
    local xs = {}
    for i = 1, 2000 do xs[i] = seq:point(i)[1] end
    table.sort(xs)
    local ks = 0
    for i, x in ipairs(xs) do ks = math.max(ks, math.abs(i / 2000 - x), math.abs((i - 1) / 2000 - x)) end
    assert(ks < 0.005, "KS distance " .. ks)                -- random points: about 0.02
    -- 4-D: every coordinate reaches both ends; 1000 sequential points all distinct
    local s4 = S.halton_sequence(4, 7)
    local lo, hi, seen = {1, 1, 1, 1}, {0, 0, 0, 0}, {}
    for i = 1, 2000 do
      local p = s4:point(i)
      for k = 1, 4 do lo[k] = math.min(lo[k], p[k]); hi[k] = math.max(hi[k], p[k]) end
      if i <= 1000 then
        local key = table.concat(p, ",")
        assert(not seen[key], "point " .. i .. " repeats")
        seen[key] = true
      end
    end
    for k = 1, 4 do assert(lo[k] < 0.002 and hi[k] > 0.998, string.format("dim %d: [%g, %g]", k, lo[k], hi[k])) end
  end)

  it("puts at least 4 of 25 log-uniform points in each decade of [1e-4, 1e-1] (vizier#541)", function()
    local space = S.space{lr = S.log_uniform(1e-4, 1e-1)}
    for seed = 0, 9 do
      local counts = {0, 0, 0}
      for _, hp in ipairs(S.sample(space, 25, {seed = seed})) do
        local k = math.floor(math.log(hp.lr, 10) + 4) + 1
        counts[k] = counts[k] + 1
      end
      for k = 1, 3 do assert(counts[k] >= 4, string.format("seed %d: decade %d has %d points", seed, k, counts[k])) end
    end
  end)

  it("computes the centered L2 discrepancy of known point sets", function()
    -- one point at the centre in 1-D: CD^2 = 13/12 - 2 (1) + 1 = 1/12
    assert(math.abs(S.centered_l2_discrepancy({{0.5}}) - math.sqrt(1 / 12)) < 1e-12)
    -- {0.25, 0.75}: by hand, CD^2 = 13/12 - (2/2) 2 (1 + 1/8 - 1/32) + (1/4)(2 (1 + 1/4) + 2 (1 + 1/4 - 1/4))
    local want = 13 / 12 - 2 * (1 + 1 / 8 - 1 / 32) + (2 * 1.25 + 2 * 1.0) / 4
    assert(math.abs(S.centered_l2_discrepancy({{0.25}, {0.75}}) - math.sqrt(want)) < 1e-12)
  end)

  it("spreads points better than pseudo-random search (centered L2 discrepancy, N = 50, d = 4)", function()
    local reps, qr, rnd = 10, 0, 0
    for r = 1, reps do
      local seq = S.halton_sequence(4, r)
      local a, b = {}, {}
      for i = 1, 50 do a[i] = seq:point(i); b[i] = S.random_point(i, 4, 100 + r) end
      qr = qr + S.centered_l2_discrepancy(a) / reps
      rnd = rnd + S.centered_l2_discrepancy(b) / reps
    end
    assert(qr <= 0.8 * rnd, string.format("quasirandom %.4f vs random %.4f", qr, rnd))
    assert(qr < 0.07 and rnd > 0.1, string.format("quasirandom %.4f vs random %.4f", qr, rnd))
  end)

  it("balances a categorical hyperparameter across N trials (playbook item 34)", function()
    local space = S.space{opt = S.choice{"a", "b", "c"}, lr = S.log_uniform(1e-3, 1), m = S.uniform(0, 1)}
    local rnd_violations = 0
    for _, n in ipairs({12, 30, 60, 99}) do
      local tol = math.max(1, 0.1 * n / 3)
      for seed = 1, 10 do
        local counts = {a = 0, b = 0, c = 0}
        for _, hp in ipairs(S.sample(space, n, {seed = seed})) do counts[hp.opt] = counts[hp.opt] + 1 end
        for v, c in pairs(counts) do
          assert(math.abs(c - n / 3) <= tol, string.format("N %d seed %d: %s %d times", n, seed, v, c))
        end
        local rc = {a = 0, b = 0, c = 0}
        for _, hp in ipairs(S.sample(space, n, {seed = seed, algorithm = "random"})) do rc[hp.opt] = rc[hp.opt] + 1 end
        for _, c in pairs(rc) do if math.abs(c - n / 3) > tol then rnd_violations = rnd_violations + 1; break end end
      end
    end
    assert(rnd_violations > 5, "the tolerance is too loose to tell quasirandom from random")
  end)
end)

describe("dl.search parameters", function()
  it("maps the unit interval as documented for each type", function()
    local u = S.uniform(2, 6)
    assert.are.equal(2, u:map(0)); assert.are.equal(4, u:map(0.5))
    local l = S.log_uniform(1e-4, 1)
    assert(math.abs(l:map(0.5) - 1e-2) < 1e-15); assert.are.equal(1e-4, l:map(0)); assert(l:map(1 - 1e-16) <= 1)
    local i = S.int(3, 5)
    assert.are.same({3, 3, 4, 5, 5}, {i:map(0), i:map(0.33), i:map(0.34), i:map(0.67), i:map(0.999999)})
    assert.are.equal("integer", math.type(i:map(0.5)))
    local d = S.discrete{16, 64, 256}
    assert.are.same({16, 64, 256}, {d:map(0.1), d:map(0.5), d:map(0.99)})
    local c = S.choice{"sgd", "adam"}
    assert.are.same({"sgd", "adam"}, {c:map(0.49), c:map(0.5)})
    -- log int: k is drawn with probability ln((k + 1) / k) / ln((b + 1) / a)
    local li = S.int(1, 7, {log = true})
    local counts, n = {}, 8000
    for k = 1, n do local v = li:map((k - 0.5) / n); counts[v] = (counts[v] or 0) + 1 end
    for v = 1, 7 do
      local p = math.log((v + 1) / v) / math.log(8)
      assert(math.abs(counts[v] / n - p) < 0.002, string.format("P(%d) = %g, want %g", v, counts[v] / n, p))
    end
    -- unmap inverts map (at cell centres for discrete types)
    assert(math.abs(l:unmap(l:map(0.3)) - 0.3) < 1e-12)
    assert(math.abs(u:unmap(u:map(0.7)) - 0.7) < 1e-12)
    assert.are.equal(i:map(i:unmap(4)), 4)
    assert.are.equal((2 - 0.5) / 3, d:unmap(64))
  end)

  it("rejects bad bounds and lists with messages naming the problem", function()
    assert.error_matches(function() S.uniform(1, 0) end, "dl.search.uniform: a %(1%) must be less than b %(0%)")
    assert.error_matches(function() S.log_uniform(0, 1) end, "bounds must be positive, got a = 0")
    assert.error_matches(function() S.log_uniform(-1, 1) end, "bounds must be positive")
    assert.error_matches(function() S.int(1.5, 3) end, "dl.search.int: bounds must be integers")
    assert.error_matches(function() S.int(5, 3) end, "a %(5%) must be <= b %(3%)")
    assert.error_matches(function() S.int(0, 3, {log = true}) end, "log scale needs a >= 1")
    assert.error_matches(function() S.discrete{} end, "dl.search.discrete: expected a non%-empty list")
    assert.error_matches(function() S.choice{"a", "a"} end, "value \"a\" is listed twice")
    assert.error_matches(function() S.uniform(0, 0 / 0) end, "bounds must be finite")
    assert.error_matches(function() S.space{lr = {1, 2}} end, "lr must be a dl.search parameter or a plain")
    assert.error_matches(function() S.sample(S.space{x = S.uniform(0, 1)}, 2, {algorithm = "anneal"}) end,
      "unknown algorithm 'anneal' %(valid: bayes, grid, quasirandom, random%)")
  end)
end)

describe("dl.search conditional parameters", function()
  it("includes a parameter exactly where its condition holds", function()
    local space = S.space{
      optimizer = S.choice{"sgd", "adam", "nesterov"},
      momentum = S.uniform(0.8, 0.99):when{optimizer = {"sgd", "nesterov"}},
      beta1 = S.uniform(0.8, 0.95):when{optimizer = "adam"},
      lr = S.log_uniform(1e-4, 1), steps = 100,
    }
    local seen = {}
    for _, hp in ipairs(S.sample(space, 60, {seed = 4})) do
      seen[hp.optimizer] = true
      assert.are.equal(hp.optimizer ~= "adam", hp.momentum ~= nil)
      assert.are.equal(hp.optimizer == "adam", hp.beta1 ~= nil)
      assert.truthy(hp.lr)
      assert.are.equal(100, hp.steps)
    end
    assert.truthy(seen.sgd and seen.adam and seen.nesterov)
    assert.are.equal(4, space.d)                         -- every branch owns its coordinate
  end)

  it("gives each branch of a switch its own dimension and range (item 31)", function()
    local space = S.space{
      optimizer = S.choice{"sgd", "adam"},
      lr = S.switch("optimizer", {sgd = S.log_uniform(1e-2, 1), adam = S.log_uniform(1e-5, 1e-3)}),
      eps = S.switch("optimizer", {adam = 1e-8}),
    }
    assert.are.equal(3, space.d)
    local paths = {}
    for _, d in ipairs(space.dims) do paths[#paths + 1] = d.path end
    table.sort(paths)
    assert.are.same({"lr[optimizer=adam]", "lr[optimizer=sgd]", "optimizer"}, paths)
    for _, hp in ipairs(S.sample(space, 40, {seed = 1})) do
      if hp.optimizer == "sgd" then
        assert(hp.lr >= 1e-2 and hp.lr <= 1 and hp.eps == nil)
      else
        assert(hp.lr >= 1e-5 and hp.lr <= 1e-3 and hp.eps == 1e-8)
      end
    end
    -- conditions may refer to names outside the space (a study's scientific values)
    local nested = S.space({momentum = S.uniform(0.5, 0.9):when{optimizer = "sgd"}},
      {context = {optimizer = {"sgd", "adam"}}})
    assert.truthy(nested:point({0.5}, {optimizer = "sgd"}).momentum)
    assert.is_nil(nested:point({0.5}, {optimizer = "adam"}).momentum)
  end)

  it("rejects conditions on unknown, continuous or impossible parents and cycles", function()
    assert.error_matches(function() S.space{m = S.uniform(0, 1):when{opt = "sgd"}} end,
      "m depends on opt, which is not a parameter")
    assert.error_matches(function() S.space{lr = S.uniform(0, 1), m = S.uniform(0, 1):when{lr = 0.5}} end,
      "m depends on lr, which is continuous")
    assert.error_matches(function()
      S.space{opt = S.choice{"sgd", "adam"}, m = S.uniform(0, 1):when{opt = "sdg"}}
    end, "m depends on opt = \"sdg\", which is not a value of opt %(values: \"sgd\", \"adam\"%)")
    assert.error_matches(function()
      S.space{a = S.choice{1, 2}:when{b = 1}, b = S.choice{1, 2}:when{a = 1}}
    end, "conditions form a cycle")
  end)

  it("round-trips a space through plain data with identical points", function()
    local space = S.space{
      optimizer = S.choice{"sgd", "adam"}, width = S.int(8, 512, {log = true}),
      lr = S.switch("optimizer", {sgd = S.log_uniform(1e-2, 1), adam = S.log_uniform(1e-5, 1e-3)}),
      momentum = S.uniform(0.8, 0.99):when{optimizer = "sgd"}, label_smoothing = S.discrete{0, 0.1, 0.2},
    }
    local json = dl.json
    local copy = S.space_from_table(json.decode(json.encode(space:to_table())))
    assert.are.same(space:describe(), copy:describe())
    for i = 1, 20 do
      local u = S.halton(i, space.d, {seed = 2})
      assert.are.same(space:point(u), copy:point(u))
    end
  end)
end)

describe("dl.search grid and random", function()
  it("enumerates a 2-D grid and warns above 2 varied dimensions", function()
    local space = S.space{opt = S.choice{"a", "b"}, lr = S.log_uniform(1e-3, 1e-1)}
    local hps = S.sample(space, 100, {algorithm = "grid", grid_points = 3})
    assert.are.equal(6, #hps)
    local seen = {}
    for _, hp in ipairs(hps) do seen[hp.opt .. string.format("%.0e", hp.lr)] = true end
    for _, k in ipairs({"a1e-03", "a1e-02", "a1e-01", "b1e-03", "b1e-02", "b1e-01"}) do assert.truthy(seen[k], k) end
    local warnings = {}
    S.sample(S.space{a = S.uniform(0, 1), b = S.uniform(0, 1), c = S.uniform(0, 1)}, 8,
      {algorithm = "grid", grid_points = 2, warn = function(m) warnings[#warnings + 1] = m end})
    assert.are.equal(1, #warnings)
    assert.truthy(warnings[1]:find("grid search over 3 varied dimensions"))
    -- random: a pure function of (seed, i) too
    assert.are.same(S.random_point(5, 3, 1), S.random_point(5, 3, 1))
    assert.are_not.same(S.random_point(5, 3, 1), S.random_point(5, 3, 2))
  end)
end)

local solve, matern = H.solve, H.matern52

describe("dlua.search.gp", function()
  local r = S.rng("gp-spec")
  local X, y = {}, {}
  for i = 1, 14 do
    X[i] = {r:uniform(), r:uniform()}
    y[i] = math.sin(5 * X[i][1]) + X[i][2] ^ 2 + 0.05 * r:normal()
  end

  it("has the analytic marginal-likelihood gradient (finite differences)", function()
    local theta = {math.log(0.3), math.log(0.8), math.log(1.5), math.log(0.02)}
    local _, g = gp._objective(X, y, theta, 2, true)
    for j = 1, 4 do
      local a, b = {table.unpack(theta)}, {table.unpack(theta)}
      a[j], b[j] = a[j] + 1e-5, b[j] - 1e-5
      local fd = (gp._objective(X, y, a, 2) - gp._objective(X, y, b, 2)) / 2e-5
      assert(math.abs(fd - g[j]) < 1e-5 * math.max(1, math.abs(fd)), string.format("theta %d: %g vs %g", j, g[j], fd))
    end
  end)

  it("predicts the posterior mean of an independent solve with its fitted hyperparameters", function()
    local m = gp.fit(X, y)
    local ys = {}
    for i = 1, #y do ys[i] = (y[i] - m.mean) / m.sd end
    assert(math.abs(m.lml - gp._objective(X, ys, m.theta, 2)) < 1e-8, "lml is the objective at theta")
    assert(m.lml > gp._objective(X, ys, {0, 0, 0, math.log(0.5)}, 2), "fit did not improve on a default")
    local ls = {math.exp(m.theta[1]), math.exp(m.theta[2])}
    local sf2, sn2 = math.exp(m.theta[3]), math.exp(m.theta[4])
    local K = {}
    for i = 1, #X do
      K[i] = {}
      for j = 1, #X do K[i][j] = matern(X[i], X[j], ls, sf2) + (i == j and sn2 + 1e-9 or 0) end
    end
    local alpha = solve(K, ys)
    for _, x in ipairs({{0.1, 0.2}, {0.5, 0.5}, {0.9, 0.7}}) do
      local mu = 0
      for i = 1, #X do mu = mu + matern(x, X[i], ls, sf2) * alpha[i] end
      mu = m.mean + m.sd * mu
      local got = m:predict(x)
      assert(math.abs(got - mu) < 1e-9, string.format("%g vs %g", got, mu))
    end
    -- it learned something: held-out error well below the spread of y
    local err, n = 0, 0
    for _ = 1, 50 do
      local x = {r:uniform(), r:uniform()}
      err = err + (m:predict(x) - (math.sin(5 * x[1]) + x[2] ^ 2)) ^ 2
      n = n + 1
    end
    assert(math.sqrt(err / n) < 0.25, "rmse " .. math.sqrt(err / n))
  end)
end)

local function branin(x1, x2)
  local b, c, t = 5.1 / (4 * math.pi ^ 2), 5 / math.pi, 1 / (8 * math.pi)
  return (x2 - b * x1 ^ 2 + c * x1 - 6) ^ 2 + 10 * (1 - t) * math.cos(x1) + 10
end

local function best_after(alg, seed, budget, batch, f)
  local space = S.space{x1 = S.uniform(-5, 10), x2 = S.uniform(0, 15)}
  local s = S.suggester(space, {algorithm = alg, seed = seed, mode = "min"})
  local n = 0
  while n < budget do
    for _, sg in ipairs(s:suggest(math.min(batch, budget - n))) do
      s:observe(sg, (f or branin)(sg.hp.x1, sg.hp.x2))
      n = n + 1
    end
  end
  return s:best().value, s
end

describe("dl.search bayes", function()
  it("replays the trust region's side from the history and centres it on the lowest posterior mean", function()
    local B = require "dlua.search.bayes"
    local space = S.space{a = S.uniform(0, 1), b = S.uniform(0, 1)}
    local us = {{0.1, 0.1}, {0.9, 0.9}, {0.5, 0.4}, {0.3, 0.6}, {0.2, 0.7}, {0.6, 0.5}, {0.7, 0.2}}
    local theta = {math.log(0.5), math.log(0.5), 0, math.log(1e-3)}
    local mean = {3, 2, 1, 0.5, 0.2, 0.9, 0.8}                       -- lowest at observation 5
    -- nil until more than `init` observations
    assert.is_nil(B.trust_region(space, {5, 4}, {us[1], us[2]}, {5, 4}, theta, 2))
    -- three new lows in a row after init = 2 double the side: 0.8 -> 1.6, box clipped to the cube
    local lo, hi, L = B.trust_region(space, {5, 4, 3, 2, 1}, us, mean, theta, 2)
    assert.are.equal(1.6, L)
    assert.are.same({0, 0}, lo)
    assert.are.same({1 - 2 ^ -53, 1 - 2 ^ -53}, hi)
    -- d = 2 failures in a row halve it, twice: 0.8 -> 0.2; centre (0.2, 0.7), half side 0.1
    lo, hi, L = B.trust_region(space, {1, 2, 2, 2, 2, 2, 2}, us, mean, theta, 2)
    assert.are.equal(0.2, L)
    assert.is_near(0.1, lo[1], 1e-15); assert.is_near(0.3, hi[1], 1e-15)
    assert.is_near(0.6, lo[2], 1e-15); assert.is_near(0.8, hi[2], 1e-15)
    -- ARD: sides proportional to the length scales, their geometric mean L (l = 0.2 and 0.8: sides L/2, 2L)
    theta = {math.log(0.2), math.log(0.8), 0, math.log(1e-3)}
    lo, hi = B.trust_region(space, {1, 2, 2, 2, 2, 2, 2}, us, mean, theta, 2)
    assert.is_near(0.1, hi[1] - lo[1], 1e-12)
    assert.is_near(0.4, hi[2] - lo[2], 1e-12)
  end)

  it("reports the trust region it used, from opts.init on, and takes a warm start", function()
    local space = S.space{a = S.uniform(0, 1), b = S.uniform(0, 1)}
    local values = {5, 6, 7, 8, 4, 9, 3, 2}
    local hist = {}
    for i = 1, 8 do hist[i] = {u = S.halton(i, 2, {seed = 3}), value = values[i]} end
    -- default init max(5, 2 (2 + 1)) = 6: observations 7 and 8 are new lows, two successes: 0.8 stays
    local _, info = S.bayes_suggest(space, hist, {}, 1, {seed = 1})
    assert.are.equal(0.8, info.region.length)
    assert.are.equal(2, #info.region.lo)
    -- init = 8: no adaptive observation yet, no region
    local _, early = S.bayes_suggest(space, hist, {}, 1, {seed = 1, init = 8})
    assert.is_nil(early.region)
    -- init = 2: observations 3 and 4 fail twice (d = 2): 0.4; then success, failure, two successes
    local _, late = S.bayes_suggest(space, hist, {}, 1, {seed = 1, init = 2, theta = info.theta})
    assert.are.equal(0.4, late.region.length)
    assert.are.equal(4, #late.theta)
  end)

  it("beats random search on Branin at an equal budget of 20 evaluations (4 seeds)", function()
    local b, rnd = {}, {}
    for seed = 1, 4 do
      b[seed] = best_after("bayes", seed, 20, 1)
      rnd[seed] = best_after("random", seed, 20, 1)
    end
    table.sort(b); table.sort(rnd)
    local mb, mr = (b[2] + b[3]) / 2, (rnd[2] + rnd[3]) / 2
    assert(mb < mr, string.format("median best: bayes %.3f vs random %.3f", mb, mr))
    assert(mb < 1.0, string.format("bayes median best %.3f (the minimum is 0.398)", mb))
  end)

  it("suggests distinct points in a batch (kriging believer) and gives the init points first", function()
    local space = S.space{x1 = S.uniform(-5, 10), x2 = S.uniform(0, 15)}
    local s = S.suggester(space, {algorithm = "bayes", seed = 3, mode = "min", init = 5})
    local first = s:suggest(5)
    assert.are.same({0.5, 0.5}, first[1].u)                        -- the centre, then quasirandom
    for i = 2, 5 do assert.are.same(S.halton(i - 1, 2, {seed = 3}), first[i].u) end
    for _, sg in ipairs(first) do s:observe(sg, branin(sg.hp.x1, sg.hp.x2)) end
    local batch = s:suggest(4)
    assert.are.equal(4, #batch)
    for i = 1, 4 do
      for j = i + 1, 4 do
        local d = math.abs(batch[i].u[1] - batch[j].u[1]) + math.abs(batch[i].u[2] - batch[j].u[2])
        assert(d > 1e-3, "batch points " .. i .. " and " .. j .. " coincide")
      end
    end
  end)

  it("treats infeasible trials as a constraint, not a value", function()
    -- minimise x1 + x2 / 10 on [0, 1]^2, infeasible where x1 < 0.3: the optimum sits on
    -- the boundary, and the objective's GP (fitted to feasible trials only) keeps
    -- predicting lower values deeper into the infeasible region
    local function run(feasibility)
      local space = S.space{x1 = S.uniform(0, 1), x2 = S.uniform(0, 1)}
      local s = S.suggester(space, {algorithm = "bayes", seed = 1, mode = "min", init = 6, feasibility = feasibility})
      local late = {}
      for i = 1, 22 do
        local sg = s:suggest(1)[1]
        local feasible = sg.hp.x1 >= 0.3
        s:observe(sg, feasible and sg.hp.x1 + 0.1 * sg.hp.x2 or nil)
        if i > 12 then late[#late + 1] = {x1 = sg.hp.x1, feasible = feasible} end
      end
      for _, h in ipairs(s.history) do assert(h.value == nil or h.value >= 0.3) end
      return s, late
    end
    local s, late = run(nil)
    local feasible = 0
    for _, l in ipairs(late) do
      if l.feasible then feasible = feasible + 1 end
      assert(l.feasible or l.x1 > 0.2, "an infeasible suggestion deep in the infeasible region: x1 = " .. l.x1)
    end
    assert(feasible >= 1, "no feasible suggestion in the last 10")
    assert(s:best().value < 0.32, "best " .. s:best().value)
    -- the same search without the feasibility model sticks to one infeasible spot
    local _, blind = run(false)
    local stuck = 0
    for _, l in ipairs(blind) do if not l.feasible then stuck = stuck + 1 end end
    assert(stuck >= 8, "without the feasibility model only " .. stuck .. " of 10 were infeasible")
  end)
end)

describe("dl.search.suggester", function()
  local space1 = S.space{x = S.uniform(0, 1)}

  it("reports the best point by posterior mean, not the luckiest noisy value", function()
    -- f(x) = (x - 0.7)^2 observed with noise sd 0.05 at 20 points, and x = 0.3 (f = 0.16)
    -- once with a lucky draw 6 sd low: the best observed value is there, the best
    -- estimate (the lowest posterior mean at an observed point) near 0.7
    -- (warp = "none": the fitted noise below is in the objective's units; the
    -- default output warp must choose the same way)
    local function noisy(warp)
      local s = S.suggester(space1, {algorithm = "bayes", seed = 1, warp = warp})
      local r = S.rng("suggester-noise")
      local vmin = math.huge
      for _, sg in ipairs(s:suggest(20)) do
        local v = (sg.hp.x - 0.7) ^ 2 + 0.05 * r:normal()
        s:observe(sg, v)
        vmin = math.min(vmin, v)
      end
      local lucky = {index = 99, u = {0.3}}
      s:observe(lucky, 0.16 - 0.3)
      assert(0.16 - 0.3 < vmin, "the lucky value is the best observed")
      local b = s:best()
      assert(math.abs(b.hp.x - 0.7) < 0.15, "best x " .. b.hp.x)
      assert(b.index ~= 99)
      return s, b
    end
    noisy(nil)
    local s, b = noisy("none")
    local m = s.fit.model
    assert(m.noise > 0.05 ^ 2 / 3 and m.noise < 0.05 ^ 2 * 3, "fitted noise variance " .. m.noise)
    local mu = m:observed_mean()
    for i = 1, #mu do assert(b.estimate <= mu[i]) end
    -- best = "observed" (a deterministic objective): the same history reports the lucky value, and
    -- the suggestions are those of the default (the option only changes what best() reports)
    local function history_of(opts)
      local o = S.suggester(space1, opts)
      local r = S.rng("suggester-noise")
      local us = {}
      for _, sg in ipairs(o:suggest(20)) do
        o:observe(sg, (sg.hp.x - 0.7) ^ 2 + 0.05 * r:normal())
        us[#us + 1] = sg.u[1]
      end
      o:observe({index = 99, u = {0.3}}, 0.16 - 0.3)
      us[#us + 1] = o:suggest()[1].u[1]
      return o, us
    end
    local obs, us_obs = history_of({algorithm = "bayes", seed = 1, best = "observed"})
    local _, us_est = history_of({algorithm = "bayes", seed = 1})
    assert.are.same(us_est, us_obs)
    local bo = obs:best()
    assert.are.equal(99, bo.index)
    assert.are.equal(0.16 - 0.3, bo.value)
    assert.are.equal(bo.value, bo.estimate)
    assert.error_matches(function() S.suggester(space1, {algorithm = "bayes", best = "mean"}) end,
      "dl.search.suggester: option 'best' must be \"estimate\" or \"observed\", got \"mean\"")
    assert.error_matches(function() S.suggester(space1, {algorithm = "bayes", best = 1}) end,
      "dl.search.suggester: option 'best'")
    assert.error_matches(function() S.suggester(space1, {algorithm = "bayes", mode = {"min", "max"},
      best = "observed"}) end, "option 'best' serves one objective %(s:best%(%)%), and mode lists 2")
    -- quasirandom has no model: the best observed value
    local q = S.suggester(space1, {algorithm = "quasirandom"})
    for _, sg in ipairs(q:suggest(3)) do q:observe(sg, sg.hp.x) end
    q:observe({index = 9, u = {0.1}}, -0.2)
    assert.are.same({index = 9, u = {0.1}, hp = {x = 0.1}, value = -0.2, estimate = -0.2}, q:best())
  end)

  it("keeps batch suggestions apart under noise (noise-free kriging beliefs)", function()
    local space = S.space{x1 = S.uniform(0, 1), x2 = S.uniform(0, 1)}
    local s = S.suggester(space, {algorithm = "bayes", seed = 2, init = 8})
    local r = S.rng("batch-noise")
    for _, sg in ipairs(s:suggest(8)) do s:observe(sg, sg.hp.x1 + sg.hp.x2 + 0.3 * r:normal()) end
    local batch = s:suggest(5)
    assert.are.equal(5, #batch)
    for i = 1, 5 do
      for j = i + 1, 5 do
        local d = math.abs(batch[i].u[1] - batch[j].u[1]) + math.abs(batch[i].u[2] - batch[j].u[2])
        assert(d > 0.02, string.format("batch points %d and %d are %.4f apart", i, j, d))
      end
    end
  end)

  it("hands its GP hyperparameters out as plain data and takes them back as a warm start", function()
    local s = S.suggester(space1, {algorithm = "bayes", seed = 3, init = 4})
    assert.are.same({}, s:state())
    for _ = 1, 6 do local sg = s:suggest()[1]; s:observe(sg, math.sin(6 * sg.hp.x)) end
    s:suggest()
    local st = s:state()
    assert.are.equal(3, #st.theta)                  -- one length scale, amplitude, noise
    local w = S.suggester(space1, {algorithm = "bayes", seed = 3, init = 4, theta = st.theta})
    assert.are.same(st.theta, w:state().theta)
  end)

  it("rejects unknown options, bad values and foreign observations", function()
    assert.error_matches(function() S.suggester(space1, {algorithm = "bayes", sed = 1}) end,
      "dl.search.suggester: unknown option 'sed' %(valid: acq_starts, acquisition, algorithm, batch, best, candidates, " ..
      "context, feasibility, grid_points, init, max_points, mode, pareto, racing, seed, theta, trust_starts, warp%)")
    assert.error_matches(function() S.suggester(space1, {algorithm = "bayes", init = -1}) end,
      "dl.search.suggester: option 'init' must be an integer >= 0, got %-1")
    assert.error_matches(function() S.suggester(space1, {mode = "maximise"}) end,
      "dl.search.suggester: option 'mode' must be \"min\", \"max\" or a list of them %(one per objective%), " ..
      "got \"maximise\"")
    assert.error_matches(function() S.suggester(space1, {algorithm = "bayes", theta = {0, 0}}) end,
      "dl.search.suggester: option 'theta' must be a list of 3 finite numbers %(s:state%(%).theta for this space%)")
    local s = S.suggester(space1)
    assert.error_matches(function() s:suggest(0) end, "dl.search.suggester: suggest: n must be an integer in %[1, 100000%], got 0")
    assert.error_matches(function() s:observe({x = 0.5}, 1) end,
      "dl.search.suggester: observe: argument 1 must be a suggestion returned by suggest")
    assert.error_matches(function() s:observe(s:suggest()[1], "1.5") end,
      "dl.search.suggester: observe: value must be a number or nil %(infeasible%), got string")
  end)
end)

describe("dl.search.importance", function()
  local space5 = S.space{x1 = S.uniform(0, 1), x2 = S.uniform(0, 1), x3 = S.uniform(0, 1), x4 = S.uniform(0, 1),
                         x5 = S.uniform(0, 1)}

  it("recovers the one relevant dimension of sin(5 x1) + noise (x2..x5 irrelevant)", function()
    for seed = 1, 3 do
      local r = S.rng("importance-spec", seed)
      local seq = S.halton_sequence(5, seed)
      local hist = {}
      for i = 1, 60 do
        local u = seq:point(i)
        hist[i] = {u = u, value = math.sin(5 * space5:point(u).x1) + 0.1 * r:normal()}
      end
      local imp = S.importance(space5, hist)
      assert.are.equal("gp-fanova", imp.method)
      assert.are.equal(S.importance_method, imp.method)
      assert.are.equal(5, #imp.params)
      assert.are.equal("x1", imp.params[1].name)
      assert.are.equal(60, imp.params[1].trials)
      assert.is_true(imp.params[1].share > 0.9, "share of x1: " .. imp.params[1].share)
      for k = 2, 5 do
        assert.is_true(imp.params[k].share < 0.05, imp.params[k].name .. " share " .. imp.params[k].share)
      end
      assert.are.equal(7, #imp.theta)
    end
  end)

  it("gives an additive function its first-order variance shares (x1 + 2 x2: 1/5 and 4/5)", function()
    -- Var(x1) = 1/12, Var(2 x2) = 4/12 for uniform x: Sobol main effects 0.2 and 0.8, the rest 0
    local seq = S.halton_sequence(5, 3)
    local hist = {}
    for i = 1, 60 do
      local u = seq:point(i)
      local x = space5:point(u)
      hist[i] = {u = u, value = x.x1 + 2 * x.x2}
    end
    local imp = S.importance(space5, hist)
    assert.is_near(0.2, imp.params[1].share, 0.03)
    assert.is_near(0.8, imp.params[2].share, 0.03)
    for k = 3, 5 do assert.is_true(imp.params[k].share < 0.01, imp.params[k].name .. " " .. imp.params[k].share) end
  end)

  it("ranks 2 relevant parameters of 5 first at 30 points in at least 18 of 20 seeds (the binned estimate: 10)", function()
    local n = 0
    for seed = 1, 20 do
      local r = S.rng("importance-bench", seed)
      local hist = {}
      for i = 1, 30 do
        local u = {}
        for j = 1, 5 do u[j] = r:uniform() end
        local x = space5:point(u)
        hist[i] = {u = u, value = math.sin(6 * x.x1) + (2 * x.x2 - 1) ^ 2 + 0.1 * r:normal()}
      end
      local p = S.importance(space5, hist).params
      local order = {1, 2, 3, 4, 5}
      table.sort(order, function(a, b) return p[a].share > p[b].share end)
      if order[1] + order[2] == 3 then n = n + 1 end
    end
    assert.is_true(n >= 18, n .. " of 20")
  end)

  it("gives a conditional parameter a share only over the trials where it is active, none where it never is", function()
    local space = S.space({lr = S.uniform(0, 1), momentum = S.uniform(0, 1):when{opt = {"sgd"}}},
      {context = {opt = {"sgd", "adam"}}})
    local seq = S.halton_sequence(2, 5)
    local function hist_for(opt)
      local hist = {}
      for i = 1, 30 do
        local u = seq:point(i)
        local hp = space:point(u, {opt = opt})
        hist[i] = {u = u, value = 0.2 * hp.lr + (hp.momentum and 3 * hp.momentum or 0)}
      end
      return hist
    end
    local adam = S.importance(space, hist_for("adam"), {context = {opt = "adam"}})
    local by = {}
    for _, p in ipairs(adam.params) do by[p.name] = p end
    assert.is_nil(by.momentum.share)                 -- inactive in every trial: nothing
    assert.are.equal(0, by.momentum.trials)
    assert.is_true(by.lr.share > 0.95, "lr " .. by.lr.share)
    local sgd = S.importance(space, hist_for("sgd"), {context = {opt = "sgd"}})
    by = {}
    for _, p in ipairs(sgd.params) do by[p.name] = p end
    assert.are.equal(30, by.momentum.trials)
    assert.is_true(by.momentum.share > 0.9, "momentum " .. by.momentum.share)
    -- in a study's results the inactive parameter is left out of the group's list
  end)

  it("rejects a non-space, short histories and unknown options", function()
    assert.error_matches(function() S.importance({}, {}) end,
      "dl.search.importance: argument 1 must be a space %(dl.search.space%), got table")
    assert.error_matches(function() S.importance(space5, {{u = {0.5, 0.5, 0.5, 0.5, 0.5}, value = 1}}) end,
      "dl.search.importance: needs at least 3 feasible observations, got 1")
    assert.error_matches(function() S.importance(space5, {{u = {0.5}, value = 1}}) end,
      "dl.search.importance: history%[1%] must be {u = 5 coordinates, value =}")
    assert.error_matches(function() S.importance(space5, {}, {bin = 3}) end, "dl.search.importance: unknown option 'bin'")
    assert.error_matches(function() S.importance(space5, {}, {bins = 1}) end,
      "dl.search.importance: option 'bins' must be >= 2, got 1")
  end)
end)

describe("dl.search bounds (api fuzzer findings 10 and 12)", function()
  local dl = require "dlua"
  local S = dl.search
  it("refuses counts, dimensions and bases that would loop without bound, naming the argument", function()
    assert.error_matches(function() S.primes(1000000000) end,
      "bad argument #1 to 'dl.search.primes' %(n must be an integer in %[0, 10000%], got 1000000000%)")
    assert.error_matches(function() S.halton(1, 1 << 31) end,
      "bad argument #2 to 'dl.search.halton' %(d must be an integer in %[1, 10000%], got 2147483648%)")
    assert.error_matches(function() S.halton_sequence((1 << 62) + 1, 1) end,
      "bad argument #1 to 'dl.search.halton_sequence' %(d must be an integer in %[1, 10000%]")
    assert.error_matches(function() S.random_point(1, 1 << 40, 1) end,
      "bad argument #2 to 'dl.search.random_point' %(d must be an integer in %[1, 10000%]")
    assert.error_matches(function() S.halton_permutations(1, 3, 1) end,
      "bad argument #1 to 'dl.search.halton_permutations' %(base must be an integer in %[2, 104729%], got 1%)")
    assert.error_matches(function() S.halton(0 / 0, 2) end, "i must be an integer in %[1, 9007199254740992%], got %-?nan")
    assert.error_matches(function() dl.track.csv_row({}, 1000000000) end,
      "bad argument #2 to 'dl.track.csv_row' %(n must be an integer in %[0, 100000%]")
    assert.are.same({2, 3, 5, 7}, S.primes(4))
    assert.are.same(S.halton(3, 2), S.halton(3.0, 2.0))
  end)
end)
