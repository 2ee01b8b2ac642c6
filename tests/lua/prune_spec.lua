-- dl.study pruning: the median rule against a hand-computed case, its `pruned`
-- status in the journal, trials.csv and the results (with the exploration
-- warning), through a SIGKILL of the study and with two agents; judged inside
-- each trial at its evals, so a study of fast trials run twice with one trial at
-- a time prunes the same trials at the same steps; asha pauses a trial at a rung
-- and promotes it later, and the promoted trial ends bit-identical to the same
-- trial never paused.
local dl = require "dlua"
local json, fs = dl.json, dl.fs
local prune = require "dlua.study.prune"

local EXE = os.getenv("DLUA_EXE") or "build/dlua"
local H = dofile("tests/lua/helpers.lua")
local write = H.spit

-- the toy experiment (tests/fixtures/toy_experiment.lua), 30 steps, and an eval and a checkpoint every
-- 5 steps (PRUNE_FIXED); MEDIAN's trials busy-wait `delay` seconds a step so that a study can be
-- killed, and two agents share it, while trials run
local EXPERIMENT = H.fixture("toy_experiment.lua")
local PRUNE_FIXED = "steps = 30, eval_every = 5, checkpoint_every = 5"

local study_file = H.study_file

local run = H.run

local events = H.journal_events

local function rows_by_id(sd)
  local t = {}
  for _, r in ipairs(dl.track.read(sd .. "/trials.csv")) do assert(not t[r.id], "listed twice: " .. r.id); t[r.id] = r end
  return t
end

local function count(tbl) local n = 0; for _ in pairs(tbl) do n = n + 1 end; return n end

-- the final status of every trial from the journal (a promote event re-opens one)
local function statuses(sd)
  local st = {}
  for _, e in ipairs(events(sd)) do
    if e.event == "finish" then st[e.trial] = e.status elseif e.event == "promote" then st[e.trial] = nil end
  end
  return st
end

