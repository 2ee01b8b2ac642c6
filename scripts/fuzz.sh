#!/bin/sh
# Runs dlua's fuzzers (tests/fuzz; what and why: docs/reliability.md): the libFuzzer
# harnesses of the file readers (checkpoint, idx, idx_gz, csv, cache, tar, npy, npz, png, jpeg; clang,
# -fsanitize=fuzzer,address,undefined) and the Lua API fuzzer (tests/fuzz/api_fuzz.lua under
# the ASan+UBSan build of dlua).
#
#   scripts/fuzz.sh                  each harness 60 s, the API fuzzer 100000 calls
#   scripts/fuzz.sh 600              each harness 600 s
#   scripts/fuzz.sh runs=1000000     each harness 1,000,000 executions
#   scripts/fuzz.sh --ci             the CI budget (scripts/test.sh): each harness a fixed
#                                    number of runs with -seed=1 from the committed seeds only,
#                                    the API fuzzer 20000 calls with seed 1 (a call running
#                                    Lua for 2 CPU seconds is a hang; 5 otherwise)
#   options: --only LIST     harnesses to run, comma-separated (checkpoint,idx,idx_gz,csv,cache,tar,npy,npz,png,jpeg,api)
#            --api N         API fuzzer calls (0 skips it)
#            --seed N        libFuzzer and API fuzzer seed (default 1)
#            --jobs N        harnesses at once (default: the number of cores)
#            --keep-going    long runs past known findings: a build (build-fuzz-recover/,
#                            -DDLUA_FUZZ_RECOVER=ON) where undefined behaviour is reported once
#                            per source line and fuzzing goes on; each distinct report is a
#                            finding; memory errors, leaks and timeouts still stop the harness
#            --seeds         regenerate the committed seed corpora (tests/fuzz/corpus: gen_seeds.c, and
#                            gen_npy_seeds.py with /usr/bin/python3 and numpy, gen_image_seeds.py with PIL) and exit
# Builds build-fuzz/ (CC=clang, -DDLUA_FUZZ=ON) and build-san/ when missing or stale.
# Crash, leak, timeout and out-of-memory inputs land in build-fuzz/findings/<harness>/; the
# working corpus is build-fuzz/corpus/<harness> (the committed seeds are only read).
# Exit status: 0 with no finding, 1 with findings, 2 on a usage error.
set -eu
cd "$(dirname "$0")/.."
root=$PWD

budget="time=60" api=100000 call_limit=5 seed=1 only="checkpoint,csv,idx,idx_gz,cache,tar,npy,npz,png,jpeg,api" ci=0 keep=0
jobs=$(nproc 2>/dev/null || echo 2)
while [ $# -gt 0 ]; do
  case "$1" in
    --ci) ci=1; api=20000; call_limit=2 ;;
    --only) only=$2; shift ;;
    --api) api=$2; shift ;;
    --seed) seed=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --keep-going) keep=1 ;;
    --seeds) seeds_only=1 ;;
    runs=[0-9]*) budget="runs=${1#runs=}" ;;
    [0-9]*) budget="time=$1" ;;
    *) echo "fuzz.sh: unknown argument $1 (see the header of scripts/fuzz.sh)" >&2; exit 2 ;;
  esac
  shift
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlua-fuzz.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
t0=$(date +%s)
fdir=build-fuzz recover=OFF
[ "$keep" = 1 ] && fdir=build-fuzz-recover recover=ON
echo "== fuzz build $fdir (clang, libFuzzer + ASan + UBSan)"
# clang's warnings on the core are not findings (CMakeLists.txt, fuzzing section): shown on failure only
{ CC=clang cmake -S . -B $fdir -DCMAKE_BUILD_TYPE=Debug -DDLUA_FUZZ=ON -DDLUA_FUZZ_RECOVER=$recover &&
  cmake --build $fdir -j"$jobs" --target fuzzers; } >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 2; }
echo "   ($(( $(date +%s) - t0 )) s)"

