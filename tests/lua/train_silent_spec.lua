-- dl.train and dl.optim never accept an option and ignore it: every option of a
-- run is checked for type and range before anything runs (the message names
-- dl.train, the option's path and the valid values), a metric name that no eval
-- reports stops the run at the first eval, and what a run records (the tracking
-- row, result.checkpoints) is what ranked it.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local tmpdir = H.tmpdir
local nn, optim, data, fs = dl.nn, dl.optim, dl.data, dl.fs

-- a small 3-class problem and a Linear(4, 3) model: a config of steps steps, quiet, untracked
local function config(dir, over)
  dl.seed(0)
  local x = dl.randn({64, 4})
  local lab = {}
  for i = 1, 64 do lab[i] = (i % 3) + 1 end
  local ds = data.tensors{image = x, label = dl.tensor(lab, {dtype = "int32"})}
  local model = nn.Sequential{nn.Linear(4, 3)}
  local c = {model = model, loss = nn.CrossEntropy(), optimizer = optim.SGD{params = model:parameters(), lr = 0.1},
             data = ds:batch(16), steps = 4, quiet = true, tracking = false, dir = dir}
  for k, v in pairs(over or {}) do c[k] = v end
  return c, ds
end

-- dl.train(c) raises an error whose message holds text (plainly)
local function refuses(c, text)
  local ok, err = pcall(dl.train, c)
  assert.is_false(ok, "dl.train accepted the config; expected: " .. text)
  assert.truthy(tostring(err):find(text, 1, true), "got: " .. tostring(err))
end

describe("dl.train refuses an option it would ignore or misread", function()
  it("clip_grad_norm: a positive finite number, in dl.train and in optim.clip_grad_norm", function()
    for _, bad in ipairs({0, -1, math.huge}) do
      refuses(config(tmpdir("clip"), {clip_grad_norm = bad}), "dl.train: option 'clip_grad_norm' must be a " ..
        "positive finite number (the largest global gradient norm a step keeps), got " .. tostring(bad))
    end
    refuses(config(tmpdir("clip"), {clip_grad_norm = "1"}), "dl.train: option 'clip_grad_norm' must be number, got string")
    local m = nn.Linear(2, 2)
    m(dl.ones({1, 2})):sum():backward()
    assert.has_error(function() optim.clip_grad_norm(m:parameters(), 0) end,
      "optim.clip_grad_norm: max_norm must be a positive finite number, got 0")
    assert.has_error(function() optim.clip_grad_norm(m:parameters(), -2.5) end,
      "optim.clip_grad_norm: max_norm must be a positive finite number, got -2.5")
    assert.is_true(optim.clip_grad_norm(m:parameters(), 1e-3) > 0)
  end)

  it("checkpoint.keep_best: a positive integer", function()
    for _, bad in ipairs({0, -2}) do
      local c, ds = config(tmpdir("kb"))
      c.eval = {sets = {valid = ds}}
      c.checkpoint = {keep_best = bad, metric = "valid/loss"}
      refuses(c, "dl.train: option 'checkpoint.keep_best' must be a positive integer, got " .. bad)
    end
    local c, ds = config(tmpdir("kb"))
    c.eval = {sets = {valid = ds}}
    c.checkpoint = {keep_best = "2", metric = "valid/loss"}
    refuses(c, "dl.train: option 'checkpoint.keep_best' must be a positive integer, got string")
  end)

  it("the untyped options get a type and a range", function()
    local cases = {
      {{resume = "no"}, "dl.train: option 'resume' must be boolean, got string"},
      {{quiet = "yes"}, "dl.train: option 'quiet' must be boolean, got string"},
      {{log_every = 0}, "dl.train: option 'log_every' must be a positive integer, got 0"},
      {{log_every = -1}, "dl.train: option 'log_every' must be a positive integer, got -1"},
      {{checkpoint = {every = 1, keep_every = 0}}, "dl.train: option 'checkpoint.keep_every' must be a positive integer, got 0"},
      {{checkpoint = {every = 1, keep_every = 1.5}},
       "dl.train: option 'checkpoint.keep_every' must be a positive integer, got 1.5"},
      {{tracking = 0}, "dl.train: option 'tracking' must be boolean or string, got integer"},
      {{threads = "lots"}, "dl.train: option 'threads' is a command-line setting (dlua EXPERIMENT --threads N): " ..
       "call dl.threads(N) before dl.train; dl.train does not read it"},
      {{trace = 5}, "dl.train: option 'trace' is a command-line setting (dlua EXPERIMENT --trace FILE)"},
    }
    for _, case in ipairs(cases) do refuses(config(tmpdir("types"), case[1]), case[2]) end
    for _, case in ipairs({
      {{batch_size = 0}, "dl.train: option 'eval.batch_size' must be a positive integer, got 0"},
      {{sample = 0}, "dl.train: option 'eval.sample' must be a positive integer, got 0"},
    }) do
      local c, ds = config(tmpdir("evtypes"))
      c.eval = case[1]
      c.eval.sets = {valid = ds}
      refuses(c, case[2])
    end
  end)

  it("refuses options that would change nothing: share beside every, eval without sets, predictions of nothing", function()
    refuses(config(tmpdir("share"), {checkpoint = {every = 2, share = 0.5}}),
      "dl.train: checkpoint.share applies to the time policy only, and checkpoint.every = 2 writes every 2 steps " ..
      "instead: give one of them")
    refuses(config(tmpdir("evsets"), {eval = {every = 2}}),
      "dl.train: eval.every needs eval.sets (the sets to evaluate, {valid = dataset}): without them nothing is evaluated")
    refuses(config(tmpdir("cmode"), {checkpoint = {mode = "min"}}), "dl.train: checkpoint.mode needs checkpoint.metric")
    refuses(config(tmpdir("cmetric"), {checkpoint = {metric = "valid/loss"}}),
      "dl.train: checkpoint.metric needs eval.sets")
    local c, ds = config(tmpdir("pset"))
    c.eval = {sets = {valid = ds}, predictions = {indices = {1, 2}, set = "vaild"}}
    refuses(c, "dl.train: option 'eval.predictions.set' must be \"valid\", got \"vaild\" (the names of eval.sets); " ..
      "did you mean 'valid'?")
    c = config(tmpdir("pnoidx"))
    c.eval = {sets = {valid = ds}, predictions = {set = "valid"}}
    refuses(c, "dl.train: eval.predictions needs indices")
    c = config(tmpdir("pzero"))
    c.eval = {sets = {valid = ds}, predictions = {indices = {0}}}
    refuses(c, "dl.train: eval.predictions.indices[1] must be a positive integer, got 0")
    -- an index past the set writes nothing: the run fails at its first eval, naming the set's size
    local dir = tmpdir("pbig")
    c = config(dir)
    c.eval = {sets = {valid = ds}, predictions = {indices = {2, 1000}}}
    local r = dl.train(c)
    assert.are.equal("failed", r.status)
    assert.truthy(r.message:find("evaluate: eval.predictions.indices names example 1000, but the set valid has 64 " ..
      "examples", 1, true), r.message)
    fs.rm_rf(dir)
  end)
end)

describe("dl.train ranks checkpoints by a metric the evals report, and records it", function()
  it("a checkpoint.metric no eval reports fails the run at the first eval, naming the nearest", function()
    local dir = tmpdir("typo")
    local c, ds = config(dir)
    c.eval = {every = 2, sets = {valid = ds}}
    c.checkpoint = {metric = "valid/acuracy", keep_best = 1}
    local r = dl.train(c)
    assert.are.equal("failed", r.status)
    assert.truthy(r.message:find("step 2: dl.train: checkpoint.metric 'valid/acuracy' is not a metric the evals " ..
      "report (they report: valid/accuracy, valid/loss); did you mean 'valid/accuracy'?", 1, true), r.message)
    assert.are.equal(2, r.steps)
    fs.rm_rf(dir)
  end)

  it("infers the mode of checkpoint.metric as the objective's: min for a loss, else max", function()
    local function ranked(over)
      local dir = tmpdir("mode")
      local c, ds = config(dir)
      c.eval = {every = 2, sets = {valid = ds}}
      for k, v in pairs(over) do c[k] = v end
      local r = dl.train(c)
      fs.rm_rf(dir)
      assert.are.equal("done", r.status, r.message)
      return r.checkpoints
    end
    local ck = ranked{checkpoint = {metric = "valid/loss"}}
    assert.are.same({"valid/loss", "min", "config"}, {ck.metric, ck.mode, ck.chosen_by})
    ck = ranked{objective = {metric = "valid/loss"}}
    assert.are.same({"valid/loss", "min", "objective"}, {ck.metric, ck.mode, ck.chosen_by})
    ck = ranked{checkpoint = {metric = "valid/accuracy"}}
    assert.are.same({"valid/accuracy", "max"}, {ck.metric, ck.mode})
    ck = ranked{checkpoint = {metric = "valid/loss", mode = "max"}}      -- a mode given is kept
    assert.are.equal("max", ck.mode)
  end)

  it("writes the metric that ranked into the tracking row (the objective, or the default)", function()
    local root = tmpdir("track")
    local function run(name, over)
      local c, ds = config(root .. "/" .. name, {name = name, tracking = root})
      c.eval = {every = 2, sets = {valid = ds}}
      for k, v in pairs(over) do c[k] = v end
      return dl.train(c)
    end
    local r1 = run("objective", {objective = {metric = "valid/loss", mode = "min"},
                                 checkpoint = {metric = "valid/accuracy"}})
    local r2 = run("default", {})
    local rows = dl.track.read(root .. "/studies.csv")
    assert.are.equal(2, #rows)
    assert.are.equal("valid/loss", rows[1].best_metric)
    assert.is_true(math.abs(r1.best.metrics["valid/loss"] - tonumber(rows[1].best_value)) < 1e-9, rows[1].best_value)
    assert.are.equal("valid/accuracy", rows[2].best_metric)
    assert.is_true(math.abs(r2.best.metrics["valid/accuracy"] - tonumber(rows[2].best_value)) < 1e-9, rows[2].best_value)
    fs.rm_rf(root)
  end)
end)

describe("schedules and parameter groups", function()
  it("dl.train leaves the user's schedule as it was: a second run of another length decays over its own", function()
    local sched = optim.schedule.cosine{}
    local d1, d2 = tmpdir("sched1"), tmpdir("sched2")
    dl.train((config(d1, {steps = 4, log_every = 1, schedule = sched})))
    assert.is_nil(sched.steps)
    dl.train((config(d2, {steps = 8, log_every = 1, schedule = sched})))
    assert.is_nil(sched.steps)
    local a, b = H.train_lrs(d1), H.train_lrs(d2)
    assert.is_true(math.abs(a[4]) < 1e-12)                          -- the end of a 4-step cosine
    assert.is_true(math.abs(b[4] - 0.05) < 1e-9, tostring(b[4]))      -- half-way through an 8-step one
    assert.is_true(math.abs(b[8]) < 1e-12)
    fs.rm_rf(d1); fs.rm_rf(d2)
  end)

  it("refuses steps on a schedule that does not decay over them, and a warmup or steps out of range", function()
    for _, name in ipairs({"constant", "rsqrt"}) do
      assert.error_matches(function() optim.schedule[name]{steps = 5} end,
        "optim.schedule." .. name .. ": option 'steps' is not read by a " .. name ..
        " schedule %(only linear and cosine decay over steps%); leave it out")
    end
    assert.error_matches(function() optim.schedule.piecewise{boundaries = {2}, values = {1, 0.1}, steps = 5} end,
      "optim.schedule.piecewise: option 'steps' is not read by a piecewise schedule")
    assert.error_matches(function() optim.schedule.linear{warmup = -10, steps = 100} end,
      "optim.schedule.linear: option 'warmup' must be a non%-negative integer, got %-10")
    assert.error_matches(function() optim.schedule.cosine{warmup = 2.5} end,
      "optim.schedule.cosine: option 'warmup' must be a non%-negative integer, got 2.5")
    assert.error_matches(function() optim.schedule.cosine{steps = 0} end,
      "optim.schedule.cosine: option 'steps' must be a positive integer, got 0")
    local s = optim.schedule.linear{warmup = 10.0, steps = 100}        -- a whole float is that integer
    assert.are.equal(0.5, s(5))
    assert.are.equal("schedule.linear{warmup = 10, steps = 100}", tostring(s))
  end)

  it("param_groups leaves weight_decay to the optimizer unless given", function()
    local m = nn.Sequential{nn.Linear(4, 3)}
    local g = optim.param_groups(m, {})
    assert.is_nil(g[1].weight_decay)
    assert.are.equal(0, g[2].weight_decay)
    local opt = optim.AdamW{params = g, lr = 0.1, weight_decay = 0.05}
    assert.are.equal(0.05, opt.groups[1].opts.weight_decay)
    assert.are.equal(0, opt.groups[2].opts.weight_decay)
    opt = optim.AdamW{params = optim.param_groups(m), lr = 0.1}           -- AdamW's default
    assert.are.equal(optim.AdamW{lr = 0.1}.opts.weight_decay, opt.groups[1].opts.weight_decay)
    assert.are.equal(1e-3, optim.param_groups(m, {weight_decay = 1e-3})[1].weight_decay)
  end)
end)
