-- prune = {algorithm = "hyperband"}: the expected cost of a bracket (dlua.study.prune.cost) against
-- hand-computed values, and the split of a crafted study's trials between brackets under a step budget
-- (prune.budget): the largest down-weighting of the conservative brackets whose expected steps stay
-- within the budget, the paper's counts at budget = 1, asha alone below the first bracket's cost; and the
-- study's fingerprint leaves the split out, so the trial budget may change between runs.
local prune = require "dlua.study.prune"

local function check(p, max, trials)
  return prune.check(p, {max_steps = max, trials = trials, algorithm = "bayes"}, error, error)
end

-- the expected steps of trials split by bracket_list, each bracket costing prune.cost at its own count
local function split_cost(brackets, reduction, max, trials)
  local m = {}
  for b = 1, #brackets do m[b] = 0 end
  for _, b in ipairs(prune.bracket_list(brackets, trials)) do m[b] = m[b] + 1 end
  local c = 0
  for b, br in ipairs(brackets) do c = c + m[b] * prune.cost(br.rungs, reduction, max, m[b]) end
  return c / trials, m
end

describe("hyperband's brackets under a step budget", function()
  it("cost: a ladder's expected steps, many trials and few", function()
    -- many trials: every trial runs 100, a third on to 300, a ninth to 900: (100 + 200/3 + 600/9) / 900
    assert.is_true(math.abs(prune.cost({100, 300}, 3, 900) - (100 + 200 / 3 + 600 / 9) / 900) < 1e-12)
    assert.is_true(math.abs(prune.cost({300}, 3, 900) - 500 / 900) < 1e-12)
    assert.are.equal(1, prune.cost({}, 3, 900))
    -- three trials one at a time, random order: the 1st continues, the 2nd when best of 2 (1/2), the 3rd
    -- when best of 3 (1/3): (3 * 100 + (1 + 1/2 + 1/3) * 100) / (3 * 200)
    assert.is_true(math.abs(prune.cost({100}, 3, 200, 3) - (300 + 100 * (1 + 1 / 2 + 1 / 3)) / 600) < 1e-12)
    -- one trial: it is the best so far at every rung and runs to the end
    assert.are.equal(1, prune.cost({100, 300}, 3, 900, 1))
  end)

  it("the default budget (a third) down-weights the conservative brackets as little as it can", function()
    local p = check({algorithm = "hyperband", min_steps = 100, reduction = 3}, 900, 40)
    assert.are.equal(1 / 3, p.budget)
    local w, r = {}, {}
    for i, b in ipairs(p.brackets) do w[i], r[i] = b.weight, b.rungs end
    assert.are.same({90, 7, 4}, w)                     -- the paper's 9 5 3, times 10, the last two times ~0.15
    assert.are.same({{100, 300}, {300}, {}}, r)
    local c, m = split_cost(p.brackets, 3, 900, 40)
    assert.is_true(c <= 1 / 3, tostring(c))
    assert.are.same({36, 3, 1}, m)
    -- the next down-weighting step (bracket 2 at 8) would pass the budget
    local more = {{rungs = {100, 300}, weight = 90}, {rungs = {300}, weight = 8}, {rungs = {}, weight = 4}}
    assert.is_true(split_cost(more, 3, 900, 40) > 1 / 3)
    -- each bracket's cost is the one of its trials' count
    assert.is_true(math.abs(p.brackets[2].cost - prune.cost({300}, 3, 900, 3)) < 1e-12)
  end)

  it("budget = 1 keeps the paper's counts; a budget below the first bracket's cost leaves asha", function()
    local p = check({algorithm = "hyperband", min_steps = 100, reduction = 3, budget = 1}, 900, 40)
    local w = {}
    for i, b in ipairs(p.brackets) do w[i] = b.weight end
    assert.are.same({90, 50, 30}, w)
    local one = check({algorithm = "hyperband", min_steps = 100, reduction = 3, budget = 0.2}, 900, 40)
    assert.are.equal(1, #one.brackets)
    assert.are.same({100, 300}, one.brackets[1].rungs)
    for n = 1, 12 do assert.are.same({{100, 300}, 1}, {prune.ladder(one, n)}) end
    -- reduction 2 from 100 to 900 at a third: bracket 1 alone already costs 0.30 on 40 trials, and one more
    -- trial in any other bracket passes the budget
    local two = check({algorithm = "hyperband", min_steps = 100, reduction = 2}, 900, 40)
    assert.are.equal(1, #two.brackets)
    -- without the trial count (trials not fixed) the many-trials costs: the paper's shares within 0.5
    local inf = prune.brackets({min_steps = 100, reduction = 3, budget = 0.5}, 900)
    assert.are.equal(3, #inf)
  end)

  it("the split is a function of the settings alone: the same in every process", function()
    local a = check({algorithm = "hyperband", min_steps = 5, reduction = 2}, 30, 8)
    local b = check({algorithm = "hyperband", min_steps = 5, reduction = 2}, 30, 8)
    assert.are.same(a.brackets, b.brackets)
    assert.are.same(prune.bracket_list(a.brackets, 50), prune.bracket_list(b.brackets, 50))
  end)
end)

describe("a hyperband study's fingerprint", function()
  it("does not change with the trial budget, though the split does", function()
    local dl = require "dlua"
    local spec = require "dlua.study.spec"
    local S = dl.search
    local function study(trials, budget)
      return dl.study{name = "hb", algorithm = "bayes", experiment = "examples/fashion_mnist.lua",
        nuisance = {lr = S.log_uniform(1e-3, 1)}, trials = trials, fixed = {steps = 900},
        objective = {metric = "valid/accuracy", mode = "max"},
        prune = {algorithm = "hyperband", min_steps = 100, reduction = 3, budget = budget}}
    end
    local a, b = study(16), study(40)
    assert.are.equal(1, #a.prune.brackets)
    assert.are.equal(3, #b.prune.brackets)
    local ra, rb = a:record(), b:record()
    assert.are.equal(spec.fingerprint(ra), spec.fingerprint(rb))
    assert.are.equal(1, #ra.prune.brackets)                                    -- the record keeps the split
    assert.are_not.equal(spec.fingerprint(rb), spec.fingerprint(study(40, 1):record()))  -- the budget counts
  end)
end)
