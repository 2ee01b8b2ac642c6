--- dlua.study.probe: the playbook's probes, for the recipes in recipes/.
--
--   local probe = require "dlua.study.probe"
--   local res = dl.batch_size_sweep{experiment = "examples/fashion_mnist.lua", start = 16,
--                                   memory = 512 * 2^20, steps = 20}
--   print(probe.format_sweep(res))          -- the table; res.recommended is the batch size
--
--   -- an experiment changed the way a probe needs it, without editing its file:
--   local exp = probe.variant("examples/fashion_mnist.lua", {schedule = "constant", no_regularization = true})
--   probe.write_variant("runs/x/experiment.lua", "examples/fashion_mnist.lua", {optimizer = "adam"})
--
-- A variant wraps an experiment's build(hp): it builds the experiment's own
-- config, then replaces what the probe prescribes (the schedule, the
-- optimizer, the regularisers, the step budget, the eval schedule). Written to
-- a file (write_variant), it is an experiment file like any other, so a
-- dl.study can run its trials as subprocesses.
--
-- batch_size_sweep (playbook 1.3): batch sizes start, 2 start, 4 start, ...,
-- each trained for a few steps in this process with eval off, until one runs
-- out of memory (dl.memory.limit stands for accelerator memory) or
-- throughput stops growing. It reports the median time per step over the
-- steps after the first `skip` (warm-up), examples/s, peak tensor memory and
-- the scaling efficiency against perfect scaling from the first size.
local core = require "dlua.core"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local memory = require "dlua.util.memory"
local experiment = require "dlua.train.experiment"
local flags = require "dlua.train.flags"
local rng = require "dlua.search.rng"
local optim = require "dlua.optim"
local util = require "dlua.util"
local blame = require "dlua.util.blame"

local M = {}

local copy = util.copy

------------------------------------------------------------------ variants

local VARIANT_KEYS = {
  tag = true, hparams = true, schedule = true, no_regularization = true, optimizer = true, steps_from_warmup = true,
  eval_every = true, eval_sets = true, eval_examples = true, log_every = true, divergence = true, no_eval = true,
  checkpoint_every = true, description = true, clip = true,
}
VARIANT_KEYS.divergence = {factor = "number"}

-- the hyperparameters a "no regularisation" switch zeroes (when the experiment has them)
M.REGULARIZERS = {"weight_decay", "label_smoothing", "dropout"}

--- A fixed subset of about n examples of an eval set: every k-th example
-- (p:shard{rank = 0, world = k}), the same examples at every eval.
local function thin(set, n)
  local len = #set
  if not n or n >= len or not set.shard then return set end
  return set:shard{rank = 0, world = math.ceil(len / n)}
end

