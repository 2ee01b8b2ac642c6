-- Values that enter dlua.core are taken as given or refused, never bent: a key beside a list's
-- entries, an index list through float32, an integer beyond 2^53, a numeric string, a NaN bound,
-- a count that wraps past 2^32, a CSV number out of range (engine/lua/lua_aux.c: the list and
-- number readers; lua_ops.c, lua_pipeline.c, lua_trace.c; io/csv.c).
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")

local function refuses(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, "accepted; expected an error matching " .. pattern)
  assert.matches(pattern, tostring(err))
end

describe("a list", function()
  it("refuses a key beside its entries, naming it", function()
    refuses("bad argument #1 to '[%w.]*zeros' %(the list has the key 'dtype', which nothing reads: a list holds only "
            .. "its entries 1%.%.2%)", dl.zeros, {2, 3, dtype = "int32"})
    refuses("the list has the key 'keepdim'", function() return dl.ones(2, 3):sum({1, keepdim = true}) end)
    refuses("the list has the key 'dim'", dl.cat, {dl.ones(2, 1), dl.ones(2, 1), dim = 2})
    refuses("the list has the key 'foo'", function() return dl.ones(6):reshape({3, 2, foo = 1}) end)
    refuses("the table has the key 'x'", dl.tensor, {1, 2, x = 3})
    refuses("element %[2%] has the key 'y'", dl.tensor, {{1, 2}, {3, 4, y = 1}})
    refuses("the table has the key 5 past its length 2", dl.tensor, {1, 2, [5] = 3})
    refuses("option 'stride' %(expected {h, w}, a list of 2 integers%)",
            dl.conv2d, dl.ones(1, 1, 4, 4), dl.ones(1, 1, 3, 3), {stride = {1, 1, x = 3}})
  end)

  it("still takes a plain list, and keys in an options table", function()
    assert.are.same({2, 3}, dl.zeros({2, 3}):shape())
    assert.are.same({1, 3}, dl.ones(2, 3):sum({dim = 1, keepdim = true}):shape())
    assert.are.same({2, 2}, dl.cat({dl.ones(2, 1), dl.ones(2, 1)}, 2):shape())
  end)
end)

describe("integer values", function()
  it("pick the element an index list names, past float32's 2^24", function()
    local a = dl.arange(16777220, {dtype = "int64"})
    assert.are.equal(16777216, a:index_select(1, {16777217}):item())     -- float32 made it 16777215
    assert.are.equal(16777218, a:gather(1, {16777219}):item())
    refuses("index 1%.5 is not an integer", function() return a:index_select(1, {1.5}) end)
  end)

  it("are written into integer tensors exactly", function()
    local z = dl.zeros(1, 3, {dtype = "int64"})
    z[1] = {16777217, 1, 2}
    assert.are.equal(16777217, z:totable()[1][1])
    local c = dl.zeros(2, {dtype = "int32"})
    c:copy_({16777217, 5})
    assert.are.same({16777217, 5}, c:totable())
  end)

  it("keep a nested table next to an integer tensor float, as documented for arithmetic", function()
    assert.are.equal("float32", (dl.tensor({1, 2}, {dtype = "int32"}) + {1, 2}):dtype())
  end)

  it("beyond 2^53 come back exact from int64 tensors, and are refused on the way in", function()
    local t = dl.zeros(2, {dtype = "int64"})
    t:set_flat(2, 4611686018427387904)                       -- 2^62: exact as a float64
    assert.are.equal(4611686018427387904, t:totable()[2])
    assert.are.equal(math.tointeger(2^62), t:get_flat(2))
    assert.are.equal("integer", math.type(t[2]:item()))
    refuses("element %[1%] is 9007199254740993, beyond 2%^53", dl.tensor, {9007199254740993}, {dtype = "int64"})
    refuses("integer 9007199254740993 is beyond 2%^53", dl.full, 9007199254740993, 2)
  end)
end)

