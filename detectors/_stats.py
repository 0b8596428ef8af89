"""Robust statistics on arrays, shared by detectors: median/MAD noise, trends, changepoints,
mean-shift splits, autocorrelation, and the number formats of messages and evidence.

Every function accepts short, NaN-padded series and returns something sensible (never raises
on them): callers check lengths through the returned values.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import math
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

MAD_TO_SIGMA = 1.4826
#: scipy's `median_abs_deviation(..., scale="normal")` divisor, `scipy.special.ndtri(0.75)`
NORMAL_MAD_SCALE = 0.6744897501960817


def robust_sigma(values: np.ndarray) -> float:
    """Noise scale: MAD of first differences / sqrt(2), robust to trends and level shifts."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) < 3:
        return 0.0
    d = np.diff(v)
    return float(MAD_TO_SIGMA * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def mad_sigma(values: np.ndarray) -> float:
    """MAD-based sigma of the values themselves."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return 0.0
    return float(MAD_TO_SIGMA * np.median(np.abs(v - np.median(v))))


def mad_normal(values: np.ndarray) -> float:
    """scipy's `median_abs_deviation(values, scale="normal")`: NaN in, NaN out."""
    v = np.asarray(values, dtype=np.float64)
    return float(np.median(np.abs(v - np.median(v)))) / NORMAL_MAD_SCALE


def binom_cdf(k: np.ndarray | float, n: np.ndarray | int, p: np.ndarray | float) -> np.ndarray:
    """P(X ≤ k) for X ~ Binomial(n, p): `scipy.stats.binom.cdf` without importing scipy.stats
    (~1.5 s): the same ufunc, with the support handled as `rv_discrete` does."""
    from scipy.special import _ufuncs  # where scipy.stats.binom's boost ufuncs live

    k, n = np.floor(k), np.asarray(n)
    return np.where(k < 0, 0.0, np.where(k >= n, 1.0, _ufuncs._binom_cdf(k, n, p)))


def binom_sf(k: np.ndarray | float, n: np.ndarray | int, p: np.ndarray | float) -> np.ndarray:
    """P(X > k) for X ~ Binomial(n, p): `scipy.stats.binom.sf`, as `binom_cdf` is its cdf."""
    from scipy.special import _ufuncs

    k, n = np.floor(k), np.asarray(n)
    return np.where(k < 0, 1.0, np.where(k >= n, 0.0, _ufuncs._binom_sf(k, n, p)))


def theil_sen(x: np.ndarray, y: np.ndarray, max_points: int = 400) -> tuple[float, float]:
    """Theil–Sen slope (median of pairwise slopes) and intercept (median of y − slope·x), as
    scipy's `theilslopes(y, x, method="joint")` computes them (without its confidence
    interval, and without importing scipy.stats); long series are subsampled to `max_points`."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(x) < 2:
        return 0.0, float(y[0]) if len(y) else 0.0
    if len(x) > max_points:
        idx = np.linspace(0, len(x) - 1, max_points).astype(int)
        x, y = x[idx], y[idx]
    if np.ptp(x) == 0:
        return 0.0, float(np.median(y))
    dx = x[:, None] - x
    rising = dx > 0
    slope = np.median((y[:, None] - y)[rising] / dx[rising])
    return float(slope), float(np.median(y - slope * x))


def mann_kendall(y: np.ndarray, max_points: int = 400) -> tuple[float, float]:
    """Mann–Kendall trend test: (z statistic, two-sided p-value). Subsampled for long series.

    scipy's `kendalltau(arange(n), y)` tests the same S statistic but without the continuity
    correction (S − sign S), so its p-values differ: kept here."""
    y = np.asarray(y, dtype=np.float64)
    y = y[np.isfinite(y)]
    n = len(y)
    if n < 4:
        return 0.0, 1.0
    if n > max_points:
        y = y[np.linspace(0, n - 1, max_points).astype(int)]
        n = len(y)
    i, j = np.triu_indices(n, k=1)
    s = float(np.sign(y[j] - y[i]).sum())
    _, counts = np.unique(y, return_counts=True)
    var = (n * (n - 1) * (2 * n + 5) - float((counts * (counts - 1) * (2 * counts + 5)).sum())) / 18
    if var <= 0:
        return 0.0, 1.0
    z = (s - np.sign(s)) / math.sqrt(var)
    p = math.erfc(abs(z) / math.sqrt(2))
    return float(z), float(p)


def changepoints(values: np.ndarray, penalty_scale: float = 3.0, min_size: int = 5) -> list[int]:
    """Indices where the mean shifts, by ruptures' KernelCPD(linear) with a noise-based penalty.

    The penalty is `penalty_scale · σ² · log(n)` with σ from `robust_sigma` (BIC-like), so it
    follows the series' own noise rather than a magic constant. Returns change indices
    (the first index of each new segment), excluding the end.
    """
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) < 2 * min_size:
        return []
    sigma = robust_sigma(v) or float(np.std(v)) or 1.0
    return changepoints_sigma(v, sigma, penalty_scale, min_size)


def changepoints_sigma(
    x: np.ndarray, sigma: float, penalty_scale: float = 3.0, min_size: int = 5
) -> list[int]:
    """`changepoints` with the noise σ given by the caller (e.g. floored for a rounded series,
    where the MAD of differences is 0). No changepoints when σ ≤ 0 or the series is short.
    """
    n = len(x)
    if n < 2 * min_size or sigma <= 0:
        return []
    pen = penalty_scale * sigma * sigma * math.log(n)  # float ** raises on overflow, * gives inf
    if not math.isfinite(pen):
        return []  # noise beyond float range: no level shift can stand out of it
    path = _pelt_l2()(np.ascontiguousarray(x, dtype=np.float64).reshape(-1, 1), pen, min_size)
    bkps, at = [], n
    while at > 0:  # back along the path, as KernelCPD.predict does
        at = int(path[at])
        bkps.append(at)
    return bkps[-2::-1]


_PELT_MODULE = "ruptures.detection._detection.ekcpd"


@cache
def _pelt_l2() -> Callable[[np.ndarray, float, int], np.ndarray]:
    """ruptures' compiled PELT for `KernelCPD(kernel="linear")` (`ekcpd_pelt_L2`).

    Loaded from its file: `import ruptures` runs the package's `__init__`, which imports
    scipy.stats, scipy.signal and scipy.spatial (~2 s) for cost models not used here. Falls
    back to the ordinary import when the file is not where ruptures 1.1 keeps it.
    """
    spec = importlib.util.find_spec("ruptures")
    folder = (
        Path(spec.submodule_search_locations[0])
        if spec and spec.submodule_search_locations
        else None
    )
    files = (
        [
            folder / "detection" / "_detection" / f"ekcpd{s}"
            for s in importlib.machinery.EXTENSION_SUFFIXES
        ]
        if folder
        else []
    )
    found = next((f for f in files if f.is_file()), None)
    if found is None:
        from ruptures.detection._detection.ekcpd import ekcpd_pelt_L2

        return ekcpd_pelt_L2
    ext = importlib.util.spec_from_file_location(_PELT_MODULE, found)
    module = importlib.util.module_from_spec(ext)
    ext.loader.exec_module(module)
    return module.ekcpd_pelt_L2


def fmt(x: float | None, digits: int = 3) -> str:
    """A number for a message: 3 significant digits, scientific for tiny/huge values."""
    if x is None or not math.isfinite(x):
        return str(x)
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def sig(x: float, digits: int = 4) -> float:
    """A float rounded to `digits` significant digits, for evidence."""
    if not math.isfinite(x) or x == 0:
        return float(x)
    return float(f"{x:.{digits}g}")


def best_split(values: np.ndarray, min_side: int = 3, direction: int = 0) -> tuple[int, float]:
    """Index of the single mean shift that best splits `values` (CUSUM), and its t-like score.

    `direction` +1 keeps only upward shifts, -1 downward, 0 either. Returns (-1, 0.0) when the
    series is too short.
    """
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    if n < 2 * min_side:
        return -1, 0.0
    c = np.concatenate([[0.0], np.cumsum(v)])
    k = np.arange(min_side, n - min_side + 1)
    mean_l = c[k] / k
    mean_r = (c[n] - c[k]) / (n - k)
    diff = mean_r - mean_l
    gain = k * (n - k) / n * diff**2
    if direction:
        gain = np.where(np.sign(diff) == direction, gain, -1.0)
    best = int(np.argmax(gain))
    if gain[best] < 0:
        return -1, 0.0
    split = int(k[best])
    resid = np.concatenate([v[:split] - mean_l[best], v[split:] - mean_r[best]])
    sd = float(np.std(resid)) or 1e-12
    score = abs(float(diff[best])) / (sd * math.sqrt(1 / split + 1 / (n - split)))
    return split, score


def autocorrelation(values: np.ndarray, max_lag: int) -> np.ndarray:
    """Sample autocorrelation at lags 0..max_lag (FFT; the series is centered first)."""
    v = np.asarray(values, dtype=np.float64)
    v = v - v.mean() if len(v) else v
    n = len(v)
    if n < 2:
        return np.ones(1)
    size = 1 << math.ceil(math.log2(2 * n))
    with np.errstate(all="ignore"):  # absurd magnitudes overflow: no correlation to measure
        f = np.fft.rfft(v, size)
        acov = np.fft.irfft(f * np.conj(f), size)[: min(max_lag, n - 1) + 1]
    if not (math.isfinite(acov[0]) and acov[0] > 0):
        return np.zeros(len(acov))
    return acov / acov[0]
