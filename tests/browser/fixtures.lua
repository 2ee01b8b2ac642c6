-- tests/browser/fixtures.lua -- writes the synthetic studies of tests/lua/report_fixtures.lua,
-- their interactive reports and the manifest tests/browser/report.test.js reads:
--   dlua tests/browser/fixtures.lua OUT_DIR [TRIALS_OF_THE_BIG_STUDY]
-- Pages: mixed (conditional momentum, a diverging trial, infeasible and pruned trials, seed
-- re-runs), single (one eval per trial), run (a single run directory), trained (a run dl.train
-- wrote: every logged series, checked against its metrics.jsonl), runwatch (that run being
-- written while the watcher runs), many (200 trials, for
-- the timing) and watch (a study half finished, its full journal kept aside for the test to
-- put back while the watcher runs). Prints the manifest's path. Run from the repository root.
local dl = require "dlua"
local F = dofile("tests/lua/report_fixtures.lua")
local A = require "dlua.report.analysis"
local report = require "dlua.report"
local fs, json = dl.fs, dl.json

local out = assert(arg[1], "usage: dlua tests/browser/fixtures.lua OUT_DIR [TRIALS]")
local many = tonumber(arg[2] or "200")
fs.mkdir_p(out)
local pages = {}

local function describe(name, dir, page, extra)
  local d = A.load(dir)
  local dirs, order = {}, {}
  for _, t in ipairs(d.trials) do dirs[t.id] = t.dir; order[tostring(t.order)] = t.id end
  local p = {page = page, dir = dir, trial_dirs = dirs, order = order, metric = d.metric, trials = #d.trials}
  for k, v in pairs(extra or {}) do p[k] = v end
  pages[name] = p
  return d
end

-- the mixed study
local mixed = F.mixed_study(out .. "/mixed")
local pruned = {}
for _, t in ipairs(A.load(mixed).trials) do if t.pruned then pruned[t.id] = t.rung end end
describe("mixed", mixed, dl.report(mixed), {screenshot = "report", expect = {clipped = {"optimizer-adam_t002"},
  pruned = pruned, na = 4}})

-- one eval per trial
local single = F.single_eval_study(out .. "/single")
local ds = describe("single", single, dl.report(single))
pages.single.expect = {single = #ds.trials}

-- one run
local run = F.run(out .. "/run/lr-0.01", {steps = 120, hp = {lr = 0.01, name = "one-run"},
  train = function(s) return 0.2 + 2 / (1 + s / 10) end,
  eval = function(s) return {["valid/accuracy"] = 0.9 - 0.5 / (1 + s / 20), ["valid/loss"] = 0.3 + 1 / (1 + s / 20)} end})
describe("run", run, dl.report(run), {trial_dirs = {["lr-0.01"] = run}})

-- a run dl.train wrote (a small classifier): train lines with the learning rate of its
-- schedule, two eval sets with per-class accuracy, the averaged weights' metrics
do
  local nn, optim = dl.nn, dl.optim
  dl.seed(1)
  local x = dl.randn(300, 6)
  local y = x:matmul(dl.tensor({{1, 0, -1}, {0, 1, 1}, {1, 1, 0}, {-1, 0, 1}, {0, -1, 0}, {1, 0, 0}})):argmax(2)
  local tr, va, te = dl.data.tensors{image = x, label = y}:split{200, 50, 50, seed = 0}
  local model = nn.Sequential{nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)}
  local dir = out .. "/trained/small"
  dl.train{model = model, loss = nn.CrossEntropy(), optimizer = optim.SGD{params = model:parameters(), lr = 0.2},
    schedule = optim.schedule.cosine{warmup = 10}, data = tr:shuffle{seed = 3}:batch(16), steps = 60, dir = dir,
    quiet = true, tracking = false, log_every = 5, ema = {decay = 0.9},
    eval = {every = 15, sets = {valid = va, test = te}, batch_size = 25, metrics = {"loss", "accuracy", "per_class"}}}
  describe("trained", dir, dl.report(dir), {trial_dirs = {small = dir}, series = true})
end

-- a run being watched: its first 30 log lines now, the rest (and result.json) put back by the test
do
  local src = out .. "/trained/small"
  local w = out .. "/runwatch/small"
  fs.mkdir_p(w)
  local full = fs.read(src .. "/metrics.jsonl")
  F.write(w .. "/metrics.full", full)
  F.write(w .. "/result.full", fs.read(src .. "/result.json"))
  F.write(w .. "/hparams.json", fs.read(src .. "/hparams.json") or "{}\n")
  local lines = {}
  for l in full:gmatch("[^\n]+") do lines[#lines + 1] = l end
  F.write(w .. "/metrics.jsonl", table.concat(lines, "\n", 1, 8) .. "\n")
  pages.runwatch = {kind = "runwatch", dir = w, page = w .. "/report.html", full_metrics = w .. "/metrics.full",
    full_result = w .. "/result.full"}
end

-- many trials, for the timing
local big = F.many_study(out .. "/many", many)
local t0 = dl.clock()
local bigpage = dl.report(big)
describe("many", big, bigpage, {kind = "timing", lua_seconds = dl.clock() - t0})

-- a study being watched: half its journal now, the rest put back by the test
local w = F.mixed_study(out .. "/watch")
local full = fs.read(w .. "/journal.jsonl")
F.write(w .. "/journal.full", full)
local lines = {}
for l in full:gmatch("[^\n]+") do lines[#lines + 1] = l end
F.write(w .. "/journal.jsonl", table.concat(lines, "\n", 1, 6) .. "\n")
pages.watch = {kind = "watch", dir = w, page = w .. "/report.html", full_journal = w .. "/journal.full", trials_after = #lines}

local manifest = {chromium = report.chromium(), dlua = os.getenv("DLUA_EXE") or (fs.exists("build/dlua") and
  (require("lfs").currentdir() .. "/build/dlua")) or "dlua", root = require("lfs").currentdir(), pages = pages}
F.write(out .. "/manifest.json", json.encode(manifest) .. "\n")
print(out .. "/manifest.json")
print(string.format("fixtures: the %d-trial report took %.2f s in Lua", many, pages.many.lua_seconds))
