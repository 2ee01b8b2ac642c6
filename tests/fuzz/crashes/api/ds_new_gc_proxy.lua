-- api fuzzer finding: core._ds_new (under dl.data.tensors) pops the names and tensors it
-- read off the Lua stack before using them: a names table whose __index collects garbage
-- and answers a fresh string each time lets the collector free a name still in use
-- (ASan heap-use-after-free in engine/lua/lua_pipeline.c).
-- Run: build-san/dlua tests/fuzz/crashes/api/ds_new_gc_proxy.lua  (fixed: prints "refused" or "built")
local core = require "dlua.core"
local dl = require "dlua"
local names = setmetatable({}, {__len = function() return 2 end, __index = function(_, i)
  collectgarbage()
  if type(i) == "number" and i <= 2 then return string.format("field%d_%d", i, math.random(1 << 30)) end
end})
local tensors = setmetatable({}, {__len = function() return 2 end, __index = function(_, i)
  collectgarbage()
  if type(i) == "number" and i <= 2 then return dl.rand(4, 2) end
end})
local ok, err = pcall(core._ds_new, names, tensors)
print(ok and "built" or "refused: " .. tostring(err))
