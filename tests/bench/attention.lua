-- tests/bench/attention.lua -- the fused attention op, forward + backward, milliseconds per step,
-- the counterpart of tests/bench/attention_torch.py (torch's explicit softmax(q k^T / sqrt(D)) v:
-- torch 1.13 has no F.scaled_dot_product_attention). Also the same formula from dlua's own ops
-- (matmul, scale, softmax, matmul), the path the fused op replaces.
--   build/dlua tests/bench/attention.lua [B=8] [H=8] [T=128] [D=64] [causal=0] [threads=2] [win=1] [windows=5]
-- A step is o = attention(q, k, v) (S = T, float32), then o:backward(g) with a fixed gradient g;
-- the inputs' grads are cleared each step. Median, min and max over the windows (each at least win
-- seconds and 2 steps) after one warm-up window (tests/bench/window.lua), and the memory one step
-- allocates above what was in use before it (step_peak_mib); one JSON line per path.
local dl = require "dlua"
local window = dofile(((arg[0] or ""):match("^(.*/)") or "./") .. "window.lua")

local B, H, T, D = tonumber(arg[1]) or 8, tonumber(arg[2]) or 8, tonumber(arg[3]) or 128, tonumber(arg[4]) or 64
local causal = (tonumber(arg[5]) or 0) ~= 0
local threads = tonumber(arg[6]) or 2
local win, nwin = tonumber(arg[7]) or 1, tonumber(arg[8]) or 5
dl.threads(threads)
dl.seed(0)
local q = dl.randn(B, H, T, D):requires_grad(true)
local k = dl.randn(B, H, T, D):requires_grad(true)
local v = dl.randn(B, H, T, D):requires_grad(true)
local g = dl.randn(B, H, T, D)
-- the composed path's causal mask: -inf above the diagonal
local bias = dl.where(dl.arange(T):reshape(1, T):gt(dl.arange(T):reshape(T, 1)), -math.huge, 0)

local PATHS = {
  fused = function() return q:scaled_dot_product_attention(k, v, {causal = causal}) end,
  composed = function()
    local s = q:matmul(k:transpose(3, 4)):scale(1 / math.sqrt(D))
    if causal then s = s + bias end
    return s:softmax(4):matmul(v)
  end,
}

for _, name in ipairs({"fused", "composed"}) do
  local f = PATHS[name]
  local function step()
    q.grad, k.grad, v.grad = nil, nil, nil
    f():backward(g)
  end
  local med, lo, hi = window.run(step, {seconds = win, windows = nwin, per_step = 1, min_steps = 2})
  q.grad, k.grad, v.grad = nil, nil, nil
  collectgarbage()
  local base = dl.memory.stats().in_use
  dl.memory.reset_peak()
  step()
  local extra = (dl.memory.stats().peak - base) / 2 ^ 20     -- the step's own memory: activations, grads
  print(string.format('{"bench":"attention_fw_bw","impl":"dlua %s","shape":[%d,%d,%d,%d],"causal":%s,' ..
    '"threads":%d,"ms_median":%.2f,"ms_min":%.2f,"ms_max":%.2f,"step_peak_mib":%.1f}', name, B, H, T, D,
    tostring(causal), threads, 1000 / med, 1000 / hi, 1000 / lo, extra))
end
