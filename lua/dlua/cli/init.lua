--- dlua.cli: the flags every recipe and experiment shares.
--
--   dlua examples/fashion_mnist.lua [--out DIR] [--steps N] [--set key=value]...
--        [--resume] [--seed N] [--threads N] [--trace FILE] [--quiet]
--        [--check-determinism N] [--help]
--
-- `--set` values are typed by the default's type (numbers, integers, booleans,
-- strings); unknown flags, unknown hyperparameters and bad values are errors
-- naming the flag. dlua calls cli.run(obj, script) when a script's main chunk
-- returns a dl.experiment (or a dl.study).
local core = require "dlua.core"

local M = {}

M.FLAGS = {
  {"--out", "DIR", "run directory (default runs/<name>)"},
  {"--steps", "N", "training steps (overrides hp.steps)"},
  {"--set", "KEY=VALUE", "override a hyperparameter (repeatable)"},
  {"--resume", nil, "continue from the latest valid checkpoint in the run directory"},
  {"--seed", "N", "the seed (init_seed = seed, data_seed = seed + 1000 unless set)"},
  {"--threads", "N", "compute threads (default: all cores)"},
  {"--trace", "FILE", "write a Chrome trace-event file of the run"},
  {"--quiet", nil, "no progress output"},
  {"--no-track", nil, "no row in the tracking spreadsheet (study trials: the study writes its own)"},
  {"--check-determinism", "N", "run N steps twice from the same state and compare the parameters"},
  {"--help", nil, "list the hyperparameters and flags"},
}

local function flag_takes_value(name)
  for _, f in ipairs(M.FLAGS) do if f[1] == name then return f[2] ~= nil, true end end
  return false, false
end

local function positive_int(flag, v)
  local n = math.tointeger(tonumber(v))
  if not n or n < 1 then error(string.format("%s: expected a positive integer, got '%s'", flag, tostring(v)), 0) end
  return n
end

