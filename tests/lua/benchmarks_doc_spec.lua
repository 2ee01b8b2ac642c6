-- docs/benchmarks.md answers "how fast is it" (issue 31, item 5): it leads with one current
-- table per workload, each saying the machine, the date and the build of the run it comes
-- from, and keeps the history in docs/benchmarks-history.md, which it links.
local H = dofile("tests/lua/helpers.lua")

-- the sections of a Markdown text: {{title, body}} for each "## " heading
local function sections(text)
  local out, cur = {}, nil
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    local title = line:match("^## (.+)$")
    if title then
      cur = {title = title, lines = {}}
      out[#out + 1] = cur
    elseif cur and not line:match("^# ") then
      cur.lines[#cur.lines + 1] = line
    end
  end
  for _, s in ipairs(out) do s.body = "\n" .. table.concat(s.lines, "\n") .. "\n" end
  return out
end

--- The problems of a current-numbers page: sections without a table, a date, a machine
-- class or a build (or "build not recorded"), and a missing link to the history.
local function problems(text)
  local out = {}
  if not text:find("(benchmarks-history.md)", 1, true) then out[#out + 1] = "no link to benchmarks-history.md" end
  local secs = sections(text)
  if #secs == 0 then out[#out + 1] = "no sections" end
  for _, s in ipairs(secs) do
    local b = s.body
    if not b:find("\n|[^\n]*|\n|%-%-%-") then out[#out + 1] = s.title .. ": no table" end
    if not b:find("20%d%d%-%d%d%-%d%d") then out[#out + 1] = s.title .. ": no date (YYYY-MM-DD)" end
    if not (b:find("Xeon", 1, true) or b:find("EPYC", 1, true) or b:find("machine class not recorded", 1, true)) then
      out[#out + 1] = s.title .. ": no machine class (Xeon, EPYC, or 'machine class not recorded')"
    end
    if not (b:find("build %x%x%x%x%x%x%x") or b:find("build not recorded", 1, true)) then
      out[#out + 1] = s.title .. ": no build (a commit, or 'build not recorded')"
    end
  end
  return out
end

describe("docs/benchmarks.md", function()
  it("has one dated table per workload with its machine and build, and links the history", function()
    local text = H.slurp("docs/benchmarks.md")
    assert.is_true(#sections(text) >= 8, "found only " .. #sections(text) .. " sections")
    assert.are.equal("", table.concat(problems(text), "\n"))
    local history = H.slurp("docs/benchmarks-history.md")
    assert.truthy(history:find("^# Benchmarks: the lab notebook\n"))
    assert.truthy(history:find("(benchmarks.md)", 1, true))
  end)

  it("the checker names a section without a table, date, machine or build", function()
    local text = "# B\n\nsee [h](benchmarks-history.md)\n\n## Good\n\nRun: 2026-12-04, Xeon, build 647134b.\n\n" ..
      "| a | b |\n|---|---|\n| 1 | 2 |\n\n## Bare\n\nprose only\n"
    assert.are.same({"Bare: no table", "Bare: no date (YYYY-MM-DD)",
      "Bare: no machine class (Xeon, EPYC, or 'machine class not recorded')",
      "Bare: no build (a commit, or 'build not recorded')"}, problems(text))
    assert.are.same({"no link to benchmarks-history.md", "no sections"}, problems("# B\n"))
  end)
end)
