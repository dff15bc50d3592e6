"""What the package's tests share: optional modules that skip a test outside CI (and fail
it under CI=true, where .ci/run installs them), the CLI binary, small models."""

import importlib
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

IN_CI = os.environ.get("CI") == "true"


def need(module: str):
    """The module, or a skip saying it is missing (a failure under CI=true)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if IN_CI:
            raise
        pytest.skip(f"{module} is not installed (pip install -r python/tests/requirements.txt)")


def shmc_binary() -> str:
    """The `shmc` command line: $SHMC_BIN (cargo test sets it), target/release/shmc, or on the
    PATH; else a skip (a failure under CI=true)."""
    candidates = [
        os.environ.get("SHMC_BIN"),
        str(Path(__file__).resolve().parents[2] / "target" / "release" / "shmc"),
        shutil.which("shmc"),
    ]
    for found in candidates:
        if found and Path(found).is_file():
            return found
    if IN_CI:
        raise FileNotFoundError("the shmc binary (set SHMC_BIN)")
    pytest.skip("the shmc binary is not built (cargo build --release -p shmc-cli)")


#: A correlated 2-D Gaussian: covariance [[1, 0.8], [0.8, 2]], mean (1, -1).
MEAN = np.array([1.0, -1.0])
COV = np.array([[1.0, 0.8], [0.8, 2.0]])
PRECISION = np.linalg.inv(COV)


def gaussian(q):
    """log p and its gradient of the correlated Gaussian."""
    r = q - MEAN
    g = PRECISION @ r
    return -0.5 * r @ g, -g


def within_4_mcse(idata):
    """Each coordinate's mean and sd within 4 MCSE of the correlated Gaussian's."""
    az = need("arviz")
    summary = az.summary(idata, round_to="none")
    for k in range(2):
        row = summary.loc[f"x[{k}]"]
        assert abs(row["mean"] - MEAN[k]) <= 4 * row["mcse_mean"], (k, row)
        assert abs(row["sd"] - np.sqrt(COV[k, k])) <= 4 * row["mcse_sd"], (k, row)


def cli_draws(tmp_path, model, args, warmup=100):
    """The command line's draws of built-in `model` (seed 3, one chain, `warmup` warmup
    iterations, 60 draws) with `args`, as ArviZ reads them."""
    az = need("arviz")
    out = tmp_path / "cli"
    run = subprocess.run(
        [shmc_binary(), "sample", "--model", model, "--seed", "3", "--chains", "1",
         "--warmup", str(warmup), "--draws", "60", "--output", str(out), "--quiet", *args],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    return az.from_cmdstan([str(out / f"{model}-1.csv")])
