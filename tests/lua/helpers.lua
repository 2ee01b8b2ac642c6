-- tests/lua/helpers.lua -- small file helpers shared by the specs (loaded with
-- dofile("tests/lua/helpers.lua"); busted runs from the repository root).
local fs = require "dlua.util.fs"
local util = require "dlua.util"

local H = {}

--- Shell quoting for one argument (util.shell_quote).
H.shquote = util.shell_quote

--- A fresh, empty directory under $TMPDIR (or /tmp) whose name carries tag.
function H.tmpdir(tag)
  local d = string.format("%s/dlua-%s-%d-%d", os.getenv("TMPDIR") or "/tmp", tag or "spec",
    math.floor(require("dlua.core").clock() * 1e6) % 1000000007, math.random(1, 1e9))
  fs.rm_rf(d)
  fs.mkdir_p(d)
  return d
end

--- The whole file (asserts it exists).
function H.slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

--- Writes s to path (replacing it).
function H.spit(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

return H
