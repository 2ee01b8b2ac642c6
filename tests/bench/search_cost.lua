-- tests/bench/search_cost.lua -- CPU seconds of one bayes suggestion after n
-- observations in 6-D (noisy Hartmann-6) and 20-D (a noisy shifted Ackley), the
-- histories quasirandom points: cold (no warm start, no previous model), warm
-- (theta of the previous call, one more observation) and incremental (the previous
-- call's model extended by the new observation, as dl.search.suggester does);
-- median of `reps` runs, os.clock CPU time (issue 35 item 5: <= 0.5 s at 2,000 in
-- 20-D; results in docs/benchmarks.md "Search: quality and cost").
--   dlua tests/bench/search_cost.lua [reps=3] [sizes=500,1000,2000]
local S = require("dlua").search
local bayes = require "dlua.search.bayes"

local reps = tonumber(arg and arg[1]) or 3
local sizes = {}
for v in ((arg and arg[2]) or "500,1000,2000"):gmatch("%d+") do sizes[#sizes + 1] = tonumber(v) end
local incremental = bayes.surrogate ~= nil            -- absent before the incremental path

local ALPHA = {1.0, 1.2, 3.0, 3.2}
local A = {{10, 3, 17, 3.5, 1.7, 8}, {0.05, 10, 17, 0.1, 8, 14}, {3, 3.5, 1.7, 10, 17, 8}, {17, 8, 0.05, 10, 0.1, 14}}
local P = {{1312, 1696, 5569, 124, 8283, 5886}, {2329, 4135, 8307, 3736, 1004, 9991},
           {2348, 1451, 3522, 2883, 3047, 6650}, {4047, 8828, 8732, 5743, 1091, 381}}
local function hartmann6(u)
  local f = 0
  for i = 1, 4 do
    local s = 0
    for j = 1, 6 do s = s + A[i][j] * (u[j] - P[i][j] * 1e-4) ^ 2 end
    f = f - ALPHA[i] * math.exp(-s)
  end
  return f
end

local function ackley(u)                             -- on [-2.5, 1.5]^d, minimum 0 at u = 0.625
  local s1, s2 = 0, 0
  for k = 1, #u do
    local x = 4 * u[k] - 2.5
    s1, s2 = s1 + x * x, s2 + math.cos(2 * math.pi * x)
  end
  return -20 * math.exp(-0.2 * math.sqrt(s1 / #u)) - math.exp(s2 / #u) + 20 + math.exp(1)
end

local PROBLEMS = {{d = 6, f = hartmann6, noise = 0.33}, {d = 20, f = ackley, noise = 0.2}}

local function median(v)
  table.sort(v)
  return v[(#v + 1) // 2]
end

local function timed(fn)
  local t0 = os.clock()
  local a, b = fn()
  return os.clock() - t0, a, b
end

local f = io.popen("sh tests/bench/machine.sh")
print(f:read("a"))
f:close()
print(string.format("CPU seconds per bayes suggestion, median of %d (os.clock)", reps))
print("| d | observations | GP points | cold | warm | incremental |")
print("|---|---|---|---|---|---|")
for _, pr in ipairs(PROBLEMS) do
  local t = {}
  for j = 1, pr.d do t["x" .. j] = S.uniform(0, 1) end
  local space = S.space(t)
  for _, n in ipairs(sizes) do
    local noise = S.rng("search-cost", pr.d, n)
    local seq = S.halton_sequence(pr.d, 7)
    local hist = {}
    for i = 1, n + 1 do
      local u = seq:point(i)
      hist[i] = {u = u, value = pr.f(u) + pr.noise * noise:normal()}
    end
    local last = table.remove(hist)
    local cold, warm, inc, info = {}, {}, {}, nil
    for r = 1, reps do
      local _
      cold[r], _, info = timed(function() return S.bayes_suggest(space, hist, {}, 1, {seed = 1, step = n}) end)
    end
    hist[#hist + 1] = last
    for r = 1, reps do
      warm[r] = timed(function() return S.bayes_suggest(space, hist, {}, 1, {seed = 1, step = n + 1,
        theta = info.theta}) end)
      if incremental then
        inc[r] = timed(function() return S.bayes_suggest(space, hist, {}, 1, {seed = 1, step = n + 1,
          theta = info.theta, model = info.model}) end)
      end
    end
    table.remove(hist)
    print(string.format("| %d | %d | %d | %.3f | %.3f | %s |", pr.d, n, info.model.c:points(), median(cold),
      median(warm), incremental and string.format("%.3f", median(inc)) or "-"))
    io.stdout:flush()
  end
end
f = io.popen("uptime")
print("end: " .. f:read("l"))
f:close()
