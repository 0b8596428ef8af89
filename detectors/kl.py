"""KL diagnoses: jumps in KL (LS101), KL to the reference out of its band (LS102), and
`actor/ppo_kl` too low for the updates to matter (LS103)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from logscope import verl_config
from logscope.advice import SEED_GRPO, SEED_PPO, advise, current_value
from logscope.detector import Detector
from logscope.exceptions import BadDetectorParameters
from logscope.health import REFERENCES, consecutive_jump, recent_level
from logscope.model import Advice, Finding, Run
from logscope.verl_config import ACT

from ._common import halve_advice
from ._policy_signals import (
    Change,
    Series,
    by_step,
    config_changes,
    first_stretch,
    level_shifts,
    load,
    sig,
    smooth,
    spike_changes,
)
from ._stats import fmt

#: the article's calibration step (×0.7 / ×1.5 per round), applied in the direction the
#: mechanics give: a larger KL coefficient pulls the policy back toward the reference.
KL_COEF_STEP = 1 / 0.7
#: in a run too short for changepoints, a rise to this many times the step before is a jump
SHORT_JUMP_RATIO = 10.0


def _positive(name: str, value: float) -> None:
    if not isinstance(value, (int, float)) or not value > 0:
        raise BadDetectorParameters(f"{name} must be a positive number, got {value!r}")


def _kl_coef_key(run: Run, metric: str) -> str:
    """The coefficient that weighs this KL: the actor's KL loss or the in-reward penalty."""
    if metric == "actor/kl_loss":
        return f"{ACT}.kl_loss_coef"
    return "algorithm.kl_ctrl.kl_coef"


