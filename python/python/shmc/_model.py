"""Models ``shmc.sample`` runs: a Python log density, a built-in or served model, or a PyMC
model, each the native model plus how its parameter vector becomes named variables."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _layout, _shmc


class Model:
    """A model to sample: the native model (``U = -logp`` on the unconstrained space), its
    parameter names, and how draws of its parameter vector become posterior variables
    (``coords`` and ``dims`` as ArviZ takes them)."""

    def __init__(
        self,
        native: "_shmc.Model",
        expand: Optional[_layout.Expand] = None,
        coords: Optional[Mapping[str, Any]] = None,
        dims: Optional[Mapping[str, Sequence[str]]] = None,
    ) -> None:
        self.native = native
        self._expand = expand or _layout.by_name(native.names)
        self.coords: Dict[str, Any] = dict(coords or {})
        self.dims: Dict[str, Sequence[str]] = dict(dims or {})

    @property
    def names(self) -> Sequence[str]:
        """The names of the unconstrained coordinates, in order."""
        return self.native.names

    @property
    def ndim(self) -> int:
        """The number of unconstrained coordinates."""
        return self.native.ndim

    def logp_and_grad(self, q: Sequence[float]) -> Tuple[float, np.ndarray]:
        """``log p(q)`` and its gradient at the unconstrained point ``q``."""
        return self.native.logp_and_grad(list(map(float, q)))

    def __repr__(self) -> str:
        return f"shmc.Model({self.native.name!r}, ndim={self.ndim})"


def from_logp(
    logp_and_grad: Callable[[np.ndarray], Tuple[float, Any]],
    ndim: int,
    names: Optional[Sequence[str]] = None,
    *,
    memory_limit: Optional[int] = None,
) -> Model:
    """A model from a Python function ``logp_and_grad(q) -> (logp, grad)``.

    ``q`` is a float64 NumPy array of ``ndim`` unconstrained coordinates; ``logp`` is the log
    density (up to a constant) and ``grad`` its gradient, any array-like of ``ndim`` numbers
    (a JAX function under ``jax.jit(jax.value_and_grad(f))`` works as it is). A NaN or
    infinite ``logp`` rejects the proposal (a divergence), as on the command line; an
    exception stops the run and is re-raised with the chain and iteration where it happened.

    ``names``: one per coordinate (``"beta.1"``, ``"beta.2"`` group into ``beta``); without
    them the posterior holds one vector variable ``x``. Names that would not come back as the
    draws they name (a gap in the indices, a comma, ``lp__``) are refused at once.

    ``memory_limit`` (bytes; default half the machine's): ``ndim`` is checked against it before
    anything of that size is made.
    """
    if not callable(logp_and_grad):
        raise TypeError(f"logp_and_grad must be callable, got {type(logp_and_grad).__name__}")
    if isinstance(ndim, bool) or int(ndim) != ndim:
        raise TypeError(f"ndim must be a whole number of parameters, got {ndim!r}")
    ndim = int(ndim)
    if ndim < 1:
        raise ValueError(f"ndim must be at least 1, got {ndim}")
    if ndim > sys.maxsize:
        raise MemoryError(f"ndim={ndim}: more parameters than this machine can address")
    _shmc.check_dimension(ndim, memory_limit)
    if names is None:
        native = _shmc.from_callable(logp_and_grad, [f"x.{k + 1}" for k in range(ndim)])
        return Model(native, _layout.vector("x"))
    names = [str(n) for n in names]
    if len(names) != ndim:
        raise ValueError(f"names has {len(names)} entries, ndim is {ndim}")
    if len(set(names)) != ndim:
        raise ValueError("names must be distinct")
    _layout.check_names(names)
    return Model(_shmc.from_callable(logp_and_grad, names))


def model(name: str, **options: Any) -> Model:
    """A built-in model by its command-line name, with that model's options as keywords
    (``shmc.model("logistic", data="a9a")``, ``shmc.model("gaussian-conjugate", d=10)``); see
    ``shmc.models()`` for the names and each one's options."""
    return Model(_shmc.builtin(name, options))


def from_stan(
    program: str,
    data: Optional[Mapping[str, Any]] = None,
    *,
    seed: int = 1,
    stan_home: Optional[str] = None,
) -> Model:
    """A Stan program as a model: ``program`` is a ``.stan`` file's path or the program's text,
    compiled on first use with a Stan toolchain already on the machine (``stan_home``, else
    ``SHMC_STAN_HOME``, else the httpstan package of this interpreter; no download) and cached
    (``SHMC_CACHE_DIR``, else ``~/.cache/shmc``). A compiled library with BridgeStan's C
    interface (``.so``) loads as it is.

    ``data``: a dict of numbers, lists and NumPy arrays, or a CmdStan JSON file's path. Draws
    come back on the constrained scale under Stan's names (``theta``, ``Sigma`` with their
    shapes), transformed parameters and generated quantities included; ``seed`` seeds the
    model's construction and its generated quantities, as ``--stan-seed`` does.
    """
    options: Dict[str, Any] = {"stan_seed": int(seed)}
    if stan_home is not None:
        options["stan_home"] = str(stan_home)
    program = str(program)
    if program.endswith(".so") and os.path.isfile(program):
        options["stan_lib"] = program
    elif program.endswith(".stan") and os.path.isfile(program):
        options["stan_file"] = program
    elif "{" in program:
        options["stan_file"] = _stash(program, ".stan")
    else:
        raise FileNotFoundError(f"no Stan program at {program!r} (nor is it a program's text)")
    if isinstance(data, (str, os.PathLike)):
        options["data"] = str(data)
    elif data is not None:
        options["data"] = _stash(json.dumps(dict(data), default=_json_value), ".json")
    return Model(_shmc.builtin("stan", options))


def _json_value(value: Any) -> Any:
    """NumPy values as Stan's JSON takes them (arrays as nested lists, row-major)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"Stan data cannot hold a {type(value).__name__}")


def _stash(text: str, suffix: str) -> str:
    """``text`` in a file of the cache named by its hash, so the same program or data is one
    file (and the compiled library's cache finds it again)."""
    root = os.environ.get("SHMC_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "shmc"
    )
    folder = os.path.join(root, "stan", "inputs")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, hashlib.sha256(text.encode()).hexdigest()[:32] + suffix)
    if not os.path.isfile(path):
        partial = f"{path}.{os.getpid()}.partial"
        with open(partial, "w") as out:
            out.write(text)
        os.replace(partial, path)
    return path


def umbridge(url: str, name: Optional[str] = None, **options: Any) -> Model:
    """A model served over UM-Bridge at ``url`` (several instances: comma-separated), the
    served model ``name`` (default: the server's only one), as ``shmc sample --model umbridge``
    reads it (``umbridge_output="forward"``, ``noise=``, ``timeout=`` ...)."""
    return Model(_shmc.builtin("umbridge", {"url": url, "umbridge_model": name, **options}))


def models() -> Dict[str, Dict[str, Any]]:
    """The built-in models: each one's description, parameters and options (with defaults),
    as ``shmc models`` lists them."""
    return {
        name: {"description": d, "parameters": p, "options": dict(o)}
        for name, d, p, o in _shmc.builtin_models()
    }
