-- tests/mpi/batchnorm.lua: batch norm across 2 ranks (run under mpirun -np 2 by
-- tests/lua/dist_spec.lua; prints "ok <check>" lines, and raises on a failure).
--  1. sync = true: rank r normalises rows [32 r + 1, 32 r + 32] of a global batch
--     of 64 with the statistics of all 64 rows; output, dx, dgamma and dbeta equal
--     a one-process BatchNorm over the whole batch (dl.dist.solo), and the moving
--     averages are the same on both ranks.
--  2. sync = false: each rank's moving averages follow its own data; after
--     nn.sync_batchnorm (what dl.train calls before every eval and checkpoint)
--     both ranks hold the same averages, equal to the mean of the two.
local dl = require "dlua"
local nn = dl.nn
dl.threads(1)
local dist = dl.dist
assert(dist.world() == 2, "run with mpirun -np 2")
local rank = dist.rank()
local function close(a, b, tol, what)
  local d = (a:double() - b:double()):abs():max():item()
  local s = b:double():abs():max():item()
  if d > tol * math.max(1, s) then error(string.format("%s: max difference %.3g (tolerance %.3g)", what, d, tol), 0) end
end
local function rows(t) return t:narrow(1, 32 * rank + 1, 32) end

-- 1. synced statistics, forward and backward
dl.seed(5)
local x = dl.randn(64, 6, 3, 3) * 2 + 1          -- [N, C, H, W], mean far from 0
local r = dl.randn(64, 6, 3, 3)                  -- loss = sum(y * r): a fixed upstream gradient
local function run(bn, xin, rin)
  local xi = xin:clone():requires_grad(true)
  local y = bn(xi)
  local loss = (y * rin):sum()
  loss:backward()
  return y, xi.grad, bn.weight.grad, bn.bias.grad
end
local function make() dl.seed(9); local m = nn.BatchNorm(6, {sync = true}); dl.no_grad(function() m.weight:copy_(dl.rand(6) + 0.5) end); return m end
local ref = make()
local yr, gxr, gwr, gbr = dist.solo(run, ref, x, r)         -- one process, the whole batch
local bn = make()
local y, gx, gw, gb = run(bn, rows(x), rows(r))             -- this rank's rows, statistics over both ranks
close(y, rows(yr), 1e-5, "sync forward")
close(gx, rows(gxr), 1e-5, "sync dx")
close(dist.allreduce(gw, "sum"), gwr, 1e-5, "sync dgamma (summed over ranks)")
close(dist.allreduce(gb, "sum"), gbr, 1e-5, "sync dbeta (summed over ranks)")
close(bn.running_mean, ref.running_mean, 1e-6, "sync running_mean")
close(bn.running_var, ref.running_var, 1e-6, "sync running_var")
local rm = dist.allgather_object(bn.running_mean:totable())
assert(dl.tensor(rm[1]):ne(dl.tensor(rm[2])):float():sum():item() == 0, "sync: running_mean differs between ranks")
io.stdout:write("ok sync\n")

-- 2. local statistics, then the moving averages averaged across ranks
dl.seed(7)
local m = nn.BatchNorm(4)
for _ = 1, 3 do m(dl.randn(16, 4) * (1 + rank) + 3 * rank) end   -- each rank its own data
local before = dist.allgather_object({mean = m.running_mean:totable(), var = m.running_var:totable()})
assert(dl.tensor(before[1].mean):ne(dl.tensor(before[2].mean)):float():sum():item() == 4, "local: the ranks' averages should differ")
dist.data_parallel_hooks()
nn.sync_batchnorm(m)
local after = dist.allgather_object({mean = m.running_mean:totable(), var = m.running_var:totable()})
for _, k in ipairs({"mean", "var"}) do
  local a, b = dl.tensor(after[1][k]), dl.tensor(after[2][k])
  assert(a:ne(b):float():sum():item() == 0, "local: " .. k .. " differs between ranks after the sync")
  local avg = (dl.tensor(before[1][k], {dtype = "float64"}) + dl.tensor(before[2][k], {dtype = "float64"})) * 0.5
  close(a, avg, 1e-6, "local: synced running_" .. k .. " vs the mean of the ranks'")
end
io.stdout:write("ok local\n")
