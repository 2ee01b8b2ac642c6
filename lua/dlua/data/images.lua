--- dlua.data.images: datasets of image files that stay on disk, decoded (JPEG,
-- PNG) when an example is read, which in a pipeline is on its worker threads
-- (engine/data/imagefiles.c, engine/io/images.c). Two ways to name the files:
-- the torchvision ImageFolder layout (dir/<class>/<image>, sorted class folder
-- names as the vocabulary) or a list file of path and label. This module lists
-- and checks; the engine opens and decodes.
local lfs = require "lfs"
local core = require "dlua.core"
local fs = require "dlua.util.fs"
local check_mod = require "dlua.data.check"
local dataset = require "dlua.data.dataset"

local M = {}

local errorf, check, options = check_mod.errorf, check_mod.check, check_mod.options

local DEFAULT_EXTENSIONS = {".jpg", ".jpeg", ".png"}

-- opts.extensions checked -> {[".png"] = true, ...} (lower case), and their list for messages
local function extension_set(exts)
  exts = exts or DEFAULT_EXTENSIONS
  if type(exts) ~= "table" or #exts == 0 then
    errorf(3, "images: extensions must be a list of file name endings such as {\".png\"}, got %s", type(exts))
  end
  local set = {}
  for i, e in ipairs(exts) do
    if type(e) ~= "string" or not e:match("^%.[%w_%-]+$") then
      errorf(3, "images: extensions[%d] must be an ending such as \".png\", got %s", i, tostring(e))
    end
    set[e:lower()] = true
  end
  return set, table.concat(exts, ", ")
end

local function has_extension(name, set)
  local ext = name:match("(%.[^./]+)$")
  return ext ~= nil and set[ext:lower()] == true
end

-- the sorted entries of dir, without . and .. and hidden names (".DS_Store", ".git")
local function entries(dir)
  local ok, iter, state = pcall(lfs.dir, dir)
  if not ok then errorf(4, "images: cannot list '%s': %s", dir, (tostring(iter):gsub("^[^:]*: ", ""))) end
  local out = {}
  for name in iter, state do
    if name:sub(1, 1) ~= "." then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

