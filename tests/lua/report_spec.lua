-- dl.report: the self-contained page and what each plot draws, on synthetic studies
-- with known numbers (tests/lua/report_fixtures.lua) and one tiny real dl.train run
-- (per-step gradient norms from its checkpoint); dlua.report.svg's scales; the report recipe;
-- and the page in headless Chromium (tests/browser/check_report.lua).
local dl = require "dlua"
local F = dofile("tests/lua/report_fixtures.lua")
local A = require "dlua.report.analysis"
local svg = require "dlua.report.svg"
local S, fs, json = dl.search, dl.fs, dl.json

local EXE = os.getenv("DLUA_EXE") or "build/dlua"

local function read(path) return assert(fs.read(path)) end

-- the <figure id=...>...</figure> of a plot
local function figure(html, id)
  local a = html:find('<figure class="figure" id="' .. id .. '">', 1, true)
  if not a then return nil end
  local b = html:find("</figure>", a, true)
  return html:sub(a, b + 8)
end

local function count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end

local function unescape(s)
  return (s:gsub("&lt;", "<"):gsub("&gt;", ">"):gsub("&quot;", '"'):gsub("&#39;", "'"):gsub("&amp;", "&"))
end

local function log10(x) return math.log(x, 10) end

-- a two-group study: 8 trials per optimizer, lr and (sgd only) momentum searched, the
-- trials with lr > 0.03 diverged, seed re-runs of sgd's first trial
local function two_group_study(root)
  return F.study(root, {scientific = {optimizer = {"sgd", "adam"}}, trials = 8,
    nuisance = {lr = S.log_uniform(1e-4, 1e-1), momentum = S.uniform(0.8, 0.99):when{optimizer = "sgd"}},
    value = function(hp) if hp.lr > 0.03 then return nil end return 0.5 + 0.1 * log10(hp.lr / 1e-4) end,
    seeds = {[1] = {0.8, 0.81, 0.79}}})
end

