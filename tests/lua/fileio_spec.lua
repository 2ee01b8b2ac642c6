-- dl.fs over the file I/O module (engine/io/fileio.c): atomic replacement and
-- appends that raise naming the file, the write-failure hook, paths read from
-- files kept inside their directory (fs.inside), and the checkpoint ledger and
-- study journal refusing entries that point elsewhere or are corrupt.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")
local fs, json, nn, optim, data = dl.fs, dl.json, dl.nn, dl.optim, dl.data
local lfs = require "lfs"

local function listdir(d)
  local out = fs.list(d)
  table.sort(out)
  return out
end

describe("dl.fs writes", function()
  local d
  before_each(function() d = H.tmpdir("fileio") end)
  after_each(function()
    fs._fail_writes_from(0)
    fs.rm_rf(d)
  end)

  it("raises on a full disk, naming the file (the write-failure hook)", function()
    fs._fail_writes_from(1)
    local ok, msg = pcall(fs.append_line, d .. "/m.jsonl", "x")
    assert.is_false(ok)
    assert.are.equal("cannot append to '" .. d .. "/m.jsonl': No space left on device", msg)
  end)

  -- only regular files are written or read as data: `--trace /dev/null` as root used to
  -- replace the device node with a regular file, and a FIFO blocked the open forever
  it("never replaces, appends to or reads a device, FIFO or directory, naming it", function()
    local fifo, dev = d .. "/fifo", d .. "/null"
    assert.is_true(os.execute("mkfifo " .. H.shquote(fifo)))
    local root = os.execute("mknod " .. H.shquote(dev) .. " c 1 3 2>/dev/null")
    for _, p in ipairs(root and {fifo, dev, d} or {fifo, d}) do
      local ok, msg = pcall(fs.write_atomic, p, "x")
      assert.is_false(ok)
      assert.are.equal("cannot write '" .. p .. "': not a regular file (a device, FIFO, socket or directory is " ..
        "never replaced)", msg)
      ok, msg = pcall(fs.append_line, p, "x")
      assert.is_false(ok)
      assert.are.equal("cannot append to '" .. p .. "': not a regular file (a device, FIFO, socket or directory)", msg)
      ok, msg = pcall(fs.read, p)
      assert.is_false(ok)
      assert.matches("cannot read '" .. p .. "': not a regular file", msg, 1, true)
    end
    assert.are.equal("named pipe", require("lfs").attributes(fifo, "mode"))
    if root then assert.are.equal("char device", require("lfs").attributes(dev, "mode")) end
    -- CI runs as root: there the device case must have run
    if os.getenv("DLUA_REQUIRE_INSTALL") == "1" then assert.is_truthy(root, "mknod failed: not root?") end
  end)

  it("appends one line per call and replaces files atomically", function()
    local p = d .. "/log.jsonl"
    fs.append_line(p, "a")
    fs.append_line(p, '{"b": 2}', true)
    assert.are.equal('a\n{"b": 2}\n', H.slurp(p))
    local q = d .. "/r.json"
    fs.write_atomic(q, "one\n")
    fs.write_atomic(q, "two\n")
    assert.are.equal("two\n", H.slurp(q))
    assert.are.same({"log.jsonl", "r.json"}, listdir(d))
    fs.fsync(q)
    fs.fsync(d)
  end)

  it("names the file and the stage when a replacement fails, and leaves the old file and no temporary", function()
    local q = d .. "/r.json"
    fs.write_atomic(q, "old\n")
    assert.has_error(function() fs.write_atomic(d .. "/no/r.json", "x") end,
      "cannot write '" .. d .. "/no/r.json': No such file or directory (creating a temporary file next to it)")
    fs._fail_writes_from(1)
    assert.has_error(function() fs.write_atomic(q, "new\n") end,
      "cannot write '" .. q .. "': No space left on device (writing the temporary file)")
    assert.has_error(function() fs.append_line(d .. "/m.jsonl", "x") end,
      "cannot append to '" .. d .. "/m.jsonl': No space left on device")
    assert.are.equal(2, fs._write_count())                -- a full disk stays full
    fs._fail_writes_from(0)
    assert.are.equal("old\n", H.slurp(q))
    assert.are.same({"m.jsonl", "r.json"}, listdir(d))    -- the append's open created the file, empty
    assert.are.equal("", H.slurp(d .. "/m.jsonl"))
    assert.has_error(function() fs.fsync(d .. "/nope") end, "cannot sync '" .. d .. "/nope': No such file or directory")
  end)

  it("rejects bad arguments", function()
    assert.error_matches(function() fs.write_atomic(d .. "/x", "a", "extra") end, "bad argument #3 to 'write_atomic' %(no more than 2 arguments expected, got 3%)")
    assert.error_matches(function() fs.append_line(d .. "/x", "a", "yes") end, "bad argument #3 to 'fs.append_line' %(boolean or nil expected, got string%)")
    assert.error_matches(function() fs.append_line(d .. "/x", "a", true, 1) end, "bad argument #4 to 'fs.append_line' %(no more than 3 arguments expected, got 4%)")
    assert.error_matches(function() fs.append_line(d .. "/x", 5) end, "bad argument #2 to 'fs.append_line' %(string expected, got integer%)")
    assert.error_matches(function() fs._fail_writes_from(-1) end, "bad argument #1 .*expected a write number >= 0")
  end)
end)

