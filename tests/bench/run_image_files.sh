#!/bin/sh
# Image-file input throughput, dlua against torchvision on the same files and transforms
# (issue 32): writes the folders once ($TMPDIR/dlua-bench-image-files), then runs both
# sides [windows] times each, interleaved per worker count inside each side. Prints the machine first.
#   tests/bench/run_image_files.sh [windows]      (needs scripts/setup.sh --bench)
set -eu
cd "$(dirname "$0")/../.."
w=${1:-5}
dir=${TMPDIR:-/tmp}/dlua-bench-image-files
[ -d "$dir/jpeg" ] || /usr/bin/python3 tests/bench/image_files_make.py "$dir"
tests/bench/machine.sh
${DLUA:-build/dlua} tests/bench/image_files.lua "$dir" "$w"
/usr/bin/python3 tests/bench/image_files_torch.py "$dir" "$w"
