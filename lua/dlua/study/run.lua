--- dlua.study.run: running a study: study:run{...} (the study directory, then an
-- agent until every trial settled), `dlua STUDYFILE [flags]` (study:main) and
-- `dlua agent STUDY_DIR [flags]` (agent_main), with their flags and help.
local core = require "dlua.core"
local util = require "dlua.util"
local proc = require "dlua.util.proc"
local json = require "dlua.util.json"
local fs = require "dlua.util.fs"
local flags = require "dlua.train.flags"
local common = require "dlua.study.common"
local journal = require "dlua.study.journal"
local launch = require "dlua.study.launch"
local spec = require "dlua.study.spec"
local results = require "dlua.study.results"
local agent_mod = require "dlua.study.agent"
local dryrun = require "dlua.study.dryrun"
local prune = require "dlua.study.prune"

local M = {}

local sorted_keys, fmtv = util.sorted_keys, common.format_value

-- writes study.json, or checks that an existing one describes this study
function M.prepare(self, dir, n)
  local rec = self:record()
  rec.trials = n or self.trials
  local fp = spec.fingerprint(rec)
  rec.fingerprint = fp
  local j = journal.open(dir)
  j:locked(function()
    local old = json.decode(fs.read(dir .. "/study.json") or "")
    if type(old) == "table" and old.fingerprint and old.fingerprint ~= fp then
      error(string.format("dl.study: %s holds study '%s' with another search space, seed, algorithm, roles or " ..
        "step budget; give this study another name or --out directory", dir, tostring(old.name)), 0)
    end
    fs.write_atomic(dir .. "/study.json", json.encode(rec) .. "\n")
  end)
  return rec
end

-- has a trial of the study in dir measured the objective (then the dry run is moot)?
-- after an interrupt: how many trials stopped, and how to continue them
local function interrupted_note(agent)
  local n = 0
  for _, r in ipairs(agent.ran) do if r.status == "interrupted" then n = n + 1 end end
  io.stderr:write(string.format("dlua: study %s interrupted by %s: %d trial(s) interrupted at their last checkpoint; " ..
    "run the same command again to continue them\n", agent.study.name, agent.interrupted, n))
end

local function measured(dir)
  for _, e in ipairs(journal.open(dir):events()) do
    if e.event == "finish" and e.status == "done" then return true end
  end
  return false
end

