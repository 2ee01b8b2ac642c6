-- tests/bench/search_problems.lua -- the test functions of the search benchmarks
-- (search_regret.lua, search_cost.lua, search_suite.lua), on plain lists of numbers:
--   local P = dofile("tests/bench/search_problems.lua")
--   P.branin(x1, x2), P.hartmann6(x), P.ackley(x), P.rosenbrock(x), P.levy(x), P.zdt(x, square), P.dtlz2(x [, at])
-- and the suite's problem table, P.suite() (its Python twin: search_suite_problems.py, whose
-- PROBLEMS list the same problems in the same order; tests/lua/search_suite_spec.lua checks
-- that the two agree).
local P = {}

function P.branin(x1, x2)               -- minimum 0.397887 on [-5, 10] x [0, 15]
  local b, c, t = 5.1 / (4 * math.pi ^ 2), 5 / math.pi, 1 / (8 * math.pi)
  return (x2 - b * x1 ^ 2 + c * x1 - 6) ^ 2 + 10 * (1 - t) * math.cos(x1) + 10
end

local ALPHA = {1.0, 1.2, 3.0, 3.2}
local A = {{10, 3, 17, 3.5, 1.7, 8}, {0.05, 10, 17, 0.1, 8, 14}, {3, 3.5, 1.7, 10, 17, 8}, {17, 8, 0.05, 10, 0.1, 14}}
local PP = {{1312, 1696, 5569, 124, 8283, 5886}, {2329, 4135, 8307, 3736, 1004, 9991},
            {2348, 1451, 3522, 2883, 3047, 6650}, {4047, 8828, 8732, 5743, 1091, 381}}
P.HARTMANN6_MIN, P.HARTMANN6_ARGMIN = -3.32237, {0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573}

function P.hartmann6(x)                 -- on [0, 1]^6
  local f = 0
  for i = 1, 4 do
    local s = 0
    for j = 1, 6 do s = s + A[i][j] * (x[j] - PP[i][j] * 1e-4) ^ 2 end
    f = f - ALPHA[i] * math.exp(-s)
  end
  return f
end

