-- Input pipeline benchmarks (issue 5).
--
--   dlua tests/bench/pipeline.lua scaling [windows]   augmentation throughput, 1 vs 2 workers
--   dlua tests/bench/pipeline.lua wait [windows]      consumer wait fraction under a training step
--
-- scaling: Fashion-MNIST train, shuffle, random_crop(28, padding 4), flip,
-- random_affine (+-15 degrees, zoom 0.9..1.1, shift 0.1), scale(1/255), batch
-- 256, prefetch 4; the consumer only takes the batches, so the pipeline is
-- the bottleneck. Each window is one pass over 12,800 examples (50 batches);
-- the script prints the median and range of examples/s per worker count,
-- interleaving the settings so machine noise hits both alike.
--
-- wait: the same augmentation feeding an MLP 784-256-10 training step (SGD,
-- batch 256, dl.threads(1)), 1 worker; reports the fraction of step time the
-- step waited for input with prefetch 4, prefetch 1, and with no worker
-- thread (everything on the consumer), over 60 steps per window.
local dl = require "dlua"
local data, T, nn, optim = dl.data, dl.data.transforms, dl.nn, dl.optim

local mode = arg[1] or "scaling"
local windows = tonumber(arg[2] or "5")

local fm = data.fashion_mnist()
local function augment(ds)
  return ds:shuffle{seed = 1}:map(T.random_crop(28, {padding = 4}), T.flip{},
    T.random_affine{degrees = 15, scale = {0.9, 1.1}, translate = 0.1}, T.scale(1 / 255)):batch(256)
end

local function median(t)
  local s = {table.unpack(t)}
  table.sort(s)
  return s[(#s + 1) // 2], s[1], s[#s]
end

if mode == "scaling" then
  local part = fm.train:subset(dl.arange(1, 12801):long())
  local base = augment(part):prefetch(4)
  local rates = {[1] = {}, [2] = {}}
  for w = 1, windows + 1 do
    for _, n in ipairs{1, 2} do
      local p = base:workers(n)
      local t0 = dl.clock()
      local count = 0
      for b in p:iter{warn = false} do count = count + b.image:size(1) end
      local rate = count / (dl.clock() - t0)
      if w > 1 then rates[n][#rates[n] + 1] = rate end      -- window 1 warms up
    end
  end
  local m1, lo1, hi1 = median(rates[1])
  local m2, lo2, hi2 = median(rates[2])
  print(string.format("workers 1: %8.0f ex/s  [%.0f, %.0f]", m1, lo1, hi1))
  print(string.format("workers 2: %8.0f ex/s  [%.0f, %.0f]", m2, lo2, hi2))
  print(string.format("speed-up : %.2fx (median of %d windows of 12,800 examples)", m2 / m1, windows))
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
  local settings = {
    {"1 worker, prefetch 4", augment(part):workers(1):prefetch(4)},
    {"1 worker, prefetch 1", augment(part):workers(1):prefetch(1)},
    {"no worker (on the consumer)", augment(part):workers(0)},
  }
  local res = {}
  for w = 1, windows + 1 do
    for i, s in ipairs(settings) do
      local p = s[2]
      local it = p:iter{warn = false}
      local n, t0 = 0, nil
      for b in it do
        step(b)
        n = n + 1
        if n == 1 then t0 = dl.clock() end
        if n == 61 then break end
      end
      local st = p:stats()
      res[i] = res[i] or {frac = {}, rate = {}, slow = st.slowest}
      if w > 1 then
        res[i].frac[#res[i].frac + 1] = st.wait_fraction
        res[i].rate[#res[i].rate + 1] = 60 * 256 / (dl.clock() - t0)
      end
    end
  end
  -- transform cost per batch on one worker vs the step alone, for context
  local p = augment(part):workers(0)
  local t0 = dl.clock()
  local k = 0
  for _ in p:iter{warn = false} do k = k + 1 if k == 30 then break end end
  local tf_ms = (dl.clock() - t0) / 30 * 1000
  local b = augment(part):workers(0):iter{warn = false}()
  t0 = dl.clock()
  for _ = 1, 30 do step(b) end
  local step_ms = (dl.clock() - t0) / 30 * 1000
  print(string.format("augmentation %.2f ms per batch of 256 on one thread; training step %.2f ms", tf_ms, step_ms))
  for i, s in ipairs(settings) do
    local mf, lof, hif = median(res[i].frac)
    local mr = median(res[i].rate)
    print(string.format("%-28s wait %5.1f%% of step time [%.1f, %.1f], %6.0f ex/s", s[1], 100 * mf, 100 * lof,
      100 * hif, mr))
  end
else
  error("usage: dlua tests/bench/pipeline.lua scaling|wait [windows]")
end
