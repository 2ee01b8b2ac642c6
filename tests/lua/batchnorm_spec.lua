-- dl.nn.BatchNorm and dl.batch_norm against a reference written here with plain loops over
-- nested tables (per statistics set: mean, biased variance, the textbook backward), against
-- finite differences in float64 (dl.autograd.gradcheck runs the kernel's float64 path), and
-- against each other (synced replicas vs one replica over the concatenated batch).
local dl = require "dlua"
local nn = dl.nn

-------------------------------------------------------------------- the reference

-- the groups of one shard of n examples for virtual batch k (1-based {first, last}):
-- consecutive runs of k, the n mod k left over join the last run; n <= k is one group
local function shard_groups(n, k)
  if not k or n <= k then return {{1, n}} end
  local out = {}
  for i = 1, n // k do out[i] = {(i - 1) * k + 1, i * k} end
  out[#out][2] = n
  return out
end

-- statistics sets as lists of example indices; groups[r][g] = the set of group g of replica r
local function ref_sets(N, R, k, sync)
  local per, sets, groups = N // R, {}, {}
  for r = 1, R do
    groups[r] = {}
    for g, run in ipairs(shard_groups(per, k)) do
      local id = sync and g or #sets + 1
      sets[id] = sets[id] or {}
      for n = run[1], run[2] do table.insert(sets[id], (r - 1) * per + n) end
      groups[r][g] = id
    end
  end
  return sets, groups
end

-- the values of example n, channel c of a nested [N][C] or [N][C][H][W] table, as a list of
-- {get, set} positions
local function cells(T, n, c)
  local v = T[n][c]
  if type(v) == "number" then return {{T[n], c}} end
  local out = {}
  for h = 1, #v do for w = 1, #v[h] do out[#out + 1] = {v[h], w} end end
  return out
end

local function deep_copy(t)
  if type(t) ~= "table" then return t end
  local o = {}
  for i, v in ipairs(t) do o[i] = deep_copy(v) end
  return o
end

-- forward and backward over the given sets; gamma/beta lists or nil. Returns y, dx, dgamma,
-- dbeta (nested tables / lists) and per-set {mean, var} per channel.
local function ref_bn(X, DY, sets, gamma, beta, eps)
  local C = #X[1]
  local Y, DX = deep_copy(X), DY and deep_copy(DY)
  local dgamma, dbeta, stats = {}, {}, {}
  for c = 1, C do dgamma[c], dbeta[c] = 0, 0 end
  for s, members in ipairs(sets) do
    stats[s] = {}
    for c = 1, C do
      local xs, ys, dys, dxs = {}, {}, {}, {}
      for _, n in ipairs(members) do
        for _, p in ipairs(cells(X, n, c)) do xs[#xs + 1] = p[1][p[2]] end
        for _, p in ipairs(cells(Y, n, c)) do ys[#ys + 1] = p end
        if DY then
          for _, p in ipairs(cells(DY, n, c)) do dys[#dys + 1] = p[1][p[2]] end
          for _, p in ipairs(cells(DX, n, c)) do dxs[#dxs + 1] = p end
        end
      end
      local m, v = 0, 0
      for _, x in ipairs(xs) do m = m + x end
      m = m / #xs
      for _, x in ipairs(xs) do v = v + (x - m) ^ 2 end
      v = v / #xs
      stats[s][c] = {m, v, #xs}
      local rstd, g, b = 1 / math.sqrt(v + eps), gamma and gamma[c] or 1, beta and beta[c] or 0
      local mdy, mdyx = 0, 0
      for i, x in ipairs(xs) do
        local xhat = (x - m) * rstd
        ys[i][1][ys[i][2]] = xhat * g + b
        if DY then
          mdy, mdyx = mdy + dys[i], mdyx + dys[i] * xhat
          dgamma[c], dbeta[c] = dgamma[c] + dys[i] * xhat, dbeta[c] + dys[i]
        end
      end
      if DY then
        mdy, mdyx = mdy / #xs, mdyx / #xs
        for i, x in ipairs(xs) do
          dxs[i][1][dxs[i][2]] = g * rstd * (dys[i] - mdy - (x - m) * rstd * mdyx)
        end
      end
    end
  end
  return Y, DX, dgamma, dbeta, stats
end

local function max_diff(a, b)
  if type(a) ~= "table" then return math.abs(a - b) / (1 + math.abs(b)) end
  assert.are.equal(#b, #a)
  local m = 0
  for i = 1, #a do m = math.max(m, max_diff(a[i], b[i])) end
  return m
end

-- runs dl.batch_norm forward and backward with gradient dy; returns y, x.grad, w.grad, b.grad
local function run(x, w, b, dy, opts)
  x = x:detach():requires_grad(true)
  if w then w = w:detach():requires_grad(true) end
  if b then b = b:detach():requires_grad(true) end
  local y = dl.batch_norm(x, w, b, opts)
  y:backward(dy)
  return y, x.grad, w and w.grad, b and b.grad
end

-- the ghost/replica cases of the issue: forward and backward vs the reference, and gradcheck
local function check_case(shape, R, k, sync, affine)
  dl.seed(#shape * 1000 + shape[1] + R * 10 + (k or 0))
  local x = dl.randn(shape) * 2 + 0.5
  local C = shape[2]
  local w, b = affine and dl.randn(C) or nil, affine and dl.randn(C) or nil
  local dy = dl.randn(shape)
  local opts = {replicas = R, virtual_batch = k or false, sync = sync}
  local y, gx, gw, gb = run(x, w, b, dy, opts)
  local sets = ref_sets(shape[1], R, k, sync)
  local Y, DX, DG, DB = ref_bn(x:totable(), dy:totable(), sets, w and w:totable(), b and b:totable(), 1e-5)
  assert.is_true(max_diff(y:totable(), Y) < 1e-5, "forward")
  assert.is_true(max_diff(gx:totable(), DX) < 1e-5, "dx")
  if affine then
    assert.is_true(max_diff(gw:totable(), DG) < 1e-5, "dgamma")
    assert.is_true(max_diff(gb:totable(), DB) < 1e-5, "dbeta")
  end
  -- float64 forward against the same reference, tightly
  local y64 = dl.batch_norm(x:double(), w and w:double(), b and b:double(), opts)
  assert.is_true(max_diff(y64:totable(), Y) < 1e-9, "float64 forward")
  local ok, rep = dl.autograd.gradcheck(function(xx, ww, bb)
    return dl.batch_norm(xx, ww, bb, opts)
  end, affine and {x, w, b} or {x})
  assert(ok, rep)
end

-------------------------------------------------------------------- specs

describe("dl.batch_norm against the reference loops and finite differences", function()
  it("standard BN on [N, C]", function() check_case({12, 3}, 1, nil, false, true) end)
  it("standard BN on [N, C, H, W]", function() check_case({6, 3, 3, 2}, 1, nil, false, true) end)
  it("virtual batch 64 with batch 256 (4 groups)", function() check_case({256, 2}, 1, 64, false, true) end)
  it("virtual batch 64 with batch 256 on [N, C, H, W]", function() check_case({256, 2, 1, 2}, 1, 64, false, true) end)
  it("batch 200 with virtual batch 64: groups of 64, 64 and 72", function()
    check_case({200, 3}, 1, 64, false, true)
  end)
  it("per-replica batch 512 with virtual batch 64 (8 groups per replica, 2 replicas)", function()
    check_case({1024, 2}, 2, 64, false, true)
  end)
  it("synced replicas with virtual batch and remainder (R = 2, 2 x 20 examples, k = 8)", function()
    check_case({40, 2, 2, 1}, 2, 8, true, true)
  end)
  it("affine off", function() check_case({10, 3, 2, 2}, 1, 4, false, false) end)
  it("a shard smaller than the virtual batch is one group", function() check_case({10, 2}, 2, 64, false, true) end)

  it("gives each group of the 512-example shard exactly 64 examples' statistics", function()
    dl.seed(7)
    local x = dl.randn(1024, 2, 2, 2) + dl.arange(1024):reshape(1024, 1, 1, 1):scale(0.01)
    local y = dl.batch_norm(x, nil, nil, {virtual_batch = 64, replicas = 2})
    for g = 1, 16 do
      local part = y:narrow(1, (g - 1) * 64 + 1, 64)
      local m = part:mean({1, 3, 4})
      local v = (part - m:reshape(1, 2, 1, 1)):square():mean({1, 3, 4})
      for c = 1, 2 do
        assert(math.abs(m:totable()[c]) < 1e-5)
        assert(math.abs(v:totable()[c] - 1) < 1e-3)       -- var / (var + eps)
      end
    end
  end)

  it("stays accurate when |mean| >> std (offset 1000, std 0.01)", function()
    dl.seed(8)
    local x = dl.randn(64, 2, 4, 4):scale(0.01, 1000)
    local Y = ref_bn(x:totable(), nil, ref_sets(64, 1, nil, false), nil, nil, 1e-5)
    assert.is_true(max_diff(dl.batch_norm(x, nil, nil):totable(), Y) < 1e-4)
  end)

  it("takes a float32 gradient for a float64 output", function()
    for _, shape in ipairs({{6, 3}, {6, 3, 2, 2}}) do
      local x, g = dl.randn(shape):double(), dl.randn(shape)
      local _, ga = run(x, nil, nil, g, {})
      local _, gb = run(x, nil, nil, g:double(), {})
      assert.are.same(gb:totable(), ga:totable())
    end
  end)

  it("gives the same bits with 1 and 2 threads", function()
    dl.seed(9)
    local x, dy = dl.randn(64, 8, 9, 9), dl.randn(64, 8, 9, 9)
    local w, b = dl.randn(8), dl.randn(8)
    local prev = dl.threads()
    dl.threads(1)
    local y1, gx1, gw1 = run(x, w, b, dy, {virtual_batch = 16})
    dl.threads(2)
    local y2, gx2, gw2 = run(x, w, b, dy, {virtual_batch = 16})
    dl.threads(prev)
    assert.are.same(y1:totable(), y2:totable())
    assert.are.same(gx1:totable(), gx2:totable())
    assert.are.same(gw1:totable(), gw2:totable())
  end)
end)

describe("synced replicas vs one replica over the concatenated batch", function()
  for _, R in ipairs({2, 4}) do
    it("R = " .. R .. ": outputs and gradients match to 1e-5", function()
      dl.seed(10 + R)
      local x, dy = dl.randn(R * 6, 3, 2, 3) * 1.5 - 2, dl.randn(R * 6, 3, 2, 3)
      local w, b = dl.randn(3), dl.randn(3)
      local ya, gxa, gwa, gba = run(x, w, b, dy, {replicas = R, sync = true})
      local yb, gxb, gwb, gbb = run(x, w, b, dy, {})
      assert.is_true(max_diff(ya:totable(), yb:totable()) < 1e-5)
      assert.is_true(max_diff(gxa:totable(), gxb:totable()) < 1e-5)
      assert.is_true(max_diff(gwa:totable(), gwb:totable()) < 1e-5)
      assert.is_true(max_diff(gba:totable(), gbb:totable()) < 1e-5)
      -- without sync, each replica alone is standard BN on its own shard
      local yc = dl.batch_norm(x, w, b, {replicas = R})
      local yd = dl.batch_norm(x:narrow(1, 7, 6), w, b)
      assert.is_true(max_diff(yc:narrow(1, 7, 6):totable(), yd:totable()) < 1e-5)
      assert.is_false(max_diff(yc:totable(), ya:totable()) < 1e-3)
    end)

    it("R = " .. R .. " with virtual batch 8 and a remainder: group g of every replica shares statistics", function()
      -- per replica 20 examples -> groups 8 and 12; put group g of each replica side by side
      -- and the result is one replica with virtual batch R * 8 over the reordered batch
      dl.seed(20 + R)
      local N = R * 20
      local x, dy = dl.randn(N, 2, 1, 2), dl.randn(N, 2, 1, 2)
      local w, b = dl.randn(2), dl.randn(2)
      local order = {}
      for _, run_ in ipairs({{1, 8}, {9, 20}}) do
        for r = 1, R do
          for n = run_[1], run_[2] do order[#order + 1] = (r - 1) * 20 + n end
        end
      end
      local idx = dl.tensor(order, {dtype = "int64"})
      local ya, gxa, gwa = run(x, w, b, dy, {replicas = R, sync = true, virtual_batch = 8})
      local yb, gxb, gwb = run(x:index_select(1, idx), w, b, dy:index_select(1, idx), {virtual_batch = R * 8})
      assert.is_true(max_diff(ya:index_select(1, idx):totable(), yb:totable()) < 1e-5)
      assert.is_true(max_diff(gxa:index_select(1, idx):totable(), gxb:totable()) < 1e-5)
      assert.is_true(max_diff(gwa:totable(), gwb:totable()) < 1e-5)
    end)
  end

  it("gradchecks synced replicas (R = 4, virtual batch 3, remainder)", function()
    dl.seed(30)
    local ok, rep = dl.autograd.gradcheck(function(x, w, b)
      return dl.batch_norm(x, w, b, {replicas = 4, sync = true, virtual_batch = 3})
    end, {dl.randn(28, 2), dl.randn(2), dl.randn(2)})
    assert(ok, rep)
  end)
end)

describe("moving averages", function()
  it("follow running = (1 - m) running + m stat with stat the mean over groups (unbiased variances)", function()
    dl.seed(40)
    local bn = nn.BatchNorm(3, {virtual_batch = 64, momentum = 0.25})
    local x = dl.randn(200, 3, 2, 1) * 3 + 1
    bn(x)
    local sets, groups = ref_sets(200, 1, 64, false)
    local _, _, _, _, stats = ref_bn(x:totable(), nil, sets, nil, nil, 1e-5)
    assert.are.equal(3, #groups[1])
    local rm, rv = bn.running_mean:totable(), bn.running_var:totable()
    for c = 1, 3 do
      local m, v = 0, 0
      for _, s in ipairs(groups[1]) do
        local st = stats[s][c]
        m, v = m + st[1] / 3, v + st[2] * st[3] / (st[3] - 1) / 3
      end
      assert(math.abs(rm[c] - 0.25 * m) < 1e-5)
      assert(math.abs(rv[c] - (0.75 + 0.25 * v)) < 1e-5)
    end
    assert.are.equal(1, bn.num_batches_tracked:item())
    bn(x)
    assert.are.equal(2, bn.num_batches_tracked:item())
  end)

  it("are in the state_dict (with the number of batches) and load back", function()
    local bn = nn.Sequential{nn.Linear(3, 4), nn.BatchNorm(4)}
    bn(dl.randn(8, 3))
    local sd = bn:state_dict()
    for _, k in ipairs({"2.weight", "2.bias", "2.running_mean", "2.running_var", "2.num_batches_tracked"}) do
      assert.truthy(sd[k], k)
    end
    assert.are.equal("int64", sd["2.num_batches_tracked"]:dtype())
    local other = nn.Sequential{nn.Linear(3, 4), nn.BatchNorm(4)}
    other:load_state_dict(sd)
    assert.are.same(sd["2.running_var"]:totable(), other[2].running_var:totable())
    assert.are.equal(1, other[2].num_batches_tracked:item())
    -- buffers are not parameters
    assert.are.equal(4 * 3 + 4 + 4 + 4, other:num_parameters())
  end)

  it("after training R replicas on different data, the synced averages are the mean over replicas", function()
    local R, per, C = 4, 16, 2
    dl.seed(41)
    local model = nn.Sequential{nn.BatchNorm(C, {replicas = R, virtual_batch = 8, momentum = 0.2})}
    local opt = dl.optim.SGD{params = model:parameters(), lr = 0.1}
    local exp_m, exp_v = {}, {}          -- the reference EMA of each replica
    for r = 1, R do exp_m[r], exp_v[r] = {0, 0}, {1, 1} end
    for _ = 1, 3 do
      -- replica r's data: scale r, offset 2 r, so every replica's statistics differ
      local parts = {}
      for r = 1, R do parts[r] = dl.randn(per, C, 2, 2) * r + 2 * r end
      local x = dl.cat(parts, 1)
      opt:zero_grad()
      model(x):square():mean():backward()
      opt:step()
      local sets, groups = ref_sets(R * per, R, 8, false)
      local _, _, _, _, stats = ref_bn(x:totable(), nil, sets, nil, nil, 1e-5)
      for r = 1, R do
        for c = 1, C do
          local m, v = 0, 0
          for _, s in ipairs(groups[r]) do
            local st = stats[s][c]
            m, v = m + st[1] / #groups[r], v + st[2] * st[3] / (st[3] - 1) / #groups[r]
          end
          exp_m[r][c] = 0.8 * exp_m[r][c] + 0.2 * m
          exp_v[r][c] = 0.8 * exp_v[r][c] + 0.2 * v
        end
      end
    end
    local bn = model[1]
    local rows = bn.running_mean:totable()
    assert.is_true(max_diff(rows, exp_m) < 1e-5)       -- each replica kept its own averages
    assert.are.equal(1, nn.sync_batchnorm(model))
    -- what a checkpoint holds after the sync the training loop does before saving
    local path = os.tmpname()
    assert(dl.checkpoint.save(path, model:state_dict()))
    local sd = assert(dl.checkpoint.load(path))
    os.remove(path)
    assert.are.same({R, C}, sd["1.running_mean"]:shape())
    local got_m, got_v = sd["1.running_mean"]:totable(), sd["1.running_var"]:totable()
    for c = 1, C do
      local m, v = 0, 0
      for r = 1, R do m, v = m + exp_m[r][c] / R, v + exp_v[r][c] / R end
      for r = 1, R do
        assert(math.abs(got_m[r][c] - m) < 1e-5)
        assert(math.abs(got_v[r][c] - v) < 1e-5)
      end
      assert(math.abs(got_m[1][c] - exp_m[1][c]) > 0.5)  -- not replica 0's copy
    end
    assert.are.equal(3, sd["1.num_batches_tracked"]:item())
  end)

  it("stay identical across replicas with sync = true", function()
    dl.seed(42)
    local bn = nn.BatchNorm(2, {replicas = 2, sync = true})
    bn(dl.cat({dl.randn(4, 2), dl.randn(4, 2) + 5}, 1))
    local rows = bn.running_mean:totable()
    assert.are.same(rows[1], rows[2])
  end)

  it("average across ranks through the hook BatchNorm.set_rank_mean installs", function()
    local bn = nn.BatchNorm(2, {replicas = 2})
    bn.running_mean:copy_(dl.tensor({{1, 2}, {3, 4}}))
    local other_rank = dl.tensor({10, 20})                 -- the other rank's replica average
    local seen
    local prev = nn.BatchNorm.set_rank_mean(function(t)
      seen = seen or t:totable()                          -- running_mean comes first
      return (t + other_rank):scale(0.5)
    end)
    local ok, err = pcall(bn.sync_moving_averages, bn)
    assert.are.equal(nil, prev)
    nn.BatchNorm.set_rank_mean(nil)
    assert(ok, err)
    assert.are.same({2, 3}, seen)
    assert.are.same({{6, 11.5}, {6, 11.5}}, bn.running_mean:totable())
    -- without the hook only the replicas are averaged
    bn.running_mean:copy_(dl.tensor({{1, 2}, {3, 4}}))
    bn:sync_moving_averages()
    assert.are.same({{2, 3}, {2, 3}}, bn.running_mean:totable())
    assert.error_matches(function() nn.BatchNorm.set_rank_mean(42) end,
      "BatchNorm.set_rank_mean: expected a function or nil, got number")
  end)
end)

describe("evaluation mode", function()
  local function trained(opts)
    dl.seed(50)
    local bn = nn.BatchNorm(3, opts)
    local R = opts.replicas or 1
    for _ = 1, 4 do bn(dl.randn(64 * R, 3, 2, 2) * 2 + 1) end
    dl.no_grad(function()
      bn.weight:copy_(dl.tensor({0.5, -1, 2}))
      bn.bias:copy_(dl.tensor({0.1, 0.2, -0.3}))
    end)
    return bn:eval()
  end

  it("normalises with the running averages", function()
    local bn = trained({})
    local x = dl.randn(5, 3, 2, 2)
    local rm, rv = bn.running_mean:reshape(1, 3, 1, 1), bn.running_var:reshape(1, 3, 1, 1)
    local ref = (x - rm) * (rv + 1e-5):rsqrt() * bn.weight:reshape(1, 3, 1, 1) + bn.bias:reshape(1, 3, 1, 1)
    assert.is_true(max_diff(bn(x):totable(), ref:totable()) < 1e-5)
    local before = bn.running_mean:totable()
    bn(x)
    assert.are.same(before, bn.running_mean:totable())    -- evaluation does not update
    assert.are.equal(4, bn.num_batches_tracked:item())
  end)

  for _, opts in ipairs({{}, {virtual_batch = 64}, {replicas = 4, virtual_batch = 16}}) do
    local name = (opts.virtual_batch and ("virtual batch " .. opts.virtual_batch) or "standard")
      .. (opts.replicas and (", " .. opts.replicas .. " replicas") or "")
    it("does not depend on the eval batch size: batch 1 vs batch 1000 (" .. name .. ")", function()
      local bn = trained(opts)
      nn.sync_batchnorm(bn)
      dl.seed(51)
      local x = dl.randn(1000, 3, 2, 2)
      local big = bn(x)
      for _, i in ipairs({1, 2, 500, 999, 1000}) do
        local one = bn(x:narrow(1, i, 1))
        assert.is_true(max_diff(one:totable(), big:narrow(1, i, 1):totable()) < 1e-6)
      end
    end)
  end

  it("uses the mean over replicas of the running averages, synced or not", function()
    local rm = dl.tensor({{0, 1, 2}, {2, 3, -2}})
    local rv = dl.tensor({{1, 2, 3}, {3, 2, 1}})
    local x = dl.randn(5, 3, 1, 2)
    local y = dl.batch_norm(x, nil, nil, {training = false, replicas = 2, running_mean = rm, running_var = rv})
    local ref = (x - dl.tensor({1, 2, 0}):reshape(1, 3, 1, 1)):scale(1 / math.sqrt(2 + 1e-5))
    assert.is_true(max_diff(y:totable(), ref:totable()) < 1e-6)
  end)

  it("backpropagates through the fixed statistics (gradcheck)", function()
    local bn = trained({})
    local rm, rv = bn.running_mean, bn.running_var
    local ok, rep = dl.autograd.gradcheck(function(x, w, b)
      return dl.batch_norm(x, w, b, {training = false, running_mean = rm, running_var = rv})
    end, {dl.randn(4, 3, 2, 2), dl.randn(3), dl.randn(3)})
    assert(ok, rep)
  end)
end)

describe("BatchNorm errors", function()
  it("names BatchNorm and the shapes on a wrong ndim or channel count", function()
    local bn = nn.BatchNorm(3)
    assert.error_matches(function() bn(dl.zeros(4, 3, 2)) end,
      "BatchNorm: input %[4, 3, 2%] must be %[N, C%] or %[N, C, H, W%]")
    assert.error_matches(function() bn(dl.zeros(4, 5, 2, 2)) end,
      "BatchNorm: input %[4, 5, 2, 2%] has 5 channels but running_mean %[3%] has 3")
    assert.error_matches(function() nn.BatchNorm(3, {replicas = 2})(dl.zeros(4, 2)) end,
      "BatchNorm: input %[4, 2%] has 2 channels but running_mean %[2, 3%] has 3")
  end)

  it("refuses a batch that does not split into the replicas", function()
    local bn = nn.BatchNorm(2, {replicas = 4})
    assert.error_matches(function() bn(dl.zeros(10, 2)) end,
      "BatchNorm: a batch of 10 examples %(input %[10, 2%]%) does not split into 4 equal replicas")
    assert.error_matches(function() dl.batch_norm(dl.zeros(10, 2), nil, nil, {replicas = 4}) end,
      "batch_norm: a batch of 10 examples does not split into 4 equal replicas")
    bn:eval()
    assert.are.same({10, 2}, bn(dl.zeros(10, 2)):shape())  -- evaluation does not split
  end)

  it("checks options", function()
    assert.error_matches(function() nn.BatchNorm(3, {virtual_batch_size = 64}) end,
      "BatchNorm: unknown option 'virtual_batch_size' %(valid: affine, eps, momentum, replicas, sync, virtual_batch%)")
    assert.error_matches(function() nn.BatchNorm(3, {virtual_batch = 0}) end,
      "BatchNorm: virtual_batch must be a positive integer, got 0")
    assert.error_matches(function() nn.BatchNorm(3, {momentum = 2}) end, "momentum must be a number in %[0, 1%]")
    assert.error_matches(function() nn.BatchNorm(0) end, "num_features must be a positive integer")
    assert.error_matches(function() dl.batch_norm(dl.zeros(4, 3), nil, nil, {virtual = 2}) end,
      "bad argument #4 to 'batch_norm' %(unknown option 'virtual'; expected one of: eps, momentum, replicas, " ..
      "running_mean, running_var, sync, training, virtual_batch%)")
  end)

  it("reports bad inputs to dl.batch_norm with both shapes", function()
    assert.error_matches(function() dl.batch_norm(dl.zeros(4, 3), dl.ones(2), nil) end,
      "batch_norm: input %[4, 3%] has 3 channels but weight is %[2%]")
    assert.error_matches(function()
      dl.batch_norm(dl.zeros(4, 3), nil, nil, {running_mean = dl.zeros(2), running_var = dl.ones(2)})
    end, "batch_norm: running_mean %[2%] does not hold 1 replicas x 3 channels of input %[4, 3%]")
    assert.error_matches(function() dl.batch_norm(dl.zeros(4, 3), nil, nil, {training = false}) end,
      "batch_norm: evaluation needs running_mean and running_var")
    assert.error_matches(function() dl.batch_norm(dl.zeros(4, 3):int(), nil, nil) end,
      "batch_norm: input %[4, 3%] must be float32 or float64, got int32")
    assert.error_matches(function() dl.batch_norm(dl.zeros(1, 3), nil, nil) end,
      "only 1 value%(s%) per channel .*training needs at least 2")
  end)

  it("reports bad option values to dl.batch_norm", function()
    local x = dl.zeros(4, 3)
    local function bn(o) return function() dl.batch_norm(x, nil, nil, o) end end
    assert.error_matches(bn({momentum = "fast"}), "bad argument #4 to 'batch_norm' %(option 'momentum' %(number expected, got string%)%)")
    assert.error_matches(bn({momentum = 1.5}), "batch_norm: momentum must be in %[0, 1%], got 1.5")
    assert.error_matches(bn({eps = 0}), "batch_norm: eps must be > 0, got 0")
    assert.error_matches(bn({sync = 1}), "option 'sync' %(boolean expected, got number%)")
    assert.error_matches(bn({replicas = 0}), "batch_norm: replicas must be >= 1, got 0")
    assert.error_matches(bn({virtual_batch = -2}), "batch_norm: virtual_batch must be >= 1 %(or 0 for none%), got %-2")
    assert.error_matches(bn({running_mean = {0, 0, 0}}), "option 'running_mean' %(dlua.Tensor expected, got table%)")
    assert.error_matches(bn({running_mean = dl.zeros(3)}), "give both running_mean and running_var, or neither")
    assert.error_matches(bn({running_mean = dl.zeros(3):double(), running_var = dl.ones(3)}),
      "batch_norm: running_mean is float64 but running_var is float32")
    assert.error_matches(bn({running_mean = dl.zeros(3, {dtype = "int32"}), running_var = dl.ones(3)}),
      "batch_norm: running_mean must be a contiguous float32 or float64 tensor")
    local shared = dl.zeros(3)
    assert.error_matches(bn({running_mean = shared, running_var = shared}), "share storage")
    assert.error_matches(function() dl.batch_norm(x, dl.ones(3):double(), nil) end,
      "batch_norm: weight is float64 but input %[4, 3%] is float32")
  end)

  it("leaves the running averages alone when a call fails", function()
    local rm, rv = dl.zeros(3), dl.ones(3)
    assert.has_error(function()
      dl.batch_norm(dl.randn(4, 3), dl.ones(2), nil, {running_mean = rm, running_var = rv})
    end)
    assert.are.same({0, 0, 0}, rm:totable())
    assert.are.same({1, 1, 1}, rv:totable())
  end)
end)
