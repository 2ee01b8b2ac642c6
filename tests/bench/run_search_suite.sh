#!/bin/sh
# The search benchmark suite (issue 35 item 7; docs/benchmarks.md "Search: the benchmark suite"):
# the Optuna side (tests/bench/search_suite_optuna.py, every applicable sampler, writes
# tests/bench/results/search_suite_optuna.json) unless --dlua-only, then the dlua side
# (tests/bench/search_suite.lua, writes search_suite_dlua.json and prints the table). One process
# at a time, at nice 10. Needs build/dlua and Debian's python3-optuna for the Optuna side.
#   tests/bench/run_search_suite.sh [--dlua-only] [--seeds N] [--problems a,b]
# Optuna's results do not depend on dlua: after a change to dl.search, re-run with --dlua-only
# (and --problems for the problems it touches).
set -eu
cd "$(dirname "$0")/../.."
tests/bench/machine.sh                 # where this ran: CPU model, SIMD flags, cores, load, build
optuna=1
seeds=20
problems=
while [ $# -gt 0 ]; do
  case "$1" in
    --dlua-only) optuna=0; shift ;;
    --seeds) seeds=$2; shift 2 ;;
    --problems) problems=$2; shift 2 ;;
    *) echo "run_search_suite.sh: unknown argument $1 (--dlua-only, --seeds N, --problems a,b)" >&2; exit 2 ;;
  esac
done
if [ "$optuna" = 1 ]; then
  if [ -n "$problems" ]; then
    nice -n 10 /usr/bin/python3 tests/bench/search_suite_optuna.py --seeds "$seeds" --problems "$problems"
  else
    nice -n 10 /usr/bin/python3 tests/bench/search_suite_optuna.py --seeds "$seeds"
  fi
fi
if [ -n "$problems" ]; then
  nice -n 10 build/dlua tests/bench/search_suite.lua --seeds "$seeds" --problems "$problems"
else
  nice -n 10 build/dlua tests/bench/search_suite.lua --seeds "$seeds"
fi
