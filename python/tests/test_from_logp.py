"""shmc.from_logp and shmc.sample on Python log densities."""

import os
import signal
import subprocess
import sys
import textwrap
import traceback
import warnings

import numpy as np
import pytest

import shmc
from conftest import gaussian, within_4_mcse


@pytest.mark.parametrize("method", ["nuts", "rns-hmc"])
def test_correlated_gaussian_moments_within_4_mcse(method):
    options = {"hidden": 300} if method == "rns-hmc" else {}
    idata = shmc.sample(
        shmc.from_logp(gaussian, 2), method=method, seed=11, progress=False, **options
    )
    assert idata.posterior["x"].shape == (4, 1000, 2)
    assert idata.posterior.attrs["method"] == method
    within_4_mcse(idata)
    if method == "rns-hmc":
        stats = idata.sample_stats
        assert (stats["surrogate_acceptance"] > 0.3).all()
        # One exact U per surrogate trajectory when sampling, not a trajectory of gradients.
        assert (stats["exact_evaluations"] < 2 * 1000).all(), stats["exact_evaluations"].values


def test_a_run_that_cannot_converge_warns_and_a_converged_one_does_not():
    short = dict(method="hmc", seed=1, chains=2, tune=10, draws=40, progress=False)
    with pytest.warns(shmc.ConvergenceWarning, match="ess_bulk: bulk ESS below 200"):
        idata = shmc.sample(shmc.from_logp(gaussian, 2), **short)
    assert "bulk ESS below 200 (100 per chain)" in idata.posterior.attrs["warnings"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", shmc.ConvergenceWarning)
        idata = shmc.sample(shmc.from_logp(gaussian, 2), seed=11, progress=False)
    assert idata.posterior.attrs["warnings"] == ""


def test_nuts_with_the_low_rank_metric_has_the_moments_and_other_methods_refuse_it():
    idata = shmc.sample(shmc.from_logp(gaussian, 2), metric="low-rank", seed=11, progress=False)
    within_4_mcse(idata)
    with pytest.raises(ValueError, match="low-rank is adapted by NUTS alone, not by hmc"):
        shmc.sample(shmc.from_logp(gaussian, 2), method="hmc", metric="low-rank", progress=False)


def test_same_seed_same_draws():
    model = shmc.from_logp(gaussian, 2, names=["a", "b"])
    runs = [
        shmc.sample(model, seed=5, chains=2, tune=200, draws=100, progress=False)
        for _ in range(2)
    ]
    assert np.array_equal(runs[0].posterior["a"].values, runs[1].posterior["a"].values)
    other = shmc.sample(model, seed=6, chains=2, tune=200, draws=100, progress=False)
    assert not np.array_equal(runs[0].posterior["a"].values, other.posterior["a"].values)


def test_an_exception_surfaces_with_its_traceback_and_place():
    calls = []

    def failing(q):
        calls.append(1)
        # Well after every chain's start (counted over all chains: the place varies).
        if len(calls) == 3000:
            raise ZeroDivisionError("the model broke")
        return gaussian(q)

    with pytest.raises(ZeroDivisionError, match="the model broke") as raised:
        shmc.sample(shmc.from_logp(failing, 2), method="hmc", progress=False)
    frames = [f.name for f in traceback.extract_tb(raised.value.__traceback__)]
    assert "failing" in frames, frames
    notes = getattr(raised.value, "__notes__", [])
    assert any("in chain" in n and "iteration" in n for n in notes), notes


def test_nan_logp_counts_as_divergence():
    def half_plane(q):
        if q[0] > 1.5:
            return float("nan"), np.zeros(2)
        return gaussian(q)

    idata = shmc.sample(
        shmc.from_logp(half_plane, 2), method="hmc", seed=2, chains=2, progress=False
    )
    diverging = int(idata.sample_stats["diverging"].sum())
    assert 0 < diverging < idata.sample_stats["diverging"].size / 2, diverging
    assert float(idata.posterior["x"][..., 0].max()) <= 1.5
    plain = shmc.sample(shmc.from_logp(gaussian, 2), method="hmc", seed=2, chains=2, progress=False)
    assert int(plain.sample_stats["diverging"].sum()) == 0


def test_a_gradient_of_the_wrong_shape_is_a_clear_error():
    with pytest.raises(ValueError, match=r"the gradient has shape \(3,\), expected \(2,\)"):
        shmc.sample(
            shmc.from_logp(lambda q: (0.0, np.zeros(3)), 2), chains=1, progress=False
        )


def test_options_that_do_not_apply_are_refused_by_name():
    model = shmc.from_logp(gaussian, 2)
    with pytest.raises(TypeError, match="unknown option max_depth for method rns-hmc"):
        shmc.sample(model, method="rns-hmc", max_depth=3, progress=False)
    with pytest.raises(ValueError, match="max_depth must be at least 1"):
        shmc.sample(model, max_depth=0, progress=False)
    with pytest.raises(ValueError, match='unknown method "nutz"'):
        shmc.sample(model, method="nutz", progress=False)


def test_warmup_groups_on_request():
    idata = shmc.sample(
        shmc.from_logp(gaussian, 2),
        chains=2,
        tune=150,
        draws=50,
        save_warmup=True,
        progress=False,
    )
    assert idata.warmup_posterior["x"].shape == (2, 150, 2)
    assert "diverging" in idata.warmup_sample_stats


def test_ctrl_c_returns_the_draws_so_far_labelled_interrupted(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(
            """
            import signal, sys, time
            signal.signal(signal.SIGINT, signal.default_int_handler)
            import shmc
            def slow(q):
                time.sleep(0.0002)
                return -0.5 * q @ q, -q
            print("started", flush=True)
            idata = shmc.sample(shmc.from_logp(slow, 2), method="hmc", tune=100,
                                draws=10**7, progress=False)
            print("interrupted", idata.posterior.attrs["interrupted"],
                  idata.posterior.sizes["draw"], flush=True)
            """
        )
    )
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "started"
    import time

    time.sleep(3)
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    words = out.split()
    assert child.returncode == 0 and words[:2] == ["interrupted", "1"], out
    assert int(words[2]) > 0, out


def test_a_nuts_rs_error_is_one_line_without_a_rust_backtrace():
    # nuts-rs refuses a start with a zero gradient ("Invalid initial point") and formats the
    # anyhow error it wraps with the backtrace captured with it; the user gets one line.
    flat = shmc.from_logp(lambda q: (0.0, np.zeros(2)), 2)
    with pytest.raises(ValueError) as raised:
        shmc.sample(flat, method="nuts", chains=1, tune=10, draws=10, progress=False)
    message = str(raised.value)
    assert message.startswith("chain 1: NUTS: "), message
    assert "\n" not in message and "backtrace" not in message.lower(), message


def test_a_dimension_beyond_the_memory_limit_is_refused_before_anything_is_built():
    with pytest.raises(MemoryError, match="a 1000000000-parameter model"):
        shmc.from_logp(gaussian, ndim=10**9)
    with pytest.raises(MemoryError, match="raise memory_limit or lower ndim"):
        shmc.from_logp(gaussian, ndim=10**8, memory_limit=10**8)
    with pytest.raises(MemoryError, match="more parameters than this machine can address"):
        shmc.from_logp(gaussian, ndim=10**30)
    with pytest.raises(TypeError, match="ndim must be a whole number of parameters, got 1.5"):
        shmc.from_logp(gaussian, ndim=1.5)


def test_a_billion_parameters_are_refused_in_under_100_mb():
    # In a child process, which reports its own peak resident set: VmHWM of /proc/self/status,
    # which starts afresh at exec (ru_maxrss would carry over this pytest process's peak).
    code = (
        "import shmc\n"
        "try:\n    shmc.from_logp(lambda q: (0.0, q), ndim=10**9)\n"
        "except MemoryError:\n    pass\n"
        "else:\n    raise SystemExit('not refused')\n"
        "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])\n"
    )
    if not os.path.exists("/proc/self/status"):
        pytest.skip("no /proc/self/status to read a peak resident set from")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    peak_mib = int(out.stdout.split()[-1]) / 1024
    assert peak_mib < 100, f"peak RSS {peak_mib:.0f} MiB"


@pytest.mark.parametrize(
    "names, message",
    [
        (["a.0", "a.1"], "'a.0': indices start at 1"),
        (["a.1", "a.3"], "2 entries of a, whose largest indices \\(3\\) span 3"),
        (["e.1", "e.3000000000"], "span 3000000000"),
        (["a", "a.1"], "variable a indices of different ranks"),
        (["m.1.1", "m.2"], "variable m indices of different ranks"),
        (["a,b", "c"], "names\\[0\\] = 'a,b': a name must be non-empty"),
        (["a\nb", "c"], "without a comma, quote or line break"),
        (["lp__", "c"], "names ending in __ are the sampler's columns"),
    ],
)
def test_names_that_would_not_come_back_as_their_draws_are_refused_at_once(names, message):
    with pytest.raises(ValueError, match=message):
        shmc.from_logp(gaussian, 2, names=names)


def test_a_full_grid_of_indexed_names_comes_back_in_its_shape():
    names = ["m.1.1", "m.2.1", "m.1.2", "m.2.2"]
    model = shmc.from_logp(lambda q: (-0.5 * q @ q, -q), 4, names=names)
    idata = shmc.sample(model, seed=3, chains=1, tune=100, draws=50, progress=False)
    assert idata.posterior["m"].shape == (1, 50, 2, 2)
    assert not np.isnan(idata.posterior["m"].values).any()
