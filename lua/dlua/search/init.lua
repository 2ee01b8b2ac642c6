--- dlua.search: search spaces and the algorithms that sample them (playbook 2.4,
-- FAQ "why quasi-random search", and PLAYBOOK.md "What the engine's sampler
-- should do").
--
--   local S = dl.search
--   local space = S.space{
--     lr = S.log_uniform(1e-4, 1e-1), momentum = S.uniform(0.8, 0.99):when{optimizer = "sgd"},
--     optimizer = S.choice{"sgd", "adam"}, width = S.int(16, 512, {log = true}), steps = 1000,
--   }
--   local hps = S.sample(space, 20, {algorithm = "quasirandom", seed = 7})   -- 20 hparam tables
--   local s = S.suggester(space, {algorithm = "bayes", seed = 0, mode = "max"})
--   local sug = s:suggest(); s:observe(sug, value)                           -- ask / tell
--
-- Every sampled parameter owns one coordinate of the unit cube [0, 1)^d; a
-- point u of the cube maps to hyperparameters coordinate by coordinate
-- (docs/api/search.md lists the mapping of each type). Plain values are fixed
-- and own no coordinate. Conditional parameters own their coordinate always
-- and are left out of the hyperparameters where their condition fails (the
-- playbook's "sample every branch's dimensions and ignore inactive ones").
--
-- quasirandom is a scrambled Halton sequence: bases are the first d primes,
-- each digit position of each base has its own random permutation of the
-- digits, drawn from a counter-based generator keyed by (seed, dimension,
-- digit). Point i is a pure function of (seed, i, d): it does not depend on how
-- many points are drawn or in which order. This file does not run trials (see
-- dlua.study) and holds no global state.
--
-- The implementation is split by concern; this module re-exports the public
-- functions of each (names starting with "_" stay internal):
--   dlua.search.rng (keyed random streams), dlua.search.halton (quasirandom
--   points, discrepancy), dlua.search.space (parameters, spaces, encoding),
--   dlua.search.algorithms (the table of algorithms, one row per file of
--   search/algorithms/: quasirandom, random, grid, bayes; register_algorithm,
--   algorithm, algorithm_names), dlua.search.sample (point i, M.sample),
--   dlua.search.bayes (the GP search behind the bayes row, whose suggest is
--   bayes_suggest), dlua.search.suggester (ask / tell),
--   dlua.search.importance (per-hyperparameter importance), dlua.search.pareto
--   (Pareto fronts and ParEGO's scalarisation of several objectives),
--   dlua.search.ehvi (expected hypervolume improvement, hypervolume).
local util = require "dlua.util"
local rng = require "dlua.search.rng"
local halton = require "dlua.search.halton"
local space = require "dlua.search.space"
local algorithms = require "dlua.search.algorithms"
local sample = require "dlua.search.sample"
local bayes = require "dlua.search.bayes"
local bayes_row = require "dlua.search.algorithms.bayes"
local suggester = require "dlua.search.suggester"
local importance = require "dlua.search.importance"
local pareto = require "dlua.search.pareto"
local ehvi = require "dlua.search.ehvi"

local M = {}
for _, mod in ipairs({rng, halton, space, sample, bayes, suggester, importance, pareto, ehvi}) do
  for k, v in pairs(mod) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" then M[k] = v end
  end
end
-- the table's functions (the table itself, and its rows, stay inside: dlua.search.algorithms)
M.register_algorithm, M.algorithm, M.algorithm_names = algorithms.register_algorithm, algorithms.algorithm,
  algorithms.algorithm_names
-- bayes_suggest with its row's initial-point rule as the default of opts.init
M.bayes_suggest = bayes_row.suggest


-- every exported function refuses extra arguments (util.strict)
-- every export's positional types, declared once (util.check_args lists); "number"
-- where the function's own util.check_integer names the range of a count or an index
util.strict_table("search.", M, false, {
  algorithm = {"string"}, bayes_suggest = {"table", "table", "table?", "integer?", "table?"},
  centered_l2_discrepancy = {"table"}, choice = {"table"}, digits = {"integer"}, discrete = {"table"},
  dominates = {"table", "table", "table"}, expected_hvi = {"table", "table", "table", "table"}, grid_points = {"table", "integer?"}, halton = {"number", "number", "table?"},
  halton_permutations = {"number", "integer|string|boolean?", "integer"},
  halton_sequence = {"number", "integer|string|boolean?"}, hypervolume = {"table", "table"},
  hash_string = {"string"}, importance = {"table", "table", "table?"}, int = {"number", "number", "table?"},
  is_param = {"any?"}, is_space = {"any?"}, log_uniform = {"number", "number"}, param_from_table = {"table"},
  parego = {"table", "table", "table"}, parego_weights = {"number", "number", "number"},
  pareto_front = {"table", "table"}, point = {"table", "integer", "table?"}, primes = {"number"},
  radical_inverse = {"integer", "integer", "table"}, random_point = {"number", "number", "integer|string|boolean?"},
  register_algorithm = {"table"}, sample = {"table", "integer", "table?"}, space = {"table", "table?"},
  space_from_table = {"table"}, suggester = {"table", "table?"}, switch = {"string", "table"},
  trust_region = {"table", "table", "table", "number", "table", "integer"}, uniform = {"number", "number"},
  warnings = {"table", "string?"},
})

return M
