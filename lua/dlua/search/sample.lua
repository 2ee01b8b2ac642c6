--- dlua.search.sample: the non-adaptive algorithms (quasirandom, random,
-- grid) and M.sample, which draws n hyperparameter tables from one of them.
-- Point i of an algorithm is a pure function of (space dimensions, seed, i).
local util = require "dlua.util"
local halton = require "dlua.search.halton"
local spaces = require "dlua.search.space"

local M = {}

------------------------------------------------------------------ algorithms

M.ALGORITHMS = {quasirandom = true, random = true, grid = true, bayes = true}

--- The grid of a space: every value of discrete dimensions, `points` values of
-- continuous ones (both bounds included). Returns a list of unit-cube points.
function M.grid_points(space, points)
  points = points or 5
  local axes = {}
  for k, d in ipairs(space.dims) do
    local n = d.param:levels()
    local ax = {}
    if n and (d.param.kind ~= "int" or n <= points) then
      for j = 1, n do ax[j] = (j - 0.5) / n end
    else
      for j = 1, points do ax[j] = points == 1 and 0.5 or (j - 1) / (points - 1) end
    end
    axes[k] = ax
  end
  local out = {}
  local function rec(k, u)
    if k > #axes then out[#out + 1] = {table.unpack(u)}; return end
    for _, x in ipairs(axes[k]) do u[k] = x; rec(k + 1, u) end
  end
  rec(1, {})
  return out
end

local function check_algorithm(name)
  if not M.ALGORITHMS[name] then
    error(string.format("dl.search: unknown algorithm '%s' (valid: bayes, grid, quasirandom, random)",
      tostring(name)), 3)
  end
end

--- Point i (1-based) of a non-adaptive algorithm over space: a pure function
-- of (space dimensions, seed, i). grid: the i-th grid point (nil past the end).
function M.point(space, i, opts)
  opts = util.check_options("dl.search.point", opts, {algorithm = "string", seed = "integer",
    grid_points = "integer", cache = "table"}, 2)
  local alg = opts.algorithm or "quasirandom"
  check_algorithm(alg)
  local seed = opts.seed or 0
  if alg == "quasirandom" or alg == "bayes" then
    local cache = opts.cache
    local seq = cache and cache.halton
    if not seq then
      seq = halton.halton_sequence(space.d, seed)
      if cache then cache.halton = seq end
    end
    return seq:point(i)
  elseif alg == "random" then
    return halton.random_point(i, space.d, seed)
  else
    local grid = opts.cache and opts.cache.grid or M.grid_points(space, opts.grid_points)
    if opts.cache then opts.cache.grid = grid end
    return grid[i]
  end
end

--- Warnings a choice of algorithm deserves (grid above 2 varied dimensions).
function M.warnings(space, alg)
  local w = {}
  if alg == "grid" and space.d > 2 then
    w[#w + 1] = string.format("grid search over %d varied dimensions: the playbook accepts grids only in 1-2 " ..
      "dimensions (quasirandom covers each dimension better at the same budget)", space.d)
  end
  return w
end

--- n hyperparameter tables from a non-adaptive algorithm (default quasirandom).
-- opts: algorithm, seed, grid_points, context, warn (function(msg), default stderr).
function M.sample(space, n, opts)
  opts = util.check_options("dl.search.sample", opts, {algorithm = "string", seed = "integer",
    grid_points = "integer", context = "table", warn = "function"}, 2)
  space = spaces.space(space)
  local alg = opts.algorithm or "quasirandom"
  check_algorithm(alg)
  if alg == "bayes" then error("dl.search.sample: bayes is adaptive; use dl.search.suggester", 2) end
  local warn = opts.warn or function(msg) io.stderr:write("dlua: warning: ", msg, "\n") end
  for _, w in ipairs(M.warnings(space, alg)) do warn(w) end
  local cache = {}
  local out, us = {}, {}
  for i = 1, n do
    local u = M.point(space, i, {algorithm = alg, seed = opts.seed, grid_points = opts.grid_points, cache = cache})
    if not u then break end
    out[i] = space:point(u, opts.context)
    us[i] = u
  end
  return out, us
end

M._check_algorithm = check_algorithm

return M
