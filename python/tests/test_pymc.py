"""shmc.from_pymc: PyMC's log density on the unconstrained space, draws returned as
pm.sample returns them, agreeing with nutpie's draws."""

import numpy as np
import pytest

import shmc
from conftest import need


def _eight_schools(pm):
    y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    sigma = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
    with pm.Model(coords={"school": [f"school {i}" for i in range(8)]}) as model:
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfNormal("tau", 5)
        z = pm.Normal("z", 0, 1, dims="school")
        theta = pm.Deterministic("theta", mu + tau * z, dims="school")
        pm.Normal("y", theta, sigma, observed=y, dims="school")
    return model


def _logistic(pm):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 3))
    y = rng.random(200) < 1 / (1 + np.exp(-(x @ np.array([1.0, -0.5, 0.25]) + 0.3)))
    with pm.Model(coords={"feature": ["a", "b", "c"]}) as model:
        alpha = pm.Normal("alpha", 0, 2)
        beta = pm.Normal("beta", 0, 2, dims="feature")
        pm.Bernoulli("y", logit_p=alpha + pm.math.dot(x, beta), observed=y)
    return model


def _agree(ours, theirs, names):
    """Every entry's mean within 4 combined MCSE of the other run's."""
    az = need("arviz")
    a = az.summary(ours, var_names=names, round_to="none")
    b = az.summary(theirs, var_names=names, round_to="none")
    assert list(a.index) == list(b.index)
    for row in a.index:
        tolerance = 4 * np.hypot(a.loc[row, "mcse_mean"], b.loc[row, "mcse_mean"])
        assert abs(a.loc[row, "mean"] - b.loc[row, "mean"]) <= tolerance, (row, a.loc[row], b.loc[row])


def _pymc_layout(model):
    """What PyMC names and shapes a posterior as, from the model itself (no sampling): each
    free variable and deterministic with its dims and their coordinates."""
    names = sorted([v.name for v in model.free_RVs] + [d.name for d in model.deterministics])
    dims = {name: tuple(model.named_vars_to_dims.get(name, ())) for name in names}
    return names, dims, {k: list(v) for k, v in model.coords.items()}


def _has_pymcs_layout(idata, model, chains, draws):
    names, dims, coords = _pymc_layout(model)
    assert sorted(idata.posterior.data_vars) == names
    for name in names:
        assert idata.posterior[name].dims == ("chain", "draw") + dims[name], name
        sizes = tuple(len(coords[d]) for d in dims[name])
        assert idata.posterior[name].shape == (chains, draws) + sizes, name
        for dim in dims[name]:
            assert list(idata.posterior[dim].values) == coords[dim], (name, dim)
    return names


@pytest.mark.parametrize("build", [_eight_schools, _logistic])
def test_rns_hmc_agrees_with_nutpie_with_pymcs_names(build):
    pm = need("pymc")
    nutpie = need("nutpie")
    model = build(pm)
    idata = shmc.sample(shmc.from_pymc(model), method="rns-hmc", seed=3, progress=False)
    # nutpie's NUTS, as #37 asks: its defaults but for 4 chains of 1000 draws, a fixed seed.
    reference = nutpie.sample(
        nutpie.compile_pymc_model(model), chains=4, tune=500, draws=1000, cores=2, seed=3,
        progress_bar=False,
    )
    names = _has_pymcs_layout(idata, model, 4, 1000)
    # nutpie's names are PyMC's, beside which it keeps the transformed values ("tau_log__").
    assert set(names) <= set(reference.posterior.data_vars), list(reference.posterior.data_vars)
    if "tau" in names:
        assert float(idata.posterior["tau"].min()) > 0  # the constrained scale
    _agree(idata, reference, names)
