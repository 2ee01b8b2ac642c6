-- tests/mpi/study.lua: a 6-trial quasi-random study over exp.lua, run as
-- `mpirun -np 2 dlua study.lua --out runs --quiet` by tests/lua/dist_spec.lua
-- (from a scratch directory holding this file and tests/fixtures/toy_experiment.lua
-- as exp.lua, here a width-8 net trained by plain SGD, evaluated and checkpointed
-- every 10 steps): the trials are spread over the two ranks and rank 0 writes the
-- study's files.
local dl = require "dlua"
return dl.study{
  name = "mpi-spread", goal = "each trial runs exactly once, on one of the ranks",
  experiment = "exp.lua",
  nuisance = {lr = dl.search.log_uniform(0.01, 0.5)},
  fixed = {steps = 20, width = 8, momentum = 0.0, eval_every = 10, checkpoint_every = 10},
  trials = 6, algorithm = "quasirandom", seed = 3,
  objective = {metric = "valid/accuracy", mode = "max"},
}
