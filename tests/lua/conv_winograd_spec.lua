-- Winograd convolutions (engine/ops/conv_winograd.c): stride-1 3x3 and 5x5 layers whose channel
-- counts are multiples of 16 take them on AVX-512 machines. Checked against direct loops,
-- finite differences, the im2col path (DLUA_CONV_WINOGRAD=0, in a subprocess) and
-- themselves at 1 and 2 threads.
local dl = require "dlua"
local H = dofile("tests/lua/helpers.lua")

local avx512 = (H.slurp("/proc/cpuinfo") or ""):find("avx512f") ~= nil

-- each tile shape: F(3x3, 5x5) and F(4x4, 3x3) (outputs of 8 and more); F(2x2, 5x5) and
-- F(2x2, 3x3) (smaller); odd sizes leave partial tiles at the bottom and right
local shapes = {
  {"F(3x3, 5x5), padding 2, 9x11 output", {2, 16, 9, 11}, {32, 16, 5, 5}, {2, 2}},
  {"F(3x3, 5x5), no padding, 8x10 output", {1, 32, 12, 14}, {16, 32, 5, 5}, {0, 0}},
  {"F(2x2, 5x5), padding 2, odd width", {2, 16, 6, 7}, {16, 16, 5, 5}, {2, 2}},
  {"F(2x2, 5x5), no padding", {1, 32, 9, 10}, {16, 32, 5, 5}, {0, 0}},
  {"F(4x4, 3x3), padding 1, 9x8 output", {2, 16, 9, 8}, {16, 16, 3, 3}, {1, 1}},
  {"F(4x4, 3x3), padding (0, 2)", {1, 16, 11, 13}, {32, 16, 3, 3}, {0, 2}},
  {"F(2x2, 3x3), 5x6 output", {2, 16, 5, 6}, {32, 16, 3, 3}, {1, 1}},
}

