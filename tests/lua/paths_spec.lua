-- dl.here(path): a path relative to the Lua file whose code calls it (issue 33,
-- item 9), so an experiment reads the data next to it from any directory; other
-- relative paths stay the shell's. The specs that run examples/flowers.lua and its
-- study from another directory are in study_spec.lua.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local fs = dl.fs

describe("dl.here", function()
  local dir
  setup(function()
    dir = H.tmpdir("here")
    fs.mkdir_p(dir .. "/proj/models")
    fs.mkdir_p(dir .. "/proj/data")
    fs.mkdir_p(dir .. "/elsewhere")
    H.spit(dir .. "/proj/data/t.csv", "a,label\n1,1\n2,2\n3,1\n4,2\n")
    -- a model file that names a file next to itself
    H.spit(dir .. "/proj/models/m.lua", 'local dl = require "dlua"\nreturn {where = function() local p = ' ..
      'dl.here("w.bin"); return p end}\n')
    H.spit(dir .. "/proj/exp.lua", [[
local dl = require "dlua"
local m = dofile(dl.here("models/m.lua"))
print("model file: " .. m.where())
print("csv: " .. dl.here("data/t.csv"))
print("absolute: " .. dl.here("/etc/x"))
print(select(2, pcall(function() return dl.here("x") end)))
print(select(2, pcall(load("return require('dlua').here('x')"))))
print(select(2, pcall(load("local p = require('dlua').here('x'); return p"))))
print(select(2, pcall(dl.here, "a", "b")))
print(select(2, pcall(dl.here, 3)))
print(select(2, pcall(dl.here, "x")))
local ds = dl.data.csv{path = dl.here("data/t.csv"), fields = {x = {"a"}, label = "label"}}
print("rows: " .. #ds)
]])
  end)
  teardown(function() fs.rm_rf(dir) end)

  it("resolves against the calling file's directory, from any directory, and says when it cannot", function()
    for _, case in ipairs({{dir .. "/elsewhere", dir .. "/proj/exp.lua", dir .. "/proj/"},
                           {dir .. "/proj", "exp.lua", ""},
                           {dir, "proj/exp.lua", "proj/"}}) do
      local out, rc = H.run(case[1], H.shquote(case[2]))
      assert.are.equal(0, rc, out)
      local p = case[3]
      assert.truthy(out:find("model file: " .. p .. "models/w.bin\n", 1, true), out)
      assert.truthy(out:find("csv: " .. p .. "data/t.csv\n", 1, true), out)
      assert.truthy(out:find("absolute: /etc/x\n", 1, true), out)
      assert.truthy(out:find("dl.here: called in a tail call (`return dl.here(...)`), which leaves no frame of the " ..
        "calling file; write `local p = dl.here(...)` and return p", 1, true), out)
      assert.truthy(out:find("dl.here: the calling code is not in a file (it was loaded from a string)", 1, true), out)
      assert.truthy(out:find("bad argument #2 to 'dl.here' (no more than 1 arguments expected, got 2)", 1, true), out)
      assert.truthy(out:find("bad argument #1 to 'dl.here' (string expected, got integer)", 1, true), out)
      assert.truthy(out:find("dl.here: called from C (such as pcall(dl.here, ...)), which has no file", 1, true), out)
      assert.truthy(out:find("rows: 4\n", 1, true), out)
    end
  end)
end)
