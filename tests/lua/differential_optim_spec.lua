-- dl.optim's optimizers and schedules and dl.nn.init's initialisers against PyTorch (issue
-- 34, item 1), each from its twin in tests/lua/optim_twins.lua; a row of the optimizer
-- table, a schedule or an initialiser without a twin fails by name. All torch cases run in
-- one /usr/bin/python3 call (tests/lua/torch_twin.lua).
--
-- Optimizers: 12 steps on a small tanh network (loss and gradients each framework's own),
-- the parameters after every step compared norm-wise with torch.optim's, or with the
-- documented rule (docs/optimizers.md) written in torch where torch's convention differs
-- (the twin says which and why); float64 within 1e-11, float32 within 1e-5 or twice
-- torch's own float32 error on the case, if larger.
-- Schedules: the multiplier at steps 0 .. n against torch's scheduler's lr after as many
-- steps; schedules are Lua numbers (no dtype), within 1e-12.
-- Initialisers: large tensors in float32 and float64 against torch.nn.init's own draw (the
-- RNGs differ, so by statistics of n elements, with s torch's standard deviation): means
-- within 6 s sqrt(2 / n), standard deviations within 6 s / sqrt(n), kurtosis within
-- 6 sqrt(48 / n) (normal against uniform is 1.2 apart), all inside the stated bounds and,
-- for uniforms, reaching within 20 (hi - lo) / n of both; orthogonal ones Q Q^T = gain^2 I
-- to 1e-10 (float64) and 3e-6 (float32); constants equal to torch's exactly. A deviation of
-- 6 standard errors happens by chance once in 5e8, and the seeds are fixed.
local dl = require "dlua"
local core = require "dlua.core"
local H = dofile("tests/lua/helpers.lua")
local TW = dofile("tests/lua/torch_twin.lua")
local TWINS = dofile("tests/lua/optim_twins.lua")
local lit, flat = TW.lit, TW.flat

local DTYPES = {"float64", "float32"}
local ROWS = {}
for _, row in ipairs(core.optim_table()) do ROWS[row.name] = row end

local PRELUDE = [[
import warnings
warnings.filterwarnings('ignore')
class Rule:
    """docs/optimizers.md's update rules written out, in the parameters' dtype"""
    def __init__(self, kind, params, inits, **h):
        groups = params if isinstance(params[0], dict) else [{'params': params}]
        self.param_groups = [dict(h, **g) for g in groups]
        self.kind, self.inits, self.t, self.state = kind, inits, 0, {}
    def step(self):
        self.t += 1
        with torch.no_grad():
            for g in self.param_groups:
                for p in g['params']:
                    if p.grad is None:
                        continue
                    if p not in self.state:
                        self.state[p] = [torch.full_like(p, v) for v in self.inits]
                    getattr(self, self.kind)(g, p, p.grad, self.state[p], self.t)
    def Adam(self, h, p, g, s, t, nesterov=False, decoupled=False):
        b1, b2 = h['beta1'], h['beta2']
        if decoupled:
            p -= h['lr'] * h['weight_decay'] * p
        else:
            g = g + h['weight_decay'] * p
        s[0].mul_(b1).add_((1 - b1) * g)
        s[1].mul_(b2).add_((1 - b2) * g * g)
        num = b1 * s[0] + (1 - b1) * g if nesterov else s[0]
        p -= h['lr'] * math.sqrt(1 - b2 ** t) / (1 - b1 ** t) * num / (s[1].sqrt() + h['eps'])
    def NAdam(self, h, p, g, s, t):
        self.Adam(h, p, g, s, t, nesterov=True)
    def AdamW(self, h, p, g, s, t):
        self.Adam(h, p, g, s, t, decoupled=True)
    def RMSProp(self, h, p, g, s, t):
        g = g + h['weight_decay'] * p
        s[0].mul_(h['rho']).add_((1 - h['rho']) * g * g)
        s[1].mul_(h['momentum']).add_(h['lr'] * g / (s[0] + h['eps']).sqrt())
        p -= s[1]
def net_loss(X, Y, ps, scale):
    return ((torch.tanh(X @ ps[0] + ps[1]) @ ps[2] - Y) ** 2).mean() * scale
def stats(t, ortho):
    t = t.double()
    m, sd = t.mean(), t.std(unbiased=False)
    k = ((t - m) ** 4).mean() / sd ** 4 if sd > 0 else torch.tensor(0.)
    e = 0.
    if ortho:
        w = t.reshape(t.shape[0], -1)
        if w.shape[0] > w.shape[1]:
            w = w.t()
        e = (w @ w.t() - ortho ** 2 * torch.eye(w.shape[0])).abs().max()
    return torch.tensor([m, sd, t.min(), t.max(), k, e])
]]

---------------------------------------------------------------- optimizers

local STEPS = 12
-- the edge cases every optimizer gets, on its first case's options
local EDGES = {{"lr-halved", {half = 7}}, {"groups", {groups = true}}, {"skipped", {skip = 3}}, {"size-1", {hidden = 1}},
  {"tiny-grads", {scale = 1e-6}}}

local function opt_cases(kind, t)
  local cs = {}
  for _, c in ipairs(t.cases) do cs[#cs + 1] = {label = c[1], opts = c[2], rule = c.rule} end
  for _, e in ipairs(EDGES) do
    local c = {label = e[1], opts = t.cases[1][2], rule = t.cases[1].rule}
    for k, v in pairs(e[2]) do c[k] = v end
    if c.skip and t.step_count then c.rule = t.step_count end
    cs[#cs + 1] = c
  end
  return cs
end

-- the row's defaults with o's values
local function full_options(kind, o)
  local f = {}
  for _, h in ipairs(ROWS[kind].hparams) do f[h.name] = h.default end
  for k, v in pairs(o) do f[k] = v end
  return f
end

local function pyval(v) return type(v) == "boolean" and (v and "True" or "False") or string.format("%.17g", v) end

-- the torch optimizer (or the Rule) over the Python expression P, for one case
local function torch_optimizer(kind, t, c, P)
  local o = full_options(kind, c.opts)
  if not c.rule then return (t.torch(o):gsub("%(ps,", "(" .. P .. ",", 1)) end
  local kws, inits = {}, {}
  for _, h in ipairs(ROWS[kind].hparams) do kws[#kws + 1] = h.name .. "=" .. pyval(o[h.name]) end
  for _, s in ipairs(ROWS[kind].state) do inits[#inits + 1] = pyval(s.init) end
  return string.format("Rule('%s', %s, [%s], %s)", kind, P, table.concat(inits, ", "), table.concat(kws, ", "))
end

-- runs one case in dlua (the parameters after each step, flat) and writes it in Python
local function run_opt(kind, t, c, dtype, key)
  dl.seed(3)
  local H = c.hidden or 4
  local like = {dtype = "float64"}
  local X, Y = dl.randn({8, 3}, like):to(dtype), dl.randn({8, 2}, like):to(dtype)
  local ps = {dl.randn({3, H}, like):scale(0.5), dl.randn({H}, like):scale(0.1), dl.randn({H, 2}, like):scale(0.5)}
  local py = {"def case(dt, k):"}
  local function data(name, x) return string.format("    %s = T(%s).reshape(%s).to(dt)", name, lit(flat(x:double())), lit(x:shape())) end
  py[#py + 1] = data("X", X)
  py[#py + 1] = data("Y", Y)
  for i, p in ipairs(ps) do
    ps[i] = p:to(dtype):requires_grad(true)
    py[#py + 1] = data("p" .. i, ps[i]) .. ".requires_grad_()"
  end
  py[#py + 1] = "    ps = [p1, p2, p3]"
  local o, P = {}, "ps"
  for k, v in pairs(c.opts) do o[k] = v end
  local lr = full_options(kind, c.opts).lr
  if c.groups then
    o.params = {{params = {ps[1], ps[3]}, weight_decay = 0.05}, {params = {ps[2]}, lr = 2 * lr}}
    py[#py + 1] = string.format("    pg = [{'params': [p1, p3], 'weight_decay': 0.05}, {'params': [p2], 'lr': %.17g}]", 2 * lr)
    P = "pg"
  else
    o.params = ps
  end
  local opt = dl.optim[kind](o)
  py[#py + 1] = "    o = " .. torch_optimizer(kind, t, c, P)
  py[#py + 1] = string.format([[
    tr = []
    for t in range(1, %d):
        for p in ps:
            p.grad = None
        net_loss(X, Y, ps, %.17g).backward()
        if t <= %d:
            p2.grad = None
        if t == %d:
            for g in o.param_groups:
                g['lr'] = g['lr'] / 2
        o.step()
        tr.append(torch.cat([p.detach().reshape(-1) for p in ps]))
    out(k + '_v', R(torch.cat(tr)))
run('%s', case)]], STEPS + 1, c.scale or 1, c.skip or 0, c.half or 0, key)
  local trace = {}
  for step = 1, STEPS do
    opt:zero_grad();
    ((((X:matmul(ps[1]) + ps[2]):tanh():matmul(ps[3]) - Y):square():mean()) * (c.scale or 1)):backward()
    if step <= (c.skip or 0) then ps[2].grad = nil end
    if step == c.half then opt:set_lr(opt:lr() / 2) end
    opt:step()
    for _, p in ipairs(ps) do
      for _, v in ipairs(flat(p:double())) do trace[#trace + 1] = v end
    end
  end
  return trace, table.concat(py, "\n")
end

-- a twin that must fail: SGD against torch's SGD at a learning rate 1e-6 larger
local WRONG = {kind = "SGD", cases = {{"plain", {lr = 0.1}}},
  torch = function(o) return string.format("torch.optim.SGD(ps, lr=%.17g)", o.lr * (1 + 1e-6)) end}

-- a schedule and an initialiser twin that must fail: cosine against torch's with T_max one
-- longer, kaiming_normal against xavier_normal (std sqrt(2 / fan_in) against sqrt(2 / (fan_in + fan_out)))
local WRONG_SCHEDULE = {{"plain", {steps = 10, final = 0.1}, kind = "cosine",
  torch = "torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=11, eta_min=0.1)", upto = 10}}
local WRONG_INIT = {{"conv", {64, 16, 3, 3}, lua = function(I, t) I.kaiming_normal(t) end, torch = "torch.nn.init.xavier_normal_(t)"}}

-- twins with a "(wrong)" entry added
local function with_wrong(twins, wrong)
  local all = {["(wrong)"] = wrong}
  for k, v in pairs(twins) do all[k] = v end
  return all
end

---------------------------------------------------------------- initialisers

-- mean, std, min, max, kurtosis and the orthogonality error of t (as stats() in Python)
local function stats(t, ortho)
  t = t:double()
  local m = t:mean():item()
  local sd = math.sqrt((t - m):square():mean():item())
  local k = sd > 0 and ((t - m):pow(4):mean():item() / sd ^ 4) or 0
  local e = 0
  if ortho then
    local w = t:reshape(t:size(1), -1)
    if w:size(1) > w:size(2) then w = w:transpose(1, 2) end
    local r = w:size(1)
    local eye = dl.arange(r):reshape(r, 1):eq(dl.arange(r):reshape(1, r)):to("float64")
    e = (w:matmul(w:transpose(1, 2)) - eye:scale(ortho ^ 2)):abs():max():item()
  end
  return {m, sd, t:min():item(), t:max():item(), k, e}
end

local function check_init(c, n, dtype, got, want, bad)
  local function fail(fmt, ...) bad[#bad + 1] = string.format("%s %s: " .. fmt, c[1], dtype, ...) end
  local m, sd, lo, hi, k, e = table.unpack(got)
  local tm, tsd, tlo, thi, tk, te = table.unpack(want)
  if c.exact then
    if not (lo == tlo and hi == thi and lo == hi) then fail("min %.17g max %.17g, torch %.17g and %.17g", lo, hi, tlo, thi) end
    return
  end
  if math.abs(m - tm) > 6 * tsd * math.sqrt(2 / n) then fail("mean %.6g, torch %.6g (n = %d, s = %.4g)", m, tm, n, tsd) end
  if math.abs(sd - tsd) > 6 * tsd / math.sqrt(n) then fail("std %.6g, torch %.6g (n = %d)", sd, tsd, n) end
  if n > 1000 and math.abs(k - tk) > 6 * math.sqrt(48 / n) then fail("kurtosis %.4g, torch %.4g (n = %d)", k, tk, n) end
  local b = c.bounds
  if b then
    if lo < b[1] or hi > b[2] then fail("values in [%.17g, %.17g], outside [%g, %g]", lo, hi, b[1], b[2]) end
    if tlo < b[1] or thi > b[2] then fail("torch's values in [%.17g, %.17g], outside [%g, %g]", tlo, thi, b[1], b[2]) end
    if c.fill and (lo - b[1] > 20 * (b[2] - b[1]) / n or b[2] - hi > 20 * (b[2] - b[1]) / n) then
      fail("values in [%.17g, %.17g] do not reach the bounds [%g, %g]", lo, hi, b[1], b[2])
    end
  end
  if c.ortho then
    local tol = dtype == "float64" and 1e-10 or 3e-6
    if e > tol then fail("Q Q^T - gain^2 I reaches %.3g (above %g)", e, tol) end
    if te > tol then fail("torch's Q Q^T - gain^2 I reaches %.3g (above %g)", te, tol) end
  end
end

---------------------------------------------------------------- the spec

local names_of = H.sorted_keys

describe("dl.optim and dl.nn.init against PyTorch", function()
  local opt_runs, sched_runs, init_runs, torch = {}, {}, {}, nil

  setup(function()
    local py = TW.script():add(TW.RUN):add(PRELUDE)
    local all = {["(wrong)"] = WRONG}
    for kind, t in pairs(TWINS.optimizers) do all[kind] = t end
    for name, t in pairs(all) do
      local kind = t.kind or name
      opt_runs[name] = {}
      for ci, c in ipairs(t.kind and {{label = "plain", opts = t.cases[1][2]}} or opt_cases(kind, t)) do
        for _, dtype in ipairs(DTYPES) do
          local key = string.format("opt_%s_%d_%s", (name:gsub("%W", "")), ci, dtype:sub(6))
          local ok, r, lines = pcall(run_opt, kind, t, c, dtype, key)
          if ok then py:add("F32 = " .. (dtype == "float32" and "True" or "False")):add(lines) end
          table.insert(opt_runs[name], {c = c, dtype = dtype, key = key, ok = ok, r = r})
        end
      end
    end
    for name, cases in pairs(with_wrong(TWINS.schedules, WRONG_SCHEDULE)) do
      sched_runs[name] = {}
      for ci, c in ipairs(cases) do
        local key = string.format("sched_%s_%d", (name:gsub("%W", "")), ci)
        local ok, s = pcall(dl.optim.schedule[c.kind or name], c[2])
        local vals = {}
        for step = 0, c.upto do vals[#vals + 1] = ok and s(step) or 0 end
        py:add(string.format("o = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0); sc = %s; v = []\n" ..
          "for i in range(%d):\n    v.append(o.param_groups[0]['lr']); o.step(); sc.step()\nout('%s', torch.tensor(v))",
          c.torch, c.upto + 1, key))
        table.insert(sched_runs[name], {c = c, key = key, ok = ok, r = ok and vals or s})
      end
    end
    for name, cases in pairs(with_wrong(TWINS.initialisers, WRONG_INIT)) do
      init_runs[name] = {}
      for ci, c in ipairs(cases) do
        for _, dtype in ipairs(DTYPES) do
          local key = string.format("init_%s_%d_%s", (name:gsub("%W", "")), ci, dtype:sub(6))
          dl.seed(11)
          local t = dl.empty(c[2], {dtype = dtype})
          local ok, err = pcall(c.lua, dl.nn.init, t)
          py:add(string.format("torch.manual_seed(11); t = torch.empty(%s, dtype=torch.%s); %s; out('%s', stats(t, %s))",
            lit(c[2]), dtype, c.torch, key, c.ortho and pyval(c.ortho) or "None"))
          table.insert(init_runs[name], {c = c, dtype = dtype, key = key, ok = ok, r = ok and stats(t, c.ortho) or err,
            n = t:numel()})
        end
      end
    end
    torch = py:run()
  end)

  it("has a twin for every optimizer of the table, every schedule and every initialiser, and none for others", function()
    local missing = {}
    for _, row in ipairs(core.optim_table()) do
      if not TWINS.optimizers[row.name] then missing[#missing + 1] = "optimizer " .. row.name end
    end
    for _, name in ipairs(names_of(dl.optim.schedule)) do
      if not TWINS.schedules[name] then missing[#missing + 1] = "schedule " .. name end
    end
    for _, name in ipairs(names_of(dl.nn.init)) do
      if not TWINS.initialisers[name] then missing[#missing + 1] = "initialiser " .. name end
    end
    assert(#missing == 0, "without a torch twin in tests/lua/optim_twins.lua: " .. table.concat(missing, ", "))
    for k in pairs(TWINS.optimizers) do assert(ROWS[k], "a twin for an optimizer the table does not list: " .. k) end
    for k in pairs(TWINS.schedules) do assert(dl.optim.schedule[k], "a twin for a schedule dl.optim lacks: " .. k) end
    for k in pairs(TWINS.initialisers) do assert(dl.nn.init[k], "a twin for an initialiser dl.nn.init lacks: " .. k) end
  end)

  -- the errors of an optimizer's runs against torch's (an empty list: it agrees)
  local function compare_opt(runs)
    local bad = {}
    for _, run in ipairs(runs) do
      local what = string.format("%s %s (%s)", run.c.label, run.dtype, run.c.rule and "the rule" or "torch.optim")
      if not run.ok then bad[#bad + 1] = what .. ": dlua raised " .. tostring(run.r)
      elseif torch[run.key .. "_err"] then bad[#bad + 1] = what .. ": the torch twin raised"
      else
        local k32 = run.dtype == "float32" and torch[run.key .. "_32_v"] or nil
        TW.check(bad, what, run.r, torch[run.key .. "_v"], k32, run.dtype == "float64" and 1e-11 or 1e-5,
          {norm = true, dtype = run.dtype})
      end
    end
    return bad
  end

  it("fails an optimizer twin whose lr is off by 1e-6 relative (the comparison can fail)", function()
    local bad = compare_opt(opt_runs["(wrong)"])
    assert.is_true(#bad >= 1, "the wrong twin passed")
    assert.truthy(bad[1]:find("plain float64 (torch.optim): error", 1, true), bad[1])
  end)

  for _, row in ipairs(core.optim_table()) do
    local kind = row.name
    it("optimizer " .. kind .. " follows torch.optim or its documented rule for 12 steps, float64 and float32", function()
      assert(TWINS.optimizers[kind], "optimizer " .. kind .. " has no torch twin in tests/lua/optim_twins.lua")
      local bad = compare_opt(opt_runs[kind])
      assert(#bad == 0, kind .. " against torch:\n  " .. table.concat(bad, "\n  "))
    end)
  end

  -- the schedules and the initialisers: each run checked by its family's check
  local function check_sched(run, bad)
    local e, at = TW.rel_err(run.r, torch[run.key], 1)
    if e > 1e-12 then
      bad[#bad + 1] = string.format("%s: step %d gives %.17g, torch %.17g", run.c[1], at - 1, run.r[at], torch[run.key][at])
    end
  end
  local function check_init_run(run, bad) check_init(run.c, run.n, run.dtype, run.r, torch[run.key], bad) end
  it("fails a schedule twin and an initialiser twin that are wrong (the comparisons can fail)", function()
    local bad = {}
    check_sched(sched_runs["(wrong)"][1], bad)
    assert.are.equal(1, #bad)
    assert.truthy(bad[1]:find("^plain: step %d+ gives"), bad[1])
    for _, run in ipairs(init_runs["(wrong)"]) do check_init_run(run, bad) end
    assert.are.equal(3, #bad, table.concat(bad, "\n"))
    assert.truthy(bad[2]:find("conv float64: std", 1, true), bad[2])
  end)

  for _, f in ipairs({
    {"schedule", dl.optim.schedule, "schedules", sched_runs, "gives torch's scheduler's multipliers", check_sched},
    {"initialiser", dl.nn.init, "initialisers", init_runs, "draws torch.nn.init's distribution in float64 and float32",
      check_init_run}}) do
    local what, lib, twins, runs, claim, check = table.unpack(f)
    for _, name in ipairs(names_of(lib)) do
      it(what .. " " .. name .. " " .. claim, function()
        assert(TWINS[twins][name], what .. " " .. name .. " has no torch twin in tests/lua/optim_twins.lua")
        local bad = {}
        for _, run in ipairs(runs[name]) do
          if not run.ok then bad[#bad + 1] = run.c[1] .. " " .. (run.dtype or "") .. ": dlua raised " .. tostring(run.r)
          else check(run, bad) end
        end
        assert(#bad == 0, name .. " against torch:\n  " .. table.concat(bad, "\n  "))
      end)
    end
  end
end)
