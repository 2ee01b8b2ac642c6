--- dlua.search.warp: output warping for dl.search's bayes (issue 35, item 1;
-- docs/studies.md "Output warping"). Objectives such as Rosenbrock span orders
-- of magnitude: a GP on the raw values spends its amplitude on the worst
-- points, standardisation squeezes the good ones into a sliver near its
-- lowest value, and the length scales follow the steep walls instead of the
-- valley. The warp maps the signed (minimising) values y through a monotone
-- increasing z = w(y) before the fit, as OSS Vizier's output warpers and HEBO's
-- power transforms do; the GP, EI, NEI, q-EI, the kriging believer and the
-- trust region's centre all work on z, and what is reported (s:best().estimate)
-- is mapped back by the inverse.
--
--   log:  z = log(1 + (y - m) / s),  m = min y,  s = KAPPA (median y - m)
--         (max y - m when the median is the minimum; the identity when all y
--         are equal). The better half of the values stays on a nearly linear
--         scale, those far above the median on a log scale; s follows the data,
--         so the warp does not depend on the objective's units or offset:
--         w(a y + b) = w(y) for a > 0. Inverse y = m + s (exp(z) - 1).
--   none: z = y.
--   auto: log when it makes the observations more normal than the identity:
--         the profile log-likelihood of an i.i.d. normal model of z with the
--         Jacobian, -n/2 log var(z) - sum log(s + y_i - m), above that of y,
--         -n/2 log var(y) (Box-Cox's rule for its exponent, between two
--         candidates; invariant to the units and the offset of y as well).
--         Skewed, heavy-tailed values (Rosenbrock, Levy) choose log;
--         near-symmetric ones stay linear. That is a screen: when it picks
--         the log, dlua.search.bayes fits the GP to both and keeps the log only
--         when the GP's marginal likelihood of y, the Jacobian included, is
--         higher (the i.i.d. test ignores what the GP explains, and noisy
--         values that the log would stretch near the best lose there).
--
--   local w = warp.choose("auto", y)   -- y: signed values, lowest best
--   w.kind                             -- "log" | "none"
--   w:apply(v), w:inverse(z)           -- one value; :apply_all(y), :inverse_all(zs) lists
--   w:covers(v)                        -- v >= m: apply keeps its meaning (new values of a frozen warp)
--   w:log_jacobian(y)                  -- sum of log dw/dy over y (likelihoods of y through w)
local util = require "dlua.util"

local M = {}

M.WARPS = {"auto", "log", "none"}
-- s as a multiple of the median's distance from the best value. On the search
-- suite (20 seeds; 0.001 with "log", the others with "auto" before bayes's
-- noise rule), Rosenbrock-4's
-- median regret at 50 evaluations was 27.9 / 22.3 / 4.73 / 4.91 for 0.001 /
-- 0.01 / 0.1 / 1 (415 unwarped), its 90th percentile 102 / 160 / 37.9 / 10.2;
-- Levy-10's 90th percentile at 50 was 46.5 / 29.3 / 39.3 / 30 (30 unwarped)
M.KAPPA = 1

local Warp = {}
Warp.__index = Warp

function Warp:apply(v)
  if self.kind == "none" then return v end
  return math.log(1 + (v - self.min) / self.scale)
end

function Warp:inverse(z)
  if self.kind == "none" then return z end
  return self.min + self.scale * (math.exp(z) - 1)
end

function Warp:covers(v) return self.kind == "none" or v >= self.min end

--- sum over y of log dw/dy: the Jacobian term of a likelihood of y through w
-- (0 for the identity; -sum log(s + y_i - m) for the log)
function Warp:log_jacobian(y)
  local l = 0
  if self.kind == "log" then
    for i = 1, #y do l = l - math.log(self.scale + y[i] - self.min) end
  end
  return l
end

function Warp:apply_all(y)
  local z = {}
  for i = 1, #y do z[i] = self:apply(y[i]) end
  return z
end

function Warp:inverse_all(zs)
  local y = {}
  for i = 1, #zs do y[i] = self:inverse(zs[i]) end
  return y
end

--- The identity warp.
function M.none() return setmetatable({kind = "none"}, Warp) end

--- The log warp of the values y (a list, at least one number), or the
-- identity when they are all equal.
function M.log(y)
  local s = {}
  for i = 1, #y do s[i] = y[i] end
  table.sort(s)
  local m, n = s[1], #s
  local med = (n % 2 == 1) and s[(n + 1) // 2] or 0.5 * (s[n // 2] + s[n // 2 + 1])
  local spread = med - m
  if not (spread > 0) then spread = s[n] - m end
  if not (spread > 0 and spread < math.huge) then return M.none() end
  return setmetatable({kind = "log", min = m, scale = M.KAPPA * spread}, Warp)
end

local function log_variance(z)
  local n, mean, ss = #z, 0, 0
  for i = 1, n do mean = mean + z[i] / n end
  for i = 1, n do ss = ss + (z[i] - mean) ^ 2 end
  return math.log(ss / n)
end

--- The profile log-likelihood (up to a constant shared by every warp) of an
-- i.i.d. normal model of w(y), with the Jacobian of w: the criterion of "auto".
function M.loglik(w, y)
  return -0.5 * #y * log_variance(w:apply_all(y)) + w:log_jacobian(y)
end

--- nil, or the message for a bad `warp` option.
function M.problem(kind)
  return util.choice_problem("warp", kind, M.WARPS)
end

--- choose(kind, y) -> the warp of the signed values y for kind ("auto" |
-- "log" | "none"; nil = the default, M.DEFAULT). Fewer than 3 values, or all
-- equal: the identity.
function M.choose(kind, y)
  kind = kind or M.DEFAULT
  if kind == "none" or #y < 3 then return M.none() end
  local w = M.log(y)
  if kind == "log" or w.kind == "none" then return w end
  if M.loglik(w, y) > M.loglik(M.none(), y) then return w end
  return M.none()
end

-- the default: on the search suite "auto" gained on Rosenbrock-4 (alone and in
-- batches), noisy Hartmann-6 and Levy-10 at 100, and no row that met Optuna's
-- best stopped meeting it (docs/benchmarks.md "Output warping")
M.DEFAULT = "auto"

return M
