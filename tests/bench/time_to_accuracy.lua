-- tests/bench/time_to_accuracy.lua -- training seconds until the CNN (the reference's model B) reaches a
-- test accuracy, the dlua side of `../shared/bench/torch_reference.py accuracy` (tests/bench/run_time_to_accuracy.sh
-- runs both).
--   build/dlua tests/bench/time_to_accuracy.lua [seed=0] [epochs=4] [target=0.90] [threads=2]
--
-- Identical to the reference's accuracy mode: conv5x5-32 pad 2, ReLU, maxpool 2, conv5x5-64 pad 2, ReLU,
-- maxpool 2, FC 3136-1024, ReLU, FC 10, with the default init (U(+-1/sqrt(fan_in)) for weights and
-- biases, PyTorch's family); Adam lr 1e-3; batch 128 over the 60,000 training images (the last batch
-- has 96); inputs scaled to [0, 1], not standardised (as the reference); a fresh permutation drawn inside
-- each timed epoch; test accuracy (batches of 1,000, eval mode, no recording) after each epoch, outside
-- the timed part. One JSON line per epoch (epoch_s, cum_train_s, ex_per_s, test_acc, last_loss, eval_s,
-- the reference's fields), then one summary line with seconds_to_target: the cum_train_s of the first
-- epoch whose test accuracy is >= target (null if none).
-- Adam differs from torch.optim.Adam only in where eps enters (docs/optimizers.md: m / (sqrt(v) + eps)
-- with the bias correction folded into the step; PyTorch adds eps to the corrected sqrt(v)).
local dl = require "dlua"
local nn, optim = dl.nn, dl.optim

local seed = tonumber(arg[1]) or 0
local epochs = tonumber(arg[2]) or 4
local target = tonumber(arg[3]) or 0.90
local threads = tonumber(arg[4]) or 2
dl.threads(threads)

local fm = dl.data.fashion_mnist_tensors()
local xtr, ytr, xte, yte = fm.train.x, fm.train.y, fm.test.x, fm.test.y
dl.seed(seed)
local model = nn.Sequential{
  nn.Conv2d(1, 32, 5, {padding = 2}), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(32, 64, 5, {padding = 2}), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(), nn.Linear(3136, 1024), nn.ReLU(), nn.Linear(1024, 10),
}
local ce = nn.CrossEntropy()
local opt = optim.Adam{params = model:parameters(), lr = 1e-3}
local bs, n = 128, xtr:size(1)

local function evaluate()
  model:eval()
  local correct = 0
  dl.no_grad(function()
    for j = 1, xte:size(1), 1000 do
      local len = math.min(1000, xte:size(1) - j + 1)
      local pred = model(xte:narrow(1, j, len)):argmax(2)
      correct = correct + pred:eq(yte:narrow(1, j, len)):sum():item()
    end
  end)
  model:train()
  return correct / xte:size(1)
end

local train_s, reached, reached_epoch = 0, nil, nil
for ep = 1, epochs do
  local t0 = dl.clock()
  local perm = dl.randperm(n)                    -- shuffling is inside the timed epoch
  local loss
  for j = 1, n, bs do
    local idx = perm:narrow(1, j, math.min(bs, n - j + 1))
    opt:zero_grad()
    loss = ce(model(xtr:index_select(1, idx)), ytr:index_select(1, idx))
    loss:backward()
    opt:step()
  end
  local dt = dl.clock() - t0
  train_s = train_s + dt
  local t1 = dl.clock()
  local acc = evaluate()
  local et = dl.clock() - t1
  if not reached and acc >= target then reached, reached_epoch = train_s, ep end
  print(string.format('{"bench":"epoch","impl":"dlua","model":"B","batch":%d,"seed":%d,"threads":%d,"epoch":%d,' ..
    '"epoch_s":%.2f,"cum_train_s":%.2f,"ex_per_s":%.1f,"test_acc":%.4f,"last_loss":%.4f,"eval_s":%.2f}',
    bs, seed, threads, ep, dt, train_s, n / dt, acc, loss:item(), et))
  io.stdout:flush()
end
print(string.format('{"bench":"time_to_accuracy","impl":"dlua","seed":%d,"target":%.4f,"epochs":%d,' ..
  '"seconds_to_target":%s,"epoch_reached":%s}', seed, target, epochs,
  reached and string.format("%.2f", reached) or "null", reached_epoch and tostring(reached_epoch) or "null"))
