-- api fuzzer finding (hang): search.halton_permutations with base 1 never returns
-- (the digit loop of base 1 does not terminate); small arguments, not a huge count.
-- Run: timeout 10 build/dlua tests/fuzz/crashes/api/halton_permutations_base1_hang.lua
-- (fixed: prints "refused" at once; today: killed by the timeout)
local dl = require "dlua"
local ok, err = pcall(dl.search.halton_permutations, 1, 3, {2, 3})
print(ok and "returned" or "refused: " .. tostring(err))
