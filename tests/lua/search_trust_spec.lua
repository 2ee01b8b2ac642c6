-- The trust region of dl.search's bayes suggester (issue 35, item 2): the side
-- length's state machine replayed from the history (TuRBO's rule: three new
-- lows in a row double it up to 1.6, d trials in a row without one halve it,
-- below 2^-7 it restarts at 0.8), the trust region's own gradient starts
-- (opts.trust_starts: the best candidates inside the region, climbing inside
-- it), determinism, and the option's errors.
local S = require("dlua").search
local B = require "dlua.search.bayes"
local acqopt = require "dlua.search.acqopt"

local space2 = S.space{a = S.uniform(0, 1), b = S.uniform(0, 1)}
local THETA = {math.log(0.5), math.log(0.5), 0, math.log(1e-3)}      -- equal length scales: a square box

-- the side L after the values ys (init of them initial), centred on the first point
local function side(ys, init)
  local us, mean = {}, {}
  for i = 1, #ys do us[i], mean[i] = {0.5, 0.5}, 0 end
  local _, _, L = B.trust_region(space2, ys, us, mean, THETA, init)
  return L
end

local function rep(v, n)
  local t = {}
  for i = 1, n do t[i] = v end
  return t
end

local function join(...)
  local out = {}
  for _, t in ipairs({...}) do for _, v in ipairs(t) do out[#out + 1] = v end end
  return out
end

describe("the trust region's side (bayes.trust_region)", function()
  it("uses TuRBO's constants", function()
    assert.same({L0 = 0.8, LMAX = 1.6, LMIN = 2 ^ -7, SUCCESSES = 3}, B._TR)
  end)

  it("doubles after three new lows in a row, at most to 1.6", function()
    assert.are.equal(0.8, side({9, 8, 7}, 1))                  -- two successes: unchanged
    assert.are.equal(1.6, side({9, 8, 7, 6}, 1))               -- three: doubled
    assert.are.equal(1.6, side({9, 8, 7, 6, 5, 4, 3}, 1))      -- six: capped
    assert.are.equal(0.8, side({9, 8, 7, 9, 6}, 1))            -- a failure breaks the run
  end)

  it("halves after d failures in a row, a success resetting the count", function()
    -- d = 2: failures in pairs
    assert.are.equal(0.8, side({1, 2}, 1))
    assert.are.equal(0.4, side({1, 2, 2}, 1))
    assert.are.equal(0.2, side({1, 2, 2, 2, 2}, 1))
    assert.are.equal(0.8, side({5, 6, 4, 6}, 1))               -- fail, success, fail: no pair
    -- a gain below 1e-3 of |best| is no new low
    assert.are.equal(0.4, side({1, 1 - 5e-4, 1 - 9e-4}, 1))
    assert.are.equal(0.8, side({1, 1 - 2e-3, 1 - 4e-3}, 1))
  end)

  it("restarts at 0.8 when the side falls below 2^-7", function()
    -- 0.8 / 2^6 = 0.0125 >= 2^-7 after 12 failures; the 7th halving (0.00625) restarts
    assert.are.equal(0.8 / 64, side(join({1}, rep(2, 12)), 1))
    assert.are.equal(0.8, side(join({1}, rep(2, 14)), 1))
    assert.are.equal(0.4, side(join({1}, rep(2, 16)), 1))      -- and shrinks again from there
  end)

  it("counts nothing during the initial points", function()
    assert.is_nil(side({3, 2, 1}, 3))
    assert.are.equal(0.8, side({9, 8, 7, 6, 5}, 3))           -- two successes after init
    assert.are.equal(0.4, side({1, 2, 3, 4, 5}, 3))           -- two failures after init
  end)
end)

describe("the trust region's gradient starts (acqopt.refiner region_starts)", function()
  local region = {lo = {0, 0}, hi = {0.5, 0.5}}
  local theta = {0, 0, 0, 0}
  -- scored candidates, best first; c and f are outside the region, e was seen (a = -2)
  local scored = {{u = {0.1, 0.1}, a = 9}, {u = {0.9, 0.9}, a = 8}, {u = {0.2, 0.2}, a = 7},
                  {u = {0.6, 0.1}, a = 6}, {u = {0.3, 0.3}, a = -2}, {u = {0.4, 0.1}, a = 5},
                  {u = {0.1, 0.4}, a = 4}, {u = {0.45, 0.2}, a = 3}}

  local function starts_of(region_starts, log_ei)
    local seen
    local refine = acqopt.refiner(space2, {region = region, theta = theta, starts = 2, region_starts = region_starts,
      log_ei = log_ei, acq = function(us) seen = us; local a = {} for i = 1, #us do a[i] = 0 end return a end})
    refine(scored, scored[1])
    return seen
  end
  local flat = function(xs) local v, g = {}, {} for i = 1, #xs do v[i], g[i] = 0, {0, 0} end return v, g end

  it("adds the best candidates inside the region not yet started, after the global starts", function()
    -- global: top and the next best (0.9, 0.9); local: (0.2, 0.2) and (0.4, 0.1), skipping the seen (0.3, 0.3)
    assert.same({{0.1, 0.1}, {0.9, 0.9}, {0.2, 0.2}, {0.4, 0.1}}, starts_of(2, flat))
    assert.same({{0.1, 0.1}, {0.9, 0.9}}, starts_of(0, flat))
    assert.same({{0.1, 0.1}, {0.9, 0.9}, {0.2, 0.2}, {0.4, 0.1}, {0.1, 0.4}, {0.45, 0.2}}, starts_of(10, flat))
  end)

  it("climbs inside the region from a local start, over the cube from a global one", function()
    -- log EI rising along a + b: every start climbs to the top corner of its box
    local rise = function(xs)
      local v, g = {}, {}
      for i, x in ipairs(xs) do v[i], g[i] = x[1] + x[2], {1, 1} end
      return v, g
    end
    local us = starts_of(2, rise)
    for _, i in ipairs({1, 3, 4}) do
      assert.near(0.5, us[i][1], 1e-12); assert.near(0.5, us[i][2], 1e-12)
    end
    assert.near(1, us[2][1], 1e-12); assert.near(1, us[2][2], 1e-12)
  end)

  it("has none without a region", function()
    local seen
    local refine = acqopt.refiner(space2, {theta = theta, starts = 2, region_starts = 4, log_ei = flat,
      acq = function(us) seen = us; local a = {} for i = 1, #us do a[i] = 0 end return a end})
    refine(scored, scored[1])
    assert.same({{0.1, 0.1}, {0.9, 0.9}}, seen)
  end)
end)

describe("bayes with trust_starts", function()
  local P = dofile("tests/bench/search_problems.lua")
  local space = S.space{x1 = S.uniform(-10, 10), x2 = S.uniform(-10, 10), x3 = S.uniform(-10, 10),
                        x4 = S.uniform(-10, 10), x5 = S.uniform(-10, 10)}
  local function levy(hp) return P.levy({hp.x1, hp.x2, hp.x3, hp.x4, hp.x5}) end
  local function run(opts, n)
    local s = S.suggester(space, opts)
    local out = {}
    for _ = 1, n do
      local sg = s:suggest()[1]
      out[#out + 1] = sg.u
      s:observe(sg, levy(sg.hp))
    end
    return out
  end

  it("is deterministic, defaults to 4 from 8 dimensions on (fewer above 200 observations), none below", function()
    assert.are.equal(4, B.TRUST_STARTS)
    assert.are.equal(8, B.TRUST_FROM_D)
    local D = B._default_trust_starts
    assert.same({4, 4, 2, 1, 0}, {D(0, 8), D(200, 10), D(400, 20), D(800, 8), D(801, 8)})
    assert.same({0, 0}, {D(0, 7), D(100, 2)})
    -- in 5 dimensions the default is none; asked for, the starts change the suggestions
    local a = run({algorithm = "bayes", seed = 2, trust_starts = 4}, 20)
    assert.same(a, run({algorithm = "bayes", seed = 2, trust_starts = 4}, 20))
    local none = run({algorithm = "bayes", seed = 2}, 20)
    assert.same(none, run({algorithm = "bayes", seed = 2, trust_starts = 0}, 20))
    assert.are_not.same(a, none)
  end)

  it("rejects a bad trust_starts by name", function()
    assert.error_matches(function() S.suggester(space, {algorithm = "bayes", trust_starts = -1}) end,
      "dl.search.suggester: option 'trust_starts' must be a non%-negative integer, got %-1")
    assert.error_matches(function() S.suggester(space, {algorithm = "bayes", trust_starts = 2.5}) end,
      "dl.search.suggester: option 'trust_starts' must be a non%-negative integer, got 2.5")
    assert.error_matches(function() S.bayes_suggest(space, {}, {}, 1, {init = 2, trust_starts = "4"}) end,
      "dl.search.bayes_suggest: option 'trust_starts' must be a non%-negative integer, got string")
    -- the direct path checks the values the suggester's row checks (it accepted these before)
    for _, c in ipairs({{{trust_starts = -1}, "option 'trust_starts' must be a non%-negative integer, got %-1"},
                        {{candidates = 0}, "option 'candidates' must be a positive integer, got 0"},
                        {{acq_starts = -2}, "option 'acq_starts' must be a non%-negative integer, got %-2"},
                        {{max_points = 1}, "option 'max_points' must be an integer >= 2, got 1"},
                        {{batch = "qie"}, "option 'batch' must be \"qei\" or \"believer\", got \"qie\""}}) do
      c[1].init = 2
      assert.error_matches(function() S.bayes_suggest(space, {}, {}, 1, c[1]) end, "dl.search.bayes_suggest: " .. c[2])
    end
    assert.error_matches(function() acqopt.refiner(space, {region_starts = true}) end,
      "dlua.search.acqopt.refiner: option 'region_starts' must be integer, got boolean")
  end)
end)
