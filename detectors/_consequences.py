"""Root causes that explain other symptoms at the same steps.

A non-finite update (NaN loss, KL or entropy) or a rollout that emits near-random text makes
the model write garbage: every response runs to the length cap, every sample scores alike and
the advantages vanish. The detectors of those symptoms ask `root_cause` and, when it names one,
say that their finding is its consequence (info, without their own advice) instead of advising
a longer cap or a different reward function. The check reads the metrics directly; it never
reads another detector's findings. `garbage_signs` lists the corroborating signs of garbage
generation (lengths at the cap, one score for every sample) for the entropy diagnosis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from logscope import metric_registry
from logscope.aliases import resolve
from logscope.health import REFERENCES, entropy_summed, response_cap, values_by_step
from logscope.model import Run

from ._stats import fmt
from .non_finite import family_of

#: families whose non-finite value means the update itself diverged (a NaN grad norm alone is
#: a skipped optimizer step: verl's safety net, the weights are untouched)
DIVERGED_FAMILIES = ("loss", "kl", "entropy")
#: share of the symptom's steps the cause must cover
MIN_SHARE = 0.5
#: `response_length/clip_ratio` at or above this: (almost) every response hit the cap
AT_CAP_RATIO = 0.9


@dataclass(frozen=True)
class RootCause:
    """What explains a symptom: the diagnosis that reports it, its metric and first step."""

    name: str  # "non-finite-metric" or "entropy-blowup"
    metric: str
    step: int
    what: str  # "the NaN of actor/pg_loss from step 3663"

    def note(self, symptom: str) -> str:
        """`symptom` named as a consequence of this cause (one sentence)."""
        return (
            f"{symptom} is a consequence of {self.what}, reported by {self.name}: a model "
            "that writes garbage runs its responses to the length cap and scores every sample "
            "alike, so this is a symptom, not a setting to change."
        )

    def evidence(self) -> dict[str, Any]:
        """The `consequence_of` evidence entry (incidents read it to name the first mover)."""
        return {"name": self.name, "metric": self.metric, "step": self.step}


def _diverged_steps(run: Run) -> list[tuple[str, np.ndarray]]:
    """(metric, its non-finite steps) of the loss, KL and entropy metrics whose NaN means a
    divergence (not an empty selection), loss first."""
    out: list[tuple[int, str, np.ndarray]] = []
    for metric in run.metric_names:
        family = family_of(metric, run)
        if family not in DIVERGED_FAMILIES:
            continue
        entry = metric_registry.lookup(metric)
        if entry is not None and entry.nan and entry.nan != "divergence":
            continue
        steps, values = run.series(metric)
        bad = steps[~np.isfinite(values)]
        if len(bad):
            out.append((DIVERGED_FAMILIES.index(family), metric, bad))
    out.sort(key=lambda t: (int(t[2][0]), t[0], t[1]))
    return [(m, s) for _, m, s in out]


def _non_finite_cause(run: Run, steps: Sequence[int]) -> RootCause | None:
    diverged = _diverged_steps(run)
    if not diverged or not steps:
        return None
    bad = set(np.concatenate([s for _, s in diverged]).tolist())
    covered = sum(1 for s in steps if s in bad)
    if covered == 0 or covered < MIN_SHARE * len(steps):
        return None
    metric, first = next(
        ((m, int(s[0])) for m, s in diverged if int(s[0]) <= max(steps)), diverged[0]
    )
    values = run.series(metric)[1]
    bad_value = values[~np.isfinite(values)][0]
    shown = "NaN" if np.isnan(bad_value) else ("inf" if bad_value > 0 else "-inf")
    return RootCause("non-finite-metric", metric, first, f"the {shown} {metric} from step {first}")


def _entropy_cause(run: Run, steps: Sequence[int]) -> RootCause | None:
    entropy = values_by_step(run, "entropy")
    at = [entropy[s] for s in steps if s in entropy]
    alarm = REFERENCES["entropy"].alarm_high
    if not at or alarm is None:
        return None
    level = float(np.median(at))
    if level <= alarm or entropy_summed(run, level):
        return None
    metric = resolve(run, "entropy") or "entropy"
    first = min(s for s in steps if s in entropy)
    return RootCause(
        "entropy-blowup",
        metric,
        first,
        f"near-random generation ({metric} {fmt(level)} nats per token at the same steps, "
        f"above {alarm:g})",
    )


def root_cause(run: Run, steps: Sequence[int]) -> RootCause | None:
    """The failure that explains a symptom seen at `steps`: a loss, KL or entropy metric that
    is non-finite on at least half of them (dated at its first non-finite step), else an
    entropy above the registry's alarm (near-random text) over them; None when neither."""
    steps = sorted({int(s) for s in steps})
    return _non_finite_cause(run, steps) or _entropy_cause(run, steps)


def constant_score(run: Run, steps: Sequence[int]) -> float | None:
    """The score every sample got when `critic/score/min` == `/max` (within the print
    resolution) in every one of `steps` that logs both; None when any step varies or none logs."""
    top = values_by_step(run, "score_max")
    bottom = values_by_step(run, "score_min")
    both = [s for s in steps if s in top and s in bottom]
    if not both:
        return None
    tol = max(1e-9, 2 * (run.value_resolution or 0.0))
    if any(abs(top[s] - bottom[s]) > tol for s in both):
        return None
    return float(np.median([top[s] for s in both]))


def garbage_signs(run: Run, steps: Sequence[int]) -> list[str]:
    """Signs at `steps` that the rollout writes garbage: (almost) every response at the length
    cap, every sample with the same score. Empty when neither shows."""
    signs: list[str] = []
    clip = values_by_step(run, "response_clip_ratio")
    ratios = [clip[s] for s in steps if s in clip]
    shortest = values_by_step(run, "response_length_min")
    cap, _ = response_cap(run)
    if cap is None:
        longest = values_by_step(run, "response_length_max")
        tops = [longest[s] for s in steps if s in longest]
        cap = max(tops) if tops else None
    mins = [shortest[s] for s in steps if s in shortest]
    if ratios and float(np.median(ratios)) >= AT_CAP_RATIO:
        signs.append(f"{fmt(float(np.median(ratios)) * 100)}% of the responses at the length cap")
    elif mins and cap and float(np.median(mins)) >= cap - 0.5:
        signs.append(f"every response at the length cap ({fmt(cap)} tokens)")
    score = constant_score(run, steps)
    if score is not None:
        signs.append(f"every sample scoring {fmt(score)}")
    return signs
