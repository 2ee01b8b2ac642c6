-- Disk full loses nothing that was promised: a small experiment run by the CLI
-- (build/dlua) in subprocesses, with the file I/O module's write-failure hook
-- (DLUA_FILEIO_FAIL=N: the N-th data write and every later one fail with
-- ENOSPC, as on a disk that fills up) at every write of the run. Each time:
-- the error shown is the failing write's and names its file, every checkpoint
-- the ledger names verifies, and --resume without the hook ends exactly where
-- an uninterrupted run does (best step and metrics, every eval, the weights).
-- When this runs as root and tmpfs can be mounted, a real small tmpfs at
-- several sizes is tested the same way.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local json, fs = dl.json, dl.fs
local shq = H.shquote

local EXE = H.EXE

-- SGD at lr 0.5 makes the validation loss dip at step 4 and rise after, so the
-- best checkpoint is not the last one: losing its ledger entry would show
local EXPERIMENT = [[
local dl = require "dlua"
local nn, optim, data = dl.nn, dl.optim, dl.data
return dl.experiment{
  name = "diskfull", description = "a tiny experiment for the disk-full specs",
  hparams = {lr = 0.5, steps = 10, batch_size = 8},
  build = function(hp)
    local s0, c0 = dl.rng_state()
    dl.seed(5)
    local x = dl.randn(120, 6)
    local y = x:matmul(dl.randn(6, 3)):argmax(2)
    dl.rng_state(s0, c0)
    local ds = data.tensors{image = x, label = y}
    local tr, va = ds:split{80, 40, seed = 0}
    local model = nn.Sequential{nn.Linear(6, 3)}
    return {model = model, loss = nn.CrossEntropy(),
      optimizer = optim.SGD{params = model:parameters(), lr = hp.lr, momentum = 0.9},
      data = tr:shuffle{seed = hp.data_seed}:batch(hp.batch_size), steps = hp.steps,
      eval = {every = 2, sets = {valid = va}},
      checkpoint = {every = 2, keep_best = 1, metric = "valid/loss", mode = "min"}}
  end}
]]

local dir, script

-- runs the experiment into out; returns the exit code and the last line on stderr
local function run(out, opts)
  opts = opts or {}
  local env = ""
  if opts.fail then env = env .. "DLUA_FILEIO_FAIL=" .. opts.fail .. " " end
  if opts.trace then env = env .. "DLUA_FILEIO_TRACE=" .. shq(opts.trace) .. " " end
  local err = dir .. "/stderr"
  local p = io.popen(string.format("%s%s %s --out %s --quiet --threads 1 --no-track%s 2>%s; echo $?", env, shq(EXE),
    shq(script), shq(out), opts.resume and " --resume" or "", shq(err)))
  local code = tonumber(p:read("a"))
  p:close()
  local last
  for l in (fs.read(err) or ""):gmatch("[^\n]+") do last = l end
  return code, last or ""
end

