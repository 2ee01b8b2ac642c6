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

local f = io.popen("sh tests/bench/machine.sh")
print(f:read("a"))
f:close()
print(string.format("simple regret of dl.search bayes at the reported best, seeds 1..%d: median / p90", seeds))
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
          local sg = s:suggest(1)[1]
          for k = 1, #sg.u do digest = digest + sg.u[k] * (k + n) end
          s:observe(sg, pr.f(sg.hp))
          n = n + 1
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
