#!/usr/bin/python3
"""gen_npy_seeds.py DIR -- writes the seed corpora of fuzz_npy and fuzz_npz (DIR/npy, DIR/npz)
with numpy (Debian python3-numpy), each file under the harnesses' 4096-byte max_len.

npy: every dtype the reader maps (both byte orders), 0-d, empty shapes, Fortran order, 8
dimensions, format versions 1.0, 2.0 and 3.0, a misaligned header, bool bytes other than 0/1,
and refused forms (complex, structured, object dtype headers, trailing bytes, truncation).
npz: np.savez (stored; numpy writes ZIP64 extras in the local headers) and np.savez_compressed
(deflated), a member that is not an array, the end record moved into ZIP64 records, a central
directory entry with ZIP64 sizes, a bad CRC. Deterministic: the same bytes on every run.
`scripts/fuzz.sh --seeds` runs it after gen_seeds.
"""
import io
import os
import struct
import sys
import zipfile

import numpy as np

out = sys.argv[1]
for d in ("npy", "npz"):
    os.makedirs(os.path.join(out, d), exist_ok=True)


def npy(arr, version=None):
    b = io.BytesIO()
    if version is None:
        np.save(b, arr, allow_pickle=False)
    else:
        np.lib.format.write_array(b, arr, version=version)
    return b.getvalue()


def fixed_time(data):
    """a zip with every member's modification time set to 1980-01-01 00:00 (zipfile stamps
    the current time; the CRCs do not cover it), so the seeds are the same on every run"""
    if not data.startswith(b"PK"):
        return data
    b = bytearray(data)
    e = data.rindex(b"PK\x05\x06")
    n, size, off = struct.unpack("<HII", data[e + 10:e + 20])
    p = off
    for _ in range(n):
        struct.pack_into("<HH", b, p + 12, 0, 0x21)
        nl, xl, cl = struct.unpack("<HHH", data[p + 28:p + 34])
        local = struct.unpack("<I", data[p + 42:p + 46])[0]
        struct.pack_into("<HH", b, local + 10, 0, 0x21)
        p += 46 + nl + xl + cl
    return bytes(b)


def put(kind, name, data):
    assert len(data) <= 4096, (name, len(data))
    if kind == "npz" and name not in ("truncated", "zip64_end", "zip64_entries"):
        data = fixed_time(data)
    with open(os.path.join(out, kind, name), "wb") as f:
        f.write(data)


def raw_npy(header, data):
    h = header.encode("latin1")
    h += b" " * (-(10 + len(h) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data


vals = np.array([0, 1, -1, 3, 100, -100, 7, 2], dtype="f8")
for code in ("f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "b1"):
    a = np.abs(vals).astype(code) if code[0] in "ub" else vals.astype(code)
    put("npy", "le_" + code, npy(a))
    if a.dtype.itemsize > 1:
        put("npy", "be_" + code, npy(a.astype(a.dtype.newbyteorder(">")).reshape(2, 4)))
put("npy", "scalar", npy(np.float32(1.5)))
put("npy", "empty", npy(np.zeros((0, 3), dtype="i4")))
put("npy", "empty_inner", npy(np.zeros((3, 0), dtype="u1")))
put("npy", "fortran", npy(np.asfortranarray(np.arange(12, dtype="f4").reshape(3, 4))))
put("npy", "fortran_3d", npy(np.asfortranarray(np.arange(24, dtype=">i2").reshape(2, 3, 4))))
put("npy", "dims8", npy(np.zeros((1, 2, 1, 2, 1, 2, 1, 2), dtype="u1")))
put("npy", "v2", npy(np.arange(6, dtype="i8").reshape(2, 3), version=(2, 0)))
put("npy", "v3", npy(np.arange(4, dtype="f4"), version=(3, 0)))
put("npy", "images_u1", npy(np.arange(2 * 28 * 28, dtype="u1").reshape(2, 1, 28, 28)))
put("npy", "labels_i8", npy(np.arange(10, dtype="i8")))
put("npy", "bool_bytes", raw_npy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bytes([0, 2, 255])))
put("npy", "py2_long", raw_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 1L), }", bytes(8)))
hdr = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
hdr += b" " * ((-(10 + len(hdr) + 1) % 64) + 1) + b"\n"
put("npy", "misaligned", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + bytes(8))
put("npy", "complex", raw_npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", bytes(8)))
put("npy", "structured", raw_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", bytes(4)))
put("npy", "object", raw_npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", bytes(8)))
put("npy", "trailing", npy(np.zeros(2, dtype="f4")) + b"\0")
put("npy", "truncated", npy(np.zeros(8, dtype="f8"))[:-5])
put("npy", "double_quotes", raw_npy('{"descr": "<f4", "fortran_order": True, "shape": (1, 1), }', bytes(4)))

rng = np.random.default_rng(0)
x = rng.integers(0, 256, (4, 1, 6, 6), dtype="u1")
y = np.arange(4, dtype="i8")


def savez(fn, **arrays):
    b = io.BytesIO()
    fn(b, **arrays)
    return b.getvalue()


stored = fixed_time(savez(np.savez, x_train=x, y_train=y))
deflated = fixed_time(savez(np.savez_compressed, x_train=x, y_train=y, half=np.arange(3, dtype="f2")))
put("npz", "stored", stored)
put("npz", "deflated", deflated)
put("npz", "one_scalar", savez(np.savez, s=np.float64(2.0)))
put("npz", "empty_archive", savez(np.savez))
b = io.BytesIO()
with zipfile.ZipFile(b, "w") as z:
    z.writestr("x.npy", npy(y))
    z.writestr("notes.txt", b"not an array")
put("npz", "with_text", b.getvalue())


def zip64_end(data):
    e = data.rindex(b"PK\x05\x06")
    _, _, _, n, _, size, off, _ = struct.unpack("<IHHHHIIH", data[e:e + 22])
    z64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, size, off)
    loc = struct.pack("<IIQI", 0x07064B50, 0, e, 1)
    return data[:e] + z64 + loc + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)


def zip64_entries(data):
    """every central directory entry's sizes and offset moved into a ZIP64 extra field"""
    e = data.rindex(b"PK\x05\x06")
    _, _, _, n, _, size, off, _ = struct.unpack("<IHHHHIIH", data[e:e + 22])
    cd, p, new = data[off:off + size], 0, b""
    for _ in range(n):
        f = list(struct.unpack("<IHHHHHHIIIHHHHHII", cd[p:p + 46]))
        nl, xl, cl = f[10], f[11], f[12]
        name = cd[p + 46:p + 46 + nl]
        extra = struct.pack("<HHQQQ", 1, 24, f[9], f[8], f[16])
        f[8] = f[9] = f[16] = 0xFFFFFFFF
        f[11] = len(extra)
        new += struct.pack("<IHHHHHHIIIHHHHHII", *f) + name + extra + cd[p + 46 + nl + xl:p + 46 + nl + xl + cl]
        p += 46 + nl + xl + cl
    return data[:off] + new + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(new), off, 0)


put("npz", "zip64_end", zip64_end(stored))
put("npz", "zip64_entries", zip64_entries(deflated))
bad = bytearray(stored)
bad[stored.index(b"x_train.npy") + 200] ^= 0x40
put("npz", "bad_crc", bytes(bad))
put("npz", "truncated", stored[:-30])
