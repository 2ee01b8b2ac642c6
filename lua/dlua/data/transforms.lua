--- dlua.data.transforms: the per-example transforms that run in C on the
-- pipeline's worker threads (p:map(T.scale(1 / 255), T.random_crop(28, {padding = 2}))).
-- Each constructor checks its arguments and returns a description; the pipeline
-- hands the descriptions to the engine. Randomness comes from (data seed, epoch,
-- example id), so a transform draws the same for any number of workers.
local core = require "dlua.core"
local util = require "dlua.util"
local finite = util.finite
local check = require "dlua.data.check"

local M = {}
local T = {}
--- The constructors (dl.data.transforms).
M.transforms = T

local errorf, options, is_int, check_int = check.errorf, check.options, check.is_int, check.check_int

local Transform = {__name = "dlua.data.Transform"}
Transform.__index = Transform

--- Is x a transform?
function M.is_transform(x) return getmetatable(x) == Transform end

--- The transforms that draw random numbers (not cacheable).
M.RANDOM = {random_crop = true, flip = true, random_translate = true, random_affine = true,
  random_resized_crop = true, color_jitter = true}

local function transform(desc) return setmetatable(desc, Transform) end

local function field_of(opts, default) return opts.field or default or "image" end

-- a plain list of n entries (no other keys)?
local function list_of(v, n)
  if type(v) ~= "table" or getmetatable(v) ~= nil or #v ~= n then return false end
  local count = 0
  for _ in pairs(v) do count = count + 1 end
  return count == n
end

local function pair(fname, what, v)
  if type(v) == "number" then v = {v, v} end
  if type(v) ~= "table" or #v ~= 2 or not is_int(v[1]) or not is_int(v[2]) or v[1] < 0 or v[2] < 0 then
    errorf(3, "%s: %s must be a non-negative integer or {h, w}", fname, what)
  end
  return {math.tointeger(v[1]), math.tointeger(v[2])}
end

local function probability(fname, what, v)
  if v == true then return 0.5 end
  if v == false or v == nil then return 0 end
  if type(v) ~= "number" or v < 0 or v > 1 then errorf(3, "%s: %s must be a boolean or a probability", fname, what) end
  return v
end

--- transforms.cast(dtype [, {field = "image"}]): converts the field's values.
function T.cast(dtype, opts)
  opts = options("cast", opts, {field = "string"})
  local ok = ({float32 = 1, float64 = 1, int32 = 1, int64 = 1, uint8 = 1})[dtype]
  if not ok then errorf(2, "cast: unknown dtype '%s' (valid: float32, float64, int32, int64, uint8)", tostring(dtype)) end
  return transform{kind = "cast", dtype = dtype, field = field_of(opts)}
end

--- transforms.scale(s [, {field = "image"}]): float32 x * s (uint8 images: scale(1/255)).
function T.scale(s, opts)
  opts = options("scale", opts, {field = "string"})
  if type(s) ~= "number" then errorf(2, "scale: factor must be a number, got %s", type(s)) end
  return transform{kind = "scale", scale = s, field = field_of(opts)}
end

--- transforms.normalize{mean =, std = [, field = "image"]}: float32 (x - mean) / std,
-- with one value for all channels or one per channel (dimension 1 of the field).
function T.normalize(opts)
  opts = options("normalize", opts, {"mean", "std", field = "string"})
  local mean = type(opts.mean) == "number" and {opts.mean} or opts.mean
  local std = type(opts.std) == "number" and {opts.std} or opts.std
  if type(mean) ~= "table" or type(std) ~= "table" or #mean ~= #std or #mean == 0 then
    errorf(2, "normalize: mean and std must be numbers or lists of the same length")
  end
  for _, s in ipairs(std) do if type(s) ~= "number" or s <= 0 then errorf(2, "normalize: std values must be positive") end end
  return transform{kind = "normalize", mean = mean, std = std, field = field_of(opts)}
end

--- transforms.random_crop(size [, {padding = 0, fill = 0, field = "image"}]): pads
-- each side by `padding`, then crops a random size x size (or {h, w}) window.
-- opts.fill of transform name: a finite number (0 when absent); NaN or inf would paint the border
local function fill_of(name, opts)
  local f = opts.fill or 0
  if not finite(f) then errorf(3, "%s: fill must be a finite number, got %s", name, util.fmt4(f)) end
  return f
end

function T.random_crop(size, opts)
  opts = options("random_crop", opts, {"padding", fill = "number", field = "string"})
  local sz = pair("random_crop", "size", size)
  if sz[1] < 1 or sz[2] < 1 then errorf(2, "random_crop: size must be positive") end
  return transform{kind = "random_crop", size = sz,
    padding = check_int("random_crop", "padding", opts.padding or 0, 0), fill = fill_of("random_crop", opts),
    field = field_of(opts)}
end

--- transforms.flip{horizontal = true, vertical = false [, field = "image"]}: mirrors
-- with probability 0.5 for `true`, or the probability given.
function T.flip(opts)
  opts = options("flip", opts, {"horizontal", "vertical", field = "string"})
  local h = opts.horizontal
  if h == nil then h = true end
  return transform{kind = "flip", horizontal = probability("flip", "horizontal", h),
    vertical = probability("flip", "vertical", opts.vertical), field = field_of(opts)}
