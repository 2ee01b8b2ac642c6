#!/usr/bin/python3
"""torch_interop.py: dlua checkpoints <-> PyTorch state_dicts (Debian's python3-torch and numpy).

    torch_interop.py keys CKPT [--prefix model/]             print "dlua_key -> torch_key" per tensor
    torch_interop.py to-torch CKPT OUT.pt [--prefix model/]  CKPT's model as a torch state_dict (torch.save)
    torch_interop.py from-torch IN.pt OUT.safetensors [--prefix model/]
                                                             a torch state_dict as a safetensors file
                                                             dlua loads (dl.checkpoint.load)

The key mapping (docs/interop.md):
  * only the tensors under the prefix (default "model/": dl.train's checkpoints also hold
    "optim/", "ema/" and "train/" tensors; use --prefix ema/ for the averaged weights) are
    taken, with the prefix removed;
  * every dot-separated part that is a whole number is one less in PyTorch: dlua numbers the
    children of nn.Sequential from 1, torch.nn.Sequential from 0 ("model/1.weight" ->
    "0.weight", "model/3.body.2.bias" -> "2.body.1.bias"); every other part is kept;
  * the layouts and names agree: Linear weight [out, in], Conv2d weight [out, in/groups, kh, kw],
    LayerNorm and BatchNorm weight/bias, BatchNorm running_mean, running_var and
    num_batches_tracked (int64, 0-d). A BatchNorm with replicas keeps [R, C] moving averages;
    dl.train saves them synchronised (equal rows), and the first row is taken (rows that
    differ are an error: call nn.sync_batchnorm(model) first).
  * Embedding ids are 1-based in dlua and 0-based in torch; the weight table is the same.
from-torch maps back (parts + 1, prefix added) and writes a standard safetensors file (no
dlua checksums; dlua reads those). Floats stay float32/float64, integers int64/int32; other
torch dtypes are refused by name. The safetensors reading and writing here is numpy only
(docs/formats.md), checking dlua's per-tensor CRC-32s when the file has them.
"""
import json
import struct
import sys
import zlib

import numpy as np

DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "U8": "u1"}
NAMES = {np.dtype(v): k for k, v in DTYPES.items()}


def read_safetensors(path):
    """{name: numpy array} and the metadata dict of a safetensors file; dlua's CRCs are checked."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", None) or {}
    data = raw[8 + n:]
    out = {}
    for name, h in header.items():
        if h["dtype"] not in DTYPES:
            raise ValueError(f"{path}: tensor '{name}' has dtype {h['dtype']}, which dlua does not use")
        b, e = h["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype=DTYPES[h["dtype"]])
        out[name] = arr.reshape(h["shape"]).copy()
    if "crc32" in meta:
        names = sorted(header, key=lambda s: s.encode("utf-8"))
        crcs = meta["crc32"].split(",") if meta["crc32"] else []
        if len(crcs) != len(names):
            raise ValueError(f"{path}: {len(crcs)} checksums for {len(names)} tensors")
        for name, crc in zip(names, crcs):
            b, e = header[name]["data_offsets"]
            if "%08x" % zlib.crc32(data[b:e]) != crc:
                raise ValueError(f"{path}: checksum mismatch for tensor '{name}'")
    return out, meta


def write_safetensors(path, tensors):
    """Writes {name: numpy array} as a standard safetensors file (names in bytewise order)."""
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors, key=lambda s: s.encode("utf-8")):
        a = np.asarray(tensors[name], order="C")            # (ascontiguousarray makes 0-d 1-d)
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        if dt not in NAMES:
            raise ValueError(f"tensor '{name}' has dtype {a.dtype}; dlua reads float32, float64, int32, int64, uint8")
        b = a.astype(dt).tobytes()
        header[name] = {"dtype": NAMES[dt], "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        chunks.append(b)
        offset += len(b)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def _shift(key, by, where):
    parts = key.split(".")
    for i, p in enumerate(parts):
        if p.isdigit():
            v = int(p) + by
            if v < 0:
                raise ValueError(f"{where}: key '{key}': part '{p}' has no dlua index (dlua numbers from 1)")
            parts[i] = str(v)
    return ".".join(parts)


def dlua_to_torch_key(key, prefix="model/"):
    """'model/1.weight' -> '0.weight'; None for a key outside prefix."""
    if not key.startswith(prefix):
        return None
    return _shift(key[len(prefix):], -1, "dlua_to_torch_key")


def torch_to_dlua_key(key, prefix="model/"):
    """'0.weight' -> 'model/1.weight'."""
    return prefix + _shift(key, 1, "torch_to_dlua_key")


def _one_row(name, a):
    if name.endswith(("running_mean", "running_var")) and a.ndim == 2:
        if not (a == a[0]).all():
            raise ValueError(f"'{name}' has {a.shape[0]} replicas' moving averages that differ; "
                             "call nn.sync_batchnorm(model) before saving")
        return a[0].copy()
    return a


def dlua_to_numpy_state_dict(path, prefix="model/"):
    """The model tensors of a dlua checkpoint under torch's keys, as numpy arrays (ordered by dlua key)."""
    tensors, _ = read_safetensors(path)
    out = {}
    for k in sorted(tensors):
        tk = dlua_to_torch_key(k, prefix)
        if tk is not None:
            out[tk] = _one_row(tk, tensors[k])
    if not out:
        raise ValueError(f"{path}: no tensor's name starts with '{prefix}' (try --prefix)")
    return out


def dlua_to_torch_state_dict(path, prefix="model/"):
    """A dlua checkpoint's model as a torch state_dict (an OrderedDict of torch tensors)."""
    import collections
    import torch
    return collections.OrderedDict((k, torch.from_numpy(v)) for k, v in dlua_to_numpy_state_dict(path, prefix).items())


def torch_state_dict_to_safetensors(state_dict, path, prefix="model/"):
    """Writes a torch state_dict as a safetensors file whose keys dlua's model:load_state_dict takes
    after the prefix is removed."""
    out = {}
    for k, t in state_dict.items():
        a = t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)
        out[torch_to_dlua_key(k, prefix)] = a
    write_safetensors(path, out)


def main(argv):
    args, prefix = [], "model/"
    i = 0
    while i < len(argv):
        if argv[i] == "--prefix" and i + 1 < len(argv):
            prefix = argv[i + 1]
            i += 2
        else:
            args.append(argv[i])
            i += 1
    try:
        if len(args) == 2 and args[0] == "keys":
            tensors, _ = read_safetensors(args[1])
            for k in sorted(tensors):
                tk = dlua_to_torch_key(k, prefix)
                if tk is not None:
                    print(f"{k} -> {tk}")
        elif len(args) == 3 and args[0] == "to-torch":
            import torch
            torch.save(dlua_to_torch_state_dict(args[1], prefix), args[2])
        elif len(args) == 3 and args[0] == "from-torch":
            import torch
            sd = torch.load(args[1], map_location="cpu")
            if hasattr(sd, "state_dict"):
                sd = sd.state_dict()
            torch_state_dict_to_safetensors(sd, args[2], prefix)
        else:
            sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
            return 2
    except (OSError, ValueError) as e:
        sys.stderr.write(f"torch_interop.py: {e}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
