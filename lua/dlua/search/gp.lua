--- dlua.search.gp: the Gaussian-process surrogate behind dl.search's `bayes`
-- algorithm, a thin layer over the C implementation (engine/search/gp.c, LAPACK).
--
--   local model = gp.fit(X, y [, {theta =, classify =}])  -- X: list of feature vectors, y: numbers
--   local mean, var = model:predict(x)                      -- latent function at x, y's units
--   local means, vars = model:predict_many(Xs)
--   model:incumbent()              -- index and posterior mean of the best training point
--   model:ei_many(Xs, best)        -- expected improvement below best (minimisation)
--   model:nei(Xb, z):eval(Xs)      -- noisy EI over the baseline points Xb (dlua.search.nei)
--   model:believe(x)               -- a new model with (x, mean(x)) added, noise-free
--   model.theta                    -- plain data: the warm start of the next fit
--   model:extend(X, y)             -- with the observations beyond its own, same theta: O(n^2) each
--
-- Kernel: Matern 5/2 with one length scale per feature (ARD), an amplitude and
-- a noise variance, on y standardised to mean 0 and variance 1. The
-- hyperparameters maximise the log marginal likelihood plus weak log-normal
-- priors by a bound-constrained L-BFGS on the analytic gradient: a cold fit
-- runs three starts (a default, a smooth one, a noisy one), a warm fit (theta
-- given) runs from theta and, on up to `coarse_points` points, from the noisy
-- start too (a warm start alone stays in an interpolating basin: with few noisy
-- points, short length scales and noise explain them about equally well). Above `max_points` (800) points the fit uses
-- a subset: the best quarter by y plus a greedy maximin space-filling choice
-- of the rest. The cost above a size (engine/search/gp.h): a cold fit on more
-- than `coarse_points` (128) points runs its starts on that many evenly spaced
-- ones (every n / 128-th), then one start on all; a fit on more than
-- `coarse_points` runs at most `fine_iters` (30) iterations; above
-- `fit_points` (512) points the hyperparameters are those of 512 evenly spaced
-- points (the posterior still conditions on max_points). theta = {log l_1 ..
-- log l_D, log sf2, log sn2}. `classify = true` fits +-1 feasibility labels by the same regression (labels centred, not
-- scaled) and gives prob_feasible(x) = Phi(mean / sd). Nothing here knows
-- about search spaces: features are numbers in [0, 1].
local core = require "dlua.core"
local util = require "dlua.util"

local M = {}

-------------------------------------------------------------- normal helpers

-- erfc with relative error below 1.2e-7 everywhere (Numerical Recipes' erfcc)
local function erfc(x)
  local z = math.abs(x)
  local t = 1 / (1 + 0.5 * z)
  local r = t * math.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
    t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 +
    t * 0.17087277)))))))))
  if x >= 0 then return r end
  return 2 - r
end

function M.normal_cdf(z) return 0.5 * erfc(-z / math.sqrt(2)) end
function M.normal_pdf(z) return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi) end

-- the standard normal quantile, p in (0, 1): Acklam's rational approximation
-- (relative error below 1.2e-9)
local QA = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
            -3.066479806614716e+01, 2.506628277459239e+00}
local QB = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
            -1.328068155288572e+01}
local QC = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
            4.374664141464968e+00, 2.938163982698783e+00}
local QD = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00}

function M.normal_quantile(p)
  if p < 0.02425 or p > 1 - 0.02425 then
    local q = math.sqrt(-2 * math.log(p < 0.5 and p or 1 - p))
    local x = (((((QC[1] * q + QC[2]) * q + QC[3]) * q + QC[4]) * q + QC[5]) * q + QC[6]) /
              ((((QD[1] * q + QD[2]) * q + QD[3]) * q + QD[4]) * q + 1)
    return p < 0.5 and x or -x
  end
  local q = p - 0.5
  local r = q * q
  return (((((QA[1] * r + QA[2]) * r + QA[3]) * r + QA[4]) * r + QA[5]) * r + QA[6]) * q /
         (((((QB[1] * r + QB[2]) * r + QB[3]) * r + QB[4]) * r + QB[5]) * r + 1)