-- the image files under dir/rel (recursively, sorted), appended to out as paths relative to
-- root; seen holds the directories (device:inode) on the way down, so a symbolic link back
-- up is not followed round in circles
local function walk(root, rel, set, out, seen)
  local here = lfs.attributes(root .. "/" .. rel)
  local key = here and here.dev .. ":" .. here.ino
  if not key or seen[key] then return end
  seen[key] = true
  for _, name in ipairs(entries(root .. "/" .. rel)) do
    local r = rel .. "/" .. name
    local mode = lfs.attributes(root .. "/" .. r, "mode")
    if mode == "directory" then
      walk(root, r, set, out, seen)
    elseif mode ~= nil and has_extension(name, set) then   -- FIFOs and the like too: refused when read
      out[#out + 1] = r
    end
  end
  seen[key] = nil
end

-- ImageFolder: dir/<class>/... -> paths, labels, classes
local function folder(dir, set, ext_list)
  if lfs.attributes(dir, "mode") ~= "directory" then
    errorf(3, "images: dir '%s' is not a directory", dir)
  end
  local classes, paths, labels = {}, {}, {}
  for _, name in ipairs(entries(dir)) do
    if lfs.attributes(dir .. "/" .. name, "mode") == "directory" then classes[#classes + 1] = name end
  end
  if #classes == 0 then
    errorf(3, "images: '%s' has no class sub-folders (the layout is dir/<class>/<image>)", dir)
  end
  for c, name in ipairs(classes) do
    local before = #paths
    walk(dir, name, set, paths, {})
    if #paths == before then
      errorf(3, "images: class folder '%s/%s' has no image files (extensions: %s)", dir, name, ext_list)
    end
    for i = before + 1, #paths do labels[i] = c end
  end
  return paths, labels, classes
end

-- a list file: lines "path,label" -> root (the file's directory), paths, labels
local function list_file(path, header, zero_based)
  local f, err = io.open(path, "rb")
  if not f then errorf(3, "images: cannot open list '%s': %s", path, (tostring(err):gsub("^[^:]*: ", ""))) end
  local text = f:read("a")
  f:close()
  local root = path:match("^(.*)/[^/]*$") or "."
  if root == "" then root = "/" end
  local paths, labels, ln = {}, {}, 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    ln = ln + 1
    line = line:gsub("\r$", "")
    if line:find("[^ \t]") and not (header and ln == 1) then
      local fs_ = core._csv_rows(line)[1] or {}     -- the engine's CSV tokenizer, one line at a time
      if #fs_ ~= 2 then errorf(3, "images: '%s' line %d has %d fields, expected 2 (path,label)", path, ln, #fs_) end
      local p, l = fs_[1], math.tointeger(tonumber(fs_[2]))
      local ok, why = fs.inside(root, p)
      if not ok then errorf(3, "images: '%s' line %d: path '%s' %s (paths must stay inside '%s')", path, ln, p, why, root) end
      if not l then
        errorf(3, "images: '%s' line %d: label '%s' is not an integer%s", path, ln, fs_[2],
          ln == 1 and " (a header line? add header = true)" or "")
      end
      if zero_based then l = l + 1 end
      if l < 1 then
        errorf(3, "images: '%s' line %d: label %d is below 1 (labels are 1-based; a file of 0-based labels needs " ..
          "zero_based = {\"label\"})", path, ln, l - (zero_based and 1 or 0))
      end
      paths[#paths + 1], labels[#labels + 1] = p, l
    end
  end
  if #paths == 0 then errorf(3, "images: list '%s' names no files", path) end
  return root, paths, labels
end

--- data.images{dir = path | list = path [, channels = 3, on_error = "fail", extensions =, header =, zero_based =]}:
-- a dataset of image files (JPEG, PNG; the format from the file's first bytes)
-- with fields image (uint8 [channels, H, W], decoded when the example is read:
-- on the pipeline's worker threads) and label (int32, 1-based). With `dir`, the
-- torchvision ImageFolder layout: one sub-folder per class (searched
-- recursively), the sorted folder names the vocabulary (ds.classes.label), files
-- chosen by `extensions` (default .jpg, .jpeg, .png, any case); hidden names
-- are ignored. With `list`, a CSV of path,label lines, paths relative to the
-- list's directory (absolute paths and '..' are refused), labels 1-based unless
-- zero_based = {"label"}; `header = true` skips its first line. channels: 3
-- (gray replicated, alpha dropped) or 1 (PIL's "L" luma). on_error: "fail"
-- (the default: an unreadable file stops the pipeline, naming it) or "skip"
-- (the example is left out of its batch and counted: pipe:skipped()).
-- @usage local ds = data.images{dir = "flowers/train", channels = 3}
function M.images(opts)
  opts = options("images", opts, {"dir", "list", "channels", "on_error", "extensions", "header", "zero_based"})
  if (opts.dir == nil) == (opts.list == nil) then
    errorf(2, "images: give exactly one of dir (an ImageFolder tree) and list (a CSV of path,label)")
  end
  local channels = opts.channels or 3
  if channels ~= 1 and channels ~= 3 then errorf(2, "images: channels must be 1 or 3, got %s", tostring(channels)) end
  local on_error = opts.on_error or "fail"
  if on_error ~= "fail" and on_error ~= "skip" then
    errorf(2, "images: on_error must be \"fail\" or \"skip\", got %s", tostring(on_error))
  end
  local root, paths, labels, classes
  if opts.dir ~= nil then
    if type(opts.dir) ~= "string" then errorf(2, "images: dir must be a path, got %s", type(opts.dir)) end
    for _, k in ipairs({"header", "zero_based"}) do
      if opts[k] ~= nil then errorf(2, "images: option '%s' is for list files; dir takes labels from folder names", k) end
    end
    local set, ext_list = extension_set(opts.extensions)
    root = opts.dir:gsub("(.)/+$", "%1")
    paths, labels, classes = folder(root, set, ext_list)
  else
    if type(opts.list) ~= "string" then errorf(2, "images: list must be a path, got %s", type(opts.list)) end
    if opts.extensions ~= nil then errorf(2, "images: option 'extensions' is for dir; a list names its files") end
    if opts.header ~= nil and type(opts.header) ~= "boolean" then
      errorf(2, "images: header must be a boolean, got %s", type(opts.header))
    end
    local zb = opts.zero_based
    if zb ~= nil and (type(zb) ~= "table" or #zb ~= 1 or zb[1] ~= "label" or next(zb, 1) ~= nil) then
      errorf(2, "images: zero_based must be {\"label\"} (the one field a list file gives), got %s", tostring(zb))
    end
    root, paths, labels = list_file(opts.list, opts.header, zb ~= nil)
  end
  local label = core.tensor(labels, {dtype = "int32"})
  local ud = check(2, pcall(core._ds_images, root, paths, label, channels, on_error == "skip"))
  local ds = dataset.wrap(ud, classes and {label = classes} or nil)
  rawset(ds, "files", {root = root, paths = paths})  -- data.pack copies the files as they are
  return ds
end

return M
