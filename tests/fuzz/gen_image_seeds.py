"""Writes the seed corpora of fuzz_png and fuzz_jpeg (tests/fuzz/corpus/png,
tests/fuzz/corpus/jpeg) with PIL: small valid images in every mode and a few
broken ones (truncated, a flipped data byte, zero bytes).
scripts/fuzz.sh --seeds runs it after gen_seeds.c.

    /usr/bin/python3 tests/fuzz/gen_image_seeds.py tests/fuzz/corpus
"""
import io
import os
import sys

import numpy as np
from PIL import Image

root = sys.argv[1]
rng = np.random.default_rng(1)


def rgb(h, w):
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def save(img, fmt, **kw):
    b = io.BytesIO()
    img.save(b, fmt, **kw)
    return b.getvalue()


png = {
    "rgb": save(Image.fromarray(rgb(5, 7)), "PNG"),
    "gray": save(Image.fromarray(rgb(4, 3)[..., 0]), "PNG"),
    "rgba": save(Image.fromarray(np.concatenate([rgb(3, 4), rgb(3, 4)[..., :1]], 2), "RGBA"), "PNG"),
    "la": save(Image.fromarray(rgb(3, 3)[..., :2], "LA"), "PNG"),
    "palette": save(Image.fromarray(rgb(6, 5)).quantize(colors=5), "PNG", transparency=1),
    "bilevel": save(Image.fromarray(rgb(8, 9)[..., 0] > 100).convert("1"), "PNG"),
    "gray16": save(Image.fromarray(rng.integers(0, 65536, (3, 5)).astype(np.uint16), "I;16"), "PNG"),
    "interlaced": save(Image.fromarray(rgb(9, 11)), "PNG", interlace=1),
}
png["truncated"] = png["rgb"][:-30]
i = png["rgb"].find(b"IDAT") + 6
png["bad_crc"] = png["rgb"][:i] + bytes([png["rgb"][i] ^ 1]) + png["rgb"][i + 1:]
png["signature_only"] = png["rgb"][:8]
png["empty"] = b""

jpeg = {
    "rgb": save(Image.fromarray(rgb(8, 8)), "JPEG", quality=75),
    "rgb_444": save(Image.fromarray(rgb(5, 7)), "JPEG", quality=90, subsampling=0),
    "gray": save(Image.fromarray(rgb(9, 6)[..., 0]), "JPEG"),
    "progressive": save(Image.fromarray(rgb(16, 12)), "JPEG", progressive=True),
    "optimized": save(Image.fromarray(rgb(7, 5)), "JPEG", optimize=True, quality=50),
    "rgb_24": save(Image.fromarray(rgb(24, 24)), "JPEG", quality=60),
}
jpeg["truncated"] = jpeg["rgb"][: len(jpeg["rgb"]) // 2]
jpeg["header_only"] = jpeg["rgb"][:20]
j = jpeg["rgb"]
k = len(j) - 10
jpeg["flipped"] = j[:k] + bytes([j[k] ^ 0x55]) + j[k + 1:]

for name, files in (("png", png), ("jpeg", jpeg)):
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    for k, v in files.items():
        with open(os.path.join(d, k), "wb") as f:
            f.write(v)
print("image seeds: %d png, %d jpeg" % (len(png), len(jpeg)))
