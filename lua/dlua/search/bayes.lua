--- dlua.search.bayes: the adaptive algorithm's engine, _suggest (exported as
-- dl.search.bayes_suggest by its row, dlua.search.algorithms.bayes): the next points
-- by noise-aware expected improvement under the Gaussian process of
-- dlua.search.gp (engine/search/gp.c), with a trust region around the incumbent mixed
-- with global candidates, a feasibility model, kriging-believer batches and
-- the subset rule above max_points (docs/studies.md).
local util = require "dlua.util"
local gp = require "dlua.search.gp"
local rngs = require "dlua.search.rng"
local halton = require "dlua.search.halton"
local acqopt = require "dlua.search.acqopt"
local batch = require "dlua.search.batch"
local nei = require "dlua.search.nei"
local warp = require "dlua.search.warp"

local M = {}

-------------------------------------------------------------- bayes (GP + EI)

-- engine choice (Gelbart et al. 2014's probabilistic constraint Pr(feasible) >= 0.2)
local MIN_FEASIBLE = 0.2
M.MIN_FEASIBLE = MIN_FEASIBLE

local key_formats = {}                  -- "%.12g,%.12g,..." by length: one string.format a key

local function feature_key(x)
  local n = #x
  local fmt = key_formats[n]
  if not fmt then
    fmt = ("%.12g,"):rep(n)
    key_formats[n] = fmt
  end
  return string.format(fmt, table.unpack(x, 1, n))
end

-- the surrogate's data: features and signed values (minimisation) of the
-- feasible observations, and feasibility labels of all of them
local function observations(space, history, sign, context)
  local X, y, used, Xall, labels, seen = {}, {}, {}, {}, {}, {}
  for _, h in ipairs(history) do
    local x = space:encode(h.u, context)
    Xall[#Xall + 1] = x
    seen[feature_key(x)] = true
    if h.value ~= nil and h.value == h.value then
      X[#X + 1], y[#y + 1], used[#used + 1] = x, sign * h.value, h
      labels[#labels + 1] = 1
    else
      labels[#labels + 1] = -1
    end
  end
  return X, y, used, Xall, labels, seen
end

local BAYES_OPTIONS = {seed = "integer", step = "integer", candidates = "integer>=1", mode = "string", context = "table",
                       theta = "table", feasibility = "boolean", max_points = "integer>=2", init = "integer>=0",
                       model = "table", acq_starts = "integer>=0", batch = "string", acquisition = "string",
                       trust_starts = "integer>=0", warp = "string"}

--- _history_problem(history) -> nil, or what is wrong with a history's values: each
-- value a number or nil (infeasible; NaN too), its u a table (checked before the
-- fit, so a bad value is not a raw arithmetic error inside it).
function M._history_problem(history)
  for i, h in ipairs(history) do
    if type(h) ~= "table" or type(h.u) ~= "table" then
      return string.format("history[%d] must be {u = a point, value = a number or nil}", i)
    end
    if h.value ~= nil and type(h.value) ~= "number" then
      return string.format("history[%d].value must be a number or nil (infeasible), got %s", i, type(h.value))
    end
  end
end

--- nil, or the message for a bad value of the options that name a choice (batch,
-- acquisition, warp): the one check of dl.search.bayes_suggest and the suggester's row.
function M._value_problem(opts)
  return util.choice_problem("batch", opts.batch, {"qei", "believer"}) or nei.problem(opts.acquisition) or
    warp.problem(opts.warp)
end

-- the incremental path: from INCREMENTAL_FROM observations on, a previous
-- model (opts.model) whose observations are the first of these takes the new
-- ones by rank-one extensions of its factor while they number at most
-- REFIT_GROWTH times those its hyperparameters were fitted to; then a
-- warm-started fit
local INCREMENTAL_FROM, REFIT_GROWTH = 256, 1.05
M._INCREMENTAL_FROM, M._REFIT_GROWTH = INCREMENTAL_FROM, REFIT_GROWTH

-- every value of y that w keeps its meaning for (dlua.search.warp: covers)
local function covered(w, y)
  for i = 1, #y do if not w:covers(y[i]) then return false end end
  return true
end

-- "auto"'s second test: the log warp and the identity compared by the GP's log
-- marginal likelihood of the values in their own units, the warp's Jacobian
-- included (the criterion of a warped GP, Snelson, Rasmussen and Ghahramani
-- 2004): lml of the standardised fit - n log sd, - sum log(scale + y - min) for
-- the log. Both fits run on at most COMPARE_POINTS observations (every n /
-- COMPARE_POINTS-th above that), then the winner's is the fit (or, above,
-- fitted on all): the comparison adds two small fits to a large one.
local COMPARE_POINTS = 128
M._COMPARE_POINTS = COMPARE_POINTS

local function likelihood(m, w, y) return m.lml - #y * math.log(m.sd) + w:log_jacobian(y) end

-- the warp of "auto" once warp.choose's screen chose w (log): w, or the identity
-- when the GP explains the raw values better; the fit on all observations when
-- the comparison's fits were on all of them
local function compare_warps(X, y, w, fit_opts)
  local n = #y
  local Xs, ys = X, y
  if n > COMPARE_POINTS then
    Xs, ys = {}, {}
    for k = 1, COMPARE_POINTS do
      local i = ((k - 1) * n) // COMPARE_POINTS + 1
      Xs[k], ys[k] = X[i], y[i]
    end
  end
  local mw = gp.fit(Xs, w:apply_all(ys), fit_opts)
  local mr = gp.fit(Xs, ys, fit_opts)
  local whole = n <= COMPARE_POINTS
  if likelihood(mr, warp.none(), ys) >= likelihood(mw, w, ys) then return warp.none(), whole and mr or nil end
  return w, whole and mw or nil
end

--- The GP of the observations (X, y), y the signed values: fitted to their
-- output warp (opts.warp, dlua.search.warp), which model.warp holds. opts.model
-- extended when the incremental path applies (its warp kept: it applies while
-- no new value is below the lowest it was chosen on), otherwise a fit
-- warm-started from opts.theta on a warp chosen afresh. Under "auto", when
-- warp.choose's screen picks the log, the GP's likelihood decides between it
-- and the raw values (compare_warps above). It replaced a rule that kept the
-- raw values when a log-warped fit found material noise: on the search suite
-- the likelihood's choice met Levy-10 off-centre's 90th percentile at 100
-- (13.3 against 20.3; CMA-ES 13.8) and did as well or better on noisy Branin
-- and noisy Hartmann-6 at 100 (docs/benchmarks.md "Output warping").
function M._surrogate(X, y, opts, features)
  local prev = opts.model
  if prev ~= nil and not gp.is_model(prev) then
    error("dl.search.bayes_suggest: option 'model' must be info.model of an earlier call", 3)
  end
  if prev and #X >= INCREMENTAL_FROM and #X <= REFIT_GROWTH * prev.fitted and prev.D == features then
    local w = prev.warp or warp.none()
    if (opts.warp == nil or opts.warp == "auto" or opts.warp == w.kind) and covered(w, y) then
      local z = w:apply_all(y)
      if prev:extends(X, z) then                -- (extend checks it again: O(n d), cheap beside the fit)
        local m = prev:extend(X, z)
        m.warp = w
        return m
      end
    end
  end
  local fit_opts = {theta = opts.theta, dim = features, max_points = opts.max_points}
  local w = warp.choose(opts.warp, y)
  local m
  if w.kind ~= "none" and (opts.warp or warp.DEFAULT) == "auto" then w, m = compare_warps(X, y, w, fit_opts) end
  m = m or gp.fit(X, w:apply_all(y), fit_opts)
  m.warp = w
  return m
end

-- the trust region (TuRBO, Eriksson et al. 2019): side length in units of the
-- cube at the start, its bounds, successes to double it, and (failures = d)
-- to halve it; below the minimum it restarts at the initial length
local TR_L0, TR_LMAX, TR_LMIN, TR_SUCCESSES = 0.8, 1.6, 2 ^ -7, 3
M._TR = {L0 = TR_L0, LMAX = TR_LMAX, LMIN = TR_LMIN, SUCCESSES = TR_SUCCESSES}

-- the trust region's own gradient starts (opts.trust_starts): the best this
-- many candidates inside the region, beside the global starts, climb inside it.
-- By default TRUST_STARTS = 4 from TRUST_FROM_D = 8 coordinates on, none below:
-- over seeds 1..40 (search_highdim.lua), Levy-10's median / p90 regret at 50
-- went from 11.7 / 26.7 to 10.9 / 19.5 (at 100: 5.77 / 16.8 to 5.62 / 14.1),
-- while in 4 to 6 dimensions, where 1000 candidates already cover the cube, the
-- changes went both ways within the seeds' spread (Rosenbrock-4 at 50: 378 to
-- 442 over 40 seeds, 415 to 338 in the suite's 20). 8 is a choice between the
-- 6 and the 10 measured (docs/benchmarks.md "Search: trust-region starts").
local TRUST_STARTS, TRUST_FROM_D = 4, 8
M.TRUST_STARTS, M.TRUST_FROM_D = TRUST_STARTS, TRUST_FROM_D

--- _default_trust_starts(points, d) -> 0 below TRUST_FROM_D coordinates, else
-- TRUST_STARTS up to 200 observations, then fewer as acqopt.default_starts does
-- (each step of a start costs O(points^2)): TRUST_STARTS * 200 // points, 0
-- from 801 on.
function M._default_trust_starts(points, d)
  if d < TRUST_FROM_D then return 0 end
  if points <= 200 then return TRUST_STARTS end
  return (TRUST_STARTS * 200) // points
end

--- The trust region of a history: a box of the unit cube centred on the
-- observation with the lowest posterior mean, side L w_k per coordinate with
-- w_k the ARD length scale of the coordinate over their geometric mean (a
-- choice: its block's first feature). L is replayed from the history, so it
-- needs no state: after the `init` first observations, an observation below
-- every earlier one is a success, any other a failure; TR_SUCCESSES successes
-- in a row double L (at most TR_LMAX), d failures in a row halve it. Returns
-- lo, hi (lists of d coordinates) and L, or nil before `init` observations.
function M.trust_region(space, ys, us, obs_mean, theta, init)
  local d = space.d
  if #ys <= init then return nil end
  local L, succ, fail, best = TR_L0, 0, 0, math.huge
  for i = 1, #ys do
    if i > init then
      if ys[i] < best - 1e-3 * math.abs(best) then succ, fail = succ + 1, 0 else succ, fail = 0, fail + 1 end
      if succ >= TR_SUCCESSES then L, succ = math.min(2 * L, TR_LMAX), 0 end
      if fail >= d then L, fail = L / 2, 0 end
      if L < TR_LMIN then L = TR_L0 end
    end
    best = math.min(best, ys[i])
  end
  local bi = 1
  for i = 2, #obs_mean do if obs_mean[i] < obs_mean[bi] then bi = i end end
  local w, lg = {}, 0
  for k, dim in ipairs(space.dims) do
    w[k] = theta[dim.feature]
    lg = lg + w[k] / d
  end
  local lo, hi = {}, {}
  for k = 1, d do
    local half = 0.5 * L * math.exp(w[k] - lg)
    lo[k] = math.max(0, us[bi][k] - half)
    hi[k] = math.min(halton.ONE_BELOW, us[bi][k] + half)
  end
  return lo, hi, L
end

--- Chooses the next n points by noise-aware expected improvement (minimising)
-- under a GP fitted to the feasible observations, times the probability of
-- feasibility from a second GP fitted to the feasible / infeasible labels when
-- any trial was infeasible. The incumbent is the lowest posterior mean over
-- the observed points, not the lowest observation, and the improvement is of
-- the latent function: with noise the best noisy value is biased low and EI
-- below it only explores; without noise the two coincide. Batches use the
-- kriging believer: every pending point and each chosen one joins the model as
-- a noise-free belief at its posterior mean (which may lower the incumbent),
-- so the next choice moves elsewhere. Candidates: half of `candidates` are
-- quasirandom in the trust region around the incumbent (M.trust_region, once
-- `init` observations exist), the rest quasirandom and random over the whole
-- cube, plus perturbations of the five best observations; the best few are
-- refined by a local search whose steps stay inside the trust region, then by
-- a gradient ascent of log EI (dlua.search.acqopt; opts.acq_starts starts, 0 =
-- none; by default none for a batch, n > 1: on Rosenbrock-4 in batches of 4 the
-- ascent pulled the believer's points together, median regret at 50 evaluations
-- 807 with it against 490 without, 40 seeds). opts.batch = "qei": a batch by
-- greedy q-EI (dlua.search.batch). Beside those starts, the best
-- opts.trust_starts (_default_trust_starts) candidates inside the trust region start
-- ascents bounded by it (only where the ascent runs: acq_starts > 0).
-- Without the trust region, on noisy Hartmann-6 EI explores the boundary of
-- the cube where the surrogate is flat (docs/benchmarks.md).
--   history: {{u =, value = number or nil (infeasible)}}, pending: {{u =}}
--   opts: seed, step (suggestion counter, for fresh candidate streams),
--         candidates (1000), mode ("min" | "max"), context, theta (warm start:
--         info.theta of the previous call), max_points (800: the GP's subset
--         size above that many observations), feasibility (false: no
--         feasibility model, infeasible trials only left out of the
--         objective's GP; for comparisons), init (the number of initial
--         non-adaptive observations: the trust region starts after them;
--         dl.search.bayes_suggest, the row dlua.search.algorithms.bayes,
--         fills in its rule), model (info.model of an earlier call on the
--         first of these observations: from 256 observations on, while they
--         are at most 5% more than its fit saw, it takes the new ones by
--         rank-one updates at its hyperparameters instead of a fit), warp
--         ("auto" | "log" | "none": the output warp the GP is fitted to,
--         dlua.search.warp; EI, beliefs and the region's centre are in its units)
-- Returns the list of u and info {theta =, ei =, noise =, model = (model.warp
-- the warp), warp = "log" | "none", region = {lo =, hi =, length =} or nil}.
function M._suggest(space, history, pending, n, opts)
  opts = util.check_options("dl.search.bayes_suggest", opts, BAYES_OPTIONS, 2)
  local bad = M._value_problem(opts) or (opts.theta ~= nil and gp.theta_problem(opts.theta, space.features + 2,
    "info.theta of an earlier call on this space")) or M._history_problem(history)
  if bad then error("dl.search.bayes_suggest: " .. bad, 2) end
  local sign = (opts.mode == "max") and -1 or 1
  local X, y, used, Xall, labels, seen = observations(space, history, sign, opts.context)
  local fitted = M._surrogate(X, y, opts, space.features)   -- on the warped values: fitted.warp
  local model = fitted
  local fmodel = M._feasibility(Xall, labels, opts)
  local obs_mean = fitted:observed_mean()
  local best = math.huge
  for i = 1, #obs_mean do best = math.min(best, obs_mean[i]) end
  if best == math.huge then best = 0 end                -- no feasible observation: the prior mean
  local function believe(x)
    best = math.min(best, (model:predict(x)))
    model = model:believe(x)
    seen[feature_key(x)] = true
  end
  for _, p in ipairs(pending or {}) do believe(space:encode(p.u, opts.context)) end
  local rng, seq = M._streams(space, opts, #history)
  local us = {}
  for i, h in ipairs(used) do us[i] = h.u end
  assert(opts.init, "dlua.search.bayes: opts.init is the row's to fill in")
  -- under noise the region's successes are new lowest posterior means, not lucky draws (dlua.search.nei)
  local tr_y = nei.wanted(opts.acquisition, fitted) and fitted.warp:inverse_all(obs_mean) or y
  local lo, hi, L = M.trust_region(space, tr_y, us, obs_mean, fitted.theta, opts.init)
  local region = lo and {lo = lo, hi = hi} or nil
  -- local candidates around the five observations with the best posterior means
  local order = {}
  for i = 1, #used do order[i] = i end
  table.sort(order, function(a, b) return obs_mean[a] < obs_mean[b] end)
  local centres = {}
  for r = 1, math.min(5, #order) do centres[r] = used[order[r]].u end
  local base = M._candidates(space, opts.candidates or 1000, rng, seq, region, centres)
  local score = nei.scorer(opts.acquisition, fitted, X, obs_mean)    -- nil: analytic EI (dlua.search.nei)
  local raw = function(xs)
    if score then return score(model, xs) end
    return model:ei_many(xs, best)
  end
  local add = function(u) believe(space:encode(u, opts.context)) end
  local qei = n > 1 and opts.batch == "qei"
  if qei then                                       -- a batch by greedy q-EI (dlua.search.batch)
    raw, add = batch.joint(model, best, rngs.rng("bayes-qei", opts.seed or 0, opts.step or #history), n, raw, add,
      function(u) return (space:encode(u, opts.context)) end)
  end
  local acq = M._acquisition(space, opts.context, raw, fmodel, seen)
  local refine = acqopt.refiner(space, {context = opts.context, region = region, acq = acq, theta = fitted.theta,
    points = #X, starts = opts.acq_starts or ((n > 1 or score) and 0 or nil),   -- none under NEI: docs/benchmarks.md
    region_starts = opts.trust_starts or M._default_trust_starts(#X, space.d),
    log_ei = function(xs) return model.c:log_ei(xs, best, true) end})
  local out, eis = M._maximise(space, n, base, acq, rng, region, add, refine)
  return out, {theta = fitted.theta, ei = eis, noise = fitted.noise, model = fitted,
    region = lo and {lo = lo, hi = hi, length = L} or nil, acquisition = qei and "qei" or (score and "nei" or "ei"),
    warp = fitted.warp.kind}
end

----------------------------------------- the parts every acquisition shares
-- (dlua.search.ehvi uses them for several objectives)

--- The feasibility model of the observations' labels (+1 feasible, -1 not):
-- a GP classifier when any observation is infeasible and opts.feasibility is
-- not false, else nil.
function M._feasibility(Xall, labels, opts)
  for _, f in ipairs(labels) do
    if f < 0 and opts.feasibility ~= false then return gp.fit(Xall, labels, {classify = true}) end
  end
  return nil
end

--- The random streams of one suggestion: rng (random candidates, perturbations,
-- the local search) and the Halton sequence, keyed by (seed, step).
function M._streams(space, opts, count)
  local rng = rngs.rng("bayes-candidates", opts.seed or 0, opts.step or count)
  local seq = halton.halton_sequence(space.d, rngs.key("bayes-halton", opts.seed or 0, opts.step or count))
  return rng, seq
end

--- The candidate points: half of ncand quasirandom in region ({lo =, hi =},
-- when given), the rest half quasirandom and half random over the cube, then
-- 40 perturbations (sd 0.2, 0.05, 0.01 in turn) of each point of centres.
function M._candidates(space, ncand, rng, seq, region, centres)
  local d = space.d
  local base = {}
  if region then
    -- half the candidates: the Halton points mapped into the trust region
    local ntr = ncand // 2
    for i = 1, ntr do
      local p = seq:point(i)
      local u = {}
      for k = 1, d do u[k] = region.lo[k] + p[k] * (region.hi[k] - region.lo[k]) end
      base[#base + 1] = u
    end
    ncand = ncand - ntr
  end
  for i = 1, ncand // 2 do base[#base + 1] = seq:point(i) end
  for _ = 1, ncand - ncand // 2 do
    local u = {}
    for k = 1, d do u[k] = rng:uniform() end
    base[#base + 1] = u
  end
  for _, u0 in ipairs(centres) do
    for j = 1, 40 do
      local s = (j % 3 == 0) and 0.2 or ((j % 3 == 1) and 0.05 or 0.01)
      local u = {}
      for k = 1, d do u[k] = math.max(0, math.min(halton.ONE_BELOW, u0[k] + s * rng:normal())) end
      base[#base + 1] = u
    end
  end
  return base
end

--- The acquisition of a list of points: raw(xs) (a list of scores >= 0 at the
-- encoded points), times Pr(feasible) when fmodel is given; candidates below
-- MIN_FEASIBLE rank after every candidate above it, seen points after everything.
function M._acquisition(space, context, raw, fmodel, seen)
  return function(us)
    local xs = {}
    for i, u in ipairs(us) do xs[i] = space:encode(u, context) end
    local a = raw(xs)
    local pf = fmodel and fmodel:prob_feasible_many(xs)
    for i, x in ipairs(xs) do
      if seen[feature_key(x)] then a[i] = -2
      elseif pf then a[i] = pf[i] < MIN_FEASIBLE and pf[i] - 1 or a[i] * pf[i] end
    end
    return a
  end
end

--- The n points of highest acq among base, each refined by a shrinking random
-- local search (the best three, 8 rounds of 4 points) inside region (or the
-- cube), then by refine(scored, top) when given (dlua.search.acqopt's gradient
-- ascent); believe(u) is called with each chosen point but the last, so that acq
-- moves on. Returns the points and their scores.
function M._maximise(space, n, base, acq, rng, region, believe, refine)
  local d = space.d
  local lo, hi = region and region.lo, region and region.hi
  local out, eis = {}, {}
  for _ = 1, n do
    local a = acq(base)
    local scored = {}
    for i, u in ipairs(base) do scored[i] = {u = u, a = a[i]} end
    table.sort(scored, function(p, q) return p.a > q.a end)
    -- refine the best few by a shrinking random local search, 8 rounds of 4 points
    local top = scored[1]
    for t = 1, math.min(3, #scored) do
      local cur = scored[t]
      local step = 0.05
      for _ = 1, 8 do
        local us = {}
        for j = 1, 4 do
          local u = {}
          for k = 1, d do
            u[k] = math.max(lo and lo[k] or 0, math.min(hi and hi[k] or halton.ONE_BELOW, cur.u[k] + step * rng:normal()))
          end
          us[j] = u
        end
        local sa = acq(us)
        local improved = false
        for j = 1, 4 do if sa[j] > cur.a then cur, improved = {u = us[j], a = sa[j]}, true end end
        if not improved then step = step * 0.7 end
      end
      if cur.a > top.a then top = cur end
    end
    if refine then top = refine(scored, top) end
    out[#out + 1] = top.u
    eis[#eis + 1] = top.a
    if #out < n then believe(top.u) end
  end
  return out, eis
end
M._observations = observations
M._feature_key = feature_key

return M
