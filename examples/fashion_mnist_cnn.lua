-- examples/fashion_mnist_cnn.lua -- the TensorFlow-tutorial CNN on Fashion-MNIST with
-- dl.nn and dl.optim: conv5x5-32, pool, conv5x5-64, pool, FC-1024, FC-10, Adam lr 1e-3,
-- batch 128 (model B of the PyTorch reference). dl.data.fashion_mnist_tensors reads Debian's IDX files; the full input
-- pipeline (dl.data) is a later issue.
--   dlua examples/fashion_mnist_cnn.lua [epochs=2] [batch=128] [lr=0.001]
local dl = require "dlua"
local nn, optim = dl.nn, dl.optim

local epochs = tonumber(arg and arg[1]) or 2
local batch = tonumber(arg and arg[2]) or 128
local lr = tonumber(arg and arg[3]) or 1e-3
local fm = dl.data.fashion_mnist_tensors()
-- standardise with the training set's pixel mean and std (test uses the same numbers)
local mean = fm.train.x:mean():item()
local std = ((fm.train.x - mean) ^ 2):mean():item() ^ 0.5
local xtr, ytr = (fm.train.x - mean) / std, fm.train.y
local xte, yte = (fm.test.x - mean) / std, fm.test.y

dl.seed(tonumber(os.getenv("SEED")) or 0)
dl.threads(2)
local model = nn.Sequential{
  nn.Conv2d(1, 32, 5, {padding = 2}), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(32, 64, 5, {padding = 2}), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(), nn.Linear(3136, 1024), nn.ReLU(), nn.Linear(1024, 10),
}
print(model)
local loss_fn = nn.CrossEntropy()
local opt = optim.Adam{params = model:parameters(), lr = lr}

local n = xtr:size(1)
local steps = n // batch
-- the playbook's default: decay the learning rate over the run (cosine from lr to 0)
local schedule = optim.schedule.cosine{steps = epochs * steps}
local seen, t0 = 0, dl.clock()
for epoch = 1, epochs do
  local perm = dl.randperm(n)
  local total = 0
  for s = 1, steps do
    local idx = perm:narrow(1, (s - 1) * batch + 1, batch)
    local x, y = xtr:index_select(1, idx), ytr:index_select(1, idx)
    opt:set_lr(lr * schedule((epoch - 1) * steps + s))
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
  local correct = 0
  dl.no_grad(function()                           -- evaluate in chunks of 1000
    for i = 1, xte:size(1), 1000 do
      local m = math.min(1000, xte:size(1) - i + 1)
      correct = correct + nn.accuracy(model(xte:narrow(1, i, m)), yte:narrow(1, i, m)) * m
    end
  end)
  local acc = correct / xte:size(1)
  model:train()
  print(string.format("\nepoch %d: train loss %.4f, test accuracy %.4f", epoch, total / steps, acc))
end
