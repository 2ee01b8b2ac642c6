--- dlua.search.algorithms.quasirandom: the row of the quasirandom algorithm, the
-- playbook's default for exploration: point i is point i of the scrambled Halton
-- sequence keyed by the seed (dlua.search.halton), a pure function of (space
-- dimensions, seed, i).
local halton = require "dlua.search.halton"

local A = {name = "quasirandom", adaptive = false, finite = false, batches = true, objectives = true,
           conditional = true}

--- Point i; opts.cache (a table the caller keeps) holds the sequence between calls.
function A.point(space, i, opts)
  local cache = opts.cache
  local seq = cache and cache.halton
  if not seq then
    seq = halton.halton_sequence(space.d, opts.seed or 0)
    if cache then cache.halton = seq end
  end
  return seq:point(i)
end

return A
