-- examples/fashion_mnist_mlp.lua -- the MLP 784-1024-1024-10 on Fashion-MNIST with
-- dl.nn and dl.optim (SGD with Nesterov momentum), the model the benchmarks compare
-- with PyTorch. dl.data.fashion_mnist_tensors reads Debian's IDX files; the full input
-- pipeline (dl.data) is a later issue.
--   dlua examples/fashion_mnist_mlp.lua [epochs=2] [batch=256] [lr=0.05]
local dl = require "dlua"
local nn, optim = dl.nn, dl.optim

local epochs = tonumber(arg and arg[1]) or 2
local batch = tonumber(arg and arg[2]) or 256
local lr = tonumber(arg and arg[3]) or 0.05
local fm = dl.data.fashion_mnist_tensors()
local xtr, ytr = fm.train.x:reshape(-1, 784), fm.train.y
local xte, yte = fm.test.x:reshape(-1, 784), fm.test.y

dl.seed(0)
dl.threads(2)
local model = nn.Sequential{nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)}
print(model)
local loss_fn = nn.CrossEntropy()
local opt = optim.SGD{params = model:parameters(), lr = lr, momentum = 0.9, nesterov = true}

local n = xtr:size(1)
local steps = n // batch
local seen, t0 = 0, dl.clock()
for epoch = 1, epochs do
  local perm = dl.randperm(n)
  local total = 0
  for s = 1, steps do
    local idx = perm:narrow(1, (s - 1) * batch + 1, batch)
    local x, y = xtr:index_select(1, idx), ytr:index_select(1, idx)
    opt:zero_grad()
    local loss = loss_fn(model(x), y)
    loss:backward()
    opt:step()
    total = total + loss:item()
    seen = seen + batch
    if s % 50 == 0 or s == steps then
      local el = dl.clock() - t0
      local eta = (epochs * steps * batch - seen) / (seen / el)
      io.write(string.format("\repoch %d step %d/%d loss %.4f  %.0f ex/s  ETA %.0fs   ", epoch, s, steps,
        total / s, seen / el, eta))
      io.flush()
    end
  end
  model:eval()
  local acc = dl.no_grad(function() return nn.accuracy(model(xte), yte) end)
  model:train()
  print(string.format("\nepoch %d: train loss %.4f, test accuracy %.4f", epoch, total / steps, acc))
end
