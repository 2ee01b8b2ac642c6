--- dlua.json: the JSON the tracking files and checkpoint metadata are written in.
-- encode(v) gives one line with object keys sorted (files diff cleanly and
-- identical data gives identical bytes); decode(s) returns the value or
-- nil, message naming the byte offset. Numbers that are not finite (a diverged
-- loss) are written as null, as JSON has no NaN; integers stay integers, and
-- other numbers are written exactly, in the shortest of %.15g / %.17g that
-- reads back the same. This is the library's one JSON encoder (the report's
-- page data is written by it too, with {script = true}).
-- @usage json.encode({step = 10, loss = 0.25}) --> '{"loss":0.25,"step":10}'
local util = require "dlua.util"

local M = {}

local escapes = {['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f', ['\n'] = '\\n',
                 ['\r'] = '\\r', ['\t'] = '\\t'}

-- script: "</" written "<\/", so the literal never closes the <script> element it is in
local function encode_string(s, script)
  s = s:gsub('[%c"\\]', function(c) return escapes[c] or string.format("\\u%04x", c:byte()) end)
  if script then s = s:gsub("</", "<\\/") end
  return '"' .. s .. '"'
end

local function number(v)
  if math.type(v) == "integer" then return string.format("%d", v) end
  if v ~= v or v == math.huge or v == -math.huge then return "null" end
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%.1f", v) end
  local s = string.format("%.15g", v)
  if tonumber(s) ~= v then s = string.format("%.17g", v) end
  return s
end

--- A table marked with M.array is written as an array even when empty; with n,
-- as an array of n entries (nil entries written as null).
local array_mt = {__name = "json.array"}
local lengths = setmetatable({}, {__mode = "k"})
function M.array(t, n)
  t = t or {}
  if n then lengths[t] = n end
  if getmetatable(t) == nil then setmetatable(t, array_mt) end
  return t
end

local function is_array(t)
  if getmetatable(t) == array_mt or lengths[t] then return true end
  local n = #t
  if n == 0 then return false end
  local count = 0
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
    count = count + 1
  end
  return count == n
end

local function encode(v, out, depth, script)
  local ty = type(v)
  if v == nil then out[#out + 1] = "null"
  elseif ty == "boolean" then out[#out + 1] = tostring(v)
  elseif ty == "number" then out[#out + 1] = number(v)
  elseif ty == "string" then out[#out + 1] = encode_string(v, script)
  elseif ty == "table" then
    if depth > 100 then error("json.encode: nesting deeper than 100 (a cycle?)", 0) end
    if is_array(v) then
      out[#out + 1] = "["
      for i = 1, lengths[v] or #v do
        if i > 1 then out[#out + 1] = "," end
        encode(v[i], out, depth + 1, script)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" and type(k) ~= "number" then
          error("json.encode: object keys must be strings, got " .. type(k), 0)
        end
        keys[#keys + 1] = tostring(k)
      end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = encode_string(k, script)
        out[#out + 1] = ":"
        local val = v[k]
        if val == nil then val = v[tonumber(k)] end
        encode(val, out, depth + 1, script)
      end
      out[#out + 1] = "}"
    end
  else
    error("json.encode: cannot encode a " .. ty, 0)
  end
end

--- Encodes v as one line of JSON; with {script = true}, safe to write inside a
-- <script> element as a JavaScript literal.
-- @usage json.encode({x = {1, 2}}) --> '{"x":[1,2]}'
function M.encode(v, opts)
  opts = util.check_options("json.encode", opts, {script = "boolean"})
  local out = {}
  encode(v, out, 0, opts and opts.script)
  return table.concat(out)
end

-- decoding: a recursive descent over the string, positions are 1-based byte offsets
local decode_value

local function skip(s, i)
  return s:find("[^ \t\r\n]", i) or #s + 1
end

local function fail(msg, i) error({json = true, msg = string.format("%s at byte %d", msg, i)}, 0) end

local function decode_string(s, i)
  local out, j = {}, i + 1
  while true do
    local a, b = s:find('["\\%c]', j)
    if not a then fail("unterminated string", i) end
    out[#out + 1] = s:sub(j, a - 1)
    local c = s:sub(a, a)
    if c == '"' then return table.concat(out), b + 1 end
    if c ~= "\\" then fail("control character in string", a) end
    local e = s:sub(a + 1, a + 1)
    local simple = ({['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t"})[e]
    if simple then
      out[#out + 1] = simple
      j = a + 2
    elseif e == "u" then
      local hex = s:match("^%x%x%x%x", a + 2)
      if not hex then fail("bad \\u escape", a) end
      local cp = tonumber(hex, 16)
      j = a + 6
      if cp >= 0xD800 and cp <= 0xDBFF then           -- a surrogate pair
        local lo = s:match("^\\u(%x%x%x%x)", j)
        if not lo then fail("unpaired surrogate", a) end
        cp = 0x10000 + (cp - 0xD800) * 0x400 + (tonumber(lo, 16) - 0xDC00)
        j = j + 6
      end
      out[#out + 1] = utf8.char(cp)
    else
      fail("bad escape \\" .. e, a)
    end
  end
end

-- the members of an object or an array from i (after its opening bracket) up to close:
-- item(j) reads one at j and returns the position after it; returns the position after close
local function members(s, i, close, item)
  i = skip(s, i)
  if s:sub(i, i) == close then return i + 1 end
  while true do
    i = skip(s, item(skip(s, i)))
    local d = s:sub(i, i)
    if d == close then return i + 1 end
    if d ~= "," then fail("expected ',' or '" .. close .. "'", i) end
    i = i + 1
  end
end

function decode_value(s, i, depth)
  if depth > 200 then fail("nesting deeper than 200", i) end
  i = skip(s, i)
  local c = s:sub(i, i)
  if c == "{" then
    local obj = {}
    return obj, members(s, i + 1, "}", function(j)
      if s:sub(j, j) ~= '"' then fail("expected a string key", j) end
      local k
      k, j = decode_string(s, j)
      j = skip(s, j)
      if s:sub(j, j) ~= ":" then fail("expected ':'", j) end
      obj[k], j = decode_value(s, j + 1, depth + 1)
      return j
    end)
  elseif c == "[" then
    local arr = M.array()
    return arr, members(s, i + 1, "]", function(j)
      local v
      v, j = decode_value(s, j, depth + 1)
      arr[#arr + 1] = v
      return j
    end)
  elseif c == '"' then
    return decode_string(s, i)
  elseif s:find("^true", i) then return true, i + 4
  elseif s:find("^false", i) then return false, i + 5
  elseif s:find("^null", i) then return nil, i + 4
  else
    local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", i)
    if not num or num == "" or num == "-" then fail("unexpected " .. (c == "" and "end of input" or "'" .. c .. "'"), i) end
    local v = math.tointeger(tonumber(num)) or tonumber(num)
    if not v then fail("bad number '" .. num .. "'", i) end
    if not num:find("[.eE]") then v = math.tointeger(v) or v end
    return v, i + #num
  end
end

--- Decodes one JSON value; returns it, or nil and a message.
function M.decode(s)
  if type(s) ~= "string" then return nil, "json.decode: expected a string, got " .. type(s) end
  local ok, v, i = pcall(decode_value, s, 1, 0)
  if not ok then
    if type(v) == "table" and v.json then return nil, "json: " .. v.msg end
    error(v, 0)
  end
  i = skip(s, i)
  if i <= #s then return nil, string.format("json: trailing characters at byte %d", i) end
  return v
end


-- not wrapped by util.strict yet: library callers pass json.decode multi-value
-- expressions (core._dist_recv(...)); those call sites are to be fixed first

return M
