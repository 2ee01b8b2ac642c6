--- dl.onnx: writes a model as an ONNX graph (docs/export.md).
--
--   dl.onnx.export(model, path, {input_shape = {1, 28, 28}, input_name = "input",
--                                output_name = "logits", opset = 13})
--
-- The model is traced in eval mode, module by module: each module class has an
-- exporter in a registry (dl.onnx.register(Class, fn)), which turns one module into
-- ONNX nodes; containers call their children's exporters. A module whose exact class
-- has no exporter (a user-defined Lua module included) is refused by its path and
-- class name, never dropped. The protobuf is written by the engine (engine/io/onnx.c,
-- the official onnx.proto through protobuf-c); this file builds the graph as a table.
--
-- An exporter is fn(g, m, x, sample) -> name of its output, where x names the input
-- value in the graph and sample is the value dlua computes there for a batch of one
-- (its shape and dtype are what the exporter may need). g has:
--   g:node(op, inputs, attrs) -> output name     attrs: {name = int | float | {ints}}
--   g:const(tensor [, hint]) -> name             a float tensor becomes float32
--   g:int64s(list [, hint]) -> name              a 1-d int64 constant
--   g:call(child, key, x, sample, ...) -> name   a submodule named key (path "3.body"); the
--                                                extra arguments go to its exporter
--   g:layer_norm(x, axes, eps) -> name           (x - mean) / sqrt(var + eps) over axes
--   g:gelu(x) -> name                            GELU, erf form
--   g:heads(qkv, E, H) -> q, kt, v               [N, T, 3E] split into heads: q and v
--                                                [N, H, T, E/H], kt [N, H, E/H, T]
--   g.opset
local core = require "dlua.core"
local util = require "dlua.util"
local nn = require "dlua.nn"

local M = {}

local exporters = {}      -- [class] = fn(g, m, x, sample) -> name

--- dl.onnx.register(Class, fn): fn(g, m, x, sample) -> output name exports modules of
-- exactly that class (a subclass needs its own: it may compute more). Returns the
-- previous exporter (nil when none).
-- @usage dl.onnx.register(Scale, function(g, m, x) return g:node("Mul", {x, g:const(m.alpha)}) end)
function M.register(cls, fn)
  if type(cls) ~= "table" or not cls.__name or not cls.extend then
    error("onnx.register: expected a module class (nn.Module:extend(...)), got " .. type(cls), 2)
  end
  if type(fn) ~= "function" then error("onnx.register: expected an exporter function, got " .. type(fn), 2) end
  local prev = exporters[cls]
  exporters[cls] = fn
  return prev
end

------------------------------------------------------------------ the graph

local Graph = {}
Graph.__index = Graph

local function new_graph(opset)
  return setmetatable({opset = opset, nodes = {}, inits = {}, used = {}, path = "", n = 0}, Graph)
end

-- a name not used before in the graph, from a readable stem
function Graph:fresh(stem)
  local name = stem
  while self.used[name] do
    self.n = self.n + 1
    name = stem .. "_" .. self.n
  end
  self.used[name] = true
  return name
end

function Graph:prefixed(hint)
  return self.path == "" and hint or (self.path .. "." .. hint)
end

