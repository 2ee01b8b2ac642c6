#!/usr/bin/python3
"""tests/bench/search_optuna.py -- the Optuna side of tests/bench/search_bench.lua.

Optuna's TPE (multivariate=True) and QMC (scrambled Halton) samplers on Branin,
Hartmann-6 and their noisy variants (Gaussian noise, sd 10% of the function's
range), `seeds` seeds, budgets 20 and 50. The incumbent is the trial with the
best OBSERVED (noisy) value, Optuna's own notion of best_trial; its regret is
that of the TRUE function at the trial's parameters. Prints one JSON object:
{"regret": {sampler: {problem: {budget: [regrets by seed]}}}, "cost": {...}}.
With `cost`, also the seconds of CPU per TPE suggestion after n trials. With
`noisy STREAMS`: TPE only, the noisy variants only, budgets 50 and 100, noise
streams 1..STREAMS (stream s draws from RandomState(10007 seed + s); stream 1 is
the default run's noise), each seed's regrets in stream-major order (the side of
tests/bench/search_noisy.lua).

  /usr/bin/python3 tests/bench/search_optuna.py [seeds=20] [cost]
  /usr/bin/python3 tests/bench/search_optuna.py [seeds=20] noisy [streams=3]

Runs over Debian's python3-optuna (scripts/setup.sh --bench).
"""
import json
import os
import sys
import time
import warnings

import numpy as np
import optuna

warnings.filterwarnings("ignore")
optuna.logging.set_verbosity(optuna.logging.WARNING)


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import search_suite_problems as SP  # noqa: E402  (the one Python definition of the problems)


def branin(x):
    return SP.branin(x["x1"], x["x2"])


def hartmann6(x):
    return SP.hartmann6([x["x%d" % (j + 1)] for j in range(6)])


# the same constants as search_bench.lua: minimum and range (max - min over the domain)
PROBLEMS = [
    {"name": "Branin", "f": branin, "min": 0.397887, "range": 308.129 - 0.397887,
     "bounds": {"x1": (-5.0, 10.0), "x2": (0.0, 15.0)}},
    {"name": "Hartmann-6", "f": hartmann6, "min": -3.32237, "range": 3.32237,
     "bounds": {"x%d" % (j + 1): (0.0, 1.0) for j in range(6)}},
]
BUDGETS = [20, 50]


def make_sampler(kind, seed):
    if kind == "tpe":
        return optuna.samplers.TPESampler(multivariate=True, seed=seed)
    return optuna.samplers.QMCSampler(qmc_type="halton", scramble=True, seed=seed)


def run(kind, pr, noisy, seed, stream=1, budgets=None):
    budgets = budgets or BUDGETS
    rng = np.random.RandomState(10007 * seed + (stream if noisy else 0))
    sd = 0.1 * pr["range"] if noisy else 0.0
    truth = []

    def objective(trial):
        x = {k: trial.suggest_float(k, lo, hi) for k, (lo, hi) in pr["bounds"].items()}
        f = pr["f"](x)
        truth.append(f)
        return f + sd * rng.randn()

    study = optuna.create_study(sampler=make_sampler(kind, seed), direction="minimize")
    study.optimize(objective, n_trials=max(budgets))
    out = {}
    for b in budgets:
        trials = study.trials[:b]
        best = min(range(b), key=lambda i: trials[i].value)    # best observed value: Optuna's best_trial
        out[str(b)] = truth[best] - pr["min"]
    return out


def cost(n_list):
    """CPU seconds of one TPE (multivariate) suggestion after n Hartmann-6 trials."""
    pr = PROBLEMS[1]
    out = {}
    for n in n_list:
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(multivariate=True, seed=1))
        rng = np.random.RandomState(n)
        dists = {k: optuna.distributions.FloatDistribution(lo, hi) for k, (lo, hi) in pr["bounds"].items()}
        for _ in range(n):
            x = {k: float(rng.uniform(lo, hi)) for k, (lo, hi) in pr["bounds"].items()}
            study.add_trial(optuna.trial.create_trial(params=x, distributions=dists, value=pr["f"](x)))
        t0 = time.process_time()
        reps = 3
        for _ in range(reps):
            trial = study.ask()
            x = {k: trial.suggest_float(k, lo, hi) for k, (lo, hi) in pr["bounds"].items()}
            study.tell(trial, pr["f"](x))
        out[str(n)] = (time.process_time() - t0) / reps
    return out


def main():
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    res = {"regret": {}, "optuna": optuna.__version__}
    if "noisy" in sys.argv[2:]:
        i = sys.argv.index("noisy")
        streams = int(sys.argv[i + 1]) if len(sys.argv) > i + 1 else 3
        res["regret"]["tpe"] = {}
        for pr in PROBLEMS:
            per = {"50": [], "100": []}
            for stream in range(1, streams + 1):
                for seed in range(1, seeds + 1):
                    r = run("tpe", pr, True, seed, stream, [50, 100])
                    for b in ["50", "100"]:
                        per[b].append(r[b])
            res["regret"]["tpe"]["noisy " + pr["name"]] = per
        print(json.dumps(res))
        return
    for kind in ["tpe", "qmc"]:
        res["regret"][kind] = {}
        for pr in PROBLEMS:
            for noisy in [False, True]:
                name = ("noisy " if noisy else "") + pr["name"]
                per = {str(b): [] for b in BUDGETS}
                for seed in range(1, seeds + 1):
                    r = run(kind, pr, noisy, seed)
                    for b in BUDGETS:
                        per[str(b)].append(r[str(b)])
                res["regret"][kind][name] = per
    if "cost" in sys.argv[2:]:
        res["cost"] = cost([50, 200, 500, 2000])
    print(json.dumps(res))


if __name__ == "__main__":
    main()
