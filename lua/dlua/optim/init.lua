--- dl.optim: optimizers (update rules in C, one call per step), learning-rate
-- schedules and gradient clipping. The update rules follow the tuning
-- playbook's FAQ exactly; docs/optimizers.md writes them out.
local core = require "dlua.core"
local util = require "dlua.util"

local M = {}

local is_tensor = util.is_tensor

-- The optimizers are the rows of the C table (engine/ops/optim.c), read once:
-- names, hyperparameters (type, default, valid range) and state slots (name,
-- initial value). Nothing below names an optimizer.
local rows = {}
for _, row in ipairs(core.optim_table()) do
  local by_name = {}
  for _, h in ipairs(row.hparams) do by_name[h.name] = h end
  rows[row.name] = {hparams = row.hparams, by_name = by_name, state = row.state}
end

local Optimizer = {}
Optimizer.__index = Optimizer

-- a group table is a plain table with a params field; a tensor list is not
local function is_group(x) return type(x) == "table" and not is_tensor(x) and x.params ~= nil end

-- the option values of kind in o (a group's or the constructor's), type-checked against the row
local function check_types(kind, o, where, level)
  for _, h in ipairs(rows[kind].hparams) do
    local v = o[h.name]
    if v ~= nil and type(v) ~= h.type then
      error(string.format("%s: option '%s'%s (%s expected, got %s)", kind, h.name, where, h.type, type(v)), level + 1)
    end
  end
end

local function in_range(h, v)
  return h.type ~= "number" or (v >= h.min and (v < h.max or (v == h.max and not h.max_open)))
end

-- every value of o (all keys set) within its range, else "Adam: beta1 in params.2 must be in [0, 1), got 1"
local function check_ranges(kind, o, where, level)
  for _, h in ipairs(rows[kind].hparams) do
    if not in_range(h, o[h.name]) then
      error(string.format("%s: %s%s must be %s, got %s", kind, h.name, where, h.range, tostring(o[h.name])), level + 1)
    end
  end
end

-- the option spec of kind for util.check_options: its hyperparameters and params
local function option_spec(kind)
  local spec = {params = "table"}
  for _, h in ipairs(rows[kind].hparams) do spec[h.name] = true end
  return spec
end

local function make(kind)
  local valid = option_spec(kind)
  return function(opts)
    local spec = valid
    if type(opts) == "table" and type(opts.params) == "table" and is_group(opts.params[1]) then
      spec = util.copy(valid)                      -- groups: each entry of params checked as a nested table
      spec.params = {}
      for i = 1, #opts.params do      -- an entry that is no group: attach names it ("params.2 is not a group")
        spec.params[i] = is_group(opts.params[i]) and option_spec(kind) or true
      end
    end
    opts = util.check_options(kind, opts, spec, 2)
    local o = {}
    for k, v in pairs(opts) do
      if k ~= "params" then o[k] = v end
    end
    check_types(kind, o, "", 2)
    for _, h in ipairs(rows[kind].hparams) do
      if o[h.name] == nil then o[h.name] = h.default end
    end
    check_ranges(kind, o, "", 2)
    local self = setmetatable({kind = kind, opts = o, base_lr = o.lr, t = 0, params = {}, state = {}, groups = {}},
                              Optimizer)
    for s = 1, #rows[kind].state do self.state[s] = {} end
    if opts.params then self:attach(opts.params, 3) end
    return self
  end
end

for kind in pairs(rows) do M[kind] = make(kind) end

