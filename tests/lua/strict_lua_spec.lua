-- Strictness of the Lua library (issue 16): every function reachable from
-- `require "dlua"` (walked through its tables, the functions of dlua.core
-- aside: strict_spec.lua covers those and the tensor methods) and every
-- callable table (nn classes, autograd Functions) refuses a junk extra
-- argument, naming the function and the argument. A reachable function must be
-- in VALID (a valid call) or EXEMPT (the reason it cannot be arity-checked);
-- one in neither fails the walk, so a new function cannot skip the check.
-- Types (issue 33 item 11): every function with parameters declares their types
-- once (util.strict / util.strict_table's types, util.declared reads them back),
-- or is in UNTYPED with the reason; a walk passes a wrong-typed value at each
-- declared position and expects "bad argument #i to 'NAME' (T expected, got U)".
local dl = require "dlua"
local core = require "dlua.core"
local util = require "dlua.util"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir("strict-lua")

------------------------------------------------------------------ the walk

-- every function and callable table reachable from dl, breadth first with
-- sorted keys, each named by its shortest path ("dl.nn.Linear.forward"); keys
-- starting with "__" (metamethods, class names) are not walked. A callable
-- table is named with "()" ("dl.nn.Linear()").
local function walk()
  local corefn = {}
  for _, v in pairs(core) do if type(v) == "function" then corefn[v] = true end end
  local seen, names, found = {[core] = true}, {}, {}
  local queue, qi = {{dl, "dl"}}, 1
  while queue[qi] do
    local t, path = queue[qi][1], queue[qi][2]
    qi = qi + 1
    local keys = {}
    for k in pairs(t) do if type(k) == "string" and k:sub(1, 2) ~= "__" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v, p = rawget(t, k), path .. "." .. k
      if type(v) == "function" and not corefn[v] and not names[v] then
        names[v] = p
        found[p] = v
      elseif type(v) == "table" and not seen[v] then
        seen[v] = true
        local mt = getmetatable(v)
        if type(mt) == "table" and mt.__call and not names[v] then
          names[v] = p .. "()"
          found[p .. "()"] = v
        end
        queue[#queue + 1] = {v, p}
      end
    end
  end
  return found
end

------------------------------------------------------------------ fixtures

local function T() return dl.zeros(2, 3) end
local function IMG() return dl.ones(1, 1, 4, 4) end
local function DS() return dl.data.tensors{x = dl.arange(8):reshape(4, 2), y = dl.arange(4)} end
local function P() return DS():batch(2) end
local function IT() return (P():iter()) end
local function PU() return DS():seed(1) end   -- a pipeline before its batch stage
local function LIN() return dl.nn.Linear(2, 3) end
local function SPACE() return dl.search.space{lr = dl.search.log_uniform(1e-3, 1), n = dl.search.int(1, 4)} end
local function MODEL() return dl.nn.Sequential{dl.nn.Linear(2, 2)} end

local npy_path, npz_path = dir .. "/two.npy", dir .. "/two.npz"
H.spit(npy_path, H.npy("<f4", {2}, string.pack("<ff", 1, 2)))
H.spit(npz_path, H.zip_stored({{"x.npy", H.npy("<f4", {2}, string.pack("<ff", 1, 2))}}))
local csv_path = dir .. "/two.csv"
H.spit(csv_path, "a,b\n1,2\n3,4\n")
local idx_path = dir .. "/three.idx"
H.spit(idx_path, "\0\0\8\1" .. string.pack(">I4", 3) .. "abc")
local shards_path = dir .. "/s.tar"
require("dlua.core")._tar_write(shards_path, {{"a.cls", "1"}})
local images_list = dir .. "/images.csv"          -- data.images reads the files only when an example is read
H.spit(images_list, "a.png,1\n")
local ckpt_path = dir .. "/w.ckpt"
dl.checkpoint.save(ckpt_path, {w = dl.ones(2)}, {step = "1"})
local text_path = dir .. "/lines.txt"
local square = {forward = function(ctx, x) ctx.x = x; return x * x end,
                backward = function(_, g) return g end}

------------------------------------------------------------------ exemptions

local VARARG = "vararg by design: passes any number of arguments on to fn (fn(...))"
local EXEMPT = {
  ["dl.experiment"] = "reads its caller's frame (debug.getinfo istailcall, for the user's `return dl.experiment{...}` line), which a tail-calling wrapper would replace",
  ["dl.study"] = "reads its caller's frame (study.site.of_caller, to locate the spec in the user's file), which a tail-calling wrapper would replace",
  ["dl.here"] = "reads its caller's frame (the file whose directory it resolves against), which a tail-calling wrapper would replace; it checks its own arity (tests/lua/paths_spec.lua)",
  ["dl.no_grad"] = VARARG,
  ["dl.enable_grad"] = VARARG,
  ["dl.dist.solo"] = VARARG,
  ["dl.trace.span"] = VARARG,
  ["dl.util.check_args"] = "vararg by design: checks the arguments it is given against the declared types",
  ["dl.search.key"] = "vararg by design: a key from any number of integers or strings",
  ["dl.search.rng"] = "vararg by design: a stream keyed by any number of integers or strings",
  ["dl.data.Pipeline.map"] = "vararg by design: takes any number of transforms",
  ["dl.data.Dataset.map"] = "vararg by design: Pipeline:map's any number of transforms",
  ["dl.json.array"] = "json is exempt: a standalone codec whose functions keep Lua's lenient conventions",
  ["dl.json.decode"] = "json is exempt: a standalone codec whose functions keep Lua's lenient conventions",
  ["dl.json.encode"] = "json is exempt: a standalone codec whose functions keep Lua's lenient conventions",
  ["dl.nn.Module.forward"] = "the abstract forward every subclass overrides (it only raises 'forward is not defined'); each subclass's own forward is checked here",
}

-- functions with parameters that declare no positional types, and why
local UNTYPED = {
  ["dl.is_tensor"] = "a predicate: any value is a valid question (util.is_tensor)",
  ["dl.nn.Module.to"] = "its own check names the valid values: to: dtype must be 'float32' or 'float64', got number",
}
-- nn classes: a constructor's types are its class's sig.init (Module:extend(name, sig)), which
-- silent_spec walks position by position; forward takes what the layer's math takes (tensors,
-- checked by the ops in C with lt_argerror, or a submodule's input for containers)
local function untyped_nn(name, f)
  local cls, m = name:match("^dl%.nn%.(%u%w*)%.(%w+)$")
  if not cls or cls == "Module" then return nil end
  if m == "forward" then return "forward" end
  if m == "init" then
    local sig = rawget(dl.nn[cls], "_sig")
    return sig and sig.init and "init" or nil
  end
end

------------------------------------------------------------------ valid calls

-- name -> {args = function() return <a valid call's arguments> end [, run = false]}.
-- run = false: the valid call is not made (it would run training, start
-- processes, read a data set or need a world of several ranks); the junk call is,
-- and the strict wrapper refuses it before the function runs.
local function a(f, run) return {args = f, run = run} end
local function none() end
local VALID = {
  -- top level
  ["dl.batch_size_sweep"] = a(function() return {experiment = "none.lua"} end, false),
  ["dl.diagnose"] = a(function() return dir, {quiet = true} end, false),
  ["dl.evaluate"] = a(function() return {experiment = "none.lua", checkpoint = ckpt_path} end, false),
  ["dl.is_tensor"] = a(function() return T() end),
  ["dl.load_experiment"] = a(function() return "none.lua" end, false),
  ["dl.report"] = a(function() return dir, {} end, false),
  ["dl.study_results"] = a(function() return dir, {} end, false),
  ["dl.train"] = a(function() return {model = LIN(), steps = 1} end, false),
  -- autograd
  ["dl.autograd.Function"] = a(function() return square end),
  ["dl.autograd.gradcheck"] = a(function() return function(x) return x * x end, {dl.ones(2)}, {} end),
  -- checkpoint
  ["dl.onnx.export"] = a(function() return LIN(), dir .. "/m.onnx", {input_shape = {2}} end),
  ["dl.onnx.register"] = a(function() return dl.nn.Module:extend("OnnxStrict"), function() end end),
  ["dl.checkpoint.load"] = a(function() return ckpt_path end),
  ["dl.checkpoint.read_meta"] = a(function() return ckpt_path end),
  ["dl.checkpoint.save"] = a(function() return dir .. "/v.ckpt", {w = dl.ones(2)}, {step = "2"} end),
  ["dl.checkpoint.verify"] = a(function() return ckpt_path end),
  -- data
  ["dl.data._worker_load"] = a(function() return {} end, false),
  ["dl.data.csv"] = a(function() return {path = csv_path} end),
  ["dl.data.fashion_mnist"] = a(function() return {} end, false),
  ["dl.data.fashion_mnist_tensors"] = a(function() return {} end, false),
  ["dl.data.idx"] = a(function() return {images = idx_path} end),
  ["dl.data.images"] = a(function() return {list = images_list} end),
  ["dl.data.is_dataset"] = a(function() return DS() end),
  ["dl.data.shards"] = a(function() return {files = {shards_path}, fields = {label = "cls"}} end),
  ["dl.data.pack"] = a(function() return {dataset = DS(), dir = dir .. "/packed", fields = {}} end),
  ["dl.data.npy"] = a(function() return {x = npy_path} end),
  ["dl.data.npz"] = a(function() return {path = npz_path} end),
  ["dl.data.read_npy"] = a(function() return npy_path, {} end),
  ["dl.data.read_npz"] = a(function() return npz_path, {} end),
  ["dl.data.is_pipeline"] = a(function() return P() end),
  ["dl.data.tensors"] = a(function() return {x = dl.ones(2, 2)} end),
  ["dl.data.Dataset.batch"] = a(function() return DS(), 2, {} end),
  ["dl.data.Dataset.cache"] = a(function() return DS(), dir .. "/ds.cache" end),
  ["dl.data.Dataset.column"] = a(function() return DS(), "x" end),
  ["dl.data.Dataset.fields"] = a(function() return DS() end),
  ["dl.data.Dataset.get"] = a(function() return DS(), 1 end),
  ["dl.data.Dataset.iter"] = a(function() return DS(), {} end),
  ["dl.data.Dataset.prefetch"] = a(function() return DS(), 2 end),
  ["dl.data.Dataset.repeat"] = a(function() return DS(), 2 end),
  ["dl.data.Dataset.seed"] = a(function() return DS(), 3 end),
  ["dl.data.Dataset.select"] = a(function() return DS(), {"x"} end),
  ["dl.data.Dataset.shard"] = a(function() return DS(), {rank = 0, world = 2} end),
  ["dl.data.Dataset.shuffle"] = a(function() return DS(), {seed = 1} end),
  ["dl.data.Dataset.split"] = a(function() return DS(), {2, 2, seed = 1} end),
  ["dl.data.Dataset.subset"] = a(function() return DS(), {1, 2} end),
  ["dl.data.Dataset.take"] = a(function() return DS(), 2 end),
  ["dl.data.Dataset.workers"] = a(function() return DS(), 1 end),
  ["dl.data.Iterator.close"] = a(function() return IT() end),
  ["dl.data.Iterator.next"] = a(function() return IT() end),
  ["dl.data.Iterator.state"] = a(function() return IT() end),
  ["dl.data.Iterator.stats"] = a(function() return IT() end),
  ["dl.data.Iterator.summary"] = a(function() return IT() end),
  ["dl.data.Pipeline.batch"] = a(function() return PU(), 2, {} end),
  ["dl.data.Pipeline.cache"] = a(function() return PU(), dir .. "/p.cache" end),
  ["dl.data.Pipeline.cache_info"] = a(function() return P() end),
  ["dl.data.Pipeline.data_seed"] = a(function() return P() end),
  ["dl.data.Pipeline.iter"] = a(function() return P(), {} end),
  ["dl.data.Pipeline.prefetch"] = a(function() return P(), 2 end),
  ["dl.data.Pipeline.repeat"] = a(function() return P(), 2 end),
  ["dl.data.Pipeline.repeat_"] = a(function() return P(), 2 end),
  ["dl.data.Pipeline.reset"] = a(function() return P() end),
  ["dl.data.Pipeline.seed"] = a(function() return P(), 3 end),
  ["dl.data.Pipeline.select"] = a(function() return PU(), {"x"} end),
  ["dl.data.Pipeline.set_state"] = a(function() return P(), {epoch = 1, batch = 0} end),
  ["dl.data.Pipeline.shard"] = a(function() return PU(), {rank = 0, world = 1} end),
  ["dl.data.Pipeline.shuffle"] = a(function() return PU(), {seed = 1} end),
  ["dl.data.Pipeline.state"] = a(function() return P() end),
  ["dl.data.Pipeline.stats"] = a(function() return P() end),
  ["dl.data.Pipeline.summary"] = a(function() return P() end),
  ["dl.data.Pipeline.take"] = a(function() return P(), 1 end),
  ["dl.data.Pipeline.wait_time"] = a(function() return P() end),
  ["dl.data.Pipeline.skipped"] = a(function() return P() end),
  ["dl.data.Pipeline.workers"] = a(function() return P(), 1 end),
  ["dl.data.transforms.cast"] = a(function() return "float64", {} end),
  ["dl.data.transforms.center_crop"] = a(function() return {size = 4} end),
  ["dl.data.transforms.color_jitter"] = a(function() return {brightness = 0.2} end),
  ["dl.data.transforms.flip"] = a(function() return {} end),
  ["dl.data.transforms.hflip"] = a(function() return 0.5 end),
  ["dl.data.transforms.normalize"] = a(function() return {mean = 0, std = 1} end),
  ["dl.data.transforms.one_hot"] = a(function() return 3, {} end),
  ["dl.data.transforms.random_affine"] = a(function() return {} end),
  ["dl.data.transforms.random_crop"] = a(function() return 2, {} end),
  ["dl.data.transforms.random_resized_crop"] = a(function() return {size = 4} end),
  ["dl.data.transforms.resize"] = a(function() return {size = 4} end),
  ["dl.data.transforms.random_translate"] = a(function() return 1, {} end),
  ["dl.data.transforms.scale"] = a(function() return 2, {} end),
  ["dl.data.transforms.vflip"] = a(function() return 0.5 end),
  -- dist (a world of one; the collectives are local)
  ["dl.dist.allgather_object"] = a(function() return {1} end),
  ["dl.dist.allreduce"] = a(function() return T(), "sum" end),
  ["dl.dist.allreduce_many"] = a(function() return {T()}, "sum" end),
  ["dl.dist.available"] = a(none),
  ["dl.dist.barrier"] = a(none),
  ["dl.dist.broadcast"] = a(function() return T(), 0 end),
  ["dl.dist.broadcast_object"] = a(function() return {1}, 0 end),
  ["dl.dist.broadcast_string"] = a(function() return "x", 0 end),
  ["dl.dist.check_replicated"] = a(function() return MODEL(), "weights", "hint" end),
  ["dl.dist.checksum"] = a(function() return {T()} end),
  ["dl.dist.data_parallel"] = a(function() return {} end, false),
  ["dl.dist.data_parallel_hooks"] = a(none),
  ["dl.dist.eval_shard"] = a(none),
  ["dl.dist.is_lead"] = a(none),
  ["dl.dist.rank"] = a(none),
  ["dl.dist.run_study"] = a(function() return {}, {}, "s.lua" end, false),
  ["dl.dist.same_on_all"] = a(function() return "x" end),
  ["dl.dist.serve_trials"] = a(function() return function() end end, false),
  ["dl.dist.shard_pipeline"] = a(function() return P(), 0, 1 end),
  ["dl.dist.stats"] = a(none),
  ["dl.dist.trial_pool"] = a(function() return function() end end, false),
  ["dl.dist.world"] = a(none),
  -- fs
  ["dl.fs.abspath"] = a(function() return "x" end),
  ["dl.fs._fail_writes_from"] = a(function() return 0 end),
  ["dl.fs._write_count"] = a(none),
  ["dl.fs.append_line"] = a(function() return text_path, "x", false end),
  ["dl.fs.check_regular"] = a(function() return csv_path, "read" end),
  ["dl.fs.checked_path"] = a(function() return dir, "a.txt", "index.json", "entry 1" end),
  ["dl.fs.create_once"] = a(function() return dir .. "/once.txt", "x" end),
  ["dl.fs.dirname"] = a(function() return "a/b" end),
  ["dl.fs.exists"] = a(function() return dir end),
  ["dl.fs.filter_lines"] = a(function() H.spit(text_path, "a\nb\n"); return text_path, function() return true end end),
  ["dl.fs.inside"] = a(function() return dir, "a.txt" end),
  ["dl.fs.is_dir"] = a(function() return dir end),
  ["dl.fs.list"] = a(function() return dir end),
  ["dl.fs.mkdir_p"] = a(function() return dir .. "/sub" end),
  ["dl.fs.read"] = a(function() return csv_path end),
  ["dl.fs.remove_matching"] = a(function() return dir .. "/nothing" end),
  ["dl.fs.rm_rf"] = a(function() return dir .. "/gone" end),
  -- memory
  ["dl.memory.is_oom"] = a(function() return "x" end),
  ["dl.memory.limit"] = a(function() return nil end),
  ["dl.memory.reset_peak"] = a(none),
  ["dl.memory.stats"] = a(none),
  ["dl.memory.trim"] = a(none),
  -- metrics
  ["dl.metrics.batches"] = a(function() return DS(), 2, {"x", "y"}, nil, {rank = 0, world = 1} end),
  ["dl.metrics.evaluator"] = a(function() return {} end, false),
  -- nn functions
  ["dl.nn._options"] = a(function() return "f", {}, {a = 1}, {a = "number"} end),
  ["dl.nn.accuracy"] = a(function() return dl.ones(2, 3), dl.tensor({1, 2}), dl.ones(2) end),
  ["dl.nn.sync_batchnorm"] = a(function() return MODEL() end),
  ["dl.nn.init.constant"] = a(function() return T(), 1 end),
  ["dl.nn.init.kaiming_normal"] = a(function() return T() end),
  ["dl.nn.init.kaiming_uniform"] = a(function() return T() end),
  ["dl.nn.init.normal"] = a(function() return T(), 0, 1 end),
  ["dl.nn.init.uniform"] = a(function() return T(), 0, 1 end),
  ["dl.nn.init.xavier_normal"] = a(function() return T() end),
  ["dl.nn.init.xavier_uniform"] = a(function() return T() end),
  ["dl.nn.init.zeros"] = a(function() return T() end),
  ["dl.nn.init.orthogonal"] = a(function() return T(), 1 end),
  ["dl.nn.init.trunc_normal"] = a(function() return T(), 0, 1, -2, 2 end),
  -- nn classes: constructors (callable tables) and methods, self first
  ["dl.nn.AdaptiveAvgPool2d()"] = a(function() return 1 end),
  ["dl.nn.AdaptiveAvgPool2d.forward"] = a(function() return dl.nn.AdaptiveAvgPool2d(1), IMG() end),
  ["dl.nn.AdaptiveAvgPool2d.init"] = a(function() return dl.nn.AdaptiveAvgPool2d(1), 1 end),
  ["dl.nn.AvgPool2d()"] = a(function() return 2, {} end),
  ["dl.nn.AvgPool2d.extra_repr"] = a(function() return dl.nn.AvgPool2d(2) end),
  ["dl.nn.AvgPool2d.forward"] = a(function() return dl.nn.AvgPool2d(2), IMG() end),
  ["dl.nn.AvgPool2d.init"] = a(function() return dl.nn.AvgPool2d(2), 2, {} end),
  ["dl.nn.BatchNorm()"] = a(function() return 2, {} end),
  ["dl.nn.BatchNorm.extra_repr"] = a(function() return dl.nn.BatchNorm(2) end),
  ["dl.nn.BatchNorm.forward"] = a(function() return dl.nn.BatchNorm(2), dl.rand(4, 2) end),
  ["dl.nn.BatchNorm.init"] = a(function() return dl.nn.BatchNorm(2), 2, {} end),
  ["dl.nn.BatchNorm.set_rank_mean"] = a(function() return nil end, false),
  ["dl.nn.BatchNorm.sync_moving_averages"] = a(function() return dl.nn.BatchNorm(2) end),
  ["dl.nn.Conv2d()"] = a(function() return 1, 1, 3, {} end),
  ["dl.nn.Conv2d.extra_repr"] = a(function() return dl.nn.Conv2d(1, 1, 3) end),
  ["dl.nn.Conv2d.forward"] = a(function() return dl.nn.Conv2d(1, 1, 3), IMG() end),
  ["dl.nn.Conv2d.init"] = a(function() return dl.nn.Conv2d(1, 1, 3), 1, 1, 3, {} end),
  ["dl.nn.CrossEntropy()"] = a(function() return {} end),
  ["dl.nn.CrossEntropy.forward"] = a(function() return dl.nn.CrossEntropy(), dl.zeros(2, 3), dl.tensor({1, 2}), dl.ones(2) end),
  ["dl.nn.CrossEntropy.init"] = a(function() return dl.nn.CrossEntropy(), {} end),
  ["dl.nn.Dropout()"] = a(function() return 0.5 end),
  ["dl.nn.Dropout.extra_repr"] = a(function() return dl.nn.Dropout(0.5) end),
  ["dl.nn.Dropout.forward"] = a(function() return dl.nn.Dropout(0.5), T() end),
  ["dl.nn.Dropout.init"] = a(function() return dl.nn.Dropout(0.5), 0.5 end),
  ["dl.nn.Embedding()"] = a(function() return 4, 2 end),
  ["dl.nn.Embedding.forward"] = a(function() return dl.nn.Embedding(4, 2), dl.tensor({1, 2}) end),
  ["dl.nn.Embedding.init"] = a(function() return dl.nn.Embedding(4, 2), 4, 2 end),
  ["dl.nn.Flatten()"] = a(none),
  ["dl.nn.Flatten.forward"] = a(function() return dl.nn.Flatten(), IMG() end),
  ["dl.nn.GELU()"] = a(none),
  ["dl.nn.GELU.forward"] = a(function() return dl.nn.GELU(), T() end),
  ["dl.nn.LayerNorm()"] = a(function() return 3, {} end),
  ["dl.nn.LayerNorm.forward"] = a(function() return dl.nn.LayerNorm(3), T() end),
  ["dl.nn.LayerNorm.init"] = a(function() return dl.nn.LayerNorm(3), 3, {} end),
  ["dl.nn.Linear()"] = a(function() return 2, 3, {} end),
  ["dl.nn.Linear.extra_repr"] = a(function() return LIN() end),
  ["dl.nn.Linear.forward"] = a(function() return LIN(), dl.ones(1, 2) end),
  ["dl.nn.Linear.init"] = a(function() return LIN(), 2, 3, {} end),
  ["dl.nn.MSE()"] = a(function() return {} end),
  ["dl.nn.MSE.forward"] = a(function() return dl.nn.MSE(), T(), T() end),
  ["dl.nn.MSE.init"] = a(function() return dl.nn.MSE(), {} end),
  ["dl.nn.NLL()"] = a(function() return {} end),
  ["dl.nn.NLL.forward"] = a(function() return dl.nn.NLL(), dl.zeros(2, 3), dl.tensor({1, 2}), dl.ones(2) end),
  ["dl.nn.NLL.init"] = a(function() return dl.nn.NLL(), {} end),
  ["dl.nn.BCEWithLogits()"] = a(function() return {} end),
  ["dl.nn.BCEWithLogits.forward"] = a(function() return dl.nn.BCEWithLogits(), T(), T() end),
  ["dl.nn.BCEWithLogits.init"] = a(function() return dl.nn.BCEWithLogits(), {} end),
  ["dl.nn.Huber()"] = a(function() return {} end),
  ["dl.nn.Huber.forward"] = a(function() return dl.nn.Huber(), T(), T() end),
  ["dl.nn.Huber.init"] = a(function() return dl.nn.Huber(), {} end),
  ["dl.nn.SmoothL1()"] = a(function() return {} end),
  ["dl.nn.SmoothL1.forward"] = a(function() return dl.nn.SmoothL1(), T(), T() end),
  ["dl.nn.SmoothL1.init"] = a(function() return dl.nn.SmoothL1(), {} end),
  ["dl.nn.MultiheadAttention()"] = a(function() return 4, 2, {} end),
  ["dl.nn.MultiheadAttention.extra_repr"] = a(function() return dl.nn.MultiheadAttention(4, 2) end),
  ["dl.nn.MultiheadAttention.forward"] = a(function()
    local x = dl.ones(1, 3, 4)
    return dl.nn.MultiheadAttention(4, 2), x, x, x, {}
  end),
  ["dl.nn.MultiheadAttention.init"] = a(function() return dl.nn.MultiheadAttention(4, 2), 4, 2, {} end),
  ["dl.nn.TransformerEncoderLayer()"] = a(function() return 4, 2, {dim_feedforward = 8} end),
  ["dl.nn.TransformerEncoderLayer.forward"] = a(function()
    return dl.nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 8}), dl.ones(1, 3, 4), {}
  end),
  ["dl.nn.TransformerEncoderLayer.init"] = a(function()
    return dl.nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 8}), 4, 2, {dim_feedforward = 8}
  end),
  ["dl.nn.MaxPool2d()"] = a(function() return 2, {} end),
  ["dl.nn.MaxPool2d.extra_repr"] = a(function() return dl.nn.MaxPool2d(2) end),
  ["dl.nn.MaxPool2d.forward"] = a(function() return dl.nn.MaxPool2d(2), IMG() end),
  ["dl.nn.MaxPool2d.init"] = a(function() return dl.nn.MaxPool2d(2), 2, {} end),
  ["dl.nn.Module._name_root"] = a(function() return LIN(), "model" end),
  ["dl.nn.Module.apply"] = a(function() return LIN(), function() end end),
  ["dl.nn.Module.buffer"] = a(function() return LIN(), dl.ones(1) end),
  ["dl.nn.Module.children"] = a(function() return MODEL() end),
  ["dl.nn.Module.eval"] = a(function() return LIN() end),
  ["dl.nn.Module.extend"] = a(function() return dl.nn.Module, "Scratch", {init = {"number?"}} end),
  ["dl.nn.Module.extra_repr"] = a(function() return dl.nn.Module:extend("Bare")() end),
  ["dl.nn.Module.freeze"] = a(function() return LIN() end),
  ["dl.nn.Module.init"] = a(function() return dl.nn.Module:extend("Bare")() end),
  ["dl.nn.Module.load_state_dict"] = a(function() local m = LIN(); return m, m:state_dict(), {} end),
  ["dl.nn.Module.modules"] = a(function() return MODEL() end),
  ["dl.nn.Module.named_buffers"] = a(function() return LIN() end),
  ["dl.nn.Module.named_children"] = a(function() return MODEL() end),
  ["dl.nn.Module.named_modules"] = a(function() return MODEL() end),
  ["dl.nn.Module.named_parameters"] = a(function() return LIN() end),
  ["dl.nn.Module.num_parameters"] = a(function() return LIN() end),
  ["dl.nn.Module.parameter"] = a(function() return LIN(), dl.ones(1) end),
  ["dl.nn.Module.parameters"] = a(function() return LIN() end),
  ["dl.nn.Module.state_dict"] = a(function() return LIN() end),
  ["dl.nn.Module.to"] = a(function() return LIN(), "float64" end),
  ["dl.nn.Module.train"] = a(function() return LIN(), true end),
  ["dl.nn.Module.unfreeze"] = a(function() return LIN() end),
  ["dl.nn.Module.zero_grad"] = a(function() return LIN() end),
  ["dl.nn.ReLU()"] = a(none),
  ["dl.nn.ReLU.forward"] = a(function() return dl.nn.ReLU(), T() end),
  ["dl.nn.Residual()"] = a(function() return LIN(), LIN() end),
  ["dl.nn.Residual.forward"] = a(function() return dl.nn.Residual(dl.nn.Linear(2, 2)), dl.ones(1, 2) end),
  ["dl.nn.Residual.init"] = a(function() return dl.nn.Residual(LIN()), LIN(), LIN() end),
  ["dl.nn.Sequential()"] = a(function() return {LIN()} end),
  ["dl.nn.Sequential.add"] = a(function() return MODEL(), LIN() end),
  ["dl.nn.Sequential.forward"] = a(function() return MODEL(), dl.ones(1, 2) end),
  ["dl.nn.Sequential.init"] = a(function() return MODEL(), {LIN()} end),
  ["dl.nn.Sigmoid()"] = a(none),
  ["dl.nn.Sigmoid.forward"] = a(function() return dl.nn.Sigmoid(), T() end),
  ["dl.nn.Softmax()"] = a(function() return -1 end),
  ["dl.nn.Softmax.forward"] = a(function() return dl.nn.Softmax(), T() end),
  ["dl.nn.Softmax.init"] = a(function() return dl.nn.Softmax(), -1 end),
  ["dl.nn.Tanh()"] = a(none),
  ["dl.nn.Tanh.forward"] = a(function() return dl.nn.Tanh(), T() end),
  -- optim
  -- (the constructors dl.optim.SGD, Adam, ...: one per row of core.optim_table(), below)
  ["dl.optim.clip_grad_norm"] = a(function() return LIN():parameters(), 1 end),
  ["dl.optim.param_groups"] = a(function() return LIN(), {} end),
  ["dl.optim.schedule.constant"] = a(function() return {} end),
  ["dl.optim.schedule.cosine"] = a(function() return {steps = 10} end),
  ["dl.optim.schedule.linear"] = a(function() return {steps = 10} end),
  ["dl.optim.schedule.piecewise"] = a(function() return {boundaries = {5}, values = {1, 0.1}} end),
  ["dl.optim.schedule.rsqrt"] = a(function() return {} end),
  -- search
  ["dl.search.algorithm"] = a(function() return "bayes" end),
  ["dl.search.algorithm_names"] = a(none),
  ["dl.search.bayes_suggest"] = a(function() return SPACE(), {}, {}, 1, {} end, false),
  ["dl.search.centered_l2_discrepancy"] = a(function() return {{0.25, 0.5}, {0.75, 0.25}} end),
  ["dl.search.choice"] = a(function() return {"a", "b"} end),
  ["dl.search.digits"] = a(function() return 2 end),
  ["dl.search.discrete"] = a(function() return {1, 2} end),
  ["dl.search.dominates"] = a(function() return {1, 2}, {2, 2}, {"min", "min"} end),
  ["dl.search.grid_points"] = a(function() return SPACE(), 3 end),
  ["dl.search.halton"] = a(function() return 1, 2, {} end),
  ["dl.search.halton_permutations"] = a(function() return 3, 0, 1 end),
  ["dl.search.expected_hvi"] = a(function() return {{0.2, 0.8}}, {1, 1}, {0.5, 0.5}, {0.1, 0.1} end),
  ["dl.search.halton_sequence"] = a(function() return 2, 0 end),
  ["dl.search.hypervolume"] = a(function() return {{0.2, 0.8}}, {1, 1} end),
  ["dl.search.hash_string"] = a(function() return "x" end),
  ["dl.search.importance"] = a(function() return SPACE(), {}, {} end, false),
  ["dl.search.int"] = a(function() return 1, 4, {} end),
  ["dl.search.is_param"] = a(function() return dl.search.int(1, 2) end),
  ["dl.search.is_space"] = a(function() return SPACE() end),
  ["dl.search.log_uniform"] = a(function() return 1e-3, 1 end),
  ["dl.search.parego"] = a(function() return {{u = {0.5}, values = {1, 2}}}, {"min", "max"}, {0.5, 0.5} end),
  ["dl.search.parego_weights"] = a(function() return 2, 0, 1 end),
  ["dl.search.pareto_front"] = a(function() return {{1, 2}, {2, 1}}, {"min", "min"} end),
  ["dl.search.param_from_table"] = a(function() return {type = "int", low = 1, high = 4} end, false),
  ["dl.search.point"] = a(function() return SPACE(), 1, {} end),
  ["dl.search.primes"] = a(function() return 3 end),
  ["dl.search.radical_inverse"] = a(function() return 3, 2, dl.search.halton_permutations(2, 0, 1) end),
  ["dl.search.random_point"] = a(function() return 1, 2, 0 end),
  -- run = false: a valid call adds a row to the process's table of algorithms
  ["dl.search.register_algorithm"] = a(function() return {name = "strict_toy", adaptive = false, finite = false,
    batches = true, objectives = true, conditional = true, point = function() end} end, false),
  ["dl.search.sample"] = a(function() return SPACE(), 2, {} end),
  ["dl.search.space"] = a(function() return {lr = dl.search.uniform(0, 1)}, {} end),
  ["dl.search.space_from_table"] = a(function() return {} end, false),
  ["dl.search.suggester"] = a(function() return SPACE(), {} end),
  ["dl.search.switch"] = a(function() return "a", {} end, false),
  ["dl.search.trust_region"] = a(function() return SPACE(), {}, {}, 0, {}, {} end, false),
  ["dl.search.uniform"] = a(function() return 0, 1 end),
  ["dl.search.warnings"] = a(function() return SPACE(), "quasirandom" end),
  -- trace
  ["dl.trace.active"] = a(none),
  ["dl.trace.start"] = a(function() return dir .. "/trace.json" end, false),
  ["dl.trace.stop"] = a(none, false),
  -- track
  ["dl.track.append"] = a(function() return dir .. "/t.csv", {a = 1}, {"a"} end),
  ["dl.track.append_run"] = a(function() return {}, {} end, false),
  ["dl.track.csv_field"] = a(function() return "x" end),
  ["dl.track.csv_row"] = a(function() return {1, 2}, 2 end),
  ["dl.track.parse_csv"] = a(function() return "a,b\n1,2\n" end),
  ["dl.track.read"] = a(function() return csv_path end),
  -- util
  ["dl.util.check_integer"] = a(function() return "f", 1, 2, "count", 1, 3 end),
  ["dl.util.check_options"] = a(function() return "f", {}, {a = true}, 2 end),
  ["dl.util.copy"] = a(function() return {1} end),
  ["dl.util.cores"] = a(none),
  ["dl.util.deep_copy"] = a(function() return {1}, nil end),
  ["dl.util.edit_distance"] = a(function() return "ab", "ac" end),
  ["dl.util.getpid"] = a(none),
  ["dl.util.finite"] = a(function() return 1 end),
  ["dl.util.fmt4"] = a(function() return 0.5 end),
  ["dl.util.fmt_metric"] = a(function() return 0.5 end),
  ["dl.util.hostname"] = a(none),
  ["dl.util.integer_problem"] = a(function() return 1, 1, 2 end),
  ["dl.util.choice_problem"] = a(function() return "warp", "log", {"auto", "log"} end),
  ["dl.util.integer_words"] = a(function() return 1, 2 end),
  ["dl.util.list_stray_key"] = a(function() return {1, 2} end),
  ["dl.util.nearest"] = a(function() return "ab", {"ac"} end),
  ["dl.util.option_problem"] = a(function() return "f", {}, {a = true} end),
  ["dl.util.shell_quote"] = a(function() return "x" end),
  ["dl.util.sleep"] = a(function() return 0 end),
  ["dl.util.sorted_keys"] = a(function() return {b = 1, a = 2} end),
  ["dl.util.spec"] = a(function() return {"a"} end),
  ["dl.util.strict"] = a(function() return "f", function() end, 0, {"number?"} end),
  ["dl.util.declared"] = a(function() return print end),
  ["dl.util.strict_method"] = a(function() return "f", function() end, 0, {"number?"} end),
  ["dl.util.strict_table"] = a(function() return "t.", {}, false, {} end),
  ["dl.util.unwrap"] = a(function() return print end),
}
-- every optimizer of the C table (engine/ops/optim.c), so a new row is checked without an edit here
for _, row in ipairs(core.optim_table()) do
  VALID["dl.optim." .. row.name] = a(function() return {params = LIN():parameters(), lr = 0.1} end)
