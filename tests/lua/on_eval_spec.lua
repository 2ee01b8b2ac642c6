-- dl.train's on_eval hook (what a study trial judges its pruning with): called
-- after every eval with the step and its metrics; a message stops the run after a
-- checkpoint of that step (status "stopped"), and a resume from there ends
-- bit-identical to a run never stopped. Wrong types are refused, naming the key.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local nn, optim, data, json, fs = dl.nn, dl.optim, dl.data, dl.json, dl.fs

-- a small classification problem: 3 classes from a linear rule
local function config(dir, over)
  dl.seed(1)
  local x = dl.randn(230, 6)
  local y = x:matmul(dl.randn(6, 3)):argmax(2)
  local tr, va = data.tensors{image = x, label = y}:split{180, 50, seed = 0}
  dl.seed(2)
  local model = nn.Sequential{nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)}
  local c = {model = model, loss = nn.CrossEntropy(), optimizer = optim.SGD{params = model:parameters(), lr = 0.1},
    data = tr:shuffle{seed = 3}:batch(16), steps = 50, dir = dir, quiet = true, tracking = false,
    eval = {every = 10, sets = {valid = va}, batch_size = 16}, checkpoint = {every = 25}}
  for k, v in pairs(over or {}) do c[k] = v end
  return c
end

local function eval_steps(dir)
  local steps, last = {}, 0
  for l in (fs.read(dir .. "/metrics.jsonl") or ""):gmatch("[^\n]+") do
    local e = json.decode(l)
    if e.split == "eval" then steps[#steps + 1] = e.step end
    last = math.max(last, e.step)
  end
  return steps, last
end

describe("dl.train on_eval", function()
  it("is called after every eval with its metrics; a message stops the run after a checkpoint of that step", function()
    local dir = H.tmpdir("oneval")
    local seen = {}
    local r = dl.train(config(dir, {on_eval = function(step, metrics)
      seen[#seen + 1] = {step, metrics["valid/accuracy"]}
      if step == 20 then return "enough at " .. step end
    end}))
    assert.are.equal("stopped", r.status)
    assert.are.equal("enough at 20", r.message)
    assert.are.equal(20, r.steps)
    -- the metrics it was given are those logged at the step
    local logged = {}
    for l in fs.read(dir .. "/metrics.jsonl"):gmatch("[^\n]+") do
      local e = json.decode(l)
      if e.split == "eval" then logged[#logged + 1] = {e.step, e["valid/accuracy"]} end
    end
    assert.are.same(logged, seen)
    assert.are.same({10, 20}, (eval_steps(dir)))
    -- checkpoint.every = 25: the stop wrote step 20's checkpoint, the one to resume from
    assert.are.equal(dir .. "/checkpoints/ckpt-000000020.safetensors", r.latest)
    assert.are.equal("stopped", json.decode(fs.read(dir .. "/result.json")).status)
    fs.rm_rf(dir)
  end)

  it("leaves a run that resumes bit-identical to one never stopped", function()
    local a, b = H.tmpdir("onevala"), H.tmpdir("onevalb")
    local ra = dl.train(config(a))
    assert.are.equal("done", ra.status)
    local rb = dl.train(config(b, {on_eval = function(step) if step == 30 then return "pause" end end}))
    assert.are.equal("stopped", rb.status)
    assert.are.equal(30, rb.steps)
    rb = dl.train(config(b, {resume = true}))
    assert.are.equal("done", rb.status)
    assert.are.same({10, 20, 30, 40, 50}, (eval_steps(b)))
    local ta = assert(dl.checkpoint.load(ra.latest))
    local tb = assert(dl.checkpoint.load(rb.latest))
    local n = 0
    for k, t in pairs(ta) do
      if k:match("^model/") then
        n = n + 1
        assert.are.equal(0, (t - tb[k]):abs():max():item(), k)
      end
    end
    assert.are.equal(4, n)
    fs.rm_rf(a); fs.rm_rf(b)
  end)

  it("refuses what is not a function, and a hook that returns anything but nil or a message", function()
    local dir = H.tmpdir("onevalbad")
    local ok, err = pcall(dl.train, config(dir, {on_eval = "stop"}))
    assert.is_false(ok)
    assert.truthy(tostring(err):find("dl.train: option 'on_eval' must be function, got string", 1, true), err)
    local r = dl.train(config(dir, {on_eval = function() return true end}))
    assert.are.equal("failed", r.status)
    assert.truthy(r.message:find("step 10: dl.train: on_eval must return nil (go on) or a message (stop the run), " ..
      "got boolean", 1, true), r.message)
    fs.rm_rf(dir)
  end)
end)
