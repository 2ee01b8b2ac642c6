-- examples/custom_layer.lua -- a layer written in Lua from tensor ops, trained on real data
-- with no backward code: a gated linear unit, GLU(x) = (x W + b) * sigmoid(x V + c),
-- inside a small Fashion-MNIST classifier.
--   dlua examples/custom_layer.lua [epochs=1]
local dl = require "dlua"
local nn, optim = dl.nn, dl.optim

local GLU = nn.Module:extend("GLU")

function GLU:init(n_in, n_out)
  self.value = nn.Linear(n_in, n_out)     -- submodules assigned to fields are registered
  self.gate = nn.Linear(n_in, n_out)
  self.n_in, self.n_out = n_in, n_out
end

function GLU:forward(x)
  return self.value(x) * self.gate(x):sigmoid()
end

function GLU:extra_repr() return string.format("%d -> %d", self.n_in, self.n_out) end

local epochs = tonumber(arg and arg[1]) or 1
local fm = dl.data.fashion_mnist_tensors()
local xtr, ytr = fm.train.x:reshape(-1, 784), fm.train.y
local xte, yte = fm.test.x:reshape(-1, 784), fm.test.y

dl.seed(0)
dl.threads(2)
local model = nn.Sequential{GLU(784, 256), nn.Linear(256, 10)}
print(model)
local opt = optim.Adam{params = model:parameters(), lr = 1e-3}
local ce, batch = nn.CrossEntropy(), 128
for epoch = 1, epochs do
  local perm = dl.randperm(xtr:size(1))
  for s = 1, xtr:size(1) // batch do
    local idx = perm:narrow(1, (s - 1) * batch + 1, batch)
    opt:zero_grad()
    local loss = ce(model(xtr:index_select(1, idx)), ytr:index_select(1, idx))
    loss:backward()
    opt:step()
    if s % 100 == 0 then io.write(string.format("\repoch %d step %d loss %.4f", epoch, s, loss:item())); io.flush() end
  end
  local acc = dl.no_grad(function() return nn.accuracy(model(xte), yte) end)
  print(string.format("\nepoch %d: test accuracy %.4f", epoch, acc))
end
