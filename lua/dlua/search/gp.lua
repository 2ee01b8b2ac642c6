--- dlua.gp: the Gaussian-process surrogate behind dl.search's `bayes`
-- algorithm, in plain Lua doubles (studies have tens to hundreds of trials,
-- so an O(n^3) Cholesky per fit is cheap next to one training run).
--
--   local model = gp.fit(X, y)              -- X: list of feature vectors, y: numbers
--   local mean, var = model:predict(x)
--   model:expected_improvement(x)           -- for minimisation of y
--   model:believe(x)                        -- a new model with (x, mean(x)) added
--
-- Kernel: Matern 5/2 with one length scale per feature (ARD), an amplitude and
-- a noise variance, on y standardised to mean 0 and variance 1. The
-- hyperparameters maximise the log marginal likelihood plus weak log-normal
-- priors, by iRprop- on the analytic gradient from two starts (a warm start
-- when given, and a default), inside fixed bounds. `classify = true` fits ±1
-- feasibility labels by the same regression (labels centred, not scaled) and
-- gives prob_feasible(x) = Phi(mean / sd). Nothing here knows about search
-- spaces: features are numbers in [0, 1].
local M = {}

local SQRT5 = math.sqrt(5)
local LOG2PI = math.log(2 * math.pi)

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

------------------------------------------------------------ linear algebra

-- lower Cholesky factor of the n x n matrix A (row tables), or nil when not PD
local function cholesky(A, n)
  local L = {}
  for i = 1, n do L[i] = {} end
  for j = 1, n do
    local s = A[j][j]
    local Lj = L[j]
    for k = 1, j - 1 do s = s - Lj[k] * Lj[k] end
    if s <= 0 or s ~= s then return nil end
    local d = math.sqrt(s)
    Lj[j] = d
    for i = j + 1, n do
      local Li = L[i]
      local t = A[i][j]
      for k = 1, j - 1 do t = t - Li[k] * Lj[k] end
      Li[j] = t / d
    end
  end
  return L
end

-- solves L z = b (forward)
local function forward(L, b, n)
  local z = {}
  for i = 1, n do
    local s = b[i]
    local Li = L[i]
    for k = 1, i - 1 do s = s - Li[k] * z[k] end
    z[i] = s / Li[i]
  end
  return z
end

-- solves L^T z = b (backward)
local function backward(L, b, n)
  local z = {}
  for i = n, 1, -1 do
    local s = b[i]
    for k = i + 1, n do s = s - L[k][i] * z[k] end
    z[i] = s / L[i][i]
  end
  return z
end

M.cholesky, M.forward, M.backward = cholesky, forward, backward

------------------------------------------------------------------- kernel

-- theta = {log l_1..D, log sf2, log sn2}
local function kern(x1, x2, inv_l2, sf2, D)
  local r2 = 0
  for d = 1, D do
    local t = x1[d] - x2[d]
    r2 = r2 + t * t * inv_l2[d]
  end
  local r = math.sqrt(r2)
  return sf2 * (1 + SQRT5 * r + 5 / 3 * r2) * math.exp(-SQRT5 * r)
end

local function unpack_theta(theta, D)
  local inv_l2 = {}
  for d = 1, D do inv_l2[d] = math.exp(-2 * theta[d]) end
  return inv_l2, math.exp(theta[D + 1]), math.exp(theta[D + 2])
end

local PRIOR = {l_mu = math.log(0.5), l_sd = 1.0, sf_mu = 0, sf_sd = 1.0, sn_mu = math.log(1e-3), sn_sd = 3.0}

local function bounds(D, classify)
  local lo, hi = {}, {}
  if classify then
    -- feasibility labels (+-1): a smooth surface at the scale of the space, unit
    -- amplitude, some slack at the boundary; otherwise the fit interpolates the
    -- step exactly with tiny length scales and says 0.5 everywhere else
    for d = 1, D do lo[d], hi[d] = math.log(0.3), math.log(20) end
    lo[D + 1], hi[D + 1] = math.log(0.5), math.log(2)
    lo[D + 2], hi[D + 2] = math.log(1e-3), math.log(0.3)
    return lo, hi
  end
  for d = 1, D do lo[d], hi[d] = math.log(0.02), math.log(20) end
  lo[D + 1], hi[D + 1] = math.log(0.05), math.log(20)
  lo[D + 2], hi[D + 2] = math.log(1e-6), math.log(1)
  return lo, hi
end