describe("dl.fs.inside", function()
  it("keeps relative paths inside their directory and says why one is refused", function()
    local d = H.tmpdir("inside")
    assert.are.equal(d .. "/ckpt-1.safetensors", fs.inside(d, "ckpt-1.safetensors"))
    assert.are.equal(d .. "/a/b", fs.inside(d, "a/b"))
    assert.are.same({nil, "has a '..' component"}, {fs.inside(d, "../../victim.txt")})
    assert.are.same({nil, "has a '..' component"}, {fs.inside(d, "a/../../b")})
    assert.are.same({nil, "is absolute"}, {fs.inside(d, "/etc/passwd")})
    assert.are.same({nil, "is empty"}, {fs.inside(d, "")})
    assert.are.same({nil, "contains a NUL byte"}, {fs.inside(d, "a\0b")})
    assert.are.same({nil, "is a number, not a relative path"}, {fs.inside(d, 5)})
    local elsewhere = H.tmpdir("inside-target")           -- never link to a shared directory: see rm_rf below
    H.spit(elsewhere .. "/keep.txt", "kept\n")
    assert(lfs.link(elsewhere, d .. "/out", true))
    assert.are.same({nil, "passes through the symbolic link " .. d .. "/out"}, {fs.inside(d, "out/x")})
    fs.rm_rf(d)                                           -- removes the link, not what it points to
    assert.is_false(fs.exists(d))
    assert.are.equal("kept\n", H.slurp(elsewhere .. "/keep.txt"))
    fs.rm_rf(elsewhere)
    d = H.tmpdir("inside")
    assert.has_error(function() fs.checked_path(d, "../x", "f.json", "entries[3].path") end,
      "f.json: entries[3].path '../x' has a '..' component (paths in this file must stay inside " .. d .. ")")
    fs.rm_rf(d)
  end)
end)

-- a small run for the ledger tests
local function config(dir, over)
  dl.seed(1)
  local x = dl.randn(60, 4)
  local y = x:matmul(dl.randn(4, 3)):argmax(2)
  local ds = data.tensors{image = x, label = y}
  local tr, va = ds:split{40, 20, seed = 0}
  dl.seed(2)
  local model = nn.Sequential{nn.Linear(4, 3)}
  local c = {model = model, loss = nn.CrossEntropy(), optimizer = optim.SGD{params = model:parameters(), lr = 0.1},
    data = tr:shuffle{seed = 3}:batch(8), steps = 4, dir = dir, quiet = true, tracking = false,
    eval = {every = 2, sets = {valid = va}}, checkpoint = {every = 1, keep_latest = 1}}
  for k, v in pairs(over or {}) do c[k] = v end
  return c
end