if [ "${seeds_only:-0}" = 1 ]; then
  rm -rf tests/fuzz/corpus
  $fdir/fuzz_gen_seeds tests/fuzz/corpus
  /usr/bin/python3 tests/fuzz/gen_npy_seeds.py tests/fuzz/corpus
  /usr/bin/python3 tests/fuzz/gen_image_seeds.py tests/fuzz/corpus
  echo "seeds written: $(find tests/fuzz/corpus -type f | wc -l) files under tests/fuzz/corpus"
  exit 0
fi

# CI: a fixed number of executions per harness, sized for ~20-25 s each on a 2-core machine
ci_runs() {
  case "$1" in
    checkpoint) echo 120000 ;;
    idx) echo 150000 ;;
    idx_gz) echo 120000 ;;
    csv) echo 150000 ;;
    cache) echo 500000 ;;
    tar) echo 500000 ;;
    npy) echo 300000 ;;
    npz) echo 300000 ;;
    png) echo 300000 ;;
    jpeg) echo 250000 ;;
  esac
}
max_len() { [ "$1" = checkpoint ] && echo 16384 || echo 4096; }
dict() { case "$1" in idx_gz) echo idx ;; *) echo "$1" ;; esac; }

mkdir -p build-fuzz/findings build-fuzz/logs
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
[ "$keep" = 1 ] && export UBSAN_OPTIONS=print_stacktrace=0:halt_on_error=0

# run_harness NAME: one libFuzzer run; writes build-fuzz/logs/NAME.log and NAME.result
run_harness() {
  h=$1
  art=build-fuzz/findings/$h
  mkdir -p "$art"
  if [ "$ci" = 1 ]; then
    work=$tmp/corpus-$h; rm -rf "$work"; mkdir -p "$work"
    limit="-runs=$(ci_runs "$h")"
  else
    work=build-fuzz/corpus/$h; mkdir -p "$work"
    case "$budget" in
      runs=*) limit="-runs=${budget#runs=}" ;;
      time=*) limit="-max_total_time=${budget#time=}" ;;
    esac
  fi
  # the committed reproducers of past findings run first, as part of the corpus: a regression
  crashes=""
  [ -d "tests/fuzz/crashes/$h" ] && crashes="tests/fuzz/crashes/$h"
  before=$(find "$art" -type f | wc -l)
  start=$(date +%s)
  # shellcheck disable=SC2086  # $limit and $crashes are word lists
  TMPDIR=$tmp $fdir/fuzz_$h $limit -seed="$seed" -max_len="$(max_len "$h")" \
    -dict="tests/fuzz/dict/$(dict "$h").dict" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 \
    -print_final_stats=1 -artifact_prefix="$art/" "$work" "tests/fuzz/corpus/$h" $crashes \
    >"build-fuzz/logs/$h.log" 2>&1 && rc=0 || rc=$?
  secs=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "build-fuzz/logs/$h.log" | tail -1)
  [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "build-fuzz/logs/$h.log" | tail -1 | tr -d '#')
  found=$(( $(find "$art" -type f | wc -l) - before ))
  # recover mode: each distinct undefined-behaviour site reported is a finding too
  if [ "$keep" = 1 ]; then
    ub=$(grep -oE '[^ ]+\.c:[0-9]+:[0-9]+: runtime error' "build-fuzz/logs/$h.log" | sort -u | wc -l)
    found=$((found + ub))
  fi
  if [ "$rc" != 0 ] && [ "$found" = 0 ]; then found=1; fi
  echo "$h $execs $secs $found $rc" >"build-fuzz/logs/$h.result"
}

harnesses="" run_api=0
for h in $(echo "$only" | tr , ' '); do
  case "$h" in
    checkpoint|idx|idx_gz|csv|cache|tar|npy|npz|png|jpeg) harnesses="$harnesses $h" ;;
    api) run_api=1 ;;
    *) echo "fuzz.sh: no harness $h" >&2; exit 2 ;;
  esac
done

t0=$(date +%s)
echo "== libFuzzer harnesses:$harnesses ($([ "$ci" = 1 ] && echo "CI budget" || echo "$budget"), $jobs at once)"
n=0
for h in $harnesses; do
  rm -f "build-fuzz/logs/$h.result"
  run_harness "$h" &
  n=$((n + 1))
  if [ "$n" -ge "$jobs" ]; then wait; n=0; fi
