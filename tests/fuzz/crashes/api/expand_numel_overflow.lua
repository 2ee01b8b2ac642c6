-- api fuzzer finding: expand to sizes whose product overflows int64 is accepted; numel()
-- then overflows (UBSan: signed integer overflow in dl_numel, engine/core/tensor.c) and printing
-- the tensor never returns in the release build.
-- Run: build-san/dlua tests/fuzz/crashes/api/expand_numel_overflow.lua  (fixed: prints "refused")
local dl = require "dlua"
local ok, err = pcall(function() return dl.zeros(2):expand(1 << 62, 2) end)
if ok then print("accepted, numel", dl.numel(err)) else print("refused: " .. tostring(err)) end
