#!/usr/bin/python3
"""tests/bench/search_highdim_optuna.py -- the Optuna side of tests/bench/search_highdim.lua.

Optuna 3.1's CMA-ES, TPE (multivariate) and, for the batch problem, TPE
(multivariate, constant_liar) on Levy-10, Ackley-5, Rosenbrock-4 (one at a time
and in batches of 4: four trials asked, then four told), Hartmann-6 and Branin,
seeds 1..`seeds`, budgets 50 and 100. Regret: the true function at the best
trial minus the minimum (the problems are noiseless). Prints a markdown table,
median / 90th percentile per sampler and problem.

  /usr/bin/python3 tests/bench/search_highdim_optuna.py [seeds=20] [problem name | all]
"""
import os
import sys
import warnings

import numpy as np
import optuna

warnings.filterwarnings("ignore")
optuna.logging.set_verbosity(optuna.logging.ERROR)

# the one Python definition of the problems (tests/bench/search_suite_problems.py)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from search_suite_problems import ackley, hartmann6, levy, rosenbrock  # noqa: E402
import search_suite_problems as SP  # noqa: E402


def branin(v):
    return SP.branin(v[0], v[1])


def box(d, lo, hi):
    return [(lo, hi)] * d


PROBLEMS = [
    {"name": "Levy-10", "f": levy, "min": 0.0, "bounds": box(10, -10.0, 10.0)},
    {"name": "Ackley-5", "f": ackley, "min": 0.0, "bounds": box(5, -32.768, 32.768)},
    {"name": "Rosenbrock-4", "f": rosenbrock, "min": 0.0, "bounds": box(4, -5.0, 10.0)},
    {"name": "Rosenbrock-4 q4", "f": rosenbrock, "min": 0.0, "bounds": box(4, -5.0, 10.0), "batch": 4},
    {"name": "Hartmann-6", "f": hartmann6, "min": -3.32237, "bounds": box(6, 0.0, 1.0)},
    {"name": "Branin", "f": branin, "min": 0.397887, "bounds": [(-5.0, 10.0), (0.0, 15.0)]},
]
BUDGETS = [50, 100]


def sampler(kind, seed):
    if kind == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    if kind == "tpe":
        return optuna.samplers.TPESampler(multivariate=True, seed=seed)
    return optuna.samplers.TPESampler(multivariate=True, constant_liar=True, seed=seed)


def run(kind, pr, seed):
    study = optuna.create_study(sampler=sampler(kind, seed), direction="minimize")
    q = pr.get("batch", 1)
    values = []
    while len(values) < max(BUDGETS):
        trials, xs = [], []
        for _ in range(q):                    # each trial's point is fixed before the next ask (the liar
            t = study.ask()                   # sees it), and the batch is told after all q are chosen
            trials.append(t)
            xs.append([t.suggest_float("x%d" % (j + 1), lo, hi) for j, (lo, hi) in enumerate(pr["bounds"])])
        for t, x in zip(trials, xs):
            v = pr["f"](x)
            values.append(v)
            study.tell(t, v)
    return {b: min(values[:b]) - pr["min"] for b in BUDGETS}


def pct(v, p):
    return float(np.percentile(np.array(v), 100 * p))


def g3(x):
    if x == 0:
        return "0"
    if 0.01 <= abs(x) < 1000:
        return "%.3g" % x
    return "%.2e" % x


def main():
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    only = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "all" else None
    print("Optuna %s, simple regret at the best trial, seeds 1..%d: median / p90" % (optuna.__version__, seeds))
    print("| problem | sampler | @50 median | @50 p90 | @100 median | @100 p90 |")
    print("|---|---|---|---|---|---|")
    for pr in PROBLEMS:
        if only and pr["name"] != only:
            continue
        kinds = ["cmaes", "tpe"] + (["tpe_cl"] if pr.get("batch") else [])
        for kind in kinds:
            res = {b: [] for b in BUDGETS}
            for seed in range(1, seeds + 1):
                r = run(kind, pr, seed)
                for b in BUDGETS:
                    res[b].append(r[b])
            cells = []
            for b in BUDGETS:
                cells += [g3(pct(res[b], 0.5)), g3(pct(res[b], 0.9))]
            print("| %s | %s | %s |" % (pr["name"], kind, " | ".join(cells)), flush=True)


if __name__ == "__main__":
    main()
