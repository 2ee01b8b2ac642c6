--- api_fuzz.lua -- the Lua API fuzzer: every function reachable from `require "dlua"`,
-- called with hostile arguments, in batches of subprocesses so that a crash is pinned on
-- the call that made it.
--
--   dlua tests/fuzz/api_fuzz.lua [options]          drive: run --calls calls, report findings
--     --calls N      calls in all (default 20000)          --seed S     (default 1)
--     --batch N      calls per subprocess (default 400)    --timeout S  per batch (default 60)
--     --jobs N       batches at once (default 1)           --first I    first call (default 1)
--     --worker-exe P the dlua that runs the batches (default: DLUA_FUZZ_EXE, else this one);
--                    use the sanitizer build (build-san/dlua) to catch memory errors
--     --call-limit S a call running Lua for more CPU seconds than this is a hang (default 5)
--     --scratch D    scratch directory (default: a new one under TMPDIR or /tmp; removed after)
--     --filter PAT   only the targets whose name matches the Lua pattern PAT (focused runs)
--     --selftest     fuzz two synthetic targets instead (one dies on SIGABRT, one spins): the
--                    report must name each of their calls (scripts/fuzz.sh --ci checks it)
--     --list         print the targets, the exclusions and failed factories, then exit
--   dlua tests/fuzz/api_fuzz.lua --only I [--seed S]  replay call I alone, printing it
--
-- Call i goes to target (i - 1) % #targets + 1 (sorted by name: every function gets its
-- share) with arguments drawn from a stream keyed by (seed, i), built fresh for the call, so
-- a call reproduces on its own. A worker logs "CALL i <target>(<args>)" and flushes before
-- each call. A batch whose worker dies (signal), prints a sanitizer report (AddressSanitizer,
-- LeakSanitizer, UndefinedBehaviorSanitizer / "runtime error:") or outlives its timeout is a
-- finding, attributed to the last call it logged; the next batch starts after that call.
-- Lua errors are the expected outcome of most calls and are only counted. Exit status: 0
-- without findings, 1 with findings, 2 on a usage error.
local script = arg and arg[0] or "tests/fuzz/api_fuzz.lua"
local here = script:match("^(.*)/[^/]*$") or "."
if here:sub(1, 1) ~= "/" then here = require("lfs").currentdir() .. "/" .. here end
package.path = here .. "/?.lua;" .. package.path

local function opts_from(argv)
  local o = {calls = 20000, seed = 1, batch = 400, timeout = 60, jobs = 1, first = 1, call_limit = 5}
  local i = 1
  while i <= #argv do
    local k = argv[i]
    local name = k:match("^%-%-([%w-]+)$")
    if not name then io.stderr:write("api_fuzz: unknown argument ", k, "\n"); os.exit(2) end
    if name == "list" or name == "worker" or name == "selftest" then o[name] = true; i = i + 1
    else
      local v = argv[i + 1]
      if v == nil then io.stderr:write("api_fuzz: --", name, " needs a value\n"); os.exit(2) end
      o[name:gsub("-", "_")] = tonumber(v) or v
      i = i + 2
    end
  end
  return o
end

local o = opts_from(arg)

------------------------------------------------------------------------ worker

-- restores what a call may have changed globally (and what keeps a call bounded)
local function restore(dl)
  pcall(dl.set_grad_enabled, true)
  pcall(dl.threads, 1)
  pcall(dl.memory.limit, 1 << 30)
end

-- touches what a call returned: printing is where some bad shapes only show
local function touch(dl, res)
  for j = 1, res.n do
    local v = res[j]
    if dl.is_tensor(v) then pcall(tostring, v); pcall(dl.numel, v) end
  end
end

