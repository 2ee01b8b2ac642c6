#!/bin/sh
# Seconds of training until the CNN (model B, Adam 1e-3, batch 128) first reaches a test accuracy, dlua
# next to PyTorch, interleaved per seed so both see the same machine state.
#   tests/bench/run_time_to_accuracy.sh [seeds=3] [epochs=4] [target=0.90]
#                                       (needs build/dlua and scripts/setup.sh --bench)
# Runs build/dlua tests/bench/time_to_accuracy.lua SEED EPOCHS TARGET 2, then
# ../shared/bench/torch_reference.py accuracy --seed SEED --epochs EPOCHS --threads 2 under each of PyTorch's
# two thread settings ($TORCH_ENVS, ';'-separated; default OMP 2 + OpenBLAS 1, and OMP 2 + OpenBLAS 2
# passive, as run_training.sh) and keeps, per seed, the setting that reached the target sooner (or, if
# neither did, trained faster): PyTorch's best, as in the throughput benchmarks. Both settings give the
# same accuracies (the products do not change with the thread count), so only the time differs. Accuracy is
# measured after each epoch, so a time is the cum_train_s of the first epoch at or above the target,
# read by the same awk from both engines' epoch lines. When dlua reaches the target and PyTorch does not,
# the ratio is "<" dlua's time over PyTorch's whole training time (an upper bound), and the median counts
# that bound. The raw JSON lines go to build/time_to_accuracy.jsonl; the table is printed at the end.
set -eu
cd "$(dirname "$0")/../.."
tests/bench/machine.sh                 # where this ran: CPU model, SIMD flags, cores, load, build
seeds=${1:-3}
epochs=${2:-4}
target=${3:-0.90}
ref=../shared/bench/torch_reference.py
py=/usr/bin/python3
torch_envs=${TORCH_ENVS:-OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE}
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
total() { sed -n 's/.*"cum_train_s": *\([0-9.]*\).*/\1/p' | tail -1; }
rows=""
for s in $(seq 0 $((seeds - 1))); do
  d=$(build/dlua tests/bench/time_to_accuracy.lua "$s" "$epochs" "$target" 2 | tee -a "$log")
  ps=""; pt=""; p=""; pe=""
  old_ifs=$IFS; IFS=';'; set -f
  for e in $torch_envs; do
    IFS=$old_ifs
    o=$(env $e $py $ref accuracy --seed "$s" --epochs "$epochs" --threads 2 2>/dev/null | tee -a "$log")
    os=$(echo "$o" | first); ot=$(echo "$o" | total)
    echo "# seed $s PyTorch with $e: to target $os, trained $ot s"
    better=$(awk -v a="$os" -v at="$ot" -v b="$ps" -v bt="$pt" 'BEGIN {
      if (b == "") print 1; else if (a != "-" && (b == "-" || a + 0 < b + 0)) print 1;
      else if (a == "-" && b == "-" && at + 0 < bt + 0) print 1; else print 0 }')
    if [ "$better" = 1 ]; then ps=$os; pt=$ot; p=$o; pe=$e; fi
    IFS=';'
  done
  IFS=$old_ifs; set +f
  ds=$(echo "$d" | first)
  ratio=$(awk -v a="$ds" -v b="$ps" -v bt="$pt" 'BEGIN { if (a == "-") print "-"; else if (b == "-") printf "<%.2f", a / bt;
    else printf "%.2f", a / b }')
  line="$s $ds $ps $ratio $(echo "$d" | final_acc) $(echo "$p" | final_acc) $(echo "$pe" | tr ' ' ',')"
  echo "# seed $s done: $line"
  rows="$rows$line
"
done
echo "target $target, $epochs epochs, PyTorch's faster of: $torch_envs"
echo "seed dlua_s torch_s dlua/torch dlua_final_acc torch_final_acc torch_setting"
printf '%s' "$rows"
# the median over seeds of each column that has a time (a seed that never reached the target is left out
# of its engine's column; a ratio "<x" counts as x)
printf '%s' "$rows" | awk '
  function med(v, n,   i, j, x) { if (n == 0) return "-"; for (i = 2; i <= n; i++) { x = v[i]
      for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
  $2 != "-" { d[++nd] = $2 } $3 != "-" { p[++np] = $3 } $4 != "-" { x = $4; sub(/^</, "", x); r[++nr] = x + 0 }
  END { print "median", med(d, nd), med(p, np), med(r, nr) }'
