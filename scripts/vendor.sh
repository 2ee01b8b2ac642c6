#!/bin/sh
# Vendors uPlot (the charting library of the interactive study report) from the npm
# registry into vendor/uplot/, and verifies it against the checksums recorded in
# vendor/uplot/MANIFEST.
#   scripts/vendor.sh              fetch the recorded version, check the tarball's and the
#                                  files' sha256 against MANIFEST, (re)write the files
#   scripts/vendor.sh --check      only check the files in vendor/uplot/ against MANIFEST
#                                  (no network)
#   scripts/vendor.sh --update V   fetch version V, write its files and a new MANIFEST
#                                  (review the diff: licence, size, the report's browser test)
# The files are inlined into every interactive report (lua/dlua/report/html.lua), so a
# report works offline and from file://. Needs npm (Node.js) for fetching and sha256sum.
set -eu
cd "$(dirname "$0")/.."
dst=vendor/uplot
manifest=$dst/MANIFEST
files="uPlot.iife.min.js uPlot.min.css LICENSE"

field() { sed -n "s/^$1 //p" "$manifest"; }

check_files() {
  for f in $files; do
    want=$(sed -n "s/^sha256 \([0-9a-f]*\) $f\$/\1/p" "$manifest")
    [ -n "$want" ] || { echo "vendor: $manifest records no sha256 for $f" >&2; exit 1; }
    got=$(sha256sum "$dst/$f" | cut -d' ' -f1)
    [ "$got" = "$want" ] || { echo "vendor: $dst/$f has sha256 $got, $manifest records $want" >&2; exit 1; }
  done
}

mode=fetch
version=""
case "${1:-}" in
  --check) check_files; echo "vendor: $dst matches $manifest (uplot $(field version))"; exit 0 ;;
  --update) mode=update; version=${2:?"usage: scripts/vendor.sh --update VERSION"} ;;
  "") version=$(field version) ;;
  *) echo "usage: scripts/vendor.sh [--check | --update VERSION]" >&2; exit 1 ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "uplot@$version" >/dev/null)
tgz="$tmp/uplot-$version.tgz"
[ -f "$tgz" ] || { echo "vendor: npm pack uplot@$version wrote no $tgz" >&2; exit 1; }
tsum=$(sha256sum "$tgz" | cut -d' ' -f1)
if [ "$mode" = fetch ]; then
  want=$(field tarball_sha256)
  [ "$tsum" = "$want" ] || { echo "vendor: uplot-$version.tgz has sha256 $tsum, $manifest records $want" >&2; exit 1; }
fi
tar -xzf "$tgz" -C "$tmp"
license=$(sed -n 's/.*"license": *"\([^"]*\)".*/\1/p' "$tmp/package/package.json")
[ "$license" = MIT ] || { echo "vendor: uplot $version is licensed '$license', not MIT: review before vendoring" >&2; exit 1; }
mkdir -p "$dst"
cp "$tmp/package/dist/uPlot.iife.min.js" "$tmp/package/dist/uPlot.min.css" "$tmp/package/LICENSE" "$dst/"
if [ "$mode" = update ]; then
  {
    echo "# uPlot vendored by scripts/vendor.sh from the npm registry; do not edit by hand"
    echo "name uplot"
    echo "version $version"
    echo "license $license"
    echo "source https://registry.npmjs.org/uplot/-/uplot-$version.tgz"
    echo "tarball_sha256 $tsum"
    for f in $files; do echo "sha256 $(sha256sum "$dst/$f" | cut -d' ' -f1) $f"; done
  } >"$manifest"
fi
check_files
echo "vendor: uplot $version in $dst ($(wc -c <"$dst/uPlot.iife.min.js") bytes of JS), checksums verified"
