--- dlua.search.algorithms.bayes: the row of the adaptive algorithm, for
-- exploitation after exploration: its first `init` points are quasirandom ones,
-- then each is chosen by noise-aware expected improvement under a Gaussian
-- process (dlua.search.bayes, which this row wraps; docs/studies.md "bayes").
-- Several objectives are served by ParEGO scalarisations of the history, which
-- the study makes (dlua.search.pareto); batches by kriging beliefs.
local bayes = require "dlua.search.bayes"
local spaces = require "dlua.search.space"
local quasirandom = require "dlua.search.algorithms.quasirandom"

local A = {name = "bayes", adaptive = true, finite = false, batches = true, objectives = true, conditional = true,
           needs_feasible = 2,
           options = {candidates = "integer", feasibility = "boolean", max_points = "integer", theta = "table"}}

--- The initial-point rule, the default of `init` in dl.study and dl.search.suggester
-- and of bayes_suggest's opts.init: quasirandom points before the GP takes over.
function A.init(d) return math.max(5, 2 * (d + 1)) end

-- the initial points are the quasirandom ones (same seed, same cache)
A.point = quasirandom.point

--- suggest(space, history, pending, n, opts) = dl.search.bayes_suggest, with
-- opts.init defaulting to A.init(space.d).
function A.suggest(space, history, pending, n, opts)
  if (opts == nil or type(opts) == "table") and (opts or {}).init == nil and spaces.is_space(space) then
    local o = {}
    for k, v in pairs(opts or {}) do o[k] = v end
    o.init = A.init(space.d)
    opts = o
  end
  return bayes._suggest(space, history, pending, n, opts)
end

--- The GP's fit of a history, for the suggester's best(): fit:observed_mean()
-- is the posterior mean at each feasible observation (signed for minimising).
function A.estimate(space, history, opts)
  local X, y = bayes._observations(space, history, opts.mode == "max" and -1 or 1, opts.context)
  return bayes._surrogate(X, y, opts, space.features)
end

function A.check(space, opts, fail)
  for _, c in ipairs({{"candidates", 1}, {"max_points", 2}}) do
    local v = opts[c[1]]
    if v ~= nil and v < c[2] then fail("option '%s' must be an integer >= %d, got %d", c[1], c[2], v) end
  end
  local theta = opts.theta
  if theta ~= nil then
    local ok = #theta == space.features + 2
    for _, v in ipairs(ok and theta or {}) do ok = ok and spaces._finite(v) end
    if not ok then
      fail("option 'theta' must be a list of %d finite numbers (s:state().theta for this space)", space.features + 2)
    end
  end
end

return A
