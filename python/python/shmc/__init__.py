"""shmc: surrogate-accelerated Hamiltonian Monte Carlo for Python.

Sample a Python log density (``from_logp``), a PyMC model (``from_pymc``), a Stan program
(``from_stan``), or one of shmc's
built-in or UM-Bridge-served models (``model``, ``umbridge``) with NUTS, HMC or the surrogate
methods (RNS-HMC, ARNS-HMC, VHMC, RMHMC, grids), and get ArviZ InferenceData back::

    import numpy as np, shmc
    idata = shmc.sample(shmc.from_logp(lambda q: (-0.5 * q @ q, -q), ndim=2), method="rns-hmc")

See ``help(shmc.sample)`` for the methods and their options.
"""

from ._model import Model, from_logp, from_stan, model, models, umbridge
from ._pymc import from_pymc
from ._sample import ConvergenceWarning, sample
from ._shmc import method_names as _method_names

try:
    from importlib.metadata import version as _version

    __version__ = _version("shmc")
except Exception:  # pragma: no cover - a source tree without metadata
    __version__ = "0+unknown"

#: The method names ``sample`` takes.
METHODS = tuple(_method_names())

__all__ = [
    "ConvergenceWarning",
    "Model",
    "METHODS",
    "from_logp",
    "from_pymc",
    "from_stan",
    "model",
    "models",
    "sample",
    "umbridge",
]
