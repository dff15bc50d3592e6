"""shmc.from_stan: a Stan program compiled with httpstan's toolchain, sampled as the command line
samples it."""

import json
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


def test_init_by_name_starts_the_chains_there_from_the_command_line_and_from_python(tmp_path):
    # CmdStan's init file: every parameter by name, on its constrained scale; a step of 1e-9
    # leaves the first draw where the chain started.
    init = {"sigma": 0.7, "w": [0.2, 0.3, 0.5], "z": [[1.0, 2.0], [3.0, 4.0]]}
    path = tmp_path / "init.json"
    path.write_text(json.dumps(init))
    data = PROGRAMS / "constrained.json"
    out = tmp_path / "cli"
    run = subprocess.run(
        [shmc_binary(), "sample", "--model", "stan", "--stan-file", str(CONSTRAINED),
         "--data", str(data), "--method", "hmc", "--step-size", "1e-9", "--steps", "1",
         "--no-adapt-mass", "--chains", "1", "--warmup", "0", "--draws", "3", "--init",
         str(path), "--output", str(out), "--quiet"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    rows = [line for line in (out / "stan-1.csv").read_text().splitlines()
            if line and not line.startswith("#")]
    header, first = rows[0].split(","), [float(v) for v in rows[1].split(",")]
    cli = dict(zip(header, first))
    model = shmc.from_stan(str(CONSTRAINED), data=str(data))
    idata = shmc.sample(model, method="hmc", step_size=1e-9, steps=1, adapt_mass=False,
                        chains=1, tune=0, draws=3, init=init, progress=False)
    posterior = idata.posterior
    assert abs(posterior["sigma"].values[0, 0] - 0.7) < 1e-6
    assert np.allclose(posterior["w"].values[0, 0], init["w"], atol=1e-6)
    assert np.allclose(posterior["z"].values[0, 0], init["z"], atol=1e-6)
    assert abs(cli["z.2.1"] - 3.0) < 1e-6 and abs(cli["sigma"] - 0.7) < 1e-6, cli
    assert posterior["sigma"].values[0, 0] == cli["sigma"]


def test_init_by_name_that_stan_cannot_read_is_one_clear_error(tmp_path):
    model = shmc.from_stan(str(CONSTRAINED), data=str(PROGRAMS / "constrained.json"))
    z = [[0.0, 0.0], [0.0, 0.0]]
    with pytest.raises(ValueError, match="variable name=w"):
        shmc.sample(model, chains=1, tune=10, draws=10, init={"sigma": 1.0, "z": z})
    with pytest.raises(ValueError, match="init: .*Lower bounded variable is -1"):
        shmc.sample(model, chains=1, tune=10, draws=10,
                    init={"sigma": -1.0, "w": [0.2, 0.3, 0.5], "z": z})
    normal = shmc.from_logp(lambda q: (-0.5 * float(q @ q), -q), ndim=2)
    with pytest.raises(ValueError, match="read by a Stan model"):
        shmc.sample(normal, chains=1, tune=10, draws=10, init={"x": [0.0, 0.0]})
    bad = tmp_path / "bad.json"
    bad.write_text('{"sigma": -1.0, "w": [0.2, 0.3, 0.5], "z": [[0, 0], [0, 0]]}')
    run = subprocess.run(
        [shmc_binary(), "sample", "--model", "stan", "--stan-file", str(CONSTRAINED),
         "--data", str(PROGRAMS / "constrained.json"), "--init", str(bad),
         "--output", str(tmp_path / "out"), "--quiet"],
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0
    assert run.stderr.count("\n") == 1 and f"{bad}:1: initial values by name" in run.stderr, \
        run.stderr
