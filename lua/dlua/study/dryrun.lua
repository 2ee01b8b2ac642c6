--- dlua.study.dryrun: a study checks itself before it spends. The first planned
-- trial's command line is run once more at a toy budget, in a dlua process of its
-- own (a world of one, like a trial): the experiment is built with that trial's
-- hyperparameters, trains one step, and evaluates the first few examples of each
-- eval set. The metric names its run directory then holds are the ones every
-- trial reports, so an objective the experiment does not produce is an error
-- naming the study file and line, and the metrics there are, before any trial
-- trains. A dry run that fails is an error naming the failure (its file:line)
-- before any trial is claimed: every trial would fail the same way. One that
-- diverges proves nothing about the names (a trial's hyperparameters can diverge):
-- a warning, and the study goes on.
local lfs = require "lfs"
local core = require "dlua.core"
local util = require "dlua.util"
local proc = require "dlua.util.proc"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local train = require "dlua.train"
local experiment = require "dlua.train.experiment"
local flags = require "dlua.train.flags"
local plan = require "dlua.study.plan"
local results = require "dlua.study.results"
local spec = require "dlua.study.spec"

local M = {}

--- Examples of each eval set the dry run evaluates (one batch of this size).
M.EXAMPLES = 16

-- set reduced to its first n examples: datasets and pipelines by :take, in-memory
-- {field = tensor} tables by narrowing; anything else as it is
local function first_examples(set, n)
  if type(set) ~= "table" then return set end
  if type(set.take) == "function" then return set:take(n) end
  if getmetatable(set) ~= nil then return set end
  local out = {}
  for k, v in pairs(set) do
    out[k] = (util.is_tensor(v) and v:dim() > 0 and v:size(1) > n) and v:narrow(1, 1, n) or v
  end
  return out
end

--- child(job_path): the dry run itself, in the child process (dlua -e). The job
-- file holds {args (a trial's command line after the executable), out (the run
-- directory), result (where {status, message, names} is written), threads}.
function M.child(job_path)
  local job = json.decode(assert(fs.read(job_path)))
  core.threads(job.threads or 1)
  local exp = experiment.load(job.args[1])
  local o = flags.parse({table.unpack(job.args, 2)}, exp.hparams)
  if o.seed then o.set.seed = o.seed end
  local cfg = exp:config(exp:resolve(o.set))
  cfg.steps, cfg.dir, cfg.quiet, cfg.tracking, cfg.resume, cfg.command = 1, job.out, true, false, nil, nil
  if type(cfg.eval) == "table" then
    local ev = util.copy(cfg.eval)
    local sets = {}
    for name, set in pairs(ev.sets or {}) do sets[name] = first_examples(set, M.EXAMPLES) end
    ev.sets, ev.batch_size, ev.every, ev.sample, ev.predictions = sets, M.EXAMPLES, nil, nil, nil
    cfg.eval = ev
  end
  local res = train.train(cfg)
  fs.write_atomic(job.result, json.encode({status = res.status, message = res.message,
    names = json.array(results.metric_names(job.out))}) .. "\n")
end

-- the first non-blank line of text (an error's message comes before its traceback), without "dlua: "
local function first_line(text)
  for l in (text or ""):gmatch("[^\n]+") do
    if l:match("%S") then return (l:gsub("^dlua: ", "")) end
  end
end

--- run(study, exe [, threads]) -> {status, message, names} of the dry run of the
-- study's first planned trial (status "error" when the process wrote no result;
-- message is then the first line of its output). Leaves no files behind.
function M.run(study, exe, threads)
  local t = plan.plan(study, 1)[1]
  local hp = plan.trial_hparams(study, t)
  local tmp = os.tmpname()
  os.remove(tmp)
  local dir = tmp .. "-dlua-dryrun"
  fs.mkdir_p(dir)
  local job = {args = json.array(plan.trial_args(study, hp)), out = dir .. "/run", result = dir .. "/result.json",
               threads = threads or 1}
  fs.write_atomic(dir .. "/job.json", json.encode(job) .. "\n")
  local code = string.format("require(%q).child(%q)", "dlua.study.dryrun", dir .. "/job.json")
  proc.spawn({exe, "-e", code}, {stdout = dir .. "/log", stderr = "stdout"}):wait()
  local res = json.decode(fs.read(job.result) or "")
  if type(res) ~= "table" then
    res = {status = "error", message = first_line(fs.read(dir .. "/log")) or "no output", names = {}}
  end
  fs.rm_rf(dir)
  return res
end

--- nearest_metric(metric, names) -> the name of names metric most likely
-- meant: util.nearest's, else the one sharing the longest start with metric
-- beyond its set ("valid/acc" -> "valid/accuracy"), or nil.
function M.nearest_metric(metric, names)
  local near = util.nearest(metric, names)
  if near then return near end
  local set_len = #(metric:match("^.*/") or "")
  local best, best_len = nil, set_len
  for _, n in ipairs(names) do
    local k = 0
    while k < #n and k < #metric and n:byte(k + 1) == metric:byte(k + 1) do k = k + 1 end
    if k > best_len then best, best_len = n, k end
  end
  return best
end

-- a hint for a dry run that could not open a relative path: where relative paths start
local function path_hint(msg)
  local p = tostring(msg):match("cannot open '([^'/][^']*)'")
  if not p then return "" end
  return string.format("; '%s' is relative to the directory the study runs in (%s): write dl.here(%q) for a " ..
    "file next to the experiment (docs/api/train.md, Paths)", p, lfs.currentdir(), p)
end

--- check(study, exe [, threads]) -> the dry run's result: errors when the dry run
-- failed (naming the failure, which leads with its file:line, so no trial starts on a
-- broken experiment; --no-check / check = false skips the dry run) or when one of the
-- study's objectives is not among the metrics it reported (the first such, in the
-- order the study lists them; naming the study file and line, the metrics there are
-- and the nearest); returns it with .warning set when the dry run diverged (a
-- trial's hyperparameters can do that; then nothing was checked).
function M.check(study, exe, threads)
  local res = M.run(study, exe, threads)
  local objs = study.objectives or {study.objective}
  if res.status == "failed" or res.status == "error" then
    local msg = string.format("study %s: the one-step dry run of %s failed, so no trial was started: %s%s " ..
      "(fix the experiment and run the study again, or pass --no-check to skip the dry run)", study.name,
      study.experiment, tostring(res.message):gsub("^dlua: ", ""), path_hint(res.message))
    local loc = spec.where(study, {key = "experiment"}) or study.script
    error(loc and (loc .. ": " .. msg) or msg, 0)
  end
  if res.status ~= "done" then
    local names = {}
    for i, o in ipairs(objs) do names[i] = "'" .. o.metric .. "'" end
    res.warning = string.format("study %s: the one-step dry run of %s %s (%s); the objective %s %s not checked " ..
      "before the trials", study.name, study.experiment, res.status, tostring(res.message),
      table.concat(names, ", "), #names > 1 and "are" or "is")
    return res
  end
  local have = {}
  for _, n in ipairs(res.names) do have[n] = true end
  for _, o in ipairs(objs) do
    local metric = o.metric
    if not have[metric] then
      local near = M.nearest_metric(metric, res.names)
      local msg = string.format("dl.study: objective '%s' is not a metric of %s: a one-step dry run reported %s%s",
        metric, study.experiment, #res.names > 0 and table.concat(res.names, ", ") or "no metrics",
        near and ("; did you mean '" .. near .. "'?") or "")
      local loc = spec.where(study, {value = metric}) or study.script
      error(loc and (loc .. ": " .. msg) or msg, 0)
    end
  end
  return res
end

return M
