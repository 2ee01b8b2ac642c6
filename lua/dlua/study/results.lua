--- dlua.study.results: what finished trials measured, read from their run
-- directories (never by re-running them): a trial's outcome as the agent records
-- it, the ranking and per-scientific-value report of dl.study_results, its table,
-- and the files written once a study completes (results.json, the row in
-- <root>/studies.csv).
local util = require "dlua.util"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local track = require "dlua.train.track"
local common = require "dlua.study.common"
local journal = require "dlua.study.journal"
local plan = require "dlua.study.plan"
local spec = require "dlua.study.spec"
local prune = require "dlua.study.prune"
local objectives = require "dlua.study.objectives"
local search = require "dlua.search"

local M = {}

-- per-hyperparameter importance of a group's finished trials (dl.search.importance,
-- the one definition every output shows): {{name =, share =, trials =}}, largest
-- share first (ties by name), parameters inactive in the group's trials left
-- out; nil with fewer than d + 2 feasible observations
local function group_importance(space, history, context)
  if #history < space.d + 2 then return nil end
  local imp = search.importance(space, history, {context = context})
  local out = {}
  for _, e in ipairs(imp.params) do
    if e.share then out[#out + 1] = {name = e.name, share = e.share, trials = e.trials} end
  end
  table.sort(out, function(a, b) if a.share == b.share then return a.name < b.name end return a.share > b.share end)
  return out
end

--- format_importance(list) -> "lr 0.812, momentum 0.031": the shares as the
-- printed summary and the HTML report show them (3 decimals).
function M.format_importance(list)
  local parts = {}
  for _, e in ipairs(list) do parts[#parts + 1] = string.format("%s %.3f", e.name, e.share) end
  return table.concat(parts, ", ")
end

local sorted_keys, better, fmtv = util.sorted_keys, common.better, common.format_value

local function metric_events(dir)
  local out = {}
  for line in (fs.read(dir .. "/metrics.jsonl") or ""):gmatch("[^\n]+") do
    local e = json.decode(line)
    if type(e) == "table" then out[#out + 1] = e end
  end
  return out
end

--- run_metric(dir, metric, mode, aggregate) -> value, step, names: the value of
-- metric in a run directory: aggregate "best" (over every eval, by mode; the
-- earliest step on ties) or "final" (the last eval). "train/X" reads field X of
-- the train log lines. names is the set of the metric names seen (for messages).
function M.run_metric(dir, metric, mode, aggregate)
  local split, field = "eval", metric
  local tm = metric:match("^train/(.+)$")
  if tm then split, field = "train", tm end
  local best, step, names = nil, nil, {}
  for _, e in ipairs(metric_events(dir)) do
    if e.split == split then
      for k in pairs(e) do names[k] = true end
      local v = e[field]
      if type(v) == "number" and v == v then
        if aggregate == "final" then best, step = v, e.step
        elseif better(v, best, mode) then best, step = v, e.step end
      end
    end
  end
  return best, step, names
end

--- metric_names(dir) -> the sorted names of the numeric metrics a run directory
-- logged, as an objective names them: "set/metric" for evals, "train/field" for
-- the train lines.
function M.metric_names(dir)
  local seen = {}
  for _, e in ipairs(metric_events(dir)) do
    for k, v in pairs(e) do
      if type(v) == "number" and k ~= "step" and k ~= "elapsed" then
        if e.split == "eval" then seen[k] = true
        elseif e.split == "train" then seen["train/" .. k] = true end
      end
    end
  end
  return sorted_keys(seen)
end

--- checkpoint_at(dir, step) -> the path of the checkpoint of step that run directory
-- dir keeps (its ledger, checkpoints/index.json), or nil, and the ledger's best
-- checkpoint {step =, path =} (nil when none is ranked). A trial's best eval may
-- have none: dl.train writes checkpoints at some evals only (dlua.train.policy).
function M.checkpoint_at(dir, step)
  local led = json.decode(fs.read(dir .. "/checkpoints/index.json") or "")
  if type(led) ~= "table" then return nil end
  local at
  for _, c in ipairs(type(led.checkpoints) == "table" and led.checkpoints or {}) do
    if type(c) == "table" and c.step == step and type(c.path) == "string" then at = dir .. "/checkpoints/" .. c.path end
  end
  local b = type(led.best) == "table" and type(led.best.path) == "string" and led.best or nil
  return at, b and {step = b.step, path = dir .. "/checkpoints/" .. b.path} or nil
end

local function tail_line(path)
  local s = fs.read(path) or ""
  local last
  for l in s:gmatch("[^\n]+") do if l:match("%S") then last = l end end
  return last
end

-- the value of every objective in run directory dir (each by its own mode and
-- aggregate); returns values and their steps, or nil, the first objective
-- without a value and the names seen
local function objective_values(dir, objs, aggregate)
  local values, steps = {}, {}
  for j, o in ipairs(objs) do
    local v, s, names = M.run_metric(dir, o.metric, o.mode, aggregate)
    if v == nil then return nil, o, names end
    values[j], steps[j] = v, s
  end
  return values, steps
end

--- outcome(study, dir, code) -> {status, message, value, step, steps, values}: a
-- finished trial process (exit code) judged from its run directory; a run that
-- reported no value of an objective is "failed", naming the metrics it did
-- report; one stopped by SIGINT/SIGTERM (exit 130/143) is "interrupted"
-- (resumable). value and step are the primary objective's; values (studies of
-- several objectives) holds every objective's value, in the study's order.
function M.outcome(study, dir, code)
  local r = json.decode(fs.read(dir .. "/result.json") or "") or nil
  local status, message = "failed", nil
  if type(r) == "table" and r.status then
    status, message = r.status, r.message
    if code ~= 0 and code ~= 3 and status == "done" then status = "failed"; message = "exit status " .. code end
  elseif code == 130 or code == 143 then          -- stopped by SIGINT/SIGTERM before it wrote a result
    status, message = "interrupted", string.format("interrupted (exit status %d) before it wrote a result", code)
  else
    message = tail_line(dir .. "/trial.log") or ("exit status " .. tostring(code))
  end
  local objs = study.objectives or {study.objective}
  local values, steps_or_missing, names = objective_values(dir, objs, "best")
  local value, step, missing
  if values then value, step = values[1], steps_or_missing[1] else missing = steps_or_missing end
  if status == "done" and missing then
    local l = {}
    for k in pairs(names) do if k ~= "step" and k ~= "split" and k ~= "elapsed" then l[#l + 1] = k end end
    table.sort(l)
    status = "failed"
    message = string.format("the run reported no '%s' (%s metrics: %s)", missing.metric,
      missing.metric:match("^train/") and "train" or "eval", #l > 0 and table.concat(l, ", ") or "none")
  end
  if status ~= "done" then value, step, values = nil, nil, nil end
  return {status = status, message = message, value = value, step = step,
          steps = type(r) == "table" and r.steps or nil, values = #objs > 1 and values and json.array(values) or nil}
end

local function mean_std(vals)
  local n = #vals
  if n == 0 then return nil end
  local s = 0
  for _, v in ipairs(vals) do s = s + v end
  local m = s / n
  local q = 0
  for _, v in ipairs(vals) do q = q + (v - m) ^ 2 end
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(vals) do lo = math.min(lo, v); hi = math.max(hi, v) end
  return {n = n, mean = m, std = n > 1 and math.sqrt(q / (n - 1)) or nil, min = lo, max = hi, values = vals}
end

-- the adoption test: does the best value beat the runner-up by more than seed noise?
local function adoption(groups, mode)
  local ranked = {}
  for _, g in ipairs(groups) do if g.best then ranked[#ranked + 1] = g end end
  table.sort(ranked, function(a, b) return better(a.best.value, b.best.value, mode) end)
  if #ranked < 2 then return nil end
  local a, b = ranked[1], ranked[2]
  local ad = {best = a.label, runner_up = b.label}
  if a.seeds and b.seeds and a.seeds.std and b.seeds.std then
    ad.difference = math.abs(a.seeds.mean - b.seeds.mean)
    ad.noise = math.sqrt(a.seeds.std ^ 2 / a.seeds.n + b.seeds.std ^ 2 / b.seeds.n)
    ad.exceeds = ad.difference > 2 * ad.noise and better(a.seeds.mean, b.seeds.mean, mode)
    ad.message = string.format("%s vs %s: difference of seed means %.4g, %s 2 x its standard error %.4g",
      a.label, b.label, ad.difference, ad.exceeds and "exceeds" or "does not exceed", 2 * ad.noise)
  else
    ad.message = string.format("%s vs %s: no seed re-runs (seeds >= 2 measure the trial-to-trial noise)",
      a.label, b.label)
  end
  return ad
end

--- dl.study_results(dir [, {metric =, mode =, aggregate = "best" | "final"}]):
-- ranks the finished trials of a study directory from their stored histories
-- (no rerun). Returns {name, metric, mode, aggregate, trials = {...} (by id),
-- ranking = {...} (feasible trials, best first), groups = {{label, values,
-- trials, done, infeasible, best, seeds}}, best, adoption}; each trial
-- {id, group, status, value, step, hp, dir, command}; best also has checkpoint (the
-- path of its checkpoint at step, nil when its best eval has none) and kept_best
-- ({step, path}: its ledger's best checkpoint). A study of several
-- objectives (dlua.study.objectives) adds objectives = {{metric, mode}},
-- completed (its completed search trials), front = {{trial, ties}} (the Pareto
-- front of those, dlua.study.objectives.front), each group's front alike, and
-- each completed trial's values (one per objective, by the same aggregate).
function M.results(dir, opts)
  opts = util.check_options("dl.study_results", opts, {metric = "string", mode = "string", aggregate = "string"}, 2)
  local rec = json.decode(fs.read(dir .. "/study.json") or "")
  if type(rec) ~= "table" then error("dl.study_results: " .. dir .. " holds no study.json", 2) end
  local study = spec.from_record(rec)
  local metric = opts.metric or study.objective.metric
  local mode = opts.mode or (opts.metric and common.default_mode(opts.metric)) or study.objective.mode
  if mode ~= "max" and mode ~= "min" then error("dl.study_results: mode must be \"max\" or \"min\"", 2) end
  local aggregate = opts.aggregate or "best"
  if aggregate ~= "best" and aggregate ~= "final" then
    error("dl.study_results: aggregate must be \"best\" or \"final\", got " .. tostring(aggregate), 2)
  end
  local st = journal.replay(journal.open(dir):events())
  local objs = study.objectives
  local out = {name = study.name, goal = study.goal or study.description, metric = metric, mode = mode,
               aggregate = aggregate, trials = {}, groups = {}}
  for i, g in ipairs(study.groups) do
    out.groups[i] = {label = g.label, values = g.values, tag = g.tag, trials = 0, done = 0, infeasible = 0,
                     pruned = 0, seed_values = {}}
  end
  for _, id in ipairs(sorted_keys(st.trials)) do
    local f = st.trials[id].finish
    if f then
      local tdir = dir .. "/" .. id
      local value, step
      if f.status == "done" then
        value, step = M.run_metric(tdir, metric, mode, aggregate)
      end
      local values = f.status == "done" and #objs > 1 and objective_values(tdir, objs, aggregate) or nil
      local t = {id = id, group = f.group, status = f.status, value = value, step = step, hp = f.hp, values = values,
                 nuisance = f.nuisance, dir = tdir, command = plan.command(study, f.hp or {}), kind = f.kind,
                 message = f.message, base = f.base, u = f.u}
      out.trials[#out.trials + 1] = t
      local g = out.groups[f.group]
      if g then
        if t.kind == "seed" then
          if value then g.seed_values[#g.seed_values + 1] = value end
        else
          g.trials = g.trials + 1
          if f.status == "done" and value ~= nil then
            g.done = g.done + 1
            if not g.best or better(value, g.best.value, mode) then g.best = t end
          elseif f.status == "pruned" then
            g.pruned = g.pruned + 1
            t.value, t.step = f.value, f.step          -- the objective where it was stopped
          else
            g.infeasible = g.infeasible + 1
          end
        end
      end
    end
  end
  -- every feasible trial, best first (ties: by id)
  out.ranking = {}
  for _, t in ipairs(out.trials) do if t.value ~= nil and t.status == "done" then out.ranking[#out.ranking + 1] = t end end
  table.sort(out.ranking, function(a, b)
    if a.value == b.value then return a.id < b.id end
    return better(a.value, b.value, mode)
  end)
  local hist = {}
  for _, t in ipairs(out.trials) do
    if t.kind ~= "seed" and t.u and t.status == "done" and t.value ~= nil and out.groups[t.group] then
      hist[t.group] = hist[t.group] or {}
      table.insert(hist[t.group], {u = t.u, value = t.value})
    end
  end
  for i, g in ipairs(out.groups) do
    g.importance = hist[i] and group_importance(study.space, hist[i], g.values) or nil
    g.seeds = mean_std(g.seed_values)
    if g.best and (not out.best or better(g.best.value, out.best.value, mode)) then out.best = g.best end
  end
  if out.best then out.best.checkpoint, out.best.kept_best = M.checkpoint_at(out.best.dir, out.best.step) end
  if #objs > 1 then
    out.objectives, out.completed = objs, 0
    local all, per = {}, {}
    for _, t in ipairs(out.trials) do
      if t.values and t.kind ~= "seed" and out.groups[t.group] then
        all[#all + 1] = t
        per[t.group] = per[t.group] or {}
        table.insert(per[t.group], t)
      end
    end
    out.completed, out.front = #all, objectives.front(all, objs)
    for i, g in ipairs(out.groups) do g.front = objectives.front(per[i] or {}, objs) end
  end
  out.adoption = adoption(out.groups, mode)
  out.pruned = 0
  for _, g in ipairs(out.groups) do out.pruned = out.pruned + g.pruned end
  out.prune = study.prune
  out.warnings = {}
  if out.pruned > 0 then out.warnings[#out.warnings + 1] = prune.exploration_warning(study) end
  return out
end

local function short_hp(t)
  local parts = {}
  for _, k in ipairs(sorted_keys(t.nuisance or {})) do
    local v = t.nuisance[k]
    parts[#parts + 1] = k .. "=" .. util.fmt4(v)
  end
  if t.kind == "seed" or (t.hp and t.hp.seed) then parts[#parts + 1] = "seed=" .. tostring(t.hp.seed) end
  return table.concat(parts, " ")
end

--- format_results(res) -> the results of dl.study_results as a printed table.
function M.format_results(res)
  local lines = {}
  lines[#lines + 1] = string.format("study %s%s", res.name, res.goal and (": " .. res.goal) or "")
  lines[#lines + 1] = string.format("best trial per scientific value by %s (%s over evals, %s)", res.metric,
    res.aggregate, res.mode)
  lines[#lines + 1] = string.format("  %-24s %6s %10s %10s %6s  %-28s %s", "scientific", "trials", "infeasible",
    "best", "step", "trial", "nuisance")
  for _, g in ipairs(res.groups) do
    local b = g.best
    lines[#lines + 1] = string.format("  %-24s %6d %10d %10s %6s  %-28s %s", g.label, g.trials, g.infeasible,
      b and util.fmt_metric(b.value) or "-", b and tostring(b.step) or "-", b and b.id or "-",
      b and short_hp(b) or "")
    if g.seeds then
      local f = util.fmt_metric
      lines[#lines + 1] = string.format("  %-24s seeds: n %d, mean %s, std %s, min %s, max %s", "", g.seeds.n,
        f(g.seeds.mean), g.seeds.std and f(g.seeds.std) or "-", f(g.seeds.min), f(g.seeds.max))
    end
  end
  for _, g in ipairs(res.groups) do
    if g.importance then
      lines[#lines + 1] = string.format("importance (%s)%s: %s", search.importance_method,
        #res.groups > 1 and (" " .. g.label) or "", M.format_importance(g.importance))
    end
  end
  if res.pruned and res.pruned > 0 then
    local parts = {}
    for _, g in ipairs(res.groups) do parts[#parts + 1] = string.format("%s %d of %d", g.label, g.pruned, g.trials) end
    lines[#lines + 1] = string.format("pruned (%s): %s", res.prune and res.prune.algorithm or "?",
      table.concat(parts, ", "))
  end
  if res.front then
    for _, l in ipairs(objectives.format_front(res, short_hp)) do lines[#lines + 1] = l end
  end
  for _, w in ipairs(res.warnings or {}) do lines[#lines + 1] = "warning: " .. w end
  if res.adoption then lines[#lines + 1] = "adoption: " .. res.adoption.message end
  if res.best then
    lines[#lines + 1] = "reproduce the best trial: " .. res.best.command
    local b = res.best
    if b.checkpoint then
      lines[#lines + 1] = string.format("its checkpoint at step %s: %s", tostring(b.step), b.checkpoint)
    else
      lines[#lines + 1] = string.format("its best eval (step %s) has no checkpoint%s", tostring(b.step),
        b.kept_best and string.format("; its best kept checkpoint is step %s: %s", tostring(b.kept_best.step),
          b.kept_best.path) or "")
    end
  end
  return table.concat(lines, "\n")
end

--- complete(study, dir, opts): once per completion, the study's results.json and
-- its row in <opts.root or the parent of dir>/studies.csv.
function M.complete(study, dir, opts)
  local res = M.results(dir)
  local groups = {}
  for i, x in ipairs(res.groups) do
    local front
    for _, e in ipairs(x.front or {}) do front = front or {}; front[#front + 1] = e.trial.id end
    groups[i] = {label = x.label, values = x.values, trials = x.trials, infeasible = x.infeasible, pruned = x.pruned,
                 importance = x.importance, front = front and json.array(front),
                 best = x.best and {id = x.best.id, value = x.best.value, step = x.best.step, hp = x.best.hp} or nil,
                 seeds = x.seeds}
  end
  fs.write_atomic(dir .. "/results.json", json.encode({
    metric = res.metric, mode = res.mode, best = res.best and {id = res.best.id, value = res.best.value,
    step = res.best.step, command = res.best.command, checkpoint = res.best.checkpoint or false,
    kept_best = res.best.kept_best} or nil, groups = groups, adoption = res.adoption,
    pruned = res.pruned, prune = res.prune, importance_method = search.importance_method, warnings = json.array(res.warnings), objectives = res.objectives,
    completed = res.completed, front = res.front and json.array(objectives.record(res.front))}) .. "\n")
  local root = opts.root or fs.dirname(dir)
  track.append(root .. "/studies.csv", {
    name = study.name, config = study.script or "", description = study.goal or study.description or "",
    trials = #res.trials, best_metric = res.metric, best_value = res.best and fmtv(res.best.value) or "",
    best_step = res.best and res.best.step or "", status = res.best and "done" or "no feasible trial",
    dir = res.best and res.best.dir or dir, command = res.best and res.best.command or "",
  })
end

return M
