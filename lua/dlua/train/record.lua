--- dlua.train.record: the hyperparameter record of a run, never rewritten.
-- hparams.json holds the values in force now (flat, as every reader expects:
-- the report, study results, the tracking files); a resume that changes one
-- (config.override, `--override`) adds hparams_history.json, the values each
-- span of steps ran with:
--
--   {"segments": [{"from_step": 1, "hparams": {"lr": 0.1, ...}},
--                 {"from_step": 121, "hparams": {"lr": 0.9, ...}, "changed": {"lr": {"was": 0.1, "now": 0.9}}}]}
--
-- from_step is the first step trained with a segment's values. A resume without
-- override whose values differ from those in force at its checkpoint is refused,
-- naming each changed key (the step budget `steps` aside: `--resume --steps N`
-- extends a run; its change is recorded all the same). A segment starting after
-- the resume point is dropped: its steps were discarded and are trained again.
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local util = require "dlua.util"

local M = {}

M.FILE, M.HISTORY = "hparams.json", "hparams_history.json"

-- keys that may change on resume without override (recorded all the same)
local FREE = {steps = true}

local function show(v)
  if v == nil then return "(absent)" end
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "table" then return json.encode(v) end
  return tostring(v)
end

-- the same value once read back from JSON? (a dl.train user's hparams may hold tables)
local function same(a, b)
  if type(a) == "table" and type(b) == "table" then return json.encode(a) == json.encode(b) end
  return a == b
end

local function read_json(path)
  local text = fs.read(path)
  local t = text and json.decode(text)
  return type(t) == "table" and t or nil
end

-- the keys of a and b whose values differ, sorted, as {key, was, now}
local function differences(a, b)
  local keys, seen = {}, {}
  for _, t in ipairs({a, b}) do
    for k in pairs(t) do
      if not seen[k] then seen[k] = true; keys[#keys + 1] = k end
    end
  end
  table.sort(keys, function(x, y) return tostring(x) < tostring(y) end)
  local out = {}
  for _, k in ipairs(keys) do
    if not same(a[k], b[k]) then out[#out + 1] = {k, a[k], b[k]} end
  end
  return out
end

--- segments(dir) -> the run's history as a list of {from_step, hparams [, changed]},
-- or nil when the run has no record (hparams.json missing or unreadable).
function M.segments(dir)
  local h = read_json(dir .. "/" .. M.HISTORY)
  if h and type(h.segments) == "table" and #h.segments > 0 then return h.segments end
  local flat = read_json(dir .. "/" .. M.FILE)
  if not flat then return nil end
  return {{from_step = 1, hparams = flat}}
end

--- on_resume(dir, hp, step, override) -> segments to write, or nil, message: hp
-- against the values recorded for the steps up to step (the checkpoint resumed).
function M.on_resume(dir, hp, step, override)
  local segs = M.segments(dir)
  if not segs then return {{from_step = 1, hparams = hp}} end
  local kept = {}
  for i, s in ipairs(segs) do
    if i == 1 or (tonumber(s.from_step) or math.huge) <= step then kept[#kept + 1] = s end
  end
  local current = kept[#kept].hparams or {}
  local diff = differences(current, hp)
  if #diff == 0 then return kept end
  local refused = {}
  for _, d in ipairs(diff) do
    if not FREE[d[1]] then refused[#refused + 1] = string.format("%s %s -> %s", d[1], show(d[2]), show(d[3])) end
  end
  if #refused > 0 and not override then
    return nil, string.format("dl.train: resuming the run in %s at step %d with hyperparameters that differ from the run's " ..
      "record (%s/%s): %s; resume with the recorded values, or pass override = true (dlua: --override) to continue " ..
      "with the new ones (%s then records the step each took effect)", dir, step, dir, M.FILE,
      table.concat(refused, ", "), M.HISTORY)
  end
  local changed = {}
  for _, d in ipairs(diff) do changed[d[1]] = {was = d[2], now = d[3]} end
  kept[#kept + 1] = {from_step = step + 1, hparams = hp, changed = changed}
  return kept
end

--- write(dir, segments): hparams.json (the last segment's values) and, when the
-- values changed during the run, hparams_history.json (else it is removed).
function M.write(dir, segments)
  -- the history first: a kill between the two leaves a history whose last segment is hparams.json's new values
  if #segments > 1 then
    fs.write_atomic(dir .. "/" .. M.HISTORY, json.encode({segments = segments}) .. "\n")
  else
    os.remove(dir .. "/" .. M.HISTORY)
  end
  fs.write_atomic(dir .. "/" .. M.FILE, json.encode(util.copy(segments[#segments].hparams)) .. "\n")
end

return M
