"""Sustained excursions: a metric's smoothed level beyond a limit for a stretch of logged steps.

The shared mechanism of the diagnoses that judge a level against a published threshold
(training–inference mismatch, async idle ratios, staleness, dynamic-sampling waste, aborted
responses): smooth with a running median (one noisy step is not a finding), skip the warm-up,
and report the first stretch of at least `min_steps` consecutive logged steps beyond the limit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from logscope.detector import Detector, param
from logscope.model import Finding, Run

from ._changes import fit_hinge_onset
from ._series import Series, running_median, stretches
from ._stats import mann_kendall, sig


@dataclass(frozen=True)
class Excursion:
    """A stretch of `metric` beyond a limit: first and last step, median and extreme level."""

    metric: str
    first_step: int
    last_step: int
    steps: int
    level: float
    extreme: float

    def evidence(self, limit: float) -> dict[str, float | int | str]:
        return {
            "metric": self.metric,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "steps_beyond": self.steps,
            "median": sig(self.level),
            "extreme": sig(self.extreme),
            "limit": limit,
        }


def excursion(
    s: Series,
    beyond: Callable[[np.ndarray], np.ndarray],
    *,
    smooth_steps: int,
    min_steps: int,
    warmup_steps: int,
    high: bool,
) -> Excursion | None:
    """The first stretch where `beyond(smoothed values)` holds for `min_steps` logged steps
    after the first `warmup_steps` steps; `high` picks the extreme (max, else min)."""
    if len(s) < min_steps:
        return None
    smoothed = running_median(s.values, smooth_steps)
    after_warmup = s.steps >= s.steps[0] + warmup_steps
    found = stretches(beyond(smoothed) & after_warmup, min_steps)
    if not found:
        return None
    start, stop = found[0]
    raw = s.values[start:stop]
    return Excursion(
        metric=s.metric,
        first_step=s.step_at(start),
        last_step=s.step_at(stop - 1),
        steps=stop - start,
        level=float(np.median(raw)),
        extreme=float(np.max(raw) if high else np.min(raw)),
    )


class SustainedLevel(Detector):
    """Base of the diagnoses that judge a level against a limit (`excursion`): the smoothing,
    the stretch length and the warm-up are parameters of each of them."""

    smooth_steps: int = param(5, ge=1)
    min_steps: int = param(5, ge=1)
    warmup_steps: int = param(3, ge=0)

    def excursion(
        self, run: Run, concept: str, beyond: Callable[[np.ndarray], np.ndarray], high: bool
    ) -> Excursion | None:
        """The first stretch of `concept`'s smoothed level where `beyond` holds."""
        s = Series.load(run, concept, min_points=self.min_steps)
        if s is None:
            return None
        return self.excursion_of(s, beyond, high)

    def finding_at(self, e: Excursion, message: str, **fields: Any) -> Finding:
        """A finding located on the excursion `e` (its metric, first and last step)."""
        return self.finding(
            message=message, metric=e.metric, step=e.first_step, end_step=e.last_step, **fields
        )

    def excursion_of(
        self, s: Series, beyond: Callable[[np.ndarray], np.ndarray], high: bool
    ) -> Excursion | None:
        return excursion(
            s,
            beyond,
            smooth_steps=self.smooth_steps,
            min_steps=self.min_steps,
            warmup_steps=self.warmup_steps,
            high=high,
        )


@dataclass(frozen=True)
class Drift:
    """A slow rise: the late level `ratio` times the early one, with a significant trend."""

    metric: str
    first_step: int
    early: float
    late: float
    ratio: float
    trend_z: float


def upward_drift(
    s: Series, *, min_ratio: float, warmup_steps: int, min_points: int, min_z: float = 3.0
) -> Drift | None:
    """A positive metric that drifts up over the run: the median of the last quarter at least
    `min_ratio` times that of the first quarter (after warm-up), Mann–Kendall z ≥ `min_z`.
    Dated at the onset of the rise: the hinge (flat, then a ramp) best fitting the log level up
    to where it first passes halfway from early to late."""
    keep = s.steps >= s.steps[0] + warmup_steps
    steps, values = s.steps[keep], s.values[keep]
    n = len(values)
    if n < min_points or not np.all(values > 0):
        return None
    quarter = max(n // 4, 3)
    early, late = float(np.median(values[:quarter])), float(np.median(values[-quarter:]))
    if early <= 0 or late / early < min_ratio:
        return None
    z, _ = mann_kendall(values)
    if z < min_z:
        return None
    log_level = np.log(running_median(values, max(3, quarter // 2)))
    crossed = np.flatnonzero(log_level >= (np.log(early) + np.log(late)) / 2)
    halfway = int(crossed[0]) if len(crossed) else n // 2
    onset = fit_hinge_onset(log_level, 0, halfway + 1, np.log(early), np.log(late))
    return Drift(s.metric, int(steps[onset]), early, late, late / early, z)
