--- dlua.train.experiment: an experiment file returns dl.experiment{name, hparams, build};
-- running the file with dlua trains it (dlua.cli), and recipes and studies name
-- the same file to train it with other hyperparameters.
--
--   return dl.experiment{
--     name = "fashion-mnist-cnn", description = "...",
--     hparams = {lr = 0.05, batch_size = 256, steps = 3000},
--     build = function(hp) return {model = ..., optimizer = ..., data = ..., steps = hp.steps} end,
--   }
--
-- The runner adds `seed` (default 0), `init_seed` (= seed) and `data_seed`
-- (= seed + 1000) to hp unless the experiment sets them; the model is built
-- right after dl.seed(init_seed), so the same init seed gives bit-identical
-- parameters whatever the data seed. Under mpirun (world > 1) hp also gets
-- `rank` and `world`, and data_seed becomes data_seed + rank (the init seed is
-- the same on every rank, the data seed differs; docs/distributed.md).
local core = require "dlua.core"
local util = require "dlua.util"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local dist = require "dlua.dist"
local nn = require "dlua.nn"
local train = require "dlua.train"
local checkpoint = require "dlua.train.checkpoint"
local metrics = require "dlua.train.metrics"

local M = {}

local Experiment = {}
Experiment.__index = Experiment

local copy = util.copy

-- An error in the experiment's spec, at the caller's file and line. The usual
-- `return dl.experiment{...}` is a tail call, which leaves no caller frame to point
-- at: then the message names the script being run and the `return`.
local function spec_error(msg)
  if debug.getinfo(2, "t").istailcall then     -- level 2: dl.experiment itself
    local script = type(arg) == "table" and arg[0] or "the experiment file"
    error(string.format("%s: %s (in its `return dl.experiment{...}`)", script, msg), 0)
  end
  error(msg, 3)
end

--- dl.experiment{name =, hparams = {...}, build = function(hp) ... end [, description =]}
function M.experiment(spec)
  if type(spec) ~= "table" then spec_error("dl.experiment: expected a table, got " .. type(spec)) end
  local bad = util.option_problem("dl.experiment", spec, {"name", "hparams", "build", "description"})
  if bad then spec_error(bad) end
  if type(spec.name) ~= "string" or spec.name == "" then spec_error("dl.experiment: name must be a non-empty string") end
  if type(spec.build) ~= "function" then spec_error("dl.experiment: build must be a function(hp) returning a dl.train config") end
  if spec.hparams ~= nil and type(spec.hparams) ~= "table" then spec_error("dl.experiment: hparams must be a table") end
  for k, v in pairs(spec.hparams or {}) do
    local t = type(v)
    if type(k) ~= "string" or (t ~= "number" and t ~= "string" and t ~= "boolean") then
      spec_error(string.format("dl.experiment: hparams must be a flat table of numbers, strings and booleans " ..
        "(%s is a %s)", tostring(k), t))
    end
  end
  return setmetatable({_dlua_kind = "experiment", name = spec.name, hparams = copy(spec.hparams),
                       build = spec.build, description = spec.description}, Experiment)
end

function M.is_experiment(x) return getmetatable(x) == Experiment end

--- Loads an experiment file (its main chunk returns dl.experiment{...}).
function M.load(path)
  if M.is_experiment(path) then return path end
  local chunk, err = loadfile(path)
  if not chunk then error("cannot load experiment " .. tostring(path) .. ": " .. err, 2) end
  local ok, exp = pcall(chunk)
  if not ok then error(exp, 0) end
  if not M.is_experiment(exp) then
    error(string.format("%s does not return a dl.experiment{...} (got %s)", path, type(exp)), 2)
  end
  exp.path = path
  return exp
end

