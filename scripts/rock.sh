#!/bin/sh
# Packs the source rock of dlua: an archive of this repository at REF (default HEAD,
# or a tag) as dist/dlua-scm.tar.gz, and dist/dlua-scm-1.src.rock from
# rockspecs/dlua-scm-1.rockspec with its source pointed at that archive by absolute
# path (luarocks pack fetches the source from a temporary directory, where the
# rockspec's relative file://dist/... does not resolve). The rock then builds anywhere:
#   scripts/rock.sh [REF]
#   luarocks --lua-version=5.4 build --tree=DIR --deps-mode=none dist/dlua-scm-1.src.rock
set -eu
cd "$(dirname "$0")/.."
ref=${1:-HEAD}
mkdir -p dist
git archive --prefix=dlua-scm/ -o dist/dlua-scm.tar.gz "$ref"
sed "s|file://dist/dlua-scm.tar.gz|file://$PWD/dist/dlua-scm.tar.gz|" rockspecs/dlua-scm-1.rockspec > dist/dlua-scm-1.rockspec
grep -q "file://$PWD/dist/dlua-scm.tar.gz" dist/dlua-scm-1.rockspec
cd dist
luarocks --lua-version=5.4 pack dlua-scm-1.rockspec
echo "rock: $PWD/dlua-scm-1.src.rock"
