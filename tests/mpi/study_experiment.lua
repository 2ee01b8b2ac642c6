-- tests/mpi/study_experiment.lua: a tiny experiment (~0.1 s a trial) for the
-- distributed study test (tests/mpi/study.lua names it as exp.lua in a scratch
-- directory; tests/lua/dist_spec.lua copies both there).
local dl = require "dlua"
local nn, optim, data = dl.nn, dl.optim, dl.data
return dl.experiment{
  name = "mpi-toy", description = "a small experiment for the distributed study test",
  hparams = {lr = 0.05, steps = 20, batch_size = 16, width = 8},
  build = function(hp)
    local s0, c0 = dl.rng_state()
    dl.seed(11)
    local x = dl.randn(160, 6)
    local y = x:matmul(dl.randn(6, 3)):argmax(2)
    dl.rng_state(s0, c0)
    local tr, va = data.tensors{image = x, label = y}:split{120, 40, seed = 0}
    local model = nn.Sequential{nn.Linear(6, hp.width), nn.ReLU(), nn.Linear(hp.width, 3)}
    return {model = model, loss = nn.CrossEntropy(), optimizer = optim.SGD{params = model:parameters(), lr = hp.lr},
      data = tr:shuffle{seed = hp.data_seed}:batch(hp.batch_size), steps = hp.steps,
      eval = {every = 10, sets = {valid = va}}, checkpoint = {every = 10, metric = "valid/accuracy"}}
  end}
