-- The C engine's layers (DESIGN.md section 2, docs/architecture.md "The engine's
-- folders"): engine/ is cut into folders, and a file includes and calls only files
-- of its own folder or of a folder below it; no files include or call each other in
-- a circle. Includes are read from the sources (`#include "folder/file.h"`); calls
-- from the symbols of the compiled objects of the build under test (nm: what each
-- object leaves undefined, matched to the object that defines it), so a call made
-- through a macro or an inline function still counts.
local H = dofile("tests/lua/helpers.lua")

-- bottom to top; folders on one row are siblings and may not use each other
local LAYERS = {
  {"core"},            -- tensor, allocator, shapes, rng, thread pool, fp environment
  {"ops"},             -- the op table, kernels, autograd tape, optimizers
  {"io"},              -- durable writes, checkpoints, csv, idx, trace files
  {"data"},            -- datasets, transforms, the threaded pipeline, its cache
  {"sys", "search"},   -- processes and MPI; the Gaussian process
  {"lua"},             -- the bindings
  {"main"},            -- engine/dlua.c, the executable
}
local RANK = {}
for r, names in ipairs(LAYERS) do for _, n in ipairs(names) do RANK[n] = r end end

-- inside lua/: the per-concern binding files stand between lua_aux (the bottom) and
-- lua_init (the top) and never use each other
local BIND_BOTTOM, BIND_TOP = "lua/lua_aux", "lua/lua_init"

local function folder_of(unit)                 -- "ops/autograd" -> "ops"; "dlua" -> "main"
  return unit:match("^([%w_]+)/") or "main"
end

local function sh_lines(cmd)
  local p = assert(io.popen(cmd))
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  return out
end

