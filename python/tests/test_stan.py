"""shmc.from_stan: a Stan program compiled with httpstan's toolchain, sampled as the command line
samples it."""

import subprocess
from pathlib import Path

import numpy as np
import pytest

import shmc
from conftest import need, shmc_binary

PROGRAMS = Path(__file__).resolve().parents[2] / "host" / "tests" / "stan"
CONSTRAINED = PROGRAMS / "constrained.stan"


@pytest.fixture(autouse=True)
def stan_toolchain():
    """httpstan carries stanc and Stan's headers: without it there is nothing to compile with."""
    need("httpstan")


def test_a_stan_program_gives_the_command_lines_draws(tmp_path):
    az = need("arviz")
    data = PROGRAMS / "constrained.json"
    out = tmp_path / "cli"
    run = subprocess.run(
        [shmc_binary(), "sample", "--model", "stan", "--stan-file", str(CONSTRAINED),
         "--data", str(data), "--method", "nuts", "--seed", "5", "--chains", "2",
         "--warmup", "200", "--draws", "100", "--output", str(out), "--quiet"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    cli = az.from_cmdstan(sorted(str(p) for p in out.glob("*.csv")))
    model = shmc.from_stan(str(CONSTRAINED), data={"alpha": np.array([1.0, 2.0, 5.0])})
    idata = shmc.sample(model, method="nuts", seed=5, chains=2, tune=200, draws=100,
                        progress=False)
    posterior = idata.posterior
    assert posterior["z"].shape == (2, 100, 2, 2)
    assert posterior["w"].shape == (2, 100, 3)
    assert np.allclose(posterior["w"].values.sum(axis=-1), 1.0)
    for name in ("sigma", "w", "z", "log_sigma", "above"):
        assert np.array_equal(posterior[name].values, cli.posterior[name].values), name


def test_the_programs_text_and_a_data_file_are_taken_as_they_are():
    program = "parameters { real x; } model { x ~ normal(3, 1); }"
    idata = shmc.sample(shmc.from_stan(program), seed=2, chains=1, tune=200, draws=400,
                        progress=False)
    x = idata.posterior["x"].values
    assert abs(x.mean() - 3) < 0.4, x.mean()
    model = shmc.from_stan(str(CONSTRAINED), data=str(PROGRAMS / "constrained.json"))
    assert model.ndim == 1 + 2 + 4


def test_bad_programs_and_data_are_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="line 1"):
        shmc.from_stan("parameters { real x } model { }")
    with pytest.raises(FileNotFoundError, match="no Stan program"):
        shmc.from_stan(str(tmp_path / "absent.stan"))
    with pytest.raises(ValueError, match="variable name=alpha"):
        shmc.from_stan(str(CONSTRAINED))
    with pytest.raises(TypeError, match="Stan data cannot hold a"):
        shmc.from_stan(str(CONSTRAINED), data={"alpha": object()})
