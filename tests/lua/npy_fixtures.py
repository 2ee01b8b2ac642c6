#!/usr/bin/python3
"""npy_fixtures.py DIR -- writes the .npy/.npz files tests/lua/npy_spec.lua reads, with numpy.

For every array file NAME.npy (or archive member) that dlua must read, DIR/NAME.expect holds
the bytes dlua's tensor must have (numpy's own conversion to the dtype dlua maps it to), and
DIR/manifest.lua lists {file =, dtype =, shape =, expect =} for the spec. Hostile files (bad
headers, truncations, zip tricks) are written beside them; the spec names what each must say.
"""
import io
import os
import struct
import sys
import zipfile
import zlib

import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
manifest = []

# numpy dtype -> (dlua dtype, the little-endian numpy dtype of dlua's bytes)
TARGET = {
    "f2": ("float32", "<f4"), "f4": ("float32", "<f4"), "f8": ("float64", "<f8"),
    "i1": ("int32", "<i4"), "i2": ("int32", "<i4"), "i4": ("int32", "<i4"), "i8": ("int64", "<i8"),
    "u1": ("uint8", "u1"), "u2": ("int32", "<i4"), "u4": ("int64", "<i8"), "u8": ("int64", "<i8"),
    "b1": ("uint8", "u1"),
}


def path(name):
    return os.path.join(out, name)


def expect(name, arr, file=None, member=None):
    code = arr.dtype.kind + str(arr.dtype.itemsize)
    dtype, target = TARGET[code]
    with open(path(name + ".expect"), "wb") as f:
        f.write(np.ascontiguousarray(arr).astype(target).tobytes())
    manifest.append({"name": name, "file": file or name + ".npy", "member": member, "dtype": dtype,
                     "shape": list(arr.shape)})


def save(name, arr, version=None):
    if version is None:
        np.save(path(name + ".npy"), arr)
    else:
        with open(path(name + ".npy"), "wb") as f:
            np.lib.format.write_array(f, arr, version=version)
    expect(name, arr)


rng = np.random.default_rng(5)
VALUES = {
    "f2": np.array([0, -0.0, 1.5, -2, 65504, 6e-8, np.inf, -np.inf, 0.1, 3.14159], dtype="f2"),
    "f4": np.array([0, -0.0, 1.5, -2, 3.4e38, 1e-45, 1.17e-38, np.inf, 0.1, -7.25], dtype="f4"),
    "f8": np.array([0, -0.0, 1.5, -2, 1.8e308, 5e-324, np.inf, 0.1, 1 / 3, -7.25], dtype="f8"),
    "i1": np.array([0, 1, -1, 127, -128], dtype="i1"),
    "i2": np.array([0, 1, -1, 32767, -32768], dtype="i2"),
    "i4": np.array([0, 1, -1, 2**31 - 1, -2**31], dtype="i4"),
    "i8": np.array([0, 1, -1, 2**63 - 1, -2**63, 2**53 + 1], dtype="i8"),
    "u1": np.array([0, 1, 128, 255], dtype="u1"),
    "u2": np.array([0, 1, 65535, 40000], dtype="u2"),
    "u4": np.array([0, 1, 2**32 - 1, 3000000000], dtype="u4"),
    "u8": np.array([0, 1, 2**63 - 1, 12345678901234], dtype="u8"),
    "b1": np.array([True, False, True, True], dtype="b1"),
}
for code, arr in VALUES.items():
    save("le_" + code, arr)
    if arr.dtype.itemsize > 1:
        save("be_" + code, arr.astype(arr.dtype.newbyteorder(">")))
    save("m_" + code, np.resize(arr, (3, 2, len(arr))))          # 3-d, C order

# shapes: 0-d, empty, fortran order (2-d, 3-d), 8 dimensions
save("scalar_f8", np.float64(2.5))
save("scalar_i4", np.int32(-7))
save("empty_0", np.zeros((0,), dtype="f4"))
save("empty_0x3", np.zeros((0, 3), dtype="i8"))
save("empty_3x0", np.zeros((3, 0), dtype="u1"))
save("fortran_2d", np.asfortranarray(rng.standard_normal((5, 7)).astype("f4")))
save("fortran_3d", np.asfortranarray(np.arange(2 * 3 * 4, dtype="i2").reshape(2, 3, 4)))
save("fortran_be", np.asfortranarray(np.arange(12, dtype=">f8").reshape(3, 4)))
save("dims8", np.arange(2**8, dtype="u1").reshape((2,) * 8))
save("v2", rng.standard_normal((4, 3)).astype("f4"), version=(2, 0))
save("v3", np.arange(10, dtype="i8"), version=(3, 0))
save("big", rng.standard_normal((1024, 1024)).astype("f4"))    # 4 MiB, for the mmap check

