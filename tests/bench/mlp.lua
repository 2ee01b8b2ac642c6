-- tests/bench/mlp.lua -- training throughput (examples/s) of the MLP 784-1024-1024-10 with
-- SGD-Nesterov, the reference script's model A, on batches sliced from Fashion-MNIST.
--   build/dlua tests/bench/mlp.lua [batch=256] [threads=2] [window_seconds=2] [windows=5]
-- Protocol (tests/bench/window.lua): one warm-up window, then `windows` timed windows of at least
-- window_seconds each; prints one JSON line with the median, min and max examples/s.
local dl = require "dlua"
local nn, optim = dl.nn, dl.optim
local window = dofile(((arg[0] or ""):match("^(.*/)") or "./") .. "window.lua")

local batch = tonumber(arg[1]) or 256
local threads = tonumber(arg[2]) or 2
local win, nwin = tonumber(arg[3]) or 2, tonumber(arg[4]) or 5
dl.threads(threads)
local train = dl.data.fashion_mnist_tensors().train
local x, y = train.x:reshape(60000, 784), train.y
dl.seed(0)
local model = nn.Sequential{nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)}
local ce = nn.CrossEntropy()
local opt = optim.SGD{params = model:parameters(), lr = 0.01, momentum = 0.9, nesterov = true}
local step = window.train_step(model, ce, opt, x, y, batch)
local med, lo, hi = window.run(step, {seconds = win, windows = nwin, per_step = batch})
print(string.format('{"bench":"mlp","impl":"dlua","batch":%d,"threads":%d,"ex_per_s_median":%.0f,"min":%.0f,"max":%.0f}',
  batch, threads, med, lo, hi))