describe("dlua conv2d by Winograd's minimal filtering", function()
  for _, c in ipairs(shapes) do
    it("matches direct loops: " .. c[1], function()
      dl.seed(3)
      local x, w, b = dl.randn(c[2]), dl.randn(c[3]) * 0.2, dl.randn(c[3][1])
      local y = dl.conv2d(x, w, b, {padding = c[4]})
      local ref = H.ref_conv(x, w, b, {1, 1}, c[4], {1, 1}, 1)
      -- |y| reaches ~20 here; Winograd's transforms round at a few 1e-6 of the terms' size
      assert(H.max_diff(y:totable(), ref) < 2e-4, "differs by " .. H.max_diff(y:totable(), ref))
    end)
  end

  for i, c in ipairs(shapes) do
    if i == 1 or i == 3 or i == 5 or i == 7 then
      -- conv2d is linear in each input, so a central difference with a large step has no
      -- truncation error, and the step keeps the outputs' float32 rounding out of the quotient
      it("gradchecks: " .. c[1], function()
        dl.seed(4)
        local xs = {1, c[2][2], c[2][3], c[2][4]}
        local ok, rep = dl.autograd.gradcheck(function(x, w, b)
          return dl.conv2d(x:float(), w:float(), b:float(), {padding = c[4]})
        end, {dl.randn(xs), dl.randn(c[3]) * 0.2, dl.randn(c[3][1])}, {eps = 1, atol = 1e-3, rtol = 1e-3})
        assert(ok, rep)
      end)
    end
  end

  -- the forward, and gradients of a weighted sum, of several layers: at 1 and 2 threads in
  -- one process, and with DLUA_CONV_WINOGRAD=0 (im2col and sgemm) in another
  local script = [[
    local dl = require "dlua"
    dl.threads(tonumber(arg[2]))
    local out = {}
    for i, c in ipairs({{{37, 16, 14, 14}, {32, 16, 5, 5}, {padding = 2}},   -- 16 blocks in 16 chunks
                        {{23, 32, 16, 16}, {16, 32, 3, 3}, {padding = 1}},   -- F(4x4, 3x3)
                        {{9, 64, 4, 4}, {256, 64, 3, 3}, {padding = 1}},     -- F(2x2, 3x3), 8 chunks (N = 9)
                        {{3, 512, 4, 4}, {512, 512, 3, 3}, {padding = 1}}})  -- 2 chunks of 4M floats
    do
      dl.seed(i)
      local x = dl.randn(c[1]):requires_grad(true)
      local w = (dl.randn(c[2]) * (1 / math.sqrt(c[2][2] * c[2][3] * c[2][4]))):requires_grad(true)
      local b = dl.randn(c[2][1]):requires_grad(true)
      local y = dl.conv2d(x, w, b, c[3]);
      (y * dl.randn(y:shape())):sum():backward()
      out["y" .. i], out["gx" .. i], out["gw" .. i], out["gb" .. i] = y:detach(), x.grad, w.grad, b.grad
    end
    assert(dl.checkpoint.save(arg[1], out))
  ]]

  local function run_all(dir)
    H.spit(dir .. "/run.lua", script)
    for _, r in ipairs({{"", "1", "one.st"}, {"", "2", "two.st"}, {"DLUA_CONV_WINOGRAD=0 ", "2", "im2col.st"}}) do
      local p = io.popen(string.format("cd %s && %s%s run.lua %s %s 2>&1; echo rc=$?", dir, r[1], H.EXE, r[3], r[2]))
      local out = p:read("a")
      p:close()
      assert.are.equal("rc=0", out:match("rc=%d+"), out)
    end
    return assert(dl.checkpoint.load(dir .. "/one.st")), assert(dl.checkpoint.load(dir .. "/two.st")),
      assert(dl.checkpoint.load(dir .. "/im2col.st"))
  end

  it("gives bit-identical results at 1 and 2 threads and im2col's to float32 rounding", function()
    local one, two, ref = run_all(H.tmpdir("conv-winograd"))
    local differs = false
    for i = 1, 4 do
      for _, k in ipairs({"y", "gx", "gw", "gb"}) do
        local key = k .. i
        assert.are.equal(0, (one[key] - two[key]):abs():max():item(), key .. " at 1 and 2 threads")
        local scale = ref[key]:abs():max():item()
        local d = (one[key] - ref[key]):abs():max():item()
        assert(d <= 2e-5 * (1 + scale), key .. " differs from im2col by " .. d .. " at scale " .. scale)
        if d > 0 and k ~= "gb" then differs = true end
      end
      -- the bias gradient is the same double sum on both paths
      assert.are.equal(0, (one["gb" .. i] - ref["gb" .. i]):abs():max():item(), "gb" .. i)
    end
    -- on an AVX-512 machine the default path is really another algorithm than im2col
    assert.are.equal(avx512, differs)
  end)

  -- Error against the float64 convolution on realistic magnitudes (ReLU outputs, He-initialised
  -- weights), as max |error| / max |reference| of the output, the weight gradient and the
  -- input gradient. The im2col path measures 2-4e-7, 1.5-3e-7 and 1.5-2.5e-7 here; the bounds
  -- are each tile's measured error (seeded, so fixed) with 1.3x room, so that a change that
  -- loses digits fails: 6-point tiles on 0, +-3/4, +-3/2 measure 1.2e-6 / 7.0e-7 / 1.2e-6
  -- (F(4x4, 3x3); the points 0, +-1, +-2 gave 5.9e-6 / 2.0e-6) and 5.4e-7 / 9.8e-7 / 5.9e-7
  -- (F(2x2, 5x5); 1.7e-6 / 3.4e-6 on 0, +-1, +-2), F(3x3, 5x5) on +-5/16, +-7/8, +-7/4
  -- 1.4e-6 / 1.6e-6 / 1.4e-6 (F(4x4, 5x5), which this layer took before, 4.9e-6 / 3.8e-6).
  -- Since the tile products run on dlua's own sgemm kernels (engine/ops/sgemm.c, the same
  -- average error as OpenBLAS's, other rounding) the 4-point tiles measure 3.3e-7 / 1.7e-7 /
  -- 2.9e-7 (F(2x2, 3x3); 2.3e-7 / 1.7e-7 / 2.6e-7 on OpenBLAS) and 8.1e-7 / 1.1e-6 / 7.7e-7
  -- (F(2x2, 5x5); 5.4e-7 / 9.8e-7 / 5.9e-7), the others the same as on OpenBLAS.
  for i, c in ipairs({{"F(2x2, 3x3)", {8, 64, 6, 6}, {64, 64, 3, 3}, 1, {4.3e-7, 2.3e-7, 3.8e-7}},
                      {"F(4x4, 3x3)", {8, 64, 16, 16}, {64, 64, 3, 3}, 1, {1.5e-6, 9.2e-7, 1.6e-6}},
                      {"F(3x3, 5x5)", {8, 32, 16, 16}, {32, 32, 5, 5}, 2, {1.8e-6, 2.1e-6, 1.9e-6}},
                      {"F(2x2, 5x5)", {8, 32, 6, 6}, {32, 32, 5, 5}, 2, {1.05e-6, 1.43e-6, 1.0e-6}}}) do
    it("stays near the float64 convolution: " .. c[1], function()
      dl.seed(i)
      local fan = c[3][2] * c[3][3] * c[3][4]
      local x, w, b = dl.randn(c[2]):relu(), dl.randn(c[3]) * math.sqrt(2 / fan), dl.randn(c[3][1]) * 0.1
      local function run(t)
        local xx, ww = x:to(t):detach():requires_grad(true), w:to(t):detach():requires_grad(true)
        local y = dl.conv2d(xx, ww, b:to(t), {padding = c[4]})
        dl.seed(100);
        (y * dl.randn(y:shape()):to(t)):sum():backward()
        return {y:double(), ww.grad:double(), xx.grad:double()}
      end
      local got, ref = run("float32"), run("float64")
      for k, name in ipairs({"output", "weight gradient", "input gradient"}) do
        local e = (got[k] - ref[k]):abs():max():item() / ref[k]:abs():max():item()
        assert(e < c[5][k], name .. " error " .. e)
      end
    end)
  end

  it("gives the input or the weight gradient alone, and handles an empty batch", function()
    dl.seed(6)
    local x, w, b = dl.randn(3, 16, 8, 8), dl.randn(16, 16, 3, 3) * 0.2, dl.randn(16)
    local function grads(want_x, want_w)
      local xx, ww, bb = x:clone():requires_grad(want_x), w:clone():requires_grad(want_w), b:clone()
      local y = dl.conv2d(xx, ww, bb, {padding = 1})
      local gy = dl.arange(y:numel()):reshape(y:shape()):float() * 1e-3;
      (y * gy):sum():backward()
      return xx.grad, ww.grad
    end
    local gx, gw = grads(true, true)
    local gx_only = grads(true, false)
    local _, gw_only = grads(false, true)
    assert.are.equal(0, (gx - gx_only):abs():max():item())
    assert.are.equal(0, (gw - gw_only):abs():max():item())
    local e = dl.zeros(0, 16, 8, 8):requires_grad(true)
    local we = w:clone():requires_grad(true)
    local y = dl.conv2d(e, we, nil, {padding = 1})
    assert.are.same({0, 16, 8, 8}, y:shape())
    y:sum():backward()
    assert.are.equal(0, we.grad:abs():max():item())
  end)
end)