describe("dlua.report.svg", function()
  it("places values on log and linear axes by their fraction of the range", function()
    local p = svg.plot{id = "t", x = {log = true, min = 1e-4, max = 1e-1}, y = {min = 0, max = 1}}
    p:points({1e-4, 1e-3, 1e-1}, {0, 0.5, 1})
    local s = p:render()
    local xs, ys = {}, {}
    for cx, cy in s:gmatch('<circle class="pt" cx="([%d%.]+)" cy="([%d%.]+)"') do
      xs[#xs + 1], ys[#ys + 1] = tonumber(cx), tonumber(cy)
    end
    assert.are.equal(3, #xs)
    -- 1e-3 is a third of the way across three decades; 0.5 half way up
    assert.is_true(math.abs((xs[2] - xs[1]) / (xs[3] - xs[1]) - 1 / 3) < 1e-3)
    assert.is_true(math.abs((ys[2] - ys[1]) / (ys[3] - ys[1]) - 0.5) < 1e-3)
    assert.is_true(ys[3] < ys[1], "larger values are higher up")
  end)

  it("has decade ticks on log axes and 1-2-5 ticks on linear ones", function()
    assert.are.same({1e-4, 1e-3, 1e-2, 1e-1}, svg.log_ticks(1e-4, 1e-1))
    assert.are.same({0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}, svg.linear_ticks(0, 1))
    assert.are.same({1, 2, 5, 10, 20, 50}, svg.log_ticks(1, 50))
  end)

  it("bins a histogram so that the counts add up to the finite values", function()
    local edges, counts = svg.histogram({1, 2, 2, 3, 10, 0 / 0, math.huge}, {bins = 3})
    assert.are.same({1, 4, 7, 10}, edges)
    assert.are.same({4, 0, 1}, counts)
  end)

  it("escapes text", function()
    assert.are.equal("a &lt;b&gt; &amp; &quot;c&quot;", svg.escape('a <b> & "c"'))
  end)
end)

describe("dl.report{static = true} on a study", function()
  local root, dir, html, d
  setup(function()
    root = F.tmpdir("study")
    dir = two_group_study(root)
    local path = dl.report(dir, {static = true})
    assert.are.equal(dir .. "/report.html", path)
    html = read(path)
    d = A.load(dir)
  end)
  teardown(function() fs.rm_rf(root) end)

  it("is self-contained: nothing is fetched", function()
    local rest = html:gsub('xmlns="http://www.w3.org/2000/svg"', "")
    assert.is_nil(rest:find("https?://"))
    assert.is_nil(rest:find("<link", 1, true))
    assert.is_nil(rest:find("<img", 1, true))
    assert.is_nil(rest:find("src=", 1, true))
    assert.is_nil(rest:find("@import", 1, true))
    for u in rest:gmatch("url%(([^)]*)%)") do assert.truthy(u:match("^#"), u) end
    assert.truthy(html:find("^<!DOCTYPE html>"))
  end)

  it("draws one axis point per feasible trial and a red cross per infeasible one, with the bounds", function()
    local feasible, infeasible = 0, 0
    for _, t in ipairs(d.trials) do
      if t.kind == "search" then
        if t.hp.lr > 0.03 then infeasible = infeasible + 1 else feasible = feasible + 1 end
      end
    end
    assert.is_true(infeasible > 0)
    local fig = assert(figure(html, "axis-lr"))
    assert.are.equal(feasible, count(fig, '<circle class="pt"'))
    assert.are.equal(infeasible, count(fig, '<path class="infeasible"'))
    assert.are.equal(2, count(fig, '<line class="bound"'))
    assert.truthy(fig:find("lr (log)", 1, true))
    -- momentum applies to sgd only
    local mfig = assert(figure(html, "axis-momentum"))
    local sgd = 0
    for _, t in ipairs(d.trials) do if t.kind == "search" and t.hp.optimizer == "sgd" then sgd = sgd + 1 end end
    assert.are.equal(sgd, count(mfig, '<circle class="pt"') + count(mfig, '<path class="infeasible"'))
  end)

  it("puts each trial on the log axis where its lr lies between the bounds", function()
    local fig = figure(html, "axis-lr")
    local bx = {}
    for x in fig:gmatch('<line class="bound" x1="([%d%.]+)"') do bx[#bx + 1] = tonumber(x) end
    local checked = 0
    for cx, title in fig:gmatch('<circle class="pt" cx="([%d%.]+)"[^>]*><title>([^<]*)</title>') do
      local lr = tonumber(unescape(title):match("lr = ([%d%.e%-]+)"))
      local expect = log10(lr / 1e-4) / 3
      assert.is_true(math.abs((tonumber(cx) - bx[1]) / (bx[2] - bx[1]) - expect) < 2e-3, title)
      checked = checked + 1
    end
    assert.is_true(checked >= 8)
  end)

  it("draws every trial's training curves with the best three highlighted", function()
    local n = 0
    for _ in ipairs(d.trials) do n = n + 1 end
    local fig = assert(figure(html, "curves-train-loss"))
    assert.are.equal(n, count(fig, '<polyline class="curve'))
    assert.are.equal(3, count(fig, '<polyline class="curve best"'))
    local top = {}
    for i = 1, 3 do top[i] = d.search_ranking[i].id end
    local vfig = assert(figure(html, "curves-valid-accuracy"))
    for i, id in ipairs(top) do assert.truthy(vfig:find("#" .. i .. " " .. id, 1, true), id) end
  end)

  it("draws the parallel coordinates with one line per trial, coloured by the objective", function()
    local fig = assert(figure(html, "parallel"))
    local search, bad = 0, 0
    for _, t in ipairs(d.trials) do
      if t.kind == "search" then search = search + 1; if not t.feasible then bad = bad + 1 end end
    end
    assert.are.equal(search, count(fig, 'class="pc%-line'))
    assert.are.equal(bad, count(fig, 'class="pc%-line pc%-infeasible"'))
    -- the best trial is yellow (the top of the colour scale), the worst dark
    local best_color = fig:match('stroke="(#%x+)" stroke%-width="3"')
    assert.are.equal(svg.color_scale(1), best_color)
    for _, axis in ipairs({"lr (log)", "momentum", "optimizer", "valid/accuracy"}) do
      assert.truthy(fig:find(">" .. axis .. "<", 1, true), axis)
    end
  end)

  it("draws the isolation plot with the best trial per scientific value and the seed spread", function()
    local fig = assert(figure(html, "isolation-optimizer"))
    assert.are.equal(2, count(fig, '<circle class="pt iso"'))
    assert.are.equal(1, count(fig, 'class="errorbar"'))
    -- mean and (sample) std of the seed re-runs 0.8, 0.81, 0.79
    local vals = {0.8, 0.81, 0.79}
    local m = (vals[1] + vals[2] + vals[3]) / 3
    local sd = math.sqrt(((vals[1] - m) ^ 2 + (vals[2] - m) ^ 2 + (vals[3] - m) ^ 2) / 2)
    assert.truthy(fig:find(string.format("sgd: seeds n 3, mean %.4g, std %.4g", m, sd), 1, true), fig)
    -- the points are the best value of each group
    for _, g in ipairs({"sgd", "adam"}) do
      local best
      for _, t in ipairs(d.search_ranking) do if t.hp.optimizer == g then best = best or t end end
      assert.truthy(fig:find(string.format("optimizer = %s: best %s (%.4g)", g, best.id, best.value), 1, true))
    end
  end)

  it("buckets a continuous hyperparameter for its isolation plot in its sampling scale", function()
    local path = dl.report(dir, {isolate = {"lr"}, out = root .. "/iso.html", static = true})
    local fig = assert(figure(read(path), "isolation-lr"))
    -- 16 trials with lr active -> ceil(sqrt(16)) = 4 equal buckets of log10(lr) over [-4, -1]
    local best = {}
    for _, t in ipairs(d.trials) do
      if t.kind == "search" and t.feasible then
        local b = math.min(4, math.floor((log10(t.hp.lr) + 4) / 3 * 4) + 1)
        if not best[b] or t.value > best[b] then best[b] = t.value end
      end
    end
    local n = 0
    for _ in pairs(best) do n = n + 1 end
    assert.are.equal(n, count(fig, '<circle class="pt iso"'))
    assert.are.equal(5, count(fig, 'class="bucket%-edge"'))
  end)

  it("lists every trial in the sortable table, best first, infeasible last", function()
    local tbl = html:match('<table class="sortable" id="trials%-table">.-</table>')
    assert.are.equal(#d.trials, count(tbl, "<tr class="))
    local first = tbl:match('<tr class="best" data%-trial="([^"]+)"')
    assert.are.equal(d.best.id, first)
    local ids = {}
    for cls, id in tbl:gmatch('<tr class="(%a*)" data%-trial="([^"]+)"') do ids[#ids + 1] = {cls, id} end
    assert.are.equal("infeasible", ids[#ids][1])
    assert.truthy(html:find("<script>", 1, true))
  end)

  it("shows the diagnosis with every finding", function()
    local findings = dl.diagnose(dir, {quiet = true})
    assert.are.equal(#findings, count(html, '<li class="%a+" data%-check='))
  end)

  it("recomputes the table for another aggregation without rerunning", function()
    local path = dl.report(dir, {aggregate = "final", out = root .. "/final.html"})
    local page = read(path)
    local t = d.search_ranking[1]
    local xs, ys = A.curve(t, "valid/accuracy")
    local row = page:match('<tr class="[^"]*" data%-trial="' .. t.id:gsub("%-", "%%-") .. '">(.-)</tr>')
    assert.truthy(row:find(string.format('data%%-v="%.17g"', ys[#ys])), row)
    assert.truthy(page:find("(final over evals, max)", 1, true))
  end)

  it("rejects unknown options and names what it could not read", function()
    assert.error_matches(function() dl.report(dir, {metrc = "x"}) end,
      "dl.report: unknown option 'metrc' %(valid: aggregate, interval, isolate, metric, mode, out, pareto, quiet, " ..
      "static, timeout, title, top, watch%)")
    assert.error_matches(function() dl.report(root .. "/nope") end, "dl.report: .*/nope is not a directory")
  end)
end)

describe("dl.report on a run", function()
  it("plots the per-step gradient norms from the checkpoint, their histogram and the clipped fraction", function()
    local root = F.tmpdir("run")
    local nn, optim, data = dl.nn, dl.optim, dl.data
    dl.seed(5)
    local x = dl.randn(64, 4)
    local y = x:matmul(dl.randn(4, 3)):argmax(2)
    local ds = data.tensors{image = x, label = y}
    local model = nn.Sequential{nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)}
    local res = dl.train{model = model, loss = nn.CrossEntropy(), optimizer = optim.SGD{params = model:parameters(), lr = 0.5},
      data = ds:shuffle{seed = 1}:batch(16), steps = 30, eval = {every = 10, sets = {valid = ds}}, clip_grad_norm = 1.0,
      checkpoint = {keep_best = 1, metric = "valid/accuracy"}, dir = root .. "/run", quiet = true, tracking = false,
      hparams = {clip = 1.0, lr = 0.5, steps = 30}}
    assert.are.equal("done", res.status)
    local clipped = 0
    for s = 1, 30 do if res.clipped[s] then clipped = clipped + 1 end end
    local html = read(dl.report(root .. "/run", {static = true}))
    local fig = assert(figure(html, "gradnorm-steps"))
    local pts = fig:match('<polyline class="gn" points="([^"]+)"')
    assert.are.equal(30, count(pts, "[%d%.]+,[%d%.]+"))
    assert.truthy(fig:find(string.format("%d of 30 updates clipped", clipped), 1, true), fig)
    local q = A.quantile(res.grad_norms, 0.9)
    assert.truthy(fig:find(string.format("p90 %s", svg.format_number(q)), 1, true))
    local hist = assert(figure(html, "gradnorm-hist"))
    local total = 0
    for c in hist:gmatch("<title>[^<]-: (%d+)</title></rect>") do total = total + tonumber(c) end
    assert.are.equal(30, total)
    assert.is_nil(figure(html, "parallel"))
    assert.truthy(figure(html, "curves-train-loss"))
    fs.rm_rf(root)
  end)
end)

describe("recipes/report.lua", function()
  it("writes the report, prints the diagnosis and the path, and takes another metric", function()
    local root = F.tmpdir("recipe")
    local dir = two_group_study(root)
    local p = io.popen(string.format("%s recipes/report.lua %s --metric valid/loss --aggregate final 2>&1; echo rc=$?", EXE, dir))
    local out = p:read("a")
    p:close()
    assert.truthy(out:find("rc=0", 1, true), out)
    assert.truthy(out:find("diagnosis of study synthetic-study by valid/loss (final over evals, min)", 1, true), out)
    assert.truthy(out:find("report: " .. dir .. "/report.html", 1, true), out)
    local p2 = io.popen(string.format("%s recipes/report.lua %s/none 2>&1; echo rc=$?", EXE, root))
    local out2 = p2:read("a")
    p2:close()
    assert.truthy(out2:find("dlua: dl.report: .*/none is not a directory"), out2)
    assert.truthy(out2:find("rc=1", 1, true))
    local function run(flags)
      local p3 = io.popen(string.format("%s recipes/report.lua %s %s 2>&1; echo rc=$?", EXE, dir, flags))
      local o3 = p3:read("a")
      p3:close()
      return o3
    end
    assert.truthy(run("--static --out " .. root .. "/s.html"):find("rc=0", 1, true))
    local page = read(root .. "/s.html")
    assert.is_nil(page:find("window.DLUA", 1, true))
    assert.truthy(page:find('<polyline class="curve', 1, true))
    local o4 = run("--interval 1")
    assert.truthy(o4:find("--interval and --timeout go with --watch", 1, true) and o4:find("rc=1", 1, true), o4)
    local o5 = run("--watch --interval 0.1 --timeout 0.3")
    assert.truthy(o5:find("report: " .. dir .. "/report.html (update 1)", 1, true) and o5:find("rc=0", 1, true), o5)
    assert.truthy(fs.exists(dir .. "/report.html.watch.js"))
    fs.rm_rf(root)
  end)
end)

describe("the report in headless Chromium", function()
  it("renders the expected plots with the right number of marks, sorts the table, and logs no errors", function()
    local chromium = require("dlua.report").chromium()
    if not chromium and os.getenv("DLUA_SKIP_BROWSER") == "1" then
      pending("no chromium (DLUA_SKIP_BROWSER=1)")
      return
    end
    assert.truthy(chromium, "chromium is required for this test: scripts/setup.sh installs Debian's chromium " ..
      "(DLUA_SKIP_BROWSER=1 skips it)")
    local p = io.popen(string.format("%s tests/browser/check_report.lua 2>&1; echo rc=$?", EXE))
    local out = p:read("a")
    p:close()
    assert.truthy(out:find("rc=0", 1, true), out)
    assert.truthy(out:find("browser: ok", 1, true), out)
  end)
end)

describe("dlua.report.stats", function()
  it("clips only the trial far above the others' maxima (Q3 + 3 IQR of the per-trial maxima)", function()
    local series = {}
    for i = 1, 7 do series[i] = {2.3 - 0.01 * i, 1.0, 0.5} end       -- maxima 2.29 .. 2.23
    series[8] = {2.3, 6, 15}                                           -- diverges
    local lo, hi, clipped = A.robust_range(series)
    local maxs = {2.29, 2.28, 2.27, 2.26, 2.25, 2.24, 2.23, 15}
    local q1, q3 = A.quantile(maxs, 0.25), A.quantile(maxs, 0.75)
    assert.are.same({8}, clipped)
    -- the spread is at least 5% of Q3 (maxima that nearly agree do not make a hair trigger)
    assert.is_true(q3 - q1 < 0.05 * q3)
    assert.is_true(math.abs(hi - (q3 + 3 * 0.05 * q3)) < 1e-12, tostring(hi))
    assert.are.equal(0.5, lo)                                          -- the lowest value: nothing below is far off
    -- fewer than 4 trials: the full range
    local lo3, hi3, c3 = A.robust_range({{1, 2}, {1, 50}, {0.5, 3}})
    assert.are.same({0.5, 50, {}}, {lo3, hi3, c3})
  end)

  it("finds the Pareto front of two objectives", function()
    local pts = {{x = 1, y = 5}, {x = 2, y = 3}, {x = 3, y = 4}, {x = 4, y = 1}, {x = 2, y = 3}, {x = 5, y = 2}}
    -- minimise both: (1,5), (2,3) twice, (4,1) are not dominated
    assert.are.same({1, 2, 5, 4}, A.pareto(pts, {"min", "min"}))
    -- maximise both: (1,5), (3,4), (5,2)
    assert.are.same({1, 3, 6}, A.pareto(pts, {"max", "max"}))
  end)
end)

describe("dlua.report.data", function()
  it("writes exact numbers, null holes and no </script> that would end the page's script", function()
    local data = require "dlua.report.data"
    local s = data.encode({a = data.list({1.5, nil, 0.1 + 0.2}, 3), b = "</script><b>", c = 3, d = 1 / 0})
    assert.are.equal('{"a":[1.5,null,0.30000000000000004],"b":"<\\/script><b>","c":3,"d":null}', s)
    local back = json.decode(s)
    assert.are.same({"</script><b>", 3}, {back.b, back.c})
  end)
end)

describe("dl.report (interactive)", function()
  local root, dir, d, html, model
  setup(function()
    root = F.tmpdir("interactive")
    dir = F.mixed_study(root)
    html = read(dl.report(dir))
    d = A.load(dir)
    model = require("dlua.report.data").build(d, {})
  end)
  teardown(function() fs.rm_rf(root) end)

  it("inlines uPlot, its own script and the data: nothing is fetched", function()
    assert.truthy(html:find("^<!DOCTYPE html>"))
    for _, bad in ipairs({"<link", "src=", "@import", "fetch(", "XMLHttpRequest", "<iframe", "import("}) do
      assert.is_nil(html:find(bad, 1, true), bad)
    end
    -- the only URL is the one in uPlot's licence comment
    local rest = html:gsub('xmlns="http://www.w3.org/2000/svg"', ""):gsub("https://github.com/leeoniya/uPlot", "")
    assert.is_nil(rest:find("https?://"))
    local manifest = read("vendor/uplot/MANIFEST")
    assert.truthy(manifest:find("version 1.6.32", 1, true))
    assert.truthy(html:find(read("vendor/uplot/uPlot.iife.min.js"), 1, true))
    assert.truthy(html:find("window.DLUA = ", 1, true))
    local n = 0
    for _ in html:gmatch("</script>") do n = n + 1 end
    assert.are.equal(4, n)                                   -- data, uPlot, table sorting, the page's script
  end)

  it("carries every trial's curve as metrics.jsonl has it, aligned on the union of the steps", function()
    local c = model.curves[1]
    assert.are.equal("train/loss", c.metric)
    for _, s in ipairs(c.series) do
      local t = d.trials[s.t + 1]
      local want = {}
      for line in read(t.dir .. "/metrics.jsonl"):gmatch("[^\n]+") do
        local e = json.decode(line)
        if e.split == "train" then want[e.step] = e.loss end
      end
      for k, step in ipairs(c.x) do assert.are.equal(want[step], s.y[k], t.id .. " step " .. step) end
    end
  end)

  it("clips the diverging trial out of the training-loss range and keeps the others' start in view", function()
    local c = model.curves[1]
    local ids = {}
    for _, i in ipairs(c.clipped) do ids[#ids + 1] = d.trials[i + 1].id end
    assert.are.same({"optimizer-adam_t002"}, ids)
    assert.is_true(c.hi < 4 and c.hi >= 2.3 - 1e-9, tostring(c.hi))
  end)

  it("ends pruned trials' curves at their rung and shows them apart from the infeasible ones", function()
    local n = 0
    for _, t in ipairs(d.trials) do
      if t.pruned then
        n = n + 1
        assert.are.equal(40, t.rung)
        local xs = A.curve(t, "valid/accuracy")
        assert.are.equal(40, xs[#xs])
        assert.truthy(html:find('<tr class="pruned" data%-trial="' .. t.id:gsub("%-", "%%-") .. '">'))
      end
    end
    assert.are.equal(4, n)
    local fig = assert(figure(html, "pruned"))
    assert.are.equal(4, count(fig, '<path class="rung"'))
    local f = dl.diagnose(dir, {quiet = true})
    for _, x in ipairs(f) do
      if x.check == "infeasible" and x.data.fraction then
        assert.are.equal(12, x.data.trials)                  -- 16 search trials, 4 pruned not counted
        assert.truthy(x.message:find("4 pruned trial(s) not counted", 1, true))
      end
    end
  end)

  it("reads pruned trials from trials.csv too (a copied study without its journal)", function()
    local rows = {"id,status,message"}
    for _, t in ipairs(d.trials) do rows[#rows + 1] = t.id .. "," .. t.status .. "," end
    F.write(dir .. "/trials.csv", table.concat(rows, "\n") .. "\n")
    assert(os.rename(dir .. "/journal.jsonl", dir .. "/journal.aside"))
    local ok, c = pcall(A.load, dir)
    assert(os.rename(dir .. "/journal.aside", dir .. "/journal.jsonl"))
    assert(ok, c)
    local pruned = {}
    for _, t in ipairs(c.trials) do if t.pruned then pruned[#pruned + 1] = t.id .. "@" .. t.rung end end
    table.sort(pruned)
    assert.are.same({"optimizer-adam_t006@40", "optimizer-adam_t007@40", "optimizer-sgd_t006@40", "optimizer-sgd_t007@40"}, pruned)
  end)

  it("draws the optimisation history with the best so far and the importance of each hyperparameter", function()
    local fig = assert(figure(html, "history"))
    local trials = A.search_trials(d)
    local feasible = 0
    for _, t in ipairs(trials) do if t.feasible then feasible = feasible + 1 end end
    assert.are.equal(feasible, count(fig, '<circle class="pt hist"'))
    assert.truthy(fig:find(string.format("best %.4g after", d.best.value), 1, true))
    local imp = assert(html:match('<figure class="figure wide%-ok" id="importance">.-</figure>'))
    -- the study's own numbers per group (dl.study_results), momentum inactive in the adam group: not listed
    for _, g in ipairs(d.groups) do
      local at = assert(imp:find('data-group="' .. g.label .. '"', 1, true), g.label)
      local block = imp:sub(at, math.min(imp:find("<figcaption>", at, true), imp:find('class="imp-group"', at, true) or #imp))
      for _, e in ipairs(g.importance) do
        assert.truthy(block:find('data-name="' .. e.name .. '"', 1, true), e.name)
        assert.truthy(block:find(string.format("%.3f", e.share), 1, true), e.name)
      end
      assert.are.equal(g.values.optimizer == "adam", block:find('data-name="momentum"', 1, true) == nil, g.label)
    end
  end)

  it("puts inactive values on the parallel coordinates' n/a band, below the tick labels", function()
    local page = read(dl.report(dir, {static = true, out = root .. "/s.html"}))
    local fig = assert(figure(page, "parallel"))
    local band = tonumber(fig:match('<rect class="na%-band" x="[%d%.]+" y="([%d%.]+)"'))
    local lowest_tick = 0
    for y in fig:gmatch('<text class="tick" x="[%d%.]+" y="([%d%.]+)"') do lowest_tick = math.max(lowest_tick, tonumber(y)) end
    assert.is_true(band > lowest_tick, band .. " vs " .. lowest_tick)
    -- an adam trial (no momentum): its point on the momentum axis (the 2nd) lies in the band
    local id
    for _, t in ipairs(d.trials) do if t.hp.optimizer == "adam" and t.feasible then id = t.id end end
    local pts = fig:match('points="([^"]+)"[^>]*data%-trial="' .. id:gsub("%-", "%%-") .. '"')
    local ys = {}
    for y in pts:gmatch(",([%d%.]+)") do ys[#ys + 1] = tonumber(y) end
    assert.is_true(ys[2] > band and ys[2] < band + 14, pts)
  end)

  it("draws a study with one eval per trial against the trial number", function()
    local sroot = F.tmpdir("single")
    local sdir = F.single_eval_study(sroot)
    local sd = A.load(sdir)
    local m = require("dlua.report.data").build(sd, {})
    local c
    for _, x in ipairs(m.curves) do if x.metric == "valid/accuracy" then c = x end end
    assert.is_true(c.single)
    assert.are.same({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, c.x)
    for _, s in ipairs(c.series) do
      local t = sd.trials[s.t + 1]
      assert.are.equal(t.value, s.y[t.order], t.id)
    end
    fs.rm_rf(sroot)
  end)

  it("writes a Pareto front when asked for two objectives", function()
    local page = read(dl.report(dir, {pareto = {"valid/accuracy", "valid/loss"}, out = root .. "/p.html"}))
    local fig = assert(figure(page, "pareto"))
    local done = 0
    for _, t in ipairs(A.search_trials(d)) do if t.status == "done" then done = done + 1 end end
    assert.are.equal(done, count(fig, '<circle class="pt pareto"'))
  end)

  it("draws a single run with the same curves", function()
    local rroot = F.tmpdir("one-run")
    local run = F.run(rroot .. "/r", {steps = 50, eval = function(s) return {["valid/accuracy"] = s / 100} end})
    local page = read(dl.report(run))
    assert.truthy(page:find('id="curves-train-loss"', 1, true))
    assert.truthy(page:find('id="curves-valid-accuracy"', 1, true))
    assert.is_nil(page:find('id="parallel"', 1, true))
    fs.rm_rf(rroot)
  end)
end)

describe("dl.report{watch = true}", function()
  it("rewrites the page and its stamp script until the study is finished, then stops", function()
    local root = F.tmpdir("watch")
    local dir = two_group_study(root)
    -- unfinished (no results.json): it watches until the timeout
    local t0 = dl.clock()
    local path = dl.report(dir, {watch = true, interval = 0.1, timeout = 1, quiet = true})
    assert.is_true(dl.clock() - t0 >= 0.9)
    local page, stamp = read(path), read(path .. ".watch.js")
    assert.truthy(page:find('window.DLUA_WATCH = {"done":false,"file":"report.html.watch.js","interval":100,"stamp":"', 1, true))
    local s1 = stamp:match('"stamp":"([^"]+)"')
    assert.truthy(page:find('"stamp":"' .. s1 .. '"', 1, true))
    assert.truthy(stamp:find('"done":false', 1, true))
    -- finished: one more write, marked done, and it returns without waiting an interval
    -- (a minute: returning after one would take >= 60 s however loaded the machine is)
    F.write(dir .. "/results.json", "{}\n")
    t0 = dl.clock()
    dl.report(dir, {watch = true, interval = 60, quiet = true})
    assert.is_true(dl.clock() - t0 < 30)
    assert.truthy(read(path .. ".watch.js"):find('"done":true', 1, true))
    assert.error_matches(function() dl.report(dir, {watch = true, static = true}) end,
      "dl.report: static and watch exclude each other")
    assert.error_matches(function() dl.report(dir, {watch = true, interval = 0}) end,
      "dl.report: option 'interval' must be > 0 seconds")
    fs.rm_rf(root)
  end)
end)

describe("dl.report on a run: every logged series", function()
  it("gathers every scalar of metrics.jsonl into groups by prefix, per-class accuracy as correct / total", function()
    local root = F.tmpdir("series")
    local run = F.run(root .. "/r", {steps = 40, eval_every = 20,
      train_extra = function(s) return {time_per_step = 0.01, ["data/skipped"] = s // 20} end,
      eval = function(s) return {["valid/accuracy"] = s / 100, ["test/accuracy"] = s / 200, ["ema/valid/accuracy"] = s / 50,
        ["valid/per_class"] = {correct = json.array({s, 3}), total = json.array({40, 12})}} end})
    local d = A.load(run)
    local model = require("dlua.report.data").build(d, {})
    local got = {}
    for _, g in ipairs(model.series.groups) do got[#got + 1] = g.name .. ": " .. table.concat(g.metrics, " ") end
    assert.are.same({"train: train/grad_norm train/loss", "lr: train/lr", "valid: valid/accuracy", "test: test/accuracy",
      "ema: ema/valid/accuracy", "per-class: valid/per_class/1 valid/per_class/2",
      "speed: train/examples_per_s train/time_per_step", "data: data/skipped"}, got)
    local pc = model.series.curves["valid/per_class/1"]
    assert.are.same({20, 40}, {pc.x[1], pc.x[2]})
    assert.are.same({20 / 40, 40 / 40}, {pc.series[1].y[1], pc.series[1].y[2]})
    assert.are.equal(3 / 12, model.series.curves["valid/per_class/2"].series[1].y[2])
    assert.are.same({0, 1, 2}, {model.series.curves["data/skipped"].series[1].y[1],
      model.series.curves["data/skipped"].series[1].y[2], model.series.curves["data/skipped"].series[1].y[4]})
    local html = read(dl.report(run))
    for _, id in ipairs({"group-train", "group-lr", "group-valid", "group-test", "group-ema", "group-per-class",
                         "group-speed", "group-data"}) do
      assert.truthy(html:find('id="' .. id .. '"', 1, true), id)
    end
    assert.truthy(html:find('<option value="valid/per_class/2">valid: accuracy of class 2 vs step</option>', 1, true))
    fs.rm_rf(root)
  end)

  it("names the groups: per-class before ema, the learning rate apart from train, eval sets by their prefix", function()
    local g = require("dlua.report.data").group_of
    assert.are.same({"per-class", "per-class", "ema", "lr", "train", "speed", "holdout", "other"},
      {g("valid/per_class/3"), g("ema/test/per_class/10"), g("ema/valid/loss"), g("train/lr"), g("train/loss"),
       g("train/examples_per_s"), g("holdout/top5"), g("loss")})
    assert.is_true(A.name_less("valid/per_class/2", "valid/per_class/10"))
  end)
end)

describe("dl.report{watch = true} on a run", function()
  it("watches while the run writes and stops when its result.json is written", function()
    local root = F.tmpdir("watch-run")
    local run = F.run(root .. "/r", {steps = 30, status = false, eval = function(s) return {["valid/accuracy"] = s / 100} end})
    local t0 = dl.clock()
    local path = dl.report(run, {watch = true, interval = 0.1, timeout = 1, quiet = true})
    assert.is_true(dl.clock() - t0 >= 0.9)
    assert.truthy(read(path .. ".watch.js"):find('"done":false', 1, true))
    assert.truthy(read(path):find("watching: the page reloads itself", 1, true))
    -- a result.json older than metrics.jsonl is a resumed run's old one: still watching
    F.write(run .. "/result.json", '{"status":"interrupted","steps":20}\n')
    local lfs = require "lfs"
    lfs.touch(run .. "/result.json", os.time() - 100, os.time() - 100)
    t0 = dl.clock()
    dl.report(run, {watch = true, interval = 0.1, timeout = 1, quiet = true})
    assert.is_true(dl.clock() - t0 >= 0.9)
    assert.truthy(read(path .. ".watch.js"):find('"done":false', 1, true))
    -- the run ends: one more write, marked done, and it returns without waiting the interval
    F.write(run .. "/result.json", '{"status":"done","steps":30}\n')
    t0 = dl.clock()
    dl.report(run, {watch = true, interval = 60, quiet = true})
    assert.is_true(dl.clock() - t0 < 30)
    assert.truthy(read(path .. ".watch.js"):find('"done":true', 1, true))
    assert.truthy(read(path):find('<p id="watching">the run is finished</p>', 1, true))
    fs.rm_rf(root)
  end)
end)

describe("the interactive report in Chromium (tests/browser/report.test.js)", function()
  it("hovers, clicks, clips, prunes, watches, draws every series of a run and times the 200-trial page", function()
    local why
    local function has(cmd) return os.execute(cmd .. " >/dev/null 2>&1") == true end
    if not require("dlua.report").chromium() then why = "no chromium (scripts/setup.sh installs it)"
    elseif not has("command -v node") then why = "no node (scripts/setup.sh installs Node.js packages)"
    elseif not fs.exists("tests/browser/node_modules/puppeteer-core/package.json") then
      why = "no tests/browser/node_modules (scripts/setup.sh runs npm ci in tests/browser)"
    end
    if why then
      assert.is_nil(os.getenv("DLUA_REQUIRE_BROWSER") == "1" and why or nil, "DLUA_REQUIRE_BROWSER=1 but " .. tostring(why))
      pending(why)
      return
    end
    local out = F.tmpdir("puppeteer")
    local p = io.popen(string.format("%s tests/browser/fixtures.lua %s 2>&1 && node tests/browser/report.test.js %s/manifest.json " ..
      "2>&1; echo rc=$?", EXE, out, out))
    local text = p:read("a")
    p:close()
    for line in text:gmatch("[^\n]*timing[^\n]*") do print("\n" .. line) end
    assert.truthy(text:find("rc=0", 1, true), text)
    assert.truthy(text:find("browser: ok", 1, true), text)
    fs.rm_rf(out)
  end)
end)
