-- recipes/pack.lua -- writes a dataset as record shards (WebDataset tar files) that
-- data.shards streams in bounded memory: an image folder (its files copied as they are)
-- or any dataset a Lua file returns (uint8 [C, H, W] images as PNG, class labels as .cls).
--   dlua pack SOURCE OUTDIR [--per-shard N] [--prefix NAME] [--quiet]
--   SOURCE: an ImageFolder tree (dir/<class>/<image>), or a .lua file returning a dataset
local dl = require "dlua"
local probe = require "dlua.study.probe"

local USAGE = [[
usage: dlua pack SOURCE OUTDIR [flags]
  SOURCE            an image folder (one sub-folder per class) or a .lua file returning a dataset
  OUTDIR            where the shards go: OUTDIR/<prefix>-000000.tar, ...
  --per-shard N     examples per shard (10000)
  --prefix NAME     the shards' file name prefix (shard)
  --quiet           no progress line
Class labels are written 0-based, as WebDataset and PyTorch expect: read them back with
data.shards{dir = OUTDIR, fields = {image = "png;jpg", label = "cls"}, zero_based = {"label"}}.]]

probe.main(function()
  local cli = require "dlua.cli"
  local args = {}
  for i = 1, #arg do args[i] = arg[i] end
  local o = cli.parse(args, nil, {extra = {"--per-shard", "--prefix"}, shared = {"--quiet"}, command = "dlua pack"})
  if o.help then print(USAGE); return end
  if #o.positional ~= 2 then error("pack: expected SOURCE and OUTDIR\n" .. USAGE, 0) end
  local source, out = o.positional[1], o.positional[2]
  local ds
  if dl.fs.is_dir(source) then
    ds = dl.data.images{dir = source}
  elseif source:match("%.lua$") then
    local chunk, err = loadfile(source)
    if not chunk then error("pack: " .. err, 0) end
    ds = chunk()
    if not dl.data.is_dataset(ds) then
      error(string.format("pack: %s returns a %s, expected a dataset", source, type(ds)), 0)
    end
  else
    error(string.format("pack: SOURCE '%s' is neither a folder nor a .lua file", source), 0)
  end
  local t0 = dl.clock()
  local res = dl.data.pack{dataset = ds, dir = out, per_shard = probe.number("per-shard", o.extra["per-shard"], nil,
    {int = 1}), prefix = o.extra.prefix, on_shard = not o.quiet and function(path, done)
      io.stderr:write(string.format("\r%s: %d of %d examples", path, done, #ds))
    end or nil}
  if not o.quiet then io.stderr:write("\n") end
  print(string.format("wrote %d examples in %d shards to %s (%.1f s)", res.examples, #res.files, out, dl.clock() - t0))
end)
