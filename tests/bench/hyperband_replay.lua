-- tests/bench/hyperband_replay.lua -- Hyperband's bracket split (prune.budget) replayed over recorded
-- learning curves and over a synthetic family, one trial at a time (issue 35 item 3):
--   git show suite:tests/bench/results/fashion_curves.json > /tmp/fashion_curves.json
--   build/dlua tests/bench/hyperband_replay.lua /tmp/fashion_curves.json     # the recorded curves
--   build/dlua tests/bench/hyperband_replay.lua synthetic [family seed]      # the synthetic family
-- The curves file: {max, mode = "max", best, se, trials = {{id, final, curve = {{step, value}}}},
-- orders = {{pool indices}}} (tests/bench/asha_replay_fashion.lua's PRUNE_ORDERS file). The synthetic
-- family: 40 trials of 900 steps evaluated every 100, trial i's accuracy a_i (1 - exp(-t / tau_i)) /
-- (1 - exp(-900 / tau_i)) plus N(0, 0.003) per eval, a_i uniform in [0.85, 0.92], and log tau_i
-- uniform in [log 60, log 600] but correlated with a_i (half of its uniform is a_i's), so the better
-- trials tend to learn slower and early rungs mislead: the case Hyperband's conservative brackets are
-- for. Its known best is the best final value; one SE is the noise 0.003; 20 seeded orders.
-- Per rule: the median over orders of the steps used (of trials * max), the gap of the best completed
-- trial to the unpruned best, the orders whose best completed is within 1 SE of it, and the orders
-- within 1 SE by a third of the unpruned steps. The rules are dlua.study.prune's own functions.
local dl = require "dlua"
local prune = require "dlua.study.prune"
local srng = require "dlua.search.rng"
local json, fs = dl.json, dl.fs

local function synthetic(seed)
  local r = srng.rng("hyperband-synthetic", seed)
  local d = {max = 900, mode = "max", se = 0.003, trials = {}, orders = {}}
  for i = 1, 40 do
    local ua = r:uniform()
    local a = 0.85 + 0.07 * ua
    local tau = math.exp(math.log(60) + (math.log(600) - math.log(60)) * (0.5 * ua + 0.5 * r:uniform()))
    local curve = {}
    for k = 1, 9 do
      local t = 100 * k
      curve[k] = {t, a * (1 - math.exp(-t / tau)) / (1 - math.exp(-900 / tau)) + 0.003 * r:normal()}
    end
    d.trials[i] = {id = "s" .. i, final = curve[9][2], curve = curve}
  end
  d.best = -math.huge
  for _, t in ipairs(d.trials) do d.best = math.max(d.best, t.final) end
  for o = 1, 20 do
    local ord = {}
    for i = 1, 40 do ord[i] = i end
    for i = 40, 2, -1 do local k = r:int(i) + 1; ord[i], ord[k] = ord[k], ord[i] end
    d.orders[o] = ord
  end
  return d
end

local d = arg[1] == "synthetic" and synthetic(tonumber(arg[2] or "1")) or json.decode(fs.read(arg[1]))
assert(d.mode == "max", "the replay takes curves of an objective to maximise")
local max, best_all, se, N = d.max, d.best, d.se, #d.trials

local function run(p, ord)
  local recs, steps, best, hit = {}, 0, nil, nil
  for i, pi in ipairs(ord) do
    local t = d.trials[pi]
    local rungs, b = prune.ladder(p, i)
    b = b or 1
    recs[b] = recs[b] or {}
    local stop, done = max, true
    for k, budget in ipairs(rungs) do
      recs[b][k] = recs[b][k] or {}
      local v = prune.rung_value(t.curve, budget)
      local go = prune.continues(recs[b][k], v, p.reduction, "max")
      table.insert(recs[b][k], v)
      if not go then stop, done = budget, false; break end
    end
    steps = steps + stop
    if done and (not best or t.final > best) then best = t.final end
    if best and not hit and best >= best_all - se then hit = steps end
  end
  return steps, best, hit
end

local function median(l)
  table.sort(l)
  local n = #l
  return n % 2 == 1 and l[(n + 1) // 2] or (l[n // 2] + l[n // 2 + 1]) / 2
end
local function P(t) return prune.check(t, {max_steps = max, trials = N, algorithm = "bayes"}, error, function() end) end
io.write(string.format("%s: %d trials of %d steps, unpruned best %.4f, 1 SE %.4f, %d orders\n", arg[1], N, max,
  best_all, se, #d.orders))
io.write("| rule | brackets (first rung: weight) | steps used | gap | worst gap | orders within 1 SE | " ..
  "within 1 SE by a third |\n|---|---|---|---|---|---|---|\n")
for _, r in ipairs{3, 2} do
  local rules = {{string.format("asha (100, %d)", r), P{algorithm = "asha", min_steps = 100, reduction = r}}}
  for _, b in ipairs{1, 1 / 2, 1 / 3} do
    rules[#rules + 1] = {string.format("hyperband (100, %d), budget %s", r, b == 1 and "1" or string.format("%.2f", b)),
      P{algorithm = "hyperband", min_steps = 100, reduction = r, budget = b}}
  end
  for _, rule in ipairs(rules) do
    local S, G, within, third, worst = {}, {}, 0, 0, 0
    for _, ord in ipairs(d.orders) do
      local s, b, h = run(rule[2], ord)
      S[#S + 1], G[#G + 1] = s / (N * max), best_all - (b or -math.huge)
      worst = math.max(worst, G[#G])
      if b and b >= best_all - se then within = within + 1 end
      if h and 3 * h <= N * max then third = third + 1 end
    end
    local br = {}
    for _, x in ipairs(rule[2].brackets or {{rungs = rule[2].rungs, weight = 1}}) do
      br[#br + 1] = string.format("%s: %d", x.rungs[1] or max, x.weight)
    end
    io.write(string.format("| %s | %s | %.0f%% | %.4f | %.4f | %d of %d | %d of %d |\n", rule[1],
      table.concat(br, ", "), 100 * median(S), median(G), worst, within, #d.orders, third, #d.orders))
  end
end