local function worker()
  local scratch = assert(o.scratch, "worker needs --scratch")
  local log = assert(io.open(o.log or "/dev/null", "w"))    -- beside the scratch dir: opened first
  if o.only then assert(require("lfs").chdir(scratch)) end  -- a replay runs where a worker would
  local V = require "api_values"
  local pid
  if o.selftest then
    local f = assert(io.open("/proc/self/stat"))
    pid = f:read("l"):match("^(%d+)")
    f:close()
  end
  local real = V.sandbox(scratch)
  local dl = require "dlua"
  local targets = V.targets(dl)
  if o.selftest then
    -- the detectors themselves under test: a call that dies on a signal (SIGABRT: not one
    -- the sanitizers catch) and one that spins must each be reported, pinned on their own calls
    targets = {
      {name = "selftest.abort", fn = function() real.execute("kill -ABRT " .. pid); while true do end end},
      {name = "selftest.spin", fn = function() local n = 0; while true do n = n + 1 end end},
    }
  end
  if o.filter then
    local keep = {}
    for _, t in ipairs(targets) do if t.name:find(o.filter) then keep[#keep + 1] = t end end
    targets = keep
    assert(#targets > 0, "no target matches --filter")
  end
  local last = o.only and o.only or o.first + o.count - 1
  local errors = 0
  -- a call that runs Lua for more than --call-limit CPU seconds is a hang: reported at once
  -- (a hang inside C, or in a coroutine, is left to the batch timeout)
  local current, started = 0, 0
  debug.sethook(function()
    if os.clock() - started > o.call_limit then
      log:write(string.format("SLOW %d\n", current))
      log:flush()
      real.exit(3)
    end
  end, "", 1000000)
  for i = o.only or o.first, last do
    local t = targets[(i - 1) % #targets + 1]
    restore(dl)
    current, started = i, os.clock()
    local r = V.rng(o.seed, i)
    local ok, a, desc = pcall(V.args, dl, r, t)
    if not ok then a, desc = {n = 0}, "--[[argument generation failed: " .. tostring(a) .. "]]" end
    log:write(string.format("CALL %d %s(%s)\n", i, t.name, desc))
    log:flush()
    if o.only then io.stdout:write(string.format("call %d: %s(%s)\n", i, t.name, desc)); io.stdout:flush() end
    local res = table.pack(pcall(t.fn, table.unpack(a, 1, a.n)))
    if res[1] then touch(dl, {n = res.n - 1, table.unpack(res, 2, res.n)})
    else errors = errors + 1 end
    if o.only then print(res[1] and "returned" or "raised: " .. tostring(res[2])) end
    a, res = nil, nil
    if i % 25 == 0 then collectgarbage(); collectgarbage() end
  end
  restore(dl)
  collectgarbage(); collectgarbage()
  log:write(string.format("DONE %d lua_errors=%d\n", last, errors))
  log:close()
  real.exit(0, true)
end

if o.worker or o.only then
  if o.only and not o.scratch then
    o.scratch = string.format("%s/dlua-api-fuzz-replay-%d", os.getenv("TMPDIR") or "/tmp", o.only)
    os.execute("mkdir -p '" .. o.scratch .. "'")
    io.stderr:write("api_fuzz: --only without --scratch: files go to ", o.scratch, "\n")
  end
  worker()
  return
end

------------------------------------------------------------------------ driver

local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

if o.list then
  local V = require "api_values"
  local dl = require "dlua"
  local targets, failed = V.targets(dl)
  for _, t in ipairs(targets) do print(t.name) end
  print(string.format("-- %d targets", #targets))
  local ex = {}
  for k, why in pairs(V.EXCLUDED) do ex[#ex + 1] = string.format("-- excluded %s: %s", k, why) end
  table.sort(ex)
  print(table.concat(ex, "\n"))
  for _, f in ipairs(failed) do print("-- factory failed: " .. f) end
  return
end

local exe = o.worker_exe or os.getenv("DLUA_FUZZ_EXE")
if not exe then
  local i = -1
  while arg[i - 1] do i = i - 1 end
  exe = arg[i]
end
local own_scratch = not o.scratch
local scratch = o.scratch or string.format("%s/dlua-api-fuzz-%d-%d", os.getenv("TMPDIR") or "/tmp", o.seed, os.time())
assert(os.execute("mkdir -p " .. sh_quote(scratch)))
local abs = io.popen("cd " .. sh_quote(scratch) .. " && pwd"):read("l")
scratch = abs
local cwd = io.popen("pwd"):read("l")
local script_abs = script:sub(1, 1) == "/" and script or cwd .. "/" .. script
if exe:find("/") and exe:sub(1, 1) ~= "/" then exe = cwd .. "/" .. exe end

local filter_arg = (o.filter and " --filter " .. sh_quote(o.filter) or "") .. (o.selftest and " --selftest" or "")
local SAN = {"AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error:", "ThreadSanitizer"}

-- runs batches [first, first + count) ... at once; returns per batch {log, err, rc}
local function run_batches(specs)
  local cmds = {}
  for k, b in ipairs(specs) do
    local dir = string.format("%s/b%d", scratch, b.first)
    b.dir, b.log, b.err, b.rcfile = dir, dir .. ".log", dir .. ".err", dir .. ".rc"
    cmds[k] = string.format("( mkdir -p %s && cd %s && TMPDIR=%s HOME=%s timeout -s KILL %d %s %s --worker --seed %d " ..
      "--first %d --count %d --log %s --scratch %s%s >/dev/null 2>%s; echo $? > %s ) &",
      sh_quote(dir), sh_quote(dir), sh_quote(dir), sh_quote(dir), o.timeout, sh_quote(exe), sh_quote(script_abs),
      o.seed, b.first, b.count, sh_quote(b.log), sh_quote(dir), filter_arg, sh_quote(b.err), sh_quote(b.rcfile))
  end
  os.execute(table.concat(cmds, " ") .. " wait")
  for _, b in ipairs(specs) do
    b.rc = tonumber((slurp(b.rcfile):match("%d+"))) or -1
    b.logtext, b.errtext = slurp(b.log), slurp(b.err)
    os.execute("rm -rf " .. sh_quote(b.dir) .. " " .. sh_quote(b.rcfile))
  end
end

local function report_excerpt(err)
  local lines = {}
  for line in err:gmatch("[^\n]+") do
    if line:find("ERROR:") or line:find("SUMMARY:") or line:find("runtime error:") or line:find("^%s+#[0-3] ") then
      lines[#lines + 1] = "    " .. line
    end
    if #lines >= 8 then break end
  end
  if #lines == 0 then
    local tail = err:sub(-600)
    if tail ~= "" then lines[1] = "    " .. tail:gsub("\n", "\n    ") end
  end
  return table.concat(lines, "\n")
end

-- one lane: the calls first..last, a batch at a time; returns calls made, Lua errors, findings
local function run_lane(first, last, tag)
  local start = os.time()
  local findings, calls, lua_errors, reported = {}, 0, 0, 0
  local queue = {{first = first, last = last}}       -- call ranges still to run, in order
  while #queue > 0 do
    local q = queue[1]
    local b = {first = q.first, count = math.min(o.batch, q.last - q.first + 1)}
    q.first = q.first + b.count
    if q.first > q.last then table.remove(queue, 1) end
    run_batches({b})
    local done = b.logtext:match("DONE %d+ lua_errors=(%d+)")
    local san = false
    for _, s in ipairs(SAN) do if b.errtext:find(s, 1, true) then san = s end end
    local last_logged, last_line
    for n, line in b.logtext:gmatch("CALL (%d+) ([^\n]*)") do last_logged, last_line = tonumber(n), line end
    local last_of_batch = b.first + b.count - 1
    if done and b.rc == 0 and not san then
      calls = calls + b.count
      lua_errors = lua_errors + tonumber(done)
    else
      local kind = b.rc == 137 and "hang (batch killed after " .. o.timeout .. " s)"
        or b.logtext:find("SLOW %d+") and string.format("hang (the call ran Lua for over %g s of CPU)", o.call_limit)
        or san and "sanitizer report (" .. san .. ")" or string.format("crash (exit status %d)", b.rc)
      if done then
        -- every call returned: the report came at exit (a leak), so it names the batch
        calls = calls + b.count
        findings[#findings + 1] = {kind = kind, excerpt = report_excerpt(b.errtext),
          call = string.format("one of calls %d..%d (reported at exit)", b.first, last_of_batch)}
      elseif not last_logged then
        io.stderr:write(string.format("api_fuzz: the worker for calls %d.. did not start (exit %d):\n%s\n", b.first,
          b.rc, b.errtext:sub(1, 2000)))
        os.exit(2)
      else
        calls = calls + (last_logged - b.first + 1)
        findings[#findings + 1] = {kind = kind, call = last_line, id = last_logged, excerpt = report_excerpt(b.errtext)}
        -- the calls after the culprit still run, next
        if last_logged < last_of_batch then table.insert(queue, 1, {first = last_logged + 1, last = last_of_batch}) end
      end
    end
    if calls // 2500 ~= reported // 2500 then
      io.stderr:write(string.format("api_fuzz%s: %d of %d calls, %d findings, %d s\n", tag, calls, last - first + 1,
        #findings, os.time() - start))
    end
    reported = calls
  end
  return calls, lua_errors, findings
end

local start = os.time()
local last_call = o.first + o.calls - 1
local calls, lua_errors, findings = 0, 0, {}
if o.lane_out then
  -- a lane of a parallel run: results into a file the parent reads back
  calls, lua_errors, findings = run_lane(o.first, last_call, " lane " .. o.first)
  local out = {string.format("return {calls = %d, errors = %d, findings = {", calls, lua_errors)}
  for _, f in ipairs(findings) do
    out[#out + 1] = string.format("{kind = %q, call = %q, id = %s, excerpt = %q},", f.kind, f.call, tostring(f.id),
      f.excerpt)
  end
  out[#out + 1] = "}}\n"
  local fh = assert(io.open(o.lane_out, "w"))
  fh:write(table.concat(out, "\n"))
  fh:close()
  os.exit(0)
elseif o.jobs <= 1 then
  calls, lua_errors, findings = run_lane(o.first, last_call, "")
else
  -- --jobs lanes: contiguous shares of the calls, each its own driver process, all at once
  local cmds, lanes = {}, {}
  local per = (o.calls + o.jobs - 1) // o.jobs
  for k = 1, o.jobs do
    local a = o.first + (k - 1) * per
    local n = math.min(per, last_call - a + 1)
    if n > 0 then
      local out = string.format("%s/lane%d.lua", scratch, k)
      lanes[#lanes + 1] = out
      cmds[#cmds + 1] = string.format("( %s %s --first %d --calls %d --seed %d --batch %d --timeout %d --call-limit %g " ..
        "--worker-exe %s --scratch %s --lane-out %s%s ) &", sh_quote(exe), sh_quote(script_abs), a, n, o.seed, o.batch,
        o.timeout, o.call_limit, sh_quote(exe), sh_quote(scratch .. "/lane" .. k), sh_quote(out), filter_arg)
    end
  end
  os.execute(table.concat(cmds, " ") .. " wait")
  for _, out in ipairs(lanes) do
    local ok, r = pcall(dofile, out)
    if not ok or type(r) ~= "table" then
      io.stderr:write("api_fuzz: a lane did not report (" .. out .. "): " .. tostring(r) .. "\n")
      os.exit(2)
    end
    calls, lua_errors = calls + r.calls, lua_errors + r.errors
    for _, f in ipairs(r.findings) do findings[#findings + 1] = f end
  end
end

print(string.format("api_fuzz: seed %d, calls %d..%d: %d calls made (%d raised a Lua error, expected), %d findings, %d s",
  o.seed, o.first, last_call, calls, lua_errors, #findings, os.time() - start))
-- a summary first: findings per target and kind (the same bug is usually met many times)
local by, keys = {}, {}
for _, f in ipairs(findings) do
  local key = string.format("%s: %s", f.call:match("^([^(]+)%(") or f.call, f.kind:match("^[%a ]+"):gsub(" $", ""))
  if not by[key] then by[key] = 0; keys[#keys + 1] = key end
  by[key] = by[key] + 1
end
table.sort(keys)
for _, key in ipairs(keys) do print(string.format("  %4d x %s", by[key], key)) end
for k, f in ipairs(findings) do
  print(string.format("finding %d: %s\n  call: %s", k, f.kind, f.call))
  if f.id then
    print(string.format("  replay: %s %s --only %d --seed %d%s", exe, script, f.id, o.seed, filter_arg))
  end
  if f.excerpt ~= "" then print(f.excerpt) end
end
if own_scratch then os.execute("rm -rf " .. sh_quote(scratch)) end
os.exit(#findings == 0 and 0 or 1)
