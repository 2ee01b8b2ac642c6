-- The optimizer table (engine/ops/optim.c, listed by core.optim_table()) walked
-- row by row from Lua: every row the C file holds reaches the binding, and every
-- row's name, hyperparameters (defaults, types, ranges) and state slots reach
-- dl.optim, so a row added in C is a working, checked optimizer with no other
-- edit. Also the walk-through "Adding an optimizer" in docs/architecture.md
-- against the tree: the files, symbols and code it shows exist as written.
local dl = require "dlua"
local core = require "dlua.core"
local H = dofile("tests/lua/helpers.lua")
local optim = dl.optim

local SRC = H.slurp("engine/ops/optim.c")
local rows = core.optim_table()

-- the names of the rows of `table` in optim.c, read from the source
local function source_rows()
  local body = SRC:match("static const dl_optim_def table%[%] = (%b{})")
  assert(body, "no `static const dl_optim_def table[]` in engine/ops/optim.c")
  local names = {}
  for name in body:gmatch('\n  {"([%w_]+)",') do names[#names + 1] = name end
  return names
end

local function sorted_names(row, extra)
  local t = {extra}
  for _, h in ipairs(row.hparams) do t[#t + 1] = h.name end
  table.sort(t)
  return table.concat(t, ", ")
end

-- 3 steps on a float64 quadratic; the parameter's values after them
local function run(kind, o)
  local p = dl.tensor({1.0, -0.5, 0.25, 2.0}, {dtype = "float64"}):requires_grad(true)
  local a = dl.tensor({0.5, 2.0, 1.0, 3.0}, {dtype = "float64"})
  local opts = {params = {p}}
  for k, v in pairs(o) do opts[k] = v end
  local opt = optim[kind](opts)
  for _ = 1, 3 do
    opt:zero_grad();
    ((p * p * a):sum() * 0.5):backward()
    opt:step()
  end
  return p:totable()
end

-- a value of h other than its default, within its range
local function other_value(h)
  if h.type == "boolean" then return not h.default end
  if h.default == 0 then return 0.3 end
  if h.max < math.huge then return h.default * 0.5 end
  return h.default * 1000
end

describe("dlua optimizer table", function()
  it("reaches the binding whole: every row of engine/ops/optim.c, in order, and nothing else", function()
    local names = {}
    for i, row in ipairs(rows) do names[i] = row.name end
    assert.are.same(source_rows(), names)
    assert.is_true(#names >= 6)
  end)

  it("keeps the contract names and the state names existing checkpoints hold", function()
    -- DESIGN.md section 4; a checkpoint stores optimizer state as optim/<i>.<slot>
    local want = {SGD = {"momentum"}, Adam = {"m", "v"}, NAdam = {"m", "v"}, AdamW = {"m", "v"},
                  Adagrad = {"sum_sq"}, RMSProp = {"v", "m"}}
    local got = {}
    for _, row in ipairs(rows) do
      local slots = {}
      for i, s in ipairs(row.state) do slots[i] = s.name end
      got[row.name] = slots
    end
    for kind, slots in pairs(want) do assert.are.same(slots, got[kind], kind) end
  end)

  for _, row in ipairs(rows) do
    local kind = row.name
    describe(kind, function()
      it("is a constructor of dl.optim whose defaults are the row's", function()
        assert.is_function(optim[kind])
        local opt = optim[kind]{}
        local n = 0
        for _ in pairs(opt.opts) do n = n + 1 end
        assert.are.equal(#row.hparams, n)
        for _, h in ipairs(row.hparams) do
          assert.are.equal(h.type, type(h.default), h.name)
          assert.are.equal(h.default, opt.opts[h.name], h.name)
        end
        assert.are.equal(opt.opts.lr, opt:lr())
      end)

      it("keeps each state slot under the row's name, starting at the row's value", function()
        local p = dl.zeros(2, 3):requires_grad(true)
        local sd = optim[kind]{params = {p}}:state_dict()
        local n = 0
        for k, v in pairs(sd) do
          if k:match("^1%.") then
            n = n + 1
            assert.is_true(getmetatable(v) == core.Tensor, k)
          end
        end
        assert.are.equal(#row.state, n)
        for _, s in ipairs(row.state) do
          local t = sd["1." .. s.name]
          assert.are.same({2, 3}, t:shape())
          assert.are.equal(s.init, t:min():item())
          assert.are.equal(s.init, t:max():item())
        end
        -- and reads them back by those names
        local q = dl.zeros(2, 3):requires_grad(true)
        local other = optim[kind]{params = {q}}
        for _, s in ipairs(row.state) do sd["1." .. s.name] = dl.full(7, 2, 3) end
        other:load_state_dict(sd)
        for _, s in ipairs(row.state) do assert.are.equal(7, other:state_dict()["1." .. s.name]:min():item()) end
        sd["1." .. (row.state[1] or {name = "x"}).name] = nil
        if row.state[1] then
          assert.has_error(function() other:load_state_dict(sd) end,
            string.format("%s: state 1.%s missing", kind, row.state[1].name))
        end
      end)

      it("refuses an unknown key listing the row's keys", function()
        assert.has_error(function() optim[kind]{zzz = 1} end,
          string.format("%s: unknown option 'zzz' (valid: %s)", kind, sorted_names(row, "params")))
      end)

      -- with momentum on (where the row has it), so that nesterov changes the steps too
      local base = {}
      for _, h in ipairs(row.hparams) do if h.name == "momentum" then base.momentum = 0.5 end end
      local reference = run(kind, base)

      for _, h in ipairs(row.hparams) do
        it(string.format("sets %s (a change reaches the update)", h.name), function()
          local o = {}
          for k, v in pairs(base) do o[k] = v end
          o[h.name] = other_value(h)
          if h.name == "momentum" then o[h.name] = 0.9 end
          local opt = optim[kind](o)
          assert.are.equal(o[h.name], opt.opts[h.name])
          assert.are_not.same(reference, run(kind, o))
        end)

        it(string.format("refuses a %s of the wrong type or out of its range (%s)", h.name, h.range), function()
          local wrong = h.type == "boolean" and 1 or "1"
          assert.has_error(function() optim[kind]{[h.name] = wrong} end,
            string.format("%s: option '%s' (%s expected, got %s)", kind, h.name, h.type, type(wrong)))
          if h.type == "number" then
            assert.has_error(function() optim[kind]{[h.name] = h.min - 1} end,
              string.format("%s: %s must be %s, got %s", kind, h.name, h.range, tostring(h.min - 1)))
            assert.has_error(function() optim[kind]{[h.name] = 0 / 0} end,
              string.format("%s: %s must be %s, got %s", kind, h.name, h.range, tostring(0 / 0)))
            if h.max < math.huge then
              local bad = h.max_open and h.max or h.max + 1
              assert.has_error(function() optim[kind]{params = {{params = {dl.zeros(1)}, [h.name] = bad}}} end,
                string.format("%s: %s in params.1 must be %s, got %s", kind, h.name, h.range, tostring(bad)))
              -- the binding refuses it too, naming the key and the range
              assert.error_matches(function() core.optim_new(kind, {[h.name] = bad}) end,
                string.format("option '%s' %%(must be %s, got", h.name, (h.range:gsub("[%[%]%(%)]", "%%%0"))))
            end
          end
        end)
      end
    end)
  end

  it("names the valid optimizers when the binding is given another", function()
    local names = {}
    for i, row in ipairs(rows) do names[i] = row.name end
    assert.error_matches(function() core.optim_new("Lion") end,
      "bad argument #1 to '[%w._]*optim_new' %(unknown optimizer 'Lion' %(valid: " .. table.concat(names, ", ")
      .. "%)%)")
  end)

  it("checks lr against its row's range in set_lr and in the binding, and wants every slot's list", function()
    local p = dl.zeros(2):requires_grad(true)
    local opt = optim.Adam{params = {p}}
    assert.has_error(function() opt:set_lr(-1) end, "Adam: lr must be a non-negative number, got -1")
    assert.has_error(function() opt:set_lr(0 / 0) end, "Adam: lr must be a non-negative number, got " .. tostring(0 / 0))
    local rule = core.optim_new("Adam")
    assert.error_matches(function() core.optim_update(rule, {}, {{}, {}}, -1, 1) end,
      "bad argument #4 to '[%w._]*optim_update' %(lr must be non%-negative, got %-1%.0%)")
    p.grad = dl.ones(2)
    assert.error_matches(function() core.optim_update(rule, {p}, {{dl.zeros(2)}}, 0.1, 1) end,
      "Adam: state slot 2 of 2 is missing")
    assert.error_matches(function() core.optim_update(rule, {p}, {{dl.zeros(2)}, {dl.zeros(3)}}, 0.1, 1) end,
      "Adam: state 2 of parameter 1 is missing or mis%-shaped")
    assert.are.same({0, 0}, p:totable())
    core.optim_update(rule, {p}, {{dl.zeros(2)}, {dl.zeros(2)}}, 0.1, 1)
    -- one Adam step moves each element by lr (to float32 rounding): sign(g) lr
    assert.is_true(math.abs(p:totable()[1] + 0.1) < 1e-6)
  end)

  it("has a line for every row in docs/optimizers.md's table of update rules", function()
    local doc = H.slurp("docs/optimizers.md")
    for _, row in ipairs(rows) do
      assert.truthy(doc:find("\n| `" .. row.name .. "` |", 1, true), row.name .. " missing from docs/optimizers.md")
    end
  end)
end)

describe("docs/architecture.md, Adding an optimizer", function()
  local doc = H.slurp("docs/architecture.md")
  local section = doc:match("\n## Adding an optimizer\n(.-)\n## ") or doc:match("\n## Adding an optimizer\n(.*)$")

  it("exists", function() assert.truthy(section) end)
  section = section or ""

  it("names files that exist", function()
    local n = 0
    for path in section:gmatch("`([%w_%-/]+%.%a+)`") do
      if path:find("/") then
        n = n + 1
        assert.truthy(io.open(path), path .. " does not exist")
      end
    end
    assert.is_true(n >= 5)
  end)

  it("names C symbols that optim.h or optim.c define", function()
    local header = H.slurp("engine/ops/optim.h")
    local n = 0
    for sym in section:gmatch("`([%a_][%w_]*)[%(%[`]") do
      if sym:match("^[dD][lL]_") or sym:match("_f32$") or sym:match("_f64$") or sym:match("^[A-Z]+_") then
        n = n + 1
        assert.truthy(header:find(sym, 1, true) or SRC:find(sym, 1, true), sym .. " is in neither optim.h nor optim.c")
      end
    end
    assert.is_true(n >= 8)
  end)

  it("names binding functions that dlua.core has", function()
    local n = 0
    for name in section:gmatch("`core%.([%w_]+)") do
      n = n + 1
      assert.is_function(core[name], "core." .. name)
    end
    assert.is_true(n >= 2)
  end)

  it("shows code that is in optim.c as written", function()
    local squash = function(s) return (s:gsub("%s+", " ")) end
    local src, n = squash(SRC), 0
    for block in section:gmatch("```c\n(.-)```") do
      n = n + 1
      -- the example's parts, separated by a line "/* ... */", each verbatim in the file
      for part in (block .. "/* ... */\n"):gmatch("(.-)/%* %.%.%. %*/\n") do
        local want = squash(part):match("^ ?(.-) ?$")
        if want ~= "" then
          assert.truthy(src:find(want, 1, true), "not in engine/ops/optim.c:\n" .. part)
        end
      end
    end
    assert.is_true(n >= 1)
  end)
end)
