--- dlua.report.input_check: dl.diagnose's "input" check (dlua.report.diagnose lists
-- it with the others): were a study's trials input-bound? Each finished trial's
-- result.json says what share of its time it waited for its input pipeline
-- (cost.input_fraction); a median of 10% or more is a warning, 5% a note, naming
-- the trials that waited most and what to do (playbook: the input pipeline).
local A = require "dlua.report.analysis"

local TH = {warn = 0.10, note = 0.05}

-- the share of each finished trial's time spent waiting for input (its result.json)
local function check_input(d, out)
  local shares, by = {}, {}
  for _, t in ipairs(d.trials or {}) do
    local r = t.dir and A.read_json(t.dir .. "/result.json")
    local f = type(r) == "table" and type(r.cost) == "table" and r.cost.input_fraction
    if type(f) == "number" and f == f then
      shares[#shares + 1] = f
      by[#by + 1] = {id = t.id, share = f}
    end
  end
  if #shares == 0 then return end
  table.sort(shares)
  local med = shares[(#shares + 1) // 2]
  table.sort(by, function(a, b) return a.share > b.share end)
  local worst = {}
  for i = 1, math.min(3, #by) do worst[i] = string.format("%s %.0f%%", by[i].id, 100 * by[i].share) end
  local level = med >= TH.warn and "warn" or (med >= TH.note and "note" or "ok")
  local msg
  if level == "ok" then
    msg = string.format("trials waited for input %.1f%% of their time (median of %d; most: %s)", 100 * med, #shares,
      table.concat(worst, ", "))
  else
    msg = string.format("trials were input-bound: the median trial waited for its input pipeline %.0f%% of its time " ..
      "(%d trials; most: %s); give the pipeline more workers(n) and prefetch(n), or cache(path) the deterministic " ..
      "preprocessing, so the steps, not the input, set the pace", 100 * med, #shares, table.concat(worst, ", "))
  end
  local ids = {}
  for i = 1, math.min(6, #by) do ids[i] = by[i].id end
  out[#out + 1] = {check = "input", level = level, trials = level == "ok" and {} or ids, message = msg,
    data = {median = med, trials = #shares, max = by[1].share}}
end

return check_input
