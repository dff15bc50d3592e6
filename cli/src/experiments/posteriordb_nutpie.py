# nutpie on a compiled Stan library, for `shmc bench posteriordb` (run as `python -c`; the
# bench embeds this file). Arguments: LIBRARY DATA_JSON CHAINS WARMUP DRAWS SEED diag|low-rank.
# Prints one JSON object: the sampling's wall seconds, its gradients (warmup's and all), its
# divergences, and every chain's draws under CmdStan's names (beta.1, Sigma.2.1).
#
# The library has BridgeStan's C interface, so nutpie's own Stan model type loads it: built
# through nutpie's internal `_lib.StanModel` (nutpie 0.16), not `compile_stan_model`, which
# would download BridgeStan to compile the program again; the data go in as the JSON text.
import json
import sys
import time

import numpy as np

try:
    import nutpie
    from nutpie import _lib
    from nutpie.compile_stan import CompiledStanModel
except ImportError as e:
    sys.exit(f"no nutpie in this interpreter ({e}): pip install nutpie")

library_path, data_path, chains, warmup, draws, seed, metric = sys.argv[1:8]


def make_adapter(*args, **kwargs):
    from nutpie.transform_adapter import make_transform_adapter

    return make_transform_adapter()(*args, **kwargs, logp_fn=None)


library = _lib.StanLibrary(library_path)
with open(data_path) as f:
    data = f.read()
model = _lib.StanModel(library, {}, {}, {}, int(seed), data, make_adapter)
compiled = CompiledStanModel(
    code="", library=library, dims={}, _coords={}, model_name="posterior", model=model, data={}
)
start = time.perf_counter()
trace = nutpie.sample(
    compiled,
    chains=int(chains),
    tune=int(warmup),
    draws=int(draws),
    seed=int(seed),
    progress_bar=False,
    save_warmup=True,
    low_rank_modified_mass_matrix=metric == "low-rank",
)
seconds = time.perf_counter() - start

names, series = [], []
for name, variable in trace.posterior.data_vars.items():
    values = np.asarray(variable)  # (chain, draw, *shape)
    for index in np.ndindex(*values.shape[2:]):
        names.append(".".join([name, *(str(i + 1) for i in index)]))
        series.append(values[(slice(None), slice(None), *index)])
by_chain = [[s[c].tolist() for s in series] for c in range(int(chains))]
warmup_steps = int(np.asarray(trace.warmup_sample_stats["n_steps"]).sum())
steps = int(np.asarray(trace.sample_stats["n_steps"]).sum())
json.dump(
    {
        "seconds": seconds,
        "warmup_gradients": warmup_steps,
        "gradients": warmup_steps + steps,
        "divergences": int(np.asarray(trace.sample_stats["diverging"]).sum()),
        "names": names,
        "chains": by_chain,
    },
    sys.stdout,
)
