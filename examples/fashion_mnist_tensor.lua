-- examples/fashion_mnist_tensor.lua -- a two-layer MLP on Fashion-MNIST written with
-- nothing but tensors and autograd: the demo of the tensor core until the nn,
-- optim and data layers land. It reads Debian's dataset-fashion-mnist IDX files,
-- trains 784-256-10 with plain SGD, and prints test accuracy.
--   dlua examples/fashion_mnist_tensor.lua [epochs=5] [batch=128] [lr=0.1]
local dl = require "dlua"

local epochs = tonumber(arg and arg[1]) or 5
local batch = tonumber(arg and arg[2]) or 128
local lr = tonumber(arg and arg[3]) or 0.1
local ok, fm = pcall(dl.data.fashion_mnist_tensors)
if not ok then
  io.stderr:write(fm, "\n")
  os.exit(1)
end
local xtr, ytr = fm.train.x:reshape(-1, 784), fm.train.y
local xte, yte = fm.test.x:reshape(-1, 784), fm.test.y
print(string.format("train %s, test %s", table.concat(xtr:shape(), "x"), table.concat(xte:shape(), "x")))

dl.seed(0)
local function he(n_in, n_out) return (dl.randn(n_in, n_out) * math.sqrt(2 / n_in)):requires_grad(true) end
local w1, b1 = he(784, 256), dl.zeros(256):requires_grad(true)
local w2, b2 = he(256, 10), dl.zeros(10):requires_grad(true)
local params = {w1, b1, w2, b2}

local function forward(x) return ((x:matmul(w1) + b1):relu()):matmul(w2) + b2 end

local n = xtr:size(1)
local steps = n // batch
local t0 = dl.clock()
for epoch = 1, epochs do
  -- a fresh seeded permutation each epoch
  local perm = dl.randperm(n)
  local total = 0
  for s = 1, steps do
    local idx = perm:narrow(1, (s - 1) * batch + 1, batch)
    local x, y = xtr:index_select(1, idx), ytr:index_select(1, idx)
    local logp = forward(x):log_softmax(2)
    local loss = -logp:gather(2, y:reshape(batch, 1)):mean()
    for _, p in ipairs(params) do p.grad = nil end
    loss:backward()
    dl.no_grad(function()
      for _, p in ipairs(params) do p:add_(p.grad, -lr) end
    end)
    total = total + loss:item()
    if s % 100 == 0 then
      io.write(string.format("\repoch %d step %d/%d loss %.4f  %.0f ex/s", epoch, s, steps, total / s,
        ((epoch - 1) * steps + s) * batch / (dl.clock() - t0)))
      io.flush()
    end
  end
  local acc = dl.no_grad(function()
    local pred = forward(xte):argmax(2)
    return pred:eq(yte):float():mean():item()
  end)
  print(string.format("\nepoch %d: train loss %.4f, test accuracy %.4f", epoch, total / steps, acc))
end
