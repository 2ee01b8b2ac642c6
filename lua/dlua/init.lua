--- dlua: a training engine for deep-learning experiments.
-- `local dl = require "dlua"` gives the tensor library (C core) plus the Lua
-- layers built on it. Tensor methods live on the tensor metatable, so
-- `t:sum(2)` and `dl.sum(t, 2)` are the same call.
--
-- The library is in layers, each requiring only those below it (DESIGN.md
-- section 2; tests/lua/require_graph_spec.lua checks it):
--   cli/                      runs what a script returns; report and diagnosis after a study
--   report/                   report, analysis, diagnose, svg
--   study/                    study, probe, ranks (trials over MPI ranks)
--   train/                    train, experiment, metrics, checkpoint, track, flags, ...
--   nn/ data/ optim/ search/ dist/
--   util/                     option checking, small helpers, json, fs, memory
--   dlua.core                 the C engine
-- This file, at the very top, gathers them into `dl`.
local core = require "dlua.core"
local util = require "dlua.util"
local memory = require "dlua.util.memory"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local autograd = require "dlua.nn.autograd"
local nn = require "dlua.nn"
local onnx = require "dlua.nn.onnx"
local optim = require "dlua.optim"
local data = require "dlua.data"
local search = require "dlua.search"
local dist = require "dlua.dist"
local checkpoint = require "dlua.train.checkpoint"
local metrics = require "dlua.train.metrics"
local train = require "dlua.train"
local experiment = require "dlua.train.experiment"
local track = require "dlua.train.track"
local data_parallel = require "dlua.train.data_parallel"
local study = require "dlua.study"
local probe = require "dlua.study.probe"
local ranks = require "dlua.study.ranks"
local report = require "dlua.report"
local diagnose = require "dlua.report.diagnose"

local M = {}

-- tensor creation and functions (all of core's, without the private ones)
for k, v in pairs(core) do
  if type(k) == "string" and k:sub(1, 1) ~= "_" then M[k] = v end
end

M.version = util.VERSION

--- Is `x` a tensor?
-- @usage dl.is_tensor(dl.zeros(2)) --> true
M.is_tensor = util.is_tensor

-- runs fn(...) with recording set to `on`, restoring the previous state even if fn raises
local function with_grad(on, fn, ...)
  local prev = core.set_grad_enabled(on)
  local res = table.pack(pcall(fn, ...))
  core.set_grad_enabled(prev)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

--- Runs `fn(...)` with autograd recording off and returns its results.
-- Recording is restored even if fn raises.
-- @usage local y = dl.no_grad(function() return w * 2 end)
function M.no_grad(fn, ...) return with_grad(false, fn, ...) end

--- Runs `fn(...)` with recording on (inside a no_grad block).
function M.enable_grad(fn, ...) return with_grad(true, fn, ...) end

M.memory = memory
M.autograd = autograd
M.nn = nn
M.onnx = onnx
M.optim = optim
M.data = data
M.trace = data.trace
M.checkpoint = checkpoint
M.json = json
M.metrics = metrics
M.train = util.strict("dl.train", train.train, nil, {"table"})
M.experiment = experiment.experiment
M.evaluate = util.strict("dl.evaluate", experiment.evaluate, nil, {"table"})
M.load_experiment = util.strict("dl.load_experiment", experiment.load, nil, {"string"})
M.here = experiment.here              -- checks its own arity: it reads its caller's frame
M.fs = fs
M.track = track
M.util = util
-- dl.dist: the collectives (dlua.dist), the data-parallel pieces of dl.train
-- (dlua.train.data_parallel) and the study trials over ranks (dlua.study.ranks)
-- as one table; a new table, so no lower module is changed by it
M.dist = {}
local DIST_ARGS = {
  data_parallel = {"table"}, run_study = {"table", "table", "string"},
  serve_trials = {"callable"}, shard_pipeline = {"table|function", "integer", "integer"}, trial_pool = {"callable"},
}
for _, part in ipairs({dist, data_parallel, ranks}) do
  for k, v in pairs(part) do
    M.dist[k] = type(v) == "function" and util.strict("dist." .. k, v, nil, DIST_ARGS[k] or (util.declared(v) or {}).types) or v
  end
end
M.search = search
M.study = study.study
M.study_results = util.strict("dl.study_results", study.results, nil, {"string", "table?"})
M.report = util.strict("dl.report", report.report, nil, {"string|table", "table?"})
M.diagnose = util.strict("dl.diagnose", diagnose.diagnose, nil, {"string|table", "table?"})
M.batch_size_sweep = util.strict("dl.batch_size_sweep", probe.batch_size_sweep, nil, {"table"})

-- The top-level functions refuse extra arguments too (util.strict; its tail call
-- keeps their error(msg, 2) at the user's line), except dl.experiment and dl.study,
-- which read their caller's frame (istailcall, study.site) that a wrapper would
-- replace; dl.no_grad and dl.enable_grad pass any arguments on to fn.
-- tests/lua/strict_lua_spec.lua walks every function reachable from dl.
return M
