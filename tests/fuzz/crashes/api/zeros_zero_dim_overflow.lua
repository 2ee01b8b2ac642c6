-- api fuzzer finding: creation with a 0 size first and huge sizes after: the element count
-- stays 0 but the running product of the other sizes overflows (UBSan: signed integer
-- overflow in engine/core/tensor.c, creation; the IDX reader reaches the same line through a
-- header [0, 2^32-1, 2^32-1]).
-- Run: build-san/dlua tests/fuzz/crashes/api/zeros_zero_dim_overflow.lua  (fixed: prints "refused")
local dl = require "dlua"
local ok, err = pcall(function() return dl.zeros(0, 1 << 32, 1 << 32) end)
print(ok and "accepted" or "refused: " .. tostring(err))
