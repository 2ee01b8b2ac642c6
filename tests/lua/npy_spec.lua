-- NumPy arrays (issue 32, item 3): .npy and .npz files written by numpy itself
-- (tests/lua/npy_fixtures.py, run with Debian's python3-numpy) read back to
-- exactly numpy's values, converted as documented; hostile files refused with
-- messages naming the file, the member and the offset; datasets from them run
-- through pipelines; the mmap path really maps.
local dl = require "dlua"
local core = require "dlua.core"
local util = require "dlua.util"
local H = dofile("tests/lua/helpers.lua")
local data, nn, optim = dl.data, dl.nn, dl.optim

local dir = H.tmpdir("npy")
assert(os.execute("/usr/bin/python3 tests/lua/npy_fixtures.py " .. H.shquote(dir)),
  "tests/lua/npy_fixtures.py failed (needs python3-numpy)")
local MANIFEST = dofile(dir .. "/manifest.lua")
local function p(name) return dir .. "/" .. name end
local function esc(s) return (s:gsub("%p", "%%%0")) end

-- t has the manifest case's dtype, shape and exactly the bytes numpy converted
local function assert_case(c, t)
  assert.are.equal(c.dtype, t:dtype(), c.name)
  assert.are.same(c.shape, t:shape(), c.name)
  assert(core._tensor_bytes(t) == H.slurp(p(c.name .. ".expect")), c.name .. ": bytes differ from numpy's")
end

describe("dlua.data.read_npy", function()
  it("reads every supported dtype, both byte orders, 0-d, empty, Fortran order, 8-d, versions 2 and 3", function()
    local n = 0
    for _, c in ipairs(MANIFEST) do
      if not c.member then
        assert_case(c, data.read_npy(p(c.file)))
        assert_case(c, data.read_npy(p(c.file), {mmap = false}))
        n = n + 1
      end
    end
    assert(n >= 40, "the manifest lists " .. n .. " .npy cases")
  end)

  it("maps the dtypes as documented", function()
    local want = {f2 = "float32", f4 = "float32", f8 = "float64", i1 = "int32", i2 = "int32", i4 = "int32",
                  i8 = "int64", u1 = "uint8", u2 = "int32", u4 = "int64", u8 = "int64", b1 = "uint8"}
    for code, dtype in pairs(want) do assert.are.equal(dtype, data.read_npy(p("le_" .. code .. ".npy")):dtype()) end
    assert.are.same({-1, 127, -128}, data.read_npy(p("le_i1.npy")):narrow(1, 3, 3):totable())
    assert.are.same({1, 0, 1, 1}, data.read_npy(p("le_b1.npy")):totable())
    assert.are.same({0, 1, 1}, data.read_npy(p("bool_bytes.npy")):totable())     -- any non-zero byte is True
    assert.are.same({1.5, -2, 65504}, data.read_npy(p("be_f2.npy")):narrow(1, 3, 3):totable())
    assert.are.equal(2.5, data.read_npy(p("scalar_f8.npy")):item())
    assert.are.same({2, 3}, data.read_npy(p("py2_long.npy")):shape())
  end)

  it("transposes Fortran-order arrays into C order", function()
    local t = data.read_npy(p("fortran_3d.npy"))
    assert.are.same({2, 3, 4}, t:shape())
    assert.are.equal(1 * 12 + 2 * 4 + 3, t[2][3][4]:item())   -- np.arange(24).reshape(2, 3, 4)[1, 2, 3]
  end)

  local function stats() collectgarbage(); collectgarbage(); return dl.memory.stats() end

  it("maps an uncompressed file: memory in use does not grow by its size, mapped does", function()
    local bytes = 1024 * 1024 * 4
    local before = stats()
    local t = data.read_npy(p("big.npy"))
    local after = stats()
    assert.are.equal(bytes, after.mapped - before.mapped)
    assert(after.in_use - before.in_use < 4096, "in_use grew by " .. (after.in_use - before.in_use))
    assert_case({name = "big", dtype = "float32", shape = {1024, 1024}}, t)
    t = nil                                                            -- luacheck: ignore
    assert.are.equal(before.mapped, stats().mapped)                    -- unmapped with the last reference
    before = stats()
    local r = data.read_npy(p("big.npy"), {mmap = false})
    after = stats()
    assert.are.equal(0, after.mapped - before.mapped)
    assert(after.in_use - before.in_use >= bytes)
    assert.are.equal(1024, r:size(1))
  end)

  it("never writes through a mapping into the file (copy-on-write)", function()
    local t = data.read_npy(p("le_f4.npy"))
    t:fill_(7)
    assert.are.equal(70, t:sum():item())
    assert_case({name = "le_f4", dtype = "float32", shape = {10}}, data.read_npy(p("le_f4.npy")))
  end)

  it("reads instead of mapping what must be converted, transposed or is misaligned", function()
    for _, f in ipairs({"be_f4", "le_f2", "fortran_2d", "unaligned", "le_u2", "empty_0"}) do
      local before = stats().mapped
      local t = data.read_npy(p(f .. ".npy"))
      assert.are.equal(before, stats().mapped, f)
      assert(t)
    end
    assert_case({name = "unaligned", dtype = "float32", shape = {6}}, data.read_npy(p("unaligned.npy")))
  end)

  it("refuses hostile and unsupported files naming the file and offset", function()
    local cases = {
      huge_shape = "huge_shape.npy': shape: shape %[1099511627776, 1099511627776%] overflows",
      huge_dim = "huge_dim.npy': bad header at offset 61: a size of at most 2%^48",
      truncated_data = "truncated_data.npy' is truncated: the header declares 40 data bytes at offset 128, the stream has 36",
      trailing = "trailing.npy' has 4 trailing bytes after the 4 data bytes at offset 128",
      missing_key = "missing_key.npy': bad header: the key 'fortran_order' is missing",
      extra_key = "extra_key.npy': bad header at offset 66: an unknown key 'x'",
      not_tuple = "not_tuple.npy': bad header at offset 62: ',' after the size of a 1%-dimensional shape",
      negative = "negative.npy': bad header at offset 61: a size %(a non%-negative integer%), found '%-'",
      unquoted = "unquoted.npy': bad header at offset 11: a quoted key or '}', found 'd'",
      complex = "complex.npy': dtype '<c8' at offset 20 is not supported",
      structured = "structured.npy': bad header at offset 20: a string for 'descr' %(structured dtypes are not supported%)",
      object = "object.npy': dtype '|O' at offset 20 is not supported",
      u8_big = "u8_big.npy': the uint64 value at offset 136 %(element 1%) is past int64's range",
      bad_magic = "bad_magic.npy' has a bad magic 93 4e 55 4d 50 5a at offset 0 %(not a %.npy file%)",
      version9 = "version9.npy' has format version 9.0 at offset 6",
      absurd_header = "absurd_header.npy' declares a header of 2147483648 bytes at offset 8 %(at most 65536",
      truncated_header = "truncated_header.npy' is truncated: the header ends at offset 128, the stream has 40 bytes",
    }
    for f, msg in pairs(cases) do
      for _, map in ipairs({true, false}) do
        assert.error_matches(function() data.read_npy(p(f .. ".npy"), {mmap = map}) end, "npy: '" .. esc(dir) .. "/" .. msg)
      end
    end
    assert.error_matches(function() data.read_npy(p("nope.npy")) end, "npy: cannot open '.*nope.npy': No such file")
    assert.error_matches(function() data.read_npy(dir) end, "is not a regular file")
    assert(os.execute("mkfifo " .. H.shquote(p("fifo"))))                -- refused, not waited on
    assert.error_matches(function() data.read_npy(p("fifo")) end, "npy: '.*fifo' is not a regular file")
    assert.error_matches(function() data.read_npz(p("fifo")) end, "npz: '.*fifo' is not a regular file")
  end)

  it("checks its arguments", function()
    assert.error_matches(function() data.read_npy(3) end, "bad argument #1 to 'data.read_npy' %(string expected, got integer%)")
    assert.error_matches(function() data.read_npy(p("le_f4.npy"), {map = true}) end,
      "read_npy: unknown option 'map' %(valid: mmap%); did you mean 'mmap'%?")
    assert.error_matches(function() data.read_npy(p("le_f4.npy"), {mmap = 1}) end,
      "read_npy: option 'mmap' must be boolean, got integer")
    assert.error_matches(function() data.read_npy(p("le_f4.npy"), nil, 1) end, "no more than 2 arguments")
  end)
end)

describe("dlua.data.read_npz", function()
  it("reads np.savez (stored) and np.savez_compressed (deflated) members to numpy's values", function()
    local n = 0
    for _, c in ipairs(MANIFEST) do
      if c.member then
        assert_case(c, data.read_npz(p(c.file), {members = {c.member}})[c.member])
        n = n + 1
      end
    end
    assert.are.equal(12, n)
    local all = data.read_npz(p("deflated.npz"))
    assert.are.same({"half", "scalar", "x_train", "y_train"}, util.sorted_keys(all))
    assert.are.equal(1.25, all.scalar:item())
    assert.are.equal(1.25, data.read_npz(p("stored.npz"), {members = {"scalar.npy"}}).scalar:item())
  end)

  it("reads ZIP64 end records and ZIP64 sizes in directory entries", function()
    local z = data.read_npz(p("zip64.npz"), {members = {"x_train", "y_train"}})
    assert_case({name = "zip64_x_train", dtype = "uint8", shape = {20, 1, 4, 4}}, z.x_train)
    z = data.read_npz(p("zip64_entries.npz"))
    assert_case({name = "zip64e_y_train", dtype = "int64", shape = {20}}, z.y_train)
  end)

  it("keeps member names as names, never as paths", function()
    local z = data.read_npz(p("traversal.npz"))                         -- ../../etc/x_train.npy, /abs/y.npy
    assert.are.same({"../../etc/x_train", "/abs/y"}, util.sorted_keys(z))
    assert.are.same({20, 1, 4, 4}, z["../../etc/x_train"]:shape())
    assert.error_matches(function() data.npz{path = p("traversal.npz"), fields = {x = "x_train"}} end,
      "has no member 'x_train' %(members: %.%./%.%./etc/x_train, /abs/y%)")
  end)

  it("skips members that are not arrays", function()
    local z = data.read_npz(p("with_text.npz"))
    assert(z.x and z.README == nil)
  end)

  it("refuses corrupt archives naming the file, the member and the offset", function()
    local cases = {
      bad_crc = "bad_crc.npz' member 'x_train.npy': CRC%-32 mismatch: the directory says %x+, the data gives %x+",
      truncated = "truncated.npz' has no end%-of%-central%-directory record in its last %d+ bytes",
      not_zip = "not_zip.npz' has no end%-of%-central%-directory record",
      duplicate = "duplicate.npz' holds two members named 'x.npy'",
      member_garbage = "member_garbage.npz' member 'x.npy' has a bad magic 74 68 69 73 20 69 at offset 0",
      bomb = "bomb.npz': member 'half.npy' declares 1073741824 bytes from %d+ deflated bytes, which deflate cannot produce",
      bad_deflate = "bad_deflate.npz' member 'x_train.npy': ",
    }
    for f, msg in pairs(cases) do
      assert.error_matches(function() data.read_npz(p(f .. ".npz")) end, "npz: '" .. esc(dir) .. "/" .. msg)
    end
    assert.error_matches(function() data.read_npz(p("stored.npz"), {members = {"x_trian"}}) end,
      "has no member 'x_trian' %(members: x_train, y_train, scalar, half%); did you mean 'x_train'%?")
    assert.error_matches(function() data.read_npz(p("stored.npz"), {member = {}}) end,
      "read_npz: unknown option 'member' %(valid: members%); did you mean 'members'%?")
  end)
end)

describe("dlua.data.npy and data.npz datasets", function()
  it("make a dataset of one file per field, 0-based labels shifted to 1-based int32", function()
    local ds = data.npy{image = p("train_x.npy"), label = p("train_y.npy"), zero_based = {"label"}}
    assert.are.equal(256, #ds)
    local y = data.read_npy(p("train_y.npy"))
    assert.are.equal(y[5]:item() + 1, ds:get(5).label)
    assert.are.equal("int32", ds:column("label"):dtype())
    assert.are.same(data.read_npy(p("train_x.npy"))[5]:totable(), ds:get(5).image:totable())
    local plain = data.npy{image = p("train_x.npy"), label = p("train_y.npy")}
    assert.are.equal(y[5]:item(), plain:get(5).label)                 -- nothing shifted unless asked
  end)

  it("makes a dataset of an archive's members", function()
    local ds = data.npz{path = p("deflated.npz"), fields = {image = "x_train", label = "y_train.npy"},
                        zero_based = {"label"}}
    assert.are.equal(20, #ds)
    local z = data.read_npz(p("deflated.npz"))
    assert.are.equal(z.y_train[20]:item() + 1, ds:get(20).label)
    assert.are.same(z.x_train[20]:totable(), ds:get(20).image:totable())
    assert.error_matches(function() data.npz{path = p("deflated.npz")} end,      -- every member a field
      "npz: field 'scalar' %('.*deflated.npz' member 'scalar'%) is a 0%-d array; dimension 1 must index the examples")
    assert.error_matches(function() data.npz{path = p("deflated.npz"), fields = {x = "x_train", h = "half"}} end,
      "npz: field 'x' %('.*deflated.npz' member 'x_train'%) has 20 examples %(dimension 1%) but field 'h' %('.*' member 'half'%) has 10")
  end)

  it("refuses bad options and mismatched fields with clear messages", function()
    local x, y = p("train_x.npy"), p("train_y.npy")
    assert.error_matches(function() data.npy{image = x, zero_base = {"image"}} end,
      "npy: field 'zero_base' must be a path %(a string%), got table %(options: mmap, zero_based%); did you mean 'zero_based'%?")
    assert.error_matches(function() data.npy{image = x, zero_based = {"lable"}} end,
      "npy: zero_based names 'lable', which is not a field %(fields: image%)")
    assert.error_matches(function() data.npy{image = x, label = y, zero_based = {"image"}} end,
      "npy: zero_based field 'image' %('.*train_x.npy'%) is float32; 0%-based labels must be integers")
    assert.error_matches(function() data.npy{image = x, mmap = "yes"} end, "npy: option 'mmap' must be boolean, got string")
    assert.error_matches(function() data.npy{} end, "npy: no fields given")
    assert.error_matches(function() data.npy{image = x, label = p("le_i8.npy")} end,
      "npy: field 'label' %('.*le_i8.npy'%) has 6 examples %(dimension 1%) but field 'image' %('.*train_x.npy'%) has 256")
    assert.error_matches(function() data.npy{s = p("scalar_f8.npy")} end,
      "npy: field 's' %('.*scalar_f8.npy'%) is a 0%-d array; dimension 1 must index the examples")
    assert.error_matches(function() data.npy{label = p("le_i8.npy"), zero_based = {"label"}} end,
      "npy: zero_based field 'label' %('.*le_i8.npy'%) holds %-9223372036854775808; 0%-based labels must lie in %[0, 2147483647%)")
    assert.error_matches(function() data.npz{path = p("stored.npz"), feilds = {}} end,
      "npz: unknown option 'feilds' %(valid: fields, path, zero_based%); did you mean 'fields'%?")
    assert.error_matches(function() data.npz{fields = {}} end, "npz: option 'path' is required")
    assert.error_matches(function() data.npz{path = p("stored.npz"), fields = {image = "x_tran"}} end,
      "npz: '.*stored.npz' has no member 'x_tran' %(members: x_train, y_train, scalar, half%); did you mean 'x_train'%?")
    assert.error_matches(function() data.npz{path = p("stored.npz"), fields = {image = 3}} end,
      "npz: fields.image must be a member name, got number")
  end)

  it("trains through a pipeline like any dataset, with the same batches as in-memory tensors", function()
    local ds = data.npy{image = p("train_x.npy"), label = p("train_y.npy"), zero_based = {"label"}}
    local same = data.tensors{image = data.read_npy(p("train_x.npy"), {mmap = false}),
                              label = data.read_npy(p("train_y.npy")):int():scale(1, 1)}
    local a, b = ds:shuffle{seed = 3}:batch(32):workers(2), same:shuffle{seed = 3}:batch(32):workers(0)
    local ib = b:iter()
    for ba in a:iter() do
      local bb = ib()
      assert(core._tensor_bytes(ba.image) == core._tensor_bytes(bb.image))
      assert(core._tensor_bytes(ba.label) == core._tensor_bytes(bb.label))
    end
    dl.seed(1)
    local model = nn.Linear(4, 2)
    local loss = nn.CrossEntropy()
    local opt = optim.SGD{params = model:parameters(), lr = 0.1}
    for batch in ds:shuffle{seed = 1}:batch(32):iter{epochs = 5, warn = false} do
      opt:zero_grad()
      loss(model(batch.image), batch.label, batch.weight):backward()
      opt:step()
    end
    local all = ds:column("image")
    local acc = nn.accuracy(model(all), ds:column("label"))
    assert(acc > 0.95, "accuracy " .. tostring(acc))
  end)
end)
