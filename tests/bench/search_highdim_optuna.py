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
import math
import sys
import warnings

import numpy as np
import optuna

warnings.filterwarnings("ignore")
optuna.logging.set_verbosity(optuna.logging.ERROR)

ALPHA = [1.0, 1.2, 3.0, 3.2]
A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
P = [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
     [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]


def hartmann6(v):
    f = 0.0
    for i in range(4):
        s = sum(A[i][j] * (v[j] - P[i][j] * 1e-4) ** 2 for j in range(6))
        f -= ALPHA[i] * math.exp(-s)
    return f


def branin(v):
    x1, x2 = v
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1 ** 2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


def ackley(v):
    d = len(v)
    s1 = sum(x * x for x in v)
    s2 = sum(math.cos(2 * math.pi * x) for x in v)
    return -20 * math.exp(-0.2 * math.sqrt(s1 / d)) - math.exp(s2 / d) + 20 + math.e


def rosenbrock(v):
    return sum(100 * (v[j + 1] - v[j] ** 2) ** 2 + (1 - v[j]) ** 2 for j in range(len(v) - 1))


def levy(v):
    w = [1 + (x - 1) / 4 for x in v]
    d = len(v)
    f = math.sin(math.pi * w[0]) ** 2 + (w[d - 1] - 1) ** 2 * (1 + math.sin(2 * math.pi * w[d - 1]) ** 2)
    for j in range(d - 1):
        f += (w[j] - 1) ** 2 * (1 + 10 * math.sin(math.pi * w[j] + 1) ** 2)
    return f


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
