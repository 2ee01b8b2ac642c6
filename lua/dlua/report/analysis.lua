--- dlua.report.analysis: reads finished runs and studies back from their files, for
-- dl.report and dl.diagnose; re-exports dlua.report.stats (quantiles,
-- bootstrap, bucketing, robust ranges, Pareto front; importance is the study's own, dl.search.importance).
--
--   local A = require "dlua.report.analysis"
--   local d = A.load("runs/fashion-mnist-optimizer", {metric = "valid/loss", aggregate = "final"})
--   d.kind      --> "study" | "runs" (a directory of run directories) | "run" (one run directory)
--   d.trials[i] --> {id, status, feasible, value, step, hp, group, kind, dir, max_steps}
--   A.history(d.trials[1]).eval[1]["valid/accuracy"]
--
-- Everything is recomputed from the stored histories (metrics.jsonl of every
-- trial), so another metric or aggregation needs no rerun (playbook FAQ on
-- quasi-random search: the objective can change after the fact). What it
-- reads: study.json, journal.jsonl (through dl.study_results) or trials.csv,
-- and per run hparams.json, metrics.jsonl, result.json, checkpoints/index.json
-- and, for per-step gradient norms, the latest checkpoint's train/grad_norm.
-- It writes nothing.
local fs = require "dlua.util.fs"
local json = require "dlua.util.json"
local util = require "dlua.util"
local search = require "dlua.search"
local checkpoint = require "dlua.train.checkpoint"
local track = require "dlua.train.track"
local study = require "dlua.study"
local journal = require "dlua.study.journal"
local stats = require "dlua.report.stats"

local M = {}

-- the statistics live in dlua.report.stats; every function of it is also A.<name>
for k, v in pairs(stats) do M[k] = v end
local finite = stats.finite

local sorted_keys = util.sorted_keys
M.sorted_keys = sorted_keys

--- "min" for metrics named ...loss or ...error, "max" otherwise.
function M.default_mode(metric)
  if metric:match("loss$") or metric:match("error$") then return "min" end
  return "max"
end

------------------------------------------------------------------ run files

local function read_json(path)
  local s = fs.read(path)
  if not s then return nil end
  local v = json.decode(s)
  return type(v) == "table" and v or nil
end
M.read_json = read_json

-- the numbers of one log line as named series: a train line's field X is
-- "train/X" (a field named with a "/" of its own, like data/skipped, keeps its
-- name), an eval line's keys are the series' names, and a per_class entry
-- ({correct = {...}, total = {...}}) is "<set>/per_class/<k>", class k's
-- accuracy (1-based); step and elapsed (the clock) are the axes, not series
local function add_points(into, e, train)
  local function add(name, v)
    if not finite(v) then return end
    local s = into[name]
    if not s then s = {xs = {}, ys = {}}; into[name] = s end
    s.xs[#s.xs + 1], s.ys[#s.ys + 1] = e.step, v
  end
  for _, k in ipairs(sorted_keys(e)) do
    local v = e[k]
    if k ~= "step" and k ~= "split" and k ~= "elapsed" then
      if type(v) == "number" then
        add((train and not k:find("/", 1, true)) and "train/" .. k or k, v)
      elseif type(v) == "table" and k:match("/per_class$") and type(v.correct) == "table" and type(v.total) == "table" then
        for c = 1, #v.total do
          local n, ok = v.total[c], v.correct[c]
          if type(n) == "number" and type(ok) == "number" and n > 0 then add(string.format("%s/%d", k, c), ok / n) end
        end
      end
    end
  end
end

--- The stored history of a run directory: {train = {{step, loss, lr,
-- grad_norm, examples_per_s, elapsed}...}, eval = {{step, ["set/metric"] =
-- ...}...}, series = {train = {[name] = {xs =, ys =}}, eval = {...}} (every
-- scalar it logged, named as add_points says), hparams =, result =, ledger =}.
-- Cached on the trial table.
function M.history(trial)
  if trial._history then return trial._history end
  local dir = trial.dir
  local h = {train = {}, eval = {}, series = {train = {}, eval = {}}}
  for line in (fs.read(dir .. "/metrics.jsonl") or ""):gmatch("[^\n]+") do
    local e = json.decode(line)
    if type(e) == "table" and type(e.step) == "number" then
      if e.split == "train" then h.train[#h.train + 1] = e
      elseif e.split == "eval" then h.eval[#h.eval + 1] = e end
    end
  end
  table.sort(h.train, function(a, b) return a.step < b.step end)
  table.sort(h.eval, function(a, b) return a.step < b.step end)
  for _, e in ipairs(h.train) do add_points(h.series.train, e, true) end
  for _, e in ipairs(h.eval) do add_points(h.series.eval, e, false) end
  h.hparams = read_json(dir .. "/hparams.json")
  h.result = read_json(dir .. "/result.json")
  h.ledger = read_json(dir .. "/checkpoints/index.json")
  trial._history = h
  return h
end

--- The curve of a series of a trial: steps, values. "train/X" is field X of
-- the train log lines when they have it (else an eval set named train);
-- anything else an eval metric, "<set>/per_class/<k>" or a train line's own
-- "group/name" field (data/skipped).
function M.curve(trial, metric)
  local s = M.history(trial).series
  local c = (metric:match("^train/") and s.train[metric]) or s.eval[metric] or s.train[metric]
  if not c then return {}, {} end
  local xs, ys = {}, {}
  for i = 1, #c.xs do xs[i], ys[i] = c.xs[i], c.ys[i] end
  return xs, ys
end

--- The names of every scalar series a trial logged, sorted (classes in numeric order).
function M.series_names(trial)
  local s, seen, out = M.history(trial).series, {}, {}
  for _, part in ipairs({s.train, s.eval}) do
    for k in pairs(part) do if not seen[k] then seen[k] = true; out[#out + 1] = k end end
  end
  table.sort(out, M.name_less)
  return out
end

--- Natural order of series names: digit runs compare as numbers (class 2 before class 10).
function M.name_less(a, b)
  local ka = a:gsub("%d+", function(n) return string.format("%012d", tonumber(n)) end)
  local kb = b:gsub("%d+", function(n) return string.format("%012d", tonumber(n)) end)
  return ka < kb
end

--- Per-step gradient norms of a run (unclipped, as dl.train records them):
-- from the latest checkpoint's train/grad_norm tensor when it can be read
-- (every step), else the train log's grad_norm (the log steps only). Returns
-- {steps =, values =, per_step = bool, clipped = n or nil (steps clipped),
-- clip_steps = total steps with a clipping decision}.
function M.grad_norms(trial)
  if trial._grad_norms then return trial._grad_norms end
  local h = M.history(trial)
  local out
  local latest = h.ledger and h.ledger.latest and h.ledger.latest.path
  if latest then
    local cdir = trial.dir .. "/checkpoints"
    local path = fs.checked_path(cdir, latest, cdir .. "/index.json", "latest.path")
    local ok, tensors, meta = pcall(checkpoint.load, path)
    if ok and tensors and tensors["train/grad_norm"] then
      local v = tensors["train/grad_norm"]:totable()
      local steps = {}
      for i = 1, #v do steps[i] = i end
      out = {steps = steps, values = v, per_step = true}
      local cl = meta and meta.clipped and json.decode(meta.clipped)
      if type(cl) == "table" then
        local n, total = 0, 0
        for _, c in ipairs(cl) do
          total = total + 1
          if c == true then n = n + 1 end
        end
        out.clipped, out.clip_steps = n, total
      end
    end
  end
  if not out then
    local xs, ys = M.curve(trial, "train/grad_norm")
    out = {steps = xs, values = ys, per_step = false}
  end
  trial._grad_norms = out
  return out
end

------------------------------------------------------------------- loading

local function value_of(dir, metric, mode, aggregate)
  return study.run_metric(dir, metric, mode, aggregate)
end

local function is_run_dir(d) return fs.exists(d .. "/metrics.jsonl") end

-- the metric a lone run ranks by: its checkpoint metric, else valid/accuracy,
-- else the first eval metric seen
local function default_metric(trials)
  for _, t in ipairs(trials) do
    local h = M.history(t)
    local m = h.ledger and h.ledger.best and h.ledger.best.metric
    if m then return m end
  end
  local seen = {}
  for _, t in ipairs(trials) do
    for _, e in ipairs(M.history(t).eval) do
      for k, v in pairs(e) do if type(v) == "number" and k ~= "step" and k ~= "elapsed" then seen[k] = true end end
    end
  end
  if seen["valid/accuracy"] then return "valid/accuracy" end
  for _, k in ipairs(sorted_keys(seen)) do if k:match("accuracy$") then return k end end
  for _, k in ipairs(sorted_keys(seen)) do return k end
  return "train/loss"
end

local function max_steps_of(t)
  local h = M.history(t)
  local s = (h.hparams and math.tointeger(h.hparams.steps)) or (t.hp and math.tointeger(t.hp.steps))
  if s then return s end
  if h.result and h.result.steps then return h.result.steps end
  local last = h.train[#h.train] or h.eval[#h.eval]
  return last and last.step or nil
end

-- the searched dimensions of a study: bounds and scale from its space
local function study_dims(rec)
  local ok, space = pcall(search.space_from_table, rec.nuisance or {})
  local dims = {}
  if not ok then return dims end
  for _, d in ipairs(space.dims) do
    local p = d.param
    local dim = {name = d.name, path = d.path, kind = p.kind, cond = d.cond, role = "nuisance"}
    if p.kind == "uniform" or p.kind == "log_uniform" then
      dim.lo, dim.hi, dim.log = p.lo, p.hi, p.kind == "log_uniform"
    elseif p.kind == "int" then
      dim.lo, dim.hi, dim.log, dim.integer = p.lo, p.hi, p.log or false, true
    else
      dim.values, dim.ordered = p.values, p.kind == "discrete"
    end
    dims[#dims + 1] = dim
  end
  return dims
end

local function finish_trials(d)
  local mode = d.mode
  d.ranking = {}
  for i, t in ipairs(d.trials) do
    t.feasible = t.status == "done" and finite(t.value)
    t.max_steps = max_steps_of(t)
    t.order = t.order or i
    if t.feasible then d.ranking[#d.ranking + 1] = t end
    if t.status == "pruned" then                   -- stopped early by the study's scheduler: where, at what value
      t.pruned = true
      local xs, ys = M.curve(t, d.metric)
      t.rung, t.rung_value = xs[#xs], ys[#ys]
    end
  end
  table.sort(d.ranking, function(a, b)
    if a.value == b.value then return a.id < b.id end
    return M.better(a.value, b.value, mode)
  end)
  -- ranks and the best trial among the search trials (seed re-runs of a best trial are not candidates)
  d.search_ranking = {}
  for _, t in ipairs(d.ranking) do
    if t.kind ~= "seed" then d.search_ranking[#d.search_ranking + 1] = t; t.rank = #d.search_ranking end
  end
  d.best = d.search_ranking[1]
  local any_metric = false
  for _, t in ipairs(d.trials) do
    if t.status == "done" and t.value == nil and not t.message then
      t.message = "no " .. d.metric .. " in its history"
    end
    if t.value ~= nil then any_metric = true end
  end
  local done = 0
  for _, t in ipairs(d.trials) do if t.status == "done" then done = done + 1 end end
  if done > 0 and not any_metric then
    local seen = {}
    for _, e in ipairs(M.history(d.trials[1]).eval) do
      for k in pairs(e) do if k ~= "step" and k ~= "split" and k ~= "elapsed" then seen[k] = true end end
    end
    error(string.format("no trial of %s reported '%s' (eval metrics: %s; train/<field> reads the train log)", d.dir,
      d.metric, table.concat(sorted_keys(seen), ", ")), 0)
  end
  return d
end

local observed_dims

local function load_study(dir, opts)
  local rec = read_json(dir .. "/study.json")
  local metric = opts.metric or rec.objective.metric
  local mode = opts.mode or (opts.metric and M.default_mode(opts.metric)) or rec.objective.mode
  local aggregate = opts.aggregate or "best"
  local d = {kind = "study", dir = dir, name = rec.name, goal = rec.goal or rec.description, metric = metric, mode = mode,
             aggregate = aggregate, record = rec, dims = study_dims(rec), trials = {}, groups = {},
             scientific = {}, objective = rec.objective}
  for _, n in ipairs(rec.scientific_names or {}) do
    d.scientific[#d.scientific + 1] = {name = n, values = rec.scientific[n], role = "scientific"}
  end
  if fs.exists(dir .. "/journal.jsonl") then
    local res = study.results(dir, {metric = metric, mode = mode, aggregate = aggregate})
    for i, g in ipairs(res.groups) do
      d.groups[i] = {label = g.label, values = g.values, tag = g.tag, seeds = g.seeds, index = i, importance = g.importance}
    end
    for _, t in ipairs(res.trials) do
      local tr = {id = t.id, status = t.status, value = t.value, step = t.step, hp = t.hp or {}, group = t.group,
                  kind = t.kind or "search", dir = t.dir, message = t.message, command = t.command, base = t.base}
      local h = read_json(t.dir .. "/hparams.json")
      if h then for k, v in pairs(t.hp or {}) do h[k] = v end; tr.hp = h end
      d.trials[#d.trials + 1] = tr
    end
    -- the order the trials finished in (the journal's order), for the optimisation history
    local order, n = {}, 0
    for _, e in ipairs(journal.open(dir):events()) do    -- a damaged line is an error (dlua.study.journal)
      if e.event == "finish" and e.trial and not order[e.trial] then n = n + 1; order[e.trial] = n end
    end
    for _, t in ipairs(d.trials) do t.order = order[t.id] end
  else
    -- no journal (a copied study): the trials table and the run directories
    local rows = track.parse_csv(fs.read(dir .. "/trials.csv") or "")
    if #rows < 1 then error(string.format("%s holds study.json but neither journal.jsonl nor trials.csv", dir), 0) end
    -- importance: results.json's (the study's own numbers) when the study completed
    local rj = read_json(dir .. "/results.json") or {}
    for i, g in ipairs(rec.groups or {}) do
      d.groups[i] = {label = g.label, values = g.values, tag = g.tag, index = i,
                     importance = rj.metric == metric and rj.groups and rj.groups[i] and rj.groups[i].importance or nil}
    end
    local head = rows[1]
    for r = 2, #rows do
      local row = {}
      for i, c in ipairs(head) do row[c] = rows[r][i] end
      if row.id and row.id ~= "id" then
        local tdir = fs.checked_path(dir, row.id, dir .. "/trials.csv", string.format("row %d: id", r))
        local hp = read_json(tdir .. "/hparams.json") or {}
        local tr = {id = row.id, status = row.status, hp = hp, dir = tdir, message = row.message ~= "" and row.message or nil,
                    kind = row.id:match("_seed%d+$") and "seed" or "search"}
        for gi, g in ipairs(d.groups) do
          local match = true
          for k, v in pairs(g.values or {}) do if hp[k] ~= v then match = false end end
          if match then tr.group = gi; break end
        end
        if tr.status == "done" then tr.value, tr.step = value_of(tdir, metric, mode, aggregate) end
        tr.order = r - 1
        d.trials[#d.trials + 1] = tr
      end
    end
  end
  -- a manual study (a list of trials) has no search space: what varies between its trials
  local known = {}
  for _, dim in ipairs(d.dims) do known[dim.name] = true end
  for _, s in ipairs(d.scientific) do known[s.name] = true end
  for k in pairs(rec.fixed or {}) do known[k] = true end
  for _, dim in ipairs(observed_dims(M.search_trials(d))) do
    if not known[dim.name] and dim.name ~= "steps" then d.dims[#d.dims + 1] = dim end
  end
  return finish_trials(d)
end

-- varied hyperparameters of a set of runs without a study: keys whose values differ
function observed_dims(trials)
  local vals = {}
  for _, t in ipairs(trials) do
    for k, v in pairs(t.hp or {}) do
      if k ~= "seed" and k ~= "init_seed" and k ~= "data_seed" and k ~= "rank" and k ~= "world" then
        vals[k] = vals[k] or {}
        vals[k][#vals[k] + 1] = v
      end
    end
  end
  local dims = {}
  for _, k in ipairs(sorted_keys(vals)) do
    local list = vals[k]
    local distinct, numeric, lo, hi = {}, true, math.huge, -math.huge
    for _, v in ipairs(list) do
      distinct[type(v) .. tostring(v)] = v
      if type(v) ~= "number" then numeric = false else lo, hi = math.min(lo, v), math.max(hi, v) end
    end
    local nd = 0
    for _ in pairs(distinct) do nd = nd + 1 end
    if nd > 1 then
      local dim = {name = k, path = k, role = "varied", observed = true}
      if numeric then
        dim.lo, dim.hi = lo, hi
        dim.log = lo > 0 and hi / lo >= 20                  -- engine choice: a range of 20x or more reads on a log axis
        dim.distinct = nd
      else
        local v = {}
        for _, x in pairs(distinct) do v[#v + 1] = x end
        table.sort(v, function(a, b) return tostring(a) < tostring(b) end)
        dim.values = v
      end
      dims[#dims + 1] = dim
    end
  end
  return dims
end

local function run_trial(dir, id)
  local r = read_json(dir .. "/result.json")
  local t = {id = id, dir = dir, kind = "search", group = 1, hp = read_json(dir .. "/hparams.json") or {}}
  t.status = r and r.status or "failed"
  t.message = r and r.message or (not r and "no result.json (unfinished or killed)") or nil
  return t
end

local function load_runs(dir, opts, list)
  local d = {kind = #list == 1 and list[1].dir == dir and "run" or "runs", dir = dir, trials = list, scientific = {},
             groups = {{label = "(all)", index = 1}}, aggregate = opts.aggregate or "best"}
  d.name = d.kind == "run" and ((list[1].hp and list[1].hp.name) or dir:match("([^/]+)$")) or dir:match("([^/]+)$")
  d.metric = opts.metric or default_metric(list)
  d.mode = opts.mode or M.default_mode(d.metric)
  for _, t in ipairs(list) do
    if t.status == "done" or t.status == "diverged" then
      local v, s = value_of(t.dir, d.metric, d.mode, d.aggregate)
      if t.status == "done" then t.value, t.step = v, s end
    end
  end
  d.dims = d.kind == "runs" and observed_dims(list) or {}
  return finish_trials(d)
end

--- Loads a study directory (study.json), a run directory (metrics.jsonl) or a
-- directory of run directories. opts: metric (default: the study's objective,
-- else the run's checkpoint metric), mode ("max" | "min", default from the
-- metric's name), aggregate ("best" over evals, or "final").
function M.load(dir, opts)
  opts = opts or {}
  if type(dir) ~= "string" then error("expected a directory path, got " .. type(dir), 0) end
  dir = dir:gsub("/+$", "")
  if opts.aggregate and opts.aggregate ~= "best" and opts.aggregate ~= "final" then
    error(string.format("aggregate must be \"best\" or \"final\", got %s", tostring(opts.aggregate)), 0)
  end
  if opts.mode and opts.mode ~= "max" and opts.mode ~= "min" then
    error(string.format("mode must be \"max\" or \"min\", got %s", tostring(opts.mode)), 0)
  end
  if not fs.is_dir(dir) then error(string.format("%s is not a directory", dir), 0) end
  if fs.exists(dir .. "/study.json") then return load_study(dir, opts) end
  if is_run_dir(dir) then return load_runs(dir, opts, {run_trial(dir, dir:match("([^/]+)$"))}) end
  local list = {}
  for _, name in ipairs(fs.list(dir)) do
    local sub = dir .. "/" .. name
    if fs.is_dir(sub) and is_run_dir(sub) then list[#list + 1] = run_trial(sub, name) end
  end
  if #list == 0 then
    error(string.format("%s holds no study (study.json), no run (metrics.jsonl) and no run directories", dir), 0)
  end
  return load_runs(dir, opts, list)
end

--- The search trials (not seed re-runs) of group g (nil: all groups).
function M.search_trials(d, g)
  local out = {}
  for _, t in ipairs(d.trials) do
    if t.kind ~= "seed" and (g == nil or t.group == g) then out[#out + 1] = t end
  end
  return out
end

--- The best trials whose curves deserve a look: the best of every group and
-- the k best overall (k = 3), best first, each once.
function M.best_trials(d, k)
  local out, seen = {}, {}
  local function add(t) if t and not seen[t.id] then seen[t.id] = true; out[#out + 1] = t end end
  for i = 1, math.min(k or 3, #d.search_ranking) do add(d.search_ranking[i]) end
  for gi in ipairs(d.groups) do
    local best
    for _, t in ipairs(d.ranking) do if t.group == gi and t.kind ~= "seed" then best = t; break end end
    add(best)
  end
  table.sort(out, function(a, b) return (a.rank or 1e9) < (b.rank or 1e9) end)
  return out
end

--- The loss curve that goes with the objective: the objective itself when it
-- is a loss, else "<set>/loss" of the objective's set when the runs logged it.
function M.loss_metric(d)
  local set = d.metric:match("^(.-)/[^/]+$")
  if set == "train" or not set then return "valid/loss" end
  if d.metric:match("loss$") then return d.metric end
  return set .. "/loss"
end

return M
