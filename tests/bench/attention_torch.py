#!/usr/bin/python3
"""torch's attention forward+backward, the reference for tests/bench/attention.lua.

  /usr/bin/python3 tests/bench/attention_torch.py [B=8] [H=8] [T=128] [D=64] [causal=0] [threads=0 (torch default)] [win=1] [windows=5]

Same work as the dlua script: o = softmax(q k^T / sqrt(D) (+ causal -inf mask)) v in float32 with
S = T, then o.backward(g) with a fixed gradient g, the inputs' grads cleared each step. torch 1.13
has no F.scaled_dot_product_attention, so this is the explicit formula (matmul, softmax, matmul);
where F.scaled_dot_product_attention exists it is timed as well. Milliseconds per step over
windows of >= win seconds after one warm-up window; one JSON line per path (median, min, max).
"""
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

args = [float(a) for a in sys.argv[1:]]
B, H, T, D = (int(args[i]) if len(args) > i else d for i, d in enumerate((8, 8, 128, 64)))
causal = len(args) > 4 and args[4] != 0
threads = int(args[5]) if len(args) > 5 else 0
win = args[6] if len(args) > 6 else 1.0
nwin = int(args[7]) if len(args) > 7 else 5
if threads > 0:
    torch.set_num_threads(threads)
torch.manual_seed(0)
q, k, v = (torch.randn(B, H, T, D, requires_grad=True) for _ in range(3))
g = torch.randn(B, H, T, D)
mask = torch.ones(T, T).triu(1).bool()


def explicit():
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    if causal:
        s = s.masked_fill(mask, -math.inf)
    return s.softmax(-1) @ v


paths = {"explicit": explicit}
if hasattr(F, "scaled_dot_product_attention"):
    paths["sdpa"] = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)

for name, f in paths.items():
    def step():
        q.grad = k.grad = v.grad = None
        f().backward(g)

    def window():
        n, t0 = 0, time.perf_counter()
        while n < 2 or time.perf_counter() - t0 < win:
            step()
            n += 1
        return (time.perf_counter() - t0) * 1000 / n

    window()
    ms = sorted(window() for _ in range(nwin))
    print(json.dumps({"bench": "attention_fw_bw", "impl": "torch %s %s" % (torch.__version__, name),
                      "shape": [B, H, T, D], "causal": causal, "threads": torch.get_num_threads(),
                      "ms_median": round(statistics.median(ms), 2), "ms_min": round(ms[0], 2),
                      "ms_max": round(ms[-1], 2)}))
