--- dlua.cli.commands: `dlua COMMAND ...`, for a bare word that is not a file
-- (engine/dlua.c hands it here).
--
--   dlua help [COMMAND]          the commands, one line each (or COMMAND's own help)
--   dlua run SCRIPT [args]       the same as `dlua SCRIPT [args]`
--   dlua agent STUDY_DIR [...]   trials of a study directory, beside other agents
--   dlua RECIPE [args]           a shipped recipe: `dlua study FILE` is
--                                `dlua <datadir>/recipes/study.lua FILE`; `dlua batch-size`
--                                runs recipes/batch_size.lua
--
-- The recipes are found through the data directory of the installation (share/dlua,
-- named by the generated dlua/cli/site.lua that `cmake --install` puts beside this
-- file), or the source tree's recipes/ when run from there; never through the
-- working directory. A command's summary in `dlua help` is the first sentence of its
-- recipe's header without its parentheses, up to the first colon or full stop. An unknown
-- command is one line with the nearest command, exit status 1. The agent's errors print
-- as one line led by the user's location when there is one (dlua.util.blame);
-- DLUA_DEBUG=1 adds the traceback.
local util = require "dlua.util"
local fs = require "dlua.util.fs"
local blame = require "dlua.util.blame"
local flags = require "dlua.train.flags"
local study = require "dlua.study"
local site = require "dlua.study.site"
local cli = require "dlua.cli"

local M = {}

-- the directory holding this file (…/dlua/cli), from the chunk's own source name
local function here()
  local src = debug.getinfo(1, "S").source
  local path = src:sub(1, 1) == "@" and src:sub(2) or "./x"
  return path:match("^(.*)/[^/]*$") or "."
end

-- path with "." and "dir/.." taken out
local function normalize(path)
  local out, abs = {}, path:sub(1, 1) == "/"
  for part in path:gmatch("[^/]+") do
    if part == ".." and #out > 0 and out[#out] ~= ".." then out[#out] = nil
    elseif part ~= "." and not (part == ".." and abs) then out[#out + 1] = part end
  end
  local s = table.concat(out, "/")
  if abs then return "/" .. s end
  return s == "" and "." or s
end

--- The data directory (recipes/ and examples/): the installed one named by
-- dlua/cli/site.lua (relative to the directory that holds dlua/, or absolute), else
-- the source tree's root. nil when neither has a recipes/ directory.
function M.datadir()
  local dir = here()
  local root = dir .. "/../.."
  local site = dir .. "/site.lua"
  local cands = {}
  if fs.exists(site) then
    local ok, s = pcall(dofile, site)
    if ok and type(s) == "table" and type(s.datadir) == "string" then
      cands[#cands + 1] = s.datadir:sub(1, 1) == "/" and s.datadir or root .. "/" .. s.datadir
    end
  end
  cands[#cands + 1] = root .. "/.."                 -- the source tree: lua/dlua/cli -> the repository
  for _, c in ipairs(cands) do
    if fs.is_dir(c .. "/recipes") then return normalize(c) end
  end
end

-- the header's summary: the text after "-- recipes/NAME.lua -- " over the leading
-- comment lines, without parentheses, up to the first ':' or '.' that ends a clause
local function summary(path)
  local f = io.open(path, "r")
  if not f then return "" end
  local parts = {}
  for line in f:lines() do
    local c = line:match("^%-%-%s?(.*)$")
    if not c or c:match("^%s") or c == "" then break end    -- an indented line starts the usage block
    parts[#parts + 1] = c
  end
  f:close()
  local text = table.concat(parts, " "):gsub("^%S+%.lua %-%- ", ""):gsub("%s*%b()", "")
  local cut = text:find("[:.]%s") or text:find("[:.]$")
  if cut then text = text:sub(1, cut - 1) end
  return (text:gsub("%s+$", ""))
end

-- command name -> recipe path, for every recipes/*.lua of the data directory
local function recipes()
  local out, dir = {}, M.datadir()
  if not dir then return out end
  for _, name in ipairs(fs.list(dir .. "/recipes")) do
    local base = name:match("^([%w_]+)%.lua$")
    if base then out[(base:gsub("_", "-"))] = dir .. "/recipes/" .. name end
  end
  return out
end

-- the global `arg` for running path with args, as `dlua path args...` builds it: the
-- interpreter and its options stay at the negative indices
local function set_arg(path, args)
  local a = {[0] = path}
  for i, v in ipairs(args) do a[i] = v end
  local i = -1
  while arg and arg[i] ~= nil do a[i] = arg[i]; i = i - 1 end
  arg = a
end

-- runs the file at path as `dlua path args...` does (what the chunk returns goes to
-- dlua.cli.finish, as in dlua.c); a file that cannot be loaded is one line. The chunk runs through study.site.load_file, so a mistake in a study
-- file names the file and line as it does for `dlua FILE`.
local function run_file(path, args)
  local chunk, err = loadfile(path)
  if not chunk then
    io.stderr:write("dlua: ", tostring(err), "\n")
    os.exit(1)
  end
  set_arg(path, args)
  local watched = false
  for _, a in ipairs(args) do if a:match("^%-%-.") then watched = true end end
  if watched then flags.watch_arg() end
  local res = site.load_file(path, table.unpack(args))
  local ok, msg = pcall(cli.finish, res, path)
  if not ok then
    io.stderr:write("dlua: ", tostring(msg), "\n")
    os.exit(1)
  end
end

-- errors as one line ("dlua: message" led by the user's file:line), exit status 1;
-- DLUA_DEBUG=1 adds the traceback
local function one_line(fn, args)
  local tb
  local ok, err = xpcall(fn, function(e) tb = blame.traceback(tostring(e), 2); return blame.message(e, 2) end, args)
  if ok then return end
  io.stderr:write("dlua: ", tostring(err), "\n")
  if blame.debug() then io.stderr:write(tb, "\n") end
  os.exit(1)
end

local BUILTIN = {
  run = {summary = "run an experiment, study or Lua script: the same as dlua SCRIPT", usage = "run SCRIPT [args]"},
  agent = {summary = "run trials of a study directory, sharing it with other agents", usage = "agent STUDY_DIR"},
  help = {summary = "this list; dlua help COMMAND is dlua COMMAND --help", usage = "help [COMMAND]"},
}

--- The sorted command names: the built-in ones and one per recipe.
function M.names()
  local names = {}
  for k in pairs(BUILTIN) do names[#names + 1] = k end
  for k in pairs(recipes()) do if not BUILTIN[k] then names[#names + 1] = k end end
  table.sort(names)
  return names
end

--- The text of `dlua help`.
function M.help_text()
  local rec = recipes()
  local lines = {"usage: dlua COMMAND [args]      (dlua COMMAND --help: its flags)",
                 "       dlua SCRIPT [args]       (an experiment or study file, or any Lua script)",
                 "       dlua [options] ...       (dlua --help: the interpreter's options)", "", "commands:"}
  for _, k in ipairs({"run", "agent", "help"}) do
    lines[#lines + 1] = string.format("  %-20s %s", BUILTIN[k].usage, BUILTIN[k].summary)
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "recipes (the playbook's procedures; docs/recipes.md):"
  local names = {}
  for k in pairs(rec) do if not BUILTIN[k] then names[#names + 1] = k end end
  table.sort(names)
  for _, k in ipairs(names) do lines[#lines + 1] = string.format("  %-20s %s", k, summary(rec[k])) end
  local dir = M.datadir()
  lines[#lines + 1] = ""
  lines[#lines + 1] = dir and ("recipes and examples: " .. dir .. "/recipes, " .. dir .. "/examples") or "recipes and examples: not found (neither an installed share/dlua nor a source tree)"
  return table.concat(lines, "\n")
end

local function unknown(name)
  local near = util.nearest(name, M.names())
  if near then
    io.stderr:write(string.format("dlua: unknown command '%s' (and no such file); did you mean '%s'?\n", name, near))
  else
    io.stderr:write(string.format("dlua: unknown command '%s' (and no such file); dlua help lists the commands\n", name))
  end
  os.exit(1)
end

--- `dlua NAME args...`: the command NAME with the arguments that follow it.
function M.main(name, ...)
  local args = {...}
  if name == "help" then
    if args[1] and args[1] ~= "--help" and args[1] ~= "-h" then
      return M.main(args[1], "--help")
    end
    print(M.help_text())
    return
  elseif name == "agent" then
    return one_line(study.agent_main, args)
  elseif name == "run" then
    local script = table.remove(args, 1)
    if not script or script == "--help" or script == "-h" then
      print("usage: dlua run SCRIPT [args]\nruns SCRIPT as dlua SCRIPT does (dlua run SCRIPT --help: its flags)")
      if not script then os.exit(1) end
      return
    end
    return run_file(script, args)
  end
  local path = recipes()[name]
  if not path then return unknown(name) end
  return run_file(path, args)
end

return M
