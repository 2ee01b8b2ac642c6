-- tests/bench/search_regret.lua -- simple regret of dl.search's bayes at 50 and 100
-- evaluations on Branin (2-D), Hartmann-6, Ackley-5, Rosenbrock-4 and a mixed space
-- (continuous, log-scale, integer and categorical parameters): the true function at
-- the suggester's reported best (s:best()) minus the minimum, median and 90th
-- percentile over seeds 1..`seeds` (issue 35: the cost work must leave these alone;
-- docs/benchmarks.md "Search: quality and cost"). The digest column sums every
-- suggested coordinate times its position: equal digests mean the same suggestions.
-- Ackley-20 (on [-5, 10]^20) runs only when named, for the budgets where the GP's
-- cost rules act (more than 128 and 256 observations).
--   dlua tests/bench/search_regret.lua [seeds=10] [problem name | all] [budgets=50,100] [key=value,...]
-- The last argument adds suggester options (acq_starts=0: without the gradient search).
local S = require("dlua").search

local seeds = tonumber(arg and arg[1]) or 10
local only = arg and arg[2] ~= "all" and arg[2] or nil
local BUDGETS = {}
for v in ((arg and arg[3]) or "50,100"):gmatch("%d+") do BUDGETS[#BUDGETS + 1] = tonumber(v) end
local EXTRA = {}
for k, v in ((arg and arg[4]) or ""):gmatch("([%w_]+)=([%w_]+)") do EXTRA[k] = math.tointeger(tonumber(v)) or v end

local P = dofile("tests/bench/search_problems.lua")

local vec = P.vec

local function branin(hp) return P.branin(hp.x1, hp.x2) end
local function hartmann6(hp) return P.hartmann6(vec(hp, 6)) end
local function ackley(hp) return P.ackley(vec(hp, 5)) end
local function rosenbrock(hp) return P.rosenbrock(vec(hp, 4)) end
local function ackley20(hp) return P.ackley(vec(hp, 20)) end

local mixed = P.mixed                   -- the minimum 0 at x = 0.3, lr = 1e-3, n = 7, kind = "b"

local function box(d, a, b)
  local t = {}
  for j = 1, d do t["x" .. j] = S.uniform(a, b) end
  return S.space(t)
end

local PROBLEMS = {
  {name = "Branin", f = branin, minimum = 0.397887, space = S.space{x1 = S.uniform(-5, 10), x2 = S.uniform(0, 15)}},
  {name = "Hartmann-6", f = hartmann6, minimum = P.HARTMANN6_MIN, space = box(6, 0, 1)},
  {name = "Ackley-5", f = ackley, minimum = 0, space = box(5, -32.768, 32.768)},
  {name = "Rosenbrock-4", f = rosenbrock, minimum = 0, space = box(4, -5, 10)},
  {name = "mixed", f = mixed, minimum = 0,
   space = S.space{x = S.uniform(0, 1), lr = S.log_uniform(1e-5, 1e-1), n = S.int(1, 20),
                   kind = S.choice{"a", "b", "c"}}},
  {name = "Ackley-20", f = ackley20, minimum = 0, space = box(20, -5, 10), large = true},
}

local f = io.popen("sh tests/bench/machine.sh")
print(f:read("a"))
f:close()
dofile("tests/bench/search_regret_run.lua"){problems = PROBLEMS, budgets = BUDGETS, seeds = seeds, only = only,
                                           extra = EXTRA}
