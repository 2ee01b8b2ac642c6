-- dl.report: the self-contained page and what each plot draws, on synthetic studies
-- with known numbers (tests/lua/report_fixtures.lua) and one tiny real dl.train run
-- (per-step gradient norms from its checkpoint); dlua.svg's scales; the report recipe;
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

describe("dl.report on a study", function()
  local root, dir, html, d
  setup(function()
    root = F.tmpdir("study")
    dir = two_group_study(root)
    local path = dl.report(dir)
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
    local path = dl.report(dir, {isolate = {"lr"}, out = root .. "/iso.html"})
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
      "dl.report: unknown option 'metrc' %(valid: aggregate, isolate, metric, mode, out, title, top%)")
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
    local html = read(dl.report(root .. "/run"))
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