# a header whose data does not start at a multiple of 4 (numpy pads to 64): read, not mapped
raw = np.arange(6, dtype="<f4")
hdr = b"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }"
hdr += b" " * ((-(10 + len(hdr) + 1) % 64) + 1) + b"\n"             # aligned, then one more byte
with open(path("unaligned.npy"), "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + raw.tobytes())
expect("unaligned", raw)

# bool bytes other than 0 and 1 (True for numpy): read as 1
with open(path("bool_bytes.npy"), "wb") as f:
    np.lib.format.write_array_header_1_0(f, {"descr": "|b1", "fortran_order": False, "shape": (3,)})
    f.write(bytes([0, 2, 255]))
expect("bool_bytes", np.array([False, True, True]))

# python 2 style longs in the shape
with open(path("py2_long.npy"), "wb") as f:
    h = b"{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 3L), }"
    h += b" " * (-(10 + len(h) + 1) % 16) + b"\n"
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + np.arange(6, dtype="<i4").tobytes())
expect("py2_long", np.arange(6, dtype="<i4").reshape(2, 3))

# archives: stored and deflated, and their members' expected bytes
train_x = rng.integers(0, 256, (20, 1, 4, 4), dtype="u1")
train_y = rng.integers(0, 10, 20).astype("i8")
np.savez(path("stored.npz"), x_train=train_x, y_train=train_y, scalar=np.float32(1.25), half=VALUES["f2"])
np.savez_compressed(path("deflated.npz"), x_train=train_x, y_train=train_y, scalar=np.float32(1.25),
                    half=VALUES["f2"])
for z in ("stored", "deflated"):
    for m, arr in (("x_train", train_x), ("y_train", train_y), ("scalar", np.float32(1.25)), ("half", VALUES["f2"])):
        expect(z + "_" + m, np.asarray(arr), file=z + ".npz", member=m)


def npy_bytes(arr):
    b = io.BytesIO()
    np.save(b, arr)
    return b.getvalue()


def hostile_npy(name, header, data=b"", version=1):
    h = header.encode("latin1")
    h += b" " * (-(10 + len(h) + 1) % 64) + b"\n"
    pre = b"\x93NUMPY" + bytes([version, 0]) + (struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h)))
    with open(path(name + ".npy"), "wb") as f:
        f.write(pre + h + data)


