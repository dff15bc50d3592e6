"""The Python package's benchmark (issue #37), run as a script, not a test:

    python python/bench/lr_sim.py [--n 100000] [--d 50] [--skip-pymc] [--skip-nutpie]

LR-sim (N rows, d features, a logistic regression with prior N(0, 100 I) simulated as the
papers do) written as a PyMC model, sampled side by side in one process by PyMC's NUTS
(``pm.sample``), nutpie and ``shmc.sample(method="rns-hmc")``: seconds from a cold start
(the model's compilation included) to the draws, and the smallest bulk and tail ESS they
reached (shmc stops itself at ESS 400: ``target_ess=400``; the others run 1000 draws per
chain, PyMC's default). Then the cost of one exact evaluation (log density and gradient):
PyMC's compiled function called through shmc's Python callback, against the same potential
(the built-in ``logistic`` model, same N and d) evaluated in Rust, and a callback that does
no work (the callback's own overhead).
"""

import argparse
import time

import numpy as np


def simulate(n, d, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    beta = rng.normal(size=d)
    y = (rng.random(n) < 1 / (1 + np.exp(-x @ beta))).astype(np.int64)
    return x, y


def pymc_model(x, y):
    import pymc as pm

    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 10, shape=x.shape[1])
        pm.Bernoulli("y", logit_p=pm.math.dot(x, beta), observed=y)
    return model


def min_ess(idata):
    import arviz as az

    bulk = float(az.ess(idata, method="bulk").to_array().min())
    tail = float(az.ess(idata, method="tail").to_array().min())
    return min(bulk, tail)


def timed(label, run):
    start = time.perf_counter()
    idata = run()
    seconds = time.perf_counter() - start
    ess = min_ess(idata)
    print(f"{label:<28} {seconds:9.1f} s   min bulk/tail ESS {ess:7.0f}", flush=True)
    return seconds, ess


def per_call(label, call, q, repeats):
    call(q)
    start = time.perf_counter()
    for _ in range(repeats):
        call(q)
    micro = (time.perf_counter() - start) / repeats * 1e6
    print(f"{label:<52} {micro:10.1f} us per evaluation", flush=True)
    return micro


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-pymc", action="store_true")
    parser.add_argument("--skip-nutpie", action="store_true")
    args = parser.parse_args()
    import pymc as pm

    import shmc

    x, y = simulate(args.n, args.d, args.seed)
    print(f"LR-sim, N = {args.n}, d = {args.d}, 4 chains", flush=True)
    if not args.skip_pymc:
        timed("pm.sample (NUTS)", lambda: pm.sample(
            model=pymc_model(x, y), chains=4, cores=1, random_seed=args.seed,
            progressbar=False, compute_convergence_checks=False))
    if not args.skip_nutpie:
        import nutpie

        timed("nutpie", lambda: nutpie.sample(
            nutpie.compile_pymc_model(pymc_model(x, y)), chains=4, seed=args.seed,
            progress_bar=False))
    timed("shmc rns-hmc (laplace)", lambda: shmc.sample(
        shmc.from_pymc(pymc_model(x, y)), method="rns-hmc", train_from="laplace",
        seed=args.seed, target_ess=400, progress=False))
    q = np.zeros(args.d)
    print()
    repeats = max(20, int(2e7 / (args.n * args.d)))
    python = per_call("PyMC's function through shmc's Python callback",
                      shmc.from_pymc(pymc_model(x, y)).logp_and_grad, q, repeats)
    rust = per_call("the built-in logistic model in Rust",
                    shmc.model("logistic", n=args.n, d=args.d).logp_and_grad, q, repeats)
    empty = per_call("a Python callback doing no work",
                     shmc.from_logp(lambda q: (0.0, np.zeros(args.d)), args.d).logp_and_grad,
                     q, 20_000)
    print(f"callback overhead {empty:.1f} us; PyMC/Rust per evaluation {python / rust:.1f}x")


if __name__ == "__main__":
    main()
