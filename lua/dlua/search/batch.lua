--- dlua.search.batch: a batch's points chosen jointly (issue 35, item 2): the
-- expected improvement of the batch as a whole, q-EI = E[max(best - min_j
-- f(x_j), 0)] under the GP's joint posterior at the q points, by Monte Carlo
-- with base samples fixed for the suggestion, maximised greedily one point after
-- another (the sequential greedy q-EI of BoTorch, Wilson et al. 2018). The
-- kriging believer (dlua.search.bayes) still runs beside it: its choices,
-- refined by gradient, are candidates, and its expected improvement breaks ties
-- where a candidate adds nothing the Monte Carlo sees.
--
--   local q = batch.qei(model, best, rng, n)  -- model: the GP with the pending beliefs
--   q.raw(xs, kb_ei)   -- q-EI of the chosen points plus each of xs (encoded), + 1e-6 kb_ei
--   q.add(x)           -- x joins the batch
--   raw, add = batch.joint(model, best, rng, n, raw, add, encode)   -- bayes._suggest's hook
--
-- With x joining chosen points z_1..z_k, the joint sample is
-- f = mean + L e with L the Cholesky factor of the joint covariance; the
-- factor of the z block is kept, so x's row is a = Lz^-1 cov(z, x) and
-- s = sqrt(var(x) - a'a), and f(x) = mean(x) + a' e_1..k + s e_k+1: O(k) per
-- sample and candidate.
local M = {}

M.SAMPLES = 128            -- base samples per suggestion
M.TIE = 1e-6               -- weight of the believer's EI in a candidate's score

--- qei(model, best, rng, n) -> {raw =, add =}: the greedy q-EI of a batch of n
-- under model (a dlua.search.gp model) below best (minimising), base samples
-- from rng (normal(), SAMPLES x n draws at once: deterministic per stream).
function M.qei(model, best, rng, n)
  local N = M.SAMPLES
  local e = {}
  for s = 1, N do
    local row = {}
    for j = 1, n do row[j] = rng:normal() end
    e[s] = row
  end
  local Z, Lz = {}, {}
  local mz = {}                          -- per sample: the lowest f over the chosen points
  for s = 1, N do mz[s] = math.huge end
  local q = {}

  function q.raw(xs, kb_ei)
    local k = #Z
    if k == 0 then return kb_ei end
    local mean, var, cov = model.c:cross_cov(xs, Z)
    local out = {}
    for i = 1, #xs do
      local c, a, aa = cov[i], {}, 0
      for r = 1, k do                    -- forward solve Lz a = c
        local v = c[r]
        for t = 1, r - 1 do v = v - Lz[r][t] * a[t] end
        a[r] = v / Lz[r][r]
        aa = aa + a[r] * a[r]
      end
      local sd = math.sqrt(math.max(0, var[i] - aa))
      local mu, acc = mean[i], 0
      for s = 1, N do
        local es = e[s]
        local f = mu + sd * es[k + 1]
        for r = 1, k do f = f + a[r] * es[r] end
        local lo = math.min(f, mz[s])
        if lo < best then acc = acc + (best - lo) end
      end
      out[i] = acc / N + M.TIE * kb_ei[i]
    end
    return out
  end

  function q.add(x)
    local k = #Z
    local mean, var, cov = model.c:cross_cov({x}, Z)
    local row, aa = {}, 0
    for r = 1, k do
      local v = cov[1][r]
      for t = 1, r - 1 do v = v - Lz[r][t] * row[t] end
      row[r] = v / Lz[r][r]
      aa = aa + row[r] * row[r]
    end
    row[k + 1] = math.sqrt(math.max(var[1] - aa, 1e-12 * var[1] + 1e-300))
    Z[k + 1], Lz[k + 1] = x, row
    for s = 1, N do
      local es = e[s]
      local f = mean[1]
      for r = 1, k + 1 do f = f + row[r] * es[r] end
      if f < mz[s] then mz[s] = f end
    end
  end

  return q
end

--- joint(model, best, rng, n, raw, add, encode) -> raw', add': the
-- acquisition and the step of bayes._maximise for a batch of n by greedy q-EI:
-- raw(xs) (the believer's EI at encoded points) becomes q-EI + TIE x raw, add(u)
-- (the believer's step for a chosen unit point) also adds encode(u) to the batch.
function M.joint(model, best, rng, n, raw, add, encode)
  local q = M.qei(model, best, rng, n)
  return function(xs) return q.raw(xs, raw(xs)) end, function(u)
    add(u)
    q.add(encode(u))
  end
end

return M