--- check(arrows) -> problems; arrows: list of {from =, to =, kind = "include" | "call", where =}
--- where from and to are units ("ops/autograd", "dlua"; a header and its .c are one unit)
local function check(arrows)
  local problems, graph, seen = {}, {}, {}
  for _, a in ipairs(arrows) do
    local ff, tf = folder_of(a.from), folder_of(a.to)
    if not RANK[ff] then
      problems[#problems + 1] = string.format("%s: folder '%s' has no layer", a.where, ff)
    elseif not RANK[tf] then
      problems[#problems + 1] = string.format("%s: %s %s: folder '%s' has no layer", a.where, a.kind, a.to, tf)
    elseif ff ~= tf and RANK[tf] >= RANK[ff] then
      problems[#problems + 1] = string.format("%s: %s of %s points %s (%s is layer %d, %s is %d)", a.where, a.kind,
        a.to, RANK[tf] == RANK[ff] and "sideways" or "up", ff, RANK[ff], tf, RANK[tf])
    elseif ff == "lua" and tf == "lua" and a.from ~= a.to then
      if a.to == BIND_TOP or a.from == BIND_BOTTOM or (a.from ~= BIND_TOP and a.to ~= BIND_BOTTOM) then
        problems[#problems + 1] = string.format("%s: %s of %s: a binding file uses only lua_aux, and only lua_init " ..
          "uses the others", a.where, a.kind, a.to)
      end
    end
    if a.from ~= a.to then
      graph[a.from] = graph[a.from] or {}
      local key = a.from .. ">" .. a.to
      if not seen[key] then seen[key] = true; table.insert(graph[a.from], a.to) end
    end
  end
  -- circles of files, each reported once as a -> b -> ... -> a
  local units = {}
  for u in pairs(graph) do units[#units + 1] = u end
  table.sort(units)
  for _, u in ipairs(units) do table.sort(graph[u]) end
  for _, c in ipairs(H.cycles(graph, units)) do problems[#problems + 1] = "circle: " .. c end
  return problems
end

local function unit_of(path)                   -- engine/ops/conv.c -> ops/conv; engine/dlua.c -> dlua
  return (path:gsub("^engine/", ""):gsub("%.[ch]$", ""))
end

-- every #include "..." of engine/**/*.[ch]
local function include_arrows()
  local arrows, problems = {}, {}
  for _, path in ipairs(sh_lines("find engine -name '*.[ch]' | sort")) do
    local n = 0
    for line in (H.slurp(path) .. "\n"):gmatch("([^\n]*)\n") do
      n = n + 1
      local inc = line:match('^%s*#%s*include%s*"([^"]+)"')
      if inc then
        local where = string.format("%s:%d", path, n)
        local f = io.open("engine/" .. inc, "r")
        if not inc:find("/", 1, true) then
          problems[#problems + 1] = where .. ': #include "' .. inc .. '" does not name its folder'
        elseif not f then
          problems[#problems + 1] = where .. ': #include "' .. inc .. '": no such file under engine/'
        else
          arrows[#arrows + 1] = {from = unit_of(path), to = unit_of("engine/" .. inc), kind = "include", where = where}
        end
        if f then f:close() end
      end
    end
  end
  return arrows, problems
end

-- every reference from one engine object to a symbol another defines
local function call_arrows(build)
  local objects = {}
  for _, o in ipairs(sh_lines("find '" .. build .. "/CMakeFiles' -path '*/engine/*' -name '*.c.o' " ..
                               "\\( -path '*/dlcore.dir/*' -o -path '*/dlbind.dir/*' -o -path '*/dlua.dir/*' \\) | sort")) do
    local src = o:match("/(engine/.-%.c)%.o$")
    local f = src and io.open(src, "r")
    if f then                                  -- objects of sources that no longer exist are stale
      f:close()
      objects[#objects + 1] = {path = o, unit = unit_of(src), src = src}
    end
  end
  local defs = {}
  for _, o in ipairs(objects) do
    for _, l in ipairs(sh_lines("nm -g --defined-only '" .. o.path .. "'")) do
      local sym = l:match("^%x+ %a (%S+)$")
      if sym then defs[sym] = o.unit end
    end
  end
  local arrows = {}
  for _, o in ipairs(objects) do
    for _, l in ipairs(sh_lines("nm -u '" .. o.path .. "'")) do
      local sym = l:match("^%s+U (%S+)$")
      local to = sym and defs[sym]
      if to and to ~= o.unit then
        arrows[#arrows + 1] = {from = o.unit, to = to, kind = "call", where = o.src .. " (" .. sym .. ")"}
      end
    end
  end
  return arrows, #objects
end

describe("the C engine's folders", function()
  it("include only their own folder or the folders below, by the folder's name, with no circle", function()
    local arrows, problems = include_arrows()
    assert.is_true(#arrows > 80, "found only " .. #arrows .. " includes")
    for _, p in ipairs(check(arrows)) do problems[#problems + 1] = p end
    assert.are.equal("", table.concat(problems, "\n"))
  end)

  it("call only their own folder or the folders below, with no circle of files", function()
    local build = os.getenv("DLUA_BUILD") or "build"
    local arrows, nobj = call_arrows(build)
    assert.is_true(nobj >= 45, "found only " .. nobj .. " engine objects under " .. build)
    assert.is_true(#arrows > 200, "found only " .. #arrows .. " calls")
    assert.are.equal("", table.concat(check(arrows), "\n"))
  end)

  it("has every folder of engine/ in a layer", function()
    for _, d in ipairs(sh_lines("find engine -mindepth 1 -maxdepth 1 -type d | sort")) do
      local name = d:match("^engine/(.*)$")
      assert.is_not_nil(RANK[name], d .. " is in no layer of this spec (and of docs/architecture.md)")
    end
  end)
end)

describe("the engine-graph checker", function()
  it("fails on an upward arrow, a sideways one, a binding calling a sibling, and a circle", function()
    local p = check({
      {from = "core/tensor", to = "ops/autograd", kind = "call", where = "a"},
      {from = "sys/proc", to = "search/gp", kind = "include", where = "b"},
      {from = "lua/lua_ops", to = "lua/lua_conv", kind = "call", where = "c"},
      {from = "lua/lua_aux", to = "lua/lua_ops", kind = "call", where = "d"},
      {from = "ops/a", to = "ops/b", kind = "call", where = "e"},
      {from = "ops/b", to = "ops/c", kind = "call", where = "f"},
      {from = "ops/c", to = "ops/a", kind = "include", where = "g"},
    })
    local all = table.concat(p, "\n")
    assert.truthy(all:find("a: call of ops/autograd points up (core is layer 1, ops is 2)", 1, true), all)
    assert.truthy(all:find("b: include of search/gp points sideways", 1, true), all)
    assert.truthy(all:find("c: call of lua/lua_conv: a binding file uses only lua_aux", 1, true), all)
    assert.truthy(all:find("d: call of lua/lua_ops: a binding file uses only lua_aux", 1, true), all)
    assert.truthy(all:find("circle: ops/a -> ops/b -> ops/c -> ops/a", 1, true), all)
  end)

  it("accepts downward arrows and the bindings' shape", function()
    assert.are.same({}, check({
      {from = "ops/autograd", to = "core/tensor", kind = "call", where = "a"},
      {from = "lua/lua_ops", to = "lua/lua_aux", kind = "call", where = "b"},
      {from = "lua/lua_init", to = "lua/lua_ops", kind = "call", where = "c"},
      {from = "dlua", to = "lua/lua_init", kind = "call", where = "d"},
      {from = "lua/lua_ops", to = "ops/ops", kind = "include", where = "e"},
    }))
  end)
end)
