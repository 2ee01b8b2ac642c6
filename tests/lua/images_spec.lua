-- data.images: image files decoded on the pipeline's worker threads. Pixels
-- against PIL's (tests/lua/images_fixtures.py writes the files and PIL's
-- values; PIL decodes JPEG with libjpeg62-turbo, the same IDCT and upsampling
-- as TurboJPEG, so JPEG pixels must be identical too); bad files of every
-- kind named in the error or skipped and counted; paths kept inside the list's
-- directory; a FIFO or a directory refused without hanging; decoding on worker
-- threads (the trace); and Fashion-MNIST written as PNG files
-- (scripts/fashion_mnist_png.py) giving batches bit-identical to the IDX pipeline.
local dl = require "dlua"
local core = require "dlua.core"
local json = require "dlua.util.json"
local H = dofile("tests/lua/helpers.lua")
local data, T = dl.data, dl.data.transforms

local PY = "/usr/bin/python3"
local EXE = os.getenv("DLUA_EXE") or "build/dlua"

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return rc, out:gsub("rc=%d+%s*$", "")
end

local function escape(s) return (s:gsub("%p", "%%%0")) end

-- the fixtures: one directory for the whole spec
local FX = H.tmpdir("images")
do
  local rc, out = sh(PY .. " tests/lua/images_fixtures.py " .. H.shquote(FX))
  assert(rc == 0, out)
