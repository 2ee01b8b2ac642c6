--- dlua.study.warm: the two ways a study starts from what is already known.
-- `enqueue = {{lr = 0.1, ...}, ...}` lists nuisance points every scientific value
-- runs first, under any algorithm (checked against the nuisance space: names
-- with a did-you-mean, values inside the bounds or among the values); the
-- algorithm's own points follow, its sequence starting at its first point.
-- `warm_start = "runs/earlier-study"` feeds the finished trials of an earlier
-- study to the bayes surrogate as history (never run again, never in this
-- study's results). A trial of the earlier study is compatible when the
-- objective metric is the same, every nuisance value it set lies in this
-- study's space (same names, inside the bounds: the space may have been
-- narrowed), every nuisance name of this space that is unconditional is set,
-- its scientific and fixed values equal this study's for the group it joins, and
-- it ran the same step budget (the `steps` option, a steps hyperparameter, or the
-- experiment's default); the others are skipped and counted by why.
local util = require "dlua.util"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local common = require "dlua.study.common"
local journal = require "dlua.study.journal"
local objectives = require "dlua.study.objectives"

local M = {}

local sorted_keys, fmtv = util.sorted_keys, common.format_value

-- the unit coordinate of value v under one of name's dimensions (the branch that
-- accepts v), or nil, why
local function coordinate(space, name, v)
  local why
  for _, e in ipairs(space.by_name[name] or {}) do
    local p = e.param
    if p then
      local u = p:unmap(v)
      if u and u >= 0 and u <= 1 then return u, e end
      if p.values then
        local l = {}
        for i, x in ipairs(p.values) do l[i] = fmtv(x) end
        why = "is not one of " .. table.concat(l, ", ")
      elseif p.kind == "int" and u then
        why = string.format("is outside [%d, %d]", p.lo, p.hi)
      elseif p.kind == "int" then
        why = "is not an integer"
      elseif type(v) ~= "number" then
        why = "is not a number"
      else
        why = string.format("is outside [%s, %s]", fmtv(p.lo), fmtv(p.hi))
      end
    end
  end
  return nil, why
end

