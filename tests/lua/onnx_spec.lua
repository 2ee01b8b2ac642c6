-- tests/lua/onnx_spec.lua -- dl.onnx.export and `dlua export`: every exported model passes
-- Debian's onnx.checker.check_model (python3-onnx, full_check: with shape inference) and gives
-- dlua's outputs in ONNX Runtime (onnxruntime-node, tests/onnx/run.js) within 1e-5 (relative
-- to max(1, |value|)) on random inputs at batch sizes 1 and 5; modules without an exporter
-- are refused by path and class.
local dl = require "dlua"
local fs = require "dlua.util.fs"
local H = dofile("tests/lua/helpers.lua")
local nn = dl.nn

local EXE = os.getenv("DLUA_EXE") or "build/dlua"
local TOL = 1e-5
local dir = H.tmpdir("onnx")

local function has(cmd) return os.execute(cmd .. " >/dev/null 2>&1") == true end
local why_no_ort
if not has("command -v node") then why_no_ort = "no node (scripts/setup.sh installs Node.js)"
elseif not fs.exists("tests/onnx/node_modules/onnxruntime-node/package.json") then
  why_no_ort = "no tests/onnx/node_modules (scripts/setup.sh runs npm ci --ignore-scripts in tests/onnx)"
end

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1; echo rc=$?")
  local out = p:read("a")
  p:close()
  return out:match("rc=(%d+)%s*$") == "0", out
end

-- onnx.checker.check_model with full_check, and the graph's input and output names
local function check_model(path)
  local ok, out = run(string.format("/usr/bin/python3 -c %s %s", H.shquote(
    "import sys, onnx\nm = onnx.load(sys.argv[1])\nonnx.checker.check_model(m, full_check=True)\n" ..
    "print('checked', m.graph.input[0].name, m.graph.output[0].name, m.opset_import[0].version)"), H.shquote(path)))
  assert(ok, out)
  return out:match("checked (%S+) (%S+) (%d+)")
end

local function flat(t) return t:contiguous():reshape(-1):totable() end

local function write_input(path, x)
  local fmt = x:dtype() == "float32" and "<f" or "<i8"
  local parts = {}
  for i, v in ipairs(flat(x)) do parts[i] = string.pack(fmt, v) end
  H.spit(path, table.concat(parts))
end

-- runs the model at path in ONNX Runtime on x; returns the flat outputs and the output shape
local function ort(path, x)
  local inp, outp = dir .. "/in.bin", dir .. "/out.bin"
  write_input(inp, x)
  local ok, out = run(string.format("node tests/onnx/run.js %s %s %s %s %s", H.shquote(path), inp, x:dtype(),
    table.concat(x:shape(), ","), outp))
  assert(ok, out)
  local info = dl.json.decode(out:match("(%b{})"))
  local bytes, vals = H.slurp(outp), {}
  for i = 1, #bytes // 4 do vals[i] = string.unpack("<f", bytes, 4 * i - 3) end
  return vals, info
end

