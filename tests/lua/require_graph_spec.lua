-- The Lua library's require graph (DESIGN.md section 2: requires at the top of a
-- file, never inside a function; no cycles; arrows only point down). Every
-- lua/dlua/**/*.lua is read with a small Lua lexer (comments and strings skipped,
-- block nesting tracked) and each `require "name"` becomes an arrow. The layer of a
-- module is that of its package (the directory under lua/dlua/).
local H = dofile("tests/lua/helpers.lua")

-- bottom to top; a module may require only modules of a strictly lower layer, or of
-- its own package (a cycle inside a package still fails)
local LAYERS = {
  {"core"},                                   -- dlua.core, the C engine
  {"util"},                                   -- option checking, helpers, json, fs, memory
  {"nn", "data", "optim", "search", "dist"},  -- tensors to models, data, updates, samplers, collectives
  {"train"},                                  -- the loop, experiments, metrics, checkpoints, tracking
  {"study"},                                  -- studies, probes, trials over ranks
  {"report"},                                 -- analysis, report, diagnosis
  {"cli"},                                    -- running what a script returns
  {"dlua"},                                   -- lua/dlua/init.lua: `require "dlua"`
}
local RANK = {}
for r, names in ipairs(LAYERS) do for _, n in ipairs(names) do RANK[n] = r end end

-- modules outside dlua that the library may use
local EXTERNAL = {lfs = true}

-- requires whose argument is not a literal: a module name that is data, not an arrow
local DYNAMIC = {
  ["dlua.data.worker"] = "a pipeline worker state loads the user's module a map plan names",
}

local KEYWORDS = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or repeat return then
  true until while]]):gmatch("%a+") do KEYWORDS[w] = true end

