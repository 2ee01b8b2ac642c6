--- dlua.search.halton: quasirandom and pseudo-random points of the unit cube.
-- quasirandom is a scrambled Halton sequence: bases are the first d primes,
-- each digit position of each base has its own random permutation of the
-- digits, drawn from a counter-based generator keyed by (seed, dimension,
-- digit). Point i is a pure function of (seed, i, d): it does not depend on how
-- many points are drawn or in which order. Also the centered L2 discrepancy
-- that measures how uniform a point set is. No global state.
local rng = require "dlua.search.rng"
local util = require "dlua.util"

local M = {}

------------------------------------------------------------------- halton

local ONE_BELOW = 1 - 2.0 ^ -53
-- bounds on what drives the loops below: a search space of more dimensions, a base
-- beyond the MAX_DIMS-th prime, or an index past 2^53 (doubles) is refused
local MAX_DIMS, MAX_BASE, MAX_INDEX = 10000, 104729, 1 << 53
M.MAX_DIMS = MAX_DIMS

--- The first n primes.
function M.primes(n)
  n = util.check_integer("dl.search.primes", 1, n, "n", 0, MAX_DIMS)
  local out, c = {}, 2
  while #out < n do
    local prime = true
    for _, p in ipairs(out) do
      if p * p > c then break end
      if c % p == 0 then prime = false; break end
    end
    if prime then out[#out + 1] = c end
    c = c + 1
  end
  return out
end

--- Digit positions used for base b: enough for double precision (scipy's rule).
function M.digits(b)
  return math.ceil(54 / (math.log(b) / math.log(2))) - 1
end

--- Per-digit permutations for base b: perms[j][digit + 1] = permuted digit,
-- one independent Fisher-Yates shuffle of {0..b-1} per digit position j,
-- keyed by (seed, dim). `seed = false` gives identity permutations (plain Halton).
function M.halton_permutations(b, seed, dim)
  b = util.check_integer("dl.search.halton_permutations", 1, b, "base", 2, MAX_BASE)
  local perms = {}
  for j = 1, M.digits(b) do
    local p = {}
    for d = 0, b - 1 do p[d + 1] = d end
    if seed ~= false then
      local r = rng.rng("halton", seed, dim, j)
      for i = b, 2, -1 do
        local k = r:int(i) + 1
        p[i], p[k] = p[k], p[i]
      end
    end
    perms[j] = p
  end
  return perms
end

--- The scrambled radical inverse of index (0-based) in base b with perms.
function M.radical_inverse(index, b, perms)
  local v, f, k = 0.0, 1.0 / b, index
  for j = 1, #perms do
    v = v + perms[j][k % b + 1] * f
    f = f / b
    k = k // b
  end
  if v >= 1 then v = ONE_BELOW end
  return v
end

local Halton = {}
Halton.__index = Halton

--- A d-dimensional scrambled Halton sequence for seed (false: unscrambled).
function M.halton_sequence(d, seed)
  d = util.check_integer("dl.search.halton_sequence", 1, d, "d", 1, MAX_DIMS)
  local self = setmetatable({d = d, seed = seed, bases = M.primes(d), perms = {}}, Halton)
  for k = 1, d do self.perms[k] = M.halton_permutations(self.bases[k], seed, k) end
  return self
end

--- Point i (1-based) of the sequence: index i - 1 of the radical inverses.
function Halton:point(i)
  i = util.check_integer("point", 1, i, "i", 1, MAX_INDEX)
  local u = {}
  for k = 1, self.d do u[k] = M.radical_inverse(i - 1, self.bases[k], self.perms[k]) end
  return u
end

--- Point i (1-based) of the d-dimensional scrambled Halton sequence for seed.
function M.halton(i, d, opts)
  i = util.check_integer("dl.search.halton", 1, i, "i", 1, MAX_INDEX)
  d = util.check_integer("dl.search.halton", 2, d, "d", 1, MAX_DIMS)
  local seed = opts and opts.seed
  if seed == nil then seed = 0 end
  return M.halton_sequence(d, seed):point(i)
end

--- Point i of plain pseudo-random search: uniform, keyed by (seed, i).
function M.random_point(i, d, seed)
  i = util.check_integer("dl.search.random_point", 1, i, "i", 1, MAX_INDEX)
  d = util.check_integer("dl.search.random_point", 2, d, "d", 1, MAX_DIMS)
  local r = rng.rng("random", seed or 0, i)
  local u = {}
  for k = 1, d do u[k] = r:uniform() end
  return u
end
M.ONE_BELOW = ONE_BELOW

-------------------------------------------------------------- discrepancy

--- Centered L2 discrepancy (Hickernell 1998) of points in [0, 1)^d: lower is
-- more uniform. The squared form is returned as its square root.
function M.centered_l2_discrepancy(points)
  local n = #points
  local d = #points[1]
  local a = (13 / 12) ^ d
  local s1 = 0
  for i = 1, n do
    local p = 1
    for k = 1, d do
      local z = math.abs(points[i][k] - 0.5)
      p = p * (1 + 0.5 * z - 0.5 * z * z)
    end
    s1 = s1 + p
  end
  local s2 = 0
  for i = 1, n do
    for j = 1, n do
      local p = 1
      for k = 1, d do
        local xi, xj = points[i][k], points[j][k]
        p = p * (1 + 0.5 * math.abs(xi - 0.5) + 0.5 * math.abs(xj - 0.5) - 0.5 * math.abs(xi - xj))
      end
      s2 = s2 + p
    end
  end
  local c2 = a - 2 / n * s1 + s2 / (n * n)
  return math.sqrt(math.max(0, c2))
end

util.strict_table("Halton:", Halton, true, {point = {"number"}})

return M
