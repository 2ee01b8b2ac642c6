-- No dead code in the engine (issue 31, item 4): every function the engine exports has a
-- caller. The exports and the calls are read from the compiled objects of the build under
-- test (nm over $DLUA_BUILD/CMakeFiles/*/engine/**/*.o and the ctest programs'
-- objects): a global function (T) that no other object leaves undefined (U) is called
-- only inside its own file, if at all; its source then shows whether it is called there
-- (it should then be static, but a header that documents it as API keeps it), and a
-- function only tests/c calls must say so in its declaration ("test-only"). Harnesses
-- not built by default (tests/fuzz, tests/bench) count as callers by their sources.
local H = dofile("tests/lua/helpers.lua")

local BUILD = os.getenv("DLUA_BUILD") or "build"

local function sh_lines(cmd)
  local p = assert(io.popen(cmd))
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  return out
end

--- Reads nm lines of each object: {[object] = {defs = {name...}, undef = {name = true}}}.
local function symbols(objects)
  local out = {}
  for _, o in ipairs(objects) do
    local s = {defs = {}, undef = {}}
    for _, l in ipairs(sh_lines("nm " .. H.shquote(o))) do
      local kind, name = l:match("^%x*%s+(%a)%s+([%w_]+)$")
      if kind == "T" then s.defs[#s.defs + 1] = name elseif kind == "U" then s.undef[name] = true end
    end
    out[o] = s
  end
  return out
end

-- occurrences of name as a word in text
local function count(text, name)
  local n = 0
  for _ in text:gmatch("%f[%w_]" .. name .. "%f[^%w_]") do n = n + 1 end
  return n
end

--- The problems: exported engine functions nobody calls; ones only tests/c calls whose
-- declaration does not say "test-only". A function named in an X() row of a header's table
-- (DL_OP_TABLE) is called through it. read(path) gives a source file's text; source(obj)
-- the source of an object; headers the text of every engine header; extra the sources of
-- harnesses that are not built.
local function dead(syms, source, read, headers, extra)
  local problems = {}
  for obj, s in pairs(syms) do
    if obj:find("/engine/", 1, true) then
      for _, name in ipairs(s.defs) do
        local engine_users, test_users = 0, 0
        for other, t in pairs(syms) do
          if other ~= obj and t.undef[name] then
            if other:find("/engine/", 1, true) then engine_users = engine_users + 1 else test_users = test_users + 1 end
          end
        end
        local own = count(read(source(obj)), name) > 1      -- called (or taken) inside its own file,
          or headers:find("X%([^\n]*%f[%w_]" .. name .. "%f[^%w_]") ~= nil   -- or through a table's X() row
        if engine_users == 0 and not own and count(extra, name) == 0 and not name:match("^luaopen_")
            and name ~= "main" then
          if test_users == 0 then
            problems[#problems + 1] = string.format("%s: %s is exported and never called", source(obj), name)
          elseif test_users > 0 then
            local decl = headers:match("[^\n]*\n[^\n]*\n[^\n]*%f[%w_]" .. name .. "%(") or ""
            if not decl:find("[Tt]est%-only") then
              problems[#problems + 1] = string.format("%s: %s is called only by tests/c and its declaration " ..
                "does not say test-only", source(obj), name)
            end
          end
        end
      end
    end
  end
  table.sort(problems)
  return problems
end

describe("the engine's exported functions", function()
  it("all have a caller", function()
    local objects = {}
    for _, o in ipairs(sh_lines("find " .. H.shquote(BUILD .. "/CMakeFiles") .. " -name '*.o' | sort")) do
      local src = o:match("/(engine/.-%.c)%.o$") or o:match("/(tests/.-%.c)%.o$")
      local f = src and io.open(src, "r")            -- an object whose source is gone is stale: left out
      if f then f:close(); objects[#objects + 1] = o elseif not src then objects[#objects + 1] = o end
    end
    local n_engine = 0
    for _, o in ipairs(objects) do if o:find("/engine/", 1, true) then n_engine = n_engine + 1 end end
    assert.is_true(n_engine >= 40, "found only " .. n_engine .. " engine objects under " .. BUILD .. "/CMakeFiles")
    local headers = {}
    for _, f in ipairs(sh_lines("find engine -name '*.h' | sort")) do headers[#headers + 1] = H.slurp(f) end
    local extra = {}
    for _, f in ipairs(sh_lines("find tests/fuzz tests/bench -name '*.c' | sort")) do extra[#extra + 1] = H.slurp(f) end
    local function source(obj) return obj:match("/(engine/.-%.c)%.o$") or obj:match("/(tests/.-%.c)%.o$") or obj end
    assert.are.equal("", table.concat(dead(symbols(objects), source, H.slurp, table.concat(headers, "\n"),
      table.concat(extra, "\n")), "\n"))
  end)
end)

describe("the dead-export finder", function()
  it("fails an unused export and an undocumented test-only one, and passes the rest", function()
    local syms = {
      ["b/engine/core/a.c.o"] = {defs = {"dl_used", "dl_internal", "dl_dead", "dl_tested", "dl_test_only", "dl_fuzzed"},
        undef = {}},
      ["b/engine/ops/b.c.o"] = {defs = {}, undef = {dl_used = true}},
      ["b/tests/c/t.c.o"] = {defs = {"main"}, undef = {dl_tested = true, dl_test_only = true}},
    }
    local src = {["engine/core/a.c"] = "int dl_used(void) {}\nint dl_internal(void) {}\nint x = dl_internal();\n" ..
      "int dl_dead(void) {}\nint dl_tested(void) {}\nint dl_test_only(void) {}\nint dl_fuzzed(void) {}\n"}
    local headers = "/* Counts. */\nint dl_tested(void);\n/* Test-only: tests/c checks it. */\nint dl_test_only(void);\n" ..
      "#define T(X) X(1, dl_tabled)\n"
    table.insert(syms["b/engine/core/a.c.o"].defs, "dl_tabled")
    local function source(obj) return obj:match("^b/(.-)%.o$") end
    assert.are.same({
      "engine/core/a.c: dl_dead is exported and never called",
      "engine/core/a.c: dl_tested is called only by tests/c and its declaration does not say test-only",
    }, dead(syms, source, function(p) return src[p] or "" end, headers, "dl_fuzzed(x);"))
  end)
end)
