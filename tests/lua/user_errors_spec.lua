-- Errors in the user's terms (issue 17, item 4): a mistake names what the user
-- wrote (the loss, the label and its position, the step) and leads with the
-- user's file:line, never a file of the library; the library's own frames show
-- only with DLUA_DEBUG=1. Most cases run real build/dlua subprocesses, since the
-- message handler and the CLI are what a user sees.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local blame = require "dlua.util.blame"
local fs = require "dlua.util.fs"

local EXE = os.getenv("DLUA_EXE") or ((os.getenv("DLUA_BUILD") or "build") .. "/dlua")
local nn, optim = dl.nn, dl.optim

local dir

-- runs `dlua ARGS` in dir (env: extra assignments); returns exit code, stdout, stderr
local function dlua(args, env)
  local cmd = string.format("cd %s && %s %s %s >out.txt 2>err.txt </dev/null", H.shquote(dir), env or "",
    H.shquote(EXE), args)
  local _, how, code = os.execute(cmd)
  assert(how == "exit", "dlua killed by a signal")
  return code, H.slurp(dir .. "/out.txt"), H.slurp(dir .. "/err.txt")
end

local function write(name, src) H.spit(dir .. "/" .. name, src) end

-- an experiment whose config table is `config` (Lua source; m is the model)
local function experiment(name, config)
  write(name, [[
local dl = require "dlua"
local nn = dl.nn
return dl.experiment{name = "e", hparams = {steps = 3},
  build = function(hp)
    local m = nn.Linear(3, 10)
    return {model = m, optimizer = dl.optim.SGD{params = m:parameters(), lr = 0.1}, steps = hp.steps,
]] .. config .. [[}
  end}
]])
end

local LIB = "/lua/dlua/"

