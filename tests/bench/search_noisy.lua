-- tests/bench/search_noisy.lua -- dl.search's bayes on noisy Branin and noisy Hartmann-6
-- (Gaussian noise, sd 10% of the function's range) over several noise streams, next to
-- Optuna's TPE (multivariate) on the same streams and seeds (issue 35 item 1). For each
-- problem, noise stream s (1..`streams`) and seed (1..`seeds`): the suggester observes
-- f(x) + noise, and the regret is that of the TRUE function at what it reports as best
-- (s:best(); also at its best observed value, for comparison); Optuna's incumbent is its
-- best_trial (the best observed value). Prints, per problem and budget (50, 100): median,
-- 90th percentile and the count of regrets above `tail` (1.5 for Hartmann-6, issue 35's
-- threshold; 15 for Branin, 5% of its range). Stream 1 is search_bench.lua's noise.
--   dlua tests/bench/search_noisy.lua [seeds=20] [streams=3] [problem | all]
--     [--optuna | --optuna-json FILE] [--json FILE] [--acquisition auto | ei | nei] [--racing K]
-- --optuna runs search_optuna.py (noisy mode); --optuna-json reads its output saved from an
-- earlier run; --json writes every regret; --acquisition and --racing K are bayes' options
-- (default auto, no racing).
local S = require("dlua").search
local json = require "dlua.util.json"
local P = dofile("tests/bench/search_problems.lua")

local args, flags = {}, {}
local i = 1
while arg and arg[i] do
  if arg[i] == "--json" or arg[i] == "--optuna-json" or arg[i] == "--acquisition" or arg[i] == "--racing" then
    flags[arg[i]:sub(3)] = arg[i + 1]
    i = i + 1
  elseif arg[i]:match("^%-%-") then flags[arg[i]:sub(3)] = true
  else args[#args + 1] = arg[i] end
  i = i + 1
end
local seeds = tonumber(args[1]) or 20
local streams = tonumber(args[2]) or 3
local only = args[3] ~= "all" and args[3] or nil
local BUDGETS = {50, 100}

local unit6 = {}
for j = 1, 6 do unit6["x" .. j] = S.uniform(0, 1) end
local PROBLEMS = {
  {name = "Hartmann-6", minimum = P.HARTMANN6_MIN, range = -P.HARTMANN6_MIN, tail = 1.5, space = S.space(unit6),
   f = function(hp) return P.hartmann6({hp.x1, hp.x2, hp.x3, hp.x4, hp.x5, hp.x6}) end},
  {name = "Branin", minimum = 0.397887, range = 308.129 - 0.397887, tail = 15,
   space = S.space{x1 = S.uniform(-5, 10), x2 = S.uniform(0, 15)},
   f = function(hp) return P.branin(hp.x1, hp.x2) end},
}

local function pct(v, p)
  v = {table.unpack(v)}
  table.sort(v)
  local h = (#v - 1) * p + 1
  local lo = math.floor(h)
  return v[lo] + (h - lo) * ((v[lo + 1] or v[lo]) - v[lo])
end

local function run(pr, stream, seed)
  local s = S.suggester(pr.space, {algorithm = "bayes", seed = seed, mode = "min", acquisition = flags.acquisition,
    racing = tonumber(flags.racing)})
  local noise = S.rng("search-bench-noise", pr.name, seed, stream)
  local sd = 0.1 * pr.range
  local out, obs, n, bo, bhp = {}, {}, 0, math.huge, nil
  for _, b in ipairs(BUDGETS) do
    while n < b do
      local sg = s:suggest(1)[1]
      local v = pr.f(sg.hp) + sd * noise:normal()
      s:observe(sg, v)
      if v < bo then bo, bhp = v, sg.hp end
      n = n + 1
    end
    out[b] = pr.f(s:best().hp) - pr.minimum
    obs[b] = pr.f(bhp) - pr.minimum
  end
  return out, obs
end

local function summary(v, tail)
  local over = 0
  for _, r in ipairs(v) do if r > tail then over = over + 1 end end
  return string.format("%.3g | %.3g | %d", pct(v, 0.5), pct(v, 0.9), over)
end

local optuna
if flags["optuna-json"] then
  local fh = assert(io.open(flags["optuna-json"]))
  optuna = json.decode(fh:read("a"))
  fh:close()
elseif flags.optuna then
  local cmd = string.format("/usr/bin/python3 tests/bench/search_optuna.py %d noisy %d", seeds, streams)
  local p = assert(io.popen(cmd))
  optuna = json.decode(p:read("a"))
  p:close()
end

local f = io.popen("sh tests/bench/machine.sh")
print(f:read("a"))
f:close()
print(string.format("noisy problems, seeds 1..%d x noise streams 1..%d: regret of the true function at the " ..
  "reported best, median | p90 | count above tail", seeds, streams))
print("| problem | sampler | @50 median | @50 p90 | @50 > tail | @100 median | @100 p90 | @100 > tail |")
print("|---|---|---|---|---|---|---|---|")
local dump = {}
for _, pr in ipairs(PROBLEMS) do
  if not only or only == pr.name then
    local t0 = os.clock()
    local res, obs = {}, {}
    for _, b in ipairs(BUDGETS) do res[b], obs[b] = {}, {} end
    for stream = 1, streams do
      for seed = 1, seeds do
        local r, o = run(pr, stream, seed)
        for _, b in ipairs(BUDGETS) do res[b][#res[b] + 1], obs[b][#obs[b] + 1] = r[b], o[b] end
      end
    end
    dump[pr.name] = {["50"] = res[50], ["100"] = res[100], observed = {["50"] = obs[50], ["100"] = obs[100]}}
    print(string.format("| noisy %s (tail %g) | dlua bayes | %s | %s | (%.0f s CPU)", pr.name, pr.tail,
      summary(res[50], pr.tail), summary(res[100], pr.tail), os.clock() - t0))
    print(string.format("| noisy %s | dlua bayes, best observed | %s | %s |", pr.name,
      summary(obs[50], pr.tail), summary(obs[100], pr.tail)))
    if optuna then
      local o = optuna.regret.tpe["noisy " .. pr.name]
      print(string.format("| noisy %s | Optuna TPE | %s | %s |", pr.name, summary(o["50"], pr.tail),
        summary(o["100"], pr.tail)))
    end
    io.stdout:flush()
  end
end
if flags.json then
  local out = assert(io.open(flags.json, "w"))
  out:write(json.encode(dump))
  out:close()
end
