--- dlua.search: search spaces and the algorithms that sample them (playbook 2.4,
-- FAQ "why quasi-random search", and PLAYBOOK.md "What the engine's sampler
-- should do").
--
--   local S = dl.search
--   local space = S.space{
--     lr = S.log_uniform(1e-4, 1e-1), momentum = S.uniform(0.8, 0.99):when{optimizer = "sgd"},
--     optimizer = S.choice{"sgd", "adam"}, width = S.int(16, 512, {log = true}), steps = 1000,
--   }
--   local hps = S.sample(space, 20, {algorithm = "quasirandom", seed = 7})   -- 20 hparam tables
--   local s = S.suggester(space, {algorithm = "bayes", seed = 0, mode = "max"})
--   local sug = s:suggest(); s:observe(sug, value)                           -- ask / tell
--
-- Every sampled parameter owns one coordinate of the unit cube [0, 1)^d; a
-- point u of the cube maps to hyperparameters coordinate by coordinate
-- (docs/api/search.md lists the mapping of each type). Plain values are fixed
-- and own no coordinate. Conditional parameters own their coordinate always
-- and are left out of the hyperparameters where their condition fails (the
-- playbook's "sample every branch's dimensions and ignore inactive ones").
--
-- quasirandom is a scrambled Halton sequence: bases are the first d primes,
-- each digit position of each base has its own random permutation of the
-- digits, drawn from a counter-based generator keyed by (seed, dimension,
-- digit). Point i is a pure function of (seed, i, d): it does not depend on how
-- many points are drawn or in which order. This file does not run trials (see
-- dlua.study) and holds no global state.
local util = require "dlua.util"
local gp = require "dlua.search.gp"

local M = {}

------------------------------------------------------------ counter-based rng

local GOLDEN = 0x9E3779B97F4A7C15

-- splitmix64 finaliser (Lua 5.4 integers wrap around, >> is a logical shift)
local function mix64(z)
  z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
  z = (z ~ (z >> 27)) * 0x94D049BB133111EB
  return z ~ (z >> 31)
end

local function hash_string(s)
  local h = 0xCBF29CE484222325                          -- FNV-1a 64
  for i = 1, #s do h = (h ~ s:byte(i)) * 0x100000001B3 end
  return h
end
M.hash_string = hash_string

--- A key from any number of integers or strings (order matters).
local function key(...)
  local h = 0x6A09E667F3BCC909
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if type(v) == "string" then v = hash_string(v) end
    h = mix64(h ~ mix64(math.tointeger(v) or hash_string(tostring(v))) + GOLDEN * i)
  end
  return h
end

local Rng = {}
Rng.__index = Rng

--- A stream of numbers keyed by (...): the same key gives the same stream.
function M.rng(...)
  return setmetatable({state = key(...)}, Rng)
end

function Rng:next64()
  self.state = self.state + GOLDEN
  return mix64(self.state)
end

--- Uniform in [0, 1) with 53 random bits.
function Rng:uniform()
  return (self:next64() >> 11) * 2.0 ^ -53
end

--- Uniform integer in [0, n).
function Rng:int(n)
  return math.min(n - 1, math.floor(self:uniform() * n))
end

function Rng:normal()
  local u1, u2 = self:uniform(), self:uniform()
  return math.sqrt(-2 * math.log(1 - u1)) * math.cos(2 * math.pi * u2)
end

------------------------------------------------------------------- halton

local ONE_BELOW = 1 - 2.0 ^ -53

--- The first n primes.
function M.primes(n)
  local out, c = {}, 2
  while #out < n do
    local prime = true
    for _, p in ipairs(out) do
      if p * p > c then break end
      if c % p == 0 then prime = false; break end
    end
    if prime then out[#out + 1] = c end
    c = c + 1
  end
  return out
end

--- Digit positions used for base b: enough for double precision (scipy's rule).
function M.digits(b)
  return math.ceil(54 / (math.log(b) / math.log(2))) - 1
end

--- Per-digit permutations for base b: perms[j][digit + 1] = permuted digit,
-- one independent Fisher-Yates shuffle of {0..b-1} per digit position j,
-- keyed by (seed, dim). `seed = false` gives identity permutations (plain Halton).
function M.halton_permutations(b, seed, dim)
  local perms = {}
  for j = 1, M.digits(b) do
    local p = {}
    for d = 0, b - 1 do p[d + 1] = d end
    if seed ~= false then
      local r = M.rng("halton", seed, dim, j)
      for i = b, 2, -1 do
        local k = r:int(i) + 1
        p[i], p[k] = p[k], p[i]
      end
    end
    perms[j] = p
  end
  return perms
end

--- The scrambled radical inverse of index (0-based) in base b with perms.
function M.radical_inverse(index, b, perms)
  local v, f, k = 0.0, 1.0 / b, index
  for j = 1, #perms do
    v = v + perms[j][k % b + 1] * f
    f = f / b
    k = k // b
  end
  if v >= 1 then v = ONE_BELOW end
  return v
end

local Halton = {}
Halton.__index = Halton

--- A d-dimensional scrambled Halton sequence for seed (false: unscrambled).
function M.halton_sequence(d, seed)
  local self = setmetatable({d = d, seed = seed, bases = M.primes(d), perms = {}}, Halton)
  for k = 1, d do self.perms[k] = M.halton_permutations(self.bases[k], seed, k) end
  return self
end

--- Point i (1-based) of the sequence: index i - 1 of the radical inverses.
function Halton:point(i)
  local u = {}
  for k = 1, self.d do u[k] = M.radical_inverse(i - 1, self.bases[k], self.perms[k]) end
  return u
end

--- Point i (1-based) of the d-dimensional scrambled Halton sequence for seed.
function M.halton(i, d, opts)
  local seed = opts and opts.seed
  if seed == nil then seed = 0 end
  return M.halton_sequence(d, seed):point(i)
end

--- Point i of plain pseudo-random search: uniform, keyed by (seed, i).
function M.random_point(i, d, seed)
  local r = M.rng("random", seed or 0, i)
  local u = {}
  for k = 1, d do u[k] = r:uniform() end
  return u
end

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

local function check_values(fname, values)
  if type(values) ~= "table" or #values == 0 then
    error(string.format("dl.search.%s: expected a non-empty list of values, got %s", fname,
      type(values) == "table" and "an empty table" or type(values)), 3)
  end
  local seen, out = {}, {}
  for i, v in ipairs(values) do
    if not scalar(v) then
      error(string.format("dl.search.%s: value %d is a %s (numbers, strings and booleans only)", fname, i, type(v)), 3)
    end
    local k = type(v) .. ":" .. tostring(v)
    if seen[k] then error(string.format("dl.search.%s: value %s is listed twice", fname, fmt(v)), 3) end
    seen[k] = true
    out[i] = v
  end
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
  opts = opts or {}
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

--- Feature vector of a point for the surrogate: per dimension its cell centre
-- (ordered types) or a one-hot block (choice); inactive dimensions are 0.5 / all 0.
function Space:encode(u, context)
  local hp, active = self:point(u, context)
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

------------------------------------------------------------------ algorithms

M.ALGORITHMS = {quasirandom = true, random = true, grid = true, bayes = true}

--- The grid of a space: every value of discrete dimensions, `points` values of
-- continuous ones (both bounds included). Returns a list of unit-cube points.
function M.grid_points(space, points)
  points = points or 5
  local axes = {}
  for k, d in ipairs(space.dims) do
    local n = d.param:levels()
    local ax = {}
    if n and (d.param.kind ~= "int" or n <= points) then
      for j = 1, n do ax[j] = (j - 0.5) / n end
    else
      for j = 1, points do ax[j] = points == 1 and 0.5 or (j - 1) / (points - 1) end
    end
    axes[k] = ax
  end
  local out = {}
  local function rec(k, u)
    if k > #axes then out[#out + 1] = {table.unpack(u)}; return end
    for _, x in ipairs(axes[k]) do u[k] = x; rec(k + 1, u) end
  end
  rec(1, {})
  return out
end

local function check_algorithm(name)
  if not M.ALGORITHMS[name] then
    error(string.format("dl.search: unknown algorithm '%s' (valid: bayes, grid, quasirandom, random)",
      tostring(name)), 3)
  end
end

--- Point i (1-based) of a non-adaptive algorithm over space: a pure function
-- of (space dimensions, seed, i). grid: the i-th grid point (nil past the end).
function M.point(space, i, opts)
  opts = util.check_options("dl.search.point", opts, {algorithm = "string", seed = "integer",
    grid_points = "integer", cache = "table"}, 2)
  local alg = opts.algorithm or "quasirandom"
  check_algorithm(alg)
  local seed = opts.seed or 0
  if alg == "quasirandom" or alg == "bayes" then
    local cache = opts.cache
    local seq = cache and cache.halton
    if not seq then
      seq = M.halton_sequence(space.d, seed)
      if cache then cache.halton = seq end
    end
    return seq:point(i)
  elseif alg == "random" then
    return M.random_point(i, space.d, seed)
  else
    local grid = opts.cache and opts.cache.grid or M.grid_points(space, opts.grid_points)
    if opts.cache then opts.cache.grid = grid end
    return grid[i]
  end
end

--- Warnings a choice of algorithm deserves (grid above 2 varied dimensions).
function M.warnings(space, alg)
  local w = {}
  if alg == "grid" and space.d > 2 then
    w[#w + 1] = string.format("grid search over %d varied dimensions: the playbook accepts grids only in 1-2 " ..
      "dimensions (quasirandom covers each dimension better at the same budget)", space.d)
  end
  return w
end

--- n hyperparameter tables from a non-adaptive algorithm (default quasirandom).
-- opts: algorithm, seed, grid_points, context, warn (function(msg), default stderr).
function M.sample(space, n, opts)
  opts = util.check_options("dl.search.sample", opts, {algorithm = "string", seed = "integer",
    grid_points = "integer", context = "table", warn = "function"}, 2)
  space = M.space(space)
  local alg = opts.algorithm or "quasirandom"
  check_algorithm(alg)
  if alg == "bayes" then error("dl.search.sample: bayes is adaptive; use dl.search.suggester", 2) end
  local warn = opts.warn or function(msg) io.stderr:write("dlua: warning: ", msg, "\n") end
  for _, w in ipairs(M.warnings(space, alg)) do warn(w) end
  local cache = {}
  local out, us = {}, {}
  for i = 1, n do
    local u = M.point(space, i, {algorithm = alg, seed = opts.seed, grid_points = opts.grid_points, cache = cache})
    if not u then break end
    out[i] = space:point(u, opts.context)
    us[i] = u
  end
  return out, us
end

-------------------------------------------------------------- bayes (GP + EI)

-- engine choice (Gelbart et al. 2014's probabilistic constraint Pr(feasible) >= 0.2)
local MIN_FEASIBLE = 0.2
M.MIN_FEASIBLE = MIN_FEASIBLE

local function feature_key(x)
  local parts = {}
  for i = 1, #x do parts[i] = string.format("%.12g", x[i]) end
  return table.concat(parts, ",")
end

-- the surrogate's data: features and signed values (minimisation) of the
-- feasible observations, and feasibility labels of all of them
local function observations(space, history, sign, context)
  local X, y, used, Xall, labels, seen = {}, {}, {}, {}, {}, {}
  for _, h in ipairs(history) do
    local x = space:encode(h.u, context)
    Xall[#Xall + 1] = x
    seen[feature_key(x)] = true
    if h.value ~= nil and h.value == h.value then
      X[#X + 1], y[#y + 1], used[#used + 1] = x, sign * h.value, h
      labels[#labels + 1] = 1
    else
      labels[#labels + 1] = -1
    end
  end
  return X, y, used, Xall, labels, seen
end

local BAYES_OPTIONS = {seed = "integer", step = "integer", candidates = "integer", mode = "string", context = "table",
                       theta = "table", feasibility = "boolean", max_points = "integer"}

--- Chooses the next n points by noise-aware expected improvement (minimising)
-- under a GP fitted to the feasible observations, times the probability of
-- feasibility from a second GP fitted to the feasible / infeasible labels when
-- any trial was infeasible. The incumbent is the lowest posterior mean over
-- the observed points, not the lowest observation, and the improvement is of
-- the latent function: with noise the best noisy value is biased low and EI
-- below it only explores; without noise the two coincide. Batches use the
-- kriging believer: every pending point and each chosen one joins the model as
-- a noise-free belief at its posterior mean (which may lower the incumbent),
-- so the next choice moves elsewhere.
--   history: {{u =, value = number or nil (infeasible)}}, pending: {{u =}}
--   opts: seed, step (suggestion counter, for fresh candidate streams),
--         candidates (1000), mode ("min" | "max"), context, theta (warm start:
--         info.theta of the previous call), max_points (800: the GP's subset
--         size above that many observations), feasibility (false: no
--         feasibility model, infeasible trials only left out of the
--         objective's GP; for comparisons)
-- Returns the list of u and info {theta =, ei =, noise =, model =}.
function M.bayes_suggest(space, history, pending, n, opts)
  opts = util.check_options("dl.search.bayes_suggest", opts, BAYES_OPTIONS, 2)
  local sign = (opts.mode == "max") and -1 or 1
  local X, y, used, Xall, labels, seen = observations(space, history, sign, opts.context)
  local fitted = gp.fit(X, y, {theta = opts.theta, dim = space.features, max_points = opts.max_points})
  local model = fitted
  local fmodel
  local any_infeasible = false
  for _, f in ipairs(labels) do if f < 0 then any_infeasible = true end end
  if any_infeasible and opts.feasibility ~= false then fmodel = gp.fit(Xall, labels, {classify = true}) end
  local obs_mean = fitted:observed_mean()
  local best = math.huge
  for i = 1, #obs_mean do best = math.min(best, obs_mean[i]) end
  if best == math.huge then best = 0 end                -- no feasible observation: the prior mean
  local function believe(x)
    best = math.min(best, (model:predict(x)))
    model = model:believe(x)
    seen[feature_key(x)] = true
  end
  for _, p in ipairs(pending or {}) do believe(space:encode(p.u, opts.context)) end
  local rng = M.rng("bayes-candidates", opts.seed or 0, opts.step or #history)
  local ncand = opts.candidates or 1000
  local d = space.d
  local seq = M.halton_sequence(d, key("bayes-halton", opts.seed or 0, opts.step or #history))
  local base = {}
  for i = 1, ncand // 2 do base[#base + 1] = seq:point(i) end
  for _ = 1, ncand - ncand // 2 do
    local u = {}
    for k = 1, d do u[k] = rng:uniform() end
    base[#base + 1] = u
  end
  -- local candidates around the five observations with the best posterior means
  local order = {}
  for i = 1, #used do order[i] = i end
  table.sort(order, function(a, b) return obs_mean[a] < obs_mean[b] end)
  for r = 1, math.min(5, #order) do
    local u0 = used[order[r]].u
    for j = 1, 40 do
      local s = (j % 3 == 0) and 0.2 or ((j % 3 == 1) and 0.05 or 0.01)
      local u = {}
      for k = 1, d do u[k] = math.max(0, math.min(ONE_BELOW, u0[k] + s * rng:normal())) end
      base[#base + 1] = u
    end
  end
  -- acquisition of a list of points: EI, times Pr(feasible) when modelled;
  -- candidates below MIN_FEASIBLE rank after every candidate above it, seen
  -- points after everything
  local function acq(us)
    local xs = {}
    for i, u in ipairs(us) do xs[i] = space:encode(u, opts.context) end
    local a = model:ei_many(xs, best)
    local pf = fmodel and fmodel:prob_feasible_many(xs)
    for i, x in ipairs(xs) do
      if seen[feature_key(x)] then a[i] = -2
      elseif pf then a[i] = pf[i] < MIN_FEASIBLE and pf[i] - 1 or a[i] * pf[i] end
    end
    return a
  end
  local out, eis = {}, {}
  for _ = 1, n do
    local a = acq(base)
    local scored = {}
    for i, u in ipairs(base) do scored[i] = {u = u, a = a[i]} end
    table.sort(scored, function(p, q) return p.a > q.a end)
    -- refine the best few by a shrinking random local search, 8 rounds of 4 points
    local top = scored[1]
    for t = 1, math.min(3, #scored) do
      local cur = scored[t]
      local step = 0.05
      for _ = 1, 8 do
        local us = {}
        for j = 1, 4 do
          local u = {}
          for k = 1, d do u[k] = math.max(0, math.min(ONE_BELOW, cur.u[k] + step * rng:normal())) end
          us[j] = u
        end
        local sa = acq(us)
        local improved = false
        for j = 1, 4 do if sa[j] > cur.a then cur, improved = {u = us[j], a = sa[j]}, true end end
        if not improved then step = step * 0.7 end
      end
      if cur.a > top.a then top = cur end
    end
    out[#out + 1] = top.u
    eis[#eis + 1] = top.a
    if #out < n then believe(space:encode(top.u, opts.context)) end
  end
  return out, {theta = fitted.theta, ei = eis, noise = fitted.noise, model = fitted}
end

local Suggester = {}
Suggester.__index = Suggester

local function suggester_error(msg, ...) error("dl.search.suggester: " .. string.format(msg, ...), 3) end

local function check_count(opts, k, min)
  local v = opts[k]
  if v ~= nil and (math.type(v) ~= "integer" or v < min) then
    suggester_error("option '%s' must be an integer >= %d, got %s", k, min, fmt(v))
  end
end

--- suggester(space [, opts]): an ask / tell object (docs/studies.md).
--   s:suggest([n]) --> list of n suggestions {index =, u =, hp =}
--   s:observe(suggestion, value)   value: a number, or nil / NaN for an infeasible trial;
--                                  a suggestion may be observed more than once (repeats)
--   s:best() --> {index =, u =, hp =, value =, estimate =} or nil
--   s:state() --> plain data; state.theta is the warm start of opts.theta
-- opts: algorithm ("quasirandom" | "random" | "grid" | "bayes"), seed (0), mode
-- ("min" | "max"), init (bayes: quasirandom points first, max(5, 2 (d + 1))),
-- context, candidates (bayes: 1000), feasibility (bayes: model infeasible
-- regions, true), max_points (bayes: GP subset size, 800), theta (bayes: warm
-- start), grid_points (grid: 5). Non-adaptive algorithms give point `index` of
-- their sequence; bayes chooses by noise-aware expected improvement once
-- `init` points and two feasible observations exist.
function M.suggester(space, opts)
  opts = util.check_options("dl.search.suggester", opts, {algorithm = "string", seed = "integer", mode = "string",
    init = "integer", context = "table", candidates = "integer", grid_points = "integer", feasibility = "boolean",
    max_points = "integer", theta = "table"}, 2)
  space = M.space(space)
  local alg = opts.algorithm or "quasirandom"
  check_algorithm(alg)
  if opts.mode ~= nil and opts.mode ~= "min" and opts.mode ~= "max" then
    suggester_error("option 'mode' must be \"min\" or \"max\", got %s", fmt(opts.mode))
  end
  check_count(opts, "seed", math.mininteger)
  check_count(opts, "init", 1)
  check_count(opts, "candidates", 1)
  check_count(opts, "max_points", 2)
  check_count(opts, "grid_points", 1)
  local theta = opts.theta
  if theta ~= nil then
    local ok = type(theta) == "table" and #theta == space.features + 2
    for _, v in ipairs(ok and theta or {}) do ok = ok and finite(v) end
    if not ok then
      suggester_error("option 'theta' must be a list of %d finite numbers (s:state().theta for this space)",
        space.features + 2)
    end
  end
  return setmetatable({space = space, alg = alg, seed = opts.seed or 0, mode = opts.mode or "min",
    init = opts.init or math.max(5, 2 * (space.d + 1)), context = opts.context, history = {}, pending = {},
    next_index = 1, cache = {}, candidates = opts.candidates, grid_points = opts.grid_points,
    feasibility = opts.feasibility, max_points = opts.max_points, theta = theta}, Suggester)
end

function Suggester:suggest(n)
  n = n or 1
  if math.type(n) ~= "integer" or n < 1 then
    error("dl.search.suggester: suggest: n must be an integer >= 1, got " .. fmt(n), 2)
  end
  local out = {}
  local adaptive = {}
  local feasible = 0
  for _, h in ipairs(self.history) do if h.value ~= nil then feasible = feasible + 1 end end
  for _ = 1, n do
    local i = self.next_index
    local u
    if self.alg ~= "bayes" or i <= self.init or feasible < 2 then
      u = M.point(self.space, i, {algorithm = self.alg, seed = self.seed, cache = self.cache,
                                  grid_points = self.grid_points})
      if not u then break end
      out[#out + 1] = {index = i, u = u}
    else
      adaptive[#adaptive + 1] = i
      out[#out + 1] = {index = i}
    end
    self.next_index = i + 1
  end
  if #adaptive > 0 then
    local pend = {}
    for _, p in pairs(self.pending) do pend[#pend + 1] = p end
    table.sort(pend, function(a, b) return a.index < b.index end)
    for _, s in ipairs(out) do if s.u then pend[#pend + 1] = s end end
    local us, info = M.bayes_suggest(self.space, self.history, pend, #adaptive,
      {seed = self.seed, step = adaptive[1], mode = self.mode, context = self.context, theta = self.theta,
       candidates = self.candidates, feasibility = self.feasibility, max_points = self.max_points})
    self.theta = info.theta
    self.fit = {count = #self.history, model = info.model}
    local j = 0
    for _, s in ipairs(out) do
      if not s.u then j = j + 1; s.u = us[j] end
    end
  end
  for _, s in ipairs(out) do
    s.hp = self.space:point(s.u, self.context)
    self.pending[s.index] = s
  end
  return out
end

function Suggester:observe(s, value)
  if type(s) ~= "table" or math.type(s.index) ~= "integer" or type(s.u) ~= "table" or #s.u ~= self.space.d then
    error("dl.search.suggester: observe: argument 1 must be a suggestion returned by suggest", 2)
  end
  if value ~= nil and type(value) ~= "number" then
    error("dl.search.suggester: observe: value must be a number or nil (infeasible), got " .. type(value), 2)
  end
  if value ~= value then value = nil end
  self.pending[s.index] = nil
  self.history[#self.history + 1] = {u = s.u, value = value, index = s.index}
end

--- The best observation: {index, u, hp, value (observed), estimate}, nil
-- before any feasible one. bayes (two or more feasible observations) chooses
-- by the GP's posterior mean at the observed points, which averages repeats
-- and noise; estimate is that mean. Other algorithms (no model) take the best
-- observed value, and estimate = value.
function Suggester:best()
  local sign = self.mode == "max" and -1 or 1
  local feas = {}
  for _, h in ipairs(self.history) do if h.value ~= nil then feas[#feas + 1] = h end end
  if #feas == 0 then return nil end
  local bi, be
  if self.alg == "bayes" and #feas >= 2 then
    if not (self.fit and self.fit.count == #self.history) then
      local X, y = observations(self.space, self.history, sign, self.context)
      local model = gp.fit(X, y, {theta = self.theta, max_points = self.max_points})
      self.theta = model.theta
      self.fit = {count = #self.history, model = model}
    end
    local mu = self.fit.model:observed_mean()
    for i = 1, #feas do if not be or mu[i] < be then bi, be = i, mu[i] end end
    be = sign * be
  else
    for i, h in ipairs(feas) do if not bi or sign * h.value < sign * feas[bi].value then bi = i end end
    be = feas[bi].value
  end
  local h = feas[bi]
  return {index = h.index, u = h.u, hp = self.space:point(h.u, self.context), value = h.value, estimate = be}
end

--- Plain data for a warm start: {theta = list of numbers} (theta is nil
-- before the first bayes fit). Pass state.theta back as opts.theta.
function Suggester:state()
  return {theta = self.theta and {table.unpack(self.theta)} or nil}
end

-------------------------------------------------------------- discrepancy

--- Centered L2 discrepancy (Hickernell 1998) of points in [0, 1)^d: lower is
-- more uniform. The squared form is returned as its square root.
function M.centered_l2_discrepancy(points)
  local n = #points
  local d = #points[1]
  local a = (13 / 12) ^ d
  local s1 = 0
  for i = 1, n do
    local p = 1
    for k = 1, d do
      local z = math.abs(points[i][k] - 0.5)
      p = p * (1 + 0.5 * z - 0.5 * z * z)
    end
    s1 = s1 + p
  end
  local s2 = 0
  for i = 1, n do
    for j = 1, n do
      local p = 1
      for k = 1, d do
        local xi, xj = points[i][k], points[j][k]
        p = p * (1 + 0.5 * math.abs(xi - 0.5) + 0.5 * math.abs(xj - 0.5) - 0.5 * math.abs(xi - xj))
      end
      s2 = s2 + p
    end
  end
  local c2 = a - 2 / n * s1 + s2 / (n * n)
  return math.sqrt(math.max(0, c2))
end

return M
