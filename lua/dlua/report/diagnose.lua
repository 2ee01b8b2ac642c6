--- dlua.report.diagnose: the playbook's checklist for a finished study (section 2.5,
-- "extracting insight from experimental results", and section 3 on the number
-- of steps), answered from the stored data.
--
--   local findings, text = dl.diagnose("runs/fashion-mnist-optimizer")
--   for _, f in ipairs(findings) do print(f.level, f.check, f.message) end
--   dl.diagnose(dir, {metric = "valid/loss", aggregate = "final", quiet = true})
--
-- Each finding is {check =, level = "warn" | "note" | "ok", message =, trials =
-- {ids}, data = {...the numbers}}: "warn" is a problem to fix before trusting
-- the study, "note" is worth acting on, "ok" says the check ran and found
-- nothing. The checks, with the thresholds the playbook leaves open (engine
-- choices, docs/api/report.md):
--   boundary      best trial of each scientific value in the outer 10% of a searched
--                 dimension (its sampling scale), with the direction to expand; best
--                 trial next to a region where every trial is infeasible
--   infeasible    fraction of infeasible trials (warn at 25% or more), and buckets of a
--                 dimension where at least half are infeasible
--   overfitting   validation loss of a best trial rising > 10% above its minimum after it
--   variance      detrended std of the objective over the last quarter of evals (at least
--                 3) above 1% of its mean
--   training      EMA-smoothed training loss rising over 5 consecutive log points, by
--                 more than 5% and more than 6 x the smoothed series' own noise
--   steps         still improving: the last 25% of steps brought > 10% of the total gain;
--                 saturated: the last 50% brought < 1% of it
--   best_step     best checkpoint steps / max steps: all below 0.1 (too many steps) or
--                 three quarters of trials above 0.75 (train longer)
--   input         trials input-bound: the median share of a trial's time spent waiting for
--                 the input pipeline (result.json's cost.input_fraction) at 10% or more (note
--                 from 5%), with the trials that waited most (playbook: an input-bound step
--                 wastes the accelerator; add workers, prefetch, cache the preprocessing)
--   trials        fewer than 8 trials per nuisance dimension, and the bootstrap of the
--                 best value vs the number of trials: flattened when the second half of
--                 the trials moved the median by at most 10% of its gain from 1 trial (or
--                 by less than the eval noise of the group's best trial: its detrended late
--                 std, or for an accuracy the binomial standard error on the eval set)
local util = require "dlua.util"
local A = require "dlua.report.analysis"
local fmtn = require("dlua.report.svg").format_number
local prune = require "dlua.study.prune"
local algorithms = require "dlua.search.algorithms"
local check_input = require "dlua.report.input_check"

local M = {}

M.THRESHOLDS = {
  boundary = 0.1, infeasible_warn = 0.25, infeasible_bucket = 0.5, overfit_rise = 0.10, variance_rel = 0.01,
  rising_points = 5, improving_gain = 0.10, saturated_gain = 0.01, early_best = 0.10, late_best = 0.75,
  late_share = 0.75, trials_per_dim = 8, flat_gain = 0.10, bootstrap_samples = 500, bootstrap_min = 4,
}
local TH = M.THRESHOLDS

