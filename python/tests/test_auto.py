"""method="auto": the plan it chooses, recorded in attrs and the CSV headers, makes the draws of
the explicit run it names (and the command line's), and the options that would set a plan are
refused."""

import time

import numpy as np
import pytest

import shmc
from conftest import cli_draws, gaussian, within_4_mcse


def test_auto_on_a_cheap_model_is_nuts_low_rank_with_the_command_lines_draws(tmp_path):
    cli = cli_draws(tmp_path, "banana", ["--method", "auto"])
    idata = shmc.sample(
        shmc.model("banana"), method="auto", seed=3, chains=1, tune=100, draws=60,
        progress=False, output_dir=tmp_path / "py",
    )
    attrs = idata.posterior.attrs
    assert attrs["auto"].startswith("nuts-low-rank ("), attrs["auto"]
    assert attrs["method"] == "nuts"
    explicit = shmc.sample(
        shmc.model("banana"), method="nuts", metric="low-rank", seed=3, chains=1, tune=100,
        draws=60, progress=False,
    )
    assert explicit.posterior.attrs.get("auto") is None
    for name in idata.posterior.data_vars:
        assert np.array_equal(idata.posterior[name].values, explicit.posterior[name].values)
        assert np.array_equal(idata.posterior[name].values, cli.posterior[name].values)
    header = (tmp_path / "py" / "banana-1.csv").read_text()
    assert f"#   shmc_auto = {attrs['auto']}\n" in header


def slow_gaussian(q):
    """The correlated Gaussian, made expensive by a sleep: a model whose gradient costs ms."""
    time.sleep(0.002)
    return gaussian(q)


def test_auto_on_an_expensive_model_is_the_surrogate_plan_and_targets_the_posterior():
    idata = shmc.sample(
        shmc.from_logp(slow_gaussian, 2), method="auto", seed=3, chains=2, tune=300, draws=600,
        progress=False,
    )
    attrs = idata.posterior.attrs
    assert attrs["auto"].startswith("rns-hmc-laplace ("), attrs["auto"]
    assert attrs["method"] == "rns-hmc"
    within_4_mcse(idata)


@pytest.mark.parametrize(
    "option", [{"metric": "laplace"}, {"steps": 5}, {"step_size": 0.1}, {"hidden": 50},
               {"train_from": "laplace"}, {"adapt_mass": False}],
)
def test_auto_refuses_the_options_that_would_set_its_plan(option):
    with pytest.raises(TypeError, match="auto chooses its own plan") as raised:
        shmc.sample(shmc.model("banana"), method="auto", chains=1, tune=10, draws=10,
                    progress=False, **option)
    assert next(iter(option)) in str(raised.value)
    assert "\n" not in str(raised.value)
