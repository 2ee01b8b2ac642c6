-- tests/bench/resnet18.lua -- training throughput (examples/s) of ResNet-18 in its classic CIFAR form
-- on Fashion-MNIST zero-padded from 28x28 to 32x32, SGD with Nesterov momentum 0.9, lr 0.05.
-- The PyTorch reference is tests/bench/resnet18_torch.py (the same model, data, optimizer and protocol).
--   build/dlua tests/bench/resnet18.lua [batch=128] [threads=2] [window_seconds=10] [windows=3] [min_steps=5]
--
-- Model (examples/models/resnet.lua with post_norm = true, norm = "batch", init = "default"):
-- conv3x3 1->64 stride 1 -> BN -> ReLU (no max-pool); 4 stages of 2 basic blocks, 64/128/256/512
-- channels, strides 1/2/2/2, block = relu(shortcut(x) + BN(conv3x3(relu(BN(conv3x3(x)))))), the
-- shortcut a 1x1 conv + BN where the shape changes; global average pool; Linear 512 -> 10. Convs have
-- no bias. 11,172,810 parameters. Init: PyTorch's defaults (U(+-1/sqrt(fan_in)) for conv and linear).
--
-- Protocol (tests/bench/window.lua, as mlp.lua and cnn.lua): one warm-up window, then `windows` timed
-- windows, each running until it has lasted window_seconds AND done min_steps steps; prints one JSON
-- line with the median, min and max examples/s, and the FLOPs per example (2 x forward multiply-accumulates x 3 for
-- forward + backward, the reference scripts' count) and the median's GFLOP/s.
local dl = require "dlua"
local optim = dl.optim
local here = (arg[0] or ""):match("^(.*/)") or "./"
local window = dofile(here .. "window.lua")
local resnet = dofile(here .. "../../examples/models/resnet.lua")

local batch = tonumber(arg[1]) or 128
local threads = tonumber(arg[2]) or 2
local win, nwin = tonumber(arg[3]) or 10, tonumber(arg[4]) or 3
local min_steps = tonumber(arg[5]) or 5
dl.threads(threads)

-- Fashion-MNIST scaled to [0, 1] (no standardisation, as the reference), zero-padded by 2 on each side
local train = dl.data.fashion_mnist_tensors().train
local n = train.x:size(1)
local x = dl.zeros(n, 1, 32, 32)
x:narrow(3, 3, 28):narrow(4, 3, 28):copy_(train.x)
local y = train.y

dl.seed(0)
local model = resnet.build{in_channels = 1, classes = 10, stages = {2, 2, 2, 2}, width = 64, stem = "small",
                           norm = "batch", post_norm = true, init = "default"}
local ce = dl.nn.CrossEntropy()
local opt = optim.SGD{params = model:parameters(), lr = 0.05, momentum = 0.9, nesterov = true}

-- forward multiply-accumulates per example: every conv (H_out W_out C_out C_in k^2) and the Linear
local function macs()
  local total, hw, cin = 32 * 32 * 1 * 64 * 9, 32, 64      -- the stem
  for i = 1, 4 do
    local cout, stride = 64 << (i - 1), i == 1 and 1 or 2
    hw = hw // stride
    for b = 1, 2 do
      local c1 = b == 1 and cin or cout
      total = total + hw * hw * cout * c1 * 9 + hw * hw * cout * cout * 9
      if b == 1 and (stride ~= 1 or cin ~= cout) then total = total + hw * hw * cout * cin end
    end
    cin = cout
  end
  return total + 512 * 10
end
local flops_ex = 2 * macs() * 3

local step = window.train_step(model, ce, opt, x, y, batch)
local med, lo, hi = window.run(step, {seconds = win, windows = nwin, per_step = batch, min_steps = min_steps})
print(string.format('{"bench":"resnet18","impl":"dlua","batch":%d,"threads":%d,"ex_per_s_median":%.1f,' ..
  '"min":%.1f,"max":%.1f,"windows":%d,"flops_per_example":%d,"gflops_median":%.2f}',
  batch, threads, med, lo, hi, nwin, flops_ex, med * flops_ex * 1e-9))
