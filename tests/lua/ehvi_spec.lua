-- Expected hypervolume improvement (dlua.search.ehvi) against independent
-- references: the hypervolume against a brute force over the grid of every
-- coordinate (and hand-computed areas), the EHVI at zero variance against the
-- exact improvement HV(front + y) - HV(front) of that brute force, and the EHVI
-- against a Monte Carlo average of the brute-force improvement over 20,000 seeded
-- normal samples (tolerance: 4 standard errors of the average), for 2 and 3
-- objectives, an empty front, a point dominated with certainty; the default
-- reference point against its rule worked by hand (2 and 3 objectives); then the
-- suggester with several objectives (EHVI by default, ParEGO on request and above
-- 3 objectives, determinism, its front against a brute-force dominance check, the
-- hypervolume against quasirandom's at the same budget) and the options' errors.
local dl = require "dlua"
local S = dl.search

-- brute-force hypervolume (every objective minimised): the grid of all coordinates
-- of the points and the reference; a cell counts when some point is <= its lower corner
local function brute_hv(pts, ref)
  local k = #ref
  local coords = {}
  for j = 1, k do
    local c, seen = {}, {}
    for _, p in ipairs(pts) do
      local v = math.min(p[j], ref[j])
      if not seen[v] then seen[v] = true; c[#c + 1] = v end
    end
    if not seen[ref[j]] then c[#c + 1] = ref[j] end
    table.sort(c)
    coords[j] = c
  end
  local hv = 0
  local idx = {}
  local function rec(j)
    if j > k then
      local vol = 1
      local corner = {}
      for i = 1, k do
        corner[i] = coords[i][idx[i]]
        vol = vol * (coords[i][idx[i] + 1] - coords[i][idx[i]])
      end
      for _, p in ipairs(pts) do
        local dom = true
        for i = 1, k do dom = dom and p[i] <= corner[i] end
        if dom then hv = hv + vol; return end
      end
      return
    end
    for t = 1, #coords[j] - 1 do idx[j] = t; rec(j + 1) end
  end
  rec(1)
  return hv
end

local function hvi(front, ref, y, base)
  local with = {table.unpack(front)}
  with[#with + 1] = y
  return brute_hv(with, ref) - (base or brute_hv(front, ref))
end

-- a seeded standard normal stream (Box-Muller over Lua's xoshiro)
local function normals(seed)
  local r = math.random
  math.randomseed(seed)
  return function()
    local u1, u2 = 1 - r(), r()
    return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
  end
end

-- Monte Carlo EHVI and its standard error
local function mc_ehvi(front, ref, mu, sd, n, seed)
  local z = normals(seed)
  local s, s2 = 0, 0
  local base = brute_hv(front, ref)
  for _ = 1, n do
    local y = {}
    for j = 1, #mu do y[j] = mu[j] + sd[j] * z() end
    local v = hvi(front, ref, y, base)
    s, s2 = s + v, s2 + v * v
  end
  local m = s / n
  return m, math.sqrt(math.max(0, s2 / n - m * m) / n)
end

local FRONT2 = {{0.1, 0.9}, {0.3, 0.6}, {0.6, 0.35}, {0.85, 0.1}}
local FRONT3 = {{0.1, 0.7, 0.6}, {0.5, 0.2, 0.7}, {0.6, 0.6, 0.15}, {0.3, 0.4, 0.4}}

describe("dl.search.hypervolume", function()
  it("matches hand-computed areas and a brute force over the coordinate grid", function()
    assert.are.equal(0.75, S.hypervolume({{0, 0.5}, {0.5, 0}}, {1, 1}))
    assert.is_true(math.abs(S.hypervolume({{0.2, 0.8}, {0.5, 0.4}, {0.9, 0.1}}, {1, 1}) - 0.39) < 1e-15)
    assert.are.equal(0, S.hypervolume({}, {1, 1, 1}))
    assert.are.equal(0, S.hypervolume({{1.5, 0.2}}, {1, 1}))          -- beyond the reference: nothing
    -- random sets, dominated points and ties included
    math.randomseed(11)
    for _, k in ipairs({2, 3}) do
      for _ = 1, 20 do
        local pts = {}
        for i = 1, 12 do
          local p = {}
          for j = 1, k do p[j] = math.floor(math.random() * 10) / 8 end       -- ties, and some beyond 1
          pts[i] = p
        end
        local ref = {}
        for j = 1, k do ref[j] = 1 end
        assert.is_true(math.abs(S.hypervolume(pts, ref) - brute_hv(pts, ref)) < 1e-12)
      end
    end
  end)
end)

describe("dl.search.expected_hvi", function()
  it("is the exact hypervolume improvement at zero variance (2 and 3 objectives)", function()
    math.randomseed(5)
    for _, c in ipairs({{FRONT2, {1, 1}}, {FRONT3, {1, 1, 1}}}) do
      local front, ref = c[1], c[2]
      local k = #ref
      for _ = 1, 200 do
        local y = {}
        for j = 1, k do y[j] = math.random() * 1.2 - 0.1 end
        local zero = {}
        for j = 1, k do zero[j] = 0 end
        local got = S.expected_hvi(front, ref, y, zero)
        assert.is_true(math.abs(got - hvi(front, ref, y)) < 1e-12, string.format("%g vs %g", got, hvi(front, ref, y)))
      end
    end
    -- a front point itself improves nothing; the empty front: the box up to the reference
    assert.are.equal(0, S.expected_hvi(FRONT3, {1, 1, 1}, {0.3, 0.4, 0.4}, {0, 0, 0}))
    assert.is_true(math.abs(S.expected_hvi({}, {1, 1, 1}, {0.5, 0.2, 0.9}, {0, 0, 0}) - 0.5 * 0.8 * 0.1) < 1e-15)
  end)

  it("matches a Monte Carlo average of the improvement within 4 standard errors", function()
    local cases = {
      {FRONT2, {1, 1}, {0.4, 0.5}, {0.15, 0.2}},
      {FRONT2, {1, 1}, {0.05, 0.95}, {0.3, 0.05}},
      {FRONT2, {1.2, 1.1}, {0.7, 0.7}, {0.4, 0.4}},               -- mostly dominated, a tail that is not
      {{}, {1, 1}, {0.5, 0.3}, {0.2, 0.3}},                          -- empty front
      {FRONT3, {1, 1, 1}, {0.4, 0.4, 0.3}, {0.1, 0.2, 0.15}},
      {FRONT3, {1, 1, 1}, {0.2, 0.3, 0.5}, {0.3, 0.1, 0.2}},
      {FRONT3, {1.1, 1.2, 1}, {0.6, 0.6, 0.6}, {0.3, 0.3, 0.3}},
      {{}, {1, 1, 1}, {0.5, 0.5, 0.5}, {0.2, 0.1, 0.3}},             -- empty front
    }
    for i, c in ipairs(cases) do
      local want, se = mc_ehvi(c[1], c[2], c[3], c[4], 20000, 100 + i)
      local got = S.expected_hvi(c[1], c[2], c[3], c[4])
      assert.is_true(want > 1e-3, "case " .. i .. " tests something: " .. want)
      assert.is_true(math.abs(got - want) < 4 * se + 1e-6,
        string.format("case %d: EHVI %.6f, Monte Carlo %.6f +- %.6f", i, got, want, se))
    end
  end)

  it("is ~0 for a point dominated with certainty and refuses bad arguments", function()
    assert.is_true(S.expected_hvi(FRONT2, {1, 1}, {0.9, 0.95}, {1e-3, 1e-3}) < 1e-12)
    assert.is_true(S.expected_hvi(FRONT3, {1, 1, 1}, {0.7, 0.7, 0.8}, {1e-3, 1e-3, 1e-3}) < 1e-12)
    local bad = {
      {function() S.expected_hvi(FRONT2, {1, 1, 1, 1}, {0, 0}, {0, 0}) end,
       "dl.search.expected_hvi: reference must be a list of 2 or 3 numbers (one per objective)"},
      {function() S.expected_hvi({{0.1}}, {1, 1}, {0, 0}, {0, 0}) end,
       "dl.search.expected_hvi: front[1] must be a list of 2 numbers"},
      {function() S.expected_hvi(FRONT2, {1, 1}, {0, 0}, {0, -1}) end,
       "dl.search.expected_hvi: sd must be a list of 2 finite numbers >= 0"},
      {function() S.expected_hvi(FRONT2, {1, 1}, {0, 0 / 0}, {0, 0}) end,
       "dl.search.expected_hvi: mean must be a list of 2 finite numbers"},
      {function() S.expected_hvi(FRONT2, {1, 1}, {0, 0}, {0, 0}, 1) end, "expected_hvi"},
    }
    for _, b in ipairs(bad) do
      local ok, err = pcall(b[1])
      assert.is_false(ok)
      assert.truthy(tostring(err):find(b[2], 1, true), tostring(err))
    end
  end)
end)

describe("the default reference point", function()
  local ehvi = require "dlua.search.ehvi"
  -- 11 mutually non-dominated points (the first two objectives trade off) and one
  -- dominated point that sets every objective's range to 20 (margin 0.1 * 20 = 2)
  local function costs(k)
    local c = {}
    for i = 0, 10 do c[#c + 1] = k == 2 and {i, 10 - i} or {i, 10 - i, 2 * ((7 * i) % 11)} end
    c[#c + 1] = k == 2 and {20, 20} or {20, 20, 20}
    return c
  end

  it("is the front's nadir plus 10% of the range for 2 objectives", function()
    assert.are.same({0, 0}, {ehvi.NADIR_DROP[2], 0})
    assert.are.same({10 + 2, 10 + 2}, ehvi._reference(costs(2)))
  end)

  it("leaves the front's largest value out for 3 objectives", function()
    assert.are.equal(1, ehvi.NADIR_DROP[3])
    -- front values 0..10, 0..10, 0, 2, .., 20: the second largest 9, 9, 18, plus 2
    assert.are.same({11, 11, 20}, ehvi._reference(costs(3)))
    -- a front of one point: its own values (the nadir), plus 10% of the range
    assert.are.same({0.1 + 0.1, 0.2 + 0.1, 0.3 + 0.2}, ehvi._reference({{0.1, 0.2, 0.3}, {1.1, 1.2, 2.3}}))
    -- the suggester's reference is this rule on the observed values (a max objective negated)
    local sp = S.space({x = S.uniform(0, 1)})
    local history = {}
    for i, c in ipairs(costs(3)) do history[i] = {u = {(i - 0.5) / 12}, values = {c[1], c[2], -c[3]}} end
    local bayes = require "dlua.search.algorithms.bayes"
    local _, info = bayes.suggest(sp, history, nil, 1, {seed = 1, mode = {"min", "min", "max"}})
    assert.are.equal("ehvi", info.method)
    assert.are.same({11, 11, -20}, info.reference)
  end)
end)

-- ZDT1 over 2 variables (both costs): the front is x2 = 0, f2 = 1 - sqrt(f1)
local function zdt1(hp)
  local g = 1 + 9 * hp.y
  return {hp.x, g * (1 - math.sqrt(hp.x / g))}
end
local SPACE = {x = S.uniform(0, 1), y = S.uniform(0, 1)}

local function run(opts, T, f)
  local s = S.suggester(S.space(SPACE), opts)
  local vals, us = {}, {}
  for _ = 1, T do
    local g = s:suggest()[1]
    local v = (f or zdt1)(g.hp)
    s:observe(g, v)
    vals[#vals + 1], us[#us + 1] = v, g.u
  end
  return s, vals, us
end

describe("the suggester with several objectives", function()
  it("chooses by EHVI after its initial points, deterministically, and beats quasirandom's hypervolume", function()
    local T = 20
    local s, vals, us = run({algorithm = "bayes", seed = 3, mode = {"min", "min"}}, T)
    assert.are.equal("ehvi", s:state().method)
    local _, _, us2 = run({algorithm = "bayes", seed = 3, mode = {"min", "min"}}, T)
    assert.are.same(us, us2)
    local _, qvals = run({algorithm = "quasirandom", seed = 3, mode = {"min", "min"}}, T)
    local hv_b, hv_q = brute_hv(vals, {1.1, 1.1}), brute_hv(qvals, {1.1, 1.1})
    -- measured: bayes (EHVI) 0.726, quasirandom 0.432; the true front's 0.1 + 2/3 + 0.11 = 0.877
    assert.is_true(hv_b > hv_q + 0.15, string.format("EHVI %.3f, quasirandom %.3f", hv_b, hv_q))
    -- the front: what a brute-force dominance check finds among the observations
    local front = s:front()
    local want = {}
    for i, v in ipairs(vals) do
      local dominated = false
      for j, w in ipairs(vals) do
        if j ~= i and w[1] <= v[1] and w[2] <= v[2] and (w[1] < v[1] or w[2] < v[2]) then dominated = true end
      end
      if not dominated then want[#want + 1] = v end
    end
    assert.are.equal(#want, #front)
    for i, e in ipairs(front) do assert.are.same(want[i], e.values) end
    -- a maximised objective is a negated cost: the same points
    local _, _, usm = run({algorithm = "bayes", seed = 3, mode = {"max", "min"}}, T,
      function(hp) local v = zdt1(hp); return {-v[1], v[2]} end)
    assert.are.same(us, usm)
  end)

  it("uses ParEGO on request and above 3 objectives, and batches by belief", function()
    local s = run({algorithm = "bayes", seed = 1, mode = {"min", "min"}, pareto = {method = "parego"}, init = 4}, 6)
    assert.are.equal("parego", s:state().method)
    assert.is_nil(s:state().fallback)
    local four = S.suggester(S.space(SPACE), {algorithm = "bayes", seed = 1, mode = {"min", "min", "max", "min"},
      init = 3})
    for _ = 1, 5 do
      local g = four:suggest()[1]
      four:observe(g, {g.hp.x, g.hp.y, g.hp.x * g.hp.y, 1 - g.hp.x})
    end
    assert.are.equal("parego", four:state().method)
    assert.are.equal("ParEGO: EHVI serves 3 objectives at most, and there are 4", four:state().fallback)
    -- a batch of 3 under EHVI: distinct points; a reference point given
    local b = run({algorithm = "bayes", seed = 2, mode = {"min", "min"}, init = 4, pareto = {reference = {1.1, 11}}}, 5)
    local batch = b:suggest(3)
    assert.are.equal(3, #batch)
    assert.are_not.same(batch[1].u, batch[2].u)
    assert.are_not.same(batch[2].u, batch[3].u)
    assert.are.equal("ehvi", b:state().method)
  end)

  it("refuses bad options and values naming the key", function()
    local sp = S.space(SPACE)
    local cases = {
      {{algorithm = "bayes", mode = {"min", "mx"}},
       "option 'mode' must be \"min\", \"max\" or a list of them (one per objective)"},
      {{algorithm = "bayes", mode = {"min", "min"}, pareto = {method = "ehvj"}},
       "pareto.method must be \"ehvi\" or \"parego\", got 'ehvj'; did you mean 'ehvi'?"},
      {{algorithm = "bayes", mode = {"min", "min"}, pareto = {refrence = {1, 1}}},
       "unknown option 'refrence'"},
      {{algorithm = "bayes", mode = {"min", "min"}, pareto = {reference = {1, 1, 1}}},
       "pareto.reference must be a list of 2 finite numbers (one per objective, in its units)"},
      {{algorithm = "bayes", mode = "min", pareto = {method = "parego"}},
       "option 'pareto' is for several objectives, and there is one"},
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(S.suggester, sp, c[1])
      assert.is_false(ok)
      assert.truthy(tostring(err):find("dl.search.suggester: ", 1, true), tostring(err))
      assert.truthy(tostring(err):find(c[2], 1, true), tostring(err))
    end
    local s = S.suggester(sp, {algorithm = "bayes", mode = {"min", "max"}})
    local g = s:suggest()[1]
    local ok, err = pcall(s.observe, s, g, 0.5)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("value must be a list of 2 numbers (one per mode) or nil (infeasible)", 1, true),
      tostring(err))
    s:observe(g, {0.1, 0 / 0})                 -- a NaN: infeasible
    assert.are.same({}, s:front())
    ok, err = pcall(s.best, s)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("several objectives have a front, not a best: s:front()", 1, true), tostring(err))
  end)
end)
