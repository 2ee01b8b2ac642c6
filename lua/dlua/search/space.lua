--- dlua.search.space: parameters (uniform, log_uniform, int, discrete,
-- choice, conditions, switch) and search spaces. Every sampled parameter owns
-- one coordinate of the unit cube [0, 1)^d; a point u of the cube maps to
-- hyperparameters coordinate by coordinate (docs/studies.md lists the mapping
-- of each type). Plain values are fixed and own no coordinate. Conditional
-- parameters own their coordinate always and are left out of the
-- hyperparameters where their condition fails (the playbook's "sample every
-- branch's dimensions and ignore inactive ones"). Space:encode gives the
-- feature vectors surrogate models fit.
local util = require "dlua.util"

local M = {}

----------------------------------------------------------------- parameters

local Param = {}
Param.__index = Param

local function is_param(x) return getmetatable(x) == Param end
M.is_param = is_param

local function finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

local function scalar(v) local t = type(v); return t == "number" or t == "string" or t == "boolean" end

local function fmt(v)
  if type(v) == "string" then return string.format("%q", v) end
  return tostring(v)
end

local function new_param(p) return setmetatable(p, Param) end

--- uniform(a, b): a + u (b - a).
function M.uniform(a, b)
  if not finite(a) or not finite(b) then
    error(string.format("dl.search.uniform: bounds must be finite numbers, got %s, %s", fmt(a), fmt(b)), 2)
  end
  if not (a < b) then error(string.format("dl.search.uniform: a (%s) must be less than b (%s)", fmt(a), fmt(b)), 2) end
  return new_param{kind = "uniform", lo = a, hi = b}
end

--- log_uniform(a, b): a exp(u ln(b / a)), uniform in log space; 0 < a < b.
function M.log_uniform(a, b)
  if not finite(a) or not finite(b) then
    error(string.format("dl.search.log_uniform: bounds must be finite numbers, got %s, %s", fmt(a), fmt(b)), 2)
  end
  if a <= 0 or b <= 0 then
    error(string.format("dl.search.log_uniform: bounds must be positive, got a = %s, b = %s", fmt(a), fmt(b)), 2)
  end
  if not (a < b) then
    error(string.format("dl.search.log_uniform: a (%s) must be less than b (%s)", fmt(a), fmt(b)), 2)
  end
  return new_param{kind = "log_uniform", lo = a, hi = b}
end

--- int(a, b [, {log = true}]): an integer in [a, b], each equally likely (log:
-- each k with probability proportional to ln((k + 1) / k); needs a >= 1).
function M.int(a, b, opts)
  if math.type(a) ~= "integer" or math.type(b) ~= "integer" then
    error(string.format("dl.search.int: bounds must be integers, got %s, %s", fmt(a), fmt(b)), 2)
  end
  if a > b then error(string.format("dl.search.int: a (%d) must be <= b (%d)", a, b), 2) end
  opts = util.check_options("dl.search.int", opts, {log = "boolean"}, 2)
  local log = opts.log or false
  if log and a < 1 then error(string.format("dl.search.int: log scale needs a >= 1, got a = %d", a), 2) end
  return new_param{kind = "int", lo = a, hi = b, log = log}
end

--- _values_problem(list) -> nil, or what is wrong with a list of values (scalars): a
-- NaN (equal to nothing, so no trial could be matched to it) or a value listed twice
-- (1 and 1.0 are one value). The one check of choice, discrete and dl.study's scientific lists.
function M._values_problem(list)
  local seen = {}
  for i, v in ipairs(list) do
    if v ~= v then return string.format("value %d is NaN (a value must equal itself)", i) end
    if seen[v] then return string.format("value %s is listed twice", fmt(v)) end
    seen[v] = true                           -- a table key: 1 and 1.0 are one key
  end
end

local function check_values(fname, values)
  if type(values) ~= "table" or #values == 0 then
    error(string.format("dl.search.%s: expected a non-empty list of values, got %s", fname,
      type(values) == "table" and "an empty table" or type(values)), 3)
  end
  local out = {}
  for i, v in ipairs(values) do
    if not scalar(v) then
      error(string.format("dl.search.%s: value %d is a %s (numbers, strings and booleans only)", fname, i, type(v)), 3)
    end
    out[i] = v
  end
  local bad = M._values_problem(out)
  if bad then error(string.format("dl.search.%s: %s", fname, bad), 3) end
  for k in pairs(values) do
    if math.type(k) ~= "integer" or k < 1 or k > #values then
      error(string.format("dl.search.%s: expected a list, got a table with key %s", fname, fmt(k)), 3)
    end
  end
  return out
end

--- discrete{v1, v2, ...}: ordered values (neighbours are similar), equally likely.
function M.discrete(values)
  return new_param{kind = "discrete", values = check_values("discrete", values)}
end

--- choice{v1, v2, ...}: unordered categories, equally likely.
function M.choice(values)
  return new_param{kind = "choice", values = check_values("choice", values)}
end

--- p:when{parent = value or {values...}, ...}: p exists only where every parent
-- takes one of the listed values.
function Param:when(cond)
  if type(cond) ~= "table" or next(cond) == nil then
    error("when: expected {parent = value or {values...}}", 2)
  end
  local q = {}
  for k, v in pairs(self) do q[k] = v end
  q.cond = {}
  for k, v in pairs(self.cond or {}) do q.cond[k] = v end
  for parent, vals in pairs(cond) do
    if type(parent) ~= "string" then error("when: parent names must be strings", 2) end
    if scalar(vals) then vals = {vals} end
    q.cond[parent] = check_values("when", vals)
  end
  return new_param(q)
end

local Switch = {}
Switch.__index = Switch

--- switch(parent, {value = param or plain value, ...}): one parameter whose
-- distribution depends on the value of parent. Each branch is a separate
-- dimension (item 31: "adam.lr" is not "sgd.lr"); for a parent value with no
-- branch the parameter is absent.
function M.switch(parent, branches)
  if type(parent) ~= "string" then error("dl.search.switch: expected the parent's name first", 2) end
  if type(branches) ~= "table" or next(branches) == nil then
    error("dl.search.switch: expected {value = param, ...} as the second argument", 2)
  end
  local list = {}
  for v, p in pairs(branches) do
    if not scalar(v) then error("dl.search.switch: branch keys must be parent values", 2) end
    if not is_param(p) and not scalar(p) then
      error(string.format("dl.search.switch: branch %s must be a parameter or a plain value", fmt(v)), 2)
    end
    list[#list + 1] = {value = v, param = p}
  end
  table.sort(list, function(a, b) return tostring(a.value) < tostring(b.value) end)
  return setmetatable({parent = parent, branches = list}, Switch)
end

--- Maps u in [0, 1) to a value of the parameter (docs/api/search.md).
function Param:map(u)
  local k = self.kind
  if k == "uniform" then
    return math.min(self.hi, self.lo + u * (self.hi - self.lo))
  elseif k == "log_uniform" then
    return math.max(self.lo, math.min(self.hi, self.lo * math.exp(u * math.log(self.hi / self.lo))))
  elseif k == "int" then
    local n = self.hi - self.lo
    if self.log then
      local v = math.floor(math.exp(math.log(self.lo) + u * (math.log(self.hi + 1) - math.log(self.lo))))
      return math.tointeger(math.max(self.lo, math.min(self.hi, v)))
    end
    return self.lo + math.min(math.floor(u * (n + 1)), n)
  else
    local n = #self.values
    return self.values[math.min(math.floor(u * n), n - 1) + 1]
  end
end

--- Number of values (nil when continuous).
function Param:levels()
  if self.kind == "int" then return self.hi - self.lo + 1 end
  if self.values then return #self.values end
end

--- The index (1-based) of v among the values, or nil.
function Param:index_of(v)
  for i, x in ipairs(self.values or {}) do if x == v and type(x) == type(v) then return i end end
end

--- Coordinate of value v: the inverse of map (the middle of v's cell for
-- discrete types), or nil when v is not a value of the parameter.
function Param:unmap(v)
  local k = self.kind
  if k == "uniform" then
    if type(v) ~= "number" then return nil end
    return (v - self.lo) / (self.hi - self.lo)
  elseif k == "log_uniform" then
    if type(v) ~= "number" or v <= 0 then return nil end
    return math.log(v / self.lo) / math.log(self.hi / self.lo)
  elseif k == "int" then
    if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then return nil end
    if self.log then
      local l0, l1 = math.log(self.lo), math.log(self.hi + 1)
      return ((math.log(v) + math.log(v + 1)) / 2 - l0) / (l1 - l0)
    end
    return (v - self.lo + 0.5) / (self.hi - self.lo + 1)
  else
    local i = self:index_of(v)
    return i and (i - 0.5) / #self.values
  end
end

function Param:describe()
  local k = self.kind
  if k == "uniform" or k == "log_uniform" then return string.format("%s(%s, %s)", k, fmt(self.lo), fmt(self.hi)) end
  if k == "int" then return string.format("int(%d, %d%s)", self.lo, self.hi, self.log and ", log" or "") end
  local vals = {}
  for i, v in ipairs(self.values) do vals[i] = fmt(v) end
  return string.format("%s{%s}", k, table.concat(vals, ", "))
end

--- Plain data (for study.json); from_table rebuilds it.
function Param:to_table()
  local t = {kind = self.kind, lo = self.lo, hi = self.hi, log = self.log or nil, values = self.values}
  if self.cond then
    t.cond = {}
    for k, v in pairs(self.cond) do t.cond[k] = v end
  end
  return t
end

function M.param_from_table(t)
  local p
  if t.kind == "uniform" then p = M.uniform(t.lo, t.hi)
  elseif t.kind == "log_uniform" then p = M.log_uniform(t.lo, t.hi)
  elseif t.kind == "int" then p = M.int(math.tointeger(t.lo), math.tointeger(t.hi), {log = t.log or false})
  elseif t.kind == "discrete" then p = M.discrete(t.values)
  elseif t.kind == "choice" then p = M.choice(t.values)
  else error("dl.search: unknown parameter kind " .. tostring(t.kind), 2) end
  if t.cond then p = p:when(t.cond) end
  return p
end

---------------------------------------------------------------------- spaces

local Space = {}
Space.__index = Space

local function is_space(x) return getmetatable(x) == Space end
M.is_space = is_space

local function value_set(param)
  if param.kind == "int" then return nil end           -- integers: checked by range
  return param.values
end

--- space{name = param | switch | plain value, ...} [, opts]: a search space.
-- opts.context = {name = value or list of possible values} names parameters
-- that conditions may refer to but that the space does not sample (a study's
-- scientific and fixed hyperparameters). A space passes through unchanged.
function M.space(tbl, opts)
  if is_space(tbl) then return tbl end
  if type(tbl) ~= "table" then error("dl.search.space: expected a table of parameters, got " .. type(tbl), 2) end
  opts = util.check_options("dl.search.space", opts, {context = "table"}, 2)
  local self = setmetatable({dims = {}, fixed = {}, names = {}, context = opts.context or {}}, Space)
  local names = {}
  for name in pairs(tbl) do
    if type(name) ~= "string" or not name:match("^[%a_][%w_%.]*$") then
      error(string.format("dl.search.space: parameter names must be identifiers, got %s", fmt(name)), 2)
    end
    names[#names + 1] = name
  end
  table.sort(names)
  local possible = {}                                   -- name -> list of values, or true (continuous)
  for k, v in pairs(self.context) do possible[k] = scalar(v) and {v} or v end
  for _, name in ipairs(names) do
    local v = tbl[name]
    if getmetatable(v) == Switch then
      local vals = {}
      for _, br in ipairs(v.branches) do
        local c = {[v.parent] = {br.value}}
        local path = string.format("%s[%s=%s]", name, v.parent, tostring(br.value))
        if is_param(br.param) then
          for pk, pv in pairs(br.param.cond or {}) do c[pk] = pv end
          self.dims[#self.dims + 1] = {name = name, path = path, param = br.param, cond = c}
          for _, x in ipairs(value_set(br.param) or {}) do vals[#vals + 1] = x end
          if br.param.kind == "uniform" or br.param.kind == "log_uniform" or br.param.kind == "int" then vals = true end
        else
          self.fixed[#self.fixed + 1] = {name = name, path = path, value = br.param, cond = c}
          if vals ~= true then vals[#vals + 1] = br.param end
        end
      end
      possible[name] = vals
    elseif is_param(v) then
      self.dims[#self.dims + 1] = {name = name, path = name, param = v, cond = v.cond}
      possible[name] = value_set(v) or true
    elseif scalar(v) then
      self.fixed[#self.fixed + 1] = {name = name, path = name, value = v}
      possible[name] = {v}
    else
      error(string.format("dl.search.space: %s must be a dl.search parameter or a plain number, string or " ..
        "boolean, got a %s", name, type(v)), 2)
    end
    self.names[#self.names + 1] = name
  end
  -- discrete and categorical dimensions first (the smallest bases stratify best), then by name
  table.sort(self.dims, function(a, b)
    local da, db = a.param.values ~= nil, b.param.values ~= nil
    if da ~= db then return da end
    return a.path < b.path
  end)
  -- conditions: parents exist, are discrete, and the values are theirs
  local function check_cond(entry)
    for parent, vals in pairs(entry.cond or {}) do
      local pv = possible[parent]
      if pv == nil then
        error(string.format("dl.search.space: %s depends on %s, which is not a parameter", entry.path, parent), 3)
      end
      if pv == true then
        error(string.format("dl.search.space: %s depends on %s, which is continuous (conditions need discrete, " ..
          "choice or plain values)", entry.path, parent), 3)
      end
      for _, x in ipairs(vals) do
        local found = false
        for _, y in ipairs(pv) do if x == y then found = true end end
        if not found then
          local l = {}
          for i, y in ipairs(pv) do l[i] = fmt(y) end
          error(string.format("dl.search.space: %s depends on %s = %s, which is not a value of %s (values: %s)",
            entry.path, parent, fmt(x), parent, table.concat(l, ", ")), 3)
        end
      end
      if parent == entry.name then error(string.format("dl.search.space: %s depends on itself", entry.path), 3) end
    end
  end
  for _, d in ipairs(self.dims) do check_cond(d); if d.cond then self.conditional = true end end
  for _, f in ipairs(self.fixed) do check_cond(f); if f.cond then self.conditional = true end end
  -- evaluation order: parents before children (a cycle is an error)
  local by_name = {}
  for _, e in ipairs(self.dims) do by_name[e.name] = by_name[e.name] or {}; table.insert(by_name[e.name], e) end
  for _, e in ipairs(self.fixed) do by_name[e.name] = by_name[e.name] or {}; table.insert(by_name[e.name], e) end
  local order, state = {}, {}
  local function visit(name, stack)
    if state[name] == "done" then return end
    if state[name] == "visiting" then
      error("dl.search.space: conditions form a cycle: " .. table.concat(stack, " -> ") .. " -> " .. name, 4)
    end
    state[name] = "visiting"
    stack[#stack + 1] = name
    for _, e in ipairs(by_name[name] or {}) do
      for parent in pairs(e.cond or {}) do if by_name[parent] then visit(parent, stack) end end
    end
    stack[#stack] = nil
    state[name] = "done"
    order[#order + 1] = name
  end
  for _, name in ipairs(self.names) do visit(name, {}) end
  self.order = order
  self.by_name = by_name
  for i, d in ipairs(self.dims) do d.index = i end
  self.d = #self.dims
  -- the varied dimensions and their encoding for surrogate models
  self.features = 0
  for _, d in ipairs(self.dims) do
    d.feature = self.features + 1
    self.features = self.features + ((d.param.kind == "choice") and #d.param.values or 1)
  end
  return self
end

local function cond_holds(cond, hp)
  for parent, vals in pairs(cond or {}) do
    local v = hp[parent]
    if v == nil then return false end
    local ok = false
    for _, x in ipairs(vals) do if x == v then ok = true; break end end
    if not ok then return false end
  end
  return true
end

--- The hyperparameters of unit-cube point u; context = values of outside names
-- (scientific values) that conditions may test. Returns hp, active (dim index -> true).
function Space:point(u, context)
  local hp, active = {}, {}
  if not self.conditional then
    for _, d in ipairs(self.dims) do
      hp[d.name] = d.param:map(u[d.index])
      active[d.index] = true
    end
    for _, f in ipairs(self.fixed) do hp[f.name] = f.value end
    return hp, active
  end
  local scope = setmetatable({}, {__index = function(_, k)
    if hp[k] ~= nil then return hp[k] end
    local c = context and context[k]
    if c == nil then c = self.context[k]; if type(c) == "table" then c = nil end end
    return c
  end})
  for _, name in ipairs(self.order) do
    for _, e in ipairs(self.by_name[name]) do
      if cond_holds(e.cond, scope) then
        if e.param then
          hp[name] = e.param:map(u[e.index])
          active[e.index] = true
        else
          hp[name] = e.value
        end
        break
      end
    end
  end
  return hp, active
end

-- the unwrapped point, for encode (the surrogate encodes thousands of candidates)
local point_of = Space.point

--- Feature vector of a point for the surrogate: per dimension its cell centre
-- (ordered types) or a one-hot block (choice); inactive dimensions are 0.5 / all 0.
function Space:encode(u, context)
  local hp, active = point_of(self, u, context)
  local x = {}
  for _, d in ipairs(self.dims) do
    local p = d.param
    if p.kind == "choice" then
      local idx = active[d.index] and p:index_of(hp[d.name]) or nil
      for j = 1, #p.values do x[d.feature + j - 1] = (idx == j) and 1 or 0 end
    elseif active[d.index] then
      x[d.feature] = p:unmap(hp[d.name])
    else
      x[d.feature] = 0.5
    end
  end
  return x, hp
end

--- A one-line description of every parameter (for reports and study.json).
function Space:describe()
  local out = {}
  for _, d in ipairs(self.dims) do
    local c = ""
    if d.cond then
      local parts = {}
      for k, v in pairs(d.cond) do
        local l = {}
        for i, x in ipairs(v) do l[i] = fmt(x) end
        parts[#parts + 1] = k .. " in {" .. table.concat(l, ", ") .. "}"
      end
      table.sort(parts)
      c = " when " .. table.concat(parts, " and ")
    end
    out[#out + 1] = d.path .. " = " .. d.param:describe() .. c
  end
  for _, f in ipairs(self.fixed) do out[#out + 1] = f.path .. " = " .. fmt(f.value) end
  return out
end

--- Plain data: {dims = {{name, path, param, cond}}, fixed = {...}}.
function Space:to_table()
  local t = {dims = {}, fixed = {}, context = {}}
  for _, d in ipairs(self.dims) do
    local c = nil
    if d.cond then c = {}; for k, v in pairs(d.cond) do c[k] = v end end
    t.dims[#t.dims + 1] = {name = d.name, path = d.path, param = d.param:to_table(), cond = c}
  end
  for _, f in ipairs(self.fixed) do
    local c = nil
    if f.cond then c = {}; for k, v in pairs(f.cond) do c[k] = v end end
    t.fixed[#t.fixed + 1] = {name = f.name, path = f.path, value = f.value, cond = c}
  end
  for k, v in pairs(self.context) do t.context[k] = v end
  return t
end

--- Rebuilds a space written by to_table.
function M.space_from_table(t)
  local tbl, switches = {}, {}
  for _, d in ipairs(t.dims or {}) do
    local p = M.param_from_table(d.param)
    if d.path ~= d.name then
      local parent, value = d.path:match("^[^%[]+%[([^=]+)=(.*)%]$")
      switches[d.name] = switches[d.name] or {parent = parent, branches = {}}
      local c = {}
      for k, v in pairs(d.cond or {}) do if k ~= parent then c[k] = v end end
      p.cond = next(c) and c or nil
      local bv = d.cond and d.cond[parent] and d.cond[parent][1]
      switches[d.name].branches[bv == nil and value or bv] = p
    else
      if d.cond then p = p:when(d.cond) end
      tbl[d.name] = p
    end
  end
  for _, f in ipairs(t.fixed or {}) do
    if f.path ~= f.name then
      local parent, value = f.path:match("^[^%[]+%[([^=]+)=(.*)%]$")
      switches[f.name] = switches[f.name] or {parent = parent, branches = {}}
      local bv = f.cond and f.cond[parent] and f.cond[parent][1]
      switches[f.name].branches[bv == nil and value or bv] = f.value
    else
      tbl[f.name] = f.value
    end
  end
  for name, s in pairs(switches) do tbl[name] = M.switch(s.parent, s.branches) end
  return M.space(tbl, {context = t.context})
end

M._fmt, M._finite = fmt, finite

-- the methods of parameters and spaces refuse extra arguments and wrong types too
util.strict_table("Param:", Param, true, {when = {"table"}, map = {"number"}, index_of = {"any?"}, unmap = {"any?"}})
util.strict_table("Space:", Space, true, {point = {"table", "table?"}, encode = {"table", "table?"}})

return M
