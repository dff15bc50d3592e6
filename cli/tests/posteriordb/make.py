"""Writes this folder's small posteriordb, in the database's layout, for
cli/tests/bench_posteriordb.rs: one Stan program whose every parameter's posterior is known in
closed form, its data, and reference draws drawn independently from those closed forms (so the
reference is exact, not a sampler's). `known-shifted` has the same program and data with its
reference's mu moved by half a posterior sd, which a correct sampler must fail; `known-broken`
names a data file that is not a zip archive. Run from this folder: python3 make.py
"""

import json
import math
import random
import zipfile

ROOT = "posterior_database"
rng = random.Random(20261207)
N = 20
y = [round(rng.gauss(1.5, 1.0), 6) for _ in range(N)]
# mu ~ normal(0, 10), y ~ normal(mu, 1): the posterior of mu is normal with this mean and sd.
precision = N + 1 / 100
post_mean, post_sd = sum(y) / precision, math.sqrt(1 / precision)


def zipped(path, name, text):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, text)


def reference(shift):
    draws = lambda f: [round(f(), 4) for _ in range(400)]
    return json.dumps(
        [
            {
                "mu": draws(lambda: post_mean + shift + post_sd * rng.gauss(0, 1)),
                "tau": draws(lambda: rng.expovariate(1.0)),
                "theta[1]": draws(lambda: rng.gauss(1, 2)),
                "theta[2]": draws(lambda: rng.gauss(-3, 0.5)),
            }
            for _ in range(10)
        ]
    )


def posterior(name, data):
    meta = {
        "name": name,
        "model_name": "known",
        "data_name": data,
        "reference_posterior_name": "known-shifted" if name == "known-shifted" else "known-known",
        "dimensions": {"mu": 1, "tau": 1, "theta": 2},
    }
    with open(f"{ROOT}/posteriors/{name}.json", "w") as f:
        json.dump(meta, f, indent=2)


zipped(f"{ROOT}/data/data/known.json.zip", "known.json", json.dumps({"N": N, "y": y}))
draws_dir = f"{ROOT}/reference_posteriors/draws/draws"
zipped(f"{draws_dir}/known-known.json.zip", "known-known.json", reference(0.0))
zipped(f"{draws_dir}/known-shifted.json.zip", "known-shifted.json", reference(0.5 * post_sd))
for name, data in [("known-known", "known"), ("known-shifted", "known"), ("known-broken", "broken")]:
    posterior(name, data)
with open(f"{ROOT}/data/data/broken.json.zip", "w") as f:
    f.write('{"N": 1, "y": [0]}\n')