end

-- junk where an argument ends: the arity error of a strict wrapper, or the
-- option check's when the junk lands where an options table may go
local ARITY = "bad argument #%d+ to '[^']*' %(no more than %d+ arguments? expected"
local function refused(msg)
  msg = tostring(msg)
  return msg:find(ARITY) or msg:find("expected an option table", 1, true) or msg:find("options table expected", 1, true)
    or msg:find("unknown option", 1, true)
end

describe("dlua (Lua library) strictness", function()
  local found = walk()
  after_each(function() core.set_grad_enabled(true); dl.memory.limit(nil); dl.fs._fail_writes_from(0) end)

  it("walks every reachable function, each valid or exempt with a reason", function()
    local missing, stale, both = {}, {}, {}
    local walked = 0
    for name in pairs(found) do
      walked = walked + 1
      if VALID[name] and EXEMPT[name] then both[#both + 1] = name end
      if not VALID[name] and not EXEMPT[name] then missing[#missing + 1] = name end
    end
    for name in pairs(VALID) do if not found[name] then stale[#stale + 1] = name end end
    for name, why in pairs(EXEMPT) do
      if not found[name] then stale[#stale + 1] = name end
      assert.is_true(#why > 20, name)
    end
    table.sort(missing)
    table.sort(stale)
    assert.same({}, missing)
    assert.same({}, stale)
    assert.same({}, both)
    assert.is_true(walked > 250, "walked " .. walked)
  end)

  it("accepts each valid call", function()
    local failed = {}
    for name, v in pairs(VALID) do
      if v.run ~= false then
        local ok, err = pcall(found[name], v.args())
        if not ok then failed[#failed + 1] = name .. " -> " .. tostring(err) end
      end
    end
    table.sort(failed)
    assert.same({}, failed)
  end)

  it("refuses a junk extra argument to every function that is not exempt", function()
    local accepted = {}
    for name, v in pairs(VALID) do
      local args = table.pack(v.args())
      args[args.n + 1] = "junk"
      local ok, err = pcall(found[name], table.unpack(args, 1, args.n + 1))
      if ok or not refused(err) then accepted[#accepted + 1] = name .. " -> " .. tostring(err) end
    end
    table.sort(accepted)
    assert.same({}, accepted)
  end)

  it("gives each wrapped function exactly as many arguments as it takes, so the junk is the one too many", function()
    local off = {}
    for name, v in pairs(VALID) do
      local f = found[name]
      if type(f) == "function" then
        assert(util.unwrap(f) ~= f, name .. " is not wrapped by util.strict")
        local max
        for i = 1, math.huge do
          local k, val = debug.getupvalue(f, i)
          if k == nil then break end
          if k == "max" then max = val end
        end
        -- a strict_method wrapper takes self first and does not count it
        local n = select("#", v.args()) - debug.getinfo(f, "u").nparams
        if n ~= max then off[#off + 1] = string.format("%s: %d arguments, takes %s", name, n, tostring(max)) end
      end
    end
    table.sort(off)
    assert.same({}, off)
  end)

  it("names the function and counts the arguments as the caller wrote them", function()
    local ok, err = pcall(dl.nn.Linear.forward, dl.nn.Linear(2, 3), dl.ones(1, 2), "junk")
    assert.is_false(ok)
    assert.matches("bad argument #2 to 'Linear:forward' %(no more than 1 argument", err)
    ok, err = pcall(dl.report, dir, {}, "junk")
    assert.is_false(ok)
    assert.matches("bad argument #3 to 'dl.report' %(no more than 2 arguments expected, got 3%)", err)
    ok, err = pcall(dl.fs.append_line, text_path, "x", false, "junk")
    assert.is_false(ok)
    assert.matches("bad argument #4 to 'fs.append_line' %(no more than 3 arguments expected, got 4%)", err)
  end)

  it("exempts only functions the arity wrapper cannot check: unwrapped, or taking any number of arguments", function()
    for name in pairs(EXEMPT) do
      local f = found[name]
      if type(f) == "function" then
        local u = util.unwrap(f)
        local info = debug.getinfo(u, "u")
        -- a vararg function, or one not wrapped at all (the frame readers, json)
        assert(info.isvararg or u == f or name == "dl.data.Dataset.map", name)
      end
    end
  end)

  it("declares the positional types of every function with parameters (or says why not)", function()
    local missing, stale = {}, {}
    for name, f in pairs(found) do
      if type(f) == "function" and not EXEMPT[name] and not UNTYPED[name] and not untyped_nn(name, f) then
        local d = util.declared(f)
        local u = util.unwrap(f)
        local info = debug.getinfo(u, "u")
        local method = d and d.method or (u ~= f and debug.getinfo(f, "u").nparams == 1)
        local params = info.nparams - (method and 1 or 0)
        if not d and (params > 0 or info.isvararg) then missing[#missing + 1] = name end
      end
    end
    for name, why in pairs(UNTYPED) do
      if not found[name] then stale[#stale + 1] = name end
      assert.is_true(#why > 20, name)
    end
    table.sort(missing)
    table.sort(stale)
    assert.same({}, missing)
    assert.same({}, stale)
  end)

  it("refuses a wrong-typed value at every declared position, naming the function, the position and both types", function()
    local KINDS = {"abc", 2.5, {}, true, function() end}
    local function fits(ty, v)
      for t in ty:gsub("%?$", ""):gmatch("[^|]+") do
        if t == "any" then return true end
        if t == "number" and type(v) == "number" then return true end
        if t == "integer" and math.type(v) == "integer" then return true end
        if t == "callable" and type(v) == "function" then return true end
        if t == type(v) then return true end
      end
      return false
    end
    local function kind(v) return math.type(v) == "float" and "number" or type(v) end
    local accepted, walked = {}, 0
    for name, v in pairs(VALID) do
      local f = found[name]
      local d = type(f) == "function" and util.declared(f)
      if d then
        local args = table.pack(v.args())
        local shift = d.method and 1 or 0
        for i, ty in ipairs(d.types) do
          for _, bad in ipairs(KINDS) do
            if not fits(ty, bad) then
              walked = walked + 1
              local call = {table.unpack(args, 1, args.n)}
              call[i + shift] = bad
              local ok, err = pcall(f, table.unpack(call, 1, math.max(args.n, i + shift)))
              local want = string.format("bad argument #%d to '%s' (%s%s expected, got %s)", i, d.name,
                (ty:gsub("%?$", ""):gsub("|", " or ")), ty:sub(-1) == "?" and " or nil" or "", kind(bad))
              if ok or not tostring(err):find(want, 1, true) then
                accepted[#accepted + 1] = name .. " #" .. i .. " " .. kind(bad) .. " -> " .. tostring(err)
              end
            end
          end
        end
      end
    end
    table.sort(accepted)
    assert.same({}, accepted)
    assert.is_true(walked > 400, "walked " .. walked)
  end)

  it("checks the methods the walk does not reach: Optimizer, Suggester, Space, Param, Halton, Study", function()
    local opt = dl.optim.SGD{params = LIN():parameters(), lr = 0.1}
    assert.error_matches(function() opt:set_lr("x") end,
      "bad argument #1 to 'Optimizer:set_lr' (number expected, got string)", 1, true)
    assert.error_matches(function() opt:set_lr(0.1, "g") end,
      "bad argument #2 to 'Optimizer:set_lr' (integer or nil expected, got string)", 1, true)
    assert.error_matches(function() opt:lr({}) end, "bad argument #1 to 'Optimizer:lr' (integer or nil expected, got table)",
      1, true)
    assert.error_matches(function() opt:load_state_dict("x") end,
      "bad argument #1 to 'Optimizer:load_state_dict' (table expected, got string)", 1, true)
    local sg = dl.search.suggester(SPACE())
    assert.error_matches(function() sg:suggest("2") end, "bad argument #1 to 'Suggester:suggest' (integer or nil expected, got string)",
      1, true)
    assert.error_matches(function() sg:observe("x", 1) end, "bad argument #1 to 'Suggester:observe' (table expected, got string)",
      1, true)
    local space = SPACE()
    assert.error_matches(function() space:point("u") end, "bad argument #1 to 'Space:point' (table expected, got string)",
      1, true)
    assert.error_matches(function() space:encode({0.5, 0.5}, 3) end,
      "bad argument #2 to 'Space:encode' (table or nil expected, got integer)", 1, true)
    assert.error_matches(function() dl.search.uniform(0, 1):map("x") end,
      "bad argument #1 to 'Param:map' (number expected, got string)", 1, true)
    assert.error_matches(function() dl.search.uniform(0, 1):when("x") end,
      "bad argument #1 to 'Param:when' (table expected, got string)", 1, true)
    assert.error_matches(function() dl.search.halton_sequence(2, 0):point("1") end,
      "bad argument #1 to 'Halton:point' (number expected, got string)", 1, true)
    assert.error_matches(function() space:describe(1) end,
      "bad argument #1 to 'Space:describe' (no more than 0 arguments expected, got 1)", 1, true)
    local st = dl.study{name = "strict", goal = "g", experiment = "tests/fixtures/toy_experiment.lua",
      nuisance = {lr = dl.search.uniform(0, 1)}, trials = 2, objective = {metric = "valid/accuracy", mode = "max"}}
    assert.error_matches(function() st:plan("3") end, "bad argument #1 to 'Study:plan' (integer or nil expected, got string)",
      1, true)
    assert.error_matches(function() st:prepare(5) end, "bad argument #1 to 'Study:prepare' (string expected, got integer)",
      1, true)
    assert.error_matches(function() st:trial_hparams("t") end,
      "bad argument #1 to 'Study:trial_hparams' (table expected, got string)", 1, true)
    assert.are.equal(2, #st:plan())
    -- issue 33's case: an unknown option of dl.search.space
    assert.error_matches(function() dl.search.space({lr = dl.search.uniform(0, 1)}, {contxt = {}}) end,
      "dl.search.space: unknown option 'contxt' (valid: context); did you mean 'context'?", 1, true)
  end)
end)