describe("number arguments", function()
  it("refuse numeric strings", function()
    refuses("bad argument #1 to '[%w.]*full' %(number expected, got string%)", dl.full, "3", 2)
    local t = dl.tensor({-5, 5})
    refuses("number expected, got string", function() return t:scale("2") end)
    refuses("number expected, got string", function() return t:clone():fill_("7") end)
    refuses("number expected, got string", function() return t:clamp("0", 1) end)
  end)

  it("refuse a NaN clamp bound; nil is the way to leave a side open", function()
    local t = dl.tensor({-5, 5})
    refuses("min is nan; nil means no lower bound", function() return t:clamp(0 / 0, 1) end)
    refuses("max is nan; nil means no upper bound", function() return t:clamp(0, 0 / 0) end)
    assert.are.same({-5, 1}, t:clamp(nil, 1):totable())
  end)

  it("refuse var's correction and unbiased together", function()
    local a = dl.arange(3)
    refuses("give correction or unbiased, not both", function() return a:var({correction = 2, unbiased = true}) end)
    assert.are.equal(2, a:var({correction = 2}):item())
    assert.is_true(math.abs(a:var({unbiased = false}):item() - 2 / 3) < 1e-6)
  end)
end)

describe("counts and paths", function()
  it("refuse workers and prefetch past their limits instead of wrapping at 2^32", function()
    local ds = dl.data.tensors({x = dl.arange(8)})
    for _, n in ipairs({math.tointeger(2^32 + 1), math.tointeger(2^32), 1 << 40, 2000}) do
      refuses("workers: count must be an integer in %[0, 1024%], got " .. n, function() return ds:batch(2):workers(n) end)
      -- the binding checks the same before its cast to int, for a caller of dlua.core itself
      refuses("option 'workers' %(at most 1024, got " .. n .. "%)", function()
        return require("dlua.core")._pipe_new(ds._ud, {batch = 2, workers = n})
      end)
    end
    refuses("prefetch: depth must be an integer in %[1, 1048576%], got 4294967298",
            function() return ds:batch(2):prefetch(math.tointeger(2^32 + 2)) end)
  end)

  it("refuse image channels and a transform's stage out of range before the cast to int", function()
    local core = require("dlua.core")
    local labels = dl.tensor({1}, {dtype = "int32"})
    for _, c in ipairs({2, math.tointeger(2^32 + 3)}) do
      refuses("channels must be 1 or 3, got " .. c, core._ds_images, ".", {"a.png"}, labels, c, false)
    end
    local ds = dl.data.tensors({x = dl.arange(8)})
    refuses("option 'transforms%[1%]%.stage' %(at most %d+, got 4294967297%)", core._pipe_new, ds._ud,
            {batch = 2, transforms = {{kind = "scale", field = "x", scale = 2, stage = math.tointeger(2^32 + 1)}}})
  end)

  it("refuse a subset position that is not whole (1.5 used to mean 1)", function()
    local ds = dl.data.tensors({x = dl.arange(8)})
    refuses("subset: index 1 must be a positive integer, got 1%.5", function() return ds:subset({1.5, 3}) end)
    assert.are.equal(2, #ds:subset({2, 3.0}))
  end)

  it("refuse a trace path longer than the recorder keeps", function()
    refuses("trace: the path has 1100 bytes, at most 1023", dl.trace.start, string.rep("a", 1100))
    assert.is_false((dl.trace.active()))
  end)
end)

describe("a CSV number", function()
  local dir = H.tmpdir("core-values-csv")
  local function csv(text, opts)
    H.spit(dir .. "/f.csv", text)
    opts = opts or {}
    opts.path = dir .. "/f.csv"
    return dl.data.csv(opts)
  end

  it("out of float64's range, or hexadecimal, is refused with its line and column", function()
    refuses("line 2, column 'a' %(1%): '1e400' is out of float64's range", csv, "a,b\n1e400,2\n")
    refuses("line 3, column 'b' %(2%): '1e%-400' is out of float64's range", csv, "a,b\n1,2\n3,1e-400\n")
    refuses("'0x10' is not a decimal number", csv, "a,b\n0x10,2\n")
  end)

  it("beyond float32 in a float32 field, or beyond 2^53 as int64, is refused", function()
    refuses("1e39 is out of range for float32; a \"float64\" entry in types keeps it %(field 'a'%)", csv,
            "a,b\n1e39,2.5\n")
    assert.are.equal(1e39, csv("a,b\n1e39,2.5\n", {types = {a = "float64"}}):get(1).a)
    refuses("12345678901234567 is out of range for int64 read from CSV %(values are read as float64, exact up to "
            .. "2%^53%)", csv, "a,b\n12345678901234567,1\n", {types = {a = "int64"}})
    assert.are.equal(9007199254740992, csv("a,b\n9007199254740992,1\n", {types = {a = "int64"}}):get(1).a)
  end)

  it("written as nan or inf is taken as written", function()
    local ex = csv("a,b\nnan,inf\n"):get(1)
    assert.is_true(ex.a ~= ex.a)
    assert.are.equal(math.huge, ex.b)
  end)
end)
