#!/bin/sh
# Peak resident memory of ResNet-18 training, dlua next to PyTorch on the same run: the same model,
# data, optimizer and steps (tests/bench/resnet18.lua and resnet18_torch.py, each given window
# seconds 0 and min_steps steps/2, so a warm-up window and one timed window of steps/2 steps each).
#   tests/bench/run_memory.sh [steps=12] [batches="64 128"] [threads="1 2"]
#                                   (needs build/dlua, or DLUA=path to compare another build)
# Peak = the process's maximum resident set size (/usr/bin/time's %M, the kernel's VmHWM), whole
# process: interpreter, libraries, the Fashion-MNIST tensors both scripts keep (the 28x28 float
# copy and the 32x32 padded one), the model, the optimizer's state and the step's tensors.
# The "import" lines are each process's baseline: `require "dlua"` against `import torch`.
# Prints one line per measurement: batch, threads, engine, peak MiB (and ex/s, which on a shared
# machine and with so few steps is only a sanity check: tests/bench/run_training.sh times).
set -eu
cd "$(dirname "$0")/../.."
tests/bench/machine.sh                 # where this ran: CPU model, SIMD flags, cores, load, build
steps=${1:-12}
batches=${2:-64 128}
threads=${3:-1 2}
dlua=${DLUA:-build/dlua}
py=/usr/bin/python3
half=$((steps / 2))
out=$(mktemp)
trap 'rm -f "$out"' EXIT
peak() { echo $(( $(cat "$out") / 1024 )); }
rate() { sed -n 's/.*"ex_per_s_median": *\([0-9.]*\).*/\1/p'; }
echo 'return require "dlua"' > "$out.lua"
/usr/bin/time -f %M -o "$out" "$dlua" "$out.lua" >/dev/null
rm -f "$out.lua"
echo "import - dlua $(peak)"
/usr/bin/time -f %M -o "$out" $py -c 'import torch, torch.nn' >/dev/null
echo "import - torch-$($py -c 'import torch; print(torch.__version__)') $(peak)"
for b in $batches; do
  for t in $threads; do
    r=$(/usr/bin/time -f %M -o "$out" "$dlua" tests/bench/resnet18.lua "$b" "$t" 0 1 "$half" | rate)
    echo "$b $t dlua $(peak) ($r ex/s)"
    r=$(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=1 /usr/bin/time -f %M -o "$out" \
      $py tests/bench/resnet18_torch.py "$b" "$t" 0 1 "$half" 2>/dev/null | rate)
    echo "$b $t torch-omp$t-blas1 $(peak) ($r ex/s)"
  done
done
