-- tests/bench/dist_scaling.lua -- data-parallel scaling of dl.train: the MLP
-- 784-1024-1024-10 (1.86 M parameters, 7.4 MB of float32 gradients) with
-- SGD-Nesterov on Fashion-MNIST, global batch 256, run alone or under mpirun.
-- Rank 0 prints one JSON line: examples/s over the timed steps (global batch x
-- steps / training seconds) and the allreduce time per step, both the whole
-- gradient reduction (packing, MPI, unpacking) and MPI_Allreduce alone.
--   build/dlua tests/bench/dist_scaling.lua [steps=60] [threads=1] [batch=256]
--   mpirun -np 2 build/dlua tests/bench/dist_scaling.lua 60 1 256
-- tests/bench/run_dist_scaling.sh runs the comparisons reported in docs/benchmarks.md.
local dl = require "dlua"
local nn, optim, data = dl.nn, dl.optim, dl.data

local steps = tonumber(arg[1]) or 60
local threads = tonumber(arg[2]) or 1
local batch = tonumber(arg[3]) or 256
dl.threads(threads)
local fm = dl.data.fashion_mnist_tensors().train
local train = data.tensors{image = fm.x:reshape(60000, 784), label = fm.y}
dl.seed(0)
local model = nn.Sequential{nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)}
local opt = optim.SGD{params = model:parameters(), lr = 0.01, momentum = 0.9, nesterov = true}
local dir = string.format("%s/dlua-bench-dist-%d", os.getenv("TMPDIR") or "/tmp", dl.dist.world())
if dl.dist.rank() == 0 then dl.fs.rm_rf(dir) end
dl.dist.barrier()
local before = dl.dist.stats()
local res = dl.train{model = model, loss = nn.CrossEntropy(), optimizer = opt,
  data = train:shuffle{seed = 1}:batch(batch):prefetch(4), steps = steps, dir = dir, quiet = true, tracking = false,
  checkpoint = {every = steps * 10}}
local after = dl.dist.stats()
assert(res.status == "done", res.message)
if dl.dist.rank() == 0 then
  local mpi_calls = after.allreduce_calls - before.allreduce_calls
  print(string.format('{"bench":"dist_scaling","world":%d,"threads":%d,"batch":%d,"steps":%d,"ex_per_s":%.0f,' ..
    '"train_s":%.3f,"input_fraction":%.3f,"grad_reduce_ms_per_step":%.3f,"mpi_allreduce_ms_per_step":%.3f,' ..
    '"mpi_calls_per_step":%.2f}', dl.dist.world(), threads, batch, steps, batch * steps / res.cost.train,
    res.cost.train, res.cost.input_fraction, 1000 * (res.cost.allreduce or 0) / steps,
    1000 * (after.allreduce_seconds - before.allreduce_seconds) / steps, mpi_calls / steps))
  dl.fs.rm_rf(dir)
end
