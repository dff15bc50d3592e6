"""``shmc.sample``: runs the native sampler and returns ArviZ InferenceData."""

from __future__ import annotations

import json
import os
import warnings
from typing import Any, Mapping, Optional, Union

from . import _inference, _shmc
from ._model import Model, _json_value

_METHODS_DOC = """
Methods (``method=``), all with the command line's defaults:

- ``"auto"``: times the model's log density and gradient at a few start points before the
  chains start, and runs ``"nuts"`` with the low-rank metric where a surrogate cannot pay, or
  ``"rns-hmc"`` trained on Laplace draws with NUTS trees on the surrogate where the gradient
  costs at least four of the surrogate's. ``attrs["auto"]`` holds the plan and the timings;
  every draw comes from that one exact kernel. Options: ``target_accept`` only (the plan is
  auto's to choose; name the method to set more).
- ``"nuts"`` (the default here, as in PyMC): the No-U-Turn Sampler (nuts-rs, the sampler
  nutpie wraps); step size and diagonal mass matrix adapted in warmup. Options:
  ``max_depth`` (10), ``target_accept`` (0.8).
- ``"hmc"``: exact HMC, trajectories of 1..``steps`` (20) leapfrog steps, step size adapted
  to ``target_accept`` unless ``step_size`` is given; ``fixed_steps=True`` for exactly
  ``steps``.
- ``"rns-hmc"``: exact HMC through warmup collecting states, a random network (``hidden``:
  2000 units) fitted to them at the end of warmup, then surrogate trajectories judged by the
  exact log density (the draws target the exact posterior). ``train_from="laplace"`` trains
  (300 units, ``train_states`` = 200 Laplace draws) before the chains start and proposes
  from the first iteration: the fastest to a usable posterior for near-Gaussian ones.
  ``exact_warmup=N`` fits after N exact iterations; ``surrogate_steps_factor`` (1, ``"auto"``,
  ``"nuts"``), ``surrogate_transitions`` (K, ``"W:S"`` or ``"auto"``: the chosen W:S per chain
  in ``attrs["surrogate_transitions"]``), ``fit`` (``"potential"``/``"score"``), ``ridge``,
  ``activation``, ``surrogate_scale``, ``inputs``, ``train_after``, ``cubic``.
  ``gp="full"`` or ``gp="fitc"``: a Gaussian process instead of the network (Rasmussen
  2003's surrogate; squared-exponential ARD kernel, hyperparameters by maximising the
  marginal likelihood; the exact MH step keeps the chain exact). The full GP uses every
  training state (O(n^3) to fit, 3 n^2 x 8 bytes); FITC ``inducing`` points (500) drawn from
  them (O(n M^2)). ``gp_mean``: ``"constant"`` (default) or ``"quadratic"`` (a least-squares
  quadratic, the GP on its residuals); ``gp_gradients=True`` (full GP only) fits the states'
  gradients too, n(d+1) observations. The command line's ``--gp``, ``--inducing``,
  ``--gp-mean``, ``--gp-gradients``; recorded in ``attrs["method_settings"]``.
- ``"arns-hmc"``: the network updated online through warmup (``start_after`` 300,
  ``start_error`` 0.1, ``adapt_rate`` 0.5).
- ``"vhmc"``: the network trained online by score matching inside a Laplace approximation,
  blended with it by ``tau`` (200); ``approximate_acceptance=True`` accepts with the
  surrogate (APPROXIMATE).
- ``"rmhmc"``: Riemannian-manifold HMC with the model's own metric (built-in models that
  offer one: logistic, banana, elliptic-pde); ``rmhmc_step_size``, ``rmhmc_steps``,
  ``fixed_point_tolerance``, ``fixed_point_max_iterations``, ``reversibility_tolerance``.
- ``"rns-rmhmc"``: RNS-HMC's network, then RMHMC on its potential and SoftAbs'd Hessian
  (``softabs_alpha``, ``diagonal_metric``).
- ``"grid-hmc"`` / ``"sg-hmc"``: a force grid (``cell`` 0.1, ``force_interpolation``) or a
  sparse grid (``level`` 5) over ``domain`` (``"laplace"``, ``"states"`` or
  ``"lo:hi,lo:hi,..."``), for low dimensions.
- ``"mlda"``: multilevel delayed acceptance over the model's coarser levels, for models
  that have them: the built-in ``elliptic-pde`` by name (``shmc.model("elliptic-pde",
  mesh=20)``); a Python or PyMC model has none and is refused. ``levels`` (the coarser
  levels, coarsest first: elements per side, default ``[10, 15]``), ``subchains`` (each
  level's steps per proposal to the level above, default ``[4, 2]``), ``fine_warmup``
  (``False``: the finest coarse level judges warmup, which then costs no fine solve; the
  model itself judges every kept draw either way).
- ``"sgld"``: APPROXIMATE stochastic-gradient Langevin dynamics on minibatches, for the
  built-in row-sum models (``logistic``); no Metropolis-Hastings step, so the draws are
  biased by the step size (a warning says so, ``attrs["approximate"] = 1``).
  ``sgld_batch`` (500 rows), ``sgld_a`` (1e-4), ``sgld_b`` (1), ``sgld_gamma`` (0.55): the
  step size ``a (b + t)**-gamma``.

Options for every method: ``metric`` (``"diagonal"`` or ``"laplace"``; ``"low-rank"``, nutpie's
adaptation, for ``"nuts"`` alone), ``adapt_mass``,
``init`` (start values: a list on the unconstrained scale, or for a Stan model a dict of every
parameter's constrained value by name, as a CmdStan init file holds them), ``init_radius`` (2), ``ess_check_every`` (100),
``memory_limit`` (bytes; default half the machine's), ``overwrite`` (with ``output_dir``),
``design_level`` (a coarser level of a model that has levels, e.g. ``8`` on
``shmc.model("elliptic-pde", mesh=16)``: the Laplace approximation and a surrogate fitted before
sampling are evaluated there, every draw still judged by the model).
An option that does not apply to the method is refused by name.
"""


