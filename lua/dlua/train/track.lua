--- dlua.train.track: the tracking spreadsheet (DESIGN.md section 5).
-- runs/studies.csv gets one row per finished run or study: name, config path,
-- description, trials, best validation value of the best checkpoint and the
-- exact command that reproduces it. Rows are appended with one write each, so
-- two processes finishing at once never interleave their lines.
local core = require "dlua.core"
local fs = require "dlua.util.fs"
local util = require "dlua.util"

local M = {}

M.COLUMNS = {"name", "config", "description", "trials", "best_metric", "best_value", "best_step", "status",
             "dir", "command"}

--- CSV field quoting (RFC 4180): quotes, commas and newlines are quoted.
function M.csv_field(v)
  local s = v == nil and "" or tostring(v)
  if s:find('[,"\r\n]') then s = '"' .. s:gsub('"', '""') .. '"' end
  return s
end

function M.csv_row(values, n)
  n = util.check_integer("dl.track.csv_row", 2, n or #values, "n", 0, 100000)
  local out = {}
  for i = 1, n do out[i] = M.csv_field(values[i]) end
  return table.concat(out, ",")
end

--- Parses CSV text into a list of rows (lists of strings); handles quoting (the engine's one
-- CSV tokenizer, engine/io/csv.c).
function M.parse_csv(text)
  return core._csv_rows(text)
end

--- Appends a row to path, writing the header first when the file is new.
function M.append(path, values, columns)
  columns = columns or M.COLUMNS
  fs.mkdir_p(fs.dirname(path))
  -- the header is in the file from its first byte: two processes creating it at once
  -- cannot put a row above it (create_once links a complete file into place)
  fs.create_once(path, M.csv_row(columns) .. "\n")
  local row = {}
  for i, c in ipairs(columns) do row[i] = values[c] end
  fs.append_line(path, M.csv_row(row, #columns))
end

--- Reads a tracking file into a list of {column = value} (repeated headers skipped).
function M.read(path)
  local text = fs.read(path)
  if not text then return {} end
  local rows = M.parse_csv(text)
  local header = rows[1]
  local out = {}
  for r = 2, #rows do
    local row = rows[r]
    if table.concat(row, ",") ~= table.concat(header, ",") then
      local t = {}
      for i, c in ipairs(header) do t[c] = row[i] end
      out[#out + 1] = t
    end
  end
  return out
end

--- The row for one dl.train run: runs/studies.csv next to the run directory's parent.
function M.append_run(config, result)
  local root = type(config.tracking) == "string" and config.tracking or fs.dirname(result.dir)
  local best = result.best or {}
  local metric = result.checkpoints and result.checkpoints.metric   -- what ranked: objective, checkpoint.metric or the default
  M.append(root .. "/studies.csv", {
    name = config.name or result.dir, config = config.config_path or "", description = config.description or "",
    trials = 1, best_metric = metric or "", best_value = metric and best.metrics and best.metrics[metric] or "",
    best_step = best.step or "", status = result.status, dir = result.dir, command = config.command or "",
  })
end


-- every exported function refuses extra arguments (util.strict)
util.strict_table("track.", M, false, {
  append = {"string", "table", "table?"}, append_run = {"table", "table"}, csv_field = {"any?"},
  csv_row = {"table", "integer?"}, parse_csv = {"string"}, read = {"string"},
})

return M
