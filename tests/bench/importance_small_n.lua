-- dl.search.importance at small n (issue 35 item 6): 2 relevant parameters of 5
-- (f = sin(6 x1) + (2 x2 - 1)^2 + 0.1 noise), n uniform points, 20 seeds; how
-- often the two relevant ones rank first by the GP functional ANOVA (the one
-- definition) against the binned omega^2 estimate it replaced (written out
-- here, 10 equal-width bins of u). Run: dlua tests/bench/importance_small_n.lua [n]
local S = require "dlua.search"
local N = tonumber(arg and arg[1]) or 30
local space = S.space{x1 = S.uniform(0, 1), x2 = S.uniform(0, 1), x3 = S.uniform(0, 1), x4 = S.uniform(0, 1),
                      x5 = S.uniform(0, 1)}

local function omega2(hist, k, nb)
  local n, mean, sum, cnt = #hist, 0, {}, {}
  for b = 1, nb do sum[b], cnt[b] = 0, 0 end
  for _, h in ipairs(hist) do mean = mean + h.value / n end
  local sst, ssb, used = 0, 0, 0
  for _, h in ipairs(hist) do
    local b = math.min(nb - 1, math.floor(h.u[k] * nb)) + 1
    sum[b], cnt[b] = sum[b] + h.value, cnt[b] + 1
    sst = sst + (h.value - mean) ^ 2
  end
  for b = 1, nb do if cnt[b] > 0 then ssb, used = ssb + cnt[b] * (sum[b] / cnt[b] - mean) ^ 2, used + 1 end end
  local msw = (sst - ssb) / (n - used)
  return math.max(0, math.min(1, (ssb - (used - 1) * msw) / (sst + msw)))
end

local function relevant_first(scores)
  local order = {1, 2, 3, 4, 5}
  table.sort(order, function(a, b) return scores[a] > scores[b] end)
  return (order[1] == 1 and order[2] == 2) or (order[1] == 2 and order[2] == 1)
end

local gpf, binned = 0, 0
local t0 = os.clock()
for seed = 1, 20 do
  local r = S.rng("importance-bench", seed)
  local hist = {}
  for i = 1, N do
    local u = {}
    for j = 1, 5 do u[j] = r:uniform() end
    local x = space:point(u)
    hist[i] = {u = u, value = math.sin(6 * x.x1) + (2 * x.x2 - 1) ^ 2 + 0.1 * r:normal()}
  end
  local imp, a, b = S.importance(space, hist), {}, {}
  for k, p in ipairs(imp.params) do a[k], b[k] = p.share, omega2(hist, k, 10) end
  if relevant_first(a) then gpf = gpf + 1 end
  if relevant_first(b) then binned = binned + 1 end
end
print(string.format("n = %d, 20 seeds: x1 and x2 ranked first by %s in %d, by the binned omega^2 in %d (%.2f s CPU)",
  N, S.importance_method, gpf, binned, os.clock() - t0))
