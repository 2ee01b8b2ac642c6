--- dlua: a training engine for deep-learning experiments.
-- `local dl = require "dlua"` gives the tensor library (C core) plus the Lua
-- layers built on it. Tensor methods live on the tensor metatable, so
-- `t:sum(2)` and `dl.sum(t, 2)` are the same call.
local core = require "dlua.core"

local M = {}

-- tensor creation and functions (all of core's, without the private ones)
for k, v in pairs(core) do
  if type(k) == "string" and k:sub(1, 1) ~= "_" then M[k] = v end
end

M.version = "0.1.0"

--- Is `x` a tensor?
-- @usage dl.is_tensor(dl.zeros(2)) --> true
function M.is_tensor(x)
  return getmetatable(x) == core.Tensor
end

--- Runs `fn(...)` with autograd recording off and returns its results.
-- Recording is restored even if fn raises.
-- @usage local y = dl.no_grad(function() return w * 2 end)
function M.no_grad(fn, ...)
  local prev = core.set_grad_enabled(false)
  local res = table.pack(pcall(fn, ...))
  core.set_grad_enabled(prev)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

--- Runs `fn(...)` with recording on (inside a no_grad block).
function M.enable_grad(fn, ...)
  local prev = core.set_grad_enabled(true)
  local res = table.pack(pcall(fn, ...))
  core.set_grad_enabled(prev)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

M.memory = require "dlua.util.memory"
M.autograd = require "dlua.nn.autograd"
M.nn = require "dlua.nn"
M.optim = require "dlua.optim"
M.data = require "dlua.data"
M.trace = M.data.trace
M.checkpoint = require "dlua.train.checkpoint"
M.json = require "dlua.util.json"
M.metrics = require "dlua.train.metrics"
local train = require "dlua.train"
M.train = train.train
local experiment = require "dlua.train.experiment"
M.experiment = experiment.experiment
M.evaluate = experiment.evaluate
M.load_experiment = experiment.load
M.fs = require "dlua.util.fs"
M.track = require "dlua.train.track"
M.dist = require "dlua.dist"
M.search = require "dlua.search"
M.study = require("dlua.study").study
M.study_results = require("dlua.study").results
M.report = require("dlua.report").report
M.diagnose = require("dlua.report.diagnose").diagnose
M.batch_size_sweep = require("dlua.study.probe").batch_size_sweep

return M
