-- Every class dl.nn exports (layers, containers, attention, losses) against its PyTorch
-- module (issue 34, item 1): each twin in tests/lua/module_twins.lua is built in dlua, its
-- parameters and buffers copied by name into torch's module, and run on its random inputs,
-- a non-contiguous view of them and its edge inputs, in float64 and float32. The output,
-- the gradients of sum(y * w) (w distinct weights) in every input and every parameter, and
-- with `buffers` the running statistics after the forward, are compared with torch float64
-- on the same values (in the float32 run: the float32 module's values; the error allowed is
-- the twin's f32 tolerance or twice torch's own float32 error on the case, if larger). A
-- class without a twin fails by name. All torch cases run in one /usr/bin/python3 call
-- (tests/lua/torch_twin.lua, shared with differential_spec.lua).
local dl = require "dlua"
local core = require "dlua.core"
local H = dofile("tests/lua/helpers.lua")
local TW = dofile("tests/lua/torch_twin.lua")
local TWINS = dofile("tests/lua/module_twins.lua")
local lit, flat = TW.lit, TW.flat

local nn = dl.nn
local DTYPES = {"float64", "float32"}

local function classes() return H.nn_classes(nn) end

-- float parameters or buffers of m: {name, tensor}
local function named(list)
  local out = {}
  for _, e in ipairs(list) do if TW.is_float(e[2]) then out[#out + 1] = e end end
  return out
end

-- copies of dlua's values into torch's P (parameters) or B (buffers) under torch's names
local function load(py, dict, list, rename)
  for _, e in ipairs(list) do
    py[#py + 1] = string.format("    with torch.no_grad(): %s['%s'].copy_(T(%s).reshape(%s))", dict, rename(e[1]),
      lit(flat(e[2]:double())), lit(e[2]:shape()))
  end
end

-- runs one case in dlua and writes it in Python: case(dt, k) prints k_v, k_s, k_np (torch's
-- parameter count), k_g<j> (inputs, then parameters) and k_b<j> (buffers)
local function run_case(c, dtype, key)
  dl.seed(7)
  local m = c.build()
  if c.prep then
    local prev = core.set_grad_enabled(false)
    c.prep(m)
    core.set_grad_enabled(prev)
  end
  m:to(dtype)
  m:train(not c.eval)
  local rename = c.rename or function(n) return n end
  local params, buffers = named(m:named_parameters()), named(m:named_buffers())
  local py = {"def case(dt, k):", "    m = (" .. c.torch .. ").to(dt)",
    "    P = dict(m.named_parameters()); B = dict(m.named_buffers())"}
  load(py, "P", params, rename)
  if not c.foreign_buffers then load(py, "B", buffers, rename) end
  py[#py + 1] = string.format("    m.train(%s); out(k + '_np', torch.tensor([len(P)]))", c.eval and "False" or "True")
  local args, leaves = TW.leaves(c.inputs, dtype, c.view, c.grad or true, py)
  local y = c.lua and c.lua(m, table.unpack(args)) or m(table.unpack(args))
  local r = {v = flat(y:double()), shape = y:shape(), dtype = y:dtype(), np = #params, b = {}}
  py[#py + 1] = "    y = " .. (c.call or "m(a)")
  py[#py + 1] = "    out(k + '_v', R(y)); out(k + '_s', torch.tensor(y.shape))"
  if c.buffers then
    for j, e in ipairs(named(m:named_buffers())) do
      r.b[j] = flat(e[2]:double())
      py[#py + 1] = string.format("    out(k + '_b%d', R(B['%s']))", j, rename(e[1]))
    end
  end
  for _, e in ipairs(params) do leaves[#leaves + 1] = {leaf = e[2], expr = "P['" .. rename(e[1]) .. "']"} end
  r.g = TW.backward(y, leaves, py)
  py[#py + 1] = string.format("run('%s', case)", key)
  return r, table.concat(py, "\n")
end

-- the errors of one twin's runs against torch's (an empty list: it agrees)
local function compare(t, runs, torch)
  local bad = {}
  local function note(key)
    for _, n in ipairs(torch.notes) do if n:sub(1, #key + 1) == key .. " " then return n end end
    return "?"
  end
  for _, c in ipairs(runs) do
    local what = c.label .. " " .. c.dtype
    if not c.ok then bad[#bad + 1] = what .. ": dlua raised " .. tostring(c.r)
    elseif torch[c.key .. "_err"] then bad[#bad + 1] = what .. ": the torch twin raised (" .. note(c.key) .. ")"
    elseif not TW.same_shape(torch[c.key .. "_s"], c.r.shape) then
      bad[#bad + 1] = string.format("%s: shape [%s], torch [%s]", what, table.concat(c.r.shape, ", "),
        table.concat(torch[c.key .. "_s"], ", "))
    elseif torch[c.key .. "_np"][1] ~= c.r.np then
      bad[#bad + 1] = string.format("%s: torch's module has %d parameters, dlua's %d", what, torch[c.key .. "_np"][1], c.r.np)
    else
      local tol = c.tol[c.dtype == "float64" and "f64" or "f32"]
      local k32 = c.dtype == "float32" and c.key .. "_32" or nil
      local opts = {norm = c.norm, floor = c.floor, dtype = c.r.dtype}
      local function cmp(label, suffix, got)
        TW.check(bad, what .. " " .. label, got, torch[c.key .. suffix], k32 and torch[k32 .. suffix], tol, opts)
      end
      cmp("value", "_v", c.r.v)
      for j, g in ipairs(c.r.g) do cmp("gradient " .. j, "_g" .. j, g) end
      for j, b in ipairs(c.r.b) do cmp("buffer " .. j, "_b" .. j, b) end
    end
  end
  return bad
end

-- a twin that must fail: Linear against torch's Linear scaled by 1 + 1e-9
local WRONG = {build = function() return nn.Linear(3, 2) end, torch = "torch.nn.Linear(3, 2)", call = "m(a) * (1 + 1e-9)",
  inputs = function() return {dl.randn(4, 3):double()} end, tol = {f64 = 1e-13, f32 = 1e-6}, norm = true}

describe("dl.nn's modules against PyTorch", function()
  local runs, torch = {}, nil

  setup(function()
    local py = TW.script():add(TW.RUN)
    local all = {}
    for name, t in pairs(TWINS) do all[name] = t end
    all["(wrong)"] = WRONG
    for name, t in pairs(all) do
      runs[name] = {}
      for ci, c in ipairs(TW.cases(t)) do
        for _, dtype in ipairs(DTYPES) do
          local key = string.format("%s_%d_%s", (name:gsub("%W", "")), ci, dtype == "float64" and "d" or "f")
          local ok, r, lines = pcall(run_case, c, dtype, key)
          if ok then
            py:add("F32 = " .. (dtype == "float32" and "True" or "False"))
            py:add(lines)
          end
          table.insert(runs[name], setmetatable({label = c.label, dtype = dtype, key = key, ok = ok, r = r}, {__index = c}))
        end
      end
    end
    torch = py:run()
  end)

  it("has a torch twin for every class dl.nn exports, and none for a class it does not", function()
    local missing = {}
    for _, name in ipairs(classes()) do
      if not TWINS[name] then missing[#missing + 1] = name end
    end
    assert(#missing == 0, "dl.nn classes without a torch twin in tests/lua/module_twins.lua: " .. table.concat(missing, ", "))
    for name in pairs(TWINS) do assert(nn[name], "a twin for a class dl.nn does not export: " .. name) end
    assert.is_true(#classes() >= 25)
  end)

  it("fails a twin that is off by 1e-9 relative (the comparison can fail)", function()
    local bad = compare(WRONG, runs["(wrong)"], torch)
    assert.is_true(#bad >= 2, table.concat(bad, "\n"))
    assert.truthy(bad[1]:find("random float64 value", 1, true), bad[1])
  end)

  for _, name in ipairs(classes()) do
    it(name .. " matches its torch twin in float64 and float32 (values, input, parameter and buffer gradients)", function()
      local t = TWINS[name]
      assert(t, "nn." .. name .. " has no torch twin in tests/lua/module_twins.lua")
      local bad = compare(t, runs[name], torch)
      assert(#bad == 0, name .. " against torch" .. (t.differs and (" (differs: " .. t.differs .. ")") or "") .. ":\n  " ..
        table.concat(bad, "\n  "))
    end)
  end
end)
