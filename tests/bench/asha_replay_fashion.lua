-- tests/bench/asha_replay_fashion.lua -- issue 18's pruning question on the Fashion-MNIST exploration
-- study (examples/fashion_mnist_tune.lua), answered by replay:
--   build/dlua tests/bench/asha_replay_fashion.lua runs/fashion-mnist-tune
-- trial order, promotions before each new trial and at the end) over the unpruned
-- exploration study's recorded curves: the runs are deterministic, so a trial's value
-- at a rung is the one the unpruned run recorded
local prune = require "dlua.study.prune"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local dir = arg[1]
local rungs, red, budget = {400, 800}, 2, 1600
local groups = {}
for _, g in ipairs({"flip-0", "flip-0.5"}) do
  local trials = {}
  for i = 1, 4 do
    local id = string.format("%s_t%03d", g, i)
    local curve = {}
    for line in fs.read(dir .. "/" .. id .. "/metrics.jsonl"):gmatch("[^\n]+") do
      local e = json.decode(line)
      if e.split == "eval" then curve[e.step] = e["valid/accuracy"] end
    end
    trials[i] = {id = id, curve = curve, reached = 0, paused = nil}
  end
  groups[#groups + 1] = trials
end
local total, best = 0, {}
for gi, trials in ipairs(groups) do
  local records = {{}, {}}
  local function advance(t, from)          -- run t from rung index `from` until paused or done
    for k = from, #rungs do
      t.reached = rungs[k]
      local rec = records[k]
      rec[#rec + 1] = {trial = t.id, value = t.curve[rungs[k]]}
      if not prune.in_top(rec, t.id, red, "max") then t.paused = k; return end
    end
    t.reached, t.paused = budget, nil
  end
  local function promote()
    local again = true
    while again do
      again = false
      for k = #rungs, 1, -1 do
        for _, t in ipairs(trials) do
          if t.paused == k and prune.in_top(records[k], t.id, red, "max") then
            t.paused = nil; advance(t, k + 1); again = true
          end
        end
      end
    end
  end
  for _, t in ipairs(trials) do promote(); advance(t, 1) end
  promote()
  for _, t in ipairs(trials) do
    total = total + t.reached
    print(string.format("%-14s reached %4d%s  value there %.4f  (unpruned final %.4f)", t.id, t.reached,
      t.paused and (" (paused at rung " .. t.paused .. ")") or "          ", t.curve[t.reached], t.curve[budget]))
    if t.reached == budget and (not best[gi] or t.curve[budget] > best[gi].v) then best[gi] = {id = t.id, v = t.curve[budget]} end
  end
  print(string.format("group %d best completed: %s %.4f", gi, best[gi].id, best[gi].v))
end
print(string.format("steps: %d of %d (%.0f%%)", total, 8 * budget, 100 * total / (8 * budget)))