--- Runs the study: opts.out (runs root, default "runs"), trials, parallel,
-- steps, quiet, threads, exe, lease, count, create, launch (the function that
-- starts a trial, M.launch by default: dlua.study.ranks passes its pool's),
-- check (default true: before anything is written, a one-step dry run of the
-- first trial checks that the experiment runs and reports the objective, unless a
-- trial of the study already did; a failure is an error: dlua.study.dryrun).
-- Returns dl.study_results.
function M.run(self, opts)
  opts = util.check_options("study:run", opts, {out = "string", trials = "integer", parallel = "integer",
    steps = "integer", quiet = "boolean", threads = "integer", exe = "string", lease = "number", count = "integer",
    create = "boolean", poll = "number", launch = "function", check = "boolean"}, 2)
  if opts.steps then
    if self.sci.steps or self.space.by_name.steps then
      error("dl.study: --steps conflicts with the study's searched steps", 0)
    end
    if self.fixed.steps then self.fixed.steps = opts.steps else self.steps = opts.steps end
    self.max_steps = opts.steps
    if self.prune and self.prune.rungs then self.prune.rungs = prune.rungs(self.prune, opts.steps) end
  end
  local root = opts.out or "runs"
  local dir = root .. "/" .. self.name
  for _, w in ipairs(self.warnings) do common.warn(w) end
  if opts.check ~= false and not measured(dir) then
    local t0 = core.clock()
    local r = dryrun.check(self, launch.exe_path(opts), util.cores())
    if r.warning then common.warn(r.warning)
    elseif not opts.quiet then
      local names = {}
      for i, o in ipairs(self.objectives) do names[i] = o.metric end
      print(string.format("[%s] objective %s checked: a one-step dry run reports %s (%.1f s)", self.name,
        table.concat(names, ", "), #names > 1 and "them" or "it", core.clock() - t0))
    end
  end
  M.prepare(self, dir, opts.trials)
  if opts.create then return {dir = dir} end
  local agent = agent_mod.new(self, dir, {jobs = opts.parallel or self.parallel, trials = opts.trials, quiet = opts.quiet,
    threads = opts.threads, exe = launch.exe_path(opts), lease = opts.lease, count = opts.count, wait = opts.count == nil,
    root = root, poll = opts.poll, launch = opts.launch})
  if not opts.quiet then
    agent:say("%d trials per scientific value x %d value(s), %s, seed %d, %d at a time, %d thread(s) each; %s",
      agent.n, #self.groups, self.algorithm, self.seed, agent.jobs, agent.threads, dir)
  end
  agent:loop()
  local res = results.results(dir)
  res.dir, res.ran, res.interrupted = dir, agent.ran, agent.interrupted
  if agent.interrupted then interrupted_note(agent) end
  return res
end

-- A flag table is a declaration, one row a flag ({flag, metavar, help, int/many}) read by
-- train/flags.lua's one parser; the command-line tables look alike by design.
M.STUDY_FLAGS = {
  {"--out", "DIR", "runs root (default runs): the study writes DIR/<name>/ and a row in DIR/studies.csv"},
  {"--trials", "N", "trials per scientific value (overrides the study's)", int = 1},
  {"--parallel", "P", "trials at a time (alias --jobs)", int = 1},
  {"--jobs", "P", "trials at a time", int = 1},
  {"--steps", "N", "the step budget of every trial", int = 1},
  {"--threads", "N", "compute threads per trial (default: cores / parallel)", int = 1},
  {"--count", "N", "run at most N trials, then report", int = 0},
  {"--lease", "S", "seconds a claimed trial stays reserved without renewal (default 60)", int = 1},
  {"--create", nil, "write the study directory and exit (then run it with dlua agent DIR)"},
  {"--no-check", nil, "skip the one-step dry run that checks the experiment and the objective before the first trial"},
  {"--resume", nil, "accepted for symmetry: a study always skips finished trials and resumes unfinished ones"},
  {"--quiet", nil, "no progress lines"},
  {"--help", nil, "describe the study and the flags"},
}

function M.help(self, script)
  local lines = {string.format("%s: study %s", script, self.name)}
  if self.goal then lines[#lines + 1] = "goal: " .. self.goal end
  lines[#lines + 1] = "experiment: " .. self.experiment
  for _, n in ipairs(self.sci_names) do
    local vals = {}
    for i, v in ipairs(self.sci[n]) do vals[i] = fmtv(v) end
    lines[#lines + 1] = string.format("  scientific %s: %s", n, table.concat(vals, ", "))
  end
  for _, d in ipairs(self.space:describe()) do lines[#lines + 1] = "  nuisance " .. d end
  for _, k in ipairs(sorted_keys(self.fixed)) do lines[#lines + 1] = string.format("  fixed %s = %s", k, fmtv(self.fixed[k])) end
  local objs = {}
  for i, o in ipairs(self.objectives) do objs[i] = string.format("%s (%s)", o.metric, o.mode) end
  lines[#lines + 1] = string.format("%d trials per scientific value, %s, seed %d; objective %s", self.trials,
    self.algorithm, self.seed, table.concat(objs, ", "))
  lines[#lines + 1] = ""
  lines[#lines + 1] = "flags:"
  lines[#lines + 1] = flags.flags_help(M.STUDY_FLAGS)
  return table.concat(lines, "\n")
end

--- `dlua STUDYFILE [flags]` (called by dlua.cli.run for a script returning a study):
-- runs it and prints the results table; returns dl.study_results with .dir and .ran
-- (nil for --help). hooks.launch starts a trial (dlua.study.ranks spreads them over
-- ranks). The report and the diagnosis are the caller's (dlua.cli: they sit above).
function M.main(self, args, script, hooks)
  hooks = hooks or {}
  local o = flags.parse_flags(args, M.STUDY_FLAGS)
  if o.help then print(M.help(self, script)); return end
  if #o.positional > 0 then error(string.format("unexpected argument '%s' (see --help)", o.positional[1]), 0) end
  if o.parallel and o.jobs and o.parallel ~= o.jobs then
    error(string.format("--parallel %d and --jobs %d: --jobs is another name of --parallel (trials at a time); " ..
      "give one", o.parallel, o.jobs), 0)
  end
  if script and not self.script then
    self.script = script
    self._site = self._site or {}
    self._site.script = self._site.script or script
  end
  local res = M.run(self, {out = o.out, trials = o.trials, parallel = o.parallel or o.jobs, steps = o.steps,
                       quiet = o.quiet, threads = o.threads, count = o.count, lease = o.lease, create = o.create,
                       launch = hooks.launch, check = not o.no_check})
  if o.create then
    print(string.format("study directory %s; run trials with: dlua agent %s --count N", res.dir, res.dir))
    return res
  end
  if res.interrupted then return res end        -- the caller exits 130 / 143; the next run continues
  print(results.format_results(res))
  if res.best == nil and #res.trials > 0 then error(M.failure_summary(res), 0) end
  return res
end

--- failure_summary(res) -> the message for a study none of whose trials
-- measured the objective (dl.study_results): the counts by status, the first
-- failure's message and where the trials' logs are.
function M.failure_summary(res)
  local counts, first = {}, nil
  for _, t in ipairs(res.trials) do
    counts[t.status] = (counts[t.status] or 0) + 1
    if not first or (first.status ~= "failed" and t.status == "failed") then first = t end
  end
  local parts = {}
  for _, k in ipairs(sorted_keys(counts)) do parts[#parts + 1] = string.format("%d %s", counts[k], k) end
  return string.format("study %s: no trial measured %s (%d trial(s): %s); %s %s: %s; logs: %s/<trial>/trial.log",
    res.name, res.metric, #res.trials, table.concat(parts, ", "), first.status == "failed" and "first failure" or
    "first", first.id, tostring(first.message or first.status), res.dir or fs.dirname(first.dir))
end

-- A flag table is a declaration, one row a flag ({flag, metavar, help, int/many}) read by
-- train/flags.lua's one parser; the command-line tables look alike by design.
local AGENT_FLAGS = {
  {"--count", "N", "run at most N trials (default: until none is left)", int = 0},
  {"--jobs", "P", "trials at a time (default 1)", int = 1},
  {"--threads", "N", "compute threads per trial (default: cores / jobs)", int = 1},
  {"--lease", "S", "seconds a claimed trial stays reserved without renewal (default 60)", int = 1},
  {"--quiet", nil, "no progress lines"},
  {"--help", nil, "this text"},
}

--- `dlua agent STUDY_DIR [--count N] [--jobs P] [--lease S] [--threads N] [--quiet]`
function M.agent_main(args, opts)
  opts = opts or {}
  local o = flags.parse_flags(args, AGENT_FLAGS, nil, "dlua agent")
  if o.help or #o.positional ~= 1 then
    print("usage: dlua agent STUDY_DIR [flags]\nclaims and runs trials of the study in STUDY_DIR (written by " ..
      "dlua STUDYFILE or --create), sharing it with other agents\n\nflags:\n" .. flags.flags_help(AGENT_FLAGS))
    if not o.help then os.exit(1) end
    return
  end
  local dir = o.positional[1]:gsub("/+$", "")
  local rec = json.decode(fs.read(dir .. "/study.json") or "")
  if type(rec) ~= "table" then error(string.format("%s holds no study.json (create it with dlua STUDYFILE --create)", dir), 0) end
  local study = spec.from_record(rec)
  if not fs.exists(study.experiment_abs or study.experiment) then
    error(string.format("study %s: experiment %s not found", study.name, study.experiment_abs or study.experiment), 0)
  end
  local agent = agent_mod.new(study, dir, {jobs = o.jobs or 1, quiet = o.quiet, threads = o.threads,
    exe = launch.exe_path(opts), lease = o.lease, count = o.count, wait = false, trials = rec.trials, root = fs.dirname(dir)})
  local ran = agent:loop()
  if agent.interrupted then                     -- 130 / 143, as a shell reports a signal
    interrupted_note(agent)
    os.exit(proc.exit_code(agent.interrupted))
  end
  if not o.quiet then
    print(string.format("agent %s ran %d trial(s) of study %s", agent.owner, #ran, study.name))
  end
  return ran
end

return M
