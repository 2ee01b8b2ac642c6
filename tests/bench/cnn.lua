-- tests/bench/cnn.lua -- training throughput (examples/s) of the CNN (conv5x5-32, pool, conv5x5-64,
-- pool, FC-1024, FC-10) with Adam, the reference script's model B, on Fashion-MNIST batches.
--   build/dlua tests/bench/cnn.lua [batch=256] [threads=2] [window_seconds=2] [windows=5] [clock=wall|cpu]
-- Protocol (tests/bench/window.lua): one warm-up window, then `windows` timed windows of at least
-- window_seconds each; prints one JSON line with the median, min and max examples/s.
-- clock=cpu times by the process's CPU time (os.clock, all threads summed): on a shared, loaded
-- machine, examples per CPU-second at threads=1 compare two builds more steadily than wall time.
local dl = require "dlua"
local nn, optim = dl.nn, dl.optim
local window = dofile(((arg[0] or ""):match("^(.*/)") or "./") .. "window.lua")

local batch = tonumber(arg[1]) or 256
local threads = tonumber(arg[2]) or 2
local win, nwin = tonumber(arg[3]) or 2, tonumber(arg[4]) or 5
local clock = ({wall = dl.clock, cpu = os.clock})[arg[5] or "wall"] or error("clock must be wall or cpu", 0)
dl.threads(threads)
local train = dl.data.fashion_mnist_tensors().train
local x, y = train.x, train.y
dl.seed(0)
local model = nn.Sequential{
  nn.Conv2d(1, 32, 5, {padding = 2}), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(32, 64, 5, {padding = 2}), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(), nn.Linear(3136, 1024), nn.ReLU(), nn.Linear(1024, 10),
}
local ce = nn.CrossEntropy()
local opt = optim.Adam{params = model:parameters(), lr = 1e-3}
local step = window.train_step(model, ce, opt, x, y, batch)
local med, lo, hi = window.run(step, {seconds = win, windows = nwin, per_step = batch, clock = clock})
print(string.format('{"bench":"cnn","impl":"dlua","batch":%d,"threads":%d,"clock":"%s","ex_per_s_median":%.0f,"min":%.0f,"max":%.0f}',
  batch, threads, arg[5] or "wall", med, lo, hi))
