"""shmc.from_pymc: PyMC's log density on the unconstrained space, draws returned as
pm.sample returns them."""

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


@pytest.mark.parametrize("build", [_eight_schools, _logistic])
def test_rns_hmc_agrees_with_pymcs_nuts_with_pymcs_names(build):
    pm = need("pymc")
    model = build(pm)
    idata = shmc.sample(shmc.from_pymc(model), method="rns-hmc", seed=3, progress=False)
    reference = pm.sample(
        model=model, chains=4, cores=1, random_seed=3, progressbar=False,
        compute_convergence_checks=False,
    )
    names = sorted(reference.posterior.data_vars)
    assert sorted(idata.posterior.data_vars) == names
    for name in names:
        assert idata.posterior[name].dims == reference.posterior[name].dims, name
        assert idata.posterior[name].shape == reference.posterior[name].shape, name
        for dim in reference.posterior[name].dims[2:]:
            assert list(idata.posterior[dim].values) == list(reference.posterior[dim].values)
    if "tau" in names:
        assert float(idata.posterior["tau"].min()) > 0  # the constrained scale
    _agree(idata, reference, names)
