-- The shipped playbook recipes at a smoke budget on Fashion-MNIST (a few steps, a
-- narrow model, small eval subsets): each runs to the end and prints its table or
-- verdict; batch_size.lua stops at the memory limit with a clean message.
local dl = require "dlua"
local fs = dl.fs

local EXE = os.getenv("DLUA_EXE") or "build/dlua"
local SRC = require("lfs").currentdir()
local H = dofile("tests/lua/helpers.lua")
local tmpdir = H.tmpdir
local FM = os.getenv("DLUA_FASHION_MNIST") or "/usr/share/datasets/fashion-mnist"
local EXP = SRC .. "/examples/fashion_mnist.lua"
local SMALL = "--set width=16 --set batch_size=32 --set workers=1 --threads 1"

local function run(dir, recipe, args)
  local p = io.popen(string.format("cd %s && %s %s/recipes/%s %s 2>&1; echo \"rc=$?\"", dir, EXE, SRC, recipe, args))
  local out = p:read("a")
  p:close()
  return out, tonumber(out:match("rc=(%d+)%s*$"))
end

local function have_data()
  return fs.exists(FM .. "/train-images-idx3-ubyte.gz") or fs.exists(FM .. "/train-images-idx3-ubyte")
end

describe("recipes", function()
  it("print their usage with --help", function()
    for _, r in ipairs({"batch_size.lua", "max_steps.lua", "warmup.lua", "clipping.lua", "adam.lua",
                        "early_instability.lua", "report.lua", "study.lua"}) do
      local out, rc = run(SRC, r, "--help")
      assert.are.equal(0, rc, r .. ": " .. out)
      -- the usage names the command (`dlua batch-size`), the way dlua runs a recipe
      local command = r:gsub("%.lua$", ""):gsub("_", "-")
      assert.truthy(out:find("usage: dlua " .. command, 1, true), r .. ": " .. out)
    end
  end)

  it("name a bad flag value in one line", function()
    local out, rc = run(SRC, "batch_size.lua", EXP .. " --memory lots")
    assert.are.equal(1, rc)
    assert.truthy(out:find("dlua: --memory: expected a size such as 512M or 2G, got 'lots'", 1, true), out)
    out, rc = run(SRC, "study.lua", EXP .. " --name x --nuisance lr=gauss:1:2")
    assert.are.equal(1, rc)
    assert.truthy(out:find("unknown kind 'gauss'", 1, true), out)
  end)
end)

