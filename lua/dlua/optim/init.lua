--- dl.optim: optimizers (update rules in C, one call per step), learning-rate
-- schedules and gradient clipping. The update rules follow the tuning
-- playbook's FAQ exactly; docs/optimizers.md writes them out.
local core = require "dlua.core"
local util = require "dlua.util"

local M = {}

local is_tensor = util.is_tensor

-- the kinds and their defaults live in C (engine/ops/optim.c), once
local specs = {}
for _, kind in ipairs(core.optim_kinds()) do specs[kind] = core.optim_defaults(kind) end
local nstate = {SGD = 1, Adam = 2, NAdam = 2, AdamW = 2, Adagrad = 1, RMSProp = 2}
local state_names = {SGD = {"momentum"}, Adam = {"m", "v"}, NAdam = {"m", "v"}, AdamW = {"m", "v"},
                     Adagrad = {"sum_sq"}, RMSProp = {"v", "m"}}

local Optimizer = {}
Optimizer.__index = Optimizer

-- a group table is a plain table with a params field; a tensor list is not
local function is_group(x) return type(x) == "table" and not is_tensor(x) and x.params ~= nil end

-- the option values of kind in o (a group's or the constructor's), type-checked against defaults
local function check_types(kind, o, defaults, where, level)
  for k, v in pairs(defaults) do
    if o[k] ~= nil and type(o[k]) ~= type(v) then
      error(string.format("%s: option '%s'%s (%s expected, got %s)", kind, k, where, type(v), type(o[k])), level + 1)
    end
  end
end

local function make(kind)
  local defaults = specs[kind]
  local valid = {params = "table"}
  local group_spec = {params = "table"}
  for k in pairs(defaults) do valid[k] = true; group_spec[k] = true end
  return function(opts)
    local spec = valid
    if type(opts) == "table" and type(opts.params) == "table" and is_group(opts.params[1]) then
      spec = util.copy(valid)                      -- groups: each entry of params checked as a nested table
      spec.params = {}
      for i = 1, #opts.params do spec.params[i] = group_spec end
    end
    opts = util.check_options(kind, opts, spec, 2)
    local o = {}
    for k, v in pairs(opts) do
      if k ~= "params" then o[k] = v end
    end
    check_types(kind, o, defaults, "", 2)
    for k, v in pairs(defaults) do
      if o[k] == nil then o[k] = v end
    end
    if o.lr < 0 then error(kind .. ": lr must be non-negative, got " .. o.lr, 2) end
    local self = setmetatable({kind = kind, opts = o, base_lr = o.lr, t = 0, params = {}, s1 = {}, s2 = {},
                               groups = {}}, Optimizer)
    if opts.params then self:attach(opts.params, 3) end
    return self
  end
end

for kind in pairs(specs) do M[kind] = make(kind) end

