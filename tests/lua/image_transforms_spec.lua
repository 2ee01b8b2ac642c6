-- Image transforms for images of any size (issue 32, item 4): resize, random_resized_crop,
-- center_crop, color_jitter (hue included). Values against torch / torchvision (Debian python3-torchvision,
-- through tests/lua/image_transforms_ref.py): float64 within 1e-12 (the same weights; torch's
-- x86 build fuses some multiply-adds, so sums differ in the last bits: 1e-15 seen), float32
-- within 5e-7 (4 ulps of 1.0; 2.4e-7 seen), uint8 off by one on under 0.1% of values (a float32
-- sum landing within an ulp of a half rounds the other way; 4 of 370k seen), colour
-- adjustments and crops exactly.
-- Then determinism across worker counts, fixed output shapes for inputs of any size, the
-- ImageNet-style chain, and the refusal of every wrong option.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local T = dl.data.transforms

local PY = "/usr/bin/python3"
local HAVE_TORCH = os.execute(PY .. " -c 'import torch, torchvision' 2>/dev/null") == true
local torch_it = HAVE_TORCH and it or function(name) pending(name .. " (python3-torchvision is not installed)") end

dl.seed(7)
local IMAGES = {
  a = dl.rand(3, 37, 53, {dtype = "float64"}),       -- odd sizes: scales that are not integers
  b = dl.rand(1, 20, 15, {dtype = "float64"}),
  big = dl.rand(3, 96, 80, {dtype = "float64"}),
  af = dl.rand(3, 37, 53),
  au = (dl.rand(3, 37, 53) * 256):byte(),
  bigu = (dl.rand(3, 96, 80) * 256):byte(),
}
-- grey pixels (r = g = b) in the first 10 rows, and pixels with two equal channels
IMAGES.gu = IMAGES.au:clone()
IMAGES.gu[2]:narrow(1, 1, 10):copy_(IMAGES.gu[1]:narrow(1, 1, 10))
IMAGES.gu[3]:narrow(1, 1, 20):copy_(IMAGES.gu[1]:narrow(1, 1, 20))
IMAGES.gf = IMAGES.gu:float() * (1 / 255)

