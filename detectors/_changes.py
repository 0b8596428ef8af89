"""Level shifts and spikes of a `Series`, for the KL and policy detectors (LS1xx): level
transitions (changepoints on bin medians, located at full resolution by a flat–ramp–flat fit) and
robust spikes, in the domain where the noise is additive (log for positive metrics); and the
occurrences of a metric's spikes (`recurring`: a spike after a quiet stretch is a recurrence).

Everything here takes short, NaN-padded, irregularly logged or `.3f`-rounded series and returns
empty results rather than raising.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from ._series import (
    Series,
    bin_medians,
    noise_sigma,
    odd_width,
    running_median,
    tail_sigma,
)
from ._stats import MAD_TO_SIGMA, changepoints_sigma, mad_sigma

T = TypeVar("T")

#: Long series are reduced to at most this many bin medians before ruptures runs
#: (KernelCPD cost grows ~n²; 2,000 points take milliseconds).
MAX_CPD_POINTS = 2000


@dataclass
class Transition:
    """A level change between two plateaus, located at full resolution (indices into the series).

    `onset` is the first point that moved (the knee of a hinge fitted up to the 50 % point, so
    a ramp's start is found, not its middle), `mid` the 50 % crossing, `end` the 90 % crossing;
    `before` and `after` are the (transformed-domain) levels either side, `z` the change in
    noise units.
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


@np.errstate(all="ignore")  # absurd magnitudes (1e300) must not warn, only fail to fit
def transitions(
    x: np.ndarray,
    sigma_floor: float = 0.0,
    penalty_scale: float = 3.0,
    min_size: int = 5,
    merge_slope_ratio: float = 4.0,
    level_window: int = 20,
    min_z: float = 3.0,
    max_points: int = MAX_CPD_POINTS,
) -> list[Transition]:
    """Level transitions of `x` (already in the domain where noise is additive).

    Changepoints are searched on bin medians (≤ `max_points`) with a noise-based penalty. A ramp
    looks like a staircase to a mean-shift model, so consecutive same-direction changes whose
    slopes (change / shorter neighbouring segment) agree within `merge_slope_ratio` are one
    transition; a slow healthy drift followed by a fast collapse stays two. Each transition is
    then located at full resolution by a least-squares flat–ramp–flat fit (`fit_ramp`).
    """
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if n < 2 * min_size:
        return []
    xb, size = bin_medians(x, max_points)
    noise_b = noise_sigma(xb)
    sigma_b = max(noise_b, sigma_floor / math.sqrt(size))
    bkps = changepoints_sigma(xb, sigma_b, penalty_scale, min_size)
    if not bkps:
        return []
    edges = [0, *bkps, len(xb)]
    levels = [float(np.median(xb[a:b])) for a, b in itertools.pairwise(edges)]
    # group changepoints into episodes
    episodes: list[tuple[int, int]] = []  # (first change k, last change k), k indexes bkps
    k = 0
    lengths = np.diff(edges)

    def slope(k: int) -> float:  # change k sits between segments k and k + 1
        return abs(levels[k + 1] - levels[k]) / max(1, min(lengths[k], lengths[k + 1]))

    while k < len(bkps):
        sign = np.sign(levels[k + 1] - levels[k])
        j = k
        while (
            j + 1 < len(bkps)
            and np.sign(levels[j + 2] - levels[j + 1]) == sign
            and slope(j + 1) <= merge_slope_ratio * slope(j)
            and slope(j) <= merge_slope_ratio * slope(j + 1)
        ):
            j += 1
        episodes.append((k, j))
        k = j + 1
    sigma = max(noise_b if size == 1 else noise_sigma(x), sigma_floor) or 1.0  # xb is x
    out: list[Transition] = []
    for first, last in episodes:
        a_lo, a_hi = edges[first] * size, edges[first + 1] * size
        b_lo, b_hi = edges[last + 1] * size, min(edges[last + 2] * size, n)
        win = max(level_window, 3 * size)
        before = float(np.median(x[max(a_lo, a_hi - win) : a_hi]))
        after = float(np.median(x[b_lo : min(b_hi, b_lo + win)]))
        if abs(after - before) < min_z * sigma:
            continue  # too small for any detector to report; skip the location work
        lo, hi = max(a_lo, a_hi - win), min(b_hi, b_lo + win)
        onset, mid, end = locate_change(x, lo, hi, before, after)
        out.append(Transition(onset, mid, min(end, n - 1), before, after, sigma))
    return out


def locate_change(
    x: np.ndarray, lo: int, hi: int, before: float, after: float
) -> tuple[int, int, int]:
    """(onset, 50 %, 90 %) indices of the move from `before` to `after` within x[lo:hi].

    A least-squares flat → ramp → flat fit brackets the move (a step is a ramp of length 0).
    The onset is then the knee of a one-sided hinge (flat, then a straight line) fitted from
    the window start to the 50 % point only: the first half of a move is nearly straight
    whatever its overall shape (linear ramp, exponential relaxation, log-linear decay), so its
    start is not biased by how the move levels off at the end.
    """
    a, b = fit_ramp(x, lo, hi, before, after)
    if b - a <= 1:
        return b, b, b  # a step: b is the first point at the new level
    prog = (running_median(np.asarray(x[lo:hi], dtype=np.float64), 3) - before) / (after - before)
    crossed = np.nonzero(prog[a - lo :] >= 0.5)[0]
    t50 = a + int(crossed[0]) if len(crossed) else a + (b - a) // 2
    t90_rel = np.nonzero(prog[t50 - lo :] >= 0.9)[0]
    t90 = t50 + int(t90_rel[0]) if len(t90_rel) else a + math.ceil(0.9 * (b - a))
    onset = fit_hinge_onset(x, lo, t50 + 1, before, after)
    return min(onset, t50), t50, max(t90, t50)


def fit_hinge_onset(x: np.ndarray, lo: int, hi: int, before: float, after: float) -> int:
    """Index c minimising the squared error of: `before` on [lo, c), then before + s·(j − c + 1)
    on [c, hi) with s fitted (and of the sign of after − before). O(1) per c by prefix sums."""
    y = np.asarray(x[lo:hi], dtype=np.float64) - before
    w = len(y)
    if w < 2:
        return lo
    j = np.arange(w, dtype=np.float64)
    p_y2 = np.concatenate([[0.0], np.cumsum(y * y)])
    p_y = np.concatenate([[0.0], np.cumsum(y)])
    p_yj = np.concatenate([[0.0], np.cumsum(y * j)])
    c = np.arange(w)
    length = (w - c).astype(np.float64)  # points in [c, w)
    s_yu = (p_yj[w] - p_yj[c]) - (c - 1) * (p_y[w] - p_y[c])  # Σ y·(j − c + 1)
    s_uu = length * (length + 1) * (2 * length + 1) / 6.0  # Σ k², k = 1..length
    slope = s_yu / s_uu
    fits = np.sign(slope) == np.sign(after - before)
    gain = np.where(fits, s_yu * s_yu / s_uu, 0.0)
    cost = p_y2[w] - gain
    return lo + int(np.argmin(cost))


def _ramp_costs(
    x: np.ndarray, before: float, after: float, a: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """Squared error of the flat(before) → linear ramp on [a, b) → flat(after) model of `x`."""
    y = x - before
    d = after - before
    z = x - after
    i = np.arange(len(x), dtype=np.float64)
    s_y2 = np.concatenate([[0.0], np.cumsum(y * y)])
    s_y = np.concatenate([[0.0], np.cumsum(y)])
    s_yi = np.concatenate([[0.0], np.cumsum(y * i)])
    s_z2 = np.concatenate([[0.0], np.cumsum(z * z)])
    length = (b - a).astype(np.float64)
    safe = np.maximum(length, 1.0)
    cross = (s_yi[b] - s_yi[a]) - a * (s_y[b] - s_y[a])
    sq = (length - 1) * length * (2 * length - 1) / 6.0
    ramp = (s_y2[b] - s_y2[a]) - 2 * d / safe * cross + d * d / (safe * safe) * sq
    return s_y2[a] + np.where(length > 0, ramp, 0.0) + (s_z2[-1] - s_z2[b])


def fit_ramp(x: np.ndarray, lo: int, hi: int, before: float, after: float) -> tuple[int, int]:
    """(start, end) indices of the least-squares ramp from `before` to `after` within x[lo:hi].

    A step is a ramp of length 0 (start = end = first index at the new level). All (start, end)
    pairs are scored in O(1) each with prefix sums; windows longer than 400 points are fitted
    on block means first, then the start is refined at full resolution.
    """
    seg = np.asarray(x[lo:hi], dtype=np.float64)
    w = len(seg)
    if w < 2:
        return lo, lo
    k = max(1, math.ceil(w / 400))
    coarse = seg[: (w // k) * k].reshape(-1, k).mean(axis=1) if k > 1 else seg
    m = len(coarse)
    a, b = np.triu_indices(m + 1)  # all a ≤ b in 0..m
    costs = _ramp_costs(coarse, before, after, a, b)
    best = int(np.argmin(costs))
    a0, b0 = int(a[best]) * k, int(b[best]) * k
    if k > 1:
        span = b0 - a0
        starts = np.arange(max(0, a0 - 2 * k), min(w - span, a0 + 2 * k) + 1)
        if len(starts):
            fine = _ramp_costs(seg, before, after, starts, starts + span)
            a0 = int(starts[int(np.argmin(fine))])
            b0 = a0 + span
    return lo + a0, lo + min(b0, w)


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
    base = running_median(x, odd_width(window, n))
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


def spike_changes(
    s: Series, log_scale: bool, z_threshold: float, window: int = 31, heavy_tails: bool = False
) -> list[Change]:
    """Upward spikes of a series, in raw units (before = running median at the peak).

    With `heavy_tails`, the noise is never below `tail_sigma` of the residuals from a centred
    running median, so a heavy-tailed healthy excursion counts for fewer noise units."""
    x, floor, inv = domain(s, log_scale)
    if heavy_tails:
        if len(x) < 5:
            return []
        resid = x - running_median(x, odd_width(window, len(x)))
        floor = max(floor, tail_sigma(resid))
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


# ---- recurrences -------------------------------------------------------------------------------


@dataclass
class Recurrence:
    """Where a span (a spike's steps) sits among the occurrences of its metric.

    An occurrence is a maximal group of spans with fewer than `min_gap_steps` quiet steps between
    each and the end of the spans before it; `occurrence` counts them from 1, `first_step` is the
    step where the first occurrence began, `starts` is True for the span that begins its
    occurrence, `count` is the number of occurrences of the metric.
    """

    occurrence: int
    first_step: int
    starts: bool
    count: int

    def evidence(self) -> dict[str, int]:
        """The evidence keys of a finding on the span (none when its metric has one occurrence:
        a lone spike or burst reads as before)."""
        if self.count < 2:
            return {}
        return {"occurrence": self.occurrence, "first_step": self.first_step}

    def again(self, step: int) -> str | None:
        """'again at step 475 (2nd time; first at 205)' for the span that begins a recurrence
        (None for the first occurrence and for the other spans of one)."""
        if not self.starts or self.occurrence < 2:
            return None
        return f"again at step {step} ({ordinal(self.occurrence)} time; first at {self.first_step})"


def recurring(
    spans: list[tuple[int, int]],
    min_gap_steps: int,
    limit: int,
    rank: list[float] | None = None,
) -> list[tuple[int, Recurrence]]:
    """Which of a metric's (step, end step) spans to report, and the `Recurrence` of each.

    Occurrences: in step order, a span begins a new one when at least `min_gap_steps` steps
    without any span lie between its step and the last end step of every span before it. At
    most `limit` spans are kept: first the best of each occurrence by `rank` (ascending; the
    given order by default), earliest occurrence first, so that every recurrence has its
    finding before a long burst adds more; then the others by `rank`. With one occurrence this
    is `rank`'s order alone. Returns (index into `spans`, Recurrence) in the given order; the
    occurrence's earliest kept span `starts` it, and `first_step` is the earliest kept step."""
    if not spans:
        return []
    rank = rank if rank is not None else list(range(len(spans)))
    number = [0] * len(spans)
    k, reach = 0, None
    for i in sorted(range(len(spans)), key=lambda i: spans[i]):
        step, end = spans[i]
        if reach is None or step - reach - 1 >= min_gap_steps:
            k += 1
        number[i] = k
        reach = end if reach is None else max(reach, end)
    by_rank = sorted(range(len(spans)), key=lambda i: rank[i])
    best = {}
    for i in by_rank:
        best.setdefault(number[i], i)
    heads = [best[n] for n in sorted(best)]
    kept = sorted([*heads, *(i for i in by_rank if i not in heads)][:limit])
    count = max(number[i] for i in kept)
    earliest: dict[int, int] = {}
    for i in sorted(kept, key=lambda i: spans[i]):
        earliest.setdefault(number[i], i)
    first = spans[earliest[1]][0] if 1 in earliest else min(spans[i][0] for i in kept)
    return [(i, Recurrence(number[i], first, earliest[number[i]] == i, count)) for i in kept]


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, … 11th, 12th, 13th, … 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def spike_findings(
    detector: Any,
    s: Series,
    spikes: list[Change],
    rises: list[Change],
    make: Callable[[Change, Recurrence | None], T],
) -> list[T]:
    """Findings of a spike detector (its `min_gap_steps`, `max_spikes` and `max_findings`): the
    spikes `recurring` keeps (each with its occurrence), then the `max_findings` strongest
    lasting rises; `make(change, recurrence)` builds one."""
    spans = [(s.step_at(c.onset), s.step_at(c.end)) for c in spikes]
    kept = recurring(spans, detector.min_gap_steps, detector.max_spikes)
    strongest = sorted(rises, key=lambda c: -c.z)[: detector.max_findings]
    return [make(spikes[i], rec) for i, rec in kept] + [make(c, None) for c in strongest]
