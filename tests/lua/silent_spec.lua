-- Nothing silent (issue 33): what a user got wrong in an experiment stops the run
-- with a message that says where and what, instead of training something else.
--   * hp in build(hp) refuses a name the experiment does not declare (a typo such as
--     hp.weightdecay used to read nil and train without weight decay)
--   * dl.train refuses an optimizer with no parameters or with tensors that are not
--     the model's, and warns about trainable parameters the optimizer leaves alone
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local nn, optim, data = dl.nn, dl.optim, dl.data

local EXE = os.getenv("DLUA_EXE") or "build/dlua"
if EXE:sub(1, 1) ~= "/" then EXE = (os.getenv("PWD") or ".") .. "/" .. EXE end

-- runs dlua with args in dir (under `timeout limit` when given): output, exit status
local function run(dir, args, limit)
  local t = limit and ("timeout " .. limit .. " ") or ""
  local p = assert(io.popen("cd " .. H.shquote(dir) .. " && " .. t .. H.shquote(EXE) .. " " .. args ..
    " 2>&1; echo \"rc=$?\""))
  local out = p:read("a")
  p:close()
  return out, tonumber(out:match("rc=(%d+)%s*$"))
end

local function toy()
  dl.seed(1)
  local x = dl.randn(64, 4)
  local y = x:matmul(dl.randn(4, 3)):argmax(2)
  return data.tensors{image = x, label = y}
end

describe("hp in build(hp)", function()
  it("refuses a name the experiment does not declare, at build's line, with did-you-mean", function()
    local dir = H.tmpdir("hp")
    H.spit(dir .. "/exp.lua", [[
local dl = require "dlua"
return dl.experiment{name = "typo", hparams = {lr = 0.1, weight_decay = 1e-4, steps = 5},
  build = function(hp)
    local m = dl.nn.Linear(4, 3)
    return {model = m, loss = dl.nn.CrossEntropy(),
      optimizer = dl.optim.SGD{params = m:parameters(), lr = hp.lr,
                               weight_decay = hp.weightdecay},
      data = function() end, steps = hp.steps}
  end}
]])
    local out, rc = run(dir, "exp.lua --steps 2")
    assert.are_not.equal(0, rc, out)
    assert.matches("exp.lua:7: experiment typo: hp.weightdecay is not a hyperparameter of this experiment " ..
      "(did you mean weight_decay?) (its hyperparameters: data_seed, init_seed, lr, seed, steps, weight_decay;",
      out, 1, true)
    assert.is_nil(out:find("runs/typo", 1, true), "no run directory is announced: " .. out)
  end)

  it("reads declared names, the runner's seeds, and rank/world as nil on one process; writes go through", function()
    local exp = dl.experiment{name = "ok", hparams = {lr = 0.1, extra = 1}, build = function(hp)
      assert(hp.rank == nil and hp.world == nil)
      hp.extra = hp.extra + 1
      local keys = {}
      for k in pairs(hp) do keys[#keys + 1] = k end
      table.sort(keys)
      assert(table.concat(keys, ",") == "data_seed,extra,init_seed,lr,seed", table.concat(keys, ","))
      local m = nn.Linear(4, 3)
      return {model = m, loss = nn.CrossEntropy(), optimizer = optim.SGD{params = m:parameters(), lr = hp.lr},
        data = toy():batch(8), steps = 1}
    end}
    local hp = exp:resolve({seed = 3})
    local cfg = exp:config(hp)
    assert.are.equal(2, cfg.hparams.extra)          -- the record is the table build changed
    assert.are.equal(1003, cfg.hparams.data_seed)
  end)
end)

describe("dl.train and its optimizer", function()
  local function cfg(model, opt)
    return {model = model, loss = nn.CrossEntropy(), optimizer = opt, data = toy():batch(8), steps = 3,
      quiet = true, tracking = false, dir = H.tmpdir("opt") .. "/run"}
  end

  it("refuses an optimizer without parameters, saying how to give them", function()
    local m = nn.Sequential{nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)}
    assert.error_matches(function() dl.train(cfg(m, optim.SGD{lr = 0.1})) end,
      "dl.train: the optimizer (SGD) has no parameters, so training would change nothing: give it " ..
      "params = model:parameters() (or call opt:attach(model:parameters()))", 1, true)
  end)

  it("refuses an optimizer over another model's tensors, naming the tensor and the model's", function()
    local m = nn.Sequential{nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)}
    local other = nn.Linear(4, 5)
    assert.error_matches(function() dl.train(cfg(m, optim.Adam{params = other:parameters(), lr = 0.1})) end,
      "dl.train: the optimizer (Adam) updates a tensor [5, 4] (its parameter 1) that is not a parameter of the " ..
      "model (the model has 4: 1.weight...)", 1, true)
  end)

  it("warns about trainable parameters it leaves alone, and not about frozen ones", function()
    local dir = H.tmpdir("optwarn")
    local body = [[
local dl = require "dlua"
local nn = dl.nn
return dl.experiment{name = "partial", hparams = {freeze = 0},
  build = function(hp)
    dl.seed(1)
    local x = dl.randn(64, 4)
    local ds = dl.data.tensors{image = x, label = x:matmul(dl.randn(4, 3)):argmax(2)}
    local first, last = nn.Linear(4, 8), nn.Linear(8, 3)
    if hp.freeze == 1 then first:freeze() end
    local m = nn.Sequential{first, nn.ReLU(), last}
    return {model = m, loss = nn.CrossEntropy(), optimizer = dl.optim.SGD{params = last:parameters(), lr = 0.1},
      data = ds:batch(8), steps = 3, tracking = false}
  end}
]]
    H.spit(dir .. "/exp.lua", body)
    local out, rc = run(dir, "exp.lua")
    assert.are.equal(0, rc, out)
    assert.matches("warning: the optimizer does not update 2 trainable parameters of the model (1.weight, 1.bias); " ..
      "freeze them", out, 1, true)
    out, rc = run(dir, "exp.lua --set freeze=1")
    assert.are.equal(0, rc, out)
    assert.is_nil(out:find("does not update", 1, true), out)
  end)
