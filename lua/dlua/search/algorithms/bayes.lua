--- dlua.search.algorithms.bayes: the row of the adaptive algorithm, for
-- exploitation after exploration: its first `init` points are the centre of the
-- space and quasirandom ones, then each is chosen by noise-aware expected
-- improvement under a Gaussian process (dlua.search.bayes, which this row wraps;
-- docs/studies.md "bayes").
-- Several objectives (opts.mode a list of modes, history values lists): 2 or 3
-- by expected hypervolume improvement (dlua.search.ehvi), more, or pareto =
-- {method = "parego"}, by ParEGO scalarisations of the history
-- (dlua.search.pareto); batches by kriging beliefs.
local bayes = require "dlua.search.bayes"
local gp = require "dlua.search.gp"
local ehvi = require "dlua.search.ehvi"
local pareto = require "dlua.search.pareto"
local spaces = require "dlua.search.space"
local quasirandom = require "dlua.search.algorithms.quasirandom"
local util = require "dlua.util"

local A = {name = "bayes", adaptive = true, finite = false, batches = true, objectives = true, conditional = true,
           needs_feasible = 2,
           options = {candidates = "integer>=1", feasibility = "boolean", max_points = "integer>=2", theta = "table",
                      pareto = "table", acq_starts = "integer>=0", batch = "string", acquisition = "string",
                      racing = "integer>=2", trust_starts = "integer>=0", warp = "string", best = "string"}}

--- The initial-point rule, the default of `init` in dl.study and dl.search.suggester
-- and of bayes_suggest's opts.init: initial points (A.point) before the GP takes over.
function A.init(d) return math.max(5, 2 * (d + 1)) end

--- Initial point i: the centre of the cube first (every coordinate 1/2: the middle
-- of each range, the geometric middle of a log range, the middle value of an
-- integer or a choice; where Ax's default strategy and CMA-ES start), then the
-- quasirandom points in their order (point i is quasirandom point i - 1, same seed,
-- same cache).
function A.point(space, i, opts)
  if i == 1 then
    local u = {}
    for k = 1, space.d do u[k] = 0.5 end
    return u
  end
  return quasirandom.point(space, i - 1, opts)
end

-- several objectives: EHVI for 2 or 3 unless pareto.method = "parego"; ParEGO
-- with this suggestion's weights (seed, step) otherwise. info.method says which,
-- info.fallback why ParEGO serves a study that asked for EHVI.
local function several(space, history, pending, n, opts)
  local modes = opts.mode
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  if #modes == 1 then
    o.mode, o.pareto = modes[1], nil
    return bayes._suggest(space, history, pending, n, o)
  end
  local method = opts.pareto and opts.pareto.method or "ehvi"
  if method == "ehvi" and #modes <= ehvi.MAX_OBJECTIVES then return ehvi._suggest(space, history, pending, n, opts) end
  o.mode, o.pareto = "min", nil
  local hist = pareto.parego(history, modes, pareto.parego_weights(#modes, opts.seed or 0, opts.step or #history))
  local us, info = bayes._suggest(space, hist, pending, n, o)
  info.method = "parego"
  if method == "ehvi" then
    info.fallback = string.format("ParEGO: EHVI serves %d objectives at most, and there are %d",
      ehvi.MAX_OBJECTIVES, #modes)
  end
  return us, info
end

--- suggest(space, history, pending, n, opts) = dl.search.bayes_suggest, with
-- opts.init defaulting to A.init(space.d). opts.mode a list of modes: several
-- objectives, history's entries {u =, values = one number per mode, or nil}.
function A.suggest(space, history, pending, n, opts)
  if (opts == nil or type(opts) == "table") and (opts or {}).init == nil and spaces.is_space(space) then
    local o = {}
    for k, v in pairs(opts or {}) do o[k] = v end
    o.init = A.init(space.d)
    opts = o
  end
  if type(opts) == "table" and type(opts.mode) == "table" then return several(space, history, pending, n, opts) end
  return bayes._suggest(space, history, pending, n, opts)
end

--- The GP's fit of a history, for the suggester's best(): fit:observed_mean()
-- is the posterior mean at each feasible observation (signed for minimising,
-- output-warped: fit.warp:inverse maps it back to the signed values).
function A.estimate(space, history, opts)
  local X, y = bayes._observations(space, history, opts.mode == "max" and -1 or 1, opts.context)
  return bayes._surrogate(X, y, opts, space.features)
end

function A.check(space, opts, fail)
  local k = type(opts.mode) == "table" and #opts.mode or 1
  local bad = ehvi._pareto_problem(opts.pareto, k) or bayes._value_problem(opts) or
    util.choice_problem("best", opts.best, {"estimate", "observed"})
  if bad then fail("%s", bad) end
  if opts.racing ~= nil and k > 1 then fail("option 'racing' serves one objective, and mode lists %d", k) end
  if opts.best ~= nil and k > 1 then fail("option 'best' serves one objective (s:best()), and mode lists %d", k) end
  if opts.theta ~= nil then
    -- one GP's, or (several objectives, EHVI) one per objective one after another
    local n = ehvi._theta_length(space.features, k, opts.pareto)
    bad = gp.theta_problem(opts.theta, n, "s:state().theta for this space")
    if bad then fail("%s", bad) end
  end
end

return A
