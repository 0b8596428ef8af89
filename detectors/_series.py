"""The signal toolkit of the metric detectors: a `Series` (one metric's finite points and the
log's print resolution: loading, slicing, values at given steps, the noise rounding adds) and
the array operations every detector shares: noise scales, running median and mean, binning,
stretches of consecutive points.

Everything takes short, NaN-padded, irregularly stepped or `.3f`-rounded series and returns
empty results (or None) instead of raising. Long series are binned along the step axis so the
heavy work runs on at most a few thousand points whatever the run length.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

from logscope.aliases import resolve
from logscope.model import Run

from ._stats import mad_sigma, robust_sigma


@dataclass
class Series:
    """One metric's finite points, sorted by step, with the print resolution of the log."""

    metric: str
    steps: np.ndarray
    values: np.ndarray
    resolution: float | None = None

    @classmethod
    def read(cls, run: Run, metric: str | None) -> Series:
        """`metric`'s finite points (NaN/inf dropped; of a step logged twice, the later value);
        empty when `metric` is None or not in the run."""
        if metric is None:
            empty = np.array([], dtype=np.int64), np.array([], dtype=np.float64)
            return cls("", *empty, run.value_resolution)
        steps, values = run.series(metric)
        keep = np.isfinite(values)
        steps, values = steps[keep], np.asarray(values[keep], dtype=np.float64)
        if len(steps) > 1:
            last = np.concatenate([np.diff(steps) != 0, [True]])
            steps, values = steps[last], values[last]
        return cls(metric, steps, values, run.value_resolution)

    @classmethod
    def load(cls, run: Run, *concepts: str, min_points: int = 1) -> Series | None:
        """The first of `concepts` the run logs with finite points; None when there is none,
        or when it has fewer than `min_points`."""
        for concept in concepts:
            metric = resolve(run, concept)
            if metric is None:
                continue
            s = cls.read(run, metric)
            if len(s):
                return s if len(s) >= min_points else None
        return None

    @classmethod
    def pair(cls, run: Run, first: str, second: str) -> tuple[Series, Series, np.ndarray] | None:
        """Two concepts' series and the steps both log; None when the run lacks either."""
        a, b = resolve(run, first), resolve(run, second)
        if a is None or b is None:
            return None
        x, y = cls.read(run, a), cls.read(run, b)
        return x, y, np.intersect1d(x.steps, y.steps, assume_unique=True)

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index: slice) -> Series:
        return Series(self.metric, self.steps[index], self.values[index], self.resolution)

    def step_at(self, index: int) -> int:
        """The step of point `index`, clipped into the series."""
        index = min(max(int(index), 0), len(self.steps) - 1)
        return int(self.steps[index])

    def at(self, steps: np.ndarray) -> np.ndarray:
        """The values at `steps` (NaN where the series has none)."""
        out = np.full(len(steps), np.nan)
        if len(self.steps) == 0:
            return out
        idx = np.clip(np.searchsorted(self.steps, steps), 0, len(self.steps) - 1)
        hit = self.steps[idx] == steps
        out[hit] = self.values[idx[hit]]
        return out

    @property
    def quant_sigma(self) -> float:
        """Noise that the log's rounding alone adds (`rounding_sigma`)."""
        return rounding_sigma(self.resolution)


# ---- noise -------------------------------------------------------------------------------------


def rounding_sigma(resolution: float | None) -> float:
    """Noise that rounding alone adds: a uniform error of ±resolution has σ = res/√3."""
    return resolution / math.sqrt(3) if resolution else 0.0


def noise_floor(values: np.ndarray, resolution: float | None) -> float:
    """Noise scale of a series (`robust_sigma`, else `mad_sigma`), never below what the print
    resolution alone adds."""
    sigma = robust_sigma(values)
    if sigma <= 0:
        sigma = mad_sigma(values)
    return max(sigma, rounding_sigma(resolution))


def noise_sigma(x: np.ndarray) -> float:
    """Point-to-point noise: `robust_sigma`, or — when most differences are exactly 0 (a metric
    pinned at a cap, or constant stretches) — the same statistic over the non-zero differences.
    """
    sigma = robust_sigma(x)
    if sigma > 0:
        return sigma
    d = np.diff(np.asarray(x, dtype=np.float64))
    nz = d[np.isfinite(d) & (d != 0)]
    if len(nz) >= 3:
        return mad_sigma(nz) / math.sqrt(2)
    return float(np.std(x)) if len(x) else 0.0


def tail_sigma(resid: np.ndarray) -> float:
    """Noise of residuals that allows for heavy tails: the larger of the MAD-based σ and the
    95th percentile of |residual| / 1.96. Both are σ for Gaussian noise; for Student-t noise
    with 3 degrees of freedom the second is ~1.4× the first, so rare healthy excursions count
    for fewer noise units. Upward spikes are a few points and barely move either."""
    r = np.asarray(resid, dtype=np.float64)
    r = r[np.isfinite(r)]
    if len(r) == 0:
        return 0.0
    return max(mad_sigma(r), float(np.quantile(np.abs(r - np.median(r)), 0.95)) / 1.96)


# ---- smoothing ---------------------------------------------------------------------------------


