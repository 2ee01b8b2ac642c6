-- The dlua executable as a command: arguments, -e, -v, --help, stdin, the
-- prompt, errors with tracebacks and exit codes, and require "dlua" with no
-- environment variables. Spawns the binary (build/dlua, or $DLUA_BUILD/dlua).
local DLUA = (os.getenv("DLUA_BUILD") or "build") .. "/dlua"
local H = dofile("tests/lua/helpers.lua")
local shquote = H.shquote
local slurp = H.slurp
local spit = H.spit

-- writes a temporary file with content s; returns its name
local function tmpfile(s)
  local name = os.tmpname()
  spit(name, s)
  return name
end

local tmps = {}
local function tmp(s)
  local name = tmpfile(s)
  tmps[#tmps + 1] = name
  return name
end

-- runs dlua with the given argument words (quoted here) and optional stdin;
-- returns exit code, stdout, stderr
local function dlua(words, stdin)
  local out, err = os.tmpname(), os.tmpname()
  local cmd = { shquote(DLUA) }
  for _, w in ipairs(words) do cmd[#cmd + 1] = shquote(w) end
  local inp
  if stdin then
    inp = tmpfile(stdin)
    cmd[#cmd + 1] = "<" .. shquote(inp)
  else
    cmd[#cmd + 1] = "</dev/null"
  end
  cmd[#cmd + 1] = ">" .. shquote(out) .. " 2>" .. shquote(err)
  local _, how, code = os.execute(table.concat(cmd, " "))
  local o, e = slurp(out), slurp(err)
  os.remove(out)
  os.remove(err)
  if inp then os.remove(inp) end
  assert(how == "exit", "dlua killed by signal " .. tostring(code) .. "\n" .. e)
  return code, o, e
end

local function has(s, sub)
  return s:find(sub, 1, true) ~= nil
end

describe("dlua command line", function()
  teardown(function()
    for _, name in ipairs(tmps) do os.remove(name) end
  end)

  it("passes script arguments in arg and ...", function()
    local script = tmp([[
      io.write(arg[0], "|", #arg, "|", table.concat(arg, ",", 1, #arg), "|")
      io.write(select("#", ...), "|", (select(2, ...)), "|", type(arg[-1]), "\n")
    ]])
    local code, out, err = dlua({ script, "a", "b c", "3" })
    assert.are.equal(0, code, err)
    assert.are.equal(script .. "|3|a,b c,3|3|b c|string\n", out)
  end)

  it("puts interpreter options at negative indices of arg", function()
    local script = tmp([[print(arg[-2], arg[-1], arg[0], arg[1])]])
    local code, out, err = dlua({ "-e", "x = 1", script, "y" })
    assert.are.equal(0, code, err)
    assert.are.equal("-e\tx = 1\t" .. script .. "\ty\n", out)
  end)

  it("runs -e code", function()
    local code, out, err = dlua({ "-e", "print(1+1)" })
    assert.are.equal(0, code, err)
    assert.are.equal("2\n", out)
  end)

  it("runs several -e in order, then the script", function()
    local script = tmp([[print("script", x)]])
    local code, out, err = dlua({ "-e", "x = 1", "-e", "x = x + 1; print(x)", script })
    assert.are.equal(0, code, err)
    assert.are.equal("2\nscript\t2\n", out)
  end)

  it("prints its version with -v and --version", function()
    for _, opt in ipairs({ "-v", "--version" }) do
      local code, out, err = dlua({ opt })
      assert.are.equal(0, code, err)
      assert.truthy(out:match("^dlua 0%.1%.0 %(Lua 5%.4%.%d+%)\n$"), out)
    end
  end)

  it("lists the options with --help and -h", function()
    for _, opt in ipairs({ "--help", "-h" }) do
      local code, out, err = dlua({ opt })
      assert.are.equal(0, code, err)
      assert.truthy(has(out, "usage: dlua"), out)
      for _, o in ipairs({ "-e", "-i", "-v", "--version", "--help", "-l" }) do
        assert.truthy(has(out, " " .. o .. " ") or has(out, o .. ")"), o .. " missing from\n" .. out)
      end
    end
  end)

  it("rejects an unknown option with the usage and status 1", function()
    local code, out, err = dlua({ "-Z" })
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.truthy(has(err, "unrecognized option '-Z'"), err)
    assert.truthy(has(err, "usage: dlua"), err)
  end)

  it("reports a runtime error as file:line: message with a traceback, status 1", function()
    local script = tmp("local function f()\n  error('boom')\nend\nf()\n")
    local code, out, err = dlua({ script })
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.truthy(has(err, "dlua: " .. script .. ":2: boom\n"), err)
    assert.truthy(has(err, "stack traceback:"), err)
    assert.truthy(has(err, script .. ":4: in main chunk"), err)
  end)

  it("points a bad experiment spec at its file, and its line unless it is the returned tail call", function()
    local tail = tmp('local dl = require "dlua"\nreturn dl.experiment{name = "x", hparams = {lr = 1}}\n')
    local code, _, err = dlua({ tail })
    assert.are.equal(1, code)
    assert.truthy(has(err, "dlua: " .. tail .. ": dl.experiment: build must be a function(hp)"), err)
    assert.truthy(has(err, "(in its `return dl.experiment{...}`)"), err)
    local named = tmp('local dl = require "dlua"\n\nlocal e = dl.experiment{name = "x", bulid = 1}\nreturn e\n')
    code, _, err = dlua({ named })
    assert.are.equal(1, code)
    assert.truthy(has(err, "dlua: " .. named .. ":3: dl.experiment: unknown option 'bulid' (valid: build, " ..
      "description, hparams, name); did you mean 'build'?"), err)
  end)

  it("gives a mistyped flag the did-you-mean option keys get, in experiments and commands alike", function()
    local exp = tmp('local dl = require "dlua"\nreturn dl.experiment{name = "x", hparams = {lr = 1}, ' ..
      'build = function(hp) error("not run") end}\n')
    local code, out, err = dlua({ exp, "--stpes", "3" })
    assert.are.same({1, "", "dlua: unknown flag '--stpes' (see --help); did you mean '--steps'?\n"}, {code, out, err})
    code, _, err = dlua({ "report", "/tmp", "--watc" })           -- a command names itself and its flags
    assert.are.same({1, "dlua: unknown flag '--watc' for dlua report (valid: --aggregate, --help, --interval, " ..
      "--isolate, --metric, --mode, --out, --pareto, --screenshot, --static, --timeout, --top, --watch); did you " ..
      "mean '--watch'?\n"}, {code, err})
    code, _, err = dlua({ "evaluate", exp, "--checkpiont", "x" })
    assert.are.same({1, "dlua: unknown flag '--checkpiont' for dlua evaluate (valid: --checkpoint, --help, --threads); " ..
      "did you mean '--checkpoint'?\n"}, {code, err})
  end)

  it("reports a non-string error object through __tostring", function()
    local script = tmp("error(setmetatable({}, {__tostring = function() return 'custom object' end}))\n")
    local code, _, err = dlua({ script })
    assert.are.equal(1, code)
    assert.truthy(has(err, "dlua: custom object"), err)
    assert.truthy(has(err, "stack traceback:"), err)
    code, _, err = dlua({ "-e", "error({})" })
    assert.are.equal(1, code)
    assert.truthy(has(err, "(error object is a table value)"), err)
  end)

  it("reports an error in -e code", function()
    local code, _, err = dlua({ "-e", "error('oops')" })
    assert.are.equal(1, code)
    assert.truthy(has(err, "(command line):1: oops"), err)
    assert.truthy(has(err, "stack traceback:"), err)
  end)

  it("reports a syntax error with status 1", function()
    local script = tmp("local x = = 1\n")
    local code, out, err = dlua({ script })
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.truthy(has(err, "dlua: " .. script .. ":1: "), err)
    code, _, err = dlua({ "-e", "print(" })
    assert.are.equal(1, code)
    assert.truthy(has(err, "(command line):1:"), err)
  end)

  it("reports a missing script with status 1", function()
    local missing = os.tmpname()
    os.remove(missing)
    local code, out, err = dlua({ missing })
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.truthy(has(err, "cannot open " .. missing), err)
  end)

  it("passes the status of os.exit through", function()
    local code = dlua({ "-e", "os.exit(3)" })
    assert.are.equal(3, code)
  end)

  it("reads the script from stdin with '-', and with no script when stdin is not a terminal", function()
    local code, out, err = dlua({ "-", "p", "q" }, "print(arg[0], ...)\n")
    assert.are.equal(0, code, err)
    assert.are.equal("-\tp\tq\n", out)
    code, out, err = dlua({}, "print('from stdin')\n")
    assert.are.equal(0, code, err)
    assert.are.equal("from stdin\n", out)
    code, _, err = dlua({}, "error('bad stdin')\n")
    assert.are.equal(1, code)
    assert.truthy(has(err, "stdin:1: bad stdin"), err)
  end)

  it("runs a prompt with -i: values, multi-line statements, errors", function()
    local input = "1+1\nfor i = 1, 2 do\nio.write('i', i, ' ')\nend\nerror('x')\nreturn 'a', nil\n=40+2\n"
    local code, out, err = dlua({ "-i" }, input)
    assert.are.equal(0, code, err)
    assert.truthy(out:match("^dlua 0%.1%.0"), out)
    assert.truthy(has(out, "> 2\n"), out)
    assert.truthy(has(out, ">> >> i1 i2 "), out)
    assert.truthy(has(out, "a\tnil\n"), out)
    assert.truthy(has(out, "42\n"), out)
    assert.truthy(has(err, "stdin:1: x"), err)
  end)

  it("finds the dlua library with no environment variables", function()
    local code, out, err = dlua({ "-e", "local dl = require 'dlua'; assert(type(dl) == 'table'); print('ok')" })
    assert.are.equal(0, code, err)
    assert.are.equal("ok\n", out)
  end)

  it("still loads system modules after its own path", function()
    local code, out, err = dlua({ "-e", "print(type(require 'busted.core'))" })
    assert.are.equal(0, code, err)
    assert.are.equal("function\n", out)
  end)
end)
