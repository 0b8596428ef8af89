"""KL diagnoses: jumps in KL (LS101), KL to the reference out of its band (LS102), and
`actor/ppo_kl` too low for the updates to matter (LS103)."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from logscope import verl_config
from logscope.advice import SEED_GRPO, SEED_PPO, advise, current_value
from logscope.aliases import resolve
from logscope.detector import Detector, param
from logscope.exceptions import BadDetectorParameters
from logscope.health import REFERENCES, consecutive_jump, recent_level
from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all
from logscope.verl_config import ACT
from logscope.words import plural

from ._changes import Change, Recurrence, domain, level_shifts, recurring, spike_changes
from ._common import EventDetector, halve_advice, scale_advice
from ._series import Series, running_median, stretches
from ._stats import binom_cdf, fmt, mad_normal, sig

#: the GRPO article's calibration step (×0.7 / ×1.5 per round), applied in the direction the
#: mechanics give: a larger KL coefficient pulls the policy back toward the reference.
KL_COEF_STEP = 1 / 0.7
#: in a run too short for changepoints, a rise to this many times the step before is a jump
SHORT_JUMP_RATIO = 10.0
#: on-policy signature: this share of ppo_kl values below 0 (noise around 0) with clip fraction 0
ON_POLICY_NEGATIVE_SHARE = 0.2
#: entropy (nats per token) this low, or a fall by this share of its early level, is a collapse;
#: healthy runs lose 30-60 % early, so a halving alone is not
NEAR_ZERO_ENTROPY = 0.02
COLLAPSE_FALL = 0.8
#: kl-jump: a rise of KL to the reference early in the run that continues its climb from ~0
#: (the least of its first 3 values at most this share of the level before the rise, the rise
#: no steeper than this many times the climb's mean slope) is the start-up ramp, not a jump
RAMP_START_SHARE = 0.5
RAMP_SLOPE_RATIO = 2.0
#: kl-out-of-band: above the band is a warning only with a sign of harm; one is a rise of at
#: least this many times over the RISE_STEPS steps before KL passed the high threshold
RISE_STEPS = 30
FAST_RISE_RATIO = 2.5  # a linear climb from 0.02 at step 25 is 2.2x 30 steps later
#: a Gaussian's 99th percentile of |x| in σ: heavy tails raise a series' own 99th percentile above it
Z99 = 2.5758293035489004  # scipy.special.ndtri(0.995)


def _lr_share(run: Run, steps: np.ndarray) -> np.ndarray | None:
    """LR / peak LR at `steps`: the last `actor/lr` logged at or before each step, else (the LR
    not logged, or printed as 0.000 by a `.3f` log) the schedule the config implies. None when
    the LR is constant."""
    lr = Series.load(run, "lr", min_points=3)
    peak = float(np.max(lr.values)) if lr is not None else 0.0
    if lr is None or not peak > 0:
        return _config_lr_share(run, steps)
    if float(np.min(lr.values)) >= peak * (1 - 1e-6):
        return None
    at = np.clip(np.searchsorted(lr.steps, steps, side="right") - 1, 0, len(lr) - 1)
    return np.clip(lr.values[at] / peak, 0.0, 1.0)


def _config_lr_share(run: Run, steps: np.ndarray) -> np.ndarray | None:
    """verl's actor LR schedule from the config (`optim.warmup_style`, `lr_warmup_steps[_ratio]`,
    `min_lr_ratio`; total steps from the log or `trainer.total_training_steps`), or None."""
    opt = f"{ACT}.optim"
    style = str(current_value(run, f"{opt}.warmup_style") or "constant")
    total = run.meta.get("total_training_steps") or current_value(
        run, "trainer.total_training_steps"
    )
    try:
        total = int(total) if total and int(total) > 0 else int(run.steps.max())
        warm = int(current_value(run, f"{opt}.lr_warmup_steps") or -1)
        if warm < 0:
            warm = int(float(current_value(run, f"{opt}.lr_warmup_steps_ratio") or 0) * total)
        floor = float(current_value(run, f"{opt}.min_lr_ratio") or 0.0)
    except (TypeError, ValueError):
        return None
    if style not in ("cosine", "linear") and warm <= 0:
        return None
    t = steps.astype(np.float64)
    share = np.minimum(1.0, t / warm) if warm > 0 else np.ones(len(t))
    if style in ("cosine", "linear"):
        frac = np.clip((t - warm) / max(1, total - warm), 0.0, 1.0)
        shape = 0.5 * (1 + np.cos(np.pi * frac)) if style == "cosine" else 1 - frac
        share = np.where(t > warm, floor + (1 - floor) * shape, share)
    return share


def _on_policy(run: Run, ppo_kl: Series) -> str | None:
    """Why ppo_kl carries no update size (one optimizer update per step), or None.

    Known from the config (`ppo_epochs` = 1 and `train_batch_size` ≤ `ppo_mini_batch_size`), or
    from the data: ppo_kl is noise around 0 (a sizeable share negative) and nothing is clipped.
    """
    if run.config_segments:
        epochs = current_value(run, f"{ACT}.ppo_epochs")
        train = current_value(run, "data.train_batch_size")
        mini = current_value(run, f"{ACT}.ppo_mini_batch_size")
        try:
            if int(epochs) == 1 and int(train) <= int(mini):
                return (
                    "one optimizer update per step (ppo_epochs=1, train_batch_size ≤ "
                    "ppo_mini_batch_size): ppo_kl is 0 by construction"
                )
        except (TypeError, ValueError):
            pass
    negative = float(np.mean(ppo_kl.values < 0))
    clip = Series.load(run, "pg_clipfrac")
    unclipped = clip is None or float(np.mean(clip.values > 0)) <= 0.05
    if negative >= ON_POLICY_NEGATIVE_SHARE and unclipped:
        return (
            f"ppo_kl is noise around 0 ({negative:.0%} of its values negative) and the clip "
            "fraction is 0: one optimizer update per step (on-policy)"
        )
    return None


def _window_medians(x: np.ndarray, width: int) -> np.ndarray:
    """medians[i] = median of x[i : i + width] (empty when x is shorter than `width`)."""
    if len(x) < width:
        return np.empty(0)
    return np.median(sliding_window_view(x, width), axis=1)


class _Shift(NamedTuple):
    """A judged level change, in the analysis domain (log values on a log scale)."""

    before: float
    after: float
    z: float
    spread: float  # one σ of the same change taken elsewhere in the series


def _shift(
    x: np.ndarray, meds: np.ndarray, width: int, onset: int, end: int, floor: float = 0.0
) -> _Shift | None:
    """(level before, level after, z, spread) of a change of `x` from `onset`, complete at `end`.

    `meds` are `_window_medians(x, width)`. The levels are medians of the `width` points
    before `onset` and from `end`. z is their difference against the same difference taken
    everywhere else in the series (centred on its median, scaled by its MAD): the series' own
    wander, heavy tails and autocorrelation included, sets the bar, not point-to-point noise.
    """
    before, after = x[max(0, onset - width) : onset], x[end : end + width]
    # a few points after a rise cannot tell a new level from a heavy-tailed excursion
    if len(before) < 3 or len(after) < max(3, width // 2) or len(x) < 2 * width + 5:
        return None
    lb, la = float(np.median(before)), float(np.median(after))
    lag = width + (end - onset)
    diffs = meds[lag:] - meds[:-lag] if len(meds) > lag else np.empty(0)
    at = np.arange(len(diffs)) + width  # the onset each difference stands for
    elsewhere = diffs[np.abs(at - onset) >= lag]
    if len(elsewhere) < 10:
        elsewhere = diffs
    if len(elsewhere) < 5:
        return None
    centre = float(np.median(elsewhere))
    scale = max(mad_normal(elsewhere), floor, 1e-12)
    return _Shift(lb, la, (la - lb - centre) / scale, scale)


def _spread_evidence(spread: float, log_scale: bool) -> dict[str, float]:
    """One unit of z on the levels' own scale: a factor on a log scale (`spread_factor` 1.2:
    the change varies by ×1.2 elsewhere), the metric's units on a linear one (`spread`)."""
    if log_scale:
        return {"spread_factor": round(math.exp(spread), 3)}
    return {"spread": sig(spread)}


