--- examples/models/hp.lua: the hyperparameter handling shared by the reference models.
-- `resolve` merges a caller's hp table over a model's documented defaults, rejects
-- unknown keys (a typo such as `widht = 64` is an error, not a silently ignored
-- knob) and checks each value against a rule, so a study that sets a bad value
-- fails when the model is built, with the key and the value in the message.
-- It does not know about any model; each model file lists its own rules.
local M = {}

local function is_int(v) return math.type(v) == "integer" or (type(v) == "number" and v == math.floor(v) and v == v) end

local function show(v)
  if type(v) == "string" then return "'" .. v .. "'" end
  if type(v) == "table" then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = tostring(x) end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(v)
end
M.show = show

-- a rule checks one value; it returns nil when the value is fine, else what was expected
local rules = {}
M.rules = rules

function rules.positive(v) if not (is_int(v) and v >= 1) then return "a positive integer" end end
function rules.count(v) if not (is_int(v) and v >= 0) then return "a non-negative integer" end end
function rules.prob(v) if not (type(v) == "number" and v >= 0 and v < 1) then return "a number in [0, 1)" end end
function rules.positive_number(v) if not (type(v) == "number" and v > 0) then return "a positive number" end end
function rules.boolean(v) if type(v) ~= "boolean" then return "true or false" end end

--- rules.one_of{"a", "b"}: the value is one of the strings listed.
function rules.one_of(list)
  return function(v)
    for _, x in ipairs(list) do if v == x then return nil end end
    return "one of " .. table.concat(list, ", ")
  end
end

--- rules.optional(rule): false (meaning "use the layer's own default") or a value passing rule.
function rules.optional(rule)
  return function(v)
    if v == false then return nil end
    local want = rule(v)
    if want then return "false or " .. want end
  end
end

--- rules.list_of(rule): a non-empty Lua list whose elements pass rule.
function rules.list_of(rule)
  return function(v)
    if type(v) ~= "table" or #v == 0 then return "a non-empty list" end
    for _, x in ipairs(v) do
      local want = rule(x)
      if want then return "a non-empty list of " .. want:gsub("^an? ", "") .. "s" end
    end
  end
end

--- Returns a new table: defaults overridden by hp, every value checked.
-- name prefixes the messages ("mlp: ..."); opts.strict = false ignores keys the
-- model does not know (so a study can pass its whole flat hp table).
-- Raises (at the caller of the model's build) on unknown keys and bad values.
function M.resolve(name, defaults, checks, hp, opts)
  hp = hp or {}
  opts = opts or {}
  if type(hp) ~= "table" then error(string.format("%s: hp must be a table, got %s", name, type(hp)), 3) end
  if type(opts) ~= "table" then error(string.format("%s: options must be a table, got %s", name, type(opts)), 3) end
  for k in pairs(opts) do
    if k ~= "strict" then error(string.format("%s: unknown build option '%s' (valid: strict)", name, tostring(k)), 3) end
  end
  local strict = opts.strict ~= false
  local out = {}
  for k, v in pairs(defaults) do out[k] = v end
  for k, v in pairs(hp) do
    if defaults[k] ~= nil then
      out[k] = v
    elseif strict then
      local keys = {}
      for key in pairs(defaults) do keys[#keys + 1] = key end
      table.sort(keys)
      error(string.format("%s: unknown hp key '%s' (valid: %s)", name, tostring(k), table.concat(keys, ", ")), 3)
    end
  end
  local keys = {}
  for k in pairs(checks) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local want = checks[k](out[k])
    if want then error(string.format("%s: hp.%s must be %s, got %s", name, k, want, show(out[k])), 3) end
  end
  for k, v in pairs(out) do                  -- integral floats (2.0) become integers
    if checks[k] == rules.positive or checks[k] == rules.count then out[k] = math.tointeger(v) end
    if type(v) == "table" and getmetatable(v) == nil then
      local copy = {}
      for i, x in ipairs(v) do copy[i] = math.tointeger(x) or x end
      out[k] = copy
    end
  end
  return out
end

return M
