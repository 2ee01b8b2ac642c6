-- Synthetic run and study directories with known numbers, for report_spec and
-- diagnose_spec (and tests/browser): the files dl.train and dl.study write
-- (hparams.json, metrics.jsonl, result.json, study.json, journal.jsonl), with
-- curves given as functions, so no training runs. Loaded with dofile.
local dl = require "dlua"
local json, fs = dl.json, dl.fs

local F = {}

local TMP = os.getenv("TMPDIR") or "/tmp"

function F.tmpdir(tag)
  local d = string.format("%s/dlua-report-%s-%d-%d", TMP, tag, math.floor(dl.clock() * 1e6) % 1000000007,
    math.random(1, 1e9))
  fs.rm_rf(d)
  fs.mkdir_p(d)
  return d
end

function F.write(path, text)
  fs.mkdir_p(fs.dirname(path))
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

--- A run directory: opts = {steps, eval_every (20), log_every (10), hp, status ("done"),
-- message, train = fn(step) -> loss, eval = fn(step) -> {["valid/accuracy"] = ...},
-- grad_norm = fn(step), train_extra = fn(step) -> more train-line fields}. Evals at every
-- eval_every steps and the last step; no result.json when status = false (a run still writing).
function F.run(dir, opts)
  local steps, every, log_every = opts.steps or 100, opts.eval_every or 20, opts.log_every or 10
  local hp = {}
  for k, v in pairs(opts.hp or {}) do hp[k] = v end
  hp.steps = hp.steps or steps
  fs.mkdir_p(dir .. "/checkpoints")
  F.write(dir .. "/hparams.json", json.encode(hp) .. "\n")
  local lines = {}
  local last = opts.stop_at or steps
  for s = 1, last do
    if s % log_every == 0 or s == last then
      lines[#lines + 1] = json.encode({step = s, split = "train", loss = opts.train and opts.train(s) or 1 / s,
        lr = 0.1, grad_norm = opts.grad_norm and opts.grad_norm(s) or 1.0, examples_per_s = 1000.0, elapsed = s * 0.01})
      if opts.train_extra then
        local e = json.decode(lines[#lines])
        for k, v in pairs(opts.train_extra(s)) do e[k] = v end
        lines[#lines] = json.encode(e)
      end
    end
    if opts.eval and (s % every == 0 or s == last) then
      local e = {step = s, split = "eval", elapsed = s * 0.01}
      for k, v in pairs(opts.eval(s)) do e[k] = v end
      lines[#lines + 1] = json.encode(e)
    end
  end
  F.write(dir .. "/metrics.jsonl", table.concat(lines, "\n") .. "\n")
  if opts.status ~= false then
    F.write(dir .. "/result.json", json.encode({status = opts.status or "done", message = opts.message, steps = last}) .. "\n")
  end
  return dir
end

-- the experiment the synthetic studies name (never trained: only its hparams are read)
F.EXPERIMENT = [[
local dl = require "dlua"
return dl.experiment{
  name = "synthetic", hparams = {lr = 0.01, momentum = 0.9, weight_decay = 1e-4, optimizer = "sgd", width = 16,
                                steps = 100},
  build = function(hp) error("the synthetic experiment is not trained") end}
]]

--- A study directory written as dl.study would leave it. opts:
--   name, scientific = {optimizer = {"sgd", "adam"}} (default: none), nuisance = space table,
--   trials = per group, steps = 100, value = fn(hp, j) -> final objective or nil (infeasible),
--   curve = fn(hp, step, final) -> {eval metrics} (default: rises to final), train = fn(hp, step) -> loss,
--   seeds = {[group index] = {values...}} (seed re-runs of each group's best),
--   prune = fn(hp, j) -> rung step or nil (the trial stops there with status "pruned", as a scheduler
--   that stops unpromising trials would leave it), eval_every = steps between evals
--   (>= steps: one eval per trial, at its last step)
-- Returns the study directory and the study object.
function F.study(root, opts)
  F.write(root .. "/exp.lua", F.EXPERIMENT)
  local S = dl.search
  local spec = {name = opts.name or "synthetic-study", goal = opts.goal or "a synthetic study with known numbers",
    experiment = root .. "/exp.lua", nuisance = opts.nuisance or {lr = S.log_uniform(1e-4, 1e-1)},
    fixed = opts.fixed or {}, trials = opts.trials or 8, algorithm = opts.algorithm or "quasirandom", seed = opts.seed or 3,
    objective = opts.objective or {metric = "valid/accuracy", mode = "max"}}
  if opts.scientific then spec.scientific = opts.scientific end
  local study = dl.study(spec)
  local dir = root .. "/runs/" .. spec.name
  study:prepare(dir)
  local steps = opts.steps or 100
  local events = {}
  local function curve(hp, final)
    return opts.curve and function(s) return opts.curve(hp, s, final) end or function(s)
      local r = (1 - math.exp(-s / 15)) / (1 - math.exp(-steps / 15))      -- reaches final at the last step
      return {["valid/accuracy"] = final * r, ["valid/loss"] = 2.3 * (1 - r) + (1 - final)}
    end
  end
  local function add(t, hp, kind, base)
    local final = opts.value(hp, t.j)
    local rung = final and kind == "search" and opts.prune and opts.prune(hp, t.j) or nil
    local status = rung and "pruned" or (final and "done" or "diverged")
    local tdir = dir .. "/" .. t.id
    local full = {}
    for k, v in pairs(hp) do full[k] = v end
    full.seed = full.seed or 0
    F.run(tdir, {steps = steps, hp = full, eval_every = opts.eval_every, status = status,
      message = not final and "loss is nan at step 7" or nil, stop_at = rung or (not final and 7) or nil,
      eval = curve(hp, final or 0), train = opts.train and function(s) return opts.train(hp, s, t.j) end or nil})
    local value, step = require("dlua.study").run_metric(tdir, spec.objective.metric, spec.objective.mode, "best")
    events[#events + 1] = json.encode({event = "finish", trial = t.id, owner = "synthetic", status = status,
      value = status == "done" and value or nil, step = status == "done" and step or nil,
      steps = rung or (final and steps or 7), hp = hp, message = not final and "loss is nan at step 7" or nil,
      nuisance = t.nuisance, group = t.group.index, kind = kind, base = base, dir = tdir, time = 0,
      u = kind == "search" and t.u and json.array(t.u) or nil})
  end
  local plan = study:plan()
  for _, t in ipairs(plan) do add(t, study:trial_hparams(t), "search") end
  for gi, vals in pairs(opts.seeds or {}) do
    for k, v in ipairs(vals) do
      local g = study.groups[gi]
      local first
      for _, p in ipairs(plan) do if p.group == g and p.j == 1 then first = p end end
      local t = {id = string.format("%s_t001_seed%d", g.tag, k), group = g, j = 1, nuisance = first.nuisance}
      local hp = study:trial_hparams(t)
      hp.seed = k
      local old = opts.value
      opts.value = function() return v end
      add(t, hp, "seed", g.tag .. "_t001")
      opts.value = old
    end
  end
  F.write(dir .. "/journal.jsonl", table.concat(events, "\n") .. "\n")
  return dir, study
end

local function log10(x) return math.log(x, 10) end

--- The studies the report's specs and its browser test draw (each returns the study directory):
--   mixed: two optimizers, lr and (sgd only, a conditional parameter) momentum searched, the
--     trials with lr > 0.03 diverged (infeasible), one trial (optimizer-adam_t002) whose training
--     loss diverges to 15 while it finishes, trials 6 and 7 of each group pruned at step 40, seed re-runs;
--   single_eval: one eval per trial at its last step (60), no curves to speak of;
--   many: n (200) trials of one group, lr and weight decay, for the timing.
function F.mixed_study(root)
  local S = dl.search
  return F.study(root, {scientific = {optimizer = {"sgd", "adam"}}, trials = 8,
    nuisance = {lr = S.log_uniform(1e-4, 1e-1), momentum = S.uniform(0.8, 0.99):when{optimizer = "sgd"}},
    value = function(hp) if hp.lr > 0.03 then return nil end
      return 0.5 + 0.1 * log10(hp.lr / 1e-4) + (hp.optimizer == "adam" and 0.03 or 0) end,
    train = function(hp, s, j)
      if hp.optimizer == "adam" and j == 2 then return 2.3 + 12.7 * (s / 100) ^ 2 end   -- diverges while it trains
      return 0.3 + 2.0 * math.exp(-s * (hp.lr + 0.002) * 3)
    end,
    prune = function(_, j) if j == 6 or j == 7 then return 40 end end,
    seeds = {[1] = {0.8, 0.81, 0.79}}})
end

function F.single_eval_study(root)
  local S = dl.search
  return F.study(root, {name = "single-eval", trials = 10, steps = 60, eval_every = 1000,
    nuisance = {lr = S.log_uniform(1e-4, 1e-1), width = S.choice{8, 16, 32}},
    value = function(hp) return 0.6 + 0.08 * log10(hp.lr / 1e-4) + (hp.width == 32 and 0.02 or 0) end})
end

function F.many_study(root, n)
  local S = dl.search
  return F.study(root, {name = "many", trials = n or 200, steps = 100,
    nuisance = {lr = S.log_uniform(1e-4, 1e-1), weight_decay = S.log_uniform(1e-6, 1e-2)},
    value = function(hp) if hp.lr > 0.08 then return nil end return 0.5 + 0.1 * log10(hp.lr / 1e-4) -
      0.02 * math.abs(log10(hp.weight_decay) + 4) end,
    train = function(hp, s) return 0.3 + 2.0 * math.exp(-s * hp.lr * 3) + 0.01 * math.sin(s * hp.weight_decay * 1e4) end})
end

return F