def _spread_text(spread: float, log_scale: bool) -> str:
    if log_scale:
        return f"×{math.exp(spread):.3g} on the log scale"
    return fmt(spread)


def _tail_sigma(x: np.ndarray, window: int = 31) -> float:
    """The noise scale at which the series' own 99th percentile of |residual| from its running
    median sits where a Gaussian's would: above the MAD σ when the tails are heavy."""
    resid = np.abs(x - running_median(x, window))
    return float(np.quantile(resid, 0.99)) / Z99 if len(resid) else 0.0


def config_changes(run: Run, step: int, keys: tuple[str, ...], before: int = 10) -> dict:
    """Keys among `keys` whose value changed at a config segment starting within
    `before` steps ahead of `step` (a restart with new settings): {key: [old, new], "at": step}.
    """
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


def _kl_coef_key(run: Run, metric: str) -> str:
    """The coefficient that weighs this KL: the actor's KL loss or the in-reward penalty."""
    if metric == resolve(run, "kl_loss"):
        return f"{ACT}.kl_loss_coef"
    return "algorithm.kl_ctrl.kl_coef"


def _levels(
    run: Run, concept: str, first_step: int, step: int, end: int
) -> tuple[float | None, float | None]:
    """(median over the first tenth of the run before `step`, median over [step, end])."""
    other = Series.load(run, concept)
    if other is None:
        return None, None
    early_end = first_step + max(10, (step - first_step) // 10)
    early = other.values[(other.steps >= first_step) & (other.steps < min(early_end, step))]
    now = other.values[(other.steps >= step) & (other.steps <= end)]
    return (
        float(np.median(early)) if len(early) >= 3 else None,
        float(np.median(now)) if len(now) >= 3 else None,
    )


def _halves(
    run: Run, concepts: tuple[str, ...], step: int, end: int, share: float = 0.25
) -> tuple[float, float, float] | None:
    """(median over the first `share` of the logged steps in [step, end], median over the last
    `share`, the standard error of their difference from the point-to-point noise), or None."""
    other = Series.load(run, *concepts)
    if other is None:
        return None
    v = other.values[(other.steps >= step) & (other.steps <= end)]
    v = v[np.isfinite(v)]
    k = max(3, int(len(v) * share))
    if len(v) < 2 * k:
        return None
    first, last = float(np.median(v[:k])), float(np.median(v[-k:]))
    noise = mad_normal(np.diff(v)) / math.sqrt(2)  # per point, a trend does not inflate it
    return first, last, 1.2533 * noise * math.sqrt(2 / k)  # SE of a difference of medians


def _rising(h: tuple[float, float, float] | None, z: float = 3.0) -> bool:
    return h is not None and h[1] - h[0] > z * h[2]


def _falling(h: tuple[float, float, float] | None, z: float = 3.0) -> bool:
    return h is not None and h[0] - h[1] > z * h[2]


def _kl_growing(h: tuple[float, float, float] | None) -> bool:
    """KL to the reference up by ≥ 1.5× and ≥ 0.002 nat over a stretch: the policy moves."""
    return h is not None and h[1] >= 1.5 * max(h[0], 0.0) and h[1] - h[0] >= 0.002


def _stretch_fields(
    s: Series, first: int, last: int, lead: dict[str, Any], **evidence: Any
) -> dict[str, Any]:
    """Metric, steps and evidence of a finding on `s` from index `first` to `last`: the
    evidence is `lead`, the stretch's first and last step, then `evidence`."""
    step, end = s.step_at(first), s.step_at(last)
    return {
        "metric": s.metric,
        "step": step,
        "end_step": end,
        "evidence": {**lead, "first_step": step, "last_step": end, **evidence},
    }


def _raise_kl_coef(run: Run, metric: str, why: str) -> Advice:
    key = _kl_coef_key(run, metric)
    if key.startswith("algorithm.") and current_value(run, "algorithm.kl_ctrl.type") == "adaptive":
        return advise(
            run,
            "algorithm.kl_ctrl.target_kl",
            f"{why} With the adaptive controller the coefficient follows target_kl (it grows "
            "while KL is above the target), so the target is what to lower (×0.7; the PPO "
            "article, §4.2, went 0.1 → 0.05).",
            f"{SEED_PPO} §4.2",
            suggest=lambda c: verl_config.round_sig(float(c) * 0.7),
            rule="×0.7",
        )
    return advise(
        run,
        key,
        f"{why} The penalty pulls the policy toward the reference: a larger coefficient lowers "
        "the KL. Raise it one step (×1.4, the inverse of the GRPO article's ×0.7 round) and "
        "re-check after ~20 steps. The GRPO article (§3.2) reports the opposite direction "
        "(lower the coefficient when KL is high); by the mechanics that lets KL grow further.",
        f"{SEED_GRPO} §3.1-3.2",
        suggest=lambda c: verl_config.round_sig(float(c) * KL_COEF_STEP) if c else 0.001,
        rule="×1.4 per round until KL sits in 0.01–0.03 (0.001 when it is 0)",
    )


def _against_past(full: Series, s: Series, c: Change) -> Change:
    """`c` measured from the median of all the values logged before it (warm-up included) where
    that is the higher level: a climb out of a dip back to the usual level is no jump."""
    past = full.values[full.steps < s.steps[c.onset]]
    if len(past) < 3:
        return c
    return replace(c, before=max(c.before, float(np.median(past))))


class KLJump(EventDetector, code="LS101", name="kl-jump"):
    """An abrupt rise of a KL metric: a level shift or a short spike far above its own wander.

    Reads the KL between the current and the rollout policy (`actor/ppo_kl`) and the KL to the
    reference (`actor/kl_loss`, `critic/kl` in verl ≤ 0.3, `actor/reward_kl_penalty`). One
    finding per jump, located at the step where the rise starts; a jump that recurs after a quiet
    stretch is a finding of its own that says "again".

    What it detects:
        Level shifts: candidates are the changepoints found by ruptures (KernelCPD, linear
        kernel; long series are reduced to ≤ 2,000 bin medians first and the step is then
        located at full resolution), each taken on its own, rising within `max_rise_steps`
        logged steps (a slow drift is not a jump). Each is judged against the series' own
        wander: the median of the `window` points after the rise minus the median of the
        `window` points before it, set against the same difference taken at every other step
        of the run (median-centred, MAD-scaled), must reach `z_threshold`, so a heavy-tailed,
        autocorrelated series that wanders 2× sets its own bar. The rise must
        also matter to training: the level after at least `min_ratio` (2) times the level
        before — `min_ppo_kl_ratio` (3) for `ppo_kl`, whose noise alone wanders 2× — and higher
        by at least `min_ppo_kl_rise` (1e-4, the size the PPO article calls too small to move the
        policy) for `ppo_kl` or `min_kl_rise` (0.01 nat, half the 0.01–0.03 band) for KL to the
        reference, both at the least a `.3f` print's rounding allows, and at least half a
        `window` of steps logged after the rise. The ratio must hold against the median of
        everything logged before the rise too (warm-up included): a climb out of a dip back to
        the usual level is no jump. Short spikes (a few
        steps) are found from robust z-scores against a running median (`spike_z`), the noise
        scale raised so that the series' own 99th percentile of residuals sits where a
        Gaussian's would. A run with fewer than `min_points` values (an excerpt) is judged by
        `logscope.health`'s band instead: a rise to 10× the step before (and above every
        earlier logged value, 10× their median) and above the band's
        top (KL to the reference 0.05, 0.1 for PPO; `ppo_kl` 0.02), or a level of 0.3 nat
        (`ppo_kl` 0.1) or more. `actor/kl_loss`-like metrics are analysed on a log scale (their
        noise is multiplicative); `actor/ppo_kl`, which sits near 0 and can be negative, on a
        linear one when < 90 % of it is positive. Warm-up is a segment of its own, not compared
        with what follows: the first `warmup_steps` logged steps (KL to the reference starts
        at 0) and the LR warm-up (`actor/lr` or the config's schedule). A rise of KL to the
        reference in the first quarter of the run that continues its smooth climb from ~0
        (rising from third to third, no steeper than twice the climb's mean slope) is that
        start-up ramp, not a jump. At most
        `max_findings` jumps per metric, the largest first; a jump after at least `min_gap_steps`
        steps with no jump of the metric since the ones before is a recurrence, kept before a
        larger jump of an occurrence already reported, and its finding says so ("spiked again
        at step 331 (2nd time; first at 121)"); when a metric has more than one occurrence each
        finding carries `occurrence` (1, 2, …) and `first_step` in its evidence (50 by default,
        the `tail` cooldown: each occurrence is alerted).

    Why it matters:
        `actor/ppo_kl` measures how far one update moved the policy from the one that generated
        the batch; a jump (the PPO article: 0.0001 → 0.003) is a destabilising update, often followed by
        clip-fraction spikes and entropy collapse. A jump in KL to the reference means the policy
        suddenly left the region the penalty was keeping it in.

    Example:
        step:120 - actor/ppo_kl:0.00021 - actor/kl_loss:0.0121 - ...
        step:121 - actor/ppo_kl:0.0029 - actor/kl_loss:0.0384 - ...
        step:122 - actor/ppo_kl:0.0031 - actor/kl_loss:0.0402 - ...

    Advice:
        Halve the learning rate (`actor_rollout_ref.actor.optim.lr`); for `ppo_kl` tighten
        `actor_rollout_ref.actor.clip_ratio` (×0.75), which bounds each update directly; for KL
        to the reference raise its coefficient one step (`actor.kl_loss_coef` or
        `algorithm.kl_ctrl.kl_coef`, ×1.4). When a config segment (a restart) changed the LR or
        a KL coefficient just before the jump, the finding says so: undo that change first
        (a coefficient changed mid-run breaks gradient consistency, the GRPO article §3.3).
        The PPO article §4.2 says to lower `kl_coef` and `target_kl`; `ppo_kl` is governed by the LR and
        clip range rather than by a KL-to-reference coefficient, so logscope does not.

    Known false positives:
        A planned change (a curriculum switch to harder prompts, resuming from a checkpoint
        with a different reference) raises KL by design. Very short runs (< 20 logged steps
        after warm-up) get only the band test. A jump within the first `warmup_steps` steps
        of the actor's updates is not seen. Accounted for: heavy-tailed, autocorrelated noise
        (judged against the run's own wander, not i.i.d. noise); the tail of an LR decay, where
        ppo_kl is ~1e-5 and a doubling is a change of 1e-5 (below `min_ppo_kl_rise`); the LR
        warm-up, during which ppo_kl rises with the LR; KL to the reference growing like √t
        from ~0 in the first steps (below `min_kl_rise`, and no faster than the run's own
        drift); on-policy runs (one update per step, by the config or by the signature: ppo_kl
        noise around 0 with ≥ 20 % negative values and clip fraction 0), whose `ppo_kl`
        carries no update size and is not read.

    References:
        seed:ppo-tuning §4.2; seed:grpo-pitfalls §3.3 (mid-run coefficient changes);
        verl:trainer/ppo/core_algos.py (ppo_kl, clip_ratio).
    """

    title = "KL jumped"
    concepts = ("ppo_kl", "kl_ref")
    groups = ("kl",)

    min_ratio: float = param(2.0, gt=1)
    min_ppo_kl_ratio: float = param(3.0, gt=1)
    z_threshold: float = param(4.5, gt=0)
    min_ppo_kl_rise: float = param(1e-4, gt=0)
    min_kl_rise: float = param(0.01, gt=0)
    spike_z: float = param(10.0, gt=0)
    window: int = param(15, ge=3)
    warmup_steps: int = param(5, ge=0)
    min_points: int = param(20, ge=1)

    def _series(self, run: Run, s: Series, concept: str) -> list[Finding]:
        if concept == "ppo_kl" and _on_policy(run, s):
            return []  # noise around 0: no update size to jump
        # ppo_kl sits near 0 and can be negative: a log scale only when it is positive
        log_scale = concept != "ppo_kl" or float(np.mean(s.values > 0)) >= 0.9
        return self._detect_series(run, s, concept, log_scale)

    def _detect_series(self, run: Run, s: Series, concept: str, log_scale: bool) -> list[Finding]:
        # warm-up is a segment of its own, not compared with what follows: KL to the reference
        # rises from 0, and ppo_kl rises with the LR while the LR warms up (update size ∝ LR)
        first = int(np.searchsorted(s.steps, s.steps[0] + self.warmup_steps))
        share = _lr_share(run, s.steps)
        if share is not None:  # the LR warm-up ends where the LR stops rising
            first = max(first, int(np.argmax(np.append(np.diff(share) <= 0, True))))
        full, s = s, s[first:]
        if len(s) < self.min_points:
            return self._short(run, concept)
        x, floor, inv = domain(s, log_scale)
        width = int(np.clip(len(s) // 8, 8, self.window))
        meds = _window_medians(x, width)
        cands: list[tuple[Change, float, float]] = []  # (change, ratio, the noise z counts)
        # each changepoint on its own: a slow healthy rise before a jump must not merge into it
        for c in level_shifts(s, log_scale, +1, merge_slope_ratio=1.0):
            if c.end - c.onset > self.max_rise_steps:
                continue
            judged = _shift(x, meds, width, c.onset, c.end, floor)
            if judged is None or judged[2] < self.z_threshold:
                continue
            c = replace(c, before=inv(judged.before), after=inv(judged.after), z=judged.z)
            if concept != "ppo_kl" and self._startup_ramp(full, s, c, width):
                continue
            if self._matters(c, concept, log_scale, s.resolution) and self._matters(
                _against_past(full, s, c), concept, log_scale, s.resolution
            ):
                cands.append((c, self._ratio(c, log_scale, s.resolution), judged.spread))
        # Short spikes only on a log scale: near 0 (or in a .3f log printing mostly 0.000) a
        # single heavy-tailed point has no meaningful noise scale to be judged against.
        spikes = spike_changes(s, log_scale, self.spike_z) if log_scale else []
        tail = _tail_sigma(x) if spikes else 0.0
        for c in spikes:
            z = c.z * c.sigma / max(tail, c.sigma)
            if z < self.spike_z:
                continue
            if any(abs(c.onset - o.onset) <= self.max_rise_steps for o, _, _ in cands):
                continue
            c = replace(c, z=z)
            if self._matters(c, concept, log_scale, s.resolution):
                cands.append((c, self._ratio(c, log_scale, s.resolution), max(tail, c.sigma)))
        spans = [(s.step_at(c.onset), s.step_at(c.end)) for c, _, _ in cands]
        kept = recurring(spans, self.min_gap_steps, self.max_findings, [-c.z for c, _, _ in cands])
        kept.sort(key=lambda ir: -cands[ir[0]][0].z)
        return [self._finding(run, s, *cands[i], width, log_scale, rec=rec) for i, rec in kept]

    def _startup_ramp(self, full: Series, s: Series, c: Change, width: int) -> bool:
        """The rise continues the smooth climb of KL to the reference from ~0 at the start of
        the run (`full`, warm-up included): it starts in the first quarter of the run (or
        4 windows), the least of the first 3 logged values is at most `RAMP_START_SHARE` of the level
        before it, the climb up to it rises from third to third, and the rise between the two
        windows' centres is no steeper than `RAMP_SLOPE_RATIO` × the climb's mean slope."""
        onset_step = s.steps[c.onset]
        span = float(full.steps[-1] - full.steps[0])
        if onset_step - full.steps[0] > max(0.25 * span, 4 * width) or not c.before > 0:
            return False
        v0 = float(np.min(full.values[:3]))
        if v0 > RAMP_START_SHARE * c.before:
            return False
        climb = full.values[full.steps <= onset_step]
        thirds = [float(np.median(p)) for p in np.array_split(climb, 3) if len(p)]
        if len(thirds) < 3 or not thirds[0] < thirds[1] < thirds[2]:
            return False
        t0 = float(full.steps[0])
        tb = float(np.median(s.steps[max(0, c.onset - width) : c.onset]))
        ta = float(np.median(s.steps[c.end : c.end + width]))
        ramp = (c.before - v0) / max(1.0, tb - t0)
        rise = (c.after - c.before) / max(1.0, ta - tb)
        return rise <= RAMP_SLOPE_RATIO * ramp

    def _matters(self, c: Change, concept: str, log_scale: bool, res: float | None) -> bool:
        """Large enough to matter to training: relative (`min_ratio`) and absolute rise, both
        at the least the print rounding (±`res`) allows."""
        rise = c.after - c.before - 2 * (res or 0.0)
        ppo = concept == "ppo_kl"
        ratio = self.min_ppo_kl_ratio if ppo else self.min_ratio
        return self._ratio(c, log_scale, res) >= ratio and rise >= self._min_rise(concept)

    def _min_rise(self, concept: str) -> float:
        return self.min_ppo_kl_rise if concept == "ppo_kl" else self.min_kl_rise

    def _short(self, run: Run, concept: str) -> list[Finding]:
        """Too few steps for a changepoint: a 10× rise between consecutive steps to above the
        healthy band, or a level far above it (`logscope.health`)."""
        ref = REFERENCES[concept]
        _, high = ref.healthy_range(run.meta.get("algorithm"))
        if high is None or ref.alarm_high is None:
            return []
        jump = consecutive_jump(run, concept, SHORT_JUMP_RATIO, high)
        level = recent_level(run, concept)
        if jump is not None:
            metric, step, end = jump.metric, jump.step_before, jump.step
            message = (
                f"{metric} jumped from {fmt(jump.before)} at step {jump.step_before} to "
                f"{fmt(jump.after)} at step {jump.step} ({jump.ratio:.0f}×), above its healthy "
                f"band (≤ {high:g})."
            )
            evidence = {"level_before": sig(jump.before), "level_after": sig(jump.after)}
        elif level is not None and level.value >= ref.alarm_high:
            metric, step, end = level.metric, level.steps[0], level.step
            message = (
                f"{metric} is {fmt(level.value)} {level.where()}, {level.value / high:.0f}× the "
                f"top of its healthy band (≤ {high:g}): far out of band. The log is too short "
                "to see where it rose."
            )
            evidence = {"level": sig(level.value), "alarm": ref.alarm_high}
        else:
            return []
        evidence.update(
            healthy_max=high,
            judged_on="consecutive steps (too few for a changepoint)",
            range_source=ref.source,
        )
        return [
            self.finding(
                message=message,
                metric=metric,
                step=step,
                end_step=end,
                evidence=evidence,
                advice=self._advice(run, metric),
                references=cite_all([f"{SEED_PPO} §4.2", f"{SEED_GRPO} §3.2"]),
            )
        ]

    @staticmethod
    def _ratio(c: Change, log_scale: bool, res: float | None = None) -> float:
        """after/before, the least the print rounding (±`res`) allows; on a linear scale
        (ppo_kl near 0) the base is at least the noise."""
        res = res or 0.0
        base = c.before + res if log_scale else max(c.before + res, c.sigma)
        return (c.after - res) / max(base, 1e-12)

    def _finding(
        self,
        run: Run,
        s: Series,
        c: Change,
        ratio: float,
        spread: float,
        width: int,
        log_scale: bool,
        rec: Recurrence | None = None,
    ) -> Finding:
        """`spread`: what one unit of z is, in the analysis domain (log units on a log scale);
        `rec`: where the jump sits among the metric's occurrences."""
        step = s.step_at(c.onset)
        unit = _spread_text(spread, log_scale)
        end = s.step_at(c.end)
        again = rec.again(step) if rec else None
        keys = (
            f"{ACT}.optim.lr",
            f"{ACT}.clip_ratio",
            f"{ACT}.kl_loss_coef",
            "algorithm.kl_ctrl.kl_coef",
            "algorithm.kl_ctrl.target_kl",
        )
        change = config_changes(run, step, keys)
        ppo_kl = s.metric == resolve(run, "ppo_kl")
        times = f"{ratio:.1f}×" + (
            " at least, allowing for the .3f rounding" if s.resolution else ""
        )
        if c.kind == "spike":
            message = (
                f"{s.metric} spiked "
                + (f"{again}: from" if again else "from")
                + f" {fmt(c.before)} to {fmt(c.after)} ({times}; "
                f"{c.z:.0f} noise units of {unit}, the noise scale allowing for the series' "
                f"heavy tails)" + ("" if again else f" at step {step}") + f", back by step {end}."
            )
        else:
            message = (
                f"{s.metric} jumped "
                + (f"{again}: " if again else "")
                + f"from a median of {fmt(c.before)} over the {width} steps "
                f"before step {step} to {fmt(c.after)} over the {width} steps after the rise "
                f"({times}); 90% of the rise reached by step {end}. That change is "
                f"{c.z:.0f}× the spread of the same {width}-step change elsewhere in the run "
                f"(one spread: {unit})."
            )
        if change:
            changed = ", ".join(f"{k} {v[0]} → {v[1]}" for k, v in change.items() if k != "at_step")
            message += f" The config changed at step {change['at_step']} ({changed})."
        evidence: dict[str, Any] = {
            "kind": c.kind,
            "onset_step": step,
            "half_step": s.step_at(c.mid),
            "end_step": end,
            "level_before": sig(c.before),
            "level_after": sig(c.after),
            "ratio": round(ratio, 2),
            "z": round(c.z, 1),
            "z_against": "heavy-tail-aware noise" if c.kind == "spike" else "the run's wander",
            **_spread_evidence(spread, log_scale),
            "window_steps": width,
            "scale": "log" if log_scale else "linear",
            "thresholds": {
                "min_ratio": self.min_ppo_kl_ratio if ppo_kl else self.min_ratio,
                "z": self.z_threshold if c.kind != "spike" else self.spike_z,
                "min_rise": self._min_rise("ppo_kl" if ppo_kl else "kl_ref"),
            },
        }
        if change:
            evidence["config_change"] = change
        if rec:
            evidence.update(rec.evidence())
        return self.finding(
            severity="error" if ratio >= 10 else "warning",
            message=message,
            metric=s.metric,
            step=step,
            end_step=end,
            evidence=evidence,
            advice=self._advice(run, s.metric),
            references=cite_all(
                [f"{SEED_PPO} §4.2", f"{SEED_GRPO} §3.3", "verl:trainer/ppo/core_algos.py"]
            ),
        )

    def _advice(self, run: Run, metric: str) -> list[Advice]:
        out = [
            halve_advice(
                run,
                f"{ACT}.optim.lr",
                "The size of each policy update scales with the learning rate; a KL jump is an "
                "update that moved the policy too far.",
                f"{SEED_PPO} §3.3",
            )
        ]
        if metric == resolve(run, "ppo_kl"):
            out.append(
                advise(
                    run,
                    f"{ACT}.clip_ratio",
                    "The PPO clip range bounds how far the policy ratio may move in one update; "
                    "a tighter range limits ppo_kl directly. (The PPO article, §4.2, suggests lowering "
                    "kl_coef/target_kl instead; those act on KL to the reference, not on "
                    "ppo_kl.)",
                    "verl:trainer/ppo/core_algos.py",
                    suggest=lambda c: verl_config.round_sig(float(c) * 0.75),
                    rule="×0.75 (0.2 → 0.15)",
                )
            )
        else:
            out.append(_raise_kl_coef(run, metric, "KL to the reference jumped."))
        return out


class KLOutOfBand(Detector, code="LS102", name="kl-out-of-band"):
    """KL to the reference outside the 0.01–0.03 band after warm-up: high is a risk, low is
    usually warm-up.

    Reads `actor/kl_loss` (or the in-reward KL, `critic/kl` / `actor/reward_kl_penalty`).

    What it detects:
        After the first `warmup_steps` steps, the KL smoothed by a running median staying above
        `high_threshold` (0.05, the GRPO article's "too high") for at least `min_fraction` of the
        remaining steps (and at least `min_steps` logged steps), located where the KL left the
        band (crossed `band_high`) on its way there: a warning with a sign of harm (KL rose
        ≥ 2.5× from a level in the band in the 30 steps before it passed the threshold, entropy collapsing or doubling,
        response length halving, the score falling over the stretch), else info: KL to the
        reference accumulates over a learning run, and a slow drift alone is not a risk. KL staying below `low_threshold` (0.005) for most of the run after
        warm-up → info. Both are reported against the 0.01–0.03 target band.

    Why it matters:
        High KL to the reference means the policy has drifted far from the model it started
        from: reward hacking, gibberish and repetition follow (the GRPO article §3.1, §3.3). Low KL
        means the policy has barely moved: early in a run this is just warm-up; if it stays
        low and reward stalls, the penalty (or a small LR) is holding the policy back.

    Example:
        step:40 - actor/kl_loss:0.0612 - actor/kl_coef:0.001 - ...
        step:41 - actor/kl_loss:0.0655 - actor/kl_coef:0.001 - ...

    Advice:
        High KL: raise `actor_rollout_ref.actor.kl_loss_coef` (or `algorithm.kl_ctrl.kl_coef`
        for in-reward KL) by one step of ×1.4 from its current value, and/or halve the LR.
        The GRPO article §3.2 prescribes ×0.7 for high KL (its example: step 10 KL 0.082 → coef
        0.00035 → step 20 KL 0.021); by the mechanics a smaller coefficient lets KL grow, so
        logscope follows the mechanics and quotes the GRPO article. Low KL: nothing during warm-up;
        if it persists, lower the coefficient one step (×0.7).

    Known false positives:
        Runs that deliberately use a small reference constraint (large KL by design), or a
        `kl_loss_type` whose scale differs from the band's (e.g. `mse`, `full`), or
        `.3f`-rounded logs where KL below 0.0005 prints as 0.000 (still correctly "low").

    References:
        seed:grpo-pitfalls §3.1-3.3; verl:workers/actor/dp_actor.py (kl_loss).
    """

    title = "KL to the reference out of the 0.01–0.03 band"
    concepts = ("kl_ref",)
    groups = ("kl",)

    band_low: float = param(0.01, gt=0)
    band_high: float = param(0.03, gt=0)
    low_threshold: float = param(0.005, gt=0)
    high_threshold: float = param(0.05, gt=0)
    warmup_steps: int = param(20, ge=0)
    min_fraction: float = param(0.1, ge=0, le=1)
    min_steps: int = param(5, ge=1)
    low_fraction: float = param(0.5, ge=0, le=1)
    smooth_steps: int = param(5, ge=1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (self.low_threshold <= self.band_low < self.band_high <= self.high_threshold):
            raise BadDetectorParameters(
                "kl-out-of-band: need low_threshold ≤ band_low < band_high ≤ high_threshold"
            )

    def detect(self, run: Run) -> list[Finding]:
        s = Series.load(run, "kl_ref")
        if s is None:
            return []
        post = s.steps >= s.steps[0] + self.warmup_steps
        n_post = int(post.sum())
        if n_post < self.min_steps:
            return []
        sm = running_median(s.values, self.smooth_steps)
        out: list[Finding] = []
        high = self._stretch(sm > self.high_threshold, post, n_post)
        if high is not None:
            first, last = high
            onset = first
            # the stretch is dated from where KL left the band on its way up
            while first > 0 and post[first - 1] and sm[first - 1] > self.band_high:
                first -= 1
            out.append(self._high(run, s, first, last, onset))
        low_mask = (sm < self.low_threshold) & post
        if high is None and low_mask.sum() >= max(self.min_steps, self.low_fraction * n_post):
            first = int(np.nonzero(low_mask)[0][0])
            out.append(self._low(run, s, post, first, int(low_mask.sum()), n_post))
        return out

    def _stretch(self, mask: np.ndarray, post: np.ndarray, n_post: int) -> tuple[int, int] | None:
        """(first, last) index of the first run of `mask` within `post` long enough to count."""
        found = stretches(mask & post, max(self.min_steps, math.ceil(self.min_fraction * n_post)))
        return (found[0][0], found[0][1] - 1) if found else None

    def _rise(self, s: Series, onset: int) -> float | None:
        """How many times KL rose in the `RISE_STEPS` steps before it passed the high threshold
        at index `onset`: the median of the 10 logged values from there over that of the 10
        values ending `RISE_STEPS` steps earlier. None without 3 such values, or when they are
        below the band: KL climbs from 0 by construction, so a ratio to that tells nothing."""
        t = s.step_at(onset) - RISE_STEPS
        before = s.values[(s.steps < t) & (s.steps >= t - 10)]
        if len(before) < 3 or float(np.median(before)) < self.band_low:
            return None  # from below the band: KL still climbing from 0, not a rise from a level
        after = s.values[onset : onset + 10]
        return float(np.median(after)) / max(float(np.median(before)), 1e-12)

    def _corroboration(self, run: Run, s: Series, first: int, last: int, onset: int) -> dict:
        """What makes KL above the band a risk rather than the slow drift of a learning run
        (KL to the reference accumulates): a fast rise, entropy collapsing or blowing up,
        response length collapsing, or the score falling over the stretch."""
        step, end = s.step_at(first), s.step_at(last)
        signs: dict[str, Any] = {}
        rise = self._rise(s, onset)
        if rise is not None and rise >= FAST_RISE_RATIO:
            signs["fast_rise"] = round(rise, 2)
        ent_early, ent_now = _levels(run, "entropy", s.steps[0], step, end)
        if ent_now is not None and (
            ent_now < NEAR_ZERO_ENTROPY
            or (ent_early and ent_early > 0 and (ent_now <= ent_early * (1 - COLLAPSE_FALL)))
        ):
            signs["entropy_collapsing"] = [sig(ent_early or 0.0), sig(ent_now)]
        elif ent_now is not None and ent_early and ent_early > 0 and ent_now >= 2 * ent_early:
            signs["entropy_rising"] = [sig(ent_early), sig(ent_now)]
        len_early, len_now = _levels(run, "response_length_mean", s.steps[0], step, end)
        if len_early and len_now is not None and len_now <= 0.5 * len_early:
            signs["response_length_collapsing"] = [sig(len_early), sig(len_now)]
        score = _halves(run, ("score_mean", "reward_mean"), step, end)
        if _falling(score) and score is not None:
            signs["score_falling"] = [sig(score[0]), sig(score[1])]
        return signs

    def _high(self, run: Run, s: Series, first: int, last: int, onset: int) -> Finding:
        step, end = s.step_at(first), s.step_at(last)
        seg = s.values[first : last + 1]
        level, peak = float(np.median(seg)), float(np.max(seg))
        message = (
            f"{s.metric} left the {fmt(self.band_low)}–{fmt(self.band_high)} band at step "
            f"{step} and stays above {fmt(self.high_threshold)} until step {end} (median "
            f"{fmt(level)}, peak {fmt(peak)})."
        )
        signs = self._corroboration(run, s, first, last, onset)
        rise = self._rise(s, onset)
        if signs:
            said = {
                "fast_rise": f"a fast rise ({signs.get('fast_rise')}× in the {RISE_STEPS} "
                "steps before it passed the threshold)",
                "entropy_collapsing": "entropy is collapsing",
                "entropy_rising": "entropy is blowing up",
                "response_length_collapsing": "response length is collapsing",
                "score_falling": "the score is falling",
            }
            message += " A sign of harm with it: " + "; ".join(said[k] for k in signs) + "."
        else:
            how = (
                f"A slow drift ({rise:.2g}× over the {RISE_STEPS} steps before it passed "
                f"{fmt(self.high_threshold)})"
                if rise is not None
                else "A climb from 0 at the start of the run"
            )
            message += (
                f" {how} with no sign of harm (entropy and response "
                "length steady, the score not falling): KL to the reference accumulates over "
                "a learning run. Watch it; not an alarm by itself."
            )
        advice = [
            _raise_kl_coef(run, s.metric, f"KL to the reference is {fmt(level)}, above the band."),
            halve_advice(
                run,
                f"{ACT}.optim.lr",
                "A smaller learning rate slows the drift away from the reference.",
                f"{SEED_PPO} §3.3",
            ),
        ]
        return self.finding(
            severity="warning" if signs else "info",
            message=message,
            **_stretch_fields(
                s,
                first,
                last,
                {
                    "direction": "high",
                    "corroboration": signs,
                    "rise_ratio": round(rise, 2) if rise is not None else None,
                },
                median_kl=sig(level),
                peak_kl=sig(peak),
                steps_above=last - first + 1,
                threshold=self.high_threshold,
                band=[self.band_low, self.band_high],
                warmup_steps=self.warmup_steps,
            ),
            advice=advice,
            references=cite_all([f"{SEED_GRPO} §3.2", "verl:workers/actor/dp_actor.py"]),
        )

    def _low(
        self, run: Run, s: Series, post: np.ndarray, first: int, count: int, n_post: int
    ) -> Finding:
        step = s.step_at(first)
        level = float(np.median(s.values[post]))
        rounded = s.resolution is not None and level < s.resolution
        message = (
            f"{s.metric} stays below {fmt(self.low_threshold)} on {count} of "
            f"{plural(n_post, 'step')} after "
            f"warm-up (median {fmt(level)}"
            + (", printed as 0.000 by a .3f log" if rounded else "")
            + f"), under the {fmt(self.band_low)}–{fmt(self.band_high)} band: the policy has "
            "barely moved from the reference. Early in a run this is warm-up."
        )
        advice = [
            scale_advice(
                run,
                _kl_coef_key(run, s.metric),
                "Nothing to do while the run warms up. If KL stays this low and reward stalls, "
                "the penalty is holding the policy back: lower the coefficient one step (×0.7). "
                "The GRPO article (§3.2) prescribes ×1.5 for low KL; by the mechanics that "
                "pushes KL further down.",
                f"{SEED_GRPO} §3.1-3.2",
                0.7,
                "×0.7 if KL stays low after warm-up",
            )
        ]
        return self.finding(
            severity="info",
            message=message,
            metric=s.metric,
            step=step,
            end_step=s.step_at(len(s) - 1),
            evidence={
                "direction": "low",
                "first_step": step,
                "median_kl_after_warmup": sig(level),
                "steps_below": count,
                "steps_after_warmup": n_post,
                "threshold": self.low_threshold,
                "band": [self.band_low, self.band_high],
                "warmup_steps": self.warmup_steps,
                "value_resolution": s.resolution,
            },
            advice=advice,
            references=cite_all([f"{SEED_GRPO} §3.2"]),
        )


class PPOKLTooLow(Detector, code="LS103", name="ppo-kl-too-low"):
    """`actor/ppo_kl` persistently below 1e-4 while the LR is near its peak: each update barely
    changes the policy.

    What it detects:
        ppo_kl judged relative to the current LR (`actor/lr`, or the schedule the config
        implies when the log cannot show it): update size grows like lr^p with p between 1 and
        2, so a decaying schedule lowers ppo_kl by design. Only steps after `warmup_steps`
        where the LR is at least `min_lr_share` of its peak are judged (the LR warm-up and the
        tail of a decay are not evidence of timid updates). Either the running median of
        ppo_kl × (peak LR / LR)² — allowing the most the schedule can explain — stays below
        `threshold` (1e-4, the PPO article) for a stretch of at least `min_fraction` of the judged
        steps (and at least `min_steps`), or ppo_kl × (peak LR / LR) falls abruptly (a
        KernelCPD level shift down to at most 1/`min_drop_ratio` of the level before, and
        `drop_z` times the series' own wander) and ppo_kl stays below `threshold`, right away
        and over the next `min_fraction` of the judged steps. Located where ppo_kl started falling, or at
        the first logged step when it was low from the start. A warning when the run is not
        learning over the stretch; when it is (the score rises by more than 3 standard errors,
        or KL to the reference grows ≥ 1.5× and by ≥ 0.002 nat), or has learned and levelled off
        (the score rose by more than 3 standard errors from the run's first logged steps to the
        stretch's end), info (its advice a lever to learn faster, not a repair), unless
        ppo_kl fell abruptly or entropy collapsed: ppo_kl is averaged over mini-batches, the
        first of which is ~0 by construction, so healthy runs with small LRs sit below 1e-4. A `.3f` log cannot show 1e-4
        (0.000 means |x| < 5e-4): there only an info finding ("cannot judge: rounded") is given,
        when ppo_kl and `actor/pg_clipfrac` (which falls with the update size and prints 0.002
        when healthy) print ≥ 0.001 over the next `min_fraction` of the judged steps at most a
        quarter as often as before, and so rarely that it would be a < 0.1 % binomial accident
        at the earlier rate — or print 0.000 on every judged step although the config has
        several optimizer updates per step. Skipped on on-policy runs (one optimizer update
        per step: ppo_kl is 0 by construction), known from the config (`ppo_epochs` = 1 and
        `train_batch_size` ≤ `ppo_mini_batch_size`) or from the data (≥ 20 % of ppo_kl values
        negative — noise around 0 — with clip fraction 0).

    Why it matters:
        `ppo_kl` is the KL between the policy that generated the batch and the one being
        updated. Near zero means the optimizer steps are too timid to change the policy: GPU
        hours spent generating rollouts that teach nothing (the PPO article: < 0.0001 before tuning,
        0.0003–0.0008 after).

    Example:
        step:200 - actor/ppo_kl:3.1e-05 - actor/pg_clipfrac:0.0 - actor/lr:1e-06 - ...
        step:201 - actor/ppo_kl:2.7e-05 - actor/pg_clipfrac:0.0 - actor/lr:1e-06 - ...

    Advice:
        Raise the learning rate (`actor_rollout_ref.actor.optim.lr`, ×1.5; the PPO article §3.3 went
        1e-6 → 2e-6 "with care") — the LR governs the size of each update. When a KL penalty is
        active, the PPO article's advice to lower its coefficient (0.001 → 0.0005) loosens the same
        brake and is given too — unless KL to the reference is already above 0.03. When entropy
        has collapsed meanwhile (below 0.02 nat, or ≥ 80 % below its early level), small updates
        are a consequence of the collapse: no LR advice is given, the message points to
        entropy-collapse instead. A smaller fall (healthy runs lose 30–60 % early) is only
        stated, with its numbers.

    Known false positives:
        Runs that deliberately use a tiny LR for a final polish stage. A `.3f` log of a run
        whose LR schedule is neither logged legibly nor in the config is judged as if the LR
        were constant. Accounted for: LR warm-up and decay (cosine, linear), judged relative
        to the LR and not judged below `min_lr_share` of its peak; on-policy runs without a
        config, recognised by the data signature.

    References:
        seed:ppo-tuning §4.2, §3.3; verl:trainer/ppo/core_algos.py (ppo_kl).
    """

    title = "PPO updates too timid (ppo_kl < 1e-4)"
    concepts = ("ppo_kl",)
    groups = ("kl",)

    threshold: float = param(1e-4, gt=0)
    warmup_steps: int = param(5, ge=0)
    min_lr_share: float = param(0.5, ge=0, le=1)
    min_fraction: float = param(0.25, ge=0, le=1)
    min_steps: int = param(10, ge=1)
    min_drop_ratio: float = param(2.0, gt=0)
    drop_z: float = param(3.0, gt=0)
    smooth_steps: int = param(9, ge=1)

    def skip_reason(self, run: Run) -> str | None:
        reason = super().skip_reason(run)
        if reason:
            return reason
        s = Series.load(run, "ppo_kl")
        return _on_policy(run, s) if s is not None else None

    def detect(self, run: Run) -> list[Finding]:
        if self.skip_reason(run):
            return []
        s = Series.load(run, "ppo_kl")
        if s is None:
            return []
        share = _lr_share(run, s.steps)
        lr = np.ones(len(s)) if share is None else np.maximum(share, 1e-3)
        judged = (s.steps >= s.steps[0] + self.warmup_steps) & (lr >= self.min_lr_share)
        n_judged = int(judged.sum())
        if n_judged < self.min_steps:
            return []
        need = max(self.min_steps, math.ceil(self.min_fraction * n_judged))
        if s.resolution is not None and s.resolution >= self.threshold:
            return self._rounded(run, s, judged, need)
        # even if update size went like lr², ppo_kl is below the threshold on a long stretch
        sm = running_median(s.values / lr**2, self.smooth_steps)
        low = np.abs(sm) < self.threshold
        found = stretches(low & judged, need)
        drops = self._drops(s, lr, judged, need)
        if not found and not drops:
            return []
        # an abrupt fall of the update size is a change to explain, learning or not
        dropped = True
        if not found:
            first, last = drops[0], len(s) - 1
        else:
            first, last = found[0][0], found[0][1] - 1
            # date the stretch from where ppo_kl started falling into it, when it fell, or
            # from the first logged steps when it was low from the start (a critic warm-up)
            while first > 0 and low[first - 1]:
                first -= 1
            earlier = [d for d in drops if d <= first + 3 * self.smooth_steps]
            dropped = bool(earlier)
            if earlier:
                first, last = min(earlier[0], first), max(last, len(s) - 1)
        while last > first and not judged[last]:
            last -= 1  # the tail of a decay is not evidence either way
        return [self._finding(run, s, first, last, n_judged, share, dropped)]

    def _drops(self, s: Series, lr: np.ndarray, judged: np.ndarray, need: int) -> list[int]:
        """Onsets of abrupt falls of ppo_kl × (peak LR / LR) — at least `min_drop_ratio` and
        `drop_z` times the series' own wander — after which ppo_kl has a median below
        `threshold` right away and over the next `need` judged steps."""
        rel = Series(s.metric, s.steps, s.values / lr, s.resolution)
        log_scale = float(np.mean(rel.values > 0)) >= 0.9
        x, floor, _ = domain(rel, log_scale)
        width = int(np.clip(len(s) // 8, 8, 15))
        meds = _window_medians(x, width)
        out = []
        for c in level_shifts(rel, log_scale, -1, merge_slope_ratio=1.0):
            after = s.values[c.onset :][judged[c.onset :]][:need]
            if not judged[c.onset] or len(after) < need or np.median(after) >= self.threshold:
                continue
            shift = _shift(x, meds, width, c.onset, c.end, floor)
            if shift is None or -shift[2] < self.drop_z:
                continue
            before, level = (math.exp(v) if log_scale else v for v in shift[:2])
            right_after = float(np.median(s.values[c.end : c.end + width]))
            if right_after < self.threshold and before >= self.min_drop_ratio * max(level, 1e-12):
                out.append(c.onset)
        return sorted(out)

    def _rounded(self, run: Run, s: Series, judged: np.ndarray, need: int) -> list[Finding]:
        """`.3f` logs: ppo_kl and the clip fraction stop printing 0.001 — over the next `need`
        judged steps at most a quarter as often as before, a < 0.1 % accident at the earlier
        rate — or print 0.000 on every judged step of a run that updates several times a step."""
        res = float(s.resolution or 0.0)
        shown = np.abs(s.values) >= res
        metrics = [s.metric]
        clip = Series.load(run, "pg_clipfrac")
        if clip is not None:  # falls with the update size too, and prints 0.002 when healthy
            at = np.clip(np.searchsorted(clip.steps, s.steps), 0, len(clip) - 1)
            shown |= (clip.steps[at] == s.steps) & (np.abs(clip.values[at]) >= res)
            metrics.append(clip.metric)
        idx = np.nonzero(judged)[0]
        seen = shown[idx]
        in_window = np.concatenate([[0], np.cumsum(seen)])  # prints ≥ 0.001 among judged steps
        before = np.concatenate([[0], np.cumsum(shown)])  # ... among all steps
        # a stretch starts at a 0.000 print after a 0.001 one (or where judging starts)
        after_print = np.append(True, seen[:-1] | (np.diff(idx) > 1))
        for j in np.nonzero(~seen & after_print)[0]:
            if j + need > len(idx):
                break
            i = int(idx[j])
            k = int(in_window[j + need] - in_window[j])
            lo = max(0, i - max(need, 50))
            rate = float(before[i] - before[lo]) / (i - lo) if i - lo >= 5 else 0.0
            if rate > 0 and k <= rate * need / 4 and binom_cdf(k, need, rate) < 1e-3:
                # extend while the print rate stays at most a quarter of the earlier one
                count = in_window[j + 1 :] - in_window[j]
                ok = count <= rate / 4 * np.arange(1, len(count) + 1)
                end = j + int(np.nonzero(ok)[0][-1])
                total = int(in_window[end + 1] - in_window[j])
                return [self._rounded_finding(s, metrics, i, int(idx[end]), rate, total)]
            if j == 0 and k == 0 and self._updates_per_step(run) > 1:
                # 0.000 from the first judged step on a run that updates several times a step
                end = int(np.argmax(np.append(seen, True))) - 1
                return [self._rounded_finding(s, metrics, 0, int(idx[end]), None, 0)]
        return []

    @staticmethod
    def _updates_per_step(run: Run) -> int:
        """Optimizer updates per step from the config (ppo_epochs × mini-batches), 0 unknown."""
        if not run.config_segments:
            return 0
        try:
            epochs = int(current_value(run, f"{ACT}.ppo_epochs"))
            train = int(current_value(run, "data.train_batch_size"))
            mini = int(current_value(run, f"{ACT}.ppo_mini_batch_size"))
        except (TypeError, ValueError):
            return 0
        return epochs * max(1, train // max(mini, 1))

    def _rounded_finding(
        self,
        s: Series,
        metrics: list[str],
        first: int,
        last: int,
        rate: float | None,
        count: int,
    ) -> Finding:
        """Info: the `.3f` print went to 0.000 on a stretch; below `threshold` cannot be told."""
        step, end = s.step_at(first), s.step_at(last)
        res = s.resolution or 0.0
        names = " and ".join(metrics)
        since = (
            f", against {rate:.0%} of the steps before"
            if rate is not None
            else ", from the first judged step, although the config has several optimizer "
            "updates per step"
        )
        return self.finding(
            severity="info",
            message=(
                f"Cannot judge: rounded. {names} print ≥ 0.001 on {count} of the "
                f"{plural(last - first + 1, 'step')} from step {step} to step {end}{since}: ppo_kl "
                f"fell below {res:g} there, but the .3f log cannot show whether it is below "
                f"{fmt(self.threshold)}."
            ),
            **_stretch_fields(
                s,
                first,
                last,
                {},
                steps=last - first + 1,
                steps_printing_nonzero=count,
                metrics=metrics,
                nonzero_rate_before=round(rate, 3) if rate is not None else None,
                value_resolution=res,
                threshold=self.threshold,
                judged=False,
            ),
            advice=[],
            references=cite_all([f"{SEED_PPO} §4.2"]),
        )

    def _finding(
        self,
        run: Run,
        s: Series,
        first: int,
        last: int,
        n_judged: int,
        share: np.ndarray | None,
        dropped: bool = False,
    ) -> Finding:
        step, end = s.step_at(first), s.step_at(last)
        seg = s.values[first : last + 1]
        level = float(np.median(seg))
        before = s.values[max(0, first - 20) : first]
        prior = float(np.median(before)) if len(before) >= 3 else None
        message = (
            f"{s.metric} has a median of {fmt(level)} from step {step} to step {end} "
            f"({plural(last - first + 1, 'logged step')}; {plural(n_judged, 'step')} of the run "
            f"{'was' if n_judged == 1 else 'were'} judged), below "
            f"{fmt(self.threshold)}: the updates barely move the policy."
        )
        evidence: dict[str, Any] = {}
        if share is not None and float(np.min(share[first : last + 1])) < 0.99:
            lo, hi = float(np.min(share[first : last + 1])), float(np.max(share[first : last + 1]))
            message += (
                f" The LR was {lo:.0%}–{hi:.0%} of its peak there, which explains at most a "
                f"{1 / max(lo, 1e-3) ** 2:.1f}× smaller ppo_kl."
            )
            evidence["lr_share_of_peak"] = [round(lo, 3), round(hi, 3)]
        if prior is not None and prior >= self.threshold:
            message += f" Before step {step} it was {fmt(prior)}."
        advice: list[Advice] = []
        # Guards against advising the opposite of what a co-occurring symptom needs:
        # a collapsed policy (entropy gone) updates little because it is near-deterministic —
        # a larger LR would not help; and KL to the reference already above the band must not
        # be loosened further.
        ent_early, ent_now = _levels(run, "entropy", s.steps[0], step, end)
        fall = (
            1 - ent_now / ent_early if ent_early and ent_now is not None and ent_early > 0 else 0.0
        )
        collapsed = ent_now is not None and (ent_now < NEAR_ZERO_ENTROPY or fall >= COLLAPSE_FALL)
        _, kl_now = _levels(run, "kl_ref", s.steps[0], step, end)
        kl_high = kl_now is not None and kl_now > 0.03
        if ent_early is not None and ent_now is not None and (fall >= 0.5 or collapsed):
            message += f" Entropy fell from {fmt(ent_early)} to {fmt(ent_now)} ({fall:.0%} lower)"
            evidence["entropy_early"], evidence["entropy_now"] = sig(ent_early), sig(ent_now)
        elif collapsed and ent_now is not None:
            message += f" Entropy is {fmt(ent_now)}"
            evidence["entropy_now"] = sig(ent_now)
        if collapsed:
            message += (
                ": the policy has collapsed, which is why updates are small (see "
                "entropy-collapse); a larger LR would not help."
            )
        elif fall >= 0.5:
            message += " meanwhile."
        if not collapsed:
            advice.append(
                advise(
                    run,
                    f"{ACT}.optim.lr",
                    "The learning rate sets the size of each update; ppo_kl this small means "
                    "the steps are too timid (the PPO article, §3.3, raised it 1e-6 → 2e-6, with care).",
                    f"{SEED_PPO} §3.3",
                    suggest=lambda c: verl_config.round_sig(float(c) * 1.5),
                    rule="×1.5",
                )
            )
        if kl_high:
            evidence["kl_to_reference"] = sig(kl_now)
        # ppo_kl averages over a step's mini-batches, the first ~0 by construction, so several
        # mini-batches or a small LR keep a healthy run below 1e-4: timid updates are a warning
        # only when the run is not learning either (score not rising, KL to the reference flat)
        score = _halves(run, ("score_mean", "reward_mean"), step, end)
        kl_trend = _halves(run, ("kl_ref",), step, end)
        # ... or a run that learned before the stretch and levelled off (converged)
        whole = _halves(run, ("score_mean", "reward_mean"), 0, end)
        converged = not (collapsed or dropped) and not _rising(score) and _rising(whole)
        learning = not (collapsed or dropped) and (_rising(score) or _kl_growing(kl_trend))
        if converged and not learning and whole is not None:
            message += (
                f" The score rose earlier in the run ({fmt(whole[0])} → {fmt(whole[1])}) and has "
                "levelled off: a converged policy updates little. Not an alarm by itself; a "
                "larger LR may still learn more."
            )
            evidence["converged"] = True
            evidence["score_run_first_last"] = [sig(whole[0]), sig(whole[1])]
        if learning:
            signs = []
            if score is not None:
                signs.append(f"the score went {fmt(score[0])} → {fmt(score[1])}")
                evidence["score_first_last"] = [sig(score[0]), sig(score[1])]
            if kl_trend is not None:
                signs.append(f"KL to the reference {fmt(kl_trend[0])} → {fmt(kl_trend[1])}")
                evidence["kl_to_reference_first_last"] = [sig(kl_trend[0]), sig(kl_trend[1])]
            message += (
                f" But the run is learning over that stretch ({', '.join(signs)}): ppo_kl "
                "averages over the mini-batches of a step, the first of which is ~0 by "
                "construction, so several mini-batches or a small LR keep it this low in a "
                "healthy run. Not an alarm by itself; a larger LR may still learn faster."
            )
            evidence["learning"] = True
        use_kl_loss = current_value(run, f"{ACT}.use_kl_loss")
        in_reward = current_value(run, "algorithm.use_kl_in_reward")
        if (use_kl_loss or in_reward) and not collapsed and not kl_high:
            key = f"{ACT}.kl_loss_coef" if use_kl_loss else "algorithm.kl_ctrl.kl_coef"
            advice.append(
                scale_advice(
                    run,
                    key,
                    "The KL penalty also brakes the update; the PPO article (§4.2) lowered it "
                    "0.001 → 0.0005 to get ppo_kl from < 0.0001 to 0.0003–0.0008.",
                    f"{SEED_PPO} §4.2",
                    0.5,
                    "×0.5",
                )
            )
        return self.finding(
            severity="info" if learning or converged else "warning",
            message=message,
            **_stretch_fields(
                s,
                first,
                last,
                evidence,
                median_ppo_kl=sig(level),
                median_before=sig(prior) if prior is not None else None,
                steps_below=last - first + 1,
                steps_judged=n_judged,
                threshold=self.threshold,
                min_lr_share=self.min_lr_share,
            ),
            advice=advice,  # on a learning run, a lever to learn faster, not a repair
            references=cite_all([f"{SEED_PPO} §4.2", "verl:trainer/ppo/core_algos.py"]),
        )
