"""Config rules on the KL coefficients: zero, not scaled to the model size, changed at a restart
(LS507, LS508, LS515; tuning_knowledge.md §A8, §A16).
"""

from __future__ import annotations

import math

from logscope import verl_config, verl_version
from logscope.advice import SEED_GRPO, SEED_PPO
from logscope.config_view import ConfigView, Hit, fmt
from logscope.detector import param
from logscope.model import Finding, Run, Severity
from logscope.sources import cite, cite_all
from logscope.verl_config import ACT, suggested_kl_coef

from .config_lint import KL_IN_REWARD, USE_KL_LOSS, ConfigRule, is_grpo, views

KL_LOSS_COEF = f"{ACT}.kl_loss_coef"
KL_CTRL_COEF = "algorithm.kl_ctrl.kl_coef"


def kl_in_reward_active(v: ConfigView) -> bool:
    """In-reward KL (algorithm.kl_ctrl) applies: use_kl_in_reward, or verl < 0.4 without KL loss."""
    if v.flag(KL_IN_REWARD):
        return True
    if verl_version.older_than(v.version, "0.4"):
        return not v.flag(USE_KL_LOSS)
    return False


def kl_coef_changes(before: ConfigView, after: ConfigView) -> list[tuple[str, float, float, bool]]:
    """(key, old, new, active) for each KL coefficient that differs between two configs."""
    out = []
    for key, active in (
        (KL_LOSS_COEF, before.flag(USE_KL_LOSS) or after.flag(USE_KL_LOSS)),
        (KL_CTRL_COEF, kl_in_reward_active(before) or kl_in_reward_active(after)),
    ):
        old, new = before.num(key), after.num(key)
        if old is None or new is None:
            continue
        if not math.isclose(old, new, rel_tol=1e-9, abs_tol=0.0):
            out.append((key, old, new, active))
    return out


# tuning_knowledge.md §A8
class KlCoefZero(ConfigRule, code="LS507", name="kl-coef-zero"):
    """A KL coefficient of 0 switches off the pull toward the reference policy.

    What it detects:
        `actor.kl_loss_coef=0` with `actor.use_kl_loss=True` (error), an explicit
        `kl_loss_coef=0` without the KL loss (warning for GRPO without in-reward KL, else
        info), and `algorithm.kl_ctrl.kl_coef=0` with `algorithm.use_kl_in_reward=True`
        (warning).

    Why it matters:
        Without a KL constraint the policy drifts from the reference; the GRPO article reports
        gibberish and repetition.

    Example:
        `actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_coef=0` →
        suggest 0.001 (0.0005 for models ≤ 3B).

    Advice:
        verl's default 0.001 for ~7B models (0.0005 for small models, 0.002 as a start for
        ≥ 30B), then keep it fixed for the run.

    Known false positives:
        Deliberate KL-free recipes (e.g. DAPO-style training without a reference model).

    References:
        seed:grpo-pitfalls §3.1, §3.3.
    """

    title = "KL coefficient set to 0"
    default_severity = "error"

    def check(self, v: ConfigView) -> list[Hit]:
        hits = []
        coef = v.num(KL_LOSS_COEF)
        size = v.model_size()
        target = suggested_kl_coef(size)
        grpo = is_grpo(v)
        if coef == 0 and (v.flag(USE_KL_LOSS) or v.is_set(KL_LOSS_COEF)):
            advice = [
                v.advice(
                    KL_LOSS_COEF,
                    target,
                    "0.001 is verl's default, tuned for ~7B models; the GRPO article starts "
                    "smaller models at 0.0005 and calibrates so the KL loss sits in 0.01–0.03.",
                    f"{SEED_GRPO} §3.1–3.2",
                )
            ]
            if v.flag(USE_KL_LOSS):
                severity: Severity = "error"
                message = (
                    "actor.use_kl_loss=True with actor.kl_loss_coef=0: the KL term is switched "
                    "off, so nothing keeps the policy near the reference (the GRPO article: the "
                    "policy drifts into gibberish and repetition)."
                )
            else:
                in_reward = kl_in_reward_active(v) and (v.num(KL_CTRL_COEF) or 0) > 0
                severity = "warning" if grpo and not in_reward else "info"
                message = (
                    "actor.kl_loss_coef=0 (and actor.use_kl_loss=False): there is no KL loss"
                    + (
                        ""
                        if in_reward
                        else " and no in-reward KL either, so no KL constraint at all"
                    )
                    + ". The GRPO article warns that without a KL constraint the policy drifts "
                    "(gibberish, repetition)."
                )
                if grpo and not in_reward:
                    advice.append(
                        v.advice(
                            USE_KL_LOSS,
                            True,
                            "GRPO recipes in verl use the KL loss.",
                            f"{SEED_GRPO} §3.3",
                        )
                    )
            hits.append(
                Hit(
                    severity,
                    message,
                    {"kl_loss_coef": coef, "use_kl_loss": v.flag(USE_KL_LOSS)},
                    advice,
                    [f"{SEED_GRPO} §3.3"],
                )
            )
        ctrl = v.num(KL_CTRL_COEF)
        if ctrl == 0 and v.flag(KL_IN_REWARD):
            hits.append(
                Hit(
                    "warning",
                    "algorithm.use_kl_in_reward=True with algorithm.kl_ctrl.kl_coef=0: the "
                    "in-reward KL penalty is on but weighs nothing.",
                    {"kl_ctrl.kl_coef": ctrl, "use_kl_in_reward": True},
                    [
                        v.advice(
                            KL_CTRL_COEF, target, "verl's default is 0.001.", f"{SEED_GRPO} §3.3"
                        )
                    ],
                    [f"{SEED_GRPO} §3.3"],
                )
            )
        return hits