--- point(space, values [, context]) -> u, nuisance or nil, message: the unit-cube
-- point of the nuisance values (inactive dimensions 0.5) and the nuisance values
-- (values, plus the space's plain values); message says what is wrong: a name
-- the space does not sample (with the nearest), a value outside its dimension,
-- an unconditional dimension left out.
function M.point(space, values, context)
  local sampled = {}
  for _, d in ipairs(space.dims) do sampled[d.name] = true end
  local u = {}
  for i = 1, space.d do u[i] = 0.5 end
  for _, k in ipairs(sorted_keys(values)) do
    if not sampled[k] then
      local names = sorted_keys(sampled)
      local near = type(k) == "string" and util.nearest(k, names)
      return nil, nil, string.format("'%s' is not a nuisance hyperparameter of the study (nuisance: %s)%s",
        tostring(k), #names > 0 and table.concat(names, ", ") or "none",
        near and ("; did you mean '" .. near .. "'?") or "")
    end
    local c, e = coordinate(space, k, values[k])
    if not c then return nil, nil, string.format("%s = %s %s", k, fmtv(values[k]), e) end
    u[e.index] = c
  end
  for _, d in ipairs(space.dims) do
    if not d.cond and values[d.name] == nil then
      return nil, nil, string.format("%s is not set (every unconditional nuisance hyperparameter is)", d.name)
    end
  end
  local hp = space:point(u, context)
  for k, v in pairs(values) do hp[k] = v end
  return u, hp
end

--- check_enqueue(space, list, fail) -> the list as {{u =, values =}}; fail(msg)
-- raises (the study file's line).
function M.check_enqueue(space, list, fail)
  if type(list) ~= "table" then fail("dl.study: enqueue must be a list of tables of nuisance values") end
  local k = util.list_stray_key(list)           -- a key outside 1..#list would be ignored: refuse it
  if k ~= nil then
    fail(string.format("dl.study: enqueue must be a list of tables of nuisance values (enqueue = {{lr = 0.1}, " ..
      "...}), got a table with key %s", type(k) == "string" and ("'" .. k .. "'") or tostring(k)))
  end
  local out = {}
  for i, t in ipairs(list) do
    if type(t) ~= "table" then fail(string.format("dl.study: enqueue[%d] must be a table of nuisance values", i)) end
    local u, _, why = M.point(space, t)
    if not u then fail(string.format("dl.study: enqueue[%d]: %s", i, why)) end
    out[i] = {u = u, values = util.copy(t)}
  end
  return out
end

-- the step budget trial hp of the earlier study (record rec) ran: its steps option,
-- else a steps hyperparameter, else the experiment's default (max_steps); nil when unknown
local function their_budget(rec, hp)
  local v = rec.steps or hp.steps or rec.max_steps
  return math.type(v) == "integer" and v or nil
end

-- the step budget the trial would run in this study's group: the steps option, a
-- scientific steps, a nuisance one (plain, or sampled: the trial's own, which the space
-- checks), else max_steps (fixed steps or the experiment's default)
local function my_budget(study, group, hp)
  local v = study.steps or group.values.steps
  for _, e in ipairs(v == nil and study.space.fixed or {}) do if e.name == "steps" then v = e.value end end
  for _, d in ipairs(v == nil and study.space.dims or {}) do if d.name == "steps" then v = hp.steps end end
  if v == nil then v = study.max_steps end
  return math.type(v) == "integer" and v or nil
end

--- history(study, dir) -> {[group index] = {{u =, value =, values =}}}, used,
-- skipped, reasons: the compatible finished trials of the earlier study in dir
-- (the same objectives in the same order; done: its value, and its values when
-- there are several objectives; diverged / failed: infeasible, value nil; pruned
-- trials are left out), by the group of this study they join. reasons counts
-- the skipped by why.
-- Errors when dir holds no study.json.
function M.history(study, dir)
  local rec = json.decode(fs.read(dir .. "/study.json") or "")
  if type(rec) ~= "table" then error("dl.study: warm_start: " .. dir .. " holds no study.json", 0) end
  local out, used, skipped, reasons = {}, 0, 0, {}
  local function skip(why) skipped = skipped + 1; reasons[why] = (reasons[why] or 0) + 1 end
  local same_metric = type(rec.objective) == "table" and objectives.same(objectives.of_record(rec), study.objectives)
  local st = journal.replay(journal.open(dir):events())
  for _, id in ipairs(sorted_keys(st.trials)) do
    local f = st.trials[id].finish
    if f and f.status ~= "pruned" and f.kind ~= "seed" then
      local hp = f.hp or {}
      local group
      for _, g in ipairs(study.groups) do
        local ok = true
        for k, v in pairs(g.values) do if hp[k] ~= v then ok = false end end
        if ok then group = g; break end
      end
      local fixed_ok = true
      for k, v in pairs(study.fixed) do if k ~= "seed" and hp[k] ~= nil and hp[k] ~= v then fixed_ok = false end end
      local theirs, mine = their_budget(rec, hp), group and my_budget(study, group, hp)
      if not same_metric then skip("another objective")
      elseif not group then skip("no matching scientific value")
      elseif not fixed_ok then skip("other fixed values")
      elseif theirs and mine and theirs ~= mine then
        skip(string.format("another step budget (%d steps, not %d)", theirs, mine))
      else
        local u, _, why = M.point(study.space, f.nuisance or {}, group.values)
        if not u then skip(why:match("^'") and "a nuisance name not in this space" or "outside this space")
        else
          out[group.index] = out[group.index] or {}
          local done = f.status == "done"
          table.insert(out[group.index], {u = u, value = done and f.value or nil, values = done and f.values or nil,
                                          warm = id})
          used = used + 1
        end
      end
    end
  end
  return out, used, skipped, reasons
end

--- describe(dir, used, skipped, reasons) -> the log line of a warm start.
function M.describe(dir, used, skipped, reasons)
  local parts = {}
  for _, k in ipairs(sorted_keys(reasons)) do parts[#parts + 1] = string.format("%d %s", reasons[k], k) end
  return string.format("warm start from %s: %d compatible trial(s), %d skipped%s", dir, used, skipped,
    #parts > 0 and (" (" .. table.concat(parts, ", ") .. ")") or "")
end

return M
