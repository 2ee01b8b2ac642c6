--- dl.optim: optimizers (update rules in C, one call per step), learning-rate
-- schedules and gradient clipping. The update rules follow the tuning
-- playbook's FAQ exactly; docs/optimizers.md writes them out.
local core = require "dlua.core"
local util = require "dlua.util"

local M = {}

local is_tensor = util.is_tensor

-- the kinds and their defaults live in C (engine/optim.c), once
local specs = {}
for _, kind in ipairs(core.optim_kinds()) do specs[kind] = core.optim_defaults(kind) end
local nstate = {SGD = 1, Adam = 2, NAdam = 2, AdamW = 2, Adagrad = 1, RMSProp = 2}
local state_names = {SGD = {"momentum"}, Adam = {"m", "v"}, NAdam = {"m", "v"}, AdamW = {"m", "v"},
                     Adagrad = {"sum_sq"}, RMSProp = {"v", "m"}}

local Optimizer = {}
Optimizer.__index = Optimizer

local function make(kind)
  local defaults = specs[kind]
  local valid = {params = "table"}
  for k in pairs(defaults) do valid[k] = true end
  return function(opts)
    opts = util.check_options(kind, opts, valid, 2)
    local o = {}
    for k, v in pairs(opts) do
      if k ~= "params" then o[k] = v end
    end
    for k, v in pairs(defaults) do
      if o[k] == nil then o[k] = v end
      if type(o[k]) ~= type(v) then
        error(string.format("%s: option '%s' (%s expected, got %s)", kind, k, type(v), type(o[k])), 2)
      end
    end
    if o.lr < 0 then error(kind .. ": lr must be non-negative, got " .. o.lr, 2) end
    local self = setmetatable({kind = kind, opts = o, base_lr = o.lr, t = 0, params = {}, s1 = {}, s2 = {},
                               rule = core.optim_new(kind, o)}, Optimizer)
    if opts.params then self:attach(opts.params) end
    return self
  end
end

for kind in pairs(specs) do M[kind] = make(kind) end

--- Attaches parameters (a list of tensors) and creates their zeroed state.
function Optimizer:attach(params)
  for i, p in ipairs(params) do
    if not is_tensor(p) then error(string.format("%s: parameter %d is not a tensor", self.kind, i), 2) end
    local k = #self.params + 1
    self.params[k] = p
    local init1 = self.kind == "RMSProp" and 1 or 0     -- RMSProp's v starts at 1 (playbook 111)
    local like = {dtype = p:dtype()}                    -- state in the parameter's dtype
    self.s1[k] = core.full(init1, p:shape(), like)
    self.s2[k] = nstate[self.kind] > 1 and core.zeros(p:shape(), like) or false
  end
  return self
end

--- Clears the gradients of all attached parameters.
function Optimizer:zero_grad()
  for _, p in ipairs(self.params) do p.grad = nil end
end

--- One update of every parameter that has a gradient.
function Optimizer:step()
  self.t = self.t + 1
  core.optim_update(self.rule, self.params, self.s1, self.s2, self.opts.lr, self.t)
end

--- Sets the learning rate used from the next step on.
function Optimizer:set_lr(lr)
  if type(lr) ~= "number" or lr < 0 then error(self.kind .. ": lr must be a non-negative number", 2) end
  self.opts.lr = lr
end

function Optimizer:lr() return self.opts.lr end

--- State by name: {["1.m"] = tensor, ..., step = n} (tensors are copies).
function Optimizer:state_dict()
  local sd = {step = self.t, kind = self.kind}
  local names = state_names[self.kind]
  for i = 1, #self.params do
    sd[i .. "." .. names[1]] = self.s1[i]:clone()
    if self.s2[i] then sd[i .. "." .. names[2]] = self.s2[i]:clone() end
  end
  return sd
end

function Optimizer:load_state_dict(sd)
  if sd.kind and sd.kind ~= self.kind then
    error(string.format("%s: state was saved by %s", self.kind, tostring(sd.kind)), 2)
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
  self.t = math.tointeger(sd.step) or 0
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
