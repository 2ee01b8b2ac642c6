#!/bin/sh
# Installs, from Debian 12 packages, everything dlua needs to build, test and run its
# examples (Open MPI: multi-process training and its mpirun -np 2 tests; chromium: the
# headless-browser tests of the study report, tests/browser/, which the busted suite runs;
# Node.js and puppeteer-core for them, from npm ci in tests/browser; clang and
# libclang-rt-14-dev: the libFuzzer harnesses of tests/fuzz, whose runtime,
# libclang_rt.fuzzer, that package ships; tmux: the progress line checked in a real
# terminal, tests/lua/progress_spec.lua; luarocks and man-db: the luarocks make and man -l
# of tests/lua/install_spec.lua; python3-torch and python3-torchvision: the reference values of
# tests/lua/image_transforms_spec.lua and the torch twins of tests/lua/numerics_spec.lua,
# losses_spec.lua and the differential specs (differential_spec.lua,
# differential_modules_spec.lua, differential_optim_spec.lua), with python3-mpmath through sympy; protobuf-c-compiler, libprotobuf-c-dev and
# python3-onnx: the ONNX writer of dl.onnx.export, compiled from the official onnx.proto that
# python3-onnx ships, whose checker tests/lua/onnx_spec.lua runs; onnxruntime-node from npm ci
# in tests/onnx runs the exported models there; unzip: the source rock of tests/lua/install_spec.lua). Idempotent: packages already present are left alone.
# Run as root.
#   scripts/setup.sh          build + test + run dependencies
#   scripts/setup.sh --bench  also optuna and scipy for the side-by-side benchmarks
set -eu

pkgs="build-essential cmake pkg-config lua5.4 liblua5.4-dev libopenblas-dev zlib1g-dev
      lua-filesystem lua-busted dataset-fashion-mnist python3-numpy openmpi-bin libopenmpi-dev
      chromium clang libclang-rt-14-dev tmux luarocks man-db
      libturbojpeg0-dev libspng-dev python3-pil python3-torch python3-torchvision
      protobuf-c-compiler libprotobuf-c-dev python3-onnx unzip"
case "${1:-}" in
  --bench) pkgs="$pkgs python3-optuna python3-scipy" ;;
esac

missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing packages:$missing (run as root to install them)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $missing
fi

# the fuzz build needs clang to link libFuzzer with the sanitizers: check that it does
tmp=$(mktemp -d)
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\nint LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$tmp/f.c"
if ! clang -fsanitize=fuzzer,address,undefined "$tmp/f.c" -o "$tmp/f" 2>"$tmp/err"; then
  echo "setup: clang cannot link a libFuzzer harness:" >&2
  cat "$tmp/err" >&2
  rm -rf "$tmp"
  exit 1
fi
rm -rf "$tmp"

# the browser test of the interactive report (tests/browser/report.test.js): puppeteer-core,
# pinned by tests/browser/package-lock.json, drives the chromium above; needs Node.js >= 18
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then echo "setup: Node.js (npm) is missing (run as root to install it)" >&2; exit 1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm
fi
(cd "$(dirname "$0")/../tests/browser" && npm ci --no-audit --no-fund --loglevel=error)

# ONNX Runtime for tests/lua/onnx_spec.lua (tests/onnx/run.js), pinned by tests/onnx/package-lock.json;
# --ignore-scripts: onnxruntime-node's install script only downloads GPU (CUDA) binaries, and
# the CPU library it needs is inside the package
(cd "$(dirname "$0")/../tests/onnx" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
