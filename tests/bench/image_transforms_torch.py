"""torchvision's DataLoader doing tests/bench/image_transforms.lua's augmentation (issue 32).

    /usr/bin/python3 tests/bench/image_transforms_torch.py [windows]

Reads the images the Lua benchmark wrote ($TMPDIR/dlua-bench-images.safetensors: uint8
[N, 3, 350, 400]; run that first) and applies, per example, torchvision's
RandomResizedCrop(224, antialias=True), RandomHorizontalFlip(), ConvertImageDtype(float32)
(x / 255) and Normalize(ImageNet mean and std); batch 32, shuffled, num_workers 1 and 2
(persistent workers, prefetch_factor 4, one torch thread per worker); the loop only takes
the batches. Each window is two passes per worker count, interleaved; prints the median and
range of images/s and the CPU milliseconds per image of the main process and its workers.
"""
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset
import torchvision.transforms as T

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import torch_interop as ti  # noqa: E402

PATH = os.path.join(os.environ.get("TMPDIR", "/tmp"), "dlua-bench-images.safetensors")


class Images(Dataset):
    def __init__(self, x):
        self.x = x
        self.tf = T.Compose([T.RandomResizedCrop(224, antialias=True), T.RandomHorizontalFlip(),
                             T.ConvertImageDtype(torch.float32),
                             T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.tf(self.x[i]), i + 1


def one_thread(_):
    torch.set_num_threads(1)


def cpu_seconds(pids):
    """user + system CPU seconds of these processes (from /proc/<pid>/stat)"""
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def main():
    windows = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    x = torch.from_numpy(ti.read_safetensors(PATH)[0]["image"])
    ds = Images(x)
    loaders = {k: DataLoader(ds, batch_size=32, shuffle=True, num_workers=k, persistent_workers=True,
                             prefetch_factor=4, worker_init_fn=one_thread) for k in (1, 2)}
    rates, cpu_ms = {1: [], 2: []}, {1: [], 2: []}
    for w in range(windows + 1):
        for k in (1, 2):
            it = iter(loaders[k])                      # starts the persistent workers once
            pids = [os.getpid()] + [p.pid for p in loaders[k]._iterator._workers]
            t0, c0, n = time.perf_counter(), cpu_seconds(pids), 0
            for p in range(2):
                for img, _ in (it if p == 0 else loaders[k]):
                    n += img.shape[0]
            if w > 0:
                rates[k].append(n / (time.perf_counter() - t0))
                cpu_ms[k].append((cpu_seconds(pids) - c0) / n * 1000)
    for k in (1, 2):
        r, c = sorted(rates[k]), sorted(cpu_ms[k])
        print(f"torch workers {k}: {r[(len(r) - 1) // 2]:7.0f} images/s  [{r[0]:.0f}, {r[-1]:.0f}]"
              f"  CPU {c[(len(c) - 1) // 2]:.3f} ms per image")


if __name__ == "__main__":
    main()