end

--- transforms.hflip([p = 0.5]) and transforms.vflip([p = 0.5]): one-direction flips.
function T.hflip(p) return T.flip{horizontal = p or 0.5, vertical = false} end
function T.vflip(p) return T.flip{horizontal = false, vertical = p or 0.5} end

--- transforms.random_translate(max [, {fill = 0, field = "image"}]): shifts by
-- a random whole number of pixels in [-max, max] (or {rows, cols}).
function T.random_translate(max, opts)
  opts = options("random_translate", opts, {fill = "number", field = "string"})
  return transform{kind = "random_translate", max = pair("random_translate", "max", max),
    fill = fill_of("random_translate", opts), field = field_of(opts)}
end

--- transforms.random_affine{degrees = 0, translate = 0, scale = {1, 1} [, fill = 0, field = "image"]}:
-- rotates by up to +-degrees, shifts by up to translate x the size, zooms by
-- a factor in scale, about the centre, with bilinear interpolation.
function T.random_affine(opts)
  opts = options("random_affine", opts, {degrees = "number", translate = "number", "scale", fill = "number",
    field = "string"})
  local deg, tr = opts.degrees or 0, opts.translate or 0
  if not (finite(deg) and deg >= 0) then
    errorf(2, "random_affine: degrees must be a finite number >= 0, got %s", util.fmt4(deg))
  end
  if not (finite(tr) and tr >= 0 and tr <= 1) then
    errorf(2, "random_affine: translate must be a fraction of the size in [0, 1], got %s", util.fmt4(tr))
  end
  local sc = opts.scale or {1, 1}
  if type(sc) == "number" then sc = {sc, sc} end
  if not list_of(sc, 2) or not finite(sc[1]) or not finite(sc[2]) or sc[1] <= 0 or sc[2] < sc[1] then
    errorf(2, "random_affine: scale must be a finite number > 0 or {lo, hi} of them with lo <= hi, got %s",
      type(sc) == "table" and ("{" .. util.fmt4(sc[1]) .. ", " .. util.fmt4(sc[2]) .. "}") or tostring(sc))
  end
  return transform{kind = "random_affine", degrees = deg, translate = tr, scale = {sc[1], sc[2]},
    fill = fill_of("random_affine", opts), field = field_of(opts)}
end

--- transforms.one_hot(classes [, {field = "label"}]): a 1-based label -> float32 [classes].
function T.one_hot(classes, opts)
  opts = options("one_hot", opts, {field = "string"})
  return transform{kind = "one_hot", classes = check_int("one_hot", "classes", classes, 1), field = field_of(opts, "label")}
end

local MAX_SIDE = 1 << 30

-- size = n | {h, w}, whole numbers in 1..2^30
local function image_size(fname, v)
  local function side(x) return is_int(x) and x >= 1 and x <= MAX_SIDE end
  if list_of(v, 2) and side(v[1]) and side(v[2]) then return {math.tointeger(v[1]), math.tointeger(v[2])} end
  if type(v) == "number" and side(v) then return math.tointeger(v) end
  errorf(3, "%s: size must be a whole number in 1..2^30 or {h, w} of them, got %s", fname,
    type(v) == "table" and "a table" or tostring(v))
end

local INTERP = {bilinear = true, area = true, nearest = true}

-- interpolation and antialias of resize and random_resized_crop
local function resampling(fname, opts)
  local mode = opts.interpolation or "bilinear"
  if not INTERP[mode] then
    errorf(3, "%s: interpolation must be one of bilinear, area, nearest, got %s", fname, tostring(mode))
  end
  local aa = opts.antialias
  if aa ~= nil and type(aa) ~= "boolean" then errorf(3, "%s: antialias must be a boolean, got %s", fname, type(aa)) end
  if aa == true and mode ~= "bilinear" then
    errorf(3, "%s: antialias applies to bilinear interpolation only (got interpolation '%s')", fname, mode)
  end
  if aa == nil then aa = true end
  return mode, aa
end

-- {lo, hi} of numbers with min <= lo <= hi (<= max); level as errorf's (default 3: the
-- caller of the constructor calling range)
local function range(fname, what, v, min, max, default, level)
  if v == nil then return default end
  if not list_of(v, 2) or type(v[1]) ~= "number" or type(v[2]) ~= "number"
      or not (v[1] >= min and v[1] <= v[2] and v[2] <= max) then
    errorf(level or 3, "%s: %s must be {lo, hi} with %g <= lo <= hi <= %g", fname, what, min, max)
  end
  return {v[1], v[2]}
end

--- transforms.resize{size = n | {h, w} [, interpolation = "bilinear", antialias = true, field = "image"]}:
-- resamples uint8, float32 or float64 [C, H, W] images of any size to {h, w}, or (size n)
-- so that the shorter side is n (the other side scaled, truncated). interpolation:
-- "bilinear" (antialias = true: the filter widened when shrinking, torchvision's
-- antialias=True; false: 2 taps, torch's interpolate), "area" (adaptive average
-- pooling) or "nearest". uint8 results are rounded half to even.
function T.resize(opts)
  opts = options("resize", opts, {size = true, interpolation = true, antialias = true, field = "string"})
  local size = image_size("resize", opts.size)
  local mode, aa = resampling("resize", opts)
  return transform{kind = "resize", size = size, interpolation = mode, antialias = aa, field = field_of(opts)}
