#!/bin/sh
# Runs the matmul benchmark through dlua and directly through cblas_sgemm, 1 and 2 threads,
# interleaved so machine noise hits both alike. Needs build/dlua.
set -eu
cd "$(dirname "$0")/../.."
tests/bench/machine.sh                 # where this ran: CPU model, SIMD flags, cores, load, build
cc -O2 -o build/sgemm_direct tests/bench/sgemm_direct.c -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas
for t in 1 2; do
  OPENBLAS_NUM_THREADS=$t build/sgemm_direct "$t" 1 5
  build/dlua tests/bench/matmul.lua "$t" 1 5
done
