-- tests/bench/window.lua -- the timing protocol the throughput benchmarks share (mlp.lua, cnn.lua,
-- resnet18.lua, batchnorm.lua, matmul.lua), and the training step they time (train_step): one warm-up window, then `windows` timed windows, each
-- calling step() until it has lasted `seconds` AND done `min_steps` steps; a window's rate is its
-- steps x per_step / its seconds. It is not a benchmark and prints nothing: each script keeps its own
-- arguments and JSON line. tests/bench is not on the module path, so the scripts load it by file,
-- from their own directory:
--   local window = dofile(((arg[0] or ""):match("^(.*/)") or "./") .. "window.lua")
local dl = require "dlua"
local util = require "dlua.util"

local M = {}

--- Times step() in windows; returns the median, min and max rate (per_step units per second) of
-- the timed windows (the warm-up window is not counted; the median of an even count is the mean
-- of the middle two). opts: seconds (each window's minimum length), windows (how many timed
-- windows, at least 1), per_step (what one step counts for: a batch's examples, a matmul's GFLOP),
-- min_steps (each window's minimum step count, default 1), clock (a function giving seconds,
-- default dl.clock; os.clock times by CPU seconds).
-- @usage local med, lo, hi = window.run(step, {seconds = 2, windows = 5, per_step = batch})
function M.run(step, opts)
  util.check_options("window.run", opts,
    {seconds = "number", windows = "integer", per_step = "number", min_steps = "integer", clock = "function"})
  local win, nwin, per = opts.seconds, opts.windows, opts.per_step
  if not (win and nwin and per) then error("window.run: options seconds, windows and per_step are required", 2) end
  if nwin < 1 then error("window.run: option 'windows' must be at least 1, got " .. nwin, 2) end
  local min_steps, clock = opts.min_steps or 1, opts.clock or dl.clock
  local function window()
    local steps, t0 = 0, clock()
    repeat step(); steps = steps + 1 until steps >= min_steps and clock() - t0 >= win
    return steps * per / (clock() - t0)
  end
  window()
  local r = {}
  for i = 1, nwin do r[i] = window() end
  table.sort(r)
  local med = nwin % 2 == 1 and r[(nwin + 1) // 2] or (r[nwin // 2] + r[nwin // 2 + 1]) / 2
  return med, r[1], r[nwin]
end

--- train_step(model, loss, opt, x, y, batch) -> step(): each call is one training step
-- (zero_grad, loss(model(xb), yb):backward(), opt:step()) on the next whole batch of the
-- rows of x and y, in order, starting over after the last.
-- @usage local med = window.run(window.train_step(model, nn.CrossEntropy(), opt, x, y, 256), {...})
function M.train_step(model, loss, opt, x, y, batch)
  local nb, k = x:size(1) // batch, 0
  return function()
    local xb, yb = x:narrow(1, k * batch + 1, batch), y:narrow(1, k * batch + 1, batch)
    k = (k + 1) % nb
    opt:zero_grad()
    loss(model(xb), yb):backward()
    opt:step()
  end
end

return M
