--- dlua.train.policy: which checkpoints a run writes, and by which metric it
-- ranks them. dl.train asks ranking(config) once (the metric, mode and who
-- chose them) and the policy after every step (due); the ledger
-- (dlua.train.ledger) keeps and drops what was written.
--
-- Ranking: the study's objective (config.objective, passed to a trial as
-- --objective) when it is an eval metric, else checkpoint.metric, else a
-- default: the validation set's accuracy (mode max) when the loss is a
-- classification loss (nn.CrossEntropy) and accuracy is computed, else its loss
-- (mode min). The validation set is the eval set named valid, validation or val,
-- else the first by name. A ranked run keeps the best checkpoint
-- (checkpoint.keep_best defaults to 1).
--
-- Writing: checkpoint.every = N writes every N steps (and at the last step).
-- Without it the policy is a time budget: at an eval, a checkpoint is written
-- when the time spent writing checkpoints, plus what one more is expected to
-- take (the mean so far), stays under checkpoint.share (0.05) of the run's
-- elapsed time; the first eval writes one (it measures the cost), the last step
-- always, and so does an interrupted run (dl.train). A user's keep_best writes
-- every eval that is a new best. Under mpirun the ranks must agree without a
-- clock, so the default there is every eval. A checkpoint changes nothing the
-- run computes: which ones exist never changes the trained weights.
--
--   local pol = policy.new{share = 0.05, clock = core.clock}
--   if pol:due(step, {last = false, eval = true, new_best = false}) then ... pol:wrote(seconds) end
local core = require "dlua.core"
local util = require "dlua.util"
local nn = require "dlua.nn"

local M = {}

M.SHARE = 0.05      -- the default budget: checkpoints take at most this share of a run's time

local VALID_NAMES = {"valid", "validation", "val"}

-- is module m an instance of nn class cls (through the class chain)?
local function instance_of(m, cls)
  if type(m) ~= "table" then return false end
  local c = getmetatable(m)
  while type(c) == "table" do
    if c == cls then return true end
    c = rawget(c, "super")
  end
  return false
end

local function has_metric(metrics, name)
  if metrics == nil then return name == "loss" or name == "accuracy" end    -- the evaluator's default
  for key, m in pairs(metrics) do if m == name or key == name then return true end end
  return false
end

-- the mode a metric is ranked by when none is given: "min" for a loss (a name
-- ending in "loss"), else "max"; the one inference for the objective and checkpoint.metric
local function default_mode(metric) return metric:match("loss$") and "min" or "max" end

--- ranking(config, eval_names) -> {metric =, mode =, source = "objective" | "config" |
-- "default", why = (a phrase for the output)} or nil (no eval set and no checkpoint.metric: nothing ranks the
-- checkpoints). eval_names: the eval sets' names, sorted.
function M.ranking(config, eval_names)
  local ck = config.checkpoint or {}
  local obj = config.objective
  if obj and obj.metric and not obj.metric:match("^train/") then
    local why = "the objective"
    if ck.metric and ck.metric ~= obj.metric then why = why .. ", not checkpoint.metric " .. ck.metric end
    return {metric = obj.metric, mode = obj.mode or (obj.metric == ck.metric and ck.mode) or default_mode(obj.metric),
      source = "objective", why = why}
  end
  if ck.metric then
    return {metric = ck.metric, mode = ck.mode or default_mode(ck.metric), source = "config", why = "checkpoint.metric"}
  end
  if #eval_names == 0 then return nil end
  local set = eval_names[1]
  for _, v in ipairs(VALID_NAMES) do
    local found = false
    for _, n in ipairs(eval_names) do if n == v then set, found = n, true end end
    if found then break end
  end
  local ev = config.eval or {}
  local why = obj and obj.metric and "the default, not the train metric " .. obj.metric or "the default"
  if instance_of(config.loss, nn.CrossEntropy) and has_metric(ev.metrics, "accuracy") then
    return {metric = set .. "/accuracy", mode = "max", source = "default", why = why}
  end
  if has_metric(ev.metrics, "loss") then return {metric = set .. "/loss", mode = "min", source = "default", why = why} end
  return nil
end

