--- dl.data: datasets and the threaded input pipeline.
--
-- A dataset has a length, named fields and random access (`#ds`,
-- `ds:get(i)`). Chaining methods on it builds a pipeline description
-- (`ds:shuffle{seed = 1}:map(t):batch(128):workers(2)`), which runs in C
-- when iterated: worker threads apply the transforms, a bounded queue
-- holds ready batches, and the consumer pulls them in order. Randomness
-- comes from (data seed, epoch, example id), so the batches are the same
-- for any number of workers. See docs/api/data.md.
--
-- The package, by concern: dataset (datasets, subsets, splits, tensors),
-- readers (IDX, Fashion-MNIST, CSV), numpy (.npy, .npz), images (image files: folders, lists),
-- shards (record shards in tar files, and data.pack that writes them),
-- transforms (the C per-example
-- transforms), pipeline (stages and their checks, caches), iterator (a running
-- pipeline, its statistics), worker (Lua map functions for the worker states),
-- trace (dl.trace); check holds their argument checks.
--
-- This package is also loaded into the pipeline's worker Lua states (the
-- engine calls data._worker_load there to rebuild Lua map functions), so it
-- requires nothing but dlua.core and dlua.util.
local util = require "dlua.util"
local dataset = require "dlua.data.dataset"
local readers = require "dlua.data.readers"
local numpy = require "dlua.data.numpy"
local images = require "dlua.data.images"
local shards = require "dlua.data.shards"
local transforms = require "dlua.data.transforms"
local pipeline = require "dlua.data.pipeline"
local iterator = require "dlua.data.iterator"
local worker = require "dlua.data.worker"
local trace = require "dlua.data.trace"

local M = {}

M.Dataset, M.is_dataset, M.tensors = dataset.Dataset, dataset.is_dataset, dataset.tensors
M.idx, M.fashion_mnist, M.csv, M.fashion_mnist_tensors = readers.idx, readers.fashion_mnist, readers.csv,
  readers.fashion_mnist_tensors
M.npy, M.npz, M.read_npy, M.read_npz = numpy.npy, numpy.npz, numpy.read_npy, numpy.read_npz
M.images = images.images
M.shards, M.pack = shards.shards, shards.pack
M.transforms = transforms.transforms
M.Pipeline, M.is_pipeline = pipeline.Pipeline, pipeline.is_pipeline
M.Iterator = iterator.Iterator
M.trace = trace
M._worker_load = worker.load

-- data.input_bound_threshold (the wait fraction above which an iterator warns
-- that training is input-bound, 0.10) and data.input_bound_min_batches (the
-- batches it must have handed out before it judges, 20) read and set
-- iterator.input_bound
local INPUT_BOUND = {input_bound_threshold = "threshold", input_bound_min_batches = "min_batches"}
setmetatable(M, {
  __index = function(_, k)
    local f = INPUT_BOUND[k]
    if f then return iterator.input_bound[f] end
  end,
  __newindex = function(t, k, v)
    local f = INPUT_BOUND[k]
    if f then iterator.input_bound[f] = v else rawset(t, k, v) end
  end,
})


-- every exported function refuses extra arguments (util.strict)
util.strict_table("data.", M, false, {
  _worker_load = {"table"}, csv = {"table"}, fashion_mnist = {"table?"}, fashion_mnist_tensors = {"table?"},
  idx = {"table"}, images = {"table"}, is_dataset = {"any?"}, is_pipeline = {"any?"}, npy = {"table"}, npz = {"table"},
  pack = {"table"}, read_npy = {"string", "table?"}, read_npz = {"string", "table?"}, shards = {"table"},
  tensors = {"table"},
})

return M
