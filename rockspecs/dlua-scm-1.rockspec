-- rockspecs/dlua-scm-1.rockspec -- dlua from this source tree, built by its CMakeLists.txt:
--   luarocks --lua-version=5.4 make rockspecs/dlua-scm-1.rockspec [--tree=DIR]
-- (from the repository root; Debian's luarocks is 3.8 and defaults to Lua 5.1, hence
-- --lua-version; add --deps-mode=none when Debian's lua-filesystem provides lfs, which
-- LuaRocks does not see as the luafilesystem rock). It installs the dlua executable (DIR/bin), the Lua library
-- (DIR/share/lua/5.4/dlua), the engine as the C module dlua.core
-- (DIR/lib/lua/5.4/dlua/core.so), and the recipes, examples, docs and man page in the
-- rock's own directory, where `dlua COMMAND` finds them (dlua/cli/site.lua).
-- The system packages it builds against are those of scripts/setup.sh
-- (liblua5.4-dev, libopenblas-dev, zlib1g-dev; libopenmpi-dev if present).
rockspec_format = "3.0"
package = "dlua"
version = "scm-1"
source = {
  url = "git+file://.",          -- `luarocks make` builds the working tree it is run from
}
description = {
  summary = "A training engine for deep-learning experiments, driven from Lua 5.4",
  detailed = [[
A C11 core (tensors, autograd, a caching allocator, a thread pool, OpenBLAS matmul,
convolutions, batch norm, a threaded input pipeline, safetensors checkpoints) with a
Lua library on top: layers, optimizers, experiments, tuning studies with reports, and
the Deep Learning Tuning Playbook's procedures as `dlua` commands.]],
  license = "MIT",
  labels = {"deep-learning", "machine-learning", "autograd", "tensor"},
}
dependencies = {
  "lua >= 5.4, < 5.5",
  "luafilesystem",
}
-- no external_dependencies: CMake finds Lua, OpenBLAS and zlib through pkg-config (Debian
-- keeps cblas.h under a multiarch include directory LuaRocks does not search)
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    CMAKE_INSTALL_BINDIR = "$(BINDIR)",
    DLUA_INSTALL_LMOD = "$(LUADIR)",
    DLUA_INSTALL_CMOD = "$(LIBDIR)",
    DLUA_INSTALL_DATADIR = "$(PREFIX)/share/dlua",
    DLUA_BUILD_TESTS = "OFF",
  },
}