-- adds one group: its options (the optimizer's defaults overridden by g's keys),
-- its C rule and its parameters' zeroed state, appended to the flat lists
function Optimizer:_add_group(list, gopts, where, level)
  local o = util.copy(self.opts)
  for k, v in pairs(gopts) do o[k] = v end
  if o.lr < 0 then error(string.format("%s: lr%s must be non-negative, got %s", self.kind, where, o.lr), level + 1) end
  local default = self.opts.lr                          -- the default rate now (set_lr may have changed it)
  if o.lr ~= default and default == 0 then
    error(string.format("%s: lr%s is %s while the default lr is 0 (set_lr keeps each group's ratio to the default)",
      self.kind, where, o.lr), level + 1)
  end
  local ok, rule = pcall(core.optim_new, self.kind, o)
  if not ok then error((tostring(rule):gsub("^[^:]*:%d+: ", "")), level + 1) end
  local g = {opts = o, ratio = default > 0 and o.lr / default or 1, rule = rule,
             params = {}, s1 = {}, s2 = {}, index = {}}
  for i, p in ipairs(list) do
    if not is_tensor(p) then
      error(string.format("%s: parameter %d%s is not a tensor", self.kind, i, where), level + 1)
    end
    local k = #self.params + 1
    self.params[k] = p
    local init1 = self.kind == "RMSProp" and 1 or 0     -- RMSProp's v starts at 1 (playbook 111)
    local like = {dtype = p:dtype()}                    -- state in the parameter's dtype
    self.s1[k] = core.full(init1, p:shape(), like)
    self.s2[k] = nstate[self.kind] > 1 and core.zeros(p:shape(), like) or false
    g.params[i], g.s1[i], g.s2[i], g.index[i] = p, self.s1[k], self.s2[k], k
  end
  self.groups[#self.groups + 1] = g
  return g
end

--- Attaches parameters and creates their zeroed state: a list of tensors (one
-- group with the optimizer's options) or a list of groups
-- {{params = {...}, lr = ..., weight_decay = ...}, ...} whose keys override them.
function Optimizer:attach(params, level)
  level = level or 2
  if type(params) ~= "table" or is_tensor(params) then
    error(string.format("%s: params must be a list of tensors or of groups, got %s", self.kind,
      is_tensor(params) and "a tensor" or type(params)), level)
  end
  if not is_group(params[1]) then
    self:_add_group(params, {}, "", level)
    return self
  end
  local gspec, nested = {params = "table"}, {}
  for k in pairs(specs[self.kind]) do gspec[k] = true end
  for i, g in ipairs(params) do
    if not is_group(g) then
      error(string.format("%s: params.%d is not a group {params = {...}, ...} like params.1", self.kind, i), level)
    end
    nested[i] = gspec
  end
  util.check_options(self.kind, {params = params}, {params = nested}, level)   -- unknown keys: "... in params.2"
  for i, g in ipairs(params) do
    local where = string.format(" in params.%d", i)
    local gopts = {}
    for k, v in pairs(g) do if k ~= "params" then gopts[k] = v end end
    check_types(self.kind, gopts, specs[self.kind], where, level)
    self:_add_group(g.params, gopts, where, level)
  end
  return self
end

--- Clears the gradients of all attached parameters.
function Optimizer:zero_grad()
  for _, p in ipairs(self.params) do p.grad = nil end
end

--- One update of every trainable parameter that has a gradient: frozen ones
-- (requires_grad false) are skipped even when a stale .grad is set. Each
-- group is one call into C with its own options.
function Optimizer:step()
  self.t = self.t + 1
  for _, g in ipairs(self.groups) do
    local ps, a, b = {}, {}, {}
    for i, p in ipairs(g.params) do
      if p:requires_grad() then
        ps[#ps + 1], a[#a + 1], b[#b + 1] = p, g.s1[i], g.s2[i]
      end
    end
    if #ps > 0 then core.optim_update(g.rule, ps, a, b, g.opts.lr, self.t) end
  end
end

--- Sets the learning rate used from the next step on: set_lr(lr) sets the
-- default rate and every group's to lr times the group's ratio to the default
-- when it was added (so a schedule scaling the default scales every group);
-- set_lr(lr, g) sets group g's rate alone (until the next set_lr(lr)).
function Optimizer:set_lr(lr, group)
  if type(lr) ~= "number" or lr < 0 then error(self.kind .. ": lr must be a non-negative number", 2) end
  if group ~= nil then
    local g = self.groups[group]
    if not g then error(string.format("%s: set_lr: no group %s (%d groups)", self.kind, tostring(group), #self.groups), 2) end
    g.opts.lr = lr
    return
  end
  self.opts.lr = lr
  for _, g in ipairs(self.groups) do g.opts.lr = lr * g.ratio end
end

--- lr() -> the default rate; lr(g) -> group g's.
function Optimizer:lr(group)
  if group == nil then return self.opts.lr end
  local g = self.groups[group]
  if not g then error(string.format("%s: lr: no group %s (%d groups)", self.kind, tostring(group), #self.groups), 2) end
  return g.opts.lr
end

--- State by name: {["1.m"] = tensor, ..., step = n, kind = ..., lr = ..., groups = n,
-- ["group.1.lr"] = ...} (tensors are copies; parameters numbered across groups).
function Optimizer:state_dict()
  local sd = {step = self.t, kind = self.kind, lr = self.opts.lr, groups = #self.groups}
  local names = state_names[self.kind]
  for i = 1, #self.params do
    sd[i .. "." .. names[1]] = self.s1[i]:clone()
    if self.s2[i] then sd[i .. "." .. names[2]] = self.s2[i]:clone() end
  end
  for gi, g in ipairs(self.groups) do sd["group." .. gi .. ".lr"] = g.opts.lr end
  return sd
end

function Optimizer:load_state_dict(sd)
  if sd.kind and sd.kind ~= self.kind then
    error(string.format("%s: state was saved by %s", self.kind, tostring(sd.kind)), 2)
  end
  if sd.groups and sd.groups ~= #self.groups then
    error(string.format("%s: state was saved with %d parameter groups, this optimizer has %d", self.kind,
      sd.groups, #self.groups), 2)
  end
  local names = state_names[self.kind]
  for i = 1, #self.params do
    for s, name in ipairs(names) do
      local dst = s == 1 and self.s1[i] or self.s2[i]
      local src = sd[i .. "." .. name]
      if dst and not is_tensor(src) then error(string.format("%s: state %s missing", self.kind, i .. "." .. name), 2) end
      if dst then dst:copy_(src) end
    end
  end
  if type(sd.lr) == "number" then self.opts.lr = sd.lr end
  for gi, g in ipairs(self.groups) do
    local lr = sd["group." .. gi .. ".lr"]
    if type(lr) == "number" then g.opts.lr = lr end
  end
  self.t = math.tointeger(sd.step) or 0
end

--- param_groups(model [, {weight_decay = 0}]) -> {decay_group, no_decay_group}
-- for any optimizer's params: the usual split, with weight decay on the weights
-- of matrices and kernels (2 or more dimensions) and none on biases and on
-- the parameters of norm layers (1 dimension: BatchNorm, LayerNorm weight and
-- bias) or anything named "*bias". model is anything with named_parameters().
-- @usage dl.optim.SGD{params = dl.optim.param_groups(model, {weight_decay = 5e-4}), lr = 0.1}
function M.param_groups(model, opts)
  opts = util.check_options("optim.param_groups", opts, {weight_decay = "number"}, 2)
  if type(model) ~= "table" or type(model.named_parameters) ~= "function" then
    error("optim.param_groups: expected a module (with named_parameters), got " .. type(model), 2)
  end
  local decay, no_decay = {}, {}
  for _, np in ipairs(model:named_parameters()) do
    local name, p = np[1], np[2]
    if p:dim() <= 1 or name:match("bias$") then no_decay[#no_decay + 1] = p
    else decay[#decay + 1] = p end
  end
  return {{params = decay, weight_decay = opts.weight_decay or 0}, {params = no_decay, weight_decay = 0}}
end

--- Scales all gradients so their global L2 norm is at most max_norm; returns the
-- norm before clipping (the value the clipping recipe logs).
function M.clip_grad_norm(params, max_norm)
  local total = 0
  for _, p in ipairs(params) do
    local g = p.grad
    if g then total = total + g:square():sum():item() end   -- sums accumulate in double
  end
  local norm = math.sqrt(total)
  if max_norm and norm > max_norm and norm > 0 then
    local s = max_norm / norm
    for _, p in ipairs(params) do
      local g = p.grad
      if g then p.grad = g:scale(s) end
    end
  end
  return norm
end

------------------------------------------------------------------- schedules

local schedule = {}
M.schedule = schedule

-- the option keys of each schedule (every one also takes warmup and steps)
local SCHEDULE_KEYS = {
  constant = {}, linear = {"final"}, cosine = {"final"}, rsqrt = {}, piecewise = {"boundaries", "values"},
}

-- opts of schedule.<name>, checked (unknown keys are errors at the caller of schedule.<name>)
local function schedule_options(name, opts)
  local spec = {warmup = "number", steps = "number"}
  for _, k in ipairs(SCHEDULE_KEYS[name]) do spec[k] = true end
  local checked = util.check_options("optim.schedule." .. name, opts, spec, 3)
  return checked                                   -- (not a tail call: the level counts this frame)
end

-- wraps f(step, steps) -> multiplier with linear warmup, printing, and `steps` filled in later
local function sched(name, f, opts)
  local warm = opts.warmup or 0
  local obj = {name = name, warmup = warm, steps = opts.steps, opts = opts}
  return setmetatable(obj, {
    __call = function(s, step)
      if warm > 0 and step < warm then return step / warm end
      return f(step, s.steps, s)
    end,
    __tostring = function(s)
      return string.format("schedule.%s{warmup = %d, steps = %s}", name, warm, tostring(s.steps))
    end,
  })
end

local function need_steps(name, steps)
  if not steps then error("schedule." .. name .. ": steps is not set (dl.train fills it in)", 3) end
  return steps
end

--- constant{warmup}: 1 after warmup.
function schedule.constant(opts)
  return sched("constant", function() return 1 end, schedule_options("constant", opts))
end

--- linear{warmup, steps, final = 0}: linear decay from 1 at the end of warmup to final at steps.
function schedule.linear(opts)
  opts = schedule_options("linear", opts)
  local final = opts.final or 0
  return sched("linear", function(step, steps, s)
    steps = need_steps("linear", steps)
    local t = math.min(1, (step - s.warmup) / math.max(1, steps - s.warmup))
    return 1 + (final - 1) * t
  end, opts)
end

--- cosine{warmup, steps, final = 0}: half-cosine from 1 to final.
function schedule.cosine(opts)
  opts = schedule_options("cosine", opts)
  local final = opts.final or 0
  return sched("cosine", function(step, steps, s)
    steps = need_steps("cosine", steps)
    local t = math.min(1, (step - s.warmup) / math.max(1, steps - s.warmup))
    return final + (1 - final) * 0.5 * (1 + math.cos(math.pi * t))
  end, opts)
end

--- rsqrt{warmup}: sqrt(warmup / step) after warmup (1 at the end of warmup).
function schedule.rsqrt(opts)
  opts = schedule_options("rsqrt", opts)
  return sched("rsqrt", function(step, _, s) return math.sqrt(math.max(s.warmup, 1) / math.max(step, 1)) end, opts)
end

--- piecewise{boundaries = {b1, b2, ...}, values = {v0, v1, ...}, warmup}: v_i on [b_i, b_{i+1}).
function schedule.piecewise(opts)
  opts = schedule_options("piecewise", opts)
  local b, v = opts.boundaries or {}, opts.values or {1}
  if #v ~= #b + 1 then error("schedule.piecewise: values must have one more entry than boundaries", 2) end
  return sched("piecewise", function(step)
    local k = 1
    for i = 1, #b do if step >= b[i] then k = i + 1 end end
    return v[k]
  end, opts)
end


-- every exported function refuses extra arguments (util.strict)
util.strict_table("optim.", M)
util.strict_table("optim.schedule.", M.schedule)
util.strict_table("Optimizer:", Optimizer, true)

return M