function P.ackley(x)                    -- minimum 0 at 0
  local s1, s2 = 0, 0
  for j = 1, #x do s1, s2 = s1 + x[j] ^ 2, s2 + math.cos(2 * math.pi * x[j]) end
  return -20 * math.exp(-0.2 * math.sqrt(s1 / #x)) - math.exp(s2 / #x) + 20 + math.exp(1)
end

function P.rosenbrock(x)                -- minimum 0 at (1, ..., 1)
  local f = 0
  for j = 1, #x - 1 do f = f + 100 * (x[j + 1] - x[j] ^ 2) ^ 2 + (1 - x[j]) ^ 2 end
  return f
end

function P.levy(x)                      -- minimum 0 at (1, ..., 1), on [-10, 10]^d
  local w = {}
  for j = 1, #x do w[j] = 1 + (x[j] - 1) / 4 end
  local f = math.sin(math.pi * w[1]) ^ 2
  for j = 1, #w - 1 do f = f + (w[j] - 1) ^ 2 * (1 + 10 * math.sin(math.pi * w[j] + 1) ^ 2) end
  return f + (w[#w] - 1) ^ 2 * (1 + math.sin(2 * math.pi * w[#w]) ^ 2)
end

-- the off-centre controls: a search that starts at the centre of the box (dlua's bayes, CMA-ES)
-- finds Ackley-5's minimum (the centre) and comes within 1.44 of Levy-10's (1 from the centre)
-- on its first point, and lands on DTLZ2's front; these move the minimum (the front) away from the centre
P.ACKLEY5_ARGMIN = {12, -20, 7, -9, 16}
P.LEVY10_ARGMIN = {6, -6, 4, -3, 7, -1, 5, -5, 3, -2}
P.DTLZ2_AT = 0.8              -- DTLZ2's front at x3..x6 = 0.8 (0.5 in its definition: the centre is on the front)

--- f moved so that its minimum, at `at` in every coordinate, lies at argmin.
function P.shifted(f, argmin, at)
  return function(x)
    local y = {}
    for j = 1, #x do y[j] = x[j] - argmin[j] + at end
    return f(y)
  end
end

-- a mixed space: the minimum 0 at x = 0.3, lr = 1e-3, n = 7, kind = "b"
local KIND = {a = 0.5, b = 0, c = 1.0}
function P.mixed(hp)
  return (hp.x - 0.3) ^ 2 * 4 + (math.log10(hp.lr) + 3) ^ 2 / 4 + ((hp.n - 7) / 10) ^ 2 + KIND[hp.kind]
end

-- a conditional space: model "linear" (lr, l2; its best 0.2 at lr = 1e-2, l2 = 0.7) or "tree"
-- (depth, frac; the minimum 0 at depth = 8, frac = 0.25)
function P.conditional(hp)
  if hp.model == "linear" then return 0.2 + (math.log10(hp.lr) + 2) ^ 2 / 4 + (hp.l2 - 0.7) ^ 2 end
  return ((hp.depth - 8) / 4) ^ 2 + 4 * (hp.frac - 0.25) ^ 2
end

function P.zdt(x, square)               -- ZDT1 (square false), ZDT2 (true): 2 objectives
  local s = 0
  for i = 2, #x do s = s + x[i] end
  local g = 1 + 9 * s / (#x - 1)
  local r = x[1] / g
  return {x[1], g * (1 - (square and r ^ 2 or math.sqrt(r)))}
end

function P.dtlz2(x, at)                 -- 3 objectives; the front: the unit sphere's octant, at x3.. = at (0.5)
  local g = 0
  for i = 3, #x do g = g + (x[i] - (at or 0.5)) ^ 2 end
  local a, b = x[1] * math.pi / 2, x[2] * math.pi / 2
  return {(1 + g) * math.cos(a) * math.cos(b), (1 + g) * math.cos(a) * math.sin(b), (1 + g) * math.sin(a)}
end

local function vec(hp, d)
  local x = {}
  for j = 1, d do x[j] = hp["x" .. j] end
  return x
end
P.vec = vec

--- The search benchmark suite's problems, in order (tests/bench/search_suite.lua): add one here
-- and in search_suite_problems.py. Fields: name, kind ("single": simple regret, lower better;
-- "multi": hypervolume, higher better; "prune": recorded learning curves), space (dl.search),
-- f(hp), minimum, sd (Gaussian noise on each observation; regret is the true function's),
-- streams (noise streams), batch (suggestions at once), k and ref (objectives, hypervolume
-- reference point), argmin (a point where f = minimum, checked by the spec), curves and rule
-- (pruning: the recorded curves and dlua's rules, named).
function P.suite()
  local S = require("dlua").search
  local function box(d, a, b)
    local t = {}
    for j = 1, d do t["x" .. j] = S.uniform(a, b) end
    return S.space(t)
  end
  local function named(xs)
    local t = {}
    for j, v in ipairs(xs) do t["x" .. j] = v end
    return t
  end
  local function const(d, v)
    local t = {}
    for j = 1, d do t["x" .. j] = v end
    return t
  end
  local branin_space = S.space{x1 = S.uniform(-5, 10), x2 = S.uniform(0, 15)}
  local branin_range = 308.129 - 0.397887   -- max - min over the domain: the noise's sd is 10% of it
  local h6 = {}
  for j = 1, 6 do h6["x" .. j] = P.HARTMANN6_ARGMIN[j] end
  local function single(t)
    t.kind, t.sd, t.streams, t.batch = "single", t.sd or 0, t.streams or 1, t.batch or 1
    return t
  end
  local function multi(name, f, k)
    local ref = {}
    for j = 1, k do ref[j] = 1.1 end
    return {name = name, kind = "multi", space = box(6, 0, 1), f = function(hp) return f(vec(hp, 6)) end, k = k,
            ref = ref, sd = 0, streams = 1, batch = 1}
  end
  local function branin(hp) return P.branin(hp.x1, hp.x2) end
  local function hartmann6(hp) return P.hartmann6(vec(hp, 6)) end
  return {
    single{name = "Branin", space = branin_space, f = branin, minimum = 0.397887, argmin = {x1 = math.pi, x2 = 2.275}},
    single{name = "Hartmann-6", space = box(6, 0, 1), f = hartmann6, minimum = P.HARTMANN6_MIN, argmin = h6},
    single{name = "Ackley-5", space = box(5, -32.768, 32.768), f = function(hp) return P.ackley(vec(hp, 5)) end,
           minimum = 0, argmin = const(5, 0)},
    single{name = "Rosenbrock-4", space = box(4, -5, 10), f = function(hp) return P.rosenbrock(vec(hp, 4)) end,
           minimum = 0, argmin = const(4, 1)},
    single{name = "Levy-10", space = box(10, -10, 10), f = function(hp) return P.levy(vec(hp, 10)) end,
           minimum = 0, argmin = const(10, 1)},
    single{name = "Ackley-20", space = box(20, -5, 10), f = function(hp) return P.ackley(vec(hp, 20)) end,
           minimum = 0, argmin = const(20, 0)},
    single{name = "Ackley-5 off-centre", space = box(5, -32.768, 32.768), minimum = 0, argmin = named(P.ACKLEY5_ARGMIN),
           f = function(hp) return P.shifted(P.ackley, P.ACKLEY5_ARGMIN, 0)(vec(hp, 5)) end},
    single{name = "Levy-10 off-centre", space = box(10, -10, 10), minimum = 0, argmin = named(P.LEVY10_ARGMIN),
           f = function(hp) return P.shifted(P.levy, P.LEVY10_ARGMIN, 1)(vec(hp, 10)) end},
    single{name = "noisy Branin", space = branin_space, f = branin, minimum = 0.397887, sd = 0.1 * branin_range,
           streams = 3, argmin = {x1 = -math.pi, x2 = 12.275}},
    single{name = "noisy Hartmann-6", space = box(6, 0, 1), f = hartmann6, minimum = P.HARTMANN6_MIN,
           sd = 0.1 * -P.HARTMANN6_MIN, streams = 3, argmin = h6},
    single{name = "mixed", f = P.mixed, minimum = 0, argmin = {x = 0.3, lr = 1e-3, n = 7, kind = "b"},
           space = S.space{x = S.uniform(0, 1), lr = S.log_uniform(1e-5, 1e-1), n = S.int(1, 20),
                           kind = S.choice{"a", "b", "c"}}},
    single{name = "conditional", f = P.conditional, minimum = 0, argmin = {model = "tree", depth = 8, frac = 0.25},
           space = S.space{model = S.choice{"linear", "tree"},
                           lr = S.log_uniform(1e-4, 1):when{model = "linear"}, l2 = S.uniform(0, 1):when{model = "linear"},
                           depth = S.int(1, 12):when{model = "tree"}, frac = S.uniform(0, 1):when{model = "tree"}}},
    single{name = "Rosenbrock-4 in batches of 4", space = box(4, -5, 10), batch = 4, minimum = 0, argmin = const(4, 1),
           f = function(hp) return P.rosenbrock(vec(hp, 4)) end},
    multi("ZDT1", function(x) return P.zdt(x, false) end, 2),
    multi("ZDT2", function(x) return P.zdt(x, true) end, 2),
    multi("DTLZ2", P.dtlz2, 3),
    multi("DTLZ2 off-centre", function(x) return P.dtlz2(x, P.DTLZ2_AT) end, 3),
    -- pruning: dlua's rules with the settings of the five pruners the Optuna side runs
    -- (search_suite_optuna.py PRUNERS); each side's row is its best by median, the same selection.
    -- Optuna's n_warmup_steps = 300 judges the report at step 300 (it skips step < 300); dlua's
    -- warmup judges the evals after it, so the same setting is warmup = 299
    {name = "Fashion-MNIST pruning", kind = "prune", curves = "tests/bench/results/fashion_curves.json",
     rules = {{"median (judged from step 300, min_trials 3)", {algorithm = "median", warmup = 299, min_trials = 3}},
              {"asha (100, 3)", {algorithm = "asha", min_steps = 100, reduction = 3}},
              {"asha (100, 2)", {algorithm = "asha", min_steps = 100, reduction = 2}},
              {"hyperband (100, 3)", {algorithm = "hyperband", min_steps = 100, reduction = 3}},
              {"hyperband (100, 2)", {algorithm = "hyperband", min_steps = 100, reduction = 2}}}},
  }
end

return P
