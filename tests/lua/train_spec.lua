-- dl.train: eval schedule, exact padded metrics, checkpoint retention and
-- retrospective selection, resume (also after SIGKILL), divergence, tracking
-- files, the experiment CLI and offline evaluation.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local tmpdir = H.tmpdir
local nn, optim, data, json, fs = dl.nn, dl.optim, dl.data, dl.json, dl.fs

local EXE = os.getenv("DLUA_EXE") or "build/dlua"
if EXE:sub(1, 1) ~= "/" then EXE = (os.getenv("PWD") or ".") .. "/" .. EXE end   -- the CLI specs cd elsewhere

local function lines(path)
  local out = {}
  for l in (fs.read(path) or ""):gmatch("[^\n]+") do out[#out + 1] = json.decode(l) end
  return out
end

-- a small, fixed classification problem: 3 classes from a linear rule
local function toy(n, seed)
  dl.seed(seed or 1)
  local x = dl.randn(n, 6)
  local y = x:matmul(dl.tensor({{1, 0, -1}, {0, 1, 1}, {1, 1, 0}, {-1, 0, 1}, {0, -1, 0}, {1, 0, 0}})):argmax(2)
  return data.tensors{image = x, label = y}
end

-- dl.train(c) with its printed lines (progress writes to io.stdout) captured in path: the
-- result and the text; a raised error is re-raised after stdout is put back
local function train_printed(c, path)
  local saved, so = io.output(), io.stdout
  io.output(path)
  io.stdout = io.output()
  local ok, r = pcall(dl.train, c)
  io.output():close()
  io.output(saved)
  io.stdout = so
  assert(ok, r)
  return r, fs.read(path)
end

local function config(dir, over)
  local ds = toy(230)
  local tr, va = ds:split{180, 50, seed = 0}
  dl.seed(2)
  local model = nn.Sequential{nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)}
  local c = {model = model, loss = nn.CrossEntropy(), optimizer = optim.SGD{params = model:parameters(), lr = 0.1},
    data = tr:shuffle{seed = 3}:batch(16), steps = 50, dir = dir, quiet = true, tracking = false,
    eval = {every = 10, sets = {valid = va}, batch_size = 16}}
  for k, v in pairs(over or {}) do c[k] = v end
  return c, model, va
end

