"""What `tail` reruns on each new step: the detectors that judge recent steps, over a bounded window.

A detector's look-back is read from its parameters: the sum of those that count steps or points
(windows, warm-ups, rises, gaps, context; `max_period` × `min_cycles` for a periodic pattern),
without the caps on resolution (`max_points`, `max_raw_steps`). Three kinds judge the whole run
and run on full passes only: config rules (the config is the same for every window), detectors
with a `min_fraction` (a condition must last that share of the run: on a window it would be a
share of the window, so a stretch short for the run would pass), and detectors whose look-back
exceeds `MAX_LOOK_BACK`. The window holds `2 × margin` steps (at least `MIN_WINDOW`), the margin
being the largest look-back of the detectors that run on it; a window finding counts only in
the window's last part (from `margin` steps after its start on), where every step has its full
look-back, as in the run. Steps before that part keep the findings of the last full pass.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from logscope.detector import Detector
from logscope.model import Finding, Run

#: a detector that looks back further than this judges on full passes only
MAX_LOOK_BACK = 250
MIN_WINDOW = 100
_COUNTS_STEPS = re.compile(r"window|steps|context|duration|period|points")
_CAPS = frozenset({"max_points", "max_raw_steps"})


def look_back(det: Detector) -> int | None:
    """Steps `det` reads before a finding (from its parameters); None: it judges the whole run."""
    if det.reads == "config":
        return None
    params = det.params()
    if "min_fraction" in params:
        return None
    total = 0
    for name, value in params.items():
        if name in _CAPS or isinstance(value, bool) or not isinstance(value, int):
            continue
        if _COUNTS_STEPS.search(name):
            total += value * int(params.get("min_cycles", 1)) if name == "max_period" else value
    return total if total <= MAX_LOOK_BACK else None


@dataclass(frozen=True)
class Plan:
    """Which detectors run on the window, and how large it is."""

    detectors: tuple[Detector, ...]  # those that run on the window
    margin: int  # steps at the window's start that only give look-back
    size: int  # steps in the window

    @classmethod
    def of(cls, detectors: Sequence[Detector]) -> Plan:
        backs = {id(d): look_back(d) for d in detectors}
        chosen = tuple(d for d in detectors if backs[id(d)] is not None)
        margin = max((backs[id(d)] or 0 for d in chosen), default=0)
        return cls(chosen, margin, max(2 * margin, MIN_WINDOW))

    @property
    def codes(self) -> frozenset[str]:
        return frozenset(d.code for d in self.detectors)


def cut(run: Run, since: int) -> Run:
    """`run` with only the metric rows of steps ≥ `since` and the events from the step before it
    on (as `ConsoleParser.to_run(since_step=...)` cuts a console log); the rest is shared."""
    import polars as pl

    return Run(
        id=run.id,
        source=run.source,
        meta=run.meta,
        config_segments=run.config_segments,
        metrics=run.metrics.filter(pl.col("step") >= since),
        events=[e for e in run.events if e.step_hint is not None and e.step_hint >= since - 1],
        parse_stats=run.parse_stats,
    )


def merge(
    full: Sequence[Finding], window: Sequence[Finding], settled: int, codes: frozenset[str]
) -> list[Finding]:
    """The findings so far: the full pass's, with those of the window's detectors from step
    `settled` on replaced by the window's (which count from there only)."""
    kept = [f for f in full if f.code not in codes or f.step is None or f.step < settled]
    return kept + [f for f in window if f.step is not None and f.step >= settled]
