-- tests/bench/search_bench.lua -- dl.search's bayes and quasirandom against Optuna's TPE
-- (multivariate) and QMC (scrambled Halton) on Branin, Hartmann-6 and their noisy
-- variants (Gaussian noise, sd 10% of the function's range), budgets 20 and 50:
-- simple regret of the TRUE function at the incumbent, median [Q1, Q3] over the seeds
-- (issue 18's done-when; results in docs/benchmarks.md). The incumbent is, for dlua,
-- what the suggester reports (s:best(): bayes by the GP's posterior mean at the
-- observed points, quasirandom by the best observed value) and, for Optuna, the trial
-- with the best observed value (its best_trial). Then the CPU seconds of one Optuna
-- TPE suggestion at d = 6 after 50, 200, 500 and 2000 trials (dlua's cost per
-- suggestion: tests/bench/search_cost.lua).
--   dlua tests/bench/search_bench.lua [seeds=20] [all | regret | cost] [--no-optuna]
-- The Optuna side runs as /usr/bin/python3 tests/bench/search_optuna.py in the same run.
local S = require("dlua").search
local json = require "dlua.util.json"

local seeds = tonumber(arg and arg[1]) or 20
local what = arg and arg[2] or "all"
local with_optuna = true
for i = 1, arg and #arg or 0 do if arg[i] == "--no-optuna" then with_optuna = false end end
if what == "--no-optuna" then what = "all" end

local problems_ = dofile("tests/bench/search_problems.lua")
local function branin(hp) return problems_.branin(hp.x1, hp.x2) end
local function hartmann6(hp) return problems_.hartmann6({hp.x1, hp.x2, hp.x3, hp.x4, hp.x5, hp.x6}) end

local unit6 = {}
for j = 1, 6 do unit6["x" .. j] = S.uniform(0, 1) end
-- range: max - min over the domain (Branin's max 308.129 at (-5, 0); Hartmann-6's sup 0)
local PROBLEMS = {
  {name = "Branin", f = branin, minimum = 0.397887, range = 308.129 - 0.397887,
   space = S.space{x1 = S.uniform(-5, 10), x2 = S.uniform(0, 15)}},
  {name = "Hartmann-6", f = hartmann6, minimum = -3.32237, range = 3.32237, space = S.space(unit6)},
}
local BUDGETS = {20, 50}

local function quartiles(v)
  v = {table.unpack(v)}
  table.sort(v)
  local function q(p)
    local h = (#v - 1) * p + 1
    local lo = math.floor(h)
    return v[lo] + (h - lo) * ((v[lo + 1] or v[lo]) - v[lo])
  end
  return q(0.25), q(0.5), q(0.75)
end

local function g3(x)
  if x == 0 then return "0" end
  if math.abs(x) >= 0.01 and math.abs(x) < 1000 then return (string.format("%.3g", x)) end
  return (string.format("%.1e", x):gsub("e%-0", "e-"):gsub("e%+0", "e"))
end

local function cell(v)
  local a, m, b = quartiles(v)
  return string.format("%s [%s, %s]", g3(m), g3(a), g3(b))
end

-- regret of the true function at the incumbent after each budget, one seed
local function run_dlua(alg, pr, noisy, seed)
  local s = S.suggester(pr.space, {algorithm = alg, seed = seed, mode = "min"})
  local noise = S.rng("search-bench-noise", pr.name, seed, noisy and 1 or 0)
  local sd = noisy and 0.1 * pr.range or 0
  local out, n = {}, 0
  for _, b in ipairs(BUDGETS) do
    while n < b do
      local sg = s:suggest(1)[1]
      s:observe(sg, pr.f(sg.hp) + sd * noise:normal())
      n = n + 1
    end
    out[b] = pr.f(s:best().hp) - pr.minimum
  end
  return out
end

local function regret_table()
  local res = {}
  local t0 = os.clock()
  for _, alg in ipairs({"bayes", "quasirandom"}) do
    res[alg] = {}
    for _, pr in ipairs(PROBLEMS) do
      for _, noisy in ipairs({false, true}) do
        local name = (noisy and "noisy " or "") .. pr.name
        local per = {}
        for _, b in ipairs(BUDGETS) do per[tostring(b)] = {} end
        for seed = 1, seeds do
          local r = run_dlua(alg, pr, noisy, seed)
          for _, b in ipairs(BUDGETS) do per[tostring(b)][seed] = r[b] end
        end
        res[alg][name] = per
      end
    end
  end
  io.stderr:write(string.format("dlua samplers: %.1f s CPU\n", os.clock() - t0))
  return res
end

local function optuna(cost)
  local cmd = string.format("/usr/bin/python3 tests/bench/search_optuna.py %d%s", seeds, cost and " cost" or "")
  local p = assert(io.popen(cmd))
  local text = p:read("a")
  local ok = p:close()
  if not ok or text == "" then error("search_bench: " .. cmd .. " failed") end
  return json.decode(text)
end

local function print_regret(dl_res, op)
  local cols = {}
  for _, pr in ipairs(PROBLEMS) do
    for _, noisy in ipairs({false, true}) do
      for _, b in ipairs(BUDGETS) do cols[#cols + 1] = {name = (noisy and "noisy " or "") .. pr.name, b = tostring(b)} end
    end
  end
  local head, sep = {"sampler"}, {"---"}
  for _, c in ipairs(cols) do head[#head + 1] = c.name .. " @" .. c.b; sep[#sep + 1] = "---" end
  print(string.format("simple regret of the true function at the incumbent, %d seeds, median [Q1, Q3]", seeds))
  print("| " .. table.concat(head, " | ") .. " |")
  print("| " .. table.concat(sep, " | ") .. " |")
  local rows = {{"dlua bayes", dl_res.bayes}, {"dlua quasirandom", dl_res.quasirandom}}
  if op then
    rows[#rows + 1] = {"Optuna TPE (multivariate)", op.regret.tpe}
    rows[#rows + 1] = {"Optuna QMC (scrambled Halton)", op.regret.qmc}
  end
  for _, r in ipairs(rows) do
    local cells = {r[1]}
    for _, c in ipairs(cols) do cells[#cells + 1] = cell(r[2][c.name][c.b]) end
    print("| " .. table.concat(cells, " | ") .. " |")
  end
  if op then
    local _, mb = quartiles(dl_res.bayes["noisy Hartmann-6"]["50"])
    local _, mt = quartiles(op.regret.tpe["noisy Hartmann-6"]["50"])
    print(string.format("\nnoisy Hartmann-6 @50: dlua bayes median %s, Optuna TPE median %s: %s", g3(mb), g3(mt),
      mb <= mt and "at or below (done)" or "above (not done)"))
    for _, c in ipairs(cols) do
      if not c.name:match("noisy") then
        local _, a = quartiles(dl_res.bayes[c.name][c.b])
        local _, t = quartiles(op.regret.tpe[c.name][c.b])
        print(string.format("%s @%s: dlua bayes %s vs TPE %s (%s)", c.name, c.b, g3(a), g3(t), a < t and "lead" or "no lead"))
      end
    end
    print("optuna " .. tostring(op.optuna))
  end
end

-- Optuna TPE's CPU seconds per suggestion after n Hartmann-6 trials (dlua's own cost
-- table, cold / warm / incremental in 6-D and 20-D: tests/bench/search_cost.lua)
local function cost_table(op)
  print("\nCPU seconds per Optuna TPE (multivariate) suggestion, d = 6 (dlua: tests/bench/search_cost.lua)")
  print("| trials | Optuna TPE |")
  print("|---|---|")
  for _, n in ipairs({50, 200, 500, 2000}) do
    local tpe = op and op.cost and op.cost[tostring(n)]
    print(string.format("| %d | %s |", n, tpe and string.format("%.3f", tpe) or "-"))
  end
end

local f = io.popen("uptime")
print("load: " .. f:read("l"))
f:close()
local op
if with_optuna and (what == "all" or what == "regret" or what == "cost") then op = optuna(what ~= "regret") end
if what == "all" or what == "regret" then print_regret(regret_table(), op) end
if what == "all" or what == "cost" then cost_table(op) end
f = io.popen("uptime")
print("load: " .. f:read("l"))
f:close()
