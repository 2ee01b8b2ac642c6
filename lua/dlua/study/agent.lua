--- dlua.study.agent: the agent that runs a study's trials. It claims the next
-- unfinished trial in the journal (under its lock), starts it (several at a
-- time; a search trial of a pruned study with --prune, so that it judges itself
-- at its evals: dlua.study.prune), renews its leases while they run, records
-- each outcome (a pruned trial records its own), rewrites
-- trials.csv, and completes the study once every planned trial settled. Agents
-- in other processes or on other hosts share a study through the journal; a
-- trial whose owner died (same host: its pid is gone; other hosts: its lease
-- expired) is claimed again. A first SIGINT or SIGTERM stops new claims, is
-- forwarded to the running trials (each checkpoints and exits) and records them
-- as "interrupted": not final, so the next session resumes them (agent.interrupted
-- then names the signal; the caller exits 130 / 143).
local core = require "dlua.core"
local util = require "dlua.util"
local proc = require "dlua.util.proc"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local track = require "dlua.train.track"
local progress = require "dlua.train.progress"
local algorithms = require "dlua.search.algorithms"
local gp = require "dlua.search.gp"
local ehvi = require "dlua.search.ehvi"
local common = require "dlua.study.common"
local journal = require "dlua.study.journal"
local launch = require "dlua.study.launch"
local plan = require "dlua.study.plan"
local results = require "dlua.study.results"
local warm = require "dlua.study.warm"
local prune = require "dlua.study.prune"
local fidelity = require "dlua.study.fidelity"
local objectives = require "dlua.study.objectives"

local M = {}

local sorted_keys, fmtv, better = util.sorted_keys, common.format_value, common.better
local replay, FINAL = journal.replay, journal.FINAL

local Agent = {}
Agent.__index = Agent

