-- Never silent, options: no option is accepted and then ignored or read another way.
--   * a nested option (dl.train's ema, eval, divergence, ...) refuses a value that is
--     not a table, naming the option and its keys; a nested spec may list other forms
--     with its "|" key (util.check_options)
--   * yes/no options are booleans: batch's pad and drop_remainder, csv's header,
--     nn options whose default is false (norm_first, causal)
--   * dl.study refuses options its algorithm does not use (init, grid_points), a
--     grid_points that is not a positive integer, and parallel and jobs that differ
--   * shard takes {rank =, world =} or {r, w}, not both
--   * fashion_mnist_tensors checks its options and applies limit
--   * random_affine checks its numbers and the types of fill and field when built
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local util = dl.util or require "dlua.util"
local nn, optim, data = dl.nn, dl.optim, dl.data
local fs = require "dlua.util.fs"

-- a small dl.train config (4 steps, nothing written outside dir)
local function config(dir)
  dl.seed(0)
  local x = dl.randn({32, 4})
  local lab = {}
  for i = 1, 32 do lab[i] = (i % 3) + 1 end
  local ds = data.tensors{image = x, label = dl.tensor(lab, {dtype = "int32"})}
  local model = nn.Linear(4, 3)
  return {model = model, loss = nn.CrossEntropy(), optimizer = optim.SGD{params = model:parameters(), lr = 0.1},
    data = ds:batch(8), steps = 2, quiet = true, tracking = false, dir = dir}
end

describe("util.check_options: nested specs", function()
  it("refuse a value that is not a table, naming the function, the option and its keys", function()
    local spec = {ema = {decay = "number"}, eval = {every = "integer", sub = {a = "number"}}}
    assert.are.equal("f: option 'ema' must be a table (keys: decay), got string",
      util.option_problem("f", {ema = "yes"}, spec))
    assert.are.equal("f: option 'ema' must be a table (keys: decay), got true", util.option_problem("f", {ema = true}, spec))
    assert.are.equal("f: option 'ema' must be a table (keys: decay), got false",
      util.option_problem("f", {ema = false}, spec))
    assert.are.equal("f: option 'eval.sub' must be a table (keys: a), got integer",
      util.option_problem("f", {eval = {sub = 3}}, spec))
    assert.is_nil(util.option_problem("f", {ema = {decay = 0.9}, eval = {every = 2, sub = {a = 1}}}, spec))
  end)

  it("take the other forms a nested spec lists under \"|\", and name them when refusing", function()
    local spec = {checkpoint = {every = "integer", ["|"] = "false"}, objective = {metric = "string", ["|"] = "string"}}
    assert.is_nil(util.option_problem("f", {checkpoint = false, objective = "valid/loss"}, spec))
    assert.is_nil(util.option_problem("f", {checkpoint = {every = 2}, objective = {metric = "m"}}, spec))
    assert.are.equal("f: option 'checkpoint' must be a table (keys: every) or false, got true",
      util.option_problem("f", {checkpoint = true}, spec))
    assert.are.equal("f: option 'objective' must be a table (keys: metric) or string, got integer",
      util.option_problem("f", {objective = 3}, spec))
    -- "|" is not an option name
    assert.matches("unknown option '|' in checkpoint %(valid: every%)",
      util.option_problem("f", {checkpoint = {["|"] = "false"}}, spec))
  end)

  it("make dl.train refuse ema = \"yes\", ema = true, divergence and eval given as strings", function()
    local dir = H.tmpdir("optsilent")
    for _, c in ipairs({
      {"ema", "yes", "dl.train: option 'ema' must be a table %(keys: decay%), got string"},
      {"ema", true, "dl.train: option 'ema' must be a table %(keys: decay%), got true"},
      {"divergence", "strict", "dl.train: option 'divergence' must be a table %(keys: factor%), got string"},
      {"eval", "often", "dl.train: option 'eval' must be a table %(keys: batch_size, every, .*%), got string"},
    }) do
      local cfg = config(dir .. "/run")
      cfg[c[1]] = c[2]
      assert.error_matches(function() dl.train(cfg) end, c[3])
    end
    fs.rm_rf(dir)
  end)
end)

describe("yes/no options are booleans", function()
  local ds = data.tensors{x = dl.tensor({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {dtype = "int32"})}

  it("batch: pad and drop_remainder", function()
    assert.error_matches(function() ds:batch(4, {pad = "no"}) end, "batch: option 'pad' must be boolean, got string")
    assert.error_matches(function() ds:batch(4, {drop_remainder = 0}) end,
      "batch: option 'drop_remainder' must be boolean, got integer")
    local sizes = {}
    for b in ds:batch(4, {pad = false}):iter() do sizes[#sizes + 1] = b.x:size(1) end
    assert.are.same({4, 4, 2}, sizes)
    sizes = {}
    for b in ds:batch(4, {drop_remainder = true}):iter() do sizes[#sizes + 1] = b.x:size(1) end
    assert.are.same({4, 4}, sizes)
  end)

  it("csv: header", function()
    local dir = H.tmpdir("optcsv")
    H.spit(dir .. "/t.csv", "a,b\n1,2\n3,4\n")
    assert.error_matches(function() data.csv{path = dir .. "/t.csv", header = "no"} end,
      "csv: option 'header' must be boolean, got string")
    assert.are.equal(2, #data.csv{path = dir .. "/t.csv", header = true})
    fs.rm_rf(dir)
  end)

  it("nn: TransformerEncoderLayer's norm_first, MultiheadAttention's causal", function()
    assert.error_matches(function() nn.TransformerEncoderLayer(8, 2, {norm_first = "no"}) end,
      "TransformerEncoderLayer: option 'norm_first' must be boolean, got string")
    assert.error_matches(function() nn.MultiheadAttention(8, 2, {causal = 0}) end,
      "MultiheadAttention: option 'causal' must be boolean, got integer")
    assert.error_matches(function() nn.TransformerEncoderLayer(8, 2, {activation = 1}) end,
      "TransformerEncoderLayer: option 'activation' must be string, got integer")
    assert.truthy(nn.TransformerEncoderLayer(8, 2, {norm_first = true, causal = true, dim_feedforward = 16}))
  end)
end)

describe("dl.study", function()
  local dir, exp
  setup(function()
    dir = H.tmpdir("optstudy")
    exp = dir .. "/exp.lua"
    H.spit(exp, [[
local dl = require "dlua"
return dl.experiment{name = "tiny", hparams = {lr = 0.1, steps = 4},
  build = function(hp) error("not built by these specs") end}
]])
  end)
  teardown(function() fs.rm_rf(dir) end)

  local function study(over)
    local spec = {name = "s", goal = "g", experiment = exp, nuisance = {lr = dl.search.log_uniform(1e-3, 1)},
                  trials = 4, objective = "valid/accuracy"}
    for k, v in pairs(over) do spec[k] = v end
    return dl.study(spec)
  end

  it("refuses init and grid_points for an algorithm that does not use them, naming it", function()
    assert.error_matches(function() study{init = 3} end,
      "dl.study: option 'init' applies to algorithm bayes, not to 'quasirandom' %(the default algorithm%)")
    assert.error_matches(function() study{grid_points = 7} end,
      "dl.study: option 'grid_points' applies to algorithm grid, not to 'quasirandom'")
    assert.error_matches(function() study{grid_points = 3, algorithm = "random"} end,
      "option 'grid_points' applies to algorithm grid, not to 'random'")
    assert.error_matches(function() study{init = 2, algorithm = "grid"} end, "option 'init' applies to algorithm bayes")
    assert.error_matches(function() study{init = 2, nuisance = {}, trials = {{lr = 0.1}}} end,
      "option 'init' applies to algorithm bayes, not to a manual study")
    assert.are.equal(3, study{init = 3, algorithm = "bayes"}:record().init)
    assert.are.equal(3, study{grid_points = 3, algorithm = "grid"}:record().grid_points)
    assert.is_nil(study{}:record().grid_points)
  end)

  it("refuses a grid_points that is not a positive integer", function()
    assert.error_matches(function() study{grid_points = 0, algorithm = "grid"} end,
      "dl.study: grid_points must be a positive integer, got 0")
    assert.error_matches(function() study{grid_points = 2.5, algorithm = "grid"} end,
      "dl.study: grid_points must be a positive integer, got 2.5")
  end)

  it("refuses parallel and jobs that differ (jobs is parallel's other name)", function()
    assert.error_matches(function() study{parallel = 2, jobs = 1} end,
      "dl.study: parallel = 2 and jobs = 1: jobs is another name of parallel")
    assert.are.equal(2, study{parallel = 2, jobs = 2}.parallel)
    assert.are.equal(3, study{jobs = 3}.parallel)
    assert.error_matches(function() study{jobs = 0} end, "dl.study: jobs must be a positive integer, got 0")
  end)

  it("refuses --parallel and --jobs that differ", function()
    H.spit(dir .. "/st.lua", 'local dl = require "dlua"\nreturn dl.study{name = "cli", goal = "g", ' ..
      'experiment = "exp.lua", nuisance = {lr = dl.search.log_uniform(1e-3, 1)}, trials = 2, ' ..
      'objective = "valid/accuracy"}\n')
    local out, rc = H.run(dir, "st.lua --parallel 2 --jobs 1 --out runs --quiet")
    assert.are_not.equal(0, rc)
    assert.truthy(out:find("--parallel 2 and --jobs 1: --jobs is another name of --parallel", 1, true), out)
    assert.is_false(fs.exists(dir .. "/runs/cli"))
  end)

  it("types its yes/no and text options", function()
    assert.error_matches(function() study{allow_step_search = "no"} end,
      "dl.study: option 'allow_step_search' must be boolean, got string")
    assert.error_matches(function() study{goal = 5} end, "dl.study: option 'goal' must be string, got integer")
    assert.error_matches(function() study{pareto = "ehvi"} end,
      "dl.study: option 'pareto' must be a table %(keys: method, reference%), got string")
    assert.error_matches(function() study{objective = 5} end, "objective = {metric = .*%(or a metric name alone%), got 5")
  end)
end)

describe("shard", function()
  local ds = data.tensors{x = dl.tensor({1, 2, 3, 4}, {dtype = "int32"})}
  it("takes {rank =, world =} or {r, w}, not both", function()
    assert.error_matches(function() ds:batch(1):shard{1, 2, rank = 0} end,
      "shard: give the rank and world as {rank = r, world = w} or as {r, w}, not both")
    assert.error_matches(function() ds:batch(1):shard{1, world = 2} end, "not both")
    local got = {}
    for b in ds:shard{1, 2}:batch(1):iter() do got[#got + 1] = b.x:totable()[1] end
    assert.are.same({2, 4}, got)
  end)
end)

describe("fashion_mnist_tensors", function()
  it("checks its options and applies limit", function()
    assert.error_matches(function() data.fashion_mnist_tensors{limit = 10, dirr = "/nonexistent"} end,
      "fashion_mnist_tensors: unknown option 'dirr' %(valid: dir, limit%); did you mean 'dir'%?")
    assert.error_matches(function() data.fashion_mnist_tensors{limit = -1} end,
      "fashion_mnist_tensors: limit must be a non%-negative integer, got %-1")
    assert.error_matches(function() data.fashion_mnist_tensors{dir = 5} end,
      "fashion_mnist_tensors: option 'dir' must be string, got integer")
    local dir = H.tmpdir("optfm")
    local function idx(shape, body)
      local h = string.char(0, 0, 8, #shape)
      for _, n in ipairs(shape) do h = h .. string.pack(">I4", n) end
      return h .. body
    end
    H.spit(dir .. "/train-images-idx3-ubyte.gz", idx({3, 1, 1}, "\0\1\2"))
    H.spit(dir .. "/train-labels-idx1-ubyte.gz", idx({3}, "\0\1\2"))
    H.spit(dir .. "/t10k-images-idx3-ubyte.gz", idx({3, 1, 1}, "\0\1\2"))
    H.spit(dir .. "/t10k-labels-idx1-ubyte.gz", idx({3}, "\0\1\2"))
    local fm = data.fashion_mnist_tensors{dir = dir, limit = 2}
    assert.are.same({2, 1, 1, 1}, fm.train.x:shape())
    assert.are.same({2}, fm.test.y:shape())
    assert.are.same({3, 1, 1, 1}, data.fashion_mnist_tensors{dir = dir}.train.x:shape())
    fs.rm_rf(dir)
  end)
end)

describe("random_affine", function()
  local T = data.transforms
  it("checks its numbers when built", function()
    local nan, inf = 0 / 0, math.huge
    for _, c in ipairs({
      {{degrees = nan}, "degrees must be a finite number >= 0, got nan"},
      {{degrees = inf}, "degrees must be a finite number >= 0, got inf"},
      {{degrees = -30}, "degrees must be a finite number >= 0, got %-30"},
      {{translate = nan}, "translate must be a fraction of the size in %[0, 1%], got nan"},
      {{translate = -0.2}, "translate must be a fraction of the size in %[0, 1%], got %-0.2"},
      {{translate = 5}, "translate must be a fraction of the size in %[0, 1%], got 5"},
      {{scale = {nan, nan}}, "scale must be a finite number > 0 or {lo, hi} of them with lo <= hi, got {nan, nan}"},
      {{scale = {1.2, 0.8}}, "scale must be .* with lo <= hi, got {1.2, 0.8}"},
      {{scale = 0}, "scale must be a finite number > 0"},
      {{fill = nan}, "fill must be a finite number, got nan"},
    }) do
      assert.error_matches(function() T.random_affine(c[1]) end, "random_affine: " .. c[2])
    end
  end)

  it("checks the types of fill and field when built, not when applied", function()
    assert.error_matches(function() T.random_affine{fill = "white"} end,
      "random_affine: option 'fill' must be number, got string")
    assert.error_matches(function() T.random_affine{field = 3} end, "random_affine: option 'field' must be string, got integer")
    assert.error_matches(function() T.random_crop(2, {field = 3}) end, "random_crop: option 'field' must be string")
    assert.error_matches(function() T.random_crop(2, {padding = 1, fill = 0 / 0}) end,
      "random_crop: fill must be a finite number, got nan")
    assert.error_matches(function() T.random_translate(2, {fill = math.huge}) end,
      "random_translate: fill must be a finite number, got inf")
    local t = T.random_affine{degrees = 10, translate = 0.1, scale = {0.9, 1.1}, fill = 0}
    assert.are.same({1, 4, 4}, t:apply(dl.zeros(1, 4, 4)):shape())
  end)
end)
