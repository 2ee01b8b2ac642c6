-- dl.data datasets and pipelines: readers against independent references
-- (bytes decompressed by gzip(1), files written here), stages against
-- values recomputed in Lua, determinism across worker counts, resume,
-- errors from worker threads, the offline cache, the profiler and the
-- trace file (parsed and validated here).
local dl = require "dlua"
local core = require "dlua.core"
local H = dofile("tests/lua/helpers.lua")
local tmpdir = H.tmpdir
local slurp = H.slurp
local write = H.spit
local data, T = dl.data, dl.data.transforms

local FM = os.getenv("DLUA_FASHION_MNIST") or "/usr/share/datasets/fashion-mnist"

local function bytes(t) return core._tensor_bytes(t) end

-- every batch of one pass as a string of its fields' raw bytes
local function fingerprint(pipe, opts)
  local out = {}
  opts = opts or {}
  if opts.warn == nil then opts.warn = false end
  for b in pipe:iter(opts) do
    local keys = {}
    for k in pairs(b) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. (dl.is_tensor(b[k]) and bytes(b[k]) or tostring(b[k])) end
    out[#out + 1] = table.concat(parts, "|")
  end
  return out
end

-- n small random uint8 images [1, 6, 6] with labels 1..10 and an id field 1..n
local function small(n, seed)
  dl.seed(seed or 5)
  local x = dl.rand(n, 1, 6, 6):scale(255):byte()
  local lab = dl.tensor((function() local t = {} for i = 1, n do t[i] = (i * 7) % 10 + 1 end return t end)(),
    {dtype = "int32"})
  return data.tensors{image = x, id = dl.arange(1, n + 1):int(), label = lab}
end

local function ids_of(pipe)
  local seen = {}
  for b in pipe:iter{warn = false} do
    for _, v in ipairs(b.id:totable()) do seen[#seen + 1] = v end
  end
  return seen
end

describe("dlua.data datasets", function()
  it("are tensors with a length, named fields and 1-based random access", function()
    local x = dl.arange(0, 24):reshape(6, 2, 2)
    local ds = data.tensors{x = x, y = dl.tensor({3, 1, 4, 1, 5, 9}, {dtype = "int32"})}
    assert.are.equal(6, #ds)
    local e = ds:get(3)
    assert.are.same({{8, 9}, {10, 11}}, e.x:totable())
    assert.are.equal(4, e.y)
    assert.are.equal("integer", math.type(e.y))
    assert.are.equal(9, ds:get(-1).y)
    assert.error_matches(function() ds:get(7) end, "get: index 7 is out of range for a dataset of 6 examples")
    assert.error_matches(function() ds:get(-7) end, "get: index %-7 is out of range")
    assert.error_matches(function() data.tensors{a = dl.zeros(3), b = dl.zeros(4)} end,
      "field 'b' has 4 examples but field 'a' has 3")
  end)

  it("read Fashion-MNIST with the known facts and the bytes gzip decompresses", function()
    local fm = data.fashion_mnist()
    assert.are.equal(60000, #fm.train)
    assert.are.equal(10000, #fm.test)
    local e = fm.train:get(1)
    assert.are.same({1, 28, 28}, e.image:shape())
    assert.are.equal("uint8", e.image:dtype())
    for _, part in ipairs{{fm.train, 6000}, {fm.test, 1000}} do
      local counts = dl.one_hot(part[1]:column("label"):long(), 10):sum(1):totable()
      for c = 1, 10 do assert.are.equal(part[2], counts[c]) end
    end
    -- the first two images and labels, byte for byte, from gzip -dc
    local p = io.popen("gzip -dc " .. FM .. "/train-images-idx3-ubyte.gz | head -c " .. (16 + 2 * 784))
    local raw = p:read("a")
    p:close()
    assert.are.equal(string.char(0, 0, 8, 3), raw:sub(1, 4))
    assert.are.equal(raw:sub(17, 16 + 784), bytes(e.image))
    assert.are.equal(raw:sub(17 + 784, 16 + 2 * 784), bytes(fm.train:get(2).image))
    local sum = 0
    for i = 17, 16 + 784 do sum = sum + raw:byte(i) end
    assert.are.equal(sum, e.image:long():sum():item())
    p = io.popen("gzip -dc " .. FM .. "/train-labels-idx1-ubyte.gz | head -c 10")
    local labels = p:read("a")
    p:close()
    assert.are.equal(labels:byte(9) + 1, e.label)          -- stored 0-based
    assert.are.equal(10, e.label)                           -- an ankle boot
  end)

  it("stream only the first examples of an IDX file with limit", function()
    local fm = data.fashion_mnist()
    local head = data.idx{images = FM .. "/t10k-images-idx3-ubyte.gz", labels = FM .. "/t10k-labels-idx1-ubyte.gz",
      limit = 50}
    assert.are.equal(50, #head)
    assert.are.equal(bytes(fm.test:get(50).image), bytes(head:get(50).image))
    assert.are.equal(fm.test:get(50).label, head:get(50).label)
  end)

  it("refuse malformed IDX files naming the file and the offset", function()
    local d = tmpdir()
    local p = io.popen("head -c 100000 " .. FM .. "/t10k-images-idx3-ubyte.gz")
    write(d .. "/cut.gz", p:read("a"))
    p:close()
    assert.error_matches(function() data.idx{images = d .. "/cut.gz"} end,
      "cut.gz': decompression failed at data byte %d+ %(offset %d+ of the decompressed file%):.*unexpected end of file")
    write(d .. "/magic", "\1\0\8\1" .. string.pack(">I4", 1) .. "x")
    assert.error_matches(function() data.idx{images = d .. "/magic"} end, "magic' has a bad magic number 01 00 08 01 at offset 0")
    write(d .. "/short", "\0\0\8\1" .. string.pack(">I4", 9) .. "abc")
    assert.error_matches(function() data.idx{images = d .. "/short"} end,
      "short' is truncated: expected 9 data bytes after the 8%-byte header, got 3")
  end)

  it("fail with an install hint when Fashion-MNIST is absent", function()
    assert.error_matches(function() data.fashion_mnist{dir = tmpdir()} end,
      "cannot open .*train%-images%-idx3%-ubyte.gz.*apt%-get install dataset%-fashion%-mnist")
  end)

  it("read CSV and CSV.gz with typed columns, grouped fields and 0-based labels", function()
    local d = tmpdir()
    local rows = {"a,b,c,label"}
    local ref = {}
    for i = 1, 40 do
      ref[i] = {i, i * 0.25, -i, i % 3}
      rows[#rows + 1] = string.format("%d,%s,%d,%d", i, tostring(i * 0.25), -i, i % 3)
    end
    write(d .. "/t.csv", table.concat(rows, "\n") .. "\n")
    assert(os.execute("gzip -kf " .. d .. "/t.csv"))
    for _, path in ipairs{d .. "/t.csv", d .. "/t.csv.gz"} do
      local ds = data.csv{path = path}
      assert.are.equal(40, #ds)
      local types = {}
      for _, f in ipairs(ds:fields()) do types[f.name] = f.dtype end
      assert.are.same({a = "int32", b = "float32", c = "int32", label = "int32"}, types)
      for i = 1, 40, 13 do
        local e = ds:get(i)
        assert.are.same({ref[i][1], ref[i][2], ref[i][3], ref[i][4]}, {e.a, e.b, e.c, e.label})
      end
    end
    local g = data.csv{path = d .. "/t.csv", fields = {x = {"a", 2}, label = "label"}, zero_based = {"label"},
      types = {x = "float64"}}
    local e = g:get(6)
    assert.are.same({6, 1.5}, e.x:totable())
    assert.are.equal("float64", e.x:dtype())
    assert.are.equal(6 % 3 + 1, e.label)
    write(d .. "/q.csv", 'x,"y"\n"1,5",2\n')
    assert.error_matches(function() data.csv{path = d .. "/q.csv"} end, "line 2, column 'x' %(1%): '1,5' is not a number")
    write(d .. "/q2.csv", 'x;"y"\n" 7";"8"\n')
    assert.are.same({7, 8}, (function() local r = data.csv{path = d .. "/q2.csv", delimiter = ";"}:get(1) return {r.x, r.y} end)())
  end)

  it("refuse bad CSV rows naming the file and the line", function()
    local d = tmpdir()
    write(d .. "/rows.csv", "a,b\n1,2\n\n3,4,5\n")
    assert.error_matches(function() data.csv{path = d .. "/rows.csv"} end,
      "rows.csv' line 4 has 3 fields, expected 2")
    write(d .. "/nan.csv", "a,b\n1,2\n3,four\n")
    assert.error_matches(function() data.csv{path = d .. "/nan.csv"} end, "nan.csv' line 3, column 'b' %(2%): 'four' is not a number")
    write(d .. "/gap.csv", "a,b\n1,2\n,4\n")
    assert.error_matches(function() data.csv{path = d .. "/gap.csv"} end, "gap.csv' line 3, column 'a' %(1%): missing value")
    assert.are.equal(-1, data.csv{path = d .. "/gap.csv", missing = -1}:get(2).a)
    write(d .. "/empty.csv", "\n\n")
    assert.error_matches(function() data.csv{path = d .. "/empty.csv"} end, "empty.csv' is empty")
    write(d .. "/ok.csv", "a,b\n1,2\n")
    assert.error_matches(function() data.csv{path = d .. "/ok.csv", fields = {x = {"a", "z"}}} end,
      "field 'x' names column 'z', which .* does not have %(columns: a, b%)")
  end)

  it("split into disjoint seeded parts by counts or fractions", function()
    local ds = small(100)
    local a, b, c = ds:split{50, 30, 20, seed = 3}
    assert.are.same({50, 30, 20}, {#a, #b, #c})
    local seen = {}
    for _, part in ipairs{a, b, c} do
      for _, id in ipairs(part:column("id"):totable()) do
        assert.is_nil(seen[id], "example " .. id .. " is in two splits")
        seen[id] = true
      end
    end
    for i = 1, 100 do assert.is_true(seen[i]) end
    local a2 = ds:split{50, 50, seed = 3}
    assert.are.same(a:column("id"):totable(), a2:column("id"):totable())
    local a3 = ds:split{50, 50, seed = 4}
    assert.are_not.same(a:column("id"):totable(), a3:column("id"):totable())
    local f1, f2 = ds:split{0.9, 0.1}
    assert.are.same({90, 10}, {#f1, #f2})
    assert.are.same(dl.arange(91, 101):int():totable(), f2:column("id"):totable())   -- unseeded: consecutive
    assert.error_matches(function() ds:split{60, 50} end, "split: the parts add up to 110 examples, the dataset has 100")
  end)
end)

describe("dlua.data pipelines", function()
  it("batch examples with a weight field; the last batch is short, dropped or padded", function()
    local ds = small(10)
    local bs = {}
    for b in ds:batch(4):iter() do bs[#bs + 1] = b end
    assert.are.equal(3, #bs)
    assert.are.same({4, 1, 6, 6}, bs[1].image:shape())
    assert.are.equal("uint8", bs[1].image:dtype())
    assert.are.same({2}, bs[3].label:shape())
    assert.are.same({1, 1}, bs[3].weight:totable())
    assert.are.equal(bytes(ds:get(9).image) .. bytes(ds:get(10).image), bytes(bs[3].image))
    assert.are.equal(2, #ds:batch(4, {drop_remainder = true}))
    local last
    for b in ds:batch(4, {pad = true}):iter() do last = b end
    assert.are.same({4, 1, 6, 6}, last.image:shape())
    assert.are.same({1, 1, 0, 0}, last.weight:totable())
    assert.are.same({9, 10, 9, 10}, last.id:totable())     -- padding repeats real examples (valid labels)
  end)

  it("give a weighted mean over padded batches equal to the unpadded mean", function()
    local ds = small(23)
    local direct = ds:column("image"):float():mean():item()
    local num, den = 0, 0
    for b in ds:map(T.scale(1)):batch(5, {pad = true}):workers(2):iter() do
      local per = b.image:reshape(5, 36):mean(2)                 -- a per-example metric
      num = num + (per * b.weight):sum():item()
      den = den + b.weight:sum():item()
    end
    assert.are.equal(23, den)
    assert.is_true(math.abs(num / den - direct) < 1e-4, string.format("%g vs %g", num / den, direct))
  end)

  it("shuffle to a fresh permutation every epoch from (seed, epoch)", function()
    local ds = small(50)
    local p = ds:shuffle{seed = 11}:batch(7)
    local e1 = ids_of(p)
    local e2 = ids_of(p)                                         -- continues with epoch 2
    local sorted = {table.unpack(e1)}
    table.sort(sorted)
    assert.are.same(dl.arange(1, 51):totable(), sorted)
    assert.are_not.same(e1, e2)
    assert.are.same(e1, ids_of(ds:shuffle{seed = 11}:batch(7)))
    assert.are_not.same(e1, ids_of(ds:shuffle{seed = 12}:batch(7)))
    -- windowed: still a permutation, each output within the window's reach
    local w = ids_of(ds:shuffle{seed = 11, window = 5}:batch(50))
    local s2 = {table.unpack(w)}
    table.sort(s2)
    assert.are.same(dl.arange(1, 51):totable(), s2)
    for k, id in ipairs(w) do assert.is_true(id <= k + 4, "id " .. id .. " at position " .. k) end
    assert.are_not.same(dl.arange(1, 51):totable(), w)
  end)

  it("shard into disjoint shards that cover the data", function()
    local ds = small(10)
    local seen = {}
    for rank = 0, 2 do
      local ids = ids_of(ds:shard{rank = rank, world = 3}:shuffle{seed = 1}:batch(2))
      assert.are.equal(rank == 0 and 4 or 3, #ids)
      assert.are.equal(math.ceil(#ids / 2), #ds:shard{rank, 3}:batch(2))
      for _, id in ipairs(ids) do
        assert.is_nil(seen[id])
        seen[id] = true
      end
    end
    for i = 1, 10 do assert.is_true(seen[i]) end
    assert.error_matches(function() ds:shard{rank = 3, world = 3} end, "shard: rank 3 is not in 0..2 %(world 3%)")
  end)

  it("select fields and apply the C transforms as recomputed in Lua", function()
    local ds = small(6)
    local got = {}
    for b in ds:select{"image", "label"}:map(T.normalize{mean = 100, std = 50}, T.one_hot(10)):batch(6):iter() do
      got = b
    end
    assert.is_nil(got.id)
    local keys = {}
    for k in pairs(got) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({"image", "label", "weight"}, keys)
    for i = 1, 6 do
      local ref = ds:get(i)
      local img = ref.image:reshape(36):totable()
      local out = got.image[i]:reshape(36):totable()
      for k = 1, 36 do assert.is_true(math.abs(out[k] - (img[k] - 100) / 50) < 1e-6) end
      local oh = got.label[i]:totable()
      for c = 1, 10 do assert.are.equal(c == ref.label and 1 or 0, oh[c]) end
    end
  end)

  it("crop, flip, translate and zoom as the definitions say", function()
    local ds = small(8)
    local function img(t) return t:reshape(6, 6):totable() end
    local function at(m, y, x) return (m[y] and m[y][x]) or 0 end
    for b in ds:map(T.random_crop(4, {padding = 2})):batch(8):iter() do
      for i = 1, 8 do
        local src, out = img(ds:get(i).image), b.image[i]:reshape(4, 4):totable()
        local found = false
        for oy = -2, 4 do
          for ox = -2, 4 do
            local ok = true
            for y = 1, 4 do for x = 1, 4 do if out[y][x] ~= at(src, oy + y, ox + x) then ok = false end end end
            found = found or ok
          end
        end
        assert.is_true(found, "crop of example " .. i .. " is no window of the padded image")
      end
    end
    local flips = 0
    for b in ds:map(T.flip{horizontal = true, vertical = 0.5}):batch(8):iter() do
      for i = 1, 8 do
        local src, out = img(ds:get(i).image), b.image[i]:reshape(6, 6):totable()
        local variants = {}
        for _, h in ipairs{false, true} do
          for _, v in ipairs{false, true} do
            local m = true
            for y = 1, 6 do for x = 1, 6 do
              if out[y][x] ~= src[v and 7 - y or y][h and 7 - x or x] then m = false end
            end end
            if m then variants[#variants + 1] = true end
          end
        end
        assert.is_true(#variants >= 1)
        if out[1][1] ~= src[1][1] then flips = flips + 1 end
      end
    end
    assert.is_true(flips > 0)
    for b in ds:map(T.random_translate(2)):batch(8):iter() do
      for i = 1, 8 do
        local src, out = img(ds:get(i).image), b.image[i]:reshape(6, 6):totable()
        local found = false
        for dy = -2, 2 do for dx = -2, 2 do
          local ok = true
          for y = 1, 6 do for x = 1, 6 do if out[y][x] ~= at(src, y - dy, x - dx) then ok = false end end end
          found = found or ok
        end end
        assert.is_true(found)
      end
    end
    -- zoom x2 about the centre, bilinear, recomputed here
    for b in ds:map(T.scale(1), T.random_affine{scale = {2, 2}}):batch(8):iter() do
      for i = 1, 8 do
        local src, out = img(ds:get(i).image), b.image[i]:reshape(6, 6):totable()
        for y = 1, 6 do for x = 1, 6 do
          local sy, sx = 2.5 + (y - 1 - 2.5) / 2, 2.5 + (x - 1 - 2.5) / 2
          local y0, x0 = math.floor(sy), math.floor(sx)
          local ay, ax = sy - y0, sx - x0
          local ref = (1 - ay) * ((1 - ax) * src[y0 + 1][x0 + 1] + ax * src[y0 + 1][x0 + 2])
            + ay * ((1 - ax) * src[y0 + 2][x0 + 1] + ax * src[y0 + 2][x0 + 2])
          assert.is_true(math.abs(out[y][x] - ref) < 1e-3, string.format("(%d, %d): %g vs %g", y, x, out[y][x], ref))
        end end
      end
    end
  end)

  it("produce bit-identical batches for 1, 2 and 4 workers with augmentation on", function()
    local fm = data.fashion_mnist()
    local part = fm.train:subset(dl.arange(1, 301):long())
    local k = 0.5
    local p = part:shuffle{seed = 7}:map(T.random_crop(28, {padding = 4}), T.flip{}, T.random_translate(2),
      T.random_affine{degrees = 15, scale = {0.9, 1.1}}, T.scale(1 / 255),
      function(ex) ex.image = ex.image + dl.randn(1, 28, 28):scale(k * 0.01); ex.r = math.random(); return ex end)
      :batch(64, {pad = true})
    local ref = fingerprint(p:workers(1), {epochs = 2})
    assert.are.equal(10, #ref)
    assert.are.same(ref, fingerprint(p:workers(2):prefetch(3), {epochs = 2}))
    assert.are.same(ref, fingerprint(p:workers(4):prefetch(1), {epochs = 2}))
    assert.are.same(ref, fingerprint(p:workers(0), {epochs = 2}))
    assert.are_not.same(ref[1], ref[6])                                  -- epoch 2 draws afresh
    assert.are_not.same(ref, fingerprint(p:seed(8):workers(2), {epochs = 2}))
  end)

  it("resume from a saved position with exactly the batches an uninterrupted run sees", function()
    local ds = small(30)
    local function make() return ds:shuffle{seed = 2}:map(T.random_crop(5, {padding = 1})):batch(4):workers(2) end
    local full = fingerprint(make(), {epochs = 3})                     -- 8 batches per epoch
    assert.are.equal(24, #full)
    local p = make()
    local it = p:iter{epochs = 3}
    for _ = 1, 11 do it() end
    local s = p:state()
    assert.are.same({epoch = 2, batch = 3, seed = 2}, s)
    it:close()
    local q = make()
    q:set_state(s)
    local rest = fingerprint(q, {epochs = 2})                          -- the rest of epoch 2, and epoch 3
    assert.are.equal(13, #rest)
    for i = 1, 13 do assert.are.equal(full[11 + i], rest[i], "batch " .. (11 + i)) end
    assert.are.same({epoch = 4, batch = 0, seed = 2}, q:state())
    assert.error_matches(function() ds:shuffle{seed = 3}:batch(4):set_state(s) end,
      "set_state: the state was saved with data seed 2, this pipeline's is 3")
  end)

  it("iterate forever across epochs reporting the epoch", function()
    local ds = small(6)
    local epochs = {}
    local it = ds:batch(4):repeat_():iter()
    for _ = 1, 7 do
      local b, e = it()
      epochs[#epochs + 1] = e
      assert.is_not_nil(b)
    end
    it:close()
    assert.are.same({1, 1, 2, 2, 3, 3, 4}, epochs)
    local n = 0
    local p = ds:batch(6)
    for _, e in p["repeat"](p, 3):iter() do n = n + 1; assert.are.equal(n, e) end
    assert.are.equal(3, n)
    local q = ds:batch(4)
    it = q:iter{epochs = math.huge}
    for _ = 1, 5 do it() end
    assert.are.same({epoch = 3, batch = 1, seed = q:data_seed()}, q:state())
    it:close()
  end)

  it("raise a worker's error in the main thread naming the stage and the example", function()
    local ds = small(20)
    local p = ds:map(T.scale(1), function(ex, info)
      if info.index == 13 then error("bad example") end
      return ex
    end):batch(4):workers(2)
    local got = 0
    local ok, err = pcall(function() for _ in p:iter() do got = got + 1 end end)
    p:reset()
    assert.is_false(ok)
    assert.matches("pipeline: stage 2 'lua .*pipeline_spec.lua:%d+' failed on example 13 %(epoch 1%): " ..
      ".*pipeline_spec.lua:%d+: bad example", err)
    assert.are.equal(3, got)                                           -- batches before the failing one
    assert.error_matches(function() for _ in small(5):map(T.one_hot(3)):batch(2):iter() do end end,
      "stage 1 'one_hot' failed on example %d %(epoch 1%): one_hot: label %d+ of field 'label' is outside 1..3")
    assert.error_matches(function()
      for _ in ds:map(function(ex, info) ex.v = dl.zeros(info.index % 2 + 1); return ex end):batch(4):iter() do end
    end, "batching failed on example 2 %(epoch 1%): field 'v' is float32 %[1%], the first example's was float32 %[2%]")
    got = 0
    assert.is_false(pcall(function() for _ in p:iter() do got = got + 1 end end))   -- usable again, same failure
    assert.are.equal(3, got)
  end)

  it("copy a Lua function's upvalues into the workers and refuse what cannot be copied", function()
    local ds = small(4)
    local cfg = {shift = 3, nested = {mul = 2}}
    local offset = dl.full(0.5, 1, 6, 6)
    local function helper(v) return v * cfg.nested.mul end
    local floor = math.floor
    local got
    for b in ds:map(function(ex, info)
      return {image = ex.image:float() + offset, z = helper(info.index) + cfg.shift + floor(0.5), label = ex.label}
    end):batch(4):workers(2):iter() do got = b end
    assert.are.same({5, 7, 9, 11}, got.z:totable())
    assert.are.equal("int32", got.z:dtype())
    assert.is_nil(got.id)
    assert.are.equal(ds:get(2).image:float():sum():item() + 18, got.image[2]:sum():item())
    local obj = setmetatable({}, {})
    assert.error_matches(function() ds:map(function(ex) return obj end) end,
      "map: cannot copy the function defined at .*pipeline_spec.lua:%d+ into the worker Lua states: upvalue 'obj' is a table with a metatable")
    local co = coroutine.create(function() end)
    local t = {inner = {co = co}}
    assert.error_matches(function() ds:map(function(ex) return t end) end, "upvalue 't'.inner.co is a thread")
  end)

  it("join its threads on end of data, break, error and garbage collection", function()
    local stat = slurp("/proc/self/stat")
    local pid = stat:match("^(%d+)")
    local function threads()
      local p = io.popen("ls /proc/" .. pid .. "/task")
      local n = 0
      for _ in p:lines() do n = n + 1 end
      p:close()
      return n
    end
    collectgarbage()
    local base = threads()
    local ds = small(40)
    local p = ds:map(T.scale(1)):batch(2):workers(3)
    local it = p:iter()
    it()
    assert.are.equal(base + 3, threads())
    it:close()
    assert.are.equal(base, threads())
    for _ in p:iter() do break end                                    -- the for loop closes it
    assert.are.equal(base, threads())
    pcall(function() for _ in ds:map(function() error("x") end):workers(2):batch(2):iter() do end end)
    assert.are.equal(base, threads())
    do local _ = ds:batch(2):workers(2):iter() end
    collectgarbage()
    collectgarbage()
    assert.are.equal(base, threads())
  end)

  it("cache deterministic preprocessing in a checksummed file and rebuild stale or corrupt ones", function()
    local d = tmpdir()
    local path = d .. "/c.bin"
    local ds = small(37)
    local notes = {}
    local function make(scale)
      return ds:map(T.scale(scale), function(ex) ex.image = ex.image:scale(2); return ex end):cache(path)
        :shuffle{seed = 4}:map(T.random_crop(6, {padding = 1})):batch(8)
    end
    local plain = ds:map(T.scale(1 / 255), function(ex) ex.image = ex.image:scale(2); return ex end)
      :shuffle{seed = 4}:map(T.random_crop(6, {padding = 1})):batch(8)
    local ref = fingerprint(plain)
    local p1 = make(1 / 255)
    assert.are.same(ref, fingerprint(p1))
    assert.are.same({path = path, status = "built"}, p1:cache_info())
    local f = slurp(path)
    assert.are.equal("DLUACACH", f:sub(1, 8))
    assert.are.equal(1, string.unpack("<I4", f, 9))
    -- the trailing CRC-32 covers the rest (recomputed with zlib's crc32 via the core)
    assert.are.equal(core._crc32(f:sub(1, -5)), string.unpack("<I4", f, #f - 3))
    local p2 = make(1 / 255)
    assert.are.same(ref, fingerprint(p2))
    assert.are.equal("loaded", p2:cache_info().status)
    local p3 = make(1 / 128)
    for _ in p3:iter{warn = function(m) notes[#notes + 1] = m end} do end
    assert.are.equal("rebuilt", p3:cache_info().status)
    assert.matches("is stale", p3:cache_info().reason)
    assert.matches("is stale", notes[1])
    -- flip one data byte: corrupt, rebuilt, same batches as before
    f = slurp(path)
    local at = #f - 10
    write(path, f:sub(1, at - 1) .. string.char((f:byte(at) + 1) % 256) .. f:sub(at + 1))
    local quiet = {warn = function() end}
    local p4 = make(1 / 128)
    local again = fingerprint(p4, quiet)
    assert.are.equal("rebuilt", p4:cache_info().status)
    assert.matches("is corrupt at offset %d+: CRC%-32 mismatch", p4:cache_info().reason)
    assert.are.same(fingerprint(make(1 / 128)), again)
    f = slurp(path)
    write(path, f:sub(1, #f - 100))
    local p5 = make(1 / 128)
    fingerprint(p5, quiet)
    assert.matches("corrupt at offset " .. (#f - 100) .. ": the file has " .. (#f - 100) .. " bytes, its header implies "
      .. #f, p5:cache_info().reason)
    assert.error_matches(function() ds:shuffle{seed = 1}:cache(path) end, "cache: comes after shuffle")
    assert.error_matches(function() ds:map(T.flip{}):cache(path) end, "cache: comes after the random transform 'flip'")
  end)

  it("measure the consumer's wait and warn when training is input-bound", function()
    local ds = small(64)
    local function busy(s) local t = dl.clock() while dl.clock() - t < s do end end
    -- slow transform, fast consumer: input-bound
    local msgs = {}
    local slow = ds:map(function(ex) local t = dl.clock() while dl.clock() - t < 0.0005 do end return ex end):batch(2)
    local it = slow:iter{warn = function(m) msgs[#msgs + 1] = m end}
    for _ in it do end
    local st = slow:stats()
    assert.are.equal(32, st.batches)
    assert.is_true(st.wait_fraction > 0.5, "wait fraction " .. st.wait_fraction)
    assert.matches("^lua .*pipeline_spec", st.slowest)
    assert.are.equal(1, #msgs)
    assert.matches("training is input%-bound: it waited for input %d+%% of step time", msgs[1])
    assert.matches("^input pipeline: 32 batches; waited %d+%.%d%% of step time", slow:summary())
    -- fast transform, slow consumer, prefetch: hardly any waiting, no warning
    local fast = ds:map(T.scale(1)):batch(2):prefetch(4)
    msgs = {}
    for _ in fast:iter{warn = function(m) msgs[#msgs + 1] = m end} do busy(0.002) end
    st = fast:stats()
    assert.is_true(st.wait_fraction < 0.25, "wait fraction " .. st.wait_fraction)
    assert.are.equal(0, #msgs)
    assert.is_true(fast:wait_time() >= st.wait)
    local names = {}
    for _, s in ipairs(st.stages) do names[#names + 1] = s.name end
    assert.are.same({"read", "scale", "collate"}, names)
  end)
end)

------------------------------------------------------------------ trace

-- a small JSON reader (objects, arrays, strings, numbers, literals)
local function json_decode(s)
  local i = 1
  local function ws() i = s:find("[^ \t\r\n]", i) or #s + 1 end
  local value
  local function str()
    local out = {}
    i = i + 1
    while true do
      local c = s:sub(i, i)
      if c == '"' then i = i + 1 break end
      if c == "\\" then
        local e = s:sub(i + 1, i + 1)
        if e == "u" then out[#out + 1] = utf8.char(tonumber(s:sub(i + 2, i + 5), 16)); i = i + 6
        else out[#out + 1] = ({n = "\n", t = "\t", r = "\r", b = "\b", f = "\f"})[e] or e; i = i + 2 end
      else
        assert(c ~= "", "unterminated string")
        out[#out + 1] = c
        i = i + 1
      end
    end
    return table.concat(out)
  end
  function value()
    ws()
    local c = s:sub(i, i)
    if c == "{" then
      local o = {}
      i = i + 1
      ws()
      if s:sub(i, i) == "}" then i = i + 1 return o end
      while true do
        ws()
        assert(s:sub(i, i) == '"', "object key expected at " .. i)
        local k = str()
        ws()
        assert(s:sub(i, i) == ":", "':' expected at " .. i)
        i = i + 1
        o[k] = value()
        ws()
        local d = s:sub(i, i)
        i = i + 1
        if d == "}" then return o end
        assert(d == ",", "',' or '}' expected at " .. i)
      end
    elseif c == "[" then
      local a = {}
      i = i + 1
      ws()
      if s:sub(i, i) == "]" then i = i + 1 return a end
      while true do
        a[#a + 1] = value()
        ws()
        local d = s:sub(i, i)
        i = i + 1
        if d == "]" then return a end
        assert(d == ",", "',' or ']' expected at " .. i)
      end
    elseif c == '"' then
      return str()
    elseif s:sub(i, i + 3) == "true" then i = i + 4 return true
    elseif s:sub(i, i + 4) == "false" then i = i + 5 return false
    elseif s:sub(i, i + 3) == "null" then i = i + 4 return nil
    else
      local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", i)
      assert(num and #num > 0, "bad JSON at " .. i)
      i = i + #num
      return tonumber(num)
    end
  end
  local v = value()
  ws()
  assert(i > #s, "trailing characters at " .. i)
  return v
end

describe("dlua.trace", function()
  it("writes a valid Chrome trace-event file from a real run", function()
    local path = tmpdir() .. "/trace.json"
    local ds = small(48)
    local model = dl.nn.Linear(36, 10)
    dl.trace.start(path)
    assert.is_true((dl.trace.active()))
    for b in ds:map(T.scale(1 / 255), T.flip{}):batch(8):workers(2):iter() do
      local x = b.image:reshape(8, 36)
      local logits = dl.trace.span("forward", function() return model(x) end)
      do
        local s <close> = dl.trace.span("backward")
        dl.nn.CrossEntropy()(logits, b.label, b.weight):backward()
      end
    end
    local p, n = dl.trace.stop()
    assert.are.equal(path, p)
    assert.is_true(n > 0)
    assert.is_false((dl.trace.active()))
    local doc = json_decode(slurp(path))
    assert.are.equal("table", type(doc.traceEvents))
    local last, stacks, names, threads = -1, {}, {}, {}
    local spans = 0
    for _, e in ipairs(doc.traceEvents) do
      assert.are.equal("string", type(e.name))
      assert.are.equal("string", type(e.ph))
      assert.are.equal("number", type(e.pid))
      assert.are.equal("number", type(e.tid))
      if e.ph == "M" then
        assert.are.equal("thread_name", e.name)
        threads[e.tid] = e.args.name
      else
        assert.is_true(e.ph == "B" or e.ph == "E", "phase " .. e.ph)
        assert.are.equal("number", type(e.ts))
        assert.is_true(e.ts >= last, "timestamps go back at " .. e.ts)
        last = e.ts
        local st = stacks[e.tid] or {}
        stacks[e.tid] = st
        if e.ph == "B" then
          st[#st + 1] = e.name
          names[e.name] = (names[e.name] or 0) + 1
        else
          assert.are.equal(st[#st], e.name, "unmatched end of " .. e.name .. " on thread " .. e.tid)
          st[#st] = nil
          spans = spans + 1
        end
      end
    end
    for tid, st in pairs(stacks) do assert.are.equal(0, #st, "open spans on thread " .. tid) end
    assert.are.equal(n, spans)
    assert.are.equal(6, names["forward"])
    assert.are.equal(6, names["backward"])
    assert.are.equal(6, names["wait for input"])
    assert.are.equal(6, names["scale"])
    assert.are.equal(6, names["flip"])
    assert.are.equal(6, names["collate"])
    assert.are.equal("main (Lua)", threads[1])
    local workers = 0
    for _, name in pairs(threads) do if name:match("^pipeline %d+ worker %d$") then workers = workers + 1 end end
    assert.is_true(workers >= 1)
    assert.error_matches(function() dl.trace.start("/nonexistent-dir/x.json") end, "trace: cannot write '/nonexistent%-dir/x.json'")
  end)
end)
