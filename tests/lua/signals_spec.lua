-- Interrupting a run (issue 19): SIGINT and SIGTERM sent to real training
-- processes (build/dlua running a small experiment) during a step, during an
-- evaluation and during a checkpoint write (DLUA_TEST_PAUSE widens each window;
-- DLUA_TEST_PAUSE_MARK says when the process is inside it). Each time: the exit
-- status (130 / 143), result.json says "interrupted" at the step the run
-- stopped, the ledger's latest checkpoint is that step and verifies, the trace
-- parses as JSON, the tracking row says interrupted, the resume command is
-- printed, and --resume ends bit-identical to an uninterrupted run (the weights
-- and every eval). A second SIGINT stops at once, leaving the last durable
-- checkpoint valid. Also the strict flags (issue 19 item 4).
local dl = require "dlua"
local proc = require "dlua.util.proc"
local core = require "dlua.core"
local H = dofile("tests/lua/helpers.lua")
local json, fs = dl.json, dl.fs

local EXE = H.EXE

local EXPERIMENT = [[
local dl = require "dlua"
local nn, optim, data = dl.nn, dl.optim, dl.data
return dl.experiment{
  name = "signals", description = "a tiny experiment for the signal specs",
  hparams = {lr = 0.1, steps = 40, batch_size = 8},
  build = function(hp)
    local s0, c0 = dl.rng_state()
    dl.seed(5)
    local x = dl.randn(160, 6)
    local y = x:matmul(dl.randn(6, 3)):argmax(2)
    dl.rng_state(s0, c0)
    local ds = data.tensors{image = x, label = y}
    local tr, va = ds:split{120, 40, seed = 0}
    local model = nn.Sequential{nn.Linear(6, 3)}
    return {model = model, loss = nn.CrossEntropy(),
      optimizer = optim.SGD{params = model:parameters(), lr = hp.lr, momentum = 0.9},
      data = tr:shuffle{seed = hp.data_seed}:batch(hp.batch_size), steps = hp.steps, log_every = 5,
      eval = {every = 10, sets = {valid = va}},
      checkpoint = {every = 10, keep_latest = 2, keep_best = 1, metric = "valid/loss", mode = "min"}}
  end}
]]

local dir, script