describe("errors in the user's terms (dlua executable)", function()
  setup(function() dir = H.tmpdir("user-errors") end)
  teardown(function() fs.rm_rf(dir) end)

  it("names the loss, the label, its position in the batch and the step of a label out of range", function()
    experiment("label.lua", [[
      loss = nn.CrossEntropy(),
      data = (function()
        local n = 0
        return function() n = n + 1; return {image = dl.randn(4, 3), label = dl.tensor{1, 2, n == 2 and 11 or 3, 4}} end
      end)(),]])
    local code, out, err = dlua("label.lua --out run-label --quiet")
    assert.are.equal(1, code, err)
    assert.are.equal("", out)
    assert.are.equal("dlua: label.lua: training failed: step 2: loss (CrossEntropy): label 11 at position 3 of the batch " ..
      "is outside [1, 10]\n", err)
  end)

  it("names the experiment's loss function, at its line, when it returns a non-tensor", function()
    experiment("lossnum.lua", [[
      loss = function(out, y)
        return 1.5
      end,
      data = function() return {image = dl.randn(4, 3), label = dl.tensor{1, 2, 3, 4}} end,]])
    local code, _, err = dlua("lossnum.lua --out run-lossnum --quiet")
    assert.are.equal(1, code, err)
    -- line 7 of lossnum.lua is `loss = function(out, y)`
    assert.are.equal("dlua: lossnum.lua:7: training failed: step 1: dl.train: the loss function returned a number, " ..
      "not a tensor\n", err)
  end)

  it("puts a mistake in the built config at the experiment's build function", function()
    experiment("badcfg.lua", [[
      loss = nn.CrossEntropy(), eval = {evry = 2},
      data = function() return {image = dl.randn(4, 3), label = dl.tensor{1, 2, 3, 4}} end,]])
    local code, _, err = dlua("badcfg.lua --out run-badcfg --quiet")
    assert.are.equal(1, code, err)
    assert.are.equal("dlua: badcfg.lua:4: dl.train: unknown option 'evry' in eval (valid: batch_size, every, metrics, " ..
      "predictions, sample, sets); did you mean 'every'? (in the config build(hp) returns)\n", err)
  end)

  it("leads with the user's line inside a user loss function, and shows the library only with DLUA_DEBUG=1", function()
    experiment("userloss.lua", [[
      loss = function(out, y)
        local l = nn.CrossEntropy()(out, y:reshape(4, 1))
        return l
      end,
      data = function() return {image = dl.randn(4, 3), label = dl.tensor{1, 2, 3, 4}} end,]])
    local code, _, err = dlua("userloss.lua --out run-userloss --quiet")
    assert.are.equal(1, code, err)
    assert.are.equal("dlua: userloss.lua:8: training failed: step 1: CrossEntropy: labels [4, 1] must be [4], " ..
      "one per row of the logits [4, 10]\n", err)
    code, _, err = dlua("userloss.lua --out run-userloss2 --quiet", "DLUA_DEBUG=1")
    assert.are.equal(1, code, err)
    assert.truthy(err:find("^dlua: userloss.lua:8: training failed: step 1: CrossEntropy: labels %[4, 1%] must be %[4%]"), err)
    assert.truthy(err:find("stack traceback:", 1, true), err)
    assert.truthy(err:find(LIB .. "nn/losses.lua:%d+: in") and err:find(LIB .. "train/init.lua:%d+: in"), err)
  end)

  it("reports a plain script's mistake at the user's line with only the user's frames", function()
    write("plain.lua", [[
local dl = require "dlua"
local function lossy(a, b)
  local l = dl.nn.MSE()(a, b)
  return l
end
lossy(dl.zeros(4, 1), dl.zeros(4))
]])
    local code, out, err = dlua("plain.lua")
    assert.are.equal(1, code, err)
    assert.are.equal("", out)
    assert.are.equal("dlua: plain.lua:3: MSE: input [4, 1] and target [4] differ in shape\nstack traceback:\n" ..
      "\tplain.lua:3: in function 'lossy'\n\tplain.lua:6: in main chunk\n" ..
      "\t(1 frame of the dlua library left out; DLUA_DEBUG=1 shows them)\n", err)
    code, _, err = dlua("plain.lua", "DLUA_DEBUG=1")
    assert.are.equal(1, code, err)
    assert.truthy(err:find("^dlua: plain.lua:3: MSE: input %[4, 1%] and target %[4%] differ in shape\n"), err)
    assert.truthy(err:find(LIB .. "nn/losses.lua:%d+: in"), err)
    assert.is_nil(err:find("left out", 1, true))
  end)

  it("moves a runtime error raised inside the library to the user's line", function()
    -- Linear:forward indexes its input: a nil input fails inside lua/dlua/nn/init.lua
    write("nilinput.lua", "local dl = require \"dlua\"\nlocal m = dl.nn.Linear(3, 2)\n\nlocal y = m(nil)\nprint(y)\n")
    local code, _, err = dlua("nilinput.lua")
    assert.are.equal(1, code, err)
    assert.truthy(err:find("^dlua: nilinput.lua:4: attempt to index a nil value"), err)
    assert.is_nil(err:find(LIB, 1, true), err)
    assert.truthy(err:find("\tnilinput.lua:4: in main chunk\n", 1, true), err)
    code, _, err = dlua("nilinput.lua", "DLUA_DEBUG=1")    -- the same message; every frame
    assert.truthy(err:find("^dlua: nilinput.lua:4: attempt to index a nil value"), err)
    assert.truthy(err:find(LIB .. "nn/init.lua:%d+: in"), err)
  end)

  it("keeps messages without a library location as they are", function()
    write("own.lua", "error('mine')\n")
    local code, _, err = dlua("own.lua")
    assert.are.equal(1, code)
    assert.are.equal("dlua: own.lua:1: mine\nstack traceback:\n\town.lua:1: in main chunk\n", err)
  end)
end)

