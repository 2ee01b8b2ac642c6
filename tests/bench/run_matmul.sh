#!/bin/sh
# Runs the matmul benchmark through dlua and directly through cblas_sgemm, 1 and 2 threads,
# interleaved so machine noise hits both alike; then the rate of each sgemm path
# (tests/bench/sgemm_kernels.c: dlua's own AVX-512 and AVX2 kernels against OpenBLAS's, one
# thread). Needs build/ (cmake --build build).
set -eu
cd "$(dirname "$0")/../.."
tests/bench/machine.sh                 # where this ran: CPU model, SIMD flags, cores, load, build
cc -O2 -o build/sgemm_direct tests/bench/sgemm_direct.c -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas
for t in 1 2; do
  OPENBLAS_NUM_THREADS=$t build/sgemm_direct "$t" 1 5
  build/dlua tests/bench/matmul.lua "$t" 1 5
done
cc -O2 -Iengine -o build/sgemm_kernels tests/bench/sgemm_kernels.c build/libdlcore.a \
  -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas -lm -lpthread
build/sgemm_kernels 7
# and, on an AVX-512 CPU, against OpenBLAS's AVX-512 kernels whatever the environment forces
if grep -qw avx512f /proc/cpuinfo; then OPENBLAS_CORETYPE=SkylakeX build/sgemm_kernels 7 | grep '"blas'; fi
