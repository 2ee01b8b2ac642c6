-- tests/bench/search_highdim.lua -- simple regret of dl.search's bayes where issue 35
-- item 2 found it behind Optuna: Levy-10, and Rosenbrock-4 in batches of 4, next to
-- Ackley-5, Rosenbrock-4 one at a time, Hartmann-6 and Branin (no regression).
-- Regret: the true function at the suggester's reported best (s:best()) minus the
-- minimum after 50 and 100 evaluations, median and 90th percentile over seeds
-- 1..`seeds`. A batch problem asks s:suggest(4) and observes all four before the
-- next ask. The digest sums every suggested coordinate times its position: equal
-- digests mean the same suggestions. Levy-10 q4 and Hartmann-6 q4 (batches of 4) run only
-- when named. Optuna's side: tests/bench/search_highdim_optuna.py.
--   dlua tests/bench/search_highdim.lua [seeds=20] [problem name | all] [budgets=50,100] [key=value,...]
-- The last argument adds suggester options, for before / after comparisons:
-- acq_starts=0 (no gradient search), batch=believer (kriging believer batches).
local S = require("dlua").search

local seeds = tonumber(arg and arg[1]) or 20
local only = arg and arg[2] ~= "all" and arg[2] or nil
local BUDGETS = {}
for v in ((arg and arg[3]) or "50,100"):gmatch("%d+") do BUDGETS[#BUDGETS + 1] = tonumber(v) end
local EXTRA = {}
for k, v in ((arg and arg[4]) or ""):gmatch("([%w_]+)=([%w_]+)") do EXTRA[k] = math.tointeger(tonumber(v)) or v end

local P = dofile("tests/bench/search_problems.lua")

local function box(d, a, b)
  local t = {}
  for j = 1, d do t["x" .. j] = S.uniform(a, b) end
  return S.space(t)
end

local function on(f, d)
  return function(hp)
    local x = {}
    for j = 1, d do x[j] = hp["x" .. j] end
    return f(x)
  end
end

local PROBLEMS = {
  {name = "Levy-10", f = on(P.levy, 10), minimum = 0, space = box(10, -10, 10)},
  {name = "Ackley-5", f = on(P.ackley, 5), minimum = 0, space = box(5, -32.768, 32.768)},
  {name = "Rosenbrock-4", f = on(P.rosenbrock, 4), minimum = 0, space = box(4, -5, 10)},
  {name = "Rosenbrock-4 q4", f = on(P.rosenbrock, 4), minimum = 0, space = box(4, -5, 10), batch = 4},
  {name = "Hartmann-6", f = on(P.hartmann6, 6), minimum = P.HARTMANN6_MIN, space = box(6, 0, 1)},
  {name = "Branin", f = function(hp) return P.branin(hp.x1, hp.x2) end, minimum = 0.397887,
   space = S.space{x1 = S.uniform(-5, 10), x2 = S.uniform(0, 15)}},
  -- batches of 4 on two more problems: only when named
  {name = "Levy-10 q4", f = on(P.levy, 10), minimum = 0, space = box(10, -10, 10), batch = 4, large = true},
  {name = "Hartmann-6 q4", f = on(P.hartmann6, 6), minimum = P.HARTMANN6_MIN, space = box(6, 0, 1), batch = 4,
   large = true},
}

dofile("tests/bench/search_regret_run.lua"){problems = PROBLEMS, budgets = BUDGETS, seeds = seeds, only = only,
                                           extra = EXTRA, note = arg and arg[4]}
