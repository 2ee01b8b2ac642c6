--- dlua.train: the training loop for a fixed step budget (playbook: "additional
-- guidance for the training pipeline" as default behaviour).
--
-- dl.train(config) runs `steps` optimizer steps, evaluates every `eval.every`
-- steps (never on wall time) and at the end, keeps checkpoints by separate
-- retention classes (latest / best / every), records every event in the run
-- directory and returns the retrospectively best checkpoint:
--
--   local result = dl.train{model = m, loss = nn.CrossEntropy(), optimizer = opt,
--     data = pipe, steps = 1000, eval = {every = 100, sets = {valid = v}},
--     checkpoint = {keep_best = 2, metric = "valid/accuracy", mode = "max"}, dir = "runs/x"}
--   result.status --> "done" | "diverged" | "failed";  result.best.checkpoint --> path
--
-- Files in the run directory (docs/formats.md): hparams.json, metrics.jsonl,
-- checkpoints/ckpt-<step>.safetensors, checkpoints/index.json, predictions/.
local core = require "dlua.core"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local metrics_mod = require "dlua.train.metrics"
local progress_mod = require "dlua.train.progress"
local optim = require "dlua.optim"
local trace = require("dlua.data").trace
local dist = require "dlua.dist"
local data_parallel = require "dlua.train.data_parallel"
local checkpoint = require "dlua.train.checkpoint"
local track = require "dlua.train.track"
local nn = require "dlua.nn"
local util = require "dlua.util"

local M = {}

-- the config's keys, with the nested tables' own (util.check_options)
local CONFIG = {
  model = true, loss = true, optimizer = true, schedule = true, data = true, steps = true,
  eval = {every = true, sets = "table", metrics = true, batch_size = true, sample = true,
          predictions = {indices = "table", set = "string"}},
  checkpoint = {every = true, keep_latest = true, keep_best = true, keep_every = true, metric = "string",
                mode = "string"},
  clip_grad_norm = true, log_every = true, dir = true, resume = true, ema = {decay = "number"},
  hparams = true, name = true, quiet = true, divergence = {factor = "number"},
  fields = {input = true, target = true, weight = true}, tracking = true,
  description = true, command = true, config_path = true, forward = true, threads = true, trace = true,
}

local function check_config(c)
  if type(c) ~= "table" then error("dl.train: expected a config table, got " .. type(c), 3) end
  util.check_options("dl.train", c, CONFIG, 3)
  for _, k in ipairs({"model", "loss", "optimizer", "data", "steps"}) do
    if c[k] == nil then error("dl.train: config." .. k .. " is required", 3) end
  end
  if math.type(c.steps) ~= "integer" or c.steps < 1 then
    error("dl.train: steps must be a positive integer, got " .. tostring(c.steps), 3)
  end
  if c.eval and c.eval.every and (math.type(c.eval.every) ~= "integer" or c.eval.every < 1) then
    error("dl.train: eval.every must be a positive integer number of steps, got " .. tostring(c.eval.every), 3)
  end
  local ck = c.checkpoint or {}
  if ck.keep_latest ~= nil and (math.type(ck.keep_latest) ~= "integer" or ck.keep_latest < 1) then
    error("dl.train: checkpoint.keep_latest must be >= 1 (the resume point is never deleted), got " ..
      tostring(ck.keep_latest), 3)
  end
  if ck.keep_best and not ck.metric then
    error("dl.train: checkpoint.keep_best needs checkpoint.metric (e.g. \"valid/accuracy\")", 3)
  end
  if ck.mode and ck.mode ~= "max" and ck.mode ~= "min" then
    error("dl.train: checkpoint.mode must be \"max\" or \"min\", got " .. tostring(ck.mode), 3)
  end
end

----------------------------------------------------------------- state of a run

-- everything a checkpoint holds, as tensors + string metadata
local function collect_state(run)
  local tensors = {}
  for k, t in pairs(run.model:state_dict()) do tensors["model/" .. k] = t end
  local osd = run.optimizer:state_dict()
  local oscalars = {}
  for k, v in pairs(osd) do
    if getmetatable(v) == core.Tensor then tensors["optim/" .. k] = v
    else oscalars[k] = v end
  end
  if run.ema then
    for k, t in pairs(run.ema) do tensors["ema/" .. k] = t end
  end
  if #run.grad_norms > 0 then tensors["train/grad_norm"] = core.tensor(run.grad_norms, {dtype = "float64"}) end
  local seed, counter = core.rng_state()
  local meta = {
    step = tostring(run.step),
    optimizer = json.encode(oscalars),
    rng = json.encode({seed = seed, counter = counter}),
    pipeline = json.encode(run.data_state and run.data_state() or {}),
    hparams = json.encode(run.hparams or {}),
    metrics = json.encode(run.last_metrics or {}),
    clipped = json.encode(run.clipped),
    initial_loss = run.initial_loss and string.format("%.17g", run.initial_loss) or "",
  }
  if run.dp then meta.dist = run.dp:gather_state(run.data_state) end   -- every rank's stream and data position
  return tensors, meta
end

local function restore_state(run, tensors, meta)
  local msd, osd = {}, {}
  for k, t in pairs(tensors) do
    local kind, name = k:match("^(%a+)/(.*)$")
    if kind == "model" then msd[name] = t
    elseif kind == "optim" then osd[name] = t
    elseif kind == "ema" and run.ema then run.ema[name] = t end
  end
  run.model:load_state_dict(msd)
  for k, v in pairs(json.decode(meta.optimizer) or {}) do osd[k] = v end
  run.optimizer:load_state_dict(osd)
  local rng = json.decode(meta.rng)
  core.rng_state(rng.seed, rng.counter)
  if run.dp then run.dp:restore_state(meta, run.data_set_state)
  elseif run.data_set_state then run.data_set_state(json.decode(meta.pipeline)) end
  run.step = tonumber(meta.step)
  run.grad_norms = tensors["train/grad_norm"] and tensors["train/grad_norm"]:totable() or {}
  run.clipped = json.decode(meta.clipped) or {}
  run.last_metrics = json.decode(meta.metrics) or {}
  run.initial_loss = tonumber(meta.initial_loss)
end

------------------------------------------------------------------ checkpoints

local Ledger = {}
Ledger.__index = Ledger

-- a ledger that does not hold what dl.train writes: refused, naming the file and the entry
local function ledger_corrupt(path, fmt, ...)
  error(string.format("dl.train: corrupt checkpoint ledger %s: " .. fmt, path, ...), 0)
end

-- checks what ledger_open read: steps are integers, paths stay inside the checkpoint directory
local function check_ledger(self, d)
  local path = self.path
  local function entry(c, name, with_path)
    if type(c) ~= "table" then ledger_corrupt(path, "%s is a %s, expected an object", name, type(c)) end
    if math.type(c.step) ~= "integer" or c.step < 0 then
      ledger_corrupt(path, "%s.step is %s, expected an integer", name, json.encode(c.step))
    end
    if c.metrics ~= nil and type(c.metrics) ~= "table" then ledger_corrupt(path, "%s.metrics is not an object", name) end
    local ok, why = fs.inside(self.dir, c.path)
    if with_path and not ok then
      ledger_corrupt(path, "%s.path %s%s (it must stay inside %s)", name,
        type(c.path) == "string" and "'" .. c.path .. "' " or "", why, self.dir)
    end
  end
  if type(d) ~= "table" then ledger_corrupt(path, "expected a JSON object") end
  for _, list in ipairs({"evals", "checkpoints"}) do
    if d[list] ~= nil and type(d[list]) ~= "table" then
      ledger_corrupt(path, "%s is a %s, expected an array", list, type(d[list]))
    end
    for i, c in ipairs(d[list] or {}) do entry(c, string.format("%s[%d]", list, i), list == "checkpoints") end
  end
  for _, k in ipairs({"best", "latest"}) do if d[k] ~= nil then entry(d[k], k, true) end end
end

-- the index file: every eval, every kept checkpoint with its retention classes,
-- best and latest; rewritten atomically after each change. A checkpoint is kept
-- (resumable, counted as best) only once this file names it on disk.
local function ledger_open(dir, opts)
  local self = setmetatable({dir = dir, path = dir .. "/index.json", opts = opts,
                             data = {evals = json.array(), checkpoints = json.array()}}, Ledger)
  local text = fs.read(self.path)
  if text then
    local d, err = json.decode(text)
    if d == nil then ledger_corrupt(self.path, "%s", tostring(err)) end
    check_ledger(self, d)
    self.data = d
    self.data.evals = json.array(self.data.evals or {})
    self.data.checkpoints = json.array(self.data.checkpoints or {})
  end
  return self
end

function Ledger:save()
  fs.write_atomic(self.path, json.encode(self.data) .. "\n")
end

-- forget everything after step (a resume from an earlier checkpoint)
function Ledger:truncate(step)
  local ev = json.array()
  for _, e in ipairs(self.data.evals) do if e.step <= step then ev[#ev + 1] = e end end
  self.data.evals = ev
  local ck = json.array()
  for _, c in ipairs(self.data.checkpoints) do if c.step <= step then ck[#ck + 1] = c end end
  self.data.checkpoints = ck
end

function Ledger:add_eval(step, metrics)
  self.data.evals[#self.data.evals + 1] = {step = step, metrics = metrics}
end

local function better(a, b, mode)
  if b == nil then return a ~= nil end
  if a == nil or a ~= a then return false end
  if mode == "min" then return a < b end
  return a > b
end

-- decides which checkpoints each class keeps; returns the paths to delete
function Ledger:retain()
  local o = self.opts
  local cks = self.data.checkpoints
  table.sort(cks, function(a, b) return a.step < b.step end)
  for _, c in ipairs(cks) do c.classes = json.array() end
  for i = #cks, math.max(1, #cks - (o.keep_latest or 1) + 1), -1 do
    cks[i].classes[#cks[i].classes + 1] = "latest"
  end
  if o.keep_best and o.metric then
    local ranked = {}
    for _, c in ipairs(cks) do
      local v = c.metrics and c.metrics[o.metric]
      if v ~= nil and v == v then ranked[#ranked + 1] = c end
    end
    table.sort(ranked, function(a, b)
      local va, vb = a.metrics[o.metric], b.metrics[o.metric]
      if va == vb then return a.step < b.step end       -- ties: the earlier step wins
      return better(va, vb, o.mode)
    end)
    for i = 1, math.min(o.keep_best, #ranked) do ranked[i].classes[#ranked[i].classes + 1] = "best" end
    local top = ranked[1]
    self.data.best = top and {step = top.step, path = top.path, value = top.metrics[o.metric],
                              metric = o.metric, metrics = top.metrics} or nil
  end
  if o.keep_every then
    for _, c in ipairs(cks) do
      if c.step % o.keep_every == 0 then c.classes[#c.classes + 1] = "every" end
    end
  end
  local keep, drop = json.array(), {}
  for _, c in ipairs(cks) do
    if #c.classes > 0 then keep[#keep + 1] = c else drop[#drop + 1] = c.path end
  end
  self.data.checkpoints = keep
  local latest = keep[#keep]
  for i = #keep, 1, -1 do
    local has_latest = false
    for _, cl in ipairs(keep[i].classes) do if cl == "latest" then has_latest = true end end
    if has_latest then latest = keep[i]; break end
  end
  self.data.latest = latest and {step = latest.step, path = latest.path} or nil
  return drop
end

local function ckpt_name(step) return string.format("ckpt-%09d.safetensors", step) end

local function save_checkpoint(run)
  local t0 = core.clock()
  if run.sync_bn then run.sync_bn() end
  local tensors, meta = collect_state(run)
  local name = ckpt_name(run.step)
  local path = run.ckpt_dir .. "/" .. name
  if run.dp then dist.check_replicated(run.model, string.format("dl.train: the parameters at step %d", run.step)) end
  local ok, err = true, nil
  if not run.dp or run.dp.lead then ok, err = checkpoint.save(path, tensors, meta) end
  if run.dp then run.dp:agree(ok or not err, "dl.train: cannot save checkpoint: " .. tostring(err)) end
  if not ok and err then error("dl.train: cannot save checkpoint: " .. tostring(err), 0) end
  local led = run.ledger
  local cks = led.data.checkpoints
  for i = #cks, 1, -1 do if cks[i].step == run.step then table.remove(cks, i) end end
  cks[#cks + 1] = {step = run.step, path = name, metrics = run.metrics_at[run.step]}
  local drop = led:retain()
  -- the metrics lines up to this step are durable before the ledger names the checkpoint,
  -- the ledger before anything it no longer names is deleted
  if run.metrics_path and fs.exists(run.metrics_path) and (not run.dp or run.dp.lead) then fs.fsync(run.metrics_path) end
  led:save()
  if not run.dp or run.dp.lead then
    for i, p in ipairs(drop) do
      os.remove(fs.checked_path(run.ckpt_dir, p, led.path, string.format("dropped checkpoint %d", i)))
    end
  end
  run.cost.checkpoint = run.cost.checkpoint + (core.clock() - t0)
end

-- the newest checkpoint the ledger names that verifies, warning about (and skipping)
-- broken ones; a checkpoint file the ledger does not name was never kept
local function find_resume_point(ledger, warn)
  local cks = {}
  for _, c in ipairs(ledger.data.checkpoints) do cks[#cks + 1] = c end
  table.sort(cks, function(a, b) return a.step > b.step end)
  for _, c in ipairs(cks) do
    local path = ledger.dir .. "/" .. c.path
    local tensors, meta = checkpoint.load(path)
    if tensors then return path, tensors, meta end
    warn(string.format("skipping checkpoint %s: %s", path, tostring(meta)))
  end
  return nil
end

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
    s.close = function() if it then it:close(); it = nil end end
    return s
  end
  error("dl.train: config.data must be a pipeline (with :iter) or a function returning batches, got " ..
    type(data), 3)
end

local function batch_fields(b, fields)
  if is_tensor(b) then error("dl.train: a batch must be a table of fields, got a tensor", 0) end
  local x = b[fields.input] or b[1]
  local y = b[fields.target] or b[2]
  local w = b[fields.weight]
  if x == nil then error("dl.train: batch has no field '" .. fields.input .. "'", 0) end
  return x, y, w
end

local function finite(v) return v == v and v ~= math.huge and v ~= -math.huge end

-------------------------------------------------------------------- the loop

--- dl.train(config) --> result; see the file header and docs/api/train.md.
function M.train(config)
  check_config(config)
  -- under mpirun: data parallel over the ranks; only rank 0 (the lead) writes (docs/distributed.md)
  local dp = dist.world() > 1 and data_parallel.data_parallel(config) or nil
  local lead = not dp or dp.lead
  local model, loss_fn, opt = config.model, config.loss, config.optimizer
  local steps = config.steps
  local fields = {input = "image", target = "label", weight = "weight"}
  for k, v in pairs(config.fields or {}) do fields[k] = v end
  local ev = config.eval or {}
  local ck = {keep_latest = 1, mode = "max"}
  for k, v in pairs(config.checkpoint or {}) do ck[k] = v end
  ck.every = ck.every or ev.every or steps
  local dir = config.dir or default_dir(config.name)
  local log_every = config.log_every or math.max(1, math.min(100, steps // 20))
  local quiet = config.quiet or not lead
  local schedule = config.schedule
  if schedule and schedule.steps == nil and type(schedule) == "table" then schedule.steps = steps end
  local base_lr = opt:lr()
  local params = model:parameters()

  if lead then
    fs.mkdir_p(dir)
    fs.mkdir_p(dir .. "/checkpoints")
    for _, f in ipairs(fs.list(dir .. "/checkpoints")) do    -- temp files of a write killed mid-way
      if f:match("%.tmp[%-.]") then os.remove(dir .. "/checkpoints/" .. f) end
    end
  end
  local run = {
    model = model, optimizer = opt, step = 0, grad_norms = {}, clipped = {}, hparams = config.hparams,
    ckpt_dir = dir .. "/checkpoints", metrics_at = {}, last_metrics = {},
    cost = {train = 0, eval = 0, checkpoint = 0, input = 0},
    sync_bn = nn.sync_batchnorm and function() nn.sync_batchnorm(model) end or nil, dp = dp,
  }
  local stream = open_stream(dp and dp.data or config.data, quiet)
  run.data_state, run.data_set_state = stream.state, stream.set_state
  if config.ema then
    local decay = config.ema.decay or 0.999
    run.ema_decay = decay
    run.ema = {}
    for k, t in pairs(model:state_dict()) do run.ema[k] = t:detach():clone() end
  end
  local function open_ledger()
    local l = ledger_open(run.ckpt_dir, ck)
    return dp and dp:share_ledger(l) or l
  end
  run.ledger = open_ledger()
  local prog = progress_mod.new{total = steps, quiet = quiet, every = log_every}
  local function warn(msg) prog:message("warning: " .. msg) end

  -- resume, or start fresh (never silently over an existing run)
  local metrics_path = dir .. "/metrics.jsonl"
  if config.resume then
    local function find() return find_resume_point(run.ledger, warn) end
    local path, tensors, meta
    if dp then path, tensors, meta = dp:resume_point(find) else path, tensors, meta = find() end
    if path then
      restore_state(run, tensors, meta)
      run.ledger:truncate(run.step)
      if lead then
        fs.filter_lines(metrics_path, function(line)
          local e = json.decode(line)
          return e and e.step and e.step <= run.step
        end)
      end
      for _, e in ipairs(run.ledger.data.evals) do run.metrics_at[e.step] = e.metrics end
      prog:message(string.format("resuming from %s (step %d)", path, run.step))
    else
      if lead then fs.remove_matching(metrics_path) end
      run.ledger:truncate(-1)                   -- nothing of the old run is kept
    end
  else
    local existing = fs.list(run.ckpt_dir)
    for _, f in ipairs(existing) do
      if f:match("^ckpt%-%d+%.safetensors$") then
        error(string.format("dl.train: %s already holds checkpoints; pass resume = true (--resume) to continue " ..
          "that run, or choose another directory (--out)", run.ckpt_dir), 2)
      end
    end
    if lead then os.remove(metrics_path) end
  end
  if lead then fs.write_atomic(dir .. "/hparams.json", json.encode(config.hparams or {}) .. "\n") end
  run.metrics_path = lead and metrics_path or nil
  local t_start = core.clock()
  local function log_event(e)                   -- a failed append raises, naming the file
    e.elapsed = core.clock() - t_start
    if lead then fs.append_line(metrics_path, json.encode(e)) end
  end

  local eval_sets = ev.sets or {}
  local eval_names = {}
  for name in pairs(eval_sets) do eval_names[#eval_names + 1] = name end
  table.sort(eval_names)
  local evaluator = metrics_mod.evaluator{
    model = model, loss = loss_fn, metrics = ev.metrics, batch_size = ev.batch_size, sample = ev.sample,
    fields = fields, forward = config.forward, predictions = ev.predictions, dir = dir,
    shard = dp and dp:eval_shard() or nil,
  }

  local function run_eval()
    local t0 = core.clock()
    -- eval batches default to at least the training batch size (and at least 256)
    if not ev.batch_size then evaluator.batch_size = math.max(256, run.train_batch or 0) end
    if run.sync_bn then run.sync_bn() end
    local all = {}
    local function eval_with(label_prefix)
      for _, name in ipairs(eval_names) do
        local res = evaluator:run(name, eval_sets[name], run.step)
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
    run.metrics_at[run.step] = all
    run.last_metrics = all
    run.ledger:add_eval(run.step, all)
    local e = {step = run.step, split = "eval"}
    for k, v in pairs(all) do e[k] = v end
    log_event(e)
    prog:eval(run.step, all, ck.metric)
    run.cost.eval = run.cost.eval + (core.clock() - t0)
  end

  local status, message = "done", nil
  local div = config.divergence or {}
  local window_loss, window_n, window_t, window_ex = 0, 0, core.clock(), 0
  model:train()
  local ok, err = pcall(function()
    while run.step < steps do
      local s = run.step + 1
      local t_in = core.clock()
      local batch = stream.next()
      if batch == nil then error("dl.train: the data ran out at step " .. s, 0) end
      local t0 = core.clock()
      run.cost.input = run.cost.input + (t0 - t_in)
      local x, y, w = batch_fields(batch, fields)
      if schedule then opt:set_lr(base_lr * schedule(s)) end
      opt:zero_grad()
      local tracing = trace.active()             -- spans for the Chrome trace (--trace FILE)
      local sp = tracing and trace.span("forward")
      local out = config.forward and config.forward(model, batch) or model(x)
      local loss = loss_fn(out, y, w)
      local lv = loss:item()
      if dp then lv = dp:mean_loss(lv) end       -- every rank judges divergence on the same value
      if not finite(lv) then
        status, message = "diverged", string.format("loss is %s at step %d", tostring(lv), s)
        return
      end
      run.initial_loss = run.initial_loss or lv
      if div.factor and lv > div.factor * run.initial_loss then
        status, message = "diverged", string.format("loss %.4g at step %d exceeds %g x the initial loss %.4g",
          lv, s, div.factor, run.initial_loss)
        return
      end
      if sp then sp:close(); sp = trace.span("backward") end
      loss:backward()
      if sp then sp:close() end
      if dp then dp:reduce_grads() end           -- the mean gradient over ranks: identical steps
      local gn = optim.clip_grad_norm(params, config.clip_grad_norm)   -- the unclipped norm
      run.grad_norms[s] = gn
      if not finite(gn) then
        status, message = "diverged", string.format("gradient norm is %s at step %d", tostring(gn), s)
        return
      end
      run.clipped[s] = config.clip_grad_norm ~= nil and gn > config.clip_grad_norm
      sp = tracing and trace.span("optimizer")
      opt:step()
      if sp then sp:close() end
      if run.ema then
        local d = run.ema_decay
        core.set_grad_enabled(false)
        for k, t in pairs(model:state_dict()) do
          local e = run.ema[k]
          if e:dtype() == "float32" or e:dtype() == "float64" then run.ema[k] = e * d + t * (1 - d)
          else run.ema[k] = t:clone() end
        end
        core.set_grad_enabled(true)
      end
      run.step = s
      local bs = (is_tensor(x) and x:size(1) or 0) * (dp and dp.world or 1)
      run.train_batch = run.train_batch or bs
      window_loss, window_n, window_ex = window_loss + lv, window_n + 1, window_ex + bs
      run.cost.train = run.cost.train + (core.clock() - t0)
      if s % log_every == 0 or s == steps then
        local el = core.clock() - window_t
        local e = {step = s, split = "train", loss = window_loss / window_n, lr = opt:lr(), grad_norm = gn,
                   examples_per_s = window_ex / math.max(el, 1e-9)}
        log_event(e)
        prog:train(s, e)
        window_loss, window_n, window_ex, window_t = 0, 0, 0, core.clock()
        for _, p in ipairs(params) do            -- parameters stay finite (checked at log steps)
          if not finite(p:sum():item()) then
            status, message = "diverged", string.format("parameters are not finite at step %d", s)
            return
          end
        end
      end
      local do_eval = #eval_names > 0 and ((ev.every and s % ev.every == 0) or s == steps)
      if do_eval then
        model:eval()
        core.set_grad_enabled(false)
        local esp = trace.active() and trace.span("eval")
        local eok, eerr = pcall(run_eval)
        if esp then esp:close() end
        core.set_grad_enabled(true)
        model:train()
        if not eok then error(eerr, 0) end
      end
      if s % ck.every == 0 or s == steps then
        local csp = trace.active() and trace.span("checkpoint")
        save_checkpoint(run)
        if csp then csp:close() end
      end
    end
  end)
  if stream.close then stream.close() end
  prog:finish()
  if not ok then
    status, message = "failed", tostring(err)
  end
  if status == "diverged" then prog:message("diverged: " .. message) end
  if dp then run.cost.allreduce = dp.seconds end
  local total = core.clock() - t_start
  local cost = {seconds = total}
  for k, v in pairs(run.cost) do cost[k] = v; cost[k .. "_fraction"] = total > 0 and v / total or 0 end
  local led = run.ledger.data
  local result = {
    status = status, message = message, dir = dir, steps = run.step, grad_norms = run.grad_norms,
    clipped = run.clipped, metrics = run.last_metrics, cost = cost, ledger = run.ckpt_dir .. "/index.json",
  }
  if led.best then
    result.best = {step = led.best.step, metrics = led.best.metrics, value = led.best.value,
                   checkpoint = run.ckpt_dir .. "/" .. led.best.path}
  elseif led.latest then
    result.best = {step = led.latest.step, metrics = run.metrics_at[led.latest.step] or {},
                   checkpoint = run.ckpt_dir .. "/" .. led.latest.path}
  end
  if led.latest then result.latest = run.ckpt_dir .. "/" .. led.latest.path end
  local summary = {status = status, message = message, steps = run.step, cost = cost,
                   best = result.best and {step = result.best.step, metrics = result.best.metrics} or nil}
  -- after a failure, a write that fails too must not hide the first error (a full disk
  -- fails every later write): that error stays the result's message
  local function record(fn, ...)
    local wok, werr = pcall(fn, ...)
    if wok then return end
    if status ~= "failed" then error(werr, 0) end
    io.stderr:write("dlua: warning: cannot record the result of the failed run: ", tostring(werr), "\n")
  end
  if lead then record(fs.write_atomic, dir .. "/result.json", json.encode(summary) .. "\n") end
  if not quiet then
    prog:message(string.format("time: %.1fs (train %.0f%%, eval %.0f%%, checkpoints %.0f%%, waiting for input %.0f%%)",
      total, 100 * cost.train_fraction, 100 * cost.eval_fraction, 100 * cost.checkpoint_fraction,
      100 * cost.input_fraction))
    if result.best then
      local parts = {}
      for k, v in pairs(result.best.metrics or {}) do
        if type(v) == "number" then parts[#parts + 1] = string.format("%s %.4f", k, v) end
      end
      table.sort(parts)
      prog:message(string.format("best checkpoint: step %d (%s) %s", result.best.step, table.concat(parts, ", "),
        result.best.checkpoint))
    end
    prog:message("run directory: " .. dir)
  end
  if config.tracking ~= false and lead then record(track.append_run, config, result) end
  return result
end

return M
