--- dlua.train.ledger: the checkpoint ledger of a run, checkpoints/index.json
-- (docs/formats.md): every eval, every kept checkpoint with its retention classes
-- (latest / best / every), best and latest. dl.train opens it, adds evals, adds a
-- checkpoint and asks which files to delete (retain), and resumes from the newest
-- checkpoint it names that verifies. It never writes a checkpoint file itself and
-- never deletes one: the caller removes what retain() returns, after save().
--
--   local led = ledger.open(run_dir .. "/checkpoints", {keep_latest = 1, keep_best = 2,
--     metric = "valid/accuracy", mode = "max"})
--   led:add_eval(step, metrics); local drop = led:retain(); led:save()
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local checkpoint = require "dlua.train.checkpoint"

local M = {}

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

--- open(ckpt_dir, opts) -> the ledger of ckpt_dir (an empty one when there is no
-- index.json yet): every eval, every kept checkpoint with its retention classes,
-- best and latest; rewritten atomically after each change. A checkpoint is kept
-- (resumable, counted as best) only once this file names it on disk. opts: the
-- dl.train checkpoint options (keep_latest, keep_best, keep_every, metric, mode, tolerance).
-- A ledger that is not what dl.train writes is an error naming the file and entry.
function M.open(dir, opts)
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

--- led:save(): rewrites index.json atomically.
function Ledger:save()
  fs.write_atomic(self.path, json.encode(self.data) .. "\n")
end

--- led:truncate(step): forgets everything after step (a resume from an earlier checkpoint)
function Ledger:truncate(step)
  local ev = json.array()
  for _, e in ipairs(self.data.evals) do if e.step <= step then ev[#ev + 1] = e end end
  self.data.evals = ev
  local ck = json.array()
  for _, c in ipairs(self.data.checkpoints) do if c.step <= step then ck[#ck + 1] = c end end
  self.data.checkpoints = ck
end

--- led:add_eval(step, metrics): records an evaluation.
function Ledger:add_eval(step, metrics)
  self.data.evals[#self.data.evals + 1] = {step = step, metrics = metrics}
end

local function better(a, b, mode)
  if b == nil then return a ~= nil end
  if a == nil or a ~= a then return false end
  if mode == "min" then return a < b end
  return a > b
end

--- led:best_eval() -> the best eval recorded so far by opts.metric and opts.mode
-- (the earliest on ties), nil when none has a value of the metric.
function Ledger:best_eval()
  local o, best = self.opts, nil
  if not o.metric then return nil end
  for _, e in ipairs(self.data.evals) do
    local v = e.metrics and e.metrics[o.metric]
    if type(v) == "number" and v == v and (best == nil or better(v, best.metrics[o.metric], o.mode)) then best = e end
  end
  return best
end

--- led:kept(step) -> the path (relative to the checkpoint directory) of the kept
-- checkpoint of step, nil when there is none.
function Ledger:kept(step)
  for _, c in ipairs(self.data.checkpoints) do if c.step == step then return c.path end end
end

--- led:retain() -> the paths (relative to the checkpoint directory) to delete:
-- decides which checkpoints each retention class keeps, and best and latest
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
    -- tolerance: the selected checkpoint is the latest one within it of the top value (differences
    -- under the eval set's noise do not order checkpoints); it is kept first
    local sel = 1
    for i, c in ipairs((o.tolerance or 0) > 0 and ranked or {}) do   -- without one, ties keep the earlier step
      if math.abs(c.metrics[o.metric] - ranked[1].metrics[o.metric]) <= o.tolerance and c.step > ranked[sel].step then
        sel = i
      end
    end
    local top = table.remove(ranked, sel)
    if top then table.insert(ranked, 1, top) end
    for i = 1, math.min(o.keep_best, #ranked) do ranked[i].classes[#ranked[i].classes + 1] = "best" end
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

--- name(step) -> the file name of the checkpoint of step, inside the checkpoint directory.
function M.name(step) return string.format("ckpt-%09d.safetensors", step) end

--- find_resume_point(ledger, warn) -> path, tensors, meta of the newest checkpoint
-- the ledger names that verifies, warning about (and skipping) broken ones; nil
-- when none does. A checkpoint file the ledger does not name was never kept.
function M.find_resume_point(ledger, warn)
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

return M
