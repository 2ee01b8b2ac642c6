-- tests/bench/moo_bench.lua -- several objectives: dl.search's bayes suggester with EHVI
-- (the default for 2 and 3 objectives) and with ParEGO (pareto = {method = "parego"}) on
-- ZDT1, ZDT2 (6 variables, 2 objectives) and DTLZ2 (6 variables, 3 objectives), seeds
-- first .. last, `budget` trials each, every objective minimised. Writes one JSON line
-- per seed as it ends, {method =, problem =, seed =, values = {{values of trial 1}, ...}};
-- tests/bench/moo_optuna.py runs Optuna's MOTPE and NSGA-II on the same problems and
-- makes the table of hypervolumes (reference point 1.1 per objective) from both files:
--   dlua tests/bench/moo_bench.lua [seeds=0-9] [budget=100] [ehvi|parego|ehvi-ref] [problem] > dlua.json
--   /usr/bin/python3 tests/bench/moo_optuna.py run 10 100 > optuna.json
--   /usr/bin/python3 tests/bench/moo_optuna.py table dlua.json optuna.json
-- ehvi-ref gives EHVI the benchmark's reference point (1.1 per objective) instead of
-- its default (the observed front's nadir + 10% of its range).
local S = require("dlua").search
local json = require "dlua.util.json"

local first, last = (arg and arg[1] or "0-9"):match("^(%d+)%-(%d+)$")
first, last = tonumber(first) or 0, tonumber(last) or 9
local budget = tonumber(arg and arg[2]) or 100
local method = arg and arg[3] or "ehvi"
local only = arg and arg[4]                   -- one problem (runs in parallel processes)
local D = 6

local P = dofile("tests/bench/search_problems.lua")
local PROBLEMS = {
  {name = "ZDT1", k = 2, f = function(x) return P.zdt(x, false) end},
  {name = "ZDT2", k = 2, f = function(x) return P.zdt(x, true) end},
  {name = "DTLZ2", k = 3, f = P.dtlz2},
}

local params = {}
for i = 1, D do params["x" .. i] = S.uniform(0, 1) end
local space = S.space(params)

local label = ({ehvi = "dlua EHVI", parego = "dlua ParEGO", ["ehvi-ref"] = "dlua EHVI (reference given)"})[method]
assert(label, "method: ehvi, parego or ehvi-ref")
for _, p in ipairs(PROBLEMS) do if not only or only == p.name then
  local modes, ref = {}, {}
  for j = 1, p.k do modes[j], ref[j] = "min", 1.1 end
  local pareto = method == "parego" and {method = "parego"} or (method == "ehvi-ref" and {reference = ref} or nil)
  local t0 = os.clock()
  for seed = first, last do
    local s = S.suggester(space, {algorithm = "bayes", seed = seed, mode = modes, pareto = pareto})
    local vals = {}
    for _ = 1, budget do
      local g = s:suggest()[1]
      local x = {}
      for i = 1, D do x[i] = g.hp["x" .. i] end
      local v = p.f(x)
      s:observe(g, v)
      vals[#vals + 1] = v
    end
    io.write(json.encode({method = label, problem = p.name, seed = seed, values = vals}), "\n")
    io.flush()
    io.stderr:write(string.format("%s %s seed %d: HV@%d %.4f (%.0f s CPU so far)\n", label, p.name, seed, budget,
      S.hypervolume(vals, ref), os.clock() - t0))
  end
end end