function Graph:node(op, inputs, attrs)
  local out = self:fresh((self.path == "" and "" or self.path .. "/") .. op)
  local list = {}
  for _, k in ipairs(util.sorted_keys(attrs or {})) do
    local v = attrs[k]
    if type(v) == "table" then list[#list + 1] = {name = k, ints = v}
    elseif math.type(v) == "integer" then list[#list + 1] = {name = k, int = v}
    else list[#list + 1] = {name = k, float = v} end
  end
  self.nodes[#self.nodes + 1] = {op = op, name = out, inputs = inputs, outputs = {out}, attrs = list}
  return out
end

function Graph:const(t, hint)
  if t:dtype() == "float64" then t = t:to("float32") end
  t = t:contiguous()
  local name = self:fresh(self:prefixed(hint or "const"))
  self.inits[#self.inits + 1] = {name = name, tensor = t}
  return name
end

function Graph:int64s(list, hint)
  return self:const(core.tensor(list, {dtype = "int64"}), hint or "ints")
end

function Graph:scalar(v, hint) return self:const(core.tensor({v}), hint or "scalar") end

function Graph:layer_norm(x, axes, eps)
  local ops13 = self.opset < 18
  local function mean(v)
    if ops13 then return self:node("ReduceMean", {v}, {axes = axes, keepdims = 1}) end
    return self:node("ReduceMean", {v, self:int64s(axes, "axes")}, {keepdims = 1})
  end
  local xc = self:node("Sub", {x, mean(x)})
  local var = mean(self:node("Mul", {xc, xc}))
  local sd = self:node("Sqrt", {self:node("Add", {var, self:scalar(eps, "eps")})})
  return self:node("Div", {xc, sd})
end

function Graph:heads(qkv, E, H)
  local d = E // H
  local function part(i)                                          -- [N, T, H, d]
    local p = self:node("Slice", {qkv, self:int64s({(i - 1) * E}, "start"), self:int64s({i * E}, "end"),
      self:int64s({2}, "axis")})
    return self:node("Reshape", {p, self:int64s({0, 0, H, d}, "heads")})
  end
  return self:node("Transpose", {part(1)}, {perm = {0, 2, 1, 3}}),   -- [N, H, T, d]
    self:node("Transpose", {part(2)}, {perm = {0, 2, 3, 1}}),         -- [N, H, d, T]
    self:node("Transpose", {part(3)}, {perm = {0, 2, 1, 3}})
end

local function class_name(m)
  local mt = getmetatable(m)
  return tostring(mt and mt.__name or type(m))
end

local function refuse(where, m, why)
  error(string.format("%s (%s): cannot be exported to ONNX (%s)", where, class_name(m), why), 0)
end

-- GELU, erf form (opset 13 has no Gelu op): 0.5 x (1 + erf(x / sqrt(2)))
function Graph:gelu(x)
  local e = self:node("Erf", {self:node("Div", {x, self:scalar(math.sqrt(2), "sqrt2")})})
  local y = self:node("Mul", {x, self:node("Add", {e, self:scalar(1, "one")})})
  return self:node("Mul", {y, self:scalar(0.5, "half")})
end

function Graph:call(m, key, x, sample, ...)
  local where = self.where .. "." .. key
  local saved_path, saved_where = self.path, self.where
  if type(m) ~= "table" or not getmetatable(m) or not m._modules then
    error(string.format("%s (%s): cannot be exported to ONNX (a plain Lua %s, not a module)", where, type(m), type(m)), 0)
  end
  local fn = exporters[getmetatable(m)]
  if not fn then
    refuse(where, m, string.format("no exporter for %s; dl.onnx.register(%s, fn) adds one", class_name(m), class_name(m)))
  end
  self.path = self:prefixed(key)
  self.where = where
  local out = fn(self, m, x, sample, ...)
  self.path, self.where = saved_path, saved_where
  return out
end

------------------------------------------------------------------ the exporters

local function pair(v) return type(v) == "table" and {v[1], v[2]} or {v, v} end

M.register(nn.Sequential, function(g, m, x, sample)
  for i = 1, m.n do
    local child = m._modules[i]
    x = g:call(child, tostring(i), x, sample)
    sample = child(sample)
  end
  return x
end)

M.register(nn.Residual, function(g, m, x, sample)
  local body = m._modules.body
  if not body then refuse(g.where, m, "its body is a plain function, not a module") end
  local y = g:call(body, "body", x, sample)
  local s = x
  if m.shortcut ~= nil then
    local sc = m._modules.shortcut
    if not sc then refuse(g.where, m, "its shortcut is a plain function, not a module") end
    s = g:call(sc, "shortcut", x, sample)
  end
  return g:node("Add", {y, s})
end)

M.register(nn.Linear, function(g, m, x)
  local y = g:node("MatMul", {x, g:const(m.weight:transpose(1, 2), "weight_t")})
  if m._params.bias then y = g:node("Add", {y, g:const(m._params.bias, "bias")}) end
  return y
end)

M.register(nn.Conv2d, function(g, m, x)
  local c, k = m.conv, m.weight:shape()
  local p = pair(c.padding)
  local inputs = {x, g:const(m.weight, "weight")}
  if m._params.bias then inputs[3] = g:const(m._params.bias, "bias") end
  return g:node("Conv", inputs, {kernel_shape = {k[3], k[4]}, strides = pair(c.stride), dilations = pair(c.dilation),
    pads = {p[1], p[2], p[1], p[2]}, group = c.groups})
end)

-- BatchNorm in eval normalises with the moving averages (the mean over replicas):
-- a BatchNormalization node with those statistics (not folded into the previous conv)
M.register(nn.BatchNorm, function(g, m, x)
  local C = m.num_features
  local mean, var = m.running_mean, m.running_var
  if mean:dim() == 2 then mean, var = mean:mean(1), var:mean(1) end
  local w = m._params.weight or core.ones(C)
  local b = m._params.bias or core.zeros(C)
  return g:node("BatchNormalization", {x, g:const(w, "weight"), g:const(b, "bias"), g:const(mean, "running_mean"),
    g:const(var, "running_var")}, {epsilon = m.opts.eps + 0.0})
end)

local function pool_attrs(m)
  local k = pair(m.kernel)
  local p = pair(m.opts.padding)
  return {kernel_shape = k, strides = pair(m.opts.stride or m.kernel), pads = {p[1], p[2], p[1], p[2]}}
end

M.register(nn.MaxPool2d, function(g, m, x) return g:node("MaxPool", {x}, pool_attrs(m)) end)

-- dlua's average counts padding as zeros (PyTorch's default): count_include_pad = 1
M.register(nn.AvgPool2d, function(g, m, x)
  local a = pool_attrs(m)
  a.count_include_pad = 1
  return g:node("AveragePool", {x}, a)
end)

M.register(nn.AdaptiveAvgPool2d, function(g, m, x, sample)
  if m.out[1] == 1 and m.out[2] == 1 then return g:node("GlobalAveragePool", {x}) end
  local s = sample:shape()
  local k = {s[3] // m.out[1], s[4] // m.out[2]}
  return g:node("AveragePool", {x}, {kernel_shape = k, strides = k})
end)

-- dlua's Flatten leaves a tensor of fewer than 2 dims as it is
M.register(nn.Flatten, function(g, _, x, sample)
  if sample:dim() < 2 then return x end
  return g:node("Flatten", {x}, {axis = 1})
end)

M.register(nn.ReLU, function(g, _, x) return g:node("Relu", {x}) end)
M.register(nn.Tanh, function(g, _, x) return g:node("Tanh", {x}) end)
M.register(nn.Sigmoid, function(g, _, x) return g:node("Sigmoid", {x}) end)

M.register(nn.GELU, function(g, _, x) return g:gelu(x) end)

M.register(nn.Softmax, function(g, m, x)
  local d = m.dim
  return g:node("Softmax", {x}, {axis = d > 0 and d - 1 or d})
end)

M.register(nn.Dropout, function(_, _, x) return x end)

-- LayerNorm: LayerNormalization from opset 17 on, else composed of ReduceMean, Sub,
-- Mul, Add, Sqrt and Div (the same population variance and eps inside the root)
M.register(nn.LayerNorm, function(g, m, x)
  local w, b = m._params.weight, m._params.bias
  if g.opset >= 17 then
    return g:node("LayerNormalization", {x, g:const(w or core.ones(m.size), "weight"),
      g:const(b or core.zeros(m.size), "bias")}, {axis = -1, epsilon = m.eps + 0.0})
  end
  local y = g:layer_norm(x, {-1}, m.eps)
  if w then y = g:node("Add", {g:node("Mul", {y, g:const(w, "weight")}), g:const(b, "bias")}) end
  return y
end)

-- Embedding: ids are 1-based in dlua, 0-based in Gather
M.register(nn.Embedding, function(g, m, x, sample)
  local one = g:const(core.tensor({1}, {dtype = sample:dtype()}), "one")
  return g:node("Gather", {g:const(m.weight, "weight"), g:node("Sub", {x, one})}, {axis = 0})
end)

------------------------------------------------------------------ export

-- the first module a value reaches (through Sequentials)
-- nn.MultiheadAttention as self-attention on x [N, T, E] (batch_first; the other layout is refused):
-- the packed in_proj, H heads, softmax(q k^T / sqrt(d) [+ the causal bias]) v, out_proj.
-- The causal bias is a constant [T, T] (T fixed at export, from the sample input).
M.register(nn.MultiheadAttention, function(g, m, x, sample)
  local E, H = m.embed_dim, m.num_heads
  local d = E // H
  if not m.batch_first then refuse(g.where, m, "batch_first = false: the graph's first dimension is the batch") end
  local qkv = g:node("MatMul", {x, g:const(m.in_proj_weight:transpose(1, 2), "in_proj_weight_t")})   -- [N, T, 3E]
  if m._params.in_proj_bias then qkv = g:node("Add", {qkv, g:const(m._params.in_proj_bias, "in_proj_bias")}) end
  local q, kt, v = g:heads(qkv, E, H)
  local scores = g:node("Mul", {g:node("MatMul", {q, kt}), g:scalar(1 / math.sqrt(d), "scale")})
  if m.causal then
    local T = m.batch_first and sample:size(2) or sample:size(1)
    local bias = core.zeros(T, T)
    for i = 1, T do for j = i + 1, T do bias[i][j] = -1e9 end end
    scores = g:node("Add", {scores, g:const(bias, "causal_bias")})
  end
  local out = g:node("MatMul", {g:node("Softmax", {scores}, {axis = -1}), v})
  out = g:node("Reshape", {g:node("Transpose", {out}, {perm = {0, 2, 1, 3}}), g:int64s({0, 0, E}, "model")})
  return g:call(m._modules.out_proj, "out_proj", out)
end)

-- nn.TransformerEncoderLayer in eval mode (dropouts are identities), post- or pre-norm
M.register(nn.TransformerEncoderLayer, function(g, m, x, sample)
  if not m.batch_first then refuse(g.where, m, "batch_first = false: the graph's first dimension is the batch") end
  local c = m._modules
  local function sa(y) return g:call(c.self_attn, "self_attn", y, sample) end
  local function ff(y)
    local h = g:call(c.activation, "activation", g:call(c.linear1, "linear1", y, sample), sample)
    return g:call(c.linear2, "linear2", h, sample)
  end
  if m.norm_first then
    x = g:node("Add", {x, sa(g:call(c.norm1, "norm1", x, sample))})
    x = g:node("Add", {x, ff(g:call(c.norm2, "norm2", x, sample))})
  else
    x = g:call(c.norm1, "norm1", g:node("Add", {x, sa(x)}), sample)
    x = g:call(c.norm2, "norm2", g:node("Add", {x, ff(x)}), sample)
  end
  return x
end)

local function first_leaf(m)
  while getmetatable(m) == nn.Sequential and m.n > 0 do m = m._modules[1] end
  return m
end

local function dims_of(t)
  local d = t:shape()
  d[1] = -1
  return d
end

--- dl.onnx.export(model, path, opts): writes model (a module) as an ONNX model.
-- opts: input_shape (required: one example's shape, {1, 28, 28}; the batch dimension
-- is added in front and is dynamic, named "batch"), input_name = "input",
-- output_name = "output", opset = 13 (13 to 17), input_dtype ("float32", or "int64"
-- when the model starts with an Embedding). The model is run once on a batch of one
-- in eval mode (its modules' training flags are restored after). Returns path.
-- @usage dl.onnx.export(model, "model.onnx", {input_shape = {1, 28, 28}, output_name = "logits"})
function M.export(model, path, opts)
  if type(model) ~= "table" or not model._modules then
    error("onnx.export: expected a module as argument 1, got " .. type(model), 2)
  end
  if type(path) ~= "string" then error("onnx.export: expected a path (string) as argument 2, got " .. type(path), 2) end
  opts = util.check_options("onnx.export", opts or {}, {input_shape = "table", input_name = "string",
    output_name = "string", opset = "integer", input_dtype = "string"}, 2)
  local shape = opts.input_shape
  if not shape then error("onnx.export: option 'input_shape' is required (one example's shape, e.g. {1, 28, 28})", 2) end
  for i, v in ipairs(shape) do
    if math.type(v) ~= "integer" or v < 1 then
      error(string.format("onnx.export: input_shape[%d] must be a positive integer, got %s", i, tostring(v)), 2)
    end
  end
  local opset = opts.opset or 13
  if opset < 13 or opset > 17 then error("onnx.export: opset must be 13 to 17, got " .. opset, 2) end
  local dtype = opts.input_dtype or (getmetatable(first_leaf(model)) == nn.Embedding and "int64" or "float32")
  if dtype ~= "float32" and dtype ~= "int64" and dtype ~= "int32" then
    error("onnx.export: input_dtype must be float32, int64 or int32, got " .. dtype, 2)
  end
  local in_name, out_name = opts.input_name or "input", opts.output_name or "output"
  if in_name == out_name then error("onnx.export: input_name and output_name are both '" .. in_name .. "'", 2) end

  local modes = {}
  for _, e in ipairs(model:named_modules()) do modes[#modes + 1] = {e[2], e[2].training} end
  model:eval()
  local prev = core.set_grad_enabled(false)
  local ok, err = pcall(function()
    local sample = core.ones({1, table.unpack(shape)}, {dtype = dtype})
    local g = new_graph(opset)
    g.used[in_name], g.used[out_name] = true, true
    g.where = "model"
    local fn = exporters[getmetatable(model)]
    if not fn then
      refuse("model", model, string.format("no exporter for %s; dl.onnx.register(%s, fn) adds one",
        class_name(model), class_name(model)))
    end
    local y = fn(g, model, in_name, sample)
    local out = model(sample)
    if not util.is_tensor(out) then error("onnx.export: the model returns a " .. type(out) .. ", not a tensor", 0) end
    local last = g.nodes[#g.nodes]
    if last and last.outputs[1] == y then
      last.outputs[1] = out_name
    else
      g:node("Identity", {y})
      g.nodes[#g.nodes].outputs[1] = out_name
    end
    core._onnx_write(path, {opset = opset, producer = "dlua", version = util.VERSION,
      inputs = {{name = in_name, dtype = dtype, dims = dims_of(sample), dynamic = "batch"}},
      outputs = {{name = out_name, dtype = "float32", dims = dims_of(out), dynamic = "batch"}},
      initializers = g.inits, nodes = g.nodes})
  end)
  core.set_grad_enabled(prev)
  for _, e in ipairs(modes) do rawset(e[1], "training", e[2]) end
  if not ok then error(err, 0) end
  return path
end

util.strict_table("onnx.", M, false, {export = {"module", "string", "table?"}, register = {"table", "function"}})

return M