--- dl.here(path) -> path, relative to the directory of the Lua file whose code calls
-- dl.here (an absolute path as it is): `data.csv{path = dl.here("data/flowers.csv")}`
-- in examples/flowers.lua is examples/data/flowers.csv, whatever the shell's
-- directory. Other relative paths are the current directory's (docs/api/train.md,
-- Paths). Not through util.strict: the calling frame is what it reads.
function M.here(...)
  local n, path = select("#", ...), ...
  if n > 1 then error(string.format("bad argument #2 to 'dl.here' (no more than 1 arguments expected, got %d)", n), 2) end
  util.check_args("dl.here", {"string"}, 1, path)
  if path:sub(1, 1) == "/" then return path end
  if debug.getinfo(1, "t").istailcall then
    error("dl.here: called in a tail call (`return dl.here(...)`), which leaves no frame of the calling file; " ..
      "write `local p = dl.here(...)` and return p", 2)
  end
  local info = debug.getinfo(2, "S")
  if info.what == "C" then
    error("dl.here: called from C (such as pcall(dl.here, ...)), which has no file; call it from Lua code in a file", 2)
  end
  local src = info.source
  if type(src) ~= "string" or src:sub(1, 1) ~= "@" then
    error("dl.here: the calling code is not in a file (it was loaded from a string), so there is no directory to " ..
      "resolve against; give the path itself", 2)
  end
  local dir = fs.dirname(src:sub(2))
  if dir == "." then return path end
  return dir .. "/" .. path                   -- dir "" (a file in /): "/" .. path
end

--- The full hyperparameters: defaults, then overrides, then the derived seeds.
function Experiment:resolve(overrides)
  local hp = copy(self.hparams)
  for k, v in pairs(overrides or {}) do hp[k] = v end
  hp.seed = hp.seed or 0
  hp.init_seed = hp.init_seed or hp.seed
  hp.data_seed = hp.data_seed or hp.seed + 1000
  return hp
end

-- names the runner may leave out of hp (rank and world are set only under mpirun)
local RUNNER_KEYS = {seed = true, init_seed = true, data_seed = true, rank = true, world = true}

-- hp as build(hp) sees it: reading a name that is neither a hyperparameter of the
-- experiment nor one the runner adds is an error at build's line (a typo such as
-- hp.weightdecay would otherwise read nil and train without weight decay, silently).
-- Writes go through to hp; pairs and # see hp.
local function strict_hp(hp, name)
  return setmetatable({}, {
    __index = function(_, k)
      local v = hp[k]
      if v ~= nil or RUNNER_KEYS[k] then return v end
      local names = util.sorted_keys(hp)
      local near = type(k) == "string" and util.nearest(k, names)
      error(string.format("experiment %s: hp.%s is not a hyperparameter of this experiment%s " ..
        "(its hyperparameters: %s; declare it in dl.experiment{hparams = ...} to give it a default)", name,
        tostring(k), near and (" (did you mean " .. near .. "?)") or "", table.concat(names, ", ")), 2)
    end,
    __newindex = function(_, k, v) hp[k] = v end,
    __pairs = function() return next, hp, nil end,
    __len = function() return #hp end,
  })
end

--- The dl.train config for hp (resolved), built right after seeding the init stream.
function Experiment:config(hp)
  if dist.world() > 1 and hp.rank == nil then
    hp.rank, hp.world = dist.rank(), dist.world()
    hp.data_seed = hp.data_seed + hp.rank
  end
  core.seed(hp.init_seed)
  local cfg = self.build(strict_hp(hp, self.name))
  -- a mistake in the config is the build function's: its file and line lead the message
  local info = debug.getinfo(self.build, "S")
  local where = info.what ~= "C" and (info.short_src .. ":" .. info.linedefined .. ": ") or ""
  if type(cfg) ~= "table" then
    error(string.format("%sexperiment %s: build(hp) must return a dl.train config table, got %s", where, self.name,
      type(cfg)), 0)
  end
  cfg.hparams = cfg.hparams or hp
  cfg.name = cfg.name or self.name
  cfg.description = cfg.description or self.description
  if cfg.steps == nil and hp.steps then cfg.steps = hp.steps end
  local bad = train.config_problem(cfg)
  if bad then error(string.format("%s%s (in the config build(hp) returns)", where, bad), 0) end
  return cfg
end

