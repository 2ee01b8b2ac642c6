-- tests/bench/matmul.lua -- GFLOP/s of dlua's matmul (Lua call -> binding -> cblas_sgemm),
-- for the shapes of issue 2, at a given thread count. Pair with sgemm_direct.c.
--   build/dlua tests/bench/matmul.lua [threads=1] [window_seconds=1] [windows=5]
-- Per shape, one warm-up window, then `windows` timed windows of at least window_seconds each
-- (tests/bench/window.lua); one JSON line with the median, min and max GFLOP/s.
local dl = require "dlua"
local window = dofile(((arg[0] or ""):match("^(.*/)") or "./") .. "window.lua")

local threads = tonumber(arg[1]) or 1
local win = tonumber(arg[2]) or 1
local nwin = tonumber(arg[3]) or 5
dl.threads(threads)

local shapes = {{"sq1024", 1024, 1024, 1024}, {"b256_784x1024", 256, 1024, 784}}

for _, s in ipairs(shapes) do
  local name, M, N, K = s[1], s[2], s[3], s[4]
  dl.seed(0)
  local a, b = dl.randn(M, K), dl.randn(K, N)
  local flops = 2 * M * N * K
  local med, lo, hi = window.run(function() local c <close> = a:matmul(b) end,
                                 {seconds = win, windows = nwin, per_step = flops / 1e9})
  print(string.format('{"bench":"matmul","impl":"dlua","shape":"%s","threads":%d,"gflops_median":%.1f,"min":%.1f,"max":%.1f}',
    name, threads, med, lo, hi))
end
