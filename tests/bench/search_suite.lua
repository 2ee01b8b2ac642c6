-- tests/bench/search_suite.lua -- the dlua side of the search benchmark suite (issue 35): dl.search's
-- bayes suggester on every problem of search_problems.lua's P.suite(), seeds 1..N times each
-- problem's noise streams, budgets 50 and 100 evaluations; simple regret of the TRUE function at
-- the suggester's reported best (s:best()), the hypervolume of the first 50 / 100 observations
-- for several objectives (reference point 1.1 per objective), and for the recorded Fashion-MNIST
-- curves dlua's pruning rule replayed in each seed's trial order (the gap to the unpruned best
-- once 1/3 and 1/2 of the unpruned steps are spent). Each problem's per-run results are merged
-- into OUT (default tests/bench/results/search_suite_dlua.json) with the build and date, so that
-- problems can be re-run one at a time; then one markdown table of every problem in OUT against
-- the best Optuna sampler of tests/bench/results/search_suite_optuna.json (written by
-- search_suite_optuna.py; tests/bench/run_search_suite.sh runs both sides).
--   build/dlua tests/bench/search_suite.lua [--problems a,b] [--seeds 20] [--table] [--out FILE] [--optuna FILE]
--     [--budgets 50,100]
-- --table: print the table from the files without running anything.
local S = require("dlua").search
local json, fs = require("dlua").json, require("dlua").fs
local P = dofile("tests/bench/search_problems.lua")
local L = dofile("tests/bench/search_suite_lib.lua")

local opts = {seeds = 20, out = "tests/bench/results/search_suite_dlua.json",
              optuna = "tests/bench/results/search_suite_optuna.json"}
local i = 1
while arg and arg[i] do
  local a = arg[i]
  if a == "--table" then opts.table = true; i = i + 1
  elseif a == "--problems" or a == "--seeds" or a == "--out" or a == "--optuna" or a == "--budgets" then
    opts[a:sub(3)] = assert(arg[i + 1], a .. " needs a value"); i = i + 2
  else
    error("search_suite: unknown argument " .. a ..
      " (--problems a,b, --seeds N, --budgets 50,100, --table, --out FILE, --optuna FILE)")
  end
