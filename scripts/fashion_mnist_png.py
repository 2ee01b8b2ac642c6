#!/usr/bin/python3
"""Writes Fashion-MNIST out as PNG files: an ImageFolder tree and a list file
per part, in the IDX files' order, for data.images (docs/api/data.md).

    /usr/bin/python3 scripts/fashion_mnist_png.py OUT_DIR [--limit N] [--src DIR]

OUT_DIR/train/<k>-<class>/<00001..>.png (k = the IDX label, 0..9, so the
sorted folder names keep the IDX class order), the same for test, and
OUT_DIR/train.csv, OUT_DIR/test.csv: lines "train/3-dress/00004.png,3", one
per example in IDX order, labels 0-based as in the IDX files (read them with
zero_based = {"label"}). PNG is lossless: data.images{list = OUT_DIR ..
"/train.csv", channels = 1, zero_based = {"label"}} gives the pixels of
data.fashion_mnist().train, example for example (tests/lua/images_spec.lua).
The source directory is --src, else $DLUA_FASHION_MNIST, else Debian's
/usr/share/datasets/fashion-mnist (package dataset-fashion-mnist). --limit
writes the first N examples of each part. Needs PIL (python3-pil) and numpy.
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
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    arr = np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)
    return arr if limit is None else arr[:limit]


def write_part(src, out, part, prefix, limit):
    images = read_idx(os.path.join(src, prefix + "-images-idx3-ubyte.gz"), limit)
    labels = read_idx(os.path.join(src, prefix + "-labels-idx1-ubyte.gz"), limit)
    assert len(images) == len(labels), (len(images), len(labels))
    for k, name in enumerate(CLASSES):
        os.makedirs(os.path.join(out, part, "%d-%s" % (k, name)), exist_ok=True)
    lines = []
    for i, (img, lab) in enumerate(zip(images, labels)):
        rel = "%s/%d-%s/%05d.png" % (part, lab, CLASSES[lab], i + 1)
        Image.fromarray(img, "L").save(os.path.join(out, rel))
        lines.append("%s,%d\n" % (rel, lab))
    with open(os.path.join(out, part + ".csv"), "w") as f:
        f.writelines(lines)
    return len(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--src", default=os.environ.get("DLUA_FASHION_MNIST", "/usr/share/datasets/fashion-mnist"))
    a = ap.parse_args()
    n_train = write_part(a.src, a.out, "train", "train", a.limit)
    n_test = write_part(a.src, a.out, "test", "t10k", a.limit)
    print("%s: %d train and %d test images" % (a.out, n_train, n_test))


if __name__ == "__main__":
    main()
