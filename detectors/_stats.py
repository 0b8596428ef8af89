"""Robust statistics shared by detectors: cleaning, median/MAD, trends, changepoints.

Every function accepts short, NaN-padded series and returns something sensible (never raises
on them): callers check lengths through the returned values.
"""

from __future__ import annotations

import math

import numpy as np

MAD_TO_SIGMA = 1.4826


def finite(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop points whose value is NaN/inf."""
    values = np.asarray(values, dtype=np.float64)
    mask = np.isfinite(values)
    return np.asarray(steps)[mask], values[mask]


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


def rolling_median(values: np.ndarray, window: int) -> np.ndarray:
    """Centered rolling median (edges use the available points). O(n·window) but vectorised."""
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    if n == 0 or window <= 1:
        return v.copy()
    half = window // 2
    padded = np.pad(v, half, mode="edge")
    view = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    return np.nanmedian(view, axis=1)[:n]


def trailing_median(values: np.ndarray, window: int) -> np.ndarray:
    """Median of the `window` points before each point (causal; first point uses itself)."""
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    if n == 0:
        return v.copy()
    padded = np.concatenate([np.full(window, v[0]), v])
    view = np.lib.stride_tricks.sliding_window_view(padded, window)[:n]
    return np.nanmedian(view, axis=1)


def spike_scores(values: np.ndarray, window: int = 15) -> np.ndarray:
    """Robust z-score of each point against its rolling median and the series' noise."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0:
        return v.copy()
    base = rolling_median(v, window)
    resid = v - base
    sigma = mad_sigma(resid)
    if sigma <= 0:
        sigma = float(np.nanmean(np.abs(resid))) or 1.0
    return resid / sigma


def theil_sen(x: np.ndarray, y: np.ndarray, max_points: int = 400) -> tuple[float, float]:
    """Theil–Sen slope and intercept (median of pairwise slopes), subsampled for long series."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(x) < 2:
        return 0.0, float(y[0]) if len(y) else 0.0
    if len(x) > max_points:
        idx = np.linspace(0, len(x) - 1, max_points).astype(int)
        x, y = x[idx], y[idx]
    i, j = np.triu_indices(len(x), k=1)
    dx = x[j] - x[i]
    ok = dx != 0
    if not ok.any():
        return 0.0, float(np.median(y))
    slope = float(np.median((y[j] - y[i])[ok] / dx[ok]))
    intercept = float(np.median(y - slope * x))
    return slope, intercept


def mann_kendall(y: np.ndarray, max_points: int = 400) -> tuple[float, float]:
    """Mann–Kendall trend test: (z statistic, two-sided p-value). Subsampled for long series."""
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
    import ruptures as rpt

    n = len(x)
    if n < 2 * min_size or sigma <= 0:
        return []
    pen = penalty_scale * sigma * sigma * math.log(n)  # float ** raises on overflow, * gives inf
    if not math.isfinite(pen):
        return []  # noise beyond float range: no level shift can stand out of it
    algo = rpt.KernelCPD(kernel="linear", min_size=min_size).fit(x.reshape(-1, 1))
    return [int(b) for b in algo.predict(pen=pen) if b < n]


def fmt(x: float | None, digits: int = 3) -> str:
    """A number for a message: 3 significant digits, scientific for tiny/huge values."""
    if x is None or not math.isfinite(x):
        return str(x)
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"
