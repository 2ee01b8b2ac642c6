-- Studies of several objectives: the Pareto front against hand-computed sets (ties,
-- a dominated duplicate), ParEGO's scalarisation and weights against their
-- formulas, a two-objective quasirandom study (valid/accuracy and the new
-- train/time_per_step) whose front is checked by a brute-force dominance check over
-- trials.csv re-read from disk (and those values against metrics.jsonl), the
-- report's Pareto view of the study's own objectives, a bayes study on a
-- synthetic bi-objective function (ZDT1), by EHVI and by ParEGO, whose fronts beat quasirandom's at the
-- same budget, and the option's errors by exact message, file and line.
local dl = require "dlua"
local S, json, fs = dl.search, dl.json, dl.fs
local studies = require "dlua.study"

local H = dofile("tests/lua/helpers.lua")
local write, run = H.spit, H.run

-- the 1-based line of file holding text (found independently of the library)
local line_of = H.line_of

local function sorted(t) table.sort(t); return t end

-- brute force: ids of rows no other row dominates; vals[id] = {v1, v2}, modes as dl.study's
local function brute_front(vals, modes)
  local out = {}
  for a, va in pairs(vals) do
    local dominated = false
    for b, vb in pairs(vals) do
      if a ~= b then
        local geq, gt = true, false
        for j = 1, #modes do
          local x, y = vb[j], va[j]
          if modes[j] == "min" then x, y = -x, -y end
          if x < y then geq = false end
          if x > y then gt = true end
        end
        if geq and gt then dominated = true end
      end
    end
    if not dominated then out[#out + 1] = a end
  end
  return sorted(out)
end

-- the hypervolume dominated by 2-d points (both minimised) up to ref: sorted by the
-- first coordinate, the staircase of the points that lower the second, each step's
-- slab from its x to the next step's x (the last to ref)
local function hypervolume(pts, ref)
  local p = {}
  for _, q in ipairs(pts) do if q[1] < ref[1] and q[2] < ref[2] then p[#p + 1] = q end end
  table.sort(p, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
  local stair, ybest = {}, ref[2]
  for _, q in ipairs(p) do
    if q[2] < ybest then stair[#stair + 1] = q; ybest = q[2] end
  end
  local hv = 0
  for i, q in ipairs(stair) do
    local xnext = stair[i + 1] and stair[i + 1][1] or ref[1]
    hv = hv + (xnext - q[1]) * (ref[2] - q[2])
  end
  return hv
end

describe("dl.search.pareto_front", function()
  it("keeps the non-dominated points, ties together, and drops a dominated duplicate", function()
    -- modes: the first maximised, the second minimised
    local pts = {
      {0.90, 5},   -- 1 front: the only one with 0.90 at cost 5
      {0.80, 2},   -- 2 front, tied with 3
      {0.80, 2},   -- 3 front, tied with 2
      {0.70, 3},   -- 4 dominated by 2 (0.80 >= 0.70, 2 <= 3)
      {0.70, 3},   -- 5 the same: a dominated duplicate stays off the front
      {0.90, 6},   -- 6 dominated by 1 (equal first, worse second)
      {0.50, 1},   -- 7 front: cheapest
      {0.95, 9},   -- 8 front: most accurate
      {0.80, 5},   -- 9 dominated by 1 and by 2
    }
    local front, ties = S.pareto_front(pts, {"max", "min"})
    assert.are.same({1, 2, 3, 7, 8}, front)
    assert.are.same({[2] = {3}, [3] = {2}}, ties)
    -- the same points all minimised: the first column negated gives the same front
    local neg = {}
    for i, p in ipairs(pts) do neg[i] = {-p[1], p[2]} end
    assert.are.same({1, 2, 3, 7, 8}, (S.pareto_front(neg, {"min", "min"})))
    -- three objectives, and the degenerate cases
    assert.are.same({1, 3}, (S.pareto_front({{1, 1, 1}, {1, 1, 2}, {2, 0, 2}}, {"min", "min", "min"})))
    assert.are.same({}, (S.pareto_front({}, {"min", "min"})))
    assert.are.same({1, 2}, (S.pareto_front({{1, 1}, {1, 1}}, {"min", "min"})))
    assert.is_true(S.dominates({0.9, 1}, {0.8, 1}, {"max", "min"}))
    assert.is_false(S.dominates({0.9, 1}, {0.9, 1}, {"max", "min"}))
    assert.is_false(S.dominates({0.9, 2}, {0.8, 1}, {"max", "min"}))
  end)

  it("refuses malformed points and modes", function()
    assert.error_matches(function() S.pareto_front({{1, 2}, {1}}, {"min", "min"}) end,
      "dl.search.pareto_front: points[2] must be a list of 2 numbers (one per mode)", nil, true)
    assert.error_matches(function() S.pareto_front({{1, 0 / 0}}, {"min", "min"}) end,
      "dl.search.pareto_front: points[1] must be a list of 2 numbers (one per mode)", nil, true)
    assert.error_matches(function() S.pareto_front({{1, 2}}, {"min", "maximum"}) end,
      "dl.search.pareto_front: modes[2] must be \"min\" or \"max\", got maximum", nil, true)
    assert.error_matches(function() S.dominates({1}, {2}, {}) end,
      "dl.search.dominates: modes must be a non-empty list of \"min\" or \"max\"", nil, true)
  end)
end)

describe("dl.search.parego", function()
  it("scalarises by the augmented Chebyshev of the normalised costs", function()
    -- accuracy (max) in {0.6, 0.9, 0.7}, time (min) in {3, 5, 1}; costs: -acc and time
    -- normalised: acc 0.9 -> 0, 0.6 -> 1, 0.7 -> 2/3; time 1 -> 0, 5 -> 1, 3 -> 0.5
    local hist = {{u = {0.1}, values = {0.6, 3}}, {u = {0.2}, values = {0.9, 5}}, {u = {0.3}},
                  {u = {0.4}, values = {0.7, 1}, extra = "kept"}}
    local w = {0.25, 0.75}
    local out = S.parego(hist, {"max", "min"}, w)
    local function cheb(z1, z2)
      return math.max(w[1] * z1, w[2] * z2) + 0.05 * (w[1] * z1 + w[2] * z2)
    end
    assert.are.equal(4, #out)
    assert.near(cheb(1, 0.5), out[1].value, 1e-12)      -- max(0.25, 0.375) + 0.05 * 0.625
    assert.near(cheb(0, 1), out[2].value, 1e-12)        -- 0.75 + 0.0375
    assert.is_nil(out[3].value)                         -- infeasible stays infeasible
    assert.near(cheb(2 / 3, 0), out[4].value, 1e-12)
    assert.are.equal("kept", out[4].extra)
    assert.are.same({0.1}, out[1].u)
    -- an objective with one value throughout contributes 0
    local flat = S.parego({{u = {0}, values = {1, 2}}, {u = {1}, values = {1, 4}}}, {"min", "min"}, {0.5, 0.5})
    assert.near(0, flat[1].value, 1e-12)
    assert.near(0.5 + 0.05 * 0.5, flat[2].value, 1e-12)
    assert.error_matches(function() S.parego(hist, {"max", "min"}, {1}) end,
      "dl.search.parego: weights must be a list of 2 numbers (one per mode)", nil, true)
    assert.error_matches(function() S.parego({{u = {0}, values = {1}}}, {"max", "min"}, w) end,
      "dl.search.parego: history[1].values must be a list of 2 numbers (one per mode)", nil, true)
  end)

  it("draws weights uniformly on the simplex, a pure function of (seed, step)", function()
    local w = S.parego_weights(2, 7, 12)
    assert.are.same(w, S.parego_weights(2, 7, 12))
    assert.are_not.same(w, S.parego_weights(2, 7, 13))
    assert.are_not.same(w, S.parego_weights(2, 8, 12))
    -- k = 2: w[1] is uniform on [0, 1]: mean 1/2, a quarter below 1/4 (2,000 draws: sd of
    -- the mean 0.0065, of the fraction 0.0097)
    local n, sum, below = 2000, 0, 0
    for step = 1, n do
      local v = S.parego_weights(2, 1, step)
      assert.near(1, v[1] + v[2], 1e-12)
      assert.is_true(v[1] >= 0 and v[2] >= 0)
      sum = sum + v[1]
      if v[1] < 0.25 then below = below + 1 end
    end
    assert.near(0.5, sum / n, 0.03)
    assert.near(0.25, below / n, 0.04)
    -- k = 3: each weight's mean is 1/3
    local m = {0, 0, 0}
    for step = 1, n do
      local v = S.parego_weights(3, 2, step)
      for j = 1, 3 do m[j] = m[j] + v[j] / n end
    end
    for j = 1, 3 do assert.near(1 / 3, m[j], 0.03) end
  end)
end)

-- the toy classifier (tests/fixtures/toy_experiment.lua, ~0.1 s per trial): valid/accuracy from its evals,
-- train/time_per_step from its train lines (a study fixes log_every = 5 to have four of them)
local TOY = H.fixture("toy_experiment.lua")

-- a synthetic bi-objective experiment: one training step, then two eval metrics that
-- are functions of the hyperparameters alone, ZDT1 over x, y in [0, 1]: gain = 1 - x
-- (max), cost = g (1 - sqrt(x / g)) with g = 1 + 9 y (min); the front is y = 0
local ZDT1 = [[
local dl = require "dlua"
local nn, optim, data = dl.nn, dl.optim, dl.data
return dl.experiment{
  name = "zdt1", hparams = {x = 0.5, y = 0.5, steps = 1},
  build = function(hp)
    local g = 1 + 9 * hp.y
    local gain, cost = 1 - hp.x, g * (1 - math.sqrt(hp.x / g))
    local function const(v) return function(_, _, w) local n = w:sum():item(); return v * n, n end end
    local ds = data.tensors{image = dl.ones(4, 2), label = dl.tensor({1, 2, 1, 2}, {dtype = "int32"})}
    local model = nn.Linear(2, 2)
    return {model = model, loss = nn.CrossEntropy(),
      optimizer = optim.SGD{params = model:parameters(), lr = 0.1},
      data = ds:batch(4), steps = hp.steps, forward = function(m, b) return m(b.image) end,
      eval = {sets = {valid = ds}, metrics = {gain = const(gain), cost = const(cost)}}}
  end}
]]

local function study_file(dir, file, fields) return H.study_file(dir, file, fields, "") end

local ACC_TIME = 'objective = {{metric = "valid/accuracy", mode = "max"}, {metric = "train/time_per_step", mode = "min"}},'

describe("a study of two objectives", function()
  local dir
  setup(function() dir = H.tmpdir("moo"); write(dir .. "/exp.lua", TOY) end)
  teardown(function() fs.rm_rf(dir) end)

  it("records both values of every completed trial and lists the Pareto front a brute force finds in trials.csv",
    function()
    study_file(dir, "qr.lua", [[
  name = "qr", nuisance = {lr = S.log_uniform(1e-3, 0.5), width = S.int(4, 64, {log = true})},
  trials = 10, algorithm = "quasirandom", parallel = 2, fixed = {log_every = 5},
  ]] .. ACC_TIME)
    local out, rc = run(dir, "qr.lua --out runs --threads 1")
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("[qr] objective valid/accuracy, train/time_per_step checked: a one-step dry run reports " ..
      "them", 1, true), out)
    local sd = dir .. "/runs/qr"
    -- trials.csv from disk: every done trial has both values, equal to its metrics.jsonl
    -- (best valid/accuracy over the evals, least time_per_step over the train lines)
    local vals, n = {}, 0
    for _, r in ipairs(dl.track.read(sd .. "/trials.csv")) do
      if r.status == "done" then
        n = n + 1
        local acc, tps = tonumber(r["value.valid/accuracy"]), tonumber(r["value.train/time_per_step"])
        assert.is_number(acc, r.id)
        assert.is_number(tps, r.id)
        local best_acc, best_tps, lines = -math.huge, math.huge, 0
        for l in fs.read(sd .. "/" .. r.id .. "/metrics.jsonl"):gmatch("[^\n]+") do
          local e = json.decode(l)
          if e.split == "eval" then best_acc = math.max(best_acc, e["valid/accuracy"]) end
          if e.split == "train" then best_tps = math.min(best_tps, e.time_per_step); lines = lines + 1 end
        end
        assert.are.equal(4, lines)                        -- 20 steps, a train line every 5
        assert.are.equal(best_acc, acc)
        assert.are.equal(best_tps, tps)
        assert.is_true(tps > 0 and tps < 1, r.id)
        assert.are.equal(acc, tonumber(r.best_value))   -- the primary objective is best_value
        vals[r.id] = {acc, tps}
      end
    end
    assert.are.equal(10, n)
    local want = brute_front(vals, {"max", "min"})
    -- dl.study_results, results.json and the printed summary list that front
    local res = dl.study_results(sd)
    local got = {}
    for _, e in ipairs(res.front) do got[#got + 1] = e.trial.id end
    assert.are.same(want, sorted(got))
    assert.are.equal(10, res.completed)
    assert.are.same({{metric = "valid/accuracy", mode = "max"}, {metric = "train/time_per_step", mode = "min"}},
      res.objectives)
    local rj = json.decode(fs.read(sd .. "/results.json"))
    local ids = {}
    for _, e in ipairs(rj.front) do
      ids[#ids + 1] = e.id
      assert.are.same(vals[e.id], e.values)
    end
    assert.are.same(want, sorted(ids))
    assert.are.same(want, sorted(rj.groups[1].front))
    assert.truthy(out:find(string.format("Pareto front by valid/accuracy (max), train/time_per_step (min) (best " ..
      "over evals): %d of 10 completed trial(s)", #want), 1, true), out)
    for _, id in ipairs(want) do assert.truthy(out:find("\n  " .. id .. " ", 1, true), id) end
    -- the front is listed best first by the primary objective
    for i = 2, #res.front do
      assert.is_true(res.front[i - 1].trial.values[1] >= res.front[i].trial.values[1])
    end
    -- study.json carries the objectives, and the report draws them (no pareto option given)
    local rec = json.decode(fs.read(sd .. "/study.json"))
    assert.are.same(res.objectives, rec.objectives)
    assert.are.same({metric = "valid/accuracy", mode = "max"}, rec.objective)
    local page = fs.read(dl.report(sd, {out = dir .. "/r.html"}))
    local a = assert(page:find('<figure class="figure" id="pareto">', 1, true))
    local fig = page:sub(a, page:find("</figure>", a, true))
    assert.truthy(fig:find("Pareto front: train/time_per_step (min) vs valid/accuracy (max)", 1, true))
    local on = 0
    for _ in fig:gmatch("%(on the front%)") do on = on + 1 end
    assert.are.equal(#want, on)
  end)

  it("keeps a one-objective study's record and front-less results as before", function()
    local st = dl.study{name = "one", goal = "g", experiment = dir .. "/exp.lua", nuisance = {lr = S.uniform(0.01, 0.1)},
                        trials = 2, objective = {metric = "valid/accuracy", mode = "max"}}
    local listed = dl.study{name = "one", goal = "g", experiment = dir .. "/exp.lua",
                            nuisance = {lr = S.uniform(0.01, 0.1)}, trials = 2,
                            objective = {{metric = "valid/accuracy", mode = "max"}}}
    assert.are.same({{metric = "valid/accuracy", mode = "max"}}, st.objectives)
    assert.is_nil(st:record().objectives)
    assert.are.equal(studies.from_record(st:record()).objective.metric, "valid/accuracy")
    -- a list of one is the same study (same fingerprint)
    local spec = require "dlua.study.spec"
    assert.are.equal(spec.fingerprint(st:record()), spec.fingerprint(listed:record()))
  end)
end)

describe("bayes with two objectives", function()
  local dir
  setup(function() dir = H.tmpdir("moo-bayes"); write(dir .. "/exp.lua", ZDT1) end)
  teardown(function() fs.rm_rf(dir) end)

  -- {x, y, gain, cost} of every done trial, by id
  local function trials_of(sd)
    local out = {}
    for _, r in ipairs(dl.track.read(sd .. "/trials.csv")) do
      assert.are.equal("done", r.status, r.id)
      out[r.id] = {tonumber(r["hp.x"]), tonumber(r["hp.y"]), tonumber(r["value.valid/gain"]),
                   tonumber(r["value.valid/cost"])}
    end
    return out
  end
  local function hv(ts, pick)
    local pts = {}
    for id, t in pairs(ts) do if not pick or pick[id] then pts[#pts + 1] = {1 - t[3], t[4]} end end
    return hypervolume(pts, {1.1, 11})                  -- both as costs; the worst is (1, 10)
  end

  it("spreads its trials along the front and beats quasirandom's front at the same budget", function()
    local T = 16
    -- bayes by EHVI (the default for two objectives) and by ParEGO (pareto = {method = "parego"})
    for _, c in ipairs({{"quasirandom", "quasirandom"}, {"bayes", "bayes"},
                        {"parego", "bayes", 'pareto = {method = "parego"},'}}) do
      study_file(dir, c[1] .. ".lua", [[
  name = "zdt-]] .. c[1] .. [[", nuisance = {x = S.uniform(0, 1), y = S.uniform(0, 1)},
  trials = ]] .. T .. [[, algorithm = "]] .. c[2] .. [[", parallel = 1, ]] .. (c[3] or "") .. [[
  objective = {{metric = "valid/gain", mode = "max"}, {metric = "valid/cost", mode = "min"}},]])
      local out, rc = run(dir, c[1] .. ".lua --out runs --quiet --threads 1")
      assert.are.equal(0, rc, out)
    end
    local qr, by = trials_of(dir .. "/runs/zdt-quasirandom"), trials_of(dir .. "/runs/zdt-bayes")
    local pg = trials_of(dir .. "/runs/zdt-parego")
    assert.are.same({method = "parego"}, json.decode(fs.read(dir .. "/runs/zdt-parego/study.json")).pareto)
    -- the first init = max(5, 2 (d + 1)) = 6 trials (the bayes row's rule) are the same warm-up:
    -- the centre of the space, then quasirandom's first five points
    assert.are.equal(6, S.algorithm("bayes").init(2))
    local warm = {}
    for j = 1, 6 do
      local id = string.format("trial_t%03d", j)
      if j == 1 then
        assert.are.same({0.5, 0.5}, {by[id][1], by[id][2]})
      else
        local q = qr[string.format("trial_t%03d", j - 1)]
        assert.are.same({q[1], q[2]}, {by[id][1], by[id][2]})
      end
      assert.are.same(by[id], pg[id])
      warm[id] = true
    end
    -- the rest were chosen by the GPs' EHVI, or ParEGO when asked (a suggest event each)
    for name, want in pairs({bayes = "ehvi", parego = "parego"}) do
      local suggested = 0
      for _, e in ipairs(H.journal_events(dir .. "/runs/zdt-" .. name)) do
        if e.event == "suggest" then
          suggested = suggested + 1
          assert.are.equal(want, e.method)               -- the journal records how each point was chosen
        end
      end
      assert.are.equal(T - 6, suggested)
    end
    -- the helper against hand-computed areas
    assert.are.equal(1, hypervolume({{0, 0}}, {1, 1}))
    assert.are.equal(0.75, hypervolume({{0, 0.5}, {0.5, 0}, {0.5, 0.5}}, {1, 1}))
    local hv_warm, hv_qr = hv(by, warm), hv(qr)
    -- measured: warm-up 9.607, quasirandom 9.972, ParEGO 11.393 (11.515 before the warm-up
    -- started at the centre), EHVI 11.548; the true front's (y = 0: costs (x, 1 - sqrt(x)))
    -- is 11 - 1 + 2/3 + 0.1 * 11 = 11.767
    for name, ts in pairs({ehvi = by, parego = pg}) do
      local hv_by = hv(ts)
      assert.is_true(hv_by > hv_warm + 1, string.format("%s %.3f, warm-up %.3f", name, hv_by, hv_warm))
      assert.is_true(hv_by > hv_qr + 1, string.format("%s %.3f, quasirandom %.3f", name, hv_by, hv_qr))
      assert.is_true(hv_by > 0.96 * 11.767, string.format("%s %.3f", name, hv_by))
      -- on the true front (y = 0) at several trade-offs, not one corner
      local xs = {}
      for _, t in pairs(ts) do if t[2] < 0.01 then xs[#xs + 1] = t[1] end end
      table.sort(xs)
      assert.is_true(#xs >= 4, name .. ": trials at y < 0.01: " .. #xs)
      assert.is_true(xs[#xs] - xs[1] > 0.3, name .. ": x spread " .. (xs[#xs] - xs[1]))
    end
  end)
end)

describe("the objective option", function()
  local dir
  setup(function() dir = H.tmpdir("moo-opt"); write(dir .. "/exp.lua", TOY) end)
  teardown(function() fs.rm_rf(dir) end)

  -- the error of loading a study file whose dl.study call has these fields
  local function err_of(file, fields)
    local f = study_file(dir, file, '  name = "o", nuisance = {lr = S.log_uniform(1e-3, 0.5)}, trials = 2,\n' .. fields)
    local ok, err = pcall(studies.load_file, f)
    assert.is_false(ok)
    return tostring(err), f
  end

  it("refuses malformed lists naming the study file and line", function()
    local cases = {
      {'objective = {{metric = "valid/accuracy", mode = "max"},\n    {metric = "valid/accuracy", mode = "min"}},',
       'dl.study: objective[2] repeats metric valid/accuracy (objective[1]); each objective is another metric'},
      {'objective = {{metric = "valid/accuracy", mode = "max"},\n    {metric = "train/time_per_step", mdoe = "min"}},',
       "dl.study: unknown option 'mdoe' in objective.2 (valid: metric, mode); did you mean 'mode'?", "mdoe"},
      {'objective = {"valid/accuracy",\n    {metric = "train/time_per_step"}},',
       'dl.study: objective[2].mode must be "max" or "min" (got nil for metric train/time_per_step)'},
      {'objective = {"valid/accuracy", 3},',
       'dl.study: objective[2] must be a metric name or {metric = "valid/accuracy", mode = "max"}, got number'},
      {'objective = {"valid/accuracy", "valid/loss", mode = "max"},',
       "dl.study: objective is either {metric =, mode =} or a list of them, not both in one table"},
      {ACC_TIME .. '\n  algorithm = "bayes",\n  pareto = {method = "ehvj"},',
       "dl.study: pareto.method must be \"ehvi\" or \"parego\", got 'ehvj'; did you mean 'ehvi'?", "pareto ="},
      {ACC_TIME .. '\n  algorithm = "bayes",\n  pareto = {reference = {1}},',
       "dl.study: pareto.reference must be a list of 2 finite numbers (one per objective, in its units)", "pareto ="},
      {ACC_TIME .. '\n  algorithm = "bayes",\n  pareto = {metod = "parego"},',
       "dl.study: unknown option 'metod' in pareto (valid: method, reference); did you mean 'method'?", "metod"},
      {ACC_TIME .. '\n  algorithm = "bayes",\n  prune = {algorithm = "median"},',
       "dl.study: prune stops a trial by one objective, and this study has 2 (valid/accuracy, train/time_per_step): " ..
       "a trial behind on one may be on the Pareto front; leave prune out", "prune ="},
    }
    for i, c in ipairs(cases) do
      local err, f = err_of("bad" .. i .. ".lua", c[1])
      local line = line_of(f, c[3] or "objective =")
      assert.are.equal(f .. ":" .. line .. ": " .. c[2], err)
    end
    -- the one-objective messages are unchanged
    local err, f = err_of("single.lua", 'objective = {metric = "valid/accuracy", mode = "best"},')
    assert.are.equal(f .. ":" .. line_of(f, "objective =") .. ': dl.study: objective.mode must be "max" or "min" ' ..
      "(got best for metric valid/accuracy)", err)
    err, f = err_of("none.lua", "")
    assert.are.equal(f .. ":3: dl.study: objective = {metric = \"valid/accuracy\", mode = \"max\"} is required", err)
  end)

  it("checks every objective's metric by the dry run before any trial trains", function()
    local f = study_file(dir, "dry.lua", [[
  name = "dry", nuisance = {lr = S.log_uniform(1e-3, 0.5)}, trials = 2,
  objective = {{metric = "valid/accuracy", mode = "max"},
    {metric = "train/time_per_stp", mode = "min"}},]])
    local out, rc = run(dir, "dry.lua --out runs")
    assert.are.equal(1, rc, out)
    assert.truthy(out:find("dlua: dry.lua:" .. line_of(f, "time_per_stp") .. ": dl.study: objective " ..
      "'train/time_per_stp' is not a metric of exp.lua: a one-step dry run reported train/examples_per_s, " ..
      "train/grad_norm, train/loss, train/lr, train/time_per_step, valid/accuracy, valid/loss; did you mean " ..
      "'train/time_per_step'?\n", 1, true), out)
    assert.is_false(fs.exists(dir .. "/runs"))
  end)
end)
