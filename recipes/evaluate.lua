-- recipes/evaluate.lua -- offline evaluation of a checkpoint (the playbook's "offline
-- evaluation"): every eval set of the experiment in full, with the same metrics and
-- weighting as periodic eval, and the gap to the sampled metric when the
-- experiment's periodic eval uses `sample = n`.
--   dlua recipes/evaluate.lua EXPERIMENT --checkpoint PATH [--threads N]
local dl = require "dlua"
local cli = require "dlua.cli"

local args = {}
for i = 1, #arg do args[i] = arg[i] end
local ok, o = pcall(cli.parse, args, nil, {extra = {"--checkpoint"}, shared = {"--threads"}, command = "dlua evaluate"})
if not ok then io.stderr:write("dlua: ", o, "\n"); os.exit(1) end
if o.help or #o.positional ~= 1 or not o.extra.checkpoint then
  print("usage: dlua evaluate EXPERIMENT --checkpoint PATH [--threads N]")
  os.exit(o.help and 0 or 1)
end
dl.threads(o.threads or 2)
local okr, metrics, report = pcall(dl.evaluate, {experiment = o.positional[1], checkpoint = o.extra.checkpoint})
if not okr then io.stderr:write("dlua: ", tostring(metrics), "\n"); os.exit(1) end
-- a checkpoint dl.train wrote names its step; one written elsewhere (dl.checkpoint.save, PyTorch) may not
print(string.format("checkpoint %s (%s)", o.extra.checkpoint, report.step and ("step " .. report.step) or
  "no step recorded"))
local fmt = dl.util.fmt_metric
local keys = {}
for k, v in pairs(metrics) do if type(v) == "number" then keys[#keys + 1] = k end end
table.sort(keys)
for _, k in ipairs(keys) do
  local line = string.format("  %-24s %s", k, fmt(metrics[k]))
  local g = report.gaps[k]
  if g then
    line = line .. string.format("   (sample of %d: %s, gap %s%s)", report.sample, fmt(g.sample), g.gap >= 0 and "+" or "",
      fmt(g.gap))
  end
  print(line)
end
for k, v in pairs(metrics) do
  if type(v) == "table" and v.correct then
    local parts = {}
    for c = 1, #v.total do parts[c] = string.format("%d: %d of %d", c, v.correct[c], v.total[c]) end
    print(string.format("  %s  %s", k, table.concat(parts, ", ")))
  end
end