# tuning_knowledge.md §A8
class KlCoefScaleMismatch(ConfigRule, code="LS508", name="kl-coef-scale-mismatch"):
    """The KL coefficient is verl's 7B-tuned default on a much smaller or larger model.

    What it detects:
        The active KL coefficient (`actor.kl_loss_coef` with the KL loss on;
        `algorithm.kl_ctrl.kl_coef` with in-reward KL, or set explicitly on a command line) at
        0.001 or more for a model of ≤ 3B, or at 0.001 or less for ≥ 30B (model size from
        `actor_rollout_ref.model.path`).

    Why it matters:
        The GRPO article: 0.001 is tuned for ~7B; on a small model it over-suppresses the policy
        (reward grows slowly), on 72B it is too weak (loss oscillates).

    Example:
        Qwen2.5-0.5B with `algorithm.kl_ctrl.kl_coef=0.001` → suggest 0.0005 (what the PPO
        article's tuned run used).

    Advice:
        The starting value by model size (0.0005 up to 3B, 0.002 from 30B), which this rule
        accepts; then calibrate on the KL to the reference (0.01–0.03) and keep it fixed.

    Known false positives:
        The GRPO article gives a direction, not numbers; a coefficient already calibrated for the
        task is fine. Sizes are guessed from the model path.

    References:
        seed:grpo-pitfalls §3.1–3.2; seed:ppo-tuning §4.2.
    """

    title = "KL coefficient not scaled to the model size"
    default_severity = "info"

    small_b: float = param(3.0, gt=0)
    large_b: float = param(30.0, gt=0)

    def check(self, v: ConfigView) -> list[Hit]:
        size = v.model_size()
        if size is None:
            return []
        keys = []
        if v.flag(USE_KL_LOSS):
            keys.append(KL_LOSS_COEF)
        if kl_in_reward_active(v) or (v.explicit is not None and v.is_set(KL_CTRL_COEF)):
            keys.append(KL_CTRL_COEF)
        hits = []
        for key in keys:
            coef = v.num(key)
            if coef is None or coef <= 0:
                continue
            # the suggestion is the starting value by model size, which this rule accepts
            if size <= self.small_b and coef >= 0.001:
                suggested = suggested_kl_coef(size, self.small_b, self.large_b)
                direction = (
                    f"smaller models want less: the default over-constrains a {size:g}B policy"
                )
            elif size >= self.large_b and coef <= 0.001:
                suggested = suggested_kl_coef(size, self.small_b, self.large_b)
                direction = f"larger models want more: the default lets a {size:g}B policy diverge"
            else:
                continue
            note = ""
            if key == KL_CTRL_COEF and not kl_in_reward_active(v):
                note = (
                    " Note: verl ≥ 0.4 uses algorithm.kl_ctrl only with "
                    "algorithm.use_kl_in_reward=True."
                )
            message = (
                f"{key.rsplit('.', 1)[-1]}={fmt(coef)} for a {size:g}B model: the default 0.001 is "
                f"tuned for ~7B models and {direction} (the GRPO article).{note}"
            )
            advice = v.advice(
                key,
                suggested,
                "A starting point, not a measured optimum: the GRPO article gives the direction "
                "only (the PPO article's run on Qwen2.5-0.5B lowered kl_coef 0.001 → 0.0005). "
                "Then calibrate against the KL to the reference (target 0.01–0.03) and keep it "
                "fixed for the run.",
                f"{SEED_GRPO} §3.1; {SEED_PPO} §4.2",
            )
            hits.append(
                Hit(
                    "info",
                    message,
                    {"parameter": key, "coefficient": coef, "model_size_b": size},
                    [advice],
                    [f"{SEED_GRPO} §3.1", f"{SEED_PPO} §4.2"],
                )
            )
        return hits


