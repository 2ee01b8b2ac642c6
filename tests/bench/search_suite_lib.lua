-- tests/bench/search_suite_lib.lua -- the search benchmark suite's statistics, verdict and table
-- (tests/bench/search_suite.lua runs it; tests/lua/search_suite_spec.lua checks it on crafted
-- inputs). Results per problem: {kind =, budgets = {label...}, values = {[label] = {per run}}}
-- for dlua (a pruning problem's also rules = {[name] = values}, chosen = {[label] = the rule the
-- row shows, the best by median as for Optuna's pruners}), and the Optuna JSON's {kind =, budgets =, samplers = {[name] = {[label] = {...}}}}.
-- "single" and "prune" problems are regrets (lower better): the tail is the 90th percentile;
-- "multi" problems are hypervolumes (higher better): the tail is the 10th percentile (the
-- table's "p90" column holds it for those rows, and the verdict says "p10").
local L = {}

--- The p-quantile of v by linear interpolation between order statistics (numpy's default).
function L.quantile(v, p)
  assert(#v > 0, "quantile: no values")
  local s = {table.unpack(v)}
  table.sort(s)
  local h = (#s - 1) * p + 1
  local lo = math.floor(h)
  return s[lo] + (h - lo) * ((s[lo + 1] or s[lo]) - s[lo])
end

function L.higher_better(kind) return kind == "multi" end

--- median and tail (p90 of a regret, p10 of a hypervolume) of a list of results
function L.summary(v, kind)
  return L.quantile(v, 0.5), L.quantile(v, L.higher_better(kind) and 0.1 or 0.9)
end

-- a is better than b (strictly) in the problem's direction
local function better(a, b, higher) if higher then return a > b end return a < b end

--- The best Optuna sampler at a budget by median (ties: by tail, then by name):
-- name, median, tail.
function L.best_sampler(samplers, label, kind)
  local higher = L.higher_better(kind)
  local names = {}
  for name in pairs(samplers) do names[#names + 1] = name end
  table.sort(names)
  local bn, bm, bt
  for _, name in ipairs(names) do
    local v = samplers[name][label]
    if v and #v > 0 then
      local m, t = L.summary(v, kind)
      if not bn or better(m, bm, higher) or (m == bm and better(t, bt, higher)) then bn, bm, bt = name, m, t end
    end
  end
  return bn, bm, bt
end

--- "yes" when dlua's median and tail are both at or below the reference's (at or above for a
-- hypervolume), else "no" and what is worse.
function L.verdict(dm, dt, om, ot, kind)
  local higher = L.higher_better(kind)
  local worse = {}
  if better(om, dm, higher) then worse[#worse + 1] = "median" end
  if better(ot, dt, higher) then worse[#worse + 1] = L.higher_better(kind) and "p10" or "p90" end
  if #worse == 0 then return "yes" end
  return "**no** (" .. table.concat(worse, ", ") .. ")"
end

function L.g3(x)
  if x == 0 then return "0" end
  if x == math.huge then return "inf" end
  if math.abs(x) >= 0.01 and math.abs(x) < 1000 then return (string.format("%.3g", x)) end
  return (string.format("%.2e", x))
end

L.HEAD = "| problem | budget | runs | dlua median / p90 | best Optuna sampler (by median) | its median / p90 " ..
  "| dlua at or better on both |"
L.SEP = "|---|---|---|---|---|---|---|"

--- The table's rows (markdown lines) for the problems named in order that have results on
-- both sides; problems missing on one side get a row saying so.
function L.rows(order, dlua, optuna)
  local out = {}
  for _, name in ipairs(order) do
    local d, o = dlua[name], optuna[name]
    if d and not o then
      out[#out + 1] = string.format("| %s | - | - | - | no Optuna results | - | - |", name)
    elseif d then
      for _, label in ipairs(d.budgets) do
        local v = d.values[label]
        local dm, dt = L.summary(v, d.kind)
        local on, om, ot = L.best_sampler(o.samplers, label, d.kind)
        if on then
          local rule = d.chosen and d.chosen[label] and " (" .. d.chosen[label] .. ")" or ""
          out[#out + 1] = string.format("| %s | %s | %d | %s / %s%s | %s | %s / %s | %s |", name, label, #v,
            L.g3(dm), L.g3(dt), rule, on, L.g3(om), L.g3(ot), L.verdict(dm, dt, om, ot, d.kind))
        else
          out[#out + 1] = string.format("| %s | %s | %d | %s / %s | no Optuna results at this budget | - | - |",
            name, label, #v, L.g3(dm), L.g3(dt))
        end
      end
    end
  end
  return out
end

return L
