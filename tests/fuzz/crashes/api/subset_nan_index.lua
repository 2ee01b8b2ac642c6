-- api fuzzer finding: Dataset:subset with NaN / inf / -1 in the index list: the index is
-- converted and then decremented with signed overflow (UBSan: engine/lua/lua_pipeline.c, l_ds_subset).
-- Run: build-san/dlua tests/fuzz/crashes/api/subset_nan_index.lua  (fixed: prints "refused")
local dl = require "dlua"
local ds = dl.data.tensors{x = dl.rand(6, 3), y = dl.arange(1, 7, 1, {dtype = "int64"})}
local ok, err = pcall(function() return ds:subset({0 / 0, 1 / 0, -1}) end)
print(ok and "accepted" or "refused: " .. tostring(err))
