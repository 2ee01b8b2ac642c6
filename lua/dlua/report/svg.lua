--- dlua.report.svg: the plot primitives of dl.report, written as inline SVG text.
--
--   local svg = require "dlua.report.svg"
--   local p = svg.plot{id = "axis-lr", title = "valid/accuracy vs lr",
--                      x = {label = "lr", log = true, min = 1e-4, max = 1e-1}, y = {label = "valid/accuracy"}}
--   p:points({1e-3, 1e-2}, {0.81, 0.85}, {titles = {"t001", "t002"}})
--   p:points({5e-2}, nil, {marker = "cross"})      -- infeasible: drawn on the bottom edge
--   p:vline(1e-4, {class = "bound"}); p:vline(1e-1, {class = "bound"})
--   local text = p:render()                          -- <figure><svg>...</svg></figure>
--
-- A plot has two axes, each linear, logarithmic (`log = true`) or categorical
-- (`categories = {...}`, values are then 1-based positions); the data range
-- sets the axes unless min/max are given. Marks: lines (polyline), points
-- (circles or crosses), error bars, vertical and horizontal lines, bands and
-- histogram bars. `svg.parallel{...}` draws parallel coordinates. Every mark
-- carries a class (pt, infeasible, curve, errorbar, bar, pc-line, bound, ...)
-- so a browser test can count what was drawn, and a <title> child where a
-- tooltip helps. Nothing here reads files or knows about runs: dlua.report
-- decides what to plot.
local util = require "dlua.util"

local M = {}

local PALETTE = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
                 "#bcbd22", "#7f7f7f"}
M.PALETTE = PALETTE

--- Escapes text for XML content and attributes.
function M.escape(s)
  return (tostring(s):gsub("[&<>\"']", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;",
                                        ["'"] = "&#39;"}))
end
local esc = M.escape

local finite = util.finite
M.finite = finite

local function num(v) return string.format("%.2f", v):gsub("%.?0+$", "") end