local function max_err(got, want)
  assert.are.equal(#want, #got)
  local worst = 0
  for i = 1, #want do
    local e = math.abs(got[i] - want[i]) / math.max(1, math.abs(want[i]))
    if e ~= e then e = math.huge end
    worst = math.max(worst, e)
  end
  return worst
end

-- exports model, checks it, and compares ONNX Runtime with dlua at batch 1 and 5
local function roundtrip(name, model, opts, make_input)
  local path = dir .. "/" .. name .. ".onnx"
  model:eval()
  assert.are.equal(path, dl.onnx.export(model, path, opts))
  local in_name, out_name, opset = check_model(path)
  assert.are.equal(opts.input_name or "input", in_name)
  assert.are.equal(opts.output_name or "output", out_name)
  assert.are.equal(opts.opset or 13, tonumber(opset))
  if why_no_ort then
    assert.is_nil(os.getenv("DLUA_REQUIRE_ONNXRUNTIME") == "1" and why_no_ort or nil, why_no_ort)
    pending(why_no_ort)
    return
  end
  for _, n in ipairs({1, 5}) do
    local x = make_input and make_input(n) or dl.randn({n, table.unpack(opts.input_shape)})
    local want = dl.no_grad(function() return model(x) end)
    local got, info = ort(path, x)
    assert.are.same(want:shape(), info.shape)
    assert.are.same({in_name}, info.inputs)
    local e = max_err(got, flat(want))
    if os.getenv("ONNX_SPEC_VERBOSE") then print(string.format("%s batch %d: max error %.3g", name, n, e)) end
    assert(e <= TOL, string.format("%s at batch %d: ONNX Runtime differs from dlua by %.3g", name, n, e))
  end
end

-- gives every BatchNorm of m moving averages and an affine map that look trained
local function trained_bn(m)
  for _, e in ipairs(m:named_modules()) do
    local b = e[2]
    if getmetatable(b) == nn.BatchNorm then
      dl.no_grad(function()
        local c = b.num_features
        b.running_mean:copy_(dl.randn(b.running_mean:shape()) * 0.5)
        b.running_var:copy_(dl.rand(b.running_var:shape()) * 1.5 + 0.25)
        if b.weight then b.weight:copy_(dl.rand(c) + 0.5); b.bias:copy_(dl.randn(c) * 0.2) end
      end)
    end
  end
  return m
end

describe("dl.onnx.export in ONNX Runtime", function()
  setup(function() dl.seed(7) end)

  it("exports the MLP of examples/models/mlp.lua (Flatten, Linear, ReLU)", function()
    local mlp = dofile("examples/models/mlp.lua")
    roundtrip("mlp", mlp.build{depth = 2, width = 64}, {input_shape = {1, 28, 28}, output_name = "logits"})
  end)

  it("exports MLPs with GELU and LayerNorm, Tanh and BatchNorm on [N, C] with Dropout", function()
    local mlp = dofile("examples/models/mlp.lua")
    roundtrip("mlp_gelu", mlp.build{inputs = 20, depth = 2, width = 32, activation = "gelu", norm = "layer"},
      {input_shape = {20}})
    roundtrip("mlp_bn", trained_bn(mlp.build{inputs = 20, depth = 2, width = 32, activation = "tanh", norm = "batch",
      dropout = 0.3}), {input_shape = {20}})
    -- nothing but the identity: the output is an Identity of the input
    roundtrip("identity", nn.Sequential{nn.Dropout(0.2)}, {input_shape = {3}})
  end)

  it("exports the main job's CNN (examples/fashion_mnist.lua's layers) with trained-looking BatchNorm", function()
    local c = 8
    local model = nn.Sequential{
      nn.Conv2d(1, c, 5, {padding = 2}), nn.BatchNorm(c, {virtual_batch = 2}), nn.ReLU(), nn.MaxPool2d(2),
      nn.Conv2d(c, 2 * c, 5, {padding = 2}), nn.BatchNorm(2 * c, {virtual_batch = 2}), nn.ReLU(), nn.MaxPool2d(2),
      nn.Flatten(), nn.Linear(2 * c * 49, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 10)}
    roundtrip("cnn", trained_bn(model), {input_shape = {1, 28, 28}, input_name = "image", output_name = "logits"})
  end)

  it("exports a small ResNet of examples/models/resnet.lua (pre- and post-norm, the imagenet stem)", function()
    local resnet = dofile("examples/models/resnet.lua")
    roundtrip("resnet", trained_bn(resnet.build{stages = {1, 1}, width = 8}), {input_shape = {1, 16, 16}})
    roundtrip("resnet18_layout", trained_bn(resnet.build{stages = {2, 2, 2, 2}, width = 8}), {input_shape = {1, 28, 28}})
    roundtrip("resnet_post", trained_bn(resnet.build{stages = {1, 1}, width = 8, post_norm = true, stem = "imagenet",
      in_channels = 3}), {input_shape = {3, 20, 20}})
  end)

  it("exports a ResNet with channel LayerNorm through the exporter resnet.lua registers", function()
    local resnet = dofile("examples/models/resnet.lua")
    roundtrip("resnet_ln", resnet.build{stages = {1, 1}, width = 8, norm = "layer"}, {input_shape = {1, 12, 12}})
  end)

  it("exports Embedding (1-based ids), LayerNorm (composed at opset 13, LayerNormalization at 17), GELU, Softmax", function()
    local function model()
      dl.seed(3)
      local ln = nn.LayerNorm(16)
      dl.no_grad(function() ln.weight:copy_(dl.rand(16) + 0.5); ln.bias:copy_(dl.randn(16) * 0.1) end)
      return nn.Sequential{nn.Embedding(50, 16), ln, nn.GELU(), nn.Linear(16, 8), nn.Softmax(-1)}
    end
    local function ids(n) return (dl.rand(n, 6) * 50):floor():to("int64") + 1 end
    roundtrip("embed13", model(), {input_shape = {6}}, ids)
    roundtrip("embed17", model(), {input_shape = {6}, opset = 17}, ids)
    roundtrip("ln_plain", nn.Sequential{nn.LayerNorm(10, {affine = false, eps = 1e-3}), nn.Sigmoid(), nn.Softmax(2)},
      {input_shape = {10}})
  end)

  it("exports the Transformer of examples/models/transformer.lua (attention, GELU, mean or CLS pool, padding mask)", function()
    local tr = dofile("examples/models/transformer.lua")
    -- ids 1..20 with about one in four the pad id 3; every row keeps a real token
    math.randomseed(5)
    local function ids(n)
      local rows = {}
      for i = 1, n do
        rows[i] = {5}
        for j = 2, 8 do rows[i][j] = math.random() < 0.25 and 3 or math.random(1, 20) end
      end
      return dl.tensor(rows, {dtype = "int64"})
    end
    for _, hp in ipairs({{}, {pool = "cls"}, {pad_id = 3}, {pool = "cls", pad_id = 3}}) do
      local base = {vocab = 20, seq_len = 8, d_model = 16, heads = 4, layers = 2, classes = 3}
      for k, v in pairs(hp) do base[k] = v end
      local name = "transformer_" .. (hp.pool or "mean") .. (hp.pad_id and "_pad" or "")
      roundtrip(name, tr.build(base), {input_shape = {8}, input_dtype = "int64", output_name = "logits"}, ids)
    end
  end)

  it("exports nn.MultiheadAttention (self-attention, causal or not, either layout) and nn.TransformerEncoderLayer", function()
    roundtrip("mha", nn.MultiheadAttention(16, 4):eval(), {input_shape = {6, 16}})
    roundtrip("mha_causal", nn.MultiheadAttention(16, 2, {causal = true}):eval(), {input_shape = {5, 16}})
    roundtrip("tel_post_relu", nn.TransformerEncoderLayer(16, 4, {dim_feedforward = 32}):eval(), {input_shape = {6, 16}})
    roundtrip("tel_pre_gelu_causal", nn.TransformerEncoderLayer(16, 2, {dim_feedforward = 24, activation = "gelu",
      norm_first = true, causal = true}):eval(), {input_shape = {7, 16}})
    local ok, err = pcall(dl.onnx.export, nn.TransformerEncoderLayer(8, 2, {batch_first = false}):eval(),
      H.tmpdir("onnx-tel") .. "/m.onnx", {input_shape = {3, 8}})
    assert.is_false(ok)
    assert.matches("(TransformerEncoderLayer): cannot be exported to ONNX (batch_first = false: the graph's first " ..
      "dimension is the batch)", err, 1, true)
  end)

  it("exports Conv2d's stride, asymmetric padding, dilation, groups and no bias; pools with padding; Residual", function()
    local model = nn.Sequential{
      nn.Conv2d(4, 6, {3, 2}, {stride = {2, 1}, padding = {1, 2}, dilation = {1, 2}, groups = 2, bias = false}),
      nn.AvgPool2d(3, {stride = 2, padding = 1}),
      nn.Residual(nn.Sequential{nn.Conv2d(6, 6, 3, {padding = 1}), nn.Tanh()}, nn.Conv2d(6, 6, 1)),
      nn.Residual(nn.Sigmoid()),
      nn.MaxPool2d({2, 3}, {stride = 1, padding = 1}),
      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3, {bias = false})}
    roundtrip("convs", model, {input_shape = {4, 11, 9}})
    roundtrip("adaptive", nn.Sequential{nn.AdaptiveAvgPool2d(2), nn.Flatten()}, {input_shape = {2, 6, 4}})
    -- replicas' moving averages: eval (and the export) uses their mean
    roundtrip("bn_replicas", trained_bn(nn.Sequential{nn.Linear(6, 4), nn.BatchNorm(4, {replicas = 2, affine = false})}),
      {input_shape = {6}})
  end)

  it("exports a user module through dl.onnx.register", function()
    local Scale = nn.Module:extend("Scale")
    function Scale:init(n) self.alpha = self:parameter(dl.randn(n)) end
    function Scale:forward(x) return x * self.alpha end
    assert.is_nil(dl.onnx.register(Scale, function(g, m, x) return g:node("Mul", {x, g:const(m.alpha, "alpha")}) end))
    roundtrip("scale", nn.Sequential{nn.Linear(3, 4), Scale(4)}, {input_shape = {3}})
  end)
end)

