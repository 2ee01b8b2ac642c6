-- tests/lua/helpers.lua -- small file helpers shared by the specs (loaded with
-- dofile("tests/lua/helpers.lua"); busted runs from the repository root).
local fs = require "dlua.util.fs"
local util = require "dlua.util"

local H = {}

--- Shell quoting for one argument (util.shell_quote).
H.shquote = util.shell_quote

--- The own vector kernel paths this CPU runs, narrowest first: "avx2" (AVX2 with FMA) and
--- "avx512" (AVX-512F), the names DLUA_GEMM and DLUA_CONV_SIMD take.
function H.vector_paths()
  local have = {}
  for _, f in ipairs(require("dlua").machine().simd) do have[f] = true end
  local paths = {}
  if have.avx2 and have.fma then paths[#paths + 1] = "avx2" end
  if have.avx512f then paths[#paths + 1] = "avx512" end
  return paths
end

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

--- The text of tests/fixtures/<name> (a spec writes it into its scratch directory,
-- e.g. the toy experiment as exp.lua).
function H.fixture(name) return H.slurp("tests/fixtures/" .. name) end

--- H.line_of(path, text) -> the number of the first line of path that contains text
function H.line_of(path, text)
  local i = 0
  for l in (H.slurp(path) .. "\n"):gmatch("([^\n]*)\n") do
    i = i + 1
    if l:find(text, 1, true) then return i end
  end
  error(text .. " not in " .. path)
end

H.OBJECTIVE = ' objective = {metric = "valid/accuracy", mode = "max"},'

--- H.study_file(dir, file, fields [, head]) -> path: a study over dir/exp.lua (goal "g", seed 3)
-- on line 4 with head (default H.OBJECTIVE), then the given fields from line 5 on
function H.study_file(dir, file, fields, head)
  H.spit(dir .. "/" .. file, 'local dl = require "dlua"\nlocal S = dl.search\nreturn dl.study{\n' ..
    '  experiment = "exp.lua", goal = "g", seed = 3,' .. (head or H.OBJECTIVE) .. "\n" .. fields .. "\n}\n")
  return dir .. "/" .. file
end

--- The dlua under test as an absolute path (DLUA_EXE, else build/dlua), so specs
-- may cd before running it.
H.EXE = os.getenv("DLUA_EXE") or "build/dlua"
if H.EXE:sub(1, 1) ~= "/" then H.EXE = (os.getenv("PWD") or ".") .. "/" .. H.EXE end

--- Runs `dlua args` in dir; returns its output (stdout and stderr) and exit status.
function H.run(dir, args)
  local p = io.popen(string.format("cd %s && %s %s 2>&1; echo \"rc=$?\"", dir, H.EXE, args))
  local out = p:read("a")
  p:close()
  return out, tonumber(out:match("rc=(%d+)%s*$"))
end

--- The events of a study's journal.jsonl, in order ({} when there is none).
function H.journal_events(study_dir)
  local json = require "dlua.util.json"
  local out = {}
  for l in (fs.read(study_dir .. "/journal.jsonl") or ""):gmatch("[^\n]+") do out[#out + 1] = json.decode(l) end
  return out
end

--- The learning rate of every train line of a run's metrics.jsonl, by step ({} when there is none).
function H.train_lrs(run_dir)
  local json = require "dlua.util.json"
  local out = {}
  for l in (fs.read(run_dir .. "/metrics.jsonl") or ""):gmatch("[^\n]+") do
    local e = json.decode(l)
    if e.split == "train" then out[e.step] = e.lr end
  end
  return out
end

--- The largest absolute difference between two nested tables of numbers of one shape.
function H.max_diff(a, b)
  if type(a) ~= "table" then return math.abs(a - b) end
  assert(#a == #b, "shapes differ: " .. #a .. " and " .. #b)
  local m = 0
  for i = 1, #a do m = math.max(m, H.max_diff(a[i], b[i])) end
  return m
end

--- conv2d by direct loops over nested tables (the reference the conv specs compare with):
-- x [N, C, H, W], w [O, C/groups, kh, kw], b [O] or nil; s, p, d are {h, w} stride, padding
-- and dilation. Returns the output as nested tables.
function H.ref_conv(x, w, b, s, p, d, groups)
  local N, C, Hh, W = table.unpack(x:shape())
  local O, Cg, kh, kw = table.unpack(w:shape())
  local Og = O // groups
  local Ho = (Hh + 2 * p[1] - d[1] * (kh - 1) - 1) // s[1] + 1
  local Wo = (W + 2 * p[2] - d[2] * (kw - 1) - 1) // s[2] + 1
  local X, Wt, B = x:totable(), w:totable(), b and b:totable()
  local out = {}
  for n = 1, N do out[n] = {} for o = 1, O do out[n][o] = {} for i = 1, Ho do out[n][o][i] = {} for j = 1, Wo do
    local acc = B and B[o] or 0
    local g = (o - 1) // Og
    for c = 1, Cg do for a = 1, kh do for e = 1, kw do
      local h, ww = (i - 1) * s[1] - p[1] + (a - 1) * d[1] + 1, (j - 1) * s[2] - p[2] + (e - 1) * d[2] + 1
      if h >= 1 and h <= Hh and ww >= 1 and ww <= W then acc = acc + X[n][g * Cg + c][h][ww] * Wt[o][c][a][e] end
    end end end
    out[n][o][i][j] = acc
  end end end end
  return out
end

--- The bytes of a version 1.0 .npy file: descr ('<f4'), shape (a list), raw
-- data bytes; written by hand, as numpy writes it (header padded to 64).
function H.npy(descr, shape, raw)
  local dims = #shape == 1 and (shape[1] .. ",") or table.concat(shape, ", ")
  local h = string.format("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims)
  h = h .. string.rep(" ", (-(10 + #h + 1)) % 64) .. "\n"
  return "\147NUMPY\1\0" .. string.pack("<I2", #h) .. h .. raw
end

--- The bytes of a zip archive of stored members {{name, bytes}, ...} (an .npz
-- when the members are .npy files), CRC-32s filled in.
function H.zip_stored(members)
  local crc32 = require("dlua.core")._crc32
  local body, dir = {}, {}
  local off = 0
  for _, m in ipairs(members) do
    local name, data = m[1], m[2]
    local crc = crc32(data)
    local lh = string.pack("<I4I2I2I2I2I2I4I4I4I2I2", 0x04034b50, 20, 0, 0, 0, 0, crc, #data, #data, #name, 0) .. name
    dir[#dir + 1] = string.pack("<I4I2I2I2I2I2I2I4I4I4I2I2I2I2I2I4I4", 0x02014b50, 20, 20, 0, 0, 0, 0, crc, #data,
      #data, #name, 0, 0, 0, 0, 0, off) .. name
    body[#body + 1] = lh .. data
    off = off + #lh + #data
  end
  local cd = table.concat(dir)
  return table.concat(body) .. cd ..
    string.pack("<I4I2I2I2I2I4I4I2", 0x06054b50, 0, 0, #members, #members, #cd, off, 0)
end

--- The circles of a directed graph (graph[node] = {nodes it points to}), found
-- depth-first from each of order's nodes in turn: each once, as "a -> b -> ... -> a".
-- The require-graph and engine-graph specs share it.
function H.cycles(graph, order)
  local state, path, seen, out = {}, {}, {}, {}
  local function visit(u)
    state[u] = "open"
    path[#path + 1] = u
    for _, d in ipairs(graph[u] or {}) do
      if state[d] == "open" then
        local cyc, on = {}, false
        for _, p in ipairs(path) do
          if p == d then on = true end
          if on then cyc[#cyc + 1] = p end
        end
        cyc[#cyc + 1] = d
        local txt = table.concat(cyc, " -> ")
        if not seen[txt] then seen[txt] = true; out[#out + 1] = txt end
      elseif not state[d] then
        visit(d)
      end
    end
    path[#path] = nil
    state[u] = "done"
  end
  for _, u in ipairs(order) do if not state[u] then visit(u) end end
  return out
end

--- sorted_keys(t) -> t's keys, sorted
function H.sorted_keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

--- nn_classes(nn) -> the names of the classes dl.nn exports (every class but Module), sorted
function H.nn_classes(nn)
  local out = {}
  for name, cls in pairs(nn) do
    if type(cls) == "table" and rawget(cls, "__name") and cls ~= nn.Module then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

--- x with A x = b (lists; A a list of rows) by Gaussian elimination with partial
-- pivoting: an independent solve for the GP specs' reference posteriors.
function H.solve(A, b)
  local n = #b
  local M = {}
  for i = 1, n do M[i] = {table.unpack(A[i])}; M[i][n + 1] = b[i] end
  for c = 1, n do
    local p = c
    for r = c + 1, n do if math.abs(M[r][c]) > math.abs(M[p][c]) then p = r end end
    M[c], M[p] = M[p], M[c]
    for r = c + 1, n do
      local f = M[r][c] / M[c][c]
      for k = c, n + 1 do M[r][k] = M[r][k] - f * M[c][k] end
    end
  end
  local x = {}
  for i = n, 1, -1 do
    local s = M[i][n + 1]
    for k = i + 1, n do s = s - M[i][k] * x[k] end
    x[i] = s / M[i][i]
  end
  return x
end

--- The Matern-5/2 kernel of points a and b with length scales ls and amplitude sf2.
function H.matern52(a, b, ls, sf2)
  local r2 = 0
  for d = 1, #a do r2 = r2 + ((a[d] - b[d]) / ls[d]) ^ 2 end
  local r = math.sqrt(r2)
  return sf2 * (1 + math.sqrt(5) * r + 5 / 3 * r2) * math.exp(-math.sqrt(5) * r)
end

return H
