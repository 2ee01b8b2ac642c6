-- recipes/export.lua -- writes a trained model as an ONNX file (dl.onnx.export): the
-- experiment's model rebuilt with the hyperparameters its checkpoint stores and loaded with
-- its weights, as dl.evaluate does, in eval mode. The input shape is one example of the
-- experiment's first eval set (by name; after its transforms) unless --input-shape gives it.
--   dlua export EXPERIMENT CHECKPOINT OUT.onnx [--input-shape 1,28,28] [--opset 13]
--               [--input-name input] [--output-name logits]
local dl = require "dlua"
local cli = require "dlua.cli"
local experiment = require "dlua.train.experiment"

local USAGE = "usage: dlua export EXPERIMENT CHECKPOINT OUT.onnx [--input-shape 1,28,28] [--opset 13]" ..
  " [--input-name input] [--output-name logits]"

local function fail(msg)
  io.stderr:write("dlua export: ", (tostring(msg):gsub("^dlua export: ", "")), "\n")
  os.exit(1)
end

local args = {}
for i = 1, #arg do args[i] = arg[i] end
local ok, o = pcall(cli.parse, args, nil, {extra = {"--input-shape", "--opset", "--input-name", "--output-name"},
  shared = {}, command = "dlua export"})
if not ok then fail(o) end
if o.help or #o.positional ~= 3 then
  print(USAGE)
  os.exit(o.help and 0 or 1)
end
local exp_path, ckpt, out = o.positional[1], o.positional[2], o.positional[3]

-- one example's shape: --input-shape, else the input field of the first eval set's first example
local function input_shape(cfg)
  local s = o.extra["input-shape"]
  if s then
    local shape = {}
    for part in (s .. ","):gmatch("([^,]*),") do
      local n = math.tointeger(tonumber(part))
      if not n or n < 1 then fail(string.format("--input-shape: expected sizes like 1,28,28, got '%s'", s)) end
      shape[#shape + 1] = n
    end
    return shape
  end
  local sets = (cfg.eval or {}).sets or {}
  local names = {}
  for name in pairs(sets) do names[#names + 1] = name end
  table.sort(names)
  if #names == 0 then fail("the experiment has no eval set to take an input shape from: give --input-shape") end
  local field = (cfg.fields or {}).input or "image"
  local set, x = sets[names[1]], nil
  if set.iter then                              -- a pipeline: its first example, transformed
    for b in set:take(1):batch(1):iter{warn = false} do x = b[field] and b[field]:select(1, 1); break end
  else
    x = set:get(1)[field]
  end
  if not dl.is_tensor(x) then
    fail(string.format("eval set '%s' has no tensor field '%s': give --input-shape", names[1], field))
  end
  return x:shape()
end

local opset = o.extra.opset and math.tointeger(tonumber(o.extra.opset))
if o.extra.opset and not opset then fail("--opset: expected an integer, got '" .. o.extra.opset .. "'") end
local okr, err = pcall(function()
  local cfg = experiment.restore(exp_path, ckpt, "dlua export")
  dl.onnx.export(cfg.model, out, {input_shape = input_shape(cfg), opset = opset,
    input_name = o.extra["input-name"], output_name = o.extra["output-name"]})
end)
if not okr then fail(tostring(err)) end
print(string.format("wrote %s (from %s, checkpoint %s)", out, exp_path, ckpt))
