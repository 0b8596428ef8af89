"""The detectors' light replacements for scipy.stats, scipy.optimize and ruptures give the
numbers those libraries give (bit for bit), so findings do not move with the import savings."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import ruptures as rpt
from logscope.detectors import kl, policy
from logscope.detectors._fits import minimize_bounded
from logscope.detectors._stats import (
    NORMAL_MAD_SCALE,
    binom_cdf,
    binom_sf,
    changepoints_sigma,
    mad_normal,
    theil_sen,
)
from scipy import optimize, special, stats

ROOT = Path(__file__).resolve().parent.parent
RNG = np.random.default_rng(20261202)


def test_constants_are_scipys() -> None:
    assert kl.Z99 == stats.norm.ppf(0.995)
    assert policy.CHI2_1_MEDIAN == stats.chi2.median(1)
    assert NORMAL_MAD_SCALE == special.ndtri(0.75)
    assert 2 * special.gammaincinv(0.5, 0.5) == stats.chi2.median(1)
    z = np.array([-3.0, 0.0, 1.5, 8.0, 40.0])
    np.testing.assert_array_equal(special.ndtr(-z), stats.norm.sf(z))
    p = np.array([1e-300, 1e-12, 0.01, 0.5])
    np.testing.assert_array_equal(-special.ndtri(p), stats.norm.isf(p))
    gain = np.array([0.0, 0.5, 3.0, 50.0, np.inf])
    np.testing.assert_array_equal(special.chdtrc(2, gain), stats.chi2.sf(gain, 2))


def test_binomial_tails_match_scipy_stats_inside_and_outside_the_support() -> None:
    n = RNG.integers(1, 3000, 20_000)
    k = np.floor(RNG.uniform(-3, 1.1, n.size) * n)  # below 0, inside, at and beyond n
    p = RNG.random(n.size)
    p[:50], p[50:100] = 0.0, 1.0
    np.testing.assert_array_equal(binom_cdf(k, n, p), stats.binom.cdf(k, n, p))
    np.testing.assert_array_equal(binom_sf(k, n, p), stats.binom.sf(k, n, p))
    assert float(binom_cdf(2, 40, 0.5)) == stats.binom.cdf(2, 40, 0.5)  # scalars, as kl calls it


@pytest.mark.parametrize("n", [1, 2, 3, 4, 17, 200])
def test_mad_normal_matches_median_abs_deviation(n: int) -> None:
    for values in (RNG.normal(size=n), np.round(RNG.normal(size=n)), np.full(n, 2.5)):
        assert mad_normal(values) == stats.median_abs_deviation(values, scale="normal")
    with_nan = RNG.normal(size=n)
    with_nan[0] = np.nan
    assert math.isnan(mad_normal(with_nan))
    assert math.isnan(stats.median_abs_deviation(with_nan, scale="normal"))


@pytest.mark.parametrize("n", [2, 3, 5, 60, 401])
def test_theil_sen_matches_theilslopes(n: int) -> None:
    x = np.arange(n, dtype=np.float64) * 2.0
    tied_x = np.sort(RNG.integers(0, max(2, n // 3), n)).astype(np.float64)
    if np.ptp(tied_x) == 0:
        tied_x[-1] += 1
    for xs in (x, tied_x):
        for y in (0.1 * xs + RNG.normal(size=n), np.round(RNG.normal(size=n))):
            fit = stats.theilslopes(y, xs, method="joint")
            if n > 400:  # theil_sen subsamples, as it always has
                idx = np.linspace(0, n - 1, 400).astype(int)
                fit = stats.theilslopes(y[idx], xs[idx], method="joint")
            assert theil_sen(xs, y) == (fit.slope, fit.intercept)


def _ruptures(x: np.ndarray, pen: float, min_size: int) -> list[int]:
    algo = rpt.KernelCPD(kernel="linear", min_size=min_size).fit(x.reshape(-1, 1))
    return [int(b) for b in algo.predict(pen=pen) if b < len(x)]


def test_changepoints_match_kernel_cpd() -> None:
    cases = [np.zeros(40), np.full(30, 1e9), np.round(RNG.normal(size=120))]
    for _ in range(40):
        n = int(RNG.integers(10, 600))
        x = RNG.normal(size=n) * RNG.uniform(0.1, 5)
        for at in RNG.integers(0, n, int(RNG.integers(0, 4))):
            x[at:] += RNG.normal() * 4
        cases.append(x)
    for x in cases:
        for min_size in (3, 5):
            for sigma in (0.3, 1.0):
                pen = 3.0 * sigma * sigma * math.log(len(x))
                assert changepoints_sigma(x, sigma, 3.0, min_size) == _ruptures(x, pen, min_size)
    assert changepoints_sigma(np.r_[np.zeros(50), np.ones(50)], 0.1) == [50]


def _traced(f: Callable[[float], float], calls: list[float]) -> Callable[[float], float]:
    """`f`, noting where it is evaluated."""

    def g(t: float) -> float:
        calls.append(t)
        return f(t)

    return g


def test_minimize_bounded_takes_scipys_steps() -> None:
    def plateau(t: float) -> float:  # the leak fit's shape: capped where no ramp rises
        return min((t - 0.7) ** 2 * 3 + math.sin(5 * t), 0.4)

    functions = [
        lambda t: (t - 0.3) ** 2,
        lambda t: abs(t - 1.2),
        lambda t: math.cos(3 * t),
        lambda t: 1.0,
        plateau,
    ]
    for f in functions:
        for lo, hi in ((-1.0, 2.0), (0.5, 0.6), (-3.0, -2.0)):
            for xatol in (1e-5, 1e-3):
                calls: list[float] = []
                res = optimize.minimize_scalar(
                    _traced(f, calls), bounds=(lo, hi), method="bounded", options={"xatol": xatol}
                )
                ours: list[float] = []
                got = minimize_bounded(_traced(f, ours), lo, hi, xatol)
                assert got == (res.x, res.fun)
                assert ours == calls


def test_detectors_import_neither_scipy_stats_nor_optimize_nor_ruptures() -> None:
    code = (
        "import sys, numpy as np\n"
        "from logscope.detectors.registry import detector_classes\n"
        "from logscope.detectors._stats import changepoints\n"
        "detector_classes()\n"
        "assert changepoints(np.r_[np.zeros(30), np.ones(30)]) == [30]\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ruptures'"
        " or m.startswith(('scipy.stats', 'scipy.optimize'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.split() == ["['ruptures.detection._detection.ekcpd']"]


@pytest.mark.parametrize("kind", ["heavy-tailed", "rounded", "huge", "with inf"])
def test_running_median_matches_scipys_median_filter(kind: str, monkeypatch) -> None:
    """numpy's windows (used while scipy.ndimage is not imported) give exactly
    scipy.ndimage.median_filter(mode="nearest"), shrunk or not."""
    from logscope.detectors._series import running_median
    from scipy.ndimage import median_filter

    monkeypatch.delitem(sys.modules, "scipy.ndimage")  # as in a process that never needed it
    rng = np.random.default_rng(7)
    for _ in range(300):
        n, width = int(rng.integers(1, 300)), int(rng.integers(2, 60))
        shrink = bool(rng.integers(2))
        v = {
            "heavy-tailed": rng.standard_t(2, n),
            "rounded": np.round(rng.normal(size=n), 1),
            "huge": rng.normal(size=n) * 1e300,
            "with inf": np.where(rng.random(n) < 0.1, np.inf, rng.normal(size=n)),
        }[kind]
        size = min(width | 1, n | 1) if shrink else width | 1
        expected = median_filter(v, size=size, mode="nearest")
        assert np.array_equal(running_median(v, width, shrink=shrink), expected)
        assert "scipy.ndimage" not in sys.modules  # the numpy path was the one compared
