-- Input pipeline benchmarks (issue 5).
--
--   dlua tests/bench/pipeline.lua scaling [windows]   augmentation throughput, 1 vs 2 workers
--   dlua tests/bench/pipeline.lua wait [windows]      consumer wait fraction under a training step
--
-- scaling: Fashion-MNIST train, shuffle, random_crop(28, padding 4), flip,
-- random_affine (+-15 degrees, zoom 0.9..1.1, shift 0.1), scale(1/255), batch
-- 256, prefetch 4; the consumer only takes the batches, so the pipeline is
-- the bottleneck. Each window is two passes over 12,800 examples (100
-- batches); the script prints the median and range of examples/s per worker
-- count, interleaving the settings so machine noise hits both alike, and the
-- cores the process got (its CPU time / wall time): on a shared machine a
-- 2-worker window that got fewer than 2 cores was slowed by other jobs.
--
-- wait: an MLP 784-256-10 training step (SGD, batch 256, dl.threads(1)) fed
-- by a light augmentation (crop, flip, scale: cheaper than the step) with
-- prefetch 4, prefetch 1 and no worker thread (everything on the consumer),
-- and by the heavy one above (dearer than the step) with 1 and 2 workers;
-- reports the fraction of step time spent waiting for input over 60 steps
-- per window, and the costs per batch that explain it.
local dl = require "dlua"
local data, T, nn, optim = dl.data, dl.data.transforms, dl.nn, dl.optim

local mode = arg[1] or "scaling"
local windows = tonumber(arg[2] or "5")

local fm = data.fashion_mnist()
local function augment(ds)
  return ds:shuffle{seed = 1}:map(T.random_crop(28, {padding = 4}), T.flip{},
    T.random_affine{degrees = 15, scale = {0.9, 1.1}, translate = 0.1}, T.scale(1 / 255)):batch(256)
end

-- CPU seconds this process has used (user + system, from /proc/self/stat)
local function cpu_seconds()
  local f = io.open("/proc/self/stat")
  if not f then return 0 end
  local st = f:read("a")
  f:close()
  local rest = st:sub(st:find(")", 1, true) + 2)
  local fields = {}
  for x in rest:gmatch("%S+") do fields[#fields + 1] = x end
  return (tonumber(fields[12]) + tonumber(fields[13])) / 100        -- utime, stime in 1/100 s
end

local function median(t)
  local s = {table.unpack(t)}
  table.sort(s)
  return s[(#s + 1) // 2], s[1], s[#s]
end

if mode == "scaling" then
  local part = fm.train:subset(dl.arange(1, 12801):long())
  local base = augment(part):prefetch(4)
  local rates, cores = {[1] = {}, [2] = {}}, {[1] = {}, [2] = {}}
  for w = 1, windows + 1 do
    for _, n in ipairs{1, 2} do
      local p = base:workers(n)
      local c0, t0 = cpu_seconds(), dl.clock()
      local count = 0
      for _ = 1, 2 do                                     -- two passes: 25,600 examples
        for b in p:iter{warn = false} do count = count + b.image:size(1) end
      end
      local el = dl.clock() - t0
      if w > 1 then                                       -- window 1 warms up
        rates[n][#rates[n] + 1] = count / el
        cores[n][#cores[n] + 1] = (cpu_seconds() - c0) / el
      end
    end
  end
  local m1, lo1, hi1 = median(rates[1])
  local m2, lo2, hi2 = median(rates[2])
  print(string.format("workers 1: %8.0f ex/s  [%.0f, %.0f]  cores used %.2f", m1, lo1, hi1, (median(cores[1]))))
  print(string.format("workers 2: %8.0f ex/s  [%.0f, %.0f]  cores used %.2f", m2, lo2, hi2, (median(cores[2]))))
  print(string.format("speed-up : %.2fx (median of %d windows of 25,600 examples)", m2 / m1, windows))
elseif mode == "wait" then
  dl.threads(1)
  dl.seed(0)
  local model = nn.Sequential{nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)}
  local opt = optim.SGD{params = model:parameters(), lr = 0.05, momentum = 0.9}
  local loss_fn = nn.CrossEntropy()
  local function step(b)
    opt:zero_grad()
    loss_fn(model(b.image), b.label, b.weight):backward()
    opt:step()
  end
  local part = fm.train:subset(dl.arange(1, 256 * 61 + 1):long())
  local function light(ds)
    return ds:shuffle{seed = 1}:map(T.random_crop(28, {padding = 4}), T.flip{}, T.scale(1 / 255)):batch(256)
  end
  -- cost of each augmentation per batch on one thread, and of the step alone
  local function per_batch(p)
    local t0, k = dl.clock(), 0
    for _ in p:workers(0):iter{warn = false} do k = k + 1 if k == 30 then break end end
    return (dl.clock() - t0) / 30 * 1000
  end
  local light_ms, heavy_ms = per_batch(light(part)), per_batch(augment(part))
  local b = light(part):workers(0):iter{warn = false}()
  local t0 = dl.clock()
  for _ = 1, 30 do step(b) end
  local step_ms = (dl.clock() - t0) / 30 * 1000
  local settings = {
    {"light, 1 worker, prefetch 4", light(part):workers(1):prefetch(4)},
    {"light, 1 worker, prefetch 1", light(part):workers(1):prefetch(1)},
    {"light, no worker thread", light(part):workers(0)},
    {"heavy, 1 worker, prefetch 4", augment(part):workers(1):prefetch(4)},
    {"heavy, 2 workers, prefetch 4", augment(part):workers(2):prefetch(4)},
  }
  local res = {}
  for w = 1, windows + 1 do
    for i, st in ipairs(settings) do
      local p = st[2]
      local n, t1 = 0, nil
      for batch in p:iter{warn = false} do
        step(batch)
        n = n + 1
        if n == 1 then t1 = dl.clock() end
        if n == 61 then break end
      end
      local s1 = p:stats()
      res[i] = res[i] or {frac = {}, rate = {}}
      if w > 1 then
        res[i].frac[#res[i].frac + 1] = s1.wait_fraction
        res[i].rate[#res[i].rate + 1] = 60 * 256 / (dl.clock() - t1)
      end
    end
  end
  print(string.format("per batch of 256 on one thread: light augmentation %.2f ms, heavy %.2f ms; " ..
    "training step %.2f ms", light_ms, heavy_ms, step_ms))
  for i, st in ipairs(settings) do
    local mf, lof, hif = median(res[i].frac)
    print(string.format("%-30s wait %5.1f%% of step time [%.1f, %.1f], %6.0f ex/s", st[1], 100 * mf, 100 * lof,
      100 * hif, (median(res[i].rate))))
  end
else
  error("usage: dlua tests/bench/pipeline.lua scaling|wait [windows]")
end
