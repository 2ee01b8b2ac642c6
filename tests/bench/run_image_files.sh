#!/bin/sh
# Image-file input throughput, dlua against torchvision on the same files and transforms
# (issue 32): writes the folders once ($TMPDIR/dlua-bench-image-files), then runs both
# sides [windows] times each, interleaved per worker count inside each side. Prints the CPU.
#   tests/bench/run_image_files.sh [windows]      (needs scripts/setup.sh --bench)
set -eu
cd "$(dirname "$0")/../.."
w=${1:-5}
dir=${TMPDIR:-/tmp}/dlua-bench-image-files
[ -d "$dir/jpeg" ] || /usr/bin/python3 tests/bench/image_files_make.py "$dir"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
${DLUA:-build/dlua} tests/bench/image_files.lua "$dir" "$w"
/usr/bin/python3 tests/bench/image_files_torch.py "$dir" "$w"
