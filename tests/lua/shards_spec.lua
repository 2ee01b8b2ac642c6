-- Record shards' container: the tar reader and writer (engine/io/tar.c, bound as
-- core._tar_read / core._tar_write). Checked against Python's tarfile, an
-- independent reader and writer: what dlua writes Python reads byte for byte,
-- and what Python writes in each of its formats (ustar, GNU, pax) dlua reads.
local H = dofile("tests/lua/helpers.lua")
local core = require "dlua.core"

local PY = "/usr/bin/python3"

local function python(script, ...)
  local dir = H.tmpdir("tarpy")
  H.spit(dir .. "/s.py", script)
  local args = {}
  for _, a in ipairs({...}) do args[#args + 1] = H.shquote(a) end
  local p = assert(io.popen(PY .. " " .. H.shquote(dir .. "/s.py") .. " " .. table.concat(args, " ") .. " 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  assert(ok, "python failed:\n" .. out)
  return out
end

-- deterministic bytes of length n
local function bytes(n, seed)
  local t, x = {}, seed
  for i = 1, n do
    x = (x * 1103515245 + 12345) % 2147483648
    t[i] = string.char(x % 256)
  end
  return table.concat(t)
end

local function hex(s) return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end)) end

describe("tar shards", function()
  it("written by dlua are read by Python's tarfile byte for byte", function()
    local dir = H.tmpdir("tar")
    local long = string.rep("d", 90) .. "/" .. string.rep("n", 85) .. ".000001.png"
    local members = {
      {"000000.cls", "3"}, {"000000.png", bytes(511, 1)}, {"000001.png", bytes(512, 2)},
      {"000001.cls", ""}, {"sub/000002.json", bytes(513, 3)}, {long, bytes(1500, 4)},
    }
    local n = core._tar_write(dir .. "/s.tar", members)
    assert.are.equal(n, #H.slurp(dir .. "/s.tar"))
    local out = python([[
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    for m in t:
        assert m.isreg(), m.name
        print(m.name, t.extractfile(m).read().hex())
]], dir .. "/s.tar")
    local want = {}
    for _, m in ipairs(members) do want[#want + 1] = m[1] .. " " .. hex(m[2]) end
    assert.are.equal(table.concat(want, "\n") .. "\n", out)
  end)

  it("written by Python in the ustar, GNU and pax formats are read by dlua", function()
    local dir = H.tmpdir("tar")
    python([[
import io, sys, tarfile
d = sys.argv[1]
names = ["000000.cls", "x" * 120 + "/000001.png", "y" * 160 + ".json", "caf\u00e9/000002.cls"]
for fmt, tag in [(tarfile.USTAR_FORMAT, "ustar"), (tarfile.GNU_FORMAT, "gnu"), (tarfile.PAX_FORMAT, "pax")]:
    with tarfile.open(f"{d}/{tag}.tar", "w", format=fmt) as t:
        for i, n in enumerate(names):
            if fmt == tarfile.USTAR_FORMAT and (len(n) > 100 and "/" not in n or not n.isascii()):
                continue
            data = bytes((i * 37 + k) % 256 for k in range(100 * i))
            info = tarfile.TarInfo(n)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        dinfo = tarfile.TarInfo("a-directory")
        dinfo.type = tarfile.DIRTYPE
        t.addfile(dinfo)
]], dir)
    for _, tag in ipairs({"ustar", "gnu", "pax"}) do
      local got = core._tar_read(dir .. "/" .. tag .. ".tar")
      local names = {}
      for i, m in ipairs(got) do
        names[i] = m.name
        local k = ({["000000.cls"] = 0})[m.name] or (m.name:find("000001.png", 1, true) and 1)
          or (m.name:find(".json", 1, true) and 2) or 3
        local want = {}
        for j = 0, 100 * k - 1 do want[#want + 1] = string.char((k * 37 + j) % 256) end
        assert.are.equal(table.concat(want), m.data, tag .. ": " .. m.name)
      end
      if tag == "ustar" then
        assert.are.same({"000000.cls", string.rep("x", 120) .. "/000001.png"}, names)
      else
        assert.are.same({"000000.cls", string.rep("x", 120) .. "/000001.png", string.rep("y", 160) .. ".json",
                         "caf\u{e9}/000002.cls"}, names)
      end
    end
  end)

  it("refuse links, truncation and non-regular files, naming the file, the member and the offset", function()
    local dir = H.tmpdir("tar")
    python([[
import io, sys, tarfile
d = sys.argv[1]
with tarfile.open(f"{d}/link.tar", "w", format=tarfile.USTAR_FORMAT) as t:
    info = tarfile.TarInfo("000000.cls"); info.size = 1000; t.addfile(info, io.BytesIO(b"1" * 1000))
    link = tarfile.TarInfo("000001.cls"); link.type = tarfile.SYMTYPE; link.linkname = "/etc/passwd"; t.addfile(link)
]], dir)
    local ok, err = pcall(core._tar_read, dir .. "/link.tar")
    assert.is_false(ok)
    assert.matches(dir .. "/link.tar: member '000001.cls' at offset 1536: type '2' is not a regular file", err, 1, true)

    local whole = H.slurp(dir .. "/link.tar")
    H.spit(dir .. "/cut.tar", whole:sub(1, 700))
    ok, err = pcall(core._tar_read, dir .. "/cut.tar")
    assert.is_false(ok)
    assert.matches(dir .. "/cut.tar: member '000000.cls' at offset 0: its 1000 bytes run past the end", err, 1, true)

    ok, err = pcall(core._tar_read, dir)
    assert.is_false(ok)
    assert.matches(dir .. ": not a regular file", err, 1, true)
    assert.is_true(os.execute("mkfifo " .. H.shquote(dir .. "/fifo")))
    ok, err = pcall(core._tar_read, dir .. "/fifo")      -- refused, not a blocked open
    assert.is_false(ok)
    assert.matches("fifo: not a regular file", err, 1, true)
  end)

  it("refuse a name ustar cannot hold and bad arguments, leaving no file", function()
    local dir = H.tmpdir("tar")
    local ok, err = pcall(core._tar_write, dir .. "/s.tar", {{string.rep("z", 300), "x"}})
    assert.is_false(ok)
    assert.matches("too long for ustar", err, 1, true)
    assert.is_nil(io.open(dir .. "/s.tar", "rb"))
    ok, err = pcall(core._tar_write, dir .. "/s.tar", {{"a", 3}})
    assert.is_false(ok)
    assert.matches("member 1: expected {name, data} with two strings, got {string, number}", err, 1, true)
    ok, err = pcall(core._tar_write, dir .. "/s.tar", {}, "extra")
    assert.is_false(ok)
    assert.matches("no more than 2 arguments expected, got 3", err, 1, true)
  end)
end)
