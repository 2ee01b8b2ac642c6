-- dl.report and `dlua report` take no option they would ignore or misread (the project's
-- "never silent" rule): top, isolate, pareto, interval, timeout and quiet are checked for
-- type, range and meaning against the study, and the errors name the option and the valid
-- values. On a synthetic study (tests/lua/report_fixtures.lua): lr and width searched, the
-- optimizer scientific, momentum fixed.
local dl = require "dlua"
local F = dofile("tests/lua/report_fixtures.lua")
local S, fs = dl.search, dl.fs

local EXE = os.getenv("DLUA_EXE") or "build/dlua"

describe("dl.report's options", function()
  local root, dir, run
  setup(function()
    root = F.tmpdir("silent")
    dir = F.study(root, {scientific = {optimizer = {"sgd", "adam"}}, trials = 3, fixed = {momentum = 0.9},
      nuisance = {lr = S.log_uniform(1e-4, 1e-1), width = S.int(8, 64)},
      value = function(hp) return 0.5 + hp.lr end})
    run = F.run(root .. "/one-run", {steps = 20, eval = function(s) return {["valid/accuracy"] = s / 100} end})
  end)
  teardown(function() fs.rm_rf(root) end)

  local function report(opts)
    opts.out = opts.out or (root .. "/r.html")
    return dl.report(dir, opts)
  end

  it("takes top as a positive integer only", function()
    for _, v in ipairs({-3, 0}) do
      assert.error_matches(function() report({top = v}) end, "dl.report: option 'top' must be a positive integer, got " .. tostring(v):gsub("%-", "%%-"))
    end
    assert.truthy(fs.exists(report({top = 1})))
  end)

  it("takes isolate as a list of the study's varied hyperparameters, with the nearest name", function()
    assert.error_matches(function() report({isolate = {"widthh"}}) end,
      "dl.report: option 'isolate': 'widthh' is not a hyperparameter of .* %(varied: lr, width, optimizer%); " ..
      "did you mean 'width'%?")
    assert.error_matches(function() report({isolate = {"momentum"}}) end,
      "dl.report: option 'isolate': 'momentum' does not vary in .* %(varied: lr, width, optimizer%)")
    assert.error_matches(function() report({isolate = {1}}) end,
      "dl.report: option 'isolate' must be a list of hyperparameter names %(strings%), got integer at 1")
    assert.error_matches(function() report({isolate = {a = 1}}) end,
      "dl.report: option 'isolate' must be a list of hyperparameter names, got the key a")
    assert.error_matches(function() dl.report(run, {isolate = {"lr"}, out = root .. "/r.html"}) end,
      "dl.report: option 'isolate': 'lr' is not a hyperparameter of .*one%-run %(varied: none%)")
    local page = fs.read(report({isolate = {"width", "optimizer"}, static = true}))
    assert.truthy(page:find('id="isolation-width"', 1, true))
    local _, n = page:gsub('<figure class="figure" id="isolation%-optimizer">', "")
    assert.are.equal(1, n, "a scientific name given again is drawn once")
  end)

  it("takes pareto as exactly two distinct metrics the study recorded, each a name or {metric =, mode =}", function()
    local two = "exactly two metrics"
    assert.error_matches(function() report({pareto = {"valid/accuracy"}}) end,
      "dl.report: option 'pareto' must be a list of " .. two .. ".*, got 1")
    assert.error_matches(function() report({pareto = {"a", "b", "c"}}) end,
      "dl.report: option 'pareto' must be a list of " .. two .. ".*, got 3")
    assert.error_matches(function() report({pareto = {"valid/accuracy", "valid/accuracy"}}) end,
      "dl.report: option 'pareto' names valid/accuracy twice")
    assert.error_matches(function() report({pareto = {"valid/accuracy", "valid/nope"}}) end,
      "dl.report: option 'pareto': no trial of .* recorded 'valid/nope' %(metrics: .*valid/loss.*%)")
    assert.error_matches(function() report({pareto = {"valid/accuracy", "valid/los"}}) end,
      "did you mean 'valid/loss'%?")
    assert.error_matches(function() report({pareto = {{metric = "valid/accuracy", mode = "up"}, "valid/loss"}}) end,
      "dl.report: option 'pareto%[1%]%.mode' must be \"min\" or \"max\", got \"up\"")
    assert.error_matches(function() report({pareto = {{metric = "valid/accuracy", mdoe = "max"}, "valid/loss"}}) end,
      "dl.report: unknown option 'mdoe' in pareto%[1%] %(valid: metric, mode%); did you mean 'mode'%?")
    assert.error_matches(function() report({pareto = {{mode = "max"}, "valid/loss"}}) end,
      "dl.report: option 'pareto%[1%]%.metric' must be a metric name %(a string%), got nil")
    assert.error_matches(function() report({pareto = {"valid/accuracy", 7}}) end,
      "dl.report: option 'pareto%[2%]' must be a metric name or {metric =, mode =}, got integer")
    assert.error_matches(function() dl.report(run, {pareto = {"valid/accuracy", "train/loss"}, out = root .. "/r.html"}) end,
      "dl.report: option 'pareto' needs a study or a directory of runs")
    local page = fs.read(report({pareto = {{metric = "valid/accuracy", mode = "max"}, "valid/loss"}}))
    assert.truthy(page:find("Pareto front: valid/loss (min) vs valid/accuracy (max)", 1, true))
  end)

  it("takes interval, timeout and quiet with watch only, and positive seconds", function()
    for _, k in ipairs({"interval", "timeout"}) do
      assert.error_matches(function() report({[k] = 1}) end,
        "dl.report: option '" .. k .. "' goes with watch = true")
      assert.error_matches(function() report({watch = true, [k] = -1}) end,
        "dl.report: option '" .. k .. "' must be > 0 seconds, got %-1")
    end
    assert.error_matches(function() report({quiet = true}) end, "dl.report: option 'quiet' goes with watch = true")
  end)

  it("checks the names against the study in watch mode too", function()
    F.write(dir .. "/results.json", "{}\n")                  -- finished: the check is final
    assert.error_matches(function() report({watch = true, quiet = true, isolate = {"widthh"}}) end,
      "dl.report: option 'isolate': 'widthh' is not a hyperparameter")
    os.remove(dir .. "/results.json")
  end)

  it("makes `dlua report` fail on them", function()
    local function cli(flags)
      local p = io.popen(string.format("%s recipes/report.lua %s %s --out %s/c.html 2>&1; echo rc=$?", EXE, dir, flags, root))
      local out = p:read("a")
      p:close()
      return out
    end
    local o1 = cli("--pareto valid/accuracy")
    assert.truthy(o1:find("option 'pareto' must be a list of exactly two metrics", 1, true) and o1:find("rc=1", 1, true), o1)
    local o2 = cli("--isolate widthh")
    assert.truthy(o2:find("did you mean 'width'?", 1, true) and o2:find("rc=1", 1, true), o2)
    local o3 = cli("--top 0")
    assert.truthy(o3:find("--top: expected a positive integer, got '0'", 1, true) and o3:find("rc=1", 1, true), o3)
    -- the shared parser's experiment flags, which the report does not read
    local o4 = cli("--seed 3")
    assert.truthy(o4:find("unknown flag '--seed' for dlua report (valid: --aggregate, ", 1, true) and
      o4:find("rc=1", 1, true), o4)
  end)
end)