describe("dl.onnx.export refuses", function()
  local MyLayer = nn.Module:extend("MyLayer")
  function MyLayer:forward(x) return x end

  it("a module it cannot express, by path and class", function()
    local model = nn.Sequential{nn.Linear(3, 3), nn.ReLU(), MyLayer()}
    assert.error_matches(function() dl.onnx.export(model, dir .. "/x.onnx", {input_shape = {3}}) end,
      "model.3 (MyLayer): cannot be exported to ONNX (no exporter for MyLayer; dl.onnx.register(MyLayer, fn) adds one)",
      1, true)
    local nested = nn.Sequential{nn.Residual(nn.Sequential{nn.Linear(3, 3), MyLayer()})}
    assert.error_matches(function() dl.onnx.export(nested, dir .. "/x.onnx", {input_shape = {3}}) end,
      "model.1.body.2 (MyLayer): cannot be exported to ONNX", 1, true)
    assert.error_matches(function() dl.onnx.export(MyLayer(), dir .. "/x.onnx", {input_shape = {3}}) end,
      "model (MyLayer): cannot be exported to ONNX", 1, true)
    -- a subclass of an exported class computes what it likes: refused too
    local Sub = nn.ReLU:extend("MyReLU")
    assert.error_matches(function() dl.onnx.export(nn.Sequential{Sub()}, dir .. "/x.onnx", {input_shape = {3}}) end,
      "model.1 (MyReLU): cannot be exported to ONNX", 1, true)
    assert.error_matches(function()
      dl.onnx.export(nn.Sequential{nn.Residual(function(x) return x end)}, dir .. "/x.onnx", {input_shape = {3}})
    end, "model.1 (Residual): cannot be exported to ONNX (its body is a plain function, not a module)", 1, true)
    assert.is_false(fs.exists(dir .. "/x.onnx"))
  end)

  it("bad arguments and options, naming the key", function()
    local m = nn.Sequential{nn.Linear(3, 3)}
    local p = dir .. "/y.onnx"
    assert.error_matches(function() dl.onnx.export(m, p, {input_shape = {3}, opset = 12}) end,
      "onnx.export: opset must be 13 to 17, got 12", 1, true)
    assert.error_matches(function() dl.onnx.export(m, p, {input_shpe = {3}}) end, "input_shpe", 1, true)
    assert.error_matches(function() dl.onnx.export(m, p, {}) end, "option 'input_shape' is required", 1, true)
    assert.error_matches(function() dl.onnx.export(m, p, {input_shape = {3, 0}}) end,
      "input_shape[2] must be a positive integer, got 0", 1, true)
    assert.error_matches(function() dl.onnx.export(m, p, {input_shape = {3}}, 1) end, "onnx.export", 1, true)
    assert.error_matches(function() dl.onnx.export(m, p, {input_shape = {3}, input_dtype = "uint8"}) end,
      "onnx.export: input_dtype must be float32, int64 or int32, got uint8", 1, true)
    assert.error_matches(function() dl.onnx.export({}, p, {input_shape = {3}}) end,
      "bad argument #1 to 'onnx.export' (module expected, got table)", 1, true)
    assert.error_matches(function() dl.onnx.export(m, p, {input_shape = {3}, input_name = "x", output_name = "x"}) end,
      "input_name and output_name are both 'x'", 1, true)
    assert.error_matches(function() dl.onnx.export(m, dir .. "/no/such/dir/m.onnx", {input_shape = {3}}) end,
      "cannot write '" .. dir .. "/no/such/dir/m.onnx'", 1, true)
    assert.error_matches(function() dl.onnx.register({}, function() end) end, "onnx.register: expected a module class", 1, true)
  end)

  it("keeps the model's training flags", function()
    local m = nn.Sequential{nn.Linear(3, 3), nn.Dropout(0.5)}
    m:train()
    m[2]:eval()
    dl.onnx.export(m, dir .. "/flags.onnx", {input_shape = {3}})
    assert.is_true(m.training)
    assert.is_true(m[1].training)
    assert.is_false(m[2].training)
  end)
end)