-- starts the experiment into out (a directory under dir); o.pause / o.mark / o.trace / o.resume / o.track
local function start(out, o)
  o = o or {}
  local args = {EXE, script, "--out", out, "--threads", "1", "--seed", "3"}
  if not o.track then args[#args + 1] = "--no-track" end
  if o.resume then args[#args + 1] = "--resume" end
  if o.trace then args[#args + 1] = "--trace"; args[#args + 1] = o.trace end
  local env = {}
  if o.pause then env.DLUA_TEST_PAUSE = o.pause end
  if o.mark then env.DLUA_TEST_PAUSE_MARK = o.mark end
  local log = dir .. "/" .. out .. ".log"
  os.remove(log)
  return proc.spawn(args, {cwd = dir, stdout = log, stderr = "stdout", env = env}), log
end

local function wait_for(pred, seconds, what)
  local t0 = core.clock()
  while core.clock() - t0 < seconds do
    if pred() then return end
    proc.sleep(0.01)
  end
  assert(pred(), "timed out waiting for " .. what)
end

local function marked(mark, line)
  return function()
    for l in (fs.read(mark) or ""):gmatch("[^\n]+") do if l == line then return true end end
    return false
  end
end

-- the last train step logged in out/metrics.jsonl
local function logged_step(out)
  local s = 0
  for line in (fs.read(dir .. "/" .. out .. "/metrics.jsonl") or ""):gmatch("[^\n]+") do
    local e = json.decode(line)
    if e and e.split == "train" then s = math.max(s, e.step) end
  end
  return s
end

-- what a resumed run must reproduce: every eval, the best step, the final weights
local function outcome(out)
  local d = dir .. "/" .. out
  local r = assert(json.decode(assert(fs.read(d .. "/result.json"))))
  local evals = {}
  for line in assert(fs.read(d .. "/metrics.jsonl")):gmatch("[^\n]+") do
    local e = json.decode(line)
    if e and e.split == "eval" then evals[#evals + 1] = {e.step, e["valid/loss"], e["valid/accuracy"]} end
  end
  local weights = assert(dl.checkpoint.load(d .. "/checkpoints/ckpt-000000040.safetensors"))
  local w = {}
  for k, t in pairs(weights) do if k:match("^model/") or k:match("^optim/") then w[k] = t:totable() end end
  return {status = r.status, steps = r.steps, best_step = r.best.step, evals = evals, weights = w}
end

-- the interrupted run's state on disk: result.json, the ledger's latest checkpoint at that step
local function check_interrupted(out, step)
  local d = dir .. "/" .. out
  local r = assert(json.decode(assert(fs.read(d .. "/result.json"))))
  assert.equal("interrupted", r.status)
  if step then assert.equal(step, r.steps) end
  local led = assert(json.decode(assert(fs.read(d .. "/checkpoints/index.json"))))
  assert.equal(r.steps, led.latest.step)
  for _, c in ipairs(led.checkpoints) do            -- every checkpoint the ledger names verifies
    local t, meta = dl.checkpoint.load(d .. "/checkpoints/" .. c.path)
    assert(t, "checkpoint " .. c.path .. " does not load: " .. tostring(meta))
    assert.equal(tostring(c.step), meta.step)
  end
  return r
end

local base

setup(function()
  dir = H.tmpdir("signals")
  script = dir .. "/exp.lua"
  H.spit(script, EXPERIMENT)
  local p = start("base")
  assert.equal(0, (p:wait(60)))
  base = outcome("base")
  assert.equal("done", base.status)
  assert.equal(4, #base.evals)
end)

teardown(function() fs.rm_rf(dir) end)

describe("an interrupted run", function()
  it("stops after the step it was in at SIGINT, with a checkpoint there, and resumes bit-identically", function()
    local p, log = start("step", {pause = "step=0.03", trace = dir .. "/step.trace.json", track = true})
    wait_for(function() return logged_step("step") >= 15 end, 30, "step 15")
    p:kill("INT")
    assert.same({130}, {p:wait(20)})               -- exited by itself (no signal) with 130
    local r = check_interrupted("step")
    assert.is_true(r.steps >= 15 and r.steps < 40)
    assert.truthy(r.message:find("interrupted by SIGINT at step " .. r.steps, 1, true), r.message)
    local trace = assert(json.decode(assert(fs.read(dir .. "/step.trace.json"))), "the trace does not parse")
    assert.is_true(#trace.traceEvents > 0)
    local text = H.slurp(log)
    -- the command names the dlua that ran (not a bare `dlua`, which is not on PATH before installing)
    assert.truthy(text:find("resume with: " .. EXE .. " " .. script, 1, true), text)
    assert.truthy(text:find("--resume", 1, true), text)
    local rows = dl.track.read(dir .. "/studies.csv")   -- the tracking row (next to the run directory)
    assert.equal(1, #rows)
    assert.equal("interrupted", rows[1].status)
    assert.equal("step", rows[1].dir)
    local q = start("step", {resume = true})
    assert.equal(0, (q:wait(60)))
    assert.same(base, outcome("step"))
  end)

  it("finishes the evaluation it is in at SIGTERM, checkpoints that step and exits 143", function()
    local mark = dir .. "/eval.mark"
    local p = start("eval", {pause = "eval=0.5", mark = mark})
    wait_for(marked(mark, "eval 20"), 30, "the eval at step 20")
    p:kill("TERM")
    assert.same({143}, {p:wait(20)})
    local r = check_interrupted("eval", 20)
    assert.truthy(r.message:find("interrupted by SIGTERM at step 20", 1, true), r.message)
    local led = json.decode(fs.read(dir .. "/eval/checkpoints/index.json"))
    assert.equal(20, led.evals[#led.evals].step)   -- the eval it was in is kept
    local q = start("eval", {resume = true})
    assert.equal(0, (q:wait(60)))
    assert.same(base, outcome("eval"))
  end)

  it("completes the checkpoint write it is in at SIGINT", function()
    local mark = dir .. "/ckpt.mark"
    local p = start("ckpt", {pause = "checkpoint=0.5", mark = mark, trace = dir .. "/ckpt.trace.json"})
    wait_for(marked(mark, "checkpoint 30"), 30, "the checkpoint at step 30")
    p:kill("INT")
    assert.same({130}, {p:wait(20)})
    check_interrupted("ckpt", 30)
    assert(json.decode(assert(fs.read(dir .. "/ckpt.trace.json"))), "the trace does not parse")
    local q = start("ckpt", {resume = true})
    assert.equal(0, (q:wait(60)))
    assert.same(base, outcome("ckpt"))
  end)

  it("stops at once at a second SIGINT, leaving the last durable checkpoint valid", function()
    local mark = dir .. "/twice.mark"
    local p = start("twice", {pause = "checkpoint=2", mark = mark, trace = dir .. "/twice.trace.json"})
    wait_for(marked(mark, "checkpoint 20"), 30, "the checkpoint at step 20")
    p:kill("INT")
    proc.sleep(0.2)
    local t0 = core.clock()
    p:kill("INT")
    assert.same({130, "SIGINT"}, {p:wait(20)})       -- ended by the signal itself
    assert.is_true(core.clock() - t0 < 1.5, "the second SIGINT did not stop the run at once")
    local d = dir .. "/twice/checkpoints"
    local led = assert(json.decode(assert(fs.read(d .. "/index.json"))))
    for _, c in ipairs(led.checkpoints) do
      assert(dl.checkpoint.load(d .. "/" .. c.path), "checkpoint " .. c.path .. " does not load")
    end
    assert(json.decode(assert(fs.read(dir .. "/twice.trace.json"))), "the trace does not parse")
    local q = start("twice", {resume = true})
    assert.equal(0, (q:wait(60)))
    assert.same(base, outcome("twice"))
  end)
end)

describe("strict flags", function()
  local function run(args)
    local out = dir .. "/flags.out"
    local argv = {EXE}
    for _, a in ipairs(args) do argv[#argv + 1] = a end
    local p = proc.spawn(argv, {cwd = dir, stdout = out, stderr = "stdout"})
    local code = p:wait(60)
    local text = H.slurp(out)
    os.remove(out)
    return code, text
  end

  it("never takes the next flag as a flag's value", function()
    local code, text = run({script, "--out", "--no-track"})
    assert.equal(1, code)
    assert.equal("dlua: --out: missing value (the next argument '--no-track' is a flag; write --out=--no-track " ..
      "if it is meant as the value)\n", text)
    code, text = run({script, "--steps", "--quiet"})
    assert.equal(1, code)
    assert.truthy(text:find("--steps: missing value (the next argument '--quiet' is a flag", 1, true), text)
  end)

  it("refuses dlua's flags given to a script that returns no experiment and ignores its arguments", function()
    H.spit(dir .. "/plain.lua", "print('plain')\n")
    local code, text = run({dir .. "/plain.lua", "--out", "x", "--steps=3", "other"})
    assert.equal(1, code)
    assert.equal("plain\n" .. "dlua: " .. dir .. "/plain.lua returned no experiment or study, so --out, --steps do " ..
      "not apply (dlua's flags configure what a script returns; a plain script reads its own arguments from arg)\n",
      text)
    H.spit(dir .. "/reads.lua", "print('reads', #arg, arg[1])\n")   -- reads them: its business (the recipes)
    code, text = run({dir .. "/reads.lua", "--out", "x"})
    assert.equal(0, code)
    assert.equal("reads\t2\t--out\n", text)
    code, text = run({dir .. "/plain.lua", "1", "--fast"})     -- no flag of dlua's
    assert.equal(0, code)
    assert.equal("plain\n", text)
  end)
end)

-- A study interrupted (--jobs 2, and two agents): it exits within a bounded time
-- with 130 / 143, leaves no trial process behind, records the running trials as
-- interrupted; the re-run finishes each trial exactly once with the results of
-- an uninterrupted study (the objective values and the final weights, bit for bit).
describe("an interrupted study", function()
  local STUDY = [[
local dl = require "dlua"
return dl.study{name = "sig", goal = "signals", experiment = "exp.lua",
  nuisance = {lr = dl.search.log_uniform(0.02, 0.3)}, trials = 4, seed = 1,
  objective = {metric = "valid/loss", mode = "min"}}
]]
  local PAUSE = "step=0.04"

  local function study(args, env)
    local argv = {EXE}
    for _, a in ipairs(args) do argv[#argv + 1] = a end
    local log = dir .. "/study-" .. args[#args] .. ".log"
    return proc.spawn(argv, {cwd = dir, stdout = log, stderr = "stdout", env = env}), log
  end

  local function journal(sd)
    local out = {}
    for l in (fs.read(sd .. "/journal.jsonl") or ""):gmatch("[^\n]+") do out[#out + 1] = json.decode(l) end
    return out
  end

  -- per trial: its objective value and final weights, and how often it finished "done"
  local function results(sd)
    local r = {}
    for _, e in ipairs(journal(sd)) do
      if e.event == "finish" and e.status == "done" then
        local w = assert(dl.checkpoint.load(sd .. "/" .. e.trial .. "/checkpoints/ckpt-000000040.safetensors"))
        local weights = {}
        for k, t in pairs(w) do if k:match("^model/") then weights[k] = t:totable() end end
        assert.is_nil(r[e.trial], "trial " .. e.trial .. " finished twice")
        r[e.trial] = {value = e.value, weights = weights}
      end
    end
    return r
  end

  -- trial processes still running (trial.pid of every trial directory)
  local function survivors(sd)
    local alive = {}
    for _, name in ipairs(fs.list(sd)) do
      local pid = tonumber((fs.read(sd .. "/" .. name .. "/trial.pid") or ""):match("%d+"))
      local st = pid and fs.read("/proc/" .. pid .. "/stat")
      if st and st:match("%) (%a)") ~= "Z" then alive[#alive + 1] = name .. " (" .. pid .. ")" end
    end
    return alive
  end

  local function running_trials(sd)
    local n = 0
    for _, name in ipairs(fs.list(sd)) do
      local m = fs.read(sd .. "/" .. name .. "/metrics.jsonl")
      if m and m:find('"step":10', 1, true) then n = n + 1 end
    end
    return n
  end

  local full
  setup(function()
    H.spit(dir .. "/sig.lua", STUDY)
    local p = study({"sig.lua", "--jobs", "2", "--threads", "1", "--no-check", "--out", "full"})
    assert.equal(0, (p:wait(120)))
    full = results(dir .. "/full/sig")
    local n = 0
    for _ in pairs(full) do n = n + 1 end
    assert.equal(4, n)
  end)

  local function check_stopped(p, log, sd, code, t0)
    local got = {p:wait(30)}
    assert(got[1] == code and got[2] == nil, string.format("exit %s %s: %s", tostring(got[1]), tostring(got[2]),
      H.slurp(log)))
    assert.is_true(core.clock() - t0 < 15, "the study took too long to stop")
    assert.same({}, survivors(sd))
    local interrupted = 0
    for _, e in ipairs(journal(sd)) do
      if e.event == "finish" then
        assert.is_true(e.status == "done" or e.status == "interrupted", e.status)
        if e.status == "interrupted" then interrupted = interrupted + 1 end
      end
    end
    assert.is_true(interrupted >= 1, "no trial was recorded as interrupted")
    return interrupted
  end

  it("run as `dlua study FILE`: SIGINT exits 130 without a report of the half study, as `dlua FILE` does", function()
    local sd = dir .. "/viacmd/sig"
    local p, log = study({"study", "sig.lua", "--threads", "1", "--no-check", "--out", "viacmd"},
      {DLUA_TEST_PAUSE = PAUSE})
    wait_for(function() return running_trials(sd) >= 1 end, 60, "a trial past step 10")
    p:kill("INT")
    assert.same({130}, {p:wait(60)})
    local text = H.slurp(log)
    assert.truthy(text:find("SIGINT: no new trials", 1, true), text)
    assert.is_nil(text:find("report: ", 1, true), text)                -- no report of the half study
    assert.is_nil(text:find("diagnosis of", 1, true), text)
  end)

  it("with --jobs 2: SIGINT stops it, the trials checkpoint, the re-run continues them", function()
    local sd = dir .. "/part/sig"
    local p, log = study({"sig.lua", "--jobs", "2", "--threads", "1", "--no-check", "--out", "part"},
      {DLUA_TEST_PAUSE = PAUSE})
    wait_for(function() return running_trials(sd) >= 2 end, 60, "two trials past step 10")
    local t0 = core.clock()
    p:kill("INT")
    check_stopped(p, log, sd, 130, t0)
    local text = H.slurp(log)
    assert.truthy(text:find("SIGINT: no new trials", 1, true), text)
    assert.truthy(text:find("interrupted", 1, true), text)
    local q = study({"sig.lua", "--jobs", "2", "--threads", "1", "--no-check", "--out", "part"})
    assert.equal(0, (q:wait(120)))
    assert.same(full, results(sd))
  end)

  it("with two agents: SIGTERM stops both, the re-run continues the trials", function()
    local sd = dir .. "/agents/sig"
    local c = study({"sig.lua", "--no-check", "--out", "agents", "--create"})
    assert.equal(0, (c:wait(60)))
    local env = {DLUA_TEST_PAUSE = PAUSE}
    local a = study({"agent", sd, "--threads", "1", "--quiet"}, env)
    local b, blog = study({"agent", sd, "--threads", "1", "--jobs", "1"}, env)
    wait_for(function() return running_trials(sd) >= 2 end, 60, "two trials past step 10")
    local t0 = core.clock()
    a:kill("TERM")
    b:kill("TERM")
    assert.same({143}, {a:wait(30)})
    check_stopped(b, blog, sd, 143, t0)
    local q = study({"agent", sd, "--threads", "1", "--jobs", "2"})
    assert.equal(0, (q:wait(120)))
    assert.same(full, results(sd))
  end)
end)
