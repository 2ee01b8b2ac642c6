-- Image augmentation throughput (issue 32, item 4): decoded images in memory, 400 wide x 350
-- high, RGB uint8, through the ImageNet-style chain
--   random_resized_crop 224 (bilinear, antialias) -> flip -> scale(1/255) -> normalize
-- batch 32, prefetch 4, at 1 and 2 workers; the consumer only takes the batches.
--
--   dlua tests/bench/image_transforms.lua [windows] [images]
--
-- The images (default 256, seeded noise smoothed by a box filter so they look like
-- photographs to nobody but cost the same) are written to $TMPDIR/dlua-bench-images.safetensors
-- for tests/bench/image_transforms_torch.py, the torchvision DataLoader doing the same on the
-- same tensors. Each window is two passes over the images per worker count, interleaved so
-- machine noise hits both; prints the median and range of images/s, the cores the process
-- got (CPU time / wall time: below the worker count on a machine busy with other jobs) and
-- the CPU milliseconds per image (all threads), which such jobs disturb less.
local dl = require "dlua"
local data, T = dl.data, dl.data.transforms

local windows = tonumber(arg[1] or "5")
local n = tonumber(arg[2] or "256")
local path = (os.getenv("TMPDIR") or "/tmp") .. "/dlua-bench-images.safetensors"

dl.seed(1)
local images = (dl.rand(n, 3, 350, 400) * 256):byte()
assert(dl.checkpoint.save(path, {image = images}))

local ds = data.tensors{image = images, label = dl.arange(1, n + 1):int()}
local IMAGENET = {mean = {0.485, 0.456, 0.406}, std = {0.229, 0.224, 0.225}}
local base = ds:shuffle{seed = 1}:map(T.random_resized_crop{size = 224}, T.flip{}, T.scale(1 / 255),
  T.normalize(IMAGENET)):batch(32):prefetch(4)

local function cpu_seconds()
  local f = io.open("/proc/self/stat")
  if not f then return 0 end
  local st = f:read("a")
  f:close()
  local rest = st:sub(st:find(")", 1, true) + 2)
  local fields = {}
  for x in rest:gmatch("%S+") do fields[#fields + 1] = x end
  return (tonumber(fields[12]) + tonumber(fields[13])) / 100
end

local function median(t)
  local s = {table.unpack(t)}
  table.sort(s)
  return s[(#s + 1) // 2], s[1], s[#s]
end

local rates, cores, cpu_ms = {[1] = {}, [2] = {}}, {[1] = {}, [2] = {}}, {[1] = {}, [2] = {}}
for w = 1, windows + 1 do
  for _, k in ipairs{1, 2} do
    local p = base:workers(k)
    local c0, t0 = cpu_seconds(), dl.clock()
    local count = 0
    for _ = 1, 2 do
      for b in p:iter{warn = false} do count = count + b.image:size(1) end
    end
    local el = dl.clock() - t0
    if w > 1 then
      rates[k][#rates[k] + 1] = count / el
      cores[k][#cores[k] + 1] = (cpu_seconds() - c0) / el
      cpu_ms[k][#cpu_ms[k] + 1] = (cpu_seconds() - c0) / count * 1000
    end
  end
end
for _, k in ipairs{1, 2} do
  local m, lo, hi = median(rates[k])
  print(string.format("dlua workers %d: %7.0f images/s  [%.0f, %.0f]  cores used %.2f  CPU %.3f ms per image", k, m,
    lo, hi, (median(cores[k])), (median(cpu_ms[k]))))
end