--- probe.variant(experiment or path, spec) --> a dl.experiment. spec (all optional):
--   hparams = {name = default}      extra hyperparameters (e.g. beta1 for Adam)
--   schedule = "constant"           a constant learning rate (no warmup, no decay)
--            | "warmup_constant"    linear warmup over hp.warmup steps from 0, then constant
--   steps_from_warmup = true        steps = warmup + post_warmup (post_warmup 0: 2 x warmup)
--   no_regularization = true        weight_decay, label_smoothing, dropout set to 0
--   optimizer = "adam"              Adam with hp.lr, hp.beta1 (or 1 - hp.one_minus_beta1),
--                                   hp.beta2 (or 1 - hp.one_minus_beta2), hp.eps, hp.weight_decay
--   eval_every = n, log_every = n   the eval and log intervals
--   eval_sets = {"valid"}           keep only these eval sets; eval_examples = n thins each to ~n
--   no_eval = true                  no eval at all (throughput)
--   divergence = {factor = F}       dl.train's divergence rule
--   checkpoint_every = n            checkpoint interval (default: dl.train's)
--   clip = true                     clip_grad_norm = hp.clip when above 0 (hparam clip, default 0)
function M.variant(base, spec)
  spec = util.check_options("probe.variant", spec, VARIANT_KEYS, 2)
  local exp = experiment.load(base)
  local hparams = copy(exp.hparams)
  for k, v in pairs(spec.hparams or {}) do if hparams[k] == nil then hparams[k] = v end end
  if spec.optimizer == "adam" then
    for k, v in pairs({beta1 = 0.9, beta2 = 0.999, eps = 1e-8}) do if hparams[k] == nil then hparams[k] = v end end
  end
  if spec.steps_from_warmup and hparams.post_warmup == nil then hparams.post_warmup = 0 end
  if spec.clip and hparams.clip == nil then hparams.clip = 0.0 end
  if (spec.schedule == "warmup_constant" or spec.steps_from_warmup) and hparams.warmup == nil then hparams.warmup = 0 end
  if spec.no_regularization then
    for _, k in ipairs(M.REGULARIZERS) do if type(hparams[k]) == "number" then hparams[k] = 0 * hparams[k] end end
  end
  local build = function(hp)
    if spec.no_regularization then
      for _, k in ipairs(M.REGULARIZERS) do if type(hp[k]) == "number" then hp[k] = 0 * hp[k] end end
    end
    if spec.steps_from_warmup then
      local post = hp.post_warmup
      if not post or post <= 0 then post = 2 * hp.warmup end
      hp.steps = math.tointeger(hp.warmup + post)
    end
    local cfg = exp.build(hp)
    if spec.schedule == "constant" then
      cfg.schedule = nil
    elseif spec.schedule == "warmup_constant" then
      cfg.schedule = optim.schedule.constant{warmup = hp.warmup}
    elseif spec.schedule ~= nil then
      error("probe.variant: schedule must be \"constant\" or \"warmup_constant\", got " .. tostring(spec.schedule), 0)
    end
    if spec.optimizer == "adam" then
      local b1 = hp.one_minus_beta1 and 1 - hp.one_minus_beta1 or hp.beta1
      local b2 = hp.one_minus_beta2 and 1 - hp.one_minus_beta2 or hp.beta2
      cfg.optimizer = optim.Adam{params = cfg.model:parameters(), lr = hp.lr, beta1 = b1, beta2 = b2, eps = hp.eps,
                                 weight_decay = hp.weight_decay or 0}
    elseif spec.optimizer ~= nil then
      error("probe.variant: optimizer must be \"adam\", got " .. tostring(spec.optimizer), 0)
    end
    cfg.steps = hp.steps or cfg.steps
    if spec.no_eval then
      cfg.eval = nil
      if cfg.checkpoint then                       -- nothing is evaluated: nothing ranks the checkpoints, and
        cfg.checkpoint = copy(cfg.checkpoint)      -- dl.train refuses the ranking keys without eval.sets
        for _, k in ipairs({"keep_best", "metric", "mode", "share", "tolerance"}) do cfg.checkpoint[k] = nil end
      end
    elseif cfg.eval then
      local ev = copy(cfg.eval)
      if spec.eval_sets then
        local sets = {}
        for _, n in ipairs(spec.eval_sets) do sets[n] = ev.sets and ev.sets[n] end
        ev.sets = sets
      end
      if spec.eval_examples then
        local sets, longest = {}, 1
        for n, s in pairs(ev.sets or {}) do sets[n] = thin(s, spec.eval_examples); longest = math.max(longest, #sets[n]) end
        ev.sets = sets
        -- no eval batch larger than the thinned set (a padded batch costs as much as a full one)
        ev.batch_size = math.min(ev.batch_size or 256, longest)
      end
      if spec.eval_every then ev.every = spec.eval_every end
      cfg.eval = ev
    end
    if spec.log_every then cfg.log_every = spec.log_every end
    if spec.clip then cfg.clip_grad_norm = (hp.clip or 0) > 0 and hp.clip or nil end
    if spec.divergence then cfg.divergence = spec.divergence end
    if spec.checkpoint_every then
      cfg.checkpoint = copy(cfg.checkpoint)
      cfg.checkpoint.every = spec.checkpoint_every
    end
    return cfg
  end
  local v = experiment.experiment{name = exp.name .. (spec.tag and ("-" .. spec.tag) or ""), hparams = hparams,
    build = build, description = spec.description or exp.description}
  v.path = exp.path
  v.base = exp
  return v
end

--- Writes an experiment file at path that is probe.variant(base, spec); returns path.
function M.write_variant(path, base, spec)
  M.variant(base, spec)                               -- check it builds as an experiment first
  fs.mkdir_p(fs.dirname(path))
  local text = string.format([=[
-- generated by dlua.probe: %s with %s
-- (delete this directory to start over; the study that uses it records its path)
local probe = require "dlua.study.probe"
local json = require "dlua.util.json"
return probe.variant(%q, json.decode(%q))
]=], base, json.encode(spec), fs.abspath(base), json.encode(spec))
  local old = fs.read(path)
  if old ~= text then fs.write_atomic(path, text) end
  return path
end

---------------------------------------------------------------- trials in-process

--- Trains one variant trial in this process: probe.train(exp, overrides, {dir =,
-- steps =, quiet =}) --> result, hp. The run directory is an ordinary one
-- (dl.report reads it); an existing finished run there is reused, not rerun.
function M.train(exp, overrides, opts)
  opts = opts or {}
  local dir = opts.dir
  if dir and not opts.fresh then
    local r = json.decode(fs.read(dir .. "/result.json") or "")
    if type(r) == "table" and (r.status == "done" or r.status == "diverged") then
      local h = json.decode(fs.read(dir .. "/hparams.json") or "") or {}
      local same = true
      for k, v in pairs(overrides or {}) do if h[k] ~= v then same = false end end
      if same then
        r.dir = dir
        r.reused = true
        return r, h
      end
    end
  end
  if dir then fs.rm_rf(dir) end
  local ok, res, hp = pcall(exp.run, exp, overrides, {dir = dir, quiet = opts.quiet ~= false, steps = opts.steps,
    tracking = false})
  if not ok then
    local r = {status = "failed", message = tostring(res), dir = dir}
    if dir then
      fs.mkdir_p(dir)
      fs.write_atomic(dir .. "/result.json", json.encode({status = "failed", message = tostring(res)}) .. "\n")
    end
    return r, overrides
  end
  return res, hp
end

----------------------------------------------------------- batch-size sweep

local function median(v)
  local s = {}
  for i, x in ipairs(v) do s[i] = x end
  table.sort(s)
  if #s == 0 then return nil end
  if #s % 2 == 1 then return s[(#s + 1) // 2] end
  return (s[#s // 2] + s[#s // 2 + 1]) / 2
end

local SWEEP_KEYS = {experiment = true, start = true, max = true, steps = true, skip = true, memory = true,
                    overrides = true, min_gain = true, flag_ratio = true, dir = true, quiet = true, on_row = true,
                    rounds = "integer", confidence = "number"}

-- The throughput ratio of size 2b over size b from per-step times (seconds) of
-- each: 2 * median(t_b) / median(t_2b), with a percentile-bootstrap interval at
-- the given confidence (2,000 resamples from a fixed stream: the same samples
-- always give the same interval).
local function ratio_interval(t_half, t_full, confidence, key)
  local r = rng.rng("batch-size-ratio", key)
  local function resampled_median(v)
    local s = {}
    for i = 1, #v do s[i] = v[r:int(#v) + 1] end
    return median(s)
  end
  local B, ratios = 2000, {}
  for i = 1, B do ratios[i] = 2 * resampled_median(t_half) / resampled_median(t_full) end
  table.sort(ratios)
  local tail = (1 - confidence) / 2
  return 2 * median(t_half) / median(t_full), ratios[math.max(1, math.floor(tail * B) + 1)],
    ratios[math.min(B, math.ceil((1 - tail) * B))]
end

--- The sweep's decision for one doubling from the per-step times of both sizes:
-- "grew" (the whole interval at or above min_gain), "stopped" (all of it below) or
-- "straddles"; with the ratio and its interval. Pure: the same times, the same answer.
function M._verdict(t_half, t_full, min_gain, confidence, key)
  local r, lo, hi = ratio_interval(t_half, t_full, confidence, key)
  return lo >= min_gain and "grew" or hi < min_gain and "stopped" or "straddles", r, lo, hi
end

--- dl.batch_size_sweep{experiment =, start = 16, max = 65536, steps = 20, skip = 5,
-- memory = bytes (dl.memory.limit during the sweep; nil: the current limit),
-- overrides = {hp...}, min_gain = 1.1, flag_ratio = 1.8, rounds = 3, confidence = 0.9,
-- dir =, on_row = fn(row)}
-- --> {rows = {{batch_size, status = "ok" | "oom" | "failed", time_per_step,
-- examples_per_s, peak, ratio, ratio_lo, ratio_hi, rounds, efficiency, message}},
-- recommended, inconclusive, stop, limit}
-- Doubling stops at the first out-of-memory (a clean row, not a crash), when
-- throughput grows by less than min_gain over half the batch size, or past max.
-- A decision is made on the measured noise: each size's per-step times after the
-- warm-up give the ratio over half the size with a bootstrap interval; while the
-- interval straddles min_gain, both sizes are measured again (alternately, so a
-- drift of the machine's speed falls on both), up to `rounds` measurements each; a
-- verdict always rests on at least two measurements of each size (rounds >= 2).
-- Still straddling, the sweep stops and says it is inconclusive, with the interval;
-- recommended is then the smaller size (it is not shown to be slower). Otherwise
-- recommended = the largest batch size whose throughput rose by at least min_gain
-- over half its size (the playbook's max useful batch size); ratios under
-- flag_ratio are flagged as short of near-perfect scaling.
-- @usage local r = dl.batch_size_sweep{experiment = "examples/fashion_mnist.lua", memory = 2^30}
function M.batch_size_sweep(spec)
  if type(spec) ~= "table" then error("dl.batch_size_sweep: expected a table, got " .. type(spec), 2) end
  util.check_options("dl.batch_size_sweep", spec, SWEEP_KEYS, 2)
  if not spec.experiment then error("dl.batch_size_sweep: experiment is required", 2) end
  local start, max = spec.start or 16, spec.max or 65536
  local steps, skip = spec.steps or 20, spec.skip or 5
  local rounds, confidence = spec.rounds or 3, spec.confidence or 0.9
  if math.type(start) ~= "integer" or start < 1 then error("dl.batch_size_sweep: start must be a positive integer", 2) end
  if math.type(steps) ~= "integer" or steps <= skip then
    error(string.format("dl.batch_size_sweep: steps (%s) must be an integer above skip (%d)", tostring(steps), skip), 2)
  end
  if rounds < 1 then error("dl.batch_size_sweep: rounds must be >= 1, got " .. rounds, 2) end
  if not (confidence > 0 and confidence < 1) then
    error("dl.batch_size_sweep: confidence must be in (0, 1), got " .. tostring(confidence), 2)
  end
  local min_gain, flag_ratio = spec.min_gain or 1.1, spec.flag_ratio or 1.8
  local exp = M.variant(spec.experiment, {no_eval = true, log_every = 1, checkpoint_every = steps})
  if exp.hparams.batch_size == nil then
    error("dl.batch_size_sweep: the experiment has no batch_size hyperparameter", 2)
  end
  local base = spec.dir or string.format("%s/dlua-bs-sweep-%d", os.getenv("TMPDIR") or "/tmp", math.floor(core.clock() * 1e6) % 1000000007)
  local prev_limit = memory.limit(nil)
  local limit = spec.memory or prev_limit
  local out = {rows = {}, limit = limit, steps = steps, skip = skip, experiment = exp.path, min_gain = min_gain,
               flag_ratio = flag_ratio, rounds = rounds, confidence = confidence}

  -- one measurement of size bs: ok, per-step times (seconds, after the warm-up), peak, message
  local function measure(bs)
    collectgarbage("collect"); collectgarbage("collect")
    memory.trim()
    memory.limit(limit)
    memory.reset_peak()
    local over = copy(spec.overrides)
    over.batch_size = bs
    local dir = string.format("%s/batch-%d", base, bs)
    fs.rm_rf(dir)
    local okr, res = pcall(exp.run, exp, over, {dir = dir, quiet = true, steps = steps, tracking = false})
    local peak = memory.stats().peak
    memory.limit(nil)
    if not okr then res = {status = "failed", message = tostring(res)} end
    if res.status ~= "done" then fs.rm_rf(dir); return false, nil, peak, res.message end
    local times = {}
    for line in (fs.read(dir .. "/metrics.jsonl") or ""):gmatch("[^\n]+") do
      local e = json.decode(line)
      if type(e) == "table" and e.split == "train" and e.step > skip and e.examples_per_s and e.examples_per_s > 0 then
        times[#times + 1] = bs / e.examples_per_s
      end
    end
    fs.rm_rf(dir)
    return true, times, peak
  end
  local function settle(row)
    local tps = median(row.times)
    row.time_per_step = tps
    row.examples_per_s = tps and row.batch_size / tps or nil
  end

  local ok, err = pcall(function()
    local bs = start
    local first_thr
    while bs <= max do
      local okm, times, peak, msg = measure(bs)
      local row = {batch_size = bs, peak = peak, rounds = 1}
      if not okm then
        row.status = memory.is_oom(msg) and "oom" or "failed"
        row.message = tostring(msg):gsub("^.-(out of memory:)", "%1")
        out.rows[#out.rows + 1] = row
        if spec.on_row then spec.on_row(row, out) end
        out.stop = row.status == "oom" and string.format("out of memory at batch size %d", bs)
          or string.format("batch size %d failed: %s", bs, row.message)
        break
      end
      row.status, row.times = "ok", times
      local prev = out.rows[#out.rows]
      local verdict
      if prev and prev.status == "ok" and #prev.times > 0 and #row.times > 0 then
        while true do
          verdict, row.ratio, row.ratio_lo, row.ratio_hi = M._verdict(prev.times, row.times, min_gain, confidence, bs)
          -- a verdict needs two measurements of each size (one window alone does not see the
          -- machine's speed drifting between windows), unless rounds = 1 was asked for
          if verdict ~= "straddles" and row.rounds >= math.min(2, rounds) then break end
          if row.rounds >= rounds then
            if verdict == "straddles" then verdict = "inconclusive" end
            break
          end
          -- not settled yet: both sizes again, the smaller first
          local ok1, t1 = measure(prev.batch_size)
          local ok2, t2 = measure(bs)
          if not (ok1 and ok2) then verdict = "inconclusive"; break end
          for _, t in ipairs(t1) do prev.times[#prev.times + 1] = t end
          for _, t in ipairs(t2) do row.times[#row.times + 1] = t end
          prev.rounds, row.rounds = prev.rounds + 1, row.rounds + 1
          settle(prev)
        end
        row.flagged = row.ratio < flag_ratio
      end
      settle(row)
      row.measured_steps = #row.times
      first_thr = first_thr or row.examples_per_s
      row.efficiency = first_thr and row.examples_per_s and row.examples_per_s / (first_thr * bs / start) or nil
      out.rows[#out.rows + 1] = row
      if spec.on_row then spec.on_row(row, out) end
      if verdict == "stopped" then
        out.stop = string.format("throughput stopped growing at batch size %d (x%.2f over %d, %d%% interval " ..
          "x%.2f-x%.2f, below x%.2f)", bs, row.ratio, bs // 2, math.floor(100 * confidence + 0.5), row.ratio_lo,
          row.ratio_hi, min_gain)
        break
      elseif verdict == "inconclusive" then
        out.inconclusive = true
        out.stop = string.format("inconclusive at batch size %d: x%.2f over %d, %d%% interval x%.2f-x%.2f contains " ..
          "x%.2f after %d measurements of each (the machine's noise is larger than the difference)", bs, row.ratio,
          bs // 2, math.floor(100 * confidence + 0.5), row.ratio_lo, row.ratio_hi, min_gain, row.rounds)
        break
      end
      bs = bs * 2
      if bs > max then out.stop = string.format("reached the largest batch size asked for (%d)", max) end
    end
  end)
  memory.limit(prev_limit)
  collectgarbage("collect")
  if spec.dir == nil then fs.rm_rf(base) end
  if not ok then error(err, 0) end
  -- the largest batch size whose throughput rose by at least min_gain over half of it
  -- (an inconclusive last size is not counted: it is not shown to be faster)
  for i, r in ipairs(out.rows) do
    local last_inconclusive = out.inconclusive and i == #out.rows
    if r.status == "ok" and (r.ratio == nil or r.ratio_lo >= min_gain) and not last_inconclusive then
      out.recommended = r.batch_size
    end
  end
  return out
end

local function mib(b) return b and string.format("%.1f MiB", b / 2 ^ 20) or "-" end
local probe_fmt = util.fmt4

--- The sweep as a printed table with its stop reason and recommendation.
function M.format_sweep(res)
  local lines = {}
  lines[#lines + 1] = string.format("batch size sweep of %s: %d steps per size, median time per step over steps %d-%d; " ..
    "memory limit %s", tostring(res.experiment), res.steps, res.skip + 1, res.steps, res.limit and mib(res.limit) or "none")
  lines[#lines + 1] = string.format("  %6s %11s %11s %12s %9s %15s %6s %11s", "batch", "time/step", "examples/s",
    "peak memory", "vs half", string.format("%d%% interval", math.floor(100 * (res.confidence or 0.9) + 0.5)), "runs",
    "efficiency")
  for _, r in ipairs(res.rows) do
    if r.status == "ok" then
      lines[#lines + 1] = string.format("  %6d %8.1f ms %11.0f %12s %9s %15s %6d %11s", r.batch_size,
        1000 * (r.time_per_step or 0), r.examples_per_s or 0, mib(r.peak),
        r.ratio and string.format("x%.2f%s", r.ratio, r.flagged and "*" or " ") or "-",
        r.ratio_lo and string.format("x%.2f-x%.2f", r.ratio_lo, r.ratio_hi) or "-", r.rounds or 1,
        r.efficiency and string.format("%.2f", r.efficiency) or "-")
    else
      lines[#lines + 1] = string.format("  %6d  %s", r.batch_size, r.status == "oom" and r.message or ("failed: " .. r.message))
    end
  end
  local flagged = false
  for _, r in ipairs(res.rows) do if r.flagged then flagged = true end end
  if flagged then
    lines[#lines + 1] = string.format("  * throughput grew by less than x%.1f when the batch size doubled: the hardware " ..
      "is saturated (or input, synchronisation or memory bandwidth is the bottleneck)", res.flag_ratio)
  end
  lines[#lines + 1] = "efficiency: throughput / (throughput at the first size x batch / first batch); 1.00 = perfect scaling"
  lines[#lines + 1] = "stopped: " .. tostring(res.stop or "-") ..
    ((res.stop or ""):match("^out of memory") and " (the memory limit stands for accelerator memory)" or "")
  if res.recommended and res.min_gain <= 1 then
    lines[#lines + 1] = string.format("largest batch size that fit: %d (with --min-gain %s the sweep does not ask " ..
      "throughput to grow; the default 1.1 recommends the largest size that still speeds training up)", res.recommended,
      probe_fmt(res.min_gain))
  elseif res.recommended and res.inconclusive then
    lines[#lines + 1] = string.format("recommended batch size: %d, inconclusive above it (doubling it may or may not " ..
      "add x%.2f: see the interval; more --steps or a quieter machine can settle it); re-tune the other " ..
      "hyperparameters at it", res.recommended, res.min_gain)
  elseif res.recommended then
    lines[#lines + 1] = string.format("recommended batch size: %d (the largest whose throughput rose by at least " ..
      "x%.2f over half its size, the whole %d%% interval above it); re-tune the other hyperparameters at it",
      res.recommended, res.min_gain, math.floor(100 * (res.confidence or 0.9) + 0.5))
  else
    lines[#lines + 1] = "recommended batch size: none (the first size did not run)"
  end
  return table.concat(lines, "\n")
end

------------------------------------------------------------ recipe plumbing

-- the shared flags recipe_args applies itself: --set (o.set), --seed (o.set.seed), --threads
M.RECIPE_FLAGS = {"--set", "--seed", "--threads"}

--- Parses a recipe's command line: the shared flags (dlua.train.flags.FLAGS) it
-- applies plus the recipe's own (extra, each taking a value). opts.uses lists the
-- shared flags the recipe applies on top of M.RECIPE_FLAGS (e.g. {"--steps", "--out"});
-- any other is an error naming opts.command ("dlua clipping") and the valid flags. The
-- first positional argument is the experiment (default examples/fashion_mnist.lua),
-- loaded and returned; --set is checked against its hyperparameters. Returns o, exp.
function M.recipe_args(args, extra, opts)
  opts = opts or {}
  local shared = {table.unpack(M.RECIPE_FLAGS)}
  for _, n in ipairs(opts.uses or {}) do shared[#shared + 1] = n end
  -- the experiment first (the positional argument), to type --set values by its defaults:
  -- the flags are read twice by the one parser, the second time with the experiment
  local pre = flags.parse_flags(args, flags.flag_list(extra, nil, shared), nil, opts.command)
  local positional = pre.positional
  if pre.help then return {help = true, set = {}, extra = {}, positional = positional} end
  local path = positional[1] or opts.default_experiment or "examples/fashion_mnist.lua"
  if #positional > 1 then error(string.format("unexpected argument '%s' (see --help)", positional[2]), 0) end
  local exp = experiment.load(path)
  local o = flags.parse(args, exp.hparams, {extra = extra, shared = shared, command = opts.command})
  if o.seed then o.set.seed = o.seed end
  core.threads(o.threads or 2)
  return o, exp, path
end

--- Runs a recipe's main function: errors print one line ("dlua: message")
-- and exit with code 1 (DLUA_DEBUG=1 adds the traceback).
function M.main(fn, ...)
  local tb
  local ok, err = xpcall(fn, function(e) tb = blame.traceback(tostring(e), 2); return e end, ...)
  if ok then return end
  io.stderr:write("dlua: ", (tostring(err):gsub("^[^:]*:%d+: ", "")), "\n")
  if blame.debug() then io.stderr:write(tb, "\n") end
  os.exit(1)
end

-- range (optional): {int = min} an integer >= min, {above = x} a number above x, {min = x}
-- a number >= x
local function in_range(v, range)
  if not range then return true end
  if range.int then return math.type(v) == "integer" and v >= range.int end
  if range.min then return v >= range.min end
  return v > range.above
end

local function range_words(range)
  if not range then return "a number" end
  if range.int then return util.integer_words(range.int) end
  if range.min then return "a number >= " .. util.fmt4(range.min) end
  return "a number above " .. util.fmt4(range.above)
end

--- "0.01,0.1,1" --> {0.01, 0.1, 1} (numbers; integers stay integers), each in range
-- ({int = min}, {above = x} or {min = x}) when given.
function M.number_list(flag, s, range)
  local out = {}
  for part in tostring(s):gmatch("[^,]+") do
    local v = math.tointeger(tonumber(part)) or tonumber(part)
    if v == nil or not in_range(v, range) then
      error(string.format("--%s: expected numbers separated by commas%s, got '%s'", flag,
        range and (", each " .. range_words(range)) or "", s), 0)
    end
    out[#out + 1] = v
  end
  if #out == 0 then error(string.format("--%s: expected at least one number", flag), 0) end
  return out
end

--- A number from a flag (nil when absent); errors name the flag. range (optional):
-- {int = min}, an integer >= min; {above = x}, a number above x; {min = x}, >= x.
function M.number(flag, s, default, range)
  if s == nil then return default end
  local v = math.tointeger(tonumber(s)) or tonumber(s)
  if v == nil or not in_range(v, range) then
    error(string.format("--%s: expected %s, got '%s'", flag, range_words(range), s), 0)
  end
  return v
end

--- "512M", "2G", "1048576" --> bytes.
function M.bytes(flag, s)
  if s == nil then return nil end
  local n, unit = tostring(s):match("^([%d%.]+)%s*([KkMmGg]?)i?[Bb]?$")
  local v = tonumber(n)
  if not v then error(string.format("--%s: expected a size such as 512M or 2G, got '%s'", flag, s), 0) end
  local mult = ({[""] = 1, k = 2 ^ 10, m = 2 ^ 20, g = 2 ^ 30})[unit:lower()]
  return math.tointeger(math.floor(v * mult))
end

--- A number in 4 significant digits (integers as they are).
M.fmt = util.fmt4

--- Copies the cli's --set overrides and adds more.
function M.overrides(o, more)
  local t = copy(o.set)
  for k, v in pairs(more or {}) do t[k] = v end
  return t
end

return M