done
wait

echo "   ($(( $(date +%s) - t0 )) s)"
status=0
for h in $harnesses; do
  read -r name execs secs found rc <"build-fuzz/logs/$h.result"
  if [ "$found" = 0 ]; then
    printf '%-11s %10s executions %5s s  ok\n' "$name" "$execs" "$secs"
  else
    printf '%-11s %10s executions %5s s  FINDINGS: %s (exit %s; build-fuzz/findings/%s, log build-fuzz/logs/%s.log)\n' \
      "$name" "$execs" "$secs" "$found" "$rc" "$h" "$h"
    { grep -E 'ERROR: |SUMMARY: |broken promise' "build-fuzz/logs/$h.log" | head -3
      grep -oE '[^ ]+\.c:[0-9]+:[0-9]+: runtime error: [a-z -]+' "build-fuzz/logs/$h.log" | sort -u; } | sed 's/^/    /' || true
    status=1
  fi
done

if [ "$run_api" = 1 ] && [ "$api" -gt 0 ]; then
  echo "== Lua API fuzzer ($api calls, seed $seed, ASan+UBSan build)"
  { cmake -S . -B build-san -DCMAKE_BUILD_TYPE=Debug -DDLUA_SANITIZE=ON &&
    cmake --build build-san -j"$jobs" --target dlua; } >"$tmp/build-san.log" 2>&1 || { cat "$tmp/build-san.log"; exit 2; }
  t0=$(date +%s)
  # the detectors first: two synthetic targets (one dies on SIGABRT, one spins) must come back
  # as 4 findings pinned on their calls, or the run below could not find anything
  TMPDIR=$tmp build-san/dlua tests/fuzz/api_fuzz.lua --selftest --calls 4 --call-limit 1 \
    --worker-exe "$root/build-san/dlua" --scratch "$tmp/selftest" >"$tmp/selftest.out" 2>&1 || true
  if grep -q ' 4 findings' "$tmp/selftest.out" && [ "$(grep -c 'call: selftest.abort(' "$tmp/selftest.out")" = 2 ] &&
     [ "$(grep -c 'call: selftest.spin(' "$tmp/selftest.out")" = 2 ]; then
    echo "api_fuzz self-test: a crash and a hang are each pinned on their call: ok"
  else
    echo "api_fuzz self-test FAILED: the fuzzer does not report a crash and a hang per call"
    sed 's/^/    /' "$tmp/selftest.out" | head -20
    status=1
  fi
  # the committed reproducers of past API findings first (tests/fuzz/crashes/api): each must
  # finish within 20 s, exit 0 and print no sanitizer report
  for f in tests/fuzz/crashes/api/*.lua; do
    [ -f "$f" ] || continue
    (cd "$tmp" && ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 timeout -s KILL 20 "$root/build-san/dlua" "$root/$f") \
      >"$tmp/repro.out" 2>&1 && rc=0 || rc=$?
    if [ "$rc" != 0 ] || grep -qE 'Sanitizer|runtime error:' "$tmp/repro.out"; then
      echo "regression $f: $([ "$rc" = 137 ] && echo "hangs (killed after 20 s)" || echo "fails (exit $rc)")"
      grep -m2 -E 'runtime error:|ERROR: ' "$tmp/repro.out" | sed 's/^/    /' || true
      status=1
    else
      echo "regression $f: ok"
    fi
  done
  echo "   (self-test and reproducers: $(( $(date +%s) - t0 )) s)"
  start=$(date +%s)
  ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:allocator_may_return_null=1:max_allocation_size_mb=2048 \
  TMPDIR=$tmp build-san/dlua tests/fuzz/api_fuzz.lua --calls "$api" --seed "$seed" --jobs "$jobs" --call-limit "$call_limit" \
    --worker-exe "$root/build-san/dlua" --scratch "$tmp/api" >build-fuzz/logs/api.log && rc=0 || rc=$?
  cat build-fuzz/logs/api.log
  echo "api_fuzz: $(( $(date +%s) - start )) s"
  [ "$rc" = 0 ] || status=1
fi
exit $status