--- Converts text to the type of def (the hyperparameter's default).
function M.typed(key, text, def)
  local t = type(def)
  if t == "number" then
    local v = tonumber(text)
    if v == nil then error(string.format("--set %s: expected a number, got '%s'", key, text), 0) end
    if math.type(def) == "integer" then
      local iv = math.tointeger(v)
      if iv == nil then error(string.format("--set %s: expected an integer, got '%s'", key, text), 0) end
      return iv
    end
    return v + 0.0
  elseif t == "boolean" then
    if text == "true" or text == "1" then return true end
    if text == "false" or text == "0" then return false end
    error(string.format("--set %s: expected true or false, got '%s'", key, text), 0)
  end
  return text
end

--- Parses args (a list of strings) against hparams; returns options and overrides.
-- opts.extra lists flag names a recipe accepts on top (e.g. {"--checkpoint"}).
function M.parse(args, hparams, opts)
  opts = opts or {}
  local o = {set = {}, positional = {}, extra = {}}
  local extra = {}
  for _, e in ipairs(opts.extra or {}) do extra[e] = true end
  local i = 1
  while i <= #args do
    local a = args[i]
    local name, inline = a:match("^(%-%-[%w%-]+)=(.*)$")
    name = name or a
    local takes, known = flag_takes_value(name)
    if extra[name] then takes, known = true, true end
    if a:sub(1, 2) ~= "--" then
      o.positional[#o.positional + 1] = a
    elseif not known then
      error(string.format("unknown flag '%s' (see --help)", a), 0)
    else
      local v
      if takes then
        v = inline
        if v == nil then
          i = i + 1
          v = args[i]
          if v == nil then error(string.format("%s: missing value", name), 0) end
        end
      elseif inline then
        error(string.format("%s takes no value", name), 0)
      end
      if extra[name] then o.extra[name:sub(3)] = v
      elseif name == "--out" then o.out = v
      elseif name == "--steps" then o.steps = positive_int(name, v)
      elseif name == "--seed" then
        local n = math.tointeger(tonumber(v))
        if not n or n < 0 then error(string.format("--seed: expected a non-negative integer, got '%s'", v), 0) end
        o.seed = n
      elseif name == "--threads" then o.threads = positive_int(name, v)
      elseif name == "--trace" then o.trace = v
      elseif name == "--check-determinism" then o.check_determinism = positive_int(name, v)
      elseif name == "--resume" then o.resume = true
      elseif name == "--quiet" then o.quiet = true
      elseif name == "--no-track" then o.no_track = true
      elseif name == "--help" then o.help = true
      elseif name == "--set" then
        local key, val = v:match("^([%w_%.]+)=(.*)$")
        if not key then error(string.format("--set: expected key=value, got '%s'", v), 0) end
        if hparams and hparams[key] == nil and key ~= "seed" and key ~= "init_seed" and key ~= "data_seed" then
          local names = {}
          for k in pairs(hparams) do names[#names + 1] = k end
          table.sort(names)
          error(string.format("--set: unknown hyperparameter '%s' (valid: %s)", key, table.concat(names, ", ")), 0)
        end
        local def = 0                           -- (`hparams[key] or 0` would type a false default as a number)
        if hparams and hparams[key] ~= nil then def = hparams[key] end
        o.set[key] = M.typed(key, val, def)
      end
    end
    i = i + 1
  end
  return o
end

function M.help(obj, script)
  local lines = {string.format("%s: %s", script, obj.name or "?")}
  if obj.description then lines[#lines + 1] = obj.description end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "hyperparameters (--set key=value):"
  local keys = {}
  for k in pairs(obj.hparams or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = obj.hparams[k]
    local ty = math.type(v) == "integer" and "integer" or type(v)
    lines[#lines + 1] = string.format("  %-20s %-10s default %s", k, ty, tostring(v))
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "flags:"
  for _, f in ipairs(M.FLAGS) do
    lines[#lines + 1] = string.format("  %-26s %s", f[1] .. (f[2] and " " .. f[2] or ""), f[3])
  end
  return table.concat(lines, "\n")
end

--- The number of online CPUs (default threads, and a study's default parallel jobs).
function M.cores()
  local f = io.open("/sys/devices/system/cpu/online")
  local s = f and f:read("l")
  if f then f:close() end
  local n = 0
  for part in (s or ""):gmatch("[^,]+") do
    local a, b = part:match("^(%d+)%-(%d+)$")
    if a then n = n + tonumber(b) - tonumber(a) + 1 elseif part:match("^%d+$") then n = n + 1 end
  end
  return n > 0 and n or 1
end

-- the exact command that reproduces a run: every hyperparameter that differs from its default
function M.command(script, exp, hp, o)
  local parts = {"dlua", script}
  local keys = {}
  for k in pairs(hp) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local def = exp.hparams[k]
    if k ~= "seed" and k ~= "init_seed" and k ~= "data_seed" and hp[k] ~= def then
      parts[#parts + 1] = string.format("--set %s=%s", k, tostring(hp[k]))
    end
  end
  parts[#parts + 1] = "--seed " .. tostring(hp.seed)
  if o.out then parts[#parts + 1] = "--out " .. o.out end
  return table.concat(parts, " ")
end

--- Compares two state dicts; returns nil when identical, else the first differing name.
local function first_difference(a, b)
  local names = {}
  for k in pairs(a) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    local x, y = a[k], b[k]
    if not y or (x - y):abs():max():item() ~= 0 then
      local d = y and (x:double() - y:double()):abs():max():item() or nil
      return k, d
    end
  end
end

local function check_determinism(exp, o, script)
  local fs = require "dlua.util.fs"
  local results = {}
  for r = 1, 2 do
    local dir = string.format("%s/dlua-determinism-%d-%d", os.getenv("TMPDIR") or "/tmp",
      math.floor(core.clock() * 1000) % 100000000, r)
    local res = exp:run(o.set, {dir = dir, quiet = true, steps = o.check_determinism, tracking = false})
    if res.status ~= "done" then error(string.format("--check-determinism: run %d %s: %s", r, res.status,
      tostring(res.message)), 0) end
    local cfg_model = require("dlua.train.checkpoint").load(res.latest)
    results[r] = cfg_model
    fs.rm_rf(dir)
  end
  local a, b = {}, {}
  for k, t in pairs(results[1]) do if k:match("^model/") then a[k] = t end end
  for k, t in pairs(results[2]) do if k:match("^model/") then b[k] = t end end
  local name, diff = first_difference(a, b)
  if name then
    print(string.format("%s: NOT deterministic: after %d steps parameter %s differs (max abs difference %s)",
      script, o.check_determinism, name:sub(7), tostring(diff)))
    return false
  end
  print(string.format("%s: deterministic: %d steps twice from the same state give identical parameters (%d tensors)",
    script, o.check_determinism, #(function() local l = {} for k in pairs(a) do l[#l + 1] = k end return l end)()))
  return true
end

--- The run directory when --out is not given: runs/<name>, or runs/<name>-2, -3, ...
-- when that holds a run already (a new run never lands on an old one); with --resume,
-- the newest of them.
function M.default_out(name, resume)
  local fs = require "dlua.util.fs"
  local base = "runs/" .. tostring(name):gsub("[^%w%-_.]", "_")
  local last, k = nil, 1
  while true do
    local d = k == 1 and base or string.format("%s-%d", base, k)
    if not fs.exists(d) then return resume and (last or d) or d end
    last, k = d, k + 1
  end
end

local run_checked

--- Runs an experiment (or a study) returned by a script; exits non-zero on failure.
-- Errors are printed as one line ("dlua: message"); DLUA_DEBUG=1 adds the traceback.
function M.run(obj, script)
  local tb
  local ok, res = xpcall(run_checked, function(e)
    tb = debug.traceback(tostring(e), 2)
    return e
  end, obj, script)
  if ok then return res end
  io.stderr:write("dlua: ", tostring(res), "\n")
  if os.getenv("DLUA_DEBUG") then io.stderr:write(tb, "\n") end
  os.exit(1)
end

function run_checked(obj, script)
  local args = {}
  for i = 1, #(arg or {}) do args[i] = arg[i] end
  if obj._dlua_kind == "study" then return require("dlua.dist").run_study(obj, args, script) end  -- trials over ranks
  local o = M.parse(args, obj.hparams)
  if o.help then print(M.help(obj, script)); return end
  if #o.positional > 0 then error(string.format("unexpected argument '%s' (see --help)", o.positional[1]), 0) end
  core.threads(o.threads or M.cores())
  if o.seed then o.set.seed = o.seed end
  obj.path = obj.path or script
  if o.check_determinism then
    if not check_determinism(obj, o, script) then os.exit(1) end
    return
  end
  if not o.out then o.out = M.default_out(obj.name, o.resume) end
  local trace = o.trace and require("dlua.data").trace
  if trace then trace.start(o.trace) end
  local hp = obj:resolve(o.set)
  if o.steps then hp.steps = o.steps end
  local tracking = nil
  if o.no_track then tracking = false end
  local res = obj:run(o.set, {dir = o.out, resume = o.resume, quiet = o.quiet, steps = o.steps,
                              command = M.command(script, obj, hp, o), tracking = tracking})
  if trace then trace.stop() end
  if res.status == "failed" then error(string.format("%s: training failed: %s", script, tostring(res.message)), 0) end
  if res.status == "diverged" then
    io.stderr:write(string.format("%s: diverged: %s\n", script, tostring(res.message)))
    os.exit(3)
  end
  return res
end

return M
