-- dl.diagnose: the playbook's checklist on synthetic studies and runs whose numbers
-- are known (tests/lua/report_fixtures.lua writes the files dl.train and dl.study
-- write), each expectation computed here independently of the engine's code.
local dl = require "dlua"
local F = dofile("tests/lua/report_fixtures.lua")
local A = require "dlua.report.analysis"
local S, fs = dl.search, dl.fs

local function find(findings, check, level)
  local out = {}
  for _, f in ipairs(findings) do
    if f.check == check and (level == nil or f.level == level) then out[#out + 1] = f end
  end
  return out
end

local function diag(dir, opts)
  opts = opts or {}
  opts.quiet = true
  local findings, text = dl.diagnose(dir, opts)
  return findings, text
end

local function log10(x) return math.log(x, 10) end

-- the planned trials' lr values with their ids, read back from the journal the fixture wrote
local function trials_of(dir)
  local d = A.load(dir)
  return d.trials, d
end

describe("dl.diagnose: search-space boundaries", function()
  it("flags a best trial at the lr upper bound, naming the trial, the value and the direction", function()
    local root = F.tmpdir("upper")
    local dir = F.study(root, {trials = 16, value = function(hp) return 0.5 + 0.1 * log10(hp.lr / 1e-4) end})
    local trials = trials_of(dir)
    local best
    for _, t in ipairs(trials) do if not best or t.hp.lr > best.hp.lr then best = t end end
    local u = log10(best.hp.lr / 1e-4) / 3
    assert.is_true(u >= 0.9, "fixture: the largest sampled lr should be in the top 10% (u = " .. u .. ")")
    local findings = diag(dir)
    local b = find(findings, "boundary", "warn")
    assert.are.equal(1, #b)
    assert.are.same({best.id}, b[1].trials)
    assert.are.equal("upper", b[1].data.side)
    assert.are.equal("lr", b[1].data.dim)
    assert.is_true(math.abs(b[1].data.position - u) < 1e-12)
    assert.truthy(b[1].message:find(best.id, 1, true))
    assert.truthy(b[1].message:find(string.format("lr = %.4g", best.hp.lr), 1, true), b[1].message)
    assert.truthy(b[1].message:find("raise the upper bound", 1, true), b[1].message)
    fs.rm_rf(root)
  end)

  it("does not flag a best trial inside the search space", function()
    local root = F.tmpdir("interior")
    local dir = F.study(root, {trials = 16, value = function(hp) return 0.9 - 0.1 * (log10(hp.lr) - log10(3e-3)) ^ 2 end})
    local trials = trials_of(dir)
    local best
    for _, t in ipairs(trials) do
      local v = 0.9 - 0.1 * (log10(t.hp.lr) - log10(3e-3)) ^ 2
      if not best or v > best.v then best = {t = t, v = v} end
    end
    local u = log10(best.t.hp.lr / 1e-4) / 3
    assert.is_true(u > 0.1 and u < 0.9, "fixture: the best lr is interior")
    local findings = diag(dir)
    assert.are.equal(0, #find(findings, "boundary", "warn"))
    local ok = find(findings, "boundary", "ok")
    assert.are.equal(1, #ok)
    assert.truthy(ok[1].message:find("no best trial near a boundary of the 1 searched dimension", 1, true))
    fs.rm_rf(root)
  end)

  it("flags the lower bound too, with the direction to expand", function()
    local root = F.tmpdir("lower")
    local dir = F.study(root, {trials = 16, value = function(hp) return 0.9 - 0.1 * log10(hp.lr / 1e-4) end})
    local trials = trials_of(dir)
    local best
    for _, t in ipairs(trials) do if not best or t.hp.lr < best.hp.lr then best = t end end
    local b = find(diag(dir), "boundary", "warn")
    assert.are.equal(1, #b)
    assert.are.same({best.id}, b[1].trials)
    assert.are.equal("lower", b[1].data.side)
    assert.truthy(b[1].message:find("lower the lower bound", 1, true), b[1].message)
    fs.rm_rf(root)
  end)

  it("checks each scientific value's best trial in its own branch of a conditional space", function()
    local root = F.tmpdir("branches")
    -- sgd: best lr at the top of its range; adam: interior
    local dir = F.study(root, {scientific = {optimizer = {"sgd", "adam"}}, trials = 16,
      nuisance = {lr = S.switch("optimizer", {sgd = S.log_uniform(1e-3, 1), adam = S.log_uniform(1e-5, 1e-2)})},
      value = function(hp)
        if hp.optimizer == "sgd" then return 0.5 + 0.1 * log10(hp.lr / 1e-3) end
        return 0.9 - 0.1 * (log10(hp.lr) - log10(3e-4)) ^ 2
      end})
    local b = find(diag(dir), "boundary", "warn")
    assert.are.equal(1, #b)
    assert.are.equal("lr[optimizer=sgd]", b[1].data.dim)
    assert.truthy(b[1].trials[1]:match("^optimizer%-sgd_t"))
    assert.truthy(b[1].message:find("of optimizer=sgd", 1, true), b[1].message)
    fs.rm_rf(root)
  end)

  it("flags a best trial next to a region where every trial is infeasible, listing those trials", function()
    local root = F.tmpdir("edge")
    local dir = F.study(root, {trials = 16, value = function(hp)
      if hp.lr > 0.02 then return nil end
      return 0.5 + 0.1 * log10(hp.lr / 1e-4)
    end})
    local trials = trials_of(dir)
    local bad, best = {}, nil
    for _, t in ipairs(trials) do
      if t.hp.lr > 0.02 then bad[#bad + 1] = t.id elseif not best or t.hp.lr > best.hp.lr then best = t end
    end
    table.sort(bad)
    assert.is_true(#bad >= 1)
    local b = find(diag(dir), "boundary", "warn")
    local adj
    for _, f in ipairs(b) do if f.message:find("next to the infeasible region", 1, true) then adj = f end end
    assert.truthy(adj)
    local got = {table.unpack(adj.trials)}
    table.sort(got)
    assert.are.same(bad, got)
    assert.truthy(adj.message:find(best.id, 1, true))
    assert.truthy(adj.message:find("recipes/warmup.lua", 1, true))
    fs.rm_rf(root)
  end)
end)

describe("dl.diagnose: infeasible trials", function()
  it("gives the infeasible fraction with the trials and warns from 25%", function()
    local root = F.tmpdir("infeasible")
    local dir = F.study(root, {trials = 16, value = function(hp)
      if hp.lr > 4e-3 then return nil end
      return 0.7
    end})
    local trials = trials_of(dir)
    local bad = 0
    for _, t in ipairs(trials) do if t.hp.lr > 4e-3 then bad = bad + 1 end end
    local f = find(diag(dir), "infeasible")
    local main = f[1]
    assert.are.equal(bad, main.data.infeasible)
    assert.are.equal(16, main.data.trials)
    assert.are.equal(bad / 16 >= 0.25 and "warn" or "note", main.level)
    assert.truthy(main.message:find(string.format("%d of 16 trials infeasible (%.0f%%)", bad, 100 * bad / 16), 1, true),
      main.message)
    -- the top quarter of the log range [1e-4, 1e-1] is all infeasible (lr > 4e-3 starts below 10^-2.25)
    local top
    for _, x in ipairs(f) do if x.data.bucket == 4 then top = x end end
    assert.truthy(top, "the top bucket is reported")
    local n4 = 0
    for _, t in ipairs(trials) do if log10(t.hp.lr / 1e-4) / 3 >= 0.75 then n4 = n4 + 1 end end
    assert.are.equal(n4, top.data.trials)
    assert.are.equal(n4, top.data.infeasible)
    fs.rm_rf(root)
  end)

  it("says ok when every trial is feasible", function()
    local root = F.tmpdir("feasible")
    local dir = F.study(root, {trials = 8, value = function() return 0.7 end})
    local f = find(diag(dir), "infeasible")
    assert.are.equal(1, #f)
    assert.are.equal("ok", f[1].level)
    assert.are.equal("0 of 8 trials infeasible (0%)", f[1].message)
    fs.rm_rf(root)
  end)
end)

-- single run directories with given curves
local function run(root, name, o)
  return F.run(root .. "/" .. name, o)
end

describe("dl.diagnose: training curves", function()
  local root
  before_each(function() root = F.tmpdir("curves") end)
  after_each(function() fs.rm_rf(root) end)

  it("flags problematic overfitting: validation loss rising after its minimum", function()
    -- loss falls to 0.5 at step 40, then rises linearly to 0.65 at step 100 (+30%)
    local dir = run(root, "overfit", {steps = 100, eval_every = 20, eval = function(s)
      local l = s <= 40 and 2 - 1.5 * s / 40 or 0.5 + 0.15 * (s - 40) / 60
      return {["valid/loss"] = l, ["valid/accuracy"] = 1 - l / 2}
    end})
    local f = find(diag(dir), "overfitting", "warn")
    assert.are.equal(1, #f)
    assert.are.equal(40, f[1].data.best_step)
    assert.are.equal(100, f[1].data.last_step)
    assert.is_true(math.abs(f[1].data.rise - 0.3) < 1e-9)
    assert.truthy(f[1].message:find("valid/loss rises from 0.5 at step 40 to 0.65 at step 100 (+30% of its best)", 1, true),
      f[1].message)
  end)

  it("flags a still-improving curve with the share of the gain in the last quarter", function()
    local dir = run(root, "improving", {steps = 100, eval_every = 20, eval = function(s)
      return {["valid/accuracy"] = 0.5 + 0.004 * s, ["valid/loss"] = 1.5 - 0.01 * s}
    end})
    local f = find(diag(dir), "steps", "warn")
    assert.are.equal(1, #f)
    -- evals at 20..100: best until 75 steps is step 60 (0.74), final 0.9, first 0.58
    assert.is_true(math.abs(f[1].data.share - (0.9 - 0.74) / (0.9 - 0.58)) < 1e-9)
    assert.truthy(f[1].message:find("still improving", 1, true))
    assert.truthy(f[1].message:find("from 0.74 to 0.9 (50% of its total gain)", 1, true), f[1].message)
    -- a straight line has no late variance once detrended
    assert.are.equal(0, #find(diag(dir), "variance", "warn"))
  end)

  it("stays quiet on a flat converged curve", function()
    local dir = run(root, "flat", {steps = 100, eval_every = 10, eval = function(s)
      local a = 0.9 - 0.4 * math.max(0, (60 - s) / 60) ^ 2
      return {["valid/accuracy"] = a, ["valid/loss"] = 1.2 - a}
    end, train = function(s) return 0.3 + 2 / s end})
    local findings = diag(dir)
    for _, check in ipairs({"overfitting", "steps", "variance", "training", "best_step"}) do
      local f = find(findings, check)
      assert.are.equal(1, #f, check)
      assert.are.equal("ok", f[1].level, check .. ": " .. f[1].message)
    end
  end)

  it("notes a curve that saturated early (fewer steps may do), with the step", function()
    local dir = run(root, "saturated", {steps = 100, eval_every = 10, eval = function(s)
      local a = s >= 20 and 0.9 or 0.5 + 0.02 * s
      return {["valid/accuracy"] = a, ["valid/loss"] = 1.2 - a}
    end})
    local f = find(diag(dir), "steps", "note")
    assert.are.equal(1, #f)
    assert.are.equal(20, f[1].data.saturated_at)
    assert.truthy(f[1].message:find("saturated by step 20 of 100", 1, true), f[1].message)
  end)

  it("flags high variance late in training, and not the same curve without the noise", function()
    local function curve(noise)
      return function(s)
        local a = 0.85 + ((s // 10) % 2 == 0 and noise or -noise)
        return {["valid/accuracy"] = math.min(0.85, 0.4 + 0.01 * s) + (s > 50 and (a - 0.85) or 0), ["valid/loss"] = 0.5}
      end
    end
    local noisy = run(root, "noisy", {steps = 200, eval_every = 10, eval = curve(0.03)})
    local calm = run(root, "calm", {steps = 200, eval_every = 10, eval = curve(0)})
    local f = find(diag(noisy), "variance", "warn")
    assert.are.equal(1, #f)
    -- the last quarter of 20 evals: 5 values alternating about 0.85 by 0.03
    assert.are.equal(5, f[1].data.evals)
    assert.is_true(f[1].data.std > 0.02 and f[1].data.std < 0.05, tostring(f[1].data.std))
    assert.are.equal(0, #find(diag(calm), "variance", "warn"))
  end)

  it("flags a training loss that keeps rising", function()
    local dir = run(root, "rising", {steps = 200, log_every = 10, eval_every = 50,
      train = function(s) return s <= 100 and 2 - s / 100 or 1 + (s - 100) / 50 end,
      eval = function(s) return {["valid/accuracy"] = 0.5, ["valid/loss"] = 1} end})
    local f = find(diag(dir), "training", "warn")
    assert.are.equal(1, #f)
    assert.is_true(f[1].data.from_step >= 100 and f[1].data.from_step <= 110, tostring(f[1].data.from_step))
    assert.are.equal(200, f[1].data.to_step)
    assert.truthy(f[1].message:find("pipeline bug", 1, true))
  end)
end)

describe("dl.diagnose: best checkpoint steps", function()
  it("warns when every best checkpoint is in the first 10% of training", function()
    local root = F.tmpdir("early")
    local dir = F.study(root, {trials = 8, steps = 100, eval_every = 5, value = function(hp) return 0.5 + hp.lr end,
      curve = function(hp, s, final) return {["valid/accuracy"] = s <= 5 and final or final - 0.001 * s} end})
    local f = find(diag(dir), "best_step")
    assert.are.equal(1, #f)
    assert.are.equal("warn", f[1].level)
    assert.are.same({8, 0, 0, 0, 0, 0, 0, 0, 0, 0}, f[1].data.histogram)
    assert.truthy(f[1].message:find("first 10% of training in all 8 trials", 1, true), f[1].message)
    fs.rm_rf(root)
  end)

  it("notes when most best checkpoints are in the last 25%", function()
    local root = F.tmpdir("late")
    local dir = F.study(root, {trials = 8, steps = 100, value = function(hp) return 0.5 + hp.lr end})
    local f = find(diag(dir), "best_step")
    assert.are.equal("note", f[1].level)
    assert.are.equal(8, f[1].data.late)
    fs.rm_rf(root)
  end)
end)

describe("dl.diagnose: number of trials", function()
  it("bootstraps the best value vs the number of trials to the exact distribution of a maximum", function()
    -- n distinct values; a sample of k with replacement has max <= v_(i) with probability (i/n)^k
    local vals = {}
    for i = 1, 10 do vals[i] = i / 10 end
    local ks = {1, 2, 4, 10}
    local bs = A.bootstrap(vals, {mode = "max", samples = 20000, seed = 1, ks = ks})
    for j, k in ipairs(ks) do
      local function exact_q(p)
        for i = 1, 10 do if (i / 10) ^ k >= p then return i / 10 end end
      end
      -- away from ties between order statistics, the sample quantile is the exact one
      for _, q in ipairs({{"q1", 0.25}, {"median", 0.5}, {"q3", 0.75}}) do
        local e = exact_q(q[2])
        local i = math.floor(e * 10 + 0.5)
        local lo = ((i - 1) / 10) ^ k
        if math.abs(lo - q[2]) > 0.02 and math.abs((i / 10) ^ k - q[2]) > 0.02 then
          assert.is_true(math.abs(bs[j][q[1]] - e) < 1e-12, string.format("k %d %s: %s vs %s", k, q[1], bs[j][q[1]], e))
        end
      end
      assert.are.equal(k, bs[j].k)
    end
    -- infeasible trials: no feasible trial in a sample of k with probability (m/n)^k
    local mixed = {0.5, 0.6, false, false, false}
    local b2 = A.bootstrap(mixed, {samples = 20000, seed = 2, ks = {1, 3}})
    for j, k in ipairs({1, 3}) do
      local p = (3 / 5) ^ k
      local sd = math.sqrt(p * (1 - p) / 20000)
      assert.is_true(math.abs(b2[j].none - p) < 4 * sd, string.format("k %d: %s vs %s", k, b2[j].none, p))
    end
  end)

  it("warns about too few trials for the nuisance dimensions and says whether the curve flattened", function()
    local root = F.tmpdir("few")
    local dir = F.study(root, {trials = 16, nuisance = {lr = S.log_uniform(1e-4, 1e-1), momentum = S.uniform(0.8, 0.99),
      weight_decay = S.log_uniform(1e-5, 1e-2)}, value = function(hp) return 0.7 + 0.01 * hp.momentum end})
    local f = find(diag(dir), "trials")
    assert.are.equal(1, #f)
    assert.are.equal("warn", f[1].level)
    assert.are.equal(3, f[1].data.dims)
    assert.are.equal(24, f[1].data.recommended)
    assert.truthy(f[1].message:find("16 trials for 3 nuisance dimension(s) (too few: at least 24)", 1, true), f[1].message)
    -- nearly equal values: the curve flattens after a few trials
    assert.is_true(f[1].data.flattened)
    fs.rm_rf(root)
  end)

  it("takes the trial count of a finite algorithm (its row: grid) as planned, not as a budget", function()
    local root = F.tmpdir("planned")
    local nuisance = {lr = S.log_uniform(1e-4, 1e-1), momentum = S.uniform(0.8, 0.99)}
    local value = function(hp) return 0.7 + 0.01 * hp.momentum end
    local grid = find(diag((F.study(root, {name = "grid", algorithm = "grid", trials = 4, nuisance = nuisance,
      value = value}))), "trials")
    assert.truthy(grid[1].message:find("4 trials for 2 nuisance dimension(s) (grid study; a search would want 16)", 1,
      true), grid[1].message)
    local qr = find(diag((F.study(root, {name = "qr", trials = 4, nuisance = nuisance, value = value}))), "trials")
    assert.are.equal("warn", qr[1].level)
    assert.truthy(qr[1].message:find("4 trials for 2 nuisance dimension(s) (too few: at least 16)", 1, true),
      qr[1].message)
    fs.rm_rf(root)
  end)

  it("says the curve has not flattened when a rare trial is much better", function()
    local root = F.tmpdir("rare")
    local dir = F.study(root, {trials = 16, value = function(hp, j)
      if j == 11 then return 0.95 end
      return 0.5 + 0.01 * j
    end})
    local f = find(diag(dir), "trials")
    assert.is_false(f[1].data.flattened)
    assert.truthy(f[1].message:find("not flattened", 1, true))
    -- P(a sample of 8 holds the one best trial) = 1 - (15/16)^8 < 1/2: the median at 8 is not 0.95
    local at8, at16
    for _, b in ipairs(f[1].data.bootstrap) do
      if b.k == 8 then at8 = b.median end
      if b.k == 16 then at16 = b.median end
    end
    assert.is_true(1 - (15 / 16) ^ 8 < 0.5 and 1 - (15 / 16) ^ 16 > 0.5)
    local top = A.load(dir).best.value
    assert.is_true(at8 < top)
    assert.are.equal(top, at16)
    fs.rm_rf(root)
  end)
end)

describe("dl.diagnose: another objective after the fact", function()
  it("re-ranks by the final eval or another metric from the stored histories", function()
    local root = F.tmpdir("rerank")
    -- trial j peaks at step 40 at 0.6 + 0.02 j, then falls by 0.03 j: the best trial by its best eval
    -- is the last, by its final eval the first
    local dir = F.study(root, {trials = 6, value = function(hp, j) return 0.6 + 0.02 * j end,
      curve = function(hp, s, final)
        local j = math.floor((final - 0.6) / 0.02 + 0.5)
        local a = s <= 40 and final * s / 40 or final - 0.03 * j * (s - 40) / 60
        return {["valid/accuracy"] = a, ["valid/loss"] = 1 - a}
      end})
    local best = A.load(dir)
    local final = A.load(dir, {aggregate = "final"})
    local loss = A.load(dir, {metric = "valid/loss", aggregate = "final"})
    assert.are.equal("trial_t006", best.best.id)
    assert.are.equal("trial_t001", final.best.id)
    assert.are.equal("min", loss.mode)
    assert.are.equal("trial_t001", loss.best.id)
    -- the final value of trial 1: 0.62 - 0.03
    assert.is_true(math.abs(final.best.value - (0.62 - 0.03)) < 1e-9)
    local _, text = diag(dir, {aggregate = "final"})
    assert.truthy(text:find("by valid/accuracy (final over evals, max)", 1, true), text)
    fs.rm_rf(root)
  end)

  it("errors name the directory and the metrics a study has", function()
    local root = F.tmpdir("errors")
    assert.error_matches(function() dl.diagnose(root .. "/missing") end, "dl.diagnose: .*/missing is not a directory")
    assert.error_matches(function() dl.diagnose(root) end, "holds no study %(study.json%), no run")
    local dir = F.study(root, {trials = 2, value = function() return 0.5 end})
    assert.error_matches(function() dl.diagnose(dir, {metric = "valid/top5", quiet = true}) end,
      "no trial of .* reported 'valid/top5' %(eval metrics: valid/accuracy, valid/loss")
    assert.error_matches(function() dl.diagnose(dir, {aggregate = "mean"}) end,
      "aggregate must be \"best\" or \"final\", got mean")
    assert.error_matches(function() dl.diagnose(dir, {metrics = "x"}) end,
      "dl.diagnose: unknown option 'metrics' %(valid: aggregate, metric, mode, quiet%)")
    fs.rm_rf(root)
  end)
end)

describe("dl.diagnose: runs without a study", function()
  it("reads a directory of run directories and checks the edge of the values tried", function()
    local root = F.tmpdir("runs")
    for i, lr in ipairs({0.01, 0.03, 0.1, 0.3}) do
      F.run(root .. "/lr-" .. i, {hp = {lr = lr, width = 8}, eval = function(s)
        return {["valid/accuracy"] = (0.5 + lr) * s / 100, ["valid/loss"] = 1}
      end})
    end
    local findings, text = diag(root)
    local b = find(findings, "boundary", "warn")
    assert.are.equal(1, #b)
    assert.are.same({"lr-4"}, b[1].trials)
    assert.truthy(b[1].message:find("the values tried", 1, true), b[1].message)
    assert.truthy(text:find("diagnosis of runs in " .. root, 1, true))
    fs.rm_rf(root)
  end)
end)

describe("dl.diagnose: input-bound trials", function()
  local root
  before_each(function() root = F.tmpdir("input") end)
  after_each(function() fs.rm_rf(root) end)

  -- a directory of runs whose result.json say what share of their time waited for input
  local function runs(shares)
    for i, s in ipairs(shares) do
      local dir = F.run(root .. "/r" .. i, {steps = 20, eval_every = 10, eval = function(step)
        return {["valid/accuracy"] = 0.5 + step / 100}
      end})
      fs.write_atomic(dir .. "/result.json", dl.json.encode({status = "done", steps = 20,
        cost = {seconds = 10, input = 10 * s, input_fraction = s}}) .. "\n")
    end
    return root
  end

  it("warns when the median trial waited for input 10% of its time or more, naming the worst", function()
    local f = find(diag(runs({0.02, 0.3, 0.15, 0.4, 0.12})), "input")
    assert.are.equal(1, #f)
    assert.are.equal("warn", f[1].level)
    assert.are.equal(0.15, f[1].data.median)
    assert.are.equal(5, f[1].data.trials)
    assert.truthy(f[1].message:find("trials were input-bound: the median trial waited for its input pipeline 15% " ..
      "of its time (5 trials; most: r4 40%, r2 30%, r3 15%)", 1, true), f[1].message)
  end)

  it("notes from 5% and says ok below", function()
    assert.are.equal("note", find(diag(runs({0.06, 0.07, 0.01})), "input")[1].level)
    fs.rm_rf(root)
    root = F.tmpdir("input")
    local f = find(diag(runs({0.01, 0.0, 0.02})), "input")
    assert.are.equal("ok", f[1].level)
    assert.truthy(f[1].message:find("trials waited for input 1.0% of their time (median of 3", 1, true), f[1].message)
  end)
end)
