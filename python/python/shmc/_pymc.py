"""``shmc.from_pymc``: a PyMC model's log density and gradient on its unconstrained space,
compiled by PyMC itself, and its draws mapped back to the constrained variables, with the
model's names, shapes and coordinates, as ``pm.sample`` returns them."""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Tuple

import numpy as np

from . import _shmc
from ._model import Model


def _coordinate_names(shapes: List[Tuple[str, tuple]]) -> List[str]:
    """One name per unconstrained coordinate: ``sigma_log__``, ``theta.1`` ... (CmdStan's
    indexing, from 1, of each value variable flattened in C order)."""
    names: List[str] = []
    for name, shape in shapes:
        if shape == ():
            names.append(name)
        else:
            names.extend(
                f"{name}." + ".".join(str(i + 1) for i in index) for index in np.ndindex(*shape)
            )
    return names


def from_pymc(pymc_model: Any = None, *, mode: Any = None) -> Model:
    """A model from a PyMC model (default: the one of the enclosing ``with`` block).

    Its log density (Jacobians of the transforms included) and gradient with respect to the
    continuous value variables are compiled through PyMC's ``logp_dlogp_function``, and the
    log density alone through the same, for the exact judgements that need no gradient; the
    draws come back as ``pm.sample`` returns them: the free variables on their constrained
    scale and the deterministics, with the model's dims and coords. Discrete variables are
    refused.

    ``mode``: PyTensor's compile mode. By default ``"NUMBA"`` when PyTensor has no BLAS
    library (as pip installs it: its C backend then multiplies matrices in a loop of its own,
    measured 10-60x slower per evaluation on a regression of 10^5 rows), else PyTensor's own
    default.
    """
    import pymc as pm

    pm_model = pm.modelcontext(pymc_model)
    continuous = pm_model.continuous_value_vars
    if len(continuous) != len(pm_model.value_vars):
        discrete = [v.name for v in pm_model.value_vars if v not in continuous]
        raise ValueError(
            f"shmc samples continuous parameters only; this model has discrete ones: {discrete}"
        )
    point = pm_model.initial_point()
    shapes = [(v.name, tuple(np.shape(point[v.name]))) for v in continuous]
    sizes = [int(np.prod(s)) for _, s in shapes]
    mode = _default_mode() if mode is None else mode
    logp_dlogp = pm_model.logp_dlogp_function(ravel_inputs=True, mode=mode)
    logp_dlogp.set_extra_values({})
    logp_only = pm.model.core.ValueGradFunction(
        [pm_model.logp()], continuous, {}, compute_grads=False, model=pm_model,
        initial_point=point, ravel_inputs=True, mode=mode,
    )
    logp_only.set_extra_values({})
    # A compiled PyTensor function keeps its inputs and outputs in storage of its own: two
    # chains' threads calling it at once overwrite each other's (seen: "Expected 1 dimensions
    # input"). The GIL already runs one call at a time, so the lock costs no parallelism.
    lock = threading.Lock()

    def logp_and_grad(q: np.ndarray):
        with lock:
            logp, grad = logp_dlogp(q)
            return float(logp), np.array(grad, dtype=np.float64)

    def logp(q: np.ndarray) -> float:
        with lock:
            return float(logp_only(q)[0])

    native = _shmc.from_callable(logp_and_grad, _coordinate_names(shapes), "pymc", logp)
    expand = _expansion(pm_model, continuous, shapes, sizes)
    coords = {k: np.asarray(v) for k, v in (pm_model.coords or {}).items() if v is not None}
    dims = {k: list(v) for k, v in pm_model.named_vars_to_dims.items()}
    return Model(native, expand, coords=coords, dims=dims)


def _default_mode() -> Any:
    """``"NUMBA"`` when PyTensor's C backend has no BLAS library, else PyTensor's default."""
    import pytensor

    return "NUMBA" if not pytensor.config.blas__ldflags else None


def _expansion(pm_model, continuous, shapes, sizes):
    """Draws ``(chain, draw, ndim)`` -> the free variables (constrained) and deterministics,
    through a function PyMC compiles from the value variables."""
    keep = [rv.name for rv in pm_model.free_RVs] + [d.name for d in pm_model.deterministics]
    outputs = pm_model.unobserved_value_vars
    function = pm_model.compile_fn(
        outputs, inputs=continuous, on_unused_input="ignore", point_fn=False
    )
    names = [o.name for o in outputs]
    splits = np.cumsum(sizes)[:-1]

    def expand(draws: np.ndarray) -> Dict[str, np.ndarray]:
        chains, n = draws.shape[:2]
        # The function's outputs may be its own storage, reused by the next call: copied.
        collected: Dict[str, List[np.ndarray]] = {name: [] for name in keep}
        for q in draws.reshape(chains * n, -1):
            parts = np.split(q, splits)
            values = [p.reshape(shape) for p, (_, shape) in zip(parts, shapes)]
            for name, value in zip(names, function(*values)):
                if name in collected:
                    collected[name].append(np.array(value))
        out = {}
        for name, values in collected.items():
            if values:
                stacked = np.stack(values)
                out[name] = stacked.reshape((chains, n) + stacked.shape[1:])
            else:
                out[name] = np.zeros((chains, n))
        return out

    return expand