-- what a resumed run must reproduce: status, best step and metrics, every eval, the last weights
local function outcome(out)
  local r = assert(json.decode(assert(fs.read(out .. "/result.json"))))
  local evals = {}
  for line in assert(fs.read(out .. "/metrics.jsonl")):gmatch("[^\n]+") do
    local e = json.decode(line)
    if e and e.split == "eval" then evals[#evals + 1] = {e.step, e["valid/loss"], e["valid/accuracy"]} end
  end
  local weights = assert(dl.checkpoint.load(out .. "/checkpoints/ckpt-000000010.safetensors"))
  local w = {}
  for k, t in pairs(weights) do if k:match("^model/") then w[k] = t:totable() end end
  return {status = r.status, steps = r.steps, best_step = r.best.step, best_metrics = r.best.metrics,
          evals = evals, weights = w}
end

-- every checkpoint the ledger names verifies (the ledger itself must parse)
local function ledger_checkpoints_verify(out)
  local text = fs.read(out .. "/checkpoints/index.json")
  if not text then return 0 end
  local led = assert(json.decode(text), "the ledger does not parse")
  for _, c in ipairs(led.checkpoints) do
    local ok, why = dl.checkpoint.verify(out .. "/checkpoints/" .. c.path)
    assert(ok, string.format("checkpoint %s named by the ledger does not verify: %s", c.path, tostring(why)))
  end
  return #led.checkpoints
end

describe("disk full (the write-failure hook)", function()
  local reference, trace
  setup(function()
    dir = H.tmpdir("diskfull")
    script = dir .. "/exp.lua"
    H.spit(script, EXPERIMENT)
    local code, last = run(dir .. "/whole", {trace = dir .. "/trace"})
    assert(code == 0, last)
    reference = outcome(dir .. "/whole")
    trace = {}
    for n, path in (fs.read(dir .. "/trace")):gmatch("(%d+)\t([^\n]+)") do
      trace[tonumber(n)] = path:gsub("^" .. (dir .. "/whole/"):gsub("%p", "%%%0"), "")
    end
  end)
  teardown(function() fs.rm_rf(dir) end)

  it("has a reference run whose best checkpoint is not its last", function()
    assert.are.equal(4, reference.best_step)
    assert.are.equal(5, #reference.evals)
    assert.are.equal("hparams.json", trace[1])
    assert.are.equal("result.json", trace[#trace])
    assert(#trace >= 40, "too few writes to test anything: " .. #trace)
  end)

  it("at every write: names the failing file, keeps every ledger checkpoint valid, resumes to the same result", function()
    local kept_any = false
    for n = 1, #trace do
      local out = string.format("%s/fail-%02d", dir, n)
      local code, last = run(out, {fail = n})
      local ctx = string.format("failing write %d (%s): ", n, trace[n])
      assert(code == 1, ctx .. "exit code " .. tostring(code) .. ": " .. last)
      -- the first failing write is the error shown, and it names the file
      local named = last:find("'" .. out .. "/" .. trace[n] .. "'", 1, true)
      assert(named and last:find("No space left on device", 1, true), ctx .. "the error shown is: " .. last)
      if ledger_checkpoints_verify(out) > 0 then kept_any = true end
      for _, f in ipairs(fs.list(out .. "/checkpoints")) do
        assert(not f:match("%.tmp"), ctx .. "temporary file left: " .. f)
      end
      code, last = run(out, {resume = true})
      assert(code == 0, ctx .. "the resume failed: " .. last)
      assert.are.same(reference, outcome(out), ctx .. "the resumed run differs")
      fs.rm_rf(out)
    end
    assert(kept_any, "no failure came after a kept checkpoint")
  end)

  it("does not resume from a checkpoint the ledger never named (ckpt written, ledger not)", function()
    -- the ledger write right after the best checkpoint (step 4) fails
    local n, seen = nil, 0
    for i, p in ipairs(trace) do
      if p == "checkpoints/index.json" then
        seen = seen + 1
        if seen == 2 then n = i; break end
      end
    end
    assert(n and trace[n - 1] == "checkpoints/ckpt-000000004.safetensors")
    local out = dir .. "/ledger"
    local code, last = run(out, {fail = n})
    assert.are.equal(1, code)
    assert.truthy(last:find("cannot write '" .. out .. "/checkpoints/index.json': No space left on device", 1, true), last)
    assert.truthy(fs.exists(out .. "/checkpoints/ckpt-000000004.safetensors"))   -- written, never kept
    local led = json.decode(fs.read(out .. "/checkpoints/index.json"))
    assert.are.equal(1, #led.checkpoints)
    assert.are.equal(2, led.checkpoints[1].step)
    code, last = run(out, {resume = true})
    assert.are.equal(0, code, last)
    local got = outcome(out)
    assert.are.equal(4, got.best_step)
    assert.are.same(reference, got)
  end)
end)

-- a real small tmpfs: needs root and mount -t tmpfs
local function can_mount(mnt)
  if not fs.is_dir(mnt) then fs.mkdir_p(mnt) end
  local p = io.popen("id -u 2>/dev/null")
  local uid = p:read("a"):match("%d+")
  p:close()
  if uid ~= "0" then return false, "not root" end
  local ok = os.execute(string.format("mount -t tmpfs -o size=64k tmpfs %s 2>/dev/null", shq(mnt)))
  if not ok then return false, "mount -t tmpfs failed (no CAP_SYS_ADMIN?)" end
  os.execute("umount " .. shq(mnt))
  return true
end

describe("disk full (a real small tmpfs)", function()
  it("at several sizes: names the failing file, keeps the ledger's checkpoints valid, resumes to the same result", function()
    dir = H.tmpdir("tmpfs")
    script = dir .. "/exp.lua"
    H.spit(script, EXPERIMENT)
    local mnt = dir .. "/mnt"
    local ok, why = can_mount(mnt)
    if not ok then
      fs.rm_rf(dir)
      pending("skipped: " .. why)
      return
    end
    local code, last = run(dir .. "/whole")
    assert(code == 0, last)
    local reference = outcome(dir .. "/whole")
    local failed = 0
    local res = {pcall(function()
      for _, kb in ipairs({8, 12, 16, 20, 24, 28, 32}) do
        assert(os.execute(string.format("mount -t tmpfs -o size=%dk tmpfs %s", kb, shq(mnt))))
        local out = mnt .. "/run"
        code, last = run(out)
        if code ~= 0 then
          failed = failed + 1
          assert.are.equal(1, code, last)
          assert(last:find("No space left on device", 1, true) and last:find("'" .. out .. "/", 1, true),
            kb .. "k: the error shown is: " .. last)
          ledger_checkpoints_verify(out)
        end
        assert(os.execute(string.format("mount -o remount,size=4m %s", shq(mnt))))
        code, last = run(out, {resume = true})
        assert(code == 0, kb .. "k: the resume failed: " .. last)
        assert.are.same(reference, outcome(out), kb .. "k: the resumed run differs")
        assert(os.execute("umount " .. shq(mnt)))
      end
    end)}
    os.execute("umount " .. shq(mnt) .. " 2>/dev/null")
    fs.rm_rf(dir)
    assert(res[1], tostring(res[2]))
    assert(failed >= 3, "only " .. failed .. " tmpfs sizes ran out of space")
  end)
end)
