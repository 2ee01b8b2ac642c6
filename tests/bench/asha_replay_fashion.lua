-- tests/bench/asha_replay_fashion.lua -- every pruning rule replayed over an unpruned study's recorded
-- curves (issue 35; issue 18 asked it first of the 8-trial exploration study):
--   build/dlua tests/bench/fashion_curves_study.lua --out /tmp/hb_runs --threads 1   # record (40 trials)
--   build/dlua tests/bench/asha_replay_fashion.lua tests/bench/fashion_curves_study.lua \
--     /tmp/hb_runs/fashion-mnist-curves [seeds]
--   (or, without recording: tests/bench/results/fashion_curves.json in place of the directory)
-- Trials are deterministic, so a trial's objective at a step is the one the unpruned run recorded. One
-- trial at a time, in an order each seed permutes (seed 0: the study's own quasi-random order); the
-- rules are dlua.study.prune's own functions (ladder, peers, continues, in_top, median_rule,
-- rung_value). "bayes" rows are pool-based: the bayes row suggests a point from the history a study
-- would give it (dlua.study.fidelity for model = "rungs"), and the unused recorded trial nearest to it
-- (in the unit cube) runs. Per rule: the steps all trials used (of N * budget), the best final value
-- of a trial that ran its whole budget, its gap to the unpruned study's best, and the steps spent
-- when the best completed value first came within one binomial standard error of that best.
local dl = require "dlua"
local prune = require "dlua.study.prune"
local fidelity = require "dlua.study.fidelity"
local algorithms = require "dlua.search.algorithms"
local srng = require "dlua.search.rng"
local json, fs = dl.json, dl.fs

local study = dofile(arg[1])
local dir = arg[2]
local seeds = tonumber(arg[3] or "10")
local mode, metric, max = study.objective.mode, study.objective.metric, study.max_steps
local sign = mode == "max" and 1 or -1
local qr = algorithms.ALGORITHMS.quasirandom

-- the pool: every done search trial, its u (the quasirandom point of its number), curve and objective;
-- from the study's run directory, or from the curves it exported (tests/bench/results/fashion_curves.json:
-- ids, final values and curves, the points being the quasirandom ones of the ids' numbers)
local pool = {}
if dir:match("%.json$") then
  for _, t in ipairs(json.decode(fs.read(dir)).trials) do
    local j = tonumber(t.id:match("_t(%d+)$"))
    pool[#pool + 1] = {id = t.id, j = j, u = qr.point(study.space, j, {seed = study.seed or 0}), final = t.final,
                       curve = t.curve}
  end
