-- dl.checkpoint: round trips of every dtype and odd shapes, files re-read by an
-- independent Python + numpy reader (tests/lua/safetensors_read.py), files
-- written by numpy loaded here, corrupt / truncated / hostile files refused
-- with their reason, atomic writes that leave the old file intact, and a
-- fuzz loop of random byte flips and truncations.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local shquote = H.shquote
local tmpdir = H.tmpdir
local slurp = H.slurp
local spit = H.spit
local ck = dl.checkpoint

local PY = "/usr/bin/python3"
local SCRIPT = "tests/lua/safetensors_read.py"
local DLUA = os.getenv("DLUA_EXE") or ((os.getenv("DLUA_BUILD") or "build") .. "/dlua")

-- runs a shell command; returns exit code, stdout, stderr
local function run(cmd)
  local out, err = os.tmpname(), os.tmpname()
  local _, how, code = os.execute(cmd .. " >" .. shquote(out) .. " 2>" .. shquote(err))
  local o, e = slurp(out), slurp(err)
  os.remove(out)
  os.remove(err)
  assert(how == "exit", "killed by signal " .. tostring(code) .. "\n" .. e)
  return code, o, e
end

local function listdir(d)
  local p = io.popen("ls -A " .. shquote(d))
  local names = {}
  for line in p:lines() do names[#names + 1] = line end
  p:close()
  table.sort(names)
  return names
end

-- "x" .. hex digits -> the bytes (the x keeps an empty string a word)
local function unhex(h)
  return (h:sub(2):gsub("..", function(x) return string.char(tonumber(x, 16)) end))
end

-- the Python reader's dump -> {format =, meta = {}, tensors = {name = {dtype, shape, values}}}
local function py_read(path)
  local code, out, err = run(PY .. " " .. SCRIPT .. " read " .. shquote(path))
  assert(code == 0, "python reader refused " .. path .. ": " .. err)
  local r = {meta = {}, tensors = {}}
  local cur
  for line in out:gmatch("[^\n]+") do
    local w = {}
    for x in line:gmatch("%S+") do w[#w + 1] = x end
    if w[1] == "format" then r.format = w[2]
    elseif w[1] == "meta" then r.meta[unhex(w[2])] = unhex(w[3])
    elseif w[1] == "tensor" then
      local shape = {}
      if w[4] ~= "-" then for d in w[4]:gmatch("%d+") do shape[#shape + 1] = tonumber(d) end end
      cur = {dtype = w[3], shape = shape, values = {}}
      r.tensors[unhex(w[2])] = cur
    elseif w[1] == "values" then
      for i = 2, #w do cur.values[i - 1] = w[i] end
    end
  end
  return r, out
end

local ST = {F32 = "float32", F64 = "float64", I32 = "int32", I64 = "int64", U8 = "uint8"}

local function num(s)
  local special = {inf = math.huge, ["-inf"] = -math.huge, nan = 0 / 0}
  if special[s] then return special[s] end
  if s:match("^%-?%d+$") then return math.tointeger(s) end
  return tonumber(s)
end

local function same_value(a, b)
  if a ~= a then return b ~= b end
  if a == 0 and b == 0 then return 1 / a == 1 / b end       -- -0.0 is not 0.0
  return a == b
end

-- a dlua tensor against a Python dump entry, element for element. int64
-- values beyond 2^53 do not survive dlua's double-valued element access and
-- are compared byte for byte by `safetensors_read.py same` instead.
local function assert_matches(t, p, name)
  assert.are.equal(ST[p.dtype], t:dtype(), name)
  assert.are.same(p.shape, t:shape(), name)
  assert.are.equal(#p.values, t:numel(), name)
  for i, s in ipairs(p.values) do
    local v = num(s)
    if not (math.type(v) == "integer" and math.abs(v) > 2 ^ 53) then
      assert(same_value(v, t:get_flat(i)), string.format("%s[%d]: python %s, dlua %s", name, i, s, t:get_flat(i)))
    end
  end
end

local function assert_same_tensor(a, b, name)
  assert.are.equal(a:dtype(), b:dtype(), name)
  assert.are.same(a:shape(), b:shape(), name)
  for i = 1, a:numel() do
    local x, y = a:get_flat(i), b:get_flat(i)
    assert(same_value(x, y), string.format("%s[%d]: %s vs %s", name, i, x, y))
  end
end

local function keys(t)
  local k = {}
  for n in pairs(t) do k[#k + 1] = n end
  table.sort(k)
  return k
end

-- a raw file: header text (padded or not as given), data bytes
local function raw_file(path, header, data)
  spit(path, string.pack("<I8", #header) .. header .. (data or ""))
end

local function refused(path, reason)
  local t, msg = ck.load(path)
  assert.is_nil(t)
  assert.is_string(msg)
  assert(msg:find(reason, 1, true), "expected '" .. reason .. "' in: " .. msg)
  assert(msg:find(path, 1, true), "the message names the file: " .. msg)
  local ok, vmsg = ck.verify(path)
  assert.is_nil(ok)
  assert.are.equal(msg, vmsg)
  return msg
end

describe("dlua.train.checkpoint", function()
  local d = tmpdir()
  teardown(function() os.execute("rm -rf " .. shquote(d)) end)

  local function every_dtype()
    dl.seed(11)
    local base = dl.randn(3, 4)
    return {
      f32 = base,
      f64 = dl.tensor({1 / 3, math.huge, -math.huge, 0 / 0, 4.9e-324, -0.0, 1e308}, {dtype = "float64"}),
      i32 = dl.tensor({-2147483648, 2147483647, 0, -1, 7}, {dtype = "int32"}),
      i64 = dl.tensor({-(2 ^ 53), 2 ^ 53, 0, -1, 123456789012}, {dtype = "int64"}),
      u8 = dl.arange(0, 256):to("uint8"),
      scalar = dl.tensor(2.5),
      int_scalar = dl.tensor(-9, {dtype = "int64"}),
      empty = dl.zeros(0, 3),
      empty_u8 = dl.zeros(4, 0, 2):to("uint8"),
      transposed = base:transpose(1, 2),                  -- non-contiguous views
      narrowed = base:narrow(2, 2, 2),
      selected = base:select(2, 3),
      expanded = dl.tensor({1, 2, 3}):expand(2, 3),
      permuted = dl.arange(0, 24):reshape(2, 3, 4):permute(3, 1, 2):to("int64"),
    }
  end

  it("round-trips every dtype, 0-d, empty and non-contiguous tensors; a Python reader agrees", function()
    local src = every_dtype()
    assert.is_false(src.transposed:is_contiguous())
    assert.is_false(src.expanded:is_contiguous())
    local p = d .. "/all.safetensors"
    assert.is_true(ck.save(p, src, {step = "100"}))
    local got, meta = ck.load(p)
    assert.are.same(keys(src), keys(got))
    for name, t in pairs(src) do
      assert_same_tensor(t, got[name], name)
      assert.is_true(got[name]:is_contiguous())
    end
    assert.are.same({step = "100"}, meta)
    local py = py_read(p)
    assert.are.equal("dlua-checkpoint", py.format)
    assert.are.equal("100", py.meta.step)
    assert.are.equal("1", py.meta.format_version)
    assert.are.same(keys(src), keys(py.tensors))
    for name, t in pairs(src) do assert_matches(t, py.tensors[name], name) end
  end)

  it("keeps names with quotes, backslashes, control bytes, NUL and unicode, and metadata strings", function()
    local names = {'a"b', "back\\slash", "new\nline", "tab\t", "\0nul", "", " spaced ", "é", "日本語", "😀",
      "0.weight",
      "{\"json\": 1}", "\127del"}
    local src = {}
    for i, n in ipairs(names) do src[n] = dl.full(i, 2) end
    local meta = {step = "100", empty = "", json = '{"a": [1, 2]}', unicode = "λ → ∞", nul = "a\0b",
      ["key with \"quotes\""] = "\\"}
    local p = d .. "/names.safetensors"
    assert(ck.save(p, src, meta))
    local got, m = ck.load(p)
    assert.are.same(keys(src), keys(got))
    for n, t in pairs(src) do assert_same_tensor(t, got[n], n) end
    assert.are.same(meta, m)
    local py = py_read(p)
    assert.are.same(keys(src), keys(py.tensors))
    for n, t in pairs(src) do assert_matches(t, py.tensors[n], n) end
    for k, v in pairs(meta) do assert.are.equal(v, py.meta[k]) end
  end)

  it("writes and reads many tensors", function()
    local src = {}
    for i = 1, 300 do src[string.format("layer%03d.weight", i)] = dl.full(i % 7, i % 3 + 1, i) end
    local p = d .. "/many.safetensors"
    assert(ck.save(p, src))
    local got = ck.load(p)
    assert.are.equal(300, #keys(got))
    for n, t in pairs(src) do assert_same_tensor(t, got[n], n) end
    local py = py_read(p)
    assert.are.equal(300, #keys(py.tensors))
    assert_matches(src["layer123.weight"], py.tensors["layer123.weight"], "layer123.weight")
  end)

  it("round-trips a module's state_dict into load_state_dict", function()
    dl.seed(3)
    local a = dl.nn.Sequential{dl.nn.Linear(5, 4), dl.nn.ReLU(), dl.nn.Linear(4, 2)}
    local b = dl.nn.Sequential{dl.nn.Linear(5, 4), dl.nn.ReLU(), dl.nn.Linear(4, 2)}
    local p = d .. "/module.safetensors"
    assert(ck.save(p, a:state_dict(), {step = "3"}))
    local tensors = assert(ck.load(p))      -- not load_state_dict(assert(...)): meta would be its options
    b:load_state_dict(tensors)
    local x = dl.randn(3, 5)
    assert.are.same(a(x):totable(), b(x):totable())
  end)

  it("saves an empty checkpoint", function()
    local p = d .. "/empty.safetensors"
    assert(ck.save(p, {}, {note = "nothing"}))
    local got, meta = ck.load(p)
    assert.are.same({}, got)
    assert.are.same({note = "nothing"}, meta)
    assert.are.same({}, py_read(p).tensors)
  end)

  it("loads a standard safetensors file written by numpy, unchecked, and re-saves it byte for byte", function()
    local p = d .. "/numpy.safetensors"
    local code, out, err = run(PY .. " " .. SCRIPT .. " write " .. shquote(p))
    assert(code == 0, err)
    local got, meta = ck.load(p)
    assert(got, meta)
    assert.are.same({format = "pt", source = "numpy"}, meta)   -- a foreign file's metadata, whole
    local py = py_read(p)
    assert.are.equal("safetensors", py.format)
    assert.are.same(keys(py.tensors), keys(got))
    for n, t in pairs(got) do assert_matches(t, py.tensors[n], n) end
    assert.are.same({}, got.count:shape())                     -- 0-d
    assert.are.same({0, 4}, got.empty:shape())
    local _, info = ck.read_meta(p)
    assert.is_false(info.checksummed)
    assert.are.equal("safetensors", info.format)
    -- int64 extremes (2^62 + 1, -2^63, 2^63 - 1) survive load + save exactly
    local q = d .. "/numpy-resaved.safetensors"
    assert(ck.save(q, got))
    local c2, o2, e2 = run(PY .. " " .. SCRIPT .. " same " .. shquote(p) .. " " .. shquote(q))
    assert(c2 == 0, e2)
    assert.are.equal("same\n", o2)
    assert(out:find("4611686018427387905", 1, true))

    local bare = d .. "/bare.safetensors"
    assert(run(PY .. " " .. SCRIPT .. " write-bare " .. shquote(bare)) == 0)
    local g2, m2 = ck.load(bare)
    assert.are.same(keys(got), keys(g2))
    assert.are.same({}, m2)
    assert.is_true(ck.verify(bare))
  end)

  it("read_meta reads the header only; verify reads and checks everything", function()
    local p = d .. "/meta.safetensors"
    assert(ck.save(p, {w = dl.ones(2, 3), b = dl.zeros(3):to("int32")}, {step = "7"}))
    local meta, info = ck.read_meta(p)
    assert.are.same({step = "7"}, meta)
    assert.are.equal("dlua-checkpoint", info.format)
    assert.are.equal("1", info.format_version)
    assert.is_true(info.checksummed)
    assert.are.equal(0, info.header_bytes % 8)
    assert.are.equal(36, info.data_bytes)
    assert.are.same({
      {name = "b", dtype = "int32", shape = {3}, offsets = {0, 12}},
      {name = "w", dtype = "float32", shape = {2, 3}, offsets = {12, 36}},
    }, info.tensors)
    assert.are.equal(8 + info.header_bytes + info.data_bytes, #slurp(p))
    assert.is_true(ck.verify(p))
    -- flip the last data byte: the header still reads, verify and load refuse
    local s = slurp(p)
    spit(p, s:sub(1, -2) .. string.char(s:byte(-1) ~ 0x40))
    assert(ck.read_meta(p))
    refused(p, "checksum mismatch for tensor 'w' (stored ")
  end)

  describe("refuses corrupt and truncated files", function()
    local p = d .. "/corrupt.safetensors"
    local good

    before_each(function()
      assert(ck.save(p, {w = dl.arange(0, 16):reshape(4, 4), x = dl.ones(3):to("int64")}, {step = "100"}))
      good = slurp(p)
    end)

    it("detects a flipped data byte in each tensor", function()
      local _, info = ck.read_meta(p)
      local data0 = 8 + info.header_bytes
      for _, t in ipairs(info.tensors) do
        local at = data0 + t.offsets[1] + 1
        spit(p, good:sub(1, at) .. string.char(good:byte(at + 1) ~ 1) .. good:sub(at + 2))
        refused(p, "checksum mismatch for tensor '" .. t.name .. "'")
      end
    end)

    it("detects an edited header (metadata value, shape) by the header checksum", function()
      spit(p, (good:gsub('"step":"100"', '"step":"900"')))
      refused(p, "checksum mismatch for the header")
      spit(p, (good:gsub('"crc32":"', '"crc33":"')))
      refused(p, "checksum mismatch for the header")
      spit(p, (good:gsub('"format_version":"1"', '"format_version":"2"')))
      refused(p, "format_version '2' is not supported (this dlua reads version 1)")
      spit(p, (good:gsub('"dlua%-checkpoint"', '"dlua-checkpoinu"')))
      refused(p, "the header has a header_crc32 but its format is 'dlua-checkpoinu', not 'dlua-checkpoint'")
    end)

    it("detects truncation at every part of the file", function()
      local n = string.unpack("<I8", good)
      local cases = {
        {0, "the file is truncated: 0 bytes, less than the 8-byte header length"},
        {5, "the file is truncated: 5 bytes, less than the 8-byte header length"},
        {8, "header length " .. n .. " is larger than the rest of the file (0 bytes)"},
        {8 + n // 2, "header length " .. n .. " is larger than the rest of the file"},
        {8 + n, "past the end of the 0-byte data section (truncated file or bad offsets)"},
        {8 + n + 20, "past the end of the 20-byte data section"},
        {#good - 1, "past the end of the " .. (#good - 9 - n) .. "-byte data section"},
      }
      for _, c in ipairs(cases) do
        spit(p, good:sub(1, c[1]))
        refused(p, c[2])
      end
      spit(p, good .. "x")
      refused(p, "the data section has " .. (#good - 8 - n + 1) .. " bytes but its tensors cover " .. (#good - 8 - n))
    end)
  end)

  describe("refuses hostile files with the reason", function()
    local p = d .. "/hostile.safetensors"
    local function T(name, dtype, shape, b, e)
      return string.format('"%s":{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}', name, dtype, shape, b, e)
    end

    it("accepts the well-formed control file", function()
      raw_file(p, "{" .. T("a", "F32", "2", 0, 8) .. "}", string.pack("<ff", 1.5, -2))
      local t, meta = ck.load(p)
      assert.are.same({1.5, -2}, t.a:totable())
      assert.are.same({}, meta)
    end)

    it("a header length of 2^60, or over the 100 MB limit", function()
      spit(p, string.pack("<I8", 1 << 60) .. "{}")
      refused(p, "header length 1152921504606846976 is larger than the rest of the file (2 bytes)")
      -- a sparse 150 MB file with a 120 MB header length: refused before any allocation
      spit(p, string.pack("<I8", 120000000))
      assert(os.execute("truncate -s 150000000 " .. shquote(p)))
      refused(p, "header length 120000000 is over the 100000000-byte limit")
      os.remove(p)
    end)

    it("invalid JSON", function()
      raw_file(p, '{"a":{"dtype":"F32",', "")
      refused(p, "header is not valid JSON: expected a field name, but the header ends at byte 20")
      raw_file(p, '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} xyz', string.rep("\0", 8))
      refused(p, "header is not valid JSON: unexpected data after the header's JSON object at byte 55")
      raw_file(p, "[1, 2]", "")
      refused(p, "not a safetensors file: the header does not start with a JSON object")
      raw_file(p, '{"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}}', string.rep("\0", 8))
      refused(p, "tensor 'a' has a non-integer number in its shape")
      raw_file(p, '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', string.rep("\0", 8))
      spit(p, slurp(p):gsub('"a"', '"\1"'))
      refused(p, "control character in a string at byte 2")
    end)

    it("missing, unknown or unsupported dtypes", function()
      raw_file(p, '{"a":{"shape":[2],"data_offsets":[0,8]}}', string.rep("\0", 8))
      refused(p, "tensor 'a' has no dtype")
      raw_file(p, "{" .. T("a", "F33", "2", 0, 8) .. "}", string.rep("\0", 8))
      refused(p, "tensor 'a' has unsupported dtype 'F33' (dlua reads F32, F64, I32, I64, U8)")
      raw_file(p, "{" .. T("a", "float32", "2", 0, 8) .. "}", string.rep("\0", 8))
      refused(p, "tensor 'a' has unsupported dtype 'float32'")
      raw_file(p, "{" .. T("h", "F16", "2", 0, 4) .. "}", string.rep("\0", 4))
      refused(p, "tensor 'h' has unsupported dtype 'F16'")
      raw_file(p, '{"a":{"dtype":32,"shape":[2],"data_offsets":[0,8]}}', string.rep("\0", 8))
      refused(p, "tensor 'a' has a dtype that is not a string")
    end)

    it("shape / offset mismatches, offsets out of range, overlapping or leaving gaps", function()
      raw_file(p, "{" .. T("a", "F32", "3", 0, 8) .. "}", string.rep("\0", 8))
      refused(p, "tensor 'a' is F32 of shape [3] (12 bytes) but its data_offsets [0, 8] hold 8 bytes")
      raw_file(p, "{" .. T("a", "F32", "100", 0, 400) .. "}", string.rep("\0", 8))
      refused(p, "tensor 'a' has data_offsets [0, 400] past the end of the 8-byte data section")
      raw_file(p, "{" .. T("a", "F32", "2", 0, 8) .. "," .. T("b", "F32", "2", 4, 12) .. "}", string.rep("\0", 12))
      refused(p, "tensors 'a' and 'b' overlap (data_offsets [0, 8] and [4, 12])")
      raw_file(p, "{" .. T("a", "F32", "2", 0, 8) .. "," .. T("b", "F32", "2", 0, 8) .. "}", string.rep("\0", 8))
      refused(p, "tensors 'a' and 'b' overlap (data_offsets [0, 8] and [0, 8])")
      raw_file(p, "{" .. T("a", "F32", "1", 0, 4) .. "," .. T("b", "F32", "1", 8, 12) .. "}", string.rep("\0", 12))
      refused(p, "bytes 4 to 8 of the data section belong to no tensor")
      raw_file(p, "{" .. T("a", "F32", "1", 4, 8) .. "}", string.rep("\0", 8))
      refused(p, "bytes 0 to 4 of the data section belong to no tensor")
      raw_file(p, "{" .. T("a", "F32", "1", 0, 4) .. "}", string.rep("\0", 8))
      refused(p, "the data section has 8 bytes but its tensors cover 4")
      raw_file(p, '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}', string.rep("\0", 4))
      refused(p, "tensor 'a' has 1 data_offsets, expected 2 (begin, end)")
    end)

    it("duplicate names and other malformed entries", function()
      raw_file(p, "{" .. T("a", "F32", "1", 0, 4) .. "," .. T("a", "F32", "1", 4, 8) .. "}", string.rep("\0", 8))
      refused(p, "duplicate tensor name 'a'")
      raw_file(p, '{"__metadata__":{"k":"1","k":"2"}}', "")
      refused(p, "duplicate __metadata__ key 'k'")
      raw_file(p, '{"__metadata__":{},"__metadata__":{}}', "")
      refused(p, "the header has two __metadata__ entries")
      raw_file(p, '{"__metadata__":{"step":100}}', "")
      refused(p, "__metadata__ value for 'step' is not a string")
      raw_file(p, '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":[]}}', string.rep("\0", 4))
      refused(p, "tensor 'a' has an unknown field 'extra'")
    end)

    it("a missing file, a directory", function()
      local t, msg = ck.load(d .. "/nope.safetensors")
      assert.is_nil(t)
      assert.are.equal("checkpoint: cannot open '" .. d .. "/nope.safetensors': No such file or directory", msg)
      assert.are.same({nil, msg}, {ck.read_meta(d .. "/nope.safetensors")})
      refused(d, "not a regular file")
    end)
  end)

  describe("save", function()
    it("raises on bad arguments, naming them", function()
      local t = dl.ones(2)
      assert.error_matches(function() ck.save(1, {}) end, "bad argument #1 to 'checkpoint.save' %(string expected, got integer%)")
      local x = d .. "/x"
      assert.error_matches(function() ck.save(x, t) end,
        "checkpoint.save: tensors must be a table of name %-> tensor, got userdata")
      assert.error_matches(function() ck.save(x, {t}) end, "checkpoint.save: tensor names must be strings, got number key 1")
      assert.error_matches(function() ck.save(x, {w = {1, 2}}) end,
        "checkpoint.save: value for 'w' is a table, expected a tensor")
      assert.error_matches(function() ck.save(x, {["\xff"] = t}) end,
        "checkpoint.save: tensor name '\\255' is not valid UTF%-8")
      assert.error_matches(function() ck.save(x, {__metadata__ = t}) end,
        "checkpoint.save: '__metadata__' cannot name a tensor")
      assert.error_matches(function() ck.save(x, {w = t}, {step = 100}) end,
        "checkpoint.save: meta must map strings to strings, got string %-> number %(key step%)")
      assert.error_matches(function() ck.save(x, {w = t}, {crc32 = "0"}) end,
        "checkpoint.save: meta key 'crc32' is reserved %(dlua writes it%)")
      local r = dl.ones(2)
      r:release()
      assert.error_matches(function() ck.save(x, {w = r}) end, "checkpoint.save: tensor 'w' has been released")
      assert.is_nil(io.open(x))
    end)

    it("writes atomically: failures leave the old file intact and no temporary files", function()
      local w = d .. "/atomic"
      assert(os.execute("mkdir -p " .. shquote(w)))
      local p = w .. "/ck.safetensors"
      assert(ck.save(p, {w = dl.ones(3)}, {step = "1"}))
      local old = slurp(p)

      local ok, msg = ck.save(w .. "/missing/ck.safetensors", {w = dl.ones(3)})
      assert.is_nil(ok)
      assert.are.equal("checkpoint: cannot write '" .. w .. "/missing/ck.safetensors': No such file or directory "
        .. "(creating a temporary file next to it)", msg)

      assert(os.execute("mkdir " .. shquote(w .. "/adir")))
      ok, msg = ck.save(w .. "/adir", {w = dl.ones(3)})
      assert.is_nil(ok)
      assert.are.equal("checkpoint: cannot write '" .. w .. "/adir': not a regular file (a device, FIFO, socket or "
        .. "directory is never replaced)", msg)
      assert.are.same({"adir", "ck.safetensors"}, listdir(w))

      -- a write that fails half-way (file size limit, like a full disk): the old file survives
      local script = w .. "/big.lua"
      spit(script, string.format([[
        local dl = require "dlua"
        print(dl.checkpoint.save(%q, {w = dl.zeros(1000000)}, {step = "2"}))
      ]], p))
      local limited = "ulimit -f 64; trap '' XFSZ; exec " .. shquote(DLUA) .. " " .. shquote(script)
      local code, out, err = run("sh -c " .. shquote(limited))
      assert(code == 0, err)
      assert.are.equal("nil\tcheckpoint: cannot write '" .. p .. "': File too large "
        .. "(writing the temporary file)\n", out)
      assert.are.equal(old, slurp(p))
      assert.are.same({"adir", "big.lua", "ck.safetensors"}, listdir(w))
      local _, meta = ck.load(p)
      assert.are.same({step = "1"}, meta)

      -- overwriting replaces the file, many times over, and leaves nothing else behind
      for i = 1, 20 do assert(ck.save(p, {w = dl.full(i, 3)}, {step = tostring(i)})) end
      local t, m = ck.load(p)
      assert.are.same({step = "20"}, m)
      assert.are.same({20, 20, 20}, t.w:totable())
      assert.are.same({"adir", "big.lua", "ck.safetensors"}, listdir(w))
    end)
  end)
end)

describe("dlua.checkpoint fuzz", function()
  it("random byte flips and truncations either load exactly or are refused, never crash", function()
    local d = tmpdir()
    local p = d .. "/fuzz.safetensors"
    local src = {
      w = dl.arange(0, 12):reshape(3, 4):scale(0.25),
      idx = dl.tensor({5, -3, 2 ^ 40, 0, 1}, {dtype = "int64"}),
      img = dl.arange(0, 7):to("uint8"),
      s = dl.tensor(-1.5, {dtype = "float64"}),
      e = dl.zeros(0, 2),
      ["name \"q\" é"] = dl.tensor({1, 2}, {dtype = "int32"}),
    }
    local meta = {step = "100", lr = "0.01"}
    assert(ck.save(p, src, meta))
    local good = slurp(p)
    local rng = 12345
    local function rand(n)                        -- a small LCG: same cases on every run
      rng = (rng * 1103515245 + 12345) % 2147483648
      return rng % n + 1
    end
    local loaded, refusals = 0, 0
    for _ = 1, 400 do
      local bytes
      if rand(3) == 1 then
        bytes = good:sub(1, rand(#good) - 1)
      else
        local b = {good:byte(1, -1)}
        for _ = 1, rand(3) do
          local i = rand(#b)
          b[i] = b[i] ~ rand(255)
        end
        bytes = string.char(table.unpack(b))
      end
      spit(p, bytes)
      local ok, t, m = pcall(ck.load, p)
      assert(ok, t)
      local vok, v = pcall(ck.verify, p)
      assert(vok, v)
      assert(pcall(ck.read_meta, p))
      if t then
        loaded = loaded + 1
        assert.are.same(meta, m)
        assert.are.same(keys(src), keys(t))
        for n, x in pairs(src) do assert_same_tensor(x, t[n], n) end
        assert.is_true(v)
      else
        refusals = refusals + 1
        assert.is_string(m)
        assert(m:find("^checkpoint: '"), m)
        assert.is_nil(v)
      end
    end
    assert(refusals > 300, "most mutations are refused: " .. refusals)
    assert.are.equal(400, loaded + refusals)
    os.execute("rm -rf " .. shquote(d))
  end)
end)
