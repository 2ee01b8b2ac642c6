-- tests/bench/search_bayes.lua -- bayes (GP + expected improvement) against random
-- and quasirandom search at an equal budget on Branin (2-D) and Hartmann-6 (6-D):
-- the best value found in `budget` evaluations, median and quartiles over `seeds`
-- seeds (issue 7's done-when; results in docs/benchmarks.md).
--   dlua tests/bench/search_bayes.lua [seeds=20] [budget=30] [batch=1]
local S = require("dlua").search
local clock = require("dlua.core").clock

local seeds = tonumber(arg and arg[1]) or 20
local budget = tonumber(arg and arg[2]) or 30
local batch = tonumber(arg and arg[3]) or 1

local problems_ = dofile("tests/bench/search_problems.lua")
local function branin(hp) return problems_.branin(hp.x1, hp.x2) end
local function hartmann6(hp) return problems_.hartmann6({hp.x1, hp.x2, hp.x3, hp.x4, hp.x5, hp.x6}) end

local problems = {
  {name = "Branin", f = branin, minimum = 0.397887,
   space = S.space{x1 = S.uniform(-5, 10), x2 = S.uniform(0, 15)}},
  {name = "Hartmann-6", f = hartmann6, minimum = -3.32237,
   space = S.space{x1 = S.uniform(0, 1), x2 = S.uniform(0, 1), x3 = S.uniform(0, 1), x4 = S.uniform(0, 1),
                   x5 = S.uniform(0, 1), x6 = S.uniform(0, 1)}},
}

local function quartiles(v)
  table.sort(v)
  local function q(p)
    local h = (#v - 1) * p + 1
    local lo = math.floor(h)
    return v[lo] + (h - lo) * ((v[lo + 1] or v[lo]) - v[lo])
  end
  return q(0.25), q(0.5), q(0.75)
end

print(string.format("best value after %d evaluations, %d seeds, batch %d (median [25%%, 75%%])", budget, seeds, batch))
print("| function | minimum | random | quasirandom | bayes | bayes wins (of seeds, vs random) | bayes s/suggestion |")
print("|---|---|---|---|---|---|---|")
for _, pr in ipairs(problems) do
  local res, wins, t_bayes, n_bayes = {}, 0, 0, 0
  for _, alg in ipairs({"random", "quasirandom", "bayes"}) do
    res[alg] = {}
    for seed = 1, seeds do
      local s = S.suggester(pr.space, {algorithm = alg, seed = seed, mode = "min"})
      local n = 0
      while n < budget do
        local t0 = clock()
        local sugs = s:suggest(math.min(batch, budget - n))
        if alg == "bayes" and n >= s.init then t_bayes, n_bayes = t_bayes + clock() - t0, n_bayes + #sugs end
        for _, sg in ipairs(sugs) do s:observe(sg, pr.f(sg.hp)); n = n + 1 end
      end
      res[alg][seed] = s:best().value
    end
  end
  for seed = 1, seeds do if res.bayes[seed] < res.random[seed] then wins = wins + 1 end end
  local cells = {}
  for _, alg in ipairs({"random", "quasirandom", "bayes"}) do
    local a, m, b = quartiles({table.unpack(res[alg])})
    cells[#cells + 1] = string.format("%.3f [%.3f, %.3f]", m, a, b)
  end
  print(string.format("| %s | %.3f | %s | %s | %s | %d / %d | %.3f |", pr.name, pr.minimum, cells[1], cells[2], cells[3],
    wins, seeds, t_bayes / math.max(1, n_bayes)))
end
