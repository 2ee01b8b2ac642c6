--- dl.data: datasets. Today a minimal in-memory Fashion-MNIST loader; the
-- threaded pipeline (split, shuffle, map, batch, prefetch, ...) is issue 5.
local core = require "dlua.core"

local M = {}

local DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"

--- Loads Fashion-MNIST into memory: returns {train = {x =, y =}, test = {x =, y =}}
-- with x float32 [N, 1, 28, 28] scaled to [0, 1] and y int64 1-based labels
-- (the IDX files store 0-based labels). The directory is opts.dir, else
-- $DLUA_FASHION_MNIST, else Debian's dataset-fashion-mnist location.
-- @usage local fm = dl.data.fashion_mnist_tensors(); print(fm.train.x:shape()[1]) --> 60000
function M.fashion_mnist_tensors(opts)
  opts = opts or {}
  local dir = opts.dir or os.getenv("DLUA_FASHION_MNIST") or DEFAULT_DIR
  local function part(images, labels)
    local ok, x = pcall(core.read_idx, dir .. "/" .. images)
    if not ok then
      error(x .. " (install the data with: apt-get install dataset-fashion-mnist," ..
        " or set DLUA_FASHION_MNIST to its directory)", 3)
    end
    local y = core.read_idx(dir .. "/" .. labels)
    if y:size(1) ~= x:size(1) then
      error(string.format("fashion_mnist: %s has %d images but %s has %d labels", images, x:size(1),
        labels, y:size(1)), 3)
    end
    return {x = x:float():scale(1 / 255):reshape(x:size(1), 1, x:size(2), x:size(3)), y = y:long():scale(1, 1)}
  end
  return {
    train = part("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    test = part("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
  }
end

return M
