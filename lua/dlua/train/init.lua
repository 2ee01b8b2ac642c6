--- dlua.train: the training loop for a fixed step budget (playbook: "additional
-- guidance for the training pipeline" as default behaviour).
--
-- dl.train(config) runs `steps` optimizer steps, evaluates every `eval.every`
-- steps (never on wall time) and at the end, writes checkpoints at the evals a
-- time budget allows (or every N steps), keeps them by separate retention classes
-- (latest / best / every), records every event in the run directory and returns
-- the retrospectively best kept checkpoint:
--
--   local result = dl.train{model = m, loss = nn.CrossEntropy(), optimizer = opt,
--     data = pipe, steps = 1000, eval = {every = 100, sets = {valid = v}},
--     checkpoint = {keep_best = 2, metric = "valid/accuracy", mode = "max"}, dir = "runs/x"}
--   result.status --> "done" | "diverged" | "failed" | "interrupted" | "stopped" (config.on_eval);
--   result.best.checkpoint --> path
--
-- Files in the run directory (docs/formats.md): hparams.json (and hparams_history.json
-- after a resume with override: dlua.train.record), metrics.jsonl,
-- checkpoints/ckpt-<step>.safetensors, checkpoints/index.json, predictions/.
--
-- The loop is four functions of one job each: open_run (the run directory, the
-- data stream, the ledger, resume), train_step (one optimizer step), eval_and_
-- checkpoint (after a step) and finish (the result, result.json, tracking). The
-- checkpoint ledger is dlua.train.ledger, what a checkpoint holds dlua.train.state,
-- when one is written and which metric ranks them dlua.train.policy.
-- An error inside the loop fails the run (status "failed") with a message that
-- names the step and leads with the user's file:line when there is one
-- (dlua.util.blame).
local core = require "dlua.core"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local blame = require "dlua.util.blame"
local metrics_mod = require "dlua.train.metrics"
local progress_mod = require "dlua.train.progress"
local proc = require "dlua.util.proc"
local optim = require "dlua.optim"
local trace = require("dlua.data").trace
local dist = require "dlua.dist"
local data_parallel = require "dlua.train.data_parallel"
local ledger = require "dlua.train.ledger"
local policy = require "dlua.train.policy"
local config_mod = require "dlua.train.config"
local state = require "dlua.train.state"
local record = require "dlua.train.record"
local track = require "dlua.train.track"
local nn = require "dlua.nn"
local util = require "dlua.util"

local M = {}

local optimizer_problem = config_mod.optimizer_problem
M.optimizer_problem = config_mod.optimizer_problem
M.config_problem = config_mod.config_problem

--------------------------------------------------------------------- helpers

local is_tensor = util.is_tensor

local function default_dir(name)
  return "runs/" .. (name or "run"):gsub("[^%w%-_.]", "_")
end

-- the data source: a pipeline (has :iter) or a function returning the next batch
local function open_stream(data, quiet)
  if type(data) == "function" then
    return {next = data}
  end
  if type(data) == "table" and data.iter then
    local s = {}
    local it
    s.next = function()
      if not it then it = data:iter{epochs = math.huge, warn = not quiet and nil} end
      return it()
    end
    if data.state then s.state = function() return data:state() end end
    if data.set_state then
      s.set_state = function(st)
        if it then it:close(); it = nil end
        data:set_state(st)
      end
    end
    s.wait = data.wait_time and function() return data:wait_time() end or nil
    s.skipped = data.skipped and function() return (data:skipped()) end or nil
    s.close = function() if it then it:close(); it = nil end end
    return s
  end
  error("dl.train: config.data must be a pipeline (with :iter) or a function returning batches, got " ..
    type(data), 4)
end

-- "batch has no field 'image'" with the batch's fields and the `fields` option that names them
local function missing_field(b, fields)
  local have = {}
  for k in pairs(b) do have[#have + 1] = tostring(k) end
  table.sort(have)
  local target = b[fields.target] ~= nil and fields.target or nil
  local input
  for _, k in ipairs(have) do
    if k ~= target and k ~= fields.weight then input = input or k end
  end
  for _, k in ipairs(have) do
    if not target and k ~= input and k ~= fields.weight then target = k end
  end
  return string.format("dl.train: batch has no field '%s' (the batch's fields: %s); name the model's input" ..
    " and the loss's target with fields = {input = %q, target = %q} in the config", fields.input,
    #have > 0 and table.concat(have, ", ") or "none", input or "NAME", target or "NAME")
end

local function batch_fields(b, fields)
  if is_tensor(b) then error("dl.train: a batch must be a table of fields, got a tensor", 0) end
  local x = b[fields.input] or b[1]
  local y = b[fields.target] or b[2]
  local w = b[fields.weight]
  if x == nil then error(missing_field(b, fields), 0) end
  return x, y, w
end

local finite = util.finite

-- where config.loss is defined ("file:line": a function, or a module's forward) and what it is called
local function describe_loss(fn)
  local f, name = fn, "the loss function"
  if type(fn) == "table" then
    local mt = getmetatable(fn)
    name = "the loss " .. (mt and type(mt.__name) == "string" and mt.__name or "config.loss")
    f = type(fn.forward) == "function" and fn.forward or (mt and mt.__call)
  end
  if type(f) == "function" then
    local info = debug.getinfo(util.unwrap(f), "S")   -- where it is written, not its strict wrapper
    if info.what ~= "C" and not blame.is_library(info.source) then
      return name, info.short_src .. ":" .. info.linedefined
    end
  end
  return name, nil
end

-- the loss's value as a number; anything but a tensor of one element is an error
-- naming config.loss, led by where it is defined
local function loss_value(loss, fn)
  if is_tensor(loss) and loss:numel() == 1 then return loss:item() end
  local name, where = describe_loss(fn)
  local got = is_tensor(loss) and string.format("a tensor of shape [%s], not a single value",
    table.concat(loss:shape(), ", ")) or string.format("%s, not a tensor", loss == nil and "nothing" or "a " .. type(loss))
  error(string.format("%sdl.train: %s returned %s", where and where .. ": " or "", name, got), 0)
end

-------------------------------------------------------------------- the run

-- the run: the directory, the data stream, the ledger, the evaluator, resumed
-- from the newest good checkpoint when config.resume (errors at level 3: the
-- caller of dl.train)
local function open_run(config)
  -- under mpirun: data parallel over the ranks; only rank 0 (the lead) writes (docs/distributed.md)
  local dp = dist.world() > 1 and data_parallel.data_parallel(config) or nil
  local lead = not dp or dp.lead
  local model, opt = config.model, config.optimizer
  nn.Module._name_root(model, "model")          -- errors name "model.3 (Linear)"
  nn.Module._name_root(config.loss, "loss")
  local steps = config.steps
  local fields = {input = "image", target = "label", weight = "weight"}
  for k, v in pairs(config.fields or {}) do fields[k] = v end
  local ev = config.eval or {}
  local eval_sets = ev.sets or {}
  local eval_names = {}
  for name in pairs(eval_sets) do eval_names[#eval_names + 1] = name end
  table.sort(eval_names)
  -- what ranks the checkpoints (a study's objective, checkpoint.metric or the default) and when one is written
  local ck = {keep_latest = 1}
  for k, v in pairs(config.checkpoint or {}) do ck[k] = v end
  local ranking = policy.ranking(config, eval_names)
  if ranking then
    ck.metric, ck.mode = ranking.metric, ranking.mode
    if ck.keep_best == nil then ck.keep_best = 1 end
  end
  if dp and ck.share ~= nil then
    error(string.format("dl.train: checkpoint.share is a share of the run's time, which ranks cannot agree on; " ..
      "under mpirun (world %d) checkpoints are written at every eval, or every checkpoint.every steps", dp.world), 0)
  end
  local every = ck.every or (dp and (ev.every or steps)) or nil    -- ranks agree on steps, never on a clock
  local dir = config.dir or default_dir(config.name)
  local log_every = config.log_every or math.max(1, math.min(100, steps // 20))
  local quiet = config.quiet or not lead
  -- a schedule table without steps decays over this run's: a copy is given them, so the
  -- user's object is never changed (reused by a run of another length, it means the same)
  local schedule = config.schedule
  if type(schedule) == "table" and schedule.steps == nil then
    schedule = setmetatable(util.copy(schedule), getmetatable(schedule))
    schedule.steps = steps
  end

  if lead then
    fs.mkdir_p(dir)
    fs.mkdir_p(dir .. "/checkpoints")
    for _, f in ipairs(fs.list(dir .. "/checkpoints")) do    -- temp files of a write killed mid-way
      if f:match("%.tmp[%-.]") then os.remove(dir .. "/checkpoints/" .. f) end
    end
  end
  local run = {
    model = model, optimizer = opt, step = 0, grad_norms = {}, clipped = {}, hparams = config.hparams,
    classes = config.classes,
    ckpt_dir = dir .. "/checkpoints", metrics_at = {}, last_metrics = {},
    cost = {train = 0, eval = 0, checkpoint = 0, input = 0},
    sync_bn = nn.sync_batchnorm and function() nn.sync_batchnorm(model) end or nil, dp = dp,
    config = config, lead = lead, steps = steps, fields = fields, ev = ev, ck = ck, dir = dir, ranking = ranking,
    policy = policy.new{every = every, share = ck.share, best_always = (config.checkpoint or {}).keep_best ~= nil},
    log_every = log_every, quiet = quiet, schedule = schedule, base_lr = opt:lr(), params = model:parameters(),
    loss_fn = config.loss, div = config.divergence or {},
  }
  local stream = open_stream(dp and dp.data or config.data, quiet)
  run.stream = stream
  run.data_state, run.data_set_state = stream.state, stream.set_state
  if config.ema then
    local decay = config.ema.decay or 0.999
    run.ema_decay = decay
    run.ema = {}
    for k, t in pairs(model:state_dict()) do run.ema[k] = t:detach():clone() end
  end
  local function open_ledger()
    local l = ledger.open(run.ckpt_dir, ck)
    return dp and dp:share_ledger(l) or l
  end
  run.ledger = open_ledger()
  local prog = progress_mod.new{total = steps, quiet = quiet, every = log_every, eval_every = ev.every,
    objective = ranking and ranking.metric, checkpoint_every = every}
  run.prog = prog
  if ranking then
    prog:message(string.format("checkpoints by %s (%s, %s)%s, %s", ranking.metric, ranking.mode, ranking.why,
      (ck.tolerance or 0) > 0 and string.format(", the latest within %g of the best", ck.tolerance) or "",
      run.policy:describe()))
  end
  local function warn(msg) prog:message("warning: " .. msg) end
  local _, missed = optimizer_problem(model, opt)
  if #missed > 0 and lead then
    warn(string.format("the optimizer does not update %d trainable parameter%s of the model (%s%s); freeze them " ..
      "(p:requires_grad(false) or module:freeze()) if that is meant", #missed, #missed == 1 and "" or "s",
      table.concat(missed, ", ", 1, math.min(#missed, 5)), #missed > 5 and ", ..." or ""))
  end

  -- resume, or start fresh (never silently over an existing run)
  local metrics_path = dir .. "/metrics.jsonl"
  if config.resume then
    local function find() return ledger.find_resume_point(run.ledger, warn) end
    local path, tensors, meta
    if dp then path, tensors, meta = dp:resume_point(find) else path, tensors, meta = find() end
    if path then
      -- the record is never rewritten: changed hyperparameters need override (dlua.train.record);
      -- under mpirun rank 0 reads and writes it, and every rank stops when it refuses
      local refused
      if lead then run.record, refused = record.on_resume(dir, config.hparams or {}, tonumber(meta.step), config.override) end
      if dp then dp:agree(not refused, refused) end
      if refused then error(refused, 3) end
      state.restore(run, tensors, meta, config.override)    -- override: the new config's learning rate
      run.ledger:truncate(run.step)
      if lead then
        fs.filter_lines(metrics_path, function(line)
          local e = json.decode(line)
          return e and e.step and e.step <= run.step
        end)
      end
      for _, e in ipairs(run.ledger.data.evals) do run.metrics_at[e.step] = e.metrics end
      prog:message(string.format("resuming from %s (step %d)", path, run.step))
      prog:restart(run.step)                    -- the ETA times the steps done since the resume
    else
      if lead then fs.remove_matching(metrics_path) end
      run.ledger:truncate(-1)                   -- nothing of the old run is kept
    end
  else
    local existing = fs.list(run.ckpt_dir)
    for _, f in ipairs(existing) do
      if f:match("^ckpt%-%d+%.safetensors$") then
        error(string.format("dl.train: %s already holds checkpoints; pass resume = true (--resume) to continue " ..
          "that run, or choose another directory (--out)", run.ckpt_dir), 3)
      end
    end
    if lead then os.remove(metrics_path) end
  end
  if lead then record.write(dir, run.record or {{from_step = 1, hparams = config.hparams or {}}}) end
  run.metrics_path = lead and metrics_path or nil
  run.t_start = core.clock()

  run.eval_sets, run.eval_names = eval_sets, eval_names
  run.evaluator = metrics_mod.evaluator{
    model = model, loss = config.loss, metrics = ev.metrics, batch_size = ev.batch_size, sample = ev.sample,
    fields = fields, forward = config.forward, predictions = ev.predictions, dir = dir,
    shard = dp and dp:eval_shard() or nil,
  }
  run.evaluator.on_batch = function(name, i, n)   -- the eval indicator ("eval valid 3/5")
    proc.test_pause("eval", run.step)
    prog:eval_progress(name, i, n)
  end
  run.window = {loss = 0, n = 0, t = core.clock(), ex = 0, time = 0}
  return run
end

-- appends event e to metrics.jsonl (the lead only); a failed append raises, naming the file
local function log_event(run, e)
  e.elapsed = core.clock() - run.t_start
  if run.lead then fs.append_line(run.metrics_path, json.encode(e)) end
end

-- the EMA weights move toward the model's: ema = d * ema + (1 - d) * w (integer buffers copied)
local function update_ema(run)
  local d = run.ema_decay
  core.set_grad_enabled(false)
  for k, t in pairs(run.model:state_dict()) do
    local e = run.ema[k]
    if e:dtype() == "float32" or e:dtype() == "float64" then run.ema[k] = e * d + t * (1 - d)
    else run.ema[k] = t:clone() end
  end
  core.set_grad_enabled(true)
end

-- the train line of the steps since the last one (metrics.jsonl, the progress line);
-- time_per_step is the mean wall time of those steps alone (waiting for the batch,
-- forward, backward, update; not the evals and checkpoints between them), in seconds
local function log_window(run, s)
  local win = run.window
  local el = core.clock() - win.t
  local e = {step = s, split = "train", loss = win.loss / win.n, lr = run.optimizer:lr(), grad_norm = run.last_grad_norm,
             examples_per_s = win.ex / math.max(el, 1e-9), time_per_step = win.time / win.n}
  local skipped = run.stream.skipped and run.stream.skipped() or 0   -- unreadable examples (data.images)
  if skipped > 0 then e["data/skipped"] = skipped end
  log_event(run, e)
  run.prog:train(s, e)
  win.loss, win.n, win.ex, win.t, win.time = 0, 0, 0, core.clock(), 0
end

-- after step s, when a SIGINT or SIGTERM was caught or config.on_eval asked to stop:
-- the steps since the last train line are logged and a checkpoint of step s is
-- written (unless it was just written), so the run resumes exactly here. Returns
-- "interrupted" or "stopped", message (nil when neither came).
local function stop_if_interrupted(run, s)
  local sig = run.catching and proc.interrupted()
  if not sig and not run.stop then return end
  if run.window.n > 0 then log_window(run, s) end
  local latest = run.ledger.data.latest
  if not (latest and latest.step == s) then
    local csp = trace.active() and trace.span("checkpoint")
    state.save(run)
    if csp then csp:close() end
  end
  if run.stop then return "stopped", run.stop end
  run.signal = sig
  return "interrupted", string.format("interrupted by %s at step %d", sig, s)
end

-- one optimizer step s (= run.step + 1); returns "diverged", message when the run must stop
local function train_step(run, s)
  local config, opt, stream, div = run.config, run.optimizer, run.stream, run.div
  proc.test_pause("step", s)
  local t_in = core.clock()
  local batch = stream.next()
  if batch == nil then error("dl.train: the data ran out", 0) end
  local t0 = core.clock()
  run.cost.input = run.cost.input + (t0 - t_in)
  local x, y, w = batch_fields(batch, run.fields)
  if run.schedule then opt:set_lr(run.base_lr * run.schedule(s)) end
  opt:zero_grad()
  local tracing = trace.active()             -- spans for the Chrome trace (--trace FILE)
  local sp = tracing and trace.span("forward")
  local out = config.forward and config.forward(run.model, batch) or run.model(x)
  -- the weights only when there are some: a strict loss module's forward(pred, y) refuses a third argument
  local loss
  if w == nil then loss = run.loss_fn(out, y) else loss = run.loss_fn(out, y, w) end
  local lv = loss_value(loss, run.loss_fn)
  if run.dp then lv = run.dp:mean_loss(lv) end   -- every rank judges divergence on the same value
  if not finite(lv) then return "diverged", string.format("loss is %s at step %d", tostring(lv), s) end
  run.initial_loss = run.initial_loss or lv
  if div.factor and lv > div.factor * run.initial_loss then
    return "diverged", string.format("loss %.4g at step %d exceeds %g x the initial loss %.4g",
      lv, s, div.factor, run.initial_loss)
  end
  if sp then sp:close(); sp = trace.span("backward") end
  loss:backward()
  if sp then sp:close() end
  if run.dp then run.dp:reduce_grads() end   -- the mean gradient over ranks: identical steps
  local gn = optim.clip_grad_norm(run.params, config.clip_grad_norm)   -- the unclipped norm
  run.grad_norms[s] = gn
  if not finite(gn) then return "diverged", string.format("gradient norm is %s at step %d", tostring(gn), s) end
  run.clipped[s] = config.clip_grad_norm ~= nil and gn > config.clip_grad_norm
  sp = tracing and trace.span("optimizer")
  opt:step()
  if sp then sp:close() end
  if run.ema then update_ema(run) end
  run.step = s
  local bs = (is_tensor(x) and x:size(1) or 0) * (run.dp and run.dp.world or 1)
  run.train_batch = run.train_batch or bs
  local win = run.window
  win.loss, win.n, win.ex = win.loss + lv, win.n + 1, win.ex + bs
  local t1 = core.clock()
  run.cost.train = run.cost.train + (t1 - t0)
  win.time = win.time + (t1 - t_in)
  run.last_grad_norm = gn
  if s % run.log_every == 0 or s == run.steps then
    log_window(run, s)
    for _, p in ipairs(run.params) do            -- parameters stay finite (checked at log steps)
      if not finite(p:sum():item()) then
        return "diverged", string.format("parameters are not finite at step %d", s)
      end
    end
  end
end

-- at the first eval that reports metrics: checkpoint.metric must be one of them, else
-- nothing would ever be ranked (a misspelled name is an error naming the nearest)
local function check_ranked(run, all)
  local rk = run.ranking
  if run.ranked_checked or not rk or rk.source ~= "config" or next(all) == nil then return end
  run.ranked_checked = true
  if all[rk.metric] ~= nil then return end
  local names = util.sorted_keys(all)
  local hint = util.nearest(rk.metric, names)
  error(string.format("dl.train: checkpoint.metric '%s' is not a metric the evals report (they report: %s)%s",
    rk.metric, table.concat(names, ", "), hint and ("; did you mean '" .. hint .. "'?") or ""), 0)
end

-- every eval set (and again with the EMA weights) at run.step: the ledger, the log, the progress line
local function run_eval(run)
  local t0 = core.clock()
  local model, evaluator, ev = run.model, run.evaluator, run.ev
  -- eval batches default to at least the training batch size (and at least 256)
  if not ev.batch_size then evaluator.batch_size = math.max(256, run.train_batch or 0) end
  if run.sync_bn then run.sync_bn() end
  local all = {}
  local function eval_with(label_prefix)
    for _, name in ipairs(run.eval_names) do
      run.phase = "evaluating " .. label_prefix .. name   -- named by a failure message
      local res = evaluator:run(name, run.eval_sets[name], run.step)
      for k, v in pairs(res) do all[label_prefix .. name .. "/" .. k] = v end
    end
  end
  eval_with("")
  if run.ema then                             -- the averaged weights, alongside the raw ones
    local raw = {}
    for k, t in pairs(model:state_dict()) do raw[k] = t:detach():clone() end
    model:load_state_dict(run.ema)
    eval_with("ema/")
    model:load_state_dict(raw)
  end
  run.phase = nil
  check_ranked(run, all)
  run.metrics_at[run.step] = all
  run.last_metrics = all
  run.ledger:add_eval(run.step, all)
  local e = {step = run.step, split = "eval"}
  for k, v in pairs(all) do e[k] = v end
  log_event(run, e)
  run.prog:eval(run.step, all, run.ck.metric)
  run.cost.eval = run.cost.eval + (core.clock() - t0)
end

-- config.on_eval(step, metrics) after the eval of step s: nil continues, a message
-- stops the run after this step (run.stop; stop_if_interrupted checkpoints it)
local function ask_on_eval(run, s)
  local why = run.config.on_eval(s, run.last_metrics)
  if why ~= nil and type(why) ~= "string" then
    error("dl.train: on_eval must return nil (go on) or a message (stop the run), got " .. type(why), 0)
  end
  run.stop = why
end

-- after step s: the eval when one is due (in eval mode, under no grad), then the checkpoint
local function eval_and_checkpoint(run, s)
  local ev, model = run.ev, run.model
  local do_eval = #run.eval_names > 0 and ((ev.every and s % ev.every == 0) or s == run.steps)
  if do_eval then
    local t_eval = core.clock()
    model:eval()
    core.set_grad_enabled(false)
    local esp = trace.active() and trace.span("eval")
    local eok, eerr = xpcall(run_eval, run.on_error, run)
    if esp then esp:close() end
    core.set_grad_enabled(true)
    model:train()
    if not eok then error(eerr, 0) end
    run.prog:spent("eval", core.clock() - t_eval)
    if run.config.on_eval and run.lead then ask_on_eval(run, s) end
  end
  -- the checkpoint policy (dlua.train.policy): every N steps, or at evals within a time budget
  local best = do_eval and run.ck.metric and run.ledger:best_eval()
  if run.policy:due(s, {last = s == run.steps, eval = do_eval, new_best = best and best.step == s or false}) then
    local t_ck = core.clock()
    local csp = trace.active() and trace.span("checkpoint")
    state.save(run)
    if csp then csp:close() end
    run.policy:wrote(core.clock() - t_ck)
    run.prog:spent("checkpoint", core.clock() - t_ck)
  end
end

-- the steps from run.step + 1 to the budget -> status, message. An error fails the
-- run: its message leads with the user's file:line (none when no user frame was on
-- the stack) and then names the step; run.traceback keeps where it was raised.
local function run_steps(run)
  local status, message
  run.on_error = function(e)
    if run.traceback then return e end          -- rethrown from the eval: already blamed
    run.traceback = blame.traceback(e, 2)
    return blame.message(e, 2)
  end
  run.model:train()
  local ok, err = xpcall(function()
    while run.step < run.steps do
      local s = run.step + 1
      run.current = s
      status, message = train_step(run, s)
      if status then return end
      eval_and_checkpoint(run, s)
      status, message = stop_if_interrupted(run, s)
      if status then return end
    end
  end, run.on_error)
  if ok then return status or "done", message end
  local loc, rest = blame.split(tostring(err))
  return "failed", string.format("%sstep %d%s: %s", loc and loc .. ": " or "", run.current,
    run.phase and " (" .. run.phase .. ")" or "", rest)
end

-- the result: status, best and latest checkpoints, cost; result.json and the tracking row
local function finish(run, status, message)
  local config, prog, dir, dp, lead = run.config, run.prog, run.dir, run.dp, run.lead
  if run.stream.close then run.stream.close() end
  prog:finish()
  if status == "diverged" then prog:message("diverged: " .. message) end
  if status == "stopped" then prog:message("stopped by on_eval: " .. message) end
  if status == "interrupted" then                 -- shown even when quiet: the run stopped early
    local latest = run.ledger.data.latest
    io.stderr:write(string.format("dlua: %s; checkpoint %s\n", message,
      latest and run.ckpt_dir .. "/" .. latest.path or "(none)"))
  end
  if dp then run.cost.allreduce = dp.seconds end
  local total = core.clock() - run.t_start
  local cost = {seconds = total}
  for k, v in pairs(run.cost) do cost[k] = v; cost[k .. "_fraction"] = total > 0 and v / total or 0 end
  local led = run.ledger.data
  local result = {
    status = status, message = message, dir = dir, steps = run.step, grad_norms = run.grad_norms,
    clipped = run.clipped, metrics = run.last_metrics, cost = cost, ledger = run.ckpt_dir .. "/index.json",
    traceback = status == "failed" and run.traceback or nil, signal = run.signal,
  }
  -- selected: "best" when ranked by checkpoint.metric among the kept checkpoints;
  -- "last" when nothing ranks them (no metric), and then the summary line says so
  if led.best then
    result.best = {step = led.best.step, metrics = led.best.metrics, value = led.best.value,
                   checkpoint = run.ckpt_dir .. "/" .. led.best.path, selected = "best"}
  elseif led.latest then
    result.best = {step = led.latest.step, metrics = run.metrics_at[led.latest.step] or {},
                   checkpoint = run.ckpt_dir .. "/" .. led.latest.path, selected = "last"}
  end
  if led.latest then result.latest = run.ckpt_dir .. "/" .. led.latest.path end
  -- how checkpoints were ranked and written, and whether the best eval has one (the
  -- time policy writes at some evals only)
  local rk, pol = run.ranking, run.policy
  result.checkpoints = {metric = rk and rk.metric, mode = rk and rk.mode, chosen_by = rk and rk.source,
                        why = rk and rk.why, tolerance = run.ck.tolerance, policy = pol:describe(), written = pol.n}
  local be = run.ck.metric and run.ledger:best_eval()
  if be then
    local kept = run.ledger:kept(be.step)
    result.best_eval = {step = be.step, value = be.metrics[run.ck.metric], checkpoint = kept and run.ckpt_dir .. "/" .. kept}
  end
  local summary = {status = status, message = message, steps = run.step, cost = cost,
                   best = result.best and {step = result.best.step, metrics = result.best.metrics,
                                           selected = result.best.selected} or nil,
                   checkpoints = result.checkpoints, best_eval = result.best_eval,
                   machine = core.machine()}      -- the CPU and the kernel paths that ran (dl.machine)
  local skipped = run.stream.skipped and run.stream.skipped() or 0
  if skipped > 0 then summary["data/skipped"], result["data/skipped"] = skipped, skipped end
  -- after a failure, a write that fails too must not hide the first error (a full disk
  -- fails every later write): that error stays the result's message
  local function record(fn, ...)
    local wok, werr = pcall(fn, ...)
    if wok then return end
    if status ~= "failed" then error(werr, 0) end
    io.stderr:write("dlua: warning: cannot record the result of the failed run: ", tostring(werr), "\n")
  end
  if lead then record(fs.write_atomic, dir .. "/result.json", json.encode(summary) .. "\n") end
  if not run.quiet then prog:summary(result, rk) end
  if config.tracking ~= false and lead then record(track.append_run, config, result) end
  return result
end

--- dl.train(config) --> result; see the file header and docs/api/train.md.
-- @usage local r = dl.train{model = m, loss = nn.CrossEntropy(), optimizer = opt, data = pipe, steps = 100}
function M.train(config)
  local bad = M.config_problem(config)
  if bad then error(bad, 2) end
  -- a first SIGINT/SIGTERM stops the run cleanly after its current step (not under
  -- mpirun: the ranks would see it at different steps); released however this ends
  local catching = dist.world() <= 1
  if catching then proc.catch() end
  local _ <close> = catching and setmetatable({}, {__close = function() proc.release() end}) or nil
  local run = open_run(config)
  run.catching = catching
  return finish(run, run_steps(run))
end

return M
