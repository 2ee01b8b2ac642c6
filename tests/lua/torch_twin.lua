-- PyTorch as an outside reference for specs (dofile'd, like helpers.lua): a spec writes its
-- cases as lines of Python over a small prelude, runs them all in one /usr/bin/python3
-- (Debian's python3-torch, which scripts/setup.sh installs) and reads back the tensors each
-- case printed, in float64. Values cross in both directions as %.17g text, so nothing is
-- lost on the way.
--
--   local TW = dofile("tests/lua/torch_twin.lua")
--   local py = TW.script()
--   py:add("x = T(" .. TW.lit(x) .. ", True); F.softplus(x).sum().backward(); out('g', x.grad)")
--   local got = py:run()          -- got.g: the flat list of numbers torch printed as 'g'
local M = {}

M.PY = "/usr/bin/python3"

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return rc, (out:gsub("rc=%d+%s*$", ""))
end

M.available = sh(M.PY .. " -c 'import torch'") == 0

local PRELUDE = [[
import math, torch
import torch.nn.functional as F
torch.set_default_dtype(torch.float64)
inf, nan = math.inf, math.nan
def T(x, g=False):
    return torch.tensor(x, dtype=torch.float64, requires_grad=g)
def out(name, t):
    t = torch.as_tensor(t).detach().to(torch.float64).reshape(-1)
    print(name, *[repr(v) for v in t.tolist()])
]]

local function num(v)
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  return string.format("%.17g", v)
end

--- lit(x) -> a Python literal of x: a number, a (nested) Lua list or a tensor (its values)
function M.lit(x)
  if type(x) == "number" then return num(x) end
  if type(x) ~= "table" then x = x:totable() end
  local parts = {}
  for i, v in ipairs(x) do parts[i] = M.lit(v) end
  return "[" .. table.concat(parts, ", ") .. "]"
end

local function parse(s)
  if s == "nan" then return 0 / 0 end
  if s == "inf" then return math.huge end
  if s == "-inf" then return -math.huge end
  return assert(tonumber(s), "torch_twin: not a number: " .. s)
end

local Script = {}
Script.__index = Script

function M.script() return setmetatable({lines = {}}, Script) end
function Script:add(line) self.lines[#self.lines + 1] = line; return self end

--- runs the script; name -> flat list of what out(name, t) printed (lines the script prints
-- starting with '#' are notes, kept in order in .notes). Raises with Python's
-- output when it fails, and when torch is missing (scripts/setup.sh installs it).
function Script:run()
  assert(M.available, "python3-torch is needed for the torch twins (" .. M.PY .. " -c 'import torch' fails); " ..
    "scripts/setup.sh installs it")
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(PRELUDE, table.concat(self.lines, "\n"), "\n")
  f:close()
  local rc, out = sh(M.PY .. " " .. path)
  os.remove(path)
  assert(rc == 0, "the torch twin failed:\n" .. out)
  local got = {notes = {}}
  for line in out:gmatch("[^\n]+") do
    local note = line:match("^#%s?(.*)$")
    if note then got.notes[#got.notes + 1] = note; goto next end
    local name, rest = line:match("^(%S+)(.*)$")
    local vals = {}
    for w in rest:gmatch("%S+") do vals[#vals + 1] = parse(w) end
    got[name] = vals
    ::next::
  end
  return got
end

--- flat(t) -> t's values as a flat Lua list
function M.flat(t) return t:reshape(-1):totable() end

--- worst relative error of got against want (lists), |g - w| / max(|w|, floor); NaNs and
-- infinities must match exactly. Returns the error and the position of the worst one.
function M.rel_err(got, want, floor)
  assert(#got == #want, string.format("%d values against torch's %d", #got, #want))
  floor = floor or 1e-300
  local worst, at = 0, 0
  for i = 1, #want do
    local g, w = got[i], want[i]
    local e
    if w ~= w or g ~= g then e = (w ~= w and g ~= g) and 0 or math.huge
    elseif w == math.huge or w == -math.huge or g == math.huge or g == -math.huge then e = g == w and 0 or math.huge
    else e = math.abs(g - w) / math.max(math.abs(w), floor) end
    if e > worst then worst, at = e, i end
  end
  return worst, at
end

return M