local function list_ids(trials, max)
  max = max or 6
  local ids = {}
  for i, t in ipairs(trials) do
    if i > max then ids[#ids + 1] = string.format("and %d more", #trials - max); break end
    ids[#ids + 1] = type(t) == "table" and t.id or t
  end
  return table.concat(ids, ", ")
end

local function ids_of(trials)
  local out = {}
  for i, t in ipairs(trials) do out[i] = t.id end
  return out
end

local fv = util.fmt4

local function hpv(v) return type(v) == "number" and fv(v) or tostring(v) end

local function dim_range(dim)
  if dim.values then
    local l = {}
    for i, v in ipairs(dim.values) do l[i] = hpv(v) end
    return "{" .. table.concat(l, ", ") .. "}"
  end
  return string.format("[%s, %s]%s", fv(dim.lo), fv(dim.hi), dim.log and " (log scale)" or "")
end

-- the best search trial of a group (nil when none is feasible)
local function group_best(d, gi)
  for _, t in ipairs(d.ranking) do if t.group == gi and t.kind ~= "seed" then return t end end
end

local function group_label(d, gi)
  local g = d.groups[gi]
  if not g or #d.groups <= 1 then return "" end
  return " of " .. g.label .. ","
end

------------------------------------------------------------------ the checks

local function check_boundary(d, out)
  local found = false
  for gi in ipairs(d.groups) do
    local best = group_best(d, gi)
    if best then
      for _, dim in ipairs(d.dims) do
        local v = best.hp[dim.name]
        if A.active(dim, best.hp) and dim.kind ~= "choice" and not (dim.values and not dim.ordered and not dim.observed) then
          local side, u
          if dim.values then
            if #dim.values >= 3 then
              if v == dim.values[1] then side = "lower" elseif v == dim.values[#dim.values] then side = "upper" end
              u = A.unit(dim, v)
            end
          elseif dim.observed then
            -- no search space known: the edge of the values tried (at least 3 distinct ones)
            if (dim.distinct or 0) >= 3 and type(v) == "number" then
              if v == dim.lo then side = "lower" elseif v == dim.hi then side = "upper" end
              u = A.unit(dim, v)
            end
          elseif dim.integer and not dim.log and dim.hi - dim.lo + 1 <= 10 then
            if v == dim.lo then side = "lower" elseif v == dim.hi then side = "upper" end
            u = A.unit(dim, v)
          else
            u = A.unit(dim, v)
            if u and u >= 1 - TH.boundary then side = "upper" elseif u and u <= TH.boundary then side = "lower" end
          end
          if side then
            found = true
            local what = dim.observed and "the values tried" or "the search space"
            out[#out + 1] = {check = "boundary", level = "warn", trials = {best.id},
              data = {dim = dim.path, value = v, side = side, position = u, lo = dim.lo, hi = dim.hi},
              message = string.format("%s: the best trial%s %s (%s %s) has %s = %s, at the %s edge of %s %s%s: " ..
                "%s the %s bound and rerun", dim.path, group_label(d, gi), best.id, d.metric, fv(best.value), dim.name,
                hpv(v), side, what, dim_range(dim), u and string.format(" (at %.2f of its range)", u) or "",
                side == "upper" and "raise" or "lower", side)}
          end
          -- playbook 2.5: every trial beyond the best in some direction is infeasible
          if type(v) == "number" and not dim.values then
            for _, dir in ipairs({"upper", "lower"}) do
              local beyond, bad = {}, 0
              for _, t in ipairs(A.search_trials(d, gi)) do
                local x = t.hp[dim.name]
                if A.active(dim, t.hp) and type(x) == "number" and not t.pruned and
                  ((dir == "upper" and x > v) or (dir == "lower" and x < v)) then
                  beyond[#beyond + 1] = t
                  if not t.feasible then bad = bad + 1 end
                end
              end
              if #beyond >= 1 and bad == #beyond then
                found = true
                local lr = dim.name:match("lr") or dim.name:match("learning_rate")
                out[#out + 1] = {check = "boundary", level = "warn", trials = ids_of(beyond),
                  data = {dim = dim.path, value = v, side = dir, infeasible = #beyond},
                  message = string.format("%s: the best trial%s %s (%s = %s) is next to the infeasible region: all %d " ..
                    "trial(s) with %s %s %s are infeasible (%s)%s", dim.path, group_label(d, gi), best.id, dim.name, hpv(v),
                    #beyond, dim.name, dir == "upper" and "above" or "below", hpv(v), list_ids(beyond),
                    lr and dir == "upper" and "; instability may be what limits the learning rate: try warmup " ..
                      "(recipes/warmup.lua) or clipping (recipes/clipping.lua)" or "")}
              end
            end
          end
        end
      end
    end
  end
  if not found then
    local n = 0
    for _ in ipairs(d.dims) do n = n + 1 end
    out[#out + 1] = {check = "boundary", level = "ok", trials = {}, data = {dims = n},
      message = n > 0 and string.format("no best trial near a boundary of the %d searched dimension(s)", n)
        or "no searched dimensions to check"}
  end
end

local function check_infeasible(d, out)
  -- a pruned trial (stopped early by the study's scheduler) is neither feasible nor infeasible
  local search, pruned = {}, 0
  for _, t in ipairs(A.search_trials(d)) do if t.pruned then pruned = pruned + 1 else search[#search + 1] = t end end
  local bad = {}
  for _, t in ipairs(search) do if not t.feasible then bad[#bad + 1] = t end end
  local frac = #search > 0 and #bad / #search or 0
  local level = #bad == 0 and "ok" or (frac >= TH.infeasible_warn and "warn" or "note")
  local msg = string.format("%d of %d trials infeasible (%.0f%%)%s", #bad, #search, 100 * frac,
    pruned > 0 and string.format("; %d pruned trial(s) not counted", pruned) or "")
  if #bad > 0 then
    local why = {}
    for _, t in ipairs(bad) do why[#why + 1] = string.format("%s %s", t.id, t.status) end
    msg = msg .. ": " .. list_ids(why)
    if level == "warn" then msg = msg .. "; change or reparameterise the search space (many infeasible trials can " ..
      "also mean a bug)" end
  end
  local per_group = {}
  for gi, g in ipairs(d.groups) do
    local n, b = 0, 0
    for _, t in ipairs(search) do if t.group == gi then n = n + 1; if not t.feasible then b = b + 1 end end end
    per_group[gi] = {label = g.label, trials = n, infeasible = b}
  end
  out[#out + 1] = {check = "infeasible", level = level, trials = ids_of(bad),
    data = {infeasible = #bad, trials = #search, fraction = frac, groups = per_group}, message = msg}
  -- per bucket of each continuous dimension (4 buckets of the sampling scale)
  for _, dim in ipairs(d.dims) do
    if not dim.values and dim.lo and dim.hi and dim.hi > dim.lo then
      local nb = 4
      local buckets = {}
      for b = 1, nb do buckets[b] = {n = 0, bad = {}} end
      for _, t in ipairs(search) do
        if A.active(dim, t.hp) then
          local b = A.bucket(dim, t.hp[dim.name], nb)
          if b then
            buckets[b].n = buckets[b].n + 1
            if not t.feasible then table.insert(buckets[b].bad, t) end
          end
        end
      end
      for b = 1, nb do
        local bk = buckets[b]
        if bk.n >= 2 and #bk.bad / bk.n >= TH.infeasible_bucket then
          out[#out + 1] = {check = "infeasible", level = "warn", trials = ids_of(bk.bad),
            data = {dim = dim.path, bucket = b, lo = A.bucket_edge(dim, b - 1, nb), hi = A.bucket_edge(dim, b, nb),
                    trials = bk.n, infeasible = #bk.bad},
            message = string.format("%s in [%s, %s]: %d of %d trials infeasible (%s)", dim.path,
              fv(A.bucket_edge(dim, b - 1, nb)), fv(A.bucket_edge(dim, b, nb)), #bk.bad, bk.n, list_ids(bk.bad))}
        end
      end
    end
  end
end

local function check_overfitting(d, out, best)
  local lm = A.loss_metric(d)
  local flagged = false
  local checked = 0
  for _, t in ipairs(best) do
    local metric, mode = lm, "min"
    local xs, ys = {}, {}
    if lm then xs, ys = A.curve(t, lm) end
    if #ys < 3 and not d.metric:match("^train/") then metric, mode = d.metric, d.mode; xs, ys = A.curve(t, d.metric) end
    if #ys >= 3 then
      checked = checked + 1
      local bi = 1
      for i = 2, #ys do if A.better(ys[i], ys[bi], mode) then bi = i end end
      if bi < #ys then
        local last, bv = ys[#ys], ys[bi]
        local rise = mode == "min" and (last - bv) or (bv - last)
        local rel = rise / math.max(math.abs(bv), 1e-12)
        if rel > TH.overfit_rise then
          flagged = true
          out[#out + 1] = {check = "overfitting", level = "warn", trials = {t.id},
            data = {metric = metric, best_step = xs[bi], best = bv, last_step = xs[#xs], last = last, rise = rel},
            message = string.format("%s: %s %s from %s at step %d to %s at step %d (%+.0f%% of its best): " ..
              "problematic overfitting; add or re-tune regularisation (weight decay, label smoothing, dropout) " ..
              "before comparing", t.id, metric, mode == "min" and "rises" or "falls", fv(bv), xs[bi], fv(last), xs[#xs],
              100 * rel)}
        end
      end
    end
  end
  if not flagged then
    out[#out + 1] = {check = "overfitting", level = "ok", trials = ids_of(best), data = {checked = checked},
      message = checked > 0 and string.format("no validation loss rising after its minimum in the best trial(s) (%s)",
        list_ids(best)) or "too few evals to look for overfitting (3 needed)"}
  end
end

-- the gap between the two best groups, to set the late noise against
local function group_gap(d)
  local vals = {}
  for gi in ipairs(d.groups) do
    local b = group_best(d, gi)
    if b then vals[#vals + 1] = b.value end
  end
  if #vals < 2 then return nil end
  table.sort(vals, function(a, b) return A.better(a, b, d.mode) end)
  return math.abs(vals[1] - vals[2])
end

local function check_variance(d, out, best)
  local flagged, checked = false, 0
  local gap = group_gap(d)
  local stats = {}
  -- the validation metric's variance (a training-log objective: the validation loss instead)
  local metric = d.metric
  if metric:match("^train/") then metric = A.loss_metric(d); gap = nil end
  for _, t in ipairs(best) do
    local xs, ys = A.curve(t, metric)
    local k = math.max(3, math.ceil(#ys / 4))
    if #ys >= 4 then
      checked = checked + 1
      local wx, wy = {}, {}
      for i = #ys - k + 1, #ys do wx[#wx + 1] = xs[i]; wy[#wy + 1] = ys[i] end
      local _, _, sd = A.linear_fit(wx, wy)
      local mean = A.mean(wy)
      local rel = sd and sd / math.max(math.abs(mean), 1e-12) or 0
      stats[#stats + 1] = {trial = t.id, std = sd, evals = k, relative = rel}
      if sd and rel > TH.variance_rel then
        flagged = true
        out[#out + 1] = {check = "variance", level = "warn", trials = {t.id},
          data = {metric = metric, std = sd, evals = k, from_step = wx[1], relative = rel, gap = gap},
          message = string.format("%s: %s varies by %s (detrended std over the last %d evals, from step %d; %.1f%% of " ..
            "its mean)%s: high step-to-step variance late in training makes comparisons noisy; consider a larger " ..
            "batch, a larger validation set, lr decay or weight averaging (ema)", t.id, metric, fv(sd), k, wx[1],
            100 * rel, gap and string.format(", against a gap of %s between the two best scientific values", fv(gap)) or "")}
      end
    end
  end
  if not flagged then
    local parts = {}
    for _, s in ipairs(stats) do parts[#parts + 1] = string.format("%s %s", s.trial, s.std and fv(s.std) or "-") end
    out[#out + 1] = {check = "variance", level = "ok", trials = ids_of(best), data = {trials = stats},
      message = checked > 0 and string.format("late variance of %s is low (detrended std over the last quarter of " ..
        "evals: %s)", metric, table.concat(parts, ", ")) or "too few evals to measure late variance (4 needed)"}
  end
end

local function check_training(d, out, best)
  local flagged = false
  for _, t in ipairs(best) do
    local xs, ys = A.curve(t, "train/loss")
    if #ys >= TH.rising_points + 1 then
      local s, sm = nil, {}
      for i, y in ipairs(ys) do s = s and (0.7 * s + 0.3 * y) or y; sm[i] = s end
      local run_start, longest = 1, {0, 1, 1}
      for i = 2, #sm do
        if sm[i] <= sm[i - 1] then run_start = i end
        if i - run_start > longest[1] then longest = {i - run_start, run_start, i} end
      end
      local n, a, b = longest[1], longest[2], longest[3]
      -- the noise of the smoothed series (batch-to-batch variation): a rise must stand out of it
      local m, ss = 0, 0
      for i = 2, #ys do m, ss = m + 1, ss + (ys[i] - sm[i - 1]) ^ 2 end
      local noise = m > 1 and math.sqrt(ss / (m - 1)) * math.sqrt(0.3 / 1.7) or 0
      if n >= TH.rising_points and sm[b] - sm[a] > math.max(0.05 * sm[a], 6 * noise) then
        flagged = true
        out[#out + 1] = {check = "training", level = "warn", trials = {t.id},
          data = {from_step = xs[a], to_step = xs[b], from = sm[a], to = sm[b], points = n},
          message = string.format("%s: the smoothed training loss rises from %s at step %d to %s at step %d (%d log " ..
            "points in a row): a rising training loss usually means a pipeline bug or an instability", t.id, fv(sm[a]),
            xs[a], fv(sm[b]), xs[b], n)}
      end
    end
  end
  if not flagged then
    out[#out + 1] = {check = "training", level = "ok", trials = ids_of(best), data = {},
      message = "no sustained rise of the training loss in the best trial(s)"}
  end
end

-- best-so-far value of a curve at step s
local function best_until(xs, ys, s, mode)
  local b
  for i = 1, #xs do if xs[i] <= s and A.better(ys[i], b, mode) then b = ys[i] end end
  return b
end

local function check_steps(d, out, best)
  local any, checked = false, 0
  for _, t in ipairs(best) do
    local xs, ys = A.curve(t, d.metric)
    local T = t.max_steps or xs[#xs]
    if #ys >= 3 and T and T > 0 then
      checked = checked + 1
      local final = best_until(xs, ys, math.huge, d.mode)
      local first = ys[1]
      local total = math.abs(final - first)
      local at75 = best_until(xs, ys, 0.75 * T, d.mode)
      local at50 = best_until(xs, ys, 0.5 * T, d.mode)
      if total > 0 and at75 then
        local gain75 = math.abs(final - at75) / total
        local txs, tys = A.curve(t, "train/loss")
        local tl75, tlend
        for i = 1, #txs do
          if txs[i] <= 0.75 * T then tl75 = tys[i] end
          tlend = tys[i]
        end
        local tnote = (tl75 and tlend) and string.format("; training loss %s -> %s over the same steps", fv(tl75), fv(tlend)) or ""
        if gain75 > TH.improving_gain then
          any = true
          out[#out + 1] = {check = "steps", level = "warn", trials = {t.id},
            data = {metric = d.metric, at_75 = at75, final = final, share = gain75, max_steps = T},
            message = string.format("%s: still improving at the end: the last 25%% of its %d steps moved %s from %s to " ..
              "%s (%.0f%% of its total gain)%s; likely compute-bound: consider more steps (or another schedule)",
              t.id, T, d.metric, fv(at75), fv(final), 100 * gain75, tnote)}
        elseif at50 and math.abs(final - at50) / total < TH.saturated_gain then
          any = true
          local sat
          for i = 1, #xs do
            if math.abs(final - best_until(xs, ys, xs[i], d.mode)) / total < TH.saturated_gain then sat = xs[i]; break end
          end
          out[#out + 1] = {check = "steps", level = "note", trials = {t.id},
            data = {metric = d.metric, saturated_at = sat, max_steps = T, share = math.abs(final - at50) / total},
            message = string.format("%s: saturated by step %d of %d (%s %s; the second half of training added %.1f%% " ..
              "of the gain)%s: not compute-bound, fewer steps may suffice", t.id, sat or 0, T, d.metric, fv(final),
              100 * math.abs(final - at50) / total, tnote)}
        end
      end
    end
  end
  if not any then
    out[#out + 1] = {check = "steps", level = "ok", trials = ids_of(best), data = {},
      message = checked > 0 and string.format("the best trial(s) (%s) neither still improving at the end nor saturated " ..
        "early", list_ids(best)) or "too few evals to tell still improving from saturated (3 needed)"}
  end
end

local function check_best_step(d, out)
  local fr, steps = {}, {}
  local every
  for _, t in ipairs(A.search_trials(d)) do
    if t.feasible and t.max_steps and t.max_steps > 0 then
      -- the retrospectively best checkpoint's step, whatever the aggregation ranks by
      local xs, ys = A.curve(t, d.metric)
      local bi
      for i = 1, #ys do if bi == nil or A.better(ys[i], ys[bi], d.mode) then bi = i end end
      if bi then
        fr[#fr + 1] = xs[bi] / t.max_steps
        steps[#steps + 1] = t
      end
      if #xs >= 2 then every = every or (xs[2] - xs[1]) end
    end
  end
  if #fr == 0 then return end
  local early, late = 0, 0
  for _, f in ipairs(fr) do
    if f < TH.early_best then early = early + 1 end
    if f > TH.late_best then late = late + 1 end
  end
  local T = steps[1].max_steps
  local counts = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
  for _, f in ipairs(fr) do local b = math.min(10, math.floor(f * 10) + 1); counts[b] = counts[b] + 1 end
  local data = {fractions = fr, histogram = counts, early = early, late = late, eval_every = every, max_steps = T}
  local res = every and string.format(" (evals every %d of %d steps: resolution %.2g)", every, T, every / T) or ""
  if early == #fr then
    out[#out + 1] = {check = "best_step", level = "warn", trials = ids_of(steps), data = data,
      message = string.format("the best checkpoint is in the first 10%% of training in all %d trials%s: max_train_steps " ..
        "is far too high; fewer steps will do", #fr, res)}
  elseif late / #fr >= TH.late_share then
    out[#out + 1] = {check = "best_step", level = "note", trials = ids_of(steps), data = data,
      message = string.format("the best checkpoint is in the last 25%% of training in %d of %d trials%s: training " ..
        "longer (and re-tuning the decay schedule) may help", late, #fr, res)}
  else
    out[#out + 1] = {check = "best_step", level = "ok", trials = ids_of(steps), data = data,
      message = string.format("best checkpoint steps / max steps: %d of %d in the first 10%%, %d in the last 25%%%s",
        early, #fr, late, res)}
  end
end

local function check_trials(d, out)
  for gi, g in ipairs(d.groups) do
    local trials = A.search_trials(d, gi)
    local dims = 0
    if d.kind == "study" then
      for _, dim in ipairs(d.dims) do
        for _, t in ipairs(trials) do if A.active(dim, t.hp) then dims = dims + 1; break end end
      end
    else
      dims = #d.dims
    end
    local vals = {}
    for _, t in ipairs(trials) do vals[#vals + 1] = t.feasible and t.value or false end
    local need = TH.trials_per_dim * math.max(dims, 1)
    local bs = #vals >= TH.bootstrap_min and A.bootstrap(vals, {mode = d.mode, samples = TH.bootstrap_samples, seed = gi})
      or nil
    local data = {trials = #trials, dims = dims, recommended = need, bootstrap = bs}
    local parts = {}
    local flat
    if bs then
      local first, last = bs[1], bs[#bs]
      local half
      local hk = math.ceil(#trials / 2)
      for _, b in ipairs(bs) do if b.k <= hk then half = b end end
      for _, b in ipairs(bs) do
        if b.median then parts[#parts + 1] = string.format("%s at %d", fv(b.median), b.k) end
      end
      if first.median and last.median and half and half.median then
        local total = math.abs(last.median - first.median)
        local tail = math.abs(last.median - half.median)
        -- the eval noise of the group's best trial: a smaller gain is not evidence that more trials help
        local noise = 0
        local gb = group_best(d, gi)
        if gb then
          local xs, ys = A.curve(gb, d.metric)
          local k = math.max(3, math.ceil(#ys / 4))
          if #ys >= 4 then
            local wx, wy = {}, {}
            for i = #ys - k + 1, #ys do wx[#wx + 1] = xs[i]; wy[#wy + 1] = ys[i] end
            noise = select(3, A.linear_fit(wx, wy)) or 0
          end
          -- an accuracy on n examples has a standard error sqrt(p (1 - p) / n) (n from the per-class counts)
          local set = d.metric:match("^(.-)/accuracy$")
          local h = set and A.history(gb)
          local last = h and h.eval[#h.eval]
          local pc = last and last[set .. "/per_class"]
          if type(pc) == "table" and type(pc.total) == "table" then
            local n = 0
            for _, c in ipairs(pc.total) do n = n + c end
            if n > 0 then noise = math.max(noise, math.sqrt(gb.value * (1 - gb.value) / n)) end
          end
        end
        flat = total == 0 or tail <= math.max(TH.flat_gain * total, noise)
        data.flattened, data.tail_gain, data.total_gain, data.half_k, data.noise = flat, tail, total, half.k, noise
        parts = {string.format("median best %s vs trials: %s; IQR at %d: [%s, %s]; trials %d to %d moved the median " ..
          "by %s (%.0f%% of the gain from 1 trial%s): %s", d.metric, table.concat(parts, ", "), last.k,
          fv(last.q1), fv(last.q3), half.k, last.k, fv(tail), total > 0 and 100 * tail / total or 0,
          noise > 0 and string.format("; eval noise %s", fv(noise)) or "",
          flat and "flattened" or "not flattened, more trials should still help")}
      end
    end
    local alg = d.record and d.record.algorithm
    -- the trial count is the list's (a manual study) or the algorithm's (a finite row: grid), not a budget
    local row = alg and algorithms.ALGORITHMS[alg]
    local planned = (d.record and d.record.manual ~= nil) or (row and row.finite) or false
    local few = #trials < need and not planned
    local level = (few or flat == false) and "warn" or "ok"
    local msg = string.format("%s%d trials for %d nuisance dimension(s) (%s %d)%s", #d.groups > 1 and (g.label .. ": ") or "",
      #trials, dims, planned and (alg .. " study; a search would want") or (few and "too few: at least" or "at least"), need,
      #parts > 0 and ("; bootstrap " .. parts[1]) or
      string.format("; no bootstrap below %d trials", TH.bootstrap_min))
    out[#out + 1] = {check = "trials", level = level, trials = ids_of(trials), data = data, message = msg}
    -- density (playbook 2.5): trials within 1% of the group's best
    local gb = group_best(d, gi)
    if gb then
      local near = 0
      for _, t in ipairs(trials) do
        if t.feasible and math.abs(t.value - gb.value) <= 0.01 * math.max(math.abs(gb.value), 1e-12) then near = near + 1 end
      end
      data.near_best = near
    end
  end
end

-- pruned trials (dlua.study.prune): how many; a warning when an exploration study prunes
local function check_pruning(d, out)
  local rec = d.record or {}
  if not rec.prune then return end
  local ids, n = {}, 0
  for _, t in ipairs(A.search_trials(d)) do
    n = n + 1
    if t.status == "pruned" then ids[#ids + 1] = t.id end
  end
  local w = #ids > 0 and prune.exploration_warning({prune = rec.prune, algorithm = rec.algorithm})
  out[#out + 1] = {check = "pruning", level = w and "warn" or "ok", trials = ids,
    message = string.format("%d of %d trials pruned (%s)%s", #ids, n, rec.prune.algorithm, w and ("; " .. w) or ""),
    data = {pruned = #ids, trials = n, algorithm = rec.prune.algorithm}}
end

------------------------------------------------------------------- entry

--- Runs every check on loaded data (dlua.report.analysis.load); returns the findings.
function M.check(d)
  local out = {}
  local best = A.best_trials(d, 3)
  check_boundary(d, out)
  check_infeasible(d, out)
  check_pruning(d, out)
  check_overfitting(d, out, best)
  check_variance(d, out, best)
  check_training(d, out, best)
  check_steps(d, out, best)
  check_best_step(d, out)
  check_input(d, out)
  if d.kind ~= "run" then check_trials(d, out) end
  return out
end

--- The findings as text: a heading, then one line per finding.
function M.format(d, findings)
  local w, n = 0, 0
  for _, f in ipairs(findings) do
    if f.level == "warn" then w = w + 1 elseif f.level == "note" then n = n + 1 end
  end
  local what = d.kind == "study" and "study " .. d.name or (d.kind == "run" and "run " .. d.dir or "runs in " .. d.dir)
  local lines = {string.format("diagnosis of %s by %s (%s over evals, %s): %d warning(s), %d note(s)", what, d.metric,
    d.aggregate, d.mode, w, n)}
  for _, f in ipairs(findings) do
    lines[#lines + 1] = string.format("  [%s]%s %s: %s", f.level, string.rep(" ", 4 - #f.level), f.check, f.message)
  end
  return table.concat(lines, "\n")
end

--- dl.diagnose(dir [, {metric =, mode =, aggregate = "best" | "final", quiet =}])
-- --> findings, text. Loads a study directory, a run directory or a directory
-- of runs, runs the checklist and prints it (unless quiet).
-- @usage local findings = dl.diagnose("runs/fashion-mnist-optimizer", {aggregate = "final"})
function M.diagnose(dir, opts)
  opts = util.check_options("dl.diagnose", opts, {metric = "string", mode = "string", aggregate = "string",
    quiet = "boolean"}, 2)
  local ok, d = pcall(A.load, dir, opts)
  if not ok then error("dl.diagnose: " .. tostring(d), 2) end
  local findings = M.check(d)
  local text = M.format(d, findings)
  if not opts.quiet then print(text) end
  return findings, text, d
end

return M