D = "'descr': '<f4', 'fortran_order': False"
hostile_npy("huge_shape", "{%s, 'shape': (1099511627776, 1099511627776), }" % D)
hostile_npy("huge_dim", "{%s, 'shape': (281474976710657,), }" % D)
hostile_npy("truncated_data", "{%s, 'shape': (10,), }" % D, b"\0" * 36)
hostile_npy("trailing", "{%s, 'shape': (1,), }" % D, b"\0" * 8)
hostile_npy("missing_key", "{'descr': '<f4', 'shape': (1,), }", b"\0" * 4)
hostile_npy("extra_key", "{%s, 'shape': (1,), 'x': 1, }" % D, b"\0" * 4)
hostile_npy("not_tuple", "{%s, 'shape': (3), }" % D, b"\0" * 12)
hostile_npy("negative", "{%s, 'shape': (-3,), }" % D)
hostile_npy("unquoted", "{descr: '<f4', 'fortran_order': False, 'shape': (1,), }", b"\0" * 4)
hostile_npy("complex", "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", b"\0" * 8)
hostile_npy("structured", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", b"\0" * 4)
hostile_npy("u8_big", "{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }", struct.pack("<QQ", 1, 2**63))
with open(path("bad_magic.npy"), "wb") as f:
    f.write(b"\x93NUMPZ\x01\x00" + npy_bytes(np.zeros(2))[8:])
with open(path("version9.npy"), "wb") as f:
    f.write(b"\x93NUMPY\x09\x00" + npy_bytes(np.zeros(2))[8:])
with open(path("absurd_header.npy"), "wb") as f:
    f.write(b"\x93NUMPY\x02\x00" + struct.pack("<I", 2**31) + b"{" + b" " * 100)
with open(path("truncated_header.npy"), "wb") as f:
    f.write(npy_bytes(np.zeros(2))[:40])
with open(path("object.npy"), "wb") as f:
    np.save(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)

# archive corruption
good = open(path("stored.npz"), "rb").read()
i = good.index(b"x_train.npy") + len(b"x_train.npy") + 20 + 200       # inside x_train's data
with open(path("bad_crc.npz"), "wb") as f:
    f.write(good[:i] + bytes([good[i] ^ 0x55]) + good[i + 1:])
with open(path("truncated.npz"), "wb") as f:
    f.write(good[: len(good) // 2])
with open(path("not_zip.npz"), "wb") as f:
    f.write(npy_bytes(np.zeros(4)))
deflated = open(path("deflated.npz"), "rb").read()


def zipped(name, members, method=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path(name), "w", compression=method) as z:
        for n, data in members:
            z.writestr(n, data)


zipped("traversal.npz", [("../../etc/x_train.npy", npy_bytes(train_x)), ("/abs/y.npy", npy_bytes(train_y))])
with __import__("warnings").catch_warnings():
    __import__("warnings").simplefilter("ignore")
    zipped("duplicate.npz", [("x.npy", npy_bytes(train_x)), ("x.npy", npy_bytes(train_y))])
zipped("member_garbage.npz", [("x.npy", b"this is not an npy file at all")], zipfile.ZIP_DEFLATED)
zipped("with_text.npz", [("x.npy", npy_bytes(train_y)), ("README.txt", b"hello")])

# a member whose directory entry claims 1 GiB from a few deflated bytes
b = bytearray(deflated)
cd = b.rindex(b"PK\x01\x02")                                          # the last directory entry
struct.pack_into("<I", b, cd + 24, 1 << 30)
with open(path("bomb.npz"), "wb") as f:
    f.write(bytes(b))

# deflated member whose stream is cut (its sizes unchanged): inflate runs out
i = deflated.index(b"x_train.npy") + len(b"x_train.npy") + 20 + 30
with open(path("bad_deflate.npz"), "wb") as f:
    f.write(deflated[:i] + b"\xff" * 16 + deflated[i + 16:])


def with_zip64_end(src, dst):
    """src's archive with its end record moved into ZIP64 records (the classic one saying 0xffff...)."""
    data = open(path(src), "rb").read()
    e = data.rindex(b"PK\x05\x06")
    _, _, _, n, _, size, off, _ = struct.unpack("<IHHHHIIH", data[e:e + 22])
    z64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, size, off)
    loc = struct.pack("<IIQI", 0x07064B50, 0, e, 1)
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    with open(path(dst), "wb") as f:
        f.write(data[:e] + z64 + loc + eocd)


def with_zip64_entries(src, dst):
    """src's archive with every directory entry's sizes and offset in a ZIP64 extra field"""
    data = open(path(src), "rb").read()
    e = data.rindex(b"PK\x05\x06")
    _, _, _, n, _, size, off, _ = struct.unpack("<IHHHHIIH", data[e:e + 22])
    cd, p, new = data[off:off + size], 0, b""
    for _ in range(n):
        f = list(struct.unpack("<IHHHHHHIIIHHHHHII", cd[p:p + 46]))
        nl, xl, cl = f[10], f[11], f[12]
        extra = struct.pack("<HHQQQ", 1, 24, f[9], f[8], f[16])
        f[8] = f[9] = f[16] = 0xFFFFFFFF
        f[11] = len(extra)
        new += struct.pack("<IHHHHHHIIIHHHHHII", *f) + cd[p + 46:p + 46 + nl] + extra
        p += 46 + nl + xl + cl
    with open(path(dst), "wb") as f:
        f.write(data[:off] + new + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(new), off, 0))


with_zip64_end("deflated.npz", "zip64.npz")
with_zip64_entries("stored.npz", "zip64_entries.npz")
for m, arr in (("x_train", train_x), ("y_train", train_y)):
    expect("zip64_" + m, arr, file="zip64.npz", member=m)
    expect("zip64e_" + m, arr, file="zip64_entries.npz", member=m)

# the pipeline example: two separable classes, labels 0-based as numpy data has them
n = 256
y = rng.integers(0, 2, n)
x = (rng.standard_normal((n, 4)) + np.where(y[:, None] == 1, 2.0, -2.0)).astype("f4")
np.save(path("train_x.npy"), x)
np.save(path("train_y.npy"), y.astype("i8"))


def lua(v):
    if v is None:
        return "nil"
    if isinstance(v, str):
        return '"' + v + '"'
    if isinstance(v, list):
        return "{" + ", ".join(lua(x) for x in v) + "}"
    return str(v)


with open(path("manifest.lua"), "w") as f:
    f.write("return {\n")
    for m in manifest:
        f.write("  {" + ", ".join("%s = %s" % (k, lua(v)) for k, v in m.items()) + "},\n")
    f.write("}\n")