-- tokens of Lua source s: {kind = "name" | "keyword" | "string" | "op" | "number", text, line}
local function lex(s)
  local toks, i, line, n = {}, 1, 1, #s
  local function add(kind, text) toks[#toks + 1] = {kind = kind, text = text, line = line} end
  local function long_bracket(at)       -- at points to '['; returns level or nil
    local eq = s:match("^%[(=*)%[", at)
    return eq and #eq
  end
  while i <= n do
    local c = s:sub(i, i)
    if c == "\n" then line = line + 1; i = i + 1
    elseif c:match("%s") then i = i + 1
    elseif s:sub(i, i + 1) == "--" then
      local lvl = s:sub(i + 2, i + 2) == "[" and long_bracket(i + 2)
      local j
      if lvl then
        local close = "]" .. string.rep("=", lvl) .. "]"
        j = select(2, s:find(close, i, true)) or n
      else
        j = (s:find("\n", i, true) or n + 1) - 1
      end
      for _ in s:sub(i, j):gmatch("\n") do line = line + 1 end
      i = j + 1
    elseif c == "[" and long_bracket(i) then
      local lvl = long_bracket(i)
      local close = "]" .. string.rep("=", lvl) .. "]"
      local j = select(2, s:find(close, i, true)) or n
      local body = s:sub(i + lvl + 2, j - lvl - 2)
      add("string", body)
      for _ in s:sub(i, j):gmatch("\n") do line = line + 1 end
      i = j + 1
    elseif c == '"' or c == "'" then
      local j, buf = i + 1, {}
      while j <= n do
        local d = s:sub(j, j)
        if d == "\\" then buf[#buf + 1] = s:sub(j, j + 1); j = j + 2
        elseif d == c then break
        else
          if d == "\n" then line = line + 1 end
          buf[#buf + 1] = d; j = j + 1
        end
      end
      add("string", table.concat(buf))
      i = j + 1
    elseif c:match("[%a_]") then
      local w = s:match("^[%w_]+", i)
      add(KEYWORDS[w] and "keyword" or "name", w)
      i = i + #w
    elseif c:match("%d") then
      local w = s:match("^0[xX][%x%.]+[pP]?[%+%-]?%x*", i) or s:match("^[%d%.]+[eE]?[%+%-]?%d*", i)
      add("number", w)
      i = i + #w
    else
      local op = s:match("^%.%.%.", i) or s:match("^[=~<>]=", i) or s:match("^%.%.", i) or s:match("^::", i)
        or s:match("^//", i) or s:match("^<<", i) or s:match("^>>", i) or c
      add("op", op)
      i = i + #op
    end
  end
  return toks
end

--- requires(source) -> {{name = "dlua.NAME" or nil (not a literal), line, in_function}}
local function requires(src)
  local toks = lex(src)
  local out, stack, loop_pending = {}, {}, 0
  local function in_function()
    for _, b in ipairs(stack) do if b == "function" then return true end end
    return false
  end
  for k, t in ipairs(toks) do
    if t.kind == "keyword" then
      local w = t.text
      if w == "function" or w == "if" or w == "repeat" then stack[#stack + 1] = w
      elseif w == "while" or w == "for" then stack[#stack + 1] = w; loop_pending = loop_pending + 1
      elseif w == "do" then
        if loop_pending > 0 then loop_pending = loop_pending - 1 else stack[#stack + 1] = "do" end
      elseif w == "end" or w == "until" then stack[#stack] = nil
      end
    elseif t.kind == "name" and t.text == "require" then
      local prev = toks[k - 1]
      local field = prev and prev.kind == "op" and (prev.text == "." or prev.text == ":")
      local key = toks[k + 1] and toks[k + 1].kind == "op" and toks[k + 1].text == "="   -- {require = ...}
      if not field and not key then
        local a, b, c = toks[k + 1], toks[k + 2], toks[k + 3]
        local name
        if a and a.kind == "string" then name = a.text
        elseif a and a.text == "(" and b and b.kind == "string" and c and c.text == ")" then name = b.text end
        out[#out + 1] = {name = name, line = t.line, in_function = in_function()}
      end
    end
  end
  return out
end

local function package_of(mod)
  if mod == "dlua" then return "dlua" end
  return mod:match("^dlua%.([%w_]+)")
end

local function module_of(path)                -- lua/dlua/train/flags.lua -> dlua.train.flags
  local rel = path:match("^lua/(.*)%.lua$")
  rel = rel:gsub("/init$", ""):gsub("/", ".")
  return rel
end

--- check(files) -> list of problems (strings); files maps module name -> source
local function check(files)
  local problems, graph = {}, {}
  local names = {}
  for mod in pairs(files) do names[#names + 1] = mod end
  table.sort(names)
  for _, mod in ipairs(names) do
    graph[mod] = {}
    local pkg = package_of(mod)
    if not RANK[pkg] then problems[#problems + 1] = string.format("%s: package '%s' has no layer", mod, tostring(pkg)) end
    for _, r in ipairs(requires(files[mod])) do
      local where = string.format("%s:%d", mod, r.line)
      if not r.name then
        if not (r.in_function and DYNAMIC[mod]) then
          problems[#problems + 1] = where .. ": require of a computed name"
        end
      elseif r.in_function then
        problems[#problems + 1] = string.format("%s: require \"%s\" inside a function", where, r.name)
      elseif not EXTERNAL[r.name] then
        local tpkg = r.name == "dlua.core" and "core" or package_of(r.name)
        if not tpkg then
          problems[#problems + 1] = string.format("%s: require \"%s\" is outside the library", where, r.name)
        elseif not RANK[tpkg] and files[r.name] ~= nil then
          problems[#problems + 1] = string.format("%s: require \"%s\": package %s has no layer", where, r.name, tpkg)
        elseif tpkg ~= pkg and RANK[tpkg] and RANK[pkg] and RANK[tpkg] >= RANK[pkg] then
          problems[#problems + 1] = string.format("%s: require \"%s\" points up or sideways (%s is layer %s, %s is %s)",
            where, r.name, pkg, tostring(RANK[pkg]), tpkg, tostring(RANK[tpkg]))
        end
        if r.name ~= "dlua.core" then
          if files[r.name] == nil then
            problems[#problems + 1] = string.format("%s: require \"%s\": no such module", where, r.name)
          end
          graph[mod][#graph[mod] + 1] = r.name
        end
      end
    end
  end
  -- cycles, each reported once as a -> b -> ... -> a
  for _, c in ipairs(H.cycles(graph, names)) do problems[#problems + 1] = "cycle: " .. c end
  return problems
end

local function library()
  local files = {}
  local p = assert(io.popen("find lua/dlua -name '*.lua' | sort"))
  for path in p:lines() do files[module_of(path)] = H.slurp(path) end
  p:close()
  return files
end

describe("the require graph of lua/dlua", function()
  it("has every file in a layer, requires at the top only, no cycle and no upward arrow", function()
    local files = library()
    local n = 0
    for _ in pairs(files) do n = n + 1 end
    assert.is_true(n >= 30, "found only " .. n .. " modules")
    local problems = check(files)
    assert.are.equal("", table.concat(problems, "\n"))
  end)

  it("gives every package an init.lua", function()
    local files = library()
    for mod in pairs(files) do
      local pkg = mod:match("^(dlua%.[%w_]+)%.")
      if pkg then assert.is_not_nil(files[pkg], pkg .. " has no init.lua") end
    end
  end)
end)

describe("the require-graph checker", function()
  it("reads requires past comments and strings, and knows function bodies", function()
    local r = requires([==[
local a = require "dlua.util"          -- require "dlua.nn" in a comment
local b = require("dlua.nn")
--[[ local c = require "dlua.cli" ]]
local s = [[ require "dlua.report" ]]
local t = 'require "dlua.study"'
if x then local d = require "dlua.data" end
for i = 1, 2 do print(i) end
while false do end
local function f()
  for _ = 1, 2 do end
  return require("dlua.train")
end
local o = {require = 1}; o.require("x")
local e = require "dlua.optim"
]==])
    assert.are.same({
      {name = "dlua.util", line = 1, in_function = false},
      {name = "dlua.nn", line = 2, in_function = false},
      {name = "dlua.data", line = 6, in_function = false},
      {name = "dlua.train", line = 11, in_function = true},
      {name = "dlua.optim", line = 14, in_function = false},
    }, r)
  end)

  it("fails on a require inside a function, a cycle, an upward arrow and a computed name", function()
    local problems = check({
      ["dlua.util"] = 'local core = require "dlua.core"\nlocal function f() return require "dlua.util.json" end',
      ["dlua.util.json"] = 'return {}',
      ["dlua.nn"] = 'local t = require "dlua.train"',                       -- up
      ["dlua.train"] = 'local e = require "dlua.train.experiment"',
      ["dlua.train.experiment"] = 'local t = require "dlua.train"',        -- cycle within a package
      ["dlua.optim"] = 'local d = require "dlua.data"',                     -- sideways
      ["dlua.data"] = 'local w = require "dlua.data.worker"',
      ["dlua.data.worker"] = 'local function f(n) return require(n) end',      -- computed: allowed here only
      ["dlua.search"] = 'local function f(n) return require(n) end',
      ["dlua.study"] = 'local x = require "dlua.nowhere"',
    })
    table.sort(problems)
    assert.are.same({
      "cycle: dlua.train -> dlua.train.experiment -> dlua.train",
      "dlua.nn:1: require \"dlua.train\" points up or sideways (nn is layer 3, train is 4)",
      "dlua.optim:1: require \"dlua.data\" points up or sideways (optim is layer 3, data is 3)",
      "dlua.search:1: require of a computed name",
      "dlua.study:1: require \"dlua.nowhere\": no such module",
      "dlua.util:2: require \"dlua.util.json\" inside a function",
    }, problems)
  end)
end)
