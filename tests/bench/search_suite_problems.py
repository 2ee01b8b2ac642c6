"""tests/bench/search_suite_problems.py -- the problems of the search benchmark suite, in Python
(the Lua definitions: tests/bench/search_problems.lua; tests/lua/search_suite_spec.lua checks
that the two agree at fixed points). One table, PROBLEMS, in the suite's order: add a problem
there (and in search_problems.lua's SUITE) to add it to the suite.

A problem: name; kind "single" (simple regret, lower better), "multi" (hypervolume, higher
better) or "prune" (recorded learning curves); params, a list of
(name, type, a, b, condition) with type "float", "log", "int" or "choice" (a: the values) and
condition None or (parent, value); f(x) on a dict of the active parameters; minimum (single);
sd of the Gaussian noise added to each observation and streams, the number of noise streams
(the regret is the TRUE function's at the reported best); batch (suggestions asked at once);
k objectives and ref, the hypervolume's reference point per objective (multi).
"""
import math


def branin(x1, x2):
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1 ** 2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


ALPHA = [1.0, 1.2, 3.0, 3.2]
A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
P = [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
     [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]
HARTMANN6_MIN = -3.32237
HARTMANN6_ARGMIN = [0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573]


def hartmann6(v):
    f = 0.0
    for i in range(4):
        s = sum(A[i][j] * (v[j] - P[i][j] * 1e-4) ** 2 for j in range(6))
        f -= ALPHA[i] * math.exp(-s)
    return f


def ackley(v):
    n = len(v)
    s1 = sum(a * a for a in v)
    s2 = sum(math.cos(2 * math.pi * a) for a in v)
    return -20 * math.exp(-0.2 * math.sqrt(s1 / n)) - math.exp(s2 / n) + 20 + math.e


def rosenbrock(v):
    return sum(100 * (v[j + 1] - v[j] ** 2) ** 2 + (1 - v[j]) ** 2 for j in range(len(v) - 1))


def levy(v):
    w = [1 + (a - 1) / 4 for a in v]
    f = math.sin(math.pi * w[0]) ** 2
    for j in range(len(w) - 1):
        f += (w[j] - 1) ** 2 * (1 + 10 * math.sin(math.pi * w[j] + 1) ** 2)
    return f + (w[-1] - 1) ** 2 * (1 + math.sin(2 * math.pi * w[-1]) ** 2)


# the off-centre controls: a search that starts at the centre of the box (dlua's bayes, CMA-ES)
# finds Ackley-5's minimum (the centre) and comes within 1.44 of Levy-10's (1 from the centre) on
# its first point, and lands on DTLZ2's front; these move the minimum (the front) away from the centre
ACKLEY5_ARGMIN = [12.0, -20.0, 7.0, -9.0, 16.0]
LEVY10_ARGMIN = [6.0, -6.0, 4.0, -3.0, 7.0, -1.0, 5.0, -5.0, 3.0, -2.0]
DTLZ2_AT = 0.8             # DTLZ2's front at x3..x6 = 0.8 (0.5 in its definition: the centre is on the front)


def shifted(f, argmin, at):
    """f moved so that its minimum, at `at` in every coordinate, lies at argmin"""
    return lambda v: f([a - m + at for a, m in zip(v, argmin)])


KIND = {"a": 0.5, "b": 0.0, "c": 1.0}


def mixed(x):
    return (x["x"] - 0.3) ** 2 * 4 + (math.log10(x["lr"]) + 3) ** 2 / 4 + ((x["n"] - 7) / 10) ** 2 + KIND[x["kind"]]


def conditional(x):
    if x["model"] == "linear":
        return 0.2 + (math.log10(x["lr"]) + 2) ** 2 / 4 + (x["l2"] - 0.7) ** 2
    return ((x["depth"] - 8) / 4) ** 2 + 4 * (x["frac"] - 0.25) ** 2


def zdt(v, square):
    g = 1 + 9 * sum(v[1:]) / (len(v) - 1)
    r = v[0] / g
    return [v[0], g * (1 - (r ** 2 if square else math.sqrt(r)))]


def dtlz2(v, at=0.5):
    g = sum((a - at) ** 2 for a in v[2:])
    a, b = v[0] * math.pi / 2, v[1] * math.pi / 2
    return [(1 + g) * math.cos(a) * math.cos(b), (1 + g) * math.cos(a) * math.sin(b), (1 + g) * math.sin(a)]


def box(d, a, b):
    return [("x%d" % (j + 1), "float", a, b, None) for j in range(d)]


def vec(x, d):
    return [x["x%d" % (j + 1)] for j in range(d)]


def single(name, params, f, minimum, sd=0.0, streams=1, batch=1):
    return {"name": name, "kind": "single", "params": params, "f": f, "minimum": minimum, "sd": sd,
            "streams": streams, "batch": batch}


def multi(name, f, k):
    return {"name": name, "kind": "multi", "params": box(6, 0.0, 1.0), "f": lambda x: f(vec(x, 6)), "k": k,
            "ref": [1.1] * k, "sd": 0.0, "streams": 1, "batch": 1}


BRANIN_RANGE = 308.129 - 0.397887        # max - min over the domain: the noise's sd is 10% of it
PROBLEMS = [
    single("Branin", [("x1", "float", -5.0, 10.0, None), ("x2", "float", 0.0, 15.0, None)],
           lambda x: branin(x["x1"], x["x2"]), 0.397887),
    single("Hartmann-6", box(6, 0.0, 1.0), lambda x: hartmann6(vec(x, 6)), HARTMANN6_MIN),
    single("Ackley-5", box(5, -32.768, 32.768), lambda x: ackley(vec(x, 5)), 0.0),
    single("Rosenbrock-4", box(4, -5.0, 10.0), lambda x: rosenbrock(vec(x, 4)), 0.0),
    single("Levy-10", box(10, -10.0, 10.0), lambda x: levy(vec(x, 10)), 0.0),
    single("Ackley-20", box(20, -5.0, 10.0), lambda x: ackley(vec(x, 20)), 0.0),
    single("Ackley-5 off-centre", box(5, -32.768, 32.768),
           lambda x: shifted(ackley, ACKLEY5_ARGMIN, 0.0)(vec(x, 5)), 0.0),
    single("Levy-10 off-centre", box(10, -10.0, 10.0), lambda x: shifted(levy, LEVY10_ARGMIN, 1.0)(vec(x, 10)), 0.0),
    single("noisy Branin", [("x1", "float", -5.0, 10.0, None), ("x2", "float", 0.0, 15.0, None)],
           lambda x: branin(x["x1"], x["x2"]), 0.397887, sd=0.1 * BRANIN_RANGE, streams=3),
    single("noisy Hartmann-6", box(6, 0.0, 1.0), lambda x: hartmann6(vec(x, 6)), HARTMANN6_MIN,
           sd=0.1 * -HARTMANN6_MIN, streams=3),
    single("mixed", [("x", "float", 0.0, 1.0, None), ("lr", "log", 1e-5, 1e-1, None), ("n", "int", 1, 20, None),
                     ("kind", "choice", ["a", "b", "c"], None, None)], mixed, 0.0),
    single("conditional", [("model", "choice", ["linear", "tree"], None, None),
                           ("lr", "log", 1e-4, 1.0, ("model", "linear")), ("l2", "float", 0.0, 1.0, ("model", "linear")),
                           ("depth", "int", 1, 12, ("model", "tree")), ("frac", "float", 0.0, 1.0, ("model", "tree"))],
           conditional, 0.0),
    single("Rosenbrock-4 in batches of 4", box(4, -5.0, 10.0), lambda x: rosenbrock(vec(x, 4)), 0.0, batch=4),
    multi("ZDT1", lambda v: zdt(v, False), 2),
    multi("ZDT2", lambda v: zdt(v, True), 2),
    multi("DTLZ2", dtlz2, 3),
    multi("DTLZ2 off-centre", lambda v: dtlz2(v, DTLZ2_AT), 3),
    {"name": "Fashion-MNIST pruning", "kind": "prune", "curves": "tests/bench/results/fashion_curves.json"},
]
BY_NAME = {p["name"]: p for p in PROBLEMS}


def describe():
    """every problem's definition as plain data (tests/lua/search_suite_spec.lua compares it with Lua's)"""
    out = []
    for p in PROBLEMS:
        d = {k: v for k, v in p.items() if k not in ("f", "params")}
        if "params" in p:
            d["params"] = [{"name": n, "kind": k, "a": a, "b": b, "cond": list(c) if c else None}
                           for n, k, a, b, c in p["params"]]
        out.append(d)
    return out


if __name__ == "__main__":
    import json
    import sys
    if sys.argv[1:] == ["describe"]:
        json.dump(describe(), sys.stdout)
    elif sys.argv[1:] == ["eval"]:             # stdin: [{"name": problem, "hp": {...}}] -> [f(hp)]
        json.dump([BY_NAME[q["name"]]["f"](q["hp"]) for q in json.load(sys.stdin)], sys.stdout)
    else:
        sys.exit("usage: search_suite_problems.py describe | eval < points.json")