describe("dl.train failures in the user's terms (in process)", function()
  local tmp
  before_each(function() tmp = H.tmpdir("train-errors") end)
  after_each(function() fs.rm_rf(tmp) end)

  local function config(t)
    local m = nn.Linear(3, 10)
    local c = {model = m, loss = nn.CrossEntropy(), optimizer = optim.SGD{params = m:parameters(), lr = 0.1}, steps = 3,
      data = function() return {image = dl.randn(4, 3), label = dl.tensor{1, 2, 3, 4}} end, dir = tmp .. "/run",
      quiet = true, tracking = false}
    for k, v in pairs(t) do c[k] = v end
    return c
  end

  it("fails the run with the step and the user's line when a label is out of range", function()
    local n = 0
    local c = config{data = function()
      n = n + 1
      return {image = dl.randn(4, 3), label = dl.tensor{1, 2, 3, n == 2 and 0 or 4}}
    end}
    local r = dl.train(c); local line = debug.getinfo(1, "l").currentline
    assert.are.equal("failed", r.status)
    assert.are.equal(1, r.steps)
    assert.are.equal(string.format("%s:%d: step 2: loss (CrossEntropy): label 0 at position 4 of the batch is " ..
      "outside [1, 10] (class labels are 1-based; labels stored 0-based, as in most CSV and NumPy files, are read " ..
      "with zero_based, e.g. data.csv{..., zero_based = {\"label\"}}, or shifted with labels + 1)",
      debug.getinfo(1, "S").short_src, line), r.message)
    assert.truthy(r.traceback:find("stack traceback:", 1, true))
  end)

  it("names a loss that returns a non-scalar tensor, or nothing, and where it is defined", function()
    local def = debug.getinfo(1, "l").currentline + 1
    local function per_example(out, y) local l = nn.CrossEntropy()(out, y); return l:reshape(1) + dl.zeros(4) end
    local r = dl.train(config{loss = per_example})
    local src = debug.getinfo(1, "S").short_src
    assert.are.equal(string.format("%s:%d: step 1: dl.train: the loss function returned a tensor of shape [4], not a " ..
      "single value", src, def), r.message)
    local Silent = nn.Module:extend("Silent")
    function Silent:forward(_, _) end
    local fwd = debug.getinfo(1, "l").currentline - 1
    r = dl.train(config{loss = Silent(), dir = tmp .. "/run2"})
    assert.are.equal(string.format("%s:%d: step 1: dl.train: the loss Silent returned nothing, not a tensor", src, fwd),
      r.message)
  end)

  it("names the eval set when the evaluation fails", function()
    local va = dl.data.tensors{image = dl.randn(6, 3), label = dl.tensor{1, 2, 3, 4, 12, 1}}
    local r = dl.train(config{eval = {every = 2, sets = {valid = va}}})
    assert.are.equal(2, r.steps)
    assert.are.equal("failed", r.status)
    assert.truthy(r.message:find(": step 2 %(evaluating valid%): loss %(CrossEntropy%): label 12 at position 5 of the batch " ..
      "is outside %[1, 10%]$"), r.message)
  end)

  it("names the step at which the data ran out", function()
    local n = 0
    local r = dl.train(config{data = function()
      n = n + 1
      if n <= 2 then return {image = dl.randn(4, 3), label = dl.tensor{1, 2, 3, 4}} end
    end})
    assert.are.equal("failed", r.status)
    assert.are.equal("step 3: dl.train: the data ran out", r.message)   -- no location of its own: none added
  end)
end)

describe("dlua.util.blame", function()
  it("splits a message at its location", function()
    assert.are.same({"x.lua:3", "boom: a: b"}, {blame.split("x.lua:3: boom: a: b")})
    assert.are.same({nil, "no location: here"}, {blame.split("no location: here")})
    assert.are.same({nil, "step 2: x"}, {blame.split("step 2: x")})
  end)

  it("knows the library's files and nothing else", function()
    assert.is_true(blame.is_library(debug.getinfo(dl.train, "S").source))
    assert.is_true(blame.is_library(debug.getinfo(nn.MSE.forward, "S").source))
    assert.is_false(blame.is_library(debug.getinfo(1, "S").source))
    assert.is_false(blame.is_library("=[C]"))
  end)

  it("replaces a library location with the innermost user frame's, and leaves other messages alone", function()
    local lib = debug.getinfo(dl.train, "S").short_src
    local here = debug.getinfo(1, "S").short_src
    local msg, line = blame.message(lib .. ":12: something broke"), debug.getinfo(1, "l").currentline
    assert.are.equal(string.format("%s:%d: something broke", here, line), msg)
    assert.are.equal("other.lua:3: mine", blame.message("other.lua:3: mine"))
    assert.are.equal("no location", blame.message("no location"))
    local t = {}
    assert.are.equal(t, blame.message(t))
  end)
end)
