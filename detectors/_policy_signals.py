"""Signal shapes shared by the KL and policy detectors (LS1xx): series loading with rounding
awareness, level transitions (binned changepoints refined at full resolution) and robust spikes.

Everything here takes short, NaN-padded, irregularly logged or `.3f`-rounded series and returns
empty results rather than raising.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy.ndimage import median_filter

from logscope.aliases import resolve
from logscope.model import Run

from ._stats import MAD_TO_SIGMA, finite, mad_sigma, robust_sigma

#: Long series are reduced to at most this many bin medians before ruptures runs
#: (KernelCPD cost grows ~n²; 2,000 points take milliseconds).
MAX_CPD_POINTS = 2000


@dataclass
class Series:
    """One metric's finite points, sorted by step, with the print resolution of the log."""

    metric: str
    steps: np.ndarray
    values: np.ndarray
    resolution: float | None

    def __len__(self) -> int:
        return len(self.values)

    @property
    def quant_sigma(self) -> float:
        """Noise that rounding alone adds: a uniform error of ±resolution has σ = res/√3."""
        return self.resolution / math.sqrt(3) if self.resolution else 0.0

    def step_at(self, index: int) -> int:
        index = min(max(int(index), 0), len(self.steps) - 1)
        return int(self.steps[index])


def load(run: Run, concept: str) -> Series | None:
    """The run's series for a concept (finite points only), or None when absent/empty."""
    metric = resolve(run, concept)
    if metric is None:
        return None
    steps, values = run.series(metric)
    steps, values = finite(steps, values)
    if len(values) == 0:
        return None
    return Series(metric, steps.astype(np.int64), values, run.value_resolution)


def log_floor(values: np.ndarray, floor: float) -> np.ndarray:
    """log(max(x, floor)): multiplicative noise becomes additive; zeros/rounded zeros stay finite."""
    return np.log(np.maximum(values, floor))


def positive_floor(values: np.ndarray, resolution: float | None) -> float:
    """A floor for logs of a positive metric: the print resolution, else a small quantile."""
    pos = values[values > 0]
    low = float(np.quantile(pos, 0.05)) * 0.5 if len(pos) else 1e-12
    if resolution:
        return max(resolution, low if low > 0 else resolution)
    return max(low, 1e-12)


def smooth(values: np.ndarray, width: int) -> np.ndarray:
    """Centred running median (odd width; edges use the nearest value)."""
    if len(values) == 0 or width <= 1:
        return np.asarray(values, dtype=np.float64).copy()
    width = min(width | 1, len(values) | 1)
    return median_filter(np.asarray(values, dtype=np.float64), size=width, mode="nearest")


def bin_medians(values: np.ndarray, max_points: int = MAX_CPD_POINTS) -> tuple[np.ndarray, int]:
    """(medians of consecutive bins, bin size): at most `max_points` bins, bin size ≥ 1."""
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


def changepoints_sigma(
    x: np.ndarray, sigma: float, penalty_scale: float = 3.0, min_size: int = 5
) -> list[int]:
    """Mean-shift changepoints by ruptures KernelCPD(linear), penalty `scale·σ²·log n`.

    Same BIC-like penalty as `_stats.changepoints`, but σ is given by the caller so that a floor
    for rounded series (where the MAD of differences is 0) can be applied.
    """
    import ruptures as rpt

    n = len(x)
    if n < 2 * min_size or sigma <= 0:
        return []
    pen = penalty_scale * sigma**2 * math.log(n)
    algo = rpt.KernelCPD(kernel="linear", min_size=min_size).fit(x.reshape(-1, 1))
    return [int(b) for b in algo.predict(pen=pen) if b < n]


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
        return float(MAD_TO_SIGMA * np.median(np.abs(nz - np.median(nz))) / math.sqrt(2))
    return float(np.std(x)) if len(x) else 0.0


@dataclass
class Transition:
    """A level change between two plateaus, located at full resolution (indices into the series).

    `onset` is where the change starts (extrapolated from the 10%/50% crossings, so a ramp's
    start is found, not its middle), `mid` the 50% crossing, `end` the 90% crossing; `before`
    and `after` are the (transformed-domain) levels either side, `z` the change in noise units.
    """

    onset: int
    mid: int
    end: int
    before: float
    after: float
    sigma: float

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def z(self) -> float:
        return abs(self.delta) / self.sigma if self.sigma > 0 else math.inf


