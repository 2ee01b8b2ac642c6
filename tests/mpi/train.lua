-- tests/mpi/train.lua: one small dl.train run, the same script for 1 rank and
-- under `mpirun -np 2` (driven by tests/lua/dist_spec.lua, which compares the
-- runs). Arguments as key=value:
--   dir=PATH      the run directory (rank 0's; other ranks get PATH.rankR, which
--                 must never be created: only rank 0 writes)
--   batch=N       the global batch (default 128)
--   steps=N       (default 20)
--   bn=none|sync|local   no batch norm, nn.BatchNorm{sync = true}, or per-rank statistics
--   resume=1      continue the run in dir
--   every=N       eval and checkpoint period (default steps)
--   share=X       checkpoint = {share = X} instead of every (refused under mpirun)
--   shuffle_seed=S  the shuffle seed (default 5; "rank" = 5 + rank: differs per rank)
-- The data are fixed (seeded) and unaugmented, so 2 ranks x 64 see exactly the
-- examples of 1 rank x 128 at every step.
local dl = require "dlua"
local nn, optim, data = dl.nn, dl.optim, dl.data

local o = {batch = "128", steps = "20", bn = "none", resume = "0", shuffle_seed = "5"}
for _, a in ipairs(arg) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k then error("bad argument " .. a) end
  o[k] = v
end
dl.threads(1)
local rank = dl.dist.rank()

-- a fixed problem: 4 classes from a linear rule on 8 features
dl.seed(11)
local n = 1000
local x = dl.randn(n, 8)
local y = x:matmul(dl.randn(8, 4)):argmax(2)
local all = data.tensors{image = x, label = y}
local train, valid = all:split{896, 104}

dl.seed(3)                                       -- the init seed: the same on every rank
local layers = {nn.Linear(8, 32)}
if o.bn ~= "none" then layers[#layers + 1] = nn.BatchNorm(32, {sync = o.bn == "sync"}) end
layers[#layers + 1] = nn.ReLU()
layers[#layers + 1] = nn.Linear(32, 4)
local model = nn.Sequential(layers)

local sseed = o.shuffle_seed == "rank" and 5 + rank or tonumber(o.shuffle_seed)
local steps = tonumber(o.steps)
local every = tonumber(o.every or o.steps)
local dir = rank == 0 and o.dir or string.format("%s.rank%d", o.dir, rank)
local res = dl.train{
  model = model, loss = nn.CrossEntropy(),
  optimizer = optim.SGD{params = model:parameters(), lr = 0.2, momentum = 0.9},
  data = train:shuffle{seed = sseed}:batch(tonumber(o.batch)),
  steps = steps, dir = dir, quiet = true, resume = o.resume == "1",
  eval = {every = every, sets = {valid = valid}, batch_size = 25, metrics = {"loss", "accuracy", "per_class"}},
  checkpoint = o.share and {share = tonumber(o.share), keep_latest = 10} or {every = every, keep_latest = 10},
}
if res.status ~= "done" then
  io.stderr:write("train.lua: ", res.status, ": ", tostring(res.message), "\n")
  os.exit(1)
end
-- every rank reports what it ended with (the spec compares ranks)
local sd = model:state_dict()
local sums = {}
for k, t in pairs(sd) do sums[k] = t:double():sum():item() end
io.stdout:write(string.format("rank %d checksum %s metric %.17g allreduce %.6f\n", rank,
  dl.dist.checksum((function() local l, ks = {}, {} for k in pairs(sd) do ks[#ks + 1] = k end
    table.sort(ks) for i, k in ipairs(ks) do l[i] = sd[k] end return l end)()),
  res.metrics["valid/loss"] or -1, res.cost.allreduce or 0))
