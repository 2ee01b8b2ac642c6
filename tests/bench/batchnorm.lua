-- tests/bench/batchnorm.lua -- BatchNorm forward+backward throughput (examples/s) on one shape,
-- the counterpart of tests/bench/batchnorm_torch.py (PyTorch's BatchNorm2d, same work).
--   build/dlua tests/bench/batchnorm.lua [N=256] [C=32] [H=28] [threads=2] [win=1] [windows=5] [virtual_batch=0]
-- A step is y = bn(x) in training mode, then y:backward(g) with a fixed gradient g; x.grad is
-- cleared each step (as the torch script does), so the step is BN alone. Median, min and max of
-- the windows (each at least win seconds and 2 steps) after one warm-up window (tests/bench/window.lua);
-- one JSON line.
local dl = require "dlua"
local window = dofile(((arg[0] or ""):match("^(.*/)") or "./") .. "window.lua")

local N, C, H = tonumber(arg[1]) or 256, tonumber(arg[2]) or 32, tonumber(arg[3]) or 28
local threads = tonumber(arg[4]) or 2
local win, nwin = tonumber(arg[5]) or 1, tonumber(arg[6]) or 5
local vb = tonumber(arg[7]) or 0
dl.threads(threads)
dl.seed(0)
local bn = dl.nn.BatchNorm(C, {virtual_batch = vb > 0 and vb or false})
local x = dl.randn(N, C, H, H):requires_grad(true)
local g = dl.randn(N, C, H, H)

local function step()
  x.grad = nil
  bn:zero_grad()
  bn(x):backward(g)
end

local med, lo, hi = window.run(step, {seconds = win, windows = nwin, per_step = N, min_steps = 2})
print(string.format('{"bench":"batchnorm_fw_bw","impl":"dlua","shape":[%d,%d,%d,%d],"virtual_batch":%d,' ..
  '"threads":%d,"ex_per_s_median":%.0f,"min":%.0f,"max":%.0f}', N, C, H, H, vb, threads, med, lo, hi))
