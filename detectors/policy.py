"""Policy-update diagnoses: entropy collapse (LS110), clip-ratio spikes (LS120), grad-norm
spikes (LS130) and response-length collapse (LS140)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from logscope import verl_config
from logscope.advice import SEED_PPO, advise, current_value
from logscope.aliases import name_of, resolve
from logscope.detector import Detector, param
from logscope.frameworks import parameter_name, profile_of
from logscope.health import (
    RECENT_STEPS,
    REFERENCES,
    Level,
    Reference,
    clip_ratio_reliable,
    consecutive_jump,
    entropy_summed,
    grad_clip,
    recent_level,
    response_cap,
    values_by_step,
)
from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all
from logscope.verl_config import ACT, RO
from logscope.words import plural

from ._changes import (
    Change,
    Recurrence,
    level_shifts,
    spike_changes,
    spike_findings,
    transitions,
)
from ._common import EventDetector, clip_and_lr_advice, grad_clip_advice, halve_advice
from ._consequences import garbage_signs, root_cause
from ._series import Series, odd_width, running_median
from ._stats import binom_sf, fmt, robust_sigma, sig, theil_sen


def responses_per_step(run: Run, s: Series) -> tuple[int | None, str]:
    """(N, where it came from) for a share of responses k/N such as
    `response_length/clip_ratio`: the config's `data.train_batch_size` × `rollout.n` when
    the values are multiples of 1/N (or too rounded to tell), else the values' granularity
    (1 / the smallest gap between distinct values, 0 included: a lower bound on N, so it errs
    towards more noise)."""
    x = np.clip(s.values, 0.0, 1.0)
    batch = current_value(run, "data.train_batch_size")
    per_prompt = current_value(run, f"{RO}.n")
    if isinstance(batch, (int, float)) and not isinstance(batch, bool) and batch > 0:
        n = int(batch) * int(
            per_prompt if isinstance(per_prompt, (int, float)) and per_prompt > 0 else 1
        )
        off = np.abs(x * n - np.round(x * n))
        if n * (s.resolution or 0.0) >= 0.25 or float(np.quantile(off, 0.9)) <= 0.1:
            return n, "data.train_batch_size × rollout.n"
    gaps = np.diff(np.unique(np.concatenate([[0.0], x])))
    gaps = gaps[gaps > 1e-9]
    if len(gaps):
        return round(1.0 / float(gaps.min())), "granularity of the values"
    return None, ""


CHI2_1_MEDIAN = 0.454936423119572  # scipy.stats.chi2.median(1)
CHI2_1_Q90 = 2.705543454095404  # scipy.stats.chi2.ppf(0.9, 1): |z| of a one-sided 5 % tail, squared


def count_spikes(
    s: Series, samples: int, max_p: float, min_rise: float, window: int, gap: int = 2
) -> tuple[list[Change], dict[str, Any]]:
    """Spikes of a share of `samples` responses (k/N) against binomial count noise.

    The baseline at a point is the mean of the other points within `window` // 2 of it (as many
    before as after, see `_neighbours`), each capped at the running median + `min_rise` so that
    spikes barely lift it: it follows a slow rise. A point is a spike when its count's binomial
    tail probability, times the number of points (Bonferroni), is at most `max_p`, and it is at
    least `min_rise` above the baseline. Overdispersed counts (correlated responses) and heavy
    tails widen the noise: the test's N at a point is `samples` divided by its `_dispersion`.
    Points within `gap` indices are one spike. Returns (spikes, {"responses_per_step",
    "dispersion": the median point's}); a spike's `z` is the normal quantile of its tail
    probability.

    Tail probabilities are computed only where the rise passes `min_rise` (often nowhere: then
    scipy.special, ~0.4 s CPU to import, is not needed)."""
    x = np.clip(s.values, 0.0, 1.0)
    n = len(x)
    if n < 5 or samples < 1:
        return [], {}
    median = running_median(x, odd_width(window, n))
    capped = np.minimum(x, median + min_rise)
    cum = np.concatenate([[0.0], np.cumsum(capped)])
    lo, hi = _neighbours(n, max(1, window // 2))
    base = (cum[hi] - cum[lo] - capped) / (hi - lo - 1)
    p0 = np.clip(base, 0.5 / samples, 1 - 0.5 / samples)
    dispersion = _dispersion(x, median, samples, window)
    eff = np.maximum(1, np.round(samples / dispersion))
    risen = np.nonzero(x - base >= min_rise)[0]
    p = np.ones(n)
    if len(risen):
        p[risen] = binom_sf(np.round(x[risen] * eff[risen]) - 1, eff[risen], p0[risen])
    hits = risen[p[risen] * n <= max_p]
    out: list[Change] = []
    for group in np.split(hits, np.nonzero(np.diff(hits) > gap)[0] + 1) if len(hits) else []:
        from scipy import special  # scipy.stats' quantile, without its ~1.5 s import

        peak = int(group[np.argmin(p[group])])
        z = -float(special.ndtri(max(float(p[peak]), 1e-300)))
        first, last = int(group[0]), int(group[-1])
        out.append(Change("spike", first, peak, last, float(base[peak]), float(x[peak]), z, 0.0))
    return out, {
        "responses_per_step": samples,
        "dispersion": round(float(np.median(dispersion)), 2),
    }


def _dispersion(x: np.ndarray, median: np.ndarray, samples: int, window: int) -> np.ndarray:
    """How much wider than binomial the noise of each point is (at least 1): the running median
    of the squared Pearson residuals around the running median, over its χ²(1) median (the
    noise of a share falling from 40 % to 1 % shrinks with it, and not only binomially), times
    one tail factor for heavy tails: the 5 % tail of the points below the running median
    (which upward spikes cannot reach), so scaled, against a normal's."""
    m = np.clip(median, 0.5 / samples, 1 - 0.5 / samples)
    squared = (x - m) ** 2 * samples / (m * (1 - m))
    local = np.maximum(1.0, running_median(squared, odd_width(window, len(x))) / CHI2_1_MEDIAN)
    below = (squared / local)[x < m]
    tail = float(np.quantile(below, 0.9)) / CHI2_1_Q90 if len(below) >= 10 else 1.0
    return local * max(1.0, tail)


def _neighbours(n: int, half: int, min_side: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi) of the points around each of n points: `half` on each side, fewer near the edges
    but as many before as after (a one-sided window is biased by a trend: a share falling from
    a high start would put an early point above the later, lower points). Within `min_side` of
    an edge the window is one-sided."""
    i = np.arange(n)
    side = np.minimum(np.minimum(i, n - 1 - i), half)
    one_sided = side < min_side
    lo = np.where(one_sided, np.maximum(i - half, 0), i - side)
    hi = np.where(one_sided, np.minimum(i + half + 1, n), i + side + 1)
    return lo, hi


def _lasting_rises(
    s: Series,
    keep: Callable[[Change], bool],
    z_threshold: float,
    max_rise_steps: int,
    spikes_found: list[Change],
    hold_points: int = 5,
) -> list[Change]:
    """Level shifts up (log scale) of at least `z_threshold` noise units that complete within
    `max_rise_steps`, are not within that of a spike, and still pass `keep` with the level
    they hold over the next `max_rise_steps` points (at least `hold_points` of them) as their
    level after: a burst that falls back within a few steps is no lasting rise."""
    out = []
    for c in level_shifts(s, True, +1):
        held = s.values[c.end : c.end + max_rise_steps]
        if (
            c.z < z_threshold
            or c.end - c.onset > max_rise_steps
            or len(held) < hold_points
            or any(abs(c.onset - o.onset) <= max_rise_steps for o in spikes_found)
        ):
            continue
        c.after = min(c.after, float(np.median(held)))
        if keep(c):
            out.append(c)
    return out


def _drops(
    s: Series, z_threshold: float, max_ratio: float, start: int, floor: float | None = None
) -> list[Change]:
    """Level shifts down (log scale) to at most `max_ratio` of the level before, of at least
    `z_threshold` noise units, starting at or after step `start`. With `floor`, the log is
    taken of max(value, floor) (by default the floor is half the 5 % quantile, which would
    flatten a fall that reaches below it on the last few percent of a long run)."""
    if floor is None:
        shifts = level_shifts(s, True, -1)
    else:
        x = np.log(np.maximum(s.values, floor))
        level = max(float(np.median(s.values)), floor)
        shifts = [
            Change("level shift", t.onset, t.mid, t.end, *np.exp([t.before, t.after]), t.z, t.sigma)
            for t in transitions(x, sigma_floor=s.quant_sigma / level)
            if t.delta < 0
        ]
    return [
        c
        for c in shifts
        if c.z >= z_threshold and c.ratio <= max_ratio and s.steps[c.onset] >= start
    ]


def _entropy_floor(s: Series) -> float:
    """Entropy below this counts as 0 on the log scale: the print resolution, or 1e-4 nats."""
    return max(s.resolution or 0.0, 1e-4)


#: points before a fall's first located onset that the two-slope knee fit may look back over
KNEE_LOOKBACK = 15


def _knee(x: np.ndarray, lo: int, hi: int, max_points: int = 400) -> int | None:
    """Index of the knee of a continuous two-slope line fitted by least squares to x[lo:hi],
    the second slope steeper downwards (None when no such fit, or the window is longer than
    `max_points`)."""
    if hi - lo > max_points:
        return None
    y = np.asarray(x[lo:hi], dtype=np.float64)
    j = np.arange(len(y), dtype=np.float64)
    best, knee = math.inf, None
    for k in range(2, len(y) - 2):
        a = np.column_stack([np.ones_like(j), j, np.maximum(0.0, j - k)])
        coef = np.linalg.lstsq(a, y, rcond=None)[0]
        sse = float(np.sum((a @ coef - y) ** 2))
        if coef[2] < 0 and sse < best:
            best, knee = sse, lo + k
    return knee


def _spike_list(s: Series, spikes_found: list[Change], limit: int = 10) -> list[dict[str, Any]]:
    return [
        {
            "step": s.step_at(c.onset),
            "peak": sig(c.after),
            "baseline": sig(c.before),
            "ratio": sig(c.ratio, 3),
            "z": round(c.z, 1),
        }
        for c in spikes_found[:limit]
    ]


def _others(s: Series, spikes_found: list[Change], c: Change, limit: int = 8) -> str:
    """' One of 3 spikes of the metric; the others at steps …' (empty for a lone spike)."""
    others = [str(s.step_at(o.onset)) for o in spikes_found if o is not c]
    if not others:
        return ""
    more = f" and {len(others) - limit} more" if len(others) > limit else ""
    where = "the other at step" if len(others) == 1 else "the others at steps"
    return (
        f" One of {len(spikes_found)} spikes of {s.metric}; {where} "
        f"{', '.join(others[:limit])}{more}."
    )


def _halving(s: Series, onset: int, half_at: int) -> str:
    """When the (smoothed) entropy reached half its earlier level, said truly when that was
    at the onset itself (an abrupt fall) or before the knee the onset was moved to."""
    if half_at <= onset:
        return f"it was already below half its earlier level at step {s.step_at(half_at)}"
    return (
        f"it halved by step {s.step_at(half_at)} ({plural(half_at - onset, 'logged step')} later)"
    )


def _p_value(z: float) -> float:
    from scipy.special import ndtr

    return float(ndtr(-z))


def _spike_evidence(s: Series, spikes_found: list[Change], c: Change) -> dict[str, Any]:
    """Every spike of the metric, for a finding about one of them."""
    if c.kind != "spike":
        return {}
    return {
        "spike_count": len(spikes_found),
        "spike_number": spikes_found.index(c) + 1,
        "spikes": _spike_list(s, spikes_found),
    }


def _change_evidence(s: Series, c: Change, **extra: Any) -> dict[str, Any]:
    """What every located change shows: steps, levels either side, ratio, noise units."""
    return {
        "kind": c.kind,
        "onset_step": s.step_at(c.onset),
        "half_step": s.step_at(c.mid),
        "end_step": s.step_at(c.end),
        "level_before": sig(c.before),
        "level_after": sig(c.after),
        "ratio": sig(c.ratio, 3),
        "z": round(c.z, 1),
        **extra,
    }


def _at_change(s: Series, c: Change, **evidence: Any) -> dict[str, Any]:
    """Where a finding on change `c` sits (onset to end) and its evidence."""
    return {
        "metric": s.metric,
        "step": s.step_at(c.onset),
        "end_step": s.step_at(c.end),
        "evidence": _change_evidence(s, c, **evidence),
    }


def _low_level(run: Run, concept: str, ref: Reference, inclusive: bool) -> Level | None:
    """The recent level of `concept` when it is below `ref`'s low alarm (or at it, `inclusive`):
    what a run too short for the change-based test is judged on."""
    level = recent_level(run, concept)
    if level is None or ref.alarm_low is None:
        return None
    low = level.value <= ref.alarm_low if inclusive else level.value < ref.alarm_low
    return level if low else None


def _at_short_level(
    level: Level, ref: Reference, kind: str | None = None, **evidence: Any
) -> dict[str, Any]:
    """`_at_level` for a finding on a run too short for the change-based test."""
    evidence.update(
        judged_on="recent level (run too short for the change-based test)",
        range_source=ref.source,
    )
    return _at_level(level, kind, **evidence)


def _at_level(level: Level, kind: str | None = None, **evidence: Any) -> dict[str, Any]:
    """Where a finding judged on a recent level sits (its steps) and its evidence: the kind
    when given, the level and its steps, then `evidence`."""
    return {
        "metric": level.metric,
        "step": level.steps[0],
        "end_step": level.step,
        "evidence": ({"kind": kind} if kind else {})
        | {"level": sig(level.value), "steps": list(level.steps), **evidence},
    }


class EntropyCollapse(Detector, code="LS110", name="entropy-collapse"):
    """Policy entropy falling fast to a small fraction of its level, or still falling at the end.

    Reads `actor/entropy` (verl ≥ 0.4) or `actor/entropy_loss` (verl ≤ 0.3).

    What it detects:
        A downward level transition of the entropy, found by ruptures (KernelCPD, linear kernel,
        noise-based penalty) on the log of the series (≤ 2,000 bin medians for long runs, then
        located at full resolution by least-squares ramp and hinge fits), of at least `z_threshold`
        noise units, in which entropy halves within max(`max_half_steps`, `max_half_fraction` × run
        length) logged steps of the onset (far faster than the slow decline of a healthy run), and
        that is a collapse rather than a fall to a plateau: the level after it is at most
        `max_ratio` of the level before (or below 0.02 nats per token), or — for the last fall of
        the log — entropy is still falling at the end (over the last `tail_steps` logged steps, at
        least 5 and none before the fall's 50 % point, a Theil–Sen fit loses at least
        `min_tail_fall` of the level and 4 noise units). The step is where the fall starts: the knee
        of a flat-then-straight fit up to its 50 % point, moved later to the knee of a two-slope fit
        when the fall follows a healthy early decline (the flat fit leans on the decline). Error
        when entropy ends below `error_ratio` of its level before. A run with fewer than
        `min_points` entropy values (an excerpt of a few steps) cannot show a fall: there the median
        of its last 5 values below 0.02 nats per token (`logscope.health`; a `.3f` 0.000 counts) is
        reported instead.

    Why it matters:
        With entropy near zero the policy samples the same tokens every time: GRPO groups become
        identical, advantages vanish and learning stops, or the model locks onto a degenerate
        answer style. It is usually the last link of a clip-ratio spike → KL jump chain.

    Example:
        step:300 - actor/entropy:0.612 - actor/pg_clipfrac:0.004 - ...
        step:330 - actor/entropy:0.143 - actor/pg_clipfrac:0.021 - ...
        step:360 - actor/entropy:0.031 - actor/pg_clipfrac:0.002 - ...

    Advice:
        Add or raise an entropy bonus (`actor_rollout_ref.actor.entropy_coeff`: 0 → 0.001,
        otherwise ×2), widen the upper clip bound (`actor.clip_ratio_high`, DAPO's clip-higher:
        0.2 → 0.28) so low-probability tokens can still gain mass, and halve the learning rate.

    Known false positives:
        Tasks with a single correct short answer where low entropy is the goal late in
        training; a switch to an easier data split; a log that ends in the middle of a healthy
        early fall (still falling). Accounted for: a slow, steady decline over the whole run,
        and the R1-style early fall of 30–60 % that settles on a plateau, are not flagged.

    References:
        verl:workers/actor/dp_actor.py (entropy_coeff, entropy); verl:trainer/ppo/core_algos.py
        (clip_ratio_low/high); seed:ppo-tuning §3.3 (learning rate).
    """

    title = "Entropy collapsed"
    concepts = ("entropy",)
    groups = ("policy", "entropy")

    max_ratio: float = param(0.25, gt=0, lt=1)
    error_ratio: float = param(0.1, gt=0, lt=1)
    z_threshold: float = param(4.0, gt=0)
    max_half_steps: int = param(40, ge=0)
    max_half_fraction: float = param(0.1, ge=0, le=1)
    tail_steps: int = param(15, ge=1)
    min_tail_fall: float = param(0.2, gt=0, lt=1)
    warmup_steps: int = param(3, ge=0)
    min_points: int = param(20, ge=1)

    def detect(self, run: Run) -> list[Finding]:
        s = Series.load(run, "entropy", min_points=self.min_points)
        if s is None:
            return self._level(run)
        start = s.steps[0] + self.warmup_steps
        sm = running_median(s.values, 5)
        limit = max(self.max_half_steps, self.max_half_fraction * len(s))
        near_zero = REFERENCES["entropy"].alarm_low or 0.0
        floor = _entropy_floor(s)
        drops = sorted(_drops(s, self.z_threshold, 0.5, start, floor), key=lambda c: c.onset)
        cands = []
        for c in drops:
            halved = np.nonzero(sm[c.onset :] <= 0.5 * c.before)[0]
            if not len(halved) or halved[0] > limit:
                continue
            falling = self._still_falling(s, c) if c is drops[-1] else None
            if c.ratio <= self.max_ratio or c.after < near_zero or falling is not None:
                cands.append((c, int(halved[0]), falling))  # points from the onset to half
        if not cands:
            return []
        c, half, falling = cands[0]  # the first collapse is the one to act on
        half_at = c.onset + half
        # a fall that follows a healthy early decline: the flat-then-straight knee leans on the
        # decline and comes early; a two-slope fit from before it finds where the steep part starts
        x = np.log(np.maximum(s.values, floor))
        knee = _knee(x, max(0, c.onset - KNEE_LOOKBACK), c.mid + 1)
        if knee is not None and c.onset < knee < c.mid:
            c.onset = knee
        step, end = s.step_at(c.onset), s.step_at(c.end)
        final = float(np.median(s.values[-(3 if falling else max(3, len(s) // 20)) :]))
        rounded = s.resolution is not None and c.after < s.resolution
        message = (
            f"{s.metric} fell from {fmt(c.before)} to {fmt(c.after)} ({c.ratio:.0%} of its level) "
            f"starting at step {step}; {_halving(s, c.onset, half_at)} and 90% of the fall "
            f"(log scale) was done by step {end}"
            + (" (printed as 0.000)" if rounded else "")
            + f". Last value level {fmt(final)}"
            + (
                f"; still falling at the end of the log ({falling[0]:.0%} lost over the last "
                f"{plural(falling[1], 'logged step')})."
                if falling is not None and c.ratio > self.max_ratio
                else "."
            )
        )
        return [
            self.finding(
                severity="error"
                if min(c.ratio, final / c.before) <= self.error_ratio
                else "warning",
                message=message,
                **_at_change(
                    s,
                    c,
                    final_level=sig(final),
                    steps_to_half=half,
                    halved_by_step=s.step_at(half_at),
                    still_falling=None
                    if falling is None
                    else {"lost": round(falling[0], 3), "over_last_steps": falling[1]},
                    thresholds={
                        "max_ratio": self.max_ratio,
                        "z": self.z_threshold,
                        "max_steps_to_half": limit,
                        "min_tail_fall": self.min_tail_fall,
                    },
                ),
                advice=self._advice(run),
                references=cite_all(
                    ["verl:workers/actor/dp_actor.py", "verl:trainer/ppo/core_algos.py"]
                ),
            )
        ]

    def _still_falling(self, s: Series, c: Change) -> tuple[float, int] | None:
        """(share lost, steps) when entropy still falls over the log's last `tail_steps` points
        (at least 5, none before the 50 % point of `c`): a Theil–Sen fit on the log loses at
        least `min_tail_fall` and 4 noise units over them."""
        x = np.log(np.maximum(s.values, _entropy_floor(s)))
        w = int(min(self.tail_steps, len(x) - c.mid))
        if w < 5:
            return None
        slope, _ = theil_sen(np.arange(w, dtype=np.float64), x[-w:])
        fall = -slope * (w - 1)
        if fall < -math.log1p(-self.min_tail_fall) or fall < 4 * robust_sigma(x):
            return None
        return 1 - math.exp(-fall), w

    def _level(self, run: Run) -> list[Finding]:
        """Too few steps to see a fall: judge the recent level against the reference range."""
        ref = REFERENCES["entropy"]
        level = _low_level(run, "entropy", ref, inclusive=False)
        if level is None:
            return []
        shown = "0.000 (|x| < 5e-4)" if level.rounded else fmt(level.value)
        n = len(Series.load(run, "entropy") or ())
        message = (
            f"{level.metric} is {shown} {level.where()}, below {ref.alarm_low:g} nats per token: "
            "the policy is almost deterministic (entropy collapse). The log holds "
            f"{plural(n, 'training step')} with entropy, too few to see the fall; the level alone says "
            "exploration is gone."
        )
        return [
            self.finding(
                message=message,
                **_at_short_level(
                    level, ref, alarm_below=ref.alarm_low, healthy_range=list(ref.healthy)
                ),
                advice=self._advice(run),
                references=cite_all(
                    ["verl:workers/actor/dp_actor.py", "verl:trainer/ppo/core_algos.py"]
                ),
            )
        ]

    def _advice(self, run: Run) -> list[Advice]:
        out = [
            advise(
                run,
                f"{ACT}.entropy_coeff",
                "An entropy bonus in the actor loss (loss = pg − entropy_coeff·entropy) pushes "
                "back against the collapse.",
                "verl:workers/actor/dp_actor.py",
                suggest=lambda c: 0.001 if not c else verl_config.round_sig(float(c) * 2),
                rule="0.001 when 0, otherwise ×2",
            )
        ]
        high = current_value(run, f"{ACT}.clip_ratio_high")
        low = current_value(run, f"{ACT}.clip_ratio")
        base = high if isinstance(high, (int, float)) else low
        suggested = (
            round(float(base) * 1.4, 2) if isinstance(base, (int, float)) and base > 0 else None
        )
        out.append(
            advise(
                run,
                f"{ACT}.clip_ratio_high",
                "A higher upper clip bound (DAPO's clip-higher) lets low-probability tokens "
                "gain probability, which keeps entropy up"
                + (f"; it currently follows clip_ratio={low}." if high is None and low else "."),
                "verl:trainer/ppo/core_algos.py",
                suggest=suggested,
                rule="1.4 × clip_ratio (0.2 → 0.28)",
            )
        )
        out.append(
            halve_advice(
                run,
                f"{ACT}.optim.lr",
                "Large updates sharpen the policy fast; a smaller LR slows the collapse.",
                f"{SEED_PPO} §3.3",
            )
        )
        return out


class EntropyBlowup(Detector, code="LS111", name="entropy-blowup"):
    """Policy entropy far above a healthy LLM's range: the model samples near-random text.

    Reads `actor/entropy` (verl ≥ 0.4) or `actor/entropy_loss` (verl ≤ 0.3).

    What it detects:
        The median of the last `last_steps` logged entropy values above `max_entropy` nats per
        token, at any run length (one step is enough): healthy verl runs sit at 0.1–0.8, and a
        uniform distribution over a 150k-token vocabulary is 11.9. Error at `error_entropy` or
        more. Skipped when `actor_rollout_ref.actor.loss_agg_mode` sums over tokens
        (`seq-mean-token-sum…`), or the value is above 12.5 (ln of a 256k vocabulary, more than
        any per-token entropy): `actor/entropy` is then a per-sequence sum.

    Why it matters:
        At 3+ nats per token the policy spreads its probability over dozens of tokens at every
        position: rollouts turn into gibberish, rewards fall to 0 and the KL to the reference
        climbs. It is the opposite failure to a collapse, usually an entropy bonus that outweighs
        the policy loss or a learning rate high enough to wreck the weights.

    Example:
        step:42 - actor/entropy:4.87 - actor/pg_loss:-0.213 - critic/score/mean:0.0 - ...

    Advice:
        Switch off or halve the entropy bonus (`actor_rollout_ref.actor.entropy_coeff`), halve
        the actor learning rate, and keep `actor_rollout_ref.rollout.temperature` at or below 1
        (verl divides the logits by it when it computes log-probs and entropy). When every
        response also runs to the length cap (`response_length/clip_ratio` ≥ 0.9, or the
        shortest response at the cap) or every sample gets one score at the same steps, the
        rollout emits garbage: the message says so, and the advice leads with the rollout's
        side — on a LoRA run (or one whose config is not in the log)
        `actor_rollout_ref.rollout.load_format=safetensors`, which verl's LoRA guide requires
        so that vLLM applies the adapter — then the temperature.

    Known false positives:
        A sampling temperature above 1 on purpose raises the measured entropy; recipes that
        maximise entropy early on. Token-sum loss aggregation is recognised and skipped.

    References:
        verl:workers/actor/dp_actor.py (entropy of logits / temperature, entropy_coeff);
        verl:trainer/ppo/core_algos.py (agg_loss, loss_agg_mode); verl:docs/advance/ppo_lora.rst
        (load_format=safetensors for LoRA); verl#3159, verl#5211 (LoRA rollouts of garbage).
    """

    title = "Entropy far above a healthy range"
    concepts = ("entropy",)
    groups = ("policy", "entropy")

    max_entropy: float = param(3.0, gt=0)
    error_entropy: float = param(6.0, gt=0)
    last_steps: int = param(RECENT_STEPS, ge=1)

    def detect(self, run: Run) -> list[Finding]:
        level = recent_level(run, "entropy", self.last_steps)
        if level is None or level.value <= self.max_entropy or entropy_summed(run, level.value):
            return []
        message = (
            f"{level.metric} is {fmt(level.value)} nats per token {level.where()}, above "
            f"{self.max_entropy:g} (healthy runs: 0.1–0.8; uniform over a 150k vocabulary: "
            "11.9): the policy samples near-random text."
        )
        temperature = current_value(run, f"{RO}.temperature")
        signs = garbage_signs(run, level.steps)
        advice = self._advice(run)
        references = ["verl:workers/actor/dp_actor.py", "verl:trainer/ppo/core_algos.py"]
        if signs:
            message += (
                f" With {' and '.join(signs)} at the same steps, the rollout emits garbage "
                "(near-uniform tokens such as '!!!!' or token soup): read a few generated "
                "responses. Common causes are trained weights that do not reach the rollout "
                "engine (a LoRA adapter not loaded or synced into vLLM, verl#3159, verl#5211; "
                "weights corrupted by the engine's sleep/wake, verl#7904) or a sampling "
                "temperature far above 1, rather than an entropy bonus."
            )
            advice = [*self._garbage_advice(run), advice[2], advice[0], advice[1]]
            references += ["verl:docs/advance/ppo_lora.rst", "verl#3159", "verl#5211"]
        return [
            self.finding(
                severity="error" if level.value >= self.error_entropy else "warning",
                message=message,
                **_at_level(
                    level,
                    threshold=self.max_entropy,
                    loss_agg_mode=run.config_value(f"{ACT}.loss_agg_mode"),
                    rollout_temperature=temperature,
                    garbage_signs=signs,
                ),
                advice=advice,
                references=cite_all(references),
            )
        ]

    @staticmethod
    def _garbage_advice(run: Run) -> list[Advice]:
        """A LoRA run (or one whose config is unknown): the adapter must reach vLLM."""
        rank = current_value(run, "actor_rollout_ref.model.lora_rank") or current_value(
            run, "actor_rollout_ref.model.lora.rank"
        )
        lora = isinstance(rank, (int, float)) and not isinstance(rank, bool) and rank > 0
        if run.config_segments and not lora:
            return []
        return [
            advise(
                run,
                f"{RO}.load_format",
                "verl's LoRA guide requires it so that vLLM loads the base model and applies "
                "the trained adapter; a rollout engine without the adapter or with weights "
                "that did not sync samples near-random text (verl#3159, verl#5211). Check the "
                "generated text after the first weight sync.",
                "verl:docs/advance/ppo_lora.rst",
                suggest=lambda cur: "safetensors" if cur != "safetensors" else None,
                rule="safetensors (LoRA runs)",
            )
        ]

    def _advice(self, run: Run) -> list[Advice]:
        return [
            advise(
                run,
                f"{ACT}.entropy_coeff",
                "An entropy bonus (loss = pg − entropy_coeff·entropy) that outweighs the policy "
                "loss pushes entropy up without bound.",
                "verl:workers/actor/dp_actor.py",
                suggest=lambda c: (
                    None if not c else (0 if c <= 0.001 else verl_config.round_sig(c / 2))
                ),
                rule="0 (or half of a deliberate bonus)",
            ),
            halve_advice(
                run,
                f"{ACT}.optim.lr",
                "Updates too large for the model can wreck its distribution.",
                f"{SEED_PPO} §3.3",
            ),
            advise(
                run,
                f"{RO}.temperature",
                "verl divides the logits by the rollout temperature when it computes log-probs "
                "and entropy; above 1 the measured entropy rises with it.",
                "verl:workers/actor/dp_actor.py",
                suggest=lambda c: 1.0 if float(c) > 1.0 else None,
                rule="at most 1.0",
            ),
        ]


class _SpikeDetector(EventDetector):
    """Base of the spike diagnoses (LS120, LS130): each of `concepts` searched for heavy-tailed
    spikes and lasting rises (`_spikes`, then `_report` in a subclass's `_series`), reported by
    `spike_findings` (at most `max_spikes` per metric). The search window is declared here; a
    subclass declares its `z_threshold`."""

    window: int = param(31, ge=3)
    max_spikes: int = param(5, ge=1)

    def _spikes(self, s: Series, keep: Callable[[Change], bool]) -> list[Change]:
        """The heavy-tailed spikes (log scale) of `s` that pass `keep`."""
        z, window = self.z_threshold, self.window
        return [c for c in spike_changes(s, True, z, window, heavy_tails=True) if keep(c)]

    def _report(
        self,
        s: Series,
        found: list[Change],
        rise_keep: Callable[[Change], bool],
        rise_z: float,
        make: Callable[[Change, Recurrence | None], Finding],
    ) -> list[Finding]:
        """`found` spikes and the lasting rises (`_lasting_rises`) as findings, built by `make`."""
        rises = _lasting_rises(s, rise_keep, rise_z, self.max_rise_steps, found)
        return spike_findings(self, s, found, rises, make)


#: logged steps a clip-ratio spike needs before its onset (a run that starts high has no "before")
MIN_STEPS_BEFORE_SPIKE = 2


class ClipRatioSpike(_SpikeDetector, code="LS120", name="clip-ratio-spike"):
    """Spikes (or a sudden lasting rise) of response truncation or of PPO clipping.

    Reads `response_length/clip_ratio` (responses cut at `max_response_length`),
    `actor/pg_clipfrac` and `actor/pg_clipfrac_lower` (tokens whose PPO ratio was clipped).

    What it detects:
        Truncation spikes, against count noise: `response_length/clip_ratio` is k/N for the N
        responses of a step (`data.train_batch_size` × `rollout.n` when the values are multiples of
        1/N, else 1 / the smallest gap between the values). Its baseline is a centred running mean
        of the neighbouring steps (window `window`, as many steps before as after near the ends,
        each capped at the running median + `min_rise`), so truncation that rises slowly as
        responses grow moves the baseline, not the test. A step is a spike when its count's
        binomial tail probability against that baseline, times the number of steps, is at most
        `max_p`, and it is at least `min_rise` above the baseline; overdispersed counts
        (correlated responses) and heavy-tailed noise, estimated step by step, widen the noise
        (a share falling from 40 % to 1 % has far less noise at its end). The burst alone suffices
        (`pg_clipfrac` may be 0 in on-policy runs). Clipping spikes, on the log of
        `pg_clipfrac`/`pg_clipfrac_lower`: robust z-score against a centred running median of at
        least `z_threshold` heavy-tail-aware noise units (the larger of the MAD σ and the
        95th-percentile residual / 1.96), at least `min_ratio` times the running median and at least
        `min_rise` above it. A spike needs two logged steps before it: a run that starts high
        and settles (responses that learn to fit the cap) has no earlier level to spike from.
        Points within 2 steps are one spike (a burst); every spike is its own
        finding, dated at its step (at most `max_spikes` per metric, the others named in each
        message). Recurrences: a spike after at least `min_gap_steps` steps with no spike of the
        metric since the ones before is a new occurrence; its finding says so ("spiked again at
        step 475 (2nd time; first at 205)"), and when a metric has more than one occurrence each
        of its findings carries `occurrence` (1, 2, …) and `first_step` in its evidence. The 50
        default is the `tail` cooldown and the widest incident window, so each occurrence is an
        incident and an alert of its own; `max_spikes` keeps the first spike of every occurrence
        before more of one burst. Lasting rises: a KernelCPD level shift up by the same factors of
        at least `rise_z_threshold` noise units, completed within `max_rise_steps` and holding over
        the next `max_rise_steps` steps (at most `max_findings`).

    Why it matters:
        A truncation spike means many responses hit the length cap: their reward is usually
        wrong (cut before the answer) and the gradient learns to be cut. A `pg_clipfrac` spike
        means one update tried to move the policy far beyond the trust region, the usual first
        sign of a KL jump and entropy collapse.

    Example:
        step:88 - actor/pg_clipfrac:0.004 - response_length/clip_ratio:0.010 - ...
        step:89 - actor/pg_clipfrac:0.061 - response_length/clip_ratio:0.180 - ...

    Advice:
        Truncation: raise `data.max_response_length` (×1.5, rounded up to a multiple of 64) and
        keep `actor_rollout_ref.rollout.response_length` equal to it (the PPO article §5.2).
        PPO clipping: halve the learning rate and clip gradients at 0.5 (`actor.grad_clip`, seed
        003 §3.2: 1.0 → 0.5 brought pg_clipfrac to ~0).

    Known false positives:
        A curriculum step to longer prompts/answers raises truncation by design; the first steps
        after a resume can clip more while optimizer state warms up. Accounted for: the count
        noise of small batches (0, 1/64, 3/64 … is not a spike); truncation rising slowly as
        responses grow; heavy-tailed `pg_clipfrac` noise (a healthy clip fraction can wander to
        20× its median for a step, which is within its own tail). A truncation burst of one to
        three steps that stays under `warn_peak` (a tenth of the responses), or under
        `burst_ratio` times a baseline already above it, is info: with thousands of responses a
        step it is significant count-wise, yet it is the batch's draw of long prompts more often
        than a cap that fails the run (a run truncating 20 % of its responses draws 27 % now
        and then).

    References:
        seed:ppo-tuning §2.2, §3.2, §5.2; verl:trainer/ppo/metric_utils.py (clip_ratio);
        verl:trainer/ppo/core_algos.py (pg_clipfrac).
    """

    title = "Clip ratio spiked"
    concepts = ("response_clip_ratio", "pg_clipfrac", "pg_clipfrac_lower")
    groups = ("policy", "clipping")

    max_p: float = param(1e-4, gt=0, lt=1)
    z_threshold: float = param(10.0, gt=0)
    rise_z_threshold: float = param(6.0, gt=0)
    min_ratio: float = param(3.0, gt=1)
    min_rise: float = param(0.03, gt=0, lt=1)
    warn_peak: float = param(0.1, gt=0, le=1)
    burst_ratio: float = param(1.5, gt=1)

    def _big(self, s: Series, c: Change) -> bool:
        base = max(c.before, s.resolution or 0.0, 1e-12)
        return c.after >= self.min_ratio * base and c.after - c.before >= self.min_rise

    def _series(self, run: Run, s: Series, concept: str) -> list[Finding]:
        noise: dict[str, Any] = {}
        if concept == "response_clip_ratio":
            samples, source = responses_per_step(run, s)
            found: list[Change] = []
            if samples:
                found, noise = count_spikes(s, samples, self.max_p, self.min_rise, self.window)
                noise["responses_source"] = source
        else:
            found = self._spikes(s, lambda c: self._big(s, c))
        # a spike needs steps before it: a high start that settles is the run's first level
        found = [c for c in found if c.onset >= MIN_STEPS_BEFORE_SPIKE]
        return self._report(
            s,
            found,
            lambda c: self._big(s, c),
            self.rise_z_threshold,
            lambda c, rec: self._finding(run, s, c, found, noise, rec),
        )

    def _finding(
        self,
        run: Run,
        s: Series,
        c: Change,
        found: list[Change],
        noise: dict[str, Any],
        rec: Recurrence | None = None,
    ) -> Finding:
        step = s.step_at(c.onset)
        truncation = s.metric == resolve(run, "response_clip_ratio")
        what = "truncated responses" if truncation else "clipped tokens"
        again = rec.again(step) if rec else None
        if again:  # a recurrence: when first, then how
            spiked, at = f"spiked {again}: from", ""
        else:
            spiked, at = "spiked from", f" at step {step}"
        if c.kind != "spike":
            how = (
                f"rose and stayed from {fmt(c.before)} to {fmt(c.after)} ({c.ratio:.1f}×, "
                f"{c.z:.0f} noise units) at step {step}."
            )
        elif noise:
            n = noise["responses_per_step"]
            how = (
                f"{spiked} {fmt(c.before)} to {fmt(c.after)}{at} "
                f"(~{c.after * n:.0f} of {n} responses cut where ~{c.before * n:.1f} were "
                f"expected; binomial tail probability {_p_value(c.z):.1g}), back by step "
                f"{s.step_at(c.end)}."
            )
        else:
            how = (
                f"{spiked} {fmt(c.before)} to {fmt(c.after)} ({c.ratio:.1f}×, {c.z:.0f} "
                f"heavy-tail noise units){at}, back by step {s.step_at(c.end)}."
            )
        thresholds = (
            {"max_p": self.max_p, "min_rise": self.min_rise}
            if noise and c.kind == "spike"
            else {
                "z": self.z_threshold if c.kind == "spike" else self.rise_z_threshold,
                "min_ratio": self.min_ratio,
                "min_rise": self.min_rise,
            }
        )
        evidence = _change_evidence(s, c, thresholds=thresholds, **_spike_evidence(s, found, c))
        if noise and c.kind == "spike":
            evidence.update(noise, p_value=float(f"{_p_value(c.z):.3g}"))
        if rec:
            evidence.update(rec.evidence())
        extra: dict[str, Any] = {}
        # a burst of up to three steps that stays under a tenth of the responses, or under
        # `burst_ratio` times a level already that high, is the batch's draw of long prompts,
        # not the cap failing the run
        burst = noise and c.kind == "spike" and c.end - c.onset <= 2
        steps = plural(c.end - c.onset + 1, "step")
        if burst and c.after < self.warn_peak:
            how += (
                f" A burst of {steps} under {self.warn_peak:.0%} of the responses: a draw of long "
                "prompts more likely than a cap that fails the run; it matters if it recurs or "
                "lasts."
            )
            extra["severity"] = "info"
        elif burst and c.after < self.burst_ratio * c.before:
            how += (
                f" A burst of {steps} to {c.after / c.before:.2f}× a level already at "
                f"{c.before:.0%}: the batch's draw of long prompts more likely than a change in "
                "the run; it matters if it lasts."
            )
            extra["severity"] = "info"
        return self.finding(
            **extra,
            message=f"{s.metric} ({what}) {how}"
            + (_others(s, found, c) if c.kind == "spike" else ""),
            metric=s.metric,
            step=step,
            end_step=s.step_at(c.end),
            evidence=evidence,
            advice=truncation_advice(run) if truncation else self._clip_advice(run),
            references=cite_all(
                [f"{SEED_PPO} §2.2", f"{SEED_PPO} §5.2", "verl:trainer/ppo/metric_utils.py"]
                if truncation
                else [f"{SEED_PPO} §3.2", "verl:trainer/ppo/core_algos.py"]
            ),
        )

    def _clip_advice(self, run: Run) -> list[Advice]:
        out = [
            halve_advice(
                run,
                f"{ACT}.optim.lr",
                "Clipping spikes when an update pushes the policy ratio past the clip range; "
                "smaller steps stay inside it. Widening clip_ratio would hide the symptom.",
                f"{SEED_PPO} §3.3",
            )
        ]
        clip = grad_clip_advice(run, "actor", "Large gradients drive the clipped updates.")
        if clip is not None:
            out.append(clip)
        return out


def _response_length_advice(run: Run, suggest: Any) -> Advice:
    """Keep the rollout's response length equal to the data side's cap."""
    return advise(
        run,
        f"{RO}.response_length",
        "Must equal data.max_response_length: vLLM generates up to this length "
        "and the data side truncates at the other.",
        f"{SEED_PPO} §5.2",
        suggest=suggest,
        rule="equal to data.max_response_length",
    )


def truncation_advice(run: Run) -> list[Advice]:
    """Raise the response cap (×1.5, to a multiple of 64), rollout.response_length kept equal."""

    def raise_cap(c: Any) -> int:
        return int(math.ceil(float(c) * 1.5 / 64) * 64)

    out = [
        advise(
            run,
            "data.max_response_length",
            "Responses are cut at this length; a truncated answer gets the wrong reward and "
            "teaches the policy to be cut (the PPO article: tuning took clip_ratio 0.012 → 0.003).",
            f"{SEED_PPO} §5.2",
            suggest=raise_cap,
            rule="×1.5, rounded up to a multiple of 64",
        )
    ]
    config = run.config()
    if config and verl_config.has(config, f"{RO}.response_length"):
        cap = current_value(run, "data.max_response_length")
        out.append(
            _response_length_advice(run, raise_cap(cap) if isinstance(cap, (int, float)) else None)
        )
    return out


class GradNormSpike(_SpikeDetector, code="LS130", name="grad-norm-spike"):
    """Isolated gradient-norm spikes, or a sudden lasting rise (explosion).

    Reads `actor/grad_norm` and `critic/grad_norm` (the norm before clipping).

    What it detects:
        On the log of the grad norm (its noise is multiplicative): spikes whose robust z-score
        against a centred running median (window `window`) is at least `z_threshold`
        heavy-tail-aware noise units (the larger of the MAD σ and the 95th-percentile residual /
        1.96) and that reach at least `min_ratio` times the running median — warning. The ratio is
        the effect size that decides: a healthy heavy-tailed (Student-t, df 3–6), autocorrelated
        grad norm reaches 3–5.5× its running median for a step, as many noise units as a real spike
        in a noisier run, while a bad batch's spike is ~10×. A KernelCPD level shift up by
        `rise_ratio` or more that completes within `max_rise_steps` and holds over the next
        `max_rise_steps` steps, to `rise_ratio` × the median of all earlier values (a climb out
        of a dip back to the usual level is not a rise) — error (explosion). Points within 2 steps are one spike; every spike
        is its own finding, dated at its step (at most `max_spikes` per metric, the others named in
        each message), and one per lasting rise (at most `max_findings`). A spike after at least
        `min_gap_steps` steps with no spike of the metric since the ones before is a recurrence:
        its finding says "spiked again at step 411 (2nd time; first at 120)", and when a metric
        has more than one occurrence each of its spike findings carries `occurrence` (1, 2, …) and
        `first_step` in its evidence (50 by default, the `tail` cooldown: each occurrence is
        alerted; `max_spikes` keeps the first spike of every occurrence first). The first
        `warmup_steps` logged values are not judged. Non-finite values are LS001's. A run with fewer than
        `min_points` values (an excerpt) is judged step to step instead: a rise to 10× the step
        before and above 5× the clip, after step 5, and above every earlier logged value (a
        sparse excerpt's dip is not the level: 27 → 0.48 → 10.5 is no spike); or, at any step
        (warm-up included, unless the norm falls over the first `warmup_steps` steps: an
        untrained value head learning), a norm `extreme_factor` × the registry's alarm level
        (critic 20× the clip → 200×, actor 5× → 50×), with the critic's other signs at that
        step (value loss, explained variance, values far outside the returns) named: the critic
        diverged.

    Why it matters:
        verl clips the gradient to `grad_clip` after measuring it, so a spike is an update whose
        direction came from one bad batch; repeated spikes precede loss divergence, and a
        lasting rise means the optimisation is unstable (the PPO article: grad_norm 7.16 before
        tuning, 4.2–4.8 after).

    Example:
        step:410 - actor/grad_norm:0.42 - actor/pg_loss:0.013 - ...
        step:411 - actor/grad_norm:6.93 - actor/pg_loss:0.215 - ...
        step:412 - actor/grad_norm:0.45 - actor/pg_loss:0.011 - ...

    Advice:
        Clip gradients at 0.5 (`actor_rollout_ref.actor.grad_clip`, `actor.optim.clip_grad` in
        verl ≥ 0.8; the PPO article §3.2: 1.0 → 0.5) and halve the learning rate; the critic's keys for
        `critic/grad_norm`. A critic norm far past the alarm in an excerpt: halve
        `critic.optim.lr`, give the critic a few steps alone (`trainer.critic_warmup`), clip.

    Known false positives:
        The first steps of a run (optimizer state empty) and the first step after a resume often
        have a larger norm; runs with very few samples per step are spiky by nature. Accounted
        for: heavy-tailed (Student-t) and autocorrelated grad-norm noise — a single step at 3–5×
        the running median is within a healthy run's own tail and is not reported.

    References:
        seed:ppo-tuning §3.2, §3.3; verl:workers/actor/dp_actor.py (clip_grad_norm_).
    """

    title = "Gradient norm spiked"
    concepts = ("actor_grad_norm", "critic_grad_norm")
    groups = ("optimisation",)

    z_threshold: float = param(6.0, gt=0)
    min_ratio: float = param(6.0, gt=1)
    rise_ratio: float = param(3.0, gt=1)
    warmup_steps: int = param(3, ge=0)
    extreme_factor: float = param(10.0, gt=1)

    def _short(self, run: Run, concept: str) -> list[Finding]:
        """Too few steps for a running median: a rise to 10× the step before, to above 5× the
        clip (`logscope.health`), after warm-up and above every earlier value; or, at any step,
        a norm `extreme_factor` × beyond the registry's alarm level (`_extreme`)."""
        role = _role(concept)
        clip, clip_source = grad_clip(run, role)
        _, high = REFERENCES[concept].healthy
        jump = consecutive_jump(run, concept, 10.0, (high or 5.0) * clip)
        if jump is None:
            return self._extreme(run, concept, role, clip, clip_source)
        message = (
            f"{jump.metric} spiked from {fmt(jump.before)} at step {jump.step_before} to "
            f"{fmt(jump.after)} at step {jump.step} ({jump.ratio:.0f}×; {jump.after / clip:.0f}× "
            f"the clip {clip:g}, {clip_source})."
        )
        advice = _grad_spike_advice(run, role)
        return [
            self.finding(
                message=message,
                metric=jump.metric,
                step=jump.step,
                end_step=jump.step,
                evidence={
                    "level_before": sig(jump.before),
                    "level_after": sig(jump.after),
                    "ratio": round(jump.ratio, 1),
                    "clip": clip,
                    "judged_on": "consecutive steps (too few for a running median)",
                },
                advice=advice,
                references=cite_all([f"{SEED_PPO} §3.2", "verl:workers/actor/dp_actor.py"]),
            )
        ]

    def _extreme(
        self, run: Run, concept: str, role: str, clip: float, clip_source: str
    ) -> list[Finding]:
        """The largest logged norm of an excerpt when it is at least `extreme_factor` × the
        registry's alarm level (its `alarm_high`, else the top of its healthy range, × the
        clip): past anything a warm-up explains, so warm-up steps count too, unless the norm
        falls over them (an untrained value head learning: verl's PPO quickstart logs
        critic/grad_norm 1023 → 943 at its first two steps)."""
        ref = REFERENCES[concept]
        per_clip = ref.alarm_high or ref.healthy[1]
        norms = values_by_step(run, concept)
        warm = [v for s, v in sorted(norms.items()) if s <= self.warmup_steps]
        if len(warm) >= 2 and warm[-1] < warm[0]:
            norms = {s: v for s, v in norms.items() if s > self.warmup_steps}
        if not norms or per_clip is None:
            return []
        step, value = max(norms.items(), key=lambda kv: kv[1])
        limit = self.extreme_factor * per_clip * clip
        if value < limit:
            return []
        metric = resolve(run, concept) or concept
        message = (
            f"{metric} is {fmt(value)} at step {step}, {value / clip:.0f}× the clip {clip:g} "
            f"({clip_source}): {value / (per_clip * clip):.0f}× the level that already flags a "
            f"step ({per_clip:g}× the clip), far past anything a warm-up explains. The log is "
            "too short to see where it rose."
        )
        evidence: dict[str, Any] = {
            "level": sig(value),
            "clip": clip,
            "alarm_per_clip": per_clip,
            "extreme_factor": self.extreme_factor,
            "judged_on": "every logged step (too few for a running median)",
        }
        advice = _grad_spike_advice(run, role)
        if role == "critic":
            signs = _critic_off(run, step)
            if signs:
                message += f" At the same step {'; '.join(signs)}: the critic diverged."
                evidence["critic_signs"] = signs
            advice = [
                halve_advice(
                    run,
                    "critic.optim.lr",
                    "A critic that diverges in a step or two is usually stepping too far: "
                    "verl's default critic LR is 1e-5.",
                    f"{SEED_PPO} §4",
                ),
                advise(
                    run,
                    "trainer.critic_warmup",
                    "Steps of critic-only updates before the actor's first: the actor then "
                    "trains on advantages from a critic that fits the returns, not on noise.",
                    "verl:trainer/ppo/ray_trainer.py",
                    suggest=lambda cur: 5 if not cur else None,
                    rule="a few steps (verl's default is 0)",
                ),
                *[a for a in advice if a.parameter != "critic.optim.lr"],
            ]
        return [
            self.finding(
                message=message,
                metric=metric,
                step=step,
                end_step=step,
                evidence=evidence,
                advice=advice,
                references=cite_all([f"{SEED_PPO} §3.2", "verl:workers/critic/dp_critic.py"]),
            )
        ]

    def _series(self, run: Run, s: Series, concept: str) -> list[Finding]:
        role = _role(concept)
        start = s.steps[0] + self.warmup_steps
        found = self._spikes(s, lambda c: c.ratio >= self.min_ratio and s.steps[c.onset] >= start)

        def above_usual(c: Change) -> bool:
            """A rise out of a dip back to the usual level is no rise: the level after must
            also be `rise_ratio` × the median of everything logged before the onset."""
            usual = float(np.median(s.values[: max(1, c.onset)]))
            return c.after >= self.rise_ratio * usual

        return self._report(
            s,
            found,
            lambda c: c.ratio >= self.rise_ratio and s.steps[c.onset] >= start and above_usual(c),
            self.z_threshold,
            lambda c, rec: self._finding(run, s, c, found, role, rec),
        )

    def _finding(
        self,
        run: Run,
        s: Series,
        c: Change,
        found: list[Change],
        role: str,
        rec: Recurrence | None = None,
    ) -> Finding:
        step = s.step_at(c.onset)
        spike = c.kind == "spike"
        again = rec.again(step) if rec else None
        message = (
            f"{s.metric} "
            + (f"spiked {again}: from" if again else "spiked" if spike else "rose and stayed high")
            + ("" if again else " from")
            + f" {fmt(c.before)} to {fmt(c.after)} ({c.ratio:.1f}×, {c.z:.0f} "
            + ("heavy-tail noise units" if spike else "noise units")
            + " on a log scale)"
            + ("" if again else f" at step {step}")
            + (
                f", back by step {s.step_at(c.end)}."
                if spike
                else ": the optimisation is unstable."
            )
            + (_others(s, found, c) if spike else "")
        )
        evidence = _change_evidence(
            s,
            c,
            thresholds={
                "z": self.z_threshold,
                "min_ratio": self.min_ratio if spike else self.rise_ratio,
            },
            **_spike_evidence(s, found, c),
            **(rec.evidence() if rec else {}),
        )
        advice = _grad_spike_advice(run, role)
        return self.finding(
            severity="warning" if spike else "error",
            message=message,
            metric=s.metric,
            step=step,
            end_step=s.step_at(c.end),
            evidence=evidence,
            advice=advice,
            references=cite_all([f"{SEED_PPO} §3.2", "verl:workers/actor/dp_actor.py"]),
        )


def _role(concept: str) -> str:
    """The role whose gradient norm a concept is (`critic_grad_norm`: the critic)."""
    return "critic" if concept.startswith("critic") else "actor"


def _critic_off(run: Run, step: int) -> list[str]:
    """Signs at `step` that the critic is far from its targets: value loss 10× its healthy
    top, explained variance 10× below its alarm, values outside the returns' range by 10× it."""
    signs: list[str] = []
    vf = values_by_step(run, "vf_loss").get(step)
    if vf is not None and vf >= 10 * VF_LOSS_HIGH:
        signs.append(f"{name_of(run, 'vf_loss')} is {fmt(vf)}")
    ev = values_by_step(run, "vf_explained_var").get(step)
    ev_alarm = REFERENCES["vf_explained_var"].alarm_low
    if ev is not None and ev_alarm is not None and ev <= 10 * ev_alarm:
        signs.append(f"{name_of(run, 'vf_explained_var')} is {fmt(ev)}")
    value = values_by_step(run, "values_mean").get(step)
    low = values_by_step(run, "returns_min").get(step)
    high = values_by_step(run, "returns_max").get(step)
    off = (
        max(low - value, value - high) > 10 * max(high - low, 0.01)
        if value is not None and low is not None and high is not None
        else False
    )
    if off:
        signs.append(
            f"{name_of(run, 'values_mean')} is {fmt(value)} while the returns span "
            f"{fmt(low)}–{fmt(high)}"
        )
    return signs


#: `critic/vf_loss` above this for long means the critic does not fit (seed:ppo-tuning §4.1)
VF_LOSS_HIGH = 0.1


def _grad_spike_advice(run: Run, role: str) -> list[Advice]:
    return clip_and_lr_advice(
        run,
        role,
        "The norm is measured before clipping; clipping bounds the update.",
        "A smaller learning rate shrinks the step a bad batch can cause.",
    )


class ResponseLengthCollapse(Detector, code="LS140", name="response-length-collapse"):
    """Mean response length collapsing, or running up to the length cap.

    Reads `response_length/mean` (and the config's `data.max_response_length` for the cap).

    What it detects:
        KernelCPD level transitions on the log of `response_length/mean` (≤ 2,000 bin medians,
        then located at full resolution; the step is where the move starts): a fall to at most
        `max_ratio` of the level before (collapse), or a rise to at least `cap_fraction` of
        `data.max_response_length` from below `cap_fraction` × 0.8 of it (explosion to the cap;
        without a config the cap is the largest `response_length/max` of a run that truncated
        responses), each at least `z_threshold` noise units. A fall is no collapse when the level
        later climbs back to `recover_ratio` of where it fell from (a running median after the
        fall), or when truncation going away explains it: a cut response has the cap's length,
        so the mean is c·cap + (1 − c)·U (c: `response_length/clip_ratio`); when c falls and U,
        the mean of the responses that fit, holds above `max_ratio` of its level before, cut
        responses learned to fit. A run too short for the change test (an excerpt) is judged
        by its recent level: a mean of 5 tokens or fewer is a collapse (`logscope.health`'s
        reference range).

    Why it matters:
        A length collapse usually means the policy found a short degenerate answer (empty or
        formulaic) that the reward does not punish: learning signal disappears. Running up to
        the cap means responses are truncated: wasted generation, wrong rewards, and often
        repetition loops.

    Example:
        step:500 - response_length/mean:412.3 - response_length/clip_ratio:0.01 - ...
        step:520 - response_length/mean:96.8 - response_length/clip_ratio:0.0 - ...

    Advice:
        Collapse: check the reward for a short-answer loophole, halve the LR. Explosion to the
        cap: raise `data.max_response_length` (×1.5, to a multiple of 64) with
        `actor_rollout_ref.rollout.response_length` kept equal.

    Known false positives:
        A deliberate switch to a task with shorter answers, or a length penalty switched on; a
        task whose answer is a single token (a label), judged from an excerpt. Not reported: the
        early dip of many GRPO runs (answers shorten first, then lengthen back past where they
        started), and a run whose responses start truncated and learn to fit under the cap.
        A collapse that later heals back to `recover_ratio` of its level is passed over too.

    References:
        seed:ppo-tuning §5.2; verl:trainer/ppo/metric_utils.py (response_length/*).
    """

    title = "Response length collapsed"
    concepts = ("response_length_mean",)
    groups = ("policy", "length")

    max_ratio: float = param(0.6, gt=0, lt=1)
    cap_fraction: float = param(0.8, gt=0, lt=1)
    z_threshold: float = param(4.0, gt=0)
    warmup_steps: int = param(3, ge=0)
    min_points: int = param(20, ge=1)
    recover_ratio: float = param(0.9, gt=0)

    def _level(self, run: Run) -> list[Finding]:
        """Too few steps to see a fall: a mean of a few tokens is a collapse on its own."""
        ref = REFERENCES["response_length"]
        level = _low_level(run, "response_length_mean", ref, inclusive=True)
        if level is None:
            return []
        message = (
            f"{level.metric} is {fmt(level.value)} tokens {level.where()}: the responses are "
            "(almost) empty, too short to hold reasoning or an answer. The log is too short to "
            "see the fall; the level alone says the policy stopped answering."
        )
        return [
            self.finding(
                message=message,
                **_at_short_level(level, ref, "collapse", alarm_at_or_below=ref.alarm_low),
                advice=[
                    halve_advice(
                        run,
                        f"{ACT}.optim.lr",
                        "Check the reward for a short-answer loophole first (score a few empty "
                        "responses by hand); large updates find such loopholes fast.",
                        f"{SEED_PPO} §3.3",
                    )
                ],
                references=cite_all(["verl:trainer/ppo/metric_utils.py", f"{SEED_PPO} §5.2"]),
            )
        ]

    def detect(self, run: Run) -> list[Finding]:
        s = Series.load(run, "response_length_mean", min_points=self.min_points)
        if s is None:
            return self._level(run)
        start = s.steps[0] + self.warmup_steps
        out: list[Finding] = []
        cap = current_value(run, "data.max_response_length") if run.config_segments else None
        if not isinstance(cap, (int, float)) or cap <= 0:
            cap = self._observed_cap(run)
        drops = [
            c
            for c in _drops(s, self.z_threshold, self.max_ratio, start)
            if self._recovery(s, c) is None and self._fitting(run, s, c, cap) is None
        ]
        if drops:
            out.append(self._collapse(run, s, min(drops, key=lambda c: c.onset)))
        if isinstance(cap, (int, float)) and cap > 0:
            rises = []
            for c in level_shifts(s, True, +1):
                # an approach to the cap slows down near it and can be split into several
                # changes: judge the level reached over the points after this one's 90 % mark
                reached = float(np.median(s.values[c.end : c.end + 20]))
                if (
                    c.z >= self.z_threshold
                    and max(c.after, reached) >= self.cap_fraction * cap
                    and c.before < 0.8 * self.cap_fraction * cap
                    and s.steps[c.onset] >= start
                ):
                    c.after = max(c.after, reached)
                    rises.append(c)
            if rises:
                out.append(self._to_cap(run, s, min(rises, key=lambda c: c.onset), float(cap)))
        return out

    def _recovery(self, s: Series, c: Change) -> int | None:
        """The first step after the fall where the level is back to `recover_ratio` of the
        level before it (a running median over a fifth of the points after the fall, 5 to 101
        of them), or None: a dip the policy climbs back out of (GRPO runs often shorten their
        answers first, then lengthen them) is not a collapse."""
        later = s.values[c.end + 1 :]
        width = int(np.clip(len(later) // 5, 5, 101)) | 1
        if len(later) < width:
            return None
        half = width // 2
        level = running_median(later, width)[half : len(later) - half]
        back = np.flatnonzero(level >= self.recover_ratio * c.before)
        return s.step_at(c.end + 1 + half + int(back[0])) if len(back) else None

    def _fitting(self, run: Run, s: Series, c: Change, cap: float | None) -> dict | None:
        """The fall explained by truncation going away, or None.

        A truncated response has the cap's length, so the mean is c·cap + (1 − c)·U, with c
        the truncated share (`response_length/clip_ratio`) and U the mean of the responses
        that fit. When c falls and U holds above `max_ratio` of its level before, the mean
        fell because responses that were cut learned to fit, not because answers collapsed.
        """
        clip = Series.load(run, "response_clip_ratio")
        if clip is None or not isinstance(cap, (int, float)) or cap <= 0:
            return None
        w = max(3, min(20, (c.end - c.onset) or 3))
        before_steps = s.steps[max(0, c.onset - w) : c.onset + 1]
        after_steps = s.steps[c.end : c.end + w]
        cb, ca = clip.at(before_steps), clip.at(after_steps)
        cb, ca = cb[np.isfinite(cb)], ca[np.isfinite(ca)]
        if not len(cb) or not len(ca):
            return None
        share_before, share_after = float(np.median(cb)), float(np.median(ca))
        if not 0 <= share_after < share_before < 1:
            return None
        fit_before = (c.before - share_before * cap) / (1 - share_before)
        fit_after = (c.after - share_after * cap) / (1 - share_after)
        if fit_before <= 0 or fit_after <= self.max_ratio * fit_before:
            return None  # inconsistent with the cap, or the responses that fit collapsed too
        return {
            "clip_ratio_before": share_before,
            "clip_ratio_after": share_after,
            "fitting_mean_before": fit_before,
            "fitting_mean_after": fit_after,
        }

    @staticmethod
    def _observed_cap(run: Run) -> float | None:
        """Without a config: the largest `response_length/max`, when responses were truncated
        (a positive `response_length/clip_ratio`) — truncated responses have the cap's length.
        """
        top = Series.load(run, "response_length_max")
        clip = Series.load(run, "response_clip_ratio")
        if top is None or clip is None or not (clip.values > 0).any():
            return None
        return float(np.max(top.values))

    def _collapse(self, run: Run, s: Series, c: Change) -> Finding:
        step, end = s.step_at(c.onset), s.step_at(c.end)
        message = (
            f"{s.metric} collapsed from {fmt(c.before)} to {fmt(c.after)} tokens "
            f"({c.ratio:.0%}) starting at step {step}; 90% of the fall done by step {end}."
        )
        return self.finding(
            message=message,
            **_at_change(
                s,
                c,
                direction="collapse",
                thresholds={"max_ratio": self.max_ratio, "z": self.z_threshold},
            ),
            advice=[
                halve_advice(
                    run,
                    f"{ACT}.optim.lr",
                    "A fast length collapse is the policy jumping to a short answer style the "
                    "reward does not punish; check the reward for a loophole, and take smaller "
                    "steps so it cannot lock in within a few updates.",
                    f"{SEED_PPO} §3.3",
                )
            ],
            references=cite_all(["verl:trainer/ppo/metric_utils.py"]),
        )

    def _to_cap(self, run: Run, s: Series, c: Change, cap: float) -> Finding:
        step = s.step_at(c.onset)
        message = (
            f"{s.metric} rose from {fmt(c.before)} to {fmt(c.after)} tokens starting at step "
            f"{step}, {c.after / cap:.0%} of data.max_response_length={cap:g}: responses are "
            "running into the cap."
        )
        return self.finding(
            message=message,
            **_at_change(
                s,
                c,
                direction="to-cap",
                cap=cap,
                thresholds={"cap_fraction": self.cap_fraction, "z": self.z_threshold},
            ),
            advice=truncation_advice(run),
            references=cite_all([f"{SEED_PPO} §5.2", "verl:trainer/ppo/metric_utils.py"]),
        )


class ResponseLengthClipped(Detector, code="LS141", name="response-length-clipped"):
    """Many responses hit the length cap: answers are cut before they end.

    Reads `response_length/clip_ratio` and `response_length/max`, and
    `data.max_response_length` from the config.

    What it detects:
        Over the last `last_steps` logged training steps, at any run length (one step is
        enough): the median `response_length/clip_ratio` at or above `min_ratio`. On verl 0.9.x
        V1 runs the ratio compares each response with the padded batch max (never 0, wrong
        exactly when nothing is truncated; verl#7817), so there — and when the ratio is not
        logged — it judges by `response_length/max` == `data.max_response_length` in more
        than `at_cap_share` of those steps, counting the V1 ratio only on steps at the cap
        (where it is right); without any ratio the cap alone says that some responses are cut
        (info). A run without a config is judged by the ratio alone. Truncation that has
        passed — the median over some earlier `last_steps` consecutive logged steps (at most a
        third of the run's) at or above `min_ratio`, the recent level below it — is info, with
        the mean response length then and now (a policy that learned to fit the cap by
        answering shorter).

    Why it matters:
        A truncated answer usually loses its final answer, so its reward is wrong, and the
        policy learns from the cut: wasted generation, a reward signal biased against long
        reasoning, and often repetition loops that run into the cap.

    Example:
        step:1 - response_length/mean:93.1 - response_length/max:128.0 -
        response_length/clip_ratio:0.199 - ...  (20% of the responses end at the 128-token cap)

    Advice:
        Raise `data.max_response_length` (×2, to a multiple of 64; the cap is read from the
        config, or from `response_length/max` when responses are truncated) and keep
        `actor_rollout_ref.rollout.response_length` equal to it; vLLM's
        `rollout.max_model_len` must hold the prompt plus the new length. If the long answers
        are repetition loops, fix those instead (the cap only hides them).

    Known false positives:
        Tasks whose answers are meant to be cut at the cap (a hard length budget); a run of
        a model that loops on a few prompts. Sudden bursts on long runs are LS120's. Accounted
        for: a model that writes garbage runs every response to the cap — when a loss, KL or
        entropy is non-finite on at least half of the judged steps, or the entropy is far
        above its range (near-random text) over them, the finding is info, names that cause
        and gives no cap advice.

    References:
        seed:ppo-tuning §2.2, §5.2 (clip_ratio 0.012 → 0.003 after tuning);
        verl:trainer/ppo/metric_utils.py (clip_ratio); verl#7817 (V1 clip_ratio).
    """

    title = "Many responses hit the length cap"
    concepts = ("response_clip_ratio", "response_length_max")
    groups = ("policy", "length")

    min_ratio: float = param(0.1, gt=0, lt=1)
    at_cap_share: float = param(0.5, gt=0, lt=1)
    last_steps: int = param(RECENT_STEPS, ge=1)

    def detect(self, run: Run) -> list[Finding]:
        clip = recent_level(run, "response_clip_ratio", self.last_steps)
        top = recent_level(run, "response_length_max", self.last_steps)
        cap, _ = response_cap(run)
        if clip is not None and clip_ratio_reliable(run):
            if clip.value < self.min_ratio:
                return self._passed(run)
            return [self._finding(run, clip.value, clip.steps, top, cap, "clip_ratio")]
        if top is None or cap is None:
            return []
        at_cap = {s for s, v in zip(top.steps, top.values, strict=True) if v >= cap - 0.5}
        if len(at_cap) <= self.at_cap_share * len(top.steps):
            return []
        if clip is None:  # how many is not logged: at the cap says "some", not "many"
            return [self._finding(run, None, top.steps, top, cap, "max == cap", "info")]
        # verl 0.9 V1: the ratio is right on the steps whose batch max is the cap
        ratios = values_by_step(run, "response_clip_ratio", since=top.steps[0])
        ratio = float(np.median([ratios.get(s, 0.0) if s in at_cap else 0.0 for s in top.steps]))
        if ratio < self.min_ratio:
            return []
        return [self._finding(run, ratio, top.steps, top, cap, "max == cap (verl 0.9 V1)")]

    def _passed(self, run: Run) -> list[Finding]:
        """Truncation that has passed (info): the median over some earlier `w` consecutive
        logged steps (`last_steps`, at most a third of the run's) at or above `min_ratio`,
        before the last `w`; the responses learned to fit the cap, often by getting shorter."""
        s = Series.load(run, "response_clip_ratio")
        if s is None:
            return []
        w = min(self.last_steps, max(1, len(s) // 3))
        starts = len(s) - 2 * w + 1  # windows that end before the last w points
        if starts < 1:
            return []
        meds = np.median(np.lib.stride_tricks.sliding_window_view(s.values, w)[:starts], axis=1)
        j = int(np.argmax(meds))
        if meds[j] < self.min_ratio:
            return []
        now, last = float(np.median(s.values[-w:])), s.steps[-w:]

        def span(steps: np.ndarray) -> str:
            return f"at step {steps[0]}" if w == 1 else f"over steps {steps[0]}–{steps[-1]}"

        message = (
            f"{s.metric} was {fmt(meds[j])} {span(s.steps[j : j + w])} ({meds[j]:.0%} of the "
            f"responses at the length cap) and is {fmt(now)} {span(last)}"
            + (f" (medians of {w} steps)" if w > 1 else "")
            + ": the truncation has passed."
        )
        length = Series.load(run, "response_length_mean")
        if length is not None:
            then, later = length.at(s.steps[j : j + w]), length.at(last)
            if np.isfinite(then).any() and np.isfinite(later).any():
                a, b = float(np.nanmedian(then)), float(np.nanmedian(later))
                message += f" {length.metric} went from {fmt(a)} to {fmt(b)} meanwhile" + (
                    ": the policy learned to answer within the cap by answering shorter."
                    if b < 0.8 * a
                    else "."
                )
        return [
            self.finding(
                severity="info",
                message=message,
                metric=s.metric,
                step=int(s.steps[j]),
                end_step=int(last[-1]),
                evidence={
                    "clip_ratio_then": sig(float(meds[j])),
                    "clip_ratio_now": sig(now),
                    "window_steps": w,
                    "threshold": self.min_ratio,
                    "judged_by": "clip_ratio, earlier",
                },
                references=cite_all([f"{SEED_PPO} §5.2", "verl:trainer/ppo/metric_utils.py"]),
            )
        ]

    def _finding(
        self,
        run: Run,
        ratio: float | None,
        steps: tuple[int, ...],
        top: Any,
        cap: float | None,
        judged_by: str,
        severity: str = "warning",
    ) -> Finding:
        inferred = cap is None and top is not None
        limit = cap if cap is not None else (top.value if top is not None else None)
        ratio_names = profile_of(run).names("response_clip_ratio")
        clip_name = resolve(run, "response_clip_ratio") or (ratio_names or ("",))[0]
        max_name = top.metric if top is not None else "the longest response"
        where = f"at step {steps[0]}" if len(steps) == 1 else f"over steps {steps[0]}–{steps[-1]}"
        if ratio is not None:
            message = (
                f"{clip_name} is {fmt(ratio)} {where}"
                + (f" (median of {len(steps)})" if len(steps) > 1 else "")
                + f": {ratio:.0%} of the responses hit the length cap"
            )
        else:
            message = f"{max_name} reaches the cap {where}: some responses are truncated " + (
                f"({clip_name}, which says how many, is not logged)"
                if clip_name
                else "(how many is not logged)"
            )
        if top is not None and limit is not None:
            message += (
                f" ({max_name} is {top.value:g}: the cap)"
                if inferred
                else f" ({max_name} {top.value:g} = "
                f"{parameter_name(run, 'data.max_response_length')} {limit:g})"
            )
        if judged_by.endswith("(verl 0.9 V1)"):
            message += (
                "; on verl 0.9 V1 clip_ratio compares with the padded batch max, so it is "
                "counted only on the steps at the cap"
            )
        message += "."
        evidence: dict[str, Any] = {
            "clip_ratio": None if ratio is None else sig(ratio),
            "steps": list(steps),
            "response_length_max": None if top is None else sig(top.value),
            "cap": limit,
            "cap_source": "config" if cap is not None else (max_name if inferred else None),
            "threshold": self.min_ratio,
            "judged_by": judged_by,
        }
        advice = cap_advice(run, limit, inferred)
        cause = root_cause(run, steps)
        if cause is not None:  # garbage runs to the cap: a longer cap would not help
            message += (
                " " + cause.note("Truncation at the cap") + " Raising the cap would not help."
            )
            evidence["consequence_of"] = cause.evidence()
            severity, advice = "info", []
        return self.finding(
            severity=severity,
            message=message,
            metric=clip_name if ratio is not None else max_name,
            step=steps[0],
            end_step=steps[-1],
            evidence=evidence,
            advice=advice,
            references=cite_all([f"{SEED_PPO} §5.2", "verl:trainer/ppo/metric_utils.py"]),
        )


def _double_cap(cap: Any) -> int:
    """×2, rounded up to a multiple of 64."""
    return int(math.ceil(float(cap) * 2 / 64) * 64)


def cap_advice(run: Run, cap: float | None, inferred: bool) -> list[Advice]:
    """Raise `data.max_response_length` ×2 (from the config, or the cap seen in the log), with
    `rollout.response_length` kept equal and `rollout.max_model_len` large enough."""
    new = _double_cap(cap) if cap else None
    rationale = (
        "Responses are cut at this length; a cut answer gets the wrong reward and teaches the "
        "policy to be cut (the PPO article: tuning took clip_ratio 0.012 → 0.003). Keep "
        f"{RO}.response_length equal to it and {RO}.max_model_len at least prompt + response."
    )
    if inferred:
        rationale += (
            f" The config is not in the log: the cap {cap:g} is "
            f"{name_of(run, 'response_length_max')}."
        )
    out = [
        advise(
            run,
            "data.max_response_length",
            rationale,
            f"{SEED_PPO} §5.2",
            suggest=_double_cap if not inferred else new,
            rule="×2, rounded up to a multiple of 64",
        )
    ]
    config = run.config()
    if config and verl_config.has(config, f"{RO}.response_length"):
        out.append(_response_length_advice(run, new))
    prompt = current_value(run, "data.max_prompt_length")
    if config and verl_config.has(config, f"{RO}.max_model_len") and new and prompt:
        out.append(
            advise(
                run,
                f"{RO}.max_model_len",
                "vLLM cuts every sequence at max_model_len without counting it as truncation "
                "(verl#7823): it must hold the longest prompt plus the new response length.",
                "verl#7823",
                suggest=lambda cur: max(int(cur), int(prompt) + new) if cur else None,
                rule="≥ data.max_prompt_length + data.max_response_length",
            )
        )
    return out
