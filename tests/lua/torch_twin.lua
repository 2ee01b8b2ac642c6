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
local dl = require "dlua"

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

--- The differential specs' shared pieces (differential_spec.lua and its family: ops, modules,
-- optimizers). RUN: Python defining R(t) (float32 in the float32 run) and run(key, case):
-- case(torch.float64, key) and in the float32 run also case(torch.float32, key .. '_32'),
-- torch's own float32 error being the measure of what float32 allows; a raising case prints
-- key_err and a '#' note instead.
M.RUN = [[
def R(t):
    return t.float() if F32 else t
def run(key, f):
    try:
        f(torch.float64, key)
        if F32:
            f(torch.float32, key + '_32')
    except Exception as e:
        print(key + '_err', 0)
        print('#', key, type(e).__name__, str(e).replace('\n', ' '))
]]

--- weights(y) -> w, list: distinct weights 1 + (i mod 7) / 8 (exact in float32) of y's shape
-- and dtype, for the backward of sum(y * w)
function M.weights(y)
  local n = y:numel()
  local w = {}
  for i = 1, n do w[i] = 1 + (i % 7) / 8 end
  if y:dim() == 0 then return dl.tensor(w[1], {dtype = y:dtype()}), w end
  return dl.tensor(n == 0 and {} or w, {dtype = y:dtype()}):reshape(table.unpack(y:shape())), w
end

-- subnormals are flushed to zero by the engine (core/fpenv.c, DLUA_FLUSH_SUBNORMALS): on
-- both sides, values below the dtype's smallest normal count as 0
local TINY = {float32 = 2 ^ -126, float64 = 2 ^ -1022}
local function flush(list, dtype)
  local o = {}
  for i, v in ipairs(list) do o[i] = math.abs(v) < TINY[dtype] and 0 or v end
  return o
end

--- err(got, want, norm, dtype [, floor]) -> the worst error of got against want and where:
-- per element, or (norm) relative to the largest finite magnitude of want (at least floor)
function M.err(got, want, norm, dtype, floor)
  got, want = flush(got, dtype), flush(want, dtype)
  floor = norm and (floor or 1e-300) or 1e-300
  if norm then
    for _, v in ipairs(want) do if v == v and math.abs(v) ~= math.huge then floor = math.max(floor, math.abs(v)) end end
  end
  return M.rel_err(got, want, floor)
end

--- check(bad, what, got, want, want32, tol, opts): appends to bad when got is further from
-- want (torch float64) than tol, or in the float32 run (want32: torch's own float32 result)
-- than twice torch's own float32 error if that is larger. opts: {norm, floor, dtype}
function M.check(bad, what, got, want, want32, tol, opts)
  local e, at = M.err(got, want, opts.norm, opts.dtype, opts.floor)
  local e32 = want32 and M.err(want32, want, opts.norm, opts.dtype, opts.floor) or 0
  if not (e <= math.max(tol, 2 * e32)) then
    bad[#bad + 1] = string.format("%s: error %.3g at %d (got %.17g, torch %.17g) above %g (torch's float32: %.3g)",
      what, e, at, got[at] or 0, want[at] or 0, tol, e32)
  end
end

local function is_float(x) local d = x:dtype(); return d == "float32" or d == "float64" end
M.is_float = is_float

--- cases(t) -> the cases of a twin t: {label = "random", inputs = t.inputs()}, a "view" case
-- on the same inputs when a float input has 2 or more dims, then one per t.edge entry
-- {label, function() -> inputs, key = value, ...}; a case's keys override the twin's (the
-- case's metatable reads the rest from t). Inputs are drawn after dl.seed(7).
function M.cases(t)
  dl.seed(7)
  local cs = {{label = "random", inputs = t.inputs()}}
  local has2d = false
  for _, x in ipairs(cs[1].inputs) do if is_float(x) and x:dim() >= 2 then has2d = true end end
  if has2d then cs[2] = {label = "view", inputs = cs[1].inputs, view = true} end
  for _, e in ipairs(t.edge or {}) do
    local c = {label = e[1], inputs = e[2]()}
    for k, v in pairs(e) do if type(k) == "string" then c[k] = v end end
    cs[#cs + 1] = c
  end
  for _, c in ipairs(cs) do setmetatable(c, {__index = t}) end
  return cs
end

local LETTERS = {"a", "b", "c", "d", "e"}

--- leaves(inputs, dtype, view, grad, py) -> args, leaves: float inputs as leaves of dtype
-- (grad: true, or a list of booleans per input: requires_grad), passed as the transposed view
-- of a transposed copy when view and 2 or more dims; integer inputs as they are. Appends the
-- Python building the same a, b, ... (leaves xa, xb, ...; int64, uint8 as bool) to py.
-- leaves: {leaf = tensor, expr = "xa"}, the ones with gradients.
function M.leaves(inputs, dtype, view, grad, py)
  local args, leaves = {}, {}
  for i, x in ipairs(inputs) do
    local L = LETTERS[i]
    if is_float(x) then
      x = x:to(dtype)
      local n = x:dim()
      local v = view and n >= 2
      local g = grad == true or (type(grad) == "table" and grad[i])
      local leaf = v and x:transpose(n - 1, n):contiguous() or x:clone()
      if g then
        leaf = leaf:requires_grad(true)
        leaves[#leaves + 1] = {leaf = leaf, expr = "x" .. L}
      end
      args[i] = v and leaf:transpose(n - 1, n) or leaf
      py[#py + 1] = string.format("    x%s = T(%s).reshape(%s).to(dt).requires_grad_(%s)",
        L, M.lit(M.flat(leaf:double())), M.lit(leaf:shape()), g and "True" or "False")
      py[#py + 1] = string.format("    %s = x%s%s", L, L, v and ".transpose(-2, -1)" or "")
    else
      args[i] = x
      local cast = x:dtype() == "uint8" and ".bool()" or ""
      py[#py + 1] = string.format("    %s = torch.tensor(%s, dtype=torch.int64).reshape(%s)%s", L, M.lit(M.flat(x)),
        M.lit(x:shape()), cast)
    end
  end
  return args, leaves
end

--- backward(y, leaves, py) -> the gradients (flat lists, zeros where none) of sum(y * w) in
-- each of leaves {leaf =, expr =}; appends the same backward in Python (its result y) and
-- prints k_g<j> for each
function M.backward(y, leaves, py)
  local w, wl = M.weights(y)
  ;(y * w):sum():backward()
  py[#py + 1] = string.format("    (y * T(%s).reshape(%s).to(y.dtype)).sum().backward()", M.lit(y:numel() == 0 and {} or wl),
    M.lit(y:shape()))
  local gs = {}
  for j, l in ipairs(leaves) do
    local g = l.leaf.grad
    gs[j] = g and M.flat(g:double()) or M.flat(dl.zeros(table.unpack(l.leaf:shape())):double())
    py[#py + 1] = string.format("    out(k + '_g%d', R(%s.grad if %s.grad is not None else torch.zeros_like(%s)))",
      j, l.expr, l.expr, l.expr)
  end
  return gs
end

--- same_shape(a, b) -> whether two shape lists are equal
function M.same_shape(a, b)
  local same = #a == #b
  for k = 1, #a do same = same and a[k] == b[k] end
  return same
end

return M
