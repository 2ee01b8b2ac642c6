--- examples/models/mlp.lua: a reference multilayer perceptron whose structure comes
-- from an hp table, so a study can vary depth, width, activation, dropout and
-- normalisation without editing code.
--
--   local mlp = dofile("examples/models/mlp.lua")
--   local model = mlp.build{depth = 2, width = 256, activation = "gelu", norm = "layer"}
--   local logits = model(x)          -- x is [N, inputs] or [N, ...] (flattened first)
--
-- Each hidden layer is Linear -> [norm] -> activation -> [Dropout]; the
-- output layer is a plain Linear giving logits. depth = 0 gives a linear model.
-- norm = "batch" uses nn.BatchNorm on [N, width], looked up when the model is built.
-- It does not do residual connections.
local dl = require "dlua"
local nn = dl.nn

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local hparams = dofile(here .. "hp.lua")
local rules = hparams.rules

local M = {}

--- The defaults (Fashion-MNIST sized); every key can be set in build's hp.
M.defaults = {
  inputs = 784,          -- input features (the input is flattened from dimension 2 on)
  outputs = 10,          -- classes (logits)
  depth = 2,             -- hidden layers (0: a single Linear)
  width = 256,           -- units per hidden layer
  activation = "relu",   -- "relu" | "gelu" | "tanh"
  dropout = 0,           -- dropout probability after each hidden activation (0: none)
  norm = "none",         -- "none" | "layer" | "batch": LayerNorm / BatchNorm after each hidden Linear
  norm_eps = 1e-5,       -- epsilon of the norm layers
}

M.checks = {
  inputs = rules.positive, outputs = rules.positive, depth = rules.count, width = rules.positive,
  activation = rules.one_of{"relu", "gelu", "tanh"}, dropout = rules.prob,
  norm = rules.one_of{"none", "layer", "batch"}, norm_eps = rules.positive_number,
}

local activations = {relu = nn.ReLU, gelu = nn.GELU, tanh = nn.Tanh}

--- Builds the MLP: an nn.Sequential{Flatten, hidden layers..., Linear}. hp overrides
-- M.defaults; unknown keys raise unless opts.strict == false. The resolved table is
-- kept as model.hp.
function M.build(hp, opts)
  hp = hparams.resolve("mlp", M.defaults, M.checks, hp, opts)
  local norm
  if hp.norm == "layer" then
    norm = function(n) return nn.LayerNorm(n, {eps = hp.norm_eps}) end
  elseif hp.norm == "batch" then
    local BatchNorm = nn.BatchNorm          -- resolved now: it may land after this file was loaded
    if not BatchNorm then
      error("mlp: hp.norm = 'batch' needs nn.BatchNorm, which this dlua does not have yet (use 'layer' or 'none')", 2)
    end
    norm = function(n) return BatchNorm(n, {eps = hp.norm_eps}) end
  end
  local layers = {nn.Flatten()}
  local n_in = hp.inputs
  for _ = 1, hp.depth do
    layers[#layers + 1] = nn.Linear(n_in, hp.width)
    if norm then layers[#layers + 1] = norm(hp.width) end
    layers[#layers + 1] = activations[hp.activation]()
    if hp.dropout > 0 then layers[#layers + 1] = nn.Dropout(hp.dropout) end
    n_in = hp.width
  end
  layers[#layers + 1] = nn.Linear(n_in, hp.outputs)
  local model = nn.Sequential(layers)
  rawset(model, "hp", hp)
  return model
end

return M
