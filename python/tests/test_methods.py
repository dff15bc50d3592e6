"""mlda and sgld in the package: mapped to the command line's methods with its options."""

import warnings

import numpy as np
import pytest

import shmc
from conftest import cli_draws, gaussian


@pytest.mark.parametrize("fine_warmup", [False, True])
def test_mlda_on_the_builtin_pde_gives_the_command_lines_draws(tmp_path, fine_warmup):
    flags = ["--fine-warmup"] if fine_warmup else []
    cli = cli_draws(
        tmp_path, "elliptic-pde", ["--mesh", "20", "--method", "mlda", "--levels", "10",
                                   "--subchains", "3", *flags])
    idata = shmc.sample(
        shmc.model("elliptic-pde", mesh=20), method="mlda", levels=[10], subchains=[3],
        fine_warmup=fine_warmup, seed=3, chains=1, tune=100, draws=60, progress=False,
    )
    assert idata.posterior.attrs["method"] == "mlda"
    assert idata.posterior.attrs["approximate"] == 0
    name = list(idata.posterior.data_vars)[0]
    assert np.array_equal(idata.posterior[name].values, cli.posterior[name].values)


def test_mlda_on_a_python_model_is_one_value_error():
    with pytest.raises(ValueError, match="levels") as raised:
        shmc.sample(shmc.from_logp(gaussian, 2), method="mlda", chains=1, tune=10, draws=10,
                    progress=False)
    assert "\n" not in str(raised.value)


def test_sgld_is_labelled_approximate_and_gives_the_command_lines_draws(tmp_path):
    cli = cli_draws(tmp_path, "logistic", ["--method", "sgld", "--sgld-batch", "40"])
    with pytest.warns(UserWarning, match="method sgld's draws are APPROXIMATE"):
        idata = shmc.sample(
            shmc.model("logistic"), method="sgld", sgld_batch=40, seed=3, chains=1,
            tune=100, draws=60, progress=False,
        )
    assert idata.posterior.attrs["approximate"] == 1
    assert np.array_equal(idata.posterior["beta"].values, cli.posterior["beta"].values)
    with pytest.raises(ValueError, match="do not apply to sgld, which takes one Langevin step"):
        shmc.sample(shmc.model("logistic"), method="sgld", steps=5, progress=False)


def test_an_exact_method_gives_no_approximate_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # 20 draws are too few to converge: that warning is another test's.
        warnings.simplefilter("ignore", shmc.ConvergenceWarning)
        shmc.sample(shmc.from_logp(gaussian, 2), method="hmc", chains=1, tune=50, draws=20,
                    progress=False)


def test_a_design_level_gives_the_command_lines_draws(tmp_path):
    flags = ["--mesh", "20", "--method", "rns-hmc", "--train-from", "laplace",
             "--train-states", "60", "--hidden", "20", "--design-level", "10"]
    cli = cli_draws(tmp_path, "elliptic-pde", flags)
    idata = shmc.sample(
        shmc.model("elliptic-pde", mesh=20), method="rns-hmc", train_from="laplace",
        train_states=60, hidden=20, design_level=10, seed=3, chains=1, tune=100, draws=60,
        progress=False,
    )
    assert "design_level: Some(10)" in idata.posterior.attrs["method_settings"]
    name = list(idata.posterior.data_vars)[0]
    assert np.array_equal(idata.posterior[name].values, cli.posterior[name].values)


def test_a_design_level_on_a_model_without_levels_is_one_value_error():
    with pytest.raises(ValueError, match="design_level needs a model with coarser levels"):
        shmc.sample(shmc.from_logp(gaussian, 2), method="rns-hmc", train_from="laplace",
                    design_level=4, chains=1, tune=10, draws=10, progress=False)
