-- api fuzzer finding: viewing a non-contiguous zero-size tensor as sizes whose product does
-- not match walks the shape array past its end (UBSan: index 8 out of bounds for int64_t [8]
-- in view_strides, engine/core/tensor.c:273): the chunk-matching loop multiplies by shape[nj++]
-- without checking nj < ndim.
-- Run: build-san/dlua tests/fuzz/crashes/api/view_strides_out_of_bounds.lua  (fixed: prints "refused")
local dl = require "dlua"
local t = dl.zeros(3, 0):reshape(3, 0, 1):expand(3, 0, 3)
local ok, err = pcall(function() return t:view((1 << 62) + 1, 0) end)
print(ok and "accepted" or "refused: " .. tostring(err))
