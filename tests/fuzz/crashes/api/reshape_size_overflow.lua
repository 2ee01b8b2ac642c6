-- api fuzzer finding: reshape with a -1 and sizes whose product overflows int64
-- (UBSan: signed integer overflow in engine/core/tensor.c, the reshape size product).
-- Run: build-san/dlua tests/fuzz/crashes/api/reshape_size_overflow.lua  (fixed: prints "refused")
local dl = require "dlua"
local ok, err = pcall(function() return dl.zeros(2, 3):reshape(-1, 1, (1 << 62) + 1, 4) end)
print(ok and "accepted" or "refused: " .. tostring(err))
