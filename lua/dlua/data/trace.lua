--- dlua.data.trace: dl.trace, spans recorded by the engine (pipeline stages,
-- waits for input, and the spans a training loop opens) and written as Chrome
-- trace-event JSON.
local util = require "dlua.util"
local core = require "dlua.core"
local check_mod = require "dlua.data.check"

local errorf, check = check_mod.errorf, check_mod.check


local trace = {}

--- dl.trace.start(path): records spans (pipeline stages, waits for input,
-- dl.trace.span) until stop() writes them to path as Chrome trace-event JSON.
function trace.start(path)
  if type(path) ~= "string" then errorf(2, "trace.start: expected a path, got %s", type(path)) end
  check(2, pcall(core._trace_start, path))
end

--- dl.trace.stop() -> path, spans written (nil when not recording).
function trace.stop() return check(2, pcall(core._trace_stop)) end

--- dl.trace.active() -> recording?, path
function trace.active() return core._trace_active() end

local Span = {__name = "dlua.trace.Span"}
Span.__index = Span
function Span:close()
  if self.t0 then
    core._trace_span(self.name, self.t0, core._trace_now(), self.cat)
    self.t0 = nil
  end
end
Span.__close = Span.close

--- dl.trace.span(name [, fn, ...]): with fn, runs fn(...) inside a span and
-- returns its results; without, returns a span to close (`local s <close> =
-- dl.trace.span("forward")`). Spans are on the main thread, category "train".
function trace.span(name, fn, ...)
  if type(name) ~= "string" then errorf(2, "trace.span: name must be a string, got %s", type(name)) end
  local s = setmetatable({name = name, t0 = core._trace_now(), cat = "train"}, Span)
  if fn == nil then return s end
  local res = table.pack(pcall(fn, ...))
  s:close()
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end


-- every exported function refuses extra arguments (util.strict)
util.strict_table("trace.", trace, false, {start = {"string"}})

return trace
