-- Issue 16/17 reproducers, one per class: shapes whose size product overflowed
-- (checked in one place now, engine/core/shape.c), crafted file headers, and inputs
-- that used to give silently wrong results (int tensors requiring grad, CSV
-- integers saturated to int32, IDX files with extra bytes or members, 2-D label
-- files). Each must fail with a message naming the op, the shape or the file.
local dl = require "dlua"
local core = require "dlua.core"
local H = dofile("tests/lua/helpers.lua")

local function gz(path, ...)                     -- one gzip member per string, concatenated
  local f = assert(io.open(path, "wb"))
  for _, s in ipairs({...}) do
    local p = assert(io.popen("gzip -c > " .. H.shquote(path .. ".m"), "w"))
    p:write(s)
    p:close()
    f:write(H.slurp(path .. ".m"))
  end
  f:close()
  os.remove(path .. ".m")
end

local function idx(dims, data)
  local h = string.char(0, 0, 8, #dims)
  for _, d in ipairs(dims) do h = h .. string.pack(">I4", d) end
  return h .. data
end

describe("dlua shapes", function()
  it("refuses a view whose size product overflows instead of wrapping to 4", function()
    assert.error_matches(function() dl.zeros(4):view((1 << 62) + 1, 4) end,
      "view: shape %[4611686018427387905, 4%] overflows %(more than 2%^48 elements%)")
    assert.error_matches(function() dl.zeros(4):reshape((1 << 62) + 1, 4) end,
      "reshape: shape %[4611686018427387905, 4%] overflows")
    assert.are.same({2, 2}, dl.zeros(4):view(2, 2):shape())
  end)

  it("refuses an expand past 2^48 elements (numel was -2^63, print never returned)", function()
    assert.error_matches(function() dl.zeros(2):expand(1 << 62, 2) end,
      "expand: shape %[4611686018427387904, 2%] overflows %(more than 2%^48 elements%)")
    local e = dl.tensor({1, 2}):expand(3, 2)
    assert.are.equal(6, e:numel())
    assert.are.same({{1, 2}, {1, 2}, {1, 2}}, e:totable())
  end)

  it("refuses -1 among sizes that hold 0 elements (it kept shape [0, -1])", function()
    assert.error_matches(function() dl.zeros(0):reshape(0, -1) end,
      "reshape: shape %[0, %-1%] is ambiguous: the size of %-1 cannot be inferred with 0 elements")
    assert.error_matches(function() dl.zeros(0):view(0, -1) end, "view: shape %[0, %-1%] is ambiguous")
    assert.are.same({0, 3}, dl.zeros(0):reshape(-1, 3):shape())
    assert.are.same({2, 3}, dl.zeros(6):reshape(2, -1):shape())
  end)

  it("refuses creation shapes whose non-zero sizes overflow, even with a 0 size", function()
    assert.error_matches(function() dl.zeros(1 << 62, 0, 1 << 62) end,
      "tensor: shape %[4611686018427387904, 0, 4611686018427387904%] overflows")
    assert.error_matches(function() dl.zeros(4):narrow(1, 2, math.maxinteger) end,
      "bad argument #2 to 'narrow' (start 2 and length 9223372036854775807 out of range for dimension 1 of size 4)",
      nil, true)
  end)
end)

describe("dlua file headers", function()
  local d = H.tmpdir("shapes")

  it("refuses IDX dims [0, 2^32-1, 2^32-1] (signed overflow before)", function()
    H.spit(d .. "/huge.idx", idx({0, 0xffffffff, 0xffffffff}, ""))
    assert.error_matches(function() dl.read_idx(d .. "/huge.idx") end,
      "huge.idx': shape %[0, 4294967295, 4294967295%] overflows %(more than 2%^48 elements%)")
  end)

  it("reports a 145-byte cache header declaring 2^62 examples as corrupt", function()
    local h = string.pack("<I4", 84) .. string.rep("f", 84) .. string.pack("<i8I4", 1 << 62, 1) ..
      string.pack("<I4", 5) .. "image" .. string.pack("<I4I4i8", 4, 1, 1 << 30) .. string.rep("\0", 4)
    local file = "DLUACACH" .. string.pack("<I4I4", 1, #h) .. h
    assert.are.equal(145, #file)
    H.spit(d .. "/c.bin", file)
    local ds, status, msg = core._cache_load(d .. "/c.bin", "x")
    assert.is_nil(ds)
    assert.are.equal("corrupt", status)
    assert.matches("c.bin' is corrupt at offset 141: field image: shape %[4611686018427387904, 1073741824%] overflows", msg)
  end)

  it("refuses IDX files with trailing bytes, several gzip members, or 2-D labels", function()
    local ok = idx({2, 3}, "abcdef")
    H.spit(d .. "/t.idx", ok .. "XY")
    assert.error_matches(function() dl.read_idx(d .. "/t.idx") end,
      "t.idx' has 2 trailing bytes after the 12%-byte header and the 6 data bytes it declares")
    gz(d .. "/t.idx.gz", ok .. "XY")
    assert.error_matches(function() dl.read_idx(d .. "/t.idx.gz") end,
      "t.idx.gz' has trailing bytes after the 12%-byte header and the 6 data bytes it declares")
    gz(d .. "/two.idx.gz", ok:sub(1, 14), ok:sub(15))
    assert.error_matches(function() dl.read_idx(d .. "/two.idx.gz") end,
      "two.idx.gz' holds several gzip members %(its last one inflates to 4 bytes, the IDX file is 18%)")
    gz(d .. "/one.idx.gz", ok)
    assert.are.same({{97, 98, 99}, {100, 101, 102}}, dl.read_idx(d .. "/one.idx.gz"):totable())
    H.spit(d .. "/img.idx", idx({2, 2, 2}, "abcdefgh"))
    H.spit(d .. "/lab2.idx", idx({2, 1}, "\1\2"))
    assert.error_matches(function() dl.data.idx{images = d .. "/img.idx", labels = d .. "/lab2.idx"} end,
      "idx: labels .*lab2.idx must have 1 dimension %(one label per image%), got 2")
    H.spit(d .. "/lab.idx", idx({2}, "\1\2"))
    assert.are.equal(2, #dl.data.idx{images = d .. "/img.idx", labels = d .. "/lab.idx"})
  end)
end)

describe("dlua silently wrong inputs", function()
  it("refuses requires_grad on a non-float tensor, at creation and by method", function()
    assert.error_matches(function() dl.zeros(3, {dtype = "int64", requires_grad = true}) end,
      "bad argument #2 to '[%w._]*zeros' %(option 'requires_grad' %(only float tensors can require grad, got int64%)%)")
    assert.error_matches(function() dl.tensor({1, 2}, {dtype = "int32", requires_grad = true}) end,
      "bad argument #2 to '[%w._]*tensor' %(option 'requires_grad' %(only float tensors can require grad, got int32%)%)")
    assert.error_matches(function() dl.zeros(3, {dtype = "int64"}):requires_grad(true) end,
      "requires_grad: only float tensors can require grad, got int64")
    assert.is_true(dl.zeros(3, {requires_grad = true}):requires_grad())
  end)

  it("refuses CSV integers an int column cannot hold, naming file, line, column and value", function()
    local d = H.tmpdir("csvrange")
    H.spit(d .. "/r.csv", "id,x\n1,0.5\n2147483648,1\n4000000000,2\n")
    assert.error_matches(function() dl.data.csv{path = d .. "/r.csv"} end,
      "csv: '.*r.csv' line 3, column 'id' %(1%): 2147483648 is out of range for int32 %(field 'id'%)")
    H.spit(d .. "/r2.csv", "id\n1\n4000000000\n")
    assert.error_matches(function() dl.data.csv{path = d .. "/r2.csv"} end,
      "line 3, column 'id' %(1%): 4000000000 is out of range for int32")
    local ds = dl.data.csv{path = d .. "/r.csv", types = {id = "int64"}}
    assert.are.equal(4000000000, ds:get(3).id)
    assert.error_matches(function() dl.data.csv{path = d .. "/r.csv", types = {id = "int64", x = "int32"}} end,
      "line 2, column 'x' %(2%): 0.5 is not an integer, as int32 %(field 'x'%)")
  end)
end)
