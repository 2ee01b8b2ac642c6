-- api fuzzer finding (hang): search functions take counts and dimensions without an upper
-- bound and loop (and allocate) for as long as asked: primes(1e9), halton(i, 2^31),
-- halton_sequence(2^62 + 1), random_point(i, 2^40), suggester:suggest(2^31); track.csv_row
-- with n = 1e9 likewise. Each call below should be refused at once.
-- Run: timeout 20 build/dlua tests/fuzz/crashes/api/search_huge_counts_hang.lua
local dl = require "dlua"
local s = dl.search
local calls = {
  {"primes(1e9)", function() return s.primes(1000000000) end},
  {"halton(1, 2^31)", function() return s.halton(1, 1 << 31) end},
  {"halton_sequence(2^62 + 1, 1)", function() return s.halton_sequence((1 << 62) + 1, 1) end},
  {"random_point(1, 2^40, 1)", function() return s.random_point(1, 1 << 40, 1) end},
  {"csv_row({}, 1e9)", function() return dl.track.csv_row({}, 1000000000) end},
}
for _, c in ipairs(calls) do
  local t0 = os.clock()
  local ok, err = pcall(c[2])
  print(string.format("%-30s %s after %.2f s", c[1], ok and "returned" or "refused (" .. tostring(err):sub(1, 60) .. ")", os.clock() - t0))
end