def transitions(
    x: np.ndarray,
    sigma_floor: float = 0.0,
    penalty_scale: float = 3.0,
    min_size: int = 5,
    merge_gap: int = 3,
    level_window: int = 20,
    max_points: int = MAX_CPD_POINTS,
) -> list[Transition]:
    """Level transitions of `x` (already in the domain where noise is additive).

    Changepoints are searched on bin medians (≤ `max_points`) with a noise-based penalty;
    consecutive same-direction changes separated by short segments (≤ `merge_gap`·`min_size`
    bins) are one transition (a ramp looks like a staircase to a mean-shift model). Each is then
    located at full resolution on a running median.
    """
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if n < 2 * min_size:
        return []
    xb, size = bin_medians(x, max_points)
    sigma_b = max(noise_sigma(xb), sigma_floor / math.sqrt(size))
    bkps = changepoints_sigma(xb, sigma_b, penalty_scale, min_size)
    if not bkps:
        return []
    edges = [0, *bkps, len(xb)]
    levels = [float(np.median(xb[a:b])) for a, b in itertools.pairwise(edges)]
    # group changepoints into episodes
    episodes: list[tuple[int, int]] = []  # (first change k, last change k), k indexes bkps
    k = 0
    while k < len(bkps):
        sign = np.sign(levels[k + 1] - levels[k])
        j = k
        while (
            j + 1 < len(bkps)
            and np.sign(levels[j + 2] - levels[j + 1]) == sign
            and edges[j + 2] - edges[j + 1] <= merge_gap * min_size
        ):
            j += 1
        episodes.append((k, j))
        k = j + 1
    sigma = max(noise_sigma(x), sigma_floor) or 1.0
    sm = smooth(x, 5)
    out: list[Transition] = []
    for first, last in episodes:
        a_lo, a_hi = edges[first] * size, edges[first + 1] * size
        b_lo, b_hi = edges[last + 1] * size, min(edges[last + 2] * size, n)
        win = max(level_window, 3 * size)
        before = float(np.median(x[max(a_lo, a_hi - win) : a_hi]))
        after = float(np.median(x[b_lo : min(b_hi, b_lo + win)]))
        lo, hi = max(a_lo, a_hi - win), min(b_hi, b_lo + win)
        located = locate(sm, before, after, lo, hi, sigma)
        if located is None:
            continue
        onset, mid, end = located
        out.append(Transition(onset, mid, end, before, after, sigma))
    return out


def locate(
    sm: np.ndarray, before: float, after: float, lo: int, hi: int, sigma: float
) -> tuple[int, int, int] | None:
    """(onset, 50% crossing, 90% crossing) of a move from `before` to `after` within sm[lo:hi].

    The onset is extrapolated from the f- and 50%-crossings, f = max(10%, 2σ/|Δ|): for a linear
    ramp `onset = t_f − f/(0.5−f)·(t50 − t_f)` is exact, for an exponential approach it is within
    ~0.05 time constants, for a step it is the step.
    """
    delta = after - before
    if delta == 0 or hi - lo < 2:
        return None
    seg = (sm[lo:hi] - before) / delta  # 0 at `before`, 1 at `after`
    f = min(0.4, max(0.1, 2.0 * 0.6 * sigma / abs(delta)))
    past_half = np.nonzero(seg >= 0.5)[0]
    if len(past_half) == 0:
        return None
    t50 = int(past_half[0])
    under = np.nonzero(seg[: t50 + 1] < f)[0]
    t_f = int(under[-1]) + 1 if len(under) else 0
    onset = t_f - f / (0.5 - f) * (t50 - t_f)
    onset_i = math.floor(onset + 0.5)
    past_90 = np.nonzero(seg[t50:] >= 0.9)[0]
    t90 = t50 + (int(past_90[0]) if len(past_90) else 0)
    onset_i = max(0, min(onset_i, t50))
    return lo + onset_i, lo + t50, lo + t90


@dataclass
class Spike:
    """A run of consecutive points far above the local running median."""

    first: int
    last: int
    peak: int
    z: float
    baseline: float


