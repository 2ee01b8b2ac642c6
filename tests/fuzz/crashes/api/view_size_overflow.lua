-- api fuzzer finding: view accepts sizes whose product overflows int64
-- (UBSan: signed integer overflow in engine/core/tensor.c, the view/reshape size product; the
-- release build wraps the product to 4 and later reads past the heap block).
-- Run: build-san/dlua tests/fuzz/crashes/api/view_size_overflow.lua  (fixed: prints "refused")
local dl = require "dlua"
local ok, err = pcall(function() return dl.zeros(4):view((1 << 62) + 1, 4) end)
print(ok and "accepted" or "refused: " .. tostring(err))
