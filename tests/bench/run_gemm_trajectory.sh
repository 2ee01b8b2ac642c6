#!/bin/sh
# float32 training on the own kernels and on OpenBLAS against float64, after 20 and 100 steps
# (docs/benchmarks.md, "The main job"). Needs build/dlua and Fashion-MNIST.
set -eu
cd "$(dirname "$0")/../.."
tests/bench/machine.sh
out=$(mktemp -d)
for n in 20 100; do
  build/dlua tests/bench/gemm_trajectory.lua train float64 "$n" "$out/f64_$n.safetensors"
  DLUA_GEMM=avx512 build/dlua tests/bench/gemm_trajectory.lua train float32 "$n" "$out/own_$n.safetensors"
  DLUA_GEMM=blas build/dlua tests/bench/gemm_trajectory.lua train float32 "$n" "$out/blas_$n.safetensors"
  for p in own blas; do build/dlua tests/bench/gemm_trajectory.lua dist "$out/${p}_$n.safetensors" "$out/f64_$n.safetensors"; done
done
rm -rf "$out"
