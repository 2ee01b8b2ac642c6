#!/usr/bin/python3
"""PyTorch's training throughput of ResNet-18 (CIFAR form), the reference for tests/bench/resnet18.lua.

  /usr/bin/python3 tests/bench/resnet18_torch.py [batch=128] [threads=0 (torch default)] [win=10] [windows=3] [min_steps=5]

Run it with Debian's interpreter and python3-torch 1.13; set OMP_NUM_THREADS / OPENBLAS_NUM_THREADS
(and OMP_WAIT_POLICY) in the environment, as tests/bench/run_training.sh does. The model is written
here (torchvision may be missing): conv3x3 1->64 stride 1 -> BN -> ReLU (no max-pool); 4 stages of 2
BasicBlocks, 64/128/256/512 channels, strides 1/2/2/2, block = relu(shortcut(x) + bn2(conv2(relu(bn1(conv1(x)))))),
shortcut a 1x1 conv + BN where the shape changes; global average pool; Linear 512 -> 10; convs without
bias, PyTorch's default init; 11,172,810 parameters. Data: Fashion-MNIST scaled to [0, 1] by
../shared/bench/torch_reference.py's loader, zero-padded 28 -> 32. SGD lr 0.05, momentum 0.9, Nesterov.
Protocol as the dlua script: one warm-up window, then `windows` windows, each lasting >= win seconds
and >= min_steps steps; one JSON line with the median, min and max examples/s, FLOPs per example
(2 x forward MACs x 3) and the median's GFLOP/s.
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../shared/bench"))
from torch_reference import load_fashion  # noqa: E402  (the reference's data loader: /255, no standardisation)

args = sys.argv[1:]
batch = int(args[0]) if len(args) > 0 else 128
threads = int(args[1]) if len(args) > 1 else 0
win = float(args[2]) if len(args) > 2 else 10.0
nwin = int(args[3]) if len(args) > 3 else 3
min_steps = int(args[4]) if len(args) > 4 else 5
default_threads = torch.get_num_threads()
if threads > 0:
    torch.set_num_threads(threads)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


def resnet18(in_channels=1, classes=10):
    layers = [nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for i, cout in enumerate((64, 128, 256, 512)):
        for b in range(2):
            layers.append(BasicBlock(cin, cout, 2 if (b == 0 and i > 0) else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def macs():
    """forward multiply-accumulates per example: every conv (H_out W_out C_out C_in k^2) and the Linear"""
    total, hw, cin = 32 * 32 * 1 * 64 * 9, 32, 64
    for i in range(4):
        cout, stride = 64 << i, 1 if i == 0 else 2
        hw //= stride
        for b in range(2):
            c1 = cin if b == 0 else cout
            total += hw * hw * cout * c1 * 9 + hw * hw * cout * cout * 9
            if b == 0 and (stride != 1 or cin != cout):
                total += hw * hw * cout * cin
        cin = cout
    return total + 512 * 10


xtr, ytr, _, _ = load_fashion()
xs = F.pad(xtr, (2, 2, 2, 2)).contiguous()
ys = ytr
torch.manual_seed(0)
model = resnet18()
model.train()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
lossf = nn.CrossEntropyLoss()
nb = xs.shape[0] // batch
k = 0


def step():
    global k
    j = k * batch
    k = (k + 1) % nb
    opt.zero_grad()
    lossf(model(xs[j:j + batch]), ys[j:j + batch]).backward()
    opt.step()


def window():
    n, t0 = 0, time.perf_counter()
    while n < min_steps or time.perf_counter() - t0 < win:
        step()
        n += 1
    return n * batch / (time.perf_counter() - t0)


window()
rates = sorted(window() for _ in range(nwin))
med = statistics.median(rates)
flops_ex = 2 * macs() * 3
print(json.dumps({"bench": "resnet18", "impl": "torch " + torch.__version__, "batch": batch,
                  "threads": torch.get_num_threads(), "torch_default_threads": default_threads,
                  "omp_env": os.environ.get("OMP_NUM_THREADS", "(unset)"),
                  "openblas_env": os.environ.get("OPENBLAS_NUM_THREADS", "(unset)"),
                  "params": sum(p.numel() for p in model.parameters()),
                  "ex_per_s_median": round(med, 1), "min": round(rates[0], 1), "max": round(rates[-1], 1),
                  "windows": nwin, "flops_per_example": flops_ex,
                  "gflops_median": round(med * flops_ex * 1e-9, 2)}), flush=True)