def running_median(values: np.ndarray, width: int, *, shrink: bool = True) -> np.ndarray:
    """Centred running median over `width | 1` points; the edges repeat the nearest value.

    A window wider than the series shrinks to the series' length (made odd), unless `shrink`
    is False: then the edge values are repeated as far as the window reaches.
    """
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0 or width <= 1:
        return v.copy()
    size = min(width | 1, len(v) | 1) if shrink else width | 1
    if (
        "scipy.ndimage" not in sys.modules
        and len(v) * size <= _NUMPY_MEDIAN_CELLS
        and not np.isnan(v).any()
    ):
        # the middle value of each window, as scipy's filter picks it (an odd window holds one)
        half = size // 2
        padded = np.concatenate([np.full(half, v[0]), v, np.full(half, v[-1])])
        windows = np.lib.stride_tricks.sliding_window_view(padded, size)
        return np.partition(windows, half, axis=1)[:, half]
    from scipy.ndimage import median_filter  # imported on use: scipy.ndimage costs ~0.5 s CPU

    return median_filter(v, size=size, mode="nearest")


# Until scipy.ndimage is imported, and up to this many window cells (n × width), the running
# median is numpy's (the same values, 2-5x slower a call): a short run then imports no scipy at
# all, while a process that has it (fleet workers, long runs) uses scipy's filter. Wider, or
# with NaN (whose place in scipy's order numpy does not reproduce), scipy's filter, which does
# not hold every window in memory.
_NUMPY_MEDIAN_CELLS = 1 << 20


def odd_width(window: int, n: int) -> int:
    """`window`, at most the largest odd number of points ≤ n (a window inside the series)."""
    return min(window, n if n % 2 else n - 1)


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Centered moving average; the edges average over the points available."""
    return moving_averages(values, np.array([window]))[0]


def moving_averages(values: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """`moving_average` for each of several windows at once: one row per window."""
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    w = np.clip(np.asarray(windows, dtype=np.int64), 1, max(n, 1))[:, None]
    c = np.concatenate([[0.0], np.cumsum(v)])
    i = np.arange(n)
    lo = np.clip(i - w // 2, 0, n)
    hi = np.clip(i + (w - w // 2), 0, n)
    return np.where(w > 1, (c[hi] - c[lo]) / np.maximum(hi - lo, 1), v)


# ---- binning -----------------------------------------------------------------------------------


def bin_width(steps: np.ndarray, max_points: int) -> float:
    """Step width of bins so that the run's span fits in `max_points` bins (≥ the log stride)."""
    if len(steps) < 2:
        return 1.0
    span = float(steps[-1] - steps[0])
    stride = float(np.median(np.diff(steps)))
    return max(stride, 1.0, span / max(max_points - 1, 1))


def binned(
    steps: np.ndarray, values: np.ndarray, max_points: int = 2000
) -> tuple[np.ndarray, np.ndarray]:
    """Reduce to at most `max_points` points: (bin step, bin median), one per non-empty bin.

    Short series come back unchanged. The bin step is the first step in the bin, so a
    change found at a bin is located at a real step. A bin holding a NaN has a NaN median.
    """
    if len(steps) <= max_points:
        return steps, values
    width = bin_width(steps, max_points)
    idx = np.floor((steps - steps[0]) / width).astype(np.int64)
    starts = np.flatnonzero(np.concatenate([[True], np.diff(idx) != 0]))
    bins = np.arange(len(starts))
    labels = np.repeat(bins, np.diff(np.append(starts, len(steps))))
    from scipy import ndimage  # imported on use: scipy.ndimage costs ~0.25 s

    medians = np.asarray(ndimage.median(values, labels=labels, index=bins), dtype=np.float64)
    medians[np.add.reduceat(np.isnan(values), starts) > 0] = np.nan
    return steps[starts], medians


def regular_grid(
    steps: np.ndarray, values: np.ndarray, max_points: int = 2000
) -> tuple[np.ndarray, np.ndarray, float]:
    """Values on a regular step grid (bin means, gaps linearly interpolated): (grid, vals, width)."""
    if len(steps) == 0:
        return steps, values, 1.0
    width = bin_width(steps, max_points)
    idx = np.floor((steps - steps[0]) / width + 1e-9).astype(np.int64)
    m = int(idx[-1]) + 1
    sums = np.bincount(idx, weights=values, minlength=m)
    counts = np.bincount(idx, minlength=m)
    grid = steps[0] + width * np.arange(m)
    have = counts > 0
    vals = np.empty(m)
    vals[have] = sums[have] / counts[have]
    if not have.all():
        vals[~have] = np.interp(grid[~have], grid[have], vals[have])
    return grid, vals, width


def bin_medians(values: np.ndarray, max_points: int) -> tuple[np.ndarray, int]:
    """(medians of consecutive bins of points, bin size): at most `max_points` bins."""
    n = len(values)
    size = max(1, math.ceil(n / max_points))
    if size == 1:
        return values.astype(np.float64), 1
    m = n // size
    head = values[: m * size].reshape(m, size)
    meds = np.median(head, axis=1)
    if n > m * size:
        meds = np.append(meds, np.median(values[m * size :]))
    return meds, size


# ---- stretches ---------------------------------------------------------------------------------


def stretches(mask: np.ndarray, min_length: int = 1) -> list[tuple[int, int]]:
    """(start, stop) of each run of True in `mask` at least `min_length` long, stop exclusive."""
    if len(mask) == 0:
        return []
    d = np.diff(np.concatenate([[0], np.asarray(mask).astype(np.int8), [0]]))
    starts, stops = np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()
    return [(a, b) for a, b in zip(starts, stops, strict=True) if b - a >= min_length]
