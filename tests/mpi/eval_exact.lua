-- tests/mpi/eval_exact.lua: evaluates a fixed model on sets whose sizes are not
-- multiples of world x batch, with the evaluator dl.train uses (sharded by
-- batches under mpirun), and prints every metric to 17 digits on rank 0. Run
-- once alone and once under mpirun -np 2: tests/lua/dist_spec.lua asserts the
-- printed values are identical.
local dl = require "dlua"
local nn, data, metrics, json = dl.nn, dl.data, dl.metrics, dl.json
dl.threads(1)
dl.seed(21)
local n = 1003                                   -- 11 batches of 100 (the last has 3): not divisible by 2 x 100
local x = dl.randn(n, 6)
local y = x:matmul(dl.randn(6, 5)):argmax(2)
dl.seed(4)
local model = nn.Sequential{nn.Linear(6, 16), nn.BatchNorm(16), nn.Tanh(), nn.Linear(16, 5)}
model:eval()
local shard = dl.dist.world() > 1 and dl.dist.eval_shard() or nil
local ev = metrics.evaluator{model = model, loss = nn.CrossEntropy(), batch_size = 100, shard = shard,
  metrics = {"loss", "accuracy", "top2", "per_class", mean_out = function(out, _, wt)
    return (out:sum(2):reshape(-1) * wt):sum():item(), wt:sum():item() end}}
local out = {}
dl.no_grad(function()
  local sets = {
    dataset = data.tensors{image = x, label = y},                       -- a dataset: subsets per rank
    pipeline = data.tensors{image = x, label = y}:map(function(e) return e end),   -- a pipeline: skips batches
    memory = {input = x, target = y},                                    -- tensors in memory
    small = {input = x:narrow(1, 1, 150), target = y:narrow(1, 1, 150)}, -- 2 batches: one each
    tiny = {input = x:narrow(1, 1, 30), target = y:narrow(1, 1, 30)},   -- 1 batch: rank 1 has none
  }
  local names = {}
  for name in pairs(sets) do names[#names + 1] = name end
  table.sort(names)                              -- pairs order differs between processes (string hash seeds)
  for _, name in ipairs(names) do
    local set = sets[name]
    local r = ev:run(name, set, 0)
    for k, v in pairs(r) do
      if type(v) == "number" then out[name .. "/" .. k] = string.format("%.17g", v)
      else out[name .. "/" .. k] = json.encode(v) end
    end
  end
end)
if dl.dist.rank() == 0 then io.stdout:write(json.encode(out), "\n") end
