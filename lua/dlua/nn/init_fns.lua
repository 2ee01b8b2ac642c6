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


-- every exported function refuses extra arguments (util.strict)
util.strict_table("nn.init.", M)

return M