end)

describe("special files in a run directory", function()
  it("a FIFO where metrics.jsonl should be stops --resume and dlua report with its name, never a hang", function()
    local dir = H.tmpdir("fifo")
    H.spit(dir .. "/exp.lua", H.fixture("toy_experiment.lua"))
    local out, rc = run(dir, "exp.lua --steps 10")
    assert.are.equal(0, rc, out)
    local metrics = dir .. "/runs/toy/metrics.jsonl"
    assert.is_true(os.remove(metrics))
    assert.is_true(os.execute("mkfifo " .. H.shquote(metrics)))
    -- timeout: a blocked open would hang here (exit 124)
    out, rc = run(dir, "exp.lua --steps 20 --resume", 30)
    assert.is_true(rc ~= 0 and rc ~= 124, out)
    assert.matches("runs/toy/metrics.jsonl': not a regular file", out, 1, true)
    out, rc = run(dir, "report runs/toy", 30)
    assert.is_true(rc ~= 0 and rc ~= 124, out)
    assert.matches("runs/toy/metrics.jsonl': not a regular file", out, 1, true)
  end)
end)

describe("errors inside a model", function()
  it("name the module by its path and class, at the user's line", function()
    local dir = H.tmpdir("modpath")
    H.spit(dir .. "/exp.lua", [[
local dl = require "dlua"
local nn = dl.nn
return dl.experiment{name = "shapes", hparams = {},
  build = function(hp)
    local x = dl.randn(32, 4)
    local ds = dl.data.tensors{image = x, label = x:matmul(dl.randn(4, 3)):argmax(2)}
    local m = nn.Sequential{nn.Linear(4, 2), nn.ReLU(), nn.Sequential{nn.Linear(3, 3)}}
    return {model = m, loss = nn.CrossEntropy(),
      optimizer = dl.optim.SGD{params = m:parameters(), lr = 0.1}, data = ds:batch(8), steps = 2, tracking = false}
  end}
]])
    local out, rc = run(dir, "exp.lua")
    assert.are.equal(1, rc, out)
    assert.matches("step 1: model.3.1 (Linear): input of shape [8, 2] does not end in 3 features", out, 1, true)
    -- a module called directly: the path relative to it, at the caller's line
    local m = nn.Sequential{nn.Linear(4, 2), nn.Sequential{nn.Tanh(), nn.Linear(3, 3)}}
    local ok, err = pcall(function() local y = m(dl.randn(2, 4)); return y end)
    assert.is_false(ok)
    assert.matches("silent_spec.lua:" .. (debug.getinfo(1, "l").currentline - 2) ..
      ": 2.2 %(Linear%): input of shape %[2, 2%] does not end in 3 features$", err)
  end)
end)

