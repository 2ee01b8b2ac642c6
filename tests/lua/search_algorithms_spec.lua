-- The table of search algorithms (lua/dlua/search/algorithms/): its rows and their
-- checks, the one initial-point rule that plan and suggester share (issue 35), the
-- suggester's initial points counting observations made elsewhere and init = 0, the
-- importance method docs/studies.md describes, and docs/architecture.md's "Adding a
-- search algorithm" walked through: a toy algorithm registered here at run time runs
-- a tiny study.
local dl = require "dlua"
local S, fs, json = dl.search, dl.fs, dl.json
local algorithms = require "dlua.search.algorithms"
local plan = require "dlua.study.plan"
local H = dofile("tests/lua/helpers.lua")

local function slurp(path) return H.slurp(path) end

describe("the table of search algorithms", function()
  it("holds the contract's algorithms with their properties", function()
    assert.are.same({"bayes", "grid", "quasirandom", "random"}, S.algorithm_names())
    local want = {quasirandom = {false, false}, random = {false, false}, grid = {false, true}, bayes = {true, false}}
    for name, p in pairs(want) do
      local row = S.algorithm(name)
      assert.are.equal(name, row.name)
      assert.are.equal(p[1], row.adaptive, name)
      assert.are.equal(p[2], row.finite, name)
      assert.is_true(row.batches and row.objectives and row.conditional, name)
    end
    -- bayes: initial points max(5, 2 (d + 1)), then the model once 2 feasible observations exist
    local rule = S.algorithm("bayes").init
    assert.are.same({5, 6, 8, 10, 12, 14}, {rule(1), rule(2), rule(3), rule(4), rule(5), rule(6)})
    assert.are.equal(2, S.algorithm("bayes").needs_feasible)
    -- a row's functions take the contract's arguments, no more
    assert.error_matches(function() rule(2, 3) end,
      "bad argument #2 to 'dl.search.algorithm%(\"bayes\"%).init' %(no more than 1 arguments expected, got 2%)")
  end)

  it("is the list docs/studies.md gives, one bullet per row (and the study's manual)", function()
    local list = H.slurp("docs/studies.md"):match("\nAlgorithms %(the rows of one table.-\n(.-)\n### Ask / tell")
    local names = {}
    for name in list:gmatch("\n?%- %*%*([%w_]+)%*%*") do names[#names + 1] = name end
    table.sort(names)
    local want = S.algorithm_names()
    want[#want + 1] = "manual"
    table.sort(want)
    assert.are.same(want, names)
  end)

  it("names the valid algorithms, and the nearest, for an unknown one", function()
    assert.error_matches(function() S.algorithm("baye") end,
      "dl.search: unknown algorithm 'baye' %(valid: bayes, grid, quasirandom, random%); did you mean 'bayes'%?")
    assert.error_matches(function() S.point(S.space{x = S.uniform(0, 1)}, 1, {algorithm = "anneal"}) end,
      "unknown algorithm 'anneal' %(valid: bayes, grid, quasirandom, random%)")
  end)

  it("checks a row when it is registered", function()
    local function row(extra)
      local r = {name = "bad_row", adaptive = false, finite = false, batches = true, objectives = true,
                 conditional = true, point = function() end}
      for k, v in pairs(extra) do r[k] = v end
      return r
    end
    local R = S.register_algorithm
    assert.error_matches(function() R("toy") end,
      "bad argument #1 to 'search.register_algorithm' %(table expected, got string%)")
    assert.error_matches(function() R(row{adaptve = true}) end,
      "dl.search.register_algorithm: unknown option 'adaptve' %(valid: adaptive, batches, check, conditional, " ..
      "count, estimate, finite, init, name, needs_feasible, objectives, options, point, suggest, warnings%); did " ..
      "you mean 'adaptive'%?")
    assert.error_matches(function() R(row{adaptive = true}) end,
      "dl.search.register_algorithm: algorithm 'bad_row' has no 'init' %(function%)")
    assert.error_matches(function() R(row{finite = true}) end,
      "dl.search.register_algorithm: algorithm 'bad_row' has no 'count' %(function%)")
    assert.error_matches(function() R(row{batches = "yes"}) end,
      "dl.search.register_algorithm: option 'batches' must be boolean, got string")
    assert.error_matches(function() R(row{name = "bayes"}) end,
      "dl.search.register_algorithm: algorithm 'bayes' is already registered")
    assert.error_matches(function() R(row{name = "manual"}) end,
      "dl.search.register_algorithm: 'manual' is a study's list of trials, not an algorithm name")
    assert.error_matches(function() R(row{name = "two words"}) end,
      "dl.search.register_algorithm: name must be a string of letters, digits and '_', got two words")
    assert.error_matches(function() R(row{options = {seed = "integer"}}) end,
      "dl.search.register_algorithm: option 'seed' of algorithm 'bad_row' is one every algorithm takes")
    assert.are.same({"bayes", "grid", "quasirandom", "random"}, S.algorithm_names())   -- nothing was added
  end)
end)

describe("the initial points of an adaptive algorithm (issue 35)", function()
  local function space_of(d)
    local t = {}
    for k = 1, d do t["x" .. k] = S.uniform(0, 1) end
    return S.space(t)
  end
  local function same(a, b)
    for k = 1, #a do if a[k] ~= b[k] then return false end end
    return #a == #b
  end
  local function initial(space, i, seed) return S.algorithm("bayes").point(space, i, {seed = seed}) end

  it("start at the centre of the space, then follow the quasirandom sequence", function()
    local space = S.space{x = S.uniform(-5, 10), lr = S.log_uniform(1e-5, 1e-1), n = S.int(1, 9),
                          kind = S.choice{"a", "b", "c"}}
    local c = initial(space, 1, 4)
    assert.are.same({0.5, 0.5, 0.5, 0.5}, c)
    local hp = space:point(c)
    assert.are.equal(2.5, hp.x)
    assert.is_true(math.abs(hp.lr - 1e-3) < 1e-15, "the geometric middle of [1e-5, 1e-1]: " .. hp.lr)
    assert.are.equal(5, hp.n)
    assert.are.equal("b", hp.kind)
    for i = 2, 6 do assert.are.same(S.point(space, i - 1, {seed = 4}), initial(space, i, 4)) end
    -- the suggester and a study's plan give the same first points
    local s = S.suggester(space, {algorithm = "bayes", seed = 4})
    local b = s:suggest(3)
    for i = 1, 3 do assert.are.same(initial(space, i, 4), b[i].u) end
    local st = {trials = 4, space = space, algorithm = "bayes", seed = 4, groups = {{tag = "g", values = {}}}}
    local planned = plan.plan(st)
    for i = 1, 3 do assert.are.same(initial(space, i, 4), planned[i].u) end
  end)

  it("are one rule: the study's plan and the suggester start with the same count", function()
    for d = 1, 3 do
      local space = space_of(d)
      local want = ({5, 6, 8})[d]                       -- max(5, 2 (d + 1)), by hand
      -- the plan: trials whose point is fixed in advance (the rest are chosen when claimed)
      local fixed = 0
      local st = {trials = 12, space = space, algorithm = "bayes", seed = 4, groups = {{tag = "g", values = {}}}}
      for _, t in ipairs(plan.plan(st)) do if t.u then fixed = fixed + 1 end end
      assert.are.equal(want, fixed, "plan, d = " .. d)
      -- the suggester: its quasirandom points come first, then the model's
      local s = S.suggester(space, {algorithm = "bayes", seed = 4, candidates = 50})
      local quasi = 0
      for i = 1, want + 1 do
        local sg = s:suggest()[1]
        if same(sg.u, initial(space, i, 4)) then quasi = quasi + 1 end
        local v = 0
        for k = 1, d do v = v + (sg.u[k] - 0.3) ^ 2 end
        s:observe(sg, v)
      end
      assert.are.equal(want, quasi, "suggester, d = " .. d)
    end
  end)

  it("count observations made elsewhere, in the suggester", function()
    local space = space_of(2)                            -- init 6
    local told = {}
    for i = 1, 6 do
      local u = S.point(space, i, {seed = 99})           -- another study's points
      told[i] = {u = u, value = (u[1] - 0.3) ^ 2 + (u[2] - 0.6) ^ 2}
    end
    local s = S.suggester(space, {algorithm = "bayes", seed = 4, candidates = 64})
    for _, h in ipairs(told) do s:observe({u = h.u}, h.value) end
    local sg = s:suggest()[1]
    -- no quasirandom point is spent: the first suggestion is the model's, exactly bayes_suggest's
    local want = S.bayes_suggest(space, told, {}, 1, {seed = 4, step = 1, mode = "min", candidates = 64, init = 6})[1]
    assert.are.same(want, sg.u)
    assert.is_false(same(sg.u, initial(space, 1, 4)))
    -- three observations made elsewhere leave three initial points (init 6)
    s = S.suggester(space, {algorithm = "bayes", seed = 4, candidates = 64})
    for i = 1, 3 do s:observe({u = told[i].u}, told[i].value) end
    local batch = s:suggest(4)
    for i = 1, 3 do assert.are.same(initial(space, i, 4), batch[i].u) end
    assert.is_false(same(batch[4].u, initial(space, 4, 4)))
    -- best() reports an observation made elsewhere without an index
    assert.is_nil(s:best().index)
  end)

  it("accept init = 0: quasirandom until two feasible observations, the model from then on", function()
    local space = space_of(2)
    local s = S.suggester(space, {algorithm = "bayes", seed = 4, init = 0, candidates = 64})
    -- with no observation there is no model: the quasirandom points
    local b = s:suggest(2)
    assert.are.same(initial(space, 1, 4), b[1].u)
    assert.are.same(initial(space, 2, 4), b[2].u)
    local hist = {}
    for _, sg in ipairs(b) do
      local v = (sg.u[1] - 0.3) ^ 2
      s:observe(sg, v)
      hist[#hist + 1] = {u = sg.u, value = v}
    end
    -- two feasible observations: the model, from the first suggestion on (trust region from init 0)
    local want = S.bayes_suggest(space, hist, {}, 1, {seed = 4, step = 3, mode = "min", candidates = 64, init = 0})[1]
    assert.are.same(want, s:suggest()[1].u)
    assert.error_matches(function() S.suggester(space, {algorithm = "bayes", init = -1}) end,
      "dl.search.suggester: option 'init' must be an integer >= 0, got %-1")
  end)

  it("are documented once, as the code computes them", function()
    local docs = {}
    for _, f in ipairs({"docs/studies.md", "docs/api/search.md", "docs/api/study.md"}) do docs[f] = slurp(f) end
    local n = 0
    for f, text in pairs(docs) do
      assert.is_nil(text:find("max(5, d + 1)", 1, true), f .. " states another rule")
      for _ in text:gmatch("max%(5, 2 %(d %+ 1%)%)") do n = n + 1 end
    end
    assert.are.equal(1, n)
  end)
end)

describe("importance (issue 35): one definition, documented", function()
  it("docs/studies.md describes the GP functional ANOVA dl.search.importance computes, and no binned estimate", function()
    local doc = slurp("docs/studies.md")
    local section = doc:match("\n## Importance\n(.-)\n## ")
    assert.truthy(section:find("`" .. S.importance_method .. "`", 1, true), section)
    assert.is_nil(section:find("equal-width bins", 1, true))
    assert.is_nil(doc:find("fANOVA %d"))
    -- a continuous parameter's grid has `bins` (10) cells: another bins gives another share
    local space = S.space{x = S.uniform(0, 1), y = S.uniform(0, 1)}
    local hist = {}
    for i = 1, 20 do
      local u = S.halton(i, 2)
      hist[i] = {u = u, value = math.sin(7 * u[1]) + u[2]}
    end
    local a, b = S.importance(space, hist).params[1].share, S.importance(space, hist, {bins = 3}).params[1].share
    assert.is_true(math.abs(a - b) > 1e-3, a .. " " .. b)
  end)
end)

describe("docs/architecture.md: adding a search algorithm", function()
  local dir
  -- the walk-through's section and its new file, the row `centre` (adaptive: quasirandom
  -- initial points, then the best observation moved halfway to the centre of the cube; one
  -- point at a time, one objective, no conditional spaces), loaded from the page itself
  local section = H.slurp("docs/architecture.md"):match("\n## Adding a search algorithm\n(.-)\n## ") or
    H.slurp("docs/architecture.md"):match("\n## Adding a search algorithm\n(.*)$")
  local code = section:match("```lua\n(.-)\n%s*```"):gsub("\n   ", "\n"):gsub("^   ", "")
  local TOY = assert(load(code, "=docs/architecture.md"))()
  setup(function()
    dir = H.tmpdir("search-algorithms")
    H.spit(dir .. "/exp.lua", H.fixture("toy_experiment.lua"))
    S.register_algorithm(TOY)                             -- the one row, at run time
  end)
  teardown(function()
    algorithms.ALGORITHMS.centre = nil                    -- the table is the process's: leave it as found
    fs.rm_rf(dir)
  end)

  it("names the files that exist, and the row has the form of the table's rows", function()
    local n = 0
    for path in section:gmatch("`(lua/dlua/[%w_/]+%.lua)`") do
      if path ~= "lua/dlua/search/algorithms/centre.lua" then
        n = n + 1
        assert.is_true(fs.exists(path), path)
      end
    end
    assert.is_true(n >= 4, "paths named: " .. n)
    local table_src = H.slurp("lua/dlua/search/algorithms/init.lua")
    for _, name in ipairs({"quasirandom", "random", "grid", "bayes"}) do
      assert.truthy(table_src:find(name .. "%s*= require \"dlua%.search%.algorithms%." .. name .. "\","), name)
      assert.is_true(fs.exists("lua/dlua/search/algorithms/" .. name .. ".lua"), name)
    end
    assert.truthy(section:find('`centre = require "dlua.search.algorithms.centre",`', 1, true))
    assert.are.equal("centre", TOY.name)
  end)

  local function study(extra)
    local spec = {name = "centre-study", goal = "g", experiment = dir .. "/exp.lua", algorithm = "centre", seed = 3,
      trials = 4, nuisance = {lr = S.log_uniform(1e-3, 0.5), momentum = S.uniform(0.5, 0.95)},
      objective = {metric = "valid/accuracy", mode = "max"}}
    for k, v in pairs(extra or {}) do spec[k] = v end
    return dl.study(spec)
  end

  it("walks the walk-through: the row is listed, and a study, the plan and the suggester read it", function()
    assert.are.same({"bayes", "centre", "grid", "quasirandom", "random"}, S.algorithm_names())
    local ok, err = pcall(dl.study, {name = "x", goal = "g", experiment = dir .. "/exp.lua", algorithm = "centr",
      trials = 2, objective = "valid/accuracy"})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("unknown algorithm 'centr' (valid: bayes, centre, grid, manual, " ..
      "quasirandom, random); did you mean 'centre'?", 1, true), err)
    -- the properties reach the checks
    ok, err = pcall(study, {parallel = 2})
    assert.truthy(tostring(err):find("dl.study: algorithm 'centre' suggests one point at a time (no batches): " ..
      "parallel must be 1, got 2", 1, true), err)
    ok, err = pcall(study, {objective = {{metric = "valid/accuracy", mode = "max"}, {metric = "valid/loss",
      mode = "min"}}})
    assert.truthy(tostring(err):find("dl.study: algorithm 'centre' serves one objective, and this study has 2",
      1, true), err)
    ok, err = pcall(study, {nuisance = {width = S.discrete{8, 16}, lr = S.uniform(0.01, 0.1):when{width = 8}}})
    assert.truthy(tostring(err):find("dl.study: algorithm 'centre' does not serve conditional spaces", 1, true),
      err)
    local space = S.space{x = S.uniform(0, 1)}
    local s = S.suggester(space, {algorithm = "centre", seed = 1})
    assert.error_matches(function() s:suggest(2) end,
      "dl.search.suggester: suggest: algorithm 'centre' suggests one point at a time, got n = 2")
    -- the suggester: init(1) = 2 quasirandom points, then the toy's
    local a, b = s:suggest()[1], s:suggest()[1]
    assert.are.same(S.point(space, 1, {seed = 1}), a.u)
    assert.are.same(S.point(space, 2, {seed = 1}), b.u)
    s:observe(a, 1); s:observe(b, 0)                     -- b is the best (mode min)
    assert.are.same({(b.u[1] + 0.5) / 2}, s:suggest()[1].u)
    -- the plan: two points fixed in advance, two chosen when claimed
    local st = study()
    assert.are.equal(1, st.parallel)                      -- no batches: one trial at a time by default
    local fixed = 0
    for _, t in ipairs(st:plan()) do if t.u then fixed = fixed + 1 end end
    assert.are.equal(2, fixed)
  end)

  it("runs a tiny study with the toy", function()
    local res = study():run{out = dir .. "/runs", quiet = true, threads = 1, exe = H.EXE, check = false}
    assert.are.equal(4, res.groups[1].trials)
    local sd = dir .. "/runs/centre-study"
    local u, value = {}, {}
    local _, us = S.sample(S.space{lr = S.log_uniform(1e-3, 0.5), momentum = S.uniform(0.5, 0.95)}, 2, {seed = 3})
    u.trial_t001, u.trial_t002 = us[1], us[2]
    local suggested = {}
    for _, e in ipairs(H.journal_events(sd)) do
      if e.event == "suggest" then u[e.trial] = e.u; suggested[#suggested + 1] = e.trial end
      if e.event == "finish" then value[e.trial] = e.value end
    end
    -- trials 1, 2: the quasirandom points (init(2) = 2); 3 and 4: the toy's, from the trials before them
    assert.are.same({"trial_t003", "trial_t004"}, suggested)
    for j = 3, 4 do
      local best
      for i = 1, j - 1 do
        local id = string.format("trial_t%03d", i)
        if not best or value[id] > value[best] then best = id end
      end
      local id = string.format("trial_t%03d", j)
      for k = 1, 2 do assert.is_near((u[best][k] + 0.5) / 2, u[id][k], 1e-12) end
    end
    local rec = json.decode(fs.read(sd .. "/study.json"))
    assert.are.equal("centre", rec.algorithm)
  end)
end)
