--- dlua.util: the bottom layer of the Lua library, the small helpers every other
-- module uses instead of its own copy (DESIGN.md section 2: one mechanism per
-- concern). Above dlua.core and below everything else: it requires nothing but
-- dlua.core, so a data-pipeline worker state can load it too.
--
--   util.check_options(fn, opts, spec [, level])  the one strict option checker
--   util.is_tensor(x), util.copy(t), util.deep_copy(t), util.sorted_keys(t)
--   util.shell_quote(s), util.nearest(word, words), util.edit_distance(a, b)
--   util.cores(), util.hostname(), util.getpid(), util.sleep(s), util.VERSION
--   util.fmt4(v), util.fmt_metric(v), util.finite(v), util.integer_words(min, max), util.integer_problem(v, min, max),
--   util.choice_problem(name, v, choices)
--   util.strict(name, f [, max]), util.strict_method, util.strict_table: the one arity check
--
-- It deliberately holds no policy of its own (no defaults, no files, no
-- printing): the JSON codec and the file helpers live beside it in util/json.lua
-- and util/fs.lua.
local core = require "dlua.core"

local M = {}

M.VERSION = "0.1.0"

-- "nan", "inf", "-inf" for a non-finite number (the C library may write "-nan"), else nil
local function nonfinite(v)
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
end

--- A number for messages and tables: integers as they are, other numbers in 4
-- significant digits (%.4g; nan, inf, -inf as such), anything else by tostring.
-- @usage util.fmt4(1 / 3) --> "0.3333"
function M.fmt4(v)
  if type(v) ~= "number" or math.type(v) == "integer" then return tostring(v) end
  return nonfinite(v) or string.format("%.4g", v)
end

--- A loss or metric value for the user (progress lines, summaries, tables):
-- four decimals in the range where they read well (1e-4 <= |v| < 1e5, and
-- 0), three significant digits with an exponent outside it (a diverged loss
-- 5628516456334496.0 is "5.63e+15"), "nan", "inf", "-inf"; integers and
-- anything else by tostring.
-- @usage util.fmt_metric(0.123456) --> "0.1235"; util.fmt_metric(0 / 0) --> "nan"
function M.fmt_metric(v)
  if type(v) ~= "number" or math.type(v) == "integer" then return tostring(v) end
  local nf = nonfinite(v)
  if nf then return nf end
  local a = math.abs(v)
  if a == 0 or (a >= 1e-4 and a < 1e5) then return string.format("%.4f", v) end
  return string.format("%.2e", v)
end

--- Is v a finite number (not NaN, not an infinity; false for non-numbers)?
function M.finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

--- list_stray_key(t) -> the first key of table t (sorted as strings) outside 1..#t, or nil: a key
-- beside a list's entries ({8, x = 9}) that a reader of the list would never see. The one check
-- behind "must be a list" errors (each caller words its own).
function M.list_stray_key(t)
  local n, stray = #t, nil
  for k in pairs(t) do
    if (math.type(k) ~= "integer" or k < 1 or k > n) and (stray == nil or tostring(k) < tostring(stray)) then
      stray = k
    end
  end
  return stray
end

--- Is x a tensor?
-- @usage util.is_tensor(dl.zeros(2)) --> true
function M.is_tensor(x) return getmetatable(x) == core.Tensor end

--- A shallow copy of table t (nil gives an empty table).
-- @usage local o = util.copy(opts); o.lr = 0.1
function M.copy(t)
  local o = {}
  for k, v in pairs(t or {}) do o[k] = v end
  return o
end

--- A deep copy of plain data t (tables copied recursively, metatables kept,
-- a table reached twice copied once). Tensors and other userdata are shared.
function M.deep_copy(t, seen)
  if type(t) ~= "table" then return t end
  seen = seen or {}
  if seen[t] then return seen[t] end
  local o = {}
  seen[t] = o
  for k, v in pairs(t) do o[M.deep_copy(k, seen)] = M.deep_copy(v, seen) end
  return setmetatable(o, getmetatable(t))
end

