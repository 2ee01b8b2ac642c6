-- Every repository path named in a comment or a document resolves (issue 31: thirteen
-- comments in nine C files named Lua files that no longer existed). The comments of
-- engine/, lua/, recipes/, examples/, tests/, scripts/ and tools/ (C, Lua, shell,
-- Python) and the whole text of README.md and docs/**/*.md are read; each word that looks
-- like a path into the tree becomes a reference:
--   engine/io/fileio.c, lua/dlua/train/flags.lua, docs/formats.md   from the repository root
--   dlua/train/flags.lua                                            a module file under lua/
--   train/flags.lua, report/assets/app.js                           relative to lua/dlua/
--   core/dl.h, lua/lua_aux.h                                        relative to engine/
--   ../formats.md, api/tensor.md                                    relative to the file's folder
--   [x](formats.md#checkpoints), [y](#dtypes)                       a heading of that document
--   engine/lua/lua_*.c, lua/dlua/**/*.lua                           a glob: something matches
--   dlua.train.flags                                                a module of the library
--   lua_aux.c, fileio.h                                             a C file of the tree
-- A reference that resolves in none of the ways its form allows fails, naming file:line
-- and the path. A document may name a file a walk-through creates after declaring it
-- with <!-- apply: path new --> (architecture_spec checks that it does not exist yet).
-- Paths a document names as the user's own (runs/, my_model.lua) have no known first
-- folder and are not references.
local H = dofile("tests/lua/helpers.lua")

-- first folders a reference may start with, and where each form is looked up
local ROOTS = {engine = true, lua = true, recipes = true, examples = true, tests = true,
  scripts = true, docs = true, tools = true, vendor = true, rockspecs = true}
local PACKAGES = {cli = true, data = true, dist = true, nn = true, optim = true, report = true,
  search = true, study = true, train = true, util = true}
local ENGINE = {core = true, ops = true, io = true, data = true, sys = true, search = true, lua = true}
local FILE_EXT = {c = true, h = true, lua = true, md = true, sh = true, py = true, js = true,
  css = true, json = true, html = true, png = true, txt = true, supp = true, rockspec = true}

-- a lab notebook kept verbatim: the paths it names were true on the day it records
local HISTORY = "docs/benchmarks-history.md"

-- the files of the tree (tracked and new), as a set and a list
local function tree_files()
  local set, list = {}, {}
  local p = assert(io.popen("git ls-files --cached --others --exclude-standard 2>/dev/null"))
  for path in p:lines() do
    if not set[path] then set[path] = true; list[#list + 1] = path end
  end
  p:close()
  return set, list
end

-- the directories of a file set
local function dirs_of(set)
  local dirs = {}
  for path in pairs(set) do
    local d = path:match("^(.*)/[^/]*$")
    while d do dirs[d] = true; d = d:match("^(.*)/[^/]*$") end
  end
  return dirs
end

-- "a/./b/../c" -> "a/c"; nil when it climbs above the root
local function normalize(path)
  local out = {}
  for seg in path:gmatch("[^/]+") do
    if seg == ".." then
      if #out == 0 then return nil end
      out[#out] = nil
    elseif seg ~= "." then
      out[#out + 1] = seg
    end
  end
  return table.concat(out, "/")
end

-- a glob (* within a name, ** over folders) as an anchored Lua pattern
local function glob_pattern(g)
  local p = g:gsub("[%^%$%(%)%%%.%[%]%+%-%?]", "%%%0")
  p = p:gsub("%*%*/", "\0"):gsub("%*", "[^/]*"):gsub("\0", ".-/?")
  return "^" .. p .. "$"
end

--- The comment text of source s in language lang ("c", "lua", "sh", "md"), as a list
-- of {text, line}; "md" keeps everything.
local function comments(s, lang)
  local out, line, i, n = {}, 1, 1, #s
  local function add(text, at)
    local l = at
    for piece in (text .. "\n"):gmatch("([^\n]*)\n") do
      out[#out + 1] = {text = piece, line = l}
      l = l + 1
    end
  end
  if lang == "md" then add(s, 1); return out end
  while i <= n do
    local c = s:sub(i, i)
    if c == "\n" then line = line + 1; i = i + 1
    elseif lang == "c" and s:sub(i, i + 1) == "/*" then
      local j = select(2, s:find("*/", i + 2, true)) or n
      add(s:sub(i + 2, j - 2), line)
      for _ in s:sub(i, j):gmatch("\n") do line = line + 1 end
      i = j + 1
    elseif (lang == "c" and s:sub(i, i + 1) == "//") or (lang == "lua" and s:sub(i, i + 1) == "--")
        or (lang == "sh" and c == "#") then
      local eq = lang == "lua" and s:match("^%-%-%[(=*)%[", i)
      if eq then
        local close = "]" .. eq .. "]"
        local j = select(2, s:find(close, i, true)) or n
        add(s:sub(i, j), line)
        for _ in s:sub(i, j):gmatch("\n") do line = line + 1 end
        i = j + 1
      else
        local j = (s:find("\n", i, true) or n + 1) - 1
        add(s:sub(i, j), line)
        i = j + 1
      end
    elseif c == '"' or c == "'" or (lang == "lua" and c == "[" and s:match("^%[=*%[", i)) then
      local j
      if c == "[" then
        local eq = s:match("^%[(=*)%[", i)
        j = select(2, s:find("]" .. eq .. "]", i, true)) or n
      else
        j = i + 1
        while j <= n do
          local d = s:sub(j, j)
          if d == "\\" then j = j + 1
          elseif d == c or d == "\n" then break end
          j = j + 1
        end
        if s:sub(j, j) == "\n" then j = j - 1 end   -- an apostrophe in code (C char '\n' is fine)
      end
      for _ in s:sub(i, j):gmatch("\n") do line = line + 1 end
      i = j + 1
    else
      i = i + 1
    end
  end
  return out
end

-- C files the comments name that are not ours: Lua's own interpreter and headers
local EXTERNAL_C = {["lua.c"] = true, ["lua.h"] = true, ["lauxlib.h"] = true, ["lualib.h"] = true,
  ["cblas.h"] = true, ["zlib.h"] = true, ["mpi.h"] = true}
-- paths that exist only after a step the tree does not hold
local GENERATED = {
  ["tests/browser/node_modules"] = "npm ci in tests/browser",
  ["dlua/cli/site.lua"] = "written by cmake --install beside the installed library",
}

--- The references in one line of comment text: {path, kind} with kind "path", "module",
-- "bare" (a C file name without a folder) or, in Markdown (md true), "link" (a link's
-- target, relative to the document). Placeholders (a segment in capitals: recipes/NAME.lua,
-- dlua.core.NAME) and units (examples/s) are not references.
local function references(text, md)
  local out, seen = {}, {}
  -- words of path characters, not preceded by one (a URL's or an absolute path's tail is
  -- not a repository path: it starts with "/" or follows ":" or "~")
  for pre, word in ("\0" .. text):gmatch("([^%w_%.%-/%*])([%w_%.%-/%*]+)") do
    word = word:gsub("[%.%-]+$", "")          -- a sentence's full stop, a dash
    local dir = word:match("/$")
    local ext = word:match("%.([%a]+)$")
    ext = ext and FILE_EXT[ext] and ext
    local first = word:match("^([^/]+)/")
    local _, segments = word:gsub("[^/]+", "")
    local placeholder = word:match("%f[%w]%u%u+%f[^%w]")
    if pre ~= ":" and pre ~= "~" and pre ~= "$" and pre ~= "@" and pre ~= "<" and pre ~= ">"
        and word:sub(1, 1) ~= "/" and not word:find("//", 1, true) and not placeholder then
      if first == "." or first == ".." then
        if ext then out[#out + 1] = {path = word, kind = "path"} end
      elseif first and (ROOTS[first] or first == "dlua") then
        if ext or dir or segments >= 3 then out[#out + 1] = {path = word, kind = "path"} end
      elseif first and (PACKAGES[first] or ENGINE[first]) and ext then
        out[#out + 1] = {path = word, kind = "path"}
      elseif not first and word:match("^dlua%.[%a_][%w_.]*$") and not ext and not word:match("%.%u") then
        out[#out + 1] = {path = word, kind = "module"}
      elseif not first and word:match("^[%a_][%w_]*%.[ch]$") then
        out[#out + 1] = {path = word, kind = "bare"}
      end
    end
  end
  for _, r in ipairs(out) do seen[r.path] = true end
  if md then
    for target in text:gmatch("%]%(([^%)%s#]+)") do
      if not target:find("^%a[%w+.-]*:") and not seen[target] then
        seen[target] = true
        out[#out + 1] = {path = target, kind = "link"}
      end
    end
    for target, anchor in text:gmatch("%]%(([^%)%s#]*)#([^%)%s]+)%)") do
      if not target:find("^%a[%w+.-]*:") then out[#out + 1] = {path = target, anchor = anchor, kind = "anchor"} end
    end
  end
  return out
end

--- GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to dashes.
local function slug(heading)
  return (heading:lower():gsub("[^%w%s%-_]", ""):gsub("%s", "-"))
end

--- The anchors of a Markdown text (its headings outside code fences).
local function anchors(text)
  local out, fence = {}, nil
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    local f = line:match("^%s*(```+)")
    if f then
      if not fence then fence = f elseif f == fence then fence = nil end
    elseif not fence then
      local h = line:match("^#+%s+(.-)%s*$")
      if h then out[slug(h)] = true end
    end
  end
  return out
end

--- Whether reference r named in file `from` resolves in the tree (set: path -> true);
-- false and why when it does not (nil: it does not exist).
local function resolves(r, from, set, dirs, list, read)
  if r.kind == "anchor" then                 -- a heading of the linked document (or of this one)
    local here = from:match("^(.*)/[^/]*$")
    local file = r.path == "" and from or normalize((here and here .. "/" or "") .. r.path)
    if not file or not set[file] then return false, "links to a file that does not exist" end
    if not anchors(read(file))[r.anchor] then
      return false, string.format("names no heading of %s", file)
    end
    return true
  end
  if r.kind == "module" then                 -- a module, or a field of one: dlua.util.proc.sleep
    local name = r.path
    while name:find("^dlua%.") do
      local p = "lua/" .. name:gsub("%.", "/")
      if name == "dlua.core" or set[p .. ".lua"] or set[p .. "/init.lua"] then return true end
      name = name:match("^(.*)%.[^.]*$")
    end
    return false
  end
  if r.kind == "bare" then                   -- one C file of that name, or one not ours
    if EXTERNAL_C[r.path] then return true end
    local n = 0
    for _, f in ipairs(list) do
      if (f:match("^engine/") or f:match("^tests/")) and f:match("[^/]+$") == r.path then n = n + 1 end
    end
    if n > 1 then return false, string.format("names %d files: give its folder", n) end
    return n == 1
  end
  if GENERATED[r.path] then return true end
  local here = from:match("^(.*)/[^/]*$")
  local bases = {""}
  if here then bases[#bases + 1] = here .. "/" end
  if r.kind == "link" then bases = {here and here .. "/" or ""} end
  local first = r.path:match("^([^/]+)/")
  if first == "dlua" then bases[#bases + 1] = "lua/" end
  if PACKAGES[first] then bases[#bases + 1] = "lua/dlua/" end
  if ENGINE[first] then bases[#bases + 1] = "engine/" end
  for _, b in ipairs(bases) do
    local p = normalize(b .. r.path)
    if not p then return true end            -- above the root: outside the tree
    do
      if r.path:find("*", 1, true) then
        local pat = glob_pattern(p)
        for _, f in ipairs(list) do if f:match(pat) then return true end end
        for d in pairs(dirs) do if d:match(pat) then return true end end
      elseif set[p] or dirs[p] or p == "" then
        return true
      end
    end
  end
  return false
end

-- the files whose comments (or, for Markdown, whole text) are read, and their language
local function sources(list)
  local out = {}
  for _, f in ipairs(list) do
    local top = f:match("^([^/]+)/")
    local lang
    if f == "README.md" or (top == "docs" and f:match("%.md$")) then lang = "md"
    elseif top == "engine" or top == "lua" or top == "recipes" or top == "examples"
        or top == "tests" or top == "scripts" or top == "tools" then
      if f:match("%.[ch]$") or f:match("%.js$") then lang = "c"
      elseif f:match("%.lua$") then lang = "lua"
      elseif f:match("%.sh$") or f:match("%.py$") then lang = "sh" end
    end
    if lang and not f:match("^tests/fixtures/") and not f:match("^tests/fuzz/corpus/")
        and not f:match("^tests/browser/node_modules/") and not f:match("^lua/dlua/report/assets/uplot")
        and f ~= HISTORY then
      out[#out + 1] = {path = f, lang = lang}
    end
  end
  return out
end

--- The references of the tree that do not resolve, as "file:line: path".
local function stale(set, list, read)
  local dirs = dirs_of(set)
  local problems = {}
  for _, src in ipairs(sources(list)) do
    local text = read(src.path)
    local new = {}                            -- files a walk-through creates (architecture_spec)
    if src.lang == "md" then
      for p in text:gmatch("<!%-%- apply: (%S+) new %-%->") do new[p] = true; new[p:match("[^/]+$")] = true end
    end
    for _, c in ipairs(comments(text, src.lang)) do
      for _, r in ipairs(references(c.text, src.lang == "md")) do
        local ok, why = new[r.path], nil
        if not ok then ok, why = resolves(r, src.path, set, dirs, list, read) end
        if not ok then
          problems[#problems + 1] = string.format("%s:%d: %s '%s' %s", src.path, c.line,
            r.kind == "bare" and "C file" or r.kind, r.anchor and r.path .. "#" .. r.anchor or r.path,
            why or "does not exist")
        end
      end
    end
  end
  return problems
end

describe("paths named in comments and docs", function()
  it("all resolve in the tree", function()
    local set, list = tree_files()
    assert.is_true(#list > 300, "git ls-files found only " .. #list .. " files")
    assert.are.equal("", table.concat(stale(set, list, H.slurp), "\n"))
  end)
end)

describe("the stale-reference checker", function()
  local list = {"engine/ops/autograd.c", "engine/core/dl.h", "engine/lua/lua_aux.c", "engine/lua/lua_aux.h", "engine/lua/lua_ops.c",
    "lua/dlua/train/flags.lua", "lua/dlua/data/init.lua", "lua/dlua/report/assets/app.js",
    "docs/formats.md", "docs/api/tensor.md", "tests/lua/x_spec.lua", "README.md"}
  local set = {}
  for _, f in ipairs(list) do set[f] = true end

  it("reads comments of C and Lua, not their code or strings, and all of Markdown", function()
    local c = comments('int a; /* see engine/x.c\n and y.h */ char *s = "engine/z.c"; // z\n' ..
      "char c = '\"'; // after engine/w.c\n", "c")
    assert.are.same({{text = " see engine/x.c", line = 1}, {text = " and y.h ", line = 2},
      {text = "// z", line = 2}, {text = "// after engine/w.c", line = 3}}, c)
    local l = comments('local s = "lua/a.lua" -- lua/b.lua\n--[[ x\nlua/c.lua ]]\nlocal t = [[lua/d.lua]]\n', "lua")
    assert.are.same({{text = "-- lua/b.lua", line = 1}, {text = "--[[ x", line = 2},
      {text = "lua/c.lua ]]", line = 3}}, l)
    assert.are.same({{text = "a", line = 1}, {text = "b", line = 2}}, comments("a\nb", "md"))
  end)

  it("finds the forms of a path and leaves URLs, absolute paths, units and the user's files alone", function()
    local r = references("see engine/autograd.c, `dlua/train/flags.lua`; train/flags.lua and core/dl.h " ..
      "(lua_aux.c) dlua.train.flags https://x.org/docs/a.md /usr/lib/lua/5.4 ~/lua/x.lua runs/a/b.json " ..
      "my_model.lua nn/ data/ engine/lua/lua_*.c. train/valid dlua.core docs/ examples/s recipes/NAME.lua " ..
      "dlua.Tensor dlua.core.NAME ./report ../x.md engine/setting lua/dlua/report [a](api/x.md) [b](https://y.org)")
    local got = {}
    for _, x in ipairs(r) do got[#got + 1] = x.kind .. " " .. x.path end
    assert.are.same({"path engine/autograd.c", "path dlua/train/flags.lua", "path train/flags.lua",
      "path core/dl.h", "bare lua_aux.c", "module dlua.train.flags", "path engine/lua/lua_*.c",
      "module dlua.core", "path docs/", "path ../x.md", "path lua/dlua/report"}, got)
    local md = {}
    for _, x in ipairs(references("[a](api/x.md) [b](https://y.org) [c](#anchor) [d](../formats.md) [e](x.md#h)", true)) do
      md[#md + 1] = x.kind .. " " .. x.path .. (x.anchor and "#" .. x.anchor or "")
    end
    assert.are.same({"path ../formats.md", "link api/x.md", "link x.md", "anchor #anchor", "anchor x.md#h"}, md)
  end)

  it("fails each stale form naming file:line and the path, and passes the live ones", function()
    local files = {
      ["engine/ops/autograd.c"] = "/* engine/autograd.c engine/ops/autograd.c autograd.c gone.c lua.h */\n" ..
        "// core/dl.h lua/lua_aux.h engine/lua_*.c engine/lua/lua_*.c ../../../outside.c dup.c\n",
      ["lua/dlua/train/flags.lua"] = "-- dlua/train/flags.lua dlua/flags.lua train/flags.lua nn.lua\n" ..
        "-- data/readers.lua lua/dlua/**/*.lua dlua.train.flags dlua.data dlua.nowhere\n" ..
        "-- dlua.train.flags.parse dlua.fs.read dlua/cli/site.lua\n",
      ["docs/formats.md"] = "# Formats\n\n## Check points, `safetensors`\n```\n# not a heading\n```\n",
      ["docs/api/tensor.md"] = "[f](../formats.md) [g](formats.md) see tests/lua/x_spec.lua, tests/lua/y_spec.lua\n" ..
        "and report/assets/app.js <!-- apply: engine/ops/new.c new --> engine/ops/new.c engine/ops/other.c\n" ..
        "[a](../formats.md#check-points-safetensors) [b](../formats.md#not-a-heading) [c](#top) [d](x.md#y)\n" ..
        "# Top\n",
    }
    local more = {"engine/io/dup.c", "tests/c/dup.c"}
    local all = {}
    for _, f in ipairs(list) do all[#all + 1] = f end
    for _, f in ipairs(more) do all[#all + 1] = f; set[f] = true end
    local p = stale(set, all, function(path) return files[path] or "" end)
    for _, f in ipairs(more) do set[f] = nil end
    table.sort(p)
    assert.are.same({
      "docs/api/tensor.md:1: link 'formats.md' does not exist",
      "docs/api/tensor.md:1: path 'tests/lua/y_spec.lua' does not exist",
      "docs/api/tensor.md:2: path 'engine/ops/other.c' does not exist",
      "docs/api/tensor.md:3: anchor '../formats.md#not-a-heading' names no heading of docs/formats.md",
      "docs/api/tensor.md:3: anchor 'x.md#y' links to a file that does not exist",
      "docs/api/tensor.md:3: link 'x.md' does not exist",
      "engine/ops/autograd.c:1: C file 'gone.c' does not exist",
      "engine/ops/autograd.c:1: path 'engine/autograd.c' does not exist",
      "engine/ops/autograd.c:2: C file 'dup.c' names 2 files: give its folder",
      "engine/ops/autograd.c:2: path 'engine/lua_*.c' does not exist",
      "lua/dlua/train/flags.lua:1: path 'dlua/flags.lua' does not exist",
      "lua/dlua/train/flags.lua:2: module 'dlua.nowhere' does not exist",
      "lua/dlua/train/flags.lua:2: path 'data/readers.lua' does not exist",
      "lua/dlua/train/flags.lua:3: module 'dlua.fs.read' does not exist",
    }, p)
  end)
end)