describe("the median rule", function()
  it("prunes at the first step after warmup where the trial's best so far is worse than the completed trials' median", function()
    -- completed trials' objective (max) at steps 5, 10, 15:
    --   A: 0.50 0.60 0.70   B: 0.40 0.70 0.80   C: 0.30 0.50 0.90   D: 0.20 (only step 5)
    local done = {{{5, 0.5}, {10, 0.6}, {15, 0.7}}, {{5, 0.4}, {10, 0.7}, {15, 0.8}},
                  {{5, 0.3}, {10, 0.5}, {15, 0.9}}, {{5, 0.2}}}
    -- medians: step 5 of {0.5, 0.4, 0.3, 0.2} = 0.35; step 10 of {0.6, 0.7, 0.5} = 0.6; step 15 = 0.8
    local trial = {{5, 0.34}, {10, 0.61}, {15, 0.79}}
    local p = {warmup = 0, min_trials = 3}
    assert.are.same({step = 5, value = 0.34, median = 0.35, n = 4}, prune.median_rule(p, "max", trial, done))
    -- warmup 5: step 5 is not judged; at step 10 0.61 beats the median 0.6; at 15 0.79 < 0.8
    p.warmup = 5
    assert.are.same({step = 15, value = 0.79, median = 0.8, n = 3}, prune.median_rule(p, "max", trial, done))
    -- min_trials 4: only step 5 has four completed values, and it is in the warmup
    p.min_trials = 4
    assert.is_nil(prune.median_rule(p, "max", trial, done))
    -- steps already judged (from = 10) are not judged again
    assert.are.same({step = 15, value = 0.79, median = 0.8, n = 3},
      prune.median_rule({warmup = 0, min_trials = 3}, "max", trial, done, 10))
    -- the trial's best so far: its dip to 0.58 at step 10 is not judged (best 0.65 >= 0.6); at
    -- 15 its best, 0.65, is below the median 0.8
    assert.are.same({step = 15, value = 0.65, median = 0.8, n = 3},
      prune.median_rule({warmup = 5, min_trials = 3}, "max", {{5, 0.65}, {10, 0.58}, {15, 0.62}}, done))
    -- the completed trials' best up to the step: E dips from 0.9 to 0.1, and counts as 0.9 at step 10
    -- (best values 0.9, 0.3, 0.5: median 0.5; their values at step 10 alone would give 0.3)
    local dips = {{{5, 0.9}, {10, 0.1}}, {{5, 0.2}, {10, 0.3}}, {{5, 0.4}, {10, 0.5}}}
    assert.are.same({step = 10, value = 0.4, median = 0.5, n = 3},
      prune.median_rule({warmup = 5, min_trials = 3}, "max", {{10, 0.4}}, dips))
    -- a min objective flips the comparison, and its best is the lowest: the completed trials' best
    -- up to step 10 are 0.5, 0.4, 0.3 (median 0.4), the trial's 0.45
    assert.is_nil(prune.median_rule({warmup = 5, min_trials = 3}, "min", trial, done))
    assert.are.same({step = 10, value = 0.45, median = 0.4, n = 3},
      prune.median_rule({warmup = 5, min_trials = 3}, "min", {{5, 0.45}, {10, 0.61}}, done))
    -- equal to the median is not worse
    assert.is_nil(prune.median_rule({warmup = 0, min_trials = 3}, "max", {{10, 0.6}}, done))
    assert.are.equal(0.35, prune.median({0.2, 0.5, 0.3, 0.4}))
  end)

  it("asha: rungs, and the top 1/reduction of a rung", function()
    assert.are.same({10, 30, 90}, prune.rungs({min_steps = 10, reduction = 3}, 100))
    assert.are.same({10}, prune.rungs({min_steps = 10, reduction = 3}, 30))
    local recs = {{trial = "a", value = 0.5}, {trial = "b", value = 0.7}, {trial = "c", value = 0.6}}
    assert.is_true(prune.in_top(recs, "b", 3, "max"))
    assert.is_false(prune.in_top(recs, "c", 3, "max"))
    assert.is_true(prune.in_top(recs, "a", 3, "min"))
    assert.is_false(prune.in_top({recs[1], recs[2]}, "b", 3, "max"))    -- floor(2 / 3) = 0
    assert.are.equal(0.6, (prune.rung_value({{5, 0.5}, {10, 0.6}, {15, 0.4}}, 12)))
    assert.is_nil(prune.rung_value({{5, 0.5}, {10, 0.6}}, 12))
    -- no eval at or before the rung (evals every 400, rung at 200): the first eval past it
    -- (the Fashion-MNIST ASHA study never paused a trial before this rule)
    assert.are.same({0.88, 400}, {prune.rung_value({{400, 0.88}, {800, 0.90}}, 200)})
    assert.is_nil(prune.rung_value({}, 200))
  end)

  it("asha: a trial continues when it is in the top max(1, floor(n / reduction)) of the n there so far", function()
    -- hand-computed: values at one rung, in trial order, reduction 3 (k = 1 1 1 1 1 2 2 2 3)
    --   0.50 first: continue; 0.40 (0.50 better, k = 1): stop; 0.60: continue; 0.55 (0.60): stop;
    --   0.70: continue; 0.30 (five better, k = 2): stop; 0.65 (only 0.70, k = 2): continue;
    --   0.58 (0.60, 0.70, 0.65): stop; 0.62 (0.70, 0.65; k = 3): continue
    local vals = {0.50, 0.40, 0.60, 0.55, 0.70, 0.30, 0.65, 0.58, 0.62}
    local want = {true, false, true, false, true, false, true, false, true}
    local before = {}
    for i, v in ipairs(vals) do
      assert.are.equal(want[i], prune.continues(before, v, 3, "max"), "trial " .. i)
      before[#before + 1] = v
    end
    assert.is_true(prune.continues({0.5}, 0.5, 3, "max"))                  -- equal is not worse
    assert.is_true(prune.continues({0.6}, 0.5, 3, "min"))
    assert.is_false(prune.continues({0.4}, 0.5, 3, "min"))
    -- reduction 2.5, n = 5: k = floor(5 / 2.5) = 2, so one better value is allowed, two are not
    assert.is_true(prune.continues({0.9, 0.1, 0.2, 0.3}, 0.5, 2.5, "max"))
    assert.is_false(prune.continues({0.9, 0.8, 0.2, 0.3}, 0.5, 2.5, "max"))
  end)

  it("hyperband: brackets, their weights, and each trial's bracket by its number", function()
    local function check(p, max) return prune.check(p, {max_steps = max, algorithm = "bayes"}, error, error) end
    -- min 100, reduction 3, budget 900: budgets 100 300 900, so 3 brackets; weights ceil(3 * 3^s / (s + 1)),
    -- s = 2 1 0: 9 5 3 (Hyperband's n_i; Optuna's HyperbandPruner allocates the same)
    -- (budget = 1: the paper's counts, times 10; the default budget is hyperband_spec's)
    local function rw(list)
      local out = {}
      for i, b in ipairs(list) do out[i] = {rungs = b.rungs, weight = b.weight} end
      return out
    end
    local p = check({algorithm = "hyperband", min_steps = 100, reduction = 3, budget = 1}, 900)
    assert.are.same({{rungs = {100, 300}, weight = 90}, {rungs = {300}, weight = 50}, {rungs = {}, weight = 30}},
      rw(p.brackets))
    -- smooth weighted round robin (worked by hand): every 17 trials 9, 5 and 3, interleaved
    local want = {1, 2, 1, 3, 1, 2, 1, 3, 1, 2, 1, 2, 1, 3, 1, 2, 1}
    assert.are.same(want, prune.bracket_list(p.brackets, 17))
    local again = prune.bracket_list(p.brackets, 34)
    for i = 1, 17 do assert.are.equal(want[i], again[17 + i]) end
    assert.are.same({{300}, 2}, {prune.ladder(p, 6)})
    assert.are.same({1, 3, 5}, prune.peers(p, 7))                      -- bracket 1's trials before trial 7
    assert.are.same({2}, prune.peers(p, 6))
    -- min 5, reduction 2, budget 30: budgets 5 10 20 (40 > 30); weights ceil(3 * 2^s / (s + 1)) = 4 3 3
    local q = check({algorithm = "hyperband", min_steps = 5, reduction = 2, budget = 1}, 30)
    assert.are.same({{rungs = {5, 10, 20}, weight = 40}, {rungs = {10, 20}, weight = 30}, {rungs = {20}, weight = 30}},
      rw(q.brackets))
    assert.are.same({1, 2, 3, 1, 2, 3, 1, 2, 3, 1}, prune.bracket_list(q.brackets, 10))
    -- asha: every trial before it is a peer, and its rungs are the study's
    local a = check({algorithm = "asha", min_steps = 100, reduction = 3}, 900)
    assert.are.same({1, 2, 3}, prune.peers(a, 4))
    assert.are.same({{100, 300}}, {prune.ladder(a, 4)})
    assert.is_false(a.pause)
  end)
end)

-- three equal good points first (equal to their median, so never pruned), then bad ones the median rule
-- prunes at their first eval judged (with two jobs: once two trials completed, whatever finishes when)
local MEDIAN = [[
  nuisance = {lr = S.log_uniform(1e-4, 0.5)}, trials = 6, fixed = {delay = 0.03, ]] .. PRUNE_FIXED .. [[},
  enqueue = {{lr = 0.3}, {lr = 0.3}, {lr = 0.3}, {lr = 1e-4}, {lr = 1.2e-4}, {lr = 1.5e-4}},
  prune = {algorithm = "median", warmup = 0, min_trials = 2},]]

describe("dl.study prune = {algorithm = \"median\"}", function()
  local dir
  setup(function() dir = H.tmpdir("median"); write(dir .. "/exp.lua", EXPERIMENT) end)
  teardown(function() fs.rm_rf(dir) end)

  -- strict: the pruned trials were judged at their first eval (one agent, one job, never interrupted)
  local function check_pruned(sd, strict)
    local st = statuses(sd)
    assert.are.same({trial_t001 = "done", trial_t002 = "done", trial_t003 = "done", trial_t004 = "pruned",
                     trial_t005 = "pruned", trial_t006 = "pruned"}, st)
    local rows = rows_by_id(sd)
    assert.are.equal(6, count(rows))
    for id, s in pairs(st) do assert.are.equal(s, rows[id].status, id) end
    assert.truthy(rows.trial_t004.message:find("^pruned at step " .. (strict and "5" or "%d+") ..
      ": valid/accuracy [%d.]+ is worse than the median [%d.]+ of " .. (strict and "3" or "%d") ..
      " completed trial%(s%)$"), rows.trial_t004.message)
    -- pruned trials stopped early: fewer than 30 steps trained
    for _, id in ipairs(strict and {"trial_t004", "trial_t005", "trial_t006"} or {}) do
      assert.is_true(tonumber(rows[id].steps_run) < 30, id .. " ran " .. rows[id].steps_run)
    end
    local res = dl.study_results(sd)
    assert.are.equal(3, res.pruned)
    assert.are.equal(3, res.groups[1].pruned)
    assert.are.equal(0, res.groups[1].infeasible)
    assert.are.equal(3, #res.ranking)                     -- pruned trials are not ranked
    local rj = json.decode(fs.read(sd .. "/results.json"))
    assert.are.equal(3, rj.pruned)
    assert.are.equal(3, rj.groups[1].pruned)
  end

  it("prunes the bad trials, with their own status in the journal, trials.csv and the results", function()
    study_file(dir, "median.lua", "  name = \"median\", algorithm = \"bayes\", parallel = 1," .. MEDIAN)
    local out, rc = run(dir, "median.lua --out runs --no-check --threads 1")
    assert.are.equal(0, rc, out)
    check_pruned(dir .. "/runs/median", true)
    assert.truthy(out:find("pruned (median): (all) 3 of 6", 1, true), out)
    assert.truthy(out:find("[ok]   pruning: 3 of 6 trials pruned (median)", 1, true), out)
    assert.falsy(out:find("exploration study needs complete trials", 1, true), out)
  end)

  it("says that an exploration study which prunes needs complete trials", function()
    study_file(dir, "explore.lua", "  name = \"explore\", parallel = 1," .. MEDIAN)
    local out, rc = run(dir, "explore.lua --out runs --no-check --threads 1")
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("the quasirandom study prunes trials (median): an exploration study needs complete " ..
      "trials", 1, true), out)
    local rj = json.decode(fs.read(dir .. "/runs/explore/results.json"))
    assert.truthy(rj.warnings[1]:find("exploration study needs complete trials", 1, true))
    -- the diagnosis: a warning, and pruned trials are not counted as infeasible
    assert.truthy(out:find("[warn] pruning: 3 of 6 trials pruned (median); the quasirandom study prunes", 1, true),
      out)
    assert.truthy(out:find("infeasible: 0 of 3 trials infeasible", 1, true), out)
  end)

  it("keeps pruned trials pruned through a SIGKILL of the study and a resume", function()
    study_file(dir, "killed.lua", "  name = \"killed\", algorithm = \"bayes\", parallel = 2," .. MEDIAN)
    local sd = dir .. "/runs/killed"
    local p = io.popen(string.format("cd %s && exec %s killed.lua --out runs --no-check --threads 1 >log 2>&1 & " ..
      "echo $!", dir, EXE))
    local pid = tonumber(p:read("a"))
    p:close()
    -- kill it once a trial was pruned (the journal says so)
    local t0 = dl.clock()
    while not (fs.read(sd .. "/journal.jsonl") or ""):find("\"pruned\"", 1, true) do
      assert(dl.clock() - t0 < 60, "no trial pruned in 60 s: " .. tostring(fs.read(dir .. "/log")))
      os.execute("sleep 0.05")
    end
    os.execute("kill -KILL " .. pid)
    os.execute("sleep 0.3")
    local before = statuses(sd)
    local out, rc = run(dir, "killed.lua --out runs --no-check --threads 1")
    assert.are.equal(0, rc, out)
    check_pruned(sd)
    -- a trial pruned before the kill was never claimed again
    local claims = {}
    for _, e in ipairs(events(sd)) do if e.event == "claim" then claims[e.trial] = (claims[e.trial] or 0) + 1 end end
    for id, s in pairs(before) do if s == "pruned" then assert.are.equal(1, claims[id], id) end end
  end)

  it("prunes with two agents sharing the study", function()
    study_file(dir, "agents.lua", "  name = \"agents\", algorithm = \"bayes\", parallel = 1," .. MEDIAN)
    local out, rc = run(dir, "agents.lua --out runs --no-check --create")
    assert.are.equal(0, rc, out)
    local sd = dir .. "/runs/agents"
    local p = io.popen(string.format("cd %s && (%s agent runs/agents --threads 1 --quiet >a1 2>&1 & " ..
      "%s agent runs/agents --threads 1 --quiet >a2 2>&1 & wait); echo done", dir, EXE, EXE))
    p:read("a")
    p:close()
    -- two trials at a time, as with --jobs 2: the bad ones are judged once two completed
    local st = statuses(sd)
    assert.are.equal(6, count(st), fs.read(dir .. "/a1"))
    local n = {done = 0, pruned = 0}
    for id, s in pairs(st) do n[s] = (n[s] or 0) + 1; assert(s == "done" or s == "pruned", id .. " " .. s) end
    assert.are.same({done = 3, pruned = 3}, n)
    local claims = {}
    for _, e in ipairs(events(sd)) do if e.event == "claim" then claims[e.trial] = (claims[e.trial] or 0) + 1 end end
    for id, c in pairs(claims) do assert.are.equal(1, c, id) end
    local rows = rows_by_id(sd)
    for id, s in pairs(st) do assert.are.equal(s, rows[id].status) end
    assert.truthy(fs.exists(sd .. "/results.json"))
  end)
end)

-- the objective of a run directory at every eval step, from its metrics.jsonl
local function accuracy_by_step(d)
  local by = {}
  for line in (fs.read(d .. "/metrics.jsonl") or ""):gmatch("[^\n]+") do
    local e = json.decode(line)
    if e.split == "eval" then by[e.step] = e["valid/accuracy"] end
  end
  return by
end

-- the best accuracy of a run's evals up to step (nil without an eval at step)
local function best_until(by, step)
  if by[step] == nil then return nil end
  local b = -math.huge
  for st, v in pairs(by) do if st <= step then b = math.max(b, v) end end
  return b
end

describe("pruning judged inside the trial", function()
  local dir
  setup(function() dir = H.tmpdir("inproc"); write(dir .. "/exp.lua", EXPERIMENT) end)
  teardown(function() fs.rm_rf(dir) end)

  it("prunes the same trials at the same steps on every run with one trial at a time, fast trials too", function()
    -- no delay: each trial takes a fraction of a second, faster than any poll; bayes, so the points
    -- themselves depend on which trials were pruned before (init = 8: spread initial points, some of
    -- them bad, for the rule to prune)
    study_file(dir, "fast.lua", [[
  name = "fast", algorithm = "bayes", trials = 12, init = 8, nuisance = {lr = S.log_uniform(1e-4, 0.5)},
  fixed = {]] .. PRUNE_FIXED .. [[}, prune = {algorithm = "median", warmup = 0, min_trials = 2},]])
    local runs = {}
    for i = 1, 2 do
      local out, rc = run(dir, string.format("fast.lua --out runs%d --no-check --threads 1 --jobs 1", i))
      assert.are.equal(0, rc, out)
      local sd = string.format("%s/runs%d/fast", dir, i)
      local pruned, order, done_before = {}, {}, {}
      for _, e in ipairs(events(sd)) do
        if e.event == "finish" then
          order[#order + 1] = e.trial
          if e.status == "pruned" then
            pruned[#pruned + 1] = {e.trial, e.step, e.value, e.message}
            -- stopped at the eval it was judged at: nothing trained or evaluated past it
            local by = accuracy_by_step(sd .. "/" .. e.trial)
            local last = 0
            for st in pairs(by) do last = math.max(last, st) end
            assert.are.equal(e.step, last, e.trial)
            assert.are.equal(e.step, e.steps, e.trial)
            assert.are.equal(best_until(by, e.step), e.value, e.trial)     -- its best so far
            -- the rule, from the run directories of the trials done before it: its best so far worse
            -- than the median of theirs up to the same step
            local vals = {}
            for _, id in ipairs(done_before) do vals[#vals + 1] = best_until(accuracy_by_step(sd .. "/" .. id), e.step) end
            assert.is_true(#vals >= 2, e.trial)
            table.sort(vals)
            local n = #vals
            local median = n % 2 == 1 and vals[(n + 1) // 2] or (vals[n // 2] + vals[n // 2 + 1]) / 2
            assert.is_true(e.value < median, e.trial)
            assert.are.equal(string.format("pruned at step %d: valid/accuracy %.6g is worse than the median %.6g " ..
              "of %d completed trial(s)", e.step, e.value, median, n), e.message)
          elseif e.status == "done" then
            done_before[#done_before + 1] = e.trial
          end
        end
      end
      assert.are.equal(12, #order, out)
      -- the GP counts a pruned trial as infeasible: no point is suggested twice (left out of its
      -- history, 7 of these 12 trials were the same pruned point)
      local points = {}
      for _, e in ipairs(events(sd)) do
        if e.event == "finish" then
          local key = string.format("%.17g", e.nuisance.lr)
          assert.is_nil(points[key], e.trial .. " repeats " .. tostring(points[key]))
          points[key] = e.trial
        end
      end
      runs[i] = pruned
    end
    assert.is_true(#runs[1] >= 3, "pruned only " .. #runs[1])
    assert.are.same(runs[1], runs[2])
  end)

  it("refuses a --prune file that is not a trial's settings, and runs unjudged without the study's journal", function()
    write(dir .. "/bad.json", "{\"study\": 3}\n")
    local out, rc = run(dir, "exp.lua --prune bad.json --out r1 --quiet --no-track --threads 1")
    assert.are.equal(1, rc, out)
    assert.truthy(out:find("dlua: --prune: bad.json is not a study trial's pruning settings", 1, true), out)
    write(dir .. "/lost.json", json.encode(prune.trial_settings(dir .. "/nowhere", {trial = "t", dir = "r2", owner = "o"},
      {prune = {algorithm = "median", warmup = 0, min_trials = 1}, objective = {metric = "valid/accuracy",
      mode = "max"}})))
    out, rc = run(dir, "exp.lua --prune lost.json --out r2 --quiet --no-track --threads 1")
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("dlua: warning: --prune: the study's journal " .. dir .. "/nowhere/journal.jsonl is not " ..
      "reachable from here; this trial is not judged and runs to its end", 1, true), out)
    assert.are.equal("done", json.decode(fs.read(dir .. "/r2/result.json")).status)
    assert.is_false(fs.exists(dir .. "/nowhere"))
  end)
end)

describe("dl.study prune settings", function()
  it("are checked when the study is defined", function()
    local dir = H.tmpdir("prunecheck")
    write(dir .. "/exp.lua", EXPERIMENT)
    local cases = {
      {"{algorithm = \"medain\"}", "prune.algorithm must be \"asha\", \"hyperband\" or \"median\", got medain; " ..
        "did you mean 'median'?"},
      {"{algorithm = \"hyperbnd\", min_steps = 5}", "prune.algorithm must be \"asha\", \"hyperband\" or \"median\", " ..
        "got hyperbnd; did you mean 'hyperband'?"},
      {"{algorithm = \"hyperband\"}", "prune.min_steps is required for hyperband (the first rung's steps)"},
      {"{algorithm = \"hyperband\", min_steps = 5, pause = true}", "prune.pause belongs to asha, not hyperband"},
      {"{algorithm = \"hyperband\", min_steps = 5, warmup = 3}", "prune.warmup belongs to median, not hyperband"},
      {"{algorithm = \"hyperband\", min_steps = 5, budget = 0}", "prune.budget must be a number in (0, 1] (the " ..
        "fraction of the unpruned trials' steps hyperband may expect to spend), got 0"},
      {"{algorithm = \"hyperband\", min_steps = 5, budget = \"third\"}", "prune.budget must be a number in (0, 1]"},
      {"{algorithm = \"asha\", min_steps = 5, budget = 0.5}", "prune.budget belongs to hyperband, not asha"},
      {"{algorithm = \"asha\", min_steps = 5, pause = 1}", "prune.pause must be a boolean, got 1"},
      {"{algorithm = \"asha\", min_steps = 5, model = \"rung\"}", "prune.model must be \"final\" or \"rungs\", " ..
        "got rung; did you mean 'rungs'?"},
      {"{algorithm = \"asha\", min_steps = 5, model = \"rungs\"}", "prune.model = \"rungs\" is the bayes sampler's " ..
        "(its GP fits the rungs' values), and this study's algorithm is quasirandom"},
      {"{algorithm = \"asha\"}", "prune.min_steps is required for asha (the first rung's steps)"},
      {"{algorithm = \"asha\", min_steps = 30}", "prune.min_steps = 30 is not below the step budget 30: no rung"},
      {"{algorithm = \"asha\", min_steps = 5, reduction = 1}", "prune.reduction must be a finite number > 1, got 1"},
      {"{algorithm = \"median\", min_steps = 5}", "prune.min_steps belongs to asha and hyperband, not median"},
      {"{algorithm = \"median\", min_trials = 0}", "prune.min_trials must be a positive integer, got 0"},
    }
    for i, c in ipairs(cases) do
      study_file(dir, "p" .. i .. ".lua", "  name = \"p\", nuisance = {lr = S.log_uniform(1e-4, 0.5)}, trials = 2, " ..
        "fixed = {" .. PRUNE_FIXED .. "},\n  prune = " .. c[1] .. ",")
      local err, rc = run(dir, "p" .. i .. ".lua --out runs --no-check")
      assert.are.equal(1, rc, err)
      assert.truthy(err:find("p" .. i .. ".lua:6: dl.study: " .. c[2], 1, true), "want: " .. c[2] .. "\ngot: " .. err)
    end
    fs.rm_rf(dir)
  end)
end)

describe("dl.study prune = {algorithm = \"asha\"}", function()
  local dir
  setup(function() dir = H.tmpdir("asha"); write(dir .. "/exp.lua", EXPERIMENT) end)
  teardown(function() fs.rm_rf(dir) end)

  it("pauses at a rung, promotes the best later, and the promoted trial ends bit-identical to an unpaused one",
    function()
    -- rung at 10 steps (30 is the budget); t002 is the best of the first three, paused when it reached the
    -- rung (floor(2 / 3) = 0 promoted) and promoted once t003 arrived
    study_file(dir, "asha.lua", [[
  name = "asha", algorithm = "bayes", parallel = 1, steps = 30, trials = 4,
  fixed = {eval_every = 5, checkpoint_every = 5},
  nuisance = {lr = S.log_uniform(1e-4, 0.5)},
  enqueue = {{lr = 1e-3}, {lr = 0.3}, {lr = 2e-3}, {lr = 1.5e-3}},
  prune = {algorithm = "asha", min_steps = 10, reduction = 3, pause = true},]])
    local out, rc = run(dir, "asha.lua --out runs --no-check --threads 1")
    assert.are.equal(0, rc, out)
    local sd = dir .. "/runs/asha"
    local ev = events(sd)
    local paused_at, promoted
    for i, e in ipairs(ev) do
      if e.event == "finish" and e.trial == "trial_t002" and e.status == "pruned" then paused_at = i end
      if e.event == "promote" and e.trial == "trial_t002" then promoted = i; assert.are.equal(1, e.rung) end
    end
    assert.truthy(paused_at and promoted and paused_at < promoted, out)
    assert.are.same({trial_t001 = "pruned", trial_t002 = "done", trial_t003 = "pruned", trial_t004 = "pruned"},
      statuses(sd))
    local rows = rows_by_id(sd)
    assert.are.equal("done", rows.trial_t002.status)
    assert.truthy(rows.trial_t001.message:find("^paused at rung 1 %(10 steps%)"), rows.trial_t001.message)
    -- the paused trial was stopped before its budget, then resumed
    local paused = ev[paused_at]
    assert.is_true(paused.steps < 30, "t002 was not stopped before the end: " .. tostring(paused.steps))
    -- the same trial never paused
    local ref = dir .. "/ref"
    local r2, rc2 = run(dir, string.format("exp.lua --set delay=0 --set lr=0.3 --set eval_every=5 " ..
      "--set checkpoint_every=5 --steps 30 --out %s --quiet --no-track --threads 1", ref))
    assert.are.equal(0, rc2, r2)
    local function evals(d)
      local l = {}
      for line in fs.read(d .. "/metrics.jsonl"):gmatch("[^\n]+") do
        local e = json.decode(line)
        if e.split == "eval" then l[#l + 1] = {e.step, e["valid/accuracy"], e["valid/loss"]} end
      end
      return l
    end
    assert.are.same(evals(ref), evals(sd .. "/trial_t002"))
    assert.are.equal(6, #evals(ref))
    local a = assert(dl.checkpoint.load(ref .. "/checkpoints/ckpt-000000030.safetensors"))
    local b = assert(dl.checkpoint.load(sd .. "/trial_t002/checkpoints/ckpt-000000030.safetensors"))
    local n = 0
    for k, t in pairs(a) do
      n = n + 1
      assert.is_true(b[k] ~= nil and (t - b[k]):abs():max():item() == 0, "differs: " .. k)
    end
    assert.is_true(n >= 4)
  end)
end)

-- the decisions an asha/hyperband study should have made, recomputed from its journal's rung events the
-- way Optuna's SuccessiveHalvingPruner states its rule: sort the values at the rung of the trials before
-- it in its bracket (in trial order) and its own, and continue when its value is at least the
-- (max(1, n // reduction))-th best; returns {[trial] = "done" or "pruned"} and the rung events per trial
local function oracle(ev, p)
  local rungs = {}                                   -- rungs[trial] = {[k] = value}
  for _, e in ipairs(ev) do
    if e.event == "rung" then
      rungs[e.trial] = rungs[e.trial] or {}
      rungs[e.trial][e.rung] = e.value
    end
  end
  local want, ids = {}, {}
  for id in pairs(rungs) do ids[#ids + 1] = id end
  table.sort(ids)
  local brackets = p.brackets and prune.bracket_list(p.brackets, #ids)
  for i, id in ipairs(ids) do
    local b = brackets and brackets[i]
    local mine = b and p.brackets[b].rungs or p.rungs
    want[id] = "done"
    for k = 1, #mine do
      local v = rungs[id][k]
      if v == nil then break end
      local vals = {v}
      for m = 1, i - 1 do
        if (not b or brackets[m] == b) and rungs[ids[m]][k] ~= nil then vals[#vals + 1] = rungs[ids[m]][k] end
      end
      table.sort(vals, function(x, y) return x > y end)
      if v < vals[math.max(1, #vals // p.reduction)] then want[id] = "pruned"; break end
    end
  end
  return want, rungs
end

-- eight trials, enqueued points (so the points do not depend on timing), a trial a few milliseconds a step
local SEQ = [[
  nuisance = {lr = S.log_uniform(1e-4, 0.5)}, trials = 8, fixed = {delay = 0.01, ]] .. PRUNE_FIXED .. [[},
  enqueue = {{lr = 1e-3}, {lr = 0.3}, {lr = 2e-3}, {lr = 0.1}, {lr = 1e-4}, {lr = 0.2}, {lr = 0.05}, {lr = 3e-4}},]]

describe("dl.study prune = {algorithm = \"asha\"} and \"hyperband\", one trial at a time and two", function()
  local dir
  setup(function() dir = H.tmpdir("asha-seq"); write(dir .. "/exp.lua", EXPERIMENT) end)
  teardown(function() fs.rm_rf(dir) end)

  for _, c in ipairs({{"asha", "{algorithm = \"asha\", min_steps = 5, reduction = 3}"},
                      {"hyperband", "{algorithm = \"hyperband\", min_steps = 5, reduction = 2, budget = 1}"}}) do
    it(c[1] .. ": trials complete with one job, every decision is the rule's on the rungs' values in trial " ..
      "order, and two jobs decide the same", function()
      local runs = {}
      for _, jobs in ipairs({1, 2}) do
        local f = string.format("%s%d.lua", c[1], jobs)
        study_file(dir, f, string.format("  name = \"%s\", algorithm = \"bayes\", parallel = %d,", c[1], jobs) .. SEQ ..
          "\n  prune = " .. c[2] .. ",")
        local out, rc = run(dir, f .. " --out runs --no-check --threads 1")
        assert.are.equal(0, rc, out)
        local sd = string.format("%s/runs/%s", dir, c[1])
        local ev = events(sd)
        local p = json.decode(fs.read(sd .. "/study.json")).prune
        local want, rungs = oracle(ev, p)
        assert.are.equal(8, count(want))
        assert.are.same(want, statuses(sd))
        -- with one job the first trial always runs to its end (it is the best at each rung when it gets there)
        assert.are.equal("done", want.trial_t001)
        local done = 0
        for _, st in pairs(want) do if st == "done" then done = done + 1 end end
        assert.is_true(done >= 2 and done < 8, "done " .. done)
        if c[1] == "hyperband" then                      -- each rung event names its trial's bracket
          local b = prune.bracket_list(p.brackets, 8)
          for _, e in ipairs(ev) do
            if e.event == "rung" then assert.are.equal(b[tonumber(e.trial:match("_t(%d+)$"))], e.bracket) end
          end
        end
        runs[jobs] = {want = want, rungs = rungs}
        fs.rm_rf(sd)
      end
      assert.are.same(runs[1].want, runs[2].want)
      assert.are.same(runs[1].rungs, runs[2].rungs)
    end)
  end
end)

describe("prune.model = \"rungs\" (dlua.study.fidelity)", function()
  local fidelity = require "dlua.study.fidelity"
  it("fits the GP at the largest budget with enough values, the trials stopped below it infeasible", function()
    local p = {algorithm = "asha", rungs = {10, 30}}
    local A = {u = {0.1}, status = "done", value = 0.9, curve = {{10, 0.5}, {30, 0.7}, {90, 0.88}}, steps = 90}
    local B = {u = {0.2}, status = "pruned", value = 0.65, curve = {{10, 0.6}, {30, 0.65}}, steps = 30}
    local C = {u = {0.3}, status = "pruned", value = 0.3, curve = {{10, 0.3}}, steps = 10}
    local D = {u = {0.4}, status = "diverged"}
    local fin = {A, B, C, D}
    assert.are.same({10, 30, 90}, fidelity.budgets(p, 90))
    -- need 2: at 90 only A (its objective 0.9, not the curve's 0.88); at 30 A and B
    local h, b = fidelity.history(p, 90, fin, 2)
    assert.are.equal(30, b)
    assert.are.same({{u = {0.1}, value = 0.7}, {u = {0.2}, value = 0.65}, {u = {0.3}}, {u = {0.4}}}, h)
    -- need 3: at 10 A, B and C
    h, b = fidelity.history(p, 90, fin, 3)
    assert.are.equal(10, b)
    assert.are.same({{u = {0.1}, value = 0.5}, {u = {0.2}, value = 0.6}, {u = {0.3}, value = 0.3}, {u = {0.4}}}, h)
    -- need 4: no budget has four, so the full budget (the default model's history)
    h, b = fidelity.history(p, 90, fin, 4)
    assert.are.equal(90, b)
    assert.are.same({{u = {0.1}, value = 0.9}, {u = {0.2}}, {u = {0.3}}, {u = {0.4}}}, h)
    -- hyperband: every bracket's rungs
    assert.are.same({100, 300, 900}, fidelity.budgets({brackets = {{rungs = {100, 300}}, {rungs = {300}}, {rungs = {}}}},
      900))
    assert.are.equal(6, fidelity.need(4))
  end)

  it("a bayes study with hyperband and model = \"rungs\" runs its GP on the rungs", function()
    local dir = H.tmpdir("bohb")
    write(dir .. "/exp.lua", EXPERIMENT)
    study_file(dir, "bohb.lua", "  name = \"bohb\", algorithm = \"bayes\", parallel = 1, init = 2," ..
      "  nuisance = {lr = S.log_uniform(1e-4, 0.5)}, trials = 8, fixed = {" .. PRUNE_FIXED .. "},\n" ..
      "  enqueue = {{lr = 1e-3}, {lr = 0.3}, {lr = 2e-3}, {lr = 0.1}},\n" ..
      "  prune = {algorithm = \"hyperband\", min_steps = 5, reduction = 2, model = \"rungs\"},")
    local out, rc = run(dir, "bohb.lua --out runs --no-check --threads 1")
    assert.are.equal(0, rc, out)
    local st, suggested = statuses(dir .. "/runs/bohb"), 0
    assert.are.equal(8, count(st))
    for _, e in ipairs(events(dir .. "/runs/bohb")) do if e.event == "suggest" then suggested = suggested + 1 end end
    assert.are.equal(2, suggested)                       -- 5-6: the quasirandom initial points; 7-8: the GP's
    fs.rm_rf(dir)
  end)
end)
