"""Training–inference mismatch: the trainer and the inference engine disagree on the policy."""

from __future__ import annotations

from typing import Any

from logscope.advice import advise
from logscope.detector import param
from logscope.exceptions import BadDetectorParameters
from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all
from logscope.verl_config import RO

from ._levels import SustainedLevel, upward_drift
from ._series import Series
from ._stats import fmt, sig

CORRECTION = "algorithm.rollout_correction"
SRC_CORR = "verl:docs/algo/rollout_corr.md"
SRC_DEBUG = "verl:utils/debug/metrics.py"


class TrainInferenceMismatch(SustainedLevel, code="LS150", name="train-inference-mismatch"):
    """The probabilities the trainer computes for the sampled tokens drift away from those the
    inference engine (vLLM, SGLang) sampled them with.

    Reads verl's mismatch metrics (0.6+, logged when `rollout.calculate_log_probs` is on; on by
    default in 0.9): `training/rollout_actor_probs_pearson_corr`,
    `training/rollout_probs_diff_mean`, and the off-policy diagnostics of rollout correction
    (`rollout_corr/kl`, `rollout_corr/chi2_token`, `rollout_corr/rollout_is_mean`,
    `rollout_corr/rollout_is_eff_sample_size`; `actor/rollout_corr/*` in bypass mode).

    What it detects:
        After `warmup_steps`, a stretch of at least `min_steps` logged steps (levels smoothed
        by a running median of `smooth_steps`) where any of verl's published limits is crossed:
        Pearson correlation of token probabilities below `pearson_min` (0.99); |rollout_corr/kl|
        above `kl_max` (0.1); chi2_token above `chi2_max` (1.0); mean IS weight outside
        [`is_mean_low`, `is_mean_high`] ([0.5, 2]); IS effective sample size below `ess_min`
        (0.3). Or `training/rollout_probs_diff_mean` drifting up: the last quarter's median at
        least `drift_ratio` (2) times the first quarter's, with a Mann–Kendall trend z ≥ 3.
        One finding, at the earliest signal, listing every signal that fired.

    Why it matters:
        PPO's ratio assumes the tokens were sampled from π_old. When the inference engine's
        probabilities differ (precision, kernels, prefix caching, MoE routing), the update is
        off-policy without knowing it, and the gap tends to grow until training collapses
        ("When Speed Kills Stability", cited by verl's rollout-correction docs). A healthy run
        has Pearson ≈ 0.998 and a flat probs_diff_mean of a few 1e-3.

    Example:
        step:120 - training/rollout_probs_diff_mean:0.0041 - training/rollout_actor_probs_pearson_corr:0.9981 - ...
        step:380 - training/rollout_probs_diff_mean:0.0157 - training/rollout_actor_probs_pearson_corr:0.9712 - ...

    Advice:
        Turn on rollout correction with token-level truncated IS weights
        (`algorithm.rollout_correction.rollout_is=token`, threshold 2.0, verl's verified
        preset) when it is off; turn off vLLM prefix caching
        (`actor_rollout_ref.rollout.enable_prefix_caching=False`, verl#2387); keep the rollout
        in bfloat16 (`actor_rollout_ref.rollout.dtype`). For MoE models, a falling Pearson often
        means the experts routed at rollout and at training differ: replay the rollout's routing
        (router replay).

    Known false positives:
        Bypass mode compares π_θ (which moves during the update) with π_rollout, so its
        `actor/rollout_corr/*` values are larger than decoupled mode's. Runs that are off-policy
        by design (replay buffers, async training with staleness) show a gap that is the
        staleness, not the engine. NaN values (an empty response mask) are skipped, not judged.

    References:
        verl:docs/algo/rollout_corr.md (Conditional Alerting, Troubleshooting);
        verl:utils/debug/metrics.py (calculate_debug_metrics); verl:trainer/ppo/rollout_corr_helper.py;
        verl#2387 (prefix caching).
    """

    title = "Trainer and inference engine disagree"
    concepts = (
        "rollout_probs_pearson",
        "rollout_probs_diff_mean",
        "rollout_corr_kl",
        "rollout_corr_chi2_token",
        "rollout_is_mean",
        "rollout_is_ess",
    )
    groups = ("policy", "mismatch")

    pearson_min: float = param(0.99, gt=0, lt=1)
    kl_max: float = param(0.1, gt=0)
    chi2_max: float = param(1.0, gt=0)
    is_mean_low: float = param(0.5, gt=0, lt=1)
    is_mean_high: float = param(2.0, gt=1)
    ess_min: float = param(0.3, gt=0, lt=1)
    drift_ratio: float = param(2.0, gt=1)
    min_points: int = param(20, ge=8)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.is_mean_low >= self.is_mean_high:
            raise BadDetectorParameters("train-inference-mismatch: need is_mean_low < is_mean_high")

    def detect(self, run: Run) -> list[Finding]:
        signals = [s for s in self._signals(run) if s is not None]
        if not signals:
            return []
        signals.sort(key=lambda s: s["first_step"])
        first = signals[0]
        message = (
            "The trainer's and the inference engine's token probabilities disagree: "
            + "; ".join(s["text"] for s in signals)
            + ". The update is off-policy without correcting for it."
        )
        return [
            self.finding(
                message=message,
                metric=first["metric"],
                step=first["first_step"],
                end_step=max(s["last_step"] for s in signals),
                evidence={
                    "signals": [{k: v for k, v in s.items() if k != "text"} for s in signals]
                },
                advice=self._advice(run),
                references=cite_all([SRC_CORR, SRC_DEBUG, "verl#2387"]),
            )
        ]

    def _signals(self, run: Run) -> list[dict[str, Any] | None]:
        limits = [
            (
                "rollout_probs_pearson",
                lambda v: v < self.pearson_min,
                False,
                self.pearson_min,
                "below",
            ),
            ("rollout_corr_kl", lambda v: abs(v) > self.kl_max, True, self.kl_max, "|·| above"),
            ("rollout_corr_chi2_token", lambda v: v > self.chi2_max, True, self.chi2_max, "above"),
            ("rollout_is_mean", lambda v: v < self.is_mean_low, False, self.is_mean_low, "below"),
            ("rollout_is_mean", lambda v: v > self.is_mean_high, True, self.is_mean_high, "above"),
            ("rollout_is_ess", lambda v: v < self.ess_min, False, self.ess_min, "below"),
        ]
        out: list[dict[str, Any] | None] = []
        for concept, beyond, high, limit, side in limits:
            e = self.excursion(run, concept, beyond, high)
            if e is not None:
                text = (
                    f"{e.metric} {side} {fmt(limit)} from step {e.first_step} for "
                    f"{e.steps} logged steps (median {fmt(e.level)}, "
                    f"{'peak' if high else 'lowest'} {fmt(e.extreme)})"
                )
                out.append({**e.evidence(limit), "text": text})
        s = Series.load(run, "rollout_probs_diff_mean", min_points=self.min_points)
        if s is not None:
            d = upward_drift(
                s,
                min_ratio=self.drift_ratio,
                warmup_steps=self.warmup_steps,
                min_points=self.min_points,
            )
            if d is not None:
                text = (
                    f"{d.metric} drifted up ×{d.ratio:.1f} ({fmt(d.early)} → {fmt(d.late)}, "
                    f"rising from step {d.first_step})"
                )
                out.append(
                    {
                        "metric": d.metric,
                        "first_step": d.first_step,
                        "last_step": s.step_at(len(s) - 1),
                        "early_median": sig(d.early),
                        "late_median": sig(d.late),
                        "ratio": sig(d.ratio),
                        "trend_z": sig(d.trend_z),
                        "limit": self.drift_ratio,
                        "text": text,
                    }
                )
        return out

    def _advice(self, run: Run) -> list[Advice]:
        advice = []
        if run.config_value(f"{CORRECTION}.rollout_is") in (None, "null", "None"):
            advice.append(
                advise(
                    run,
                    f"{CORRECTION}.rollout_is",
                    "Token-level truncated importance weights (π_old/π_rollout, capped at "
                    f"{CORRECTION}.rollout_is_threshold, 2.0 by default) correct the update for "
                    "the gap; verl's verified preset decoupled_token_is(). It needs "
                    f"{RO}.calculate_log_probs=True.",
                    SRC_CORR,
                    suggest="token",
                )
            )
        advice.append(
            advise(
                run,
                f"{RO}.enable_prefix_caching",
                "Rollout outputs that differed from plain vLLM were fixed by turning prefix "
                "caching off.",
                "verl#2387",
                suggest=False,
            )
        )
        advice.append(
            advise(
                run,
                f"{RO}.dtype",
                "The rollout should run in the dtype the actor computes log-probs in; float16 "
                "rollouts against a bfloat16 actor widen the gap.",
                SRC_CORR,
                suggest="bfloat16",
            )
        )
        return advice
