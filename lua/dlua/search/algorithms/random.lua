--- dlua.search.algorithms.random: the row of plain pseudo-random search: point i
-- is uniform in the unit cube, keyed by (seed, i) (dlua.search.halton.random_point).
local halton = require "dlua.search.halton"

local A = {name = "random", adaptive = false, finite = false, batches = true, objectives = true, conditional = true}

function A.point(space, i, opts) return halton.random_point(i, space.d, opts.seed or 0) end

return A
