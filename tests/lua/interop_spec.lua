-- PyTorch interop (issue 20, item 4): tools/torch_interop.py maps a dlua checkpoint's
-- model into a torch.nn state_dict (model/1.weight -> 0.weight) and writes a torch
-- state_dict back as safetensors that dlua loads; both directions give the same outputs.
-- The key mapping alone needs only numpy; the torch cases are pending, with the reason,
-- when Debian's python3-torch is not installed.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local nn = dl.nn

local PY = "/usr/bin/python3"
local TOOL = "tools/torch_interop.py"
local q = H.shquote

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return rc, (out:gsub("rc=%d+%s*$", ""))
end

local HAVE_TORCH = sh(PY .. " -c 'import torch, numpy'") == 0

-- the same network in both: conv, batch norm, relu, flatten, linear (the dlua keys
-- 1.weight ... 5.bias, the torch keys 0.weight ... 4.bias)
local function dlua_model()
  return nn.Sequential{nn.Conv2d(1, 2, 3), nn.BatchNorm(2), nn.ReLU(), nn.Flatten(), nn.Linear(32, 3)}
end
local TORCH_MODEL = "torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2), torch.nn.ReLU(), "
  .. "torch.nn.Flatten(), torch.nn.Linear(32, 3))"

-- a trained-looking dlua model (moving averages away from 0 and 1), its checkpoint and an input
local function fixture(dir)
  dl.seed(7)
  local m = dlua_model()
  for _ = 1, 3 do m(dl.randn(8, 1, 6, 6) * 2 + 1) end
  m:eval()
  local x = dl.randn(4, 1, 6, 6)
  local tensors = {["input"] = x, ["optim/1.momentum"] = dl.zeros(2)}
  for k, t in pairs(m:state_dict()) do tensors["model/" .. k] = t end
  assert(dl.checkpoint.save(dir .. "/ck.safetensors", tensors, {step = "3"}))
  return m, x
end

local function max_diff(a, b)
  local d = 0
  local fa, fb = a:reshape(-1):totable(), b:reshape(-1):totable()
  assert.are.equal(#fa, #fb)
  for i = 1, #fa do d = math.max(d, math.abs(fa[i] - fb[i])) end
  return d
end

describe("tools/torch_interop.py", function()
  it("maps the model's keys (numbers one less, other prefixes left out)", function()
    local dir = H.tmpdir("interop-keys")
    fixture(dir)
    local rc, out = sh(PY .. " " .. TOOL .. " keys " .. q(dir .. "/ck.safetensors"))
    assert.are.equal(0, rc, out)
    assert.are.equal(table.concat({
      "model/1.bias -> 0.bias", "model/1.weight -> 0.weight",
      "model/2.bias -> 1.bias", "model/2.num_batches_tracked -> 1.num_batches_tracked",
      "model/2.running_mean -> 1.running_mean", "model/2.running_var -> 1.running_var",
      "model/2.weight -> 1.weight", "model/5.bias -> 4.bias", "model/5.weight -> 4.weight", ""}, "\n"), out)
    rc, out = sh(PY .. " " .. TOOL .. " keys " .. q(dir .. "/ck.safetensors") .. " --prefix nothing/")
    assert.are.equal(0, rc); assert.are.equal("", out)
    rc, out = sh(PY .. " " .. TOOL .. " to-torch " .. q(dir .. "/missing.safetensors") .. " x.pt")
    assert.are.equal(1, rc)
    assert.matches("^torch_interop.py: .*missing.safetensors", out)
  end)

  local torch_it = HAVE_TORCH and it or function(name) pending(name .. " (python3-torch is not installed)") end

  torch_it("loads a dlua checkpoint into torch.nn and a torch state_dict back into dlua with equal outputs", function()
    local dir = H.tmpdir("interop-torch")
    local m, x = fixture(dir)
    local y = m(x)
    -- torch: load the mapped state_dict strictly, evaluate, then change the weights (one SGD
    -- step) and write them back, with torch's outputs for the changed model
    local script = table.concat({
      "import sys; sys.path.insert(0, 'tools')",
      "import torch, numpy as np, torch_interop as ti",
      "d = sys.argv[1]",
      "net = " .. TORCH_MODEL,
      "net.load_state_dict(ti.dlua_to_torch_state_dict(d + '/ck.safetensors'), strict=True)",
      "net.eval()",
      "x = torch.from_numpy(ti.read_safetensors(d + '/ck.safetensors')[0]['input'])",
      "y = net(x)",
      "net.train(); loss = net(x).square().mean(); loss.backward()",
      "with torch.no_grad():",
      "    for p in net.parameters(): p -= 0.5 * p.grad",
      "net.eval(); y2 = net(x)",
      "ti.write_safetensors(d + '/torch_out.safetensors', {'y': y.detach().numpy(), 'y2': y2.detach().numpy()})",
      "ti.torch_state_dict_to_safetensors(net.state_dict(), d + '/back.safetensors')",
    }, "\n")
    H.spit(dir .. "/t.py", script)
    local rc, out = sh(PY .. " " .. q(dir .. "/t.py") .. " " .. q(dir))
    assert.are.equal(0, rc, out)
    local tout = assert(dl.checkpoint.load(dir .. "/torch_out.safetensors"))
    assert.is_true(max_diff(y, tout.y) < 1e-5, "torch's logits differ from dlua's: " .. max_diff(y, tout.y))
    -- back in dlua: the written file loads into a fresh model and gives torch's new outputs
    local back = assert(dl.checkpoint.load(dir .. "/back.safetensors"))
    local sd = {}
    for k, t in pairs(back) do sd[assert(k:match("^model/(.*)$"))] = t end
    dl.seed(99)
    local m2 = dlua_model()
    m2:load_state_dict(sd)
    m2:eval()
    local y2 = m2(x)
    assert.is_true(max_diff(y2, tout.y2) < 1e-5, "dlua's logits differ from torch's: " .. max_diff(y2, tout.y2))
    assert.is_true(max_diff(y2, y) > 1e-3, "the torch step changed nothing: the round trip proves nothing")
    assert.are.equal("int64", m2[2].num_batches_tracked:dtype())
    assert.are.equal(4, m2[2].num_batches_tracked:item())   -- 3 in dlua, +1 by torch's training forward
  end)
end)
