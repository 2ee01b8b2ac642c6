#!/bin/sh
# tests/bench/run_dist_scaling.sh [rounds=3] [steps=60] -- 1 rank vs 2 ranks of
# tests/bench/dist_scaling.lua, interleaved rounds: 1 rank x 1 thread, 1 rank x 2
# threads, 2 ranks x 1 thread (global batch 256 throughout). Prints the JSON
# lines; docs/benchmarks.md has the table. Needs a DLUA_WITH_MPI build in build/
# (or DLUA_EXE) and mpirun.
set -eu
cd "$(dirname "$0")/../.."
tests/bench/machine.sh                 # where this ran: CPU model, SIMD flags, cores, load, build
exe=${DLUA_EXE:-build/dlua}
rounds=${1:-3}
steps=${2:-60}
flags="--oversubscribe"
[ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
echo "# cores: $(nproc); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
r=1
while [ "$r" -le "$rounds" ]; do
  "$exe" tests/bench/dist_scaling.lua "$steps" 1 256
  "$exe" tests/bench/dist_scaling.lua "$steps" 2 256
  OMPI_MCA_mpi_yield_when_idle=1 mpirun $flags -np 2 "$exe" tests/bench/dist_scaling.lua "$steps" 1 256
  r=$((r + 1))
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
