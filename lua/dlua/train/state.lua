--- dlua.train.state: what a checkpoint of a run holds and how it is written.
-- collect gathers the model, optimizer, EMA, gradient-norm history, RNG stream,
-- data position and bookkeeping of a run into tensors and string metadata;
-- restore puts them back (a resume continues bit-identically); save writes the
-- checkpoint of run.step and records it in the ledger in the durable order (the
-- metrics lines, then the ledger, then deletions). The run table is dl.train's
-- (dlua/train/init.lua); the ledger is dlua.train.ledger.
local core = require "dlua.core"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local proc = require "dlua.util.proc"
local dist = require "dlua.dist"
local checkpoint = require "dlua.train.checkpoint"
local ledger = require "dlua.train.ledger"

local M = {}

--- collect(run) -> tensors, meta: everything a checkpoint of run holds.
function M.collect(run)
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
  if run.classes then meta.classes = json.encode(run.classes) end     -- data.csv's class vocabularies
  if run.dp then meta.dist = run.dp:gather_state(run.data_state) end   -- every rank's stream and data position
  return tensors, meta
end

--- restore(run, tensors, meta [, keep_lr]): the run as it was when collect gave tensors,
-- meta; with keep_lr the optimizer keeps its own learning rates (a resume with override:
-- the new config's), not the checkpoint's.
function M.restore(run, tensors, meta, keep_lr)
  local msd, osd = {}, {}
  for k, t in pairs(tensors) do
    local kind, name = k:match("^(%a+)/(.*)$")
    if kind == "model" then msd[name] = t
    elseif kind == "optim" then osd[name] = t
    elseif kind == "ema" and run.ema then run.ema[name] = t end
  end
  run.model:load_state_dict(msd)
  for k, v in pairs(json.decode(meta.optimizer) or {}) do
    if not (keep_lr and (k == "lr" or k:match("^group%.%d+%.lr$"))) then osd[k] = v end
  end
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

--- save(run): writes the checkpoint of run.step, adds it to run.ledger and deletes
-- what the ledger no longer keeps (only the lead rank writes under mpirun).
function M.save(run)
  local t0 = core.clock()
  if run.sync_bn then run.sync_bn() end
  local tensors, meta = M.collect(run)
  local name = ledger.name(run.step)
  local path = run.ckpt_dir .. "/" .. name
  if run.dp then dist.check_replicated(run.model, string.format("dl.train: the parameters at step %d", run.step)) end
  local ok, err = true, nil
  if not run.dp or run.dp.lead then ok, err = checkpoint.save(path, tensors, meta) end
  if run.dp then run.dp:agree(ok or not err, "dl.train: cannot save checkpoint: " .. tostring(err)) end
  if not ok and err then error("dl.train: cannot save checkpoint: " .. tostring(err), 0) end
  proc.test_pause("checkpoint", run.step)     -- a spec's window: written, not yet in the ledger
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

return M
