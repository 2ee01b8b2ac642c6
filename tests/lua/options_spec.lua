-- Every public function and constructor that takes an option table rejects an
-- unknown key (nested tables included) with util.check_options' message: the
-- function, the key (and the table it sits in), the valid keys and the nearest one.
-- The tensor methods of the C core (t:sum{...}, backward{...}) are checked in C.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local nn, optim, data, S = dl.nn, dl.optim, dl.data, dl.search
local probe = require "dlua.study.probe"
local metrics = require "dlua.train.metrics"
local report = require "dlua.report"

local function pipeline()
  return data.tensors{image = dl.zeros(8, 2), label = dl.ones(8, {dtype = "int32"})}
end

local tmp = H.tmpdir("options")
local exp_path = tmp .. "/exp.lua"
H.spit(exp_path, [[
local dl = require "dlua"
return dl.experiment{name = "opt", hparams = {lr = 0.1, steps = 2}, build = function(hp) return {} end}
]])

-- {what, call, message}: message is the exact text of the error (after "file:line: ")
local CASES = {
  -- optimizers and schedules
  {"optim.SGD", function() optim.SGD{lr = 0.1, momentun = 0.9} end,
   "SGD: unknown option 'momentun' (valid: lr, momentum, nesterov, params, weight_decay); did you mean 'momentum'?"},
  {"optim.Adam", function() optim.Adam{bta1 = 0.9} end,
   "Adam: unknown option 'bta1' (valid: beta1, beta2, eps, lr, params, weight_decay); did you mean 'beta1'?"},
  {"optim.AdamW", function() optim.AdamW{weight_dacay = 0} end,
   "AdamW: unknown option 'weight_dacay' (valid: beta1, beta2, eps, lr, params, weight_decay); did you mean " ..
   "'weight_decay'?"},
  {"optim.NAdam", function() optim.NAdam{eps_ = 1} end,
   "NAdam: unknown option 'eps_' (valid: beta1, beta2, eps, lr, params, weight_decay); did you mean 'eps'?"},
  {"optim.Adagrad", function() optim.Adagrad{lr = 1, decay = 1} end,
   "Adagrad: unknown option 'decay' (valid: eps, lr, params, weight_decay)"},
  {"optim.RMSProp", function() optim.RMSProp{rh0 = 0.9} end,
   "RMSProp: unknown option 'rh0' (valid: eps, lr, momentum, params, rho, weight_decay); did you mean 'rho'?"},
  {"schedule.constant", function() optim.schedule.constant{warmpu = 50} end,
   "optim.schedule.constant: unknown option 'warmpu' (valid: steps, warmup); did you mean 'warmup'?"},
  {"schedule.linear", function() optim.schedule.linear{fnal = 0} end,
   "optim.schedule.linear: unknown option 'fnal' (valid: final, steps, warmup); did you mean 'final'?"},
  {"schedule.cosine", function() optim.schedule.cosine{warmpu = 50} end,
   "optim.schedule.cosine: unknown option 'warmpu' (valid: final, steps, warmup); did you mean 'warmup'?"},
  {"schedule.rsqrt", function() optim.schedule.rsqrt{warmup = 10, stesp = 3} end,
   "optim.schedule.rsqrt: unknown option 'stesp' (valid: steps, warmup); did you mean 'steps'?"},
  {"schedule.piecewise", function() optim.schedule.piecewise{boundaries = {}, value = {1}} end,
   "optim.schedule.piecewise: unknown option 'value' (valid: boundaries, steps, values, warmup); did you mean " ..
   "'values'?"},
  {"schedule warmup type", function() optim.schedule.cosine{warmup = "50"} end,
   "optim.schedule.cosine: option 'warmup' must be number, got string"},
  -- layers
  {"nn.Linear", function() nn.Linear(2, 3, {biass = true}) end,
   "Linear: unknown option 'biass' (valid: bias); did you mean 'bias'?"},
  {"nn.Conv2d", function() nn.Conv2d(1, 2, 3, {strides = 1}) end,
   "Conv2d: unknown option 'strides' (valid: bias, dilation, groups, padding, stride); did you mean 'stride'?"},
  {"nn.MaxPool2d", function() nn.MaxPool2d(2, {pad = 1}) end,
   "MaxPool2d: unknown option 'pad' (valid: padding, stride)"},
  {"nn.AvgPool2d", function() nn.AvgPool2d(2, {strid = 1}) end,
   "AvgPool2d: unknown option 'strid' (valid: padding, stride); did you mean 'stride'?"},
  {"nn.LayerNorm", function() nn.LayerNorm(4, {esp = 1e-5}) end,
   "LayerNorm: unknown option 'esp' (valid: affine, eps); did you mean 'eps'?"},
  {"nn.BatchNorm", function() nn.BatchNorm(4, {momentun = 0.1}) end,
   "BatchNorm: unknown option 'momentun' (valid: affine, eps, momentum, replicas, sync, virtual_batch); did you " ..
   "mean 'momentum'?"},
  {"nn.CrossEntropy", function() nn.CrossEntropy{label_smothing = 0.1} end,
   "CrossEntropy: unknown option 'label_smothing' (valid: label_smoothing, reduction, weight); did you mean 'label_smoothing'?"},
  {"module:load_state_dict", function() nn.Linear(2, 3):load_state_dict({}, {stric = false}) end,
   "load_state_dict: unknown option 'stric' (valid: strict); did you mean 'strict'?"},
  {"autograd.gradcheck", function() dl.autograd.gradcheck(function(x) return x end, {dl.ones(2)}, {epsilon = 1e-6}) end,
   "gradcheck: unknown option 'epsilon' (valid: atol, eps, rtol)"},
  {"autograd.Function", function()
     dl.autograd.Function{forward = function() end, backward = function() end, nmae = "sq"}
   end, "autograd.Function: unknown option 'nmae' (valid: backward, forward, name); did you mean 'name'?"},
  -- training
  {"dl.train", function() dl.train{stpes = 1} end,
   "dl.train: unknown option 'stpes' (valid: checkpoint, classes, clip_grad_norm, command, config_path, data, description, " ..
   "dir, divergence, ema, eval, fields, forward, hparams, log_every, loss, model, name, objective, on_eval, optimizer, override, quiet, resume, " ..
   "schedule, steps, threads, trace, tracking); did you mean 'steps'?"},
  {"dl.train eval", function() dl.train{eval = {evry = 5}} end,
   "dl.train: unknown option 'evry' in eval (valid: batch_size, every, metrics, predictions, sample, sets); " ..
   "did you mean 'every'?"},
  {"dl.train eval.predictions", function() dl.train{eval = {predictions = {indexes = {1}}}} end,
   "dl.train: unknown option 'indexes' in eval.predictions (valid: indices, set); did you mean 'indices'?"},
  {"dl.train checkpoint", function() dl.train{checkpoint = {keep_bset = 2}} end,
   "dl.train: unknown option 'keep_bset' in checkpoint (valid: every, keep_best, keep_every, keep_latest, metric, " ..
   "mode, share, tolerance); did you mean 'keep_best'?"},
  {"dl.train fields", function() dl.train{fields = {inptu = "x"}} end,
   "dl.train: unknown option 'inptu' in fields (valid: input, target, weight); did you mean 'input'?"},
  {"dl.train ema", function() dl.train{ema = {decya = 0.9}} end,
   "dl.train: unknown option 'decya' in ema (valid: decay); did you mean 'decay'?"},
  {"dl.train divergence", function() dl.train{divergence = {facotr = 10}} end,
   "dl.train: unknown option 'facotr' in divergence (valid: factor); did you mean 'factor'?"},
  {"metrics.evaluator", function() metrics.evaluator{metrcs = {"loss"}} end,
   "metrics.evaluator: unknown option 'metrcs' (valid: batch_size, dir, fields, forward, loss, metrics, model, " ..
   "predictions, sample, shard); did you mean 'metrics'?"},
  {"metrics.evaluator fields", function() metrics.evaluator{fields = {labl = "y"}} end,
   "metrics.evaluator: unknown option 'labl' in fields (valid: input, target, weight)"},
  {"dl.experiment", function() dl.experiment{name = "x", build = function() end, hparms = {}} end,
   "dl.experiment: unknown option 'hparms' (valid: build, description, hparams, name); did you mean 'hparams'?"},
  {"experiment:run", function() dl.load_experiment(exp_path):run({}, {qiuet = true}) end,
   "experiment:run: unknown option 'qiuet' (valid: command, dir, objective, on_eval, override, quiet, resume, steps, tracking); did you mean " ..
   "'quiet'?"},
  {"dl.evaluate", function() dl.evaluate{experiment = exp_path, checkpoint = "x", set = {}} end,
   "dl.evaluate: unknown option 'set' (valid: batch_size, checkpoint, experiment, metrics, sets); did you mean " ..
   "'sets'?"},
  -- data
  {"data.idx", function() data.idx{imagse = "x"} end,
   "idx: unknown option 'imagse' (valid: images, labels, limit); did you mean 'images'?"},
  {"data.fashion_mnist", function() data.fashion_mnist{dri = "x"} end,
   "fashion_mnist: unknown option 'dri' (valid: dir, limit); did you mean 'dir'?"},
  {"data.csv", function() data.csv{pth = "x.csv"} end,
   "csv: unknown option 'pth' (valid: classes, delimiter, fields, header, missing, path, types, zero_based); did you mean " ..
   "'path'?"},
  {"transforms.cast", function() data.transforms.cast("float32", {feild = "x"}) end,
   "cast: unknown option 'feild' (valid: field); did you mean 'field'?"},
  {"transforms.scale", function() data.transforms.scale(1, {fields = "x"}) end,
   "scale: unknown option 'fields' (valid: field); did you mean 'field'?"},
  {"transforms.normalize", function() data.transforms.normalize{mean = 0, sdt = 1} end,
   "normalize: unknown option 'sdt' (valid: field, mean, std); did you mean 'std'?"},
  {"transforms.random_crop", function() data.transforms.random_crop(2, {pading = 1}) end,
   "random_crop: unknown option 'pading' (valid: field, fill, padding); did you mean 'padding'?"},
  {"transforms.flip", function() data.transforms.flip{horizontl = true} end,
   "flip: unknown option 'horizontl' (valid: field, horizontal, vertical); did you mean 'horizontal'?"},
  {"transforms.random_translate", function() data.transforms.random_translate(1, {fil = 0}) end,
   "random_translate: unknown option 'fil' (valid: field, fill); did you mean 'fill'?"},
  {"transforms.random_affine", function() data.transforms.random_affine{degree = 5} end,
   "random_affine: unknown option 'degree' (valid: degrees, field, fill, scale, translate); did you mean 'degrees'?"},
  {"transforms.one_hot", function() data.transforms.one_hot(3, {feld = "label"}) end,
   "one_hot: unknown option 'feld' (valid: field); did you mean 'field'?"},
  {"transforms.resize", function() data.transforms.resize{size = 3, interpolaton = "area"} end,
   "resize: unknown option 'interpolaton' (valid: antialias, field, interpolation, size); did you mean 'interpolation'?"},
  {"transforms.random_resized_crop", function() data.transforms.random_resized_crop{size = 3, ratios = {1, 2}} end,
   "random_resized_crop: unknown option 'ratios' (valid: antialias, field, interpolation, ratio, scale, size); " ..
   "did you mean 'ratio'?"},
  {"transforms.center_crop", function() data.transforms.center_crop{sise = 3} end,
   "center_crop: unknown option 'sise' (valid: field, size); did you mean 'size'?"},
  {"transforms.color_jitter", function() data.transforms.color_jitter{saturaton = 0.2} end,
   "color_jitter: unknown option 'saturaton' (valid: brightness, contrast, field, hue, saturation); did you mean " ..
   "'saturation'?"},
  {"dataset:split", function() pipeline():split{4, 4, sed = 1} end,
   "split: unknown option 'sed' (valid: seed); did you mean 'seed'?"},
  {"pipeline:shuffle", function() pipeline():shuffle{sede = 1} end,
   "shuffle: unknown option 'sede' (valid: seed, shards, window); did you mean 'seed'?"},
  {"pipeline:batch", function() pipeline():shuffle{seed = 1}:batch(2, {pad_ = true}) end,
   "batch: unknown option 'pad_' (valid: drop_remainder, pad); did you mean 'pad'?"},
  {"pipeline:shard", function() pipeline():shuffle{seed = 1}:shard{rank = 0, wolrd = 2} end,
   "shard: unknown option 'wolrd' (valid: by, rank, world); did you mean 'world'?"},
  -- search, studies, reports
  {"search.sample", function() S.sample({lr = S.uniform(0, 1)}, 2, {algoritm = "grid"}) end,
   "dl.search.sample: unknown option 'algoritm' (valid: algorithm, context, grid_points, seed, warn); did you mean " ..
   "'algorithm'?"},
  {"search.suggester", function() S.suggester({lr = S.uniform(0, 1)}, {mdoe = "max"}) end,
   "dl.search.suggester: unknown option 'mdoe' (valid: acq_starts, acquisition, algorithm, batch, best, candidates, context, " ..
   "feasibility, grid_points, init, max_points, mode, pareto, racing, seed, theta, trust_starts, warp); did you mean 'mode'?"},
  {"search.int", function() S.int(1, 8, {lgo = true}) end,
   "dl.search.int: unknown option 'lgo' (valid: log); did you mean 'log'?"},
  {"search.point", function() S.point(S.space{lr = S.uniform(0, 1)}, 1, {sed = 1}) end,
   "dl.search.point: unknown option 'sed' (valid: algorithm, cache, grid_points, seed); did you mean 'seed'?"},
  {"dl.study", function() dl.study{name = "s", trails = 3} end,
   "dl.study: unknown option 'trails' (valid: algorithm, allow_step_search, description, enqueue, experiment, fixed, " ..
   "goal, grid_points, init, jobs, name, nuisance, objective, parallel, pareto, prune, scientific, seed, seeds, " ..
   "steps, trials, warm_start); did you mean 'trials'?"},
  {"dl.study prune", function() dl.study{name = "s", prune = {algorithm = "median", warmpu = 3}} end,
   "dl.study: unknown option 'warmpu' in prune (valid: algorithm, budget, min_steps, min_trials, model, pause, reduction, warmup); " ..
   "did you mean 'warmup'?"},
  {"dl.study objective", function() dl.study{name = "s", objective = {metrc = "valid/loss"}} end,
   "dl.study: unknown option 'metrc' in objective (valid: metric, mode); did you mean 'metric'?"},
  {"study:run", function()
     dl.study{name = "s", experiment = exp_path, nuisance = {lr = S.uniform(0.01, 1)}, trials = 1,
              objective = {metric = "valid/loss"}}:run{qiuet = true}
   end, "study:run: unknown option 'qiuet' (valid: check, count, create, exe, launch, lease, out, parallel, poll, quiet, " ..
   "steps, threads, trials); did you mean 'quiet'?"},
  {"dl.study_results", function() dl.study_results(tmp, {agregate = "final"}) end,
   "dl.study_results: unknown option 'agregate' (valid: aggregate, metric, mode); did you mean 'aggregate'?"},
  {"dl.report", function() dl.report(tmp, {metrc = "valid/loss"}) end,
   "dl.report: unknown option 'metrc' (valid: aggregate, interval, isolate, metric, mode, out, pareto, quiet, static, " ..
     "timeout, title, top, watch); did you mean " ..
   "'metric'?"},
  {"report.screenshot", function() report.screenshot("a.html", "a.png", {widht = 100}) end,
   "report.screenshot: unknown option 'widht' (valid: height, width); did you mean 'width'?"},
  {"dl.diagnose", function() dl.diagnose(tmp, {quite = true}) end,
   "dl.diagnose: unknown option 'quite' (valid: aggregate, metric, mode, quiet); did you mean 'quiet'?"},
  {"probe.variant", function() probe.variant(exp_path, {divergence = {fator = 3}}) end,
   "probe.variant: unknown option 'fator' in divergence (valid: factor); did you mean 'factor'?"},
  {"dl.batch_size_sweep", function() dl.batch_size_sweep{experiment = exp_path, strat = 8} end,
   "dl.batch_size_sweep: unknown option 'strat' (valid: confidence, dir, experiment, flag_ratio, max, memory, min_gain, " ..
   "on_row, overrides, quiet, rounds, skip, start, steps); did you mean 'start'?"},
}

describe("option tables", function()
  for _, case in ipairs(CASES) do
    it("of " .. case[1] .. " reject an unknown key, naming it", function()
      local ok, err = pcall(case[2])
      assert.is_false(ok)
      err = tostring(err)
      local msg = err:gsub("^[^:]*:%d+: ", "")
      assert.are.equal(case[3], msg)
    end)
  end

  it("blame the caller's line", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() optim.schedule.cosine{warmpu = 50} end)
    assert.is_false(ok)
    assert.truthy(err:find("options_spec.lua:" .. line .. ": ", 1, true), err)
    ok, err = pcall(function() dl.train{eval = {evry = 5}} end)
    assert.is_false(ok)
    assert.truthy(err:find("options_spec.lua:" .. (line + 3) .. ": ", 1, true), err)
  end)

  it("keep working with the keys spelled right", function()
    local s = optim.schedule.cosine{warmup = 50, steps = 1000}
    assert.are.equal(0.02, s(1))                      -- 1 / 50: the warmup is not dropped
    assert.truthy(nn.Linear(2, 3, {bias = false}))
    assert.truthy(S.sample({lr = S.uniform(0, 1)}, 2, {algorithm = "grid", warn = function() end}))
  end)
end)