def spikes(
    x: np.ndarray,
    window: int = 31,
    z_threshold: float = 6.0,
    sigma_floor: float = 0.0,
    gap: int = 2,
    direction: int = 1,
) -> tuple[list[Spike], np.ndarray, float]:
    """Robust spikes: residual from a centred running median over the MAD noise of residuals.

    Returns (spikes, baseline, sigma). Points within `gap` indices of each other are one spike.
    """
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if n < 5:
        return [], x.copy(), 0.0
    base = smooth(x, min(window, n if n % 2 else n - 1))
    resid = direction * (x - base)
    sigma = max(mad_sigma(resid), sigma_floor)
    if sigma <= 0:
        # more than half the residuals are exactly 0: fall back to their mean absolute size
        nz = np.abs(resid[resid != 0])
        sigma = float(MAD_TO_SIGMA * np.median(nz)) if len(nz) else 0.0
    if sigma <= 0:
        return [], base, 0.0
    z = resid / sigma
    hits = np.nonzero(z >= z_threshold)[0]
    out: list[Spike] = []
    start = 0
    for i in range(1, len(hits) + 1):
        if i == len(hits) or hits[i] - hits[i - 1] > gap:
            group = hits[start:i]
            peak = int(group[np.argmax(z[group])])
            out.append(
                Spike(int(group[0]), int(group[-1]), peak, float(z[peak]), float(base[peak]))
            )
            start = i
    return out, base, sigma


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


def config_changes(run: Run, step: int, keys: tuple[str, ...], before: int = 10) -> dict:
    """Keys among `keys` whose value changed at a config segment starting within
    `before` steps ahead of `step` (a restart with new settings): {key: [old, new], "at": step}.
    """
    from logscope import verl_config

    segs = sorted(run.config_segments, key=lambda s: s.first_step)
    for prev, seg in itertools.pairwise(segs):
        if step - before <= seg.first_step <= step + 1:
            changed = {
                k: [verl_config.get(prev.config, k), verl_config.get(seg.config, k)]
                for k in keys
                if verl_config.get(prev.config, k) != verl_config.get(seg.config, k)
            }
            if changed:
                return {"at_step": seg.first_step, **changed}
    return {}


@dataclass
class Change:
    """A candidate for a finding: a level shift or a spike, in raw units, with its indices."""

    kind: str  # "level shift" | "spike"
    onset: int
    mid: int
    end: int
    before: float
    after: float
    z: float
    sigma: float

    @property
    def ratio(self) -> float:
        base = max(abs(self.before), 1e-12)
        return self.after / base


def domain(s: Series, log_scale: bool) -> tuple[np.ndarray, float, object]:
    """(transformed values, noise floor in that domain, inverse transform)."""
    v = s.values
    if log_scale:
        floor = positive_floor(v, s.resolution)
        x = log_floor(v, floor)
        level = max(float(np.median(v)), floor)
        return x, s.quant_sigma / level, math.exp
    return v, s.quant_sigma, float


def level_shifts(s: Series, log_scale: bool, direction: int, **kw: float) -> list[Change]:
    """Level transitions of a series in the chosen direction (+1 up, −1 down), in raw units."""
    x, floor, inv = domain(s, log_scale)
    out = []
    for tr in transitions(x, sigma_floor=floor, **kw):
        if np.sign(tr.delta) != direction:
            continue
        out.append(
            Change(
                "level shift",
                tr.onset,
                tr.mid,
                tr.end,
                inv(tr.before),
                inv(tr.after),
                tr.z,
                tr.sigma,
            )
        )
    return out


def spike_changes(s: Series, log_scale: bool, z_threshold: float, window: int = 31) -> list[Change]:
    """Upward spikes of a series, in raw units (before = running median at the peak)."""
    x, floor, inv = domain(s, log_scale)
    found, _, sigma = spikes(x, window=window, z_threshold=z_threshold, sigma_floor=floor)
    return [
        Change(
            "spike",
            sp.first,
            sp.peak,
            sp.last,
            inv(sp.baseline),
            inv(float(x[sp.peak])),
            sp.z,
            sigma,
        )
        for sp in found
    ]


def first_stretch(mask: np.ndarray, need: int) -> tuple[int, int] | None:
    """(first, last) index of the first run of True in `mask` at least `need` long."""
    idx = np.nonzero(mask)[0]
    if len(idx) < max(need, 1):
        return None
    breaks = np.nonzero(np.diff(idx) > 1)[0]
    starts = np.concatenate([[0], breaks + 1])
    ends = np.concatenate([breaks, [len(idx) - 1]])
    for a, b in zip(starts, ends, strict=True):
        if b - a + 1 >= need:
            return int(idx[a]), int(idx[b])
    return None
