-- tests/mpi/prune_study.lua: median pruning under `mpirun -np 2 dlua prune_study.lua`
-- (tests/lua/dist_spec.lua): two good trials first, then bad ones on both ranks; each
-- trial judges itself at its evals (every 5 of the 40 steps) in the study's journal,
-- wherever it runs, and stops. Its exp.lua is tests/fixtures/toy_experiment.lua,
-- slowed by `delay` seconds of busy waiting per step so that both ranks stay busy
-- (with instant trials rank 0 would run them all).
local dl = require "dlua"
return dl.study{
  name = "mpi-prune", goal = "pruned trials stop on every rank",
  experiment = "exp.lua",
  nuisance = {lr = dl.search.log_uniform(1e-4, 0.5)},
  fixed = {delay = 0.05, steps = 40, eval_every = 5, checkpoint_every = 5},
  enqueue = {{lr = 0.3}, {lr = 0.3}, {lr = 1e-4}, {lr = 1.1e-4}, {lr = 1.2e-4}, {lr = 1.3e-4}},
  prune = {algorithm = "median", warmup = 0, min_trials = 2},
  trials = 6, algorithm = "bayes", seed = 3,
  objective = {metric = "valid/accuracy", mode = "max"},
}
