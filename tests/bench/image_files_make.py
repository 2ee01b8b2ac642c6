"""Writes the image folders of tests/bench/run_image_files.sh (an ImageFolder tree each):
  <out>/jpeg: 512 JPEG files, 400 wide x 350 high, quality 90, 4 classes (ImageNet-like)
  <out>/png:  2048 PNG files, 32 x 32 RGB, 10 classes (CIFAR-like)
Seeded smooth noise (a few random gradients and blobs), so the files cost what photographs
of that size cost to decode, not what flat colour costs. Run with /usr/bin/python3 (PIL)."""
import os, sys
import numpy as np
from PIL import Image

out = sys.argv[1]
rng = np.random.default_rng(1)

def picture(h, w):
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.zeros((h, w, 3), np.float32)
    for c in range(3):
        a, b, p = rng.uniform(-1, 1, 3)
        img[..., c] = 128 + 60 * np.sin(a * x / 17 + b * y / 23 + p)
    for _ in range(6):
        cy, cx, r = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(5, max(6, h / 4))
        img += (rng.uniform(-80, 80, 3) * np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * r * r))[..., None])
    img += rng.normal(0, 6, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))

for kind, n, classes, (h, w) in (("jpeg", 512, 4, (350, 400)), ("png", 2048, 10, (32, 32))):
    for i in range(n):
        d = os.path.join(out, kind, "class%02d" % (i % classes))
        os.makedirs(d, exist_ok=True)
        im = picture(h, w)
        if kind == "jpeg":
            im.save(os.path.join(d, "%05d.jpg" % i), quality=90)
        else:
            im.save(os.path.join(d, "%05d.png" % i))
print("wrote", out)
