--- dlua.search.importance: how much each hyperparameter of a space matters
-- to the observed values of a history, by two estimates:
--   gp:     from a GP fitted to the history (engine/search/gp.c, the surrogate of
--           bayes): the relevance 1 / l of each parameter's ARD length scale
--           (a one-hot choice block: sqrt of the sum of 1 / l^2 over its
--           features), normalised to sum to 1 over the parameters. Cheap
--           and smooth, but it measures how fast f varies along a parameter,
--           not how much of the variance it explains.
--   fanova: model-free, a first-order variance decomposition in the spirit of
--           fANOVA (Hutter et al. 2014): the points where the parameter is
--           active are binned by its coordinate (one bin per value for a
--           parameter with at most `bins` values, else `bins` equal-width
--           bins of u), and the importance is the variance of the bin means
--           (weighted by counts) over the total variance: the correlation
--           ratio eta^2, with the omega^2 correction for the variance that
--           noise alone puts between bin means (SS_between - (B - 1)
--           MS_within) / (SS_total + MS_within), clamped to [0, 1]. Not
--           normalised: the parameters' shares need not sum to 1
--           (interactions and noise take the rest).
--   local imp = importance.importance(space, history [, {bins =, context =, theta =}])
--   imp.params[k] --> {name =, gp =, fanova =}, in the space's dimension order
--   imp.theta     --> the GP's hyperparameters (a warm start for the next fit)
local util = require "dlua.util"
local gp = require "dlua.search.gp"
local spaces = require "dlua.search.space"
local bayes = require "dlua.search.bayes"

local M = {}

-- first-order variance share of one dimension: ys with their bin indices
local function omega2(ys, bin_of, nbins)
  local n = #ys
  if n < 3 then return 0 end
  local mean = 0
  for i = 1, n do mean = mean + ys[i] end
  mean = mean / n
  local sum, cnt = {}, {}
  for b = 1, nbins do sum[b], cnt[b] = 0, 0 end
  local sst = 0
  for i = 1, n do
    local b = bin_of[i]
    sum[b], cnt[b] = sum[b] + ys[i], cnt[b] + 1
    sst = sst + (ys[i] - mean) ^ 2
  end
  local ssb, used = 0, 0
  for b = 1, nbins do
    if cnt[b] > 0 then
      ssb = ssb + cnt[b] * (sum[b] / cnt[b] - mean) ^ 2
      used = used + 1
    end
  end
  if sst <= 0 or used < 2 then return 0 end
  local msw = (n > used) and (sst - ssb) / (n - used) or 0
  return math.max(0, math.min(1, (ssb - (used - 1) * msw) / (sst + msw)))
end

--- importance(space, history [, opts]) --> {params = {{name, gp, fanova}}, theta}.
-- history: {{u =, value = number or nil (infeasible, left out)}}; at least 3
-- feasible observations. opts: bins (10: the bins of a parameter with more
-- values than that), context (scientific values conditions test), theta (a
-- warm start of the GP fit, as bayes_suggest's info.theta for this space).
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
  end
  local X, y, used = bayes._observations(space, history, 1, opts.context)
  if #y < 3 then
    error(string.format("dl.search.importance: needs at least 3 feasible observations, got %d", #y), 2)
  end
  local model = gp.fit(X, y, {theta = opts.theta, dim = space.features})
  local params, total = {}, 0
  for k, d in ipairs(space.dims) do
    local width = d.param.kind == "choice" and #d.param.values or 1
    local rel = 0
    for j = d.feature, d.feature + width - 1 do rel = rel + math.exp(-2 * model.theta[j]) end
    rel = math.sqrt(rel)
    total = total + rel
    -- bins over the points where the dimension is active
    local levels = d.param:levels()
    local nb = (levels and levels <= nbins) and levels or nbins
    local ys, bin_of = {}, {}
    for i, h in ipairs(used) do
      local hp, active = space:point(h.u, opts.context)
      if active[k] then
        local b
        if nb == levels then                      -- one bin per value
          b = d.param.kind == "int" and hp[d.name] - d.param.lo + 1 or d.param:index_of(hp[d.name])
        else
          b = math.min(nb - 1, math.floor(h.u[k] * nb)) + 1
        end
        ys[#ys + 1] = y[i]
        bin_of[#bin_of + 1] = b
      end
    end
    params[k] = {name = d.path, gp = rel, fanova = omega2(ys, bin_of, nb)}
  end
  for _, p in ipairs(params) do p.gp = total > 0 and p.gp / total or 0 end
  return {params = params, theta = model.theta}
end

return M
