"""Optuna's pruners on the same recorded curves and trial orders as tests/bench/asha_replay_fashion.lua
(issue 35's side-by-side), one trial at a time:

    PRUNE_ORDERS=/tmp/orders.json build/dlua tests/bench/asha_replay_fashion.lua STUDY.lua DIR 10
    /usr/bin/python3 tests/bench/prune_replay_optuna.py /tmp/orders.json

Each trial reports its recorded objective at every eval step and stops when should_prune() says so;
the columns are those of the Lua replay (steps used, best completed, gap to the unpruned best, steps
spent when the best completed value first came within one binomial SE of it).
"""
import json
import statistics
import sys

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)

data = json.load(open(sys.argv[1]))
MAX, BEST, SE = data["max"], data["best"], data["se"]
SIGN = 1 if data["mode"] == "max" else -1
TRIALS = data["trials"]
N = len(TRIALS)
MIN = int(sys.argv[2]) if len(sys.argv) > 2 else 100


def replay(make_pruner, order, name):
    study = optuna.create_study(direction="maximize" if SIGN > 0 else "minimize", pruner=make_pruner(),
                                study_name=name)
    steps, best, hit = 0, None, None
    for pi in order:
        t = TRIALS[pi - 1]
        trial = study.ask()
        stop, pruned = MAX, False
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
            if best is None or SIGN * t["final"] > SIGN * best:
                best = t["final"]
        if best is not None and hit is None and SIGN * best >= SIGN * BEST - SE:
            hit = steps
    return steps, best, hit


RULES = [
    ("median (warmup 300, startup 3)", lambda: optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=300)),
    ("asha (%d, 3)" % MIN, lambda: optuna.pruners.SuccessiveHalvingPruner(min_resource=MIN, reduction_factor=3)),
    ("asha (%d, 2)" % MIN, lambda: optuna.pruners.SuccessiveHalvingPruner(min_resource=MIN, reduction_factor=2)),
    ("hyperband (%d, 3)" % MIN, lambda: optuna.pruners.HyperbandPruner(min_resource=MIN, max_resource=MAX,
                                                                       reduction_factor=3)),
    ("hyperband (%d, 2)" % MIN, lambda: optuna.pruners.HyperbandPruner(min_resource=MIN, max_resource=MAX,
                                                                       reduction_factor=2)),
]
print("Optuna %s, %d trials, %d seeds (the Lua replay's orders), medians over seeds" % (
    optuna.__version__, N, len(data["orders"])))
print("| sampler | rule | steps used | best completed | gap | worst gap | steps to within 1 SE (seeds that got there) "
      "| seeds within 1 SE by 1/3 of the unpruned steps |")
print("|---|---|---|---|---|---|---|---|")
for label, make in RULES:
    S, G, H, got, third = [], [], [], 0, 0
    for seed, order in enumerate(data["orders"]):
        steps, best, hit = replay(make, order, "replay-%d" % seed)
        S.append(steps / (N * MAX))
        G.append(SIGN * (BEST - best) if best is not None else float("inf"))
        if hit is not None:
            got += 1
            H.append(hit / (N * MAX))
            third += 3 * hit <= N * MAX
        else:
            H.append(float("inf"))
    mh = statistics.median(H)
    print("| Optuna (study order) | %s | %.0f%% | %.4f | %.4f | %.4f | %s (%d of %d) | %d of %d |" % (
        label, 100 * statistics.median(S), BEST - SIGN * statistics.median(G), statistics.median(G), max(G),
        "-" if mh == float("inf") else "%.0f%%" % (100 * mh), got, len(data["orders"]), third, len(data["orders"])))
