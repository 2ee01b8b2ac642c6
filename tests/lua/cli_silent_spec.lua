-- The command line is never silent (the project rule): a command refuses every flag it
-- does not apply, naming itself and its valid flags, even one of the flags experiments
-- share (dlua.train.flags.FLAGS); a flag given twice is an error naming both values
-- (--set and the study's role flags: the same key twice); `dlua study` keeps a
-- condition's boolean value and names --nuisance in a bad integer range; a recipe's
-- numeric flag out of range is an error. Each runs the dlua under test (DLUA_EXE) in a
-- scratch directory holding the toy experiment (tests/fixtures/toy_experiment.lua).
local H = dofile("tests/lua/helpers.lua")

local function has(s, sub) return s:find(sub, 1, true) ~= nil end

-- runs `dlua args` in dir and expects it to stop with exit status 1 and the message msg
local function refused(dir, args, msg)
  local out, rc = H.run(dir, args)
  assert.are.equal(1, rc, out)
  assert.truthy(has(out, msg), out)
end

describe("dlua's flags are never silently ignored", function()
  local dir
  setup(function()
    dir = H.tmpdir("cli-silent")
    H.spit(dir .. "/exp.lua", H.fixture("toy_experiment.lua"))
    -- the toy experiment with a boolean hyperparameter, for a condition on a boolean
    H.spit(dir .. "/bexp.lua", (H.fixture("toy_experiment.lua"):gsub("hparams = {lr = 0.05,",
      "hparams = {flag = true, lr = 0.05,")))
  end)
  teardown(function() require("dlua.util.fs").rm_rf(dir) end)

  it("dlua report and dlua evaluate refuse the run flags they do not apply, naming the valid ones", function()
    refused(dir, "report . --steps 5",
      "dlua: unknown flag '--steps' for dlua report (valid: --aggregate, --help, --interval, " ..
      "--isolate, --metric, --mode, --out, --pareto, --screenshot, --static, --timeout, --top, --watch)")
    for _, a in ipairs({"--set lr=1", "--trace t.json", "--prune x", "--seed 3", "--quiet"}) do
      refused(dir, "report . " .. a, "dlua: unknown flag '" .. a:match("^%S+") .. "' for dlua report (valid: ")
    end
    refused(dir, "evaluate exp.lua --checkpoint x.safetensors --steps 5",
      "dlua: unknown flag '--steps' for dlua evaluate (valid: --checkpoint, --help, --threads)")
    refused(dir, "pack exp.lua out --seed 3",
      "dlua: unknown flag '--seed' for dlua pack (valid: --help, --per-shard, --prefix, --quiet)")
  end)

  it("a recipe refuses the run flags it does not apply (clipping: --check-determinism, --trace, --prune)", function()
    for _, a in ipairs({"--check-determinism 3", "--trace tc.json", "--prune /nonexistent.json", "--resume",
                        "--objective valid/loss", "--no-track", "--quiet"}) do
      refused(dir, "clipping exp.lua --steps 4 --eval-examples 10 --out rc " .. a,
        "dlua: unknown flag '" .. a:match("^%S+") .. "' for dlua clipping (valid: --eval-examples, " ..
        "--help, --out, --percentile, --seed, --set, --steps, --threads)")
    end
    assert.is_false(require("dlua.util.fs").exists(dir .. "/rc"))
    -- warmup has --probe-steps and --max-steps
    refused(dir, "warmup exp.lua --steps 4", "dlua: unknown flag '--steps' for dlua warmup (valid: ")
    -- step 1's flags, with step 1 skipped
    refused(dir, "warmup exp.lua --unstable-lr 1 --tries 2",
      "dlua: --tries applies to step 1, which --unstable-lr skips")
  end)

  it("dlua batch-size applies --quiet and refuses a negative --skip", function()
    refused(dir, "batch-size exp.lua --skip -4", "dlua: --skip: expected a non-negative integer, got '-4'")
    local out, rc = H.run(dir, "batch-size exp.lua --start 8 --max 16 --steps 3 --skip 1 --min-gain 0 --rounds 1 --quiet")
    assert.are.equal(0, rc, out)
    assert.falsy(has(out, "batch 8: "), out)                -- the progress lines on the standard error
    assert.truthy(has(out, "batch size sweep of "), out)
  end)

  it("a flag given twice is an error naming both values, --set for the same key too", function()
    refused(dir, "exp.lua --steps 3 --steps 5", "dlua: --steps given twice (3 and 5)")
    refused(dir, "exp.lua --set lr=0.1 --set lr=0.2", "dlua: --set lr given twice (0.1 and 0.2)")
    refused(dir, "exp.lua --quiet --quiet", "dlua: --quiet given twice")
    refused(dir, "report . --metric valid/loss --metric=train/loss",
      "dlua: --metric given twice (valid/loss and train/loss)")
    refused(dir, "exp.lua --seed 3 --set seed=4", "dlua: --seed 3 and --set seed=4 both give the seed")
  end)

  it("dlua study refuses the same key in two --scientific or two --fixed flags", function()
    refused(dir, "study exp.lua --name s --scientific width=8,16 --scientific width=32 --help",
      "dlua: --scientific width given twice (8,16 and 32)")
    refused(dir, "study exp.lua --name s --fixed width=8 --fixed width=32 --help",
      "dlua: --fixed width given twice (8 and 32)")
    refused(dir, "study exp.lua --name s --scientific width=8,16 --nuisance lr=log:0.01:0.1@width=8 " ..
      "--nuisance lr=log:0.001:0.01@width=8 --help",
      "dlua: --nuisance lr given twice for @width=8")
    refused(dir, "study exp.lua --name s --steps 3 --steps 4 --help", "dlua: --steps given twice (3 and 4)")
    -- different keys in repeated flags are fine
    local out, rc = H.run(dir, "study exp.lua --name s --scientific width=8,16 --scientific batch_size=8,16 " ..
      "--fixed lr=0.1 --fixed momentum=0.5 --help")
    assert.are.equal(0, rc, out)
    assert.truthy(has(out, "fixed momentum = 0.5"), out)
  end)

  it("dlua study keeps a condition on a boolean false and names --nuisance in a bad int range", function()
    local out, rc = H.run(dir, "study bexp.lua --name s --scientific flag=true,false " ..
      "--nuisance momentum=uniform:0.5:0.9@flag=false --help")
    assert.are.equal(0, rc, out)
    assert.truthy(has(out, "momentum"), out)
    refused(dir, "study exp.lua --name s --nuisance width=int:1.5:4 --help",
      "dlua: --nuisance width: expected int:A:B with integers A and B, got 'int:1.5:4'")
  end)
end)