end
for line in (dir:match("%.json$") and "" or fs.read(dir .. "/journal.jsonl")):gmatch("[^\n]+") do
  local e = json.decode(line)
  if e.event == "finish" and e.status == "done" and e.kind == "search" then
    local j = tonumber(e.trial:match("_t(%d+)$"))
    local u = qr.point(study.space, j, {seed = study.seed or 0})
    for k, v in pairs(study.space:point(u, {})) do
      assert(math.abs(v - e.nuisance[k]) <= 1e-9 * math.max(1, math.abs(v)), "the recorded point differs: " .. e.trial)
    end
    pool[#pool + 1] = {id = e.trial, j = j, u = u, final = e.value, curve = prune.curve(e.dir, metric)}
  end
end
table.sort(pool, function(a, b) return a.j < b.j end)
local N = #pool
local best_all = -math.huge
for _, t in ipairs(pool) do best_all = math.max(best_all, sign * t.final) end
best_all = sign * best_all
local se = math.sqrt(math.abs(best_all) * (1 - math.abs(best_all)) / 5000)   -- 5,000 validation images
io.write(string.format("%d trials of %d steps, unpruned best %.4f; noise (one binomial SE on 5,000 images) %.4f\n",
  N, max, best_all, se))

local function order(seed)                        -- seed 0: the study's order; else a seeded shuffle
  local o = {}
  for i = 1, N do o[i] = i end
  if seed > 0 then
    local r = srng.rng("prune-replay", seed)
    for i = N, 2, -1 do local k = r:int(i) + 1; o[i], o[k] = o[k], o[i] end
  end
  return o
end

-- one sequential run: next(i, ran) picks the pool index of trial i; the rule decides where it stops
local function run(p, seed, next_trial)
  local ord, used, ran = order(seed), {}, {}
  local recs, paused, done = {}, {}, {}            -- recs[bracket][rung] = {{trial, value}}
  local steps, best, hit = 0, nil, nil
  local function finish(t, reached, complete)
    steps = steps + reached - (t.reached or 0)
    t.reached = reached
    if complete and (not best or sign * t.final > sign * best) then best = t.final end
    if best and not hit and sign * best >= sign * best_all - se then hit = steps end
  end
  local function advance(t, from)                  -- asha with pause: the paused trial's old rule
    for k = from, #p.rungs do
      local rec = recs[1][k]
      rec[#rec + 1] = {trial = t.id, value = prune.rung_value(t.curve, p.rungs[k])}
      if not prune.in_top(rec, t.id, p.reduction, mode) then
        paused[t.id] = {t = t, k = k}; finish(t, p.rungs[k]); return
      end
    end
    paused[t.id] = nil; finish(t, max, true)
  end
  local function promote()
    local again = true
    while again do
      again = false
      for k = #p.rungs, 1, -1 do
        for _, x in pairs(paused) do
          if x.k == k and prune.in_top(recs[1][k], x.t.id, p.reduction, mode) then
            paused[x.t.id] = nil; advance(x.t, k + 1); again = true
          end
        end
      end
    end
  end
  for i = 1, N do
    local pi = next_trial(i, ran, ord, used)
    used[pi] = true
    local t = {id = pool[pi].id, curve = pool[pi].curve, final = pool[pi].final, u = pool[pi].u}
    local stop, status = max, "done"
    if not p then
    elseif p.algorithm == "median" then
      local m = prune.median_rule(p, mode, t.curve, done)
      if m then stop, status = m.step, "pruned" end
    elseif p.pause then
      recs[1] = recs[1] or {}
      for k = 1, #p.rungs do recs[1][k] = recs[1][k] or {} end
      promote(); advance(t, 1)
      ran[i] = {u = t.u, status = paused[t.id] and "pruned" or "done", value = t.final, curve = t.curve,
                steps = t.reached}
      goto continue
    else
      local rungs, b = prune.ladder(p, i)
      b = b or 1
      recs[b] = recs[b] or {}
      for k, budget in ipairs(rungs) do
        recs[b][k] = recs[b][k] or {}
        local v = prune.rung_value(t.curve, budget)
        local go = prune.continues(recs[b][k], v, p.reduction, mode)
        recs[b][k][#recs[b][k] + 1] = v
        if not go then stop, status = budget, "pruned"; break end
      end
    end
    finish(t, stop, status == "done")
    if status == "done" then done[#done + 1] = t.curve end
    ran[i] = {u = t.u, status = status, value = t.final, curve = t.curve, steps = stop}
    ::continue::
  end
  if p and p.pause then promote() end
  return steps, best, hit
end

-- the study's order (seeded permutation)
local function in_order(i, ran, ord) return ord[i] end

-- the bayes row on the history a study gives it, snapped to the nearest unused pool trial
local function bayes_next(p, model)
  local row = algorithms.ALGORITHMS.bayes
  local init = algorithms.initial_points(row, study.space.d)
  return function(i, ran, ord, used)
    local hist = {}
    if model == "rungs" then
      hist = fidelity.history(p, max, ran, fidelity.need(study.space.d))
    else
      for _, r in ipairs(ran) do hist[#hist + 1] = {u = r.u, value = r.status == "done" and r.value or nil} end
    end
    local feasible = 0
    for _, h in ipairs(hist) do if h.value ~= nil then feasible = feasible + 1 end end
    local u
    if i > init and feasible >= row.needs_feasible then
      u = row.suggest(study.space, hist, {}, 1, {seed = 1, step = i, mode = mode, init = init})[1]
    end
    local pick, dist
    for k = 1, N do
      local pi = ord[k]
      if not used[pi] then
        if not u then return pi end                  -- an initial point: the next in the seed's order
        local d2 = 0
        for c = 1, #u do d2 = d2 + (u[c] - pool[pi].u[c]) ^ 2 end
        if not dist or d2 < dist then pick, dist = pi, d2 end
      end
    end
    return pick
  end
end

-- PRUNE_ORDERS=FILE: the pool and each seed's order as JSON, for tests/bench/prune_replay_optuna.py
if os.getenv("PRUNE_ORDERS") then
  local out = {max = max, mode = mode, best = best_all, se = se, trials = json.array(), orders = json.array()}
  for i, t in ipairs(pool) do
    local c = json.array()
    for k, pt in ipairs(t.curve) do c[k] = json.array({pt[1], pt[2]}) end
    out.trials[i] = {id = t.id, final = t.final, curve = c}
  end
  for seed = 0, seeds - 1 do out.orders[seed + 1] = json.array(order(seed)) end
  fs.write_atomic(os.getenv("PRUNE_ORDERS"), json.encode(out) .. "\n")
end

local function P(t) return prune.check(t, {max_steps = max, trials = N, algorithm = "bayes"}, error, function() end) end
local rules = {
  {"unpruned", nil},
  {"median (warmup 300, min_trials 3)", P{algorithm = "median", warmup = 300, min_trials = 3}},
  {"asha (100, 3), pause", P{algorithm = "asha", min_steps = 100, reduction = 3, pause = true}},
  {"asha (100, 3)", P{algorithm = "asha", min_steps = 100, reduction = 3}},
  {"asha (100, 2)", P{algorithm = "asha", min_steps = 100, reduction = 2}},
  {"hyperband (100, 3), budget 1", P{algorithm = "hyperband", min_steps = 100, reduction = 3, budget = 1}},
  {"hyperband (100, 2), budget 1", P{algorithm = "hyperband", min_steps = 100, reduction = 2, budget = 1}},
  {"hyperband (100, 3)", P{algorithm = "hyperband", min_steps = 100, reduction = 3}},
  {"hyperband (100, 2)", P{algorithm = "hyperband", min_steps = 100, reduction = 2}},
}
local samplers = {{"quasirandom", function() return in_order end}}
if not os.getenv("NO_BAYES") then
  samplers[2] = {"bayes", function(p) return bayes_next(p, "final") end}
  samplers[3] = {"bayes, model = rungs", function(p) return bayes_next(p, "rungs") end}
end

local function median(l)
  local s = {}
  for i, v in ipairs(l) do s[i] = v end
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end
io.write(string.format("seeds 0..%d (0: the study's order); medians over seeds; total = %d steps\n", seeds - 1, N * max))
io.write("| sampler | rule | steps used | best completed | gap | worst gap | steps to within 1 SE (seeds that got there) " ..
  "| seeds within 1 SE by 1/3 of the unpruned steps |\n")
io.write("|---|---|---|---|---|---|---|---|\n")
for _, sm in ipairs(samplers) do
  for _, r in ipairs(rules) do
    if sm[1] == "bayes, model = rungs" and not (r[2] and (r[2].algorithm == "asha" or r[2].algorithm == "hyperband")) then
      goto skip
    end
    local S, G, H, worst, got, third = {}, {}, {}, 0, 0, 0
    for seed = 0, seeds - 1 do
      local steps, best, hit = run(r[2], seed, sm[2](r[2]))
      S[#S + 1], G[#G + 1] = steps / (N * max), best and sign * (best_all - best) or math.huge
      worst = math.max(worst, G[#G])
      if hit then got = got + 1; H[#H + 1] = hit / (N * max) else H[#H + 1] = math.huge end
      if hit and 3 * hit <= N * max then third = third + 1 end
    end
    io.write(string.format("| %s | %s | %.0f%% | %.4f | %.4f | %.4f | %s (%d of %d) | %d of %d |\n", sm[1], r[1],
      100 * median(S), best_all - sign * median(G), median(G), worst,
      median(H) == math.huge and "-" or string.format("%.0f%%", 100 * median(H)), got, seeds, third, seeds))
    ::skip::
  end
end
