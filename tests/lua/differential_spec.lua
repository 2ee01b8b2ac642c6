-- Every row of the op table against PyTorch (issue 34, item 1): each row's twin in
-- tests/lua/op_twins.lua is run on its random inputs, its edge inputs and a non-contiguous
-- view of them, in float64 and float32, and its values and gradients (of sum(y * w), w
-- distinct weights) are compared with torch float64 on the same inputs (in the float32 run,
-- the float32-rounded inputs, the result rounded to float32: what a float32 kernel should
-- give). float64 must be within the twin's stated f64 tolerance; float32 within its f32
-- tolerance, or twice torch's own float32 error on that case where that is larger (sigmoid
-- and tanh gradients from a rounded output, gelu's erf below 0, pow's d/da: the same formula
-- loses the same digits in torch). A row without a twin fails by name. All torch cases run
-- in one /usr/bin/python3 call (tests/lua/torch_twin.lua).
local dl = require "dlua"
local core = require "dlua.core"
local TW = dofile("tests/lua/torch_twin.lua")
local TWINS = dofile("tests/lua/op_twins.lua")
local lit, flat, rel_err = TW.lit, TW.flat, TW.rel_err

local LETTERS = {"a", "b", "c", "d", "e"}
local DTYPES = {"float64", "float32"}

local function is_float(x) local d = x:dtype(); return d == "float32" or d == "float64" end

-- w: distinct weights k/8 (exact in float32) of y's shape and dtype
local function weights(y)
  local n = y:numel()
  local w = {}
  for i = 1, n do w[i] = 1 + (i % 7) / 8 end
  if y:dim() == 0 then return dl.tensor(w[1], {dtype = y:dtype()}), w end
  return dl.tensor(n == 0 and {} or w, {dtype = y:dtype()}):reshape(table.unpack(y:shape())), w
end

