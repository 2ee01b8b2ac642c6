--- dl.memory: accounting and a limit for tensor memory.
-- Every tensor's storage comes from dlua's caching allocator, so bytes in use
-- and the peak are exact. A limit makes allocations past it raise an error
-- whose message starts with "out of memory:" (test with `memory.is_oom`).
local util = require "dlua.util"
local core = require "dlua.core"

local M = {}

--- Returns {in_use, peak, cached, allocs, system_allocs, splits, frees, mapped, limit}.
-- `system_allocs` counts allocations that went to the system: in a steady
-- state loop it stops growing. `splits` counts allocations of 1 MiB or more
-- cut from a larger cached block (a one-off temporary's memory reused, not
-- added to). `mapped` is the bytes of memory-mapped files that tensors view
-- (data.npy): not in in_use, peak or the limit.
-- @usage print(dl.memory.stats().peak)
function M.stats()
  return core.memory_stats()
end

--- Sets the limit in bytes (nil removes it); returns the previous limit.
-- @usage dl.memory.limit(512 * 2^20)
function M.limit(bytes)
  if bytes ~= nil and (type(bytes) ~= "number" or bytes <= 0 or bytes ~= math.floor(bytes)) then
    error("memory.limit: bytes must be a positive integer or nil, got " .. tostring(bytes), 2)
  end
  if bytes ~= nil and math.type(bytes) == "float" then bytes = math.tointeger(bytes) end
  return core.memory_limit(bytes)
end

--- Resets the peak to the current use.
function M.reset_peak()
  core.memory_reset_peak()
end

--- Returns cached blocks to the system.
function M.trim()
  collectgarbage()
  core.memory_trim()
end

--- Is `err` (an error caught by pcall) an out-of-memory error?
-- @usage local ok, err = pcall(dl.zeros, 1e9); if dl.memory.is_oom(err) then ... end
function M.is_oom(err)
  return type(err) == "string" and err:find("out of memory:", 1, true) ~= nil
end


-- every exported function refuses extra arguments (util.strict)
util.strict_table("memory.", M, false, {is_oom = {"any?"}, limit = {"number?"}})

return M
