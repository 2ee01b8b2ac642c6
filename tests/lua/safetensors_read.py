#!/usr/bin/python3
"""An independent safetensors reader/writer for the checkpoint specs (Python + numpy only).

Written from the format description in docs/formats.md, sharing no code with
engine/checkpoint.c, so the specs can check dlua's files against a second
implementation.

  safetensors_read.py read FILE          parse and check FILE (dlua CRCs too, if present);
                                         print a dump (below), exit 1 with a reason if bad
  safetensors_read.py write FILE         write a standard safetensors file (no dlua metadata,
                                         header order unlike data order); print its dump
  safetensors_read.py write-bare FILE    the same tensors, no __metadata__ at all
  safetensors_read.py same A B           exit 0 if A and B hold the same tensors, byte for byte

Dump lines (strings as "x" + the hex of their UTF-8, so any name survives, "" too):
  format dlua-checkpoint|safetensors
  meta HEXKEY HEXVALUE                   every __metadata__ entry, sorted
  tensor HEXNAME DTYPE DIMS              DIMS is "d0,d1,..." or "-" for a 0-d tensor
  values V1 V2 ...                       row-major; floats as repr() ("inf", "nan"), ints exact
"""
import json
import struct
import sys
import zlib

import numpy as np

DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "U8": "u1"}


class Bad(Exception):
    pass


def parse(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise Bad("shorter than 8 bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise Bad("header length %d past the end of the file" % n)

    def no_dups(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise Bad("duplicate key")
        return dict(pairs)

    header = json.loads(raw[8:8 + n].decode("utf-8"), object_pairs_hook=no_dups)
    data = raw[8 + n:]
    meta = header.pop("__metadata__", None) or {}
    tensors = {}
    spans = []
    for name, info in header.items():
        if set(info) != {"dtype", "shape", "data_offsets"}:
            raise Bad("fields of %r: %r" % (name, sorted(info)))
        dt = np.dtype(DTYPES[info["dtype"]])
        shape = tuple(info["shape"])
        b, e = info["data_offsets"]
        if e - b != int(np.prod(shape, dtype=np.int64)) * dt.itemsize or e > len(data):
            raise Bad("offsets of %r" % name)
        spans.append((b, e))
        tensors[name] = (info["dtype"], shape, np.frombuffer(data[b:e], dtype=dt).reshape(shape), data[b:e])
    pos = 0
    for b, e in sorted(spans):
        if b != pos:
            raise Bad("data section not tiled at byte %d" % pos)
        pos = e
    if pos != len(data):
        raise Bad("trailing data")
    return header, meta, tensors


def bytewise(names):
    return sorted(names, key=lambda s: s.encode("utf-8"))


def check_dlua(header, meta, tensors):
    """The dlua checksums: per-tensor CRC list and the header CRC (docs/formats.md)."""
    if meta.get("format") != "dlua-checkpoint":
        return False
    if meta.get("format_version") != "1":
        raise Bad("format_version")
    names = bytewise(tensors)
    crcs = meta["crc32"].split(",") if names else []
    if len(crcs) != len(names):
        raise Bad("crc32 list length")
    for name, c in zip(names, crcs):
        if int(c, 16) != zlib.crc32(tensors[name][3]):
            raise Bad("crc of %r" % name)
    text = b""
    for name in names:
        info = header[name]
        nb = name.encode("utf-8")
        text += b"T%d:" % len(nb) + nb
        text += (" %s %s %d %d\n" % (info["dtype"], ",".join(str(d) for d in info["shape"]),
                                     info["data_offsets"][0], info["data_offsets"][1])).encode()
    for k in bytewise(meta):
        if k == "header_crc32":
            continue
        kb, vb = k.encode("utf-8"), meta[k].encode("utf-8")
        text += b"M%d:" % len(kb) + kb + b" %d:" % len(vb) + vb + b"\n"
    if int(meta["header_crc32"], 16) != zlib.crc32(text):
        raise Bad("header crc")
    return True


def fmt(v):
    if isinstance(v, float):
        return repr(v)
    return str(v)


def dump(path):
    header, meta, tensors = parse(path)
    ours = check_dlua(header, meta, tensors)
    out = ["format " + ("dlua-checkpoint" if ours else "safetensors")]
    for k in bytewise(meta):
        out.append("meta x%s x%s" % (k.encode("utf-8").hex(), meta[k].encode("utf-8").hex()))
    for name in bytewise(tensors):
        dtype, shape, arr, _ = tensors[name]
        dims = ",".join(str(d) for d in shape) if shape else "-"
        out.append("tensor x%s %s %s" % (name.encode("utf-8").hex(), dtype, dims))
        vals = arr.reshape(-1).tolist()
        out.append(" ".join(["values"] + [fmt(v) for v in vals]))
    print("\n".join(out))


def sample_tensors():
    big = np.array([2**62 + 1, -(2**63), 2**63 - 1, 7], dtype="<i8")
    return {
        "w": np.arange(6, dtype="<f4").reshape(2, 3) / np.float32(4) - np.float32(0.5),
        "b\u00e9\"\\ \U0001F600": np.array([1.5, -2.25, 1e300], dtype="<f8"),
        "count": np.array(42, dtype="<i4"),
        "labels": np.array([[3, -1], [0, 9]], dtype="<i8"),
        "big": big,
        "img": np.array([0, 7, 255], dtype="u1"),
        "empty": np.zeros((0, 4), dtype="<f4"),
    }


def write(path, with_meta):
    tens = sample_tensors()
    names = sorted(tens)                 # data order: by name
    header = {}
    blob = b""
    for name in names:
        arr = np.array(tens[name], order="C")
        code = [k for k, v in DTYPES.items() if np.dtype(v) == arr.dtype][0]
        b = arr.tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape), "data_offsets": [len(blob), len(blob) + len(b)]}
        blob += b
    ordered = {}
    if with_meta:
        ordered["__metadata__"] = {"format": "pt", "source": "numpy"}
    for name in reversed(names):         # header order: reversed
        ordered[name] = header[name]
    text = json.dumps(ordered).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob)
    dump(path)


def same(a, b):
    _, _, ta = parse(a)
    _, _, tb = parse(b)
    if sorted(ta) != sorted(tb):
        raise Bad("names differ")
    for name in ta:
        if ta[name][0] != tb[name][0] or ta[name][1] != tb[name][1] or ta[name][3] != tb[name][3]:
            raise Bad("tensor %r differs" % name)
    print("same")


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    try:
        if cmd == "read":
            dump(path)
        elif cmd == "write":
            write(path, True)
        elif cmd == "write-bare":
            write(path, False)
        elif cmd == "same":
            same(path, sys.argv[3])
        else:
            raise SystemExit("unknown command " + cmd)
    except (Bad, ValueError, KeyError, UnicodeDecodeError) as e:
        print("bad file: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
