#!/usr/bin/python3
"""tests/bench/search_suite_optuna.py -- the Optuna side of the search benchmark suite
(tests/bench/search_suite.lua prints the table; tests/bench/run_search_suite.sh runs both).

Every applicable Optuna sampler (Random, QMC scrambled, as unscrambled Sobol's first point is the
box's centre, Ackley's optimum; TPE default and multivariate, with constant_liar=True for batches;
CMA-ES; several objectives: MOTPE, NSGA-II, Random, QMC) on every problem of search_suite_problems.PROBLEMS, seeds
1..SEEDS (times each problem's noise streams), budgets 50 and 100 evaluations; writes the
per-seed results to OUT (default tests/bench/results/search_suite_optuna.json), with Optuna's
version, the date and the machine line, so that later rounds re-run only the dlua side:

  {"optuna": "3.1.0", "date": ..., "machine": ..., "seeds": 20, "budgets": [50, 100],
   "problems": {name: {"kind": ..., "runs": [[seed, stream]...],
                       "samplers": {sampler: {"50": [per run], "100": [...]}}}}}

single objective: simple regret of the TRUE function at Optuna's best_trial (the best OBSERVED
value); batches: ask `batch` trials, then tell them (TPE with constant_liar=True); several
objectives: hypervolume of the first 50 / 100 trials (optuna._hypervolume.WFG, every objective
minimised, the problem's reference point); pruning: Optuna's pruners replayed over the recorded
Fashion-MNIST curves in each seed's trial order, the gap between the unpruned study's best final
value and the best completed trial's once 1/3 and 1/2 of the unpruned steps are spent.

  /usr/bin/python3 tests/bench/search_suite_optuna.py [--seeds N] [--problems a,b] [--out FILE] [--budgets 50,100]

With --problems, the other problems already in OUT are kept. Runs over Debian's python3-optuna.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import optuna
from optuna._hypervolume import WFG

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from search_suite_problems import PROBLEMS, BY_NAME  # noqa: E402

warnings.filterwarnings("ignore")
optuna.logging.set_verbosity(optuna.logging.ERROR)

BUDGETS = [50, 100]
PRUNE_BUDGETS = {"1/3 steps": 1 / 3, "1/2 steps": 1 / 2}


def samplers(pr):
    """name -> sampler factory(seed), every Optuna 3.1 sampler that runs on the problem"""
    liar = pr["batch"] > 1
    group = any(p[4] for p in pr["params"])
    s = {"Random": lambda seed: optuna.samplers.RandomSampler(seed=seed),
         "QMC (scrambled Sobol)": lambda seed: optuna.samplers.QMCSampler(scramble=True, seed=seed)}
    if pr["kind"] == "multi":
        s["MOTPE"] = lambda seed: optuna.samplers.TPESampler(seed=seed)
        s["NSGA-II"] = lambda seed: optuna.samplers.NSGAIISampler(seed=seed)
        return s
    s["TPE"] = lambda seed: optuna.samplers.TPESampler(seed=seed, constant_liar=liar)
    s["TPE multivariate"] = lambda seed: optuna.samplers.TPESampler(seed=seed, multivariate=True, group=group,
                                                                    constant_liar=liar)
    s["CMA-ES"] = lambda seed: optuna.samplers.CmaEsSampler(seed=seed)
    return s


def suggest(trial, params):
    x = {}
    for name, kind, a, b, cond in params:
        if cond and x.get(cond[0]) != cond[1]:
            continue
        if kind == "float":
            x[name] = trial.suggest_float(name, a, b)
        elif kind == "log":
            x[name] = trial.suggest_float(name, a, b, log=True)
        elif kind == "int":
            x[name] = trial.suggest_int(name, a, b)
        else:
            x[name] = trial.suggest_categorical(name, a)
    return x


def noise_rng(pr, seed, stream):
    return np.random.RandomState(1000003 * stream + 7919 * seed + sum(map(ord, pr["name"])))


def run_single(pr, make, seed, stream):
    direction = "minimize" if pr["kind"] == "single" else None
    if pr["kind"] == "multi":
        study = optuna.create_study(directions=["minimize"] * pr["k"], sampler=make(seed))
    else:
        study = optuna.create_study(direction=direction, sampler=make(seed))
    rng = noise_rng(pr, seed, stream)
    truth = []
    n = 0
    while n < max(BUDGETS):
        nb = min(pr["batch"], min(b for b in BUDGETS if b > n) - n)
        trials = [study.ask() for _ in range(nb)]
        xs = [suggest(t, pr["params"]) for t in trials]
        for t, x in zip(trials, xs):
            f = pr["f"](x)
            truth.append(f)
            study.tell(t, f if pr["kind"] == "multi" else f + pr["sd"] * rng.randn())
        n += nb
    out = {}
    for b in BUDGETS:
        ts = study.trials[:b]
        if pr["kind"] == "multi":
            ref = np.array(pr["ref"])
            pts = np.array([v for v in truth[:b] if all(a < r for a, r in zip(v, pr["ref"]))], dtype=float)
            out[str(b)] = float(WFG().compute(pts, ref)) if len(pts) else 0.0
        else:
            best = min(range(b), key=lambda i: ts[i].value)    # Optuna's best_trial among the first b
            out[str(b)] = truth[best] - pr["minimum"]
    return out


# --- pruning: Optuna's pruners over the recorded curves (as tests/bench/prune_replay_optuna.py)
PRUNERS = {
    "Median (warmup 300, startup 3)": lambda d, m: optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=300),
    "SuccessiveHalving (100, 3)": lambda d, m: optuna.pruners.SuccessiveHalvingPruner(min_resource=m, reduction_factor=3),
    "SuccessiveHalving (100, 2)": lambda d, m: optuna.pruners.SuccessiveHalvingPruner(min_resource=m, reduction_factor=2),
    "Hyperband (100, 3)": lambda d, m: optuna.pruners.HyperbandPruner(min_resource=m, max_resource=d["max"],
                                                                      reduction_factor=3),
    "Hyperband (100, 2)": lambda d, m: optuna.pruners.HyperbandPruner(min_resource=m, max_resource=d["max"],
                                                                      reduction_factor=2),
}


def prune_gaps(data, trace):
    """trace: [(cumulative steps, best completed so far or None)] after each trial -> gap per budget"""
    sign = 1 if data["mode"] == "max" else -1
    total = len(data["trials"]) * data["max"]
    worst = min(sign * t["final"] for t in data["trials"])
    out = {}
    for label, frac in PRUNE_BUDGETS.items():
        best = None
        for steps, b in trace:
            if steps <= frac * total + 1e-9 and b is not None:
                best = b
        out[label] = sign * data["best"] - (sign * best if best is not None else worst)
    return out


def run_prune(pr, seeds):
    data = json.load(open(pr["curves"]))
    sign = 1 if data["mode"] == "max" else -1
    res = {}
    for name, make in PRUNERS.items():
        per = {k: [] for k in PRUNE_BUDGETS}
        for seed in range(seeds):
            order = data["orders"][seed]
            study = optuna.create_study(direction="maximize" if sign > 0 else "minimize", pruner=make(data, 100))
            steps, best, trace = 0, None, []
            for pi in order:
                t = data["trials"][pi - 1]
                trial = study.ask()
                stop, pruned = data["max"], False
                for step, value in t["curve"]:
                    trial.report(value, step)
                    if trial.should_prune():
                        stop, pruned = step, True
                        break
                steps += stop
                if pruned:
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                else:
                    study.tell(trial, t["final"])
                    if best is None or sign * t["final"] > sign * best:
                        best = t["final"]
                trace.append((steps, best))
            for k, v in prune_gaps(data, trace).items():
                per[k].append(v)
        res[name] = per
    return {"kind": "prune", "runs": [[s, 1] for s in range(seeds)], "budgets": list(PRUNE_BUDGETS),
            "samplers": res}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--problems", default="")
    ap.add_argument("--out", default="tests/bench/results/search_suite_optuna.json")
    ap.add_argument("--budgets", default="50,100")
    a = ap.parse_args()
    BUDGETS[:] = [int(b) for b in a.budgets.split(",")]
    names = [n for n in a.problems.split(",") if n] or [p["name"] for p in PROBLEMS]
    for n in names:
        if n not in BY_NAME:
            sys.exit("search_suite_optuna: unknown problem %r (known: %s)" % (n, ", ".join(BY_NAME)))
    here = os.path.dirname(os.path.abspath(__file__))
    machine = subprocess.run(["sh", os.path.join(here, "machine.sh")], capture_output=True, text=True).stdout.strip()
    res = {}
    if a.problems and os.path.exists(a.out):
        res = json.load(open(a.out))
    res.update({"optuna": optuna.__version__, "seeds": a.seeds, "budgets": BUDGETS})
    res.setdefault("problems", {})
    for n in names:
        pr = BY_NAME[n]
        t0 = time.process_time()
        if pr["kind"] == "prune":
            entry = run_prune(pr, a.seeds)
        else:
            runs = [[seed, stream] for stream in range(1, pr["streams"] + 1) for seed in range(1, a.seeds + 1)]
            entry = {"kind": pr["kind"], "runs": runs, "budgets": [str(b) for b in BUDGETS], "samplers": {}}
            for sname, make in samplers(pr).items():
                per = {str(b): [] for b in BUDGETS}
                for seed, stream in runs:
                    r = run_single(pr, make, seed, stream)
                    for b in BUDGETS:
                        per[str(b)].append(r[str(b)])
                entry["samplers"][sname] = per
                sys.stderr.write("%s %s: %.0f s CPU so far\n" % (n, sname, time.process_time() - t0))
        entry["date"] = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
        entry["machine"] = machine
        res["problems"][n] = entry
        res["date"], res["machine"] = entry["date"], machine
        with open(a.out + ".tmp", "w") as fh:
            json.dump(res, fh, indent=None, separators=(",", ":"))
            fh.write("\n")
        os.replace(a.out + ".tmp", a.out)
        sys.stderr.write("%s: %.0f s CPU\n" % (n, time.process_time() - t0))


if __name__ == "__main__":
    main()
