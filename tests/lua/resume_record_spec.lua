-- The record of a run is never rewritten (issue 33, item 4): a resume whose
-- hyperparameters differ from the run's hparams.json is refused, naming each
-- changed key with its old and new value, unless override is given; then
-- hparams.json holds the values in force and hparams_history.json the step each
-- change took effect, which the train lines of metrics.jsonl (their lr) and the
-- checkpoints' own hparams confirm independently.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local json, fs = dl.json, dl.fs

local function read(path) return json.decode(fs.read(path)) end

local function ckpt_hparams(dir, step)
  local _, meta = dl.checkpoint.load(string.format("%s/checkpoints/ckpt-%09d.safetensors", dir, step))
  return json.decode(meta.hparams)
end

describe("experiment:run{resume = true} with changed hyperparameters", function()
  local dir, exp
  setup(function()
    dir = H.tmpdir("record")
    H.spit(dir .. "/exp.lua", H.fixture("toy_experiment.lua"))
    exp = dl.load_experiment(dir .. "/exp.lua")
  end)
  teardown(function() fs.rm_rf(dir) end)

  local function go(run, over, steps, opts)
    local o = {dir = run, quiet = true, tracking = false, steps = steps}
    for k, v in pairs(opts or {}) do o[k] = v end
    over.checkpoint_every, over.log_every = 5, 5
    return exp:run(over, o)
  end

  it("is refused naming each changed key, and nothing of the run is touched", function()
    local run = dir .. "/refused"
    assert.are.equal("done", go(run, {}, 10).status)
    local before = {hp = fs.read(run .. "/hparams.json"), metrics = fs.read(run .. "/metrics.jsonl"),
                    index = fs.read(run .. "/checkpoints/index.json")}
    assert.error_matches(function() go(run, {lr = 0.9, width = 8}, 20, {resume = true}) end,
      "dl.train: resuming the run in " .. run .. " at step 10 with hyperparameters that differ from the run's record (" ..
      run .. "/hparams.json): lr 0.05 -> 0.9, width 16 -> 8; resume with the recorded values, or pass override = " ..
      "true (dlua: --override) to continue with the new ones (hparams_history.json then records the step each took " ..
      "effect)", nil, true)
    assert.are.equal(before.hp, fs.read(run .. "/hparams.json"))
    assert.are.equal(before.metrics, fs.read(run .. "/metrics.jsonl"))
    assert.are.equal(before.index, fs.read(run .. "/checkpoints/index.json"))
    assert.is_false(fs.exists(run .. "/hparams_history.json"))
    -- the same values resume, and a longer budget alone needs no override (it is recorded)
    assert.are.equal("done", go(run, {}, 15, {resume = true}).status)
    local h = read(run .. "/hparams_history.json")
    assert.are.equal(2, #h.segments)
    assert.are.same({from_step = 11, changed = {steps = {was = 10, now = 15}}},
      {from_step = h.segments[2].from_step, changed = h.segments[2].changed})
    -- override without resume is a mistake in the config
    assert.error_matches(function() go(dir .. "/other", {}, 5, {override = true}) end,
      "override = true applies to a resume only", nil, true)
    assert.error_matches(function() go(run, {}, 15, {override = "yes"}) end,
      "experiment:run: option 'override' must be boolean, got string", nil, true)
  end)

  it("with override keeps the history of two changes, each from the step it took effect", function()
    local run = dir .. "/history"
    -- each checkpoint carries the values it was trained with (dl.evaluate rebuilds from them)
    local in_ckpt = {}
    assert.are.equal("done", go(run, {}, 10).status)
    in_ckpt[10] = ckpt_hparams(run, 10)
    assert.are.equal("done", go(run, {lr = 0.2}, 20, {resume = true, override = true}).status)
    in_ckpt[20] = ckpt_hparams(run, 20)
    assert.are.equal("done", go(run, {lr = 0.2, momentum = 0.5}, 30, {resume = true, override = true}).status)
    in_ckpt[30] = ckpt_hparams(run, 30)
    local flat = read(run .. "/hparams.json")               -- the values in force now, flat as before
    assert.are.same({0.2, 0.5, 30, 16}, {flat.lr, flat.momentum, flat.steps, flat.width})
    local segs = read(run .. "/hparams_history.json").segments
    assert.are.equal(3, #segs)
    assert.are.same({1, 11, 21}, {segs[1].from_step, segs[2].from_step, segs[3].from_step})
    assert.are.same({0.05, 0.9, 10}, {segs[1].hparams.lr, segs[1].hparams.momentum, segs[1].hparams.steps})
    assert.is_nil(segs[1].changed)
    assert.are.same({lr = {was = 0.05, now = 0.2}, steps = {was = 10, now = 20}}, segs[2].changed)
    assert.are.same({momentum = {was = 0.9, now = 0.5}, steps = {was = 20, now = 30}}, segs[3].changed)
    assert.are.same(flat, segs[3].hparams)
    -- what the steps ran with, independently: the train lines' lr and each checkpoint's hparams
    local lr = H.train_lrs(run)
    assert.are.same({0.05, 0.05, 0.2, 0.2, 0.2, 0.2}, {lr[5], lr[10], lr[15], lr[20], lr[25], lr[30]})
    assert.are.same({0.05, 0.9}, {in_ckpt[10].lr, in_ckpt[10].momentum})
    assert.are.same({0.2, 0.9}, {in_ckpt[20].lr, in_ckpt[20].momentum})
    assert.are.same({0.2, 0.5}, {in_ckpt[30].lr, in_ckpt[30].momentum})
    -- the readers of a run directory keep working: the report and offline evaluation
    assert.truthy(fs.exists(dl.report(run)))
    local m = dl.evaluate{experiment = exp, checkpoint = string.format("%s/checkpoints/ckpt-%09d.safetensors", run, 30)}
    local last                                              -- the run's own eval at step 30
    for l in fs.read(run .. "/metrics.jsonl"):gmatch("[^\n]+") do
      local e = json.decode(l)
      if e.split == "eval" and e.step == 30 then last = e end
    end
    assert.are.equal(last["valid/accuracy"], m["valid/accuracy"])
    assert.is_true(math.abs(last["valid/loss"] - m["valid/loss"]) < 1e-6)
  end)

  it("drops the history of steps a resume discards", function()
    local run = dir .. "/discard"
    assert.are.equal("done", go(run, {}, 10).status)
    -- a resume with override that dies before its first checkpoint: hparams_history.json names a
    -- segment from step 11, but the only checkpoint is step 10, so the next resume trains 11.. again
    local rec = require "dlua.train.record"
    local segs = rec.on_resume(run, exp:resolve({lr = 0.3, checkpoint_every = 5, log_every = 5, steps = 20}), 10, true)
    rec.write(run, segs)
    assert.are.equal(0.3, read(run .. "/hparams.json").lr)
    -- the record (0.3) was never trained with: step 10 ran with 0.05, so resuming there with 0.05
    -- changes nothing that ran (no override needed) and the discarded segment goes
    assert.are.equal("done", go(run, {}, 20, {resume = true}).status)
    local h = read(run .. "/hparams_history.json").segments
    assert.are.equal(2, #h)
    assert.are.same({steps = {was = 10, now = 20}}, h[2].changed)
    assert.are.equal(0.05, read(run .. "/hparams.json").lr)
  end)
end)

describe("dl.train{resume = true} with hparams of its own", function()
  it("compares values as they read back from hparams.json, tables included", function()
    local nn, optim, data = dl.nn, dl.optim, dl.data
    local dir = H.tmpdir("record-train")
    local function cfg(hp, steps, resume)
      dl.seed(1)
      local x = dl.randn(64, 4)
      local y = x:matmul(dl.randn(4, 3)):argmax(2)
      local m = nn.Linear(4, 3)
      return {model = m, loss = nn.CrossEntropy(), optimizer = optim.SGD{params = m:parameters(), lr = 0.1},
        data = data.tensors{image = x, label = y}:batch(8), steps = steps, dir = dir, quiet = true, tracking = false,
        checkpoint = {every = 5}, hparams = hp, resume = resume}
    end
    assert.are.equal("done", dl.train(cfg({layers = {64, 32}, note = "x", lr = 1.0}, 5)).status)
    assert.are.equal("done", dl.train(cfg({layers = {64, 32}, note = "x", lr = 1.0}, 10, true)).status)
    assert.is_false(fs.exists(dir .. "/hparams_history.json"))     -- nothing changed: no history
    assert.error_matches(function() dl.train(cfg({layers = {64, 16}, note = "y", lr = 1.0}, 15, true)) end,
      "record (" .. dir .. "/hparams.json): layers [64,32] -> [64,16], note \"x\" -> \"y\"; resume with", nil, true)
    fs.rm_rf(dir)
  end)
end)

describe("dlua EXPERIMENT --resume", function()
  it("refuses --set that changes the record without --override, and keeps the history with it", function()
    local dir = H.tmpdir("record-cli")
    H.spit(dir .. "/exp.lua", H.fixture("toy_experiment.lua"))
    local base = "exp.lua --out r --quiet --threads 1 --set checkpoint_every=5"
    local out, rc = H.run(dir, base .. " --steps 10")
    assert.are.equal(0, rc, out)
    out, rc = H.run(dir, base .. " --steps 20 --resume --set lr=0.9")
    assert.are.equal(1, rc, out)
    assert.truthy(out:find("dlua: dl.train: resuming the run in r at step 10 with hyperparameters that differ from " ..
      "the run's record (r/hparams.json): lr 0.05 -> 0.9; resume with the recorded values, or pass override = true " ..
      "(dlua: --override)", 1, true), out)
    assert.are.equal(0.05, read(dir .. "/r/hparams.json").lr)
    out, rc = H.run(dir, base .. " --steps 20 --set lr=0.9 --override")
    assert.are.equal(1, rc, out)
    assert.truthy(out:find("dlua: --override applies to --resume only (see --help)", 1, true), out)
    out, rc = H.run(dir, base .. " --steps 20 --resume --set lr=0.9 --override")
    assert.are.equal(0, rc, out)
    assert.are.equal(0.9, read(dir .. "/r/hparams.json").lr)
    local segs = read(dir .. "/r/hparams_history.json").segments
    assert.are.same({{1, 0.05}, {11, 0.9}}, {{segs[1].from_step, segs[1].hparams.lr}, {segs[2].from_step, segs[2].hparams.lr}})
    assert.are.same({lr = {was = 0.05, now = 0.9}, steps = {was = 10, now = 20}}, segs[2].changed)
    -- the tracking row of the resumed run records the values in force
    local rows = dl.track.read(dir .. "/studies.csv")
    assert.truthy(rows[#rows].command:find("--set lr=0.9", 1, true), rows[#rows].command)
    out = H.run(dir, "exp.lua --help")
    assert.truthy(out:find("--override", 1, true), out)
    fs.rm_rf(dir)
  end)
end)
