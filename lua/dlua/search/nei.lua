--- dlua.search.nei: noisy expected improvement for dl.search's bayes (the
-- `acquisition` option; docs/studies.md "Noisy trials").
--
-- With noisy trials nobody knows the incumbent: the lowest observation is
-- biased low (the winner's curse) and the lowest posterior mean at an observed
-- point is itself uncertain. Noisy EI (Letham et al. 2019; BoTorch's qNEI with
-- one point) integrates over it: for each of S joint posterior samples of the
-- latent function at the baseline (the observed points) and at the candidate,
-- the improvement of the candidate below the sample's best baseline value,
-- averaged (engine/search/gp_nei.c; the candidate's own value is integrated
-- analytically given the baseline's). The base samples are fixed: scrambled
-- Halton points of a fixed key mapped through the normal quantile, so a
-- suggestion is a pure function of its inputs. Without noise NEI is EI below
-- the lowest posterior mean (the same choice as "ei" up to Monte-Carlo error).
--
--   local score = nei.scorer(opts.acquisition, fitted, X, obs_mean)  -- nil: analytic EI
--   score(model, xs) --> NEI at each of xs (model: fitted, or it with kriging beliefs)
local gp = require "dlua.search.gp"
local util = require "dlua.util"
local halton = require "dlua.search.halton"
local rngs = require "dlua.search.rng"

local M = {}

-- S, the base samples; the baseline's size: the observed points with the lowest
-- posterior means (the others are almost never a sample's best, and the cost of
-- preparing is O(n^2 nb))
M.SAMPLES, M.BASELINE = 128, 32
-- "auto" uses NEI when the fitted noise variance is at least this fraction of
-- the GP's amplitude (both standardised): noise sd >= 10% of the signal's. Below
-- it NEI and EI choose alike; noiseless fits sit near 1e-6, and near 1e-3 (the
-- noise prior's median) before the data pin the noise down; noisy Hartmann-6
-- (sd 10% of the range) fits 0.05-0.1, Ackley-5's ruggedness 0.01-0.03
M.AUTO_NOISE = 1e-2
M.ACQUISITIONS = {"auto", "ei", "nei"}

local base_cache = {}                   -- base samples by "nb,S": the same for every suggestion

--- The base samples for nb baseline points: S lists of nb standard normal numbers,
-- point s of a scrambled Halton sequence in nb dimensions (fixed key) mapped
-- through the normal quantile.
function M.base_samples(nb, S)
  S = S or M.SAMPLES
  local key = nb .. "," .. S
  local z = base_cache[key]
  if z then return z end
  local seq = halton.halton_sequence(nb, rngs.key("nei-base-samples", 0, 0))
  z = {}
  for s = 1, S do
    local p, row = seq:point(s), {}
    for j = 1, nb do row[j] = gp.normal_quantile(math.min(math.max(p[j], 1e-12), 1 - 1e-12)) end
    z[s] = row
  end
  base_cache[key] = z
  return z
end

--- nil, or the message for a bad `acquisition` option.
function M.problem(acquisition)
  return util.choice_problem("acquisition", acquisition, M.ACQUISITIONS)
end

--- Does `acquisition` ("auto" | "ei" | "nei" | nil = "auto") choose NEI for a
-- fitted model? "auto": when its noise variance is at least AUTO_NOISE of its
-- amplitude in standardised units (theta's last two entries).
function M.wanted(acquisition, fitted)
  if acquisition == "nei" then return true end
  if acquisition == "ei" then return false end
  local t, D = fitted.theta, fitted.D
  return #fitted.X >= 2 and math.exp(t[D + 2] - t[D + 1]) >= M.AUTO_NOISE
end

--- The baseline: the observed points X with the BASELINE lowest posterior means
-- obs_mean (distinct points; ties by position).
function M.baseline(X, obs_mean)
  local order = {}
  for i = 1, #X do order[i] = i end
  table.sort(order, function(a, b)
    if obs_mean[a] ~= obs_mean[b] then return obs_mean[a] < obs_mean[b] end
    return a < b
  end)
  local out, seen = {}, {}
  for _, i in ipairs(order) do
    local key = table.concat(X[i], ",")
    if not seen[key] then
      seen[key] = true
      out[#out + 1] = X[i]
      if #out == M.BASELINE then break end
    end
  end
  return out
end

--- The NEI scorer of a suggestion, or nil when `acquisition` chooses analytic EI
-- for the fitted model: score(model, xs) with model the fitted one or it with
-- kriging beliefs (a new model per belief: prepared again when it changes).
function M.scorer(acquisition, fitted, X, obs_mean)
  if #X == 0 or not M.wanted(acquisition, fitted) then return nil end
  local Xb = M.baseline(X, obs_mean)
  local z = M.base_samples(#Xb)
  local last, prepared
  return function(model, xs)
    if model ~= last then last, prepared = model, model:nei(Xb, z) end
    return prepared:eval(xs)
  end
end

return M
