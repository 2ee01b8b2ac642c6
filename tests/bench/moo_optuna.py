#!/usr/bin/python3
"""tests/bench/moo_optuna.py -- the Optuna side of tests/bench/moo_bench.lua, and
the hypervolumes of both sides.

  /usr/bin/python3 tests/bench/moo_optuna.py run SEEDS BUDGET [PROBLEM] > optuna.json
      Optuna 3.1's multi-objective TPE (MOTPE: TPESampler on several objectives,
      default settings) and NSGA-II (default population 50) on ZDT1, ZDT2 (6
      variables, 2 objectives) and DTLZ2 (6 variables, 3 objectives), seeds
      0 .. SEEDS-1, BUDGET trials each: {sampler: {problem: [[values of trial
      1], ...] per seed]}} (PROBLEM: that one alone, for parallel processes).
  /usr/bin/python3 tests/bench/moo_optuna.py table FILE.json ...    (this script's or moo_bench.lua's)
      Hypervolume (optuna._hypervolume.WFG, every objective minimised) of the
      first 50 and 100 trials of each seed, reference point 1.1 per objective
      (the problems' fronts lie in [0, 1]^k), median and 10th percentile over
      seeds, one markdown row per (problem, method).
"""
import json
import os
import sys
import warnings

import numpy as np
import optuna
from optuna._hypervolume import WFG

warnings.filterwarnings("ignore")
optuna.logging.set_verbosity(optuna.logging.WARNING)

D = 6


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import search_suite_problems as SP  # noqa: E402  (the one Python definition of the problems)


def zdt1(x):
    return SP.zdt(x, False)


def zdt2(x):
    return SP.zdt(x, True)


dtlz2 = SP.dtlz2

PROBLEMS = {"ZDT1": (zdt1, 2), "ZDT2": (zdt2, 2), "DTLZ2": (dtlz2, 3)}


def run(seeds, budget, only=None):
    out = {}
    for sname in ["MOTPE", "NSGA-II"]:
        out[sname] = {}
        for pname, (f, k) in PROBLEMS.items():
            if only and pname != only:
                continue
            per_seed = []
            for seed in range(seeds):
                sampler = (optuna.samplers.TPESampler(seed=seed) if sname == "MOTPE"
                           else optuna.samplers.NSGAIISampler(seed=seed))
                study = optuna.create_study(directions=["minimize"] * k, sampler=sampler)
                study.optimize(lambda t: f([t.suggest_float("x%d" % (i + 1), 0, 1) for i in range(D)]),
                               n_trials=budget)
                per_seed.append([list(t.values) for t in study.trials])
            out[sname][pname] = per_seed
    json.dump(out, sys.stdout)


def hv(values, k):
    ref = np.full(k, 1.1)
    pts = np.array([v for v in values if all(a < 1.1 for a in v)], dtype=float)
    if len(pts) == 0:
        return 0.0
    return float(WFG().compute(pts, ref))


def table(files):
    merged = {}
    for fn in files:
        with open(fn) as fh:
            text = fh.read()
        if text.startswith('{"') and "\n{" not in text.strip():
            for method, probs in json.loads(text).items():
                merged.setdefault(method, {}).update(probs)
        else:                                  # moo_bench.lua: one JSON line per seed
            for line in text.splitlines():
                if line.strip():
                    r = json.loads(line)
                    merged.setdefault(r["method"], {}).setdefault(r["problem"], []).append(r["values"])
    print("| problem | method | seeds | HV@50 median | HV@50 p10 | HV@100 median | HV@100 p10 |")
    print("|---|---|---|---|---|---|---|")
    for pname, (_, k) in PROBLEMS.items():
        for method in merged:
            runs = merged[method].get(pname)
            if not runs:
                continue
            cells = []
            for b in (50, 100):
                hvs = [hv(r[:b], k) for r in runs if len(r) >= b]
                cells += ["%.4f" % np.median(hvs), "%.4f" % np.percentile(hvs, 10)] if hvs else ["-", "-"]
            print("| %s | %s | %d | %s |" % (pname, method, len(runs), " | ".join(cells)))


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
    else:
        table(sys.argv[2:])
