#!/bin/sh
# Seconds of training until the CNN (model B, Adam 1e-3, batch 128) first reaches a test accuracy, dlua
# next to PyTorch, interleaved per seed so both see the same machine state.
#   tests/bench/run_time_to_accuracy.sh [seeds=3] [epochs=4] [target=0.90]
#                                       (needs build/dlua and scripts/setup.sh --bench)
# Runs build/dlua tests/bench/time_to_accuracy.lua SEED EPOCHS TARGET 2 and
# ../shared/bench/torch_reference.py accuracy --seed SEED --epochs EPOCHS --threads 2 with $TORCH_ENV
# (default OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE, PyTorch's faster setting for
# model B at batch 128). Accuracy is measured after each epoch, so a time is the cum_train_s of the
# first epoch at or above the target, read by the same awk from both engines' epoch lines. The raw JSON
# lines go to build/time_to_accuracy.jsonl; the table is printed at the end (ratio = dlua / PyTorch).
set -eu
cd "$(dirname "$0")/../.."
seeds=${1:-3}
epochs=${2:-4}
target=${3:-0.90}
ref=../shared/bench/torch_reference.py
py=/usr/bin/python3
torch_env=${TORCH_ENV:-OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE}
log=build/time_to_accuracy.jsonl
: >"$log"
# seconds to target from epoch lines on stdin: the first cum_train_s with test_acc >= target, else "-"
first() {
  awk -v t="$target" '/"bench": *"epoch"/ {
      match($0, /"cum_train_s": *[0-9.]+/); s = substr($0, RSTART, RLENGTH); sub(/.*: */, "", s)
      match($0, /"test_acc": *[0-9.]+/); a = substr($0, RSTART, RLENGTH); sub(/.*: */, "", a)
      if (!done && a + 0 >= t + 0) { print s; done = 1 } }
    END { if (!done) print "-"; }'
}
final_acc() { sed -n 's/.*"test_acc": *\([0-9.]*\).*/\1/p' | tail -1; }
rows=""
for s in $(seq 0 $((seeds - 1))); do
  d=$(build/dlua tests/bench/time_to_accuracy.lua "$s" "$epochs" "$target" 2 | tee -a "$log")
  p=$(env $torch_env $py $ref accuracy --seed "$s" --epochs "$epochs" --threads 2 2>/dev/null | tee -a "$log")
  ds=$(echo "$d" | first); ps=$(echo "$p" | first)
  ratio=$(awk -v a="$ds" -v b="$ps" 'BEGIN { if (a == "-" || b == "-") print "-"; else printf "%.2f", a / b }')
  line="$s $ds $ps $ratio $(echo "$d" | final_acc) $(echo "$p" | final_acc)"
  echo "# seed $s done: $line"
  rows="$rows$line
"
done
echo "target $target, $epochs epochs, PyTorch with: $torch_env"
echo "seed dlua_s torch_s dlua/torch dlua_final_acc torch_final_acc"
printf '%s' "$rows"
# the median over seeds of each column that has a time (seeds that never reached the target are left out)
printf '%s' "$rows" | awk '
  function med(v, n,   i, j, x) { if (n == 0) return "-"; for (i = 2; i <= n; i++) { x = v[i]
      for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
  $2 != "-" { d[++nd] = $2 } $3 != "-" { p[++np] = $3 } $4 != "-" { r[++nr] = $4 }
  END { print "median", med(d, nd), med(p, np), med(r, nr) }'
