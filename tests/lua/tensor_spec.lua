-- Tensor creation, views, elementwise ops, reductions and matmul against
-- independently computed values (plain Lua loops over tables).
local dl = require "dlua"

local function close(a, b, tol)
  tol = tol or 1e-5
  return math.abs(a - b) <= tol * (1 + math.abs(b))
end

local function assert_table_close(got, want, tol, path)
  path = path or ""
  if type(want) == "table" then
    assert.are.equal(#want, #got, "length at " .. path)
    for i = 1, #want do assert_table_close(got[i], want[i], tol, path .. "[" .. i .. "]") end
  else
    assert(close(got, want, tol), string.format("at %s: got %.9g, want %.9g", path, got, want))
  end
end

-- deterministic pseudo-random nested table of shape {r, c}
local function mat(r, c, seed)
  local t, s = {}, seed or 1
  for i = 1, r do
    t[i] = {}
    for j = 1, c do
      s = (s * 1103515245 + 12345) % 2147483648
      t[i][j] = (s / 2147483648) * 4 - 2
    end
  end
  return t
end

describe("dlua.tensor creation", function()
  it("builds from nested tables with shape, dtype and values", function()
    local t = dl.tensor({{1, 2, 3}, {4, 5, 6}})
    assert.are.same({2, 3}, t:shape())
    assert.are.equal("float32", t:dtype())
    assert.are.equal(2, t:dim())
    assert.are.equal(3, t:size(2))
    assert.are.equal(3, t:size(-1))
    assert.are.same({{1, 2, 3}, {4, 5, 6}}, t:totable())
    local i = dl.tensor({1, 2}, {dtype = "int32"})
    assert.are.equal("int32", i:dtype())
    assert.are.equal(math.type(i:totable()[1]), "integer")
  end)

  it("creates zeros, ones, full, arange and accepts integral floats as sizes", function()
    assert.are.same({{0, 0}, {0, 0}}, dl.zeros(2, 2.0):totable())
    assert.are.same({{1, 1, 1}}, dl.ones({1, 3}):totable())
    assert.are.same({7, 7}, dl.full(7, 2):totable())
    assert.are.same({0, 1, 2, 3}, dl.arange(4):totable())
    assert.are.same({2, 4, 6}, dl.arange(2, 8, 2):totable())
    assert.are.equal("uint8", dl.zeros(2, {dtype = "uint8"}):dtype())
  end)

  it("draws reproducible random numbers from the seed", function()
    dl.seed(42)
    local a = dl.randn(100):totable()
    dl.seed(42)
    local b = dl.randn(100):totable()
    assert.are.same(a, b)
    dl.seed(43)
    assert.are_not.same(a, dl.randn(100):totable())
    -- moments of 100k normals and uniforms
    dl.seed(1)
    local n = dl.randn(100000)
    assert(math.abs(n:mean():item()) < 0.02)
    assert(math.abs(n:var():item() - 1) < 0.02)
    local u = dl.rand(100000)
    assert(math.abs(u:mean():item() - 0.5) < 0.01)
    assert(u:min():item() >= 0 and u:max():item() < 1)
  end)

  it("permutes 1..n with randperm", function()
    dl.seed(3)
    local p = dl.randperm(50):totable()
    table.sort(p)
    for i = 1, 50 do assert.are.equal(i, p[i]) end
  end)

  it("prints shape, dtype and values like PyTorch", function()
    local s = tostring(dl.tensor({{1.5, -2}, {3, 4}}))
    assert.truthy(s:find("tensor%(%[%[ 1.5000, %-2.0000%],"))
    assert.truthy(s:find("dtype=float32, shape=%[2, 2%]"))
    assert.truthy(tostring(dl.zeros(2000)):find("...", 1, true))
  end)
end)

describe("dlua.tensor views", function()
  it("shares storage between a tensor and its views", function()
    local t = dl.zeros(2, 3)
    local v = t:view(3, 2)
    v:fill_(5)
    assert.are.equal(5, t:sum():item() / 6)
    local tr = t:transpose(1, 2)
    assert.are.same({3, 2}, tr:shape())
    assert.is_false(tr:is_contiguous())
  end)

  it("transposes, permutes, narrows, selects and expands without copying", function()
    local a = dl.tensor(mat(3, 4))
    local ref = mat(3, 4)
    local tt = a:transpose(1, 2):totable()
    for i = 1, 3 do for j = 1, 4 do assert(close(tt[j][i], ref[i][j])) end end
    local nar = a:narrow(2, 2, 2):totable()
    for i = 1, 3 do assert(close(nar[i][1], ref[i][2])); assert(close(nar[i][2], ref[i][3])) end
    local sel = a:select(1, -1):totable()
    for j = 1, 4 do assert(close(sel[j], ref[3][j])) end
    assert_table_close(a[2]:totable(), ref[2])
    local e = dl.tensor({1, 2, 3}):expand(2, 3):totable()
    assert.are.same({{1, 2, 3}, {1, 2, 3}}, e)
    local p = dl.arange(24):reshape(2, 3, 4):permute(3, 1, 2)
    assert.are.same({4, 2, 3}, p:shape())
    assert.are.equal(1 * 12 + 2 * 4 + 3, p:totable()[4][2][3])
  end)

  it("reshapes non-contiguous tensors by copying, view refuses", function()
    local t = dl.arange(6):reshape(2, 3):transpose(1, 2)
    assert.are.same({{0, 3, 1}, {4, 2, 5}}, t:reshape(2, 3):totable())
    assert.has_error(function() t:view(6) end)
    assert.are.same({6}, t:reshape(-1):shape())
  end)

  it("assigns rows with t[i] = value", function()
    local t = dl.zeros(2, 2)
    t[2] = 3
    assert.are.same({{0, 0}, {3, 3}}, t:totable())
    t[1] = dl.tensor({1, 2})
    assert.are.same({{1, 2}, {3, 3}}, t:totable())
  end)
end)

describe("dlua.tensor elementwise", function()
  local A, B = mat(3, 4, 1), mat(3, 4, 2)
  local a, b = dl.tensor(A), dl.tensor(B)

  local cases = {
    {"add", function(x, y) return x + y end, function(x, y) return x + y end},
    {"sub", function(x, y) return x - y end, function(x, y) return x - y end},
    {"mul", function(x, y) return x * y end, function(x, y) return x * y end},
    {"div", function(x, y) return x / y end, function(x, y) return x / y end},
    {"maximum", function(x, y) return x:maximum(y) end, function(x, y) return math.max(x, y) end},
  }
  for _, c in ipairs(cases) do
    it("computes " .. c[1] .. " elementwise", function()
      local got = c[2](a, b):totable()
      for i = 1, 3 do for j = 1, 4 do assert(close(got[i][j], c[3](A[i][j], B[i][j]))) end end
    end)
  end

  local unary = {
    {"exp", math.exp}, {"tanh", function(x) return (math.exp(2 * x) - 1) / (math.exp(2 * x) + 1) end},
    {"sigmoid", function(x) return 1 / (1 + math.exp(-x)) end}, {"abs", math.abs},
    {"relu", function(x) return x > 0 and x or 0 end}, {"neg", function(x) return -x end},
  }
  for _, c in ipairs(unary) do
    it("computes " .. c[1], function()
      local got = a[c[1]](a):totable()
      for i = 1, 3 do for j = 1, 4 do assert(close(got[i][j], c[2](A[i][j]))) end end
    end)
  end

  it("computes log, sqrt and pow on positive inputs", function()
    local p = a:abs() + 0.5
    local lg, sq, pw = p:log():totable(), p:sqrt():totable(), p:pow(1.5):totable()
    for i = 1, 3 do for j = 1, 4 do
      local x = math.abs(A[i][j]) + 0.5
      assert(close(lg[i][j], math.log(x)))
      assert(close(sq[i][j], math.sqrt(x)))
      assert(close(pw[i][j], x ^ 1.5))
    end end
  end)

  it("computes gelu with the erf form", function()
    -- reference values of 0.5 x (1 + erf(x / sqrt 2))
    local got = dl.tensor({-1, 0, 0.5, 2}):gelu():totable()
    assert_table_close(got, {-0.15865525, 0, 0.34573123, 1.95449974}, 1e-5)
  end)

  it("broadcasts as NumPy does", function()
    local col = dl.tensor({{1}, {2}, {3}})      -- [3, 1]
    local row = dl.tensor({10, 20, 30, 40})     -- [4]
    local s = (col + row):totable()
    for i = 1, 3 do for j = 1, 4 do assert.are.equal(i + 10 * j, s[i][j]) end end
    assert.are.same({2, 3, 4}, (dl.zeros(2, 1, 4) + dl.zeros(3, 1)):shape())
  end)

  it("compares, clamps and selects with where", function()
    local x = dl.tensor({-2, -1, 0, 1, 2})
    assert.are.same({0, 0, 0, 1, 1}, x:gt(0):totable())
    assert.are.equal("uint8", x:gt(0):dtype())
    assert.are.same({-1, -1, 0, 1, 1}, x:clamp(-1, 1):totable())
    assert.are.same({0, 0, 0, 1, 2}, dl.where(x:gt(0), x, 0):totable())
  end)
end)

describe("dlua.tensor reductions", function()
  local A = mat(3, 4, 5)
  local a = dl.tensor(A, {dtype = "float64"})

  it("sums and averages over all or given dims, with keepdim", function()
    local total, rows, cols = 0, {0, 0, 0}, {0, 0, 0, 0}
    for i = 1, 3 do for j = 1, 4 do
      total = total + A[i][j]; rows[i] = rows[i] + A[i][j]; cols[j] = cols[j] + A[i][j]
    end end
    assert(close(a:sum():item(), total))
    assert(close(a:mean():item(), total / 12))
    assert_table_close(a:sum(2):totable(), rows)
    assert_table_close(a:sum(1):totable(), cols)
    assert.are.same({3, 1}, a:sum(2, true):shape())
    assert.are.same({1, 1}, a:sum({1, 2}, true):shape())
  end)

  it("finds max/min with 1-based indices and argmax", function()
    local v, i = a:max(2)
    for r = 1, 3 do
      local best, bi = -math.huge, 0
      for c = 1, 4 do if A[r][c] > best then best, bi = A[r][c], c end end
      assert(close(v:totable()[r], best))
      assert.are.equal(bi, i:totable()[r])
      assert.are.equal(bi, a:argmax(2):totable()[r])
    end
    local _, imin = a:min(1)
    assert.are.same({3 + 0 * 4}, {#imin:totable() - 1})
  end)

  it("computes var (unbiased by default), logsumexp and softmax", function()
    for r = 1, 3 do
      local m = 0
      for c = 1, 4 do m = m + A[r][c] end
      m = m / 4
      local ss, lse = 0, 0
      for c = 1, 4 do ss = ss + (A[r][c] - m) ^ 2; lse = lse + math.exp(A[r][c]) end
      assert(close(a:var(2):totable()[r], ss / 3))
      assert(close(a:var(2, {correction = 0}):totable()[r], ss / 4))
      assert(close(a:logsumexp(2):totable()[r], math.log(lse)))
      local sm, lsm = a:softmax(2):totable()[r], a:log_softmax(2):totable()[r]
      for c = 1, 4 do
        assert(close(sm[c], math.exp(A[r][c]) / lse))
        assert(close(lsm[c], A[r][c] - math.log(lse)))
      end
    end
  end)

  it("keeps softmax stable for large logits", function()
    local s = dl.tensor({{1000, 1000}, {-1000, 0}}):softmax(2):totable()
    assert_table_close(s, {{0.5, 0.5}, {0, 1}})
  end)
end)

describe("dlua.tensor argument forms", function()
  it("keeps fractional numbers exact next to integer tensors", function()
    local i = dl.tensor({1, 2, 3}, {dtype = "int32"})
    assert.are.same({2.5, 5, 7.5}, (i * 2.5):totable())
    assert.are.equal("int32", (i + 1):dtype())
    assert.are.same({1, 0, 0}, i:lt(1.5):totable())
  end)

  it("concatenates along dim 1 by default", function()
    assert.are.same({1, 1, 2, 2}, dl.cat({dl.ones(2), dl.full(2, 2)}):totable())
    assert.are.same({2, 2}, dl.stack({dl.ones(2), dl.ones(2)}):shape())
  end)

  it("reads dim, keepdim and correction from one option table", function()
    local a = dl.tensor({{1, 5, 3}, {4, 2, 6}})
    assert.are.same({{9}, {12}}, a:sum({dim = 2, keepdim = true}):totable())
    local v = a:var({dim = 2, correction = 0}):totable()
    assert(math.abs(v[1] - 8 / 3) < 1e-5)
  end)

  it("names randn in its dtype error", function()
    assert.error_matches(function() dl.randn(3, {dtype = "int32"}) end, "randn: dtype int32 is not a float type")
  end)
end)

describe("dlua.tensor matmul", function()
  local function ref_mm(A, B)
    local C = {}
    for i = 1, #A do
      C[i] = {}
      for j = 1, #B[1] do
        local s = 0
        for k = 1, #B do s = s + A[i][k] * B[k][j] end
        C[i][j] = s
      end
    end
    return C
  end

  it("multiplies matrices, transposed views included", function()
    local A, B = mat(5, 7, 1), mat(7, 3, 2)
    assert_table_close(dl.tensor(A):matmul(dl.tensor(B)):totable(), ref_mm(A, B), 1e-5)
    local Bt = dl.tensor(mat(3, 7, 2))
    local BtT = {}
    for k = 1, 7 do BtT[k] = {} for j = 1, 3 do BtT[k][j] = mat(3, 7, 2)[j][k] end end
    assert_table_close(dl.tensor(A):matmul(Bt:transpose(1, 2)):totable(), ref_mm(A, BtT), 1e-5)
  end)

  it("handles vectors and broadcast batches", function()
    local A = mat(2, 3, 4)
    local v = dl.tensor({1, 2, 3})
    local mv = dl.tensor(A):matmul(v):totable()
    for i = 1, 2 do assert(close(mv[i], A[i][1] + 2 * A[i][2] + 3 * A[i][3])) end
    assert(close(v:matmul(v):item(), 14))
    local b = dl.randn(4, 2, 3):matmul(dl.randn(3, 5))
    assert.are.same({4, 2, 5}, b:shape())
    local x, y = dl.randn(2, 1, 3, 4), dl.randn(5, 4, 6)
    local z = x:matmul(y)
    assert.are.same({2, 5, 3, 6}, z:shape())
    local ref = x:select(1, 2):select(1, 1):matmul(y:select(1, 3)):totable()
    assert_table_close(z:select(1, 2):select(1, 3):totable(), ref, 1e-5)
  end)

  -- products above the split threshold are cut into row or column blocks over
  -- the pool: every transpose combination, tall and wide, odd sizes
  it("splits large products over threads: deterministic, and equal to one thread up to rounding", function()
    local saved = dl.threads()
    for _, c in ipairs({{301, 77, 203, false, false}, {97, 130, 515, true, false},
                        {260, 64, 99, false, true}, {53, 211, 300, true, true}}) do
      local M, K, N, ta, tb = table.unpack(c)
      dl.seed(M)
      local a = ta and dl.randn(K, M):transpose(1, 2) or dl.randn(M, K)
      local b = tb and dl.randn(N, K):transpose(1, 2) or dl.randn(K, N)
      dl.threads(1)
      local one = a:matmul(b)
      dl.threads(2)
      local two = a:matmul(b)
      assert.is_true((a:matmul(b) - two):abs():max():item() == 0, "a repeated product differs")
      -- OpenBLAS' edge kernels sum in a different order for a block than for the whole
      local d = (one - two):abs():max():item()
      assert(d < 1e-4, string.format("%dx%dx%d: 1 vs 2 threads differ by %g", M, K, N, d))
      local ref = a:double():matmul(b:double())   -- dgemm, a different kernel
      local err = (two:double() - ref):abs():max():item()
      assert(err < 1e-3, string.format("%dx%dx%d: max error %g", M, K, N, err))
      -- spot check one element against a plain dot product
      local i, j = M // 2 + 1, N // 3 + 1
      local s = 0
      local ar, bc = a:select(1, i):totable(), b:select(2, j):totable()
      for k = 1, K do s = s + ar[k] * bc[k] end
      assert(math.abs(two[i][j]:item() - s) < 1e-3)
    end
    dl.threads(saved)
  end)

  it("adds linear's bias in each split block, and sums bias gradients by column blocks exactly", function()
    local saved = dl.threads()
    -- large enough to split over 2 threads, with columns not a multiple of the 16-column blocks
    dl.seed(7)
    local x, w, b, g = dl.randn(300, 257), dl.randn(1030, 257), dl.randn(1030), dl.randn(300, 1030)
    local ref = x:double():matmul(w:double():transpose()) + b:double()
    local gt = g:double():totable()
    local sums = {}
    for _, th in ipairs({1, 2}) do
      dl.threads(th)
      local y = dl.linear(x, w, b)
      assert((y:double() - ref):abs():max():item() < 1e-3, "linear at " .. th .. " threads")
      sums[th] = g:sum(1)
      -- columns in both threads' blocks and the last, partial one, against a float64 loop
      for _, j in ipairs({1, 515, 1030}) do
        local s = 0
        for i = 1, 300 do s = s + gt[i][j] end
        local v = sums[th][j]:item()
        assert(math.abs(v - s) < 1e-4, string.format("column %d at %d threads: %g vs %g", j, th, v, s))
      end
    end
    -- each column is summed in row order whatever the split: the same bits at 1 and 2 threads
    assert.are.equal(0, (sums[1] - sums[2]):abs():max():item())
    dl.threads(saved)
  end)
end)
