-- The search benchmark suite's machinery (tests/bench/search_suite.lua, search_problems.lua,
-- search_suite_lib.lua, search_suite_optuna.py, search_suite_problems.py; issue 35 item 7):
-- every Lua problem's stated optimum against its formula, the Python problems against the
-- Lua ones (the same definitions, the same values at fixed points to 1e-12 relative), the
-- statistics, the best-sampler choice and the verdict on crafted inputs, and both runners end to
-- end on a few evaluations and 2 seeds. The Python checks run /usr/bin/python3 and are pending,
-- with a message, when python3-optuna is missing.
local dl = require "dlua"
local json = dl.json
local P = dofile("tests/bench/search_problems.lua")
local L = dofile("tests/bench/search_suite_lib.lua")
local EXE = os.getenv("DLUA_EXE") or ((os.getenv("DLUA_BUILD") or "build") .. "/dlua")
local PY = "/usr/bin/python3"
local HAVE_OPTUNA = os.execute(PY .. " -c 'import optuna' >/dev/null 2>&1") == true

local SUITE = P.suite()

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p " .. d))
  return d
end

local function run(cmd)
  local f = assert(io.popen(cmd .. " 2>&1"))
  local out = f:read("a")
  local ok = f:close()
  return ok, out
end

-- the unit-cube points at which both languages evaluate every problem
local function points(space)
  local out = {}
  for k, c in ipairs({0.05, 0.3, 0.5, 0.77, 0.93}) do
    local u = {}
    for j = 1, space.d do u[j] = (c + 0.137 * j * k) % 1 end
    out[#out + 1] = space:point(u, {})
  end
  return out
end

describe("the search suite's problems", function()
  it("are at least 12, each named once, of the kinds the table knows", function()
    local seen, single = {}, 0
    for _, pr in ipairs(SUITE) do
      assert.is_nil(seen[pr.name], pr.name)
      seen[pr.name] = true
      assert.truthy(pr.kind == "single" or pr.kind == "multi" or pr.kind == "prune", pr.name)
      assert.is_nil(pr.name:find(",", 1, true), "a problem's name cannot hold the --problems separator")
      if pr.kind == "single" then single = single + 1 end
    end
    assert.is_true(#SUITE >= 12)
    assert.is_true(single >= 10)
  end)

  it("reach their stated minimum at their argmin and nowhere below it on 400 points", function()
    for _, pr in ipairs(SUITE) do
      if pr.kind == "single" then
        local at = pr.f(pr.argmin)
        assert.is_true(math.abs(at - pr.minimum) <= 1e-5 * math.max(1, math.abs(pr.minimum)),
          pr.name .. ": f(argmin) = " .. at .. ", stated " .. pr.minimum)
        local r = dl.search.rng("search-suite-spec", pr.name)
        for _ = 1, 400 do
          local u = {}
          for j = 1, pr.space.d do u[j] = r:uniform() end
          local v = pr.f(pr.space:point(u, {}))
          assert.is_true(v >= pr.minimum - 1e-5, pr.name .. ": " .. v .. " below the stated minimum")
        end
      end
    end
    -- Branin's three minima, Levy's and Rosenbrock's by their formula's terms
    assert.near(0.397887, P.branin(9.42478, 2.475), 1e-6)
    assert.near(0.397887, P.branin(-math.pi, 12.275), 1e-6)
    assert.near(0, P.levy({1, 1, 1}), 1e-30)                 -- sin(pi)^2
    assert.equal(101, P.rosenbrock({0, 1}))                  -- 100 (1 - 0^2)^2 + (1 - 0)^2
  end)

  it("put several objectives' optima on the known fronts", function()
    local z1, z2 = P.zdt({0.25, 0, 0, 0, 0, 0}, false), P.zdt({0.25, 0, 0, 0, 0, 0}, true)
    assert.near(1 - math.sqrt(0.25), z1[2], 1e-15)
    assert.near(1 - 0.25 ^ 2, z2[2], 1e-15)
    local d = P.dtlz2({0.3, 0.8, 0.5, 0.5, 0.5, 0.5})
    assert.near(1, d[1] ^ 2 + d[2] ^ 2 + d[3] ^ 2, 1e-14)
    -- the exact front's hypervolume (1.1^3 - the octant of the unit ball) bounds any set of points
    local pts, r = {}, dl.search.rng("search-suite-spec", "dtlz2")
    for i = 1, 30 do
      local x = {}
      for j = 1, 6 do x[j] = r:uniform() end
      pts[i] = P.dtlz2(x)
    end
    local inside = {}
    for _, v in ipairs(pts) do if v[1] < 1.1 and v[2] < 1.1 and v[3] < 1.1 then inside[#inside + 1] = v end end
    assert.is_true(dl.search.hypervolume(inside, {1.1, 1.1, 1.1}) <= 1.331 - math.pi / 6)
  end)

  it("have recorded curves whose best final value is the file's, and pruning rules dlua accepts", function()
    for _, pr in ipairs(SUITE) do
      if pr.kind == "prune" then
        local data = json.decode(dl.fs.read(pr.curves))
        local sign, best = data.mode == "max" and 1 or -1, -math.huge
        for _, t in ipairs(data.trials) do
          best = math.max(best, sign * t.final)
          assert.equal(data.max, t.curve[#t.curve][1])
        end
        assert.equal(data.best, sign * best)
        assert.is_true(#data.orders >= 20)
        -- the five rules mirror the Optuna side's five pruners (search_suite_optuna.py PRUNERS)
        assert.equal(5, #pr.rules)
        local seen = {}
        for _, named in ipairs(pr.rules) do
          assert.is_nil(seen[named[1]])
          seen[named[1]] = true
          require("dlua.study.prune").check(named[2], {max_steps = data.max, algorithm = "bayes", trials = #data.trials},
            error, function() end)
        end
      end
    end
  end)
end)

describe("the Python problems", function()
  local describe_out, eval_out
  local function python(args, input)
    local d = tmpdir()
    local f = assert(io.open(d .. "/in.json", "w"))
    f:write(input or "")
    f:close()
    local ok, out = run(PY .. " tests/bench/search_suite_problems.py " .. args .. " < " .. d .. "/in.json")
    assert(ok, out)
    return json.decode(out)
  end

  it("define the same problems in the same order, with the same parameters", function()
    if not HAVE_OPTUNA then pending("python3-optuna is missing (apt-get install python3-optuna): Python side not checked") return end
    describe_out = python("describe")
    assert.equal(#SUITE, #describe_out)
    local KIND = {uniform = "float", log_uniform = "log", int = "int", choice = "choice"}
    for i, pr in ipairs(SUITE) do
      local py = describe_out[i]
      assert.equal(pr.name, py.name)
      assert.equal(pr.kind, py.kind)
      if pr.kind == "prune" then
        assert.equal(pr.curves, py.curves)
      else
        assert.equal(pr.sd, py.sd)
        assert.equal(pr.streams, py.streams)
        assert.equal(pr.batch, py.batch)
        if pr.kind == "single" then assert.equal(pr.minimum, py.minimum) else assert.same(pr.ref, py.ref) end
        local dims = {}
        for _, d in ipairs(pr.space:to_table().dims) do dims[d.name] = d end
        local n = 0
        for _, q in ipairs(py.params) do
          local d = assert(dims[q.name], pr.name .. ": Python's " .. q.name .. " is not in the Lua space")
          n = n + 1
          assert.equal(q.kind, KIND[d.param.kind], pr.name .. "." .. q.name)
          if q.kind == "choice" then assert.same(q.a, d.param.values)
          else assert.equal(q.a, d.param.lo); assert.equal(q.b, d.param.hi) end
          if q.cond ~= json.null and q.cond then
            assert.same({[q.cond[1]] = {q.cond[2]}}, d.cond, pr.name .. "." .. q.name)
          else
            assert.is_nil(d.cond)
          end
        end
        assert.equal(#pr.space:to_table().dims, n, pr.name)
      end
    end
  end)

  it("take the same values at fixed points and at the optima", function()
    if not HAVE_OPTUNA then pending("python3-optuna is missing (apt-get install python3-optuna): Python side not checked") return end
    local queries, want = json.array(), {}
    for _, pr in ipairs(SUITE) do
      if pr.kind ~= "prune" then
        local pts = points(pr.space)
        if pr.argmin then pts[#pts + 1] = pr.argmin end
        for _, hp in ipairs(pts) do
          queries[#queries + 1] = {name = pr.name, hp = hp}
          want[#want + 1] = pr.f(hp)
        end
      end
    end
    eval_out = python("eval", json.encode(queries))
    assert.equal(#want, #eval_out)
    for i, w in ipairs(want) do
      local got, q = eval_out[i], queries[i]
      if type(w) == "table" then
        for j = 1, #w do
          assert.is_true(math.abs(got[j] - w[j]) <= 1e-12 * math.max(1, math.abs(w[j])), q.name .. " objective " .. j)
        end
      else
        assert.is_true(math.abs(got - w) <= 1e-12 * math.max(1, math.abs(w)),
          string.format("%s at point %d: Lua %.17g, Python %.17g", q.name, i, w, got))
      end
    end
  end)
end)

describe("the suite's statistics and verdict", function()
  it("take quantiles as numpy does (linear between order statistics)", function()
    assert.equal(3, L.quantile({5, 1, 3}, 0.5))
    assert.equal(2.5, L.quantile({4, 1, 3, 2}, 0.5))
    assert.near(9.1, L.quantile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9), 1e-12)   -- numpy: 9.1
    assert.near(1.9, L.quantile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.1), 1e-12)   -- numpy: 1.9
    local m, t = L.summary({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, "single")
    assert.same({5.5, 9.1}, {m, t})
    m, t = L.summary({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, "multi")
    assert.near(5.5, m, 1e-12)
    assert.near(1.9, t, 1e-12)
  end)

  it("pick the best sampler by median, the tail breaking ties, in the problem's direction", function()
    -- medians all 2; p90 2.8, 7.6, 2; p10 1.2, 2, 1.6
    local s = {A = {["50"] = {1, 2, 3}}, B = {["50"] = {2, 2, 9}}, C = {["50"] = {1.5, 2, 2}}}
    assert.same({"C", 2, 2}, {L.best_sampler(s, "50", "single")})
    assert.same({"B", 2, 2}, {L.best_sampler(s, "50", "multi")})
    s.D = {["50"] = {3, 3, 3}}
    assert.equal("D", (L.best_sampler(s, "50", "multi")))
    assert.is_nil(L.best_sampler(s, "100", "single"))
  end)

  it("say yes only when dlua is at or better on both the median and the tail", function()
    assert.equal("yes", L.verdict(1, 2, 1, 2, "single"))
    assert.equal("yes", L.verdict(0.5, 1, 1, 2, "single"))
    assert.equal("**no** (median)", L.verdict(1.5, 1, 1, 2, "single"))
    assert.equal("**no** (p90)", L.verdict(1, 3, 1, 2, "single"))
    assert.equal("**no** (median, p90)", L.verdict(3, 3, 1, 2, "prune"))
    assert.equal("yes", L.verdict(0.9, 0.8, 0.9, 0.7, "multi"))
    assert.equal("**no** (median, p10)", L.verdict(0.8, 0.6, 0.9, 0.7, "multi"))
  end)

  it("make one row per budget, and say where Optuna has no results", function()
    local dlua = {X = {kind = "single", budgets = {"50", "100"}, values = {["50"] = {1, 2, 3}, ["100"] = {0.5, 0.5, 0.5}}},
                  Y = {kind = "multi", budgets = {"50"}, values = {["50"] = {0.8, 0.8, 0.8}}},
                  Z = {kind = "single", budgets = {"50"}, values = {["50"] = {1}}}}
    local optuna = {X = {samplers = {TPE = {["50"] = {1, 1, 1}, ["100"] = {1, 1, 1}}}},
                    Y = {samplers = {MOTPE = {["50"] = {0.9, 0.9, 0.9}}}}}
    assert.same({
      "| X | 50 | 3 | 2 / 2.8 | TPE | 1 / 1 | **no** (median, p90) |",
      "| X | 100 | 3 | 0.5 / 0.5 | TPE | 1 / 1 | yes |",
      "| Y | 50 | 3 | 0.8 / 0.8 | MOTPE | 0.9 / 0.9 | **no** (median, p10) |",
      "| Z | - | - | - | no Optuna results | - | - |",
    }, L.rows({"X", "W", "Y", "Z"}, dlua, optuna))
  end)
end)

describe("the suite's runners", function()
  it("run both sides on 2 seeds and a few evaluations, and print the table", function()
    if not HAVE_OPTUNA then pending("python3-optuna is missing (apt-get install python3-optuna): runners not checked") return end
    local d = tmpdir()
    local probs = "Branin,conditional,Rosenbrock-4 in batches of 4,ZDT1,Fashion-MNIST pruning"
    local ok, out = run(string.format("%s tests/bench/search_suite_optuna.py --seeds 2 --budgets 6,8 --problems '%s' --out %s/op.json",
      PY, probs, d))
    assert(ok, out)
    local op = json.decode(dl.fs.read(d .. "/op.json"))
    assert.equal(2, op.seeds)
    assert.truthy(op.optuna:match("^%d+%.%d+"))
    assert.truthy(op.machine:match("^# machine: "))
    assert.same({"1", "1"}, {tostring(op.problems.Branin.runs[1][1]), tostring(op.problems.Branin.runs[1][2])})
    assert.equal(2, #op.problems.Branin.samplers["TPE multivariate"]["8"])
    assert.truthy(op.problems.ZDT1.samplers["NSGA-II"])
    assert.equal(5, #(function() local n = {} for k in pairs(op.problems["Fashion-MNIST pruning"].samplers) do n[#n + 1] = k end return n end)())
    ok, out = run(string.format("%s tests/bench/search_suite.lua --seeds 2 --budgets 6,8 --problems '%s' --out %s/dl.json --optuna %s/op.json",
      EXE, probs, d, d))
    assert(ok, out)
    assert.truthy(out:match("^# machine: "))
    assert.truthy(out:find(L.HEAD, 1, true))
    for _, row in ipairs({"| Branin | 6 | 2 |", "| Branin | 8 | 2 |", "| conditional | 8 | 2 |",
                          "| Rosenbrock-4 in batches of 4 | 8 | 2 |", "| ZDT1 | 8 | 2 |", "| Fashion-MNIST pruning | 1/3 steps | 2 |"}) do
      assert.truthy(out:find(row, 1, true), row .. " missing in\n" .. out)
    end
    local dj = json.decode(dl.fs.read(d .. "/dl.json"))
    assert.equal(2, #dj.problems.Branin.values["8"])
    -- deterministic: the same seeds give the same bits; re-running one problem keeps the others
    ok, out = run(string.format("%s tests/bench/search_suite.lua --seeds 2 --budgets 6,8 --problems Branin --out %s/dl.json --optuna %s/op.json",
      EXE, d, d))
    assert(ok, out)
    local again = json.decode(dl.fs.read(d .. "/dl.json"))
    assert.same(dj.problems.Branin.values, again.problems.Branin.values)
    assert.same(dj.problems.ZDT1.values, again.problems.ZDT1.values)
    -- dlua's asha (100, 2) is Optuna's SuccessiveHalving (100, 2), the same rule: the same gaps
    assert.same(op.problems["Fashion-MNIST pruning"].samplers["SuccessiveHalving (100, 2)"]["1/3 steps"],
      again.problems["Fashion-MNIST pruning"].values["1/3 steps"])
    ok, out = run(string.format("%s tests/bench/search_suite.lua --problems nope --out %s/dl.json", EXE, d))
    assert.falsy(ok)
    assert.truthy(out:find("unknown problem 'nope' (known: Branin, ", 1, true), out)
    os.execute("rm -rf " .. d)
  end)
end)