-- adds one group: its options (the optimizer's defaults overridden by g's keys),
-- its C rule and its parameters' state (each slot at its initial value), appended
-- to the flat lists
function Optimizer:_add_group(list, gopts, where, level)
  local o = util.copy(self.opts)
  for k, v in pairs(gopts) do o[k] = v end
  check_ranges(self.kind, o, where, level + 1)
  local default = self.opts.lr                          -- the default rate now (set_lr may have changed it)
  if o.lr ~= default and default == 0 then
    error(string.format("%s: lr%s is %s while the default lr is 0 (set_lr keeps each group's ratio to the default)",
      self.kind, where, o.lr), level + 1)
  end
  local slots = rows[self.kind].state
  local g = {opts = o, ratio = default > 0 and o.lr / default or 1, rule = core.optim_new(self.kind, o),
             params = {}, state = {}, index = {}}
  for s = 1, #slots do g.state[s] = {} end
  for i, p in ipairs(list) do
    if not is_tensor(p) then
      error(string.format("%s: parameter %d%s is not a tensor", self.kind, i, where), level + 1)
    end
    local k = #self.params + 1
    self.params[k] = p
    local like = {dtype = p:dtype()}                    -- state in the parameter's dtype
    for s, slot in ipairs(slots) do
      self.state[s][k] = core.full(slot.init, p:shape(), like)
      g.state[s][i] = self.state[s][k]
    end
    g.params[i], g.index[i] = p, k
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
  local gspec, nested = option_spec(self.kind), {}
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
    check_types(self.kind, gopts, where, level)
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
    local ps, states = {}, {}
    for s = 1, #g.state do states[s] = {} end
    for i, p in ipairs(g.params) do
      if p:requires_grad() then
        ps[#ps + 1] = p
        for s = 1, #g.state do states[s][#ps] = g.state[s][i] end
      end
    end
    if #ps > 0 then core.optim_update(g.rule, ps, states, g.opts.lr, self.t) end
  end
end

--- Sets the learning rate used from the next step on: set_lr(lr) sets the
-- default rate and every group's to lr times the group's ratio to the default
-- when it was added (so a schedule scaling the default scales every group);
-- set_lr(lr, g) sets group g's rate alone (until the next set_lr(lr)).
function Optimizer:set_lr(lr, group)
  local h = rows[self.kind].by_name.lr
  if type(lr) ~= "number" or not in_range(h, lr) then
    error(string.format("%s: lr must be a %s number, got %s", self.kind, h.range, tostring(lr)), 2)
  end
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
  for s, slot in ipairs(rows[self.kind].state) do
    for i = 1, #self.params do sd[i .. "." .. slot.name] = self.state[s][i]:clone() end
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
  for i = 1, #self.params do
    for s, slot in ipairs(rows[self.kind].state) do
      local src = sd[i .. "." .. slot.name]
      if not is_tensor(src) then error(string.format("%s: state %s missing", self.kind, i .. "." .. slot.name), 2) end
      self.state[s][i]:copy_(src)
    end
  end
  if type(sd.lr) == "number" then self.opts.lr = sd.lr end
  for gi, g in ipairs(self.groups) do
    local lr = sd["group." .. gi .. ".lr"]
    if type(lr) == "number" then g.opts.lr = lr end
  end
  self.t = math.tointeger(sd.step) or 0
end

--- param_groups(model [, {weight_decay = wd}]) -> {decay_group, no_decay_group}
-- for any optimizer's params: the usual split, with weight decay on the weights
-- of matrices and kernels (2 or more dimensions) and none on biases and on
-- the parameters of norm layers (1 dimension: BatchNorm, LayerNorm weight and
-- bias) or anything named "*bias". model is anything with named_parameters().
-- The decay group's weight_decay is wd when given, else the optimizer's own
-- (the group leaves it unset); the other group's is 0.
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
  return {{params = decay, weight_decay = opts.weight_decay}, {params = no_decay, weight_decay = 0}}
end

--- Scales all gradients so their global L2 norm is at most max_norm; returns the
-- norm before clipping (the value the clipping recipe logs). max_norm, when given,
-- must be a positive finite number (nil: the norm only, nothing clipped).
function M.clip_grad_norm(params, max_norm)
  if max_norm ~= nil and not (max_norm > 0 and max_norm < math.huge) then
    error("optim.clip_grad_norm: max_norm must be a positive finite number, got " .. tostring(max_norm), 2)
  end
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

-- the option keys of each schedule besides warmup; linear and cosine decay over
-- steps (dl.train gives a copy its own when unset), the others take none
local SCHEDULE_KEYS = {
  constant = {}, linear = {"final", "steps"}, cosine = {"final", "steps"}, rsqrt = {}, piecewise = {"boundaries", "values"},
}

-- opts of schedule.<name>, checked (errors at the caller of schedule.<name>): unknown
-- keys, types, warmup a non-negative integer, steps a positive one; steps on a
-- schedule that does not decay over them is refused (it would be read by nothing)
local function schedule_options(name, opts)
  local fn = "optim.schedule." .. name
  local spec = {warmup = "number", steps = "number"}
  for _, k in ipairs(SCHEDULE_KEYS[name]) do spec[k] = true end
  local checked = util.check_options(fn, opts, spec, 3)
  local takes_steps = false
  for _, k in ipairs(SCHEDULE_KEYS[name]) do if k == "steps" then takes_steps = true end end
  if checked.steps ~= nil and not takes_steps then
    error(string.format("%s: option 'steps' is not read by a %s schedule (only linear and cosine decay over steps); " ..
      "leave it out", fn, name), 3)
  end
  for _, k in ipairs({"warmup", "steps"}) do
    local min = k == "warmup" and 0 or 1
    local bad = checked[k] ~= nil and util.integer_problem(checked[k], min)
    if bad then error(string.format("%s: option '%s' %s", fn, k, bad), 3) end
  end
  return checked                                   -- (not a tail call: the level counts this frame)
end

-- wraps f(step, steps) -> multiplier with linear warmup, printing, and `steps` filled in later
-- (dl.train gives a copy of the object its own steps when unset)
local function sched(name, f, opts)
  local warm = math.tointeger(opts.warmup or 0)
  local obj = {name = name, warmup = warm, steps = opts.steps and math.tointeger(opts.steps), opts = opts}
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

-- a decay from 1 at the end of warmup to `final` at `steps`: shape(t, final) at the
-- fraction t of the way (the callers tail-call it, so option errors name their caller)
local function decay(name, shape, opts)
  opts = schedule_options(name, opts)
  local final = opts.final or 0
  return sched(name, function(step, steps, s)
    steps = need_steps(name, steps)
    local t = math.min(1, (step - s.warmup) / math.max(1, steps - s.warmup))
    return shape(t, final)
  end, opts)
end

--- linear{warmup, steps, final = 0}: linear decay from 1 at the end of warmup to final at steps.
function schedule.linear(opts)
  return decay("linear", function(t, final) return 1 + (final - 1) * t end, opts)
end

--- cosine{warmup, steps, final = 0}: half-cosine from 1 to final.
function schedule.cosine(opts)
  return decay("cosine", function(t, final) return final + (1 - final) * 0.5 * (1 + math.cos(math.pi * t)) end, opts)
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
local OPTIM_ARGS = {clip_grad_norm = {"table", "number?"}, param_groups = {"module", "table?"}}
for kind in pairs(rows) do OPTIM_ARGS[kind] = {"table"} end       -- each constructor takes its option table
util.strict_table("optim.", M, false, OPTIM_ARGS)
util.strict_table("optim.schedule.", M.schedule, false, {
  constant = {"table?"}, cosine = {"table"}, linear = {"table"}, piecewise = {"table"}, rsqrt = {"table?"},
})
util.strict_table("Optimizer:", Optimizer, true, {
  attach = {"table", "integer?"}, set_lr = {"number", "integer?"}, lr = {"integer?"}, load_state_dict = {"table"},
})

return M
