-- flowers_study.lua: which learning rate suits examples/flowers.lua? 4 trials of 100 steps
local dl = require "dlua"
return dl.study{
  name = "flowers-lr", goal = "the learning rate for the flowers classifier",
  experiment = "flowers.lua",                      -- next to this file
  nuisance = {lr = dl.search.log_uniform(0.01, 1)},
  fixed = {steps = 100},
  trials = 4, algorithm = "quasirandom", seed = 1,
  objective = {metric = "valid/accuracy", mode = "max"},
}
