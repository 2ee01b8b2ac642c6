-- "never silent" in studies and search: options an algorithm does not use, values
-- out of range, warm starts of another shape and damaged journal lines are errors
-- (or skipped and counted, for a warm start's trials), never accepted and ignored.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local S, fs, json = dl.search, dl.fs, dl.json
local journal = require "dlua.study.journal"
local warm = require "dlua.study.warm"
local gp = require "dlua.search.gp"

-- the message of f's error (fails when f does not raise)
local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert(not ok, "expected an error")
  return tostring(e)
end

local function has(msg, want)
  assert.truthy(msg:find(want, 1, true), "want: " .. want .. "\ngot:  " .. msg)
end

local SPACE = S.space{x = S.uniform(0, 1)}
local HIST = {{u = {0.1}, value = 1.0}, {u = {0.5}, value = 0.2}, {u = {0.9}, value = 0.7}, {u = {0.3}, value = 0.4}}

-- a study over the toy experiment in dir (exp.lua), with the given fields
local function study(dir, fields)
  local spec = {name = "s", experiment = dir .. "/exp.lua", goal = "g", nuisance = {lr = S.log_uniform(0.01, 1)},
                trials = 2, objective = {metric = "valid/loss", mode = "min"}}
  for k, v in pairs(fields or {}) do spec[k] = v end
  return dl.study(spec)
end

describe("never silent", function()
  local dir
  setup(function()
    dir = H.tmpdir("silent")
    H.spit(dir .. "/exp.lua", H.fixture("toy_experiment.lua"))
  end)
  teardown(function() fs.rm_rf(dir) end)

  it("refuses a journal line that is not JSON unless it is the torn last line", function()
    local d = dir .. "/journal"
    study(dir):prepare(d)
    local p = d .. "/journal.jsonl"
    fs.append_line(p, '{"event": "claim", "trial": "trial_t001", "owner": "a"}')
    fs.append_line(p, '{"event": "claim", "trial": "trial_t002", "owner": "a"}')
    fs.append_line(p, '{"event": "finish", "trial": "trial_t001", "status": "done", "value": 0.5}')
    assert.are.equal(3, #journal.open(d):events())
    -- a torn last line (a crash mid-write) is skipped, also once the next writer has ended it
    local f = assert(io.open(p, "ab")); f:write('{"event": "fin'); f:close()
    assert.are.equal(3, #journal.open(d):events())
    journal.open(d):locked(function(_, append) append({event = "claim", trial = "trial_t002", owner = "b"}) end)
    local events = journal.open(d):events()
    assert.are.equal("torn", events[4].event)
    assert.are.equal(4, events[4].line)
    assert.are.equal(5, #events)
    -- a damaged line elsewhere is an error naming the file and line (the finish would be lost: a re-run)
    local text = H.slurp(p)
    H.spit(p, (text:gsub('{"event": "finish"', 'x{"event": "finish"', 1)))
    local msg = err_of(function() return journal.open(d):events() end)
    has(msg, p .. ": line 3: not JSON (json: ")
    has(err_of(function() return dl.study_results(d) end), p .. ": line 3: not JSON")
    H.spit(p, text .. '"just a string"\n{"event": "claim", "trial": "trial_t001", "owner": "c"}\n')
    has(err_of(function() return journal.open(d):events() end), p .. ": line 7: not a journal event")
  end)

  it("skips a warm start's trials of another step budget, counted and named", function()
    local early = dir .. "/early"
    study(dir, {steps = 10}):prepare(early)
    for i, lr in ipairs({0.05, 0.2}) do
      fs.append_line(early .. "/journal.jsonl", json.encode({event = "finish", trial = string.format("trial_t%03d", i),
        status = "done", value = 0.5 + i, hp = {lr = lr, seed = 0}, nuisance = {lr = lr}, kind = "search"}))
    end
    local function line(steps)
      local late = study(dir, {algorithm = "bayes", steps = steps, warm_start = early})
      return warm.describe(early, select(2, warm.history(late, early)))
    end
    has(line(3), "0 compatible trial(s), 2 skipped (2 another step budget (10 steps, not 3))")
    has(line(10), "2 compatible trial(s), 0 skipped")
  end)

  it("refuses options the chosen algorithm does not use, and counts out of range", function()
    for _, c in ipairs({{"random", "init", 5}, {"random", "candidates", 3}, {"quasirandom", "acquisition", "nei"},
                        {"random", "racing", 2}, {"quasirandom", "best", "observed"}, {"grid", "feasibility", true},
                        {"random", "max_points", 10}, {"quasirandom", "acq_starts", 2}, {"bayes", "grid_points", 3},
                        {"random", "theta", {0, 0, 0}}}) do
      local msg = err_of(S.suggester, SPACE, {algorithm = c[1], [c[2]] = c[3]})
      has(msg, string.format("dl.search.suggester: option '%s' applies to algorithm ", c[2]))
      has(msg, string.format(", not to '%s' (its options: ", c[1]))
    end
    has(err_of(S.suggester, SPACE, {algorithm = "random", init = 5}), "option 'init' applies to algorithm bayes, " ..
      "not to 'random' (its options: algorithm, context, mode, seed): leave it out")
    has(err_of(S.sample, SPACE, 4, {algorithm = "quasirandom", grid_points = 100}),
      "dl.search.sample: option 'grid_points' applies to algorithm grid, not to 'quasirandom'")
    has(err_of(S.sample, SPACE, 4, {algorithm = "grid", grid_points = 0}),
      "dl.search.sample: option 'grid_points' must be an integer >= 1, got 0")
    has(err_of(S.sample, SPACE, 4, {algorithm = "grid", grid_points = -2}),
      "dl.search.sample: option 'grid_points' must be an integer >= 1, got -2")
    has(err_of(S.sample, SPACE, -4), "bad argument #2 to 'dl.search.sample' (n must be a non-negative integer, got -4)")
    has(err_of(S.point, SPACE, 1, {algorithm = "random", grid_points = 3}),
      "dl.search.point: option 'grid_points' applies to algorithm grid, not to 'random'")
    has(err_of(S.point, SPACE, 0), "bad argument #2 to 'dl.search.point' (i must be a positive integer, got 0)")
    -- the options an algorithm uses still serve it
    -- a grid that runs out returns what it has and says so
    local said = {}
    assert.are.equal(3, #S.sample(SPACE, 10, {algorithm = "grid", grid_points = 3,
      warn = function(m) said[#said + 1] = m end}))
    assert.are.same({"dl.search.sample: the grid has 3 points, fewer than the 10 asked; returning them all"}, said)
    assert.are.equal(2, #S.suggester(SPACE, {algorithm = "grid", grid_points = 2}):suggest(5))
    assert.are.equal(0, #S.sample(SPACE, 0))
  end)

  it("refuses a GP warm start (theta) of another length", function()
    has(err_of(S.bayes_suggest, SPACE, HIST, {}, 1, {mode = "min", theta = {0.1}}),
      "dl.search.bayes_suggest: option 'theta' must be a list of 3 finite numbers")
    has(err_of(S.importance, SPACE, HIST, {theta = {0.1}}),
      "dl.search.importance: option 'theta' must be a list of 3 finite numbers")
    has(err_of(S.importance, SPACE, HIST, {theta = {0, 0, 0 / 0}}), "option 'theta' must be a list of 3 finite numbers")
    has(err_of(gp.fit, {{0.1}, {0.5}}, {1, 2}, {theta = {0.1}}),
      "dlua.gp.fit: option 'theta' must be a list of 3 finite numbers")
    -- several objectives under EHVI: one GP's theta per objective
    has(err_of(S.suggester, SPACE, {algorithm = "bayes", mode = {"min", "min"}, theta = {0, 0, 0}}),
      "option 'theta' must be a list of 6 finite numbers")
    local _, info = S.bayes_suggest(SPACE, HIST, {}, 1, {mode = "min"})
    local us = S.bayes_suggest(SPACE, HIST, {}, 1, {mode = "min", theta = info.theta})
    assert.are.equal(1, #us)
    assert.truthy(S.importance(SPACE, HIST, {theta = info.theta}).theta)
  end)

  it("refuses a scientific value listed twice, as dl.search.choice does", function()
    has(err_of(study, dir, {scientific = {width = {8, 8}}}), "dl.study: scientific width: value 8 is listed twice")
    has(err_of(study, dir, {scientific = {width = {8, 8.0}}}), "dl.study: scientific width: value 8.0 is listed twice")
    has(err_of(study, dir, {scientific = {width = {8, 16, x = 9}}}),
      "dl.study: scientific width: the list of values has the key 'x' beside its entries 1..2")
    has(err_of(S.choice, {8, 8}), "dl.search.choice: value 8 is listed twice")
  end)

  it("refuses enqueue that is not a list, and prune settings that cannot act", function()
    has(err_of(study, dir, {enqueue = {lr = 0.05}}), "dl.study: enqueue must be a list of tables of nuisance values " ..
      "(enqueue = {{lr = 0.1}, ...}), got a table with key 'lr'")
    has(err_of(study, dir, {enqueue = {{lr = 0.05}, x = {lr = 0.07}}}), "got a table with key 'x'")
    for _, r in ipairs({0 / 0, math.huge}) do
      has(err_of(study, dir, {prune = {algorithm = "asha", min_steps = 5, reduction = r}}),
        "dl.study: prune.reduction must be a finite number > 1, got " .. tostring(r))
    end
    has(err_of(study, dir, {steps = 20, prune = {algorithm = "median", warmup = 500}}),
      "dl.study: prune.warmup = 500 is not below the step budget 20: no trial is ever judged")
    assert.are.equal(19, study(dir, {steps = 20, prune = {algorithm = "median", warmup = 19}}).prune.warmup)
  end)

  it("checks values up front: importance's values, NaN and duplicates in lists of values", function()
    local hist = {{u = {0.1}, value = "1"}, {u = {0.5}, value = 0.2}, {u = {0.9}, value = 0.7}}
    has(err_of(S.importance, SPACE, hist),
      "dl.search.importance: history[1].value must be a number or nil (infeasible), got string")
    has(err_of(S.bayes_suggest, SPACE, hist, {}, 1, {mode = "min"}),
      "dl.search.bayes_suggest: history[1].value must be a number or nil (infeasible), got string")
    has(err_of(S.discrete, {0 / 0, 1}), "dl.search.discrete: value 1 is NaN")
    has(err_of(S.choice, {1, 1.0}), "dl.search.choice: value 1.0 is listed twice")
    has(err_of(S.discrete, {2, 1, 2.0}), "dl.search.discrete: value 2.0 is listed twice")
  end)
end)
