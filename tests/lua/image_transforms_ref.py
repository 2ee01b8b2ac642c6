"""Reference values for image_transforms_spec.lua from torch / torchvision.

usage: image_transforms_ref.py IN OUT
IN is a safetensors file whose tensors are the input images and whose metadata
maps each case name to "op|input|arg|...":
  resize|x|h|w|mode|aa          torchvision F.resize (bilinear, nearest) or, for mode
                                area, torch interpolate(mode='area') with torchvision's
                                uint8 handling (float32, round, cast)
  short|x|n                     F.resize(x, n, antialias=True): the shorter side
  crop|x|top|left|h|w|oh|ow|aa  F.resized_crop (bilinear)
  center|x|h|w                  F.center_crop
  brightness|x|f, contrast|x|f, saturation|x|f, hue|x|f   F.adjust_*
OUT receives one tensor per case.
"""
import os
import sys

import torch
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import torch_interop as ti  # noqa: E402

MODES = {"bilinear": InterpolationMode.BILINEAR, "nearest": InterpolationMode.NEAREST}


def area(x, h, w):
    y = torch.nn.functional.interpolate((x.float() if x.dtype == torch.uint8 else x)[None], size=[h, w], mode="area")[0]
    return y.round().to(torch.uint8) if x.dtype == torch.uint8 else y


def case(op, x, a):
    if op == "resize":
        h, w, mode, aa = int(a[0]), int(a[1]), a[2], a[3] == "1"
        if mode == "area":
            return area(x, h, w)
        return F.resize(x, [h, w], interpolation=MODES[mode], antialias=aa)
    if op == "short":
        return F.resize(x, int(a[0]), antialias=True)
    if op == "crop":
        t, l, h, w, oh, ow = (int(v) for v in a[:6])
        return F.resized_crop(x, t, l, h, w, [oh, ow], antialias=a[6] == "1")
    if op == "center":
        return F.center_crop(x, [int(a[0]), int(a[1])])
    f = float(a[0])
    return {"brightness": F.adjust_brightness, "contrast": F.adjust_contrast,
            "saturation": F.adjust_saturation, "hue": F.adjust_hue}[op](x, f)


def main(src, dst):
    images, meta = ti.read_safetensors(src)
    out = {}
    for name, spec in meta.items():
        if "|" not in spec:               # dlua's own metadata (crc32, format, ...)
            continue
        op, inp, *args = spec.split("|")
        out[name] = case(op, torch.from_numpy(images[inp]), args).numpy()
    ti.write_safetensors(dst, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