-- case name -> {spec for the reference script, function computing ours}
local CASES, ORDER = {}, {}
local function case(name, spec, ours)
  CASES[name] = {spec = spec, ours = ours}
  ORDER[#ORDER + 1] = name
end

local function rs(img, h, w, mode, aa)
  case(string.format("resize_%s_%dx%d_%s_%s", img, h, w, mode, aa and 1 or 0),
    string.format("resize|%s|%d|%d|%s|%d", img, h, w, mode, aa and 1 or 0),
    function()
      local opts = {size = {h, w}, interpolation = mode}
      if mode == "bilinear" then opts.antialias = aa end
      return T.resize(opts):apply(IMAGES[img])
    end)
end
for _, img in ipairs{"a", "af", "au", "big", "bigu"} do
  for _, hw in ipairs{{17, 29}, {61, 90}, {37, 20}, {8, 8}, {5, 53}} do
    rs(img, hw[1], hw[2], "bilinear", false)
    rs(img, hw[1], hw[2], "bilinear", true)
    rs(img, hw[1], hw[2], "area", nil)
    rs(img, hw[1], hw[2], "nearest", nil)
  end
end
rs("b", 7, 11, "bilinear", true)
rs("b", 40, 3, "area", nil)
for _, img in ipairs{"a", "au", "b"} do
  for _, n in ipairs{10, 24, 100} do
    case(string.format("short_%s_%d", img, n), string.format("short|%s|%d", img, n),
      function() return T.resize{size = n}:apply(IMAGES[img]) end)
  end
  for _, hw in ipairs{{10, 10}, {36, 52}, {40, 60}, {41, 57}, {9, 70}, {20, 15}} do
    case(string.format("center_%s_%dx%d", img, hw[1], hw[2]), string.format("center|%s|%d|%d", img, hw[1], hw[2]),
      function() return T.center_crop{size = hw}:apply(IMAGES[img]) end)
  end
end
for _, img in ipairs{"af", "au"} do
  for _, f in ipairs{0.3, 0.8, 1.0, 1.7} do
    for _, op in ipairs{"brightness", "contrast", "saturation"} do
      case(string.format("%s_%s_%g", op, img, f), string.format("%s|%s|%.17g", op, img, f),
        function() return T.color_jitter{[op] = {f, f}}:apply(IMAGES[img]) end)
    end
  end
end
for _, img in ipairs{"af", "au", "gf", "gu"} do
  for _, f in ipairs{-0.5, -0.31, 0.1, 0.45, 0.5} do
    case(string.format("hue_%s_%g", img, f), string.format("hue|%s|%.17g", img, f),
      function() return T.color_jitter{hue = {f, f}}:apply(IMAGES[img]) end)
  end
end
-- random_resized_crop with draws that cannot vary: scale {1, 1} and the image's own ratio take
-- the whole image; a ratio no window fits falls back to the centre crop torchvision computes
for _, img in ipairs{"a", "au"} do
  local x = IMAGES[img]
  local hh, ww = x:size(2), x:size(3)
  case("rrc_whole_" .. img, string.format("crop|%s|0|0|%d|%d|24|24|1", img, hh, ww),
    function() return T.random_resized_crop{size = 24, scale = {1, 1}, ratio = {ww / hh, ww / hh}}:apply(x, {key = 5}) end)
  -- ratio 3: w = round(sqrt(hw * 3)) > W on every try; in_ratio < 3 -> h = round(W / 3), centred
  local h = math.floor(ww / 3 + 0.5)
  case("rrc_fallback_" .. img, string.format("crop|%s|%d|0|%d|%d|16|20|0", img, (hh - h) // 2, h, ww),
    function() return T.random_resized_crop{size = {16, 20}, scale = {1, 1}, ratio = {3, 3}, antialias = false}:apply(x) end)
end

local function tolerance(name, t)
  if name:match("^center") or name:match("^brightness") or name:match("^contrast_au") or name:match("^saturation_au")
      or name:match("^hue") then
    return 0
  end
  if t:dtype() == "float64" then return 1e-12 end
  if t:dtype() == "float32" then return 5e-7 end
  return 1
end

describe("image transforms against torchvision", function()
  torch_it("resize, shorter-side resize, center_crop, colour adjustments and resized crops match", function()
    local dir = H.tmpdir("imgtf")
    local meta = {}
    for _, name in ipairs(ORDER) do meta[name] = CASES[name].spec end
    assert(dl.checkpoint.save(dir .. "/in.safetensors", IMAGES, meta))
    local cmd = string.format("%s tests/lua/image_transforms_ref.py %s %s 2>&1", PY, H.shquote(dir .. "/in.safetensors"),
      H.shquote(dir .. "/out.safetensors"))
    local p = io.popen(cmd)
    local log = p:read("a")
    assert(p:close(), "reference script failed: " .. log)
    local ref = assert(dl.checkpoint.load(dir .. "/out.safetensors"))
    local u8_off, u8_total = 0, 0
    for _, name in ipairs(ORDER) do
      local want, got = ref[name], CASES[name].ours()
      assert.are.same(want:shape(), got:shape(), name .. ": shape")
      assert.are.equal(want:dtype(), got:dtype(), name .. ": dtype")
      local diff = (got:double() - want:double()):abs()
      local worst = diff:max():item()
      assert(worst <= tolerance(name, got), string.format("%s: max |diff| %g", name, worst))
      if got:dtype() == "uint8" then
        u8_off = u8_off + (diff:gt(0)):sum():item()
        u8_total = u8_total + got:numel()
      end
    end
    assert(u8_off / u8_total < 0.001, string.format("uint8: %d of %d values off by one", u8_off, u8_total))
    assert(#ORDER > 150)
  end)
end)

local core = require "dlua.core"
local data = dl.data

local function bytes(t) return core._tensor_bytes(t) end

-- every batch of one pass: image bytes per batch
local function fingerprint(pipe, epochs)
  local out = {}
  for b in pipe:iter{epochs = epochs or 1, warn = false} do out[#out + 1] = bytes(b.image) end
  return out
end

-- n uint8 RGB images [3, 40, 50]
local function rgb(n)
  dl.seed(11)
  return data.tensors{image = (dl.rand(n, 3, 40, 50) * 256):byte(), label = dl.arange(1, n + 1):int()}
end

local IMAGENET = {mean = {0.485, 0.456, 0.406}, std = {0.229, 0.224, 0.225}}

describe("image transforms in the pipeline", function()
  it("give bit-identical batches for 0, 1 and 2 workers, different across examples and epochs", function()
    local p = rgb(12):shuffle{seed = 3}:map(T.random_resized_crop{size = 24}, T.flip{},
      T.color_jitter{brightness = 0.4, contrast = 0.4, saturation = 0.4}, T.scale(1 / 255),
      T.normalize(IMAGENET)):batch(4)
    local ref = fingerprint(p:workers(1), 2)
    assert.are.equal(6, #ref)
    assert.are.same(ref, fingerprint(p:workers(2):prefetch(3), 2))
    assert.are.same(ref, fingerprint(p:workers(0), 2))
    assert.are_not.same(ref, fingerprint(p:seed(9):workers(2), 2))
    -- the same example in two epochs: different crops (no shuffle, so batch k holds the same ids)
    local q = rgb(4):map(T.random_resized_crop{size = 16}):batch(4):workers(2)
    local two = fingerprint(q, 2)
    assert.are_not.equal(two[1], two[2])
    -- examples with identical pixels get different crops and jitter orders
    local same = data.tensors{image = (dl.ones(8, 3, 30, 30) * dl.arange(0, 30):byte():reshape(1, 1, 1, 30)):byte()}
    local seen = {}
    for b in same:map(T.random_resized_crop{size = 10}):iter{warn = false} do seen[bytes(b.image)] = true end
    local distinct = 0
    for _ in pairs(seen) do distinct = distinct + 1 end
    assert(distinct >= 6, "only " .. distinct .. " distinct crops of 8 examples")
  end)

  it("run the recommended ImageNet-style chain: uint8 -> random_resized_crop -> flip -> float -> normalize", function()
    local ds = rgb(10)
    local p = ds:map(T.random_resized_crop{size = 32}, T.flip{}, T.scale(1 / 255), T.normalize(IMAGENET))
      :batch(5):workers(2)
    local n = 0
    for b in p:iter{warn = false} do
      n = n + 1
      assert.are.same({5, 3, 32, 32}, b.image:shape())
      assert.are.equal("float32", b.image:dtype())
      -- normalised [0, 1] values: (0 - 0.485) / 0.229 .. (1 - 0.406) / 0.225
      assert(b.image:min():item() >= -0.485 / 0.229 - 1e-5 and b.image:max():item() <= 0.594 / 0.225 + 1e-5)
    end
    assert.are.equal(2, n)
    -- the whole image with no flip, then normalize: equals resize then the same arithmetic
    local x = ds:get(1).image
    local whole = T.random_resized_crop{size = {20, 25}, scale = {1, 1}, ratio = {50 / 40, 50 / 40}}:apply(x)
    assert.are.equal(bytes(T.resize{size = {20, 25}}:apply(x)), bytes(whole))
    local f = T.normalize(IMAGENET):apply(T.scale(1 / 255):apply(whole))
    local r = ((whole:float() * (1 / 255))[1] - 0.485) * (1 / 0.229)
    assert((f[1] - r):abs():max():item() < 1e-6)
  end)

  it("fail on a non-image field naming the stage and the example", function()
    local ds = data.tensors{image = dl.zeros(3, 3, 8, 8, {dtype = "int32"})}
    assert.has_error(function() for _ in ds:map(T.resize{size = 4}):iter{warn = false} do end end,
      "pipeline: stage 1 'resize' failed on example 1 (epoch 1): resize supports uint8, float64 and float32 images, field 'image' is int32")
  end)
end)

describe("image transforms on images of any size (t:apply)", function()
  local sizes = {{1, 1}, {2, 3}, {7, 5}, {40, 50}, {333, 129}, {17, 400}}
  it("produce the fixed output shape whatever the input size", function()
    local tfs = {T.random_resized_crop{size = {24, 20}}, T.random_resized_crop{size = 8, antialias = false},
      T.random_resized_crop{size = 8, interpolation = "area"}, T.center_crop{size = {24, 20}},
      T.resize{size = {24, 20}}, T.resize{size = {24, 20}, interpolation = "nearest"}}
    for _, hw in ipairs(sizes) do
      for _, dtype in ipairs{"uint8", "float32", "float64"} do
        local x = (dl.rand(3, hw[1], hw[2]) * 255):to(dtype)
        for _, t in ipairs(tfs) do
          for key = 1, 3 do
            local y = t:apply(x, {key = key})
            local want = t.size
            assert.are.same({3, want[1], want[2]}, y:shape(), t.kind .. " of " .. hw[1] .. "x" .. hw[2])
            assert.are.equal(dtype, y:dtype())
          end
        end
        -- [H, W] images keep two dimensions
        assert.are.same({24, 20}, T.random_resized_crop{size = {24, 20}}:apply(x[1]):shape())
      end
      local s = T.resize{size = 10}:apply(dl.rand(1, hw[1], hw[2])):shape()
      local short, long = math.min(hw[1], hw[2]), math.max(hw[1], hw[2])
      local other = math.floor(10 * long / short)
      assert.are.same(hw[1] <= hw[2] and {1, 10, other} or {1, other, 10}, s)
    end
  end)

  it("keep constant images constant and stay within the input's range", function()
    for _, hw in ipairs(sizes) do
      local c = dl.full(77, {3, hw[1], hw[2]}):byte()
      for _, t in ipairs{T.random_resized_crop{size = 9}, T.resize{size = {5, 31}}, T.resize{size = {5, 31}, interpolation = "area"},
          T.resize{size = {50, 3}, antialias = false}} do
        local y = t:apply(c, {key = 4})
        assert.are.equal(77, y:min():item())
        assert.are.equal(77, y:max():item())
      end
    end
  end)

  it("draw random_resized_crop windows inside the image, of area and ratio in range", function()
    -- each pixel holds its own coordinates (float64 row * 1000 + column); nearest
    -- interpolation samples the window's top-left pixel first and, at a scale of one
    -- output pixel per input pixel, the window's last row and column
    local Hh, Ww = 60, 80
    local rows = dl.arange(0, Hh):double():reshape(Hh, 1) * 1000
    local img = (rows + dl.arange(0, Ww):double():reshape(1, Ww)):reshape(1, Hh, Ww)
    local n = 0
    for key = 1, 200 do
      local y = T.random_resized_crop{size = {Hh, Ww}, interpolation = "nearest", scale = {0.2, 0.6},
        ratio = {0.5, 2}}:apply(img, {key = key})
      local first, last = y[1][1][1]:item(), y[1][Hh][Ww]:item()
      local y0, x0 = first // 1000, first % 1000
      local h, w = last // 1000 - y0 + 1, last % 1000 - x0 + 1
      assert(y0 >= 0 and x0 >= 0 and y0 + h <= Hh and x0 + w <= Ww)
      local area, ratio = h * w / (Hh * Ww), w / h
      -- the window's size is rounded to whole pixels, so allow a pixel either way
      assert(area > 0.2 * (1 - 2 / math.min(h, w)) - 1e-9 and area < 0.6 * (1 + 2 / math.min(h, w)) + 1e-9,
        string.format("key %d: area %g (%dx%d)", key, area, h, w))
      assert(ratio > 0.5 * (1 - 1 / math.min(h, w)) and ratio < 2 * (1 + 1 / math.min(h, w)),
        string.format("key %d: ratio %g (%dx%d)", key, ratio, h, w))
      n = n + 1
    end
    assert.are.equal(200, n)
  end)

  it("apply colour jitter as one of the orders of its single adjustments, varying per example", function()
    local x = (dl.rand(3, 12, 9) * 256):byte()
    local single = {T.color_jitter{brightness = {1.3, 1.3}}, T.color_jitter{contrast = {0.6, 0.6}},
      T.color_jitter{saturation = {1.5, 1.5}}, T.color_jitter{hue = {0.2, 0.2}}}
    local orders = {}
    local function permute(done, left)
      if #left == 0 then
        local y = x
        for _, t in ipairs(done) do y = t:apply(y) end
        orders[bytes(y)] = true
        return
      end
      for i = 1, #left do
        local d, l = {table.unpack(done)}, {table.unpack(left)}
        d[#d + 1] = table.remove(l, i)
        permute(d, l)
      end
    end
    permute({}, single)
    local seen = {}
    local all = T.color_jitter{brightness = {1.3, 1.3}, contrast = {0.6, 0.6}, saturation = {1.5, 1.5}, hue = {0.2, 0.2}}
    for key = 1, 60 do
      local y = bytes(all:apply(x, {key = key}))
      assert(orders[y], "key " .. key .. ": not a composition of the four adjustments")
      seen[y] = true
      assert.are.equal(y, bytes(all:apply(x, {key = key})))     -- the same key, the same order
    end
    local distinct = 0
    for _ in pairs(seen) do distinct = distinct + 1 end
    assert(distinct >= 10, "only " .. distinct .. " orders in 60 draws")
    -- factors drawn in the range: brightness {0.5, 0.5} .. {1.5, 1.5} brackets brightness = 0.5
    local f = dl.full(0.5, {1, 4, 4})
    for key = 1, 20 do
      local v = T.color_jitter{brightness = 0.5}:apply(f, {key = key})[1][1][1]:item()
      assert(v >= 0.25 - 1e-7 and v <= 0.75 + 1e-7, v)
    end
  end)
end)

describe("image transform options", function()
  local function refuses(fn, pattern)
    local ok, err = pcall(fn)
    assert(not ok, "accepted: " .. pattern)
    assert(tostring(err):find(pattern, 1, true), "message '" .. tostring(err) .. "' lacks '" .. pattern .. "'")
  end
  it("are refused when unknown or wrong-typed, naming the transform and the key", function()
    refuses(function() T.resize{size = 3, sise = 4} end, "resize: unknown option 'sise'")
    refuses(function() T.resize{} end, "resize: size must be")
    refuses(function() T.resize{size = 0} end, "resize: size must be")
    refuses(function() T.resize{size = {3}} end, "resize: size must be")
    refuses(function() T.resize{size = {3, 4, 5}} end, "resize: size must be")
    refuses(function() T.resize{size = 2.5} end, "resize: size must be")
    refuses(function() T.resize{size = "3"} end, "resize: size must be")
    refuses(function() T.resize{size = 3, interpolation = "bicubic"} end,
      "resize: interpolation must be one of bilinear, area, nearest, got bicubic")
    refuses(function() T.resize{size = 3, interpolation = 1} end, "resize: interpolation must be one of")
    refuses(function() T.resize{size = 3, antialias = 1} end, "resize: antialias must be a boolean, got number")
    refuses(function() T.resize{size = 3, interpolation = "area", antialias = true} end,
      "resize: antialias applies to bilinear interpolation only")
    refuses(function() T.resize{size = 3, field = 4} end, "resize: option 'field' must be")
    refuses(function() T.resize(3) end, "bad argument #1 to 'data.transforms.resize' (table expected, got integer)")
    refuses(function() T.resize({size = 3}, 2) end, "bad argument #2 to 'data.transforms.resize'")
    refuses(function() T.random_resized_crop{size = 3, scale = {0.5, 0.1}} end,
      "random_resized_crop: scale must be {lo, hi} with 0 <= lo <= hi <= 1")
    refuses(function() T.random_resized_crop{size = 3, scale = {0, 0}} end, "random_resized_crop: scale's upper end")
    refuses(function() T.random_resized_crop{size = 3, scale = 0.5} end, "random_resized_crop: scale must be")
    refuses(function() T.random_resized_crop{size = 3, ratio = {0, 1}} end, "random_resized_crop: ratio must be")
    refuses(function() T.random_resized_crop{size = 3, ratio = {2, 1}} end, "random_resized_crop: ratio must be")
    refuses(function() T.random_resized_crop{size = 3, ratio = {1, "2"}} end, "random_resized_crop: ratio must be")
    refuses(function() T.random_resized_crop{size = 3, interpolation = "cubic"} end,
      "random_resized_crop: interpolation must be")
    refuses(function() T.random_resized_crop{size = 3, antialias = "yes"} end, "random_resized_crop: antialias must be")
    refuses(function() T.random_resized_crop{scale = {0.5, 1}} end, "random_resized_crop: size must be")
    refuses(function() T.random_resized_crop{size = 3, padding = 1} end, "random_resized_crop: unknown option 'padding'")
    refuses(function() T.center_crop{size = -1} end, "center_crop: size must be")
    refuses(function() T.center_crop{size = 3, fill = 1} end, "center_crop: unknown option 'fill'")
    refuses(function() T.color_jitter{brightness = -0.1} end, "color_jitter: brightness must be >= 0")
    refuses(function() T.color_jitter{contrast = {1.5, 0.5}} end, "color_jitter: contrast must be {lo, hi}")
    refuses(function() T.color_jitter{saturation = "x"} end, "color_jitter: saturation must be {lo, hi}")
    refuses(function() T.color_jitter{hue = 0.6} end, "color_jitter: hue must be in [0, 0.5] or {lo, hi}, got 0.6")
    refuses(function() T.color_jitter{hue = {-0.6, 0}} end, "color_jitter: hue must be {lo, hi} with -0.5 <= lo <= hi <= 0.5")
    refuses(function() T.color_jitter{hue = true} end, "color_jitter: hue must be {lo, hi}")
    refuses(function() T.color_jitter{brightnes = 0.1} end, "color_jitter: unknown option 'brightnes'")
    local t = T.resize{size = 3}
    refuses(function() t:apply(dl.zeros(3, 4, 4), {kee = 1}) end, "apply: unknown option 'kee'")
    refuses(function() t:apply(dl.zeros(3, 4, 4), {key = 1.5}) end, "apply: option 'key' must be")
    refuses(function() t:apply(dl.zeros(3, 4, 4), nil, 3) end, "apply: expected an image")
    refuses(function() t:apply("img") end, "bad argument #1")
    refuses(function() t:apply(dl.zeros(4)) end, "apply: resize needs an image [C, H, W] or [H, W], field 'image' is [4]")
    refuses(function() t:apply(dl.zeros(3, 0, 4)) end, "apply: resize needs a non-empty image")
    refuses(function() T.color_jitter{brightness = 0.2}:apply(dl.zeros(2, 4, 4)) end,
      "apply: color_jitter needs 1 or 3 channels")
    refuses(function() T.color_jitter{brightness = 0.2}:apply(dl.zeros(3, 4, 4, {dtype = "float64"})) end,
      "apply: color_jitter supports uint8 and float32 images, field 'image' is float64")
  end)

  it("blame the caller's line", function()
    for _, f in ipairs{function() T.color_jitter{contrast = {2, 1}} end, function() T.resize{size = 0} end,
        function() T.random_resized_crop{size = 3, ratio = {2, 1}} end,
        function() T.resize{size = 2}:apply(dl.zeros(5)) end} do
      local _, err = pcall(f)
      assert.matches("^tests/lua/image_transforms_spec%.lua:%d+: [a-z_]+: ", err)
    end
  end)

  it("are read strictly by the engine too (descriptions built by hand)", function()
    local function engine(desc) return function() core._tf_apply(dl.zeros(3, 4, 4), desc, 0) end end
    refuses(engine{kind = "resize", size = 3, sise = 1}, "unknown option 'transform.sise'")
    refuses(engine{kind = "resize"}, "option 'transform.size' (required)")
    refuses(engine{kind = "resize", size = {0, 3}}, "option 'transform.size' (whole numbers in 1..2^30 expected)")
    refuses(engine{kind = "resize", size = 3, interpolation = "cubic"}, "option 'transform.interpolation'")
    refuses(engine{kind = "random_resized_crop", size = 3, scale = {2, 3}}, "option 'transform.scale'")
    refuses(engine{kind = "color_jitter", brightness = {-1, 1}}, "option 'transform.brightness'")
    refuses(engine{kind = "color_jitter", hue = {-1, 0}}, "option 'transform.hue' ({lo, hi} with -0.5 <= lo <= hi <= 0.5 expected)")
    refuses(engine{kind = "colour_jitter"}, "option 'transform.kind' (unknown transform)")
    refuses(engine{kind = "lua", plan = {}}, "apply: not for a lua stage")
  end)
end)
