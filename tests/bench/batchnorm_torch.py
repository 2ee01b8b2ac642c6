#!/usr/bin/python3
"""PyTorch's BatchNorm2d forward+backward throughput, the reference for tests/bench/batchnorm.lua.

  /usr/bin/python3 tests/bench/batchnorm_torch.py [N=256] [C=32] [H=28] [threads=0 (torch default)] [win=1] [windows=5]

Same work as the dlua script: training-mode y = bn(x), then y.backward(g) with a fixed
gradient g, x.grad cleared each step; examples/s over windows of >= win seconds after
one warm-up window; prints one JSON line (median, min, max).
"""
import json
import statistics
import sys
import time

import torch

args = [float(a) for a in sys.argv[1:]]
N, C, H = (int(args[i]) if len(args) > i else d for i, d in enumerate((256, 32, 28)))
threads = int(args[3]) if len(args) > 3 else 0
win = args[4] if len(args) > 4 else 1.0
nwin = int(args[5]) if len(args) > 5 else 5
if threads > 0:
    torch.set_num_threads(threads)
torch.manual_seed(0)
bn = torch.nn.BatchNorm2d(C)
x = torch.randn(N, C, H, H, requires_grad=True)
g = torch.randn(N, C, H, H)


def step():
    x.grad = None
    bn.zero_grad(set_to_none=True)
    bn(x).backward(g)


def window():
    n, t0 = 0, time.perf_counter()
    while n < 2 or time.perf_counter() - t0 < win:
        step()
        n += 1
    return n * N / (time.perf_counter() - t0)


window()
rates = sorted(window() for _ in range(nwin))
print(json.dumps({"bench": "batchnorm_fw_bw", "impl": "torch " + torch.__version__, "shape": [N, C, H, H],
                  "threads": torch.get_num_threads(), "ex_per_s_median": round(statistics.median(rates)),
                  "min": round(rates[0]), "max": round(rates[-1])}))
