-- Every ```lua snippet of README.md and docs/**/*.md runs (issue 20: the docs cannot
-- go stale again). Each snippet is one `it`, run by the dlua binary in a fresh process
-- (a fresh Lua state), in its own scratch directory that links the source tree's
-- examples/, recipes/, docs/ and tools/ and has an empty runs/ (a snippet naming
-- examples/fashion_mnist.lua finds it; the files it writes go nowhere else), with a
-- time limit. The snippet finds the names the docs use for their running example
-- already set as globals (FIXTURE below): dl, nn, optim, data, S (dl.search),
-- T (dl.data.transforms), and a small model, x, labels, loss (of model(x)), opt and step.
--
-- Markers, in the fence's info string or in an HTML comment on the line before it:
--   ```lua continues         runs after the previous snippets of the same file that run
--   <!-- continues -->       (not run ones skipped), in one chunk: a tutorial's steps
--   ```lua no-run: WHY       not run (and not compiled), for what a test cannot give:
--   <!-- no-run: WHY -->     minutes of training, a finished study, a file not shipped
-- A marker without a reason, or an unknown one, fails. Blocks that are not Lua
-- (signatures with [optional] arguments, field lists) are ```text, not ```lua.
local H = dofile("tests/lua/helpers.lua")
local fs = require "dlua.util.fs"

local SRC = io.popen("pwd"):read("l")
local EXE = os.getenv("DLUA_EXE") or ((os.getenv("DLUA_BUILD") or "build") .. "/dlua")
if EXE:sub(1, 1) ~= "/" then EXE = SRC .. "/" .. EXE end
local TIMEOUT = 120                      -- seconds per snippet; the slowest trains a few hundred tiny steps
local q = H.shquote

-- the Markdown files: README.md and docs/**/*.md, sorted
local function markdown_files()
  local out = {"README.md"}
  local function walk(dir)
    local names = fs.list(dir)
    table.sort(names)
    for _, n in ipairs(names) do
      local p = dir .. "/" .. n
      if fs.is_dir(p) then walk(p) elseif n:match("%.md$") then out[#out + 1] = p end
    end
  end
  walk("docs")
  return out
end

--- The ```lua snippets of a Markdown text: {code, line, no_run = reason, continues = true,
-- bad_marker = text}. Fences may be indented (in a list); the snippet's lines lose that
-- indentation.
local function snippets(text)
  local out, lines = {}, {}
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
  local i = 1
  while i <= #lines do
    local indent, fence, info = lines[i]:match("^(%s*)(```+)%s*(.-)%s*$")
    if fence then
      local body, j = {}, i + 1
      while j <= #lines and not lines[j]:match("^%s*" .. fence .. "%s*$") do
        body[#body + 1] = lines[j]:sub(1, #indent) == indent and lines[j]:sub(#indent + 1) or lines[j]
        j = j + 1
      end
      local lang, rest = info:match("^(%S*)%s*(.-)$")
      if lang == "lua" then
        local s = {code = table.concat(body, "\n") .. "\n", line = i}
        local prev = i > 1 and lines[i - 1]:match("^%s*<!%-%-%s*(.-)%s*%-%->%s*$") or nil
        local marker = rest ~= "" and rest or prev
        if marker == "continues" then s.continues = true
        elseif marker and marker:match("^no%-run:%s*%S") then s.no_run = marker:match("^no%-run:%s*(.-)$")
        elseif marker and (rest ~= "" or marker:match("^no%-run") or marker:match("^continue")) then
          s.bad_marker = marker
        end
        out[#out + 1] = s
      end
      i = j + 1
    else
      i = i + 1
    end
  end
  return out
end

-- the running example's names, set before every snippet (a snippet's own `local dl = ...`
-- shadows them); on the first line, so snippet.lua:N is the fence's line + N
local FIXTURE = table.concat({
  'dl = require "dlua"', "nn, optim, data, S, T = dl.nn, dl.optim, dl.data, dl.search, dl.data.transforms",
  "model = nn.Sequential{nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)}",
  "x, labels = dl.randn(16, 4), dl.tensor({1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1}, {dtype = 'int32'})",
  "loss = nn.CrossEntropy()(model(x), labels)", "opt = optim.SGD{params = model:parameters(), lr = 0.1}",
  "step = 1"}, "; ") .. "; "

-- runs code with dlua in a scratch directory; returns output and exit status
local function run(code, tag)
  local dir = H.tmpdir("doc-" .. tag)
  for _, d in ipairs({"examples", "recipes", "docs", "tools"}) do
    assert(os.execute(string.format("ln -s %s %s", q(SRC .. "/" .. d), q(dir .. "/" .. d))))
  end
  fs.mkdir_p(dir .. "/runs")
  H.spit(dir .. "/snippet.lua", FIXTURE .. code)
  local p = io.popen(string.format("cd %s && timeout %d %s snippet.lua 2>&1; echo \"rc=$?\"", q(dir), TIMEOUT, q(EXE)))
  local out = p:read("a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  fs.rm_rf(dir)
  return out:gsub("rc=%d+%s*$", ""), rc
end

describe("the extraction of snippets", function()
  it("finds fenced lua blocks, their markers and their reasons, and nothing else", function()
    local md = table.concat({
      "text", "```lua", "print(1)", "```", "```sh", "echo no", "```",
      "<!-- no-run: a fragment -->", "```lua", "x = y", "```",
      "- item", "  ```lua no-run: in a list", "  local a = 1", "  ```",
      "```lua no-run", "z()", "```", "````lua", "s = [[", "```", "]]", "````",
      "<!-- continues -->", "```lua", "w()", "```", "```lua continue", "v()", "```",
      "<!-- a comment -->", "```lua", "u()", "```"}, "\n")
    local s = snippets(md)
    assert.are.equal(8, #s)
    assert.are.same({code = "print(1)\n", line = 2}, s[1])
    assert.are.same({code = "x = y\n", line = 9, no_run = "a fragment"}, s[2])
    assert.are.same({code = "local a = 1\n", line = 13, no_run = "in a list"}, s[3])
    assert.are.same({code = "z()\n", line = 16, bad_marker = "no-run"}, s[4])
    assert.are.same({code = "s = [[\n```\n]]\n", line = 19}, s[5])
    assert.are.same({code = "w()\n", line = 25, continues = true}, s[6])
    assert.are.same({code = "v()\n", line = 28, bad_marker = "continue"}, s[7])
    assert.are.same({code = "u()\n", line = 32}, s[8])
  end)
end)

local total, marked = 0, 0
for _, file in ipairs(markdown_files()) do
  local list = snippets(fs.read(file))
  if #list > 0 then
    describe(file, function()
      local chain, chain_lines, runnable = nil, nil, false    -- the code a `continues` snippet runs after
      for k, s in ipairs(list) do
        total = total + 1
        local what = string.format("snippet %d (line %d)", k, s.line)
        if s.bad_marker then
          it(what .. " has a known marker", function()
            error(string.format("%s:%d: unknown marker '%s' (continues, or no-run: WHY)", file, s.line, s.bad_marker), 0)
          end)
          runnable = false
        elseif s.no_run then
          marked = marked + 1
          pending(string.format("%s (line %d) not run: %s", what:match("^snippet %d+"), s.line, s.no_run))
        elseif s.continues and not runnable then
          it(what .. " continues a snippet that runs", function()
            error(string.format("%s:%d: 'continues' with no snippet before it that runs", file, s.line), 0)
          end)
        else
          local code, lines
          if s.continues then
            code, lines = chain .. s.code, chain_lines .. string.format(", line %d from %s:%d",
              select(2, chain:gsub("\n", "")) + 1, file, s.line)
          else
            code, lines = s.code, string.format("line 1 from %s:%d", file, s.line)
          end
          chain, chain_lines, runnable = code, lines, true
          it(what .. (s.continues and " runs after the one before it" or " runs"), function()
            local out, rc = run(code, (file:gsub("[^%w]", "_")) .. "-" .. k)
            if rc ~= 0 then
              error(string.format("%s:%d: exit status %s (snippet.lua: %s)\n%s", file, s.line, tostring(rc), lines,
                out), 0)
            end
          end)
        end
      end
    end)
  end
end

describe("the docs", function()
  it("have snippets to run, and most of them do run", function()
    assert.truthy(total >= 30, "only " .. total .. " snippets found")
    assert.truthy(marked * 3 <= total, string.format("%d of %d snippets are marked no-run", marked, total))
  end)
end)
