--- dlua.search.rng: the counter-based random numbers of dl.search (splitmix64
-- over FNV-1a-hashed keys). A stream is a pure function of its key, so a
-- sampler's point i depends only on (seed, i, ...) and never on call order.
--   local r = rng.rng("halton", seed, dim); r:uniform(); r:normal(); r:int(n)
--   rng.key(...) --> a 64-bit integer key; rng.hash_string(s) --> FNV-1a 64
-- No global state.

local M = {}

------------------------------------------------------------ counter-based rng

local GOLDEN = 0x9E3779B97F4A7C15

-- splitmix64 finaliser (Lua 5.4 integers wrap around, >> is a logical shift)
local function mix64(z)
  z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
  z = (z ~ (z >> 27)) * 0x94D049BB133111EB
  return z ~ (z >> 31)
end

local function hash_string(s)
  local h = 0xCBF29CE484222325                          -- FNV-1a 64
  for i = 1, #s do h = (h ~ s:byte(i)) * 0x100000001B3 end
  return h
end
M.hash_string = hash_string

--- A key from any number of integers or strings (order matters).
local function key(...)
  local h = 0x6A09E667F3BCC909
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if type(v) == "string" then v = hash_string(v) end
    h = mix64(h ~ mix64(math.tointeger(v) or hash_string(tostring(v))) + GOLDEN * i)
  end
  return h
end

local Rng = {}
Rng.__index = Rng

--- A stream of numbers keyed by (...): the same key gives the same stream.
function M.rng(...)
  return setmetatable({state = key(...)}, Rng)
end

function Rng:next64()
  self.state = self.state + GOLDEN
  return mix64(self.state)
end

--- Uniform in [0, 1) with 53 random bits.
function Rng:uniform()
  return (self:next64() >> 11) * 2.0 ^ -53
end

--- Uniform integer in [0, n).
function Rng:int(n)
  return math.min(n - 1, math.floor(self:uniform() * n))
end

function Rng:normal()
  local u1, u2 = self:uniform(), self:uniform()
  return math.sqrt(-2 * math.log(1 - u1)) * math.cos(2 * math.pi * u2)
end
M.key = key

return M