-- <figure> around the parts of an <svg> (o), with its id and caption when given
local function figure(id, caption, o)
  local out = {string.format('<figure class="figure"%s>', id and (' id="' .. esc(id) .. '"') or "")}
  out[#out + 1] = table.concat(o)
  if caption then out[#out + 1] = "<figcaption>" .. esc(caption) .. "</figcaption>" end
  out[#out + 1] = "</figure>"
  return table.concat(out)
end

--- A short label for a number: 3 significant digits, exponents for very
-- large or small magnitudes.
function M.format_number(v)
  if type(v) ~= "number" then return tostring(v) end
  if v == 0 then return "0" end
  local a = math.abs(v)
  if a >= 1e5 or a < 1e-3 then
    local s = string.format("%.2g", v)
    s = s:gsub("e%+?(%-?)0*(%d)", "e%1%2")
    return s
  end
  local s = string.format("%.3g", v)
  return s
end
local fmtn = M.format_number

--- Viridis-like colour for t in [0, 1] (0 dark purple, 1 yellow).
local VIRIDIS = {{68, 1, 84}, {72, 40, 120}, {62, 74, 137}, {49, 104, 142}, {38, 130, 142}, {31, 158, 137},
                 {53, 183, 121}, {109, 205, 89}, {180, 222, 44}, {253, 231, 37}}
function M.color_scale(t)
  if not finite(t) then t = 0 end
  t = math.max(0, math.min(1, t))
  local x = t * (#VIRIDIS - 1)
  local i = math.min(#VIRIDIS - 2, math.floor(x))
  local f = x - i
  local a, b = VIRIDIS[i + 1], VIRIDIS[i + 2]
  return string.format("#%02x%02x%02x", math.floor(a[1] + f * (b[1] - a[1]) + 0.5),
    math.floor(a[2] + f * (b[2] - a[2]) + 0.5), math.floor(a[3] + f * (b[3] - a[3]) + 0.5))
end

----------------------------------------------------------------------- ticks

--- "Nice" linear ticks covering [lo, hi]: about n values at 1, 2 or 5 x 10^k.
function M.linear_ticks(lo, hi, n)
  n = n or 5
  if not (hi > lo) then return {lo} end
  local raw = (hi - lo) / n
  local mag = 10 ^ math.floor(math.log(raw, 10))
  local step = mag
  for _, m in ipairs({1, 2, 2.5, 5, 10}) do
    step = m * mag
    if step >= raw then break end
  end
  local out = {}
  local first = math.ceil(lo / step - 1e-9) * step
  for k = 0, 100 do
    local v = first + k * step
    if v > hi + step * 1e-9 then break end
    if math.abs(v) < step * 1e-9 then v = 0 end
    out[#out + 1] = v
  end
  return out
end

--- Ticks for a log axis over [lo, hi] (lo > 0): the powers of ten inside, with
-- 2 and 5 multiples when the range spans less than two decades, every other
-- power when it spans more than eight.
function M.log_ticks(lo, hi)
  local a, b = math.floor(math.log(lo, 10) + 1e-9), math.ceil(math.log(hi, 10) - 1e-9)
  local out = {}
  local span = b - a
  local every = span > 8 and 2 or 1
  local short = math.log(hi / lo, 10) < 2
  for k = a, b, every do
    local mults = short and {1, 2, 5} or {1}
    for _, m in ipairs(mults) do
      local v = m * 10 ^ k
      if v >= lo * (1 - 1e-9) and v <= hi * (1 + 1e-9) then out[#out + 1] = v end
    end
  end
  if #out < 2 then out = {lo, hi} end
  return out
end

------------------------------------------------------------------------ axes

local Axis = {}
Axis.__index = Axis

local function new_axis(spec)
  spec = spec or {}
  local a = setmetatable({label = spec.label, log = spec.log or false, min = spec.min, max = spec.max,
                          categories = spec.categories, pad = spec.pad}, Axis)
  a.seen_lo, a.seen_hi = math.huge, -math.huge
  return a
end

function Axis:see(v)
  if not finite(v) then return end
  if self.log and v <= 0 then return end
  if v < self.seen_lo then self.seen_lo = v end
  if v > self.seen_hi then self.seen_hi = v end
end

-- fixes the range; called once at render
function Axis:finish()
  if self.categories then
    self.lo, self.hi = 0.5, #self.categories + 0.5
    return
  end
  local lo = self.min or self.seen_lo
  local hi = self.max or self.seen_hi
  if not finite(lo) or not finite(hi) then lo, hi = self.log and 1 or 0, self.log and 10 or 1 end
  if self.log then
    if lo <= 0 then lo = hi > 0 and hi / 10 or 1 end
    if hi <= lo then lo, hi = lo / 2, lo * 2 end
    local pad = self.pad or 0.04
    local l0, l1 = math.log(lo), math.log(hi)
    if not self.min then l0 = l0 - pad * (l1 - l0) end
    if not self.max then l1 = l1 + pad * (l1 - l0) end
    self.lo, self.hi = math.exp(l0), math.exp(l1)
  else
    if hi <= lo then
      local d = math.abs(lo) > 0 and math.abs(lo) * 0.05 or 0.5
      lo, hi = lo - d, hi + d
    end
    local pad = self.pad or 0.05
    local d = hi - lo
    if not self.min then lo = lo - pad * d end
    if not self.max then hi = hi + pad * d end
    self.lo, self.hi = lo, hi
  end
end

-- position of v in [0, 1] along the axis (nil when it cannot be placed)
function Axis:frac(v)
  if not finite(v) then return nil end
  if self.log then
    if v <= 0 then return nil end
    return (math.log(v) - math.log(self.lo)) / (math.log(self.hi) - math.log(self.lo))
  end
  return (v - self.lo) / (self.hi - self.lo)
end

function Axis:ticks()
  if self.categories then
    local t = {}
    for i, c in ipairs(self.categories) do t[i] = {value = i, label = tostring(c)} end
    return t
  end
  local vals = self.log and M.log_ticks(self.lo, self.hi) or M.linear_ticks(self.lo, self.hi)
  local t = {}
  for i, v in ipairs(vals) do t[i] = {value = v, label = fmtn(v)} end
  return t
end

------------------------------------------------------------------------ plots

--- A plot's title as SVG text at x, never clipped by a plot width wide: a title
-- longer than the room right of x (about 7.8 px a character, bold 13 px) starts
-- at the left edge in a smaller font (down to 8 px), and one still too long is
-- squeezed to the width (textLength).
function M.title_text(title, x, width)
  local per, size, attrs = 7.8, 13, ""
  if #title * per > width - x - 6 then
    x = 6
    local room = width - 12
    if #title * per > room then
      size = math.max(8, math.floor(13 * room / (#title * per)))
      if #title * per * size / 13 > room then
        attrs = string.format(' textLength="%d" lengthAdjust="spacingAndGlyphs"', room)
      end
    end
  end
  return string.format('<text class="title" x="%s" y="17" font-size="%d" font-weight="600"%s>%s</text>', num(x), size, attrs,
    M.escape(title))
end

local function trial_attr(id) return id and (' data-trial="' .. M.escape(id) .. '"') or "" end

local Plot = {}
Plot.__index = Plot
local serial = 0

--- svg.plot{id =, title =, width = 460, height = 300, x = {label, log, min, max,
-- categories}, y = {...}, caption =}: a new plot; add marks, then :render().
function M.plot(spec)
  spec = spec or {}
  local self = setmetatable({id = spec.id, title = spec.title, caption = spec.caption, kind = spec.kind,
    width = spec.width or 460, height = spec.height or 300, x = new_axis(spec.x), y = new_axis(spec.y),
    marks = {}, legend_items = {}, margin = {l = 62, r = 14, t = spec.title and 28 or 12, b = 46}}, Plot)
  serial = serial + 1
  self.serial = "p" .. serial
  return self
end

local function add(self, mark)
  self.marks[#self.marks + 1] = mark
  return self
end

--- p:line(xs, ys, {color, width, class, title, dash, opacity}): one polyline;
-- points with a missing or unplaceable coordinate break nothing, they are skipped.
function Plot:line(xs, ys, o)
  o = o or {}
  for i = 1, #xs do self.x:see(xs[i]); self.y:see(ys[i]) end
  return add(self, {kind = "line", xs = xs, ys = ys, o = o})
end

--- p:points(xs, ys, {marker = "circle" | "cross", color(s), r, class, titles}):
-- one mark per point. A cross with ys == nil (or ys[i] == nil) sits on the
-- bottom edge (infeasible trials have no value).
function Plot:points(xs, ys, o)
  o = o or {}
  for i = 1, #xs do
    self.x:see(xs[i])
    if ys and ys[i] ~= nil then self.y:see(ys[i]) end
  end
  return add(self, {kind = "points", xs = xs, ys = ys, o = o})
end

--- p:errorbars(xs, lo, hi, {class, color}): vertical bars from lo[i] to hi[i].
function Plot:errorbars(xs, lo, hi, o)
  for i = 1, #xs do self.x:see(xs[i]); self.y:see(lo[i]); self.y:see(hi[i]) end
  return add(self, {kind = "errorbars", xs = xs, lo = lo, hi = hi, o = o or {}})
end

--- p:band(xs, lo, hi, {color, opacity, class}): a filled region between two curves.
function Plot:band(xs, lo, hi, o)
  for i = 1, #xs do self.x:see(xs[i]); self.y:see(lo[i]); self.y:see(hi[i]) end
  return add(self, {kind = "band", xs = xs, lo = lo, hi = hi, o = o or {}})
end

--- p:vline(x, {class, label, color}) and p:hline(y, ...): a line across the plot.
function Plot:vline(x, o)
  self.x:see(x)
  return add(self, {kind = "vline", v = x, o = o or {}})
end
function Plot:hline(y, o)
  self.y:see(y)
  return add(self, {kind = "hline", v = y, o = o or {}})
end

--- p:bars(edges, counts, {class, color}): a histogram; #edges == #counts + 1.
function Plot:bars(edges, counts, o)
  for _, e in ipairs(edges) do self.x:see(e) end
  self.y:see(0)
  for _, c in ipairs(counts) do self.y:see(c) end
  return add(self, {kind = "bars", edges = edges, counts = counts, o = o or {}})
end

--- p:legend{{label =, color =, dash =}, ...}
function Plot:legend(items)
  for _, it in ipairs(items) do self.legend_items[#self.legend_items + 1] = it end
  return self
end

function Plot:render()
  local x, y = self.x, self.y
  x:finish(); y:finish()
  local W, H, m = self.width, self.height, self.margin
  local pw, ph = W - m.l - m.r, H - m.t - m.b
  local function px(v)
    local f = x:frac(v)
    return f and (m.l + f * pw)
  end
  local function py(v)
    local f = y:frac(v)
    return f and (m.t + (1 - f) * ph)
  end
  local o = {}
  local function w(...) for i = 1, select("#", ...) do o[#o + 1] = select(i, ...) end end
  local legend_rows = (#self.legend_items + 1) // 2          -- the legend goes under the plot, two columns
  local TH = H + (legend_rows > 0 and legend_rows * 13 + 4 or 0)
  w(string.format('<svg xmlns="http://www.w3.org/2000/svg" class="plot"%s width="%d" height="%d" viewBox="0 0 %d %d" ' ..
    'role="img"%s>', self.kind and (' data-kind="' .. esc(self.kind) .. '"') or "", W, TH, W, TH,
    self.title and (' aria-label="' .. esc(self.title) .. '"') or ""))
  w(string.format('<rect class="frame" x="%s" y="%s" width="%s" height="%s" fill="#fff" stroke="#bbb"/>',
    num(m.l), num(m.t), num(pw), num(ph)))
  if self.title then w(M.title_text(self.title, m.l, W)) end
  -- grid and ticks
  for _, t in ipairs(x:ticks()) do
    local X = px(t.value)
    if X and X >= m.l - 0.5 and X <= m.l + pw + 0.5 then
      w(string.format('<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#eee"/>', num(X), num(m.t), num(X),
        num(m.t + ph)))
      w(string.format('<text class="tick" x="%s" y="%s" font-size="10" text-anchor="middle">%s</text>', num(X),
        num(m.t + ph + 13), esc(t.label)))
    end
  end
  for _, t in ipairs(y:ticks()) do
    local Y = py(t.value)
    if Y and Y >= m.t - 0.5 and Y <= m.t + ph + 0.5 then
      w(string.format('<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#eee"/>', num(m.l), num(Y),
        num(m.l + pw), num(Y)))
      w(string.format('<text class="tick" x="%s" y="%s" font-size="10" text-anchor="end">%s</text>', num(m.l - 4),
        num(Y + 3), esc(t.label)))
    end
  end
  if x.label then
    w(string.format('<text class="axis-label" x="%s" y="%s" font-size="11" text-anchor="middle">%s%s</text>',
      num(m.l + pw / 2), num(H - 8), esc(x.label), x.log and " (log)" or ""))
  end
  if y.label then
    w(string.format('<text class="axis-label" font-size="11" text-anchor="middle" transform="translate(13 %s) ' ..
      'rotate(-90)">%s%s</text>', num(m.t + ph / 2), esc(y.label), y.log and " (log)" or ""))
  end
  local clip = "clip-" .. (self.id or self.serial)
  w(string.format('<clipPath id="%s"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath>', esc(clip),
    num(m.l - 8), num(m.t - 8), num(pw + 16), num(ph + 16)))
  w(string.format('<g clip-path="url(#%s)">', esc(clip)))
  for mi, mk in ipairs(self.marks) do
    local op = mk.o
    local color = op.color or PALETTE[(mi - 1) % #PALETTE + 1]
    local cls = op.class
    if mk.kind == "line" then
      local pts = {}
      for i = 1, #mk.xs do
        local X, Y = px(mk.xs[i]), py(mk.ys[i])
        if X and Y then pts[#pts + 1] = num(X) .. "," .. num(Y) end
      end
      if #pts > 0 then
        w(string.format('<polyline class="%s" points="%s" fill="none" stroke="%s" stroke-width="%s"%s%s%s>',
          esc(cls or "line"), table.concat(pts, " "), color, num(op.width or 1.5),
          op.dash and ' stroke-dasharray="4 3"' or "", op.opacity and (' stroke-opacity="' .. num(op.opacity) .. '"') or "",
          trial_attr(op.trial)))
        if op.title then w("<title>", esc(op.title), "</title>") end
        w("</polyline>")
        if #pts == 1 then                           -- one point draws nothing as a line: a dot
          local X, Y = pts[1]:match("^(.-),(.*)$")
          w(string.format('<circle class="line-dot" cx="%s" cy="%s" r="2.5" fill="%s"/>', X, Y, color))
        end
      end
    elseif mk.kind == "points" then
      local cross = op.marker == "cross"
      for i = 1, #mk.xs do
        local X = px(mk.xs[i])
        local yv = mk.ys and mk.ys[i]
        local Y = yv ~= nil and py(yv) or (m.t + ph - 6)
        local c = (op.colors and op.colors[i]) or (cross and (op.color or "#d62728")) or color
        local title = op.titles and op.titles[i]
        if X and Y then
          if cross then
            local r = op.r or 4.5
            w(string.format('<path class="%s" d="M%s %sL%s %sM%s %sL%s %s" stroke="%s" stroke-width="2"%s>', esc(cls or "infeasible"),
              num(X - r), num(Y - r), num(X + r), num(Y + r), num(X - r), num(Y + r), num(X + r), num(Y - r), c,
              trial_attr(op.trials and op.trials[i])))
          else
            w(string.format('<circle class="%s" cx="%s" cy="%s" r="%s" fill="%s" fill-opacity="%s" stroke="%s"%s>',
              esc(cls or "pt"), num(X), num(Y), num(op.r or 3.5), c, num(op.opacity or 0.85),
              op.stroke or "#333", trial_attr(op.trials and op.trials[i])))
          end
          if title then w("<title>", esc(title), "</title>") end
          w(cross and "</path>" or "</circle>")
        end
      end
    elseif mk.kind == "errorbars" then
      for i = 1, #mk.xs do
        local X, Y1, Y2 = px(mk.xs[i]), py(mk.lo[i]), py(mk.hi[i])
        if X and Y1 and Y2 then
          w(string.format('<path class="%s" d="M%s %sL%s %sM%s %sL%s %sM%s %sL%s %s" stroke="%s" stroke-width="1.5" fill="none"/>',
            esc(cls or "errorbar"), num(X), num(Y1), num(X), num(Y2), num(X - 4), num(Y1), num(X + 4), num(Y1), num(X - 4),
            num(Y2), num(X + 4), num(Y2), op.color or "#333"))
        end
      end
    elseif mk.kind == "band" then
      local up, dn = {}, {}
      for i = 1, #mk.xs do
        local X, Y1, Y2 = px(mk.xs[i]), py(mk.lo[i]), py(mk.hi[i])
        if X and Y1 and Y2 then up[#up + 1] = num(X) .. "," .. num(Y2); table.insert(dn, 1, num(X) .. "," .. num(Y1)) end
      end
      if #up > 0 then
        w(string.format('<polygon class="%s" points="%s %s" fill="%s" fill-opacity="%s" stroke="none"/>', esc(cls or "band"),
          table.concat(up, " "), table.concat(dn, " "), color, num(op.opacity or 0.2)))
      end
    elseif mk.kind == "vline" or mk.kind == "hline" then
      local c = op.color or "#888"
      if mk.kind == "vline" then
        local X = px(mk.v)
        if X then
          w(string.format('<line class="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.2" ' ..
            'stroke-dasharray="5 3"><title>%s</title></line>', esc(cls or "vline"), num(X), num(m.t), num(X), num(m.t + ph), c,
            esc(op.label or fmtn(mk.v))))
        end
      else
        local Y = py(mk.v)
        if Y then
          w(string.format('<line class="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.2" ' ..
            'stroke-dasharray="5 3"><title>%s</title></line>', esc(cls or "hline"), num(m.l), num(Y), num(m.l + pw), num(Y), c,
            esc(op.label or fmtn(mk.v))))
        end
      end
    elseif mk.kind == "bars" then
      for i = 1, #mk.counts do
        local X1, X2, Y0, Y1 = px(mk.edges[i]), px(mk.edges[i + 1]), py(0) or (m.t + ph), py(mk.counts[i])
        if X1 and X2 and Y1 then
          w(string.format('<rect class="%s" x="%s" y="%s" width="%s" height="%s" fill="%s" stroke="#fff">' ..
            '<title>%s to %s: %d</title></rect>', esc(cls or "bar"), num(X1), num(Y1), num(math.max(0, X2 - X1)),
            num(math.max(0, Y0 - Y1)), op.color or PALETTE[1], esc(fmtn(mk.edges[i])), esc(fmtn(mk.edges[i + 1])),
            mk.counts[i]))
        end
      end
    end
  end
  w("</g>")
  if #self.legend_items > 0 then
    for i, it in ipairs(self.legend_items) do
      local lx = m.l + ((i - 1) % 2) * (pw / 2)
      local ly = H + 6 + ((i - 1) // 2) * 13
      w(string.format('<line class="legend-key" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>',
        num(lx), num(ly - 3), num(lx + 16), num(ly - 3), it.color or "#333", num(it.width or 2),
        it.dash and ' stroke-dasharray="4 3"' or ""))
      w(string.format('<text class="legend" x="%s" y="%s" font-size="10">%s</text>', num(lx + 20), num(ly), esc(it.label)))
    end
  end
  w("</svg>")
  return figure(self.id, self.caption, o)
end

------------------------------------------------------------------ histograms

--- Bin edges and counts of values: `bins` equal-width bins over [min, max]
-- (log = true: equal width in log space, positive values only). Returns
-- edges (bins + 1), counts (bins).
function M.histogram(values, opts)
  opts = opts or {}
  local v = {}
  for _, x in ipairs(values) do
    if finite(x) and (not opts.log or x > 0) then v[#v + 1] = x end
  end
  local bins = opts.bins or math.max(5, math.min(40, math.ceil(math.sqrt(#v))))
  if #v == 0 then return {0, 1}, {0} end
  local lo, hi = math.huge, -math.huge
  for _, x in ipairs(v) do lo = math.min(lo, x); hi = math.max(hi, x) end
  if opts.min then lo = opts.min end
  if opts.max then hi = opts.max end
  if hi <= lo then hi = lo + (lo ~= 0 and math.abs(lo) * 0.1 or 1) end
  local tf = opts.log and math.log or function(a) return a end
  local itf = opts.log and math.exp or function(a) return a end
  local a, b = tf(lo), tf(hi)
  local edges, counts = {}, {}
  for i = 0, bins do edges[i + 1] = itf(a + (b - a) * i / bins) end
  for i = 1, bins do counts[i] = 0 end
  for _, x in ipairs(v) do
    local k = math.floor((tf(x) - a) / (b - a) * bins) + 1
    if k >= 1 and k <= bins + 1 then
      k = math.min(k, bins)
      counts[k] = counts[k] + 1
    end
  end
  return edges, counts
end

--------------------------------------------------------- parallel coordinates

--- svg.parallel{id, title, width, height, axes = {{label, log, min, max,
-- categories}, ...}, rows = {{values = {...}, color =, title =, class =}},
-- caption}: one vertical axis per entry, one polyline per row (a nil value,
-- an inactive conditional hyperparameter or an infeasible objective, is drawn
-- on a separate "n/a" band under the axes, clear of their tick labels).
function M.parallel(spec)
  local W, H = spec.width or 900, spec.height or 320
  local m = {l = 40, r = 60, t = spec.title and 44 or 24, b = 40}
  local axes = {}
  for i, a in ipairs(spec.axes) do
    local ax = new_axis(a)
    ax.pad = 0.02
    for _, r in ipairs(spec.rows) do ax:see(r.values[i]) end
    ax:finish()
    axes[i] = ax
  end
  local n = #axes
  local ph = H - m.t - m.b
  local function ax_x(i) return m.l + (n > 1 and (i - 1) * (W - m.l - m.r) / (n - 1) or 0) end
  local function ax_y(i, v)
    if v == nil then return m.t + ph + 26 end
    local f = axes[i]:frac(v)
    return f and (m.t + (1 - f) * ph) or (m.t + ph + 26)
  end
  local o = {}
  local function w(s) o[#o + 1] = s end
  w(string.format('<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-kind="parallel" width="%d" height="%d" ' ..
    'viewBox="0 0 %d %d" role="img">', W, H, W, H))
  if spec.title then w(M.title_text(spec.title, m.l, W)) end
  w(string.format('<rect class="na-band" x="%d" y="%d" width="%d" height="14" fill="#f6f0f0"/>', m.l - 30, m.t + ph + 19,
    W - m.l - m.r + 60))
  for _, r in ipairs(spec.rows) do
    local pts = {}
    for i = 1, n do pts[#pts + 1] = num(ax_x(i)) .. "," .. num(ax_y(i, r.values[i])) end
    w(string.format('<polyline class="%s" points="%s" fill="none" stroke="%s" stroke-width="%s" stroke-opacity="%s"%s%s>',
      esc(r.class or "pc-line"), table.concat(pts, " "), r.color or "#888", num(r.width or 1.4), num(r.opacity or 0.8),
      r.dash and ' stroke-dasharray="4 3"' or "", trial_attr(r.trial)))
    if r.title then w("<title>" .. esc(r.title) .. "</title>") end
    w("</polyline>")
  end
  for i, ax in ipairs(axes) do
    local X = ax_x(i)
    w(string.format('<line class="pc-axis" x1="%s" y1="%d" x2="%s" y2="%d" stroke="#444"/>', num(X), m.t, num(X), m.t + ph))
    w(string.format('<text class="axis-label" x="%s" y="%d" font-size="11" text-anchor="middle">%s%s</text>', num(X),
      m.t - 10, esc(ax.label or ""), ax.log and " (log)" or ""))
    for _, t in ipairs(ax:ticks()) do
      local Y = ax_y(i, t.value)
      if Y >= m.t - 0.5 and Y <= m.t + ph + 0.5 then
        w(string.format('<text class="tick" x="%s" y="%s" font-size="9">%s</text>', num(X + 3), num(Y + 3), esc(t.label)))
        w(string.format('<line class="tickmark" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#444"/>', num(X - 3), num(Y),
          num(X), num(Y)))
      end
    end
    w(string.format('<text class="tick na" x="%s" y="%d" font-size="9" fill="#d62728" text-anchor="end">n/a</text>',
      num(X - 4), m.t + ph + 29))
  end
  w("</svg>")
  return figure(spec.id, spec.caption, o)
end

return M
