-- dlua.util: the bottom layer's helpers, against values worked out by hand.
local dl = require "dlua"
local util = require "dlua.util"

describe("dlua.util", function()
  it("tells tensors from everything else", function()
    assert.is_true(util.is_tensor(dl.zeros(2)))
    assert.is_false(util.is_tensor({}))
    assert.is_false(util.is_tensor(nil))
    assert.is_false(util.is_tensor(setmetatable({}, {})))
    assert.are.equal(util.is_tensor, dl.is_tensor)
  end)

  it("copies shallowly and deeply", function()
    local inner = {1, 2}
    local t = {a = inner, b = "x"}
    local c = util.copy(t)
    assert.are_not.equal(t, c)
    assert.are.equal(inner, c.a)                       -- shared
    assert.are.same({}, util.copy(nil))
    local mt = {__index = function() return 7 end}
    local cyc = setmetatable({a = inner}, mt)
    cyc.self = cyc
    local d = util.deep_copy(cyc)
    assert.are_not.equal(inner, d.a)
    assert.are.same(inner, d.a)
    assert.are.equal(d, d.self)                        -- the cycle copied once
    assert.are.equal(mt, getmetatable(d))
    assert.are.equal(7, d.missing)
    local x = dl.ones(2)
    assert.are.equal(x, util.deep_copy({x = x}).x)      -- tensors are shared
  end)

  it("sorts keys of mixed types", function()
    assert.are.same({"a", "b", "c"}, util.sorted_keys{c = 1, a = 2, b = 3})
    assert.are.same({1, 2, 10}, util.sorted_keys{[10] = 1, [2] = 1, [1] = 1})
    assert.are.same({1, "x"}, util.sorted_keys{x = 1, [1] = 2})
    assert.are.same({}, util.sorted_keys(nil))
  end)

  it("quotes for the shell only when needed, and the shell reads it back", function()
    assert.are.equal("runs/a-b_c.1", util.shell_quote("runs/a-b_c.1"))
    assert.are.equal("'a b'", util.shell_quote("a b"))
    assert.are.equal("'it'\\''s'", util.shell_quote("it's"))
    assert.are.equal("''", util.shell_quote(""))
    for _, s in ipairs({"a b", "it's", "$HOME `x` \"y\"", "semi;colon", "*"}) do
      local p = io.popen("printf '%s' " .. util.shell_quote(s))
      local back = p:read("a")
      p:close()
      assert.are.equal(s, back)
    end
  end)

  it("measures edit distance with swaps of neighbours as one edit", function()
    assert.are.equal(0, util.edit_distance("warmup", "warmup"))
    assert.are.equal(1, util.edit_distance("warmpu", "warmup"))
    assert.are.equal(3, util.edit_distance("kitten", "sitting"))
    assert.are.equal(3, util.edit_distance("", "abc"))
    assert.are.equal(1, util.edit_distance("evry", "every"))
    assert.are.equal("warmup", util.nearest("warmpu", {"steps", "warmup", "final"}))
    assert.is_nil((util.nearest("zzz", {"steps", "warmup"})))
    assert.is_nil((util.nearest("x", {"y"})))    -- as far as the word is long: no hint
  end)

  it("checks option tables: unknown keys, nested tables, types, the caller's line", function()
    local spec = {every = "integer", sets = "table", fields = {input = true, target = true}}
    assert.are.same({}, util.check_options("f", nil, spec))
    local o = {every = 5}
    assert.are.equal(o, util.check_options("f", o, spec))
    local function f(opts)
      local checked = util.check_options("f", opts, spec)  -- (a tail call would drop f's frame from the count)
      return checked
    end
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() f{evry = 5} end)
    assert.is_false(ok)
    assert.are.equal("util_spec.lua:" .. line .. ": f: unknown option 'evry' (valid: every, fields, sets); " ..
      "did you mean 'every'?", err:match("[^/]*$"))
    assert.error_matches(function() f{fields = {inptu = "x"}} end,
      "^f: unknown option 'inptu' in fields %(valid: input, target%); did you mean 'input'%?$")
    assert.error_matches(function() f{every = 2.5} end, "f: option 'every' must be integer, got number")
    assert.error_matches(function() f{sets = dl.zeros(1)} end, "f: option 'sets' must be table, got tensor")
    assert.error_matches(function() f(3) end, "f: expected an option table, got integer")
    assert.error_matches(function() f{[1] = true} end, "f: unknown option '1' %(valid: every, fields, sets%)$")
    -- a list of names; alternatives of types; positional keys
    assert.error_matches(function() util.check_options("g", {c = 1}, {"a", "b"}) end,
      "g: unknown option 'c' %(valid: a, b%)$")
    assert.truthy(util.check_options("g", {a = print}, {a = "number|function"}))
    assert.error_matches(function() util.check_options("g", {a = "s"}, {a = "number|function"}) end,
      "g: option 'a' must be number or function, got string")
    assert.truthy(util.check_options("g", {4, 2, seed = 1}, {[1] = true, [2] = true, seed = true}))
    assert.is_nil((util.option_problem("g", {a = 1}, {"a"})))
    assert.are.equal("g: unknown option 'b' (valid: a)", util.option_problem("g", {b = 1}, {"a"}))
  end)

  it("checks integers with bounds in one wording, option tables and arguments alike", function()
    local spec = {warmup = "integer>=0", n = "integer>=1", k = "integer>=-2"}
    assert.truthy(util.check_options("f", {warmup = 0, n = 1, k = -2}, spec))
    assert.error_matches(function() util.check_options("f", {warmup = -1}, spec) end,
      "f: option 'warmup' must be a non-negative integer, got -1", nil, true)
    assert.error_matches(function() util.check_options("f", {n = 2.0}, spec) end,
      "f: option 'n' must be a positive integer, got 2.0", nil, true)
    assert.error_matches(function() util.check_options("f", {k = "x"}, spec) end,
      "f: option 'k' must be an integer >= -2, got string", nil, true)
    assert.are.equal("an integer in [1, 3]", util.integer_words(1, 3))
    assert.are.equal("an integer", util.integer_words())
    local why, n = util.integer_problem(4.0, 1)
    assert.is_nil(why)
    assert.are.equal("integer", math.type(n))
    assert.are.equal("must be a positive integer, got 0.5", (util.integer_problem(0.5, 1)))
    assert.are.equal("must be an integer in [1, 3], got table", (util.integer_problem({}, 1, 3)))
    assert.error_matches(function() util.check_integer("g", 2, 7, "count", 1, 3) end,
      "bad argument #2 to 'g' (count must be an integer in [1, 3], got 7)", nil, true)
    -- options that name a choice: nil (the default) and each choice pass; the message lists them
    assert.is_nil(util.choice_problem("warp", nil, {"auto", "log"}))
    assert.is_nil(util.choice_problem("warp", "log", {"auto", "log"}))
    assert.are.equal('option \'warp\' must be "auto", "log" or "none", got "rank"',
      util.choice_problem("warp", "rank", {"auto", "log", "none"}))
    assert.are.equal('option \'batch\' must be "qei" or "believer", got true',
      util.choice_problem("batch", true, {"qei", "believer"}))
    assert.are.equal('option \'k\' must be "a", got 1', util.choice_problem("k", 1, {"a"}))
  end)

  it("finds a key beside a list's entries, the same one whatever the table's order", function()
    assert.is_nil(util.list_stray_key({}))
    assert.is_nil(util.list_stray_key({8, 16}))
    assert.are.equal("x", util.list_stray_key({8, x = 9}))
    assert.are.equal("a", util.list_stray_key({8, y = 1, a = 2}))         -- the first as a string
    assert.are.equal(0, util.list_stray_key({8, y = 1, a = 2, [0] = 3}))  -- "0" < "a"
    assert.are.equal(0, util.list_stray_key({8, [0] = 3}))
    assert.are.equal(1.5, util.list_stray_key({8, [1.5] = 3}))
  end)

  it("knows the machine", function()
    assert.is_true(math.type(util.cores()) == "integer" and util.cores() >= 1)
    assert.is_true(#util.hostname() > 0)
    local f = assert(io.open("/proc/self/stat"))
    f:close()
    assert.is_true(math.type(util.getpid()) == "integer" and util.getpid() > 1)
    assert.are.equal(dl.version, util.VERSION)
  end)
end)
