--- dlua.train.config: what makes a dl.train config valid: its keys (nested ones
-- too, through util.check_options), the required ones, the values, and the
-- optimizer against the model (one with no parameters, or with tensors the
-- model does not have, would train nothing or something else). dl.train raises
-- the message; dl.experiment raises it at the experiment's build function.
local util = require "dlua.util"
local dist = require "dlua.dist"
local policy = require "dlua.train.policy"

local M = {}

-- the config's keys, with the nested tables' own (util.check_options)
local CONFIG = {
  model = true, loss = true, optimizer = true, schedule = true, data = true, steps = true,
  eval = {every = true, sets = "table", metrics = true, batch_size = true, sample = true,
          predictions = {indices = "table", set = "string"}},
  checkpoint = {every = true, keep_latest = true, keep_best = true, keep_every = true, metric = "string",
                mode = "string", share = "number", tolerance = "number"},
  objective = {metric = "string", mode = "string"},
  clip_grad_norm = true, log_every = true, dir = true, resume = true, override = "boolean", ema = {decay = "number"},
  hparams = true, name = true, quiet = true, divergence = {factor = "number"},
  fields = {input = true, target = true, weight = true}, tracking = true, classes = "table",
  description = true, command = true, config_path = true, forward = true, threads = true, trace = true,
  on_eval = "function",
}

-- The optimizer against the model: parameters it updates that the model does not
-- have, or none at all, are errors (training would change nothing, or something
-- else); returns the message, and the model's trainable parameters the optimizer
-- leaves alone (names), for a warning. Models without named_parameters (a plain
-- function) and optimizers without a params list are not checked.
local function optimizer_problem(model, opt)
  if type(opt) ~= "table" or type(opt.params) ~= "table" then return nil, {} end
  local kind = tostring(opt.kind or "optimizer")
  if #opt.params == 0 then
    return string.format("dl.train: the optimizer (%s) has no parameters, so training would change nothing: " ..
      "give it params = model:parameters() (or call opt:attach(model:parameters()))", kind), {}
  end
  local ok, named = pcall(function() return model:named_parameters() end)
  if not ok or type(named) ~= "table" then return nil, {} end
  local in_model, in_opt = {}, {}
  for _, np in ipairs(named) do in_model[np[2]] = np[1] end
  for i, p in ipairs(opt.params) do
    in_opt[p] = true
    if not in_model[p] then
      local shape = util.is_tensor(p) and ("[" .. table.concat(p:shape(), ", ") .. "]") or type(p)
      return string.format("dl.train: the optimizer (%s) updates a tensor %s (its parameter %d) that is not a " ..
        "parameter of the model (the model has %d: %s...): build the optimizer from this model's parameters()",
        kind, shape, i, #named, named[1] and named[1][1] or "none"), {}
    end
  end
  local missed = {}
  for _, np in ipairs(named) do
    if not in_opt[np[2]] and np[2]:requires_grad() then missed[#missed + 1] = np[1] end
  end
  return nil, missed
end
M.optimizer_problem = optimizer_problem

--- config_problem(config) -> nil when config is a valid dl.train config, else the
-- message (unknown keys at any depth, missing required keys, bad values); dl.train
-- raises it, dl.experiment raises it at the experiment's build function.
function M.config_problem(c)
  if type(c) ~= "table" then return "dl.train: expected a config table, got " .. type(c) end
  local bad = util.option_problem("dl.train", c, CONFIG)
  if bad then return bad end
  for _, k in ipairs({"model", "loss", "optimizer", "data", "steps"}) do
    if c[k] == nil then return "dl.train: config." .. k .. " is required" end
  end
  local oprob = optimizer_problem(c.model, c.optimizer)
  if oprob then return oprob end
  if math.type(c.steps) ~= "integer" or c.steps < 1 then
    return "dl.train: steps must be a positive integer, got " .. tostring(c.steps)
  end
  if c.eval and c.eval.every and (math.type(c.eval.every) ~= "integer" or c.eval.every < 1) then
    return "dl.train: eval.every must be a positive integer number of steps, got " .. tostring(c.eval.every)
  end
  local d = c.ema and c.ema.decay
  if d ~= nil and not (d >= 0 and d < 1) then
    return "dl.train: ema.decay must be in [0, 1) (0.999: about the last 1000 steps), got " .. tostring(d)
  end
  if c.override and not c.resume then
    return "dl.train: override = true applies to a resume only (it lets resume = true change hyperparameters)"
  end
  if c.on_eval and dist.world() > 1 then
    return "dl.train: on_eval cannot stop a run that is data parallel over ranks (mpirun): leave it out"
  end
  return policy.config_problem(c)
end

return M