def _levels(
    run: Run, concept: str, first_step: int, step: int, end: int
) -> tuple[float | None, float | None]:
    """(median over the first tenth of the run before `step`, median over [step, end])."""
    other = load(run, concept)
    if other is None:
        return None, None
    early_end = first_step + max(10, (step - first_step) // 10)
    early = other.values[(other.steps >= first_step) & (other.steps < min(early_end, step))]
    now = other.values[(other.steps >= step) & (other.steps <= end)]
    return (
        float(np.median(early)) if len(early) >= 3 else None,
        float(np.median(now)) if len(now) >= 3 else None,
    )


def _raise_kl_coef(run: Run, metric: str, why: str) -> Advice:
    key = _kl_coef_key(run, metric)
    if key.startswith("algorithm.") and current_value(run, "algorithm.kl_ctrl.type") == "adaptive":
        return advise(
            run,
            "algorithm.kl_ctrl.target_kl",
            f"{why} With the adaptive controller the coefficient follows target_kl (it grows "
            "while KL is above the target), so the target is what to lower (×0.7; seed 003 "
            "§4.2 went 0.1 → 0.05).",
            f"{SEED_PPO} §4.2",
            suggest=lambda c: verl_config.round_sig(float(c) * 0.7),
            rule="×0.7",
        )
    return advise(
        run,
        key,
        f"{why} The penalty pulls the policy toward the reference: a larger coefficient lowers "
        "the KL. Raise it one step (×1.4, the inverse of seed 000's ×0.7 round) and re-check "
        "after ~20 steps. Seed 000 §3.2 reports the opposite direction (lower the coefficient "
        "when KL is high); by the mechanics that lets KL grow further.",
        f"{SEED_GRPO} §3.1-3.2",
        suggest=lambda c: verl_config.round_sig(float(c) * KL_COEF_STEP) if c else 0.001,
        rule="×1.4 per round until KL sits in 0.01–0.03 (0.001 when it is 0)",
    )


class KLJump(Detector):
    """An abrupt rise of a KL metric: a level shift or a short spike far above its noise.

    Reads the KL between the current and the rollout policy (`actor/ppo_kl`) and the KL to the
    reference (`actor/kl_loss`, `critic/kl` in verl ≤ 0.3, `actor/reward_kl_penalty`). One
    finding per jump, located at the step where the rise starts.

    What it detects:
        Level shifts found by ruptures (KernelCPD, linear kernel, penalty 3·σ²·log n with σ the
        robust noise of the series; long series are reduced to ≤ 2,000 bin medians first and
        the step is then located at full resolution), kept when the level after is at least
        `min_ratio` times the level before, the change is at least `z_threshold` noise units,
        and the rise completes within `max_rise_steps` logged steps (a slow drift is not a jump).
        Short spikes (a few steps) are found from robust z-scores against a running median
        (`spike_z`). A run with fewer than `min_points` values (an excerpt) is judged by
        `logscope.health`'s band instead: a rise to 10× the step before and above the band's
        top (KL to the reference 0.05, 0.1 for PPO; `ppo_kl` 0.02), or a level of 0.3 nat
        (`ppo_kl` 0.1) or more. `actor/kl_loss`-like metrics are analysed on a log scale (their noise is
        multiplicative); `actor/ppo_kl`, which sits near 0 and can be negative, on a linear one.
        The first `warmup_steps` steps are ignored: KL to the reference starts at 0.

    Why it matters:
        `actor/ppo_kl` measures how far one update moved the policy from the one that generated
        the batch; a jump (seed 003: 0.0001 → 0.003) is a destabilising update, often followed by
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
        a KL coefficient just before the jump, the finding says so: undo that change first (A16).
        Seed 003 §4.2 says to lower `kl_coef` and `target_kl`; `ppo_kl` is governed by the LR and
        clip range rather than by a KL-to-reference coefficient, so logscope does not.

    Known false positives:
        A planned change (LR warm-up ending, a curriculum switch to harder prompts, resuming
        from a checkpoint with a different reference) raises KL by design. Very short runs
        (< 20 logged steps) get only the band test.

    References:
        seed:ppo-tuning §4.2; seed:grpo-pitfalls §3.3 (A16, mid-run coefficient changes);
        verl:trainer/ppo/core_algos.py (ppo_kl, clip_ratio); tuning_knowledge.md B3 and Caveat.
    """

    code = "LS101"
    name = "kl-jump"
    title = "KL jumped"
    concepts = ("ppo_kl", "kl_ref")
    default_severity = "warning"
    groups = ("kl",)

    def __init__(
        self,
        *,
        min_ratio: float = 2.0,
        z_threshold: float = 4.0,
        spike_z: float = 10.0,
        max_rise_steps: int = 15,
        warmup_steps: int = 10,
        min_points: int = 20,
        max_findings: int = 3,
    ) -> None:
        for label, value in (
            ("min_ratio", min_ratio),
            ("z_threshold", z_threshold),
            ("spike_z", spike_z),
        ):
            _positive(label, value)
        if min_ratio <= 1:
            raise BadDetectorParameters(f"kl-jump: min_ratio must be > 1, got {min_ratio!r}")
        self.min_ratio = min_ratio
        self.z_threshold = z_threshold
        self.spike_z = spike_z
        self.max_rise_steps = max_rise_steps
        self.warmup_steps = warmup_steps
        self.min_points = min_points
        self.max_findings = max_findings

    def detect(self, run: Run) -> list[Finding]:
        findings: list[Finding] = []
        for concept in self.concepts:
            s = load(run, concept, self.min_points)
            if s is None:
                findings.extend(self._short(run, concept))
                continue
            # ppo_kl sits near 0 and can be negative: a log scale only when it is positive
            log_scale = concept != "ppo_kl" or float(np.mean(s.values > 0)) >= 0.9
            findings.extend(self._detect_series(run, s, log_scale=log_scale))
        return by_step(findings)

    def _detect_series(self, run: Run, s: Series, log_scale: bool) -> list[Finding]:
        start = s.steps[0] + self.warmup_steps
        cands: list[tuple[Change, float]] = []
        for c in level_shifts(s, log_scale, +1):
            if c.z < self.z_threshold or s.steps[c.onset] < start:
                continue
            if c.end - c.onset > self.max_rise_steps:
                continue
            ratio = self._ratio(c, log_scale)
            if ratio >= self.min_ratio:
                cands.append((c, ratio))
        # Short spikes only on a log scale: near 0 (or in a .3f log printing mostly 0.000) a
        # single heavy-tailed point has no meaningful noise scale to be judged against.
        for c in spike_changes(s, log_scale, self.spike_z) if log_scale else ():
            if s.steps[c.onset] < start:
                continue
            if any(abs(c.onset - o.onset) <= self.max_rise_steps for o, _ in cands):
                continue
            ratio = self._ratio(c, log_scale)
            if ratio >= self.min_ratio:
                cands.append((c, ratio))
        cands.sort(key=lambda cr: -cr[0].z)
        return [self._finding(run, s, c, r) for c, r in cands[: self.max_findings]]

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
                references=[f"{SEED_PPO} §4.2", f"{SEED_GRPO} §3.2"],
            )
        ]

    @staticmethod
    def _ratio(c: Change, log_scale: bool) -> float:
        """after/before; on a linear scale (ppo_kl near 0) the base is at least the noise."""
        base = c.before if log_scale else max(c.before, c.sigma)
        return c.after / max(base, 1e-12)

    def _finding(self, run: Run, s: Series, c: Change, ratio: float) -> Finding:
        step = s.step_at(c.onset)
        end = s.step_at(c.end)
        keys = (
            f"{ACT}.optim.lr",
            f"{ACT}.clip_ratio",
            f"{ACT}.kl_loss_coef",
            "algorithm.kl_ctrl.kl_coef",
            "algorithm.kl_ctrl.target_kl",
        )
        change = config_changes(run, step, keys)
        what = "spiked" if c.kind == "spike" else "jumped"
        message = (
            f"{s.metric} {what} from {fmt(c.before)} to {fmt(c.after)} "
            f"({ratio:.1f}×, {c.z:.0f} noise units) starting at step {step}"
            + (
                f", back by step {end}."
                if c.kind == "spike"
                else f"; 90% of the rise reached by step {end}."
            )
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
            "noise_sigma": sig(c.sigma),
            "scale": "linear" if s.metric == "actor/ppo_kl" else "log",
            "thresholds": {
                "min_ratio": self.min_ratio,
                "z": self.z_threshold if c.kind != "spike" else self.spike_z,
            },
        }
        if change:
            evidence["config_change"] = change
        return self.finding(
            severity="error" if ratio >= 10 else "warning",
            message=message,
            metric=s.metric,
            step=step,
            end_step=end,
            evidence=evidence,
            advice=self._advice(run, s.metric),
            references=[f"{SEED_PPO} §4.2", f"{SEED_GRPO} §3.3", "verl:trainer/ppo/core_algos.py"],
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
        if metric == "actor/ppo_kl":
            out.append(
                advise(
                    run,
                    f"{ACT}.clip_ratio",
                    "The PPO clip range bounds how far the policy ratio may move in one update; "
                    "a tighter range limits ppo_kl directly. (Seed 003 §4.2 suggests lowering "
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


class KLOutOfBand(Detector):
    """KL to the reference outside the 0.01–0.03 band after warm-up: high is a risk, low is
    usually warm-up.

    Reads `actor/kl_loss` (or the in-reward KL, `critic/kl` / `actor/reward_kl_penalty`).

    What it detects:
        After the first `warmup_steps` steps, the KL smoothed by a running median staying above
        `high_threshold` (0.05, seed 000's "too high") for at least `min_fraction` of the
        remaining steps (and at least `min_steps` logged steps) → warning, located where the KL
        left the band (crossed `band_high`) on its way there. KL staying below `low_threshold` (0.005) for most of the run after
        warm-up → info. Both are reported against the 0.01–0.03 target band.

    Why it matters:
        High KL to the reference means the policy has drifted far from the model it started
        from: reward hacking, gibberish and repetition follow (seed 000 §3.1, §3.3). Low KL
        means the policy has barely moved: early in a run this is just warm-up; if it stays
        low and reward stalls, the penalty (or a small LR) is holding the policy back.

    Example:
        step:40 - actor/kl_loss:0.0612 - actor/kl_coef:0.001 - ...
        step:41 - actor/kl_loss:0.0655 - actor/kl_coef:0.001 - ...

    Advice:
        High KL: raise `actor_rollout_ref.actor.kl_loss_coef` (or `algorithm.kl_ctrl.kl_coef`
        for in-reward KL) by one step of ×1.4 from its current value, and/or halve the LR.
        Seed 000 §3.2 prescribes ×0.7 for high KL (its example: step 10 KL 0.082 → coef
        0.00035 → step 20 KL 0.021); by the mechanics a smaller coefficient lets KL grow, so
        logscope follows the mechanics and quotes the article. Low KL: nothing during warm-up;
        if it persists, lower the coefficient one step (×0.7).

    Known false positives:
        Runs that deliberately use a small reference constraint (large KL by design), or a
        `kl_loss_type` whose scale differs from the band's (e.g. `mse`, `full`), or
        `.3f`-rounded logs where KL below 0.0005 prints as 0.000 (still correctly "low").

    References:
        seed:grpo-pitfalls §3.1-3.3; verl:workers/actor/dp_actor.py (kl_loss);
        tuning_knowledge.md B1, B2 and Caveat.
    """

    code = "LS102"
    name = "kl-out-of-band"
    title = "KL to the reference out of the 0.01–0.03 band"
    concepts = ("kl_ref",)
    default_severity = "warning"
    groups = ("kl",)

    def __init__(
        self,
        *,
        band_low: float = 0.01,
        band_high: float = 0.03,
        low_threshold: float = 0.005,
        high_threshold: float = 0.05,
        warmup_steps: int = 20,
        min_fraction: float = 0.1,
        min_steps: int = 5,
        low_fraction: float = 0.5,
        smooth_steps: int = 5,
    ) -> None:
        for label, value in (
            ("band_low", band_low),
            ("band_high", band_high),
            ("low_threshold", low_threshold),
            ("high_threshold", high_threshold),
        ):
            _positive(label, value)
        if not (low_threshold <= band_low < band_high <= high_threshold):
            raise BadDetectorParameters(
                "kl-out-of-band: need low_threshold ≤ band_low < band_high ≤ high_threshold"
            )
        self.band_low = band_low
        self.band_high = band_high
        self.low_threshold = low_threshold
        self.high_threshold = high_threshold
        self.warmup_steps = warmup_steps
        self.min_fraction = min_fraction
        self.min_steps = min_steps
        self.low_fraction = low_fraction
        self.smooth_steps = smooth_steps

    def detect(self, run: Run) -> list[Finding]:
        s = load(run, "kl_ref")
        if s is None:
            return []
        post = s.steps >= s.steps[0] + self.warmup_steps
        n_post = int(post.sum())
        if n_post < self.min_steps:
            return []
        sm = smooth(s.values, self.smooth_steps)
        out: list[Finding] = []
        high = self._stretch(sm > self.high_threshold, post, n_post)
        if high is not None:
            first, last = high
            # the stretch is dated from where KL left the band on its way up
            while first > 0 and post[first - 1] and sm[first - 1] > self.band_high:
                first -= 1
            out.append(self._high(run, s, first, last))
        low_mask = (sm < self.low_threshold) & post
        if high is None and low_mask.sum() >= max(self.min_steps, self.low_fraction * n_post):
            first = int(np.nonzero(low_mask)[0][0])
            out.append(self._low(run, s, post, first, int(low_mask.sum()), n_post))
        return out

    def _stretch(self, mask: np.ndarray, post: np.ndarray, n_post: int) -> tuple[int, int] | None:
        """(first, last) index of the first run of `mask` within `post` long enough to count."""
        return first_stretch(
            mask & post, max(self.min_steps, math.ceil(self.min_fraction * n_post))
        )

    def _high(self, run: Run, s: Series, first: int, last: int) -> Finding:
        step, end = s.step_at(first), s.step_at(last)
        seg = s.values[first : last + 1]
        level, peak = float(np.median(seg)), float(np.max(seg))
        message = (
            f"{s.metric} left the {fmt(self.band_low)}–{fmt(self.band_high)} band at step "
            f"{step} and stays above {fmt(self.high_threshold)} until step {end} (median "
            f"{fmt(level)}, peak {fmt(peak)})."
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
            severity="warning",
            message=message,
            metric=s.metric,
            step=step,
            end_step=end,
            evidence={
                "direction": "high",
                "first_step": step,
                "last_step": end,
                "median_kl": sig(level),
                "peak_kl": sig(peak),
                "steps_above": last - first + 1,
                "threshold": self.high_threshold,
                "band": [self.band_low, self.band_high],
                "warmup_steps": self.warmup_steps,
            },
            advice=advice,
            references=[f"{SEED_GRPO} §3.2", "verl:workers/actor/dp_actor.py"],
        )

    def _low(
        self, run: Run, s: Series, post: np.ndarray, first: int, count: int, n_post: int
    ) -> Finding:
        step = s.step_at(first)
        level = float(np.median(s.values[post]))
        rounded = s.resolution is not None and level < s.resolution
        message = (
            f"{s.metric} stays below {fmt(self.low_threshold)} on {count} of {n_post} steps after "
            f"warm-up (median {fmt(level)}"
            + (", printed as 0.000 by a .3f log" if rounded else "")
            + f"), under the {fmt(self.band_low)}–{fmt(self.band_high)} band: the policy has "
            "barely moved from the reference. Early in a run this is warm-up."
        )
        advice = [
            advise(
                run,
                _kl_coef_key(run, s.metric),
                "Nothing to do while the run warms up. If KL stays this low and reward stalls, "
                "the penalty is holding the policy back: lower the coefficient one step (×0.7). "
                "Seed 000 §3.2 prescribes ×1.5 for low KL; by the mechanics that pushes KL "
                "further down.",
                f"{SEED_GRPO} §3.1-3.2",
                suggest=lambda c: verl_config.round_sig(float(c) * 0.7) if c else None,
                rule="×0.7 if KL stays low after warm-up",
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
            references=[f"{SEED_GRPO} §3.2"],
        )


class PPOKLTooLow(Detector):
    """`actor/ppo_kl` persistently below 1e-4: each update barely changes the policy.

    What it detects:
        After `warmup_steps`, the running median of `actor/ppo_kl` below `threshold` (1e-4, seed
        003) for a stretch of at least `min_fraction` of the remaining logged steps (and at least
        `min_steps`), or a KernelCPD level shift down after which its median stays below
        `threshold` to the end of the run; located where ppo_kl started falling. A `.3f` log cannot show
        1e-4 (0.000 means |x| < 5e-4): there only an info finding ("cannot judge: rounded") is
        given, when ppo_kl prints 0.000 on a whole stretch after printing ≥ 0.001 often enough
        that such a stretch would be a < 0.1 % accident. Skipped when the
        config shows one optimizer update per step (`ppo_epochs` = 1 and `train_batch_size` ≤
        `ppo_mini_batch_size`): then ppo_kl is 0 by construction (on-policy).

    Why it matters:
        `ppo_kl` is the KL between the policy that generated the batch and the one being
        updated. Near zero means the optimizer steps are too timid to change the policy: GPU
        hours spent generating rollouts that teach nothing (seed 003: < 0.0001 before tuning,
        0.0003–0.0008 after).

    Example:
        step:200 - actor/ppo_kl:3.1e-05 - actor/pg_clipfrac:0.0 - ...
        step:201 - actor/ppo_kl:2.7e-05 - actor/pg_clipfrac:0.0 - ...

    Advice:
        Raise the learning rate (`actor_rollout_ref.actor.optim.lr`, ×1.5; seed 003 §3.3 went
        1e-6 → 2e-6 "with care") — the LR governs the size of each update. When a KL penalty is
        active, the article's advice to lower its coefficient (0.001 → 0.0005) loosens the same
        brake and is given too — unless KL to the reference is already above 0.03. When entropy
        has collapsed meanwhile (≤ half its early level), small updates are a consequence of
        the collapse: no LR advice is given, the message points to entropy-collapse instead.

    Known false positives:
        Single-update-per-step configs are skipped only when the config is known; a run without
        a config dump that uses one update per step is reported. Runs that deliberately use a
        tiny LR for a final polish stage.

    References:
        seed:ppo-tuning §4.2, §3.3; verl:trainer/ppo/core_algos.py (ppo_kl);
        tuning_knowledge.md B3 and Caveat.
    """

    code = "LS103"
    name = "ppo-kl-too-low"
    title = "PPO updates too timid (ppo_kl < 1e-4)"
    concepts = ("ppo_kl",)
    default_severity = "warning"
    groups = ("kl",)

    def __init__(
        self,
        *,
        threshold: float = 1e-4,
        warmup_steps: int = 5,
        min_fraction: float = 0.25,
        min_steps: int = 10,
        smooth_steps: int = 9,
    ) -> None:
        _positive("threshold", threshold)
        self.threshold = threshold
        self.warmup_steps = warmup_steps
        self.min_fraction = min_fraction
        self.min_steps = min_steps
        self.smooth_steps = smooth_steps

    def skip_reason(self, run: Run) -> str | None:
        reason = super().skip_reason(run)
        if reason:
            return reason
        if run.config_segments:
            epochs = current_value(run, f"{ACT}.ppo_epochs")
            train = current_value(run, "data.train_batch_size")
            mini = current_value(run, f"{ACT}.ppo_mini_batch_size")
            try:
                single = int(epochs) == 1 and int(train) <= int(mini)
            except (TypeError, ValueError):
                single = False
            if single:
                return (
                    "one optimizer update per step (ppo_epochs=1, train_batch_size ≤ "
                    "ppo_mini_batch_size): ppo_kl is 0 by construction"
                )
        return None

    def detect(self, run: Run) -> list[Finding]:
        if self.skip_reason(run):
            return []
        s = load(run, "ppo_kl")
        if s is None:
            return []
        post = s.steps >= s.steps[0] + self.warmup_steps
        n_post = int(post.sum())
        if n_post < self.min_steps:
            return []
        need = max(self.min_steps, math.ceil(self.min_fraction * n_post))
        if s.resolution is not None and s.resolution >= self.threshold:
            return self._rounded(s, post, need)
        sm = smooth(s.values, self.smooth_steps)
        found = first_stretch((np.abs(sm) < self.threshold) & post, need)
        drops = [
            c
            for c in level_shifts(s, float(np.mean(s.values > 0)) >= 0.9, -1)
            if post[c.onset]
            and len(s) - c.onset >= need
            and float(np.median(s.values[c.onset :])) < self.threshold
        ]
        if found is None and not drops:
            return []
        if found is None:
            first, last = drops[0].onset, len(s) - 1
        else:
            first, last = found
            # date the stretch from where ppo_kl started falling into it, when it fell
            for c in drops:
                if first - 3 * self.smooth_steps <= c.onset <= first:
                    first = c.onset
                    break
            if drops and drops[0].onset < first:
                first, last = drops[0].onset, max(last, len(s) - 1)
        return [self._finding(run, s, first, last, n_post)]

    def _rounded(self, s: Series, post: np.ndarray, need: int) -> list[Finding]:
        """`.3f` logs: every print 0.000 over a stretch where 0.001 used to show up."""
        res = float(s.resolution or 0.0)
        nonzero = np.abs(s.values) >= res
        found = first_stretch(~nonzero & post, need)
        while found is not None:
            first, last = found
            prior = nonzero[max(0, first - max(need, 50)) : first]
            rate = float(prior.mean()) if len(prior) >= 10 else 0.0
            # a stretch this long without a single 0.001 is unlikely (< 0.1 %) at the prior rate
            if rate > 0 and (1 - rate) ** (last - first + 1) < 1e-3:
                return [self._rounded_finding(s, first, last, rate)]
            found = first_stretch(~nonzero & post & (np.arange(len(s)) > last), need)
        return []

    def _rounded_finding(self, s: Series, first: int, last: int, rate: float) -> Finding:
        """Info: the `.3f` print went to 0.000 on a stretch; below `threshold` cannot be told."""
        step, end = s.step_at(first), s.step_at(last)
        res = s.resolution or 0.0
        return self.finding(
            severity="info",
            message=(
                f"Cannot judge: rounded. {s.metric} prints 0.000 on every step from step "
                f"{step} to step {end} ({last - first + 1} steps) after printing ≥ 0.001 on "
                f"{rate:.0%} of the steps before: it fell below {res:g}, but the "
                f".3f log cannot show whether it is below {fmt(self.threshold)}."
            ),
            metric=s.metric,
            step=step,
            end_step=end,
            evidence={
                "first_step": step,
                "last_step": end,
                "steps_all_zero": last - first + 1,
                "nonzero_rate_before": round(rate, 3),
                "value_resolution": res,
                "threshold": self.threshold,
                "judged": False,
            },
            advice=[],
            references=[f"{SEED_PPO} §4.2"],
        )

    def _finding(self, run: Run, s: Series, first: int, last: int, n_post: int) -> Finding:
        step, end = s.step_at(first), s.step_at(last)
        seg = s.values[first : last + 1]
        level = float(np.median(seg))
        before = s.values[max(0, first - 20) : first]
        prior = float(np.median(before)) if len(before) >= 3 else None
        message = (
            f"{s.metric} has a median of {fmt(level)} from step {step} to step {end} "
            f"({last - first + 1} of {n_post} logged steps after warm-up), below "
            f"{fmt(self.threshold)}: the updates barely move the policy."
        )
        if prior is not None and prior >= self.threshold:
            message += f" Before step {step} it was {fmt(prior)}."
        evidence: dict[str, Any] = {}
        advice: list[Advice] = []
        # Guards against advising the opposite of what a co-occurring symptom needs:
        # a collapsed policy (entropy gone) updates little because it is near-deterministic —
        # a larger LR would not help; and KL to the reference already above the band must not
        # be loosened further.
        ent_early, ent_now = _levels(run, "entropy", s.steps[0], step, end)
        collapsed = ent_early is not None and ent_now is not None and ent_now <= 0.5 * ent_early
        _, kl_now = _levels(run, "kl_ref", s.steps[0], step, end)
        kl_high = kl_now is not None and kl_now > 0.03
        if collapsed:
            message += (
                f" Entropy fell from {fmt(ent_early)} to {fmt(ent_now)} meanwhile: the policy has "
                "collapsed, which is why updates are small (see entropy-collapse); a larger LR "
                "would not help."
            )
            evidence["entropy_early"], evidence["entropy_now"] = sig(ent_early), sig(ent_now)
        else:
            advice.append(
                advise(
                    run,
                    f"{ACT}.optim.lr",
                    "The learning rate sets the size of each update; ppo_kl this small means "
                    "the steps are too timid (seed 003 §3.3 raised it 1e-6 → 2e-6, with care).",
                    f"{SEED_PPO} §3.3",
                    suggest=lambda c: verl_config.round_sig(float(c) * 1.5),
                    rule="×1.5",
                )
            )
        if kl_high:
            evidence["kl_to_reference"] = sig(kl_now)
        use_kl_loss = current_value(run, f"{ACT}.use_kl_loss")
        in_reward = current_value(run, "algorithm.use_kl_in_reward")
        if (use_kl_loss or in_reward) and not collapsed and not kl_high:
            key = f"{ACT}.kl_loss_coef" if use_kl_loss else "algorithm.kl_ctrl.kl_coef"
            advice.append(
                advise(
                    run,
                    key,
                    "The KL penalty also brakes the update; seed 003 §4.2 lowered it 0.001 → "
                    "0.0005 to get ppo_kl from < 0.0001 to 0.0003–0.0008.",
                    f"{SEED_PPO} §4.2",
                    suggest=lambda c: verl_config.round_sig(float(c) * 0.5) if c else None,
                    rule="×0.5",
                )
            )
        return self.finding(
            severity="warning",
            message=message,
            metric=s.metric,
            step=step,
            end_step=end,
            evidence={
                **evidence,
                "first_step": step,
                "last_step": end,
                "median_ppo_kl": sig(level),
                "median_before": sig(prior) if prior is not None else None,
                "steps_below": last - first + 1,
                "steps_after_warmup": n_post,
                "threshold": self.threshold,
            },
            advice=advice,
            references=[f"{SEED_PPO} §4.2", "verl:trainer/ppo/core_algos.py"],
        )