--- new(study, dir, opts) -> an agent of the study in directory dir. opts: jobs
-- (trials at a time, default 1), trials (per scientific value, default the
-- study's), count (at most this many trials), wait (also wait for trials other
-- agents hold), lease (seconds, default 60), threads (per trial, default cores /
-- jobs), exe, quiet, poll (seconds between polls), root (of studies.csv), launch
-- (the function that starts a trial; dlua.study.launch's by default).
function M.new(study, dir, opts)
  local pid = util.getpid()
  local host = util.hostname()
  local self = setmetatable({
    study = study, dir = dir, journal = journal.open(dir), opts = opts, pid = pid, host = host,
    owner = string.format("%s:%s:%d", host, tostring(pid), math.floor(core.clock() * 1e6) % 1000000),
    lease = opts.lease or 60, jobs = opts.jobs or 1, count = opts.count, wait = opts.wait,
    quiet = opts.quiet, exe = opts.exe, running = {}, started = 0, ran = {}, n = opts.trials or study.trials,
  }, Agent)
  self.threads = opts.threads or math.max(1, util.cores() // self.jobs)
  self.sprog = progress.study{total = 0, jobs = self.jobs, metric = study.objective.metric}
  if study.warm_start then
    local used, skipped, reasons
    self.warm, used, skipped, reasons = warm.history(study, study.warm_start)
    self:say("%s", warm.describe(study.warm_start, used, skipped, reasons))
  end
  return self
end

function Agent:say(fmt, ...)
  if not self.quiet then io.stdout:write(string.format("[%s] " .. fmt, self.study.name, ...), "\n"); io.stdout:flush() end
end

-- a trial is held when its latest claim is unfinished and its owner lives
-- (same host: the process exists; other hosts: the lease has not expired).
-- Returns "free", "held" or "wait" (a dead owner's trial process still runs).
function Agent:holder_state(t, now)
  if not t or not t.running then return "free" end
  if t.owner == self.owner then return "held" end
  if t.host == self.host and t.pid then
    if launch.pid_alive(t.pid) and t.lease_until >= now then return "held" end
    local tp = tonumber((fs.read(self.dir .. "/" .. t.id .. "/trial.pid") or ""):match("%d+"))
    if tp and launch.pid_alive(tp) then return "wait" end
    return "free"
  end
  if t.lease_until >= now then return "held" end
  return "free"
end

-- is the process of trial id (paused by its own judgement) still checkpointing
-- and ending? Ours: still in self.running; another agent's on this host: its
-- trial.pid lives. A promotion waits for it (two processes in one run directory).
-- (A paused trial of another host is promoted at once: its process ends within
-- a checkpoint's time, and no pid of another host can be asked.)
function Agent:stopping(id, s)
  for _, r in ipairs(self.running) do if r.trial.id == id then return true end end
  if not s or s.host ~= self.host then return false end
  local tp = tonumber((fs.read(self.dir .. "/" .. id .. "/trial.pid") or ""):match("%d+"))
  return tp ~= nil and launch.pid_alive(tp)
end

-- best finished trial of a group from the journal state
local function group_best(st, plan_ids, mode)
  local best
  for _, id in ipairs(plan_ids) do
    local t = st.trials[id]
    local f = t and t.finish
    if f and f.status == "done" and f.value ~= nil and (not best or better(f.value, best.value, mode)) then best = f end
  end
  return best
end

--- All trials of the study given the journal: the search plan, plus the seed
-- re-runs of each group's best trial once the group's search trials settled.
function Agent:all_trials(st, session_start)
  local study = self.study
  local trials = plan.plan(study, self.n)
  if study.seeds > 0 then
    local by_group = {}
    for _, t in ipairs(trials) do
      by_group[t.group.index] = by_group[t.group.index] or {}
      table.insert(by_group[t.group.index], t.id)
    end
    for _, g in ipairs(study.groups) do
      local rec = st.seeds[g.index]
      local base
      if rec then base = rec
      else
        local settled = true
        for _, id in ipairs(by_group[g.index] or {}) do
          local t = st.trials[id]
          local f = t and t.finish
          if not f or (not FINAL[f.status] and (t.finish_at or 0) < session_start) or t.running then settled = false end
        end
        local b = settled and group_best(st, by_group[g.index] or {}, study.objective.mode)
        if b then base = {group = g.index, base = b.trial, nuisance = b.nuisance, u = b.u, pending = true} end
      end
      if base then
        for s = 1, study.seeds do
          trials[#trials + 1] = {id = string.format("%s_seed%d", base.base, s), group = g, j = s, u = base.u,
                                 nuisance = base.nuisance, seed = (study.fixed.seed or 0) + s, kind = "seed",
                                 base = base.base, seeds_record = base.pending and base or nil}
        end
      end
    end
  end
  return trials
end

-- the trial of id among trials
local function find(trials, id)
  for _, t in ipairs(trials) do if t.id == id then return t end end
end

-- picks the next trial to run and records the claim (asha promotions first);
-- returns trial or nil, why. An adaptive trial's point is chosen after the claim,
-- outside the journal lock (Agent:choose_point).
function Agent:claim(session_start)
  local study = self.study
  local t, why, inputs = self.journal:locked(function(events, append)
    local st = replay(events)
    local now = os.time()
    local trials = self:all_trials(st, session_start)
    local function take(t, s)
      local sg = st.suggest[t.id]
      if sg then t.u, t.nuisance = sg.u, sg.nuisance end
      append({event = "claim", trial = t.id, owner = self.owner, host = self.host, pid = self.pid,
              lease_until = now + self.lease, attempt = (s and s.claims or 0) + 1})
      return t, nil, (not t.nuisance) and self:bayes_inputs(t, st, trials) or nil
    end
    local why = "none"
    for _, id in ipairs(prune.promotable(study, st)) do
      local t = find(trials, id)
      if t and self:holder_state(st.trials[id], now) == "free" then
        if self:stopping(id, st.trials[id]) then
          return nil, "wait"                     -- promotions first: no new trial meanwhile
        else
          append({event = "promote", trial = id, rung = st.trials[id].finish.rung})
          t.promoted = true
          return take(t, st.trials[id])
        end
      end
    end
    for _, t in ipairs(trials) do
      local s = st.trials[t.id]
      local f = s and s.finish
      local todo = not f or (not FINAL[f.status] and s.finish_at < session_start)
      if todo then
        local h = self:holder_state(s, now)
        if h == "free" then
          if t.seeds_record then
            local r = t.seeds_record
            append({event = "seeds", group = r.group, base = r.base, nuisance = r.nuisance, u = r.u})
          end
          return take(t, s)
        elseif h == "wait" then why = "wait"
        elseif why ~= "wait" then why = "held" end
      end
    end
    return nil, why
  end)
  if t and inputs then
    if not self:choose_point(t, inputs) then return nil, "held" end
  end
  return t, why
end

-- the GP's warm start of a group: dir/gp/<group tag>.json (util.fs.write_atomic)
function Agent:theta_path(group) return string.format("%s/gp/%s.json", self.dir, group.tag) end

-- the GP's warm start saved at path when it has the n numbers this study's fit takes; a
-- file of another shape (written by another version, or damaged) is not used, and
-- the agent says so once: the fit then starts cold (the GP refuses a theta of another length)
function Agent:saved_theta(path, n)
  local text = fs.read(path)
  if not text then return nil end
  local saved = json.decode(text)
  local theta = type(saved) == "table" and saved.theta
  if theta and not gp.theta_problem(theta, n) then return theta end
  if not self.said_theta then
    self.said_theta = true
    self:say("%s does not hold a GP fit of %d numbers for this study: the fit starts without its warm start", path, n)
  end
  return nil
end

-- the point of a claimed adaptive trial: the fit runs outside the journal lock on
-- the history of the claim (a trial finishing during the fit is left out: the
-- suggestion may be stale by the trials that finished meanwhile, which a refit
-- under the lock would only trade for every agent waiting); then, under the
-- lock, the point is recorded if the claim is still ours. Returns true, or false
-- when the claim passed to another agent.
function Agent:choose_point(t, inputs)
  local study = self.study
  local row = algorithms._row(study.algorithm, 2)          -- an adaptive row (dlua.search.algorithms)
  local u, method
  if inputs.feasible < row.needs_feasible then
    u = row.point(study.space, math.max(1, t.i or t.j), {seed = study.seed or 0})
  else
    local path = self:theta_path(t.group)
    -- several objectives: the row's choice (bayes: EHVI for 2 or 3, else ParEGO; docs/studies.md)
    local modes = objectives.modes(study.objectives)
    local theta = self:saved_theta(path, ehvi._theta_length(study.space.features, #modes, study.pareto))
    local us, info = row.suggest(study.space, inputs.hist, inputs.pend, 1, {seed = study.seed,
      step = t.i or t.j, mode = #modes > 1 and modes or study.objective.mode, context = t.group.values, theta = theta,
      init = algorithms.initial_points(row, study.space.d, study.init), pareto = study.pareto})
    u, method = us[1], info and info.method
    if info and info.fallback and not self.said_fallback then
      self.said_fallback = true
      self:say("several objectives: %s", info.fallback)
    end
    if info and info.theta then
      fs.mkdir_p(self.dir .. "/gp")
      fs.write_atomic(path, json.encode({features = study.space.features, theta = json.array(info.theta)}) .. "\n")
    end
  end
  return self.journal:locked(function(events, append)
    local st = replay(events)
    local s = st.trials[t.id]
    if not s or s.owner ~= self.owner or not s.running then return false end
    local sg = st.suggest[t.id]
    if sg then t.u, t.nuisance = sg.u, sg.nuisance; return true end
    t.u = u
    t.nuisance = study.space:point(u, t.group.values)
    append({event = "suggest", trial = t.id, u = json.array(u), nuisance = t.nuisance, method = method})
    return true
  end)
end

-- bayes inputs of trial t: this group's finished trials (and the warm start's)
-- as history, its running trials with a point as kriging believers. A trial that
-- did not end done (pruned, diverged, failed) is an infeasible point: a pruned
-- one left out, the GP would suggest its point again and again. With prune.model
-- = "rungs" the history is the values at one budget (dlua.study.fidelity).
function Agent:bayes_inputs(t, st, trials)
  local hist, pend, finished = {}, {}, {}
  local pr = self.study.prune
  local rungs = pr and pr.model == "rungs"
  for _, h in ipairs(self.warm and self.warm[t.group.index] or {}) do hist[#hist + 1] = h end
  for _, p in ipairs(trials) do
    if p.group.index == t.group.index and p.kind == "search" and p.id ~= t.id then
      local s = st.trials[p.id]
      local u = p.u or (st.suggest[p.id] and st.suggest[p.id].u)
      if u and s and s.finish and not s.running then
        local f = s.finish
        local done = f.status == "done"
        finished[#finished + 1] = {u = u, status = f.status, value = f.value, curve = f.curve, steps = f.steps}
        if not rungs then
          hist[#hist + 1] = {u = u, value = done and f.value or nil, values = done and f.values or nil}
        end
      elseif u and s and s.running then
        pend[#pend + 1] = {u = u}
      end
    end
  end
  if rungs then                                 -- BOHB-like: the GP at the largest budget with enough values
    local h, budget = fidelity.history(pr, self.study.max_steps, finished, fidelity.need(self.study.space.d))
    if budget ~= self.study.max_steps then hist = {} end          -- a warm start's values are full-budget ones
    for _, x in ipairs(h) do hist[#hist + 1] = x end
  end
  local feasible = 0
  for _, h in ipairs(hist) do if h.value ~= nil then feasible = feasible + 1 end end
  return {hist = hist, pend = pend, feasible = feasible}
end

function Agent:start(t)
  local study = self.study
  local hp = plan.trial_hparams(study, t)
  local dir = self.dir .. "/" .. t.id
  local flags = {"--out", dir, "--quiet", "--resume", "--no-track", "--threads", tostring(self.threads)}
  local r = {trial = t, hp = hp, dir = dir}
  if study.prune and t.kind == "search" then      -- the trial judges itself at each eval (dlua.study.prune)
    local path = dir .. "/prune.json"
    fs.mkdir_p(dir)
    fs.write_atomic(path, json.encode(prune.trial_settings(self.dir, self:record(r), study)) .. "\n")
    flags[#flags + 1], flags[#flags + 2] = "--prune", path
  end
  local args = plan.trial_args(study, hp, flags)
  r.handle = (self.opts.launch or launch.launch)(self.exe, args, dir, {agent_pid = self.pid})
  self.running[#self.running + 1] = r
  self.started = self.started + 1
  local parts = {}
  for _, k in ipairs(sorted_keys(t.nuisance or {})) do parts[#parts + 1] = k .. "=" .. fmtv(t.nuisance[k]) end
  if t.seed then parts[#parts + 1] = "seed=" .. t.seed end
  self:say("trial %s %s (%s%s)", t.id, t.promoted and "promoted, resuming" or "started", t.group.label ~= "(all)" and (t.group.label .. "; ") or "",
    table.concat(parts, " "))
end

-- the rows of trials.csv (finished trials: search trials of each group, then its seed re-runs) and the columns
function Agent:rows(st)
  local study = self.study
  local cols = {"id", "status"}
  local hp_names = {}
  for _, n in ipairs(study.sci_names) do hp_names[#hp_names + 1] = n end
  for _, n in ipairs(study.space.names) do hp_names[#hp_names + 1] = n end
  if study.manual then
    local seen = {}
    for _, t in ipairs(study.manual) do for k in pairs(t) do seen[k] = true end end
    for _, k in ipairs(sorted_keys(seen)) do hp_names[#hp_names + 1] = k end
  end
  for _, n in ipairs(sorted_keys(study.fixed)) do if n ~= "seed" then hp_names[#hp_names + 1] = n end end
  -- hyperparameters as hp.NAME (hp.seed too), apart from the run's own columns: a
  -- hyperparameter named steps or status can never shadow one (csv.DictReader keeps one)
  for _, n in ipairs(hp_names) do cols[#cols + 1] = "hp." .. n end
  for _, c in ipairs({"hp.seed", "best_metric", "best_value", "best_step"}) do cols[#cols + 1] = c end
  local objs = #study.objectives > 1 and study.objectives or {}    -- several: value.METRIC, each objective's value
  for _, o in ipairs(objs) do cols[#cols + 1] = "value." .. o.metric end
  for _, c in ipairs({"steps_run", "wall_time", "dir", "message"}) do cols[#cols + 1] = c end
  local fins = {}
  for _, t in pairs(st.trials) do if t.finish then fins[#fins + 1] = t.finish end end
  table.sort(fins, function(a, b)
    if a.group ~= b.group then return a.group < b.group end
    if (a.kind == "seed") ~= (b.kind == "seed") then return a.kind ~= "seed" end
    return a.trial < b.trial
  end)
  local rows = {}
  for i, f in ipairs(fins) do
    local r = {id = f.trial, status = f.status, ["hp.seed"] = f.hp and f.hp.seed or 0, best_metric = study.objective.metric,
               best_value = f.value and fmtv(f.value) or "", best_step = f.step or "", steps_run = f.steps or "",
               wall_time = f.wall and string.format("%.1f", f.wall) or "", dir = f.dir, message = f.message or ""}
    for _, n in ipairs(hp_names) do
      local v = f.hp and f.hp[n]
      r["hp." .. n] = v ~= nil and fmtv(v) or ""
    end
    for j, o in ipairs(objs) do r["value." .. o.metric] = f.values and f.values[j] ~= nil and fmtv(f.values[j]) or "" end
    rows[i] = r
  end
  return rows, cols
end

function Agent:write_trials_csv(st)
  local rows, cols = self:rows(st)
  local lines = {track.csv_row(cols)}
  for _, r in ipairs(rows) do
    local vals = {}
    for i, c in ipairs(cols) do vals[i] = r[c] end
    lines[#lines + 1] = track.csv_row(vals, #cols)
  end
  fs.write_atomic(self.dir .. "/trials.csv", table.concat(lines, "\n") .. "\n")
end

-- all planned trials settled (finished; failed ones count) and none running
function Agent:is_complete(st, session_start)
  for _, t in ipairs(self:all_trials(st, session_start)) do
    local s = st.trials[t.id]
    if not s or not s.finish or s.running or s.finish.status == "interrupted" then return false end
  end
  if #prune.promotable(self.study, st) > 0 then return false end
  if self.study.seeds > 0 then
    for _, g in ipairs(self.study.groups) do
      local any = false
      for _, t in pairs(st.trials) do if t.finish and t.finish.group == g.index and t.finish.status == "done" then any = true end end
      if any and not st.seeds[g.index] then return false end
    end
  end
  return true
end

-- what the finish event of running trial r holds before its outcome is known
-- (a pruned trial writes its own finish event from it: dlua.study.prune.judge)
function Agent:record(r)
  local t = r.trial
  return {trial = t.id, owner = self.owner, hp = r.hp, nuisance = t.nuisance, u = t.u and json.array(t.u) or nil,
          group = t.group.index, kind = t.kind, base = t.base, dir = r.dir, number = t.kind == "search" and t.j or nil}
end

-- the finish event of running trial r with outcome res
function Agent:finish_event(r, res, wall)
  local e = self:record(r)
  e.event, e.status, e.value, e.step, e.steps, e.wall, e.message = "finish", res.status, res.value, res.step,
    res.steps, wall, res.message
  e.rung, e.values = res.rung, res.values
  e.curve = self.study.prune and prune.curve(r.dir, self.study.objective.metric) or nil
  return e
end

-- under the lock, after a finish event: trials.csv, and the complete event when
-- every trial settled; returns whether the study completed now
function Agent:after_finish(events, append, session_start)
  local st = replay(events)
  self:write_trials_csv(st)
  local line = self:progress_line(st, session_start)
  if self:is_complete(st, session_start) and st.complete_at < st.last_finish then
    append({event = "complete"})
    return true, line
  end
  return false, line
end

-- "trials 3/12 done, 2 running, 7 pending, 1 interrupted  best ... (t003)  ETA 2m10s"
-- from the journal state: a trial left unsettled by an earlier session is pending
function Agent:progress_line(st, session_start)
  local trials = self:all_trials(st, session_start)
  local c = {done = 0, running = 0, pending = 0, pruned = 0, interrupted = 0, failed = 0}
  local best
  local mode = self.study.objective.mode
  for _, t in ipairs(trials) do
    local s = st.trials[t.id]
    local f = s and s.finish
    if s and s.running then c.running = c.running + 1
    elseif f and (FINAL[f.status] or s.finish_at >= session_start) then
      local k = f.status == "pruned" and "pruned" or (FINAL[f.status] and "done" or f.status)
      c[k] = (c[k] or 0) + 1
      if f.status == "done" and f.value ~= nil and (not best or better(f.value, best.value, mode)) then
        best = {id = t.id, value = f.value}
      end
    else c.pending = c.pending + 1 end
  end
  self.sprog.total = #trials
  return self.sprog:line(c, best)
end

-- trial r's process ended with exit code: its finish event (unless the trial
-- wrote one itself when it was pruned: then only the bookkeeping), trials.csv,
-- and the study's completion when it was the last
function Agent:finish(r, code, session_start)
  local study = self.study
  local res = results.outcome(study, r.dir, code)
  local wall = core.clock() - r.handle.t0
  local t = r.trial
  local completed, progress_line, own
  self.journal:locked(function(events, append)
    local st = replay(events)
    local s = st.trials[t.id]
    local f = s and s.finish
    if s and not s.running and f and s.finish_at > s.claim_at and f.owner == self.owner and f.status == "pruned" then
      own = f                                      -- pruned at an eval: the trial wrote its finish
    elseif not s or s.owner ~= self.owner or not s.running then
      common.warn(string.format("trial %s: the claim passed to another agent (lease expired); result dropped", t.id))
      return
    else
      append(self:finish_event(r, res, wall))
    end
    if own or res.status ~= "interrupted" then self.sprog:finished(wall) end
    completed, progress_line = self:after_finish(events, append, session_start)
  end)
  if own then
    res = {status = "pruned", value = own.value, message = own.message}
    self:say("trial %s pruned: %s", t.id, own.message)
  elseif progress_line then
    self:say("trial %s %s: %s (%.1f s)", t.id, res.status, res.value and string.format("%s %.4f at step %s",
      study.objective.metric, res.value, tostring(res.step)) or (res.message or ""), wall)
  end
  if progress_line then self:say("%s", progress_line) end
  self.ran[#self.ran + 1] = {id = t.id, status = res.status, value = res.value, message = res.message}
  if completed then results.complete(study, self.dir, self.opts) end
end

function Agent:renew()
  if #self.running == 0 then return end
  local now = os.time()
  self.journal:locked(function(_, append)
    for _, r in ipairs(self.running) do
      append({event = "renew", trial = r.trial.id, owner = self.owner, lease_until = now + self.lease})
    end
  end)
end

--- agent:loop() -> the trials this agent ran ({id, status, value, message}):
-- claims and runs trials (jobs at a time) until nothing is left to claim (or
-- count trials ran). wait = true (the study runner) also waits for trials other
-- agents hold, reclaiming them when their lease expires.
function Agent:loop()
  proc.catch()                                  -- SIGINT/SIGTERM: stop cleanly (below)
  local _ <close> = setmetatable({}, {__close = function() proc.release() end})
  local session_start = #self.journal:events() + 1
  local last_renew = core.clock()
  local poll = self.opts.poll or 0.5            -- the longest wait: a trial's end wakes it at once
  while true do
    local sig = proc.interrupted()
    if sig and not self.interrupted then        -- no new trials; the running ones checkpoint and stop
      self.interrupted = sig
      self:say("%s: no new trials; waiting for %d running trial(s) to checkpoint and stop", sig, #self.running)
      for _, r in ipairs(self.running) do
        if r.handle.kill then r.handle:kill(sig == "SIGTERM" and "TERM" or "INT") end
      end
    end
    local why
    while not self.interrupted and #self.running < self.jobs and (not self.count or self.started < self.count) do
      local t
      t, why = self:claim(session_start)
      if not t then break end
      self:start(t)
    end
    if #self.running == 0 then
      if not self.interrupted and (why == "wait" or (why == "held" and self.wait)) then
        proc.sleep(0.5)
      else
        break
      end
    else
      proc.wait_event(poll)
      local keep = {}
      for _, r in ipairs(self.running) do
        local code = r.handle:poll()
        if code then self:finish(r, code, session_start) else keep[#keep + 1] = r end
      end
      self.running = keep
      if core.clock() - last_renew > self.lease / 4 then
        self:renew()
        last_renew = core.clock()
      end
    end
  end
  if self.interrupted then return self.ran end
  -- a study whose last trial finished without the completion being recorded
  -- (the process died in between) completes now
  local completed = self.journal:locked(function(events, append)
    local st = replay(events)
    if st.last_finish > 0 and st.complete_at < st.last_finish and self:is_complete(st, session_start) then
      append({event = "complete"})
      return true
    end
  end)
  if completed then results.complete(self.study, self.dir, self.opts) end
  return self.ran
end

return M
