#!/usr/bin/python3
"""Writes a CIFAR-style image folder from Fashion-MNIST: 32x32 RGB PNG files in the
torchvision ImageFolder layout, for the ResNet-18 recipe (examples/cifar_resnet18.lua)
when no CIFAR-10 folder is at hand.

    /usr/bin/python3 scripts/fashion_mnist_cifar.py OUT_DIR [--limit N] [--src DIR]

OUT_DIR/train/<k>-<class>/<00001..>.png and OUT_DIR/test/...: each 28x28 image is
zero-padded to 32x32 and coloured: its gray value g becomes (g*r, g*g', g*b) for a colour
(r, g', b) drawn per image from a fixed seed, so the three channels differ as in natural
images while the class stays in the shape. Deterministic: the same files every run.
--limit writes the first N examples of each part. Needs PIL and numpy.
"""
import argparse
import gzip
import os

import numpy as np
from PIL import Image

CLASSES = ["t-shirt-top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle-boot"]


def read_idx(path, limit):
    with gzip.open(path, "rb") as f:
        data = f.read()
    nd = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    a = np.frombuffer(data, np.uint8, offset=4 + 4 * nd).reshape(dims)
    return a[:limit] if limit else a


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--src", default=os.environ.get("DLUA_FASHION_MNIST", "/usr/share/datasets/fashion-mnist"))
    o = ap.parse_args()
    rng = np.random.default_rng(32)
    for part, prefix in (("train", "train"), ("test", "t10k")):
        images = read_idx(os.path.join(o.src, prefix + "-images-idx3-ubyte.gz"), o.limit)
        labels = read_idx(os.path.join(o.src, prefix + "-labels-idx1-ubyte.gz"), o.limit)
        count = {}
        for img, lab in zip(images, labels):
            colour = rng.uniform(0.35, 1.0, 3)
            padded = np.zeros((32, 32), np.float64)
            padded[2:30, 2:30] = img
            rgb = np.clip(np.round(padded[..., None] * colour[None, None, :]), 0, 255).astype(np.uint8)
            d = os.path.join(o.out, part, "%d-%s" % (lab, CLASSES[lab]))
            os.makedirs(d, exist_ok=True)
            count[lab] = count.get(lab, 0) + 1
            Image.fromarray(rgb, "RGB").save(os.path.join(d, "%05d.png" % count[lab]))
        print("%s: %d images" % (part, len(images)))


if __name__ == "__main__":
    main()
