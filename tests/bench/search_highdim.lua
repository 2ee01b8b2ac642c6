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

local function pct(v, p)
  v = {table.unpack(v)}
  table.sort(v)
  local h = (#v - 1) * p + 1
  local lo = math.floor(h)
  return v[lo] + (h - lo) * ((v[lo + 1] or v[lo]) - v[lo])
end

local function g3(x)
  if x == 0 then return "0" end
  if math.abs(x) >= 0.01 and math.abs(x) < 1000 then return (string.format("%.3g", x)) end
  return (string.format("%.2e", x))
end

print(string.format("simple regret of dl.search bayes at the reported best, seeds 1..%d: median / p90 %s", seeds,
  (arg and arg[4]) or ""))
local head, sep = {"problem"}, {"---"}
for _, b in ipairs(BUDGETS) do
  head[#head + 1] = string.format("@%d median | @%d p90", b, b)
  sep[#sep + 1] = "---|---"
end
print("| " .. table.concat(head, " | ") .. " | digest | CPU s |")
print("|" .. table.concat(sep, "|") .. "|---|---|")
for _, pr in ipairs(PROBLEMS) do
  if only == pr.name or (not only and not pr.large) then
    local t0 = os.clock()
    local res, digest = {}, 0
    for _, b in ipairs(BUDGETS) do res[b] = {} end
    for seed = 1, seeds do
      local o = {algorithm = "bayes", seed = seed, mode = "min"}
      for k, v in pairs(EXTRA) do o[k] = v end
      local s = S.suggester(pr.space, o)
      local n = 0
      for _, b in ipairs(BUDGETS) do
        while n < b do
          local batch = s:suggest(math.min(pr.batch or 1, b - n))
          for _, sg in ipairs(batch) do
            for k = 1, #sg.u do digest = digest + sg.u[k] * (k + n) end
            n = n + 1
          end
          for _, sg in ipairs(batch) do s:observe(sg, pr.f(sg.hp)) end
        end
        res[b][seed] = pr.f(s:best().hp) - pr.minimum
      end
    end
    local cells = {pr.name}
    for _, b in ipairs(BUDGETS) do cells[#cells + 1] = g3(pct(res[b], 0.5)) .. " | " .. g3(pct(res[b], 0.9)) end
    print(string.format("| %s | %.17g | %.0f |", table.concat(cells, " | "), digest, os.clock() - t0))
    io.stdout:flush()
  end
end
