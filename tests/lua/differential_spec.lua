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
local flat = TW.flat

local DTYPES = {"float64", "float32"}

-- runs one case in dlua: its output, shape and the leaves' gradients, and the case in Python
-- (case(dt, k) builds the same leaves in torch dtype dt and prints k_v, k_s and k_g<j>)
local function run_case(t, c, dtype, key)
  local py = {"def case(dt, k):"}
  local args, leaves = TW.leaves(c.inputs, dtype, c.view, t.grad, py)
  local y = c.lua(table.unpack(args))
  local r = {v = flat(y:double()), shape = y:shape(), dtype = y:dtype(), g = {}}
  py[#py + 1] = "    y = " .. c.torch
  py[#py + 1] = "    out(k + '_v', R(y)); out(k + '_s', torch.tensor(y.shape))"
  if t.grad then r.g = TW.backward(y, leaves, py) end
  py[#py + 1] = string.format("run('%s', case)", key)
  return r, table.concat(py, "\n")
end

describe("the op table against PyTorch", function()
  local ops = core._ops()
  local runs, torch = {}, nil
  local function note(key)
    for _, n in ipairs(torch.notes) do if n:sub(1, #key + 1) == key .. " " then return n end end
    return "?"
  end

  setup(function()
    local py = TW.script():add(TW.RUN)
    for _, o in ipairs(ops) do
      local t = TWINS[o.name]
      if t then
        runs[o.name] = {}
        for ci, c in ipairs(TW.cases(t)) do
          for _, dtype in ipairs(DTYPES) do
            local key = string.format("%s_%d_%s", o.name, ci, dtype == "float64" and "d" or "f")
            local ok, r, lines = pcall(run_case, t, c, dtype, key)
            if ok then
              py:add("F32 = " .. (dtype == "float32" and "True" or "False"))
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
      for _, c in ipairs(runs[o.name]) do
        local tol = t.tol[c.dtype == "float64" and "f64" or "f32"]
        if not c.ok then bad[#bad + 1] = c.label .. " " .. c.dtype .. ": dlua raised " .. tostring(c.r)
        elseif torch[c.key .. "_err"] then bad[#bad + 1] = c.label .. " " .. c.dtype .. ": the torch twin raised (" .. note(c.key) .. ")"
        else
          local r = c.r
          local ts = torch[c.key .. "_s"]
          if not TW.same_shape(ts, r.shape) then
            bad[#bad + 1] = string.format("%s %s: shape [%s], torch [%s]", c.label, c.dtype, table.concat(r.shape, ", "),
              table.concat(ts, ", "))
          else
            local k32 = c.dtype == "float32" and c.key .. "_32" or nil
            local opts = {norm = t.norm, floor = t.floor, dtype = r.dtype}
            local what = c.label .. " " .. c.dtype
            TW.check(bad, what .. " value", r.v, torch[c.key .. "_v"], k32 and torch[k32 .. "_v"], tol, opts)
            for j, g in ipairs(r.g) do
              TW.check(bad, what .. " gradient " .. j, g, torch[c.key .. "_g" .. j], k32 and torch[k32 .. "_g" .. j], tol, opts)
            end
          end
        end
      end
      assert(#bad == 0, o.name .. " against torch" .. (t.differs and (" (differs: " .. t.differs .. ")") or "") .. ":\n  " ..
        table.concat(bad, "\n  "))
    end)
  end
end)
