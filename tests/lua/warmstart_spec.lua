-- dl.study's warm starts: enqueued trials run first under any algorithm (checked
-- against the nuisance space), warm_start feeds an earlier study's compatible
-- trials to the bayes surrogate (changing its first suggestion, deterministically),
-- the GP's hyperparameters are kept in the study directory, and importance.
local dl = require "dlua"
local S, json, fs = dl.search, dl.json, dl.fs

local EXE = os.getenv("DLUA_EXE") or "build/dlua"
local H = dofile("tests/lua/helpers.lua")
local write = H.spit

-- the toy experiment (tests/fixtures/toy_experiment.lua, ~0.1 s per trial) at its defaults; its
-- momentum is searched here
local EXPERIMENT = H.fixture("toy_experiment.lua")

local study_file = H.study_file

local run = H.run

local events = H.journal_events

local function first(sd, kind, trial)
  for _, e in ipairs(events(sd)) do
    if e.event == kind and (trial == nil or e.trial == trial) then return e end
  end
end

local NUISANCE = "nuisance = {lr = S.log_uniform(1e-3, 0.5), momentum = S.uniform(0.5, 0.95)},"
local SPACE = S.space{lr = S.log_uniform(1e-3, 0.5), momentum = S.uniform(0.5, 0.95)}

