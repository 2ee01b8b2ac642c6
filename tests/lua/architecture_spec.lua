-- docs/architecture.md against the tree (issue 31, item 5): the engine's folders as the
-- page records them are the folders and files of engine/, the hooks it names are where
-- it says, the Lua layer table names every module, and the walk-throughs can be followed:
--   - each <!-- apply: FILE after|before ANCHOR --> (or "FILE at end") before a code block
--     names a file that exists and an anchor found on exactly one of its lines, and
--     applying every block of the page at its anchor gives files that hold them;
--   - each <!-- apply: FILE new --> (a file a walk-through creates) does not exist yet;
--   - the names a walk-through introduces do not exist yet, and every other C name the
--     page puts in backquotes (dl_*, lt_*, DL_*, l_*) is defined in engine/ or tests/.
-- Paths are checked by stale_refs_spec. The sections "Adding an optimizer" and "Adding
-- a search algorithm" are written by the changes that make those tables.
local H = dofile("tests/lua/helpers.lua")

local DOC = "docs/architecture.md"

-- what the walk-throughs add: none of it may exist yet, or the example is stale
local INTRODUCED = {"cumsum", "dl_cumsum", "dl_bw_cumsum", "l_cumsum", "cumsum_keys", "CUMSUM_ROWS",
  "DL_OP_CUMSUM", "UPSAMPLE_NEAREST2D", "DL_OP_UPSAMPLE_NEAREST2D", "upsample_nearest2d",
  "dl_upsample_nearest2d", "dl_bw_upsample_nearest2d", "Upsample", "views.time"}

