--- dlua.study.prune: stopping trials early, judged inside each trial at each of
-- its evals (as Optuna's trial.should_prune()): the agent starts a search trial
-- with `--prune FILE` (the settings below, written into the trial's directory),
-- the runner turns FILE into dl.train's on_eval hook (M.judge), and at every
-- eval the hook takes the journal's lock, replays it and applies the rule to the
-- trial's objective so far against the trials completed by then. A study with
-- one trial at a time therefore prunes the same trials at the same steps on
-- every run, and a trial too fast for any poll is judged too. Three rules, all
-- within one scientific value (trials of another value are never compared):
--
--   prune = {algorithm = "median", warmup = 10, min_trials = 3}
--     a trial whose best objective so far, at an eval step after `warmup` steps,
--     is worse than the median of the completed trials' best up to that same step
--     (at least `min_trials` of them evaluated there) is stopped: status `pruned`.
--   prune = {algorithm = "asha", min_steps = 10, reduction = 3}
--     successive halving: rungs at min_steps * reduction^k steps below the trials'
--     step budget. A trial reaching a rung continues when its objective there is
--     among the best max(1, floor(n / reduction)) of the n trials there so far
--     (it and the trials before it, in trial order: M.continues), so with one
--     trial at a time trials complete. With pause = true, the original
--     asynchronous rule: top floor(n / reduction) of the trials recorded there,
--     otherwise paused (checkpoints kept); a paused trial that later is in that
--     top part is promoted before any new trial starts: it resumes from its
--     checkpoint (--resume) and ends bit-identical to a trial never paused.
--   prune = {algorithm = "hyperband", min_steps = 10, reduction = 3, budget = 1/3}
--     Hyperband: asha brackets whose first rungs are min_steps * reduction^b, the
--     paper's trial counts with the conservative brackets' scaled down until the
--     expected steps are within `budget` of the unpruned ones (M.brackets); a
--     trial's bracket is a function of its number (M.bracket_list), and asha's
--     rule applies within the bracket.
--   model = "rungs" (asha, hyperband; bayes studies): the GP fits the rungs'
--     values (dlua.study.fidelity), BOHB-like.
-- Without pause a decision waits for the trials before it (same rungs) that are
-- still running below the rung, so it is a function of the recorded values in
-- trial order, whatever the number of jobs.
--
-- A decision is journal events written by the trial under the lock (finish with
-- status "pruned" and, for asha and hyperband, "rung"; with pause the agent writes
-- "promote"), after which
-- the trial checkpoints and ends (dl.train's status "stopped"); the agent finds
-- the finish already written. Decisions survive a SIGKILL of the agent; seed
-- re-runs are never pruned. Pruning is for exploitation: exploration
-- (quasirandom, random, grid) needs complete trials (playbook 2.2), and the study
-- says so when one prunes.
local util = require "dlua.util"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local algorithms = require "dlua.search.algorithms"
local core = require "dlua.core"
local common = require "dlua.study.common"
local journal = require "dlua.study.journal"
local plan = require "dlua.study.plan"

local M = {}

local better = common.better

--- The keys of the prune table (dl.study's option check).
M.SPEC = {algorithm = true, budget = true, warmup = true, min_steps = true, min_trials = true, model = true,
          pause = true, reduction = true}

--- The rules, and the keys that belong to each (M.check refuses the others').
M.RULES = {median = {warmup = true, min_trials = true},
           asha = {min_steps = true, reduction = true, pause = true, model = true},
           hyperband = {min_steps = true, reduction = true, model = true, budget = true}}

--- hyperband's default budget: the expected steps of its trials, as a fraction of
-- the same trials run unpruned (issue 35's target; budget = 1 is the paper's
-- Hyperband, about half for 3 brackets).
M.BUDGET = 1 / 3

--- The bayes GP's observations of a pruned study (prune.model; dlua.study.fidelity).
M.MODELS = {final = true, rungs = true}

--- The warning of a study that prunes while exploring (nil when it does not): a
-- non-adaptive algorithm (its row in dlua.search.algorithms) explores.
function M.exploration_warning(study)
  local row = algorithms.ALGORITHMS[study.algorithm]
  if not study.prune or not row or row.adaptive then return nil end
  return string.format("the %s study prunes trials (%s): an exploration study needs complete trials to show " ..
    "which hyperparameters matter (playbook 2.2, FAQ 'why quasi-random search'); prune in the exploitation " ..
    "(bayes) phase", study.algorithm, study.prune.algorithm)
end

--- check(p, study, fail, warn) -> the prune settings as plain data:
-- {algorithm, warmup, min_trials} (median), {algorithm, min_steps, reduction,
-- pause, model, rungs} (asha) or {algorithm, min_steps, reduction, model,
-- budget, brackets} (hyperband). fail(msg) raises; warn(msg) keeps a warning.
function M.check(p, study, fail, warn)
  if type(p) ~= "table" then fail("dl.study: prune must be a table, e.g. {algorithm = \"median\"}") end
  local alg = p.algorithm
  local rule = type(alg) == "string" and M.RULES[alg]
  if not rule then
    local near = type(alg) == "string" and util.nearest(alg, util.sorted_keys(M.RULES))
    fail(string.format("dl.study: prune.algorithm must be \"asha\", \"hyperband\" or \"median\", got %s%s",
      tostring(alg), near and ("; did you mean '" .. near .. "'?") or ""))
  end
  for _, k in ipairs(util.sorted_keys(M.SPEC)) do
    if k ~= "algorithm" and p[k] ~= nil and not rule[k] then
      local owners = {}
      for _, a in ipairs(util.sorted_keys(M.RULES)) do if M.RULES[a][k] then owners[#owners + 1] = a end end
      fail(string.format("dl.study: prune.%s belongs to %s, not %s", k, table.concat(owners, " and "), alg))
    end
  end
  local function int(key, min, default)
    local v = p[key]
    if v == nil then return default end
    local why, n = util.integer_problem(v, min)
    if why then fail(string.format("dl.study: prune.%s %s", key, why)) end
    return n
  end
  local out = {algorithm = alg}
  if alg == "median" then
    out.warmup, out.min_trials = int("warmup", 0, 0), int("min_trials", 1, 3)
    local max = study.max_steps
    if max and out.warmup >= max then           -- judged only after warmup steps: never
      fail(string.format("dl.study: prune.warmup = %d is not below the step budget %d: no trial is ever judged",
        out.warmup, max))
    end
  else
    out.min_steps = int("min_steps", 1, nil)
    if not out.min_steps then
      fail(string.format("dl.study: prune.min_steps is required for %s (the first rung's steps)", alg))
    end
    local r = p.reduction == nil and 3 or p.reduction
    if not util.finite(r) or r <= 1 then
      fail("dl.study: prune.reduction must be a finite number > 1, got " .. tostring(p.reduction))
    end
    out.reduction = r
    if p.pause ~= nil and type(p.pause) ~= "boolean" then
      fail("dl.study: prune.pause must be a boolean, got " .. tostring(p.pause))
    end
    if alg == "asha" then out.pause = p.pause == true end
    if alg == "hyperband" then
      local b = p.budget == nil and M.BUDGET or p.budget
      if type(b) ~= "number" or not (b > 0 and b <= 1) then
        fail("dl.study: prune.budget must be a number in (0, 1] (the fraction of the unpruned trials' steps " ..
          "hyperband may expect to spend), got " .. tostring(p.budget))
      end
      out.budget = b
    end
    local model = p.model == nil and "final" or p.model
    if not M.MODELS[model] then
      local near = type(model) == "string" and util.nearest(model, util.sorted_keys(M.MODELS))
      fail(string.format("dl.study: prune.model must be \"final\" or \"rungs\", got %s%s", tostring(model),
        near and ("; did you mean '" .. near .. "'?") or ""))
    end
    if model == "rungs" and study.algorithm ~= "bayes" then
      fail(string.format("dl.study: prune.model = \"rungs\" is the bayes sampler's (its GP fits the rungs' " ..
        "values), and this study's algorithm is %s", tostring(study.algorithm)))
    end
    out.model = model
    local max = study.max_steps
    if not max then fail(string.format("dl.study: prune %s needs the trials' step budget (steps = N in the study)", alg)) end
    local rungs = M.rungs(out, max)
    if #rungs == 0 then
      fail(string.format("dl.study: prune.min_steps = %d is not below the step budget %d: no rung", out.min_steps, max))
    end
    if alg == "asha" then out.rungs = rungs else out.brackets = M.brackets(out, max, study.trials) end
  end
  local w = M.exploration_warning({prune = out, algorithm = study.algorithm})
  if w then warn(w) end
  return out
end

--- rungs(p, max) -> the asha rungs' step budgets: p.min_steps * p.reduction^k
-- (rounded) below max.
function M.rungs(p, max)
  local rungs, s = json.array(), p.min_steps
  while s < max do
    rungs[#rungs + 1] = math.floor(s + 0.5)
    s = s * p.reduction
  end
  return rungs
end

-- the expected number of m trials (m may be fractional) that continue at a rung
-- under M.continues, one at a time in a random order: the j-th continues when its
-- rank among the j so far is within max(1, floor(j / reduction))
local function survivors(m, reduction)
  local out, j = 0, 1
  while j <= m do
    out = out + math.max(1, math.floor(j / reduction)) / j
    j = j + 1
  end
  if m > j - 1 then out = out + (m - (j - 1)) * math.max(1, math.floor(j / reduction)) / j end
  return out
end

--- cost(rungs, reduction, max[, m]) -> the expected steps of the trials of an
-- asha ladder, as a fraction of running them unpruned to max. With m (the number
-- of trials on the ladder) the survivors of each rung are those M.continues lets
-- through one at a time in a random order (the first trials at a rung continue
-- while each is the best so far, so a short ladder prunes little); without it a
-- 1/reduction share of each rung's trials continues (synchronous successive
-- halving, the limit of many trials).
function M.cost(rungs, reduction, max, m)
  local steps, alive, at = 0, m or 1, 0
  for _, r in ipairs(rungs) do
    steps, at = steps + alive * (r - at), r
    alive = m and survivors(alive, reduction) or alive / reduction
  end
  return (steps + alive * (max - at)) / (max * (m or 1))
end

--- brackets(p, max[, trials]) -> hyperband's brackets, most aggressive first.
-- There are n = floor(log_reduction(max / min_steps)) + 1 candidates; candidate b
-- (1-based) is an asha whose first rung is min_steps * reduction^(b-1) (its rungs:
-- those below max; the last one may have none and run its trials to the end),
-- with Hyperband's trial count n_s = ceil(n * reduction^s / (s + 1)), s = n - b
-- (the paper's allocation, which gives every bracket about the same steps;
-- Optuna's HyperbandPruner allocates the same). Those counts spend about half of
-- the unpruned steps with 3 brackets: the conservative brackets cost as much as
-- the aggressive one. So the counts of brackets 2..n are scaled by one factor
-- lambda in [0, 1], the largest (bisection) whose expected cost is within
-- p.budget (the fraction of the unpruned steps): bracket 1's weight is 10 * n_1,
-- bracket b's floor(10 * lambda * n_s) (integers, so every process splits trials
-- alike), and the cost is sum_b m_b * cost(b, m_b) / trials, m_b the trials
-- M.bracket_list gives bracket b of `trials` (without trials: the shares and
-- the many-trials cost). A bracket of weight 0 is left out; a budget below
-- bracket 1's own cost leaves bracket 1 alone (asha); budget = 1 keeps every
-- bracket at the paper's count. Each bracket: {rungs, weight, cost} (cost at m_b).
function M.brackets(p, max, trials)
  local n, s = 0, p.min_steps
  while math.floor(s + 0.5) <= max do n, s = n + 1, s * p.reduction end
  local cand = {}
  for b = 1, n do
    local sb = n - b
    cand[b] = {rungs = M.rungs({min_steps = p.min_steps * p.reduction ^ (b - 1), reduction = p.reduction}, max),
               ns = math.ceil(n * p.reduction ^ sb / (sb + 1) - 1e-9)}
  end
  local function build(lambda)
    local list = json.array()
    for b = 1, n do
      local w = b == 1 and 10 * cand[b].ns or math.floor(10 * lambda * cand[b].ns + 1e-9)
      if w > 0 then list[#list + 1] = {rungs = cand[b].rungs, weight = w} end
    end
    local m, total, cost = {}, 0, 0
    for b, br in ipairs(list) do m[b], total = trials and 0 or br.weight, total + br.weight end
    if trials then for _, b in ipairs(M.bracket_list(list, trials)) do m[b] = m[b] + 1 end end
    for b, br in ipairs(list) do
      br.cost = M.cost(br.rungs, p.reduction, max, trials and m[b] or nil)
      cost = cost + m[b] * br.cost
    end
    return list, cost / (trials or total)
  end
  local budget = p.budget or 1
  local list, cost = build(1)
  if cost <= budget + 1e-12 then return list end
  local lo, hi = 0, 1
  for _ = 1, 40 do
    local mid = (lo + hi) / 2
    local _, c = build(mid)
    if c <= budget + 1e-12 then lo = mid else hi = mid end
  end
  return (build(lo))
end

--- bracket_list(brackets, n) -> the brackets of trials 1..n: trial i's bracket is
-- a function of i alone (smooth weighted round robin over the weights: every
-- prefix of trials is split between the brackets as close to their weights as
-- whole trials allow, most aggressive bracket first).
function M.bracket_list(brackets, n)
  local cur, total, out = {}, 0, {}
  for b, br in ipairs(brackets) do cur[b], total = 0, total + br.weight end
  for i = 1, n do
    local best
    for b, br in ipairs(brackets) do
      cur[b] = cur[b] + br.weight
      if not best or cur[b] > cur[best] then best = b end
    end
    cur[best] = cur[best] - total
    out[i] = best
  end
  return out
end

--- ladder(p, number) -> the rungs of search trial `number` (its number in its
-- group, 1-based) and its hyperband bracket (nil for asha).
function M.ladder(p, number)
  if p.algorithm ~= "hyperband" then return p.rungs, nil end
  local b = M.bracket_list(p.brackets, number)[number]
  return p.brackets[b].rungs, b
end

--- peers(p, number) -> the numbers of the trials before trial `number` in its
-- group that share its rungs (asha: all; hyperband: its bracket's).
function M.peers(p, number)
  local out = {}
  local list = p.algorithm == "hyperband" and M.bracket_list(p.brackets, number) or nil
  for i = 1, number - 1 do
    if not list or list[i] == list[number] then out[#out + 1] = i end
  end
  return out
end

--- curve(dir, metric) -> {{step, value}, ...}: the objective at every eval of
-- the run directory dir, by step (a NaN is left out; a step logged twice keeps
-- its last value).
function M.curve(dir, metric)
  local split, field = "eval", metric
  local tm = metric:match("^train/(.+)$")
  if tm then split, field = "train", tm end
  local by, steps = {}, {}
  for line in (fs.read(dir .. "/metrics.jsonl") or ""):gmatch("[^\n]+") do
    local e = json.decode(line)
    if type(e) == "table" and e.split == split and math.type(e.step) == "integer" then
      local v = e[field]
      if type(v) == "number" and v == v then
        if by[e.step] == nil then steps[#steps + 1] = e.step end
        by[e.step] = v
      end
    end
  end
  table.sort(steps)
  local out = json.array()
  for i, s in ipairs(steps) do out[i] = json.array({s, by[s]}) end
  return out
end

-- the best value of curve over its evals up to step (by mode), or nil when it
-- has no eval at step
local function best_until(curve, step, mode)
  local best, seen
  for _, p in ipairs(curve or {}) do
    if p[1] > step then break end
    if best == nil or better(p[2], best, mode) then best = p[2] end
    if p[1] == step then seen = true end
  end
  return seen and best or nil
end

--- median(values) -> the median of a non-empty list of numbers.
function M.median(vals)
  local s = util.copy(vals)
  table.sort(s)
  local n = #s
  if n % 2 == 1 then return s[(n + 1) // 2] end
  return (s[n // 2] + s[n // 2 + 1]) / 2
end

--- median_rule(p, mode, curve, completed, from) -> nil, or {step, value, median,
-- n}: the first eval step of curve after from (and after p.warmup) where the
-- trial's best objective so far is worse than the median of the completed
-- curves' best values up to that step (those with an eval there, at least
-- p.min_trials of them). Best so far, as a trial's value is its best eval (the
-- study's ranking, the retrospective checkpoint): one bad eval after good ones
-- does not stop a trial (Optuna's median pruner judges the best so far too).
-- Curves are in step order.
function M.median_rule(p, mode, curve, completed, from)
  for _, pt in ipairs(curve) do
    local step = pt[1]
    if step > (from or -1) and step > p.warmup then
      local v = best_until(curve, step, mode)
      local vals = {}
      for _, c in ipairs(completed) do
        local x = best_until(c, step, mode)
        if x ~= nil then vals[#vals + 1] = x end
      end
      if #vals >= p.min_trials then
        local m = M.median(vals)
        if better(m, v, mode) and m ~= v then return {step = step, value = v, median = m, n = #vals} end
      end
    end
  end
end

--- rung_value(curve, budget) -> the objective and its step at the last eval at or
-- before the rung's step budget, once the curve has an eval at or past it (else
-- nil); when no eval lies at or before the rung (evals sparser than the first
-- rung: eval_every 400, min_steps 200), the first eval past it, so the rung is
-- judged late rather than never.
function M.rung_value(curve, budget)
  local last = curve[#curve]
  if not last or last[1] < budget then return nil end
  local v, s
  for _, pt in ipairs(curve) do if pt[1] <= budget then v, s = pt[2], pt[1] end end
  if v == nil then
    for _, pt in ipairs(curve) do if pt[1] >= budget then return pt[2], pt[1] end end
  end
  return v, s
end

--- continues(before, value, reduction, mode) -> does a trial whose objective at a
-- rung is value continue, given the values there of the trials before it (in
-- trial order, same rungs)? Of the n = #before + 1 values, it must be among the
-- best max(1, floor(n / reduction)): fewer than that many are strictly better.
-- So the first trials at a rung continue while each is the best so far, and with
-- one trial at a time trials run to the end (Optuna's SuccessiveHalvingPruner
-- decides the same way).
function M.continues(before, value, reduction, mode)
  local k = math.max(1, math.floor((#before + 1) / reduction))
  local ahead = 0
  for _, v in ipairs(before) do if v ~= value and better(v, value, mode) then ahead = ahead + 1 end end
  return ahead < k
end

--- in_top(records, id, reduction, mode) -> is trial id among the best
-- floor(#records / reduction) of the rung's records {trial, value} (ties: by id)?
function M.in_top(records, id, reduction, mode)
  local list = util.copy(records)
  table.sort(list, function(a, b)
    if a.value == b.value then return a.trial < b.trial end
    return better(a.value, b.value, mode)
  end)
  local k = math.floor(#list / reduction)
  for i = 1, k do if list[i].trial == id then return true end end
  return false
end

--- promotable(study, st, group) -> the ids of paused trials (of group, or of every
-- group when nil) that the asha rule now promotes, best first within each rung,
-- top rung first.
function M.promotable(study, st, group)
  local p = study.prune
  if not p or not p.pause then return {} end
  local out = {}
  for k = #p.rungs, 1, -1 do
    for gi, records in pairs(st.rungs[k] or {}) do
      if group == nil or group == gi then
        for _, r in ipairs(records) do
          local t = st.trials[r.trial]
          local f = t and t.finish
          if f and f.status == "pruned" and f.rung == k and M.in_top(records, r.trial, p.reduction, study.objective.mode)
          then
            out[#out + 1] = r.trial
          end
        end
      end
    end
  end
  return out
end

--------------------------------------------------------- judged in the trial

-- the values at rung k of the trials before tr that share its rungs (tr.peers:
-- their ids), in trial order; or nil when one of them is still running below the
-- rung (its lease alive): the decision waits for it, so it does not depend on
-- which trial got there first. A peer that ended before the rung, or is not
-- running (never claimed, or its agent gone), does not compete.
local function before_at(st, tr, k, bracket)
  local by = {}
  for _, r in ipairs((st.rungs[k] or {})[tr.group] or {}) do
    if r.bracket == bracket then by[r.trial] = r.value end
  end
  local out, now = {}, os.time()
  for _, id in ipairs(tr.peers or {}) do
    local s = st.trials[id]
    if by[id] ~= nil then out[#out + 1] = by[id]
    elseif s and s.running and (s.lease_until or 0) >= now then return nil end
  end
  return out
end

-- the rule on trial tr's curve (tr: {trial, group, number, peers, from: the
-- median rule's last judged step, its evals up to it not judged again}; the journal
-- events under the lock, append writes one): nil, {wait = true}, or the decision
-- {step, value, message[, rung]}; asha and hyperband append a rung event for each
-- rung newly reached
local function decide(p, objective, tr, curve, events, append)
  local st = journal.replay(events)
  local mode, metric = objective.mode, objective.metric
  if p.algorithm == "median" then
    local done = {}
    for _, x in pairs(st.trials) do
      local f = x.finish
      if f and f.status == "done" and f.group == tr.group and f.kind ~= "seed" and f.curve then
        done[#done + 1] = f.curve
      end
    end
    local m = M.median_rule(p, mode, curve, done, tr.from)
    if m then
      return {step = m.step, value = m.value, message = string.format("pruned at step %d: %s %.6g is worse than " ..
        "the median %.6g of %d completed trial(s)", m.step, metric, m.value, m.median, m.n)}
    end
    return nil
  end
  local s = st.trials[tr.trial]
  local rungs, bracket = M.ladder(p, tr.number or 1)
  for k, budget in ipairs(rungs) do
    if not (s.rungs and s.rungs[k]) then
      local v, vs = M.rung_value(curve, budget)
      if v == nil then break end
      local before = not p.pause and before_at(st, tr, k, bracket)
      if not p.pause and not before then return {wait = true} end
      append({event = "rung", trial = tr.trial, group = tr.group, rung = k, step = vs, value = v, bracket = bracket})
      local stop
      if p.pause then
        local records = journal.replay(events).rungs[k][tr.group]
        stop = not M.in_top(records, tr.trial, p.reduction, mode) and string.format("paused at rung %d (%d steps): " ..
          "%s %.6g is not in the top 1/%g of the %d trial(s) there", k, budget, metric, v, p.reduction, #records)
      elseif not M.continues(before, v, p.reduction, mode) then
        stop = string.format("pruned at rung %d (%d steps%s): %s %.6g is not in the top max(1, floor(%d/%g)) of " ..
          "the trials there so far", k, budget, bracket and (", bracket " .. bracket) or "", metric, v, #before + 1,
          p.reduction)
      end
      if stop then return {step = vs, value = v, rung = k, message = stop} end
      s.rungs = s.rungs or {}
      s.rungs[k] = true
    end
  end
end

--- trial_settings(study_dir, record, study) -> what a trial needs to judge itself
-- (the agent writes it as JSON into the trial's directory and passes `--prune
-- FILE`): the study directory, the trial's finish record (trial, owner, group,
-- kind, dir, hp, number, ...: the fields of its finish event the agent knows), the
-- objective, the prune settings and, for asha without pause and hyperband, the
-- ids of the trials before it that share its rungs (peers).
function M.trial_settings(study_dir, record, study)
  local p, peers = study.prune, nil
  if p.algorithm ~= "median" and not p.pause and record.number then
    peers = json.array()
    for _, i in ipairs(M.peers(p, record.number)) do peers[#peers + 1] = plan.trial_id(study.groups[record.group], i) end
  end
  return {study = study_dir, record = record, prune = p, peers = peers,
          objective = {metric = study.objective.metric, mode = study.objective.mode}}
end

--- judge(path) -> on_eval, dl.train's hook for a study trial (path: the file of
-- M.trial_settings). At each eval step the hook takes the journal's lock and,
-- while the trial's claim is still its agent's, applies the rule; when the rule
-- stops the trial it writes the finish event (status "pruned") and returns the
-- reason, and dl.train checkpoints and stops. The median rule judges the
-- objective at the eval (its last value at or before the step) once; asha each
-- rung once. Returns nil (no hook) with a warning on stderr when the study's
-- journal is not reachable from this process (an MPI rank on a host without the
-- study's file system): that trial runs to its end.
function M.judge(path)
  local cfg = json.decode(fs.read(path) or "")
  local rec = type(cfg) == "table" and cfg.record
  if type(rec) ~= "table" or type(cfg.study) ~= "string" or type(cfg.prune) ~= "table" or
     type(cfg.objective) ~= "table" or type(rec.trial) ~= "string" or type(rec.dir) ~= "string" then
    error("--prune: " .. path .. " is not a study trial's pruning settings (dlua.study.prune.trial_settings)", 0)
  end
  local j = journal.open(cfg.study)
  if not fs.exists(j.path) then
    io.stderr:write(string.format("dlua: warning: --prune: the study's journal %s is not reachable from here; " ..
      "this trial is not judged and runs to its end\n", j.path))
    return nil
  end
  local p, objective, t0, judged = cfg.prune, cfg.objective, core.clock(), nil
  local hook
  function hook(step)
    local curve, cur = json.array(), nil
    for _, pt in ipairs(M.curve(rec.dir, objective.metric)) do
      if pt[1] <= step then curve[#curve + 1] = pt; cur = pt end
    end
    if not cur or (p.algorithm == "median" and judged and cur[1] <= judged) then return nil end
    local before = judged
    judged = cur[1]
    local tr = {trial = rec.trial, group = rec.group, number = rec.number, peers = cfg.peers, from = before}
    local d = j:locked(function(events, append)
      local s = journal.replay(events).trials[rec.trial]
      if not s or s.owner ~= rec.owner or not s.running then return nil end   -- the claim passed on
      local d = decide(p, objective, tr, curve, events, append)
      if d and not d.wait then
        local e = util.copy(rec)
        e.event, e.status, e.value, e.step, e.steps = "finish", "pruned", d.value, d.step, step
        e.wall, e.message, e.rung, e.curve = core.clock() - t0, d.message, d.rung, curve
        append(e)
      end
      return d
    end)
    if d and d.wait then                       -- a peer is still below the rung: ask again shortly
      util.sleep(0.2)
      return hook(step)
    end
    return d and d.message or nil
  end
  return hook
end

return M
