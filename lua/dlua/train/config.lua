--- dlua.train.config: what makes a dl.train config valid: its keys (nested ones
-- too, through util.check_options), the required ones, the values, and the
-- optimizer against the model (one with no parameters, or with tensors the
-- model does not have, would train nothing or something else). dl.train raises
-- the message; dl.experiment raises it at the experiment's build function.
local util = require "dlua.util"
local dist = require "dlua.dist"
local policy = require "dlua.train.policy"

local M = {}

-- the config's keys, with the nested tables' own and the types of their values
-- (util.check_options); the ranges and the combinations are checked below
local CONFIG = {
  model = true, loss = true, optimizer = true, schedule = "callable", data = true, steps = true,
  eval = {every = true, sets = "table", metrics = "table", batch_size = "integer>=1", sample = "integer>=1",
          predictions = {indices = "table", set = "string"}},
  checkpoint = {every = true, keep_latest = true, keep_best = "integer>=1", keep_every = "integer>=1",
                metric = "string", mode = "string", share = "number", tolerance = "number"},
  objective = {metric = "string", mode = "string"},
  clip_grad_norm = "number", log_every = "integer>=1", dir = "string", resume = "boolean", override = "boolean",
  ema = {decay = "number"}, hparams = "table", name = "string", quiet = "boolean", divergence = {factor = "number"},
  fields = {input = true, target = true, weight = true}, tracking = "boolean|string", classes = "table",
  description = "string", command = "string", config_path = "string", forward = "callable",
  threads = true, trace = true,                 -- refused below, naming the flag and the call that sets them
  on_eval = "function",
}

-- the options the command line sets (dlua.cli) and dl.train does not read: what to do instead
local CLI_ONLY = {
  threads = "(dlua EXPERIMENT --threads N): call dl.threads(N) before dl.train",
  trace = "(dlua EXPERIMENT --trace FILE): call dl.trace.start(FILE) before dl.train and dl.trace.stop() after it",
}

-- the first problem of config.eval (given as a table): options that need sets, and
-- predictions that would write nothing
local function eval_problem(ev)
  local names = {}
  for name in pairs(ev.sets or {}) do names[#names + 1] = name end
  table.sort(names)
  if #names == 0 then
    for _, k in ipairs(util.sorted_keys(ev)) do
      if k ~= "sets" then
        return string.format("dl.train: eval.%s needs eval.sets (the sets to evaluate, {valid = dataset}): " ..
          "without them nothing is evaluated", k)
      end
    end
    return nil
  end
  local pr = ev.predictions
  if pr == nil then return nil end
  if pr.indices == nil or #pr.indices == 0 then
    return "dl.train: eval.predictions needs indices (the examples whose predictions are written, e.g. {1, 2, 3})"
  end
  for i, v in ipairs(pr.indices) do
    local bad = util.integer_problem(v, 1)
    if bad then return string.format("dl.train: eval.predictions.indices[%d] %s", i, bad) end
  end
  local bad = util.choice_problem("eval.predictions.set", pr.set, names)
  if bad then
    local hint = util.nearest(pr.set, names)
    return string.format("dl.train: %s (the names of eval.sets)%s", bad, hint and ("; did you mean '" .. hint .. "'?") or "")
  end
end

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
  for _, k in ipairs(util.sorted_keys(CLI_ONLY)) do
    if c[k] ~= nil then
      return string.format("dl.train: option '%s' is a command-line setting %s; dl.train does not read it", k, CLI_ONLY[k])
    end
  end
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
  local clip = c.clip_grad_norm
  if clip ~= nil and not (clip > 0 and clip < math.huge) then
    return "dl.train: option 'clip_grad_norm' must be a positive finite number (the largest global gradient norm " ..
      "a step keeps), got " .. tostring(clip)
  end
  if c.eval then
    local eprob = eval_problem(c.eval)
    if eprob then return eprob end
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
