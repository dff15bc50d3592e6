"""Built-in and served models by name, as the command line names them."""

import subprocess

import numpy as np
import pytest

import shmc
from conftest import need, shmc_binary


def test_a_builtin_model_gives_the_command_lines_draws(tmp_path):
    az = need("arviz")
    out = tmp_path / "cli"
    run = subprocess.run(
        [shmc_binary(), "sample", "--model", "banana", "--method", "nuts", "--seed", "7",
         "--chains", "2", "--warmup", "300", "--draws", "200", "--output", str(out), "--quiet"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    cli = az.from_cmdstan([str(out / f"banana-{k}.csv") for k in (1, 2)])
    idata = shmc.sample(
        shmc.model("banana"), method="nuts", seed=7, chains=2, tune=300, draws=200, progress=False
    )
    assert idata.posterior["beta"].shape == (2, 200, 2)
    assert np.array_equal(idata.posterior["beta"].values, cli.posterior["beta"].values)
    assert np.array_equal(idata.sample_stats["lp"].values, cli.sample_stats["lp"].values)


def test_model_options_and_names():
    model = shmc.model("logistic", n=50, d=3)
    assert model.ndim == 3
    assert "logistic" in shmc.models()
    with pytest.raises(ValueError, match="mesh does not apply to model banana"):
        shmc.model("banana", mesh=3)
    with pytest.raises(TypeError, match="unknown option meshh for model banana"):
        shmc.model("banana", meshh=3)
    with pytest.raises(ValueError, match='unknown model "bananna"'):
        shmc.model("bananna")


def test_an_unreachable_umbridge_server_is_one_clear_error():
    with pytest.raises(ConnectionError, match="UM-Bridge server http://127.0.0.1:9"):
        shmc.umbridge("http://127.0.0.1:9", "posterior", retries=0, timeout=1)


def test_output_dir_never_writes_over_a_users_file_of_a_chains_name(tmp_path):
    mine = tmp_path / "banana-1.csv"
    mine.write_text("my precious notes\n")
    for overwrite in (False, True):
        with pytest.raises(ValueError, match="banana-1.csv: not a file of an earlier shmc run"):
            shmc.sample(shmc.model("banana"), chains=2, tune=10, draws=10, progress=False,
                        output_dir=tmp_path, overwrite=overwrite)
        assert mine.read_text() == "my precious notes\n"


def test_output_dir_names_the_files_for_the_model_as_the_command_line_does(tmp_path):
    shmc.sample(shmc.model("banana"), chains=2, tune=10, draws=10, progress=False,
                output_dir=tmp_path)
    written = sorted(p.name for p in tmp_path.glob("*.csv"))
    assert written == ["banana-1.csv", "banana-2.csv"], written
    assert "model = banana" in (tmp_path / "banana-1.csv").read_text()


def test_cubic_without_laplace_training_is_refused_as_on_the_command_line():
    with pytest.raises(ValueError, match="cubic.*is for a network trained on the Laplace"):
        shmc.sample(shmc.model("banana"), method="rns-hmc", chains=1, tune=10, draws=10,
                    progress=False, cubic=True)
