--- dlua.nn.module: the base class of every layer, nn.Module, and the option
-- helpers the layer constructors share. Parameters are declared with
-- `self:parameter(t)`, buffers with `self:buffer(t)` and submodules by assigning
-- them to fields; parameter lists, dotted names, train/eval and state dicts follow.
-- nn/init.lua (the layers and losses) and nn/batchnorm.lua build on it, so it
-- requires neither.
local core = require "dlua.core"
local util = require "dlua.util"
local blame = require "dlua.util.blame"

local M = {}

local is_tensor = util.is_tensor

--- options(name, opts, defaults [, types]) -> a new table: opts with defaults filled
-- in. An unknown key, or a value whose type is not the key's, is an error naming name
-- (util.check_options) at the caller of the constructor that called this. A key's
-- type is types[key] when given, else its default's (number, boolean, string): a
-- default of false makes a yes/no option, so a key whose value is something else when
-- given (a tensor, a size) declares its type in types.
local DEFAULT_TYPES = {number = "number", boolean = "boolean", string = "string"}
function M.options(name, opts, defaults, types)
  local spec = {}
  for k, d in pairs(defaults) do
    spec[k] = types and types[k] or DEFAULT_TYPES[type(d)]
    if not spec[k] then error("nn.options: no type for option '" .. tostring(k) .. "' of " .. name, 2) end
  end
  util.check_options(name, opts, spec, 3)
  local out = {}
  for k, v in pairs(opts or {}) do out[k] = v end
  for k, v in pairs(defaults) do
    if out[k] == nil then out[k] = v end
  end
  return out
end
local options = M.options

--- check_size(name, what, v) -> v as an integer; an error at the constructor's
-- caller unless v is a positive whole number.
function M.check_size(name, what, v)
  local why, n = util.integer_problem(v, 1)
  if why then error(string.format("%s: %s %s", name, what, why), 3) end
  return n
end

-------------------------------------------------------------------- Module

-- arguments a method takes after self, and whether it takes any number
local function arity(f)
  local info = debug.getinfo(util.unwrap(f), "u")
  return info.nparams - 1, info.isvararg
end

local Module = {}
Module.__name = "Module"
M.Module = Module

--- Creates a subclass: `local Scale = nn.Module:extend("Scale")`, then define
-- `Scale:init(...)` and `Scale:forward(x)`; `Scale(...)` constructs one.
-- sig (optional) declares argument types, check_args style: sig.init for the
-- constructor, sig[method] for a method defined on the class afterwards, e.g.
-- Module:extend("Softmax", {init = {"integer?"}}). tests/lua/strict_lua_spec.lua
-- walks every declared position with a value of the wrong type.
function Module:extend(name, sig)
  if name ~= nil and type(name) ~= "string" then
    error("bad argument #1 to 'Module:extend' (string expected, got " .. type(name) .. ")", 2)
  end
  if sig ~= nil and type(sig) ~= "table" then
    error("bad argument #2 to 'Module:extend' (table of argument types expected, got " .. type(sig) .. ")", 2)
  end
  local cls = {_sig = sig or {}}
  for k, v in pairs(self) do
    if k:sub(1, 2) == "__" then cls[k] = v end
  end
  cls.__name = name or "Module"
  cls.super = self
  return setmetatable(cls, {
    __index = self,
    -- strict by construction: the constructor takes no more arguments than init
    -- does after self, and every method defined on the class refuses extra ones
    __call = function(c, ...)
      local max, vararg = arity(c.init)
      if not vararg and select("#", ...) > max then
        error(string.format("bad argument #%d to '%s' (no more than %d arguments expected, got %d)", max + 1,
          c.__name, max, select("#", ...)), 2)
      end
      local types = rawget(c, "_sig") and rawget(c, "_sig").init
      if types then util.check_args(c.__name, types, 1, ...) end
      local obj = setmetatable({_params = {}, _modules = {}, _order = {}, _buffers = {}, training = true}, c)
      obj:init(...)
      return obj
    end,
    __newindex = function(c, k, v)
      if type(k) == "string" and type(v) == "function" and k:sub(1, 2) ~= "__" then
        local sig = rawget(c, "_sig")
        v = util.strict_method(c.__name .. ":" .. k, v, nil, k ~= "init" and sig and sig[k] or nil)
      end
      rawset(c, k, v)
    end,
  })
end

function Module:init() end

--- Registers tensor t as a parameter (it will require grad) and returns it.
function Module:parameter(t)
  if not is_tensor(t) then error("parameter: expected a tensor, got " .. type(t), 2) end
  t:requires_grad(true)
  self._pending = t
  return t
