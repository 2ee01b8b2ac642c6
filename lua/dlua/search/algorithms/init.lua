--- dlua.search.algorithms: the table of search algorithms, name -> row. A row is
-- a module of this directory returning one algorithm: its name, its properties
-- and its functions. Everything that depends on the algorithm reads the row
-- instead of comparing names: dl.search.sample / point / suggester, dl.study's
-- checks and its "valid" list (dlua.study.spec), the plan (dlua.study.plan), the
-- agent that asks an adaptive algorithm for a trial's point (dlua.study.agent),
-- pruning's exploration warning (dlua.study.prune) and dl.diagnose. Adding an
-- algorithm is one file beside these and one line in ROWS below
-- (docs/architecture.md "Adding a search algorithm"); register_algorithm adds a
-- row at run time, as the table does for its own rows. Fields of a row (checked
-- by register_algorithm):
--   name         letters, digits, '_' ("manual" is a study's own list of trials)
--   adaptive     false: point i is a pure function of (space, seed, i), so trials
--                run in any order or in parallel and a study can grow; true: the
--                points after the initial ones come from observations (suggest)
--   finite       the sequence ends (count): the trial count is the algorithm's
--   batches      suggests points while others are pending (suggest(n > 1), parallel trials)
--   objectives   serves studies of several objectives (an adaptive row's suggest then
--                gets opts.mode as a list of modes, opts.pareto, and history entries'
--                values as lists: bayes chooses by EHVI or ParEGO)
--   conditional  serves spaces with conditional parameters
--   point(space, i, opts) -> u (a list of space.d numbers in [0, 1)) or nil past the
--                end: point i; for an adaptive row its initial points. opts: seed,
--                cache (a table the caller keeps for one sequence), grid_points
--   init(d)      adaptive: the initial-point rule, the default of `init` (dl.study,
--                dl.search.suggester): points from `point` before `suggest`
--   needs_feasible  adaptive: feasible observations suggest needs (fewer: `point`)
--   suggest(space, history, pending, n, opts) -> us, info   adaptive: n points;
--                history {{u =, value = number or nil (infeasible)}}, pending {{u =}};
--                opts: seed, step (the suggestion's number), mode, context, init,
--                theta (info.theta of the previous call: a warm start), and options
--   estimate(space, history, opts) -> fit with fit:observed_mean() (optional: the
--                suggester's best() then ranks by the model, not the luckiest value)
--   count(space, opts) -> the number of points (finite rows)
--   warnings(space) -> list of messages (optional)
--   options      {key = type}: keys the suggester accepts and hands to the row
--   check(space, opts, fail)  checks their values; fail(fmt, ...) raises
local util = require "dlua.util"

local M = {}

-- THE TABLE: one row per algorithm, name = its module
local ROWS = {
  quasirandom = require "dlua.search.algorithms.quasirandom",
  random      = require "dlua.search.algorithms.random",
  grid        = require "dlua.search.algorithms.grid",
  bayes       = require "dlua.search.algorithms.bayes",
}

--- name -> row, for every registered algorithm (read it; register_algorithm adds).
M.ALGORITHMS = {}

local ROW = {name = "string", adaptive = "boolean", finite = "boolean", batches = "boolean", objectives = "boolean",
             conditional = "boolean", point = "function", init = "function", needs_feasible = "integer",
             suggest = "function", estimate = "function", count = "function", warnings = "function",
             options = "table", check = "function"}
local GENERIC = {algorithm = true, seed = true, mode = true, init = true, context = true}
-- the arguments each function of a row takes: a call with more is refused (util.strict)
local ARITY = {point = 3, init = 1, suggest = 5, estimate = 3, count = 2, warnings = 1, check = 3}

--- register_algorithm(row) -> the row as registered: adds a search algorithm to
-- the table (the fields above; unknown keys, missing ones and a name taken are
-- errors). The table holds a copy whose functions refuse extra arguments.
-- @usage dl.search.register_algorithm(require "my_algorithm")
function M.register_algorithm(row)
  local function bad(msg, ...) error("dl.search.register_algorithm: " .. string.format(msg, ...), 3) end
  if type(row) ~= "table" then bad("argument 1 must be an algorithm row (a table), got %s", type(row)) end
  util.check_options("dl.search.register_algorithm", row, ROW, 2)
  if type(row.name) ~= "string" or not row.name:match("^[%w_]+$") then
    bad("name must be a string of letters, digits and '_', got %s", tostring(row.name))
  end
  if row.name == "manual" then bad("'manual' is a study's list of trials, not an algorithm name") end
  if M.ALGORITHMS[row.name] then bad("algorithm '%s' is already registered", row.name) end
  local need = {"adaptive", "finite", "batches", "objectives", "conditional", "point"}
  if row.adaptive then for _, k in ipairs({"init", "needs_feasible", "suggest"}) do need[#need + 1] = k end end
  if row.finite then need[#need + 1] = "count" end
  for _, k in ipairs(need) do
    if row[k] == nil then bad("algorithm '%s' has no '%s' (%s)", row.name, k, ROW[k]) end
  end
  if row.needs_feasible and row.needs_feasible < 0 then bad("needs_feasible must be >= 0") end
  for k in pairs(row.options or {}) do
    if GENERIC[k] then bad("option '%s' of algorithm '%s' is one every algorithm takes", k, row.name) end
  end
  local out = {}
  for k, v in pairs(row) do
    out[k] = type(v) == "function" and util.strict(string.format("dl.search.algorithm(%q).%s", row.name, k), v,
      ARITY[k]) or v
  end
  M.ALGORITHMS[row.name] = out
  return out
end

--- algorithm_names() -> the sorted names of the registered algorithms.
function M.algorithm_names() return util.sorted_keys(M.ALGORITHMS) end

-- the row of name; an unknown name is an error at `level` (error's, counted from row_of)
local function row_of(name, level)
  local row = M.ALGORITHMS[name]
  if row then return row end
  local names = M.algorithm_names()
  local near = type(name) == "string" and util.nearest(name, names)
  error(string.format("dl.search: unknown algorithm '%s' (valid: %s)%s", tostring(name), table.concat(names, ", "),
    near and ("; did you mean '" .. near .. "'?") or ""), level)
end
M._row = row_of

--- algorithm(name) -> its row; an unknown name is an error listing the valid ones.
-- @usage local row = dl.search.algorithm("bayes"); print(row.adaptive, row.init(4))
function M.algorithm(name)
  local row = row_of(name, 3)
  return row
end

--- initial_points(row, d [, init]) -> how many points come from row.point before
-- row.suggest: init when given, else the row's rule init(d) (0 for non-adaptive rows).
function M.initial_points(row, d, init)
  if init ~= nil then return init end
  return row.adaptive and row.init(d) or 0
end

--- The keys dl.search.suggester accepts: the generic ones and every row's options.
function M._suggester_options()
  local spec = {algorithm = "string", seed = "integer", mode = "string|table", init = "integer", context = "table"}
  for _, row in pairs(M.ALGORITHMS) do
    for k, ty in pairs(row.options or {}) do spec[k] = ty end
  end
  return spec
end

-- does row take option k (besides the generic ones)? init: the adaptive rows' (initial points)
local function takes(row, k) return (row.options and row.options[k] ~= nil) or (k == "init" and row.adaptive) end

--- _unused_problem(fn, row, opts, generic) -> nil, or the message for the first option
-- of opts (sorted) that is neither in generic (a set of the caller's own keys) nor
-- one row takes: "fn: option 'k' applies to algorithm bayes, not to 'random' (its
-- options: ...): leave it out". No option is accepted and ignored.
function M._unused_problem(fn, row, opts, generic)
  local keys = {}
  for k in pairs(opts) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    if not generic[k] and not takes(row, k) then
      local users, own = {}, {}
      for _, name in ipairs(M.algorithm_names()) do
        if takes(M.ALGORITHMS[name], k) then users[#users + 1] = name end
      end
      for g in pairs(generic) do own[#own + 1] = g end
      for o in pairs(row.options or {}) do own[#own + 1] = o end
      if row.adaptive then own[#own + 1] = "init" end
      table.sort(own)
      return string.format("%s: option '%s' applies to algorithm %s, not to '%s' (its options: %s): leave it out",
        fn, tostring(k), #users > 0 and table.concat(users, " and ") or "none", row.name, table.concat(own, ", "))
    end
  end
end

for _, name in ipairs(util.sorted_keys(ROWS)) do
  assert(ROWS[name].name == name, "dlua.search.algorithms: row " .. name .. " names itself " .. ROWS[name].name)
  M.register_algorithm(ROWS[name])
end

return M