describe("dl.study enqueue", function()
  local dir
  setup(function() dir = H.tmpdir("enqueue"); write(dir .. "/exp.lua", EXPERIMENT) end)
  teardown(function() fs.rm_rf(dir) end)

  for _, alg in ipairs({"quasirandom", "bayes"}) do
    it("runs the enqueued trials first, then the algorithm's points from its first (" .. alg .. ")", function()
      study_file(dir, alg .. ".lua", NUISANCE .. [[
  name = "enq-]] .. alg .. [[", algorithm = "]] .. alg .. [[", trials = 3, parallel = 1,
  enqueue = {{lr = 0.1, momentum = 0.9}, {lr = 0.002, momentum = 0.5}},]])
      local out, rc = run(dir, alg .. ".lua --out runs --quiet --no-check --threads 1")
      assert.are.equal(0, rc, out)
      local sd = dir .. "/runs/enq-" .. alg
      local claims = {}
      for _, e in ipairs(events(sd)) do if e.event == "claim" then claims[#claims + 1] = e.trial end end
      assert.are.same({"trial_t001", "trial_t002", "trial_t003"}, claims)
      local rows = {}
      for _, r in ipairs(dl.track.read(sd .. "/trials.csv")) do rows[r.id] = r end
      assert.are.equal(0.1, tonumber(rows.trial_t001["hp.lr"]))
      assert.are.equal(0.9, tonumber(rows.trial_t001["hp.momentum"]))
      assert.are.equal(0.002, tonumber(rows.trial_t002["hp.lr"]))
      assert.are.equal(0.5, tonumber(rows.trial_t002["hp.momentum"]))
      -- trial 3 is the algorithm's first point (bayes: the centre of the space, its first initial point)
      local want = SPACE:point(S.algorithm(alg).point(SPACE, 1, {seed = 3}))
      assert.are.equal(want.lr, tonumber(rows.trial_t003["hp.lr"]))
      assert.are.equal(want.momentum, tonumber(rows.trial_t003["hp.momentum"]))
    end)
  end

  it("checks the enqueued points against the nuisance space", function()
    local cases = {
      {"{{lr = 0.1, momentun = 0.9}}", "enqueue[1]: 'momentun' is not a nuisance hyperparameter of the study " ..
        "(nuisance: lr, momentum); did you mean 'momentum'?"},
      {"{{lr = 0.1, momentum = 0.99}}", "enqueue[1]: momentum = 0.99 is outside [0.5, 0.95]"},
      {"{{lr = 0.1, momentum = 0.9}, {lr = 2, momentum = 0.9}}", "enqueue[2]: lr = 2 is outside [0.001, 0.5]"},
      {"{{lr = 0.1}}", "enqueue[1]: momentum is not set (every unconditional nuisance hyperparameter is)"},
      {"{{lr = 0.1, momentum = 0.9}, {lr = 0.1, momentum = 0.9}, {lr = 0.1, momentum = 0.9}}",
       "enqueue lists 3 trials, more than trials = 2"},
    }
    for i, c in ipairs(cases) do
      study_file(dir, "bad" .. i .. ".lua", NUISANCE .. "name = \"bad\", trials = 2,\n  enqueue = " .. c[1] .. ",")
      local err, rc = run(dir, "bad" .. i .. ".lua --out runs --no-check")
      assert.are.equal(1, rc, err)
      assert.truthy(err:find("bad" .. i .. ".lua:6: dl.study: ", 1, true), err)
      assert.truthy(err:find(c[2], 1, true), "want: " .. c[2] .. "\ngot: " .. err)
    end
  end)
end)

describe("dl.study warm_start", function()
  local dir
  setup(function()
    dir = H.tmpdir("warm")
    write(dir .. "/exp.lua", EXPERIMENT)
    study_file(dir, "early.lua", NUISANCE .. "name = \"early\", trials = 5, parallel = 2,")
    local out, rc = run(dir, "early.lua --out runs --quiet --no-check --threads 1")
    assert(rc == 0, out)
  end)
  teardown(function() fs.rm_rf(dir) end)

  local function first_point(name, fields)
    study_file(dir, name .. ".lua", NUISANCE .. "name = \"" .. name .. "\", algorithm = \"bayes\", init = 0, " ..
      "trials = 1, " .. fields)
    local out, rc = run(dir, name .. ".lua --out runs --no-check --threads 1")
    assert.are.equal(0, rc, out)
    local sg = first(dir .. "/runs/" .. name, "suggest", "trial_t001")
    return sg and sg.u, out
  end

  it("changes the first bayes suggestion, deterministically, and keeps the GP's fit", function()
    local cold = first_point("cold", "")
    local warm1, out = first_point("warm1", "warm_start = \"runs/early\",")
    local warm2 = first_point("warm2", "warm_start = \"runs/early\",")
    assert.truthy(out:find("warm start from " .. dir, 1, true) or out:find("warm start from /", 1, true), out)
    assert.truthy(out:find(": 5 compatible trial(s), 0 skipped", 1, true), out)
    -- without history the first point is the bayes row's first initial point (the centre); with it, the GP's
    assert.are.same({0.5, 0.5}, cold)
    assert.are.same(warm1, warm2)
    assert.is_true(math.abs(warm1[1] - cold[1]) + math.abs(warm1[2] - cold[2]) > 1e-6)
    -- the fit's hyperparameters, the next fit's warm start
    local g = json.decode(fs.read(dir .. "/runs/warm1/gp/trial.json"))
    assert.are.equal(4, #g.theta)            -- 2 length scales, amplitude, noise
    assert.are.equal(2, g.features)
  end)

  it("skips incompatible trials and counts them", function()
    study_file(dir, "other.lua", NUISANCE .. [[
  name = "other", algorithm = "bayes", init = 0, trials = 1, warm_start = "runs/early",]])
    -- another objective: every trial skipped
    local f = fs.read(dir .. "/other.lua"):gsub("valid/accuracy\", mode = \"max\"", "valid/loss\", mode = \"min\"")
    write(dir .. "/other.lua", f)
    local out, rc = run(dir, "other.lua --out runs --no-check --threads 1")
    assert.are.equal(0, rc, out)
    assert.truthy(out:find(": 0 compatible trial(s), 5 skipped (5 another objective)", 1, true), out)
    -- a narrowed space: the trials outside it are skipped
    local early = {}
    for _, e in ipairs(events(dir .. "/runs/early")) do if e.event == "finish" then early[#early + 1] = e end end
    local inside = 0
    for _, e in ipairs(early) do if e.nuisance.lr <= 0.05 then inside = inside + 1 end end
    assert(inside > 0 and inside < 5, "the quasirandom points straddle lr = 0.05")
    study_file(dir, "narrow.lua", [[
  nuisance = {lr = S.log_uniform(1e-3, 0.05), momentum = S.uniform(0.5, 0.95)},
  name = "narrow", algorithm = "bayes", init = 0, trials = 1, warm_start = "runs/early",]])
    out, rc = run(dir, "narrow.lua --out runs --no-check --threads 1")
    assert.are.equal(0, rc, out)
    assert.truthy(out:find(string.format(": %d compatible trial(s), %d skipped (%d outside this space)", inside,
      5 - inside, 5 - inside), 1, true), out)
  end)

  it("names a warm_start directory without a study", function()
    study_file(dir, "nowarm.lua", NUISANCE .. "name = \"x\", algorithm = \"bayes\", trials = 2,\n" ..
      "  warm_start = \"runs/nothing\",")
    local err, rc = run(dir, "nowarm.lua --out runs --no-check")
    assert.are.equal(1, rc, err)
    assert.truthy(err:find("nowarm.lua:6: dl.study: warm_start: runs/nothing holds no study.json", 1, true), err)
  end)
end)

describe("importance of a study's hyperparameters", function()
  -- the study reports dl.search.importance's shares, largest first
  it("is in the study's results, results.json and the printed summary", function()
    local dir = H.tmpdir("importance")
    write(dir .. "/exp.lua", EXPERIMENT)
    study_file(dir, "imp.lua", NUISANCE .. "name = \"imp\", trials = 6, parallel = 2,")
    local out, rc = run(dir, "imp.lua --out runs --no-check --threads 1")
    assert.are.equal(0, rc, out)
    local res = dl.study_results(dir .. "/runs/imp")
    local imp = res.groups[1].importance
    assert.are.equal(2, #imp)
    assert.are.same({"lr", "momentum"}, (function() local l = {imp[1].name, imp[2].name}; table.sort(l); return l end)())
    assert.is_true(imp[1].share >= imp[2].share)
    -- one set of numbers, one method name: the printed line, results.json and the HTML panel
    local line = assert(out:match("importance %(gp%-fanova%): ([^\n]+)"), out)
    local printed = {}
    for name, v in line:gmatch("([%w_%.%[%]=]+) (%d%.%d%d%d)") do printed[#printed + 1] = {name, tonumber(v)} end
    local rj = json.decode(fs.read(dir .. "/runs/imp/results.json"))
    assert.are.equal("gp-fanova", rj.importance_method)
    local page = fs.read(dl.report(dir .. "/runs/imp", {static = true, out = dir .. "/r.html"}))
    local panel = assert(page:match('<figure class="figure wide%-ok" id="importance">.-</figure>'))
    assert.truthy(panel:find("(gp-fanova)", 1, true))
    local html = {}
    for name, v in panel:gmatch('data%-name="([^"]+)".-<span class="imp%-v">([%d%.]+)</span>') do
      html[#html + 1] = {name, tonumber(v)}
    end
    assert.are.equal(2, #printed)
    for i = 1, 2 do
      assert.are.equal(imp[i].name, printed[i][1])
      assert.are.equal(imp[i].name, rj.groups[1].importance[i].name)
      assert.are.equal(imp[i].name, html[i][1])
      assert.are.equal(tonumber(string.format("%.3f", rj.groups[1].importance[i].share)), printed[i][2])
      assert.are.equal(printed[i][2], html[i][2])
      assert.is_near(imp[i].share, rj.groups[1].importance[i].share, 1e-12)
    end
    fs.rm_rf(dir)
  end)
end)