describe("dlua export", function()
  teardown(function() fs.rm_rf(dir) end)

  it("writes a checkpoint's model, rebuilt from its experiment, that ONNX Runtime runs as dlua does", function()
    local d = H.tmpdir("onnx-cmd")
    H.spit(d .. "/exp.lua", H.fixture("toy_experiment.lua"))
    local ok, out = run(string.format("cd %s && %s exp.lua --set checkpoint_every=10 --out run", d, EXE))
    assert(ok, out)
    local ckpt = d .. "/run/checkpoints/ckpt-000000020.safetensors"
    ok, out = run(string.format("cd %s && %s export exp.lua %s toy.onnx --output-name logits", d, EXE, ckpt))
    assert(ok, out)
    assert.truthy(out:find("wrote toy.onnx", 1, true), out)
    local in_name, out_name = check_model(d .. "/toy.onnx")
    assert.are.same({"input", "logits"}, {in_name, out_name})
    if not why_no_ort then
      local cfg = require("dlua.train.experiment").restore(d .. "/exp.lua", ckpt, "spec")
      local x = dl.randn(5, 8)
      local want = dl.no_grad(function() return cfg.model(x) end)
      local got = ort(d .. "/toy.onnx", x)
      assert(max_err(got, flat(want)) <= TOL)
    end
    -- the main job itself (examples/fashion_mnist.lua): a checkpoint of its model with
    -- trained-looking batch norm; the input shape comes from its eval set
    local exp = dl.load_experiment("examples/fashion_mnist.lua")
    local hp = exp:resolve({channels = 8, width = 32})
    local fm = trained_bn(exp:config(hp).model)
    local tensors = {}
    for k, t in pairs(fm:state_dict()) do tensors["model/" .. k] = t end
    dl.checkpoint.save(d .. "/fm.safetensors", tensors, {hparams = dl.json.encode(hp), step = "1"})
    ok, out = run(string.format("%s export examples/fashion_mnist.lua %s %s --output-name logits", EXE,
      d .. "/fm.safetensors", d .. "/fm.onnx"))
    assert(ok, out)
    check_model(d .. "/fm.onnx")
    if not why_no_ort then
      fm:eval()
      for _, n in ipairs({1, 5}) do
        local x = dl.randn(n, 1, 28, 28)
        local want = dl.no_grad(function() return fm(x) end)
        local got, info = ort(d .. "/fm.onnx", x)
        assert.are.same({n, 10}, info.shape)
        local e = max_err(got, flat(want))
        assert(e <= TOL, string.format("fashion_mnist at batch %d: ONNX Runtime differs from dlua by %.3g", n, e))
      end
    end
    ok, out = run(string.format("cd %s && %s export exp.lua nope.safetensors toy.onnx", d, EXE))
    assert.is_false(ok)
    assert.truthy(out:find("dlua export: checkpoint: cannot open 'nope.safetensors'", 1, true), out)
    ok, out = run(string.format("cd %s && %s export exp.lua %s t.onnx --input-shape 8,x", d, EXE, ckpt))
    assert.is_false(ok)
    assert.truthy(out:find("--input-shape: expected sizes like 1,28,28, got '8,x'", 1, true), out)
    ok, out = run(string.format("%s export exp.lua", EXE))
    assert.is_false(ok)
    assert.truthy(out:find("usage: dlua export EXPERIMENT CHECKPOINT OUT.onnx", 1, true), out)
    fs.rm_rf(d)
  end)
end)