-- log marginal likelihood + log prior, and its gradient in theta
local function objective(X, y, theta, D, want_grad)
  local n = #X
  local inv_l2, sf2, sn2 = unpack_theta(theta, D)
  local K = {}
  for i = 1, n do
    K[i] = {}
    for j = 1, i do
      local k = kern(X[i], X[j], inv_l2, sf2, D)
      K[i][j] = k
      K[j][i] = k
    end
    K[i][i] = K[i][i] + sn2 + 1e-9
  end
  local L = cholesky(K, n)
  if not L then return -math.huge end
  local alpha = backward(L, forward(L, y, n), n)
  local lml = 0
  for i = 1, n do lml = lml - 0.5 * y[i] * alpha[i] - math.log(L[i][i]) end
  lml = lml - 0.5 * n * LOG2PI
  local g = {}
  local P = PRIOR
  for d = 1, D do
    local z = (theta[d] - P.l_mu) / P.l_sd
    lml = lml - 0.5 * z * z
    g[d] = -z / P.l_sd
  end
  local zf = (theta[D + 1] - P.sf_mu) / P.sf_sd
  local zn = (theta[D + 2] - P.sn_mu) / P.sn_sd
  lml = lml - 0.5 * zf * zf - 0.5 * zn * zn
  g[D + 1] = -zf / P.sf_sd
  g[D + 2] = -zn / P.sn_sd
  if not want_grad then return lml end
  -- W = alpha alpha^T - K^-1 ; dL/dtheta_j = 1/2 sum_ij W_ij dK_ij
  local Kinv = {}
  for j = 1, n do
    local e = {}
    for i = 1, n do e[i] = (i == j) and 1 or 0 end
    Kinv[j] = backward(L, forward(L, e, n), n)   -- column j (K is symmetric)
  end
  local gl, gf, gn = {}, 0, 0
  for d = 1, D do gl[d] = 0 end
  for i = 1, n do
    local xi = X[i]
    for j = 1, i do
      local w = alpha[i] * alpha[j] - Kinv[j][i]
      local mult = (i == j) and 0.5 or 1.0                  -- symmetric: off-diagonal pairs twice
      local xj = X[j]
      local r2 = 0
      for d = 1, D do local t = xi[d] - xj[d]; r2 = r2 + t * t * inv_l2[d] end
      local r = math.sqrt(r2)
      local e = math.exp(-SQRT5 * r)
      local k = sf2 * (1 + SQRT5 * r + 5 / 3 * r2) * e
      gf = gf + mult * w * k
      if i ~= j then
        local c = mult * w * sf2 * (5 / 3) * (1 + SQRT5 * r) * e
        for d = 1, D do
          local t = xi[d] - xj[d]
          gl[d] = gl[d] + c * t * t * inv_l2[d]
        end
      else
        gn = gn + mult * w * sn2
      end
    end
  end
  for d = 1, D do g[d] = g[d] + gl[d] end
  g[D + 1] = g[D + 1] + gf
  g[D + 2] = g[D + 2] + gn
  return lml, g
end
M._objective = objective

-- iRprop- ascent inside the bounds
local function rprop(X, y, theta, D, iters, classify)
  local lo, hi = bounds(D, classify)
  local m = D + 2
  local t = {}
  for j = 1, m do t[j] = math.max(lo[j], math.min(hi[j], theta[j])) end
  local step, prev = {}, {}
  for j = 1, m do step[j], prev[j] = 0.3, 0 end
  local best, best_t = -math.huge, {table.unpack(t)}
  for _ = 1, iters do
    local f, g = objective(X, y, t, D, true)
    if f == -math.huge then break end
    if f > best then best, best_t = f, {table.unpack(t)} end
    for j = 1, m do
      local s = g[j] * prev[j]
      if s > 0 then step[j] = math.min(step[j] * 1.2, 1.0)
      elseif s < 0 then step[j] = math.max(step[j] * 0.5, 1e-3); g[j] = 0 end
      if g[j] > 0 then t[j] = t[j] + step[j] elseif g[j] < 0 then t[j] = t[j] - step[j] end
      t[j] = math.max(lo[j], math.min(hi[j], t[j]))
      prev[j] = g[j]
    end
  end
  local f = objective(X, y, t, D, false)
  if f > best then best, best_t = f, t end
  return best_t, best
end

--------------------------------------------------------------------- model

local Model = {}
Model.__index = Model

