--- dlua.train.flags: the command-line flags every experiment and recipe shares
-- (parsed here, run by dlua.cli):
--
--   dlua examples/fashion_mnist.lua [--out DIR] [--steps N] [--set key=value]...
--        [--resume [--override]] [--seed N] [--threads N] [--trace FILE] [--quiet] [--objective METRIC:MODE]
--        [--check-determinism N] [--help]
--
-- `--set` values are typed by the default's type (numbers, integers, booleans,
-- strings); unknown flags, unknown hyperparameters and bad values are errors
-- naming the flag, and so is a flag given twice (a repeatable one: --set of the same
-- key). An experiment takes all of M.FLAGS; a recipe or command declares the ones it
-- applies (parse's opts.shared) and refuses the others, naming itself and its flags.
-- It parses and formats only: it runs nothing and reads no file but the run
-- directories default_out looks at.
local util = require "dlua.util"
local fs = require "dlua.util.fs"
local proc = require "dlua.util.proc"

local M = {}

-- A flag table is a declaration, one row a flag ({flag, metavar, help, int/many}) read by
-- train/flags.lua's one parser; the command-line tables look alike by design.
M.FLAGS = {
  {"--out", "DIR", "run directory (default runs/<name>)"},
  {"--steps", "N", "training steps (overrides hp.steps)", int = 1},
  {"--set", "KEY=VALUE", "override a hyperparameter (repeatable)", many = true},
  {"--resume", nil, "continue from the latest valid checkpoint in the run directory"},
  {"--override", nil, "with --resume: continue with hyperparameters that differ from the run's record " ..
    "(hparams_history.json keeps what each step ran with)"},
  {"--seed", "N", "the seed (init_seed = seed, data_seed = seed + 1000 unless set)", int = 0},
  {"--threads", "N", "compute threads (default: all cores)", int = 1},
  {"--trace", "FILE", "write a Chrome trace-event file of the run"},
  {"--quiet", nil, "no progress output"},
  {"--objective", "METRIC[:MODE]", "the metric that ranks the checkpoints (a study passes its objective)"},
  {"--no-track", nil, "no row in the tracking spreadsheet (study trials: the study writes its own)"},
  {"--check-determinism", "N", "run N steps twice from the same state and compare the parameters", int = 1},
  {"--prune", "FILE", "judge a study's pruning rule at each eval (FILE: written by the study's agent)"},
  {"--help", nil, "list the hyperparameters and flags"},
}

local function flag_entry(list, name)
  for _, f in ipairs(list) do if f[1] == name then return f end end
end

local function flag_takes_value(name)
  local f = flag_entry(M.FLAGS, name)
  return f ~= nil and f[2] ~= nil, f ~= nil
end

local function flag_names(list)
  local names = {}
  for i, f in ipairs(list) do names[i] = f[1] end
  return names
end

--- parse_flags(args, list [, usage [, command]]) -> o: the one command-line parser
-- (experiments, studies, agents, recipes). list holds {"--name", METAVAR or nil, help
-- [, int = min] [, many = true]}: a flag with a METAVAR takes a value (`--name v` or
-- `--name=v`; a value is never the next flag), one without is a switch (true). int = min
-- reads an integer >= min (int = true: any integer); many collects every value in a list
-- (a repeatable flag); any other flag given twice is an error naming both values
-- ("--steps given twice (3 and 5)"). o.key (name without "--", "-" as "_") holds each
-- flag given, o.positional the other arguments and o.given the flags in order as {name,
-- args = the strings they took}. An unknown flag is an error naming the nearest one:
--   unknown flag '--stpes' (see --help); did you mean '--steps'?
-- and with command (e.g. "dlua report"), the command and all its flags:
--   unknown flag '--trace' for dlua report (valid: --aggregate, --help, ...)
function M.parse_flags(args, list, usage, command)
  local o, raw = {positional = {}, given = {}}, {}
  local i = 1
  while i <= #args do
    local a = args[i]
    local name, inline = a:match("^(%-%-[%w%-]+)=(.*)$")
    name = name or a
    if a:sub(1, 2) ~= "--" then
      o.positional[#o.positional + 1] = a
    else
      local f = flag_entry(list, name)
      if not f then
        local names = flag_names(list)
        local near = util.nearest(name, names)
        near = near and ("; did you mean '" .. near .. "'?") or ""
        if command then
          table.sort(names)
          error(string.format("unknown flag '%s' for %s (valid: %s)%s", a, command, table.concat(names, ", "), near), 0)
        end
        error(string.format("unknown flag '%s' (%s)%s", a, usage or "see --help", near), 0)
      end
      local key, v, took = name:sub(3):gsub("%-", "_"), true, {a}
      if f[2] then
        v = inline
        if v == nil then
          i = i + 1
          v = args[i]
          if v == nil then error(string.format("%s: missing value", name), 0) end
          if v:sub(1, 2) == "--" then           -- `--out --no-track`: a value never is the next flag
            error(string.format("%s: missing value (the next argument '%s' is a flag; write %s=%s if it is meant " ..
              "as the value)", name, v, name, v), 0)
          end
          took[2] = v
        end
        if f.int then
          local n, min = math.tointeger(tonumber(v)), f.int ~= true and f.int or nil
          if not n or (min and n < min) then
            error(string.format("%s: expected %s, got '%s'", name, util.integer_words(min), v), 0)
          end
          v = n
        end
      elseif inline then
        error(string.format("%s takes no value", name), 0)
      end
      if f.many then
        o[key] = o[key] or {}
        table.insert(o[key], v)
      elseif o[key] ~= nil then             -- never "the last one wins"
        error(f[2] and string.format("%s given twice (%s and %s)", name, raw[key], took[2] or inline)
          or string.format("%s given twice", name), 0)
      else
        o[key], raw[key] = v, took[2] or inline
      end
      o.given[#o.given + 1] = {name, args = took}
    end
    i = i + 1
  end
  return o
end

--- flags_help(list [, width]) -> the lines describing list's flags, one a line
function M.flags_help(list, width)
  local lines = {}
  for _, f in ipairs(list) do
    lines[#lines + 1] = string.format("  %-" .. (width or 18) .. "s %s", f[1] .. (f[2] and " " .. f[2] or ""), f[3])
  end
  return table.concat(lines, "\n")
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

--- flag_list([extra [, switches [, shared]]]) -> the flags of M.FLAGS named in shared
-- (those the command applies; nil: all of them, as an experiment does; --help always),
-- the names in extra (flags a recipe accepts on top, each taking a value) and in
-- switches (on top, without a value), as parse_flags takes them.
function M.flag_list(extra, switches, shared)
  local list, uses = {}, nil
  if shared then
    uses = {["--help"] = true}
    for _, n in ipairs(shared) do
      if not flag_entry(M.FLAGS, n) then error("flag_list: '" .. tostring(n) .. "' is not a shared flag", 2) end
      uses[n] = true
    end
  end
  for _, f in ipairs(M.FLAGS) do if not uses or uses[f[1]] then list[#list + 1] = f end end
  for _, e in ipairs(extra or {}) do list[#list + 1] = {e, "VALUE", ""} end
  for _, e in ipairs(switches or {}) do list[#list + 1] = {e, nil, ""} end
  return list
end

--- Parses args (a list of strings) against hparams; returns options and overrides.
-- opts.extra lists flag names a recipe accepts on top (e.g. {"--checkpoint"}), each
-- taking a value, found in o.extra (without the "--"); opts.switches the same for
-- flags without a value (e.g. {"--static"}: o.extra.static is true when given). A
-- mistyped one gets the same did-you-mean as the built-in flags. opts.shared lists
-- the flags of M.FLAGS the command applies (nil: all, an experiment); the others are
-- errors naming opts.command ("dlua report") and its valid flags. --set of one key
-- twice, and --seed with --set seed=, are errors naming both values.
function M.parse(args, hparams, opts)
  opts = opts or {}
  local o = M.parse_flags(args, M.flag_list(opts.extra, opts.switches, opts.shared), nil, opts.command)
  o.extra = {}
  for _, e in ipairs(opts.switches or {}) do
    local key = e:sub(3):gsub("%-", "_")
    o.extra[e:sub(3)], o[key] = o[key], nil
  end
  for _, e in ipairs(opts.extra or {}) do
    local key = e:sub(3):gsub("%-", "_")
    o.extra[e:sub(3)], o[key] = o[key], nil
  end
  if o.objective ~= nil then               -- METRIC or METRIC:max / METRIC:min
    local v = o.objective
    local metric, mode = v:match("^([^:]+):?(%a*)$")
    if not metric or (mode ~= "" and mode ~= "max" and mode ~= "min") then
      error(string.format("--objective: expected METRIC or METRIC:max or METRIC:min, got '%s'", v), 0)
    end
    o.objective = {metric = metric, mode = mode ~= "" and mode or nil}
  end
  local sets, given = o.set or {}, {}
  o.set = {}
  for _, v in ipairs(sets) do
    local key, val = v:match("^([%w_%.]+)=(.*)$")
    if not key then error(string.format("--set: expected key=value, got '%s'", v), 0) end
    if given[key] then error(string.format("--set %s given twice (%s and %s)", key, given[key], val), 0) end
    if key == "seed" and o.seed then
      error(string.format("--seed %d and --set seed=%s both give the seed: give one", o.seed, val), 0)
    end
    given[key] = val
    if hparams and hparams[key] == nil and key ~= "seed" and key ~= "init_seed" and key ~= "data_seed" then
      local names = util.sorted_keys(hparams)
      local near = util.nearest(key, names)
      error(string.format("--set: unknown hyperparameter '%s' (valid: %s)%s", key, table.concat(names, ", "),
        near and ("; did you mean '" .. near .. "'?") or ""), 0)
    end
    local def = 0                           -- (`hparams[key] or 0` would type a false default as a number)
    if hparams and hparams[key] ~= nil then def = hparams[key] end
    o.set[key] = M.typed(key, val, def)
  end
  return o
end

--- The dlua flags among args (a list of strings): {"--out", ...} in order, each once.
-- A script that returns no experiment or study cannot honour them (dlua.c asks).
function M.flags_in(args)
  local found, seen = {}, {}
  for _, a in ipairs(args) do
    if a == "--" then break end
    local name = a:match("^(%-%-[%w%-]+)=") or a
    local _, known = flag_takes_value(name)
    if known and name ~= "--help" and not seen[name] then found[#found + 1] = name; seen[name] = true end
  end
  return found
end

--- watch_arg(): replaces the global arg by a proxy that notes being read (an index,
-- its length, pairs); dlua.c calls it before a script given flags runs, so
-- check_unused can tell a script that reads its arguments from one that ignores them.
function M.watch_arg()
  local real = arg
  if type(real) ~= "table" then return end
  M.real_arg, M.arg_read = real, false
  arg = setmetatable({}, {
    __index = function(_, k) M.arg_read = true; return real[k] end,
    __newindex = function(_, k, v) M.arg_read = true; real[k] = v end,
    __len = function() M.arg_read = true; return #real end,
    __pairs = function() M.arg_read = true; return next, real, nil end,
  })
end

--- Raises when the arguments hold dlua's flags but the script returned no
-- experiment or study and never read arg: the flags would be silently ignored.
-- Called by dlua.c after such a script ran (a script reading `...` only is not seen
-- reading its arguments).
function M.check_unused(script)
  local args = M.real_arg or arg
  if M.arg_read or type(args) ~= "table" then return end
  local found = M.flags_in(args)
  if #found == 0 then return end
  error(string.format("%s returned no experiment or study, so %s %s not apply (dlua's flags configure what a " ..
    "script returns; a plain script reads its own arguments from arg)", script, table.concat(found, ", "),
    #found == 1 and "does" or "do"), 0)
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
  lines[#lines + 1] = M.flags_help(M.FLAGS, 26)
  return table.concat(lines, "\n")
end

-- the exact command that reproduces a run: the dlua running now (dlua.util.proc.exe_path),
-- the script and every hyperparameter that differs from its default
function M.command(script, exp, hp, o)
  local parts = {util.shell_quote(proc.exe_path()), util.shell_quote(script)}
  local keys = {}
  for k in pairs(hp) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local def = exp.hparams[k]
    if k ~= "seed" and k ~= "init_seed" and k ~= "data_seed" and hp[k] ~= def then
      parts[#parts + 1] = "--set " .. util.shell_quote(string.format("%s=%s", k, tostring(hp[k])))
    end
  end
  parts[#parts + 1] = "--seed " .. tostring(hp.seed)
  if o.objective then parts[#parts + 1] = "--objective " .. o.objective.metric .. (o.objective.mode and ":" .. o.objective.mode or "") end
  if o.out then parts[#parts + 1] = "--out " .. util.shell_quote(o.out) end
  return table.concat(parts, " ")
end


--- The run directory when --out is not given: runs/<name>, or runs/<name>-2, -3, ...
-- when that holds a run already (a new run never lands on an old one); with --resume,
-- the newest of them.
function M.default_out(name, resume)
  local base = "runs/" .. tostring(name):gsub("[^%w%-_.]", "_")
  local last, k = nil, 1
  while true do
    local d = k == 1 and base or string.format("%s-%d", base, k)
    if not fs.exists(d) then return resume and (last or d) or d end
    last, k = d, k + 1
  end
end

return M
