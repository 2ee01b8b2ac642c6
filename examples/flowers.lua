-- flowers.lua: a small classifier on a CSV of your own (examples/data/flowers.csv)
local dl = require "dlua"
local nn, optim, data = dl.nn, dl.optim, dl.data

return dl.experiment{
  name = "flowers", hparams = {lr = 0.1, width = 16, batch_size = 16, steps = 150},
  build = function(hp)
    local ds = data.csv{path = dl.here("data/flowers.csv"), classes = {"label"},  -- next to this file
                        fields = {x = {"petal_length", "petal_width"}, label = "species"}}
    local train, valid = ds:split{90, 30, seed = 0}
    local model = nn.Sequential{nn.Linear(2, hp.width), nn.ReLU(), nn.Linear(hp.width, #ds.classes.label)}
    return {
      model = model, loss = nn.CrossEntropy(),
      optimizer = optim.SGD{params = model:parameters(), lr = hp.lr, momentum = 0.9},
      data = train:shuffle{seed = hp.data_seed}:batch(hp.batch_size),
      fields = {input = "x", target = "label"},           -- the batch's names (default: image, label)
      classes = ds.classes,                                -- kept in the checkpoints: label 1 is "daisy"
      eval = {every = 25, sets = {valid = valid}},
    }
  end,
}