--- Trains with hp overrides; opts: dir, resume, override (with resume: hyperparameters may differ
-- from the run's record, which then keeps their history: dlua.train.record), quiet, steps, tracking, command,
-- on_eval (dl.train's hook: a study trial's pruning), objective ({metric =, mode =}: what ranks
-- the checkpoints, a study's objective).
function Experiment:run(overrides, opts)
  opts = util.check_options("experiment:run", opts, {dir = "string", resume = "boolean", override = "boolean",
    quiet = "boolean", steps = "integer", tracking = "boolean", command = "string", on_eval = "function",
    objective = {metric = "string", mode = "string"}}, 2)
  local hp = self:resolve(overrides)
  if opts.steps then hp.steps = opts.steps end
  local cfg = self:config(hp)
  if opts.steps then cfg.steps = opts.steps end
  for _, k in ipairs({"dir", "resume", "override", "quiet", "tracking", "command", "on_eval", "objective"}) do
    if opts[k] ~= nil then cfg[k] = opts[k] end
  end
  cfg.config_path = cfg.config_path or self.path
  return train.train(cfg), hp
end

------------------------------------------------------------ offline evaluation

--- restore(experiment, path, who) -> cfg, meta: the experiment's config (an experiment or
-- its file) built with the hyperparameters the checkpoint at path stores, its model holding
-- the checkpoint's weights, batch-norm averages synced, in eval mode; meta is the
-- checkpoint's metadata. who leads the error of a checkpoint that does not load.
-- Used by dl.evaluate and by `dlua export` (recipes/export.lua).
function M.restore(experiment, path, who)
  local exp = M.load(experiment)
  local tensors, meta = checkpoint.load(path)
  if not tensors then error(who .. ": " .. tostring(meta), 3) end
  local hp = exp:resolve(json.decode(meta.hparams or "{}") or {})
  local cfg = exp:config(hp)
  local msd = {}
  for k, t in pairs(tensors) do
    local name = k:match("^model/(.*)$")
    if name then msd[name] = t end
  end
  cfg.model:load_state_dict(msd)
  nn.sync_batchnorm(cfg.model)
  cfg.model:eval()
  return cfg, meta
end

--- dl.evaluate{experiment = path or experiment, checkpoint = path [, sets = {name = set}]
--  [, batch_size =] [, metrics =]} --> {["set/metric"] = value, ...}, report
-- Rebuilds the model with the hyperparameters stored in the checkpoint, loads
-- its weights and evaluates every set in full (padded, weighted: exact means).
-- When the experiment's periodic eval uses `sample = n`, the report also gives
-- the sample metric and its gap to the full-set metric.
function M.evaluate(o)
  if type(o) ~= "table" or not o.experiment or not o.checkpoint then
    error("dl.evaluate: expected {experiment = ..., checkpoint = path [, sets = {...}]}", 2)
  end
  util.check_options("dl.evaluate", o, {experiment = true, checkpoint = "string", sets = "table", metrics = "table",
    batch_size = "integer"}, 2)
  local cfg, meta = M.restore(o.experiment, o.checkpoint, "dl.evaluate")
  local ev = cfg.eval or {}
  local sets = o.sets or ev.sets or {}
  local fields = {input = "image", target = "label", weight = "weight"}
  for k, v in pairs(cfg.fields or {}) do fields[k] = v end
  local function evaluator(sample)
    return metrics.evaluator{model = cfg.model, loss = cfg.loss, metrics = o.metrics or ev.metrics,
      batch_size = o.batch_size or ev.batch_size, fields = fields, forward = cfg.forward, sample = sample}
  end
  local out, report = {}, {step = tonumber(meta.step), sample = ev.sample, gaps = {}}
  local names = {}
  for name in pairs(sets) do names[#names + 1] = name end
  table.sort(names)
  local prev = core.set_grad_enabled(false)
  local ok, err = pcall(function()
    for _, name in ipairs(names) do
      local full = evaluator(nil):run(name, sets[name])
      for k, v in pairs(full) do out[name .. "/" .. k] = v end
      if ev.sample and ev.sample < #sets[name] then
        local part = evaluator(ev.sample):run(name, sets[name])
        for k, v in pairs(part) do
          if type(v) == "number" then
            report.gaps[name .. "/" .. k] = {sample = v, full = full[k], gap = v - full[k]}
          end
        end
      end
    end
  end)
  core.set_grad_enabled(prev)
  if not ok then error(err, 0) end
  return out, report
end

return M
