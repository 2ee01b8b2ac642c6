--- dl.nn.init: parameter initialisers, drawn from the default seeded stream
-- (`dl.seed(n)` first: the same seed gives bit-identical parameters).
-- Each fills its tensor in place (without recording) and returns it.
local util = require "dlua.util"
local core = require "dlua.core"

local M = {}

local function fans(t)
  local s = t:shape()
  if #s < 2 then return s[1] or 1, s[1] or 1 end
  local rf = 1
  for i = 3, #s do rf = rf * s[i] end
  return s[2] * rf, s[1] * rf          -- fan_in, fan_out for [out, in, k...]
end

local function fill(t, src)
  local prev = core.set_grad_enabled(false)
  t:copy_(src)
  core.set_grad_enabled(prev)
  return t
end

function M.uniform(t, a, b) return fill(t, core.rand(t:shape()):scale(b - a, a)) end
function M.normal(t, mean, std) return fill(t, core.randn(t:shape()):scale(std or 1, mean or 0)) end
function M.zeros(t) return fill(t, 0) end
function M.constant(t, v) return fill(t, v) end
function M.kaiming_normal(t) local fi = fans(t); return M.normal(t, 0, math.sqrt(2 / fi)) end
function M.kaiming_uniform(t) local fi = fans(t); local b = math.sqrt(6 / fi); return M.uniform(t, -b, b) end
function M.xavier_normal(t) local fi, fo = fans(t); return M.normal(t, 0, math.sqrt(2 / (fi + fo))) end
function M.xavier_uniform(t) local fi, fo = fans(t); local b = math.sqrt(6 / (fi + fo)); return M.uniform(t, -b, b) end

local function check_float(fn, t)
  if not util.is_tensor(t) or not (t:dtype() == "float32" or t:dtype() == "float64") then
    error(string.format("nn.init.%s: expected a float tensor, got %s", fn,
      util.is_tensor(t) and t:dtype() .. " tensor" or type(t)), 3)
  end
end

local function check_number(fn, what, v)
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
    error(string.format("nn.init.%s: %s must be a finite number, got %s", fn, what, tostring(v)), 3)
  end
end

-- Q [m, k] (m >= k) with orthonormal columns and R's diagonal positive, of a [m, k] float64:
-- Gram-Schmidt with each column orthogonalised twice against the ones before it (to
-- rounding), which gives the QR factor whose R has a positive diagonal, i.e. Q * sign(diag R)
local function orthonormal_columns(a)
  local m, k = a:size(1), a:size(2)
  local q = core.zeros(m, 0, {dtype = "float64"})
  for j = 1, k do
    local v = a:narrow(2, j, 1)
    for _ = 1, 2 do
      if j > 1 then v = v - q:matmul(q:transpose(1, 2):matmul(v)) end
    end
    q = core.cat({q, v / v:square():sum():sqrt()}, 2)
  end
  return q
end

--- orthogonal(t [, gain = 1]): t (2-d or more, read as [rows, numel / rows]) filled with
-- gain times a (semi-)orthogonal matrix: the Q factor of a Gaussian matrix's QR
-- decomposition with R's diagonal made positive (torch's orthogonal_), so its rows
-- (rows <= cols) or columns (rows > cols) are orthonormal and uniformly distributed.
function M.orthogonal(t, gain)
  check_float("orthogonal", t)
  if t:dim() < 2 then
    error(string.format("nn.init.orthogonal: expected a tensor of 2 or more dimensions, got %d", t:dim()), 2)
  end
  gain = gain == nil and 1 or gain
  check_number("orthogonal", "gain", gain)
  local rows = t:size(1)
  local cols = rows > 0 and t:numel() // rows or 0
  if t:numel() == 0 then return t end
  local prev = core.set_grad_enabled(false)
  local a = core.randn(rows, cols):double()
  local q
  if rows < cols then q = orthonormal_columns(a:transpose(1, 2)):transpose(1, 2)
  else q = orthonormal_columns(a) end
  t:copy_(q:scale(gain):reshape(t:shape()))
  core.set_grad_enabled(prev)
  return t
end

--- trunc_normal(t [, mean = 0, std = 1, a = -2, b = 2]): t filled from the normal
-- distribution N(mean, std^2) truncated to [a, b] (bounds in t's units, as torch's
-- trunc_normal_), by the inverse CDF: uniform on [Phi(a'), Phi(b')], then
-- mean + std sqrt(2) erfinv(2u - 1), clamped to [a, b] against rounding.
function M.trunc_normal(t, mean, std, a, b)
  check_float("trunc_normal", t)
  mean, std, a, b = mean == nil and 0 or mean, std == nil and 1 or std, a == nil and -2 or a, b == nil and 2 or b
  check_number("trunc_normal", "mean", mean)
  check_number("trunc_normal", "std", std)
  check_number("trunc_normal", "a", a)
  check_number("trunc_normal", "b", b)
  if std <= 0 then error("nn.init.trunc_normal: std must be positive, got " .. tostring(std), 2) end
  if a >= b then error(string.format("nn.init.trunc_normal: a (%s) must be below b (%s)", a, b), 2) end
  local prev = core.set_grad_enabled(false)
  -- 2 Phi(z) - 1 = erf(z / sqrt 2) at the standardised bounds
  local e = core.tensor({(a - mean) / std, (b - mean) / std}, {dtype = "float64"}):scale(1 / math.sqrt(2)):erf()
  local lo, hi = table.unpack(e:totable())
  local u = core.rand(t:shape()):double():scale(hi - lo, lo)
  t:copy_(u:erfinv():scale(std * math.sqrt(2), mean):clamp(a, b))
  core.set_grad_enabled(prev)
  return t
end

-- every exported function refuses extra arguments (util.strict)
util.strict_table("nn.init.", M, false, {
  constant = {"tensor", "number"}, kaiming_normal = {"tensor"}, kaiming_uniform = {"tensor"},
  normal = {"tensor", "number?", "number?"}, orthogonal = {"tensor", "number?"},
  trunc_normal = {"tensor", "number?", "number?", "number?", "number?"}, uniform = {"tensor", "number?", "number?"},
  xavier_normal = {"tensor"}, xavier_uniform = {"tensor"}, zeros = {"tensor"},
})

return M
