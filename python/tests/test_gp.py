"""The Gaussian-process surrogates (#36) through shmc.sample's keywords: gp, inducing, gp_mean,
gp_gradients, the command line's --gp, --inducing, --gp-mean, --gp-gradients."""

import re

import numpy as np
import pytest

import shmc
from conftest import cli_draws, gaussian, within_4_mcse


@pytest.mark.parametrize(
    "options, setting",
    [
        ({"gp": "full"}, "approximation: Full"),
        ({"gp": "fitc", "inducing": 60}, "approximation: Fitc { inducing: 60 }"),
    ],
)
def test_gp_and_fitc_hmc_moments_within_4_mcse(options, setting):
    # 300 warmup iterations, states collected after 100: 200 training states per fit.
    idata = shmc.sample(
        shmc.from_logp(gaussian, 2), method="rns-hmc", seed=13, tune=300, train_after=100,
        progress=False, **options,
    )
    settings = idata.posterior.attrs["method_settings"]
    assert "Gp(GpFitter" in settings and setting in settings, settings
    within_4_mcse(idata)
    assert (idata.sample_stats["surrogate_acceptance"] > 0.3).all()


def test_gp_gradients_fit_values_and_gradients():
    # 50 states per fit, 150 observations with their gradients.
    idata = shmc.sample(
        shmc.from_logp(gaussian, 2), method="rns-hmc", gp="full", gp_gradients=True,
        gp_mean="quadratic", seed=17, tune=150, train_after=100, progress=False,
    )
    settings = idata.posterior.attrs["method_settings"]
    assert "gradients: true" in settings and "mean: Quadratic" in settings, settings
    within_4_mcse(idata)


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"gp": "fitcc"}, ValueError, r'^option gp="fitcc": must be "full" or "fitc"$'),
        ({"gp": "full", "gp_mean": "cubic"}, ValueError, r"^option gp_mean=\"cubic\": must be"),
        ({"gp": "fitc", "inducing": 0}, ValueError, r"^inducing must be at least 1, got 0$"),
        ({"gp": "full", "inducing": 5}, ValueError, r'^inducing is for gp="fitc"$'),
        ({"inducing": 5}, ValueError, r'^inducing is for gp="fitc"$'),
        ({"gp_mean": "quadratic"}, ValueError, r'^gp_mean is for gp="full" or "fitc"$'),
        ({"gp_gradients": True}, ValueError, r'^gp_gradients is for gp="full"$'),
        ({"gp": "fitc", "gp_gradients": True}, ValueError, r"^gp_gradients applies to the full"),
        ({"gp": "full", "inducing": -1}, TypeError, r"^option inducing=-1 for method rns-hmc"),
        ({"gp": "full", "method": "grid-hmc"}, TypeError, r"^unknown option gp for method grid"),
        ({"gp": "full", "method": "arns-hmc"}, ValueError, r"only the network learns online"),
        ({"gp": "full", "surrogate": "saved.surrogate"}, ValueError, r"^gp does not apply with"),
    ],
)
def test_a_bad_gp_keyword_is_one_exception_naming_it(options, error, message):
    options = {"method": "rns-hmc", **options}
    with pytest.raises(error, match=message) as raised:
        shmc.sample(shmc.from_logp(gaussian, 2), chains=1, tune=20, draws=5, progress=False,
                    **options)
    assert "\n" not in str(raised.value)


def test_fitc_on_a_builtin_model_gives_the_command_lines_draws(tmp_path):
    # 300 warmup iterations: 182 training states, of which FITC keeps 100 drawn with the seed.
    gp = ["--method", "rns-hmc", "--gp", "fitc", "--inducing", "100", "--gp-mean", "quadratic"]
    cli = cli_draws(tmp_path, "banana", gp, warmup=300)
    idata = shmc.sample(
        shmc.model("banana"), method="rns-hmc", gp="fitc", inducing=100, gp_mean="quadratic",
        seed=3, chains=1, tune=300, draws=60, progress=False,
    )
    assert np.array_equal(idata.posterior["beta"].values, cli.posterior["beta"].values)


def test_fitcs_default_inducing_points_are_the_command_lines(tmp_path):
    cli_draws(tmp_path, "banana", ["--method", "rns-hmc", "--gp", "fitc"], warmup=50)
    header = (tmp_path / "cli" / "banana-1.csv").read_text()
    inducing = re.search(r"^#\s+inducing = (\d+)$", header, re.MULTILINE).group(1)
    idata = shmc.sample(
        shmc.model("banana"), method="rns-hmc", gp="fitc", seed=3, chains=1, tune=50,
        draws=60, progress=False,
    )
    assert f"Fitc {{ inducing: {inducing} }}" in idata.posterior.attrs["method_settings"]
