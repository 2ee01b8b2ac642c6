--- dlua.study.journal: a study's append-only event log, journal.jsonl, shared
-- by every agent of the study. Events (one JSON object a line): claim, renew,
-- release, suggest, seeds, finish, complete; rung and promote for asha pruning
-- (dlua.study.prune; a pruned trial writes its own rung and finish events from
-- inside its process, under the same lock). Writers hold an fcntl lock on
-- journal.lock (released by the kernel if the process dies). A line that is not
-- a JSON event is an error naming the file and line, except a torn last line (a
-- writer that crashed mid-write): readers skip it, and the next writer ends it
-- and records a `torn` event naming its line (with a warning), so readers go on
-- skipping that line and no other. A trial id names a directory, so an event
-- whose trial would leave the study directory is an error (util.fs.checked_path).
local lfs = require "lfs"
local core = require "dlua.core"
local util = require "dlua.util"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"

local M = {}

--- Trial statuses that are final (a re-run does not retry them).
M.FINAL = {done = true, diverged = true, pruned = true}

local Journal = {}
Journal.__index = Journal

--- open(dir) -> the journal of the study directory dir (nothing is created yet).
function M.open(dir)
  return setmetatable({dir = dir, path = dir .. "/journal.jsonl", lock_path = dir .. "/journal.lock"}, Journal)
end

-- the lines of text, numbered as in the file ({n =, text =}; blank lines left out)
local function lines_of(text)
  local out, n, pos = {}, 0, 1
  while pos <= #text do
    local nl = text:find("\n", pos, true)
    local line = text:sub(pos, (nl or #text + 1) - 1)
    n = n + 1
    if line:find("%S") then out[#out + 1] = {n = n, text = line} end
    pos = (nl or #text) + 1
  end
  return out
end

-- the event of one line, or nil and why it is not one
local function decode_event(line)
  local e, why = json.decode(line)
  if e == nil then return nil, "not JSON (" .. tostring(why) .. ")" end
  if type(e) ~= "table" or type(e.event) ~= "string" then return nil, "not a journal event (no 'event' name)" end
  return e
end

-- the events of the file at path, its text and, when its last line is torn (not an
-- event), that line's number. A line that is not an event is an error unless it is
-- the last one or a `torn` event names it (a writer ended it: Journal:locked).
local function read_events(path)
  local text = fs.read(path)
  local events = {}
  if not text then return events end
  local lines, torn, bad = lines_of(text), {}, {}
  for i, l in ipairs(lines) do
    local e, why = decode_event(l.text)
    if not e then
      if i < #lines then bad[#bad + 1] = {l.n, why} end
    else
      if e.event == "torn" and math.type(e.line) == "integer" then torn[e.line] = true end
      if e.trial ~= nil then                    -- a trial id names a directory: it must stay inside
        fs.checked_path(fs.dirname(path), e.trial, path, string.format("line %d: trial", l.n))
      end
      events[#events + 1] = e
    end
  end
  for _, b in ipairs(bad) do
    if not torn[b[1]] then
      error(string.format("%s: line %d: %s: the journal is damaged (only a torn last line, from a crash " ..
        "mid-write, is skipped)", path, b[1], b[2]), 0)
    end
  end
  local last = lines[#lines]
  return events, text, last and not decode_event(last.text) and last.n or nil
end

--- j:locked(fn) -> fn's results: runs fn(events, append) holding the journal's
-- lock; append(e) writes one event line (stamped with the time; one O_APPEND
-- write, a failure raises). The file is fsynced when fn appended. Errors when
-- the lock cannot be had for 120 s.
function Journal:locked(fn)
  fs.mkdir_p(self.dir)
  fs.check_regular(self.lock_path, "lock")
  local lf = assert(io.open(self.lock_path, "a"))
  local t0 = core.clock()
  while true do
    local ok = lfs.lock(lf, "w")
    if ok then break end
    if core.clock() - t0 > 120 then
      lf:close()
      error("dl.study: could not lock " .. self.lock_path .. " for 120 s", 0)
    end
    util.sleep(0.02)
  end
  local res = table.pack(pcall(function()
    local events, text, torn = read_events(self.path)
    if text and #text > 0 and text:sub(-1) ~= "\n" then fs.append_line(self.path, "") end  -- end a torn line
    if torn then                                -- a crash's partial line, now ended: say so, and mark it
      io.stderr:write(string.format("dlua: warning: %s: line %d is torn (a write cut short by a crash); " ..
        "skipped\n", self.path, torn))
      fs.append_line(self.path, json.encode({event = "torn", line = torn, time = os.time()}))
    end
    local wrote = false
    local function append(e)                    -- one O_APPEND write per event; a failure raises
      e.time = e.time or os.time()
      fs.append_line(self.path, json.encode(e))
      events[#events + 1] = e
      wrote = true
    end
    local r = table.pack(fn(events, append))
    if wrote then fs.fsync(self.path) end
    return table.unpack(r, 1, r.n)
  end))
  lfs.unlock(lf)
  lf:close()
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

--- j:events() -> the events, without the lock (a reader's snapshot).
function Journal:events() return (read_events(self.path)) end

--- replay(events) -> the state the events describe: {trials = {[id] = {claims,
-- owner, host, pid, lease_until, running, attempt, finish, finish_at, finishes}},
-- suggest = {[id] = event}, seeds = {[group] = event}, rungs = {[rung] = {[group] =
-- {{trial, value, step, bracket}}}} (bracket: hyperband's, nil for asha),
-- complete_at, last_finish} (the *_at fields are event positions). A promote
-- event re-opens a paused (pruned) trial: its finish is forgotten, so it is
-- claimed and resumed again.
function M.replay(events)
  local st = {trials = {}, suggest = {}, seeds = {}, rungs = {}, complete_at = 0, last_finish = 0}
  for i, e in ipairs(events) do
    local id = e.trial
    local t = id and st.trials[id]
    if id and not t then t = {id = id, claims = 0}; st.trials[id] = t end
    if e.event == "claim" then
      t.claims = t.claims + 1
      t.owner, t.host, t.pid, t.lease_until, t.claim_at, t.running = e.owner, e.host, e.pid, e.lease_until, i, true
      t.attempt = e.attempt
    elseif e.event == "renew" then
      if t.owner == e.owner then t.lease_until = e.lease_until end
    elseif e.event == "release" then
      if t.owner == e.owner then t.running = false end
    elseif e.event == "finish" then
      t.finish, t.finish_at, t.running = e, i, false
      t.finishes = (t.finishes or 0) + 1
      st.last_finish = i
    elseif e.event == "suggest" then
      st.suggest[id] = e
    elseif e.event == "seeds" then
      st.seeds[e.group] = e
    elseif e.event == "complete" then
      st.complete_at = i
    elseif e.event == "rung" then
      local r = st.rungs[e.rung] or {}
      st.rungs[e.rung] = r
      r[e.group] = r[e.group] or {}
      table.insert(r[e.group], {trial = id, value = e.value, step = e.step, bracket = e.bracket})
      t.rungs = t.rungs or {}
      t.rungs[e.rung] = true
    elseif e.event == "promote" then
      t.finish, t.running, t.promoted = nil, false, e.rung
    end
  end
  return st
end

return M
