-- The torch twins of dl.optim's optimizers (the rows of core.optim_table()), its schedules
-- (the functions of dl.optim.schedule) and dl.nn.init's initialisers, for
-- tests/lua/differential_optim_spec.lua (issue 34, item 1). The spec walks those three
-- tables, so a new optimizer, schedule or initialiser without a twin here fails by name.
local M = {optimizers = {}, schedules = {}, initialisers = {}}

local function num(v)
  if type(v) == "boolean" then return v and "True" or "False" end
  return string.format("%.17g", v)
end

-- "k1=v1, k2=v2" for the keys of o named in keys (dlua name -> torch's), in keys' order
local function kw(o, keys)
  local parts = {}
  for _, k in ipairs(keys) do
    if o[k[1]] ~= nil then parts[#parts + 1] = k[2] .. "=" .. num(o[k[1]]) end
  end
  return table.concat(parts, ", ")
end

---------------------------------------------------------------- optimizers
-- Name = {torch = function(o) -> "torch.optim.X(ps, ...)" with o the full options (the row's
--          defaults and the case's), or nil where no torch optimizer follows the rule,
--         cases = {{label, options, rule = "why"}, ...}: rule: the case is compared with the
--          documented rule (docs/optimizers.md) written in torch float64 (Rule in the spec),
--          because torch's convention differs; each case runs 12 steps of a small tanh
--          network, and the spec adds edge cases on the first case's options: lr halved at
--          step 6, two parameter groups, a parameter without a gradient for the first 3
--          steps (step_count: torch counts steps per parameter, dlua per optimizer: a rule
--          case), hidden size 1, and gradients scaled by 1e-6}
local ADAM_KEYS = function(o)
  return string.format("lr=%s, betas=(%s, %s), eps=%s, weight_decay=%s", num(o.lr), num(o.beta1), num(o.beta2), num(o.eps),
    num(o.weight_decay))
end
-- Adam's eps: dlua adds it to the uncorrected sqrt(v) (the playbook's form), torch to
-- sqrt(v) / sqrt(1 - beta2^t); with eps = 0 the two are one rule, so torch's optimizer
-- is the twin there and the documented rule elsewhere
local EPS = "eps on the uncorrected sqrt(v) (docs/optimizers.md), torch's on the corrected one: the rule"
local STEPS = "dlua's bias correction counts the optimizer's steps, torch's each parameter's (docs/optimizers.md)"

M.optimizers.SGD = {
  torch = function(o) return "torch.optim.SGD(ps, " .. kw(o, {{"lr", "lr"}, {"momentum", "momentum"}, {"nesterov", "nesterov"},
    {"weight_decay", "weight_decay"}}) .. ")" end,
  cases = {{"plain", {lr = 0.1}}, {"momentum", {lr = 0.05, momentum = 0.9}},
    {"nesterov-weight-decay", {lr = 0.05, momentum = 0.9, nesterov = true, weight_decay = 0.01}},
    {"momentum-1", {lr = 0.01, momentum = 1}}}}

M.optimizers.Adam = {torch = function(o) return "torch.optim.Adam(ps, " .. ADAM_KEYS(o) .. ")" end, step_count = STEPS,
  cases = {{"eps-0", {lr = 0.01, eps = 0}}, {"eps-0-betas-weight-decay", {lr = 0.01, beta1 = 0.8, beta2 = 0.95, eps = 0, weight_decay = 0.1}},
    {"eps-default", {lr = 0.01}, rule = EPS}, {"eps-large", {lr = 0.01, eps = 1e-3, weight_decay = 0.1}, rule = EPS}}}

M.optimizers.AdamW = {torch = function(o) return "torch.optim.AdamW(ps, " .. ADAM_KEYS(o) .. ")" end, step_count = STEPS,
  cases = {{"eps-0", {lr = 0.01, eps = 0, weight_decay = 0.1}}, {"eps-0-default-decay", {lr = 0.01, eps = 0}},
    {"eps-default", {lr = 0.01}, rule = EPS}}}

local NADAM = "torch's NAdam has a momentum-decay schedule, the playbook's none (docs/optimizers.md): the rule"
M.optimizers.NAdam = {cases = {{"default", {lr = 0.01}, rule = NADAM},
  {"betas-weight-decay", {lr = 0.01, beta1 = 0.8, beta2 = 0.95, eps = 1e-3, weight_decay = 0.1}, rule = NADAM}}}

M.optimizers.Adagrad = {
  torch = function(o) return "torch.optim.Adagrad(ps, " .. kw(o, {{"lr", "lr"}, {"eps", "eps"}, {"weight_decay", "weight_decay"}}) ..
    ")" end,
  cases = {{"default", {lr = 0.1}}, {"eps-weight-decay", {lr = 0.1, eps = 1e-3, weight_decay = 0.1}}}}

local RMS = "dlua's v starts at 1 with eps inside the root and lr inside the momentum buffer, torch's v at 0 " ..
  "(docs/optimizers.md): the rule"
M.optimizers.RMSProp = {cases = {{"default", {lr = 0.01}, rule = RMS},
  {"momentum", {lr = 0.01, momentum = 0.9, rho = 0.9, eps = 1e-6, weight_decay = 0.01}, rule = RMS}}}

---------------------------------------------------------------- schedules
-- name = {{label, options, torch = "a scheduler of the SGD optimizer o (lr 1)", upto = n,
--          differs = "why"}, ...}: schedule(s) for s = 0 .. upto against o's lr after s calls
-- of the scheduler's step() (dl.train's step s runs at schedule(s), s from 1, where torch's
-- first step runs at the base rate: the multipliers are the same sequence, one step on)
local L = "torch.optim.lr_scheduler."
local function warm(W, main) return string.format("%sSequentialLR(o, [%sLambdaLR(o, lambda s: s / %d), %s], milestones=[%d])",
  L, L, W, main, W) end

M.schedules.constant = {{"plain", {}, torch = L .. "ConstantLR(o, factor=1.0)", upto = 6},
  {"warmup", {warmup = 4}, torch = warm(4, L .. "ConstantLR(o, factor=1.0)"), upto = 8}}
M.schedules.linear = {{"plain", {steps = 10, final = 0.1}, torch = L .. "LinearLR(o, 1.0, 0.1, total_iters=10)", upto = 13},
  {"to-0", {steps = 6}, torch = L .. "LinearLR(o, 1.0, 0.0, total_iters=6)", upto = 8},
  {"warmup", {warmup = 3, steps = 10, final = 0.1}, torch = warm(3, L .. "LinearLR(o, 1.0, 0.1, total_iters=7)"), upto = 12}}
-- torch's cosine climbs back after T_max, dlua's stays at final: compared up to steps
M.schedules.cosine = {{"plain", {steps = 10, final = 0.1}, torch = L .. "CosineAnnealingLR(o, T_max=10, eta_min=0.1)", upto = 10},
  {"to-0", {steps = 7}, torch = L .. "CosineAnnealingLR(o, T_max=7)", upto = 7},
  {"warmup", {warmup = 3, steps = 10, final = 0.1}, torch = warm(3, L .. "CosineAnnealingLR(o, T_max=7, eta_min=0.1)"), upto = 10}}
M.schedules.rsqrt = {{"warmup", {warmup = 4}, torch = L .. "LambdaLR(o, lambda s: s / 4 if s < 4 else math.sqrt(4 / s))", upto = 12,
  differs = "torch has no inverse-square-root schedule: LambdaLR with the documented sqrt(W / s)"},
  {"no-warmup", {}, torch = L .. "LambdaLR(o, lambda s: math.sqrt(1 / max(s, 1)))", upto = 6,
   differs = "torch has no inverse-square-root schedule: LambdaLR with the documented sqrt(max(W, 1) / max(s, 1))"}}
M.schedules.piecewise = {{"geometric", {boundaries = {3, 6}, values = {1, 0.1, 0.01}},
  torch = L .. "MultiStepLR(o, milestones=[3, 6], gamma=0.1)", upto = 9},
  {"any-values-warmup", {boundaries = {4, 7}, values = {1, 0.5, 2}, warmup = 2},
   torch = L .. "LambdaLR(o, lambda s: s / 2 if s < 2 else (1 if s < 4 else 0.5 if s < 7 else 2))", upto = 9,
   differs = "torch's MultiStepLR multiplies by one gamma: LambdaLR with the documented values"}}

---------------------------------------------------------------- initialisers
-- name = {{label, shape, lua = function(t) (fills t), torch = "torch.nn.init.x_(t, ...)",
--          exact = true (every element equal to torch's), ortho = gain (rows or columns
--          orthonormal times gain), bounds = {lo, hi} (inclusive), fill = true (a uniform:
--          reaching both bounds)}, ...}. Each fills a large
-- tensor in float32 and float64 and compares its mean, standard deviation, min and max
-- with torch's own draw (the RNGs differ): see the spec for the tolerances.
local function init_case(label, shape, lua, torch, extra)
  local c = {label, shape, lua = lua, torch = torch}
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end
local BIG, CONV = {256, 384}, {64, 16, 3, 3}
M.initialisers.uniform = {init_case("unit", BIG, function(I, t) I.uniform(t, 0, 1) end, "torch.nn.init.uniform_(t)", {bounds = {0, 1}, fill = true}),
  init_case("shifted", CONV, function(I, t) I.uniform(t, -3, 0.5) end, "torch.nn.init.uniform_(t, -3, 0.5)", {bounds = {-3, 0.5}, fill = true})}
M.initialisers.normal = {init_case("standard", BIG, function(I, t) I.normal(t) end, "torch.nn.init.normal_(t)"),
  init_case("mean-std", CONV, function(I, t) I.normal(t, 2, 0.1) end, "torch.nn.init.normal_(t, 2, 0.1)")}
M.initialisers.zeros = {init_case("big", BIG, function(I, t) I.zeros(t) end, "torch.nn.init.zeros_(t)", {exact = true}),
  init_case("size-1", {1}, function(I, t) I.zeros(t) end, "torch.nn.init.zeros_(t)", {exact = true})}
M.initialisers.constant = {init_case("big", CONV, function(I, t) I.constant(t, -0.3) end, "torch.nn.init.constant_(t, -0.3)",
  {exact = true}), init_case("size-1", {1, 1}, function(I, t) I.constant(t, 7) end, "torch.nn.init.constant_(t, 7)", {exact = true})}
for _, n in ipairs({"kaiming_normal", "kaiming_uniform", "xavier_normal", "xavier_uniform"}) do
  local uniform = n:find("uniform")
  M.initialisers[n] = {}
  for _, c in ipairs({{"matrix", BIG}, {"conv", CONV}, {"wide", {16, 4096}}}) do
    local shape = c[2]
    local fi, fo = shape[2], shape[1]
    for i = 3, #shape do fi, fo = fi * shape[i], fo * shape[i] end
    -- torch's defaults: kaiming a = 0, fan_in, gain sqrt(2); xavier gain 1
    local b = n:find("kaiming") and math.sqrt(6 / fi) or math.sqrt(6 / (fi + fo))
    table.insert(M.initialisers[n], init_case(c[1], shape, function(I, t) I[n](t) end, "torch.nn.init." .. n .. "_(t)",
      {bounds = uniform and {-b, b} or nil, fill = uniform and true or nil}))
  end
end
-- a 1-d tensor: torch's fans raise ("fewer than 2 dimensions"), dlua's are both its size
-- (docs/api/nn.md): the twin is the documented rule
table.insert(M.initialisers.kaiming_normal, init_case("1-d", {4096}, function(I, t) I.kaiming_normal(t) end,
  "torch.nn.init.normal_(t, 0, math.sqrt(2 / 4096))"))
table.insert(M.initialisers.xavier_uniform, init_case("1-d", {4096}, function(I, t) I.xavier_uniform(t) end,
  "torch.nn.init.uniform_(t, -math.sqrt(6 / 8192), math.sqrt(6 / 8192))",
  {bounds = {-math.sqrt(6 / 8192), math.sqrt(6 / 8192)}, fill = true}))
M.initialisers.orthogonal = {init_case("rows", {96, 320}, function(I, t) I.orthogonal(t) end, "torch.nn.init.orthogonal_(t)", {ortho = 1}),
  init_case("columns-gain", {320, 96}, function(I, t) I.orthogonal(t, 2) end, "torch.nn.init.orthogonal_(t, 2)", {ortho = 2}),
  init_case("conv", {32, 8, 3, 3}, function(I, t) I.orthogonal(t) end, "torch.nn.init.orthogonal_(t)", {ortho = 1}),
  init_case("square", {128, 128}, function(I, t) I.orthogonal(t) end, "torch.nn.init.orthogonal_(t)", {ortho = 1}),
  init_case("size-1", {1, 64}, function(I, t) I.orthogonal(t) end, "torch.nn.init.orthogonal_(t)", {ortho = 1})}
M.initialisers.trunc_normal = {init_case("default", BIG, function(I, t) I.trunc_normal(t) end, "torch.nn.init.trunc_normal_(t)",
    {bounds = {-2, 2}}),
  init_case("narrow", CONV, function(I, t) I.trunc_normal(t, 0.5, 2, 0, 1) end, "torch.nn.init.trunc_normal_(t, 0.5, 2, 0, 1)",
    {bounds = {0, 1}}),
  init_case("one-sided", BIG, function(I, t) I.trunc_normal(t, 0, 0.02, -0.04, 1) end,
    "torch.nn.init.trunc_normal_(t, 0, 0.02, -0.04, 1)", {bounds = {-0.04, 1}})}

return M
