--- dlua.study.ranks: study trials spread over MPI ranks (`mpirun -np N dlua
-- STUDYFILE`). Rank 0 runs the study's agent (journal, trials.csv, results, the
-- tracking row) and starts each trial on the rank with the fewest running; the
-- other ranks run what they are sent and send back the trial's small files
-- (result.json, metrics.jsonl, ...), which rank 0 writes into the trial's
-- directory before the agent reads them. While a trial runs, rank 0's handle
-- can signal it (kill: SIGINT/SIGTERM forwarded by the agent). A pruned trial
-- judges itself at its evals (dlua.study.prune.judge) in the study's journal, so
-- pruning needs the ranks to share the study directory (one host, or a shared
-- file system); elsewhere a trial warns and runs to its end. Each trial runs
-- exactly once, on one rank, as a process of its own (a world of one). The agent reaches the ranks
-- through the launch hook of study:main (no patching of dlua.study).
local core = require "dlua.core"
local util = require "dlua.util"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local dist = require "dlua.dist"
local study_mod = require "dlua.study"

local M = {}

local RETURNED = {"result.json", "metrics.jsonl", "trial.log", "hparams.json", "checkpoints/index.json"}

local sleep, hostname = util.sleep, util.hostname

local Pool = {}
Pool.__index = Pool

--- trial_pool(local_launch) -> a pool whose :launch(exe, args, dir, opts) has the
-- contract of dlua.study's launch (a handle with :poll() -> nil | exit code, and .t0),
-- spreading the trials over the ranks. pool:close() stops the serving ranks.
function M.trial_pool(local_launch)
  local self = setmetatable({world = dist.world(), running = {}, next_id = 0, done = {},
    local_launch = local_launch}, Pool)
  for r = 0, self.world - 1 do self.running[r] = 0 end
  return self
end

function Pool:pick()
  local best, n = 0, math.huge
  for r = 0, self.world - 1 do
    if self.running[r] < n then best, n = r, self.running[r] end
  end
  return best
end

local function note_dispatch(dir, rank, host)
  fs.mkdir_p(dir)
  fs.write_atomic(dir .. "/dispatch.json", json.encode({rank = rank, host = host}) .. "\n")
end

function Pool:pump()
  for r = 1, self.world - 1 do
    while core._dist_probe(r) do
      local m = json.decode(core._dist_recv(r))
      if m and m.op == "done" then self.done[m.id] = m end
    end
  end
end

function Pool:launch(exe, args, dir, opts)
  local r = self:pick()
  self.running[r] = self.running[r] + 1
  local pool = self
  if r == 0 then
    local h = self.local_launch(exe, args, dir, opts)
    note_dispatch(dir, 0, hostname())
    local poll = h.poll
    local finished = false
    h.poll = function(hh)
      local code = poll(hh)
      if code and not finished then finished = true; pool.running[0] = pool.running[0] - 1 end
      return code
    end
    return h
  end
  self.next_id = self.next_id + 1
  local id = self.next_id
  fs.mkdir_p(dir)
  os.remove(dir .. "/exit")
  os.remove(dir .. "/result.json")
  core._dist_send(r, json.encode({op = "run", id = id, exe = exe, args = json.array(args), dir = dir}))
  local h = {dir = dir, t0 = core.clock(), rank = r}
  function h.kill(_, sig)                 -- the serving rank signals the trial's process group
    if not h.code then core._dist_send(r, json.encode({op = "kill", id = id, sig = sig})) end
  end
  function h.poll()
    if h.code then return h.code end
    pool:pump()
    local m = pool.done[id]
    if not m then return nil end
    pool.done[id] = nil
    for name, text in pairs(m.files or {}) do
      local path = dir .. "/" .. name
      if fs.read(path) ~= text then
        fs.mkdir_p(fs.dirname(path))
        fs.write_atomic(path, text)
      end
    end
    note_dispatch(dir, r, m.host)
    fs.write_atomic(dir .. "/exit", tostring(m.code) .. "\n")
    pool.running[r] = pool.running[r] - 1
    h.code = m.code
    return m.code
  end
  return h
end

function Pool:close()
  for r = 1, self.world - 1 do core._dist_send(r, json.encode({op = "stop"})) end
end

--- serve_trials([launch]) -> trials run: the loop of a rank other than 0 in a
-- distributed study: runs each trial it is sent (with launch, dlua.study's by
-- default), signals it when rank 0 says kill, and replies with the exit code and
-- the trial's small files, until rank 0 says stop.
function M.serve_trials(launch)
  launch = launch or study_mod.launch
  local pid = util.getpid()
  local running, count, host = {}, 0, hostname()
  while true do
    while core._dist_probe(0) do
      local m = json.decode(core._dist_recv(0))
      if m.op == "stop" then return count end
      if m.op == "run" then
        running[#running + 1] = {id = m.id, dir = m.dir, h = launch(m.exe, m.args, m.dir, {agent_pid = pid})}
      elseif m.op == "kill" then
        for _, t in ipairs(running) do
          if t.id == m.id and t.h.kill then t.h:kill(m.sig) end
        end
      end
    end
    local keep = {}
    for _, t in ipairs(running) do
      local code = t.h:poll()
      if code then
        local files = {}
        for _, name in ipairs(RETURNED) do files[name] = fs.read(t.dir .. "/" .. name) end
        core._dist_send(0, json.encode({op = "done", id = t.id, code = code, files = files, host = host}))
        count = count + 1
      else
        keep[#keep + 1] = t
      end
    end
    running = keep
    sleep(0.1)
  end
end

--- run_study(study, args, script): `mpirun -np N dlua STUDYFILE ...`: rank 0 runs
-- study:main with the trials spread over the ranks (one at a time per rank unless
-- --parallel says otherwise); the other ranks serve trials. With one rank it is
-- study:main.
function M.run_study(study, args, script)
  if dist.world() == 1 then return study:main(args, script) end
  if not dist.is_lead() then
    M.serve_trials()
    return nil
  end
  local a, has_parallel = {}, false
  for i, v in ipairs(args or {}) do
    a[i] = v
    if v:match("^%-%-parallel") or v:match("^%-%-jobs") then has_parallel = true end
  end
  if not has_parallel then a[#a + 1] = "--parallel"; a[#a + 1] = tostring(dist.world()) end
  local pool = M.trial_pool(study_mod.launch)
  local ok, res = pcall(study.main, study, a, script, {launch = function(...) return pool:launch(...) end})
  pool:close()
  if not ok then error(res, 0) end
  return res
end

return M
