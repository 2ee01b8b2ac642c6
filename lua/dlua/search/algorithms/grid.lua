--- dlua.search.algorithms.grid: the row of grid search: every value of discrete
-- dimensions and `grid_points` (5) values of continuous ones, both bounds included;
-- point i is the i-th point of the grid (nil past its end). For 1-2 dimensions
-- (a warning above 2).
local A = {name = "grid", adaptive = false, finite = true, batches = true, objectives = true, conditional = true,
           options = {grid_points = "integer"}}

-- the grid of a space: a list of unit-cube points
local function grid_of(space, points)
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

--- Point i of the grid; opts.cache holds the grid between calls.
function A.point(space, i, opts)
  local grid = opts.cache and opts.cache.grid or grid_of(space, opts.grid_points)
  if opts.cache then opts.cache.grid = grid end
  return grid[i]
end

function A.count(space, opts) return #grid_of(space, opts.grid_points) end

function A.warnings(space)
  if space.d <= 2 then return {} end
  return {string.format("grid search over %d varied dimensions: the playbook accepts grids only in 1-2 " ..
    "dimensions (quasirandom covers each dimension better at the same budget)", space.d)}
end

function A.check(_, opts, fail)
  local v = opts.grid_points
  if v ~= nil and v < 1 then fail("option 'grid_points' must be an integer >= 1, got %d", v) end
end

return A