describe("dl.train", function()
  it("evaluates exactly at steps N, 2N, ... and at the end", function()
    local dir = tmpdir("every")
    local c = config(dir, {steps = 47, eval = {every = 10, sets = {valid = select(3, config(dir))}}})
    local r = dl.train(c)
    assert.are.equal("done", r.status)
    local steps = {}
    for _, e in ipairs(lines(dir .. "/metrics.jsonl")) do
      if e.split == "eval" then steps[#steps + 1] = e.step end
    end
    assert.are.same({10, 20, 30, 40, 47}, steps)
    assert.are.equal(47, #r.grad_norms)                  -- the norm of every step is kept
    fs.rm_rf(dir)
  end)

  it("computes padded-batch metrics equal to the exact mean over the real examples", function()
    local ds = toy(53, 7)                                -- 53 = 7 * 7 + 4: a partial last batch
    dl.seed(4)
    local model = nn.Sequential{nn.Linear(6, 3)}
    local ev = dl.metrics.evaluator{model = model, loss = nn.CrossEntropy(), batch_size = 7,
                                    metrics = {"loss", "accuracy", "top2", "per_class"}}
    local got = dl.no_grad(function() return ev:run("set", ds, 0) end)
    -- the exact values, over all 53 examples at once
    local x, y = ds:column("image"), ds:column("label")
    local out = dl.no_grad(function() return model(x) end)
    local logp = out:log_softmax(2):totable()
    local yl, o = y:totable(), out:totable()
    local loss, hits, top2, per = 0, 0, 0, {0, 0, 0}
    local tot = {0, 0, 0}
    for i = 1, 53 do
      loss = loss - logp[i][yl[i]] / 53
      local best, above = 1, 0
      for c = 1, 3 do
        if o[i][c] > o[i][best] then best = c end
        if o[i][c] > o[i][yl[i]] then above = above + 1 end
      end
      if best == yl[i] then hits = hits + 1; per[yl[i]] = per[yl[i]] + 1 end
      if above < 2 then top2 = top2 + 1 end
      tot[yl[i]] = tot[yl[i]] + 1
    end
    assert(math.abs(got.loss - loss) < 1e-5, string.format("loss %g vs %g", got.loss, loss))
    assert.are.equal(hits / 53, got.accuracy)
    assert.are.equal(top2 / 53, got.top2)
    assert.are.same(per, {table.unpack(got.per_class.correct)})
    assert.are.same(tot, {table.unpack(got.per_class.total)})
    -- in-memory tensors take the same padded path: identical numbers
    local mem = dl.no_grad(function() return ev:run("set", {image = x, label = y}, 0) end)
    assert(math.abs(mem.loss - got.loss) < 1e-6)
    assert.are.equal(got.accuracy, mem.accuracy)
    assert.are.equal(got.top2, mem.top2)
    assert.are.same(got.per_class.correct, mem.per_class.correct)
    assert.error_matches(function() ev:run("set", {image = 3}, 0) end,
      "a set must be a dataset or {input = tensor, target = tensor}")
  end)

  it("keeps exactly the top-N and latest checkpoints for a scripted metric, and selects the best", function()
    local dir = tmpdir("keep")
    -- valid/score at the 6 evals (every 5 steps): the best two are at steps 10 and 20, the last is worse
    local script = {0.3, 0.9, 0.5, 0.8, 0.2, 0.1}
    local calls = 0
    local metric = function(out, y, w)
      calls = calls + 1
      return script[(calls - 1) // 4 + 1] * w:sum():item(), w:sum():item()   -- 4 batches per eval
    end
    local c, _, va = config(dir)
    c.steps = 30
    c.eval = {every = 5, sets = {valid = va}, batch_size = 13, metrics = {score = metric}}
    c.checkpoint = {keep_best = 2, metric = "valid/score", mode = "max", every = 5}    -- a checkpoint at every eval
    local r = dl.train(c)
    assert.are.equal("done", r.status)
    local files = {}
    for _, f in ipairs(fs.list(dir .. "/checkpoints")) do if f:match("safetensors$") then files[#files + 1] = f end end
    assert.are.same({"ckpt-000000010.safetensors", "ckpt-000000020.safetensors", "ckpt-000000030.safetensors"}, files)
    assert.are.equal(10, r.best.step)                    -- retrospective: the best, not the last
    assert(math.abs(r.best.metrics["valid/score"] - 0.9) < 1e-12)
    assert.truthy(r.best.checkpoint:match("ckpt%-000000010"))
    local led = json.decode(fs.read(dir .. "/checkpoints/index.json"))
    assert.are.equal(6, #led.evals)
    assert.are.equal(30, led.latest.step)
    -- min mode keeps the two lowest instead
    local dir2 = tmpdir("keepmin")
    calls = 0
    c = config(dir2)
    c.steps = 30
    c.eval = {every = 5, sets = {valid = select(3, config(dir2))}, batch_size = 13, metrics = {score = metric}}
    c.checkpoint = {keep_best = 2, metric = "valid/score", mode = "min", keep_every = 15, every = 5}
    r = dl.train(c)
    files = {}
    for _, f in ipairs(fs.list(dir2 .. "/checkpoints")) do if f:match("safetensors$") then files[#files + 1] = f end end
    assert.are.same({"ckpt-000000015.safetensors", "ckpt-000000025.safetensors", "ckpt-000000030.safetensors"}, files)
    assert.are.equal(30, r.best.step)
    fs.rm_rf(dir); fs.rm_rf(dir2)
  end)

  it("with checkpoint.tolerance selects the latest checkpoint within it of the best, and keeps it", function()
    -- valid/score at the 6 evals: best 0.9 at step 10; within 0.05 of it: 0.86 (step 20) and 0.88
    -- (step 25); 0.84 at step 30 is outside. Selected: step 25, kept first, with step 10 (keep_best 2)
    local script = {0.3, 0.9, 0.5, 0.86, 0.88, 0.84}
    local calls = 0
    local metric = function(out, y, w)
      calls = calls + 1
      return script[(calls - 1) // 4 + 1] * w:sum():item(), w:sum():item()
    end
    local dir = tmpdir("tol")
    local c, _, va = config(dir)
    c.steps = 30
    c.eval = {every = 5, sets = {valid = va}, batch_size = 13, metrics = {score = metric}}
    c.checkpoint = {keep_best = 2, metric = "valid/score", mode = "max", every = 5, tolerance = 0.05}
    c.quiet = nil
    local r, printed = train_printed(c, dir .. "/stdout.txt")
    assert.truthy(printed:find("checkpoints by valid/score (max, checkpoint.metric), the latest within 0.05 of the best",
      1, true), printed)
    assert.truthy(printed:find("the best eval, step 10 (valid/score 0.9000), is within checkpoint.tolerance (0.05) " ..
      "of the later one selected", 1, true), printed)
    assert.are.equal(25, r.best.step)
    assert(math.abs(r.best.metrics["valid/score"] - 0.88) < 1e-12)
    assert.are.equal(10, r.best_eval.step)              -- the best eval is still reported as such
    assert.are.equal(0.05, r.checkpoints.tolerance)
    local files = {}
    for _, f in ipairs(fs.list(dir .. "/checkpoints")) do if f:match("safetensors$") then files[#files + 1] = f end end
    assert.are.same({"ckpt-000000010.safetensors", "ckpt-000000025.safetensors", "ckpt-000000030.safetensors"}, files)
    -- min mode: the latest within the band of the lowest
    local dir2 = tmpdir("tolmin")
    calls = 0
    script = {0.5, 0.2, 0.9, 0.24, 0.3, 0.6}
    c = config(dir2)
    c.steps = 30
    c.eval = {every = 5, sets = {valid = select(3, config(dir2))}, batch_size = 13, metrics = {score = metric}}
    c.checkpoint = {keep_best = 1, metric = "valid/score", mode = "min", every = 5, tolerance = 0.05}
    r = dl.train(c)
    assert.are.equal(20, r.best.step)
    -- without a tolerance an exact tie keeps the earlier step (0.9 at steps 10 and 20)
    local dir3 = tmpdir("tie")
    calls = 0
    script = {0.3, 0.9, 0.9, 0.5, 0.2, 0.1}
    c = config(dir3)
    c.steps = 30
    c.eval = {every = 5, sets = {valid = select(3, config(dir3))}, batch_size = 13, metrics = {score = metric}}
    c.checkpoint = {keep_best = 1, metric = "valid/score", mode = "max", every = 5}
    r = dl.train(c)
    assert.are.equal(10, r.best.step)
    fs.rm_rf(dir3)
    -- tolerance 0 is the plain best; a negative or infinite one, or one with nothing ranked, is refused
    for _, bad in ipairs({-0.01, math.huge, 0 / 0}) do
      local c3 = config(tmpdir("tolbad"))
      c3.checkpoint = {metric = "valid/accuracy", tolerance = bad}
      assert.error_matches(function() dl.train(c3) end, "checkpoint.tolerance must be a finite number >= 0")
    end
    local c4 = config(tmpdir("tolnone"))
    c4.eval = nil
    c4.checkpoint = {tolerance = 0.01}
    assert.error_matches(function() dl.train(c4) end, "checkpoint.tolerance needs a metric")
    local c5 = config(tmpdir("toltype"))
    c5.checkpoint = {tolerance = "se"}
    assert.error_matches(function() dl.train(c5) end, "tolerance")
    fs.rm_rf(dir); fs.rm_rf(dir2)
  end)

  -- the default policy (dlua.train.policy) with share = 0: no eval fits the time budget, so what is
  -- written does not depend on timing: every new best under a user's keep_best, and the last step
  it("without checkpoint.every writes new bests under keep_best and the last step, and says where the best eval is", function()
    local script = {0.3, 0.9, 0.5, 0.8, 0.2, 0.1}       -- valid/score at steps 5, 10, ..., 30: new bests at 5 and 10
    local calls = 0
    local metric = function(out, y, w)
      calls = calls + 1
      return script[(calls - 1) // 4 + 1] * w:sum():item(), w:sum():item()   -- 4 batches per eval
    end
    local function files(dir)
      local l = {}
      for _, f in ipairs(fs.list(dir .. "/checkpoints")) do if f:match("safetensors$") then l[#l + 1] = f end end
      return l
    end
    local dir = tmpdir("policy")
    local c, _, va = config(dir)
    c.steps = 30
    c.eval = {every = 5, sets = {valid = va}, batch_size = 13, metrics = {score = metric}}
    c.checkpoint = {keep_best = 2, metric = "valid/score", mode = "max", share = 0}
    local r = dl.train(c)
    assert.are.same({"ckpt-000000005.safetensors", "ckpt-000000010.safetensors", "ckpt-000000030.safetensors"}, files(dir))
    assert.are.equal(3, r.checkpoints.written)
    assert.are.same({metric = "valid/score", mode = "max", chosen_by = "config", why = "checkpoint.metric",
                     policy = "at evals within 0% of the time", written = 3}, r.checkpoints)
    assert.are.equal(10, r.best.step)
    assert.are.equal("best", r.best.selected)
    assert.are.same({step = 10, value = 0.9, checkpoint = dir .. "/checkpoints/ckpt-000000010.safetensors"}, r.best_eval)
    -- no keep_best of the user's: new bests are not forced, so only the last step is written; the best
    -- checkpoint is the best kept one (step 30), and the record says the best eval (step 10) has none
    local dir2 = tmpdir("policy2")
    calls = 0
    c = config(dir2)
    c.steps = 30
    c.eval = {every = 5, sets = {valid = select(3, config(dir2))}, batch_size = 13, metrics = {score = metric}}
    c.checkpoint = {metric = "valid/score", share = 0}
    c.quiet = nil
    local printed
    r, printed = train_printed(c, dir2 .. "/stdout.txt")
    assert.are.same({"ckpt-000000030.safetensors"}, files(dir2))
    assert.are.equal(30, r.best.step)
    assert.are.equal("best", r.best.selected)
    assert.are.same({step = 10, value = 0.9}, r.best_eval)
    local rec = json.decode(fs.read(dir2 .. "/result.json"))
    assert.are.equal(10, rec.best_eval.step)
    assert.is_nil(rec.best_eval.checkpoint)
    assert.are.equal(1, rec.checkpoints.written)
    assert.truthy(printed:find("checkpoints by valid/score (max, checkpoint.metric), at evals within 0% of the time\n",
      1, true), printed)
    assert.truthy(printed:find("checkpoints %d+%% %(1%), waiting"), printed)
    assert.truthy(printed:find("best checkpoint by valid/score: step 30", 1, true), printed)
    assert.truthy(printed:find("the best eval, step 10 (valid/score 0.9000), has no checkpoint", 1, true), printed)
    -- every = N keeps the explicit schedule whatever the budget
    local dir3 = tmpdir("policy3")
    calls = 0
    c = config(dir3)
    c.steps = 30
    c.eval = {every = 5, sets = {valid = select(3, config(dir3))}, batch_size = 13, metrics = {score = metric}}
    c.checkpoint = {every = 15, keep_latest = 5}
    r = dl.train(c)
    assert.are.same({"ckpt-000000015.safetensors", "ckpt-000000030.safetensors"}, files(dir3))
    assert.are.equal("last", r.best.selected)        -- valid/score only: no default ranks it
    assert.is_nil(r.checkpoints.metric)
    fs.rm_rf(dir); fs.rm_rf(dir2); fs.rm_rf(dir3)
  end)

  it("ranks checkpoints by default by the validation accuracy of a classification loss, else its loss", function()
    local dir = tmpdir("defmetric")
    local c, _, va = config(dir, {steps = 20})
    c.eval = {every = 10, sets = {test = va, valid = va}, batch_size = 16}   -- valid, though test sorts first
    local r = dl.train(c)
    assert.are.same({metric = "valid/accuracy", mode = "max", chosen_by = "default", why = "the default",
                     policy = "at evals within 5% of the time", written = r.checkpoints.written}, r.checkpoints)
    assert.are.equal("best", r.best.selected)
    local led = json.decode(fs.read(dir .. "/checkpoints/index.json"))
    assert.are.equal("valid/accuracy", led.best.metric)
    local rec = json.decode(fs.read(dir .. "/result.json"))
    assert.are.equal("default", rec.checkpoints.chosen_by)
    fs.rm_rf(dir)
    -- no accuracy computed: the loss, mode min
    c = config(dir, {steps = 20})
    c.eval = {every = 10, sets = {a = va, b = va}, batch_size = 16, metrics = {"loss"}}
    r = dl.train(c)
    assert.are.equal("a/loss", r.checkpoints.metric)
    assert.are.equal("min", r.checkpoints.mode)
    fs.rm_rf(dir)
    -- an objective (a study's: --objective) ranks them instead of checkpoint.metric; a train metric cannot
    c = config(dir, {steps = 20, objective = {metric = "valid/loss", mode = "min"},
                     checkpoint = {metric = "valid/accuracy", keep_best = 1}})
    r = dl.train(c)
    assert.are.same({"valid/loss", "min", "objective", "the objective, not checkpoint.metric valid/accuracy"},
      {r.checkpoints.metric, r.checkpoints.mode, r.checkpoints.chosen_by, r.checkpoints.why})
    fs.rm_rf(dir)
    c = config(dir, {steps = 20, objective = {metric = "train/time_per_step", mode = "min"}})
    r = dl.train(c)
    assert.are.same({"valid/accuracy", "default", "the default, not the train metric train/time_per_step"},
      {r.checkpoints.metric, r.checkpoints.chosen_by, r.checkpoints.why})
    fs.rm_rf(dir)
  end)

  it("resumes from the latest checkpoint bit-identically and skips a corrupt one with a warning", function()
    local full = tmpdir("full")
    local c, model = config(full, {steps = 40, checkpoint = {every = 10}, ema = {decay = 0.9}})
    dl.train(c)
    local want = {}
    for k, t in pairs(model:state_dict()) do want[k] = t:clone() end
    -- the same run in two halves: 25 steps (checkpoints at 10, 20, 25), then resume to 40
    local part = tmpdir("part")
    c = config(part, {steps = 25, checkpoint = {every = 10, keep_latest = 3}, ema = {decay = 0.9}})
    dl.train(c)
    -- corrupt the newest checkpoint: resume must fall back to step 20
    local newest = part .. "/checkpoints/ckpt-000000025.safetensors"
    local bytes = fs.read(newest)
    local f = io.open(newest, "wb"); f:write(bytes:sub(1, #bytes - 9)); f:close()
    local c2, model2 = config(part, {steps = 40, checkpoint = {every = 10}, ema = {decay = 0.9}, resume = true,
                                     quiet = false})
    local r, printed = train_printed(c2, part .. "/stdout.txt")
    assert.truthy(printed:find("warning: skipping checkpoint .*ckpt%-000000025%.safetensors"), printed)
    assert.truthy(printed:find("resuming from .*ckpt%-000000020"), printed)
    assert.are.equal("done", r.status)
    for k, t in pairs(model2:state_dict()) do
      assert.is_true((t - want[k]):abs():max():item() == 0, "differs after resume: " .. k)
    end
    -- metrics after the resume point are not duplicated
    local evals = {}
    for _, e in ipairs(lines(part .. "/metrics.jsonl")) do if e.split == "eval" then evals[#evals + 1] = e.step end end
    assert.are.same({10, 20, 30, 40}, evals)
    fs.rm_rf(full); fs.rm_rf(part)
  end)

  it("stores per-example predictions of a fixed selection at each eval", function()
    local dir = tmpdir("pred")
    local c, model, va = config(dir, {steps = 20})
    c.eval = {every = 10, sets = {valid = va}, batch_size = 16, predictions = {indices = {1, 17, 50}, set = "valid"}}
    dl.train(c)
    local files = fs.list(dir .. "/predictions")
    assert.are.same({"valid-000000010.json", "valid-000000020.json"}, files)
    local p = json.decode(fs.read(dir .. "/predictions/valid-000000020.json"))
    assert.are.equal(20, p.step)
    assert.are.equal(3, #p.predictions)
    -- the stored values are the final model's outputs on those examples
    model:eval()
    for k, idx in ipairs({1, 17, 50}) do
      local e = p.predictions[k]
      assert.are.equal(idx, e.index)
      local ex = va:get(idx)
      assert.are.equal(ex.label, e.label)
      local out = dl.no_grad(function() return model(ex.image:reshape(1, 6)) end)
      assert.are.equal(out:argmax(2):item(), e.prediction)
      local probs, sum = out:softmax(2):reshape(3):totable(), 0
      for c2 = 1, 3 do
        assert(math.abs(probs[c2] - e.probabilities[c2]) < 1e-6)
        sum = sum + e.probabilities[c2]
      end
      assert(math.abs(sum - 1) < 1e-5)
    end
    fs.rm_rf(dir)
  end)

  it("refuses to train over an existing run without resume", function()
    local dir = tmpdir("exists")
    dl.train((config(dir, {steps = 10})))
    assert.error_matches(function() dl.train((config(dir, {steps = 10}))) end,
      "already holds checkpoints; pass resume = true")
    fs.rm_rf(dir)
  end)

  it("stops a diverging run with status diverged naming the step", function()
    local dir = tmpdir("div")
    local c = config(dir, {steps = 50})
    local ce, calls = nn.CrossEntropy(), 0
    c.loss = function(out, y, w)                         -- the loss turns NaN at the 7th step
      calls = calls + 1
      local l = ce(out, y, w)
      if calls == 7 then return l * (0 / 0) end
      return l
    end
    local r = dl.train(c)
    assert.are.equal("diverged", r.status)
    assert.truthy(r.message:match("^loss is %-?nan at step 7$"), r.message)
    local dir2 = tmpdir("div2")
    c = config(dir2, {steps = 50, divergence = {factor = 0.5}})
    r = dl.train(c)
    assert.are.equal("diverged", r.status)
    assert.truthy(r.message:match("exceeds 0.5 x the initial loss"), r.message)
    fs.rm_rf(dir); fs.rm_rf(dir2)
  end)

  it("clips by global norm and records the unclipped norm of every step", function()
    local dir = tmpdir("clip")
    local c = config(dir, {steps = 20, clip_grad_norm = 1e-3})
    local r = dl.train(c)
    assert.are.equal(20, #r.grad_norms)
    for s = 1, 20 do
      assert(r.grad_norms[s] > 1e-3)                     -- unclipped values, all above the threshold
      assert.is_true(r.clipped[s])
    end
    fs.rm_rf(dir)
  end)

  it("rejects bad configs with messages naming the key", function()
    assert.error_matches(function() dl.train{model = 1, loss = 1, optimizer = 1, data = 1, steps = 10, stepz = 3} end,
      "dl.train: unknown option 'stepz' %(valid: checkpoint, .*%); did you mean 'steps'%?")
    assert.error_matches(function() dl.train{model = 1, loss = 1, optimizer = 1, data = 1, steps = 0} end,
      "steps must be a positive integer")
    assert.error_matches(function()
      dl.train{model = 1, loss = 1, optimizer = 1, data = 1, steps = 5, checkpoint = {keep_latest = 0}}
    end, "keep_latest must be >= 1")
    assert.error_matches(function()
      dl.train{model = 1, loss = 1, optimizer = 1, data = 1, steps = 5, checkpoint = {keep_best = 2}}
    end, "keep_best needs checkpoint.metric")
    assert.error_matches(function()
      dl.train{model = 1, loss = 1, optimizer = 1, data = 1, steps = 5, checkpoint = {every = 0}}
    end, "dl.train: checkpoint.every must be a positive integer number of steps, got 0")
    assert.error_matches(function()
      dl.train{model = 1, loss = 1, optimizer = 1, data = 1, steps = 5, checkpoint = {share = 1.5}}
    end, "dl.train: checkpoint.share must be in %[0, 1%] %(the share of the run's time checkpoints may take%), got 1.5")
    assert.error_matches(function()
      dl.train{model = 1, loss = 1, optimizer = 1, data = 1, steps = 5, objective = {mode = "min"}}
    end, "dl.train: objective needs a metric")
    assert.error_matches(function()
      dl.train{model = 1, loss = 1, optimizer = 1, data = 1, steps = 5, objective = {metric = "a/b", mode = "up"}}
    end, 'dl.train: objective.mode must be "max" or "min", got up')
    for _, d in ipairs({1, 1.5, -0.1, 0 / 0}) do
      assert.error_matches(function()
        dl.train{model = 1, loss = 1, optimizer = 1, data = 1, steps = 5, ema = {decay = d}}
      end, "dl.train: ema.decay must be in %[0, 1%) %(0.999: about the last 1000 steps%), got " .. tostring(d):gsub("%-", "%%-"))
    end
  end)

  it("writes hparams.json, metrics.jsonl and a tracking row", function()
    local dir = tmpdir("track")
    local c = config(dir .. "/run", {steps = 20, hparams = {lr = 0.1, note = "x,y"}, tracking = dir, name = "toy",
      checkpoint = {metric = "valid/accuracy", keep_best = 1}})
    dl.train(c)
    assert.are.same({lr = 0.1, note = "x,y"}, json.decode(fs.read(dir .. "/run/hparams.json")))
    local rows = dl.track.read(dir .. "/studies.csv")
    assert.are.equal(1, #rows)
    assert.are.equal("toy", rows[1].name)
    assert.are.equal("done", rows[1].status)
    assert.truthy(tonumber(rows[1].best_value))
    for _, e in ipairs(lines(dir .. "/run/metrics.jsonl")) do
      assert.truthy(e.step and e.split and e.elapsed)
    end
    fs.rm_rf(dir)
  end)

  it("appends tracking rows from concurrent processes without interleaving", function()
    local dir = tmpdir("concurrent")
    fs.mkdir_p(dir)
    local script = dir .. "/append.lua"
    local f = io.open(script, "w")
    f:write([[
local track = require("dlua").track
for i = 1, 200 do
  track.append(arg[1], {name = arg[2] .. "-" .. i, description = string.rep("d", 300), trials = i})
end
]])
    f:close()
    local csv = dir .. "/studies.csv"
    os.execute(string.format("%s %s %s a & %s %s %s b & wait", EXE, script, csv, EXE, script, csv))
    local rows = dl.track.read(csv)
    assert.are.equal(400, #rows)
    for _, r in ipairs(rows) do
      assert.truthy(r.name:match("^[ab]%-%d+$"), r.name)
      assert.are.equal(string.rep("d", 300), r.description)
    end
    fs.rm_rf(dir)
  end)

  it("reads back what it writes: quotes, commas, newlines and empty fields (the engine's CSV tokenizer)", function()
    local values = {'say "hi"', "a,b", "two\nlines", "", " padded ", "crlf\r\nend"}
    local text = dl.track.csv_row(values) .. "\r\n" .. "x,,y\n\n" .. "last"
    assert.are.same({values, {"x", "", "y"}, {""}, {"last"}}, dl.track.parse_csv(text))
    assert.are.same({}, dl.track.parse_csv(""))
    assert.are.same({{"a", "b"}}, dl.track.parse_csv('"a"junk,b\n'))   -- after a closing quote, dropped
  end)
end)

-- an experiment file for the CLI and kill/resume tests: slow enough to be killed mid-run
local EXPERIMENT = [[
local dl = require "dlua"
local nn, optim, data = dl.nn, dl.optim, dl.data
return dl.experiment{
  name = "toy-cli", description = "a small experiment for the specs",
  hparams = {lr = 0.05, steps = 60, batch_size = 16, width = 64, dropout = 0.1},
  build = function(hp)
    local s0, c0 = dl.rng_state()
    dl.seed(11)
    local x = dl.randn(300, 20)
    local y = x:matmul(dl.randn(20, 4)):argmax(2)
    dl.rng_state(s0, c0)
    local ds = data.tensors{image = x, label = y}
    local tr, va = ds:split{250, 50, seed = 0}
    local model = nn.Sequential{nn.Linear(20, hp.width), nn.ReLU(), nn.Dropout(hp.dropout),
                                nn.Linear(hp.width, hp.width), nn.ReLU(), nn.Linear(hp.width, 4)}
    return {model = model, loss = nn.CrossEntropy(),
      optimizer = optim.Adam{params = model:parameters(), lr = hp.lr},
      schedule = optim.schedule.cosine{warmup = 5},
      data = tr:shuffle{seed = hp.data_seed}:batch(hp.batch_size), steps = hp.steps,
      eval = {every = 10, sets = {valid = va}, sample = 20},
      checkpoint = {every = 2, keep_best = 1, metric = "valid/accuracy"}, ema = {decay = 0.9}}
  end}
]]

describe("dlua EXPERIMENT (the CLI)", function()
  local dir, script
  setup(function()
    dir = tmpdir("cli")
    fs.mkdir_p(dir)
    script = dir .. "/exp.lua"
    local f = io.open(script, "w"); f:write(EXPERIMENT); f:close()
  end)
  teardown(function() fs.rm_rf(dir) end)

  local function run(args)
    local p = io.popen(string.format("cd %s && %s %s %s 2>&1; echo \"rc=$?\"", dir, EXE, script, args))
    local out = p:read("a")
    p:close()
    return out, tonumber(out:match("rc=(%d+)%s*$"))
  end

  it("trains with typed --set values, writes the reproduce command, and lists hyperparameters with --help", function()
    local out, rc = run("--out " .. dir .. "/r1 --set lr=0.01 --set width=32 --steps 20 --quiet --threads 1")
    assert.are.equal(0, rc, out)
    local hp = json.decode(fs.read(dir .. "/r1/hparams.json"))
    assert.are.equal(0.01, hp.lr)
    assert.are.equal(32, hp.width)
    assert.are.equal(20, hp.steps)
    assert.are.equal(0, hp.seed)
    assert.are.equal(1000, hp.data_seed)
    local rows = dl.track.read(dir .. "/studies.csv")
    assert.truthy(rows[#rows].command:find("--set lr=0.01 --set steps=20 --set width=32 --seed 0", 1, true), rows[#rows].command)
    -- led by the dlua that ran it, the script quoted: it runs as printed, before installation
    local lead = dl.util.shell_quote(EXE) .. " " .. dl.util.shell_quote(script) .. " "
    assert.are.equal(lead, rows[#rows].command:sub(1, #lead), rows[#rows].command)
    out, rc = run("--help")
    assert.are.equal(0, rc)
    assert.truthy(out:find("width%s+integer%s+default 64"), out)
    assert.truthy(out:find("--check%-determinism N"))
  end)

  it("puts a new run without --out next to the old ones, and --resume picks the newest", function()
    local _, rc = run("--steps 4 --quiet --threads 1")
    assert.are.equal(0, rc)
    _, rc = run("--steps 4 --quiet --threads 1")
    assert.are.equal(0, rc)
    assert.truthy(fs.is_dir(dir .. "/runs/toy-cli") and fs.is_dir(dir .. "/runs/toy-cli-2"))
    local out
    out, rc = run("--steps 6 --threads 1 --resume")
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("resuming from runs/toy%-cli%-2/checkpoints/ckpt%-000000004"), out)
    assert.is_falsy(fs.exists(dir .. "/runs/toy-cli-3"))
  end)

  it("rejects unknown flags, unknown hyperparameters and bad values, naming them", function()
    local out, rc = run("--stpes 3")
    assert.are.equal(1, rc)
    assert.truthy(out:find("dlua: unknown flag '--stpes' (see --help); did you mean '--steps'?", 1, true), out)
    out, rc = run("--set widht=3")
    assert.truthy(out:find("--set: unknown hyperparameter 'widht' (valid: batch_size, dropout, lr, steps, width); " ..
      "did you mean 'width'?", 1, true), out)
    assert.are.equal(1, rc)
    out = run("--set width=3.5")
    assert.truthy(out:find("%-%-set width: expected an integer, got '3.5'"), out)
    out = run("--steps -2")
    assert.truthy(out:find("%-%-steps: expected a positive integer, got '%-2'"), out)
    out = run("--seed -1")
    assert.truthy(out:find("--seed: expected a non-negative integer, got '-1'", 1, true), out)
    out = run("--quiet=yes")
    assert.truthy(out:find("--quiet takes no value", 1, true), out)
    out = run("--set lr")
    assert.truthy(out:find("%-%-set: expected key=value, got 'lr'"), out)
  end)

  it("writes a Chrome trace with the training loop's spans (--trace)", function()
    local tr = dir .. "/trace.json"
    local out, rc = run("--out " .. dir .. "/rt --steps 12 --quiet --threads 1 --trace " .. tr)
    assert.are.equal(0, rc, out)
    local t = json.decode(fs.read(tr))
    assert.truthy(t, "trace is not valid JSON")
    local events = t.traceEvents or t
    local seen, open = {}, {}
    local last = -math.huge
    for _, e in ipairs(events) do
      assert.truthy(e.name and e.ph and e.pid and e.tid, "an event lacks a required field")
      if e.ph ~= "M" then                                -- metadata events carry no timestamp
        assert(e.ts, "a timed event has no ts")
        assert(e.ts >= last, "timestamps are not monotonic")
        last = e.ts
      end
      seen[e.name] = true
      if e.ph == "B" then open[e.name] = (open[e.name] or 0) + 1 end
      if e.ph == "E" then open[e.name] = (open[e.name] or 0) - 1 end
    end
    for _, name in ipairs({"forward", "backward", "optimizer", "eval", "checkpoint"}) do
      assert.truthy(seen[name], "no span named " .. name)
    end
    for name, n in pairs(open) do assert.are.equal(0, n, "unmatched spans: " .. name) end
  end)

  it("checks determinism", function()
    local out, rc = run("--check-determinism 8 --threads 1")
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("deterministic: 8 steps twice from the same state give identical parameters"), out)
  end)

  it("ends a run killed with SIGKILL at several points bit-identical to an uninterrupted one", function()
    local base = "--steps 60 --threads 1 --quiet --set width=384"
    local t0 = dl.clock()
    local _, rc = run(base .. " --out " .. dir .. "/whole")
    local T = dl.clock() - t0                            -- kill times scale with this machine's speed
    assert.are.equal(0, rc)
    local killed = dir .. "/killed"
    local kills = 0
    for _, f in ipairs({0.3, 0.4, 0.35, 0.5, 0.45, 0.55, 0.6, 0.7}) do
      local t = string.format("%.3f", f * T)
      local p = io.popen(string.format("cd %s && timeout -s KILL %s %s %s %s --out %s --resume >/dev/null 2>&1; echo $?",
        dir, t, EXE, script, base, killed))
      local code = tonumber(p:read("a"))
      p:close()
      if code == 137 then kills = kills + 1 end
      -- never left without a valid checkpoint once the first was written
      local valid = 0
      for _, f in ipairs(fs.list(killed .. "/checkpoints")) do
        if f:match("%.safetensors$") and dl.checkpoint.verify(killed .. "/checkpoints/" .. f) then valid = valid + 1 end
      end
      local any = #fs.list(killed .. "/checkpoints") > 0
      assert(valid > 0 or not any, "no valid checkpoint left after a kill")
    end
    local out
    out, rc = run(base .. " --out " .. killed .. " --resume")
    assert.are.equal(0, rc, out)
    assert(kills >= 2, "the runs were not killed often enough to test anything (" .. kills .. ")")
    for _, f in ipairs(fs.list(killed .. "/checkpoints")) do
      assert.is_falsy(f:match("%.tmp"), "temp file left behind: " .. f)
    end
    local a = dl.checkpoint.load(dir .. "/whole/checkpoints/ckpt-000000060.safetensors")
    local b = dl.checkpoint.load(killed .. "/checkpoints/ckpt-000000060.safetensors")
    local n = 0
    for k, t in pairs(a) do
      n = n + 1
      assert.truthy(b[k], k)
      assert.is_true((t - b[k]):abs():max():item() == 0, "differs: " .. k)
    end
    assert(n > 10)
    local ea, eb = {}, {}
    for _, e in ipairs(lines(dir .. "/whole/metrics.jsonl")) do if e.split == "eval" then ea[#ea + 1] = e["valid/loss"] end end
    for _, e in ipairs(lines(killed .. "/metrics.jsonl")) do if e.split == "eval" then eb[#eb + 1] = e["valid/loss"] end end
    assert.are.same(ea, eb)
  end)

  it("evaluates a checkpoint offline on the full sets and reports the sample gap", function()
    local _, rc = run("--out " .. dir .. "/r3 --steps 10 --quiet --threads 1")
    assert.are.equal(0, rc)
    local exp = dl.load_experiment(script)
    local ck = dir .. "/r3/checkpoints/ckpt-000000010.safetensors"
    local res, rep = dl.evaluate{experiment = exp, checkpoint = ck}
    assert.truthy(res["valid/accuracy"])
    assert.are.equal(10, rep.step)
    local g = rep.gaps["valid/accuracy"]
    assert.truthy(g)
    assert(math.abs(g.gap - (g.sample - g.full)) < 1e-12)
    assert.are.equal(res["valid/accuracy"], g.full)
    -- the periodic eval at step 10 used the sample: it equals the sample metric here
    local ev
    for _, e in ipairs(lines(dir .. "/r3/metrics.jsonl")) do if e.split == "eval" and e.step == 10 then ev = e end end
    assert(math.abs(ev["valid/accuracy"] - g.sample) < 1e-12)
    -- and the same numbers from the shell
    local p = io.popen(string.format("%s recipes/evaluate.lua %s --checkpoint %s 2>&1", EXE, script, ck))
    local out = p:read("a")
    p:close()
    assert.truthy(out:find(string.format("valid/accuracy%%s+%.4f", res["valid/accuracy"])), out)
    assert.truthy(out:find("gap [+-]"), out)
    assert.truthy(out:find("(step 10)", 1, true), out)
    -- a checkpoint with the weights and hyperparameters but no step (written by dl.checkpoint.save): no "(step nil)"
    local tensors, meta = dl.checkpoint.load(ck)
    local bare = dir .. "/bare.safetensors"
    assert(dl.checkpoint.save(bare, tensors, {hparams = meta.hparams}))
    p = io.popen(string.format("%s recipes/evaluate.lua %s --checkpoint %s 2>&1", EXE, script, bare))
    out = p:read("a")
    p:close()
    assert.truthy(out:find("checkpoint " .. bare .. " (no step recorded)\n", 1, true), out)
    assert.is_nil(out:find("nil", 1, true), out)
  end)
end)

describe("dlua.train.policy", function()
  local policy = require "dlua.train.policy"

  it("writes at an eval while checkpoints stay under the share of the elapsed time (scripted clock)", function()
    local t = 0
    local p = policy.new{share = 0.05, clock = function() return t end}
    local eval = {last = false, eval = true, new_best = false}
    assert.is_false((p:due(5, {last = false, eval = false})))      -- not an eval: never
    t = 1
    assert.is_true((p:due(10, eval)))                              -- the first eval measures the cost
    p:wrote(0.5)
    t = 10
    -- 0.5 s written + 0.5 s expected = 1 s: not under 5% of 10 s
    assert.is_false((p:due(20, eval)))
    assert.is_false((p:due(20, {last = false, eval = true, new_best = true})))   -- no keep_best of the user's
    t = 20
    assert.is_false((p:due(30, eval)))                             -- 1 s is not under 1 s
    t = 20.5
    assert.is_true((p:due(40, eval)))
    p:wrote(1.0)                                                   -- mean 0.75: 1.5 + 0.75 < 0.05 t from t = 45
    t = 44.9
    assert.is_false((p:due(50, eval)))
    t = 45.1
    assert.is_true((p:due(60, eval)))
    assert.is_true((p:due(61, {last = true, eval = false})))       -- the last step, always
    assert.are.equal("at evals within 5% of the time", p:describe())
  end)

  it("writes every new best under a user's keep_best, and every N steps when asked", function()
    local t = 0
    local p = policy.new{share = 0, best_always = true, clock = function() return t end}
    t = 100
    assert.is_false((p:due(10, {last = false, eval = true, new_best = false})))
    assert.is_true((p:due(20, {last = false, eval = true, new_best = true})))
    local e = policy.new{every = 15, clock = function() return t end}
    assert.same({false, true, false, true}, {(e:due(10, {eval = true, new_best = true})), (e:due(15, {eval = false})),
      (e:due(20, {eval = true})), (e:due(21, {last = true}))})
    assert.are.equal("every 15 steps", e:describe())
    assert.error_matches(function() policy.new{shrae = 0.1} end,
      "policy.new: unknown option 'shrae' %(valid: best_always, clock, every, share%); did you mean 'share'%?")
    assert.error_matches(function() policy.new{share = 2} end, "policy.new: share must be in %[0, 1%], got 2")
  end)
end)
