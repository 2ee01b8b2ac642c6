-- dl.study: roles and the same nuisance points per scientific value, parallel
-- trials as dlua subprocesses, the tracking files, re-runs as no-ops, resume
-- after the study process is killed, agents sharing one study (one killed),
-- infeasible trials, seed re-runs, re-ranking from stored histories, bayes
-- suggestions recorded once, and the errors of a bad study.
local dl = require "dlua"
local S, json, fs = dl.search, dl.json, dl.fs

local EXE = os.getenv("DLUA_EXE") or "build/dlua"
local H = dofile("tests/lua/helpers.lua")
local tmpdir = H.tmpdir
local write = H.spit

-- a tiny experiment: ~0.1 s per trial; `delay` seconds of busy waiting per step
-- makes trials slow enough to be killed, `diverge_above` makes every lr above it
-- diverge, `crash` makes build fail
local EXPERIMENT = [[
local dl = require "dlua"
local nn, optim, data = dl.nn, dl.optim, dl.data
return dl.experiment{
  name = "toy-study", description = "a small experiment for the study specs",
  hparams = {lr = 0.05, steps = 30, batch_size = 16, width = 16, optimizer = "adam", momentum = 0.9,
             delay = 0.0, diverge_above = 0.0, crash = false},
  build = function(hp)
    if hp.crash then error("crash requested") end
    local s0, c0 = dl.rng_state()
    dl.seed(11)
    local x = dl.randn(200, 8)
    local y = x:matmul(dl.randn(8, 3)):argmax(2)
    dl.rng_state(s0, c0)
    local ds = data.tensors{image = x, label = y}
    local tr, va = ds:split{150, 50, seed = 0}
    local model = nn.Sequential{nn.Linear(8, hp.width), nn.ReLU(), nn.Linear(hp.width, 3)}
    local opt = hp.optimizer == "adam" and optim.Adam{params = model:parameters(), lr = hp.lr}
      or optim.SGD{params = model:parameters(), lr = hp.lr, momentum = hp.momentum}
    return {model = model, loss = nn.CrossEntropy(), optimizer = opt,
      data = tr:shuffle{seed = hp.data_seed}:batch(hp.batch_size), steps = hp.steps,
      forward = function(m, batch)
        if hp.delay > 0 then local t = dl.clock(); while dl.clock() - t < hp.delay do end end
        local out = m(batch.image)
        if hp.diverge_above > 0 and hp.lr > hp.diverge_above then out = out * (0 / 0) end
        return out
      end,
      eval = {every = 10, sets = {valid = va}},
      checkpoint = {every = 10, keep_best = 1, metric = "valid/accuracy"}}
  end}
]]

-- a study file in dir: fields is Lua source inside dl.study{...}
local function study_file(dir, file, fields)
  write(dir .. "/" .. file, "local dl = require \"dlua\"\nlocal S = dl.search\nreturn dl.study{\n" ..
    "  experiment = \"exp.lua\",\n" .. fields .. "\n}\n")
  return dir .. "/" .. file
end

local run = H.run

local events = H.journal_events

local function by_id(rows)
  local t = {}
  for _, r in ipairs(rows) do assert(t[r.id] == nil, "trial " .. r.id .. " listed twice"); t[r.id] = r end
  return t
end

-- the best (max) valid/accuracy in a run directory, read independently
local function best_accuracy(run_dir)
  local best, step
  for l in (fs.read(run_dir .. "/metrics.jsonl") or ""):gmatch("[^\n]+") do
    local e = json.decode(l)
    if e.split == "eval" and e["valid/accuracy"] and (not best or e["valid/accuracy"] > best) then
      best, step = e["valid/accuracy"], e.step
    end
  end
  return best, step
end

