--- dlua.search.suggester: the ask / tell object over every algorithm
-- (docs/studies.md "Ask / tell outside studies").
--   local s = suggester.suggester(space, {algorithm = "bayes", seed = 7, mode = "max"})
--   local batch = s:suggest(4); s:observe(batch[1], value); s:best(); s:state()
local util = require "dlua.util"
local gp = require "dlua.search.gp"
local spaces = require "dlua.search.space"
local sample = require "dlua.search.sample"
local bayes = require "dlua.search.bayes"

local M = {}

local Suggester = {}
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
--                                  a suggestion may be observed more than once (repeats)
--   s:best() --> {index =, u =, hp =, value =, estimate =} or nil
--   s:state() --> plain data; state.theta is the warm start of opts.theta
-- opts: algorithm ("quasirandom" | "random" | "grid" | "bayes"), seed (0), mode
-- ("min" | "max"), init (bayes: quasirandom points first, max(5, 2 (d + 1))),
-- context, candidates (bayes: 1000), feasibility (bayes: model infeasible
-- regions, true), max_points (bayes: GP subset size, 800), theta (bayes: warm
-- start), grid_points (grid: 5). Non-adaptive algorithms give point `index` of
-- their sequence; bayes chooses by noise-aware expected improvement once
-- `init` points and two feasible observations exist.
function M.suggester(space, opts)
  opts = util.check_options("dl.search.suggester", opts, {algorithm = "string", seed = "integer", mode = "string",
    init = "integer", context = "table", candidates = "integer", grid_points = "integer", feasibility = "boolean",
    max_points = "integer", theta = "table"}, 2)
  space = spaces.space(space)
  local alg = opts.algorithm or "quasirandom"
  sample._check_algorithm(alg)
  if opts.mode ~= nil and opts.mode ~= "min" and opts.mode ~= "max" then
    suggester_error("option 'mode' must be \"min\" or \"max\", got %s", spaces._fmt(opts.mode))
  end
  check_count(opts, "seed", math.mininteger)
  check_count(opts, "init", 1)
  check_count(opts, "candidates", 1)
  check_count(opts, "max_points", 2)
  check_count(opts, "grid_points", 1)
  local theta = opts.theta
  if theta ~= nil then
    local ok = type(theta) == "table" and #theta == space.features + 2
    for _, v in ipairs(ok and theta or {}) do ok = ok and spaces._finite(v) end
    if not ok then
      suggester_error("option 'theta' must be a list of %d finite numbers (s:state().theta for this space)",
        space.features + 2)
    end
  end
  return setmetatable({space = space, alg = alg, seed = opts.seed or 0, mode = opts.mode or "min",
    init = opts.init or math.max(5, 2 * (space.d + 1)), context = opts.context, history = {}, pending = {},
    next_index = 1, cache = {}, candidates = opts.candidates, grid_points = opts.grid_points,
    feasibility = opts.feasibility, max_points = opts.max_points, theta = theta}, Suggester)
end

function Suggester:suggest(n)
  n = n or 1
  if math.type(n) ~= "integer" or n < 1 or n > 100000 then
    error("dl.search.suggester: suggest: n must be an integer in [1, 100000], got " .. spaces._fmt(n), 2)
  end
  local out = {}
  local adaptive = {}
  local feasible = 0
  for _, h in ipairs(self.history) do if h.value ~= nil then feasible = feasible + 1 end end
  for _ = 1, n do
    local i = self.next_index
    local u
    if self.alg ~= "bayes" or i <= self.init or feasible < 2 then
      u = sample.point(self.space, i, {algorithm = self.alg, seed = self.seed, cache = self.cache,
                                  grid_points = self.grid_points})
      if not u then break end
      out[#out + 1] = {index = i, u = u}
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
    local us, info = bayes.bayes_suggest(self.space, self.history, pend, #adaptive,
      {seed = self.seed, step = adaptive[1], mode = self.mode, context = self.context, theta = self.theta,
       candidates = self.candidates, feasibility = self.feasibility, max_points = self.max_points, init = self.init})
    self.theta = info.theta
    self.fit = {count = #self.history, model = info.model}
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
  if type(s) ~= "table" or math.type(s.index) ~= "integer" or type(s.u) ~= "table" or #s.u ~= self.space.d then
    error("dl.search.suggester: observe: argument 1 must be a suggestion returned by suggest", 2)
  end
  if value ~= nil and type(value) ~= "number" then
    error("dl.search.suggester: observe: value must be a number or nil (infeasible), got " .. type(value), 2)
  end
  if value ~= value then value = nil end
  self.pending[s.index] = nil
  self.history[#self.history + 1] = {u = s.u, value = value, index = s.index}
end

--- The best observation: {index, u, hp, value (observed), estimate}, nil
-- before any feasible one. bayes (two or more feasible observations) chooses
-- by the GP's posterior mean at the observed points, which averages repeats
-- and noise; estimate is that mean. Other algorithms (no model) take the best
-- observed value, and estimate = value.
function Suggester:best()
  local sign = self.mode == "max" and -1 or 1
  local feas = {}
  for _, h in ipairs(self.history) do if h.value ~= nil then feas[#feas + 1] = h end end
  if #feas == 0 then return nil end
  local bi, be
  if self.alg == "bayes" and #feas >= 2 then
    if not (self.fit and self.fit.count == #self.history) then
      local X, y = bayes._observations(self.space, self.history, sign, self.context)
      local model = gp.fit(X, y, {theta = self.theta, max_points = self.max_points})
      self.theta = model.theta
      self.fit = {count = #self.history, model = model}
    end
    local mu = self.fit.model:observed_mean()
    for i = 1, #feas do if not be or mu[i] < be then bi, be = i, mu[i] end end
    be = sign * be
  else
    for i, h in ipairs(feas) do if not bi or sign * h.value < sign * feas[bi].value then bi = i end end
    be = feas[bi].value
  end
  local h = feas[bi]
  return {index = h.index, u = h.u, hp = self.space:point(h.u, self.context), value = h.value, estimate = be}
end

--- Plain data for a warm start: {theta = list of numbers} (theta is nil
-- before the first bayes fit). Pass state.theta back as opts.theta.
function Suggester:state()
  return {theta = self.theta and {table.unpack(self.theta)} or nil}
end


-- every exported function refuses extra arguments (util.strict)
util.strict_table("Suggester:", Suggester, true)

return M