end

--- transforms.random_resized_crop{size = n | {h, w} [, scale = {0.08, 1}, ratio = {3/4, 4/3},
-- interpolation = "bilinear", antialias = true, field = "image"]}: torchvision's
-- RandomResizedCrop: a random window of area scale x the image's and aspect ratio
-- (w / h) log-uniform in ratio (10 tries, then the whole image cut to the ratio
-- range, centred), resampled to size.
function T.random_resized_crop(opts)
  opts = options("random_resized_crop", opts,
    {size = true, scale = true, ratio = true, interpolation = true, antialias = true, field = "string"})
  local size = image_size("random_resized_crop", opts.size)
  if type(size) == "number" then size = {size, size} end
  local mode, aa = resampling("random_resized_crop", opts)
  local scale = range("random_resized_crop", "scale", opts.scale, 0, 1, {0.08, 1})
  if scale[2] <= 0 then errorf(2, "random_resized_crop: scale's upper end must be positive") end
  local ratio = range("random_resized_crop", "ratio", opts.ratio, 1e-6, 1e6, {3 / 4, 4 / 3})
  return transform{kind = "random_resized_crop", size = size, scale = scale, ratio = ratio, interpolation = mode,
    antialias = aa, field = field_of(opts)}
end

--- transforms.center_crop{size = n | {h, w} [, field = "image"]}: the centre window
-- (torchvision's center_crop), zeros where the image is smaller than the window.
function T.center_crop(opts)
  opts = options("center_crop", opts, {size = true, field = "string"})
  local size = image_size("center_crop", opts.size)
  if type(size) == "number" then size = {size, size} end
  return transform{kind = "center_crop", size = size, field = field_of(opts)}
end

-- a jitter amount as torchvision's ColorJitter reads it: v >= 0 -> {max(0, 1 - v), 1 + v}
-- ({-v, v} for hue, v <= 0.5), or {lo, hi} with 0 <= lo <= hi (-0.5 <= lo <= hi <= 0.5 for
-- hue); nil when it changes nothing
local function jitter(what, v)
  if v == nil then return nil end
  local hue = what == "hue"
  if type(v) == "number" then
    if v < 0 or hue and v > 0.5 then
      errorf(3, "color_jitter: %s must be %s or {lo, hi}, got %g", what, hue and "in [0, 0.5]" or ">= 0", v)
    end
    v = hue and {-v, v} or {math.max(0, 1 - v), 1 + v}
  end
  local r = hue and range("color_jitter", what, v, -0.5, 0.5, nil, 4) or range("color_jitter", what, v, 0, 1e6, nil, 4)
  local centre = hue and 0 or 1
  if r[1] == centre and r[2] == centre then return nil end
  return r
end

--- transforms.color_jitter{brightness =, contrast =, saturation =, hue = [, field = "image"]}:
-- torchvision's ColorJitter on uint8 or float32 (in [0, 1]) images with 1 or 3
-- channels: brightness, contrast and saturation amounts v give factors uniform in
-- {max(0, 1 - v), 1 + v}, a hue amount h (<= 0.5) a turn in {-h, h} (or the {lo, hi}
-- given), applied in a random order drawn per example.
function T.color_jitter(opts)
  opts = options("color_jitter", opts,
    {brightness = true, contrast = true, saturation = true, hue = true, field = "string"})
  return transform{kind = "color_jitter", brightness = jitter("brightness", opts.brightness),
    contrast = jitter("contrast", opts.contrast), saturation = jitter("saturation", opts.saturation),
    hue = jitter("hue", opts.hue), field = field_of(opts)}
end

--- t:apply(image [, {key = 0}]) -> tensor: the transform on one image tensor (its
-- field), its random draws keyed by key: to check or preview a transform on images of
-- any size. (A pipeline keys each example's draws by data seed, epoch and id instead.)
function Transform:apply(image, opts, ...)
  if select("#", ...) > 0 then errorf(2, "apply: expected an image and an optional option table") end
  opts = options("apply", opts, {key = "integer"})
  local out = check.check(2, pcall(core._tf_apply, image, self, opts.key or 0))
  return out                                       -- (not a tail call: the level counts this frame)
end

-- every exported function refuses extra arguments (util.strict)
util.strict_table("data.transforms.", M.transforms, false, {
  cast = {"string", "table?"}, center_crop = {"table"}, color_jitter = {"table"}, flip = {"table?"}, hflip = {"number?"},
  normalize = {"table"}, one_hot = {"integer", "table?"}, random_affine = {"table?"}, random_crop = {"integer", "table?"},
  random_resized_crop = {"table"}, random_translate = {"integer", "table?"}, resize = {"table"}, scale = {"number", "table?"},
  vflip = {"number?"},
})

return M
