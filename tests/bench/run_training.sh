#!/bin/sh
# Training throughput of dlua next to PyTorch's best thread setting, interleaved so both see
# the same machine state (these 2-core machines are shared and noisy: compare within a round).
#   tests/bench/run_training.sh [rounds=3] [models="mlp cnn resnet18"]
#                                                 (needs build/dlua and scripts/setup.sh --bench)
# Prints one line per measurement: round, model, batch, engine/setting, ex/s median.
# ResNet-18 (tests/bench/resnet18.lua, resnet18_torch.py) costs about 7 minutes a round on 2 cores;
# RESNET18_WINDOWS="seconds windows min_steps" (default "10 3 5") shortens it for a smoke test.
# EMULATE=avx2 runs both engines as on a CPU with AVX2 and FMA but no AVX-512 (the machines many
# users have): dlua on its AVX2 kernels (DLUA_GEMM=avx2, DLUA_CONV_SIMD=avx2), PyTorch with ATen
# and oneDNN capped at AVX2 (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA), OpenBLAS on its Haswell
# kernels and glibc's string functions without AVX-512 (GLIBC_TUNABLES) for both.
set -eu
cd "$(dirname "$0")/../.."
tests/bench/machine.sh                 # where this ran: CPU model, SIMD flags, cores, load, build
case "${EMULATE:-}" in
  "") dl_env="" pt_env="" ;;
  avx2)
    common="OPENBLAS_CORETYPE=Haswell GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ"
    dl_env="$common DLUA_GEMM=avx2 DLUA_CONV_SIMD=avx2"
    pt_env="$common ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2"
    echo "# emulating an AVX2 CPU: dlua with $dl_env; PyTorch with $pt_env" ;;
  *) echo "EMULATE=$EMULATE: no such emulation (valid: avx2)" >&2; exit 2 ;;
esac
dlua() { env $dl_env build/dlua "$@"; }
rounds=${1:-3}
models=${2:-mlp cnn resnet18}
has() { case " $models " in *" $1 "*) return 0 ;; esac; return 1; }
ref=../shared/bench/torch_reference.py
py=/usr/bin/python3
field() { sed -n 's/.*"ex_per_s_median": *\([0-9.]*\).*/\1/p'; }
rn=${RESNET18_WINDOWS:-10 3 5}     # window seconds, windows, min steps per window (smoke: "0 1 1")
if has resnet18; then
  echo "# ResNet18: 3325458432 FLOP per example and step (2 x forward MACs x 3, the reference's count):" \
    "GFLOP/s = ex/s x 3.325"
fi
for r in $(seq 1 "$rounds"); do
  if has mlp; then
  for b in 256; do
    echo "$r MLP $b dlua $(dlua tests/bench/mlp.lua $b 2 2 5 | field)"
    echo "$r MLP $b torch-default $(env $pt_env $py $ref throughput --threads 0 --only A 2>/dev/null | grep "\"batch\": $b," | field)"
  done
  fi
  if has cnn; then
  echo "$r CNN 64 dlua $(dlua tests/bench/cnn.lua 64 2 2 5 | field)"
  echo "$r CNN 256 dlua $(dlua tests/bench/cnn.lua 256 2 2 5 | field)"
  OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1 env $pt_env $py $ref throughput --threads 2 --only B 2>/dev/null |
    while read -r line; do
      b=$(echo "$line" | sed -n 's/.*"batch": *\([0-9]*\).*/\1/p')
      echo "$r CNN $b torch-omp2-blas1 $(echo "$line" | field)"
    done
  OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE env $pt_env $py $ref throughput --threads 2 --only B 2>/dev/null |
    while read -r line; do
      b=$(echo "$line" | sed -n 's/.*"batch": *\([0-9]*\).*/\1/p')
      echo "$r CNN $b torch-omp2-blas2-passive $(echo "$line" | field)"
    done
  fi
  if has resnet18; then
    for b in 64 128; do
      echo "$r ResNet18 $b dlua $(dlua tests/bench/resnet18.lua $b 2 $rn | field)"
      echo "$r ResNet18 $b torch-omp2-blas1 $(OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1 \
        env $pt_env $py tests/bench/resnet18_torch.py $b 2 $rn 2>/dev/null | field)"
      echo "$r ResNet18 $b torch-omp2-blas2-passive $(OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE \
        env $pt_env $py tests/bench/resnet18_torch.py $b 2 $rn 2>/dev/null | field)"
    done
  fi
done
