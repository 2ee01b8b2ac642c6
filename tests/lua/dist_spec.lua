-- dl.dist: the collectives as a world of one (no mpirun), the data-parallel
-- pieces dl.train uses (pipeline sharding, sharded eval batches), and, when
-- dlua is built with MPI and mpirun exists, the scripts in tests/mpi run under
-- `mpirun -np 2`: 2 ranks x 64 = 1 rank x 128 (with and without synced batch
-- norm), rank-0-only files, the init-seed check, exact sharded eval, batch norm
-- across ranks, disjoint shards, resume, the global batch check and a
-- distributed study.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local tmpdir = H.tmpdir
local dist, data, json, fs = dl.dist, dl.data, dl.json, dl.fs

local EXE = H.EXE
local SRC = os.getenv("PWD") or "."

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("a")
  p:close()
  return out, tonumber(out:match("rc=(%d+)%s*$"))
end

describe("dl.dist in one process (no mpirun)", function()
  it("is rank 0 of a world of one", function()
    assert.are.equal(0, dist.rank())
    assert.are.equal(1, dist.world())
    assert.is_true(dist.is_lead())
    assert.is_boolean(dist.available())
  end)

  it("allreduce returns a new tensor with the input's values for every op", function()
    local t = dl.tensor({{1, -2}, {3.5, 4}})
    for _, op in ipairs({"sum", "mean", "max", "min"}) do
      local r = dist.allreduce(t, op)
      assert.are.same(t:totable(), r:totable())
      assert.are.same(t:shape(), r:shape())
      assert.are_not.equal(t, r)
    end
    local strided = dl.arange(1, 7):reshape(2, 3):transpose(1, 2)      -- [3, 2], not contiguous
    assert.are.same(strided:totable(), dist.allreduce(strided):totable())
    assert.are.equal("int64", dist.allreduce(dl.tensor({1, 2}, {dtype = "int64"}), "sum"):dtype())
  end)

  it("names the bad op, the bad argument and an integer mean", function()
    assert.error_matches(function() dist.allreduce(dl.ones(2), "avg") end, "unknown op 'avg' %(sum, mean, max, min%)")
    assert.error_matches(function() dist.allreduce({1, 2}) end, "bad argument #1 to 'dist.allreduce' %(tensor expected, got table%)")
    assert.error_matches(function() dist.allreduce(dl.tensor({1}, {dtype = "int32"}), "mean") end,
      "allreduce \"mean\" needs a float tensor, got int32")
    assert.error_matches(function() dist.allreduce(dl.tensor({1}, {dtype = "uint8"})) end,
      "allreduce of uint8 is not supported")
    assert.error_matches(function() dist.broadcast(dl.ones(2), 1) end, "root 1 is not a rank %(0..0%)")
  end)

  it("allreduce_many keeps each tensor's shape, dtype and values across dtypes and buckets", function()
    local list = {dl.randn(3, 4), dl.tensor({1, 2, 3}, {dtype = "float64"}), dl.randn(5),
                  dl.tensor({7, 8}, {dtype = "int64"}), dl.randn(2, 3):transpose(1, 2)}
    local out = dist.allreduce_many(list, "sum")
    assert.are.equal(#list, #out)
    for i, t in ipairs(list) do
      assert.are.same(t:shape(), out[i]:shape())
      assert.are.equal(t:dtype(), out[i]:dtype())
      assert.are.same(t:totable(), out[i]:totable())
    end
    assert.are.same({}, dist.allreduce_many({}))
  end)

  it("broadcast returns its tensor; barrier, broadcast_object and allgather_object work alone", function()
    local t = dl.tensor({1, 2, 3})
    assert.are.equal(t, dist.broadcast(t, 0))
    assert.are.same({1, 2, 3}, t:totable())
    dist.barrier()
    assert.are.same({a = 1, b = {"x"}}, dist.broadcast_object({a = 1, b = {"x"}}, 0))
    assert.are.same({{k = "v"}}, dist.allgather_object({k = "v"}))
    assert.are.equal("hello", dist.broadcast_string("hello", 0))
  end)

  it("checksum is equal for equal tensors and changes with one bit, a shape or a dtype", function()
    local a = dl.tensor({1, 2, 3, 4})
    local h = dist.checksum({a, dl.ones(2)})
    assert.are.equal(h, dist.checksum({a:clone(), dl.ones(2)}))
    assert.are.equal(16, #h)
    local b = a:clone()
    b[1] = 1.0000001                                       -- the next float32 above 1
    assert.are_not.equal(h, dist.checksum({b, dl.ones(2)}))
    assert.are_not.equal(h, dist.checksum({a:reshape(2, 2), dl.ones(2)}))
    assert.are_not.equal(h, dist.checksum({a:double(), dl.ones(2)}))
    assert.are.equal(dist.checksum({a:reshape(2, 2):transpose(1, 2)}),
      dist.checksum({a:reshape(2, 2):transpose(1, 2):contiguous()}))
  end)

  it("solo runs a function as a world of one and passes errors on", function()
    assert.are.equal(1, dist.solo(function() return dist.world() end))
    assert.error_matches(function() dist.solo(function() error("inner failure", 0) end) end, "inner failure")
    assert.are.equal(1, dist.world())
  end)

  it("shards a pipeline: per-rank batch = global / world, the shard after a common shuffle", function()
    local ds = data.tensors{id = dl.arange(1, 101, 1, {dtype = "int64"})}
    local p = dist.shard_pipeline(ds:shuffle{seed = 1}:map(function(e) return e end):batch(60), 2, 3)
    local ops = {}
    for _, st in ipairs(p.stages) do ops[#ops + 1] = st.op end
    assert.are.same({"shuffle", "shard", "map", "batch"}, ops)
    assert.are.equal(20, p.stages[4].size)
    assert.are.same({op = "shard", rank = 2, world = 3}, p.stages[2])
    assert.are.equal("after-shuffle", p._dist_mode)
    -- the rank's examples are every third of the shuffled order, starting at the third
    local order = {}
    for b in ds:shuffle{seed = 1}:batch(100):iter() do order = b.id:totable() end
    local mine = {}
    for b in p:iter() do for _, v in ipairs(b.id:totable()) do mine[#mine + 1] = v end end
    local expect = {}
    for i = 3, 100, 3 do expect[#expect + 1] = order[i] end
    assert.are.same(expect, mine)
    local f = function() return nil end
    assert.are.equal(f, dist.shard_pipeline(f, 0, 2))      -- a function source is the recipe's business
  end)

  it("names both numbers when the global batch does not divide, and refuses a sharded or unbatched pipeline", function()
    local ds = data.tensors{id = dl.arange(1, 11, 1, {dtype = "int64"})}
    assert.error_matches(function() dist.shard_pipeline(ds:batch(100), 0, 3) end,
      "the global batch size 100 does not divide over 3 ranks")
    assert.error_matches(function() dist.shard_pipeline(ds:shard{rank = 0, world = 2}:batch(4), 0, 2) end,
      "already sharded %(shard{rank = 0, world = 2}%)")
    assert.error_matches(function() dist.shard_pipeline(ds:shuffle{seed = 1}, 0, 2) end, "needs a :batch%(n%) stage")
  end)

  it("eval batches for a shard are that rank's whole batches, with their global numbers", function()
    local x, y = dl.randn(23, 2), dl.ones(23, {dtype = "int32"})
    local fields = {input = "image", target = "label", weight = "weight"}
    local function collect(set)
      local got, sizes = {}, {}
      local it, nb = dl.metrics.batches(set, 5, fields, nil, {rank = 1, world = 2})
      for xb, _, w, bi in it, nb do got[#got + 1] = bi; sizes[#sizes + 1] = w:sum():item() end
      return got, sizes, nb
    end
    for _, set in ipairs({{input = x, target = y}, data.tensors{image = x, label = y},
                          data.tensors{image = x, label = y}:map(function(e) return e end)}) do
      local got, sizes, nb = collect(set)
      assert.are.same({2, 4}, got)                      -- 5 batches of 5 (the last has 3): rank 1 has 2 and 4
      assert.are.same({5, 5}, sizes)
      assert.are.equal(5, nb)
    end
    local it = dl.metrics.batches({input = x:narrow(1, 1, 4), target = y:narrow(1, 1, 4)}, 5, fields, nil,
      {rank = 1, world = 2})
    assert.is_nil(it())                                  -- one batch: rank 1 evaluates none
  end)
end)

---------------------------------------------------------------- mpirun -np 2

local function mpirun_prefix()
  local ver = sh("mpirun --version")
  if not ver:match("rc=0") then return nil end
  local flags = ""
  if ver:match("Open MPI") or ver:match("OpenRTE") then
    flags = "--oversubscribe"
    if sh("id -u"):match("^0") then flags = flags .. " --allow-run-as-root" end
  end
  -- idle ranks yield the core (2 ranks share 2 cores with everything else);
  -- the sanitizer build's leak check ignores Open MPI's own allocations
  local lsan = "suppressions=" .. SRC .. "/tests/mpi/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0"
  local env = string.format("OMPI_MCA_mpi_yield_when_idle=1 LSAN_OPTIONS=%s", lsan)
  return string.format("%s mpirun %s -np 2 %s", env, flags, EXE)
end

local MPI = dist.available() and mpirun_prefix()
if os.getenv("DLUA_REQUIRE_MPI") == "1" and not MPI then
  error("dist_spec: DLUA_REQUIRE_MPI=1 (dlua built with MPI) but mpirun does not run (install openmpi-bin)")
end
local function mpi_it(name, fn)
  if MPI then it(name, fn) else pending(name .. " (needs a dlua built with MPI and mpirun)") end
end

local function run1(args) return sh(string.format("LSAN_OPTIONS=suppressions=%s/tests/mpi/lsan.supp %s %s", SRC, EXE, args)) end
local function run2(args) return sh(MPI .. " " .. args) end

-- the model tensors of a run's latest checkpoint
local function final_model(dir)
  local idx = json.decode(assert(fs.read(dir .. "/checkpoints/index.json")))
  local t = assert(dl.checkpoint.load(dir .. "/checkpoints/" .. idx.latest.path))
  local out = {}
  for k, v in pairs(t) do if k:match("^model/") then out[k] = v end end
  return out, idx
end

local function max_rel(a, b)
  local worst = 0
  for k, t in pairs(a) do
    local u = assert(b[k], "missing " .. k)
    local d = (t:double() - u:double()):abs():max():item()
    local s = math.max(u:double():abs():max():item(), 1e-30)
    if t:dtype() ~= "int64" then worst = math.max(worst, d / s) end
  end
  return worst
end

local function listing(dir)
  local out = {}
  local function walk(d, prefix)
    for _, f in ipairs(fs.list(d)) do
      if fs.is_dir(d .. "/" .. f) then walk(d .. "/" .. f, prefix .. f .. "/") else out[#out + 1] = prefix .. f end
    end
  end
  walk(dir, "")
  table.sort(out)
  return out
end

local function count_lines(path)
  local n = 0
  for _ in (fs.read(path) or ""):gmatch("[^\n]+") do n = n + 1 end
  return n
end

describe("dl.dist under mpirun -np 2", function()
  local train = SRC .. "/tests/mpi/train.lua"

  for _, bn in ipairs({"none", "sync"}) do
    mpi_it("2 ranks x 64 give the parameters of 1 rank x 128 after 20 steps (1e-5 relative), batch norm: " .. bn,
      function()
        local d = tmpdir("equal-" .. bn)
        local out1, rc1 = run1(string.format("%s dir=%s/one/run bn=%s", train, d, bn))
        assert.are.equal(0, rc1, out1)
        local out2, rc2 = run2(string.format("%s dir=%s/two/run bn=%s", train, d, bn))
        assert.are.equal(0, rc2, out2)
        local a = final_model(d .. "/one/run")
        local b = final_model(d .. "/two/run")
        local rel = max_rel(b, a)
        assert.is_true(rel <= 1e-5, string.format("max relative difference %.3g", rel))
        -- both ranks end with bitwise identical parameters (identical steps)
        local sums = {}
        for r, h in out2:gmatch("rank (%d) checksum (%x+)") do sums[tonumber(r)] = h end
        assert.is_truthy(sums[0])
        assert.are.equal(sums[0], sums[1])
        fs.rm_rf(d)
      end)
  end

  mpi_it("only rank 0 writes: the same files as one process, no duplicate lines, nothing at rank 1's path", function()
    local d = tmpdir("files")
    assert.are.equal(0, select(2, run1(string.format("%s dir=%s/one/run every=10", train, d))))
    assert.are.equal(0, select(2, run2(string.format("%s dir=%s/two/run every=10", train, d))))
    assert.are.same(listing(d .. "/one"), listing(d .. "/two"))
    assert.are.equal(count_lines(d .. "/one/run/metrics.jsonl"), count_lines(d .. "/two/run/metrics.jsonl"))
    assert.are.equal(2, count_lines(d .. "/two/studies.csv"))     -- a header and one row, not one per rank
    assert.is_false(fs.exists(d .. "/two/run.rank1"))             -- rank 1 was given its own path: never created
    fs.rm_rf(d)
  end)

  mpi_it("fails on every rank with a clear error when rank 1 initialises from another seed", function()
    local d = tmpdir("seed")
    local out, rc = run2(string.format("%s/tests/mpi/seed_mismatch.lua %s/run", SRC, d))
    assert.are_not.equal(0, rc)
    for r = 0, 1 do
      assert.is_truthy(out:find(string.format("rank %d ok false error dl.train: the initial parameters differ across " ..
        "ranks (parameter checksum: rank 0 has", r), 1, true), out)
    end
    assert.is_truthy(out:find("the init seed is shared", 1, true))
    assert.is_false(fs.exists(d .. "/run"))                        -- refused before anything was written
    fs.rm_rf(d)
  end)

  mpi_it("sharded eval equals one-process eval exactly on sets not divisible by world x batch", function()
    local one, rc1 = run1(SRC .. "/tests/mpi/eval_exact.lua")
    assert.are.equal(0, rc1, one)
    local two, rc2 = run2(SRC .. "/tests/mpi/eval_exact.lua")
    assert.are.equal(0, rc2, two)
    local a = json.decode(one:match("(%b{})"))
    local b = json.decode(two:match("(%b{})"))
    assert.is_truthy(a["dataset/loss"])
    assert.are.equal(5 * 5, (function() local n = 0 for _ in pairs(a) do n = n + 1 end return n end)())
    assert.are.same(a, b)                                          -- 17 significant digits: bit-identical
  end)

  mpi_it("batch norm: synced statistics with the one-process backward; moving averages averaged", function()
    local out, rc = run2(SRC .. "/tests/mpi/batchnorm.lua")
    assert.are.equal(0, rc, out)
    local _, nsync = out:gsub("ok sync", "")
    local _, nlocal = out:gsub("ok local", "")
    assert.are.equal(2, nsync, out)
    assert.are.equal(2, nlocal, out)
  end)

  mpi_it("shards are disjoint and covering, and per step the ranks' batches are the global batch", function()
    local out, rc = run2(SRC .. "/tests/mpi/shard.lua")
    assert.are.equal(0, rc, out)
    local _, n1 = out:gsub("ok after%-shuffle 10 steps", "")
    local _, n2 = out:gsub("ok before%-shuffle disjoint and covering", "")
    assert.are.equal(2, n1, out)
    assert.are.equal(2, n2, out)
  end)

  mpi_it("resumes under 2 ranks from rank 0's checkpoint, bit-identical to an uninterrupted run", function()
    local d = tmpdir("resume")
    assert.are.equal(0, select(2, run2(string.format("%s dir=%s/a steps=20 every=5", train, d))))
    assert.are.equal(0, select(2, run2(string.format("%s dir=%s/b steps=10 every=5", train, d))))
    local out, rc = run2(string.format("%s dir=%s/b steps=20 every=5 resume=1", train, d))
    assert.are.equal(0, rc, out)
    local a, ia = final_model(d .. "/a")
    local b, ib = final_model(d .. "/b")
    assert.are.equal(20, ia.latest.step)
    assert.are.equal(20, ib.latest.step)
    assert.are.equal(0, max_rel(b, a))
    assert.are.same(listing(d .. "/a"), listing(d .. "/b"))
    local meta = select(2, dl.checkpoint.load(d .. "/b/checkpoints/" .. ib.latest.path))
    local st = json.decode(meta.dist)
    assert.are.equal(2, st.world)                                  -- each rank's stream and data position
    assert.are_not.same(st.ranks[1].rng, st.ranks[2].rng)
    fs.rm_rf(d)
  end)

  mpi_it("refuses checkpoint.share, a time budget the ranks cannot agree on (it was dropped for every eval)", function()
    local d = tmpdir("share")
    local out, rc = run2(string.format("%s dir=%s/run share=0.1", train, d))
    assert.are_not.equal(0, rc)
    assert.is_truthy(out:find("dl.train: checkpoint.share is a share of the run's time, which ranks cannot agree " ..
      "on; under mpirun (world 2) checkpoints are written at every eval, or every checkpoint.every steps", 1, true), out)
    out, rc = run1(string.format("%s dir=%s/one share=0.1", train, d))      -- one process: the time policy
    assert.are.equal(0, rc, out)
    fs.rm_rf(d)
  end)

  mpi_it("refuses a global batch that does not divide over the ranks, naming both numbers", function()
    local d = tmpdir("batch")
    local out, rc = run2(string.format("%s dir=%s/run batch=127", train, d))
    assert.are_not.equal(0, rc)
    assert.is_truthy(out:find("the global batch size 127 does not divide over 2 ranks", 1, true), out)
    fs.rm_rf(d)
  end)

  for _, how in ipairs({"study.lua", SRC .. "/recipes/study.lua study.lua"}) do
  mpi_it("a 2-rank distributed study runs each trial exactly once, spread over both ranks (dlua " .. how .. ")", function()
    local d = tmpdir("study")
    assert(os.execute(string.format("cp %s/tests/mpi/study.lua %s/study.lua && " ..
      "cp %s/tests/fixtures/toy_experiment.lua %s/exp.lua", SRC, d, SRC, d)))
    local out, rc = sh(string.format("cd %s && %s %s --out runs --quiet", d, MPI, how))
    assert.are.equal(0, rc, out)
    local sd = d .. "/runs/mpi-spread"
    local finishes, ranks = {}, {}
    for l in (fs.read(sd .. "/journal.jsonl") or ""):gmatch("[^\n]+") do
      local e = json.decode(l)
      if e.event == "finish" then finishes[e.trial] = (finishes[e.trial] or 0) + 1 end
    end
    local n = 0
    for id, c in pairs(finishes) do
      n = n + 1
      assert.are.equal(1, c, id)
      local disp = json.decode(assert(fs.read(sd .. "/" .. id .. "/dispatch.json")))
      ranks[disp.rank] = (ranks[disp.rank] or 0) + 1
      assert.is_truthy(fs.read(sd .. "/" .. id .. "/result.json"))
    end
    assert.are.equal(6, n)
    assert.is_truthy(ranks[0])
    assert.is_truthy(ranks[1])
    assert.are.equal(7, count_lines(sd .. "/trials.csv"))          -- header + 6 trials
    assert.are.equal(2, count_lines(d .. "/runs/studies.csv"))     -- one tracking row
    fs.rm_rf(d)
  end)
  end

  mpi_it("prunes trials running on rank 1: each judges itself in the study's journal and stops", function()
    local d = tmpdir("prune")
    assert(os.execute(string.format("cp %s/tests/mpi/prune_study.lua %s/study.lua && " ..
      "cp %s/tests/fixtures/toy_experiment.lua %s/exp.lua", SRC, d, SRC, d)))
    local out, rc = sh(string.format("cd %s && %s study.lua --out runs --quiet --no-check --threads 1", d, MPI))
    assert.are.equal(0, rc, out)
    local sd = d .. "/runs/mpi-prune"
    local final = {}
    for l in (fs.read(sd .. "/journal.jsonl") or ""):gmatch("[^\n]+") do
      local e = json.decode(l)
      if e.event == "finish" then final[e.trial] = e.status end
    end
    local pruned_on = {}
    for id, st in pairs(final) do
      if st == "pruned" then
        local disp = json.decode(assert(fs.read(sd .. "/" .. id .. "/dispatch.json")))
        local last = 0
        for l in (fs.read(sd .. "/" .. id .. "/metrics.jsonl") or ""):gmatch("[^\n]+") do
          local e = json.decode(l)
          if e and math.type(e.step) == "integer" and e.step > last then last = e.step end
        end
        assert.is_true(last < 40, id .. " on rank " .. disp.rank .. " trained to step " .. last .. " after its pruning")
        pruned_on[disp.rank] = (pruned_on[disp.rank] or 0) + 1
      end
    end
    assert.are.equal("done", final.trial_t001, out)
    assert.is_truthy(pruned_on[1], "no trial was pruned on rank 1: " .. json.encode(final))
    fs.rm_rf(d)
  end)
end)