--- config_problem(config) -> nil, or the message for a bad checkpoint or objective
-- option of a dl.train config (dl.train's config_problem asks).
function M.config_problem(c)
  local ck = c.checkpoint or {}
  if ck.keep_latest ~= nil and (math.type(ck.keep_latest) ~= "integer" or ck.keep_latest < 1) then
    return "dl.train: checkpoint.keep_latest must be >= 1 (the resume point is never deleted), got " ..
      tostring(ck.keep_latest)
  end
  if ck.keep_best and not ck.metric then
    return "dl.train: checkpoint.keep_best needs checkpoint.metric (e.g. \"valid/accuracy\")"
  end
  if ck.mode and ck.mode ~= "max" and ck.mode ~= "min" then
    return "dl.train: checkpoint.mode must be \"max\" or \"min\", got " .. tostring(ck.mode)
  end
  if ck.every ~= nil and (math.type(ck.every) ~= "integer" or ck.every < 1) then
    return "dl.train: checkpoint.every must be a positive integer number of steps, got " .. tostring(ck.every)
  end
  if ck.share ~= nil and not (ck.share >= 0 and ck.share <= 1) then
    return "dl.train: checkpoint.share must be in [0, 1] (the share of the run's time checkpoints may take), got " ..
      tostring(ck.share)
  end
  if ck.tolerance ~= nil and not (ck.tolerance >= 0 and ck.tolerance < math.huge) then
    return "dl.train: checkpoint.tolerance must be a finite number >= 0 (the metric's noise: the latest checkpoint " ..
      "within it of the best is selected), got " .. tostring(ck.tolerance)
  end
  if ck.tolerance ~= nil and not (ck.metric or c.objective or (c.eval and c.eval.sets)) then
    return "dl.train: checkpoint.tolerance needs a metric that ranks the checkpoints (checkpoint.metric, or eval.sets)"
  end
  if ck.every ~= nil and ck.share ~= nil then
    return string.format("dl.train: checkpoint.share applies to the time policy only, and checkpoint.every = %s " ..
      "writes every %s steps instead: give one of them", tostring(ck.every), tostring(ck.every))
  end
  if ck.mode and not ck.metric then
    return "dl.train: checkpoint.mode needs checkpoint.metric (the default metric comes with its own mode)"
  end
  local has_sets = c.eval and c.eval.sets and next(c.eval.sets) ~= nil
  if not has_sets then                             -- nothing is evaluated: nothing ranks, nothing is written at evals
    for _, k in ipairs({"metric", "share"}) do
      if ck[k] ~= nil then
        return string.format("dl.train: checkpoint.%s needs eval.sets (%s)", k, k == "metric" and
          "checkpoints are ranked by what the evals report" or "the time policy writes checkpoints at evals")
      end
    end
  end
  local obj = c.objective
  if obj and not obj.metric then return "dl.train: objective needs a metric (e.g. {metric = \"valid/accuracy\"})" end
  if obj and obj.mode and obj.mode ~= "max" and obj.mode ~= "min" then
    return "dl.train: objective.mode must be \"max\" or \"min\", got " .. tostring(obj.mode)
  end
end

-- a class: its metatable, the option types its constructor checks (util.check_options),
-- the constructor; the library's classes open alike by design
local P = {}
P.__index = P

local OPTIONS = {every = "integer", share = "number", best_always = "boolean", clock = "callable"}

--- policy.new{every = N | share = 0.05, best_always = false, clock = core.clock}:
-- every = N writes every N steps; else the time budget share (in [0, 1]).
-- best_always writes every eval that is a new best.
function M.new(o)
  o = util.check_options("policy.new", o, OPTIONS, 2)
  if o.every ~= nil and o.every < 1 then error("policy.new: every must be >= 1, got " .. o.every, 2) end
  local share = o.share or M.SHARE
  if not (share >= 0 and share <= 1) then error("policy.new: share must be in [0, 1], got " .. tostring(share), 2) end
  local clock = o.clock or core.clock
  return setmetatable({every = o.every, share = share, best_always = o.best_always or false, clock = clock,
                       t0 = clock(), spent = 0, n = 0}, P)
end

--- pol:due(step, {last =, eval =, new_best =}) -> whether a checkpoint of step is
-- written now, and why ("last", "every", "best", "budget").
function P:due(step, o)
  if o.last then return true, "last" end
  if self.every then return step % self.every == 0, "every" end
  if not o.eval then return false end
  if o.new_best and self.best_always then return true, "best" end
  local elapsed = self.clock() - self.t0
  local expected = self.n > 0 and self.spent / self.n or 0
  return self.spent + expected < self.share * elapsed, "budget"
end

--- pol:wrote(seconds): a checkpoint was written, taking seconds.
function P:wrote(seconds)
  self.spent, self.n = self.spent + seconds, self.n + 1
end

--- pol:describe() -> "every N steps" or "at evals within 5% of the time"
function P:describe()
  if self.every then return string.format("every %d steps", self.every) end
  return string.format("at evals within %g%% of the time", 100 * self.share)
end

util.strict_table("policy.", M)

return M
