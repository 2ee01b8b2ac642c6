-- tests/bench/search_problems.lua -- the test functions of the search benchmarks
-- (search_regret.lua, search_cost.lua), on plain lists of numbers:
--   local P = dofile("tests/bench/search_problems.lua")
--   P.branin(x1, x2), P.hartmann6(x), P.ackley(x), P.rosenbrock(x), P.levy(x)
local P = {}

function P.branin(x1, x2)               -- minimum 0.397887 on [-5, 10] x [0, 15]
  local b, c, t = 5.1 / (4 * math.pi ^ 2), 5 / math.pi, 1 / (8 * math.pi)
  return (x2 - b * x1 ^ 2 + c * x1 - 6) ^ 2 + 10 * (1 - t) * math.cos(x1) + 10
end

local ALPHA = {1.0, 1.2, 3.0, 3.2}
local A = {{10, 3, 17, 3.5, 1.7, 8}, {0.05, 10, 17, 0.1, 8, 14}, {3, 3.5, 1.7, 10, 17, 8}, {17, 8, 0.05, 10, 0.1, 14}}
local PP = {{1312, 1696, 5569, 124, 8283, 5886}, {2329, 4135, 8307, 3736, 1004, 9991},
            {2348, 1451, 3522, 2883, 3047, 6650}, {4047, 8828, 8732, 5743, 1091, 381}}
P.HARTMANN6_MIN, P.HARTMANN6_ARGMIN = -3.32237, {0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573}

function P.hartmann6(x)                 -- on [0, 1]^6
  local f = 0
  for i = 1, 4 do
    local s = 0
    for j = 1, 6 do s = s + A[i][j] * (x[j] - PP[i][j] * 1e-4) ^ 2 end
    f = f - ALPHA[i] * math.exp(-s)
  end
  return f
end

function P.ackley(x)                    -- minimum 0 at 0
  local s1, s2 = 0, 0
  for j = 1, #x do s1, s2 = s1 + x[j] ^ 2, s2 + math.cos(2 * math.pi * x[j]) end
  return -20 * math.exp(-0.2 * math.sqrt(s1 / #x)) - math.exp(s2 / #x) + 20 + math.exp(1)
end

function P.rosenbrock(x)                -- minimum 0 at (1, ..., 1)
  local f = 0
  for j = 1, #x - 1 do f = f + 100 * (x[j + 1] - x[j] ^ 2) ^ 2 + (1 - x[j]) ^ 2 end
  return f
end

function P.levy(x)                      -- minimum 0 at (1, ..., 1), on [-10, 10]^d
  local d = #x
  local function w(j) return 1 + (x[j] - 1) / 4 end
  local f = math.sin(math.pi * w(1)) ^ 2 + (w(d) - 1) ^ 2 * (1 + math.sin(2 * math.pi * w(d)) ^ 2)
  for j = 1, d - 1 do f = f + (w(j) - 1) ^ 2 * (1 + 10 * math.sin(math.pi * w(j) + 1) ^ 2) end
  return f
end

return P
