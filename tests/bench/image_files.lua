-- Image-file input throughput (issue 32, item 6): files decoded and augmented by the
-- pipeline's workers, against tests/bench/image_files_torch.py (torchvision's ImageFolder
-- and DataLoader) on the same files and transforms:
--   jpeg: 400x350 JPEG -> random_resized_crop 224 -> flip -> scale(1/255) -> normalize
--   png:  32x32 PNG    -> random crop 32 (padding 4) -> flip -> scale(1/255) -> normalize
-- batch 64, prefetch 4, at 1 and 2 workers; the consumer only takes the batches.
--
--   dlua tests/bench/image_files.lua DIR [windows]     (DIR from image_files_make.py)
--
-- Each window is one pass per worker count, interleaved, after one warm-up pass; prints the
-- median and range of images/s per set and worker count.
local dl = require "dlua"
local data, T = dl.data, dl.data.transforms

local dir = assert(arg[1], "usage: dlua tests/bench/image_files.lua DIR [windows]")
local windows = tonumber(arg[2] or "5")
local MEAN = {mean = {0.485, 0.456, 0.406}, std = {0.229, 0.224, 0.225}}

local sets = {
  jpeg = data.images{dir = dir .. "/jpeg"}:shuffle{seed = 1}:map(T.random_resized_crop{size = 224}, T.flip{},
    T.scale(1 / 255), T.normalize(MEAN)):batch(64):prefetch(4),
  png = data.images{dir = dir .. "/png"}:shuffle{seed = 1}:map(T.random_crop(32, {padding = 4}), T.flip{},
    T.scale(1 / 255), T.normalize(MEAN)):batch(64):prefetch(4),
}

local function median(t)
  local s = {table.unpack(t)}
  table.sort(s)
  return s[(#s + 1) // 2], s[1], s[#s]
end

for _, name in ipairs({"jpeg", "png"}) do
  local rates = {[1] = {}, [2] = {}}
  for w = 1, windows + 1 do
    for _, k in ipairs({1, 2}) do
      local p = sets[name]:workers(k)
      local t0, count = dl.clock(), 0
      for b in p:iter{warn = false} do count = count + b.image:size(1) end
      if w > 1 then rates[k][#rates[k] + 1] = count / (dl.clock() - t0) end
    end
  end
  for _, k in ipairs({1, 2}) do
    local m, lo, hi = median(rates[k])
    print(string.format("dlua %s workers=%d images/s median %.0f (%.0f-%.0f)", name, k, m, lo, hi))
  end
end