end
local EXPECTED = dofile(FX .. "/expected.lua")
local NAMES = {}
for k in pairs(EXPECTED) do NAMES[#NAMES + 1] = k end
table.sort(NAMES)

local function write_list(path, lines) H.spit(path, table.concat(lines, "\n") .. "\n") end

-- every batch of one pass as a string of its fields' raw bytes
local function fingerprint(pipe)
  local out = {}
  for b in pipe:iter{warn = false} do
    local keys = {}
    for k in pairs(b) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. core._tensor_bytes(b[k]) end
    out[#out + 1] = table.concat(parts, "|")
  end
  return out
end

describe("data.images decoding", function()
  local list = FX .. "/ok/list.csv"
  local lines = {}
  for i, k in ipairs(NAMES) do lines[i] = EXPECTED[k].file .. "," .. i end
  write_list(list, lines)

  for _, ch in ipairs({3, 1}) do
    it("gives PIL's pixels for every mode, channels = " .. ch, function()
      local ds = data.images{list = list, channels = ch}
      assert.are.equal(#NAMES, #ds)
      local modes = {}
      for i, k in ipairs(NAMES) do
        local e = ds:get(i)
        local x = EXPECTED[k]
        assert.are.same({ch, x.h, x.w}, e.image:shape(), k)
        assert.are.equal("uint8", e.image:dtype())
        assert.are.same(ch == 3 and x.rgb or x.gray, e.image:reshape(-1):totable(), k)
        assert.are.equal(i, e.label)
        modes[x.mode] = true
      end
      -- the modes PIL read back: gray, RGB, palette, alpha, bilevel, 16-bit
      for _, m in ipairs({"L", "RGB", "P", "RGBA", "LA", "1", "I"}) do assert.is_true(modes[m], m) end
    end)
  end

  it("decodes the same pixels in the pipeline's workers as in ds:get", function()
    local ds = data.images{list = list}
    local got = {}
    for b in ds:workers(2):iter{warn = false} do got[#got + 1] = core._tensor_bytes(b.image) end
    for i = 1, #ds do assert.are.equal(core._tensor_bytes(ds:get(i).image), got[i]) end
  end)

  it("gives each example its own size without batch, and names both shapes when a batch needs one", function()
    local ds = data.images{list = list}
    for _, workers in ipairs({0, 2}) do
      local i = 0
      for e in ds:workers(workers):iter{warn = false} do
        i = i + 1
        local x = EXPECTED[NAMES[i]]
        assert.are.same({3, x.h, x.w}, e.image:shape())
        assert.are.same(x.rgb, e.image:reshape(-1):totable())
      end
      assert.are.equal(#NAMES, i)
    end
    local small = 0
    for i, k in ipairs(NAMES) do if k == "small" then small = i end end
    assert.error_matches(function() for _ in ds:batch(#NAMES):iter() do end end,
      "pipeline: batching failed on example " .. small .. " %(epoch 1%): field 'image' is uint8 %[3, 4, 6%], " ..
      "the first example's was uint8 %[3, 9, 13%]")
  end)

  it("sniffs the format from the bytes, not the name", function()
    local d = H.tmpdir("images-sniff")
    os.execute("cp " .. H.shquote(FX .. "/ok/RGB.png") .. " " .. H.shquote(d .. "/really_png.jpg"))
    os.execute("cp " .. H.shquote(FX .. "/ok/jpeg_RGB.jpg") .. " " .. H.shquote(d .. "/really_jpeg.png"))
    write_list(d .. "/l.csv", {"really_png.jpg,1", "really_jpeg.png,1"})
    local ds = data.images{list = d .. "/l.csv"}
    assert.are.same(EXPECTED.RGB.rgb, ds:get(1).image:reshape(-1):totable())
    assert.are.same(EXPECTED.jpeg_RGB.rgb, ds:get(2).image:reshape(-1):totable())
  end)
end)

describe("data.images ImageFolder layout", function()
  local d = H.tmpdir("images-folder")
  for _, c in ipairs({"dog", "cat", "bird"}) do os.execute("mkdir -p " .. H.shquote(d .. "/" .. c)) end
  local function cp(name, to) os.execute("cp " .. H.shquote(FX .. "/ok/" .. name) .. " " .. H.shquote(d .. "/" .. to)) end
  cp("RGB.png", "cat/b.png"); cp("L.png", "cat/a.PNG"); cp("jpeg_RGB.jpg", "dog/x.jpeg")
  cp("P.png", "bird/p.png"); H.spit(d .. "/bird/notes.txt", "not an image"); H.spit(d .. "/bird/.hidden.png", "x")
  os.execute("mkdir -p " .. H.shquote(d .. "/dog/more") .. " && cp " .. H.shquote(FX .. "/ok/LA.png") .. " " ..
    H.shquote(d .. "/dog/more/y.png"))

  it("takes sorted folder names as the classes and files in sorted order", function()
    local ds = data.images{dir = d}
    assert.are.same({label = {"bird", "cat", "dog"}}, ds.classes)
    assert.are.same({1, 2, 2, 3, 3}, ds:column("label"):totable())
    -- cat/a.PNG (L) before cat/b.png (RGB); dog/more/y.png (LA) before dog/x.jpeg
    assert.are.same(EXPECTED.P.rgb, ds:get(1).image:reshape(-1):totable())
    assert.are.same(EXPECTED.L.rgb, ds:get(2).image:reshape(-1):totable())
    assert.are.same(EXPECTED.RGB.rgb, ds:get(3).image:reshape(-1):totable())
    assert.are.same(EXPECTED.LA.rgb, ds:get(4).image:reshape(-1):totable())
    assert.are.same(EXPECTED.jpeg_RGB.rgb, ds:get(5).image:reshape(-1):totable())
    assert.are.same({{name = "image", dtype = "uint8", shape = {3, -1, -1}}, {name = "label", dtype = "int32", shape = {}}},
      ds:fields())
  end)

  it("keeps the classes through splits and subsets, and ids for the random keys", function()
    local ds = data.images{dir = d}
    local a, b = ds:split{3, 2, seed = 1}
    assert.are.same(ds.classes, a.classes)
    assert.are.same(ds.classes, b:subset({2, 1}).classes)
    -- the same example through a split draws the same crop: ids are rows of the folder listing
    local crop = function(x) return x:map(T.random_crop(4)):iter{warn = false} end
    local whole = {}
    for e in crop(ds) do whole[#whole + 1] = core._tensor_bytes(e.image) end
    local ids = core._ds_ids(b._ud):totable()
    local k = 0
    for e in crop(b) do
      k = k + 1
      assert.are.equal(whole[ids[k] + 1], core._tensor_bytes(e.image))
    end
  end)

  it("lets extensions choose the files", function()
    assert.are.equal(4, #data.images{dir = d, extensions = {".png"}})   -- not .hidden.png nor x.jpeg
    local ds = data.images{dir = d, extensions = {".png", ".TXT"}, on_error = "skip"}
    assert.are.equal(5, #ds)                        -- bird/notes.txt too
    local p = ds:batch(2)
    local n = 0
    for bt in p:iter{warn = false} do n = n + bt.label:size(1) end
    assert.are.equal(4, n)
    assert.are.equal(1, (p:skipped()))
  end)

  it("does not follow a symbolic link back up the tree round in circles", function()
    local e = H.tmpdir("images-loop")
    os.execute("mkdir -p " .. H.shquote(e .. "/a/sub") .. " && cp " .. H.shquote(FX .. "/ok/RGB.png") .. " " ..
      H.shquote(e .. "/a/sub/x.png") .. " && ln -s .. " .. H.shquote(e .. "/a/sub/up"))
    local ds = data.images{dir = e}
    assert.are.equal(1, #ds)                         -- a/sub/x.png; a/sub/up leads back to a, already on the way
  end)

  it("refuses what is not a class tree", function()
    assert.error_matches(function() data.images{dir = d .. "/cat"} end,
      "images: '" .. escape(d) .. "/cat' has no class sub%-folders")
    local e = H.tmpdir("images-empty")
    os.execute("mkdir -p " .. H.shquote(e .. "/a"))
    assert.error_matches(function() data.images{dir = e} end,
      "images: class folder '" .. escape(e) .. "/a' has no image files %(extensions: %.jpg, %.jpeg, %.png%)")
    assert.error_matches(function() data.images{dir = e .. "/nope"} end, "images: dir '.*/nope' is not a directory")
  end)
end)

describe("data.images bad files", function()
  local d = H.tmpdir("images-bad")
  local png = H.slurp(FX .. "/ok/RGB.png")
  local jpg = H.slurp(FX .. "/ok/jpeg_RGB.jpg")
  H.spit(d .. "/good.png", png)
  H.spit(d .. "/empty.png", "")
  H.spit(d .. "/text.png", "hello, I am not an image\n")
  H.spit(d .. "/trunc.png", png:sub(1, #png - 40))
  H.spit(d .. "/trunc.jpg", jpg:sub(1, #jpg - 30))
  H.spit(d .. "/header.jpg", jpg:sub(1, 20))
  -- a flipped byte inside the IDAT data: the chunk's CRC no longer matches
  local at = png:find("IDAT", 1, true) + 8
  H.spit(d .. "/crc.png", png:sub(1, at - 1) .. string.char((png:byte(at) + 1) % 256) .. png:sub(at + 1))
  -- a PNG header claiming 100000 x 100000 pixels
  H.spit(d .. "/huge.png", png:sub(1, 16) .. string.pack(">I4>I4", 100000, 100000) .. png:sub(25))
  local cases = {
    {"empty.png", "empty file %(0 bytes%), not an image"},
    {"text.png", "not a PNG or JPEG file"},
    {"trunc.png", "corrupt or truncated PNG data"},
    {"trunc.jpg", "corrupt or truncated JPEG data"},
    {"header.jpg", "JPEG"},
    {"crc.png", "corrupt or truncated PNG data"},
    {"huge.png", "PNG image of 100000 x 100000 pixels %(height x width%): each side must be 1 to 65535"},
  }

  for _, c in ipairs(cases) do
    it("names " .. c[1] .. " in ds:get's error and in the pipeline's", function()
      write_list(d .. "/l.csv", {"good.png,1", c[1] .. ",2", "good.png,1"})
      local ds = data.images{list = d .. "/l.csv"}
      local path = escape(d .. "/" .. c[1])
      assert.error_matches(function() ds:get(2) end, "get: example 2: images: '" .. path .. "': .*" .. c[2])
      local it_ = ds:batch(1):workers(2):iter{warn = false}
      assert.is_not_nil(it_())                       -- batch 1 is delivered
      assert.error_matches(function() it_() end,
        "pipeline: reading example 2 %(epoch 1%) failed: images: '" .. path .. "': .*" .. c[2])
    end)
  end

  it("refuses huge dimensions before allocating", function()
    write_list(d .. "/l.csv", {"huge.png,1"})
    assert.error_matches(function() data.images{list = d .. "/l.csv"}:get(1) end,
      "huge%.png': PNG image of 100000 x 100000 pixels")
  end)

  it("skips bad files with on_error = 'skip', counts them and leaves them out of their batch", function()
    local lines = {}
    for i = 1, 10 do lines[i] = "good.png," .. i end
    lines[3] = "empty.png,3"
    lines[7] = "trunc.jpg,7"
    lines[8] = "text.png,8"
    write_list(d .. "/l.csv", lines)
    local ds = data.images{list = d .. "/l.csv", on_error = "skip"}
    for _, workers in ipairs({0, 2}) do
      local p = ds:batch(4):workers(workers)
      local labels, weights = {}, {}
      for b in p:iter{warn = false} do
        for _, v in ipairs(b.label:totable()) do labels[#labels + 1] = v end
        for _, v in ipairs(b.weight:totable()) do weights[#weights + 1] = v end
      end
      assert.are.same({1, 2, 4, 5, 6, 9, 10}, labels)
      assert.are.same({1, 1, 1, 1, 1, 1, 1}, weights)
      local n, why = p:skipped()
      assert.are.equal(3, n)
      assert.matches("images: '.*': ", why)
      assert.matches("3 examples skipped %(first: images: ", p:summary())
      assert.are.equal(3, p:stats().skipped)
    end
    -- padded: the short batches are filled with weight-0 copies
    local w = {}
    for b in ds:batch(4, {pad = true}):iter{warn = false} do
      assert.are.equal(4, b.label:size(1))
      w[#w + 1] = b.weight:sum():item()
    end
    assert.are.same({3, 2, 2}, w)
    -- a batch whose every example is skipped is not handed out; the epochs go on
    local n = 0
    for b in ds:batch(1):iter{epochs = 2, warn = false} do n = n + 1; assert.are.equal(1, b.label:size(1)) end
    assert.are.equal(14, n)
    -- ds:get raises either way: skipping is the pipeline's
    assert.error_matches(function() ds:get(3) end, "empty%.png': empty file")
  end)

  it("caches decoded images, and refuses to cache a source with skipped examples", function()
    write_list(d .. "/l.csv", {"good.png,1", "good.png,2", "good.png,3"})
    local ds = data.images{list = d .. "/l.csv"}
    local plain = fingerprint(ds:map(T.scale(1 / 255)):batch(2))
    local p = ds:map(T.scale(1 / 255)):cache(d .. "/c.cache"):batch(2)
    assert.are.same(plain, fingerprint(p))
    assert.are.equal("built", p:cache_info().status)
    local again = ds:map(T.scale(1 / 255)):cache(d .. "/c.cache"):batch(2)
    assert.are.same(plain, fingerprint(again))
    assert.are.equal("loaded", again:cache_info().status)
    assert.error_matches(function() core._cache_save(d .. "/c3.cache", ds._ud, "fp") end,
      "cache: '.*c3%.cache': the dataset's field 'image' is read from files, not held in memory")
    write_list(d .. "/l.csv", {"good.png,1", "text.png,2"})
    local bad = data.images{list = d .. "/l.csv", on_error = "skip"}
    assert.error_matches(function() bad:cache(d .. "/c2.cache"):batch(2):iter() end,
      "cache: 1 examples could not be read %(the first: images: '.*text%.png': not a PNG or JPEG file")
  end)

  it("fails, rather than spinning, when a whole epoch of an endless shard is skipped", function()
    write_list(d .. "/l.csv", {"good.png,1", "text.png,2", "good.png,3", "empty.png,4"})
    local ds = data.images{list = d .. "/l.csv", on_error = "skip"}
    local it_ = ds:shard{rank = 1, world = 2}:batch(1):workers(2):iter{epochs = math.huge, warn = false}
    assert.error_matches(function() it_() end,
      "pipeline: no example of a whole epoch %(2 batches, up to epoch 1%) could be read; the first skipped: images: ")
    -- the other shard reads, and shards split the files as they split any dataset
    local labels = {}
    for b in ds:shard{rank = 0, world = 2}:batch(1):iter{epochs = 2, warn = false} do labels[#labels + 1] = b.label[1]:item() end
    assert.are.same({1, 3, 1, 3}, labels)
  end)

  it("fails when every example is skipped", function()
    write_list(d .. "/l.csv", {"empty.png,1", "text.png,1"})
    local ds = data.images{list = d .. "/l.csv", on_error = "skip"}
    assert.error_matches(function() ds:batch(2):iter() end,
      "pipeline: every one of the 2 examples was skipped %(the last: images: '.*text%.png': not a PNG or JPEG")
  end)

  it("reports the skipped count to the training loop (metrics and result.json)", function()
    local lines = {}
    for i = 1, 8 do lines[i] = (i == 2 and "text.png" or "good.png") .. "," .. (i % 2 + 1) end
    write_list(d .. "/l.csv", lines)
    local ds = data.images{list = d .. "/l.csv", on_error = "skip", channels = 1}
    local run_dir = H.tmpdir("images-train")
    local model = dl.nn.Sequential{dl.nn.Flatten(), dl.nn.Linear(9 * 13, 2)}
    local res = dl.train{
      model = model, loss = dl.nn.CrossEntropy(), optimizer = dl.optim.SGD{params = model:parameters(), lr = 0.01},
      data = ds:map(T.scale(1 / 255)):batch(4):workers(1), steps = 4, log_every = 1, dir = run_dir, quiet = true,
    }
    assert.are.equal(2, res["data/skipped"])         -- 4 steps = 2 epochs, one skip each
    local result = json.decode(H.slurp(run_dir .. "/result.json"))
    assert.are.equal(2, result["data/skipped"])
    local last
    for line in H.slurp(run_dir .. "/metrics.jsonl"):gmatch("[^\n]+") do
      local e = json.decode(line)
      if e.split == "train" then last = e end
    end
    assert.are.equal(2, last["data/skipped"])
  end)
end)

describe("data.images paths and file types", function()
  local d = H.tmpdir("images-paths")
  os.execute("mkdir -p " .. H.shquote(d .. "/sub"))
  H.spit(d .. "/sub/a.png", H.slurp(FX .. "/ok/RGB.png"))

  it("refuses absolute paths and '..' in list files, naming the line", function()
    write_list(d .. "/sub/l.csv", {"a.png,1", "../sub/a.png,1"})
    assert.error_matches(function() data.images{list = d .. "/sub/l.csv"} end,
      "images: '.*/sub/l%.csv' line 2: path '%.%./sub/a%.png' has a '%.%.' component %(paths must stay inside")
    write_list(d .. "/sub/l.csv", {"/etc/passwd,1"})
    assert.error_matches(function() data.images{list = d .. "/sub/l.csv"} end,
      "line 1: path '/etc/passwd' is absolute")
    write_list(d .. "/sub/l.csv", {"a.png,1", "a.png,x"})
    assert.error_matches(function() data.images{list = d .. "/sub/l.csv"} end, "line 2: label 'x' is not an integer$")
    write_list(d .. "/sub/l.csv", {"a.png,0"})
    assert.error_matches(function() data.images{list = d .. "/sub/l.csv"} end,
      "line 1: label 0 is below 1 %(labels are 1%-based; a file of 0%-based labels needs zero_based = {\"label\"}%)")
    assert.are.equal(1, data.images{list = d .. "/sub/l.csv", zero_based = {"label"}}:get(1).label)
    write_list(d .. "/sub/l.csv", {"path,label", "a.png,2"})
    assert.error_matches(function() data.images{list = d .. "/sub/l.csv"} end, "line 1: label 'label' is not an integer %(a header line%? add header = true%)")
    assert.are.equal(2, data.images{list = d .. "/sub/l.csv", header = true}:get(1).label)
    write_list(d .. "/sub/l.csv", {"a.png,1,3"})
    assert.error_matches(function() data.images{list = d .. "/sub/l.csv"} end, "line 1 has 3 fields, expected 2 %(path,label%)")
  end)

  it("the engine refuses paths leaving the root too", function()
    assert.error_matches(function() core._ds_images(d, {"a/../../x.png"}, dl.tensor({1}, {dtype = "int32"}), 3, false) end,
      "images: file 1, 'a/%.%./%.%./x%.png', has a '%.%.' component")
  end)

  it("refuses a FIFO and a directory where an image is expected, without hanging", function()
    assert.are.equal(0, (sh("mkfifo " .. H.shquote(d .. "/sub/fifo.png"))))
    os.execute("mkdir -p " .. H.shquote(d .. "/sub/dir.png"))
    write_list(d .. "/sub/l.csv", {"fifo.png,1", "dir.png,1"})
    -- in a child process with a time limit: a hang is a failure, not a stuck spec
    local script = d .. "/t.lua"
    H.spit(script, ([[
      local dl = require "dlua"
      local ds = dl.data.images{list = %q}
      for i = 1, 2 do print(select(2, pcall(ds.get, ds, i))) end
      print(select(2, pcall(function() for b in ds:batch(2):workers(2):iter() do end end)))
    ]]):format(d .. "/sub/l.csv"))
    local rc, out = sh("timeout 20 " .. H.shquote(EXE) .. " " .. H.shquote(script))
    assert.are.equal(0, rc, out)
    assert.matches("images: '[^']*/sub/fifo%.png': is a FIFO, not a regular file", out)
    assert.matches("images: '[^']*/sub/dir%.png': is a directory, not a regular file", out)
    assert.matches("pipeline: reading example 1 failed: images: '[^']*fifo%.png': is a FIFO", out)
  end)
end)

describe("data.images options", function()
  it("checks its options strictly", function()
    local l = FX .. "/ok/list.csv"
    assert.error_matches(function() data.images{list = l, chanels = 3} end, "images: unknown option 'chanels'")
    assert.error_matches(function() data.images{list = l, channels = 4} end, "images: channels must be 1 or 3, got 4")
    assert.error_matches(function() data.images{list = l, on_error = "ignore"} end,
      "images: on_error must be \"fail\" or \"skip\", got ignore")
    assert.error_matches(function() data.images{} end, "images: give exactly one of dir")
    assert.error_matches(function() data.images{list = l, dir = FX} end, "images: give exactly one of dir")
    assert.error_matches(function() data.images{dir = FX, header = true} end, "option 'header' is for list files")
    assert.error_matches(function() data.images{list = l, extensions = {".png"}} end, "option 'extensions' is for dir")
    assert.error_matches(function() data.images{dir = FX, extensions = {"png"}} end,
      "images: extensions%[1%] must be an ending such as \".png\", got png")
    assert.error_matches(function() data.images{list = l, zero_based = true} end, "images: zero_based must be {\"label\"}")
    assert.error_matches(function() data.images{list = l .. ".missing"} end, "images: cannot open list '.*%.missing'")
    assert.error_matches(function() data.images({list = l}, 2) end, "images")
    assert.error_matches(function() data.images{list = l}:column("image") end,
      "column: field 'image' is read from files when an example is read, not held in memory")
  end)
end)

describe("data.images decoding happens on the worker threads", function()
  it("puts every read span on a pipeline worker thread", function()
    local list = FX .. "/ok/list.csv"
    local ds = data.images{list = list, channels = 1}
    local path = H.tmpdir("images-trace") .. "/trace.json"
    dl.trace.start(path)
    local n = 0
    for _ in ds:map(T.random_crop(4)):batch(2):workers(2):iter{warn = false} do n = n + 1 end
    dl.trace.stop()
    local doc = json.decode(H.slurp(path))
    local threads, reads = {}, {}
    for _, e in ipairs(doc.traceEvents) do
      if e.ph == "M" then threads[e.tid] = e.args.name end
      if e.ph == "B" and e.name == "read" then reads[#reads + 1] = e.tid end
    end
    assert.are.equal(n, #reads)
    for _, tid in ipairs(reads) do assert.matches("^pipeline %d+ worker %d$", threads[tid]) end
  end)
end)

describe("Fashion-MNIST as PNG files", function()
  local FM = os.getenv("DLUA_FASHION_MNIST") or "/usr/share/datasets/fashion-mnist"
  local have = io.open(FM .. "/train-images-idx3-ubyte.gz", "rb")
  if have then have:close() end
  local it_ = have and it or function(name) pending(name .. " (dataset-fashion-mnist is not installed)") end

  it_("gives batches bit-identical to the IDX pipeline (scripts/fashion_mnist_png.py)", function()
    local out = H.tmpdir("fm-png")
    local rc, msg = sh(PY .. " scripts/fashion_mnist_png.py " .. H.shquote(out) .. " --limit 300")
    assert.are.equal(0, rc, msg)
    local idx = data.fashion_mnist{limit = 300}
    local png = {train = data.images{list = out .. "/train.csv", channels = 1, zero_based = {"label"}},
                 test = data.images{list = out .. "/test.csv", channels = 1, zero_based = {"label"}}}
    local function pipe(ds, workers)
      return ds:shuffle{seed = 3}:map(T.random_crop(28, {padding = 4}), T.flip{}, T.scale(1 / 255))
               :batch(64):workers(workers):repeat_(2)
    end
    for _, part in ipairs({"train", "test"}) do
      local want = fingerprint(pipe(idx[part], 1))
      assert.are.equal(10, #want)                   -- 2 epochs of 5 batches
      assert.are.same(want, fingerprint(pipe(png[part], 2)))
      assert.are.same(want, fingerprint(pipe(png[part], 0)))
    end
    -- hence the same training: the same losses and test accuracy, to the bit
    local function train(src, dir)
      dl.seed(11)
      local model = dl.nn.Sequential{dl.nn.Flatten(), dl.nn.Linear(784, 32), dl.nn.ReLU(), dl.nn.Linear(32, 10)}
      local res = dl.train{
        model = model, loss = dl.nn.CrossEntropy(),
        optimizer = dl.optim.SGD{params = model:parameters(), lr = 0.05, momentum = 0.9},
        data = src.train:shuffle{seed = 3}:map(T.flip{}, T.scale(1 / 255)):batch(32):workers(2),
        eval = {every = 20, sets = {test = src.test:map(T.scale(1 / 255))}},
        steps = 40, log_every = 10, dir = dir, quiet = true,
      }
      local losses = {}
      for line in H.slurp(dir .. "/metrics.jsonl"):gmatch("[^\n]+") do
        local e = json.decode(line)
        if e.split == "train" then losses[#losses + 1] = e.loss end
      end
      return res.metrics["test/accuracy"], losses
    end
    local acc_idx, loss_idx = train(idx, out .. "/run-idx")
    local acc_png, loss_png = train(png, out .. "/run-png")
    assert.are.equal(4, #loss_idx)
    assert.are.same(loss_idx, loss_png)
    assert.are.equal(acc_idx, acc_png)
    assert.is_true(acc_idx > 0.4, "test accuracy " .. acc_idx)   -- it learns: 0.1 is chance
    -- the ImageFolder tree of the same files: the IDX classes, in order, with the same counts
    local folder = data.images{dir = out .. "/train", channels = 1}
    assert.are.equal(300, #folder)
    assert.are.same({"0-t-shirt-top", "1-trouser", "2-pullover", "3-dress", "4-coat", "5-sandal", "6-shirt",
      "7-sneaker", "8-bag", "9-ankle-boot"}, folder.classes.label)
    local function counts(t)
      local c = {}
      for _, v in ipairs(t:totable()) do c[v] = (c[v] or 0) + 1 end
      return c
    end
    assert.are.same(counts(idx.train:column("label")), counts(folder:column("label")))
  end)
end)

describe("examples/cifar_resnet18.lua", function()
  it("trains ResNet-18 on a CIFAR-style folder that scripts/fashion_mnist_cifar.py writes (32x32 RGB PNG)", function()
    local d = H.tmpdir("cifar")
    assert.is_true(os.execute("/usr/bin/python3 scripts/fashion_mnist_cifar.py " .. H.shquote(d .. "/fm") ..
      " --limit 60 >/dev/null"))
    local ds = data.images{dir = d .. "/fm/train"}
    assert.are.equal(60, #ds)
    assert.are.same({3, 32, 32}, ds:get(1).image:shape())
    assert.are.equal(10, #ds.classes.label)
    local ex = dl.load_experiment("examples/cifar_resnet18.lua")
    local r = ex:run({data_dir = d .. "/fm", width = 4, batch_size = 8, eval_every = 2, workers = 1},
      {steps = 2, quiet = true, tracking = false, dir = d .. "/run"})
    assert.are.equal("done", r.status)
    assert.is_number(r.metrics["valid/accuracy"])
    assert.is_number(r.metrics["test/accuracy"])
  end)
end)
