-- tests/bench/search_regret_run.lua -- the runner shared by search_regret.lua and
-- search_highdim.lua: each problem at each budget over seeds 1..seeds, dl.search bayes
-- with the extra options, s:suggest(batch or 1) with every point observed before the next
-- ask; prints a markdown table of the median and 90th percentile of the simple regret at
-- the reported best, a digest of the suggestions (equal digests: the same suggestions)
-- and the CPU seconds per problem.
--   dofile("tests/bench/search_regret_run.lua"){problems =, budgets =, seeds =, only =, extra =, note =}
local S = require("dlua").search

local function pct(v, p)
  v = {table.unpack(v)}
  table.sort(v)
  local h = (#v - 1) * p + 1
  local lo = math.floor(h)
  return v[lo] + (h - lo) * ((v[lo + 1] or v[lo]) - v[lo])
end

local function g3(x)
  if x == 0 then return "0" end
  if math.abs(x) >= 0.01 and math.abs(x) < 1000 then return (string.format("%.3g", x)) end
  return (string.format("%.2e", x))
end

return function(o)
  local PROBLEMS, BUDGETS, seeds, only, EXTRA, note = o.problems, o.budgets, o.seeds, o.only, o.extra, o.note
  print(string.format("simple regret of dl.search bayes at the reported best, seeds 1..%d: median / p90%s", seeds,
    (note and note ~= "") and " " .. note or ""))
  local head, sep = {"problem"}, {"---"}
  for _, b in ipairs(BUDGETS) do
    head[#head + 1] = string.format("@%d median | @%d p90", b, b)
    sep[#sep + 1] = "---|---"
  end
  print("| " .. table.concat(head, " | ") .. " | digest | CPU s |")
  print("|" .. table.concat(sep, "|") .. "|---|---|")
  for _, pr in ipairs(PROBLEMS) do
    if only == pr.name or (not only and not pr.large) then
      local t0 = os.clock()
      local res, digest = {}, 0
      for _, b in ipairs(BUDGETS) do res[b] = {} end
      for seed = 1, seeds do
        local o = {algorithm = "bayes", seed = seed, mode = "min"}
        for k, v in pairs(EXTRA) do o[k] = v end
        local s = S.suggester(pr.space, o)
        local n = 0
        for _, b in ipairs(BUDGETS) do
          while n < b do
            local batch = s:suggest(math.min(pr.batch or 1, b - n))
            for _, sg in ipairs(batch) do
              for k = 1, #sg.u do digest = digest + sg.u[k] * (k + n) end
              n = n + 1
            end
            for _, sg in ipairs(batch) do s:observe(sg, pr.f(sg.hp)) end
          end
          res[b][seed] = pr.f(s:best().hp) - pr.minimum
        end
      end
      local cells = {pr.name}
      for _, b in ipairs(BUDGETS) do cells[#cells + 1] = g3(pct(res[b], 0.5)) .. " | " .. g3(pct(res[b], 0.9)) end
      print(string.format("| %s | %.17g | %.0f |", table.concat(cells, " | "), digest, os.clock() - t0))
      io.stdout:flush()
    end
  end
end