local function lines_of(s)
  local out = {}
  for l in (s .. "\n"):gmatch("([^\n]*)\n") do out[#out + 1] = l end
  return out
end

local function sh_lines(cmd)
  local p = assert(io.popen(cmd))
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  return out
end

--- The patches of a page: {file, where = "after" | "before" | "end", anchor, code, line}; the
-- code block is the fence after the comment (its indentation removed).
local function patches(text)
  local out, ls = {}, lines_of(text)
  for i, l in ipairs(ls) do
    local spec = l:match("^%s*<!%-%- apply: (.-) %-%->%s*$")
    if spec then
      local p = {line = i}
      p.file, p.where, p.anchor = spec:match("^(%S+) (after) (.+)$")
      if not p.file then p.file, p.where, p.anchor = spec:match("^(%S+) (before) (.+)$") end
      if not p.file then p.file = spec:match("^(%S+) at end$"); p.where = p.file and "end" end
      if not p.file then p.file = spec:match("^(%S+) new$"); p.where = p.file and "new" end
      local indent, fence = (ls[i + 1] or ""):match("^(%s*)(```+)")
      if fence then
        local body, j = {}, i + 2
        while j <= #ls and not ls[j]:match("^%s*" .. fence .. "%s*$") do
          body[#body + 1] = ls[j]:sub(1, #indent) == indent and ls[j]:sub(#indent + 1) or ls[j]
          j = j + 1
        end
        p.code = table.concat(body, "\n")
      end
      out[#out + 1] = p
    end
  end
  return out
end

--- Applies patch p to the text of its file: the new text, or nil and why.
local function apply(text, p)
  if not p.where then return nil, "apply: expects 'FILE after|before ANCHOR', 'FILE at end' or 'FILE new'" end
  if not p.code then return nil, "no code block follows the apply comment" end
  if p.where == "new" then
    if text then return nil, p.file .. " exists already" end
    return p.code .. "\n"
  end
  if p.where == "end" then return text .. (text:sub(-1) == "\n" and "" or "\n") .. "\n" .. p.code .. "\n" end
  local ls, at = lines_of(text), {}
  if ls[#ls] == "" then ls[#ls] = nil end
  for i, l in ipairs(ls) do if l:find(p.anchor, 1, true) then at[#at + 1] = i end end
  if #at ~= 1 then return nil, string.format("anchor '%s' is on %d lines of %s (needs 1)", p.anchor, #at, p.file) end
  table.insert(ls, p.where == "after" and at[1] + 1 or at[1], p.code)
  return table.concat(ls, "\n") .. "\n"
end

-- the files of one engine folder, as the tree has them
local function engine_files(folder)
  local out = {}
  for _, f in ipairs(sh_lines("ls engine/" .. folder)) do out[#out + 1] = f end
  table.sort(out)
  return out
end

-- the files the page's folder table lists for folder (the last column of its row)
local function listed_files(text, folder)
  local row = text:match("\n| `" .. folder:gsub("%p", "%%%0") .. "/` |[^\n]*")
  if not row then return nil end
  local cell = row:match("|%s*([^|]*)|%s*$")
  local out = {}
  for f in cell:gmatch("`([^`]+)`") do
    for part in f:gmatch("[^/]+") do out[#out + 1] = part end
  end
  table.sort(out)
  return out
end

describe("docs/architecture.md: the engine's folders", function()
  local text = H.slurp(DOC)

  it("states the layer order of engine/'s folders, and they are all of them", function()
    local order = text:match("\n(core  <  ops  <[^\n]*)\n")
    assert.is_not_nil(order, "the layer line 'core  <  ops  < ...' is missing")
    assert.are.equal("core  <  ops  <  io  <  data  <  sys, search  <  lua  <  dlua.c", order)
    local named = {}
    for w in order:gmatch("[%a]+") do named[w] = true end
    for _, d in ipairs(sh_lines("cd engine && ls -d */")) do
      local folder = d:gsub("/$", "")
      assert.is_true(named[folder] == true, "engine/" .. folder .. "/ is not in the page's layer order")
    end
  end)

  it("lists every file of every folder, and no other", function()
    for _, folder in ipairs({"core", "ops", "io", "data", "sys", "search", "lua"}) do
      local listed = listed_files(text, folder)
      assert.is_not_nil(listed, "no row for `" .. folder .. "/` in the folder table")
      assert.are.same(engine_files(folder), listed, "the row of " .. folder .. "/ differs from engine/" .. folder)
    end
  end)

  it("names the hooks where they are", function()
    local dl_h, aux_h = H.slurp("engine/core/dl.h"), H.slurp("engine/lua/lua_aux.h")
    assert.truthy(dl_h:find("typedef struct dl_node_ref {[^}]*%(%*destroy%)%(dl_node %*n%)"))
    assert.truthy(aux_h:find("lua_CFunction open_core;", 1, true))
    assert.truthy(H.slurp("engine/lua/lua_init.c"):find("->open_core = luaopen_dlua_core", 1, true))
    assert.truthy(H.slurp("engine/lua/lua_pipeline.c"):find("->open_core", 1, true))
    assert.truthy(text:find("**`dl_node_ref.destroy`** (`core/dl.h`)", 1, true))
    assert.truthy(text:find("**`ctx_box.open_core`** (`lua/lua_aux.h`)", 1, true))
  end)
end)

describe("docs/architecture.md: the Lua layers", function()
  it("names every module of each package in its layer's row", function()
    local text = H.slurp(DOC)
    local n = 0
    for _, f in ipairs(sh_lines("cd lua/dlua && ls */*.lua")) do   -- a package's own files (not sub-folders)
      local pkg, base = f:match("^([%w_]+)/([%w_]+%.lua)$")
      local row = text:match("\n| %d | [^\n]*`" .. pkg .. "`[^\n]*")
      assert.is_not_nil(row, "no row of the layer table names the package " .. pkg)
      assert.truthy(row:find(base, 1, true), "lua/dlua/" .. f .. " is not in the row of " .. pkg)
      n = n + 1
    end
    assert.is_true(n >= 60, "found only " .. n .. " modules")
  end)
end)

describe("docs/architecture.md: the walk-throughs", function()
  local text = H.slurp(DOC)

  it("leaves the optimizer and search-algorithm sections to their changes", function()
    assert.truthy(text:find("\n## Adding an optimizer\n", 1, true))
    assert.truthy(text:find("\n## Adding a search algorithm\n", 1, true))
    for _, h in ipairs({"## Adding an op with options: a walk-through", "## Adding a layer: a walk-through",
                        "## Adding a report view: a walk-through"}) do
      assert.truthy(text:find("\n" .. h .. "\n", 1, true), h)
    end
  end)

  it("applies every code block at its anchor", function()
    local ps = patches(text)
    assert.is_true(#ps >= 8, "found only " .. #ps .. " apply comments")
    local files = {}
    for _, p in ipairs(ps) do
      assert.is_not_nil(p.file, DOC .. ":" .. p.line .. ": malformed apply comment")
      if files[p.file] == nil and p.where ~= "new" then files[p.file] = H.slurp(p.file) end
      local new, why = apply(files[p.file], p)
      assert.is_not_nil(new, DOC .. ":" .. p.line .. ": " .. tostring(why))
      files[p.file] = new
    end
    for _, p in ipairs(ps) do
      assert.truthy(files[p.file]:find(p.code, 1, true), DOC .. ":" .. p.line .. ": the block is not in the result")
    end
  end)

  it("creates only files that do not exist yet", function()
    local n = 0
    for path in text:gmatch("<!%-%- apply: (%S+) new %-%->") do
      n = n + 1
      assert.is_nil(io.open(path), path .. " exists: the walk-through that creates it is stale")
    end
    assert.is_true(n >= 1)
  end)

  it("introduces names that do not exist, and uses only ones that do", function()
    local tree = {}
    for _, f in ipairs(sh_lines("git ls-files engine tests/lua tests/c lua")) do
      if (f:match("%.[ch]$") or f:match("%.lua$")) and f ~= "tests/lua/architecture_spec.lua" then
        tree[#tree + 1] = H.slurp(f)
      end
    end
    local all = table.concat(tree, "\n")
    local introduced = {}
    for _, name in ipairs(INTRODUCED) do
      introduced[name] = true
      assert.is_nil(all:find("%f[%w_]" .. name .. "%f[^%w_]"), name .. " exists in the tree: the walk-through is stale")
    end
    local checked = 0
    for name in text:gmatch("`([%a_][%w_]*)[%(`]") do
      if (name:match("^dl_") or name:match("^lt_") or name:match("^DL_") or name:match("^l_")) and not introduced[name] then
        checked = checked + 1
        assert.truthy(all:find("%f[%w_]" .. name .. "%f[^%w_]"), "`" .. name .. "` is in " .. DOC .. " but not in the tree")
      end
    end
    assert.is_true(checked >= 20, "checked only " .. checked .. " names")
  end)
end)

describe("docs/architecture.md: the walk-throughs, applied and built", function()
  -- a full build of a patched copy of the tree: minutes on the 2-core machines, so opt-in
  local build_it = os.getenv("DLUA_WALKTHROUGH_BUILD") == "1" and it or function(name)
    pending(name .. " (DLUA_WALKTHROUGH_BUILD=1 runs it: a full build of a patched copy)")
  end

  build_it("builds with every block applied; the gradcheck, strict, value, twins and report specs pass", function()
    local q = H.shquote
    local dir = H.tmpdir("walkthrough")
    assert(os.execute("git ls-files -co --exclude-standard | grep -v '^tests/fuzz/corpus' | tar -cf - -T - | tar -xf - -C " .. q(dir)))
    local files = {}
    for _, p in ipairs(patches(H.slurp(DOC))) do
      if files[p.file] == nil and p.where ~= "new" then files[p.file] = H.slurp(dir .. "/" .. p.file) end
      files[p.file] = assert(apply(files[p.file], p))
    end
    for f, t in pairs(files) do H.spit(dir .. "/" .. f, t) end
    local p = io.popen(string.format("cd %s && (cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && " ..
      "cmake --build build -j2 2>&1 | tail -20 && DLUA_EXE=build/dlua DLUA_BUILD=build build/dlua %s -o TAP " ..
      "tests/lua/op_table_spec.lua tests/lua/strict_spec.lua tests/lua/tensor_spec.lua tests/lua/nn_spec.lua " ..
      "tests/lua/upsample_spec.lua tests/lua/report_spec.lua tests/lua/differential_spec.lua " ..
      "tests/lua/differential_modules_spec.lua) 2>&1; echo rc=$?", q(dir),
      q((io.popen("command -v busted"):read("l")))))
    local out = p:read("a")
    p:close()
    assert.truthy(out:find("rc=0%s*$"), out)
    assert.is_nil(out:find("\nnot ok"), out)
    assert.truthy(out:find("ok %d+ %- [^\n]*cumsum adds up along a dimension, either way"), out)
    assert.truthy(out:find("ok %d+ %- [^\n]*cumsum"), out)
    assert.truthy(out:find("ok %d+ %- [^\n]*upsample_nearest2d"), out)
    assert.truthy(out:find("ok %d+ %- [^\n]*draws each feasible trial's training time against its objective"), out)
    assert.truthy(out:find("\nok %d+ %- [^\n]*cumsum %([^\n]*matches its torch twin"), out)
    assert.truthy(out:find("\nok %d+ %- [^\n]*upsample_nearest2d %([^\n]*matches its torch twin"), out)
    assert.truthy(out:find("\nok %d+ %- [^\n]*Upsample matches its torch twin"), out)
    require("dlua.util.fs").rm_rf(dir)
  end)
end)

describe("the walk-through patcher", function()
  it("inserts after or before the one line with the anchor, or at the end, and refuses the rest", function()
    local ps = patches(table.concat({"text", "<!-- apply: f.c after int a; -->", "  ```c", "  int b;", "  ```",
      "<!-- apply: f.c before int a; -->", "```c", "int z;", "```", "<!-- apply: f.c at end -->", "```c", "int e;", "```",
      "<!-- apply: f.c after int q; -->", "```c", "x", "```", "<!-- apply: f.c sideways -->", "```c", "y", "```",
      "<!-- apply: g.c new -->", "```c", "int g;", "```"}, "\n"))
    assert.are.equal(6, #ps)
    assert.are.equal("int g;\n", apply(nil, ps[6]))
    assert.are.same({nil, "g.c exists already"}, {apply("", ps[6])})
    local t = "int a;\nint c;\n"
    t = assert(apply(t, ps[1]))
    t = assert(apply(t, ps[2]))
    t = assert(apply(t, ps[3]))
    assert.are.equal("int z;\nint a;\nint b;\nint c;\n\nint e;\n", t)
    assert.are.same({nil, "anchor 'int q;' is on 0 lines of f.c (needs 1)"}, {apply(t, ps[4])})
    assert.are.same({nil, "apply: expects 'FILE after|before ANCHOR', 'FILE at end' or 'FILE new'"}, {apply(t, ps[5])})
  end)
end)
