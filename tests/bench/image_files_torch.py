"""torchvision's side of tests/bench/image_files.lua: ImageFolder + DataLoader on the same
files and transforms (PIL decoding, RandomResizedCrop 224 or RandomCrop 32 with padding 4,
RandomHorizontalFlip, ToTensor, Normalize), batch 64, prefetch 4, at 1 and 2 workers.
   /usr/bin/python3 tests/bench/image_files_torch.py DIR [windows]"""
import statistics, sys, time
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms as T

d = sys.argv[1]
windows = int(sys.argv[2]) if len(sys.argv) > 2 else 5
torch.set_num_threads(1)
norm = T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
tf = {
    "jpeg": T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), norm]),
    "png": T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(), norm]),
}
for name in ("jpeg", "png"):
    ds = datasets.ImageFolder(d + "/" + name, transform=tf[name])
    rates = {1: [], 2: []}
    loaders = {k: DataLoader(ds, batch_size=64, shuffle=True, num_workers=k, prefetch_factor=4,
                             persistent_workers=True) for k in (1, 2)}
    for w in range(windows + 1):
        for k in (1, 2):
            t0, n = time.perf_counter(), 0
            for x, y in loaders[k]:
                n += x.shape[0]
            if w > 0:
                rates[k].append(n / (time.perf_counter() - t0))
    for k in (1, 2):
        r = rates[k]
        print("torchvision %s workers=%d images/s median %.0f (%.0f-%.0f)" % (name, k, statistics.median(r), min(r), max(r)))