local function factor(self)
  local n, D = #self.X, self.D
  local inv_l2, sf2, sn2 = unpack_theta(self.theta, D)
  self.inv_l2, self.sf2, self.sn2 = inv_l2, sf2, sn2
  local jitter = 1e-9
  for _ = 1, 8 do
    local K = {}
    for i = 1, n do
      K[i] = {}
      for j = 1, i do
        local k = kern(self.X[i], self.X[j], inv_l2, sf2, D)
        K[i][j] = k
        K[j][i] = k
      end
      K[i][i] = K[i][i] + sn2 + jitter
    end
    local L = cholesky(K, n)
    if L then
      self.L = L
      self.alpha = backward(L, forward(L, self.ys, n), n)
      return
    end
    jitter = jitter * 100
  end
  error("dlua.gp: the kernel matrix is not positive definite", 0)
end

--- fit(X, y [, {theta =, iters =, classify =}]) --> model
function M.fit(X, y, opts)
  opts = opts or {}
  local n = #X
  local D = n > 0 and #X[1] or (opts.dim or 1)
  local self = setmetatable({X = {}, D = D, n = n, classify = opts.classify}, Model)
  for i = 1, n do self.X[i] = X[i] end
  local mean, sd = 0, 1
  if opts.classify and n > 0 then                       -- labels: prior mean = their mean, unscaled
    local s = 0
    for i = 1, n do s = s + y[i] end
    mean = s / n
  elseif n > 0 then
    local s = 0
    for i = 1, n do s = s + y[i] end
    mean = s / n
    local v = 0
    for i = 1, n do v = v + (y[i] - mean) ^ 2 end
    sd = n > 1 and math.sqrt(v / n) or 1
    if not (sd > 1e-12) then sd = 1 end
  end
  self.mean, self.sd = mean, sd
  self.ys = {}
  local best = math.huge
  for i = 1, n do
    self.ys[i] = (y[i] - mean) / sd
    if self.ys[i] < best then best = self.ys[i] end
  end
  self.best = n > 0 and best or 0
  local default = {}
  for d = 1, D do default[d] = math.log(0.5) end
  default[D + 1] = 0
  default[D + 2] = math.log(1e-3)
  if n == 0 then
    self.theta = opts.theta and #opts.theta == D + 2 and opts.theta or default
  else
    -- a warm start (the previous fit) needs few steps; a cold fit tries two starts
    local starts, iters = {default, {}}, opts.iters or 30
    for d = 1, D do starts[2][d] = math.log(2) end
    starts[2][D + 1], starts[2][D + 2] = 0, math.log(0.05)
    if opts.theta and #opts.theta == D + 2 then starts, iters = {opts.theta}, opts.iters or 15 end
    local bt, bf = nil, -math.huge
    for _, s in ipairs(starts) do
      local t, f = rprop(self.X, self.ys, s, D, iters, opts.classify)
      if f > bf then bt, bf = t, f end
    end
    self.theta = bt or default
    self.lml = bf
  end
  factor(self)
  return self
end

--- Posterior mean and variance of the latent function at x (in y's units).
function Model:predict(x)
  local n = #self.X
  if n == 0 then return self.mean, self.sf2 * self.sd * self.sd end
  local ks = {}
  for i = 1, n do ks[i] = kern(x, self.X[i], self.inv_l2, self.sf2, self.D) end
  local mu = 0
  for i = 1, n do mu = mu + ks[i] * self.alpha[i] end
  local v = forward(self.L, ks, n)
  local var = self.sf2
  for i = 1, n do var = var - v[i] * v[i] end
  if var < 1e-12 then var = 1e-12 end
  return self.mean + self.sd * mu, var * self.sd * self.sd, ks, v
end

--- Expected improvement below the best training value (minimisation), in
-- standardised units.
function Model:expected_improvement(x)
  local mu, var = self:predict(x)
  mu = (mu - self.mean) / self.sd
  local s = math.sqrt(var) / self.sd
  local imp = self.best - mu
  if s < 1e-9 then return math.max(imp, 0) end
  local z = imp / s
  return imp * M.normal_cdf(z) + s * M.normal_pdf(z)
end

--- Probability that x is feasible (a model fitted with classify = true).
function Model:prob_feasible(x)
  local mu, var = self:predict(x)
  return M.normal_cdf(mu / math.sqrt(var))
end

--- A new model with (x, mean(x)) added (the kriging believer), same hyperparameters.
function Model:believe(x)
  local mu = self:predict(x)
  local o = setmetatable({}, Model)
  for k, v in pairs(self) do o[k] = v end
  o.X, o.ys = {}, {}
  for i = 1, #self.X do o.X[i], o.ys[i] = self.X[i], self.ys[i] end
  o.X[#o.X + 1] = x
  o.ys[#o.ys + 1] = (mu - self.mean) / self.sd
  factor(o)
  return o
end

return M