end

--- Registers t as a buffer: saved in state_dict, not trained (e.g. moving averages).
function Module:buffer(t)
  if not is_tensor(t) then error("buffer: expected a tensor, got " .. type(t), 2) end
  self._pending_buffer = t
  return t
end

-- fields: a parameter/buffer/module assigned to self.name is registered under name
Module.__newindex = function(self, k, v)
  if is_tensor(v) and rawget(self, "_pending") == v then
    rawset(self, "_pending", nil)
    if not self._params[k] then self._order[#self._order + 1] = k end
    self._params[k] = v
  elseif is_tensor(v) and rawget(self, "_pending_buffer") == v then
    rawset(self, "_pending_buffer", nil)
    if not self._buffers[k] then self._order[#self._order + 1] = k end
    self._buffers[k] = v
  elseif type(v) == "table" and getmetatable(v) and v._modules then
    if not self._modules[k] then self._order[#self._order + 1] = k end
    self._modules[k] = v
    if rawget(v, "_key") == nil then          -- its name in errors: the first parent's
      rawset(v, "_key", k)
      rawset(v, "_parent", self)
    end
  elseif self._params and self._params[k] and is_tensor(v) then
    self._params[k] = v
  elseif self._buffers and self._buffers[k] and is_tensor(v) then
    self._buffers[k] = v
  else
    rawset(self, k, v)
  end
end

Module.__index = function(self, k)
  local cls = getmetatable(self)
  local p = rawget(self, "_params")
  if p and p[k] then return p[k] end
  local b = rawget(self, "_buffers")
  if b and b[k] then return b[k] end
  local m = rawget(self, "_modules")
  if m and m[k] then return m[k] end
  return cls[k]
end

-- Errors name the module they come from, as its path from the root with its class:
-- "model.3 (Linear): input of shape [32, 2] does not end in 3 features". The root is
-- named by what holds it (dl.train names its model "model" and its loss "loss",
-- through Module._name_root); a root with no name gives paths relative to it and is
-- not named itself. Only the innermost module adds its path. A message without a
-- position gets the line the module was called from. DLUA_DEBUG=1 calls forward
-- directly, so tracebacks keep every frame.
local function path_of(m)
  local parts, depth = {}, 0
  while depth < 100 do
    local key = rawget(m, "_key")
    if key == nil then break end
    table.insert(parts, 1, tostring(key))
    m = rawget(m, "_parent")
    depth = depth + 1
  end
  local root = rawget(m, "_root_name")
  if root then table.insert(parts, 1, root) end
  return table.concat(parts, ".")
end

local last_annotated
local function pass(self, ok, ...)
  if ok then return ... end
  local err = ...
  if type(err) ~= "string" or err == last_annotated then error(err, 0) end
  local pos, rest = err:match("^([^\n:]+:%d+: )(.*)$")
  if not pos then                  -- the innermost user frame from the module's caller on
    local where = blame.user_location(2)   -- (level 2: pass is a tail call of __call)
    pos, rest = where and (where .. ": ") or "", err
  end
  local path, cls = path_of(self), tostring(getmetatable(self).__name)
  if path ~= "" then
    if rest:sub(1, #cls + 2) == cls .. ": " then rest = rest:sub(#cls + 3) end   -- the class said once
    rest = path .. " (" .. cls .. "): " .. rest
  end
  last_annotated = pos .. rest
  error(last_annotated, 0)
end

if blame.debug() then
  Module.__call = function(self, ...) return self:forward(...) end
else
  Module.__call = function(self, ...) return pass(self, pcall(self.forward, self, ...)) end
end

--- Names a module that is the root of a tree in error messages ("model", "loss").
function Module._name_root(m, name)
  if type(m) == "table" and rawget(m, "_modules") and rawget(m, "_key") == nil then rawset(m, "_root_name", name) end
end

function Module:forward()
  error(getmetatable(self).__name .. ": forward is not defined", 2)
end

-- visits (prefix, module) depth-first in registration order
local function walk(mod, prefix, fn)
  fn(prefix, mod)
  for _, k in ipairs(mod._order) do
    local sub = mod._modules[k]
    if sub then walk(sub, prefix .. tostring(k) .. ".", fn) end
  end
end

-- {{dotted name, tensor}, ...} of one kind of tensor (field "_params" or "_buffers") in
-- the module tree, in a stable order
local function named(mod, field)
  local out = {}
  walk(mod, "", function(prefix, m)
    for _, k in ipairs(m._order) do
      if m[field][k] then out[#out + 1] = {prefix .. tostring(k), m[field][k]} end
    end
  end)
  return out
end

--- Returns {{name, tensor}, ...} in a stable order with dotted names ("3.weight").
function Module:named_parameters() return named(self, "_params") end

--- Returns the list of parameter tensors.
function Module:parameters()
  local out = {}
  for i, np in ipairs(self:named_parameters()) do out[i] = np[2] end
  return out
end

function Module:named_buffers() return named(self, "_buffers") end

--- Training mode (the default) for this module and all children; returns self.
function Module:train(flag)
  if flag == nil then flag = true end
  walk(self, "", function(_, m) rawset(m, "training", flag) end)
  return self
end

--- Evaluation mode for this module and all children; returns self.
function Module:eval() return self:train(false) end

--- Clears .grad of every parameter.
function Module:zero_grad()
  for _, p in ipairs(self:parameters()) do p.grad = nil end
end

--- Returns {name = tensor} of parameters and buffers (the tensors themselves).
function Module:state_dict()
  local sd = {}
  for _, np in ipairs(self:named_parameters()) do sd[np[1]] = np[2] end
  for _, nb in ipairs(self:named_buffers()) do sd[nb[1]] = nb[2] end
  return sd
end

--- Copies tensors from sd into the parameters and buffers. Strict by default:
-- missing, unexpected and mis-shaped keys are all reported in one error.
-- With {strict = false} only shapes are checked; returns missing, unexpected.
function Module:load_state_dict(sd, opts)
  opts = options("load_state_dict", opts, {strict = true})
  local own = self:state_dict()
  local missing, unexpected, shapes = {}, {}, {}
  for k, t in pairs(own) do
    local v = sd[k]
    if v == nil then missing[#missing + 1] = k
    elseif not is_tensor(v) then shapes[#shapes + 1] = k .. " (not a tensor)"
    else
      local a, b = table.concat(t:shape(), ", "), table.concat(v:shape(), ", ")
      if a ~= b then shapes[#shapes + 1] = string.format("%s (expected [%s], got [%s])", k, a, b) end
    end
  end
  for k in pairs(sd) do
    if own[k] == nil then unexpected[#unexpected + 1] = tostring(k) end
  end
  table.sort(missing); table.sort(unexpected); table.sort(shapes)
  local problems = {}
  if opts.strict and #missing > 0 then problems[#problems + 1] = "missing keys: " .. table.concat(missing, ", ") end
  if opts.strict and #unexpected > 0 then problems[#problems + 1] = "unexpected keys: " .. table.concat(unexpected, ", ") end
  if #shapes > 0 then problems[#problems + 1] = "mis-shaped keys: " .. table.concat(shapes, ", ") end
  if #problems > 0 then error("load_state_dict: " .. table.concat(problems, "; "), 2) end
  local prev = core.set_grad_enabled(false)
  for k, t in pairs(own) do
    if sd[k] then t:copy_(sd[k]) end
  end
  core.set_grad_enabled(prev)
  return missing, unexpected
end

--------------------------------------------------------- tree and dtype

--- Returns {{name, module}, ...}: this module's direct submodules in
-- registration order, named by their field ("1", "body").
function Module:named_children()
  local out = {}
  for _, k in ipairs(self._order) do
    if self._modules[k] then out[#out + 1] = {tostring(k), self._modules[k]} end
  end
  return out
end

--- Returns the list of direct submodules in registration order.
function Module:children()
  local out = {}
  for i, nc in ipairs(self:named_children()) do out[i] = nc[2] end
  return out
end

--- Returns {{name, module}, ...}: this module (named "") and every submodule,
-- depth-first pre-order with dotted names ("1", "1.body"), as PyTorch's
-- named_modules; a module reachable twice is listed once, under its first name.
function Module:named_modules()
  local out, seen = {}, {}
  local function rec(m, name)
    if seen[m] then return end
    seen[m] = true
    out[#out + 1] = {name, m}
    for _, nc in ipairs(m:named_children()) do
      rec(nc[2], name == "" and nc[1] or (name .. "." .. nc[1]))
    end
  end
  rec(self, "")
  return out
end

--- Returns the list of this module and every submodule (named_modules' order).
function Module:modules()
  local out = {}
  for i, nm in ipairs(self:named_modules()) do out[i] = nm[2] end
  return out
end

--- Calls fn(m) on every submodule and then on this module (children first,
-- as PyTorch's apply); returns self.
-- @usage model:apply(function(m) if m.weight then nn.init.zeros(m.weight) end end)
function Module:apply(fn)
  if type(fn) ~= "function" then error("apply: expected a function, got " .. type(fn), 2) end
  local function rec(m)
    for _, c in ipairs(m:children()) do rec(c) end
    fn(m)
  end
  rec(self)
  return self
end

local FLOAT_DTYPES = {float32 = true, float64 = true}

--- Converts every float parameter and buffer of this module and its submodules
-- to dtype ("float32" or "float64") in place on the module and returns the
-- module. Parameters keep their requires_grad flag (frozen ones stay frozen)
-- and lose their .grad; integer buffers (BatchNorm's num_batches_tracked) are
-- kept. The module holds new tensors afterwards, so build the optimizer after
-- calling to().
-- @usage bn:to("float64"); dl.autograd.gradcheck(function(x) return bn(x) end, {x})
function Module:to(dtype)
  if not FLOAT_DTYPES[dtype] then
    error(string.format("to: dtype must be 'float32' or 'float64', got %s",
      type(dtype) == "string" and ("'" .. dtype .. "'") or type(dtype)), 2)
  end
  local prev = core.set_grad_enabled(false)
  local done = {}                                  -- old -> new, so a tensor shared by two modules stays shared
  for _, m in ipairs(self:modules()) do
    for _, k in ipairs(m._order) do
      local p = m._params[k]
      if p and p:dtype() ~= dtype then
        if not done[p] then
          done[p] = p:to(dtype)
          done[p]:requires_grad(p:requires_grad())
        end
        m._params[k] = done[p]
      end
      local b = m._buffers[k]
      if b and FLOAT_DTYPES[b:dtype()] and b:dtype() ~= dtype then
        done[b] = done[b] or b:to(dtype)
        m._buffers[k] = done[b]
      end
    end
  end
  core.set_grad_enabled(prev)
  return self
end

--------------------------------------------------------------- freezing

--- Stops training of every parameter of this module and its submodules
-- (requires_grad false: no gradient is computed and every optimizer skips them);
-- a single tensor is frozen with `p:requires_grad(false)`. Returns self.
function Module:freeze()
  for _, p in ipairs(self:parameters()) do p:requires_grad(false); p.grad = nil end
  return self
end

--- Makes every parameter of this module and its submodules trainable again; returns self.
function Module:unfreeze()
  for _, p in ipairs(self:parameters()) do p:requires_grad(true) end
  return self
end

--- Number of scalar parameters.
function Module:num_parameters()
  local n = 0
  for _, p in ipairs(self:parameters()) do n = n + p:numel() end
  return n
end

function Module:extra_repr() return "" end

Module.__tostring = function(self)
  local lines = {}
  local function rec(m, name, depth)
    local own = 0
    for _, k in ipairs(m._order) do
      if m._params[k] then own = own + m._params[k]:numel() end
    end
    local total, frozen = 0, 0
    for _, p in ipairs(m:parameters()) do
      total = total + p:numel()
      if not p:requires_grad() then frozen = frozen + p:numel() end
    end
    local extra = m:extra_repr()
    local count = ""
    if frozen > 0 then count = string.format("  [%d params, %d frozen]", total, frozen)
    elseif total > 0 then count = string.format("  [%d params]", total) end
    lines[#lines + 1] = string.format("%s%s%s%s%s", string.rep("  ", depth), name and (name .. ": ") or "",
      getmetatable(m).__name, extra ~= "" and ("(" .. extra .. ")") or "", count)
    for _, k in ipairs(m._order) do
      if m._modules[k] then rec(m._modules[k], tostring(k), depth + 1) end
    end
    return own
  end
  rec(self, nil, 0)
  return table.concat(lines, "\n")
end
-- Module's own methods refuse extra arguments too (forward is left alone: it only
-- raises "forward is not defined", whatever it is given)
-- and check the types their arguments are declared with here
local MODULE_ARGS = {
  parameter = {"tensor"}, buffer = {"tensor"}, train = {"boolean?"}, load_state_dict = {"table", "table?"},
  _name_root = {"string"}, apply = {"callable"}, extend = {"string?", "table?"},
}
for _, k in ipairs(util.sorted_keys(Module)) do
  local v = rawget(Module, k)
  if type(v) == "function" and k:sub(1, 2) ~= "__" and k ~= "forward" then
    Module[k] = util.strict_method("Module:" .. k, v, nil, MODULE_ARGS[k])
  end
end

return M
