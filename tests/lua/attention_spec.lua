-- Attention (issue 34, item 3): the fused op t:scaled_dot_product_attention
-- (engine/ops/attention.c) against the explicit softmax(q k^T * scale + mask) v in torch
-- float64 (torch 1.13 has no F.scaled_dot_product_attention), forward and backward, in
-- float64 (1e-12) and float32 (2e-6, relative to max(|want|, 1)); nn.MultiheadAttention and
-- nn.TransformerEncoderLayer against torch's modules with the same weights; errors by message.
local dl = require "dlua"
local TW = dofile("tests/lua/torch_twin.lua")
local lit, flat, rel_err = TW.lit, TW.flat, TW.rel_err
local nn = dl.nn

local function near(got, want, tol, what, floor)
  local e, at = rel_err(got, want, floor)
  assert(e <= tol, string.format("%s: relative error %.3g at %d (got %.17g, want %.17g) above %g", what, e, at,
    got[at] or 0, want[at] or 0, tol))
end

local function leaf(t) return t:detach():requires_grad(true) end

-- python lines: tensors named as given, leaves with gradients where g
local function py_tensor(name, t, g) return string.format("%s = T(%s, %s)", name, lit(t:to("float64")), g and "True" or "False") end

describe("scaled_dot_product_attention against the explicit formula in torch", function()
  -- cases: {dtype, causal, mask kind, T, S}
  local CASES = {
    {"float64", false, nil, 5, 7}, {"float64", true, nil, 6, 6}, {"float64", true, "bool", 7, 5},
    {"float64", false, "float", 4, 9}, {"float32", false, nil, 5, 7}, {"float32", true, "bool", 70, 70},
    {"float32", false, "float", 9, 4},
  }
  local B, H, D, Dv = 2, 3, 8, 5
  local mine, torch = {}, nil

  setup(function()
    dl.seed(7)
    local py = TW.script()
    for i, c in ipairs(CASES) do
      local dt, causal, mk, T, S = c[1], c[2], c[3], c[4], c[5]
      local q = leaf(dl.randn(B, H, T, D, {dtype = dt}))
      local k = leaf(dl.randn(B, H, S, D, {dtype = dt}))
      local v = leaf(dl.randn(B, H, S, Dv, {dtype = dt}))
      local g = dl.randn(B, H, T, Dv, {dtype = dt})
      local mask
      if mk == "bool" then                 -- key padding: the last two keys of batch 2 dropped
        local keep = {}
        for b = 1, B do for j = 1, S do keep[#keep + 1] = (b == 2 and j > S - 2) and 0 or 1 end end
        mask = dl.tensor(keep, {dtype = "uint8"}):reshape(B, 1, 1, S)
      elseif mk == "float" then
        mask = dl.randn(1, H, T, S, {dtype = dt})
      end
      local o = q:scaled_dot_product_attention(k, v, {causal = causal, mask = mask, scale = 0.4})
      ;(o * g):sum():backward()
      mine[i] = {o = flat(o), dq = flat(q.grad), dk = flat(k.grad), dv = flat(v.grad)}
      local lines = {py_tensor("q", q, true), py_tensor("k", k, true), py_tensor("v", v, true), py_tensor("g", g),
        "s = q @ k.transpose(-1, -2) * 0.4"}
      if causal then lines[#lines + 1] = string.format("s = s.masked_fill(torch.ones(%d, %d).triu(1).bool(), -inf)", T, S) end
      if mk == "bool" then
        lines[#lines + 1] = py_tensor("m", mask) .. "; s = s.masked_fill(m == 0, -inf)"
      elseif mk == "float" then
        lines[#lines + 1] = py_tensor("m", mask) .. "; s = s + m"
      end
      lines[#lines + 1] = string.format("o = s.softmax(-1) @ v; (o * g).sum().backward(); out('o%d', o); " ..
        "out('dq%d', q.grad); out('dk%d', k.grad); out('dv%d', v.grad)", i, i, i, i)
      py:add(table.concat(lines, "\n"))
    end
    torch = py:run()
  end)

  it("agrees in float64 to 1e-12 and in float32 to 2e-6, values and the three gradients", function()
    for i, c in ipairs(CASES) do
      local tol = c[1] == "float64" and 1e-12 or 2e-6
      for _, key in ipairs({"o", "dq", "dk", "dv"}) do
        near(mine[i][key], torch[key .. i], tol, string.format("case %d (%s, causal %s, mask %s) %s", i, c[1],
          tostring(c[2]), tostring(c[3]), key), 1)
      end
    end
  end)

  it("is bit-identical at one and two threads, and on non-contiguous views", function()
    dl.seed(3)
    local q, k, v = dl.randn(4, 2, 100, 16), dl.randn(4, 2, 80, 16), dl.randn(4, 2, 80, 8)
    local before = dl.threads()
    local function run()
      local ql, kl, vl = leaf(q), leaf(k), leaf(v)
      local o = ql:scaled_dot_product_attention(kl, vl, {causal = true})
      o:sum():backward()
      return {o, ql.grad, kl.grad, vl.grad}
    end
    dl.threads(1)
    local a = run()
    dl.threads(2)
    local b = run()
    dl.threads(before)
    for i = 1, 4 do assert.are.equal(a[i]:numel(), a[i]:eq(b[i]):sum():item()) end
    -- the same values through views: q as a transposed copy transposed back
    local qt = q:transpose(3, 4):contiguous():transpose(3, 4)
    local o = qt:scaled_dot_product_attention(k, v, {causal = true})
    assert.are.equal(o:numel(), o:eq(a[1]):sum():item())
  end)

  it("refuses mismatched shapes, dtypes, masks and options, naming them", function()
    local q, k, v = dl.randn(2, 3, 4, 5), dl.randn(2, 3, 6, 5), dl.randn(2, 3, 6, 7)
    assert.error_matches(function() q:reshape(6, 4, 5):scaled_dot_product_attention(k, v) end,
      "scaled_dot_product_attention: q [6, 4, 5] must be [B, H, T, D]", 1, true)
    assert.error_matches(function() q:scaled_dot_product_attention(dl.randn(2, 3, 6, 4), v) end,
      "scaled_dot_product_attention: k [2, 3, 6, 4] does not match q [2, 3, 4, 5] (expected [2, 3, S, 5])", 1, true)
    assert.error_matches(function() q:scaled_dot_product_attention(k, dl.randn(2, 3, 5, 7)) end,
      "scaled_dot_product_attention: v [2, 3, 5, 7] does not match k [2, 3, 6, 5] (expected [2, 3, 6, Dv])", 1, true)
    assert.error_matches(function() q:scaled_dot_product_attention(k:double(), v) end,
      "q, k and v must have one dtype, got float32, float64 and float32", 1, true)
    assert.error_matches(function() q:scaled_dot_product_attention(k, v, {mask = dl.zeros(2, 3, 4, 5)}) end,
      "mask [2, 3, 4, 5] does not broadcast to [B, H, T, S] = [2, 3, 4, 6]", 1, true)
    assert.error_matches(function() q:scaled_dot_product_attention(k, v, {mask = dl.zeros(4, 6):double()}) end,
      "mask must be uint8 (keep where non-zero) or float32 (added), got float64", 1, true)
    assert.error_matches(function() q:scaled_dot_product_attention(k, v, {scale = -1}) end,
      "option 'scale' (a positive finite number expected", 1, true)
    assert.error_matches(function() q:scaled_dot_product_attention(k, v, {casual = true}) end,
      "unknown option 'casual'", 1, true)
    assert.error_matches(function() q:scaled_dot_product_attention(k, v, {}, 1) end,
      "bad argument #4 to 'scaled_dot_product_attention' (no more than 3 arguments expected, got 4)", 1, true)
  end)

  it("gives NaN for a row with every key masked (as torch) and zeros for no keys", function()
    local q, k, v = dl.randn(1, 1, 2, 3), dl.randn(1, 1, 2, 3), dl.randn(1, 1, 2, 3)
    local keep = dl.tensor({{1, 1}, {0, 0}}, {dtype = "uint8"})
    local o = q:scaled_dot_product_attention(k, v, {mask = keep}):totable()[1][1]
    for c = 1, 3 do assert.is_true(o[1][c] == o[1][c]); assert.is_true(o[2][c] ~= o[2][c]) end
    local z = q:scaled_dot_product_attention(dl.randn(1, 1, 0, 3), dl.randn(1, 1, 0, 4))
    assert.are.same({1, 1, 2, 4}, z:shape())
    assert.are.equal(0, z:abs():sum():item())
  end)
end)

-- python lines that build torch module `name` with our module's parameters copied in
local function copy_params(name, m)
  local lines = {"P = dict(" .. name .. ".named_parameters())"}
  for _, p in ipairs(m:named_parameters()) do
    lines[#lines + 1] = string.format("P['%s'].data.copy_(torch.tensor(%s).reshape(%s))", p[1], lit(flat(p[2]:double())),
      lit(p[2]:shape()))
  end
  return table.concat(lines, "\n")
end

describe("nn.MultiheadAttention and nn.TransformerEncoderLayer against torch's modules (float64)", function()
  local E, H, N, T, S = 12, 3, 2, 5, 4

  it("MultiheadAttention: output, averaged weights and gradients of inputs and weights", function()
    dl.seed(11)
    local cases = {
      {causal = false, self_attn = false, kpm = true, weights = true},
      {causal = true, self_attn = true, kpm = false, weights = false},
      {causal = true, self_attn = true, kpm = true, weights = true},
    }
    local py = TW.script():add("import torch.nn as tnn")
    local mine = {}
    for i, c in ipairs(cases) do
      local m = nn.MultiheadAttention(E, H, {causal = c.causal})
      dl.no_grad(function() for _, p in ipairs(m:parameters()) do p:copy_(dl.randn(p:shape()):scale(0.3)) end end)
      local L = c.self_attn and T or S
      local q = leaf(dl.randn(N, T, E, {dtype = "float64"}))
      local k = c.self_attn and q or leaf(dl.randn(N, L, E, {dtype = "float64"}))
      local v = c.self_attn and q or leaf(dl.randn(N, L, E, {dtype = "float64"}))
      local g = dl.randn(N, T, E, {dtype = "float64"})
      local kpm = c.kpm and dl.tensor({{0, 0, 0, 1, L == 5 and 1 or 0}, {0, 0, 0, 0, 0}}, {dtype = "uint8"})
        :narrow(2, 1, L) or nil
      local md = m:to("float64")
      local o, w = md(q, k, v, {key_padding_mask = kpm, need_weights = c.weights})
      ;(o * g):sum():backward()
      mine[i] = {o = flat(o), w = w and flat(w), dq = flat(q.grad), dw = flat(md.in_proj_weight.grad),
        dk = not c.self_attn and flat(k.grad) or nil}
      local lines = {string.format("m = tnn.MultiheadAttention(%d, %d, batch_first=True)", E, H), copy_params("m", md),
        py_tensor("q", q, true), py_tensor("g", g)}
      if c.self_attn then lines[#lines + 1] = "k = v = q"
      else lines[#lines + 1] = py_tensor("k", k, true) .. "\n" .. py_tensor("v", v, true) end
      lines[#lines + 1] = kpm and (py_tensor("kpm", kpm) .. "; kpm = kpm.bool()") or "kpm = None"
      lines[#lines + 1] = c.causal and string.format("am = torch.ones(%d, %d).triu(1).bool()", T, L) or "am = None"
      lines[#lines + 1] = string.format("o, w = m(q, k, v, key_padding_mask=kpm, attn_mask=am, need_weights=True)\n" ..
        "(o * g).sum().backward(); out('o%d', o); out('w%d', w); out('dq%d', q.grad); out('dw%d', m.in_proj_weight.grad)",
        i, i, i, i)
      if not c.self_attn then lines[#lines + 1] = string.format("out('dk%d', k.grad)", i) end
      py:add(table.concat(lines, "\n"))
    end
    local torch = py:run()
    for i, c in ipairs(cases) do
      for _, key in ipairs({"o", "w", "dq", "dw", "dk"}) do
        if mine[i][key] then near(mine[i][key], torch[key .. i], 1e-10, string.format("case %d %s", i, key), 1) end
      end
      if c.weights then assert.is_not_nil(mine[i].w) end
    end
  end)

  it("TransformerEncoderLayer in eval mode: post-norm and pre-norm, relu and gelu, with key padding", function()
    dl.seed(12)
    local py = TW.script():add("import torch.nn as tnn")
    local mine, cases = {}, {{false, "relu"}, {true, "gelu"}}
    for i, c in ipairs(cases) do
      local l = nn.TransformerEncoderLayer(E, H, {dim_feedforward = 20, norm_first = c[1], activation = c[2]})
      dl.no_grad(function() for _, p in ipairs(l:parameters()) do p:copy_(dl.randn(p:shape()):scale(0.3)) end end)
      l = l:to("float64"):eval()
      local x = leaf(dl.randn(N, T, E, {dtype = "float64"}))
      local g = dl.randn(N, T, E, {dtype = "float64"})
      local kpm = dl.tensor({{0, 0, 0, 1, 1}, {0, 0, 0, 0, 0}}, {dtype = "uint8"})
      local y = l(x, {src_key_padding_mask = kpm})
      ;(y * g):sum():backward()
      mine[i] = {y = flat(y), dx = flat(x.grad), dw = flat(l.linear1.weight.grad)}
      py:add(table.concat({
        string.format("l = tnn.TransformerEncoderLayer(%d, %d, dim_feedforward=20, activation='%s', norm_first=%s, " ..
          "batch_first=True).eval()", E, H, c[2], c[1] and "True" or "False"),
        copy_params("l", l), py_tensor("x", x, true), py_tensor("g", g), py_tensor("kpm", kpm),
        string.format("y = l(x, src_key_padding_mask=kpm.bool()); (y * g).sum().backward(); out('y%d', y); " ..
          "out('dx%d', x.grad); out('dw%d', l.linear1.weight.grad)", i, i, i),
      }, "\n"))
    end
    local torch = py:run()
    for i = 1, #cases do
      for _, key in ipairs({"y", "dx", "dw"}) do near(mine[i][key], torch[key .. i], 1e-10, key .. i, 1) end
    end
  end)

  it("pass gradcheck in float64 in their inputs, with masks and causal (torch's twin checks the weights)", function()
    dl.seed(4)
    local m = nn.MultiheadAttention(6, 2, {causal = true}):to("float64")
    local kpm = dl.tensor({{0, 0, 1}, {0, 0, 0}}, {dtype = "uint8"})
    local ok, rep = dl.autograd.gradcheck(function(q, k) return m(q, k, k, {key_padding_mask = kpm}) end,
      {dl.randn(2, 3, 6), dl.randn(2, 3, 6)})
    assert(ok, rep)
    local l = nn.TransformerEncoderLayer(6, 2, {dim_feedforward = 5, norm_first = true, activation = "gelu"})
    l = l:to("float64"):eval()
    local am = dl.randn(3, 3, {dtype = "float64"})
    ok, rep = dl.autograd.gradcheck(function(x) return l(x, {src_mask = am}) end, {dl.randn(2, 3, 6)})
    assert(ok, rep)
    ok, rep = dl.autograd.gradcheck(function(q, k, v)
      return q:scaled_dot_product_attention(k, v, {mask = dl.tensor({{0.5, -1, 0}}, {dtype = "float64"})})
    end, {dl.randn(1, 2, 4, 3), dl.randn(1, 2, 3, 3), dl.randn(1, 2, 3, 2)})
    assert(ok, rep)
  end)

  it("names parameters as torch does and refuses bad sizes, options and inputs", function()
    local names = {}
    for _, p in ipairs(nn.TransformerEncoderLayer(8, 2, {dim_feedforward = 4}):named_parameters()) do
      names[#names + 1] = p[1]
    end
    assert.are.equal("self_attn.in_proj_weight self_attn.in_proj_bias self_attn.out_proj.weight " ..
      "self_attn.out_proj.bias linear1.weight linear1.bias linear2.weight linear2.bias norm1.weight norm1.bias " ..
      "norm2.weight norm2.bias", table.concat(names, " "))
    assert.are.equal(2, #nn.MultiheadAttention(8, 2, {bias = false}):parameters())
    assert.error_matches(function() nn.MultiheadAttention(8, 3) end, "num_heads 3 must divide embed_dim 8", 1, true)
    assert.error_matches(function() nn.MultiheadAttention(8, 2, {heads = 2}) end, "unknown option 'heads'", 1, true)
    assert.error_matches(function() nn.TransformerEncoderLayer(8, 2, {activation = "tanh"}) end,
      "activation must be 'relu' or 'gelu', got 'tanh'", 1, true)
    local m = nn.MultiheadAttention(8, 2)
    local x = dl.randn(2, 5, 8)
    assert.error_matches(function() m(dl.randn(2, 5, 6)) end, "query [2, 5, 6] must be [N, L, 8]", 1, true)
    assert.error_matches(function() m(x, dl.randn(2, 4, 8), dl.randn(2, 3, 8)) end,
      "key [2, 4, 8] and value [2, 3, 8] do not match query [2, 5, 8]", 1, true)
    assert.error_matches(function() m(x, x, x, {key_padding_mask = dl.zeros(2, 4)}) end,
      "key_padding_mask [2, 4] must be [N, S] = [2, 5]", 1, true)
    assert.error_matches(function() m(x, x, x, {attn_mask = dl.zeros(5, 4)}) end,
      "attn_mask [5, 4] must be [T, S] = [5, 5] or [N * num_heads, T, S] = [4, 5, 5]", 1, true)
    assert.error_matches(function() m(x, x, x, {need_weight = true}) end, "unknown option 'need_weight'", 1, true)
    local l = nn.TransformerEncoderLayer(8, 2, {dim_feedforward = 4})
    assert.error_matches(function() l(x, {mask = x}) end, "unknown option 'mask'", 1, true)
  end)

  it("batch_first = false takes [T, N, E], and dropout in training takes the composed path", function()
    dl.seed(5)
    local m = nn.MultiheadAttention(8, 2)
    local mt = nn.MultiheadAttention(8, 2, {batch_first = false})
    mt:load_state_dict(m:state_dict())
    local x = dl.randn(3, 4, 8)
    local a, b = m(x), mt(x:transpose(1, 2)):transpose(1, 2)
    assert.is_true((a - b):abs():max():item() < 1e-6)
    local md = nn.MultiheadAttention(8, 2, {dropout = 0.5})
    md:load_state_dict(m:state_dict())
    local y = md(x)
    assert.is_true((y - a):abs():max():item() > 1e-3)        -- dropout changed something
    assert.is_true((md:eval()(x) - a):abs():max():item() < 1e-6)
  end)
end)