# tuning_knowledge.md §A16
class KlCoefChangedMidrun(ConfigRule, code="LS515", name="kl-coef-changed-midrun"):
    """The KL coefficient changed between two config dumps of one log (a restart).

    What it detects:
        Consecutive config segments of a log with a different `actor.kl_loss_coef` or
        `algorithm.kl_ctrl.kl_coef`; the finding is at the restart step (the later
        segment's first step). Warning when the coefficient is in use, info otherwise. The
        evidence lists other keys that changed at the same restart.

    Why it matters:
        The GRPO article: changing the KL penalty mid-run breaks gradient consistency and produces a
        sawtooth reward curve; lock it after calibration.

    Example:
        A log restarted from a checkpoint at step 120 with `kl_loss_coef` 0.001 → 0.002:
        warning at step 120, suggest setting it back to 0.001.

    Advice:
        Keep the coefficient of the first segment for the whole run (or start a new run).

    Known false positives:
        A deliberate schedule; logs that concatenate unrelated runs.

    References:
        seed:grpo-pitfalls §3.3.
    """

    title = "KL coefficient changed mid-run"

    def check(self, v: ConfigView) -> list[Hit]:
        return []  # judged across segments in detect()

    def detect(self, run: Run) -> list[Finding]:
        findings: list[Finding] = []
        segments = views(run)
        for (_, before), (step, after), seg in zip(
            segments, segments[1:], run.config_segments[1:], strict=False
        ):
            restart = step if step is not None else seg.first_step
            for key, old, new, active in kl_coef_changes(before, after):
                others = [
                    k for k in verl_config.changed_keys(before.config, after.config) if k != key
                ]
                short = key.rsplit(".", 1)[-1]
                message = (
                    f"{key} changed from {fmt(old)} to {fmt(new)} at the restart at step "
                    f"{restart}: the GRPO article warns this breaks gradient consistency and gives "
                    "a sawtooth reward curve."
                )
                if not active:
                    message += " (The coefficient is not in use in this config.)"
                advice = after.advice(
                    key,
                    old,
                    f"Keep {short} at the first segment's value for the whole run; calibrate "
                    "early, then lock it.",
                    cite(f"{SEED_GRPO} §3.3"),
                )
                findings.append(
                    self.finding(
                        severity="warning" if active else "info",
                        message=message,
                        step=restart,
                        evidence={
                            "parameter": key,
                            "before": old,
                            "after": new,
                            "restart_step": restart,
                            "other_changed_keys": others,
                        },
                        advice=[advice],
                        references=cite_all([f"{SEED_GRPO} §3.3"]),
                    )
                )
        return findings
