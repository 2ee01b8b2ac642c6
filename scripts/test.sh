#!/bin/sh
# Builds dlua twice and runs the whole suite (ctest: C unit tests + busted specs) on each,
# then the fuzzers for a short fixed budget:
#   1. build/      Release build, -Werror
#   2. build-san/  -fsanitize=address,undefined; any report fails the run
#   3. build-fuzz/ clang, libFuzzer: each reader harness a fixed number of runs with -seed=1
#                  from the committed seeds, then the Lua API fuzzer (20000 calls, seed 1) under
#                  build-san; any crash, sanitizer report, leak or hang fails the run
#                  (scripts/fuzz.sh --ci; about 2-3 minutes on 2 cores, docs/reliability.md)
# With MPI installed (scripts/setup.sh) both builds have DLUA_WITH_MPI and the busted
# run includes the mpirun -np 2 tests of tests/lua/dist_spec.lua (required then, not
# skipped; as root they pass Open MPI's --allow-run-as-root --oversubscribe).
# Run from anywhere; needs what scripts/setup.sh installs.
set -eu
cd "$(dirname "$0")/.."
# the report's browser test (tests/browser/) must run, not skip (scripts/setup.sh installs it)
export DLUA_REQUIRE_BROWSER=1
# the ONNX Runtime half of tests/lua/onnx_spec.lua must run too (npm ci in tests/onnx, scripts/setup.sh)
export DLUA_REQUIRE_ONNXRUNTIME=1
jobs=$(nproc 2>/dev/null || echo 2)

echo "== release build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
# the release pass also runs the real Fashion-MNIST study (2 x 8 trials, a few minutes)
DLUA_FASHION_STUDY=1 ctest --test-dir build --output-on-failure

echo "== sanitizer build (address, undefined)"
cmake -S . -B build-san -DCMAKE_BUILD_TYPE=Debug -DDLUA_SANITIZE=ON >/dev/null
cmake --build build-san -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
DLUA_BUILD=build-san \
  ctest --test-dir build-san --output-on-failure

echo "== fuzzers (short seeded budget)"
scripts/fuzz.sh --ci
echo "== all tests passed"
