--- dlua.search.suggester: the ask / tell object over every algorithm
-- (docs/studies.md "Ask / tell outside studies").
--   local s = suggester.suggester(space, {algorithm = "bayes", seed = 7, mode = "max"})
--   local batch = s:suggest(4); s:observe(batch[1], value); s:best(); s:state()
local util = require "dlua.util"
local spaces = require "dlua.search.space"
local algorithms = require "dlua.search.algorithms"
local pareto = require "dlua.search.pareto"

local M = {}

local Suggester = {}

-- the row options the suggester itself acts on, not handed to the row's suggest
local SUGGESTER_ONLY = {theta = true, racing = true, best = true}
-- the options of every algorithm (init: the adaptive ones'; the others' are their rows')
local GENERIC = {algorithm = true, seed = true, mode = true, context = true}
Suggester.__index = Suggester

local function suggester_error(msg, ...) error("dl.search.suggester: " .. string.format(msg, ...), 3) end

local function check_count(opts, k, min)
  local v = opts[k]
  if v ~= nil and (math.type(v) ~= "integer" or v < min) then
    suggester_error("option '%s' must be an integer >= %d, got %s", k, min, spaces._fmt(v))
  end
end

--- suggester(space [, opts]): an ask / tell object (docs/studies.md).
--   s:suggest([n]) --> list of n suggestions {index =, u =, hp =}
--   s:observe(suggestion, value)   value: a number, or nil / NaN for an infeasible trial;
--                                  a suggestion may be observed more than once (repeats);
--                                  {u = point} is an observation made elsewhere
--   s:best() --> {index =, u =, hp =, value =, estimate =} or nil
--   s:front() --> the observations on the Pareto front {index =, u =, hp =, values =}
-- Several objectives: mode = {"min", "max", ...} (one per objective), observe's
-- value a list of one number per mode, and pareto = {method = "ehvi" | "parego",
-- reference = one number per objective} (bayes: EHVI for 2 or 3 objectives, the
-- reference by default the observed front's nadir + 10% of the observations' range,
-- for 3 objectives the front's second-worst value in place of its nadir;
-- dlua.search.ehvi).
--   s:state() --> plain data; state.theta is the warm start of opts.theta
-- opts: algorithm (a row of dlua.search.algorithms: dl.search.algorithm_names()),
-- seed (0), mode ("min" | "max"), init (adaptive algorithms: initial points,
-- the row's rule by default, bayes max(5, 2 (d + 1)); observations made
-- elsewhere count toward them; 0 is allowed), context, and the options of the
-- algorithms' rows: racing (bayes, one objective: every racing-th adaptive
-- suggestion, k >= 2, evaluates the incumbent of best() again while it has fewer
-- than RACE_MAX = 4 observations and none pending; the suggestion has race = true),
-- best (bayes: "estimate" | "observed", what s:best() reports; see best()),
-- acquisition (bayes: "auto" | "ei" | "nei", dlua.search.nei), candidates (bayes: 1000), feasibility (bayes: model
-- infeasible regions, true), max_points (bayes: GP subset size, 800), theta
-- (bayes: warm start), grid_points (grid: 5). An option the chosen algorithm does not
-- use is an error naming the algorithm and its options. Non-adaptive algorithms give point
-- `index` of their sequence; an adaptive one gives its initial points until
-- `init` points are known (suggested or observed), then chooses (bayes: by
-- noise-aware expected improvement) once `needs_feasible` (bayes: 2) feasible
-- observations exist; before that it keeps giving its initial points. bayes
-- hands its last model back (opts.model), so from 256 observations on new ones
-- join it by rank-one updates until a refit is due (dlua.search.bayes._surrogate).
function M.suggester(space, opts)
  opts = util.check_options("dl.search.suggester", opts, algorithms._suggester_options(), 2)
  space = spaces.space(space)
  local alg = opts.algorithm or "quasirandom"
  local row = algorithms._row(alg, 3)
  local unused = algorithms._unused_problem("dl.search.suggester", row, opts, GENERIC)
  if unused then error(unused, 2) end
  local modes = type(opts.mode) == "table" and opts.mode or nil
  local ok = opts.mode == nil or opts.mode == "min" or opts.mode == "max" or (modes and #modes >= 1)
  for j = 1, modes and #modes or 0 do ok = ok and (modes[j] == "min" or modes[j] == "max") end
  if not ok then
    suggester_error("option 'mode' must be \"min\", \"max\" or a list of them (one per objective), got %s",
      spaces._fmt(opts.mode))
  end
  if modes and #modes > 1 and not row.objectives then
    suggester_error("algorithm '%s' serves one objective, and mode lists %d", alg, #modes)
  end
  if space.conditional and not row.conditional then
    suggester_error("algorithm '%s' does not serve conditional spaces", alg)
  end
  check_count(opts, "seed", math.mininteger)
  check_count(opts, "init", 0)
  if row.check then row.check(space, opts, suggester_error) end
  local own = {}                                  -- the options this row takes, handed to it
  for k in pairs(row.options or {}) do own[k] = opts[k] end
  return setmetatable({space = space, alg = alg, row = row, seed = opts.seed or 0, mode = opts.mode or "min",
    objectives = modes and #modes or 1,
    init = algorithms.initial_points(row, space.d, opts.init), context = opts.context, history = {}, pending = {},
    next_index = 1, foreign = 0, cache = {}, own = own, theta = opts.theta}, Suggester)
end

function Suggester:suggest(n)
  n = n or 1
  if math.type(n) ~= "integer" or n < 1 or n > 100000 then
    error("dl.search.suggester: suggest: n must be an integer in [1, 100000], got " .. spaces._fmt(n), 2)
  end
  local row = self.row
  if n > 1 and not row.batches then
    error(string.format("dl.search.suggester: suggest: algorithm '%s' suggests one point at a time, got n = %d",
      self.alg, n), 2)
  end
  local out = {}
  local adaptive = {}
  local feasible = 0
  for _, h in ipairs(self.history) do if h.value ~= nil then feasible = feasible + 1 end end
  -- initial points: until `init` points are known, the suggester's own (index) and
  -- those observed elsewhere
  local initial = self.init - self.foreign
  for _ = 1, n do
    local i = self.next_index
    local u
    local race = row.adaptive and i > initial and feasible >= row.needs_feasible and self.own.racing
    race = race and (i - initial) % race == 0 and self:_race_point()
    if not row.adaptive or i <= initial or feasible < row.needs_feasible then
      u = row.point(self.space, i, {seed = self.seed, cache = self.cache, grid_points = self.own.grid_points})
      if not u then break end
      out[#out + 1] = {index = i, u = u}
    elseif race then
      out[#out + 1] = {index = i, u = race, race = true}
    else
      adaptive[#adaptive + 1] = i
      out[#out + 1] = {index = i}
    end
    self.next_index = i + 1
  end
  if #adaptive > 0 then
    local pend = {}
    for _, p in pairs(self.pending) do pend[#pend + 1] = p end
    table.sort(pend, function(a, b) return a.index < b.index end)
    for _, s in ipairs(out) do if s.u then pend[#pend + 1] = s end end
    local sopts = {seed = self.seed, step = adaptive[1], mode = self.mode, context = self.context, theta = self.theta,
                   init = self.init, model = self.fit and self.fit.model}
    for k, v in pairs(self.own) do if not SUGGESTER_ONLY[k] then sopts[k] = v end end
    local us, info = row.suggest(self.space, self.history, pend, #adaptive, sopts)
    self.theta = info.theta
    self.fit = {count = #self.history, model = info.model}
    self.method, self.fallback = info.method, info.fallback
    local j = 0
    for _, s in ipairs(out) do
      if not s.u then j = j + 1; s.u = us[j] end
    end
  end
  for _, s in ipairs(out) do
    s.hp = self.space:point(s.u, self.context)
    self.pending[s.index] = s
  end
  return out
end

function Suggester:observe(s, value)
  local ok = type(s) == "table" and type(s.u) == "table" and #s.u == self.space.d
  if ok and s.index ~= nil then ok = math.type(s.index) == "integer" end
  for k = 1, ok and self.space.d or 0 do
    local x = s.u[k]
    ok = ok and type(x) == "number" and x >= 0 and x <= 1
  end
  if not ok then
    error(string.format("dl.search.suggester: observe: argument 1 must be a suggestion returned by suggest, or {u = " ..
      "a point} (%d numbers in [0, 1]) observed elsewhere", self.space.d), 2)
  end
  local values
  if self.objectives > 1 or type(self.mode) == "table" then
    -- several objectives: a list of one number per mode (a NaN in it: infeasible)
    local k = #self.mode
    local good = value == nil or (type(value) == "table" and #value == k)
    for j = 1, value ~= nil and good and k or 0 do good = good and type(value[j]) == "number" end
    if not good then
      error(string.format("dl.search.suggester: observe: value must be a list of %d numbers (one per mode) or nil " ..
        "(infeasible), got %s", k, spaces._fmt(value)), 2)
    end
    for j = 1, value and k or 0 do if value[j] ~= value[j] then value = nil; break end end
    values = value and {table.unpack(value)} or nil
    value = values and values[1]
  elseif value ~= nil and type(value) ~= "number" then
    error("dl.search.suggester: observe: value must be a number or nil (infeasible), got " .. type(value), 2)
  end
  if value ~= value then value = nil end
  -- an observation of a point this suggester did not hand out counts toward its initial points
  if s.index and s.index >= 1 and s.index < self.next_index then self.pending[s.index] = nil
  else self.foreign = self.foreign + 1 end
  self.history[#self.history + 1] = {u = s.u, value = value, values = values, index = s.index}
end

--- The best observation: {index, u, hp, value (observed), estimate}, nil
-- before any feasible one (index is nil for an observation made elsewhere). An
-- algorithm with a model (its row's estimate: bayes, two or more feasible
-- observations) chooses by the model's posterior mean at the observed points,
-- which averages repeats and noise; estimate is that mean. Other algorithms, and
-- bayes with best = "observed" (a deterministic objective, whose values need no
-- averaging), take the best observed value, and estimate = value.
function Suggester:best()
  if self.objectives > 1 then
    error("dl.search.suggester: best: several objectives have a front, not a best: s:front()", 2)
  end
  local mode = type(self.mode) == "table" and self.mode[1] or self.mode
  local sign = mode == "max" and -1 or 1
  local feas = {}
  for _, h in ipairs(self.history) do if h.value ~= nil then feas[#feas + 1] = h end end
  if #feas == 0 then return nil end
  local bi, be
  if self.row.estimate and #feas >= 2 and self.own.best ~= "observed" then
    if not (self.fit and self.fit.count == #self.history) then
      local model = self.row.estimate(self.space, self.history, {mode = mode, context = self.context,
        theta = self.theta, max_points = self.own.max_points, warp = self.own.warp,
        model = self.fit and self.fit.model})
      self.theta = model.theta
      self.fit = {count = #self.history, model = model}
    end
    local mu = self.fit.model:observed_mean()
    for i = 1, #feas do if not be or mu[i] < be then bi, be = i, mu[i] end end
    local w = self.fit.model.warp
    be = sign * (w and w:inverse(be) or be)            -- the output warp's inverse: the values' units
  else
    for i, h in ipairs(feas) do if not bi or sign * h.value < sign * feas[bi].value then bi = i end end
    be = feas[bi].value
  end
  local h = feas[bi]
  return {index = h.index, u = h.u, hp = self.space:point(h.u, self.context), value = h.value, estimate = be}
end

-- racing (SMAC's intensification, simplified): the incumbent's point to evaluate
-- again, or nil when it has RACE_MAX observations already (or one is pending)
local RACE_MAX = 4
M.RACE_MAX = RACE_MAX

function Suggester:_race_point()
  local b = self:best()
  if not b then return nil end
  local function same(u)
    for k = 1, #u do if u[k] ~= b.u[k] then return false end end
    return true
  end
  local count = 0
  for _, h in ipairs(self.history) do if same(h.u) then count = count + 1 end end
  for _, p in pairs(self.pending) do if same(p.u) then return nil end end
  if count >= RACE_MAX then return nil end
  return {table.unpack(b.u)}
end

--- Several objectives: the observations no other dominates by their observed
-- values (dl.search.pareto_front), in observation order: {index =, u =, hp =,
-- values =} each; {} before any feasible one.
function Suggester:front()
  local modes = type(self.mode) == "table" and self.mode or {self.mode}
  local feas, vals = {}, {}
  for _, h in ipairs(self.history) do
    if h.value ~= nil then
      feas[#feas + 1] = h
      vals[#vals + 1] = h.values or {h.value}
    end
  end
  local out = {}
  for _, i in ipairs(#feas > 0 and pareto.pareto_front(vals, modes) or {}) do
    local h = feas[i]
    out[#out + 1] = {index = h.index, u = h.u, hp = self.space:point(h.u, self.context), values = vals[i]}
  end
  return out
end

--- Plain data for a warm start: {theta = list of numbers} (theta is nil
-- before the first bayes fit). Pass state.theta back as opts.theta. Several
-- objectives: also method, how the last suggestion chose ("ehvi" | "parego"),
-- and fallback, why ParEGO served when EHVI was asked for (nil otherwise).
function Suggester:state()
  return {theta = self.theta and {table.unpack(self.theta)} or nil, method = self.method, fallback = self.fallback}
end


-- every exported function refuses extra arguments (util.strict)
util.strict_table("Suggester:", Suggester, true, {suggest = {"integer?"}, observe = {"table", "any?"}, front = {}})

return M
