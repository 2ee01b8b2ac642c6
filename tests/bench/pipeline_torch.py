"""PyTorch DataLoader doing the augmentation of tests/bench/pipeline.lua (issue 5).

    /usr/bin/python3 tests/bench/pipeline_torch.py [windows]

Fashion-MNIST train (first 12,800 examples), per example: random crop 28 after
padding 4, horizontal flip with p = 0.5, random affine (rotation +-15 degrees,
zoom 0.9..1.1, shift up to 0.1 of the size, bilinear, zero fill) via
affine_grid + grid_sample, then / 255; batch 256, shuffled. torchvision is not
installed here, so the transforms are written with torch ops, one example at a
time as torchvision would do them. num_workers 1 and 2 (persistent workers,
prefetch_factor 4, one torch thread per worker); the loop only takes the
batches. Prints the median and range of examples/s over the windows.
"""
import gzip
import math
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

DIR = "/usr/share/datasets/fashion-mnist"
N = 12800


def load(name, offset):
    with gzip.open(f"{DIR}/{name}") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


class Augmented(Dataset):
    def __init__(self):
        self.x = load("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)[:N]
        self.y = load("train-labels-idx1-ubyte.gz", 8)[:N].astype(np.int64) + 1

    def __len__(self):
        return N

    def __getitem__(self, i):
        img = torch.from_numpy(self.x[i].copy())
        img = F.pad(img, (4, 4, 4, 4))
        dy, dx = torch.randint(0, 9, (2,)).tolist()
        img = img[:, dy:dy + 28, dx:dx + 28]
        if torch.rand(1).item() < 0.5:
            img = torch.flip(img, [2])
        r = torch.rand(4).tolist()
        ang = (2 * r[0] - 1) * 15 * math.pi / 180
        sc = 0.9 + 0.2 * r[1]
        tx, ty = (2 * r[2] - 1) * 0.1 * 2, (2 * r[3] - 1) * 0.1 * 2   # grid coordinates span 2
        c, s = math.cos(ang) / sc, math.sin(ang) / sc
        theta = torch.tensor([[[c, s, -tx], [-s, c, -ty]]], dtype=torch.float32)
        grid = F.affine_grid(theta, (1, 1, 28, 28), align_corners=False)
        img = F.grid_sample(img.float()[None], grid, mode="bilinear", padding_mode="zeros", align_corners=False)[0]
        return img / 255, self.y[i]


def one_thread(_):
    torch.set_num_threads(1)


def main():
    windows = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    torch.set_num_threads(1)
    ds = Augmented()
    loaders = {n: DataLoader(ds, batch_size=256, shuffle=True, num_workers=n, persistent_workers=True,
                             prefetch_factor=4, worker_init_fn=one_thread) for n in (1, 2)}
    rates = {1: [], 2: []}
    for w in range(windows + 1):
        for n, dl in loaders.items():
            t0 = time.perf_counter()
            count = 0
            for x, _ in dl:
                count += x.shape[0]
            if w > 0:
                rates[n].append(count / (time.perf_counter() - t0))
    for n in (1, 2):
        r = sorted(rates[n])
        print(f"num_workers {n}: {r[len(r) // 2]:8.0f} ex/s  [{r[0]:.0f}, {r[-1]:.0f}]")
    print(f"speed-up      : {sorted(rates[2])[windows // 2] / sorted(rates[1])[windows // 2]:.2f}x")


if __name__ == "__main__":
    main()
