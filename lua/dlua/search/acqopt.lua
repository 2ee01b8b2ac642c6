--- dlua.search.acqopt: the acquisition of dlua.search.bayes maximised by
-- gradient from several starts (issue 35, item 2). Candidates scored by the
-- acquisition find the right basin; a projected gradient ascent on log expected
-- improvement (the GP's analytic gradient in the input, engine/search/gp_acq.c)
-- then climbs to its top, which random points in 10 dimensions rarely reach.
--
--   local refine = acqopt.refiner(space, {context =, region =, acq =, log_ei =, theta =, points =, starts =,
--                                         region_starts =})
--   top = refine(scored, top)    -- inside bayes._maximise: the best of top and the refined starts
--   us, values = acqopt.ascend(space, starts, log_ei, {free =, scale =, bounds =, iters =})
--
-- Mixed spaces: only the unconditional continuous parameters (uniform,
-- log_uniform: their feature is their unit coordinate) move; integer, discrete
-- and categorical ones, and every conditional one, keep the start's value, so
-- a refined point stays on the lattice the candidates came from. A space
-- without continuous parameters is left to the random local search.
-- Log EI rather than EI: in 10 dimensions most of the cube has EI below 1e-300,
-- where EI and its gradient are 0 and log EI still has a slope.
local halton = require "dlua.search.halton"
local util = require "dlua.util"

local M = {}

-- the ascent: steps in units of the ARD length scale along the preconditioned
-- gradient (g_k l_k^2, the step of the largest coordinate t l_k), t from T0,
-- doubled on an improvement up to TMAX, quartered on a failure, a start
-- stops below TMIN or after `iters` steps
local T0, TMAX, TMIN, ITERS = 0.25, 2, 1e-3, 40

--- default_starts(points) -> the number of gradient starts at this many
-- observations: 8 up to 200, then fewer (each step of a start costs
-- O(points^2)), never below 2.
function M.default_starts(points)
  if points <= 200 then return 8 end
  return math.max(2, (8 * 200) // points)
end

--- The unconditional continuous coordinates of a space: {{k = coordinate,
-- f = feature}} (the feature of such a coordinate is the coordinate itself).
function M.free_dims(space)
  local free = {}
  for k, d in ipairs(space.dims) do
    local kind = d.param.kind
    if (kind == "uniform" or kind == "log_uniform") and d.cond == nil then free[#free + 1] = {k = k, f = d.feature} end
  end
  return free
end

local function copy(t) return {table.unpack(t)} end

--- ascend(space, starts, log_ei, opts) -> us, values: a projected gradient
-- ascent from each unit point of starts, all of them stepped together (one
-- call of log_ei per round). log_ei(xs) -> values, gradients (lists, in
-- feature space) at encoded points. opts: free (free_dims), scale (length
-- scale of each free coordinate), bounds(u) -> lo, hi (unit coordinates, the
-- box of the start u), iters (40), context. Only an improvement is taken, so
-- each result is at least as good as its start.
function M.ascend(space, starts, log_ei, opts)
  local free, scale, iters = opts.free, opts.scale, opts.iters or ITERS
  local st, xs = {}, {}
  for i, u in ipairs(starts) do
    local lo, hi = opts.bounds(u)
    st[i] = {u = copy(u), x = space:encode(u, opts.context), t = T0, active = true, lo = lo, hi = hi}
    xs[i] = st[i].x
  end
  if #st == 0 then return {}, {} end
  local v, g = log_ei(xs)
  for i, s in ipairs(st) do
    s.f, s.g = v[i], g[i]
    s.active = s.f > -math.huge
  end
  for _ = 1, iters do
    local trial = {}
    for _, s in ipairs(st) do
      if s.active then
        local dir, mx = {}, 0
        for j, fr in ipairs(free) do
          local l, uk = scale[j], s.u[fr.k]
          local dj = s.g[fr.f] * l * l
          if (dj > 0 and uk >= s.hi[fr.k]) or (dj < 0 and uk <= s.lo[fr.k]) then dj = 0 end   -- projected
          dir[j] = dj
          mx = math.max(mx, math.abs(dj) / l)
        end
        if mx == 0 or mx ~= mx or mx == math.huge then
          s.active = false
        else
          local u, x = copy(s.u), copy(s.x)
          for j, fr in ipairs(free) do
            local nu = math.max(s.lo[fr.k], math.min(s.hi[fr.k], s.u[fr.k] + s.t * dir[j] / mx))
            u[fr.k], x[fr.f] = nu, nu
          end
          trial[#trial + 1] = {s = s, u = u, x = x}
        end
      end
    end
    if #trial == 0 then break end
    xs = {}
    for i, tr in ipairs(trial) do xs[i] = tr.x end
    v, g = log_ei(xs)
    for i, tr in ipairs(trial) do
      local s = tr.s
      if v[i] > s.f then
        s.u, s.x, s.f, s.g = tr.u, tr.x, v[i], g[i]
        s.t = math.min(TMAX, 2 * s.t)
      else
        s.t = s.t / 4
        if s.t < TMIN then s.active = false end
      end
    end
  end
  local us, vals = {}, {}
  for i, s in ipairs(st) do us[i], vals[i] = s.u, s.f end
  return us, vals
end

local REFINER_OPTIONS = {context = "table", region = "table", acq = "function", log_ei = "function",
                         theta = "table", points = "integer", starts = "integer", region_starts = "integer"}

--- refiner(space, opts) -> refine(scored, top) or nil (no continuous
-- coordinate, or starts = 0). opts: acq (the full acquisition of a list of
-- unit points, feasibility and seen points included), log_ei (as in ascend),
-- theta (the GP's: its length scales precondition the ascent), region
-- ({lo =, hi =} or nil: a start inside it stays inside it, any other stays in
-- the cube), points (observations: the default number of starts), starts,
-- context. refine takes the candidates sorted by acq, best first ({u =, a =}),
-- and the best point so far, ascends from top and the best `starts` - 1
-- candidates not yet rejected (a > -1), then from the best region_starts (0)
-- further candidates that lie in region (the local starts of the trust region:
-- they climb inside it), and returns the best of top and the results by acq.
function M.refiner(space, opts)
  opts = util.check_options("dlua.search.acqopt.refiner", opts, REFINER_OPTIONS, 2)
  local free = M.free_dims(space)
  local nstarts = opts.starts or M.default_starts(opts.points or 0)
  if #free == 0 or nstarts == 0 then return nil end
  local scale = {}
  for j, fr in ipairs(free) do scale[j] = math.exp(opts.theta[fr.f]) end
  local region, d = opts.region, space.d
  local cube_lo, cube_hi = {}, {}
  for k = 1, d do cube_lo[k], cube_hi[k] = 0, halton.ONE_BELOW end
  local function inside(u)
    if not region then return false end
    for k = 1, d do
      if u[k] < region.lo[k] or u[k] > region.hi[k] then return false end
    end
    return true
  end
  local function bounds(u)
    if inside(u) then return region.lo, region.hi end
    return cube_lo, cube_hi
  end
  local nlocal = region and opts.region_starts or 0
  return function(scored, top)
    local starts, taken = {top.u}, {}
    for i = 1, #scored do
      if #starts >= nstarts then break end
      if scored[i].a > -1 and scored[i] ~= top then starts[#starts + 1], taken[i] = scored[i].u, true end
    end
    local want = #starts + nlocal
    for i = 1, #scored do
      if #starts >= want then break end
      if not taken[i] and scored[i].a > -1 and scored[i] ~= top and inside(scored[i].u) then
        starts[#starts + 1] = scored[i].u
      end
    end
    local us = M.ascend(space, starts, opts.log_ei, {free = free, scale = scale, bounds = bounds,
                                                     context = opts.context})
    local a = opts.acq(us)
    for i, u in ipairs(us) do
      if a[i] > top.a then top = {u = u, a = a[i]} end
    end
    return top
  end
end

return M
