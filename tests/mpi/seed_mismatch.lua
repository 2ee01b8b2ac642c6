-- tests/mpi/seed_mismatch.lua: rank 1 builds its model from another init seed
-- (a recipe bug the playbook warns about); dl.train must refuse on every rank
-- before the first step. Run under mpirun -np 2 by tests/lua/dist_spec.lua.
local dl = require "dlua"
local nn, optim, data = dl.nn, dl.optim, dl.data
dl.threads(1)
local rank = dl.dist.rank()
dl.seed(1)
local ds = data.tensors{image = dl.randn(64, 4), label = dl.ones(64, {dtype = "int32"})}
dl.seed(100 + rank)                               -- the mistake: the init seed differs per rank
local model = nn.Sequential{nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)}
local ok, err = pcall(dl.train, {
  model = model, loss = nn.CrossEntropy(), optimizer = optim.SGD{params = model:parameters(), lr = 0.1},
  data = ds:batch(16), steps = 5, dir = arg[1] .. (rank == 0 and "" or ".rank" .. rank), quiet = true,
  tracking = false})
io.stdout:write(string.format("rank %d ok %s error %s\n", rank, tostring(ok), tostring(err)))
os.exit(ok and 0 or 1)
