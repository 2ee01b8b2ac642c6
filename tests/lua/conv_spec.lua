-- Conv2d and pooling against direct loops, gradients against finite differences
-- (float32 kernels: central differences with eps 1e-2 on linear-in-input ops; the
-- float64 path at gradcheck's default tolerances).
local dl = require "dlua"
local nn = dl.nn
local H = dofile("tests/lua/helpers.lua")

local gc = {eps = 1e-2, atol = 2e-3, rtol = 1e-2}

describe("dlua conv2d", function()
  local cases = {
    {"plain 3x3", {2, 3, 6, 6}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1},
    {"stride 2, padding 1, dilation 2, odd sizes", {2, 3, 7, 6}, {4, 3, 3, 2}, {2, 2}, {1, 1}, {2, 2}, 1},
    {"groups 2, rectangular stride and padding", {2, 4, 5, 7}, {6, 2, 3, 3}, {1, 2}, {2, 0}, {1, 1}, 2},
    {"depthwise (groups = channels)", {1, 3, 5, 5}, {3, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 3},
    {"1x1 kernel, groups 2 (the input is its own patch matrix)", {2, 4, 3, 5}, {6, 2, 1, 1}, {1, 1}, {0, 0},
     {1, 1}, 2},
    {"1x1 kernel with stride 2", {2, 3, 5, 4}, {2, 3, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1},
    -- few input channels at stride 1 with at least 128 output positions take the direct
    -- kernels (conv_simd.c, on AVX-512 machines): blocks of 8 and 4 output channels and a
    -- remainder, rows of 12, 16, 20 and 40 columns (one, two and three 16-lane strips)
    {"one channel 5x5, padding 2 (direct kernel)", {2, 1, 12, 12}, {9, 1, 5, 5}, {1, 1}, {2, 2}, {1, 1}, 1},
    {"direct kernel, 20 columns, no padding", {1, 2, 10, 22}, {6, 2, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1},
    {"direct kernel, 40 columns, groups 2", {1, 4, 6, 40}, {6, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2},
    {"direct kernel 3x7, 16 columns", {1, 1, 14, 16}, {5, 1, 3, 7}, {1, 1}, {1, 3}, {1, 1}, 1},
  }
  for _, c in ipairs(cases) do
    it("matches direct loops: " .. c[1], function()
      dl.seed(1)
      local x, w, b = dl.randn(c[2]), dl.randn(c[3]), dl.randn(c[3][1])
      local opts = {stride = c[4], padding = c[5], dilation = c[6], groups = c[7]}
      local got = dl.conv2d(x, w, b, opts):totable()
      assert(H.max_diff(got, H.ref_conv(x, w, b, c[4], c[5], c[6], c[7])) < 1e-4)
    end)
    it("gradchecks: " .. c[1], function()
      dl.seed(2)
      local opts = {stride = c[4], padding = c[5], dilation = c[6], groups = c[7]}
      local ok, rep = dl.autograd.gradcheck(function(x, w, b)
        return dl.conv2d(x:float(), w:float(), b:float(), opts)
      end, {dl.randn(c[2]), dl.randn(c[3]), dl.randn(c[3][1])}, gc)
      assert(ok, rep)
    end)
    -- float64 takes the plain im2col + dgemm path (conv_f64.c): the direct loops to double
    -- rounding, and gradcheck at its default tolerances (eps 1e-6, rtol 1e-3)
    it("float64 matches direct loops and gradchecks tightly: " .. c[1], function()
      dl.seed(3)
      local x, w, b = dl.randn(c[2]):double(), dl.randn(c[3]):double(), dl.randn(c[3][1]):double()
      local opts = {stride = c[4], padding = c[5], dilation = c[6], groups = c[7]}
      local y = dl.conv2d(x, w, b, opts)
      assert.are.equal("float64", y:dtype())
      assert(H.max_diff(y:totable(), H.ref_conv(x, w, b, c[4], c[5], c[6], c[7])) < 1e-12)
      local ok, rep = dl.autograd.gradcheck(function(xx, ww, bb) return dl.conv2d(xx, ww, bb, opts) end, {x, w, b})
      assert(ok, rep)
    end)
  end

  it("float64 without a bias, and the gradient of the input alone", function()
    dl.seed(4)
    local x, w = dl.randn(2, 3, 5, 5):double(), dl.randn(4, 3, 3, 3):double()
    assert(H.max_diff(dl.conv2d(x, w, {padding = 1}):totable(), H.ref_conv(x, w, nil, {1, 1}, {1, 1}, {1, 1}, 1)) < 1e-12)
    local ok, rep = dl.autograd.gradcheck(function(xx) return dl.conv2d(xx, w, {padding = 1}) end, {x})
    assert(ok, rep)
    local xg = x:clone():requires_grad(true)
    dl.conv2d(xg, w, {padding = 1}):sum():backward()
    assert.is_nil(w.grad)
    assert.are.equal("float64", xg.grad:dtype())
  end)

  it("refuses mixed float32 and float64 tensors, naming the three dtypes", function()
    local x, w = dl.zeros(1, 3, 5, 5), dl.zeros(4, 3, 3, 3)
    assert.error_matches(function() dl.conv2d(x, w:double()) end,
      "conv2d: expected input, weight and bias all float32 or all float64, got float32, float64 and no bias")
    assert.error_matches(function() dl.conv2d(x:double(), w:double(), dl.zeros(4)) end,
      "got float64, float64 and float32")
    assert.error_matches(function() dl.conv2d(x:long(), w:long()) end, "got int64, int64 and no bias")
  end)

  it("names both shapes when channels do not fit", function()
    assert.error_matches(function() dl.conv2d(dl.zeros(1, 3, 5, 5), dl.zeros(4, 2, 3, 3)) end,
      "conv2d: input %[1, 3, 5, 5%] has 3 channels but weight %[4, 2, 3, 3%] expects 2 x 1 groups")
    assert.error_matches(function() dl.conv2d(dl.zeros(1, 3, 2, 2), dl.zeros(4, 3, 3, 3)) end,
      "smaller than the %(dilated%) kernel 3x3")
    assert.error_matches(function() dl.conv2d(dl.zeros(3, 5), dl.zeros(4, 3, 3, 3)) end, "must be %[N, C, H, W%]")
    assert.error_matches(function() dl.conv2d(dl.zeros(1, 3, 5, 5), dl.zeros(4, 3, 3, 3), {strides = 2}) end,
      "unknown option 'strides'")
    assert.error_matches(function() nn.Conv2d(3, 4, 3, {groups = 2}) end, "groups 2 must divide")
  end)

  -- The batch is split into at most 16 chunks whose weight-gradient sums are added in order;
  -- a large weight gets fewer chunks (64 x 64 x 13 x 13 floats: 12 chunks of 17 examples).
  local function per_example_equal(x, w, b, opts)
    local N = x:shape()[1]
    local xb, wb, bb = x:clone():requires_grad(true), w:clone():requires_grad(true), b:clone():requires_grad(true)
    local y = dl.conv2d(xb, wb, bb, opts)
    local gy = dl.randn(y:shape());
    (y * gy):sum():backward()
    local gw = dl.zeros(w:shape())
    local gb = dl.zeros(b:shape())
    -- The batched and the per-example products sum the same terms in different orders (other
    -- GEMM shapes, bias before or after), so each output may differ by float32 rounding of
    -- its dot product: a few units of 2^-24 times the sum of |terms|, which conv2d(|x|, |w|,
    -- |b|) gives per output. With 64 x 13 x 13 = 10816 terms and |y| up to 350 that is ~1e-4,
    -- above a fixed 1e-4; an example mixed with another would be off by O(|y|).
    local bound = dl.conv2d(x:abs(), w:abs(), b:abs(), opts) * 2 ^ -20
    for i = 1, N do
      local xi = x:narrow(1, i, 1):clone():requires_grad(true)
      local wi, bi = w:clone():requires_grad(true), b:clone():requires_grad(true)
      local yi = dl.conv2d(xi, wi, bi, opts);
      assert(((yi - y:narrow(1, i, 1)):abs() - bound:narrow(1, i, 1)):max():item() <= 0, "forward of example " .. i);
      (yi * gy:narrow(1, i, 1)):sum():backward()
      assert((xi.grad - xb.grad:narrow(1, i, 1)):abs():max():item() < 1e-4, "input gradient of example " .. i)
      gw = gw + wi.grad
      gb = gb + bi.grad
    end
    assert((gw - wb.grad):abs():max():item() < 1e-4 * (1 + wb.grad:abs():max():item()))
    assert((gb - bb.grad):abs():max():item() < 1e-3)
  end

  it("gives each example of a batch its own forward and backward, and sums the weight gradients", function()
    dl.seed(21)
    per_example_equal(dl.randn(23, 16, 32, 32), dl.randn(6, 8, 5, 5), dl.randn(6), {padding = 2, groups = 2})
    per_example_equal(dl.randn(17, 64, 13, 13), dl.randn(64, 64, 13, 13), dl.randn(64), {})
    per_example_equal(dl.randn(5, 6, 4, 4), dl.randn(3, 6, 1, 1), dl.randn(3), {})
    -- outputs under 128 positions take several examples per product (5x5: 6 at a time)
    per_example_equal(dl.randn(40, 6, 5, 5), dl.randn(4, 6, 3, 3), dl.randn(4), {padding = 1})
    per_example_equal(dl.randn(37, 4, 7, 6), dl.randn(6, 2, 3, 3), dl.randn(6), {stride = 2, padding = 1, groups = 2})
    per_example_equal(dl.randn(33, 5, 4, 4), dl.randn(3, 5, 1, 1), dl.randn(3), {})
  end)

  it("matches direct loops and gradchecks when several examples share one product", function()
    dl.seed(8)
    local x, w, b = dl.randn(20, 3, 4, 5), dl.randn(4, 3, 3, 3), dl.randn(4)
    local opts = {padding = 1, stride = {1, 2}}
    assert(H.max_diff(dl.conv2d(x, w, b, opts):totable(), H.ref_conv(x, w, b, {1, 2}, {1, 1}, {1, 1}, 1)) < 1e-4)
    local ok, rep = dl.autograd.gradcheck(function(xx, ww, bb)
      return dl.conv2d(xx:float(), ww:float(), bb:float(), {padding = 1, groups = 2})
    end, {dl.randn(18, 2, 3, 3), dl.randn(4, 1, 2, 2), dl.randn(4)}, gc)
    assert(ok, rep)
  end)

  it("computes bit-identical results at 1 and 2 threads", function()
    local function run(threads, xs, ws, opts)
      dl.threads(threads)
      dl.seed(5)
      local x = dl.randn(xs):requires_grad(true)
      local w, b = dl.randn(ws):requires_grad(true), dl.randn(ws[1]):requires_grad(true)
      local y = dl.conv2d(x, w, b, opts)
      local gy = dl.randn(y:shape());
      (y * gy):sum():backward()
      return y, x.grad, w.grad, b.grad
    end
    local before = dl.threads()
    for _, c in ipairs({{{19, 6, 11, 9}, {8, 3, 3, 3}, {padding = 1, groups = 2, stride = {1, 2}}},
                        {{19, 1, 16, 16}, {10, 1, 5, 5}, {padding = 2}},     -- the direct kernels
                        {{19, 8, 14, 14}, {16, 8, 5, 5}, {padding = 2}}}) do  -- patches and products
      local one = {run(1, table.unpack(c))}
      local two = {run(2, table.unpack(c))}
      for i = 1, 4 do assert.are.equal(0, (one[i] - two[i]):abs():max():item(), "result " .. i) end
    end
    dl.threads(before)
  end)

  -- DLUA_CONV_SIMD chooses the kernels: the vector paths (avx512, avx2) must give each other's
  -- bits on everything (row copies, the direct first-layer kernels, Winograd, pooling); against
  -- the portable loops the row copies and pooling must give their bits exactly, while the
  -- direct and Winograd kernels sum in other orders than patches and products, so they agree
  -- to float32 rounding
  it("gives the same bits on every vector path, and the portable loops' results (DLUA_CONV_SIMD)", function()
    local dir = H.tmpdir("conv-simd")
    H.spit(dir .. "/run.lua", [[
      local dl = require "dlua"
      local out = {}
      for i, c in ipairs({{{3, 16, 9, 9}, {8, 16, 5, 5}, {padding = 2}},
                          {{2, 16, 12, 12}, {4, 16, 3, 3}, {padding = 1}},
                          {{3, 6, 11, 9}, {4, 3, 3, 3}, {padding = 1, stride = {2, 1}, groups = 2}},
                          {{2, 12, 14, 14}, {4, 12, 3, 3}, {padding = 2, dilation = 2}},
                          {{3, 1, 20, 20}, {10, 1, 5, 5}, {padding = 2}},
                          {{2, 12, 13, 37}, {9, 12, 3, 3}, {padding = 1}},
                          {{2, 32, 12, 12}, {16, 32, 3, 3}, {padding = 1}},
                          {{2, 16, 14, 14}, {32, 16, 5, 5}, {padding = 2}},
                          {{2, 16, 6, 7}, {16, 16, 3, 3}, {padding = 1}},
                          {{2, 2, 9, 37}, {10, 2, 3, 3}, {padding = 1}}}) do
        dl.seed(i)
        local x = dl.randn(c[1]):requires_grad(true)
        local w, b = dl.randn(c[2]):requires_grad(true), dl.randn(c[2][1]):requires_grad(true)
        local y = dl.conv2d(x, w, b, c[3]);
        (y * dl.randn(y:shape())):sum():backward()
        out["y" .. i], out["gx" .. i], out["gw" .. i], out["gb" .. i] = y:detach(), x.grad, w.grad, b.grad
      end
      -- 2x2 max pooling with ties (values in 0..3) over odd sizes and rows of 17 outputs
      local x = (dl.rand(3, 5, 9, 35) * 4):to("int32"):float():requires_grad(true)
      local y = dl.max_pool2d(x, 2);
      (y * dl.randn(y:shape())):sum():backward()
      out.py, out.pgx = y:detach(), x.grad
      assert(dl.checkpoint.save(arg[1], out))
      print(dl.machine().kernels.conv)
    ]])
    local paths = {"portable", table.unpack(H.vector_paths())}
    local res = {}
    for _, p in ipairs(paths) do
      local proc = io.popen(string.format("cd %s && DLUA_CONV_SIMD=%s %s run.lua %s.st 2>&1; echo rc=$?", dir, p, H.EXE, p))
      local out = proc:read("a")
      proc:close()
      assert.are.equal("rc=0", out:match("rc=%d+"), out)
      assert.are.equal(p, out:match("^(%w+)"))
      res[p] = assert(dl.checkpoint.load(dir .. "/" .. p .. ".st"))
    end
    local plain = res.portable
    for _, p in ipairs(paths) do
      local a = res[p]
      for i = 1, 10 do
        for _, k in ipairs({"y", "gx", "gw", "gb"}) do
          local d = (a[k .. i] - plain[k .. i]):abs():max():item()
          -- the row copies alone (cases 1-4, 6: no direct kernel, no Winograd) keep the bits
          if i <= 4 or i == 6 then assert.are.equal(0, d, p .. " " .. k .. i)
          else assert(d <= 2e-5 * (1 + plain[k .. i]:abs():max():item()), p .. " " .. k .. i .. " differs by " .. d) end
          -- the vector paths agree with each other to the bit
          if p ~= "portable" then
            assert.are.equal(0, (a[k .. i] - res[paths[#paths]][k .. i]):abs():max():item(), p .. " " .. k .. i)
          end
        end
      end
      assert.are.equal(0, (a.py - plain.py):abs():max():item())
      assert.are.equal(0, (a.pgx - plain.pgx):abs():max():item())
    end
    dl.fs.rm_rf(dir)
  end)

  it("handles an empty batch", function()
    local x = dl.zeros(0, 3, 5, 5):requires_grad(true)
    local w, b = dl.randn(4, 3, 3, 3):requires_grad(true), dl.randn(4):requires_grad(true)
    local y = dl.conv2d(x, w, b, {padding = 1})
    assert.are.same({0, 4, 5, 5}, y:shape())
    y:sum():backward()
    assert.are.equal(0, w.grad:abs():max():item())
    assert.are.equal(0, b.grad:abs():max():item())
  end)
end)

describe("dlua pooling", function()
  it("max-pools and average-pools 2x2 windows", function()
    local x = dl.arange(16):reshape(1, 1, 4, 4)
    assert.are.same({{{{5, 7}, {13, 15}}}}, dl.max_pool2d(x, 2):totable())
    assert.are.same({{{{2.5, 4.5}, {10.5, 12.5}}}}, dl.avg_pool2d(x, 2):totable())
    -- padding 1, stride 2, kernel 3 over 4x4: windows centred on 1, 3 (0-based); avg counts padding
    local a = dl.avg_pool2d(x, 3, {stride = 2, padding = 1}):totable()
    assert(math.abs(a[1][1][1][1] - (0 + 1 + 4 + 5) / 9) < 1e-6)
  end)

  -- the 2x2 stride-2 window has its own forward (vector compares on AVX-512) and a backward
  -- that writes every input element once: odd sizes leave a last row and column to zero
  it("max-pools 2x2 windows with the general rule: first of ties, NaN wins, odd sizes", function()
    dl.seed(4)
    local N, C, Hh, Ww = 2, 3, 7, 37
    local v = (dl.rand(N, C, Hh, Ww) * 4):to("int32"):float():totable()   -- values 0..3: many ties
    v[1][2][3][5], v[2][3][1][36], v[2][1][6][2] = 0 / 0, 0 / 0, 0 / 0
    local x = dl.tensor(v):requires_grad(true)
    local y = dl.max_pool2d(x, 2)
    local gy = dl.randn(y:shape())
    y:backward(gy)
    local Y, G, GX = y:totable(), gy:totable(), x.grad:totable()
    assert.are.same({N, C, 3, 18}, y:shape())
    for n = 1, N do for c = 1, C do
      local want = {}
      for h = 1, Hh do want[h] = {} for w = 1, Ww do want[h][w] = 0 end end
      for oh = 1, 3 do for ow = 1, 18 do
        local p = v[n][c]
        local best, bh, bw = p[2 * oh - 1][2 * ow - 1], 2 * oh - 1, 2 * ow - 1
        for _, hw in ipairs({{2 * oh - 1, 2 * ow}, {2 * oh, 2 * ow - 1}, {2 * oh, 2 * ow}}) do
          local e = p[hw[1]][hw[2]]
          if e > best or e ~= e then best, bh, bw = e, hw[1], hw[2] end
        end
        local got = Y[n][c][oh][ow]
        assert(got == best or (got ~= got and best ~= best), "max at " .. n .. c .. oh .. ow)
        want[bh][bw] = G[n][c][oh][ow]
      end end
      assert.are.same(want, GX[n][c])
    end end
  end)

  it("gradchecks max and average pooling", function()
    dl.seed(3)
    -- well-separated values so eps never changes which element is the max
    local x = dl.randperm(2 * 3 * 6 * 5):double():scale(0.1):reshape(2, 3, 6, 5)
    local ok, rep = dl.autograd.gradcheck(function(t) return dl.max_pool2d(t:float(), 2) end, {x}, gc)
    assert(ok, rep)
    ok, rep = dl.autograd.gradcheck(function(t) return dl.avg_pool2d(t:float(), 3, {stride = 2, padding = 1}) end,
      {dl.randn(2, 3, 7, 6)}, gc)
    assert(ok, rep)
  end)

  it("pools float64 as float32 does, by hand, and gradchecks tightly", function()
    dl.seed(5)
    local x = dl.randn(2, 3, 7, 6)
    for _, o in ipairs({{2, {}}, {3, {stride = 2, padding = 1}}, {2, {stride = 1}}}) do
      local ym = dl.max_pool2d(x:double(), o[1], o[2])
      assert.are.equal("float64", ym:dtype())
      assert.is_true((ym - dl.max_pool2d(x, o[1], o[2]):double()):abs():max():item() == 0)
      local ok, rep = dl.autograd.gradcheck(function(t) return dl.max_pool2d(t, o[1], o[2]) end, {x:double()})
      assert(ok, rep)
      ok, rep = dl.autograd.gradcheck(function(t) return dl.avg_pool2d(t, o[1], o[2]) end, {x:double()})
      assert(ok, rep)
    end
    -- one 3x3 window at the corner, padding counted as zeros: (x11 + x12 + x21 + x22) / 9
    local xd = x:double()
    local p = xd:select(1, 2):select(1, 3)
    local want = (p[1][1]:item() + p[1][2]:item() + p[2][1]:item() + p[2][2]:item()) / 9
    local got = dl.avg_pool2d(xd, 3, {stride = 2, padding = 1})[2][3][1][1]:item()
    assert(math.abs(got - want) < 1e-15, got - want)
  end)

  -- max and average pooling of x0 at 2 threads give the 1-thread values and gradients, bit
  -- for bit, in x0's dtype
  local function pools_over_threads(x0)
    local function run(threads, fn)
      dl.threads(threads)
      local x = x0:clone():requires_grad(true)
      local y = fn(x);
      (y * y):sum():backward()
      return y, x.grad
    end
    for _, fn in ipairs({function(x) return dl.max_pool2d(x, 3, {stride = 2, padding = 1}) end,
                         function(x) return dl.avg_pool2d(x, 2) end}) do
      local y1, g1 = run(1, fn)
      local y2, g2 = run(2, fn)
      assert.are.equal(x0:dtype(), g1:dtype())
      assert.is_true((y1 - y2):abs():max():item() == 0)
      assert.is_true((g1 - g2):abs():max():item() == 0)
    end
  end

  it("pools float64 over threads with the single-thread result", function()
    local saved = dl.threads()
    dl.seed(9)
    pools_over_threads(dl.randn(8, 16, 31, 33):double())
    dl.threads(saved)
  end)

  it("pools globally with AdaptiveAvgPool2d(1)", function()
    local x = dl.randn(2, 3, 4, 5)
    local y = nn.AdaptiveAvgPool2d(1)(x)
    assert.are.same({2, 3, 1, 1}, y:shape())
    assert(math.abs(y[2][3][1][1]:item() - x[2][3]:mean():item()) < 1e-6)
  end)

  it("pools large inputs over threads with the single-thread result, forward and backward", function()
    local saved = dl.threads()
    dl.seed(8)
    local x0 = dl.randn(8, 16, 31, 33)
    pools_over_threads(x0)
    -- one window checked by hand: plane (3, 5), output (2, 4) of the 2x2 average
    local y = dl.avg_pool2d(x0, 2)
    local p = x0:select(1, 3):select(1, 5)
    local want = (p[3][7]:item() + p[3][8]:item() + p[4][7]:item() + p[4][8]:item()) / 4
    assert(math.abs(y[3][5][2][4]:item() - want) < 1e-6)
    dl.threads(saved)
  end)

  it("refuses bad pooling arguments", function()
    assert.error_matches(function() dl.max_pool2d(dl.zeros(1, 1, 2, 2), 3) end, "smaller than the kernel 3x3")
    assert.error_matches(function() dl.max_pool2d(dl.zeros(4, 4), 2) end, "must be a float32 or float64 %[N, C, H, W%]")
    assert.error_matches(function() dl.avg_pool2d(dl.zeros(1, 1, 4, 4):long(), 2) end,
      "avg_pool2d: input %[1, 1, 4, 4%] must be a float32 or float64")
    assert.error_matches(function() dl.max_pool2d(dl.zeros(1, 1, 4, 4), 2, {padding = 2}) end, "at most half the kernel")
  end)
end)