-- the cases of one twin: {label, inputs, view, lua, torch}
local function cases_of(name, t)
  dl.seed(7)
  local cs = {{label = "random", inputs = t.inputs()}}
  local has2d = false
  for _, x in ipairs(cs[1].inputs) do if is_float(x) and x:dim() >= 2 then has2d = true end end
  if has2d then cs[2] = {label = "view", inputs = cs[1].inputs, view = true} end
  for _, e in ipairs(t.edge or {}) do
    cs[#cs + 1] = {label = e[1], inputs = e[2](), lua = e.lua, torch = e.torch}
  end
  for _, c in ipairs(cs) do c.lua, c.torch = c.lua or t.lua, c.torch or t.torch end
  return cs
end

-- runs one case in dlua: its output, shape and the leaves' gradients, and the case in Python
-- (case(dt, k) builds the same leaves in torch dtype dt and prints k_v, k_s and k_g<j>)
local function run_case(t, c, dtype, key)
  local args, leaves, py = {}, {}, {"def case(dt, k):"}
  for i, x in ipairs(c.inputs) do
    local L = LETTERS[i]
    if is_float(x) then
      x = x:to(dtype)
      local n = x:dim()
      local view = c.view and n >= 2
      local leaf = view and x:transpose(n - 1, n):contiguous() or x:clone()
      if t.grad then leaf = leaf:requires_grad(true) end
      leaves[#leaves + 1] = {leaf = leaf, letter = L}
      args[i] = view and leaf:transpose(n - 1, n) or leaf
      py[#py + 1] = string.format("    x%s = T(%s).reshape(%s).to(dt).requires_grad_(%s)",
        L, lit(flat(leaf:double())), lit(leaf:shape()), t.grad and "True" or "False")
      py[#py + 1] = string.format("    %s = x%s%s", L, L, view and ".transpose(-2, -1)" or "")
    else
      args[i] = x
      local cast = x:dtype() == "uint8" and ".bool()" or ""
      py[#py + 1] = string.format("    %s = torch.tensor(%s, dtype=torch.int64).reshape(%s)%s", L, lit(flat(x)), lit(x:shape()), cast)
    end
  end
  local y = c.lua(table.unpack(args))
  local r = {v = flat(y:double()), shape = y:shape(), dtype = y:dtype(), g = {}}
  py[#py + 1] = "    y = " .. c.torch
  py[#py + 1] = "    out(k + '_v', R(y)); out(k + '_s', torch.tensor(y.shape))"
  if t.grad then
    local w, wl = weights(y)
    ;(y * w):sum():backward()
    py[#py + 1] = string.format("    (y * T(%s).reshape(%s).to(y.dtype)).sum().backward()", lit(y:numel() == 0 and {} or wl),
      lit(y:shape()))
    for j, l in ipairs(leaves) do
      local g = l.leaf.grad
      r.g[j] = g and flat(g:double()) or flat(dl.zeros(table.unpack(l.leaf:shape())):double())
      py[#py + 1] = string.format("    out(k + '_g%d', R(x%s.grad if x%s.grad is not None else torch.zeros_like(x%s)))",
        j, l.letter, l.letter, l.letter)
    end
  end
  py[#py + 1] = string.format("run('%s', case)", key)
  return r, table.concat(py, "\n")
end

-- run(key, case): torch float64 as key_*, and in the float32 run torch's own float32 as
-- key_32_* (its error is the measure of what float32 allows); the float64 reference is
-- rounded to the output's dtype (a float32 kernel's best answer: inf beyond its range)
local PRELUDE = [[
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

-- subnormals are flushed to zero by the engine (core/fpenv.c, DLUA_FLUSH_SUBNORMALS): on
-- both sides, values below the dtype's smallest normal count as 0
local TINY = {float32 = 2 ^ -126, float64 = 2 ^ -1022}
local function flush(list, dtype)
  local o = {}
  for i, v in ipairs(list) do o[i] = math.abs(v) < TINY[dtype] and 0 or v end
  return o
end

-- the worst error of got against want: per element, or relative to want's largest magnitude
local function err(got, want, norm, dtype, floor)
  got, want = flush(got, dtype), flush(want, dtype)
  floor = norm and floor or 1e-300
  if norm then
    for _, v in ipairs(want) do if v == v and math.abs(v) ~= math.huge then floor = math.max(floor, math.abs(v)) end end
  end
  return rel_err(got, want, floor)
end

describe("the op table against PyTorch", function()
  local ops = core._ops()
  local runs, torch = {}, nil
  local function note(key)
    for _, n in ipairs(torch.notes) do if n:sub(1, #key + 1) == key .. " " then return n end end
    return "?"
  end

  setup(function()
    local py = TW.script():add(PRELUDE)
    for _, o in ipairs(ops) do
      local t = TWINS[o.name]
      if t then
        runs[o.name] = {}
        for ci, c in ipairs(cases_of(o.name, t)) do
          for _, dtype in ipairs(DTYPES) do
            local key = string.format("%s_%d_%s", o.name, ci, dtype == "float64" and "d" or "f")
            local ok, r, lines = pcall(run_case, t, c, (t.f32_only and "float32") or dtype, key)
            if ok then
              py:add("F32 = " .. ((dtype == "float32" or t.f32_only) and "True" or "False"))
              py:add(lines)
            end
            table.insert(runs[o.name], {label = c.label, dtype = dtype, key = key, ok = ok, r = r})
          end
        end
      end
    end
    torch = py:run()
  end)

  it("has a torch twin for every row of the op table, and none for a row it does not list", function()
    local missing, listed = {}, {}
    for _, o in ipairs(ops) do
      listed[o.name] = true
      if not TWINS[o.name] then missing[#missing + 1] = o.name end
    end
    assert(#missing == 0, "op-table rows without a torch twin in tests/lua/op_twins.lua: " .. table.concat(missing, ", "))
    for name in pairs(TWINS) do assert(listed[name], "a twin for a row the op table does not list: " .. name) end
  end)

  for _, o in ipairs(ops) do
    it(o.name .. " (" .. o.lua .. ") matches its torch twin in float64 and float32", function()
      local t = TWINS[o.name]
      assert(t, "op '" .. o.name .. "' (" .. o.forward .. ", Lua " .. o.lua .. ") has no torch twin in tests/lua/op_twins.lua")
      local bad = {}
      -- float32: the stated tolerance, or twice torch's own float32 error on the case if larger
      local function check(got, want, tol, what, c, want32)
        local e, at = err(got, want, t.norm, c.r.dtype, t.floor or 1e-300)
        local e32 = want32 and err(want32, want, t.norm, c.r.dtype, t.floor or 1e-300) or 0
        if not (e <= math.max(tol, 2 * e32)) then
          bad[#bad + 1] = string.format("%s %s %s: error %.3g at %d (got %.17g, torch %.17g) above %g (torch's float32: %.3g)",
            c.label, c.dtype, what, e, at, got[at] or 0, want[at] or 0, tol, e32)
        end
      end
      for _, c in ipairs(runs[o.name]) do
        local tol = t.tol[c.dtype == "float64" and "f64" or "f32"]
        if not c.ok then bad[#bad + 1] = c.label .. " " .. c.dtype .. ": dlua raised " .. tostring(c.r)
        elseif torch[c.key .. "_err"] then bad[#bad + 1] = c.label .. " " .. c.dtype .. ": the torch twin raised (" .. note(c.key) .. ")"
        else
          local r = c.r
          local ts = torch[c.key .. "_s"]
          local same = #ts == #r.shape
          for k = 1, #ts do same = same and ts[k] == r.shape[k] end
          if not same then
            bad[#bad + 1] = string.format("%s %s: shape [%s], torch [%s]", c.label, c.dtype, table.concat(r.shape, ", "),
              table.concat(ts, ", "))
          else
            local k32 = c.dtype == "float32" and c.key .. "_32" or nil
            check(r.v, torch[c.key .. "_v"], tol, "value", c, k32 and torch[k32 .. "_v"])
            for j, g in ipairs(r.g) do
              check(g, torch[c.key .. "_g" .. j], tol, "gradient " .. j, c, k32 and torch[k32 .. "_g" .. j])
            end
          end
        end
      end
      assert(#bad == 0, o.name .. " against torch" .. (t.differs and (" (differs: " .. t.differs .. ")") or "") .. ":\n  " ..
        table.concat(bad, "\n  "))
    end)
  end
end)
