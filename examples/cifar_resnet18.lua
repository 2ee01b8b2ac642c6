-- examples/cifar_resnet18.lua -- ResNet-18 on a CIFAR-style folder of 32x32 RGB images, the
-- playbook's demonstration workload: the images stay on disk as files (data.images) and are
-- decoded and augmented on the pipeline's workers (random crop with padding 4, mirror
-- images), 10% of the training folder held out for validation, SGD with Nesterov momentum and
-- a cosine decay, checkpoints ranked by validation accuracy.
--
--   /usr/bin/python3 scripts/fashion_mnist_cifar.py runs/cifar-fm   # or a CIFAR-10 folder of yours:
--   dlua examples/cifar_resnet18.lua --set data_dir=runs/cifar-fm    # DIR/train/<class>/*.png, DIR/test/...
--
-- examples/cifar_resnet18_study.lua tunes it (the seed workflow of the playbook's sweeps).
local dl = require "dlua"
local nn, optim, data = dl.nn, dl.optim, dl.data
local T = data.transforms
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local resnet = dofile(here .. "models/resnet.lua")

return dl.experiment{
  name = "cifar-resnet18",
  description = "ResNet-18 (CIFAR stem, post-norm BN) on 32x32 RGB image files, SGD Nesterov, cosine decay",
  hparams = {
    data_dir = "runs/cifar-fm", lr = 0.1, momentum = 0.9, weight_decay = 5e-4, batch_size = 128, steps = 4000,
    warmup = 200, width = 64, label_smoothing = 0.0, eval_every = 500, workers = 2, valid_fraction = 0.1,
    test_eval = true,
  },
  build = function(hp)
    if not dl.fs.is_dir(hp.data_dir .. "/train") then
      error(string.format("cifar_resnet18: no image folder at %s/train (write one with " ..
        "/usr/bin/python3 scripts/fashion_mnist_cifar.py %s, or --set data_dir=DIR for a folder of yours)",
        hp.data_dir, hp.data_dir), 0)
    end
    local all = data.images{dir = hp.data_dir .. "/train"}
    local n_valid = math.max(1, math.floor(#all * hp.valid_fraction + 0.5))
    local train, valid = all:split{#all - n_valid, n_valid, seed = 0}
    local mean = {mean = {0.5, 0.5, 0.5}, std = {0.25, 0.25, 0.25}}
    local prep = {T.scale(1 / 255), T.normalize(mean)}
    local model = resnet.build{in_channels = 3, classes = #all.classes.label, width = hp.width, post_norm = true,
                               norm = "batch", zero_init = true}
    local sets = {valid = valid:map(table.unpack(prep))}
    if hp.test_eval and dl.fs.is_dir(hp.data_dir .. "/test") then
      sets.test = data.images{dir = hp.data_dir .. "/test"}:map(table.unpack(prep))
    end
    return {
      model = model,
      loss = nn.CrossEntropy{label_smoothing = hp.label_smoothing},
      optimizer = optim.SGD{params = model:parameters(), lr = hp.lr, momentum = hp.momentum, nesterov = true,
                            weight_decay = hp.weight_decay},
      schedule = optim.schedule.cosine{warmup = hp.warmup},
      data = train:shuffle{seed = hp.data_seed}:map(T.random_crop(32, {padding = 4}), T.hflip(), table.unpack(prep))
        :batch(hp.batch_size):workers(hp.workers):prefetch(4),
      steps = hp.steps,
      classes = all.classes,
      eval = {every = hp.eval_every, batch_size = 250, metrics = {"loss", "accuracy"}, sets = sets},
      checkpoint = {keep_best = 1, metric = "valid/accuracy", mode = "max"},
    }
  end,
}
