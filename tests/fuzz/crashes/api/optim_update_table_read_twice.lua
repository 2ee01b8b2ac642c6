-- api fuzzer finding: dl.optim_update reads the parameter table twice (validate, then update):
-- a table that answers a tensor the first time and nil (or another tensor) the second makes
-- the update use what it never validated (UBSan: member access within null pointer,
-- engine/lua/lua_optim.c:80; a bigger tensor with a gradient the second time overflows the
-- state buffers instead).
-- Run: build-san/dlua tests/fuzz/crashes/api/optim_update_table_read_twice.lua  (fixed: prints "refused" or "updated")
local dl = require "dlua"
local p = dl.rand(2, 3)
dl.requires_grad(p, true);
(p * 2):sum():backward()
local reads = 0
local params = setmetatable({}, {__len = function() return 1 end, __index = function(_, i)
  if i ~= 1 then return nil end
  reads = reads + 1
  return reads == 1 and p or nil
end})
local ok, err = pcall(dl.optim_update, "Adam", params, {dl.zeros(2, 3)}, {dl.zeros(2, 3)}, {lr = 0.1}, 1)
print(ok and "updated" or "refused: " .. tostring(err))
