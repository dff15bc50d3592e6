"""The Python package's benchmark (issue #37), run as a script, not a test:

    python python/bench/lr_sim.py [--n 100000] [--d 50] [--nuts-draws 200] [--shmc-tune 300]
                                  [--skip-pymc] [--skip-nutpie]

LR-sim (N rows, d features, a logistic regression with prior N(0, 100 I) simulated as the
papers do) written as a PyMC model, and the race to ESS 400: seconds from a cold start (a
fresh PyTensor compile folder; the model's compilation, tuning, training and sampling all
counted) to the draws, and the smallest bulk and tail ESS they reached, for
``shmc.sample(method="rns-hmc", train_from="laplace", target_ess=400)`` (it stops itself at
ESS 400), nutpie and ``pm.sample`` (their default tuning, ``--nuts-draws`` draws per chain:
NUTS reaches ESS 400 on this near-Gaussian posterior with 4 x 200 draws). They run one after
another in this process, shmc first (so that the others, not shmc, find PyTensor's and
numba's caches warm). All three compile the model with PyTensor's numba backend: pip's
PyTensor has no BLAS library for its C backend (nutpie's default backend is numba too).

Then the cost of one exact evaluation (log density and gradient): PyMC's compiled function
called through shmc's Python callback, against the same potential (the built-in ``logistic``
model, same N and d) evaluated in Rust, and a callback that does no work (the callback's
own overhead).
"""

import os
import tempfile

# A fresh compile folder: every sampler starts cold (set before PyTensor is imported).
os.environ["PYTENSOR_FLAGS"] = f"compiledir={tempfile.mkdtemp(prefix='lr-sim-pytensor-')}"

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
    stats = idata.sample_stats
    work = {k: int(stats[k].sum()) for k in ("exact_evaluations", "exact_gradients", "n_steps")
            if k in stats}
    print(f"{label:<36} {seconds:9.1f} s   min bulk/tail ESS {ess:7.0f}   "
          f"draws {idata.posterior.sizes['draw']}/chain   sampling work {work}", flush=True)
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
    parser.add_argument("--nuts-draws", type=int, default=200)
    parser.add_argument("--shmc-tune", type=int, nargs="+", default=[300, 1000])
    parser.add_argument("--skip-pymc", action="store_true")
    parser.add_argument("--skip-nutpie", action="store_true")
    args = parser.parse_args()
    import pymc as pm

    import shmc

    x, y = simulate(args.n, args.d, args.seed)
    print(f"LR-sim, N = {args.n}, d = {args.d}, 4 chains", flush=True)
    for tune in args.shmc_tune:
        timed(f"shmc rns-hmc (laplace), tune {tune}", lambda: shmc.sample(
            shmc.from_pymc(pymc_model(x, y)), method="rns-hmc", train_from="laplace",
            tune=tune, seed=args.seed, target_ess=400, progress=False))
    if not args.skip_nutpie:
        import nutpie

        timed("nutpie (tune 300)", lambda: nutpie.sample(
            nutpie.compile_pymc_model(pymc_model(x, y)), chains=4, seed=args.seed,
            draws=args.nuts_draws, progress_bar=False))
    if not args.skip_pymc:
        timed("pm.sample NUTS (tune 1000)", lambda: pm.sample(
            model=pymc_model(x, y), draws=args.nuts_draws, chains=4, random_seed=args.seed,
            progressbar=False, compute_convergence_checks=False,
            compile_kwargs={"mode": "NUMBA"}))
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