end
local seeds = assert(math.tointeger(tonumber(opts.seeds)), "--seeds: an integer")
local BUDGETS = {}
for v in (opts.budgets or "50,100"):gmatch("[^,]+") do
  BUDGETS[#BUDGETS + 1] = assert(math.tointeger(tonumber(v)), "--budgets: integers")
end
local PRUNE_BUDGETS = {{"1/3 steps", 1 / 3}, {"1/2 steps", 1 / 2}}

local SUITE = P.suite()
local by_name, order = {}, {}
for _, pr in ipairs(SUITE) do by_name[pr.name], order[#order + 1] = pr, pr.name end
local chosen = {}
if opts.problems then
  for name in opts.problems:gmatch("[^,]+") do
    if not by_name[name] then
      error("search_suite: unknown problem '" .. name .. "' (known: " .. table.concat(order, ", ") .. ")")
    end
    chosen[#chosen + 1] = by_name[name]
  end
elseif not opts.table then chosen = SUITE end

-- one single- or several-objective run: result per budget label
local function run(pr, seed, stream)
  local modes
  if pr.kind == "multi" then modes = {}; for j = 1, pr.k do modes[j] = "min" end end
  local s = S.suggester(pr.space, {algorithm = "bayes", seed = seed, mode = modes or "min"})
  local noise = S.rng("search-suite-noise", pr.name, seed, stream)
  local out, vals, n = {}, {}, 0
  for _, b in ipairs(BUDGETS) do
    while n < b do
      local batch = s:suggest(math.min(pr.batch, b - n))
      for _, sg in ipairs(batch) do
        local v = pr.f(sg.hp)
        if pr.kind == "multi" then
          vals[#vals + 1] = v
          s:observe(sg, v)
        else
          s:observe(sg, v + pr.sd * noise:normal())
        end
        n = n + 1
      end
    end
    if pr.kind == "multi" then
      local inside = {}
      for _, v in ipairs(vals) do
        local ok = true
        for j = 1, pr.k do ok = ok and v[j] < pr.ref[j] end
        if ok then inside[#inside + 1] = v end
      end
      out[tostring(b)] = #inside > 0 and S.hypervolume(inside, pr.ref) or 0
    else
      out[tostring(b)] = pr.f(s:best().hp) - pr.minimum
    end
  end
  return out
end

-- pruning: dlua's rule over the recorded curves in the seed's order, one trial at a time (the
-- non-pausing path of tests/bench/asha_replay_fashion.lua); gap per budget label
local prune = require "dlua.study.prune"
local function run_prune(rule, data, seed)
  local sign = data.mode == "max" and 1 or -1
  local p = prune.check(rule, {max_steps = data.max, algorithm = "bayes", trials = #data.trials}, error, function() end)
  local recs, done, steps, best, trace = {}, {}, 0, nil, {}
  for _, pi in ipairs(data.orders[seed]) do
    local t = data.trials[pi]
    local stop, status = data.max, "done"
    if p.algorithm == "median" then
      local m = prune.median_rule(p, data.mode, t.curve, done)
      if m then stop, status = m.step, "pruned" end
    else
      local rungs, b = prune.ladder(p, #trace + 1)
      b = b or 1
      recs[b] = recs[b] or {}
      for k, budget in ipairs(rungs) do
        recs[b][k] = recs[b][k] or {}
        local v = prune.rung_value(t.curve, budget)
        local go = prune.continues(recs[b][k], v, p.reduction, data.mode)
        recs[b][k][#recs[b][k] + 1] = v
        if not go then stop, status = budget, "pruned"; break end
      end
    end
    steps = steps + stop
    if status == "done" then
      done[#done + 1] = t.curve
      if not best or sign * t.final > sign * best then best = t.final end
    end
    trace[#trace + 1] = {steps, best}
  end
  local worst = math.huge
  for _, t in ipairs(data.trials) do worst = math.min(worst, sign * t.final) end
  local out, total = {}, #data.trials * data.max
  for _, pb in ipairs(PRUNE_BUDGETS) do
    local b
    for _, tr in ipairs(trace) do if tr[1] <= pb[2] * total + 1e-9 and tr[2] then b = tr[2] end end
    out[pb[1]] = sign * data.best - (b and sign * b or worst)
  end
  return out
end

local function read_json(path)
  if not fs.exists(path) then return nil end
  return json.decode(fs.read(path))
end

local function shell(cmd)
  local f = io.popen(cmd)
  local s = f:read("a")
  f:close()
  return (s:gsub("%s+$", ""))
end

local machine = shell("sh tests/bench/machine.sh")
print(machine)
local results = read_json(opts.out) or {problems = {}}
for _, pr in ipairs(chosen) do
  local t0 = os.clock()
  local labels, values, runs = {}, {}, json.array()
  local rules, chosen
  if pr.kind == "prune" then
    -- every rule over every seed's order; the row is the best rule by median at each budget
    -- (L.best_sampler: the selection the Optuna side's pruners get)
    local data = json.decode(fs.read(pr.curves))
    for k, pb in ipairs(PRUNE_BUDGETS) do labels[k] = pb[1] end
    rules, chosen = {}, {}
    for _, named in ipairs(pr.rules) do
      local per = {}
      for _, l in ipairs(labels) do per[l] = json.array() end
      for seed = 1, math.min(seeds, #data.orders) do
        local r = run_prune(named[2], data, seed)
        for _, l in ipairs(labels) do per[l][#per[l] + 1] = r[l] end
      end
      rules[named[1]] = per
    end
    for seed = 1, math.min(seeds, #data.orders) do
      runs[#runs + 1] = json.array{seed - 1, 1}          -- the Optuna side numbers these orders from 0
    end
    for _, l in ipairs(labels) do
      chosen[l] = L.best_sampler(rules, l, pr.kind)
      values[l] = rules[chosen[l]][l]
    end
  else
    for k, b in ipairs(BUDGETS) do labels[k], values[tostring(b)] = tostring(b), json.array() end
    for stream = 1, pr.streams do
      for seed = 1, seeds do
        local r = run(pr, seed, stream)
        runs[#runs + 1] = json.array{seed, stream}
        for _, l in ipairs(labels) do values[l][#values[l] + 1] = r[l] end
      end
    end
  end
  results.problems[pr.name] = {kind = pr.kind, budgets = json.array(labels), values = values, runs = runs,
    rules = rules, chosen = chosen,
    seeds = seeds, date = os.date("!%Y-%m-%d %H:%M UTC"), machine = machine, cpu_seconds = os.clock() - t0}
  fs.write_atomic(opts.out, json.encode(results) .. "\n")
  io.stderr:write(string.format("%s: %.0f s CPU\n", pr.name, os.clock() - t0))
end

local op = read_json(opts.optuna)
if not op then
  print("no Optuna results at " .. opts.optuna .. ": run /usr/bin/python3 tests/bench/search_suite_optuna.py")
  op = {problems = {}}
end
print(string.format("dl.search bayes (dlua, %s) against every Optuna %s sampler (%s, %s)", opts.out,
  tostring(op.optuna), opts.optuna, tostring(op.date)))
print("regret of the reported best (lower better; noisy problems: the true function's), hypervolume " ..
  "(higher better; its tail is the 10th percentile), pruning gap (lower better)\n")
print(L.HEAD)
print(L.SEP)
for _, line in ipairs(L.rows(order, results.problems, op.problems)) do print(line) end
local builds = {}
for _, name in ipairs(order) do
  local e = results.problems[name]
  if e then builds[#builds + 1] = string.format("%s: %s, %s", name, e.machine:match("build (%S+)") or "?", e.date) end
end
print("\ndlua runs: " .. table.concat(builds, "; "))