end

--------------------------------------------------------------------- model

local Model = {}
Model.__index = Model

local FIT_KEYS = {classify = true, coarse_points = true, dim = true, fine_iters = true, fit_points = true,
                  iters = true, max_points = true, starts = true, theta = true}

-- X, y: the observations the model was fitted to (all of them, also when the
-- fit used a subset); fitted: how many there were at its hyperparameter fit
local function wrap(c, X, y, fitted)
  return setmetatable({c = c, D = c:dim(), X = X, y = y, fitted = fitted, theta = c:theta(), lml = c:lml(),
    noise = c:noise(), mean = c:mean(), sd = c:sd()}, Model)
end

function M.is_model(m) return getmetatable(m) == Model end

--- theta_problem(theta, n [, what]) -> nil when theta is a list of n finite numbers, else
-- "option 'theta' must be a list of n finite numbers (what), got ..." (what: where the
-- caller's theta comes from). The one check of a GP warm start: fit, bayes_suggest,
-- the suggester, importance.
function M.theta_problem(theta, n, what)
  local ok = type(theta) == "table" and #theta == n and util.list_stray_key(theta) == nil
  for i = 1, ok and n or 0 do ok = ok and util.finite(theta[i]) end
  if ok then return nil end
  return string.format("option 'theta' must be a list of %d finite numbers%s, got %s", n,
    what and (" (" .. what .. ")") or "", type(theta) == "table" and (#theta .. " value(s)") or type(theta))
end

--- fit(X, y [, opts]) --> model. opts: theta (warm start, D + 2 finite numbers, else an error),
-- classify, dim (when X is empty), iters (L-BFGS iterations per start, 60),
-- starts (starts optimised; default 3 cold, or 1 warm plus the noisy one up to
-- coarse_points points), max_points (800),
-- coarse_points (128), fine_iters (30), fit_points (512): the cost rules above
-- (0 turns coarse_points or fit_points off).
function M.fit(X, y, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if not FIT_KEYS[k] then
      error(string.format("dlua.gp.fit: unknown option '%s' (valid: classify, coarse_points, dim, fine_iters, " ..
        "fit_points, iters, max_points, starts, theta)", tostring(k)), 2)
    end
  end
  local D = #X > 0 and #X[1] or opts.dim
  local theta = opts.theta
  if theta ~= nil then              -- a warm start of another length (another space) is the caller's to refuse
    local bad = M.theta_problem(theta, (D or 0) + 2)
    if bad then error("dlua.gp.fit: " .. bad, 2) end
  end
  local c = core._gp_fit(X, y, {theta = theta, classify = opts.classify or false, dim = opts.dim,
    iters = opts.iters, starts = opts.starts, max_points = opts.max_points, coarse_points = opts.coarse_points,
    fine_iters = opts.fine_iters, fit_points = opts.fit_points})
  local m = wrap(c, X, y, #X)
  m.full = c:points() == #X                       -- false: fitted to a subset
  return m
end

--- extends(X, y) --> true when the model's observations are the first ones
-- of (X, y) (same features, same values) and it holds no beliefs, so
-- extend(X, y) applies.
function Model:extends(X, y)
  local own, oy = self.X, self.y
  if self.beliefs or #own > #X or #X ~= #y or (#X > 0 and #X[1] ~= self.D) then return false end
  for i = 1, #own do
    if oy[i] ~= y[i] then return false end
    local a, b = own[i], X[i]
    if a ~= b then
      for k = 1, self.D do if a[k] ~= b[k] then return false end end
    end
  end
  return true
end

--- A new model with the observations of (X, y) beyond the model's own (which
-- must be their first ones: Model:extends) added at the fitted noise, same
-- hyperparameters and standardisation: a rank-one extension of the Cholesky
-- factor per point, O(points^2) each, instead of a fit. Exactly the posterior
-- of that GP on all the points (the model's subset, if any, plus the new ones).
function Model:extend(X, y)
  if not self:extends(X, y) then
    error("dlua.gp: extend: the model's observations are not the first ones of (X, y)", 2)
  end
  local c = self.c:clone()
  for i = #self.X + 1, #X do c:add(X[i], y[i], self.noise) end
  local o = wrap(c, X, y, self.fitted)
  o.full = self.full
  o.theta, o.lml = self.theta, self.lml
  return o
end

--- Posterior mean and variance of the latent function at x (in y's units).
function Model:predict(x)
  local m, v = self.c:predict({x})
  return m[1], v[1]
end

--- Means and variances at a list of feature vectors.
function Model:predict_many(Xs) return self.c:predict(Xs) end

--- Posterior means at the observed points X of the fit (beliefs excluded):
-- O(n) from the factor, or a prediction when the fit used a subset.
function Model:observed_mean()
  local n = #self.X
  if self.full then
    local mu = self.c:train_mean()
    for i = #mu, n + 1, -1 do mu[i] = nil end
    return mu
  end
  return (self.c:predict(self.X, false))
end

--- The observed point with the lowest posterior mean: index into X, mean (nil,
-- math.huge without observations). With noise this estimates the best point;
-- the lowest noisy y is biased low (the winner's curse).
function Model:incumbent()
  local mu = self:observed_mean()
  local bi, bm = nil, math.huge
  for i = 1, #mu do if mu[i] < bm then bi, bm = i, mu[i] end end
  return bi, bm
end

--- Noisy expected improvement (engine/search/gp_nei.c): an object whose
-- eval(Xs) gives, at each point, the EI of the latent function below the
-- lowest of its values at the baseline points Xb, averaged over the joint
-- posterior samples drawn from the base samples z (a list of S lists of #Xb
-- standard normal numbers). It keeps the model alive; the same z, the same values.
function Model:nei(Xb, z) return self.c:nei(Xb, z) end

--- Expected improvement below best at each of Xs (minimisation, y's units);
-- with noise (a variance), the augmented EI: times 1 - sqrt(noise / (var + noise)).
function Model:ei_many(Xs, best, noise) return self.c:ei(Xs, best, noise) end

--- Expected improvement at x below best (default: the incumbent's posterior mean).
function Model:expected_improvement(x, best)
  if best == nil then best = select(2, self:incumbent()) end
  return self.c:ei({x}, best)[1]
end

--- Probability that x is feasible (a model fitted with classify = true).
function Model:prob_feasible(x)
  local mu, var = self:predict(x)
  return M.normal_cdf(mu / math.sqrt(var))
end

--- Probabilities of feasibility at a list of feature vectors.
function Model:prob_feasible_many(Xs)
  local mu, var = self.c:predict(Xs)
  local out = {}
  for i = 1, #mu do out[i] = M.normal_cdf(mu[i] / math.sqrt(var[i])) end
  return out
end

--- A new model with (x, mean(x)) added as a noise-free belief about the latent
-- function (the kriging believer), same hyperparameters: a rank-one update.
-- Noise-free because a belief with the fitted noise barely lowers the variance
-- at x when the noise is large, and a batch would then repeat one point.
function Model:believe(x)
  local mu = self:predict(x)
  local c = self.c:clone()
  c:add(x, mu, 0)
  local o = wrap(c, self.X, self.y, self.fitted)
  o.full = self.full
  o.theta, o.lml = self.theta, self.lml
  o.beliefs = (self.beliefs or 0) + 1
  return o
end

--- log marginal likelihood + log prior of (X, y) as given (no standardisation)
-- at theta, and its gradient when want_grad (for tests).
function M._objective(X, y, theta, _, want_grad)
  local v, g = core._gp_objective(X, y, theta)
  if v == -math.huge then return v end
  if want_grad then return v, g end
  return v
end

return M