--- The keys of t, sorted (numbers and strings compared as text, so mixed keys sort too).
-- @usage util.sorted_keys{b = 1, a = 2} --> {"a", "b"}
function M.sorted_keys(t)
  local out = {}
  for k in pairs(t or {}) do out[#out + 1] = k end
  table.sort(out, function(a, b)
    if type(a) == type(b) and type(a) ~= "table" and type(a) ~= "boolean" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return out
end

--- s as one POSIX shell word: unchanged when it holds only safe characters,
-- else in single quotes (an embedded ' as '\'').
-- @usage util.shell_quote("a b") --> "'a b'"
function M.shell_quote(s)
  s = tostring(s)
  if s:match("^[%w%._%-=/:,+@]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

--- The optimal-string-alignment distance of a and b: insertions, deletions,
-- substitutions and swaps of two neighbours each cost 1 ("warmpu" is 1 from "warmup").
function M.edit_distance(a, b)
  local la, lb = #a, #b
  local d = {}
  for i = 0, la do d[i] = {[0] = i} end
  for j = 0, lb do d[0][j] = j end
  for i = 1, la do
    for j = 1, lb do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      local v = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
        v = math.min(v, d[i - 2][j - 2] + 1)
      end
      d[i][j] = v
    end
  end
  return d[la][lb]
end

--- The word of words nearest to word by edit distance, or nil when none is close
-- (distance at most 2, or a third of the word's length for longer words, and
-- less than the word's length). Ties go to the first in words.
function M.nearest(word, words)
  word = tostring(word)
  local best, bd
  local limit = math.max(2, #word // 3)
  for _, w in ipairs(words) do
    local d = M.edit_distance(word, tostring(w))
    if d <= limit and d < #word and (not bd or d < bd) then best, bd = w, d end
  end
  return best
end

-------------------------------------------------------------- option tables

local TYPES = {number = true, integer = true, string = true, boolean = true, table = true, ["function"] = true,
               tensor = true, callable = true, module = true, any = true, ["false"] = true}

local function type_ok(ty, v)
  if ty == "integer" then return math.type(v) == "integer" end
  if ty == "false" then return v == false end
  if ty == "tensor" then return M.is_tensor(v) end
  if ty == "any" then return v ~= nil end
  if ty == "module" then return type(v) == "table" and rawget(v, "_modules") ~= nil end
  if ty == "callable" then
    if type(v) == "function" then return true end
    local mt = getmetatable(v)
    return type(mt) == "table" and mt.__call ~= nil
  end
  return type(v) == ty
end

-- "integer>=N": the lower bound N, or nil for any other type spec
local function int_min(spec_ty) return math.tointeger(tonumber(spec_ty:match("^integer>=(%-?%d+)$"))) end

-- "number|string" -> ok?
local function types_ok(spec_ty, v)
  for ty in spec_ty:gmatch("[^|]+") do
    if not TYPES[ty] then error("util.check_options: unknown type '" .. ty .. "' in a spec", 0) end
    if type_ok(ty, v) then return true end
  end
  return false
end

local function describe(v)
  if M.is_tensor(v) then return "tensor" end
  local t = math.type(v)
  return t and (t == "float" and "number" or "integer") or type(v)
end

-- the key of a nested spec that lists the other forms its option may take ("false", "string")
local ALSO = "|"

-- the option names of a spec, sorted (not ALSO)
local function spec_names(spec)
  local names = {}
  for k in pairs(spec) do if type(k) == "string" and k ~= ALSO then names[#names + 1] = k end end
  table.sort(names)
  return names
end

-- a non-table value v of an option with nested spec s: nil when s[ALSO] allows it, else the message
local function nested_problem(fn, key, v, s)
  local also = s[ALSO]
  if also ~= nil and types_ok(also, v) then return nil end
  if type(v) == "table" then return nil end          -- a table with a metatable: an object, used as it is
  local names = spec_names(M.spec(s))
  return string.format("%s: option '%s' must be a table%s%s, got %s", fn, key,
    #names > 0 and (" (keys: " .. table.concat(names, ", ") .. ")") or "",
    also and (" or " .. also:gsub("|", " or ")) or "", v == false and "false" or v == true and "true" or describe(v))
end

-- the first problem of opts against spec, as a message, or nil
local function problem(fn, opts, spec, path)
  spec = M.spec(spec)
  local names = spec_names(spec)
  local keys = {}                                  -- a fixed order: the first problem is always the same one
  for k in pairs(opts) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local v, s = opts[k], spec[k]
    if k == ALSO then s = nil end
    if s == nil then
      local where = path and (" in " .. path) or ""
      local hint = type(k) == "string" and M.nearest(k, names)
      return string.format("%s: unknown option '%s'%s (valid: %s)%s", fn, tostring(k), where,
        #names > 0 and table.concat(names, ", ") or "none", hint and ("; did you mean '" .. hint .. "'?") or "")
    end
    local key = path and (path .. "." .. tostring(k)) or tostring(k)
    if type(s) == "string" and int_min(s) then
      if math.type(v) ~= "integer" or v < int_min(s) then
        return string.format("%s: option '%s' must be %s, got %s", fn, key, M.integer_words(int_min(s)),
          math.type(v) == "integer" and tostring(v) or describe(v) == "number" and tostring(v) or describe(v))
      end
    elseif type(s) == "string" then
      if not types_ok(s, v) then
        return string.format("%s: option '%s' must be %s, got %s", fn, key, (s:gsub("|", " or ")), describe(v))
      end
    elseif type(s) == "table" and type(v) == "table" and getmetatable(v) == nil then
      local p = problem(fn, v, s, key)
      if p then return p end
    elseif type(s) == "table" then
      local p = nested_problem(fn, key, v, s)
      if p then return p end
    end
  end
end

--- option_problem(fn, opts, spec) -> the message check_options would raise, or nil
-- (for callers that raise it their own way).
function M.option_problem(fn, opts, spec)
  if opts == nil then return nil end
  if type(opts) ~= "table" then return string.format("%s: expected an option table, got %s", fn, describe(opts)) end
  return problem(fn, opts, spec, nil)
end

--- Checks an option table against spec; errors on the first unknown key or wrong type.
-- spec maps each valid key to true (any value), a type ("number", "integer",
-- "string", "boolean", "table", "function", "callable", "tensor", or several as
-- "number|function"; "false" is the value false), an integer with a lower bound ("integer>=0": "option 'warmup'
-- must be a non-negative integer, got -1", worded by integer_words), or a nested spec: a table, checked the same
-- way when the value is a plain table (a table with a metatable, an object, is taken as it is). Any other value
-- is refused ("dl.train: option 'ema' must be a table (keys: decay), got string") unless the nested spec's key
-- "|" lists it among the option's other forms: {decay = "number", ["|"] = "false"} takes ema = false too
-- ("string|false": a string or false). A list of names is taken as
-- {name = true, ...}. opts may be nil. The error names fn, the key (and where in
-- nested tables), the valid keys and the nearest one:
--   dl.train: unknown option 'evry' in eval (valid: batch_size, every, sets); did you mean 'every'?
-- level is that of error() seen from the function calling check_options
-- (default 2: the blame lands on that function's caller; do not call it as a tail
-- call, `return util.check_options(...)`, which removes that frame). Returns opts (or {}).
-- @usage util.check_options("optim.schedule.cosine", opts, {warmup = "integer", min = "number"})
function M.check_options(fn, opts, spec, level)
  local msg = M.option_problem(fn, opts, spec)
  if msg then error(msg, (level or 2) + 1) end
  return opts or {}
end

--- spec as a map: a list of names {"a", "b"} becomes {a = true, b = true}
-- (mixed tables keep their string keys too); returns a new table.
function M.spec(spec)
  local out = {}
  for k, v in pairs(spec) do
    if math.type(k) == "integer" and type(v) == "string" then out[v] = true else out[k] = v end
  end
  return out
end

-- types list -> {{opt =, ty =, names = {type...}}} (parsed once: wrappers check on every call)
local parsed = setmetatable({}, {__mode = "k"})
local function parse_types(types)
  local out = {}
  for i, spec_ty in ipairs(types) do
    local opt = spec_ty:sub(-1) == "?"
    local ty = opt and spec_ty:sub(1, -2) or spec_ty
    local names = {}
    for t in ty:gmatch("[^|]+") do
      if not TYPES[t] then error("util.check_args: unknown type '" .. t .. "' in a declaration", 0) end
      names[#names + 1] = t
    end
    out[i] = {opt = opt, ty = ty, names = names, any = ty == "any"}
  end
  parsed[types] = out
  return out
end


--- check_args(name, types, level, ...) -> nothing, or raises at level (1: the caller
-- of check_args' caller) "bad argument #i to 'name' (T expected, got U)" for the
-- first argument whose type is not its declared one. types[i] is a type of
-- check_options' specs ("integer", "number|table", "tensor", "module", "callable",
-- "any"), with a trailing "?" when nil (absent) is allowed too. The one positional
-- type check of the Lua library: nn's constructors and methods declare theirs.
-- @usage util.check_args("nn.Softmax", {"integer?"}, 1, dim)
function M.check_args(name, types, level, ...)
  for i, p in ipairs(parsed[types] or parse_types(types)) do
    local v = select(i, ...)
    local ok = v == nil and p.opt
    if not ok and v ~= nil then
      if p.any then ok = true
      else
        for _, t in ipairs(p.names) do if type_ok(t, v) then ok = true; break end end
      end
    end
    local opt, ty = p.opt, p.ty
    if not ok then
      error(string.format("bad argument #%d to '%s' (%s%s expected, got %s)", i, name, (ty:gsub("|", " or ")),
        opt and " or nil" or "", v == nil and "no value" or describe(v)), level + 2)
    end
  end
end

------------------------------------------------------------------ arity

-- wrapper -> the function it wraps, so nothing is wrapped twice
local wrapped = setmetatable({}, {__mode = "k"})
-- wrapper -> its declaration {name =, types =, method =}, when it has types
local declared = setmetatable({}, {__mode = "k"})

-- the arguments a strict wrapper accepts: max when given, else f's fixed parameter
-- count less `skip` (1 for self); nil for a vararg f without types (left unwrapped)
local function max_args(f, max, types, skip)
  if max ~= nil then return max end
  local info = debug.getinfo(f, "u")
  if info.isvararg and not types then return nil end
  return info.isvararg and math.huge or info.nparams - skip
end

-- a wrapper's checks of the caller's arguments (errors blame the wrapper's caller:
-- level 4 from here, through the wrapper)
local function check_call(name, max, types, ...)
  local got = select("#", ...)
  if got > max then
    error(string.format("bad argument #%d to '%s' (no more than %d arguments expected, got %d)", max + 1, name,
      max, got), 4)
  end
  if types then M.check_args(name, types, 2, ...) end
end

-- records w as the wrapper of f (declared with its types when it has them)
local function register(w, f, name, types, method)
  wrapped[w] = f
  declared[w] = types and {name = name, types = types, method = method}
  return w
end

--- strict(name, f [, max [, types]]) -> f, refusing more than max arguments
-- (default: f's fixed parameter count, debug.getinfo(f, "u").nparams) with
--   bad argument #3 to 'nn.Linear' (no more than 2 arguments expected, got 3)
-- at the caller, and with types (a check_args list) any argument of another type:
--   bad argument #1 to 'search.space' (table expected, got string)
-- A vararg f without max and types is returned unchanged. The wrapper tail-calls
-- f, so f's own error(msg, 2) and check_options still blame the caller's line.
-- The one arity and positional type check of the Lua library: packages pass
-- their exports through strict_table and nn.Module classes check by construction.
function M.strict(name, f, max, types)
  if wrapped[f] then return f end
  max = max_args(f, max, types, 0)
  if not max then return f end
  return register(function(...)
    check_call(name, max, types, ...)
    return f(...)
  end, f, name, types, nil)
end

--- strict_method(name, f [, max [, types]]) -> like strict for a method called as
-- obj:m(...): self is not counted, so the numbers are those the caller wrote (max
-- defaults to f's fixed parameter count less one).
function M.strict_method(name, f, max, types)
  if wrapped[f] then return f end
  max = max_args(f, max, types, 1)
  if not max then return f end
  return register(function(self, ...)
    check_call(name, max, types, ...)
    return f(self, ...)
  end, f, name, types, true)
end

--- strict_table(prefix, t [, methods [, types]]) -> t, with every function field
-- whose key does not start with "__" replaced by its strict wrapper named prefix
-- .. key (strict_method when methods is true); types[key], when given, is that
-- function's check_args list (its positional types, declared once here). Changes t
-- in place.
-- @usage return util.strict_table("search.", M, false, {space = {"table", "table?"}})
function M.strict_table(prefix, t, methods, types)
  local wrap = methods and M.strict_method or M.strict
  for _, k in ipairs(M.sorted_keys(t)) do
    local v = rawget(t, k)
    if type(k) == "string" and type(v) == "function" and k:sub(1, 2) ~= "__" then
      rawset(t, k, wrap(prefix .. k, v, nil, types and types[k]))
    end
  end
  if types then
    for k in pairs(types) do
      if type(rawget(t, k)) ~= "function" then error("util.strict_table: types for " .. prefix .. k .. ", which is not a function", 2) end
    end
  end
  return t
end

--- declared(f) -> {name =, types =, method =} of a strict wrapper declared with
-- types, or nil (tests/lua/strict_lua_spec.lua walks every declared position).
function M.declared(f) return declared[f] end

--- unwrap(f) -> the function a strict wrapper calls (f itself when it is not one).
function M.unwrap(f) return wrapped[f] or f end

------------------------------------------------------------------ machine

--- integer_words(min [, max]) -> how messages name the integers in [min, max]:
-- "a positive integer" (min 1), "a non-negative integer" (min 0), "an integer >= min",
-- "an integer in [min, max]", "an integer" (no bounds). The one wording of integer checks
-- (check_options' "integer>=N", check_integer, the data and nn size checks, the flags).
function M.integer_words(min, max)
  if max then return string.format("an integer in [%d, %d]", min, max) end
  if min == 1 then return "a positive integer" end
  if min == 0 then return "a non-negative integer" end
  if min then return "an integer >= " .. min end
  return "an integer"
end

--- integer_problem(v, min [, max]) -> nil and v as an integer when v is a whole number in
-- [min, max] (an integral float is converted), else "must be <integer_words>, got v".
function M.integer_problem(v, min, max)
  local n = math.type(v) == "integer" and v or (math.type(v) == "float" and v == math.floor(v) and math.tointeger(v))
  if n and (not min or n >= min) and (not max or n <= max) then return nil, n end
  return string.format("must be %s, got %s", M.integer_words(min, max), type(v) == "number" and tostring(v) or type(v))
end

--- choice_problem(name, v, choices) -> nil when v is one of the strings in the list
-- choices (or nil: the default), else "option 'name' must be \"a\", \"b\" or \"c\",
-- got v". The one wording of options that name a choice.
function M.choice_problem(name, v, choices)
  if v == nil then return nil end
  for _, c in ipairs(choices) do if v == c then return nil end end
  local q = {}
  for i, c in ipairs(choices) do q[i] = string.format("%q", c) end
  local list = #q > 1 and table.concat(q, ", ", 1, #q - 1) .. " or " .. q[#q] or q[1]
  return string.format("option '%s' must be %s, got %s", name, list,
    type(v) == "string" and string.format("%q", v) or tostring(v))
end

--- Checks that argument `arg` of fn is an integer in [min, max] and returns it;
-- raises "bad argument #arg to 'fn' (what must be an integer in [min, max], got v)"
-- at the caller of fn. Counts and dimensions that drive loops go through it, so no
-- argument can make a function loop or allocate without bound.
-- @usage n = util.check_integer("dl.search.primes", 1, n, "n", 1, 10000)
function M.check_integer(fn, arg, v, what, min, max)
  local why, n = M.integer_problem(v, min, max)
  if why then error(string.format("bad argument #%d to '%s' (%s %s)", arg, fn, what, why), 3) end
  return n
end

--- The number of online CPUs (1 when /sys cannot be read).
function M.cores()
  local f = io.open("/sys/devices/system/cpu/online")
  local s = f and f:read("l")
  if f then f:close() end
  local n = 0
  for part in (s or ""):gmatch("[^,]+") do
    local a, b = part:match("^(%d+)%-(%d+)$")
    if a then n = n + tonumber(b) - tonumber(a) + 1 elseif part:match("^%d+$") then n = n + 1 end
  end
  return n > 0 and n or 1
end

--- This machine's host name (/proc, else the hostname command; "localhost" when neither answers).
function M.hostname()
  local f = io.open("/proc/sys/kernel/hostname")
  local h = f and f:read("l")
  if f then f:close() end
  if not h or h == "" then
    local p = io.popen("hostname 2>/dev/null")
    h = p and p:read("l")
    if p then p:close() end
  end
  return (h and h ~= "") and h or "localhost"
end

--- The process id of this dlua (Linux /proc), or nil.
function M.getpid()
  local f = io.open("/proc/self/stat")
  if not f then return nil end
  local s = f:read("l")
  f:close()
  return s and tonumber(s:match("^(%d+)"))
end

--- Sleeps s seconds in C (dlua.util.proc.sleep: a SIGINT is not swallowed by a
-- shell's sleep); returns true when a caught interrupt cut it short.
function M.sleep(s) return core._sleep(s) end

M.strict_table("util.", M, false, {
  check_integer = {"string", "integer", "any?", "string", "integer?", "integer?"},
  choice_problem = {"string", "any?", "table"},
  check_options = {"string", "any?", "table", "integer?"}, copy = {"table?"}, declared = {"any?"},
  deep_copy = {"any?", "table?"}, edit_distance = {"string", "string"}, finite = {"any?"}, fmt4 = {"any?"}, fmt_metric = {"any?"},
  integer_problem = {"any?", "integer?", "integer?"}, integer_words = {"integer?", "integer?"}, list_stray_key = {"table"},
  nearest = {"string", "table"}, option_problem = {"string", "any?", "table"}, shell_quote = {"string"},
  sleep = {"number"}, sorted_keys = {"table?"}, spec = {"table"}, strict = {"string", "function", "number?", "table?"},
  strict_method = {"string", "function", "number?", "table?"}, strict_table = {"string", "table", "boolean?", "table?"},
  unwrap = {"any?"},
})

return M
