-- recipes/batch_size.lua -- the playbook's batch-size throughput sweep (section 1.3,
-- "determining the feasible batch sizes and estimating training throughput").
-- Goal: the largest batch size that still increases training throughput.
--   swept:  batch_size = start, 2 start, 4 start, ... (short runs, eval off)
--   stops:  at the first out-of-memory (the engine's memory limit, --memory, stands
--           for accelerator memory) or when doubling adds less than 10% throughput,
--           decided on the measured noise: while the ratio's 90% bootstrap interval
--           straddles x1.1, both sizes are measured again (--rounds), else the sweep
--           says it is inconclusive, with the interval
--   prints: time per step (median after the warm-up steps), examples/s, peak tensor
--           memory, the throughput ratio over half the batch size (flagged below
--           x1.8) and the scaling efficiency against perfect scaling
--   fixed:  every other hyperparameter (--set k=v to change one)
-- Batch size is chosen for speed, not validation performance: re-tune the optimizer
-- and regularisation at the chosen size (playbook FAQ).
--
--   dlua recipes/batch_size.lua [EXPERIMENT] [--start 16] [--max N] [--memory 1G]
--        [--steps 20] [--skip 5] [--min-gain 1.1] [--rounds 3] [--set k=v] [--seed N]
--        [--threads N] [--quiet]
local dl = require "dlua"
local probe = require "dlua.study.probe"

local USAGE = [[
usage: dlua batch-size [EXPERIMENT] [flags]
  EXPERIMENT        an experiment file (default examples/fashion_mnist.lua)
  --start B         first batch size (16)
  --max B           largest batch size to try (65536)
  --memory SIZE     tensor memory limit during the sweep, e.g. 512M, 2G (default: none)
  --steps N         steps per batch size (20); --skip K: warm-up steps left out of the median (5)
  --min-gain X      stop when doubling multiplies throughput by less than X (1.1)
  --rounds N        measurements of a size at most while the interval straddles X (3)
  --set k=v         any other hyperparameter; --seed N the seed; --threads N compute threads (2)
  --quiet           no progress line per batch size]]

probe.main(function()
  local args = {}
  for i = 1, #arg do args[i] = arg[i] end
  local o, exp = probe.recipe_args(args, {"--start", "--max", "--memory", "--skip", "--min-gain", "--rounds"},
    {command = "dlua batch-size", uses = {"--steps", "--quiet"}})
  if o.help then print(USAGE); return end
  local res = dl.batch_size_sweep{
    experiment = exp, start = probe.number("start", o.extra.start, 16, {int = 1}),
    max = probe.number("max", o.extra.max, nil, {int = 1}), steps = o.steps or 20,
    skip = probe.number("skip", o.extra.skip, 5, {int = 0}), memory = probe.bytes("memory", o.extra.memory),
    min_gain = probe.number("min-gain", o.extra["min-gain"], nil, {min = 0}), overrides = o.set,
    rounds = probe.number("rounds", o.extra.rounds, nil, {int = 1}),
    on_row = not o.quiet and function(r)
      if r.status == "ok" then
        io.stderr:write(string.format("batch %d: %.1f ms/step, %.0f examples/s\n", r.batch_size, 1000 * (r.time_per_step or 0),
          r.examples_per_s or 0))
      else
        io.stderr:write(string.format("batch %d: %s\n", r.batch_size, r.status == "oom" and "out of memory" or "failed"))
      end
    end or nil,
  }
  print(probe.format_sweep(res))
end)