describe("recipes on Fashion-MNIST at a smoke budget", function()
  local dir
  before_each(function()
    if not have_data() then pending("Fashion-MNIST is missing (apt-get install dataset-fashion-mnist)") end
    dir = tmpdir("smoke")
  end)
  after_each(function() if dir then fs.rm_rf(dir) end end)

  it("batch_size.lua doubles the batch size until the memory limit and stops with a clean message", function()
    if not have_data() then return end
    local out, rc = run(dir, "batch_size.lua", EXP .. " --start 16 --steps 5 --skip 2 --memory 100M --min-gain 0 " .. SMALL)
    assert.are.equal(0, rc, out)
    local b = tonumber(out:match("stopped: out of memory at batch size (%d+) %(the memory limit stands for accelerator memory%)"))
    assert.truthy(b, out)
    assert.truthy(out:find(string.format("\n%s%d  out of memory: requested %%d+ bytes", string.rep(" ", 8 - #tostring(b)), b)), out)
    if b > 16 then
      assert.truthy(out:find(string.format("largest batch size that fit: %d ", b // 2), 1, true), out)
      assert.truthy(out:find("%d+%.%d ms +%d+ +%d+%.%d MiB"), out)
    end
    assert.is_nil(out:find("traceback", 1, true))
  end)

  it("study.lua runs a study given on the command line and ends with the report and the diagnosis", function()
    if not have_data() then return end
    local out, rc = run(dir, "study.lua", EXP .. " --name smoke --goal 'smoke' --scientific optimizer=nesterov,adam " ..
      "--nuisance lr=log:1e-3:0.3@optimizer=nesterov --nuisance lr=log:1e-4:1e-2@optimizer=adam --fixed width=16 " ..
      "--fixed batch_size=32 --fixed workers=1 --fixed test_eval=false --fixed eval_every=3 --trials 2 --steps 6 " ..
      "--out runs --parallel 2 --threads 1 --quiet")
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("best trial per scientific value by valid/accuracy", 1, true), out)
    assert.truthy(out:find("report: runs/smoke/report.html", 1, true), out)
    assert.truthy(out:find("diagnosis of study smoke by valid/accuracy", 1, true), out)
    assert.truthy(fs.exists(dir .. "/runs/smoke/report.html"))
  end)

  it("max_steps.lua sweeps a constant lr and reports the steps to the target", function()
    if not have_data() then return end
    local out, rc = run(dir, "max_steps.lua", EXP .. " --lrs 0.03,0.3 --steps 6 --target 2.25 --out runs --parallel 2 --quiet " .. SMALL)
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("lr sweep for max_train_steps: constant lr, no regularisation, 6 steps per trial", 1, true), out)
    assert.truthy(out:find("initial max_train_steps: %d+") or out:find("no learning rate reached", 1, true), out)
    -- the trials really ran at a constant lr without weight decay
    local hp = dl.json.decode(fs.read(dir .. "/runs/max-steps/trial_t001/hparams.json"))
    assert.are.equal(0, hp.weight_decay)
    for l in fs.read(dir .. "/runs/max-steps/trial_t001/metrics.jsonl"):gmatch("[^\n]+") do
      local e = dl.json.decode(l)
      if e.split == "train" then assert.are.equal(0.03, e.lr) end
    end
  end)

  it("warmup.lua finds the unstable lr and sweeps warmup at 10 x it", function()
    if not have_data() then return end
    local out, rc = run(dir, "warmup.lua", EXP .. " --lr 3 --factor 10 --tries 1 --probe-steps 4 --warmups 2 " ..
      "--eval-examples 64 --out wu " .. SMALL)
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("lr 3 +UNSTABLE"), out)
    assert.truthy(out:find("base_learning_rate 10 x 3 = 30", 1, true), out)
    assert.truthy(out:find("\n +2 +6 +%u+"), out)
    assert.truthy(out:find("report: wu/warmup/report.html", 1, true), out)
  end)

  it("clipping.lua recommends the 90th percentile of the unclipped norms and reports the clipped fraction", function()
    if not have_data() then return end
    local out, rc = run(dir, "clipping.lua", EXP .. " --steps 10 --eval-examples 64 --out clip " .. SMALL)
    assert.are.equal(0, rc, out)
    local p90 = tonumber(out:match("p90 ([%d%.e%-]+)"))
    assert.truthy(out:find(string.format("recommended clipping threshold: %.4g", p90), 1, true), out)
    assert.truthy(out:find("it would clip 1 of 10 steps of the reference run (10.0%)", 1, true), out)
    assert.truthy(out:find("updates clipped", 1, true), out)
    -- the recommendation is the 90th percentile of the norms the reference run recorded
    local ck = dl.json.decode(fs.read(dir .. "/clip/reference/checkpoints/index.json"))
    local t = dl.checkpoint.load(dir .. "/clip/reference/checkpoints/" .. ck.latest.path)
    local v = t["train/grad_norm"]:totable()
    table.sort(v)
    local h = (#v - 1) * 0.9 + 1
    local q = v[math.floor(h)] + (h - math.floor(h)) * (v[math.min(#v, math.floor(h) + 1)] - v[math.floor(h)])
    assert.is_true(math.abs(q - p90) <= 1e-3 * q, q .. " vs " .. p90)
  end)

  it("adam.lua tunes what the trial budget allows", function()
    if not have_data() then return end
    local out, rc = run(dir, "adam.lua", EXP .. " --trials 2 --steps 4 --out runs --parallel 2 --quiet --set eval_every=2 " ..
      "--set test_eval=false " .. SMALL)
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("2 trials: tuning lr ", 1, true), out)
    assert.truthy(out:find("best Adam hyperparameters: lr ", 1, true), out)
    assert.truthy(fs.exists(dir .. "/runs/adam-2/report.html"))
  end)

  it("early_instability.lua trains at 2 x the lr, evaluating every step, and gives a verdict", function()
    if not have_data() then return end
    local out, rc = run(dir, "early_instability.lua", EXP .. " --lr 0.05 --steps 5 --eval-examples 64 --out ei " .. SMALL)
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("5 steps at 2 x the best lr 0.05 (--lr) = 0.1, evaluating every step", 1, true), out)
    assert.truthy(out:find("verdict: ", 1, true), out)
    local evals = 0
    for l in fs.read(dir .. "/ei/lr-0.1/metrics.jsonl"):gmatch("[^\n]+") do
      if l:find('"split":"eval"', 1, true) then evals = evals + 1 end
    end
    assert.are.equal(5, evals)
  end)
end)
