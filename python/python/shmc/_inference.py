"""A run's arrays as ArviZ InferenceData, with ArviZ's and PyMC's names for the sampler
statistics."""

from __future__ import annotations

import datetime
from typing import Any, Dict, Mapping, Optional

import numpy as np

from . import _layout

#: CmdStan's sampler columns -> the names ArviZ and PyMC give them in ``sample_stats``.
STAT_NAMES = {
    "lp__": "lp",
    "accept_stat__": "acceptance_rate",
    "stepsize__": "step_size",
    "treedepth__": "tree_depth",
    "n_leapfrog__": "n_steps",
    "divergent__": "diverging",
    "energy__": "energy",
}

#: The integer statistics (NaN-free by construction) and the boolean one.
_INTEGER = {"tree_depth", "n_steps"}
_BOOLEAN = {"diverging"}


def _dataset(variables: Mapping[str, np.ndarray], dims: Mapping[str, Any], coords: Mapping[str, Any]):
    import xarray as xr

    chains, draws = next(iter(variables.values())).shape[:2] if variables else (0, 0)
    data_vars = {
        name: (["chain", "draw"] + list(dims.get(name, [])), values)
        for name, values in variables.items()
    }
    all_coords: Dict[str, Any] = {"chain": np.arange(chains), "draw": np.arange(draws)}
    used = {d for name in data_vars for d in data_vars[name][0]}
    all_coords.update({k: v for k, v in coords.items() if k in used})
    return xr.Dataset(data_vars, coords=all_coords)


def _stats(rows: np.ndarray, columns) -> Dict[str, np.ndarray]:
    stats: Dict[str, np.ndarray] = {}
    for k, column in enumerate(columns):
        if column not in STAT_NAMES:
            continue
        name = STAT_NAMES[column]
        values = rows[..., k]
        if name in _BOOLEAN:
            values = values != 0
        elif name in _INTEGER:
            values = np.nan_to_num(values, nan=-1).astype(np.int64)
        stats[name] = values
    return stats


def _per_chain(chains: list, phase: str) -> Dict[str, np.ndarray]:
    """Per-chain totals of the phase's evaluations (``exact_evaluations`` = exact gradients
    plus exact values), and the surrogate's acceptance and fit where there is one."""
    ev = [c[f"{phase}_evaluations"] for c in chains]
    out = {
        "exact_evaluations": np.array([e["exact_gradients"] + e["exact_values"] for e in ev]),
        "exact_gradients": np.array([e["exact_gradients"] for e in ev]),
        "surrogate_gradients": np.array([e["surrogate_gradients"] for e in ev]),
    }
    if all("surrogate" in c for c in chains):
        out["surrogate_holdout_gradient_error"] = np.array(
            [c["surrogate"]["holdout_gradient_error"] for c in chains]
        )
    return out


def to_inference_data(result: Dict[str, Any], model, attrs: Dict[str, Any]):
    """The InferenceData of a run: ``posterior``, ``sample_stats`` and, when kept,
    ``warmup_posterior`` and ``warmup_sample_stats``; the settings in every group's attrs."""
    import arviz as az
    import xarray as xr

    columns = result["columns"]
    # The sampler's columns come first (a parameter may end in "__" too: PyMC's "tau_log__").
    n_stats = len(STAT_NAMES)
    assert list(columns[:n_stats]) == list(STAT_NAMES), columns[:n_stats]
    groups = {}
    for prefix, rows in (("", result["draws"]), ("warmup_", result["warmup"])):
        if rows is None:
            continue
        variables = model._expand(rows[..., n_stats:])
        dims = _layout.dims_for(variables, model.dims)
        groups[prefix + "posterior"] = _dataset(variables, dims, model.coords)
        stats = _dataset(_stats(rows, columns), {}, {})
        phase = "warmup" if prefix else "sampling"
        per_chain = {k: ("chain", v) for k, v in _per_chain(result["chains"], phase).items()}
        stats = stats.assign(per_chain)
        if result["method"] not in ("hmc", "nuts", "rmhmc"):
            # The exact MH step's acceptance of the surrogate's proposals.
            stats["surrogate_acceptance"] = stats["acceptance_rate"].mean("draw")
        groups[prefix + "sample_stats"] = stats
    group_attrs = {
        "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "inference_library": "shmc",
        **attrs,
    }
    for ds in groups.values():
        ds.attrs.update({k: v for k, v in group_attrs.items() if v is not None})
    return az.InferenceData(**groups)
