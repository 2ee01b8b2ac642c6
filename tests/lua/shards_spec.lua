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

local function lfs_dir(d)
  local it, st = require("lfs").dir(d)
  return function()
    local f = it(st)
    while f == "." or f == ".." do f = it(st) end
    return f
  end
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

-------------------------------------------------------------------- shard datasets

local dl = require "dlua"
local data, T = dl.data, dl.data.transforms
local fs = dl.fs

local function flat(t)
  local o = {}
  local function r(x)
    if type(x) == "table" then for _, y in ipairs(x) do r(y) end else o[#o + 1] = x end
  end
  r(t:totable())
  return table.concat(o, ",")
end

-- every batch of a pipeline, as text (bit-exact for the dtypes compared)
local function batches(p, epochs)
  local out = {}
  for b in p:iter{epochs = epochs} do
    out[#out + 1] = flat(b.image) .. "|" .. flat(b.label)
  end
  return out
end

local N = 300
local fm_sub
local function fm300()
  if not fm_sub then
    local idx = {}
    for i = 1, N do idx[i] = i end
    fm_sub = data.fashion_mnist().train:subset(idx)
  end
  return fm_sub
end

describe("data.shards and data.pack", function()
  local dir
  setup(function()
    dir = H.tmpdir("shards-fm")
    data.pack{dataset = fm300(), dir = dir .. "/fm", per_shard = 64}
  end)

  it("pack writes 0-based .cls and lossless PNG members that PIL and Python's tarfile read as the IDX bytes", function()
    local files = {}
    for f in lfs_dir(dir .. "/fm") do files[#files + 1] = f end
    table.sort(files)
    assert.are.same({"shard-000000.tar", "shard-000001.tar", "shard-000002.tar", "shard-000003.tar",
                     "shard-000004.tar"}, files)
    local out = python([[
import glob, gzip, io, sys, tarfile
import numpy as np
from PIL import Image
d, n = sys.argv[1], int(sys.argv[2])
fm = "/usr/share/datasets/fashion-mnist"
def idx(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rb") as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)
imgs = idx(sorted(glob.glob(fm + "/train-images-idx3-ubyte*"))[0])
labs = idx(sorted(glob.glob(fm + "/train-labels-idx1-ubyte*"))[0])
k = 0
for path in sorted(glob.glob(d + "/*.tar")):
    with tarfile.open(path) as t:
        names = t.getnames()
        for i in range(0, len(names), 2):
            png, cls = names[i], names[i + 1]
            assert png.endswith(".png") and cls.endswith(".cls") and png[:-4] == cls[:-4], (png, cls)
            im = np.array(Image.open(io.BytesIO(t.extractfile(png).read())))
            assert im.shape == (28, 28) and (im == imgs[k]).all(), png
            assert int(t.extractfile(cls).read()) == labs[k], cls
            k += 1
print(k)
]], dir .. "/fm", tostring(N))
    assert.are.equal(tostring(N) .. "\n", out)
  end)

  it("give the IDX pipeline's batches bit for bit (shuffle, random crop and flip, 2 workers, 2 epochs)", function()
    local sh = data.shards{dir = dir .. "/fm", fields = {image = "png", label = "cls"}, channels = 1,
                           zero_based = {"label"}}
    assert.are.equal(N, #sh)
    local function pipe(ds, workers)
      return ds:shuffle{seed = 5}:map(T.random_crop(28, {padding = 2}), T.hflip(), T.scale(1 / 255))
        :batch(32):workers(workers):seed(9)
    end
    local want = batches(pipe(fm300(), 0), 2)
    assert.are.same(want, batches(pipe(sh, 2), 2))
    assert.are.same(want, batches(pipe(sh, 0), 2))
  end)

  it("shuffle{shards = true} permutes shards every epoch and mixes within a window, the same at any worker count", function()
    local sh = data.shards{dir = dir .. "/fm", fields = {image = "png", label = "cls"}, channels = 1,
                           zero_based = {"label"}}
    local function order(workers, epochs)
      local ids = {}
      local q = sh:shuffle{seed = 4, shards = true, window = 16}:batch(10):workers(workers)
      for b in q:iter{epochs = epochs} do
        for _, l in ipairs(b.label:totable()) do ids[#ids + 1] = l end
      end
      return ids
    end
    local a = order(0, 2)
    assert.are.equal(2 * N, #a)
    assert.are.same(a, order(2, 2))
    local e1, e2 = table.concat(a, ",", 1, N), table.concat(a, ",", N + 1, 2 * N)
    assert.are_not.equal(e1, e2)                  -- another order in epoch 2
    local c1, c2 = {}, {}
    for i = 1, N do c1[a[i]] = (c1[a[i]] or 0) + 1; c2[a[N + i]] = (c2[a[N + i]] or 0) + 1 end
    assert.are.same(c1, c2)                       -- the same examples (their labels' counts) each epoch
  end)

  it("shard{by = \"shards\"} gives each rank whole shards, disjoint, together all", function()
    local sh = data.shards{dir = dir .. "/fm", fields = {image = "png", label = "cls"}, channels = 1,
                           zero_based = {"label"}}
    local r0 = sh:shard{rank = 0, world = 2, by = "shards"}:batch(1000)
    local r1 = sh:shard{rank = 1, world = 2, by = "shards"}:batch(1000)
    local n0, n1 = 0, 0
    for b in r0:iter{epochs = 1} do n0 = b.image:size(1) end
    for b in r1:iter{epochs = 1} do n1 = b.image:size(1) end
    assert.are.equal(64 + 64 + 44, n0)             -- shards 0, 2 and 4 (of 64, 64, 64, 64, 44)
    assert.are.equal(64 + 64, n1)                  -- shards 1 and 3
    local part = sh:split{100, 200}
    assert.error_matches(function() part:shuffle{shards = true}:batch(2):iter() end,
      "the dataset has no shards to work on", 1, true)
  end)

  it("killed (SIGKILL) mid-epoch and resumed, a run on shards ends bit-identical to an uninterrupted one", function()
    local d = H.tmpdir("shards-resume")
    H.spit(d .. "/exp.lua", string.format([[
local dl = require "dlua"
return dl.experiment{name = "shards-resume", hparams = {steps = 60, delay = 0.004},
  build = function(hp)
    local ds = dl.data.shards{dir = %q, fields = {image = "png", label = "cls"}, channels = 1,
                              zero_based = {"label"}}
    local m = dl.nn.Sequential{dl.nn.Flatten(), dl.nn.Linear(784, 10)}
    return {model = m, loss = dl.nn.CrossEntropy(),
      optimizer = dl.optim.SGD{params = m:parameters(), lr = 0.05, momentum = 0.9},
      data = ds:shuffle{seed = hp.data_seed, shards = true, window = 50}:map(dl.data.transforms.scale(1 / 255))
        :batch(16):workers(2),
      steps = hp.steps, log_every = 1, checkpoint = {every = 10}, tracking = false,
      forward = function(mm, b)
        local t = dl.clock()
        while dl.clock() - t < hp.delay do end
        return mm(b.image)
      end}
  end}
]], dir .. "/fm"))
    local out, rc = H.run(d, "exp.lua --out a --quiet")
    assert.are.equal(0, rc, out)
    local p = assert(io.popen("cd " .. H.shquote(d) .. " && " .. H.shquote(H.EXE) ..
      " exp.lua --out b --quiet >b.log 2>&1 & echo $!"))
    local pid = tonumber(p:read("l"))
    p:close()
    local step, t0 = 0, dl.clock()
    while step < 25 and dl.clock() - t0 < 60 do            -- steps 25-29: mid-epoch (19 batches an epoch)
      for line in (fs.read(d .. "/b/metrics.jsonl") or ""):gmatch("[^\n]+") do
        local e = dl.json.decode(line)
        if e and e.step and e.step > step then step = e.step end
      end
      if step < 25 then os.execute("sleep 0.05") end
    end
    assert.is_true(os.execute("kill -9 " .. pid))
    os.execute("sleep 0.2")
    assert.is_true(step >= 25 and step < 60, "killed at step " .. step)
    out, rc = H.run(d, "exp.lua --out b --resume --quiet")
    assert.are.equal(0, rc, out)
    local wa = assert(dl.checkpoint.load(d .. "/a/checkpoints/ckpt-000000060.safetensors"))
    local wb = assert(dl.checkpoint.load(d .. "/b/checkpoints/ckpt-000000060.safetensors"))
    local n = 0
    for k, t in pairs(wa) do
      assert.are.equal(flat(t), flat(wb[k]), k)
      n = n + 1
    end
    assert.is_true(n >= 2)
  end)

  it("name the shard and key of an example without a field, and the member of one that cannot be decoded", function()
    local d = H.tmpdir("shards-bad")
    core._tar_write(d .. "/a.tar", {{"k1.png", H.slurp("examples/images/circle/1.png")}, {"k1.cls", "0"},
                                    {"k2.png", H.slurp("examples/images/circle/2.png")}})
    local ok, err = pcall(data.shards, {files = {d .. "/a.tar"}, fields = {image = "png", label = "cls"}})
    assert.is_false(ok)
    assert.matches("shards: " .. d .. "/a.tar: example 'k2' (at offset 2048) has no .cls member for field 'label'", err,
      1, true)
    local sk = data.shards{files = {d .. "/a.tar"}, fields = {image = "png", label = "cls"}, on_error = "skip"}
    assert.are.equal(1, #sk)
    assert.are.equal(1, sk.incomplete)
    core._tar_write(d .. "/b.tar", {{"k1.png", "not a png at all"}, {"k1.cls", "3"}})
    local bad = data.shards{files = {d .. "/b.tar"}, fields = {image = "png", label = "cls"}}
    ok, err = pcall(function() return bad:get(1) end)
    assert.is_false(ok)
    assert.matches(d .. "/b.tar: member 'k1.png' at offset 0", err, 1, true)
    assert.matches("not a PNG or JPEG", err, 1, true)
    assert.error_matches(function() data.shards{files = {d .. "/a.tar"}, fields = {image = "gif"}} end,
      "shards: fields.image: extension 'gif' is not one dlua reads", 1, true)
    assert.error_matches(function() data.shards{files = {d .. "/a.tar"}, fields = {image = "png"}, shuffel = 1} end,
      "shards: unknown option 'shuffel'", 1, true)
  end)
end)
