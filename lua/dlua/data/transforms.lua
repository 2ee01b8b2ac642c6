--- dlua.data.transforms: the per-example transforms that run in C on the
-- pipeline's worker threads (p:map(T.scale(1 / 255), T.random_crop(28, {padding = 2}))).
-- Each constructor checks its arguments and returns a description; the pipeline
-- hands the descriptions to the engine. Randomness comes from (data seed, epoch,
-- example id), so a transform draws the same for any number of workers.
local util = require "dlua.util"
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
M.RANDOM = {random_crop = true, flip = true, random_translate = true, random_affine = true}

local function transform(desc) return setmetatable(desc, Transform) end

local function field_of(opts, default) return opts.field or default or "image" end

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
  opts = options("cast", opts, {"field"})
  local ok = ({float32 = 1, float64 = 1, int32 = 1, int64 = 1, uint8 = 1})[dtype]
  if not ok then errorf(2, "cast: unknown dtype '%s' (valid: float32, float64, int32, int64, uint8)", tostring(dtype)) end
  return transform{kind = "cast", dtype = dtype, field = field_of(opts)}
end

--- transforms.scale(s [, {field = "image"}]): float32 x * s (uint8 images: scale(1/255)).
function T.scale(s, opts)
  opts = options("scale", opts, {"field"})
  if type(s) ~= "number" then errorf(2, "scale: factor must be a number, got %s", type(s)) end
  return transform{kind = "scale", scale = s, field = field_of(opts)}
end

--- transforms.normalize{mean =, std = [, field = "image"]}: float32 (x - mean) / std,
-- with one value for all channels or one per channel (dimension 1 of the field).
function T.normalize(opts)
  opts = options("normalize", opts, {"mean", "std", "field"})
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
function T.random_crop(size, opts)
  opts = options("random_crop", opts, {"padding", "fill", "field"})
  local sz = pair("random_crop", "size", size)
  if sz[1] < 1 or sz[2] < 1 then errorf(2, "random_crop: size must be positive") end
  return transform{kind = "random_crop", size = sz,
    padding = check_int("random_crop", "padding", opts.padding or 0, 0), fill = opts.fill or 0, field = field_of(opts)}
end

--- transforms.flip{horizontal = true, vertical = false [, field = "image"]}: mirrors
-- with probability 0.5 for `true`, or the probability given.
function T.flip(opts)
  opts = options("flip", opts, {"horizontal", "vertical", "field"})
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
  opts = options("random_translate", opts, {"fill", "field"})
  return transform{kind = "random_translate", max = pair("random_translate", "max", max), fill = opts.fill or 0,
    field = field_of(opts)}
end

--- transforms.random_affine{degrees = 0, translate = 0, scale = {1, 1} [, fill = 0, field = "image"]}:
-- rotates by up to +-degrees, shifts by up to translate x the size, zooms by
-- a factor in scale, about the centre, with bilinear interpolation.
function T.random_affine(opts)
  opts = options("random_affine", opts, {"degrees", "translate", "scale", "fill", "field"})
  local sc = opts.scale or {1, 1}
  if type(sc) == "number" then sc = {sc, sc} end
  if type(sc) ~= "table" or type(sc[1]) ~= "number" or type(sc[2]) ~= "number" or sc[1] <= 0 or sc[2] < sc[1] then
    errorf(2, "random_affine: scale must be {lo, hi} with 0 < lo <= hi")
  end
  return transform{kind = "random_affine", degrees = opts.degrees or 0, translate = opts.translate or 0,
    scale = sc, fill = opts.fill or 0, field = field_of(opts)}
end

--- transforms.one_hot(classes [, {field = "label"}]): a 1-based label -> float32 [classes].
function T.one_hot(classes, opts)
  opts = options("one_hot", opts, {"field"})
  return transform{kind = "one_hot", classes = check_int("one_hot", "classes", classes, 1), field = field_of(opts, "label")}
end



-- every exported function refuses extra arguments (util.strict)
util.strict_table("data.transforms.", M.transforms)

return M