local function pid_alive(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return false end
  local s = f:read("l") or ""
  f:close()
  return not s:match("^%d+ %b() Z")
end

local function wait_until(fn, seconds, what)
  local t0 = dl.clock()
  while not fn() do
    if dl.clock() - t0 > seconds then error("timed out waiting for " .. what, 2) end
    os.execute("sleep 0.05")
  end
end

local NUISANCE = [[
  nuisance = {lr = S.log_uniform(1e-3, 0.3), optimizer = S.choice{"adam", "sgd"},
              momentum = S.uniform(0.5, 0.95):when{optimizer = "sgd"}},]]

describe("dl.study", function()
  local dir
  setup(function()
    dir = tmpdir("main")
    write(dir .. "/exp.lua", EXPERIMENT)
  end)
  teardown(function() fs.rm_rf(dir) end)

  it("runs every scientific value over the same nuisance points, in parallel, and writes the tracking files", function()
    study_file(dir, "width.lua", [[
  name = "width", goal = "does the width matter once lr is re-tuned?",
  scientific = {width = {8, 32}},]] .. NUISANCE .. [[
  fixed = {batch_size = 16}, trials = 3, seed = 5, parallel = 2,
  objective = {metric = "valid/accuracy", mode = "max"},]])
    local out, rc = run(dir, "width.lua --out runs")
    assert.are.equal(0, rc, out)
    local sd = dir .. "/runs/width"
    -- the study ends with its report and the diagnosis
    assert.truthy(out:find("report: runs/width/report.html", 1, true), out)
    assert.truthy(fs.read(sd .. "/report.html"):find("<svg", 1, true))
    local rows = dl.track.read(sd .. "/trials.csv")
    assert.are.equal(6, #rows)
    local t = by_id(rows)
    -- the documented sampler: quasirandom points of the nuisance space for seed 5
    local space = S.space{lr = S.log_uniform(1e-3, 0.3), optimizer = S.choice{"adam", "sgd"},
                          momentum = S.uniform(0.5, 0.95):when{optimizer = "sgd"}}
    local want = S.sample(space, 3, {seed = 5})
    local saw_sgd, saw_adam = false, false
    for j = 1, 3 do
      for _, w in ipairs({8, 32}) do
        local r = t[string.format("width-%d_t%03d", w, j)]
        assert.truthy(r, "missing trial " .. j .. " of width " .. w)
        assert.are.equal("done", r.status)
        assert.are.equal(tostring(w), r["hp.width"])
        assert.are.equal("16", r["hp.batch_size"])
        assert.are.equal(want[j].lr, tonumber(r["hp.lr"]))                 -- the same point for both widths
        assert.are.equal(want[j].optimizer, r["hp.optimizer"])
        -- momentum exists only for sgd: not in the row, not on the trial's command line
        local log = fs.read(sd .. "/" .. r.id .. "/hparams.json")
        if r["hp.optimizer"] == "sgd" then
          saw_sgd = true
          assert.are.equal(want[j].momentum, tonumber(r["hp.momentum"]))
          assert.are.equal(want[j].momentum, json.decode(log).momentum)
        else
          saw_adam = true
          assert.are.equal("", r["hp.momentum"])
          assert.are.equal(0.9, json.decode(log).momentum)            -- the experiment's default
        end
        local best, step = best_accuracy(sd .. "/" .. r.id)
        assert.are.equal(best, tonumber(r.best_value))
        assert.are.equal(step, tonumber(r.best_step))
        assert.are.equal("30", r.steps_run)
        assert.are.equal("valid/accuracy", r.best_metric)
      end
    end
    assert.truthy(saw_sgd and saw_adam)
    -- the study row: the best trial's value and the exact command that reproduces it
    local srows = dl.track.read(dir .. "/runs/studies.csv")
    assert.are.equal(1, #srows)
    local s = srows[1]
    assert.are.equal("width", s.name)
    assert.are.equal("does the width matter once lr is re-tuned?", s.description)
    assert.are.equal("6", s.trials)
    local best = -1
    for _, r in ipairs(rows) do best = math.max(best, tonumber(r.best_value)) end
    assert.are.equal(best, tonumber(s.best_value))
    -- led by the dlua that ran the study (not "dlua", which is not on PATH before installation)
    local lead = dl.util.shell_quote(H.EXE) .. " exp.lua --set "
    assert.are.equal(lead, s.command:sub(1, #lead), s.command)
    assert.truthy(out:find("width=8", 1, true) and out:find("width=32", 1, true) and
      out:find("reproduce the best trial: " .. s.command, 1, true), out)
    -- a trial ranks its checkpoints by the study's objective (--objective), and the results say
    -- where the best trial's best eval is kept
    assert.truthy(s.command:find(" --objective valid/accuracy:max", 1, true), s.command)
    for _, r in ipairs(rows) do
      local rr = json.decode(fs.read(sd .. "/" .. r.id .. "/result.json"))
      assert.are.same({"valid/accuracy", "max", "objective"},
        {rr.checkpoints.metric, rr.checkpoints.mode, rr.checkpoints.chosen_by})
    end
    local rj = json.decode(fs.read(sd .. "/results.json"))
    local kept = string.format("/%s/checkpoints/ckpt-%09d.safetensors", rj.best.id, rj.best.step)
    assert.are.equal(kept, rj.best.checkpoint:sub(-#kept), rj.best.checkpoint)
    assert.truthy(out:find("its checkpoint at step " .. rj.best.step .. ": ", 1, true), out)
    -- the command as printed, pasted into a shell
    local p2 = io.popen(string.format("cd %s && %s --out %s/repro --quiet --threads 1 2>&1; echo rc=$?", dir, s.command, dir))
    local o2 = p2:read("a")
    p2:close()
    local rc2 = tonumber(o2:match("rc=(%d+)%s*$"))
    assert.are.equal(0, rc2, o2)
    assert.are.equal(tonumber(s.best_value), (best_accuracy(dir .. "/repro")))
    -- the same study again is a no-op
    local n_events = #events(sd)
    local csv = fs.read(sd .. "/trials.csv")
    out, rc = run(dir, "width.lua --out runs --quiet")
    assert.are.equal(0, rc, out)
    assert.are.equal(n_events, #events(sd))
    assert.are.equal(csv, fs.read(sd .. "/trials.csv"))
    assert.are.equal(1, #dl.track.read(dir .. "/runs/studies.csv"))
    -- re-ranking from the stored histories, checked against the metrics files
    local res = dl.study_results(sd, {metric = "valid/loss", mode = "min", aggregate = "final"})
    for _, tr in ipairs(res.trials) do
      local last
      for l in fs.read(tr.dir .. "/metrics.jsonl"):gmatch("[^\n]+") do
        local e = json.decode(l)
        if e.split == "eval" then last = e["valid/loss"] end
      end
      assert.are.equal(last, tr.value)
    end
    for gi, g in ipairs(res.groups) do
      for _, tr in ipairs(res.trials) do
        if tr.group == gi then assert(tr.value >= g.best.value, "group best is not the minimum") end
      end
    end
    assert.are.equal(6, #res.ranking)
    for i = 2, #res.ranking do assert(res.ranking[i - 1].value <= res.ranking[i].value, "ranking out of order") end
    local tr_res = dl.study_results(sd, {metric = "train/loss", mode = "min"})
    assert.are.equal(6, #tr_res.trials)
    assert.truthy(tr_res.best.value > 0)
  end)

  it("gives trial i the same point with 4 or 40 trials and with 1 or 2 jobs", function()
    local st = dl.study{name = "same", experiment = dir .. "/exp.lua", goal = "g",
      nuisance = {lr = S.log_uniform(1e-3, 0.3), width = S.int(4, 64, {log = true})},
      trials = 4, seed = 2, objective = {metric = "valid/accuracy", mode = "max"}}
    local a, b = st:plan(4), st:plan(40)
    for i = 1, 4 do
      assert.are.equal(a[i].id, b[i].id)
      assert.are.same(a[i].nuisance, b[i].nuisance)
    end
    study_file(dir, "same.lua", [[
  name = "same", goal = "g", nuisance = {lr = S.log_uniform(1e-3, 0.3), width = S.int(4, 64, {log = true})},
  trials = 4, seed = 2, objective = {metric = "valid/accuracy", mode = "max"},]])
    local o1, r1 = run(dir, "same.lua --out one --parallel 1 --quiet --threads 1")
    local o2, r2 = run(dir, "same.lua --out two --jobs 2 --quiet --threads 1")
    assert.are.equal(0, r1, o1)
    assert.are.equal(0, r2, o2)
    local x, y = by_id(dl.track.read(dir .. "/one/same/trials.csv")), by_id(dl.track.read(dir .. "/two/same/trials.csv"))
    for i = 1, 4 do
      local id = string.format("trial_t%03d", i)
      assert.are.equal(x[id]["hp.lr"], y[id]["hp.lr"])
      assert.are.equal(x[id]["hp.width"], y[id]["hp.width"])
      assert.are.equal(a[i].nuisance.lr, tonumber(x[id]["hp.lr"]))
      assert.are.equal(x[id].best_value, y[id].best_value)      -- deterministic trials: identical results
    end
  end)

  it("records diverged and failed trials as infeasible, completes, and reruns only the failed ones", function()
    study_file(dir, "infeasible.lua", [[
  name = "infeasible", goal = "g", scientific = {crash = {false, true}},
  nuisance = {lr = S.log_uniform(1e-3, 10)}, fixed = {diverge_above = 1.0}, trials = 4, seed = 1, parallel = 2,
  objective = "valid/accuracy",]])
    local out, rc = run(dir, "infeasible.lua --out runs --quiet")
    assert.are.equal(0, rc, out)
    local sd = dir .. "/runs/infeasible"
    local rows = dl.track.read(sd .. "/trials.csv")
    assert.are.equal(8, #rows)
    local diverged, done = 0, 0
    for _, r in ipairs(rows) do
      if r["hp.crash"] == "true" then
        assert.are.equal("failed", r.status)
        assert.truthy(r.message:find("crash requested"), r.message)
        assert.are.equal("", r.best_value)
      elseif tonumber(r["hp.lr"]) > 1.0 then
        assert.are.equal("diverged", r.status)
        assert.are.equal("", r.best_value)                       -- infeasible: no value, never a fake one
        assert.truthy(r.message:find("nan"), r.message)
        diverged = diverged + 1
      else
        assert.are.equal("done", r.status)
        done = done + 1
      end
    end
    assert(diverged >= 1 and done >= 1, string.format("diverged %d done %d", diverged, done))
    local res = dl.study_results(sd)
    assert.are.equal(diverged, res.groups[1].infeasible)
    assert.are.equal(4, res.groups[2].infeasible)
    assert.is_nil(res.groups[2].best)
    assert.are.equal("done", res.best.status)
    assert.truthy(out:find("crash=true", 1, true))
    local named = 0
    for _, r in ipairs(dl.track.read(dir .. "/runs/studies.csv")) do if r.name == "infeasible" then named = named + 1 end end
    assert.are.equal(1, named)
    -- a re-run retries exactly the failed trials (once each)
    local before = #events(sd)
    out, rc = run(dir, "infeasible.lua --out runs --quiet")
    assert.are.equal(0, rc, out)
    local claimed = {}
    for i, e in ipairs(events(sd)) do
      if i > before and e.event == "claim" then claimed[#claimed + 1] = e.trial end
    end
    table.sort(claimed)
    assert.are.same({"crash-true_t001", "crash-true_t002", "crash-true_t003", "crash-true_t004"}, claimed)
  end)

  it("resumes after the study process is killed mid-trial, rerunning exactly the unfinished trials", function()
    study_file(dir, "killed.lua", [[
  name = "killed", goal = "g", nuisance = {lr = S.log_uniform(1e-3, 0.1)},
  fixed = {delay = 0.02}, trials = 4, seed = 3, objective = {metric = "valid/accuracy", mode = "max"},]])
    local sd = dir .. "/runs/killed"
    local p = io.popen(string.format("cd %s; %s killed.lua --out runs --quiet --threads 1 >killed.log 2>&1 & echo $!",
      dir, EXE))
    local pid = tonumber(p:read("a"))
    p:close()
    local running
    wait_until(function()
      local fin, claims = {}, {}
      for _, e in ipairs(events(sd)) do
        if e.event == "finish" then fin[e.trial] = true elseif e.event == "claim" then claims[#claims + 1] = e.trial end
      end
      local last = claims[#claims]
      if next(fin) and last and not fin[last] and fs.exists(sd .. "/" .. last .. "/checkpoints/ckpt-000000010.safetensors") then
        running = last
        return true
      end
    end, 30, "a trial in progress after a finished one")
    os.execute("kill -9 " .. pid)
    wait_until(function() return not pid_alive(pid) end, 5, "the study process to die")
    local finished, n_before = {}, 0
    for _, e in ipairs(events(sd)) do
      n_before = n_before + 1
      if e.event == "finish" then finished[e.trial] = true end
    end
    assert.is_nil(finished[running])
    local out, rc = run(dir, "killed.lua --out runs --quiet --threads 1")
    assert.are.equal(0, rc, out)
    local claimed, finishes = {}, {}
    for i, e in ipairs(events(sd)) do
      if i > n_before and e.event == "claim" then claimed[#claimed + 1] = e.trial end
      if e.event == "finish" then finishes[e.trial] = (finishes[e.trial] or 0) + 1 end
    end
    local want = {}
    for j = 1, 4 do
      local id = string.format("trial_t%03d", j)
      if not finished[id] then want[#want + 1] = id end
      assert.are.equal(1, finishes[id], id)
    end
    table.sort(claimed)
    assert.are.same(want, claimed)
    -- the interrupted trial continued from its checkpoint: evals not repeated, and the
    -- same result as an uninterrupted run of its command
    local evals = {}
    for l in fs.read(sd .. "/" .. running .. "/metrics.jsonl"):gmatch("[^\n]+") do
      local e = json.decode(l)
      if e.split == "eval" then evals[#evals + 1] = e.step end
    end
    assert.are.same({10, 20, 30}, evals)
    local row = by_id(dl.track.read(sd .. "/trials.csv"))[running]
    assert.are.equal("done", row.status, row.message)
    local res = dl.study_results(sd)
    local cmd
    for _, t in ipairs(res.trials) do if t.id == running then cmd = t.command end end
    local o2, rc2 = run(dir, cmd:gsub("^%S+ ", "") .. " --out " .. dir .. "/uninterrupted --quiet --threads 1")
    assert.are.equal(0, rc2, o2)
    assert.are.equal(tonumber(row.best_value), (best_accuracy(dir .. "/uninterrupted")))
  end)

  it("lets three agents share a study, each trial run exactly once, also when one agent is killed", function()
    study_file(dir, "shared.lua", [[
  name = "shared", goal = "g", nuisance = {lr = S.log_uniform(1e-3, 0.1)},
  fixed = {delay = 0.015}, trials = 8, seed = 4, objective = {metric = "valid/accuracy", mode = "max"},]])
    local out, rc = run(dir, "shared.lua --out runs --create")
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("dlua agent runs/shared", 1, true), out)
    local sd = dir .. "/runs/shared"
    local pids = {}
    for k = 1, 3 do
      local p = io.popen(string.format("cd %s; %s agent runs/shared --quiet --lease 3 --threads 1 >agent%d.log 2>&1 & echo $!",
        dir, EXE, k))
      pids[k] = tonumber(p:read("a"))
      p:close()
    end
    -- kill one agent while it runs a trial
    local victim, victim_trial
    wait_until(function()
      local held = {}
      for _, e in ipairs(events(sd)) do
        if e.event == "claim" then held[e.trial] = e elseif e.event == "finish" then held[e.trial] = nil end
      end
      for id, e in pairs(held) do
        for _, pid in ipairs(pids) do
          if e.pid == pid and fs.exists(sd .. "/" .. id .. "/checkpoints/ckpt-000000010.safetensors") then
            victim, victim_trial = pid, id
            return true
          end
        end
      end
    end, 30, "an agent in the middle of a trial")
    os.execute("kill -9 " .. victim)
    wait_until(function()
      for _, pid in ipairs(pids) do if pid_alive(pid) then return false end end
      return true
    end, 60, "the agents to finish")
    local claims, finishes, owners = {}, {}, {}
    for _, e in ipairs(events(sd)) do
      if e.event == "claim" then claims[e.trial] = (claims[e.trial] or 0) + 1; owners[e.pid] = true end
      if e.event == "finish" then
        finishes[e.trial] = (finishes[e.trial] or 0) + 1
        assert.are.equal("done", e.status, e.trial .. ": " .. tostring(e.message))
        if e.trial == victim_trial then assert.are_not.equal(victim, tonumber(e.owner:match(":(%d+):"))) end
      end
    end
    for j = 1, 8 do
      local id = string.format("trial_t%03d", j)
      assert.are.equal(1, finishes[id], id .. " finished " .. tostring(finishes[id]) .. " times")
    end
    assert.are.equal(2, claims[victim_trial])
    local n = 0
    for _ in pairs(owners) do n = n + 1 end
    assert(n >= 2, "only one agent claimed trials")
    assert.are.equal(8, #dl.track.read(sd .. "/trials.csv"))
    local srows = dl.track.read(dir .. "/runs/studies.csv")
    local count = 0
    for _, r in ipairs(srows) do if r.name == "shared" then count = count + 1 end end
    assert.are.equal(1, count)
  end)

  it("re-runs the best trial of each scientific value with k seeds and reports the adoption test", function()
    study_file(dir, "seeds.lua", [[
  name = "seeds", goal = "g", scientific = {width = {4, 32}}, nuisance = {lr = S.log_uniform(1e-2, 0.2)},
  trials = 2, seed = 6, seeds = 2, parallel = 2, objective = {metric = "valid/loss", mode = "min"},]])
    local out, rc = run(dir, "seeds.lua --out runs")
    assert.are.equal(0, rc, out)
    local sd = dir .. "/runs/seeds"
    local rows = by_id(dl.track.read(sd .. "/trials.csv"))
    local res = dl.study_results(sd)
    for _, g in ipairs(res.groups) do
      local base = rows[g.best.id]
      local vals = {}
      for s = 1, 2 do
        local r = rows[g.best.id .. "_seed" .. s]
        assert.truthy(r, "no seed re-run " .. s .. " of " .. g.best.id)
        assert.are.equal(base["hp.lr"], r["hp.lr"])
        assert.are.equal(base["hp.width"], r["hp.width"])
        assert.are.equal(tostring(s), r["hp.seed"])
        vals[s] = tonumber(r.best_value)
      end
      assert.are.equal(2, g.seeds.n)
      assert(math.abs(g.seeds.mean - (vals[1] + vals[2]) / 2) < 1e-12)
      assert(math.abs(g.seeds.std - math.abs(vals[1] - vals[2]) / math.sqrt(2)) < 1e-12)
      assert.are.equal(2, g.trials)                              -- seed re-runs are not search trials
    end
    assert.truthy(res.adoption and res.adoption.message:find("2 x its standard error"), out)
    assert.truthy(out:find("adoption: ", 1, true) and out:find("seeds: n 2", 1, true), out)
  end)

  it("chooses bayes points once, records them, and runs the batch in parallel", function()
    study_file(dir, "bayes.lua", [[
  name = "bayes", goal = "g", algorithm = "bayes", init = 3,
  nuisance = {lr = S.log_uniform(1e-3, 0.3), width = S.int(4, 64, {log = true})},
  trials = 6, seed = 8, parallel = 2, objective = {metric = "valid/accuracy", mode = "max"},]])
    local out, rc = run(dir, "bayes.lua --out runs --quiet --threads 1")
    assert.are.equal(0, rc, out)
    local sd = dir .. "/runs/bayes"
    local suggested = {}
    for _, e in ipairs(events(sd)) do
      if e.event == "suggest" then
        assert.is_nil(suggested[e.trial], "suggested twice: " .. e.trial)
        suggested[e.trial] = e
        assert(e.nuisance.lr >= 1e-3 and e.nuisance.lr <= 0.3 and e.nuisance.width >= 4 and e.nuisance.width <= 64)
      end
    end
    assert.are.same({"trial_t004", "trial_t005", "trial_t006"}, (function()
      local l = {}
      for k in pairs(suggested) do l[#l + 1] = k end
      table.sort(l)
      return l
    end)())
    local rows = by_id(dl.track.read(sd .. "/trials.csv"))
    for id, e in pairs(suggested) do assert.are.equal(e.nuisance.lr, tonumber(rows[id]["hp.lr"])) end
    local n = #events(sd)
    out, rc = run(dir, "bayes.lua --out runs --quiet")
    assert.are.equal(0, rc, out)
    assert.are.equal(n, #events(sd))
  end)

  it("refuses a changed study in the same directory, and has --help and clear flag errors", function()
    study_file(dir, "changed.lua", [[
  name = "width", goal = "g", scientific = {width = {8, 32}},]] .. NUISANCE .. [[
  fixed = {batch_size = 16}, trials = 3, seed = 99, objective = {metric = "valid/accuracy", mode = "max"},]])
    local out, rc = run(dir, "changed.lua --out runs --quiet")
    assert.are.equal(1, rc, out)
    assert.truthy(out:find("holds study 'width' with another search space, seed", 1, true), out)
    out, rc = run(dir, "changed.lua --help")
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("scientific width: 8, 32", 1, true) and out:find("nuisance lr = log_uniform", 1, true) and
      out:find("--parallel P", 1, true), out)
    out, rc = run(dir, "changed.lua --trails 3")
    assert.are.equal(1, rc)
    assert.truthy(out:find("dlua: unknown flag '--trails' (see --help); did you mean '--trials'?", 1, true), out)
    out, rc = run(dir, "changed.lua --count -1")
    assert.are.equal(1, rc)
    assert.truthy(out:find("dlua: --count: expected a non-negative integer, got '-1'", 1, true), out)
    out, rc = run(dir, "agent " .. dir .. "/nowhere")
    assert.are.equal(1, rc)
    assert.truthy(out:find("holds no study.json", 1, true), out)
  end)
end)

describe("dlua.study.results", function()
  it("says whether the best trial's best eval has a checkpoint, and which one is kept otherwise", function()
    local results = require "dlua.study.results"
    local d = tmpdir("ckat")
    fs.mkdir_p(d .. "/checkpoints")
    write(d .. "/checkpoints/index.json", json.encode({evals = {}, checkpoints = {
      {step = 10, path = "ckpt-000000010.safetensors"}, {step = 30, path = "ckpt-000000030.safetensors"}},
      best = {step = 30, path = "ckpt-000000030.safetensors"}}))
    assert.are.equal(d .. "/checkpoints/ckpt-000000010.safetensors", (results.checkpoint_at(d, 10)))
    local at, best = results.checkpoint_at(d, 20)
    assert.is_nil(at)
    assert.are.same({step = 30, path = d .. "/checkpoints/ckpt-000000030.safetensors"}, best)
    assert.is_nil(results.checkpoint_at(d .. "/none", 10))
    local res = {name = "s", metric = "valid/accuracy", aggregate = "best", mode = "max", groups = {},
                 best = {command = "dlua exp.lua", step = 20, kept_best = best}}
    assert.truthy(results.format_results(res):find("its best eval (step 20) has no checkpoint; its best kept " ..
      "checkpoint is step 30: " .. d .. "/checkpoints/ckpt-000000030.safetensors", 1, true))
    res.best.checkpoint, res.best.step = d .. "/checkpoints/ckpt-000000010.safetensors", 10
    assert.truthy(results.format_results(res):find("its checkpoint at step 10: " .. res.best.checkpoint, 1, true))
    fs.rm_rf(d)
  end)
end)

describe("dl.study validation", function()
  local dir, exp
  setup(function()
    dir = tmpdir("valid")
    exp = dir .. "/exp.lua"
    write(exp, EXPERIMENT)
  end)
  teardown(function() fs.rm_rf(dir) end)

  local function study(over)
    local spec = {name = "v", goal = "g", experiment = exp, nuisance = {lr = S.log_uniform(1e-3, 1)}, trials = 4,
                  objective = {metric = "valid/accuracy", mode = "max"}}
    for k, v in pairs(over) do spec[k] = v end
    for k, v in pairs(over) do if v == false and k ~= "allow_step_search" then spec[k] = nil end end
    return dl.study(spec)
  end

  it("rejects bad studies with messages naming the problem", function()
    assert.error_matches(function() study{nuisance = {lrr = S.uniform(0, 1)}} end,
      "nuisance hyperparameter 'lrr' is not a hyperparameter of .*exp%.lua %(valid: batch_size, crash, delay, " ..
      "diverge_above, lr, momentum, optimizer, steps, width%)")
    assert.error_matches(function() study{nuisance = {steps = S.int(10, 100)}} end,
      "steps is searched %(nuisance%); the playbook picks one step budget")
    assert.error_matches(function() study{scientific = {steps = {10, 20}}} end, "steps is searched %(scientific%)")
    assert.truthy(study{scientific = {steps = {10, 20}}, allow_step_search = true})
    assert.error_matches(function() study{nuisance = {width = S.uniform(4, 64)}} end,
      "nuisance width samples real numbers, but the experiment's default %(16%) is an integer")
    assert.error_matches(function() study{fixed = {optimizer = 3}} end,
      "fixed optimizer = 3 is a number, but the experiment's default %(adam%) is a string")
    assert.error_matches(function() study{fixed = {lr = 0.1}} end, "lr is both fixed and nuisance")
    assert.error_matches(function() study{trails = 3} end, "dl.study: unknown option 'trails' %(valid: algorithm, " ..
      "allow_step_search, .*%); did you mean 'trials'%?")
    assert.error_matches(function() study{objective = {metric = "valid/accuracy", mdoe = "max"}} end,
      "dl.study: unknown option 'mdoe' in objective %(valid: metric, mode%); did you mean 'mode'%?")
    assert.error_matches(function() study{objective = false} end, "objective = {metric = ")
    assert.error_matches(function() study{algorithm = "tpe"} end, "unknown algorithm 'tpe'")
    assert.error_matches(function() study{trials = 0} end, "trials must be a positive integer")
    assert.error_matches(function() study{nuisance = {momentum = S.uniform(0.5, 0.9):when{optimizer = "sdg"}},
      fixed = {optimizer = "sgd"}} end, "momentum depends on optimizer = \"sdg\", which is not a value of optimizer")
    assert.error_matches(function() study{experiment = dir .. "/none.lua"} end, "cannot load experiment")
  end)

  it("warns when the batch size is tuned by the validation metric and when a grid has more than 2 dims", function()
    local st = study{nuisance = {batch_size = S.discrete{16, 32}, lr = S.log_uniform(1e-3, 1)}}
    assert.truthy(st.warnings[1]:find("batch_size is a nuisance hyperparameter", 1, true), st.warnings[1])
    local g = study{algorithm = "grid", grid_points = 2, trials = false,
      nuisance = {lr = S.log_uniform(1e-3, 1), momentum = S.uniform(0.5, 0.9), width = S.discrete{8, 16}}}
    assert.truthy(g.warnings[1]:find("grid search over 3 varied dimensions", 1, true))
    assert.are.equal(8, g.trials)
    assert.is_nil(study{}.warnings[1])
  end)

  it("accepts a manual list of trials", function()
    local st = study{nuisance = false, trials = {{lr = 0.1}, {lr = 0.01, optimizer = "sgd"}}}
    assert.are.equal("manual", st.algorithm)
    local plan = st:plan()
    assert.are.same({lr = 0.1}, plan[1].nuisance)
    assert.are.same({lr = 0.01, optimizer = "sgd"}, plan[2].nuisance)
  end)
end)

describe("a study checks itself before it spends", function()
  local dir
  setup(function()
    dir = tmpdir("check")
    write(dir .. "/exp.lua", EXPERIMENT)
  end)
  teardown(function() fs.rm_rf(dir) end)

  -- the 1-based line of file holding text (found independently of the library)
  local line_of = H.line_of

  it("fails on a misspelled objective before any trial trains, naming the file, the line and the metrics", function()
    local f = study_file(dir, "objective.lua", [[
  name = "objective", goal = "g", nuisance = {lr = S.log_uniform(1e-3, 0.1)}, trials = 2,
  objective = {metric = "valid/acc", mode = "max"},]])
    local out, rc = run(dir, "objective.lua --out runs")
    assert.are.equal(1, rc, out)
    assert.truthy(out:find("dlua: objective.lua:" .. line_of(f, "valid/acc") .. ": dl.study: objective 'valid/acc' " ..
      "is not a metric of exp.lua: a one-step dry run reported train/examples_per_s, train/grad_norm, train/loss, " ..
      "train/lr, train/time_per_step, valid/accuracy, valid/loss; did you mean 'valid/accuracy'?\n", 1, true), out)
    assert.is_false(fs.exists(dir .. "/runs"))             -- no study directory, journal or trial directory
    assert.is_nil(out:find("started", 1, true), out)
    -- the same study object through study:run: the error comes before anything is written
    local st = dl.study{name = "objective2", goal = "g", experiment = dir .. "/exp.lua", trials = 1,
                        nuisance = {lr = S.log_uniform(1e-3, 0.1)}, objective = {metric = "train/los", mode = "min"}}
    local ok, err = pcall(st.run, st, {out = dir .. "/runs2", quiet = true, exe = EXE})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("objective 'train/los' is not a metric of .*; did you mean 'train/loss'%?$"), err)
    assert.is_false(fs.exists(dir .. "/runs2"))
  end)

  it("fails on a misspelled hyperparameter naming the file, the line and the nearest name", function()
    local f = study_file(dir, "hparam.lua", [[
  name = "hparam", goal = "g",
  nuisance = {lrr = S.log_uniform(1e-3, 0.1)}, trials = 2, objective = "valid/accuracy",]])
    local out, rc = run(dir, "hparam.lua --out runs")
    assert.are.equal(1, rc, out)
    assert.truthy(out:find("dlua: hparam.lua:" .. line_of(f, "lrr =") .. ": dl.study: nuisance hyperparameter " ..
      "'lrr' is not a hyperparameter of exp.lua (valid: batch_size, crash, delay, diverge_above, lr, momentum, " ..
      "optimizer, steps, width); did you mean 'lr'?\n", 1, true), out)
    assert.is_false(fs.exists(dir .. "/runs"))
    -- not a tail call (the study kept in a local): the key's line all the same
    write(dir .. "/fixed.lua", "local dl = require \"dlua\"\nlocal st = dl.study{\n  name = \"fixed\", goal = \"g\",\n" ..
      "  experiment = \"exp.lua\",\n  fixed = {widht = 8},\n  trials = 1, objective = \"valid/accuracy\",\n}\nreturn st\n")
    out, rc = run(dir, "fixed.lua --out runs")
    assert.are.equal(1, rc, out)
    assert.truthy(out:find("fixed.lua:5: dl.study: fixed hyperparameter 'widht' is not a hyperparameter of exp.lua " ..
      "(valid: batch_size, crash, delay, diverge_above, lr, momentum, optimizer, steps, width); did you mean " ..
      "'width'?", 1, true), out)
    assert.is_false(fs.exists(dir .. "/runs"))
  end)

  it("finds the experiment next to the study file from another working directory", function()
    fs.mkdir_p(dir .. "/sub")
    fs.mkdir_p(dir .. "/elsewhere")
    write(dir .. "/sub/exp.lua", EXPERIMENT)
    study_file(dir .. "/sub", "rel.lua", [[
  name = "rel", goal = "g", nuisance = {lr = S.log_uniform(1e-3, 0.1)}, fixed = {steps = 10}, trials = 2,
  objective = "valid/accuracy",]])
    local out, rc = run(dir .. "/elsewhere", "../sub/rel.lua --out runs --quiet")
    assert.are.equal(0, rc, out)
    local rows = dl.track.read(dir .. "/elsewhere/runs/rel/trials.csv")
    assert.are.equal(2, #rows)
    for _, r in ipairs(rows) do assert.are.equal("done", r.status, r.message) end
    assert.truthy(out:find("reproduce the best trial: " .. dl.util.shell_quote(H.EXE) .. " ../sub/exp.lua --set", 1, true), out)
    -- and through recipes/study.lua, which loads the study file itself
    local recipe = require("lfs").currentdir() .. "/recipes/study.lua"
    out, rc = run(dir .. "/elsewhere", H.shquote(recipe) .. " ../sub/rel.lua --out runs2 --quiet --no-report")
    assert.are.equal(0, rc, out)
    assert.are.equal(2, #dl.track.read(dir .. "/elsewhere/runs2/rel/trials.csv"))
  end)

  it("runs examples/fashion_mnist_study.lua from another directory (its check, no trial)", function()
    local repo = require("lfs").currentdir()
    fs.mkdir_p(dir .. "/fm")
    local out, rc = run(dir .. "/fm", H.shquote(repo .. "/examples/fashion_mnist_study.lua") .. " --count 0 --out runs")
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("[fashion-mnist-optimizer] objective valid/accuracy checked: a one-step dry run reports it",
      1, true), out)
    local rec = json.decode(fs.read(dir .. "/fm/runs/fashion-mnist-optimizer/study.json"))
    assert.are.equal(repo .. "/examples/fashion_mnist.lua", rec.experiment_abs)
    for _, name in ipairs(fs.list(dir .. "/fm/runs/fashion-mnist-optimizer")) do
      assert.is_nil(name:match("_t%d%d%d$"), name)           -- --count 0: no trial ran
    end
  end)

  it("runs examples/flowers.lua and examples/flowers_study.lua from another directory (dl.here)", function()
    local repo = require("lfs").currentdir()
    fs.mkdir_p(dir .. "/fl")
    local out, rc = run(dir .. "/fl", H.shquote(repo .. "/examples/flowers.lua") .. " --steps 5 --quiet --threads 1")
    assert.are.equal(0, rc, out)
    assert.are.equal("done", json.decode(fs.read(dir .. "/fl/runs/flowers/result.json")).status)
    out, rc = run(dir .. "/fl", H.shquote(repo .. "/examples/flowers_study.lua") .. " --out runs --quiet --steps 10")
    assert.are.equal(0, rc, out)
    local rows = dl.track.read(dir .. "/fl/runs/flowers-lr/trials.csv")
    assert.are.equal(4, #rows)
    for _, r in ipairs(rows) do assert.are.equal("done", r.status, r.message) end
    -- the run directories are the shell's: nothing was written next to the examples
    assert.is_false(fs.exists(repo .. "/examples/runs"))
  end)

  it("exits non-zero with a summary when every trial fails", function()
    study_file(dir, "allfail.lua", [[
  name = "allfail", goal = "g", nuisance = {lr = S.log_uniform(1e-3, 0.1)}, fixed = {crash = true}, trials = 2,
  parallel = 2, objective = "valid/accuracy",]])
    -- --no-check: the dry run would stop the study before any trial (next test)
    local out, rc = run(dir, "allfail.lua --out runs --quiet --no-check")
    assert.are.equal(1, rc, out)
    assert.truthy(out:find("dlua: study allfail: no trial measured valid/accuracy (2 trial(s): 2 failed); first " ..
      "failure trial_t001: ", 1, true), out)
    assert.truthy(out:find("crash requested", 1, true), out)
    assert.truthy(out:find("; logs: runs/allfail/<trial>/trial.log", 1, true), out)
    local rows = dl.track.read(dir .. "/runs/allfail/trials.csv")
    assert.are.equal(2, #rows)
    for _, r in ipairs(rows) do assert.are.equal("failed", r.status) end
  end)
end)

describe("a study whose dry run fails", function()
  it("stops before claiming any trial, naming the failure and its file:line, and exits non-zero", function()
    local dir = tmpdir("dryfail")
    fs.mkdir_p(dir)
    write(dir .. "/exp.lua", EXPERIMENT)
    study_file(dir, "broken.lua", [[
  name = "broken", goal = "g", nuisance = {lr = S.log_uniform(1e-3, 0.1)}, fixed = {crash = true}, trials = 4,
  parallel = 2, objective = "valid/accuracy",]])
    local out, rc = run(dir, "broken.lua --out runs --quiet")
    assert.are.equal(1, rc, out)
    assert.truthy(out:find("dlua: broken.lua:4: study broken: the one-step dry run of exp.lua failed, so no trial " ..
      "was started: " .. dir .. "/exp.lua:8: crash requested", 1, true), out)
    assert.truthy(out:find("or pass --no-check to skip the dry run)", 1, true), out)
    assert.is_nil(out:find("trial_t0", 1, true), out)
    -- nothing was claimed: no study directory at all, so no journal and no trial directory
    assert.is_false(fs.exists(dir .. "/runs/broken"))
    assert.are.equal(0, #events(dir .. "/runs/broken"))
    -- `dlua study FILE` is the same path and keeps the file:line
    out, rc = run(dir, "study broken.lua --out runs --quiet")
    assert.are.equal(1, rc, out)
    assert.truthy(out:find("dlua: broken.lua:4: study broken: the one-step dry run of exp.lua failed, so no trial " ..
      "was started: " .. dir .. "/exp.lua:8: crash requested", 1, true), out)
    assert.is_false(fs.exists(dir .. "/runs/broken"))
    fs.rm_rf(dir)
  end)

  it("names a relative path the experiment could not open, and where relative paths start", function()
    local dir = tmpdir("dryfail-path")
    fs.mkdir_p(dir .. "/elsewhere")
    write(dir .. "/exp.lua", EXPERIMENT:gsub("if hp.crash then error%(\"crash requested\"%) end",
      "if hp.crash then dl.data.csv{path = \"data/none.csv\", fields = {x = {\"a\"}}} end"))
    study_file(dir, "broken.lua", [[
  name = "broken", goal = "g", nuisance = {lr = S.log_uniform(1e-3, 0.1)}, fixed = {crash = true}, trials = 2,
  objective = "valid/accuracy",]])
    local out, rc = run(dir .. "/elsewhere", "../broken.lua --out runs --quiet")
    assert.are.equal(1, rc, out)
    assert.truthy(out:find("cannot open 'data/none.csv'", 1, true), out)
    assert.truthy(out:find("'data/none.csv' is relative to the directory the study runs in (" .. dir .. "/elsewhere): " ..
      "write dl.here(\"data/none.csv\") for a file next to the experiment", 1, true), out)
    assert.is_false(fs.exists(dir .. "/elsewhere/runs/broken"))
    fs.rm_rf(dir)
  end)
end)

describe("examples/fashion_mnist_study.lua", function()
  if not os.getenv("DLUA_FASHION_STUDY") then
    pending("set DLUA_FASHION_STUDY=1 to run the Fashion-MNIST study (2 x 8 trials, several minutes)")
    return
  end
  it("runs end to end, writes trials.csv and the studies.csv row, and a re-run is a no-op", function()
    local dir = tmpdir("fashion")
    local function go()
      local p = io.popen(string.format("%s examples/fashion_mnist_study.lua --out %s --quiet 2>&1; echo rc=$?", EXE, dir))
      local out = p:read("a")
      p:close()
      return out, tonumber(out:match("rc=(%d+)%s*$"))
    end
    local out, rc = go()
    assert.are.equal(0, rc, out)
    local rows = dl.track.read(dir .. "/fashion-mnist-optimizer/trials.csv")
    assert.are.equal(16, #rows)
    assert.are.equal(1, #dl.track.read(dir .. "/studies.csv"))
    local n = #events(dir .. "/fashion-mnist-optimizer")
    out, rc = go()
    assert.are.equal(0, rc, out)
    assert.are.equal(n, #events(dir .. "/fashion-mnist-optimizer"))
    fs.rm_rf(dir)
  end)
end)
