--- dlua.search.importance: how much each hyperparameter of a space matters to
-- the observed values of a history, by one definition, which dl.study_results,
-- results.json, the printed summary of a study and the HTML report all show:
-- a functional ANOVA of a GP (method "gp-fanova"). A GP is fitted to the
-- feasible observations (engine/search/gp.c, the surrogate of bayes); the share
-- of parameter k is the first-order (main-effect) share of the variance of the
-- GP's posterior mean mu over the region of the space where k is active:
--   B = the first 256 points of a fixed scrambled Halton sequence of the cube
--       at which k is active (under the context), G = the grid of k's
--       coordinate (the centre of each value when k has at most `bins` values,
--       else `bins` equal cells), F[g][b] = mu(b with u_k = g):
--   share_k = Var_g(mean_b F[g][b]) / Var_{g,b}(F[g][b]), in [0, 1].
-- The shares need not sum to 1 (interactions take the rest). A parameter active
-- in fewer than 3 feasible observations (a conditional parameter of another
-- branch, e.g. momentum when the optimizer is adam) gets no share at all
-- (share = nil, trials = the observations where it is active): inactive
-- parameters take nothing. Replaces two earlier estimates (the ARD relevance
-- 1/l and a binned omega^2) that ranked the relevant parameters first less
-- often at small n (2 relevant of 5 at 30 points, 20 seeds: 20 of 20 against
-- 8 of 20 for the binned estimate; docs/studies.md).
--   local imp = importance.importance(space, history [, {bins =, context =, theta =}])
--   imp.params[k] --> {name =, share = number or nil, trials =}, in the space's dimension order
--   imp.method    --> "gp-fanova" (also dl.search.importance_method)
--   imp.theta     --> the GP's hyperparameters (a warm start for the next fit)
local util = require "dlua.util"
local gp = require "dlua.search.gp"
local spaces = require "dlua.search.space"
local bayes = require "dlua.search.bayes"
local halton = require "dlua.search.halton"

local M = {}

M.importance_method = "gp-fanova"

-- GP functional ANOVA: the first-order share of dimension k of the posterior
-- mean mu over the region where k is active: base points B (quasirandom points
-- of the cube where k is active), a grid G of k's coordinate (the centre of
-- each value, or `bins` equal cells), F[g][b] = mu(b with u_k = g);
-- share = Var_g(mean_b F[g][b]) / Var_{g,b}(F[g][b]).
local BASE = 256

local function gp_share(space, model, k, nbins, context)
  local d = space.dims[k]
  local levels = d.param:levels()
  local ng = (levels and levels <= nbins) and levels or nbins
  local seq = halton.halton_sequence(space.d, 7919)
  local base = {}
  for i = 1, BASE do
    local u = seq:point(i)
    local _, active = space:point(u, context)
    if active[k] then base[#base + 1] = u end
  end
  if #base < 2 then return 0 end
  local Xs = {}
  for g = 1, ng do
    for _, u in ipairs(base) do
      local v = {}
      for j = 1, space.d do v[j] = u[j] end
      v[k] = (g - 0.5) / ng
      Xs[#Xs + 1] = (space:encode(v, context))
    end
  end
  local mu = model:predict_many(Xs)
  local nb, all, sum2 = #base, 0, 0
  for i = 1, #mu do all = all + mu[i] end
  all = all / #mu
  for i = 1, #mu do sum2 = sum2 + (mu[i] - all) ^ 2 end
  local total = sum2 / #mu
  if total <= 0 then return 0 end
  local main = 0
  for g = 1, ng do
    local m = 0
    for b = 1, nb do m = m + mu[(g - 1) * nb + b] end
    main = main + (m / nb - all) ^ 2
  end
  return math.max(0, math.min(1, main / ng / total))
end

--- importance(space, history [, opts]) --> {params = {{name, share, trials}}, method, theta}.
-- history: {{u =, value = number or nil (infeasible, left out)}}; at least 3
-- feasible observations. opts: bins (10: the grid cells of a parameter with
-- more values than that), context (scientific values conditions test), theta (a
-- warm start of the GP fit, as bayes_suggest's info.theta for this space: space.features
-- + 2 finite numbers, else an error).
function M.importance(space, history, opts)
  opts = util.check_options("dl.search.importance", opts, {bins = "integer", context = "table", theta = "table"}, 2)
  if not spaces.is_space(space) then
    error("dl.search.importance: argument 1 must be a space (dl.search.space), got " .. type(space), 2)
  end
  if type(history) ~= "table" then
    error("dl.search.importance: argument 2 must be a list of {u =, value =}, got " .. type(history), 2)
  end
  local nbins = opts.bins or 10
  if nbins < 2 then error("dl.search.importance: option 'bins' must be >= 2, got " .. nbins, 2) end
  for i, h in ipairs(history) do
    if type(h) ~= "table" or type(h.u) ~= "table" or #h.u ~= space.d then
      error(string.format("dl.search.importance: history[%d] must be {u = %d coordinates, value =}", i, space.d), 2)
    end
    if h.value ~= nil and type(h.value) ~= "number" then
      error(string.format("dl.search.importance: history[%d].value must be a number or nil (infeasible), got %s",
        i, type(h.value)), 2)
    end
  end
  local bad = opts.theta ~= nil and gp.theta_problem(opts.theta, space.features + 2,
    "imp.theta or bayes_suggest's info.theta for this space")
  if bad then error("dl.search.importance: " .. bad, 2) end
  local X, y, used = bayes._observations(space, history, 1, opts.context)
  if #y < 3 then
    error(string.format("dl.search.importance: needs at least 3 feasible observations, got %d", #y), 2)
  end
  local model = gp.fit(X, y, {theta = opts.theta, dim = space.features})
  local params = {}
  for k, d in ipairs(space.dims) do
    local n = 0
    for _, h in ipairs(used) do
      local _, active = space:point(h.u, opts.context)
      if active[k] then n = n + 1 end
    end
    params[k] = {name = d.path, trials = n, share = n >= 3 and gp_share(space, model, k, nbins, opts.context) or nil}
  end
  return {params = params, theta = model.theta, method = M.importance_method}
end

return M
