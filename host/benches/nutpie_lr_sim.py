"""nutpie's NUTS on the RNS-HMC paper's logistic-regression simulation, for `shmc bench lr-sim`.

The bench's all-in row is compared with nutpie's min ESS_bulk per second of wall time (warmup
included, compilation not) with 4 chains x (1000 warmup + 5000 draws) on both cores. This script
measures that figure on the machine at hand; pass it on as `shmc bench lr-sim --nutpie RATE`.

    python3 -m venv /tmp/nutpie && /tmp/nutpie/bin/pip install nutpie pymc arviz
    /tmp/nutpie/bin/python host/benches/nutpie_lr_sim.py [TUNE DRAWS]

The data are simulated as `LogisticRegression::simulate` does (N = 1e5, d = 50, X = (0.1, X1)
with X1 ~ N(0, 0.01), beta ~ U[0, 1], prior N(0, 100 I)), from numpy's generator: another draw
of the same design, so the posterior's shape (isotropic, sd ~0.063) is the same. Not run by CI.
"""

import os
import sys
import time

# One BLAS thread per chain: nutpie runs a chain per core, more threads only contend.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import arviz as az  # noqa: E402
import numpy as np  # noqa: E402
import nutpie  # noqa: E402
import pymc as pm  # noqa: E402

N, D = 100_000, 50
TUNE, DRAWS = (int(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else (1000, 5000)

rng = np.random.default_rng(1)
x = np.hstack([np.full((N, 1), 0.1), 0.1 * rng.standard_normal((N, D - 1))])
beta_true = rng.uniform(size=D)
y = (rng.uniform(size=N) < 1 / (1 + np.exp(-x @ beta_true))).astype(np.int64)

with pm.Model() as model:
    beta = pm.Normal("beta", 0.0, 10.0, shape=D)
    pm.Bernoulli("y", logit_p=pm.math.dot(x, beta), observed=y)

compiled = nutpie.compile_pymc_model(model, backend="numba")
start = time.time()
trace = nutpie.sample(compiled, chains=4, tune=TUNE, draws=DRAWS, cores=2, seed=1, progress_bar=False)
wall = time.time() - start
bulk = az.ess(trace, method="bulk")["beta"].values
tail = az.ess(trace, method="tail")["beta"].values
steps = trace.sample_stats["n_steps"].values
print(
    f"nutpie: 4 chains x ({TUNE} + {DRAWS}) on 2 cores in {wall:.1f} s; "
    f"ESS_bulk min {bulk.min():.0f} median {np.median(bulk):.0f}; ESS_tail min {tail.min():.0f}; "
    f"{steps.mean():.1f} gradients per draw"
)
print(f"min ESS_bulk per second: {bulk.min() / wall:.1f}")
