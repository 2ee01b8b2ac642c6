-- The IDX reader and the in-memory Fashion-MNIST loader: real-file facts,
-- files written here, and malformed files refused with file and offset.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local tmpdir = H.tmpdir
local write = H.spit

-- IDX header: 0, 0, type, ndim, then big-endian uint32 sizes
local function idx(dims, data, typ)
  local h = string.char(0, 0, typ or 8, #dims)
  for _, d in ipairs(dims) do h = h .. string.pack(">I4", d) end
  return h .. data
end

describe("dlua.read_idx", function()
  local d = tmpdir()

  it("reads a plain IDX file with its dimensions and bytes", function()
    write(d .. "/ok.idx", idx({2, 3}, string.char(1, 2, 3, 4, 5, 255)))
    local t = dl.read_idx(d .. "/ok.idx")
    assert.are.equal("uint8", t:dtype())
    assert.are.same({{1, 2, 3}, {4, 5, 255}}, t:totable())
  end)

  it("reads a gzip-compressed IDX file", function()
    write(d .. "/z.idx", idx({4}, string.char(9, 8, 7, 6)))
    assert(os.execute("gzip -kf " .. d .. "/z.idx"))
    assert.are.same({9, 8, 7, 6}, dl.read_idx(d .. "/z.idx.gz"):totable())
  end)

  it("refuses malformed files naming the file and offset", function()
    write(d .. "/magic.idx", "\1\2\8\1" .. string.pack(">I4", 1) .. "x")
    assert.error_matches(function() dl.read_idx(d .. "/magic.idx") end, "magic.idx' has a bad magic number 01 02 08 01 at offset 0")
    write(d .. "/short.idx", idx({5}, "abc"))
    assert.error_matches(function() dl.read_idx(d .. "/short.idx") end,
      "short.idx' is truncated: expected 5 data bytes after the 8%-byte header, got 3")
    write(d .. "/hdr.idx", "\0\0\8\2" .. string.pack(">I4", 1))
    assert.error_matches(function() dl.read_idx(d .. "/hdr.idx") end, "truncated in the header at offset 8")
    write(d .. "/float.idx", idx({1}, "abcd", 0x0d))
    assert.error_matches(function() dl.read_idx(d .. "/float.idx") end, "data type 0x0d at offset 2")
    assert.error_matches(function() dl.read_idx(d .. "/none.idx") end, "cannot open '.*none.idx'")
    write(d .. "/bad.idx.gz", "\31\139\8\0garbage-not-deflate")
    assert.has_error(function() dl.read_idx(d .. "/bad.idx.gz") end)
  end)
end)

describe("dlua.data.fashion_mnist_tensors", function()
  it("loads the known Fashion-MNIST facts from Debian's files", function()
    local fm = dl.data.fashion_mnist_tensors()
    assert.are.same({60000, 1, 28, 28}, fm.train.x:shape())
    assert.are.same({10000, 1, 28, 28}, fm.test.x:shape())
    assert.are.equal("int64", fm.train.y:dtype())
    assert.are.equal(1, fm.train.y:min():item())
    assert.are.equal(10, fm.train.y:max():item())
    local counts = dl.one_hot(fm.train.y, 10):sum(1):totable()
    for c = 1, 10 do assert.are.equal(6000, counts[c]) end
    assert(fm.train.x:min():item() >= 0 and fm.train.x:max():item() <= 1)
  end)

  it("fails with an install hint when the directory has no data", function()
    local d = tmpdir()
    assert.error_matches(function() dl.data.fashion_mnist_tensors{dir = d} end,
      "cannot open .*train%-images%-idx3%-ubyte.gz.*apt%-get install dataset%-fashion%-mnist")
  end)

  it("refuses images and labels of different lengths", function()
    local d = tmpdir()
    write(d .. "/train-images-idx3-ubyte.gz", idx({2, 1, 1}, "\0\0"))
    write(d .. "/train-labels-idx1-ubyte.gz", idx({3}, "\0\1\2"))
    assert.error_matches(function() dl.data.fashion_mnist_tensors{dir = d} end, "has 2 images but .* has 3 labels")
  end)
end)

describe("take(n): the first n examples, for dry runs", function()
  local T = dl.data.transforms
  local x = dl.tensor({{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}})
  local ds = dl.data.tensors{x = x, label = dl.tensor({5, 4, 3, 2, 1}, {dtype = "int32"})}

  it("gives a dataset of the first n examples, all of them when it has fewer", function()
    local s = ds:take(3)
    assert.is_true(dl.data.is_dataset(s))
    assert.are.equal(3, #s)
    assert.are.same({{1, 2}, {3, 4}, {5, 6}}, s:column("x"):totable())
    assert.are.same({5, 4, 3}, s:column("label"):totable())
    assert.are.equal(5, #ds:take(99))
    assert.error_matches(function() ds:take(0) end, "take: count must be a positive integer, got 0")
  end)

  it("keeps a pipeline's stages over the first n examples and leaves its cache out", function()
    local d = tmpdir("take")
    local p = ds:map(T.scale(10, {field = "x"})):cache(d .. "/c.bin"):shuffle{seed = 3}
    local small = p:take(2)
    assert.is_true(dl.data.is_pipeline(small))
    local ops = {}
    for i, s in ipairs(small.stages) do ops[i] = s.op end
    assert.are.same({"map", "shuffle"}, ops)
    local rows = {}
    for b in small:batch(2):iter() do
      for _, r in ipairs(b.x:totable()) do rows[#rows + 1] = r end
    end
    table.sort(rows, function(a, b) return a[1] < b[1] end)
    assert.are.same({{10, 20}, {30, 40}}, rows)           -- 10 x the first two examples, in some order
    assert.is_nil(io.open(d .. "/c.bin"))                  -- the whole-dataset cache was not written
    assert.are.equal(5, #p)                                -- the original is unchanged
  end)
end)

describe("data.csv with class names", function()
  local d = tmpdir("csv-classes")
  local path = d .. "/iris.csv"
  write(path, "sl,sw,species\n5.1,3.5,setosa\n7.0,3.2,versicolor\n\n6.3, \"3.3\" ,virginica\n4.9,3.0,\"setosa\"\n")
  local spec = {x = {"sl", "sw"}, label = "species"}

  it("turns a column of names into 1-based classes of the sorted vocabulary, kept as ds.classes", function()
    local ds = dl.data.csv{path = path, fields = spec, classes = {"label"}}
    assert.are.same({label = {"setosa", "versicolor", "virginica"}}, ds.classes)
    assert.are.equal("int32", ds:column("label"):dtype())
    assert.are.same({1, 2, 3, 1}, ds:column("label"):totable())
    assert.are.same({5.1, 3.5}, (function() local t = ds:column("x"):totable()[1]
      return {math.floor(t[1] * 10 + 0.5) / 10, math.floor(t[2] * 10 + 0.5) / 10} end)())
    local a, b = ds:split{2, 2}
    assert.are.equal(ds.classes, a.classes)
    assert.are.equal(ds.classes, b.classes)
    assert.are.equal(ds.classes, ds:take(1).classes)
    write(d .. "/n.csv", "a,b\n1,2\n")
    assert.is_nil(dl.data.csv{path = d .. "/n.csv"}.classes)
  end)

  it("reads gzip-compressed files and header-less columns by number", function()
    write(d .. "/h.csv", "1.5,b\n2.5,a\n")
    assert(os.execute("gzip -kf " .. path))
    local ds = dl.data.csv{path = path .. ".gz", fields = spec, classes = {"label"}}
    assert.are.same({1, 2, 3, 1}, ds:column("label"):totable())
    local h = dl.data.csv{path = d .. "/h.csv", header = false, classes = {"2"}}
    assert.are.same({"a", "b"}, h.classes["2"])
    assert.are.same({2, 1}, h:column("2"):totable())
  end)

  it("says how to read names when classes is not given, and refuses bad class fields", function()
    assert.error_matches(function() dl.data.csv{path = path, fields = spec} end,
      "csv: '" .. path .. "' line 2, column 'species' (3): 'setosa' is not a number" ..
      ' (if the column holds class names, add classes = {"label"})', nil, true)
    assert.error_matches(function() dl.data.csv{path = path} end,
      'add classes = {"species"})', nil, true)
    assert.error_matches(function() dl.data.csv{path = path, fields = spec, classes = {"x"}} end,
      "csv: classes names 'x', a field of 2 columns (a class field is one column)", nil, true)
    assert.error_matches(function() dl.data.csv{path = path, fields = spec, classes = {"y"}} end,
      "csv: classes names 'y', which is not a field", nil, true)
    assert.error_matches(function() dl.data.csv{path = path, fields = spec, classes = {"label"}, zero_based = {"label"}} end,
      "csv: field 'label' is in both classes and zero_based (class indices start at 1)", nil, true)
    assert.error_matches(function() dl.data.csv{path = path, fields = {label = "kind"}, classes = {"label"}} end,
      "csv: field 'label' names column 'kind', which '" .. path .. "' does not have (columns: sl, sw, species)", nil, true)
    write(d .. "/m.csv", "a,c\n1,x\n2,\n")
    assert.error_matches(function() dl.data.csv{path = d .. "/m.csv", classes = {"c"}} end,
      "csv: '" .. d .. "/m.csv' line 3, column 'c' (2): missing class name", nil, true)
    write(d .. "/bad.csv", "a,c\n1,x\nz,y\n")                -- the engine's errors name the user's file
    assert.error_matches(function() dl.data.csv{path = d .. "/bad.csv", classes = {"c"}} end,
      "csv: '" .. d .. "/bad.csv' line 3, column 'a' (1): 'z' is not a number", nil, true)
  end)
end)

describe("dl.train with batches whose fields are not image and label", function()
  it("lists the batch's fields and the fields option that names them", function()
    local ds = dl.data.tensors{x = dl.randn(8, 4), label = dl.ones(8, {dtype = "int32"})}
    local model = dl.nn.Linear(4, 2)
    local r = dl.train{model = model, optimizer = dl.optim.SGD{params = model:parameters(), lr = 0.1},
      loss = dl.nn.CrossEntropy(), data = ds:batch(4), steps = 1, quiet = true, tracking = false,
      dir = tmpdir("fields") .. "/run"}
    assert.are.equal("failed", r.status)
    assert.are.equal("step 1: dl.train: batch has no field 'image' (the batch's fields: label, weight, x);" ..
      ' name the model\'s input and the loss\'s target with fields = {input = "x", target = "label"} in the config',
      r.message)
  end)
end)

describe("dl.train{classes = ds.classes}", function()
  it("keeps the class vocabularies in every checkpoint's metadata, as JSON", function()
    local d = tmpdir("classes-run")
    H.spit(d .. "/c.csv", "a,b,kind\n1,0,cat\n0,1,dog\n1,1,cat\n0,0,ant\n")
    local ds = dl.data.csv{path = d .. "/c.csv", fields = {x = {"a", "b"}, label = "kind"}, classes = {"label"},
                           types = {x = "float32"}}
    local model = dl.nn.Linear(2, 3)
    local r = dl.train{model = model, optimizer = dl.optim.SGD{params = model:parameters(), lr = 0.1},
      loss = dl.nn.CrossEntropy(), data = ds:batch(2), steps = 2, quiet = true, tracking = false,
      fields = {input = "x"}, classes = ds.classes, dir = d .. "/run"}
    assert.are.equal("done", r.status, r.message)
    local _, meta = dl.checkpoint.load(r.latest)
    assert.are.equal('{"label":["ant","cat","dog"]}', meta.classes)
    assert.are.same({2, 3, 2, 1}, ds:column("label"):totable())
    assert.error_matches(function() dl.train{model = model, optimizer = dl.optim.SGD{params = model:parameters()},
      loss = dl.nn.CrossEntropy(), data = ds:batch(2), steps = 1, classes = "label"} end,
      "dl.train: option 'classes' must be table, got string", nil, true)
  end)
end)

describe("examples/flowers.lua and examples/data/flowers.csv", function()
  it("are shown verbatim by docs/getting-started.md (with the study), and the CSV has 3 classes of 40", function()
    local doc = H.slurp and H.slurp("docs/getting-started.md") or io.open("docs/getting-started.md"):read("a")
    for _, f in ipairs({"examples/flowers.lua", "examples/flowers_study.lua"}) do
      local src = io.open(f):read("a")
      assert.truthy(doc:find("```lua\n" .. src .. "```", 1, true), f .. " differs from its copy in the page")
    end
    local ds = dl.data.csv{path = "examples/data/flowers.csv", classes = {"label"},
                           fields = {x = {"petal_length", "petal_width"}, label = "species"}}
    assert.are.same({"daisy", "iris", "tulip"}, ds.classes.label)
    local count = {0, 0, 0}
    for _, c in ipairs(ds:column("label"):totable()) do count[c] = count[c] + 1 end
    assert.are.same({40, 40, 40}, count)
  end)
end)
