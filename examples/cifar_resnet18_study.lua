-- examples/cifar_resnet18_study.lua -- the playbook's seed workflow on examples/cifar_resnet18.lua:
-- an exploration study of the learning rate (scientific: which lr) with momentum and weight
-- decay as nuisance hyperparameters, quasi-random, trials short enough for a CPU.
--   dlua examples/cifar_resnet18_study.lua [--jobs 1]     (then: dlua report runs/cifar-resnet18-lr)
local dl = require "dlua"
return dl.study{
  name = "cifar-resnet18-lr", goal = "the learning rate of ResNet-18 on the CIFAR-style folder",
  experiment = "cifar_resnet18.lua",               -- next to this file: runs from any directory
  scientific = {lr = {0.03, 0.1, 0.3}},
  nuisance = {momentum = dl.search.uniform(0.8, 0.95), weight_decay = dl.search.log_uniform(1e-5, 1e-3)},
  fixed = {steps = 600, eval_every = 200, width = 32, test_eval = false},
  trials = 9, algorithm = "quasirandom", seed = 3,
  objective = {metric = "valid/accuracy", mode = "max"},
}
