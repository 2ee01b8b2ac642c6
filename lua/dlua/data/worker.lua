--- dlua.data.worker: Lua map functions for the pipeline's worker Lua states.
-- A function is sent to the worker states as a plan: its bytecode and, for
-- every upvalue, a plain description of the value. plan_function builds plans
-- here in the main state; load rebuilds them in each worker state (the engine
-- calls it as dlua.data._worker_load); upvalues are copies there (changes do
-- not come back).
local core = require "dlua.core"
local util = require "dlua.util"
local check = require "dlua.data.check"

local M = {}

local errorf, is_tensor = check.errorf, util.is_tensor
local function module_names()
  local byval = {}
  for name, mod in pairs(package.loaded) do
    if type(mod) == "table" and (byval[mod] == nil or #name < #byval[mod]) then byval[mod] = name end
  end
  return byval
end

local STD = {"math", "string", "table", "utf8", "os", "io", "coroutine", "debug", "_G"}

local function find_cfunction(f, mods)
  for _, name in ipairs(STD) do
    local mod = package.loaded[name]
    if type(mod) == "table" then
      for k, v in pairs(mod) do if v == f then return name, k end end
    end
  end
  for mod, name in pairs(mods) do
    for k, v in pairs(mod) do if v == f then return name, k end end
  end
end

local function plan_of(v, where, st)
  local tv = type(v)
  if v == nil then return {t = "nil"} end
  if tv == "boolean" or tv == "number" or tv == "string" then return {t = "v", v = v} end
  if st.ids[v] then return {t = "ref", id = st.ids[v]} end
  if v == _G then return {t = "G"} end
  if tv == "table" and st.mods[v] then return {t = "mod", name = st.mods[v]} end
  if is_tensor(v) then
    return {t = "tensor", dtype = v:dtype(), shape = v:shape(), bytes = core._tensor_bytes(v)}
  end
  if tv == "function" then
    local info = debug.getinfo(v, "S")
    if info.what == "C" then
      local mod, key = find_cfunction(v, st.mods)
      if not mod then st.fail(where, "a C function that is not a field of a loaded module") end
      return {t = "cfn", mod = mod, key = key}
    end
    st.n = st.n + 1
    local id = st.n
    st.ids[v] = id
    local p = {t = "fn", id = id, code = string.dump(v), name = "=" .. info.short_src, ups = {}}
    local i = 1
    while true do
      local name, val = debug.getupvalue(v, i)
      if not name then break end
      -- globals are the worker state's own
      p.ups[i] = name == "_ENV" and {t = "G"}
        or plan_of(val, (where ~= "" and where .. ", " or "") .. "upvalue '" .. name .. "'", st)
      i = i + 1
    end
    return p
  end
  if tv == "table" then
    if getmetatable(v) ~= nil then st.fail(where, "a table with a metatable (an object)") end
    st.n = st.n + 1
    local id = st.n
    st.ids[v] = id
    local p = {t = "table", id = id, entries = {}}
    for k, x in pairs(v) do
      local kp = plan_of(k, where .. " key", st)
      p.entries[#p.entries + 1] = {kp, plan_of(x, where .. "." .. tostring(k), st)}
    end
    return p
  end
  st.fail(where, "a " .. tv)
end

--- plan_function(f, level) -> plan, name: the plan of Lua function f (errors at
-- level above the caller when a value it reaches cannot be copied) and its
-- stage name ("lua FILE:LINE").
function M.plan_function(f, level)
  local info = debug.getinfo(f, "S")
  local origin = info.what == "C" and "a C function" or string.format("the function defined at %s:%d", info.short_src,
    info.linedefined)
  local st = {ids = {}, n = 0, mods = module_names()}
  st.fail = function(where, what)
    errorf(-1, "map: cannot copy %s into the worker Lua states: %s is %s (nil, booleans, numbers, " ..
      "strings, tensors, plain tables, Lua functions and loaded modules can be copied)", origin, where, what)
  end
  if info.what == "C" then errorf(level + 1, "map: cannot copy a C function into the worker Lua states; wrap it in a Lua function") end
  local ok, plan = pcall(plan_of, f, "", st)
  if not ok then error(plan, level + 2) end
  return plan, string.format("lua %s:%d", info.short_src, info.linedefined)
end

--- load(plan) -> the function a plan describes (in a worker state).
function M.load(plan)
  local built = {}
  local function build(p)
    local t = p.t
    if t == "nil" then return nil end
    if t == "v" then return p.v end
    if t == "ref" then return built[p.id] end
    if t == "G" then return _G end
    if t == "mod" then return (require(p.name)) end
    if t == "cfn" then return (require(p.mod))[p.key] end
    if t == "tensor" then return core._tensor_from_bytes(p.bytes, p.dtype, p.shape) end
    if t == "table" then
      local out = {}
      built[p.id] = out
      for _, e in ipairs(p.entries) do
        local k = build(e[1])
        if k ~= nil then out[k] = build(e[2]) end
      end
      return out
    end
    if t == "fn" then
      local f = assert(load(p.code, p.name, "b"))
      built[p.id] = f
      for i, u in ipairs(p.ups) do debug.setupvalue(f, i, (build(u))) end
      return f
    end
    error("bad plan entry " .. tostring(t))
  end
  return build(plan)
end

return M
