-- tests/bench/gemm_trajectory.lua -- how far float32 training drifts from float64 on each matrix
-- product path (docs/benchmarks.md, "The main job"). The main job's model (no dropout), the same
-- initialisation and batches, SGD with Nesterov momentum; saves the parameters after STEPS steps.
--   dlua tests/bench/gemm_trajectory.lua train float32|float64 STEPS OUT.safetensors
--   dlua tests/bench/gemm_trajectory.lua dist A.safetensors REF.safetensors   # relative distance
-- tests/bench/run_gemm_trajectory.sh runs the own kernels and OpenBLAS against float64.
local dl = require "dlua"
local nn, data, T, optim = dl.nn, dl.data, dl.data.transforms, dl.optim

local function train(dtype, steps, out)
  local fm = data.fashion_mnist{limit = 20000}
  local pipe = fm.train:shuffle{seed = 3}:map(T.scale(1 / 255), T.normalize{mean = 0.2860, std = 0.3530}):batch(128)
  dl.seed(0)
  local c = 32
  local m = nn.Sequential{
    nn.Conv2d(1, c, 5, {padding = 2}), nn.BatchNorm(c, {virtual_batch = 64}), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(c, 2 * c, 5, {padding = 2}), nn.BatchNorm(2 * c, {virtual_batch = 64}), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(2 * c * 49, 256), nn.ReLU(), nn.Linear(256, 10)}
  if dtype == "float64" then m:to("float64") end
  local loss = nn.CrossEntropy{label_smoothing = 0.07}
  local opt = optim.SGD{params = m:parameters(), lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 1.6e-4}
  local step = 0
  for b in pipe:iter{epochs = 1} do
    step = step + 1
    local x = dtype == "float64" and b.image:to("float64") or b.image
    local l = loss:forward(m:forward(x), b.label)
    opt:zero_grad(); l:backward(); opt:step()
    if step == steps then break end
  end
  local t = {}
  for k, v in pairs(m:state_dict()) do if v:dtype():match("float") then t[k] = v:to("float64") end end
  assert(dl.checkpoint.save(out, t))
end

local function dist(a_path, b_path)
  local a, b = assert(dl.checkpoint.load(a_path)), assert(dl.checkpoint.load(b_path))
  local num, den = 0, 0
  for k, ref in pairs(b) do
    local d = a[k] - ref
    num, den = num + (d * d):sum():item(), den + (ref * ref):sum():item()
  end
  print(string.format("%s against %s: relative distance %.3e", a_path, b_path, math.sqrt(num / den)))
end

if arg[1] == "train" and (arg[2] == "float32" or arg[2] == "float64") and tonumber(arg[3]) and arg[4] then
  train(arg[2], math.tointeger(tonumber(arg[3])), arg[4])
elseif arg[1] == "dist" and arg[2] and arg[3] then
  dist(arg[2], arg[3])
else
  io.stderr:write("usage: dlua tests/bench/gemm_trajectory.lua train float32|float64 STEPS OUT | dist A REF\n")
  os.exit(2)
end
