-- dlua installed as a user installs it (issue 20, "Done when"): `cmake --install` of
-- the build directory into a temporary prefix, then, from a directory that is neither
-- the prefix nor the source tree: `dlua help`, `dlua study --help`, a 2-trial study
-- run with `dlua study` (its trials started by the installed binary) and `dlua report`
-- on it, `man -l` on the installed page, a stock `lua5.4` requiring "dlua" through
-- LUA_PATH/LUA_CPATH, the same prefix moved elsewhere; then `luarocks make` of a copy
-- of the source tree into a temporary tree, and the same checks there.
--
-- Skipped, with the reason, when cmake, man, lua5.4 or luarocks are missing, unless
-- DLUA_REQUIRE_INSTALL=1 (ctest sets it; CI runs ctest), which makes them failures.
-- The luarocks part builds its own Release tree, so it runs once: not for a
-- sanitizer build directory (DLUA_SANITIZE in its CMakeCache.txt).
local H = dofile("tests/lua/helpers.lua")
local fs = require "dlua.util.fs"
local lfs = require "lfs"

local SRC = io.popen("pwd"):read("l")
local BUILD = os.getenv("DLUA_BUILD") or "build"
if BUILD:sub(1, 1) ~= "/" then BUILD = SRC .. "/" .. BUILD end
local REQUIRED = os.getenv("DLUA_REQUIRE_INSTALL") == "1"
local q = H.shquote

