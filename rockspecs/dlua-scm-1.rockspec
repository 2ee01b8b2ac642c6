-- rockspecs/dlua-scm-1.rockspec -- dlua from this source tree, built by its CMakeLists.txt:
--   luarocks --lua-version=5.4 make rockspecs/dlua-scm-1.rockspec [--tree=DIR]
-- (from the repository root; Debian's luarocks is 3.8 and defaults to Lua 5.1, hence
-- --lua-version; add --deps-mode=none when Debian's lua-filesystem provides lfs, which
-- LuaRocks does not see as the luafilesystem rock). It installs the dlua executable (DIR/bin), the Lua library
-- (DIR/share/lua/5.4/dlua), the engine as the C module dlua.core
-- (DIR/lib/lua/5.4/dlua/core.so), and the recipes, examples, tools, docs and man page in the
-- rock's own directory, where `dlua COMMAND` finds them (dlua/cli/site.lua).
-- The build happens outside the source tree: CMake's build directory is build.tmp in the
-- rock's own directory (removed once installed), not LuaRocks' build.luarocks/ in the tree.
-- The source is an archive of this repository (a local path: dist/dlua-scm.tar.gz,
-- written by `git archive`); scripts/rock.sh writes it and packs the source rock
-- (luarocks pack) that `luarocks build` installs anywhere. `luarocks make` builds the
-- working tree it runs in and reads no archive.
-- The system packages it builds against are those of scripts/setup.sh
-- (liblua5.4-dev, libopenblas-dev, zlib1g-dev; libopenmpi-dev if present).
rockspec_format = "3.0"
package = "dlua"
version = "scm-1"
source = {
  url = "file://dist/dlua-scm.tar.gz",   -- scripts/rock.sh: git archive --prefix=dlua-scm/ -o dist/dlua-scm.tar.gz HEAD
  dir = "dlua-scm",
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
  type = "command",
  build_command = [[mkdir -p "$(PREFIX)" && $(CMAKE) -S . -B "$(PREFIX)/build.tmp" -DCMAKE_BUILD_TYPE=Release ]] ..
    [[-DCMAKE_INSTALL_PREFIX="$(PREFIX)" -DCMAKE_INSTALL_BINDIR="$(BINDIR)" -DDLUA_INSTALL_LMOD="$(LUADIR)" ]] ..
    [[-DDLUA_INSTALL_CMOD="$(LIBDIR)" -DDLUA_INSTALL_DATADIR="$(PREFIX)/share/dlua" -DDLUA_BUILD_TESTS=OFF && ]] ..
    [[$(CMAKE) --build "$(PREFIX)/build.tmp" -j 2]],
  install_command = [[$(CMAKE) --install "$(PREFIX)/build.tmp" && rm -rf "$(PREFIX)/build.tmp"]],
}
