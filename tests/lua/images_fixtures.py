"""Writes the image files tests/lua/images_spec.lua decodes, with PIL, and the
pixels PIL gives for them (the reference), as a Lua table.

    /usr/bin/python3 tests/lua/images_fixtures.py OUT_DIR

OUT_DIR/ok/<name>.<png|jpg>: one small image (9 x 13) per mode (L, RGB, P, P
with transparency, RGBA, LA, 1, I;16, gray and RGB JPEG, progressive JPEG, an
interlaced PNG) and a 4 x 6 RGB one; OUT_DIR/expected.lua returns {name = {file =, h =, w =,
rgb = {...}, gray = {...}}} with the planar [C, H, W] values PIL's
convert("RGB") and convert("L") give, except for I;16, whose reference is the
16-bit samples PIL read shifted right by 8 (PIL's own conversion clips them
to 255 instead). Also prints the version of libjpeg PIL uses.
"""
import os
import sys

import numpy as np
from PIL import Image, features

out = sys.argv[1]
os.makedirs(os.path.join(out, "ok"), exist_ok=True)
rng = np.random.default_rng(7)
H, W = 9, 13


def smooth(c):
    """a smooth image plus noise: JPEG's worst and best cases together"""
    y, x = np.mgrid[0:H, 0:W]
    base = (x * 255 // (W - 1) + y * 11)[..., None] + rng.integers(0, 60, (H, W, c))
    return np.clip(base, 0, 255).astype(np.uint8)


images = {}
images["L"] = (Image.fromarray(smooth(1)[..., 0], "L"), "png", {})
images["RGB"] = (Image.fromarray(smooth(3), "RGB"), "png", {})
images["RGBA"] = (Image.fromarray(np.concatenate([smooth(3), rng.integers(0, 256, (H, W, 1), dtype=np.uint8)], 2), "RGBA"), "png", {})
images["LA"] = (Image.fromarray(np.concatenate([smooth(1), rng.integers(0, 256, (H, W, 1), dtype=np.uint8)], 2), "LA"), "png", {})
p = Image.fromarray(smooth(3), "RGB").quantize(colors=7)
images["P"] = (p, "png", {})
pt = p.copy()
pt.info["transparency"] = 2
images["P_trns"] = (pt, "png", {"transparency": 2})
images["1"] = (Image.fromarray(smooth(1)[..., 0] > 128).convert("1"), "png", {})
i16 = (rng.integers(0, 65536, (H, W))).astype(np.uint16)
images["I16"] = (Image.fromarray(i16, "I;16"), "png", {})
images["RGB_interlaced"] = (Image.fromarray(smooth(3), "RGB"), "png", {"interlace": 1})
images["jpeg_L"] = (Image.fromarray(smooth(1)[..., 0], "L"), "jpg", {"quality": 90})
images["jpeg_RGB"] = (Image.fromarray(smooth(3), "RGB"), "jpg", {"quality": 85})
images["jpeg_444"] = (Image.fromarray(smooth(3), "RGB"), "jpg", {"quality": 95, "subsampling": 0})
images["jpeg_progressive"] = (Image.fromarray(smooth(3), "RGB"), "jpg", {"quality": 80, "progressive": True})
images["small"] = (Image.fromarray(rng.integers(0, 256, (4, 6, 3), dtype=np.uint8), "RGB"), "png", {})


def planar(a):
    a = np.asarray(a)
    if a.ndim == 2:
        a = a[..., None]
    return a.transpose(2, 0, 1).reshape(-1).tolist()


lines = ["return {"]
for name, (img, ext, kw) in images.items():
    path = os.path.join(out, "ok", name + "." + ext)
    img.save(path, **kw)
    back = Image.open(path)
    back.load()
    if name == "I16":
        v = np.asarray(back).astype(np.uint32) >> 8
        assert back.mode.startswith("I"), back.mode
        rgb, gray = planar(np.stack([v, v, v], 2)), planar(v)
    else:
        rgb, gray = planar(back.convert("RGB")), planar(back.convert("L"))
    lines.append('  ["%s"] = {file = "%s", mode = "%s", h = %d, w = %d,' % (name, name + "." + ext, back.mode,
                                                                      back.height, back.width))
    lines.append("    rgb = {%s}," % ",".join(map(str, rgb)))
    lines.append("    gray = {%s}}," % ",".join(map(str, gray)))
lines.append("}")
with open(os.path.join(out, "expected.lua"), "w") as f:
    f.write("\n".join(lines) + "\n")
print("libjpeg_turbo", features.version("libjpeg_turbo") or "-", "jpg", features.version("jpg") or "-")
