#!/bin/sh
# Prints one line saying where a benchmark ran, for its output and docs/benchmarks.md:
#   # machine: <CPU model> | <SIMD flags that choose kernels> | <cores> cores | load <1 5 15 min> | <date> | build <commit>
# The benchmark runners (tests/bench/run_*.sh) print it first.
model=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ //')
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | grep -xE 'avx2|fma|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16|amx_tile' | tr '\n' ' ' | sed 's/ $//')
build=$(git -C "$(dirname "$0")/../.." rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
echo "# machine: ${model:-unknown} | ${flags:-no AVX2} | $(nproc) cores | load $(cut -d' ' -f1-3 /proc/loadavg) | $(date -u '+%Y-%m-%d %H:%M') UTC | build $build"
