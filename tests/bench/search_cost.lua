-- tests/bench/search_cost.lua -- CPU seconds of one bayes suggestion after n
-- observations in 6-D (noisy Hartmann-6) and 20-D (a noisy shifted Ackley; Rosenbrock, whose
-- skewed values make the output warp compare two fits), the
-- histories quasirandom points: cold (no warm start, no previous model), warm
-- (one more observation, theta of a previous warm-started call, as in a study's
-- sequence of fits) and incremental (that call's model extended by the new
-- observation, as dl.search.suggester does);
-- median of `reps` runs, os.clock CPU time (issue 35 item 5: <= 0.5 s at 2,000 in
-- 20-D; results in docs/benchmarks.md "Search: quality and cost").
-- With `quality`, instead: the held-out error of the GP fitted by the default
-- rules against the exact fit (coarse_points = 0, fit_points = 0: three starts on
-- all max_points points), on histories half quasirandom, half near the optimum.
--   dlua tests/bench/search_cost.lua [reps=3] [sizes=500,1000,2000] [quality]
local S = require("dlua").search
local bayes = require "dlua.search.bayes"
local gp = require "dlua.search.gp"

local reps = tonumber(arg and arg[1]) or 3
local sizes = {}
for v in ((arg and arg[2]) or "500,1000,2000"):gmatch("%d+") do sizes[#sizes + 1] = tonumber(v) end
local quality = arg and arg[3] == "quality"
local incremental = bayes._surrogate ~= nil            -- absent before the incremental path

local P = dofile("tests/bench/search_problems.lua")

local function ackley(u)                             -- on [-2.5, 1.5]^d, minimum 0 at u = 0.625
  local x = {}
  for k = 1, #u do x[k] = 4 * u[k] - 2.5 end
  return P.ackley(x)
end

local function rosenbrock(u)                         -- on [-5, 10]^d: values over orders of magnitude
  local x = {}
  for k = 1, #u do x[k] = 15 * u[k] - 5 end
  return P.rosenbrock(x)
end

-- the third row's skewed values make the output warp's "auto" fit twice (log and raw, compared
-- by the GP's likelihood: dlua.search.bayes compare_warps); the others stay unwarped
local PROBLEMS = {{d = 6, f = P.hartmann6, noise = 0.33, best = function(k) return P.HARTMANN6_ARGMIN[k] end},
                  {d = 20, f = ackley, noise = 0.2, best = function() return 0.625 end},
                  {d = 20, f = rosenbrock, noise = 0, best = function() return 0.4 end}}

local function median(v)
  table.sort(v)
  return v[(#v + 1) // 2]
end

local function timed(fn)
  local t0 = os.clock()
  local a, b = fn()
  return os.clock() - t0, a, b
end

-- held-out RMSE and mean negative log predictive density (noise included) of
-- models fitted to n points of pr, the points odd: quasirandom, even: normal
-- around the optimum (sd 0.15, clipped), as a search's history is
local function quality_row(pr, n, variants)
  local rng, seq = S.rng("search-cost-quality", pr.d, n), S.halton_sequence(pr.d, 7)
  local function point(i, r)
    if i % 2 == 1 then return seq:point(i) end
    local u = {}
    for k = 1, pr.d do u[k] = math.max(0, math.min(1, pr.best(k) + 0.15 * r:normal())) end
    return u
  end
  local X, y, Xt, ft = {}, {}, {}, {}
  for i = 1, n do X[i] = point(i, rng); y[i] = pr.f(X[i]) + pr.noise * rng:normal() end
  for i = 1, 400 do Xt[i] = point(n + 2 * i, rng); ft[i] = pr.f(Xt[i]) end
  local cells = {}
  for _, v in ipairs(variants) do
    local t0 = os.clock()
    local m = gp.fit(X, y, v)
    local t = os.clock() - t0
    local mu, var = m:predict_many(Xt)
    local se, nl = 0, 0
    for i = 1, #Xt do
      local s2 = var[i] + m.noise
      se = se + (mu[i] - ft[i]) ^ 2
      nl = nl + 0.5 * math.log(2 * math.pi * s2) + 0.5 * (ft[i] - mu[i]) ^ 2 / s2
    end
    cells[#cells + 1] = string.format("%.4f / %.3f / %.2f", math.sqrt(se / #Xt), nl / #Xt, t)
  end
  return table.concat(cells, " | ")
end

local f = io.popen("sh tests/bench/machine.sh")
print(f:read("a"))
f:close()
if quality then
  print("held-out RMSE / NLPD / cold fit CPU s of the GP, 400 test points (noise sd 0.33 in 6-D, 0.2 in 20-D)")
  print("| d | observations | exact fit (3 starts on max_points) | default rules |")
  print("|---|---|---|---|")
  for _, pr in ipairs(PROBLEMS) do
    for _, n in ipairs(sizes) do
      print(string.format("| %d | %d | %s |", pr.d, n, quality_row(pr, n, {{coarse_points = 0, fit_points = 0}, {}})))
      io.stdout:flush()
    end
  end
  os.exit(0)
end
print(string.format("CPU seconds per bayes suggestion, median of %d (os.clock)", reps))
print("| d | observations | GP points | acquisition | warp | cold | warm | incremental |")
print("|---|---|---|---|---|---|---|---|")
for _, pr in ipairs(PROBLEMS) do
  local t = {}
  for j = 1, pr.d do t["x" .. j] = S.uniform(0, 1) end
  local space = S.space(t)
  for _, n in ipairs(sizes) do
    local noise = S.rng("search-cost", pr.d, n)
    local seq = S.halton_sequence(pr.d, 7)
    local hist = {}
    for i = 1, n + 1 do
      local u = seq:point(i)
      hist[i] = {u = u, value = pr.f(u) + pr.noise * noise:normal()}
    end
    local last = table.remove(hist)
    local cold, warm, inc, info = {}, {}, {}, nil
    for r = 1, reps do
      local _
      cold[r], _, info = timed(function() return S.bayes_suggest(space, hist, {}, 1, {seed = 1, step = n}) end)
    end
    local _, prev = S.bayes_suggest(space, hist, {}, 1, {seed = 1, step = n, theta = info.theta})
    info = prev
    hist[#hist + 1] = last
    for r = 1, reps do
      warm[r] = timed(function() return S.bayes_suggest(space, hist, {}, 1, {seed = 1, step = n + 1,
        theta = info.theta}) end)
      if incremental then
        inc[r] = timed(function() return S.bayes_suggest(space, hist, {}, 1, {seed = 1, step = n + 1,
          theta = info.theta, model = info.model}) end)
      end
    end
    table.remove(hist)
    print(string.format("| %d | %d | %d | %s | %s | %.3f | %.3f | %s |", pr.d, n, info.model.c:points(),
      info.acquisition or "ei", info.warp or "none", median(cold),
      median(warm), incremental and string.format("%.3f", median(inc)) or "-"))
    io.stdout:flush()
  end
end
f = io.popen("uptime")
print("end: " .. f:read("l"))
f:close()
