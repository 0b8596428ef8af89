"""Gradient norm held far above the clip value for the whole run (the PPO article §3.2)."""

from __future__ import annotations

import numpy as np

from logscope.aliases import resolve
from logscope.detector import Detector, param
from logscope.model import Finding, Run
from logscope.sources import cite_all

from ._common import _num, grad_clip_advice, grad_clip_key
from ._series import Series, running_median


class GradNormAboveClip(Detector, code="LS131", name="grad-norm-above-clip"):
    """The policy's gradient norm stays far above the clip value while PPO clipping stays active.

    What it detects:
        Over the last half of the run (all of it when it has fewer than `min_steps` steps, down
        to one), the median of `actor/grad_norm` (the norm before clipping)
        is at least `ratio` times the configured clip value (`actor.grad_clip`, or
        `actor.optim.clip_grad` on verl ≥ 0.8; verl's default 1.0 when unset), and
        `actor/pg_clipfrac`, when logged, is above zero on at least `clipfrac_share` of those
        steps. Info: a run can train like this, but every update is rescaled.

    Why it matters:
        With the norm ×7 above the clip, every optimizer step is scaled down by the clip, so the
        learning rate and the clip value together set the step size and the gradient's own
        scale carries no information. The PPO tuning article saw exactly this baseline
        (grad_norm 7.16 with pg_clipfrac ≈ 0.005 on every step) and a steadier run after
        lowering the clip.

    Example:
        (TaskRunner pid=1) step:120 - actor/pg_clipfrac:0.0051 - actor/grad_norm:7.158 - …
        with actor_rollout_ref.actor.grad_clip=1.0 in the config dump.

    Advice:
        The PPO article lowered `actor_rollout_ref.actor.grad_clip` 1.0 → 0.5 (grad_norm 7.16 →
        4.2–4.8, clipfrac → 0). A noisy loss is the other lever: a larger micro/mini batch
        lowers gradient noise (the PPO article §3.1).

    Known false positives:
        Large models and long sequences have large raw gradient norms by nature; if the run
        learns well, the finding is informational only. Runs whose config is unknown are judged
        against verl's default clip (1.0).

    References:
        seed:ppo-tuning §3.1–3.2; verl:workers/actor/dp_actor.py (`clip_grad_norm_` returns the
        pre-clip norm, logged as actor/grad_norm).
    """

    title = "Gradient norm far above the clip value"
    concepts = ("actor_grad_norm",)
    default_severity = "info"
    groups = ("rl", "gradients")

    ratio: float = param(5.0, gt=0)
    clipfrac_share: float = param(0.8, ge=0, le=1)
    min_steps: int = param(20, ge=1)

    def detect(self, run: Run) -> list[Finding]:
        grad = Series.read(run, resolve(run, "actor_grad_norm"))
        steps, norms = grad.steps, grad.values
        if len(norms) == 0:
            return []
        # a short run (an excerpt) is judged on all its steps, a longer one on its last half
        half = len(norms) // 2 if len(norms) >= self.min_steps else 0
        clip = _num(run.config_value(grad_clip_key(run))) or _num(
            run.config_value("actor_rollout_ref.actor.grad_clip")
        )
        clip = clip if clip and clip > 0 else 1.0
        median = float(np.median(norms[half:]))
        if median < self.ratio * clip:
            return []
        # Where the condition began: the first step whose rolling median is already above it.
        above = running_median(norms, 9, shrink=False) >= self.ratio * clip
        start = int(np.argmax(above)) if above.any() else half
        start = min(start, half)
        tail_steps, tail = steps[start:], norms[start:]
        evidence: dict[str, object] = {
            "median_grad_norm": round(median, 4),
            "clip": clip,
            "ratio": round(median / clip, 2),
            "from_step": int(tail_steps[0]),
            "steps": len(tail),
        }
        clip_series = Series.read(run, resolve(run, "pg_clipfrac"))
        c_steps, clipfrac = clip_series.steps, clip_series.values
        if len(clipfrac):
            in_tail = clipfrac[c_steps >= tail_steps[0]]
            share = float(np.mean(in_tail > 0)) if len(in_tail) else 0.0
            if share < self.clipfrac_share:
                return []
            evidence["pg_clipfrac_median"] = round(float(np.median(in_tail)), 5)
            evidence["pg_clipfrac_positive_share"] = round(share, 3)
        advice = grad_clip_advice(
            run, "actor", "Every update is rescaled by the clip; the norm itself says little."
        )
        message = (
            f"{grad.metric} has a median of {median:.3g} from step {int(tail_steps[0])} on, "
            f"{median / clip:.1f}× the clip value {clip:g}: every update is clipped"
            + (
                f", and PPO clipping is active on {evidence['pg_clipfrac_positive_share']:.0%} of steps."
                if "pg_clipfrac_positive_share" in evidence
                else "."
            )
        )
        return [
            self.finding(
                message=message,
                metric=grad.metric,
                step=int(tail_steps[0]),
                end_step=int(tail_steps[-1]),
                evidence=evidence,
                advice=[advice] if advice else [],
                references=cite_all(["seed:ppo-tuning §3.2"]),
            )
        ]
