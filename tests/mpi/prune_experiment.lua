-- tests/mpi/prune_experiment.lua: a small experiment slowed by `delay` seconds of
-- busy waiting per step, so that rank 0's pruner sees the evals of a trial running
-- on rank 1 while it runs (tests/lua/dist_spec.lua copies it as exp.lua next to
-- tests/mpi/prune_study.lua).
local dl = require "dlua"
local nn, optim, data = dl.nn, dl.optim, dl.data
return dl.experiment{
  name = "mpi-prune", description = "a slow toy experiment for the distributed pruning test",
  hparams = {lr = 0.05, steps = 40, batch_size = 16, width = 16, delay = 0.0},
  build = function(hp)
    local s0, c0 = dl.rng_state()
    dl.seed(11)
    local x = dl.randn(200, 8)
    local y = x:matmul(dl.randn(8, 3)):argmax(2)
    dl.rng_state(s0, c0)
    local tr, va = data.tensors{image = x, label = y}:split{150, 50, seed = 0}
    local model = nn.Sequential{nn.Linear(8, hp.width), nn.ReLU(), nn.Linear(hp.width, 3)}
    return {model = model, loss = nn.CrossEntropy(),
      optimizer = optim.SGD{params = model:parameters(), lr = hp.lr, momentum = 0.9},
      data = tr:shuffle{seed = hp.data_seed}:batch(hp.batch_size), steps = hp.steps,
      forward = function(m, batch)
        if hp.delay > 0 then local t = dl.clock(); while dl.clock() - t < hp.delay do end end
        return m(batch.image)
      end,
      eval = {every = 5, sets = {valid = va}},
      checkpoint = {every = 5}}
  end}