class ConvergenceWarning(UserWarning):
    """A convergence check the draws failed (R-hat above 1.01, bulk or tail ESS below 100 per
    chain, divergences, tree depth at its limit, E-BFMI below 0.3), as CmdStan's ``diagnose``
    and PyMC warn: the estimates should not be trusted as they are. ``attrs["warnings"]`` holds
    the same lines."""


def sample(
    model: Model,
    *,
    method: str = "nuts",
    chains: int = 4,
    tune: int = 1000,
    draws: int = 1000,
    seed: Optional[int] = None,
    cores: Optional[int] = None,
    target_ess: Optional[float] = None,
    progress: bool = True,
    output_dir: Optional[Union[str, os.PathLike]] = None,
    save_warmup: bool = False,
    **method_options: Any,
):
    """Samples ``model`` and returns ``arviz.InferenceData``.

    ``model``: from ``shmc.from_logp``, ``shmc.from_pymc``, ``shmc.model`` or
    ``shmc.umbridge``. ``chains`` run at once, each on a thread of its own (``cores`` is
    accepted for PyMC's signature; a value below ``chains`` only warns). ``tune`` warmup
    iterations and ``draws`` kept draws per chain; ``seed`` (default 1, as the command line):
    the same seed gives the same draws, and the same draws as ``shmc sample --seed`` on a
    built-in model. ``target_ess``: stop once every parameter's bulk and tail ESS reach it
    (``draws`` is then the most). ``output_dir``: also write CmdStan CSVs there as the chains
    run. ``save_warmup``: add ``warmup_posterior`` and ``warmup_sample_stats``.

    Ctrl-C stops the chains after their current iteration and returns the draws made so far,
    with ``attrs["interrupted"] = True``. The GIL is released while the chains run; a Python
    log density takes it for each call.

    ``sample_stats`` holds per draw ``lp``, ``acceptance_rate``, ``step_size``,
    ``tree_depth``, ``n_steps``, ``diverging`` and ``energy``, and per chain
    ``exact_evaluations``, ``exact_gradients``, ``surrogate_gradients`` (and, for the
    surrogate methods, ``surrogate_acceptance`` and ``surrogate_holdout_gradient_error``).
    """
    if not isinstance(model, Model):
        raise TypeError(
            "model must come from shmc.from_logp, shmc.from_pymc, shmc.model or shmc.umbridge, "
            f"got {type(model).__name__}"
        )
    for name, value in (("chains", chains), ("tune", tune), ("draws", draws)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a whole number of at least 0, got {value!r}")
    if cores is not None and cores < chains:
        warnings.warn(
            f"cores={cores} is ignored: shmc runs every chain on a thread of its own",
            stacklevel=2,
        )
    seed = 1 if seed is None else int(seed)
    if isinstance(method_options.get("init"), Mapping):
        # Values by name, on the model's own scale: JSON, as a CmdStan init file holds them.
        method_options["init"] = json.dumps(dict(method_options["init"]), default=_json_value)
    result = _shmc.sample(
        model.native,
        method,
        chains,
        tune,
        draws,
        seed,
        None if target_ess is None else float(target_ess),
        bool(save_warmup),
        None if output_dir is None else os.fspath(output_dir),
        bool(progress),
        method_options,
    )
    attrs = {
        "inference_library_version": __import__("shmc").__version__,
        "sampling_time": result["wall_seconds"],
        "tuning_steps": tune,
        "method": result["method"],
        # method="auto": the plan it chose and the timings it chose on (left out otherwise).
        "auto": result["auto"],
        "method_settings": result["settings"],
        "seed": seed,
        "chains": chains,
        "draws": draws,
        "model": model.native.name,
        "interrupted": int(result["interrupted"]),
        "approximate": int(result["approximate"]),
        "target_ess": target_ess,
        "target_ess_reached": None
        if "target_ess_reached" not in result
        else int(result["target_ess_reached"]),
        "report": result["report"],
        # The failed convergence checks, one line each ("" when all passed).
        "warnings": "\n".join(message for _, message in result["warnings"]),
        "output_dir": None if output_dir is None else os.fspath(output_dir),
        # The resolved W:S of each chain (what auto chose): rerunning with it makes the same draws.
        "surrogate_transitions": None
        if not any("surrogate_transitions" in c for c in result["chains"])
        else ",".join(c.get("surrogate_transitions", "") for c in result["chains"]),
    }
    if result["approximate"]:
        warnings.warn(
            f"method {method}'s draws are APPROXIMATE: no exact Metropolis-Hastings step "
            "corrects them (attrs['approximate'] = 1)",
            stacklevel=2,
        )
    for check, message in result["warnings"]:
        warnings.warn(f"{check}: {message}", ConvergenceWarning, stacklevel=2)
    if result["interrupted"]:
        warnings.warn(
            "interrupted: the InferenceData holds the draws made before the stop",
            stacklevel=2,
        )
    return _inference.to_inference_data(result, model, attrs)


sample.__doc__ = (sample.__doc__ or "") + _METHODS_DOC