-- runs cmd in dir with env (a string of assignments); returns the output (stdout and
-- stderr) and the exit status
local function sh(dir, cmd, env)
  local p = io.popen(string.format("cd %s && %s %s 2>&1; echo \"rc=$?\"", q(dir), env or "", cmd))
  local out = p:read("a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return out:gsub("rc=%d+%s*$", ""), rc
end

local function has_tool(name)
  local _, rc = sh("/", "command -v " .. name .. " >/dev/null")
  return rc == 0
end

local function missing(tools)
  local out = {}
  for _, t in ipairs(tools) do if not has_tool(t) then out[#out + 1] = t end end
  return out
end

local function has(s, sub) return s:find(sub, 1, true) ~= nil end

local cache = fs.read(BUILD .. "/CMakeCache.txt") or ""
local SANITIZED = cache:find("DLUA_SANITIZE:BOOL=ON", 1, true) ~= nil
-- a sanitizer-built core.so needs the sanitizer runtimes loaded first by a stock lua5.4
local function lua_env()
  if not SANITIZED then return "" end
  local libs = {}
  for _, l in ipairs({"libasan.so", "libubsan.so"}) do
    local p = io.popen("gcc -print-file-name=" .. l)
    libs[#libs + 1] = p:read("l")
    p:close()
  end
  return "LD_PRELOAD=" .. q(table.concat(libs, " ")) .. " ASAN_OPTIONS=detect_leaks=0 "
end

-- the commands `dlua help` lists (first word of each indented line), and the data directory line
local function help_commands(out)
  local names = {}
  for line in out:gmatch("[^\n]+") do
    local w = line:match("^  ([a-z][a-z%-]*)")
    if w then names[#names + 1] = w end
  end
  return names, out:match("recipes and examples: (%S+)/recipes,")
end

local RECIPES = {}                                    -- the command names the source tree ships
for _, f in ipairs(fs.list(SRC .. "/recipes")) do
  local b = f:match("^([%w_]+)%.lua$")
  if b then RECIPES[#RECIPES + 1] = (b:gsub("_", "-")) end
end
table.sort(RECIPES)

local EXPERIMENT = [[
local dl = require "dlua"
local nn, optim, data = dl.nn, dl.optim, dl.data
return dl.experiment{
  name = "toy", hparams = {lr = 0.05, steps = 20, batch_size = 16},
  build = function(hp)
    dl.seed(5)
    local x = dl.randn(120, 4)
    local y = x:matmul(dl.randn(4, 3)):argmax(2)
    local tr, va = data.tensors{image = x, label = y}:split{90, 30, seed = 0}
    local model = nn.Sequential{nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)}
    return {model = model, loss = nn.CrossEntropy(), optimizer = optim.Adam{params = model:parameters(), lr = hp.lr},
      data = tr:shuffle{seed = 1}:batch(hp.batch_size), steps = hp.steps,
      eval = {every = 10, sets = {valid = va}}, checkpoint = {every = 10, keep_best = 1, metric = "valid/accuracy"}}
  end}
]]

-- the checks on an installed dlua: exe is its binary, work a scratch directory
local function check_commands(exe, work, datadir)
  local out, rc = sh(work, q(exe) .. " help")
  assert.are.equal(0, rc, out)
  local names, dir = help_commands(out)
  for _, r in ipairs(RECIPES) do assert.truthy(has(" " .. table.concat(names, " ") .. " ", " " .. r .. " "), r .. ": " .. out) end
  for _, c in ipairs({"run", "agent", "help", "study", "report", "batch-size", "early-instability"}) do
    assert.truthy(has(out, "\n  " .. c .. " "), c .. ": " .. out)
  end
  assert.are.equal(datadir, dir, out)
  -- tools/ beside the recipes, executable (docs/interop.md runs tools/torch_interop.py)
  local tool = lfs.attributes(datadir .. "/tools/torch_interop.py")
  assert.truthy(tool and tool.permissions:match("^rwx"), datadir .. "/tools/torch_interop.py")
  assert.truthy(has(out, "  study                a quasi-random study, ending with the report and the diagnosis\n"), out)

  out, rc = sh(work, q(exe) .. " study --help")
  assert.are.equal(0, rc, out)
  assert.truthy(has(out, "usage: dlua study STUDYFILE"), out)
  local out2, rc2 = sh(work, q(exe) .. " help study")
  assert.are.equal(0, rc2)
  assert.are.equal(out, out2)

  out, rc = sh(work, q(exe) .. " stduy x.lua")
  assert.are.equal(1, rc, out)
  assert.are.equal("dlua: unknown command 'stduy' (and no such file); did you mean 'study'?\n", out)
  out, rc = sh(work, q(exe) .. " batch-sise")
  assert.are.equal(1, rc, out)
  assert.are.equal("dlua: unknown command 'batch-sise' (and no such file); did you mean 'batch-size'?\n", out)
  out, rc = sh(work, q(exe) .. " qqqqqqqq")
  assert.are.equal(1, rc, out)
  assert.are.equal("dlua: unknown command 'qqqqqqqq' (and no such file); dlua help lists the commands\n", out)

  -- the installed binary runs its own library, not the source tree's
  out, rc = sh(work, q(exe) .. [[ -e 'print(package.searchpath("dlua.cli.commands", package.path))']])
  assert.are.equal(0, rc, out)
  assert.is_nil(out:find(SRC .. "/lua/", 1, true), out)
  assert.truthy(has(out, "/share/lua/5.4/dlua/cli/commands.lua"), out)
end

-- a 2-trial study with `dlua study`, its trials started by exe, then `dlua report` on it
local function check_study(exe, work)
  H.spit(work .. "/exp.lua", EXPERIMENT)
  local out, rc = sh(work, q(exe) .. " study exp.lua --name toy --nuisance lr=log:1e-3:1e-1 --fixed steps=20 " ..
    "--trials 2 --parallel 2 --threads 1 --out runs --quiet --no-report")
  assert.are.equal(0, rc, out)
  local trials = fs.read(work .. "/runs/toy/trials.csv")
  assert.truthy(trials, out)
  -- issue 20 item 7: the hyperparameter steps and the steps run are two columns that
  -- Python's csv module reads without losing one
  if fs.exists("/usr/bin/python3") then
    H.spit(work .. "/read.py", table.concat({
      "import csv, sys",
      "with open(sys.argv[1], newline='') as f:",
      "    r = csv.DictReader(f); rows = list(r); names = r.fieldnames",
      "assert len(set(names)) == len(names), names",
      "assert names[:2] == ['id', 'status'] and 'hp.lr' in names and 'hp.seed' in names, names",
      "for row in rows:",
      "    assert row['status'] == 'done' and row['hp.steps'] == '20' and row['steps_run'] == '20', row",
      "    assert 1e-3 <= float(row['hp.lr']) <= 1e-1, row",
      "print(len(rows), len(names))"}, "\n") .. "\n")
    local pout, prc = sh(work, "/usr/bin/python3 read.py runs/toy/trials.csv")
    assert.are.equal(0, prc, pout .. trials)
    assert.are.equal("2", pout:match("^(%d+) "), pout)
  else
    local n = 0
    for line in trials:gmatch("[^\n]+") do if line:find(",done,", 1, true) then n = n + 1 end end
    assert.are.equal(2, n, trials)
  end
  -- dlua run SCRIPT is dlua SCRIPT; a directory named like a command does not hide it
  out, rc = sh(work, q(exe) .. " run exp.lua --help")
  assert.are.equal(0, rc, out)
  assert.truthy(has(out, "batch_size") and has(out, "--steps"), out)
  out, rc = sh(work, q(exe) .. " run nowhere.lua")
  assert.are.equal(1, rc, out)
  assert.are.equal("dlua: cannot open nowhere.lua: No such file or directory\n", out)   -- as dlua nowhere.lua says
  fs.mkdir_p(work .. "/report")
  out, rc = sh(work, q(exe) .. " report runs/toy --out toy.html")
  assert.are.equal(0, rc, out)
  assert.truthy(has(out, "report: toy.html"), out)
  local html = fs.read(work .. "/toy.html")
  assert.truthy(html and has(html, "<svg") and has(html, "toy"), out)
end

local function check_lua(work, lpath, cpath, prefix_marker)
  local env = string.format("%sLUA_PATH=%s LUA_CPATH=%s ", lua_env(), q(lpath), q(cpath))
  local out, rc = sh(work, [[lua5.4 -e 'local dl = require "dlua"
local x = dl.tensor({{1, 2}, {3, 4}}):requires_grad(true)
local y = (x * x):sum(); y:backward()
print(y:item(), x.grad[2][2]:item(), package.searchpath("dlua.core", package.cpath))']], env)
  assert.are.equal(0, rc, out)
  local y, g, so = out:match("^(%S+)\t(%S+)\t(%S+)\n$")
  assert.are.equal(30, tonumber(y), out)                 -- 1 + 4 + 9 + 16
  assert.are.equal(8, tonumber(g), out)                  -- d(x^2)/dx at 4
  assert.truthy(so and has(so, prefix_marker) and so:match("/lib/lua/5%.4/dlua/core%.so$"), out)
end

describe("dlua commands in the build tree", function()
  it("run the source tree's recipes from any directory", function()
    local exe = BUILD .. "/dlua"
    local work = H.tmpdir("cmds")
    local out, rc = sh(work, q(exe) .. " help")
    assert.are.equal(0, rc, out)
    local names, dir = help_commands(out)
    assert.are.equal(SRC, dir, out)
    assert.truthy(#names >= #RECIPES + 3, out)
    out, rc = sh(work, q(exe) .. " batch-size --help")
    assert.are.equal(0, rc, out)
    assert.truthy(has(out, "usage: dlua batch-size"), out)
    -- dlua run FILE says what dlua FILE says: unused flags, a study file's mistake at its line
    H.spit(work .. "/plain.lua", 'print("hi")\n')
    H.spit(work .. "/bad.lua", 'local dl = require "dlua"\nreturn dl.study{\n  name = "x", experiment = "e.lua",\n  trails = 3,\n}\n')
    for _, c in ipairs({"plain.lua --steps 5", "bad.lua"}) do
      local o1, r1 = sh(work, q(exe) .. " " .. c)
      local o2, r2 = sh(work, q(exe) .. " run " .. c)
      assert.are.equal(1, r1, o1)
      assert.are.equal(r1, r2)
      assert.are.equal(o1, o2)
    end
    assert.truthy(has((sh(work, q(exe) .. " run bad.lua")), "dlua: bad.lua:4: dl.study: unknown option 'trails'"))
    out, rc = sh(work, q(exe) .. " reprot x")
    assert.are.equal(1, rc, out)
    assert.are.equal("dlua: unknown command 'reprot' (and no such file); did you mean 'report'?\n", out)
    fs.rm_rf(work)
  end)
end)

describe("cmake --install", function()
  local need = missing({"cmake", "man", "lua5.4"})
  if not fs.exists(BUILD .. "/cmake_install.cmake") then need[#need + 1] = BUILD .. "/cmake_install.cmake" end
  if #need > 0 then
    if REQUIRED then
      it("has what the install test needs", function() error("missing: " .. table.concat(need, ", ")) end)
    else
      pending("skipped: missing " .. table.concat(need, ", ") .. " (DLUA_REQUIRE_INSTALL=1 makes this a failure)")
    end
    return
  end

  local root, prefix, work
  setup(function()
    root = H.tmpdir("install")
    prefix = root .. "/prefix"
    work = root .. "/work"
    fs.mkdir_p(work)
    local out, rc = sh(SRC, "cmake --install " .. q(BUILD) .. " --prefix " .. q(prefix))
    assert(rc == 0, out)
  end)
  teardown(function() if root then fs.rm_rf(root) end end)

  it("puts the binary, the library, the C module, recipes, examples, docs and the man page in place", function()
    for _, p in ipairs({"bin/dlua", "share/lua/5.4/dlua/init.lua", "share/lua/5.4/dlua/cli/commands.lua",
                        "share/lua/5.4/dlua/cli/site.lua", "lib/lua/5.4/dlua/core.so", "share/dlua/recipes/study.lua",
                        "share/dlua/recipes/batch_size.lua", "share/dlua/examples/fashion_mnist.lua",
                        "share/dlua/examples/models/mlp.lua", "share/doc/dlua/getting-started.md",
                        "share/doc/dlua/api/train.md", "share/doc/dlua/README.md", "share/man/man1/dlua.1"}) do
      assert.truthy(fs.exists(prefix .. "/" .. p), p)
    end
    assert.is_false(fs.exists(prefix .. "/share/dlua/lua"))       -- the old layout is gone
  end)

  it("runs the commands from another directory, with the recipes of the prefix", function()
    check_commands(prefix .. "/bin/dlua", work, prefix .. "/share/dlua")
  end)

  it("runs a 2-trial study with dlua study and reports it with dlua report", function()
    check_study(prefix .. "/bin/dlua", work)
  end)

  it("installs a man page that man reads and that names every command", function()
    local out, rc = sh(work, "man -P cat -l " .. q(prefix .. "/share/man/man1/dlua.1"), "MANWIDTH=100 ")
    assert.are.equal(0, rc, out)
    assert.truthy(has(out, "dlua - train and tune deep-learning models"), out)
    for _, c in ipairs(RECIPES) do
      assert.truthy(out:find("\n       " .. c:gsub("%-", "%%-") .. " ", 1), c .. " is not in the man page")
    end
    for _, c in ipairs({"run", "agent", "help"}) do assert.truthy(out:find("\n       " .. c .. " ", 1, true), c) end
  end)

  it("lets a stock lua5.4 require dlua with LUA_PATH and LUA_CPATH pointing at the prefix", function()
    check_lua(work, prefix .. "/share/lua/5.4/?.lua;" .. prefix .. "/share/lua/5.4/?/init.lua;;",
      prefix .. "/lib/lua/5.4/?.so;;", prefix)
  end)

  it("still works when the whole prefix is moved (everything is found relative to it)", function()
    local moved = root .. "/moved"
    local out, rc = sh(root, "mv prefix moved")
    assert.are.equal(0, rc, out)
    local ok, err = pcall(check_commands, moved .. "/bin/dlua", work, moved .. "/share/dlua")
    sh(root, "mv moved prefix")
    assert(ok, err)
  end)
end)

describe("luarocks make", function()
  local need = missing({"luarocks", "lua5.4", "cmake", "tar", "git", "unzip"})
  if SANITIZED then
    pending("skipped for a sanitizer build directory: luarocks builds its own Release tree (run once, with build/)")
    return
  end
  if #need > 0 then
    if REQUIRED then
      it("has what the luarocks test needs", function() error("missing: " .. table.concat(need, ", ")) end)
    else
      pending("skipped: missing " .. table.concat(need, ", ") .. " (DLUA_REQUIRE_INSTALL=1 makes this a failure)")
    end
    return
  end

  it("installs the rockspec into a temporary tree: binary, library, C module and commands", function()
    local root = H.tmpdir("rock")
    local src, tree, work = root .. "/src", root .. "/tree", root .. "/work"
    fs.mkdir_p(src)
    fs.mkdir_p(work)
    -- a copy of the source tree (tracked and new files), so the build leaves nothing behind here
    local out, rc = sh(SRC, "git ls-files -co --exclude-standard -z | tar --null -cf - -T - | tar -xf - -C " .. q(src))
    assert.are.equal(0, rc, out)
    -- --deps-mode=none: Debian's lua-filesystem is a system package, not a rock in the tree
    out, rc = sh(src, "luarocks --lua-version=5.4 make --tree=" .. q(tree) .. " --deps-mode=none rockspecs/dlua-scm-1.rockspec")
    assert.are.equal(0, rc, out)
    assert.truthy(has(out, "dlua scm-1 is now installed in " .. tree), out)
    assert.truthy(fs.exists(tree .. "/bin/dlua") and fs.exists(tree .. "/lib/lua/5.4/dlua/core.so") and
      fs.exists(tree .. "/share/lua/5.4/dlua/init.lua"), out)
    local rock = tree .. "/lib/luarocks/rocks-5.4/dlua/scm-1"
    -- built outside the source tree: no build.luarocks/ left there, no build directory left in the rock
    assert.is_false(fs.exists(src .. "/build.luarocks"))
    assert.is_false(fs.exists(rock .. "/build.tmp"))
    check_commands(tree .. "/bin/dlua", work, rock .. "/share/dlua")
    local paths = io.popen("luarocks --lua-version=5.4 --tree=" .. q(tree) .. " path --lr-path"):read("l")
    local cpaths = io.popen("luarocks --lua-version=5.4 --tree=" .. q(tree) .. " path --lr-cpath"):read("l")
    check_lua(work, paths .. ";;", cpaths .. ";;", tree)
    -- the source rock (scripts/rock.sh: an archive of this repository at HEAD, luarocks pack)
    -- of the copy, made a repository of its own (luarocks make left nothing in it to commit)
    out, rc = sh(src, "git init -q && git add -A && git -c user.name=dlua -c user.email=dlua@localhost commit -qm copy && " ..
      "scripts/rock.sh")
    assert.are.equal(0, rc, out)
    out, rc = sh(src, "unzip -l dist/dlua-scm-1.src.rock")
    assert.are.equal(0, rc, out)
    assert.truthy(has(out, "dlua-scm.tar.gz") and has(out, "dlua-scm-1.rockspec"), out)
    fs.rm_rf(root)
  end)
end)
