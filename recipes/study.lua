-- recipes/study.lua -- runs a study file with the study flags; the same as
-- `dlua STUDYFILE [flags]`, for study files that are kept as data (required by
-- other recipes) rather than run directly.
--   dlua recipes/study.lua STUDYFILE [--out DIR] [--trials N] [--parallel P] [--steps N]
--        [--threads N] [--count N] [--create] [--quiet] [--help]
local study = require "dlua.study"

local path = arg and arg[1]
if not path or path:sub(1, 2) == "--" then
  print("usage: dlua recipes/study.lua STUDYFILE [flags]   (STUDYFILE returns dl.study{...}; see its --help)")
  os.exit(path == "--help" and 0 or 1)
end
local ok, err = pcall(function()
  local chunk = assert(loadfile(path))
  local obj = chunk()
  if not study.is_study(obj) then error(path .. " does not return a dl.study{...}", 0) end
  local args = {}
  for i = 2, #arg do args[#args + 1] = arg[i] end
  -- under mpirun the ranks share the trials (rank 0 plans and records them); alone, as obj:main
  require("dlua.dist").run_study(obj, args, path)
end)
if not ok then
  io.stderr:write("dlua: ", tostring(err):gsub("^[^:]*:%d+: ", ""), "\n")
  os.exit(1)
end
