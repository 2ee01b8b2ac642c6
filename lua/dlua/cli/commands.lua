--- dlua.commands: `dlua COMMAND ...` for a bare word that is not a file
-- (engine/dlua.c hands it here). Errors print as one line led by the user's
-- location when there is one (dlua.util.blame), exit status 1; DLUA_DEBUG=1 adds
-- the traceback.
--   dlua agent STUDY_DIR [--count N] [--jobs P] [--lease S] [--threads N] [--quiet]
local study = require "dlua.study"
local blame = require "dlua.util.blame"

local M = {}

M.COMMANDS = {
  agent = function(args) return study.agent_main(args) end,
}

function M.main(name, ...)
  local cmd = M.COMMANDS[name]
  if not cmd then
    local names = {}
    for k in pairs(M.COMMANDS) do names[#names + 1] = k end
    table.sort(names)
    io.stderr:write(string.format("dlua: cannot open %s (no such file, and not a command: %s)\n", tostring(name),
      table.concat(names, ", ")))
    os.exit(1)
  end
  local args = table.pack(...)
  local list = {}
  for i = 1, args.n do list[i] = args[i] end
  local tb
  local ok, err = xpcall(cmd, function(e) tb = blame.traceback(tostring(e), 2); return blame.message(e, 2) end, list)
  if ok then return end
  io.stderr:write("dlua: ", tostring(err), "\n")
  if blame.debug() then io.stderr:write(tb, "\n") end
  os.exit(1)
end

return M
