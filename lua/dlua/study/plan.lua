--- dlua.study.plan: which trials a study runs and how each is started. A trial
-- is {id, group (a scientific value), j (its number within the group), u (the
-- point in the unit cube; nil until chosen for adaptive bayes trials), nuisance
-- (the nuisance values), kind = "search" | "seed"}. Trial j of every scientific
-- value comes before trial j + 1, and every value gets the same nuisance points.
-- The enqueued points (study.enqueue) are trials 1..E of every scientific value,
-- under any algorithm; the algorithm's point i is trial E + i. An adaptive
-- algorithm (its row in dlua.search.algorithms) gives its first `init` points
-- here (the study's init, else the row's rule); the agent asks it for the
-- rest when they are claimed. The functions take the study first; dlua.study makes them its methods
-- (study:plan(), study:trial_hparams(t), study:trial_args(hp), study:command(hp)).
local util = require "dlua.util"
local algorithms = require "dlua.search.algorithms"
local common = require "dlua.study.common"
local proc = require "dlua.util.proc"

local M = {}

local sorted_keys, copy, fmtv, shq = util.sorted_keys, util.copy, common.format_value, util.shell_quote

--- The id of trial j of group: "<group tag>_t<j, 3 digits>".
function M.trial_id(group, j) return string.format("%s_t%03d", group.tag, j) end

--- plan(study [, n]) -> the planned trials, n per scientific value (default the
-- study's budget), in claim order.
function M.plan(study, n)
  n = n or study.trials
  local out = {}
  local cache = {}
  local row = not study.manual and algorithms._row(study.algorithm, 3)
  local init = row and algorithms.initial_points(row, study.space.d, study.init)
  local queued = study.enqueue or {}
  local E = #queued
  for j = 1, n do
    local u, q = nil, queued[j]
    local i = j - E                               -- the algorithm's own point number
    if q then u = q.u
    elseif row and (not row.adaptive or i <= init) then
      u = row.point(study.space, i, {seed = study.seed or 0, cache = cache, grid_points = study.grid_points})
      if not u then break end                     -- past the end of a grid
    end
    for _, g in ipairs(study.groups) do
      local t = {id = M.trial_id(g, j), group = g, j = j, i = i, u = u, kind = "search", enqueued = q and true or nil}
      if study.manual then t.nuisance = copy(study.manual[j])
      elseif q then
        t.nuisance = study.space:point(u, g.values)
        for k, v in pairs(q.values) do t.nuisance[k] = v end
      elseif u then t.nuisance = study.space:point(u, g.values) end
      out[#out + 1] = t
    end
  end
  return out
end

--- trial_hparams(study, t) -> the full hyperparameters trial t sets: fixed, the
-- scientific values, the nuisance values, the seed.
function M.trial_hparams(study, t)
  local hp = copy(study.fixed)
  for k, v in pairs(t.group.values) do hp[k] = v end
  for k, v in pairs(t.nuisance or {}) do hp[k] = v end
  if t.seed then hp.seed = t.seed end
  return hp
end

--- trial_args(study, hp [, extra]) -> the command line of a trial after the
-- executable: the experiment (absolute), --set k=v for hp (sorted), --seed,
-- --steps (the study's budget), --objective (the study's first objective: it
-- ranks the trial's checkpoints), then extra.
function M.trial_args(study, hp, extra)
  local args = {study.experiment_abs or study.experiment}
  for _, k in ipairs(sorted_keys(hp)) do
    if k ~= "seed" then args[#args + 1] = "--set"; args[#args + 1] = k .. "=" .. fmtv(hp[k]) end
  end
  if hp.seed then args[#args + 1] = "--seed"; args[#args + 1] = fmtv(hp.seed) end
  if study.steps then args[#args + 1] = "--steps"; args[#args + 1] = tostring(study.steps) end
  local obj = study.objective
  if obj and obj.metric then
    args[#args + 1] = "--objective"; args[#args + 1] = obj.metric .. (obj.mode and ":" .. obj.mode or "")
  end
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  return args
end

--- command(study, hp) -> the exact shell command that reproduces a trial,
-- led by the dlua running now (dlua.util.proc.exe_path), so it works when
-- pasted before dlua is on PATH.
function M.command(study, hp)
  local args = M.trial_args(study, hp)
  args[1] = study.experiment
  local parts = {shq(proc.exe_path())}
  for _, a in ipairs(args) do parts[#parts + 1] = shq(a) end
  if not hp.seed then parts[#parts + 1] = "--seed 0" end
  return table.concat(parts, " ")
end

return M