describe("the checkpoint ledger (checkpoints/index.json)", function()
  local root, run
  before_each(function()
    root = H.tmpdir("ledger")
    run = root .. "/run"
    assert.are.equal("done", dl.train(config(run)).status)
  end)
  after_each(function() fs.rm_rf(root) end)

  local function edit_ledger(fn)
    local p = run .. "/checkpoints/index.json"
    local led = json.decode(H.slurp(p))
    fn(led)
    H.spit(p, json.encode(led))
    return p
  end

  it("refuses an entry pointing outside the checkpoint directory and deletes nothing there", function()
    H.spit(root .. "/victim.txt", "precious\n")
    local p = edit_ledger(function(led)
      table.insert(led.checkpoints, 1, {step = 1, path = "../../victim.txt"})
    end)
    assert.has_error(function() dl.train(config(run, {resume = true, steps = 8})) end,
      "dl.train: corrupt checkpoint ledger " .. p .. ": checkpoints[1].path '../../victim.txt' has a '..' " ..
      "component (it must stay inside " .. run .. "/checkpoints)")
    assert.are.equal("precious\n", H.slurp(root .. "/victim.txt"))
    edit_ledger(function(led) led.checkpoints[1].path = root .. "/victim.txt" end)
    assert.error_matches(function() dl.train(config(run, {resume = true, steps = 8})) end,
      "checkpoints%[1%]%.path '.*/victim%.txt' is absolute")
    assert.are.equal("precious\n", H.slurp(root .. "/victim.txt"))
  end)

  it("reports a corrupt ledger naming the file, instead of dropping it", function()
    local p = edit_ledger(function(led) led.checkpoints[1].step = "4" end)
    assert.has_error(function() dl.train(config(run, {resume = true, steps = 8})) end,
      "dl.train: corrupt checkpoint ledger " .. p .. ': checkpoints[1].step is "4", expected an integer')
    edit_ledger(function(led) led.checkpoints[1].step = 4; led.evals[2] = "x" end)
    assert.has_error(function() dl.train(config(run, {resume = true, steps = 8})) end,
      "dl.train: corrupt checkpoint ledger " .. p .. ": evals[2] is a string, expected an object")
    edit_ledger(function(led) led.evals[2] = {step = 4}; led.best = {step = 4, path = "../x"} end)
    assert.has_error(function() dl.train(config(run, {resume = true, steps = 8})) end,
      "dl.train: corrupt checkpoint ledger " .. p .. ": best.path '../x' has a '..' component (it must stay inside " ..
      run .. "/checkpoints)")
    H.spit(p, '{"evals": [')
    assert.error_matches(function() dl.train(config(run, {resume = true, steps = 8})) end,
      "dl%.train: corrupt checkpoint ledger " .. p:gsub("%p", "%%%0") .. ": json: ")
  end)

  it("resumes from the newest checkpoint the ledger names, not from one it does not", function()
    -- a checkpoint file for step 6 that no ledger names (written, then the ledger write failed)
    local ck = dl.checkpoint
    local tensors, meta = assert(ck.load(run .. "/checkpoints/ckpt-000000004.safetensors"))
    meta.step = "6"
    assert(ck.save(run .. "/checkpoints/ckpt-000000006.safetensors", tensors, meta))
    local r = dl.train(config(run, {resume = true, steps = 6}))
    assert.are.equal("done", r.status)
    local steps = {}
    for line in H.slurp(run .. "/metrics.jsonl"):gmatch("[^\n]+") do
      local e = json.decode(line)
      if e.split == "train" then steps[#steps + 1] = e.step end
    end
    assert.are.same({1, 2, 3, 4, 5, 6}, steps)          -- steps 5 and 6 were trained, not skipped
  end)
end)

describe("the study journal", function()
  it("refuses a trial id that leaves the study directory, naming the file and line", function()
    local d = H.tmpdir("journal")
    H.spit(d .. "/exp.lua", 'local dl = require "dlua"\n' ..
      'return dl.experiment{name = "e", hparams = {lr = 0.1}, build = function(hp) return {} end}\n')
    local st = dl.study{name = "j", experiment = d .. "/exp.lua", nuisance = {lr = dl.search.log_uniform(0.01, 1)},
      trials = 2, objective = {metric = "valid/loss", mode = "min"}}
    st:prepare(d)
    local p = d .. "/journal.jsonl"
    fs.append_line(p, '{"event": "claim", "trial": "g1-t001"}')
    fs.append_line(p, '{"event": "finish", "trial": "../../etc"}')
    assert.has_error(function() dl.study_results(d) end,
      p .. ": line 2: trial '../../etc' has a '..' component (paths in this file must stay inside " .. d .. ")")
    fs.rm_rf(d)
  end)
end)
