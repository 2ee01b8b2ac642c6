#!/bin/sh
# Training throughput of dlua next to PyTorch's best thread setting, interleaved so both see
# the same machine state (these 2-core machines are shared and noisy: compare within a round).
#   tests/bench/run_training.sh [rounds=3]        (needs build/dlua and scripts/setup.sh --bench)
# Prints one line per measurement: round, model, batch, engine/setting, ex/s median.
set -eu
cd "$(dirname "$0")/../.."
rounds=${1:-3}
ref=../shared/bench/torch_reference.py
py=/usr/bin/python3
field() { sed -n 's/.*"ex_per_s_median": *\([0-9.]*\).*/\1/p'; }
for r in $(seq 1 "$rounds"); do
  for b in 256; do
    echo "$r MLP $b dlua $(build/dlua tests/bench/mlp.lua $b 2 2 5 | field)"
    echo "$r MLP $b torch-default $($py $ref throughput --threads 0 --only A 2>/dev/null | grep "\"batch\": $b," | field)"
  done
  echo "$r CNN 64 dlua $(build/dlua tests/bench/cnn.lua 64 2 2 5 | field)"
  echo "$r CNN 256 dlua $(build/dlua tests/bench/cnn.lua 256 2 2 5 | field)"
  OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1 $py $ref throughput --threads 2 --only B 2>/dev/null |
    while read -r line; do
      b=$(echo "$line" | sed -n 's/.*"batch": *\([0-9]*\).*/\1/p')
      echo "$r CNN $b torch-omp2-blas1 $(echo "$line" | field)"
    done
  OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE $py $ref throughput --threads 2 --only B 2>/dev/null |
    while read -r line; do
      b=$(echo "$line" | sed -n 's/.*"batch": *\([0-9]*\).*/\1/p')
      echo "$r CNN $b torch-omp2-blas2-passive $(echo "$line" | field)"
    done
done
