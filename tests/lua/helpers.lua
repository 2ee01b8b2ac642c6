-- tests/lua/helpers.lua -- small file helpers shared by the specs (loaded with
-- dofile("tests/lua/helpers.lua"); busted runs from the repository root).
local fs = require "dlua.util.fs"
local util = require "dlua.util"

local H = {}

--- Shell quoting for one argument (util.shell_quote).
H.shquote = util.shell_quote

--- A fresh, empty directory under $TMPDIR (or /tmp) whose name carries tag.
function H.tmpdir(tag)
  local d = string.format("%s/dlua-%s-%d-%d", os.getenv("TMPDIR") or "/tmp", tag or "spec",
    math.floor(require("dlua.core").clock() * 1e6) % 1000000007, math.random(1, 1e9))
  fs.rm_rf(d)
  fs.mkdir_p(d)
  return d
end

--- The whole file (asserts it exists).
function H.slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

--- Writes s to path (replacing it).
function H.spit(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

--- The text of tests/fixtures/<name> (a spec writes it into its scratch directory,
-- e.g. the toy experiment as exp.lua).
function H.fixture(name) return H.slurp("tests/fixtures/" .. name) end

--- H.line_of(path, text) -> the number of the first line of path that contains text
function H.line_of(path, text)
  local i = 0
  for l in (H.slurp(path) .. "\n"):gmatch("([^\n]*)\n") do
    i = i + 1
    if l:find(text, 1, true) then return i end
  end
  error(text .. " not in " .. path)
end

H.OBJECTIVE = ' objective = {metric = "valid/accuracy", mode = "max"},'

--- H.study_file(dir, file, fields [, head]) -> path: a study over dir/exp.lua (goal "g", seed 3)
-- on line 4 with head (default H.OBJECTIVE), then the given fields from line 5 on
function H.study_file(dir, file, fields, head)
  H.spit(dir .. "/" .. file, 'local dl = require "dlua"\nlocal S = dl.search\nreturn dl.study{\n' ..
    '  experiment = "exp.lua", goal = "g", seed = 3,' .. (head or H.OBJECTIVE) .. "\n" .. fields .. "\n}\n")
  return dir .. "/" .. file
end

--- The dlua under test as an absolute path (DLUA_EXE, else build/dlua), so specs
-- may cd before running it.
H.EXE = os.getenv("DLUA_EXE") or "build/dlua"
if H.EXE:sub(1, 1) ~= "/" then H.EXE = (os.getenv("PWD") or ".") .. "/" .. H.EXE end

--- Runs `dlua args` in dir; returns its output (stdout and stderr) and exit status.
function H.run(dir, args)
  local p = io.popen(string.format("cd %s && %s %s 2>&1; echo \"rc=$?\"", dir, H.EXE, args))
  local out = p:read("a")
  p:close()
  return out, tonumber(out:match("rc=(%d+)%s*$"))
end

--- The events of a study's journal.jsonl, in order ({} when there is none).
function H.journal_events(study_dir)
  local json = require "dlua.util.json"
  local out = {}
  for l in (fs.read(study_dir .. "/journal.jsonl") or ""):gmatch("[^\n]+") do out[#out + 1] = json.decode(l) end
  return out
end

return H
