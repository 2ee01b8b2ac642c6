--- dlua.search.sample: point i of an algorithm and M.sample, which draws n
-- hyperparameter tables from a non-adaptive one. The algorithms themselves are
-- rows of dlua.search.algorithms; point i of a non-adaptive row is a pure
-- function of (space dimensions, seed, i).
local util = require "dlua.util"
local spaces = require "dlua.search.space"
local algorithms = require "dlua.search.algorithms"

local M = {}

-- the options of point and sample every algorithm takes (grid_points is the grid row's)
local POINT_OPTIONS = {algorithm = true, seed = true, cache = true}
local SAMPLE_OPTIONS = {algorithm = true, seed = true, context = true, warn = true}

-- refuses an option row does not use and a bad value of one it does (its check), as
-- the suggester does; the error blames the caller of fn
local function check_row_options(fn, space, row, opts, generic)
  local bad = algorithms._unused_problem(fn, row, opts, generic)
  if bad then error(bad, 3) end
  if row.check then
    row.check(space, opts, function(msg, ...) error(fn .. ": " .. string.format(msg, ...), 5) end)
  end
end

--- The grid of a space: every value of discrete dimensions, `points` values of
-- continuous ones (both bounds included). Returns a list of unit-cube points.
function M.grid_points(space, points)
  if points ~= nil then points = util.check_integer("dl.search.grid_points", 2, points, "points", 1) end
  local grid, cache, out = algorithms.ALGORITHMS.grid, {}, {}
  while true do
    local u = grid.point(space, #out + 1, {grid_points = points, cache = cache})
    if not u then return out end
    out[#out + 1] = u
  end
end

--- Point i (1-based) of an algorithm over space: a pure function of (space
-- dimensions, seed, i); an adaptive algorithm's initial point i. grid: the i-th
-- grid point (nil past the end). i >= 1; grid_points is the grid's only.
function M.point(space, i, opts)
  opts = util.check_options("dl.search.point", opts, {algorithm = "string", seed = "integer",
    grid_points = "integer", cache = "table"}, 2)
  i = util.check_integer("dl.search.point", 2, i, "i", 1)
  local row = algorithms._row(opts.algorithm or "quasirandom", 3)
  check_row_options("dl.search.point", space, row, opts, POINT_OPTIONS)
  local u = row.point(space, i, {seed = opts.seed or 0, cache = opts.cache, grid_points = opts.grid_points})
  return u
end

--- Warnings a choice of algorithm deserves (grid above 2 varied dimensions).
function M.warnings(space, alg)
  local row = algorithms._row(alg, 3)
  local w = row.warnings and row.warnings(space) or {}
  return w
end

--- n hyperparameter tables from a non-adaptive algorithm (default quasirandom).
-- opts: algorithm, seed, grid_points (grid only: an option the algorithm does not use
-- is an error), context, warn (function(msg), default stderr). n >= 0.
function M.sample(space, n, opts)
  opts = util.check_options("dl.search.sample", opts, {algorithm = "string", seed = "integer",
    grid_points = "integer", context = "table", warn = "function"}, 2)
  n = util.check_integer("dl.search.sample", 2, n, "n", 0)
  space = spaces.space(space)
  local alg = opts.algorithm or "quasirandom"
  local row = algorithms._row(alg, 3)
  if row.adaptive then error("dl.search.sample: " .. alg .. " is adaptive; use dl.search.suggester", 2) end
  check_row_options("dl.search.sample", space, row, opts, SAMPLE_OPTIONS)
  if space.conditional and not row.conditional then
    error("dl.search.sample: " .. alg .. " does not serve conditional spaces", 2)
  end
  local warn = opts.warn or function(msg) io.stderr:write("dlua: warning: ", msg, "\n") end
  for _, w in ipairs(row.warnings and row.warnings(space) or {}) do warn(w) end
  local cache = {}
  local out, us = {}, {}
  for i = 1, n do
    local u = row.point(space, i, {seed = opts.seed or 0, grid_points = opts.grid_points, cache = cache})
    if not u then                                  -- a grid ran out: fewer points, said so
      warn(string.format("dl.search.sample: the %s has %d points, fewer than the %d asked; returning them all",
        alg, i - 1, n))
      break
    end
    out[i] = space:point(u, opts.context)
    us[i] = u
  end
  return out, us
end

return M