describe("the checkpoint a run reports", function()
  it("is called best only when a metric ranks the kept checkpoints, and last otherwise", function()
    local dir = H.tmpdir("bestlast")
    H.spit(dir .. "/exp.lua", H.fixture("toy_experiment.lua"))
    -- no checkpoint.metric: the default (the validation accuracy of a classification loss) ranks them,
    -- and the best is the best of the kept checkpoints by it (the ledger's own values)
    local out, rc = run(dir, "exp.lua --steps 20 --out run")
    assert.are.equal(0, rc, out)
    assert.matches("checkpoints by valid/accuracy (max, the default), at evals within 5% of the time", out, 1, true)
    local step = tonumber(out:match("best checkpoint by valid/accuracy %(the default%): step (%d+) %("))
    assert.truthy(step, out)
    local led = dl.json.decode(H.slurp(dir .. "/run/checkpoints/index.json"))
    local top = -1
    for _, c in ipairs(led.checkpoints) do top = math.max(top, c.metrics["valid/accuracy"]) end
    assert.are.equal(step, led.best.step)
    assert.are.equal(top, led.best.value)
    assert.is_nil(out:find("last checkpoint", 1, true), out)
    local ds = toy()
    local m = nn.Linear(4, 3)
    local r = dl.train{model = m, loss = nn.CrossEntropy(), data = ds:batch(8), steps = 8,
      optimizer = optim.SGD{params = m:parameters(), lr = 0.1}, quiet = true, tracking = false, dir = dir .. "/r",
      eval = {every = 2, sets = {valid = ds}}, checkpoint = {keep_best = 1, metric = "valid/loss", mode = "min"}}
    assert.are.equal("best", r.best.selected)
    -- the best kept by valid/loss: its value is the least of the evals'
    local least = math.huge
    for line in H.slurp(dir .. "/r/metrics.jsonl"):gmatch("[^\n]+") do
      local e = dl.json.decode(line)
      if e["valid/loss"] then least = math.min(least, e["valid/loss"]) end
    end
    assert.are.equal(least, r.best.metrics["valid/loss"])
    r = dl.train{model = m, loss = nn.CrossEntropy(), data = ds:batch(8), steps = 4,
      optimizer = optim.SGD{params = m:parameters(), lr = 0.1}, quiet = true, tracking = false, dir = dir .. "/s"}
    assert.are.equal("last", r.best.selected)
    assert.are.equal(4, r.best.step)
  end)
end)

describe("nn's constructors and methods with wrong types", function()
  -- a value of each kind; for a declared type, one that does not fit it
  local KINDS = {
    {"a string", "abc", "string"}, {"a number", 2.5, "number"}, {"a table", {}, "table"},
    {"a boolean", true, "boolean"}, {"a function", function() end, "function"},
  }
  local function fits(ty, v)
    for t in ty:gsub("%?$", ""):gmatch("[^|]+") do
      if t == "any" then return true end
      if t == "number" and type(v) == "number" then return true end
      if t == "integer" and math.type(v) == "integer" then return true end
      if t == "callable" and (type(v) == "function" or (type(v) == "table" and getmetatable(v) and getmetatable(v).__call)) then
        return true
      end
      if t == type(v) then return true end
    end
    return false
  end

  it("every constructor that takes arguments declares their types, and refuses each wrong one by position", function()
    local classes, checked = {}, 0
    for name, cls in pairs(nn) do
      if type(cls) == "table" and rawget(cls, "__name") and cls ~= nn.Module then classes[#classes + 1] = name end
    end
    table.sort(classes)
    assert.is_true(#classes >= 15, table.concat(classes, ", "))
    for _, name in ipairs(classes) do
      local cls = nn[name]
      local info = debug.getinfo(require("dlua.util").unwrap(cls.init), "u")
      local sig = rawget(cls, "_sig") or {}
      if info.nparams > 1 then
        assert.is_table(sig.init, "nn." .. name .. " takes arguments but declares no types (Module:extend's sig.init)")
      end
      for i, ty in ipairs(sig.init or {}) do
        for _, k in ipairs(KINDS) do
          if not fits(ty, k[2]) then
            local args = {}
            for j = 1, i - 1 do                      -- earlier positions: a value that fits
              local tj = sig.init[j]
              args[j] = fits(tj, 1) and 1 or fits(tj, {}) and {} or nn.ReLU()
            end
            args[i] = k[2]
            local ok, err = pcall(cls, table.unpack(args, 1, i))
            assert.is_false(ok, string.format("nn.%s accepted %s as argument #%d", name, k[1], i))
            assert.matches(string.format("bad argument #%d to '%s' (", i, name), err, 1, true)
            assert.matches(", got " .. (k[3] == "number" and "number" or k[3]) .. ")", err, 1, true)
            checked = checked + 1
          end
        end
      end
    end
    assert.is_true(checked >= 40, "only " .. checked .. " wrong calls made")
  end)

  it("refuses the cases seen from outside, naming the function, the argument and the type", function()
    local m = nn.Linear(2, 3)
    assert.error_matches(function() m:train("no") end,
      "bad argument #1 to 'Module:train' (boolean or nil expected, got string)", 1, true)
    assert.error_matches(function() nn.AvgPool2d("abc") end,
      "bad argument #1 to 'AvgPool2d' (number or table expected, got string)", 1, true)
    assert.error_matches(function() nn.Softmax("x") end,
      "bad argument #1 to 'Softmax' (integer or nil expected, got string)", 1, true)
    assert.error_matches(function() nn.Residual(nn.ReLU(), "junk") end,
      "bad argument #2 to 'Residual' (callable or nil expected, got string)", 1, true)
    assert.error_matches(function() nn.CrossEntropy{label_smoothing = "x"} end,
      "CrossEntropy: option 'label_smoothing'", 1, true)
    assert.error_matches(function() nn.Conv2d(1, 2, 3, {stride = "2"}) end, "Conv2d: option 'stride'", 1, true)
    assert.error_matches(function() nn.Sequential{nn.ReLU()}:add("x") end,
      "bad argument #1 to 'Sequential:add' (module expected, got string)", 1, true)
  end)
end)

describe("the batch-size sweep's decision", function()
  local probe = require "dlua.study.probe"
  -- per-step times: base seconds with a deterministic jitter of +-spread
  local function times(base, spread, n, seed)
    local out, x = {}, seed
    for i = 1, n do
      x = (x * 1103515245 + 12345) % 2147483648
      out[i] = base * (1 + spread * (2 * (x / 2147483648) - 1))
    end
    return out
  end

  it("says grew, stopped or straddles from the interval, and the same for the same times", function()
    -- size b at 10 ms a step, 2b at 10 ms: throughput x2.0
    local v, r, lo, hi = probe._verdict(times(0.010, 0.05, 15, 1), times(0.010, 0.05, 15, 2), 1.1, 0.9, 8)
    assert.are.equal("grew", v)
    assert.is_true(math.abs(r - 2) < 0.15 and lo >= 1.1 and hi > lo, string.format("%g %g %g", r, lo, hi))
    -- 2b takes 1.95x as long: x1.03, clearly under 1.1
    v, r, lo, hi = probe._verdict(times(0.010, 0.02, 15, 3), times(0.0195, 0.02, 15, 4), 1.1, 0.9, 8)
    assert.are.equal("stopped", v)
    assert.is_true(hi < 1.1, string.format("%g %g %g", r, lo, hi))
    -- x1.09 with 20% noise: the interval holds 1.1, no answer either way
    v, r, lo, hi = probe._verdict(times(0.010, 0.2, 15, 5), times(0.01835, 0.2, 15, 6), 1.1, 0.9, 8)
    assert.are.equal("straddles", v)
    assert.is_true(lo < 1.1 and hi >= 1.1, string.format("%g %g %g", r, lo, hi))
    for _ = 1, 3 do
      local v2, r2, lo2, hi2 = probe._verdict(times(0.010, 0.2, 15, 5), times(0.01835, 0.2, 15, 6), 1.1, 0.9, 8)
      assert.are.same({v, r, lo, hi}, {v2, r2, lo2, hi2})
    end
  end)
end)

describe("dlua under a small address-space limit", function()
  it("exits cleanly (OpenBLAS's own threads are never started), and children see the user's OPENBLAS_NUM_THREADS", function()
    local p = assert(io.popen("ldd " .. H.shquote(EXE) .. " 2>/dev/null"))
    local libs = p:read("a")
    p:close()
    if libs:find("libasan", 1, true) then return end   -- ASan reserves terabytes of address space: no ulimit -v
    local dir = H.tmpdir("ulimit")
    H.spit(dir .. "/hi.lua", 'print("hi", os.getenv("OPENBLAS_NUM_THREADS"), os.getenv("DLUA_BLAS_ENV"))\n')
    local out, rc = run(dir, "hi.lua", 30)
    assert.are.equal(0, rc, out)
    local q = assert(io.popen("cd " .. H.shquote(dir) .. " && ulimit -v 150000 && timeout 30 " .. H.shquote(EXE) ..
      " hi.lua 2>&1; echo \"rc=$?\""))
    out = q:read("a")
    q:close()
    assert.matches("^hi\tnil\tnil\nrc=0\n$", out)
    q = assert(io.popen("cd " .. H.shquote(dir) .. " && OPENBLAS_NUM_THREADS=3 " .. H.shquote(EXE) .. " hi.lua"))
    out = q:read("a")
    q:close()
    assert.are.equal("hi\t3\tnil\n", out)
  end)
end)

describe("a schedule given as a plain function", function()
  it("trains (it used to be indexed as a table and crash)", function()
    dl.seed(1)
    local x = dl.randn(32, 4)
    local ds = data.tensors{image = x, label = x:matmul(dl.randn(4, 3)):argmax(2)}
    local m = nn.Linear(4, 3)
    local seen = {}
    local r = dl.train{model = m, loss = nn.CrossEntropy(), data = ds:batch(8), steps = 3, quiet = true,
      tracking = false, dir = H.tmpdir("fnsched") .. "/r", optimizer = optim.SGD{params = m:parameters(), lr = 0.1},
      schedule = function(step) seen[#seen + 1] = step; return 1 / (step + 1) end}
    assert.are.equal("done", r.status)
    assert.is_true(#seen >= 3)
  end)
end)
