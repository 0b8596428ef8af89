"""Non-finite values: NaN/inf in losses, grad norms, KL and rewards, and the steps verl skipped."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import polars as pl

from logscope import metric_registry
from logscope.advice import SEED_GRPO
from logscope.aliases import LOSS_LIKE_PREFIXES
from logscope.detector import Detector, param
from logscope.frameworks import profile_of
from logscope.model import SEVERITY_RANK, Finding, Run, Severity
from logscope.sources import cite_all
from logscope.words import plural

from ._common import Hit, non_finite_advice, occurrences, where
from ._series import stretches
from ._signatures import GRAD_NORM_KEYS, GRAD_NORM_RE, SignatureDetector

# Metric families (one finding per family, naming the metric that went non-finite first) are
# each framework's profile's `finite` table; verl's prefixes are the registry's `finite` ones.
_FAMILY_ORDER = ("loss", "grad-norm", "kl", "entropy", "reward")


def family_of(metric: str, run: Run | None = None) -> str | None:
    """The family of a loss-like metric in `run`'s framework (None when it is not watched)."""
    return profile_of(run).finite_family(metric)


def _nan_means(metric: str) -> str:
    """What a NaN of `metric` means by the metric registry: "divergence", "empty selection"."""
    entry = metric_registry.lookup(metric)
    return entry.nan if entry is not None and entry.nan else "divergence"


def _without_empty_selections(
    run: Run, parts: dict[tuple[str], pl.DataFrame]
) -> dict[tuple[str], pl.DataFrame]:
    """Leave out the NaN points of metrics whose NaN means an empty selection (verl logs NaN
    `critic/values/*` for an empty batch) at steps where every divergence metric logged is
    finite; where none is logged, or one diverged too, the NaN stays."""
    empty = [key for key in parts if _nan_means(key[0]) == "empty selection"]
    if not empty:
        return parts
    logged: list[np.ndarray] = []
    diverged: list[np.ndarray] = []
    for metric in run.metric_names:
        if family_of(metric, run) is not None and _nan_means(metric) == "divergence":
            steps, values = run.series(metric)
            logged.append(steps)
            diverged.append(steps[~np.isfinite(values)])
    if not logged:
        return parts
    judged, bad = np.concatenate(logged), np.concatenate(diverged)
    out = dict(parts)
    for key in empty:
        steps = parts[key].get_column("step").to_numpy()
        values = parts[key].get_column("value").to_numpy()
        selection = np.isnan(values) & np.isin(steps, judged) & ~np.isin(steps, bad)
        kept = parts[key].filter(pl.Series(~selection))
        if np.isfinite(kept.get_column("value").to_numpy()).all():
            del out[key]
        else:
            out[key] = kept
    return out


def _fmt(value: float) -> str:
    if np.isnan(value):
        return "nan"
    return "inf" if value > 0 else "-inf"


class NonFiniteMetric(Detector, code="LS001", name="non-finite-metric"):
    """A loss, gradient norm, KL or reward value is NaN or infinite.

    One finding per onset: metrics that turn non-finite within `merge_within` steps of each
    other make one finding (a NaN loss drags the grad norm, KL and entropy along), led by the
    metric that went first (the loss on a tie), with the first step and how many logged steps
    are non-finite.

    What it detects:
        Any `nan`, `inf` or `-inf` value of a watched metric (`actor/pg_loss`, `actor/grad_norm`,
        `actor/kl_loss`, `actor/ppo_kl`, `actor/entropy`, `critic/vf_loss`, `critic/grad_norm`,
        `critic/kl`, `critic/score/*`, `critic/rewards/*`, `critic/advantages/*`,
        `critic/returns/*`, `critic/values/*`). A NaN of a metric whose NaN means an empty
        selection (the metric registry's `nan`: verl logs NaN `critic/values/*` for an empty
        batch) counts only at a step where a divergence metric (loss, grad norm, …) is not
        finite too, or where none is logged. Evidence lists each metric's first step and
        count, its family (loss, grad-norm, kl, entropy, reward), and the last finite value
        before the first non-finite one.

        Severity: `critical` when the metric is still non-finite at the end of the run for at
        least `critical_trailing` logged steps (training never recovered), or when the loss
        itself is non-finite on at least `critical_count` steps; `warning` for a gradient norm
        that was non-finite on at most `transient_max` steps and recovered (verl skipped those
        optimizer steps); `error` otherwise. With several families in one finding, the most
        severe wins.

    Why it matters:
        A NaN loss or gradient poisons the weights: once a NaN reaches the parameters every
        later step is garbage, and the run's compute from that point on is wasted. verl skips the
        optimizer step when the gradient norm is not finite, which saves the weights for an
        isolated bad batch but not when it keeps happening.

    Example:
        (TaskRunner pid=2231) step:57 - actor/pg_loss:0.0412 - actor/grad_norm:7.9 - ...
        (TaskRunner pid=2231) step:58 - actor/pg_loss:nan - actor/grad_norm:nan - ...
        (TaskRunner pid=2231) step:59 - actor/pg_loss:nan - actor/grad_norm:nan - ...

    Advice:
        Resume from the checkpoint saved before the first non-finite step
        (`trainer.resume_from_path` with `trainer.resume_mode=resume_path`; the folder is
        computed from `trainer.default_local_dir` and `trainer.save_freq` when the config
        shows them): weights updated from a NaN are garbage. Halve the learning rate
        (`actor.optim.lr`; the critic's keys for critic metrics) and clip gradients at 0.5
        (`actor.grad_clip`, or `actor.optim.clip_grad` in verl ≥ 0.8). Use bfloat16 rather
        than float16 (`actor_rollout_ref.rollout.dtype`; float16 overflows above 65504), and
        `rollout.calculate_log_probs=True` to see whether rollout and actor log-probs part
        before the NaN. Lower `actor_rollout_ref.rollout.gpu_memory_utilization` only when the
        config shows it above the advised range (0.4–0.5 on one GPU, 0.3–0.4 with 8-GPU FSDP,
        up to 0.65 for small models): the GRPO article's claim that a starved FSDP causes
        inf/nan losses is the weakest of these levers.

    Known false positives:
        Metrics that are NaN by construction in some setups (e.g. `critic/values/*` when a
        value head is not trained yet, or a reward that is deliberately NaN for filtered
        samples) are reported too. A reader that writes missing values as NaN instead of
        leaving them out would also trigger it; logscope's own readers leave them out.

    References:
        seed:grpo-pitfalls §4.1 (too high gpu_memory_utilization → inf/nan loss);
        seed:ppo-tuning §3.2 (grad_clip 1.0 → 0.5); verl:workers/actor/dp_actor.py
        (`grad_norm is not finite`, optimizer step skipped); verl:trainer/ppo/ray_trainer.py
        (resume_mode, resume_from_path); pytorch:amp (float16 and bfloat16).
    """

    title = "NaN/inf in a loss, gradient norm, KL or reward"
    reads = "metrics"
    #: metric name prefixes it watches (shown in the catalogue; it has no alias concepts)
    metric_patterns: ClassVar[tuple[str, ...]] = LOSS_LIKE_PREFIXES
    default_severity = "error"
    groups = ("numerics",)

    critical_trailing: int = param(3, ge=0)
    critical_count: int = param(10, ge=0)
    transient_max: int = param(2, ge=0)
    merge_within: int = param(2, ge=0)

    def skip_reason(self, run: Run) -> str | None:
        if not any(family_of(m, run) for m in run.metric_names):
            return "none of its metrics is in the run (losses, grad norms, KL, rewards)"
        return None

    def detect(self, run: Run) -> list[Finding]:
        stats = self._per_metric(run)
        order = {f: i for i, f in enumerate((*_FAMILY_ORDER, "other"))}
        stats.sort(key=lambda s: (s["first_step"], order[s["family"]], s["metric"]))
        # One finding per onset: a NaN loss drags grad norm, KL and entropy along with it.
        clusters: list[list[dict[str, Any]]] = []
        for s in stats:
            if clusters and s["first_step"] - clusters[-1][0]["first_step"] <= self.merge_within:
                clusters[-1].append(s)
            else:
                clusters.append([s])
        return [self._finding(run, cluster) for cluster in clusters]

    def _per_metric(self, run: Run) -> list[dict[str, Any]]:
        """Per watched metric with a non-finite value: first step, count, last finite value."""
        frame = run.metrics
        if frame.height == 0:
            return []
        if frame.get_column("value").null_count() == 0:
            # the common case: per-metric arrays from the run's index, no 7M-row string filter
            parts = {}
            for metric in run.metric_names:
                if family_of(metric, run) is None:
                    continue
                steps, values = run.series(metric)
                if not np.isfinite(values).all():
                    parts[(metric,)] = pl.DataFrame({"step": steps, "value": values})
        else:
            parts = self._parts_with_nulls(frame, profile_of(run).watched)
        parts = _without_empty_selections(run, parts)
        out = []
        for (metric,), part in sorted(parts.items()):
            family = family_of(metric, run)
            if family is None:
                continue
            steps = part.get_column("step").to_numpy()
            values = part.get_column("value").to_numpy()
            nonfinite = ~np.isfinite(values)
            idx = np.flatnonzero(nonfinite)
            first = int(idx[0])
            finite_before = np.flatnonzero(~nonfinite[:first])
            last_finite = float(values[finite_before[-1]]) if len(finite_before) else None
            last_finite_step = int(steps[finite_before[-1]]) if len(finite_before) else None
            trailing = 0
            for flag in nonfinite[::-1]:
                if not flag:
                    break
                trailing += 1
            out.append(
                {
                    "metric": metric,
                    "family": family,
                    "first_step": int(steps[first]),
                    "last_step": int(steps[idx[-1]]),
                    "first_value": _fmt(float(values[first])),
                    "count": len(idx),
                    "steps_logged": len(values),
                    "trailing": trailing,
                    "at_end": bool(nonfinite[-1]),
                    "last_finite_value": last_finite,
                    "last_finite_step": last_finite_step,
                }
            )
        return out

    @staticmethod
    def _parts_with_nulls(
        frame: pl.DataFrame, prefixes: tuple[str, ...]
    ) -> dict[tuple[str], pl.DataFrame]:
        """Per-metric frames of watched metrics with a non-finite value (nulls are not values)."""
        watched = frame.filter(
            pl.col("metric")
            .str.starts_with(prefixes[0])
            .or_(*[pl.col("metric").str.starts_with(p) for p in prefixes[1:]])
            & pl.col("value").is_not_null()
        )
        bad = watched.filter(~pl.col("value").is_finite())
        if bad.height == 0:
            return {}
        names = set(bad.get_column("metric").unique().to_list())
        return (
            watched.filter(pl.col("metric").is_in(sorted(names)))
            .sort("step")
            .partition_by("metric", as_dict=True)
        )

    def _severity(self, family: str, items: list[dict[str, Any]]) -> Severity:
        if any(s["at_end"] and s["trailing"] >= self.critical_trailing for s in items):
            return "critical"
        if family == "loss" and max(s["count"] for s in items) >= self.critical_count:
            return "critical"
        if family == "grad-norm" and all(
            not s["at_end"] and s["count"] <= self.transient_max for s in items
        ):
            return "warning"
        return "error"

    def _finding(self, run: Run, items: list[dict[str, Any]]) -> Finding:
        lead = items[0]
        family = lead["family"]
        families: dict[str, list[dict[str, Any]]] = {}
        for s in items:
            families.setdefault(s["family"], []).append(s)
        severity = max(
            (self._severity(f, group) for f, group in families.items()),
            key=SEVERITY_RANK.__getitem__,
        )
        metric = lead["metric"]
        before = (
            f"last finite value {lead['last_finite_value']:.6g} at step {lead['last_finite_step']}"
            if lead["last_finite_value"] is not None
            else "never finite before"
        )
        tail = (
            f"still non-finite at the last logged step "
            f"({plural(lead['trailing'], 'step')} in a row)"
            if lead["at_end"]
            else f"finite again after step {lead['last_step']}"
        )
        message = (
            f"{metric} is {lead['first_value']} from step {lead['first_step']}: "
            f"{lead['count']} of {plural(lead['steps_logged'], 'logged step')} non-finite; "
            f"{before}; {tail}."
        )
        others = [s["metric"] for s in items[1:]]
        if others:
            shown = ", ".join(others[:5]) + (
                f" and {len(others) - 5} more" if len(others) > 5 else ""
            )
            message += f" Also non-finite: {shown}."
        critic = profile_of(run).critic_prefixes
        entry = metric_registry.lookup(metric)
        if entry is not None and entry.trainers == ("sft",):
            role = "sft"  # verl's SFT trainer (train/loss): its own config keys
        elif critic and metric.startswith(critic) and family in ("loss", "grad-norm"):
            role = "critic"
        else:
            role = "actor"
        evidence = {
            "family": family,
            "families": list(families),
            "first_step": lead["first_step"],
            "count": lead["count"],
            "steps_logged": lead["steps_logged"],
            "first_value": lead["first_value"],
            "last_finite_value": lead["last_finite_value"],
            "last_finite_step": lead["last_finite_step"],
            "non_finite_at_end": lead["at_end"],
            "trailing_non_finite_steps": lead["trailing"],
            "metrics": {
                s["metric"]: {
                    "family": s["family"],
                    "first_step": s["first_step"],
                    "count": s["count"],
                    "last_finite_value": s["last_finite_value"],
                }
                for s in items
            },
        }
        return self.finding(
            severity=severity,
            message=message,
            metric=metric,
            step=lead["first_step"],
            end_step=max(s["last_step"] for s in items),
            evidence=evidence,
            advice=non_finite_advice(run, role, lead["first_step"]),
            references=cite_all([f"{SEED_GRPO} §4.1", "verl:workers/actor/dp_actor.py"]),
        )


class GradNormNotFiniteStepSkipped(
    SignatureDetector, code="LS016", name="grad-norm-not-finite-step-skipped"
):
    """verl skipped optimizer steps because the gradient norm was NaN/inf.

    What it detects:
        The worker warning `WARN: rank <r> grad_norm is not finite: nan` (legacy dp_actor,
        verl 0.5–0.7) and `WARN: grad_norm is not finite: nan` (0.9 FSDP engine). Counts the
        lines (with Ray's `[repeated Nx across cluster]`), the distinct steps and ranks, and the
        longest run of consecutive steps. Severity `warning` for a few isolated steps, `error`
        when at least `error_steps` steps or `error_consecutive` consecutive steps were skipped.

    Why it matters:
        Each warning is an optimizer step thrown away. One now and then is verl's safety net
        working; many, or several in a row, mean the run has stopped learning and is usually a
        step away from NaN weights.

    Example:
        (WorkerDict pid=4410) WARN: rank 0 grad_norm is not finite: nan
        (WorkerDict pid=4411) WARN: rank 1 grad_norm is not finite: nan [repeated 7x across cluster]

    Advice:
        As for NaN/inf metrics, without the resume (verl kept the weights): halve
        `actor.optim.lr`, clip gradients at 0.5 (`actor.grad_clip` / `actor.optim.clip_grad`),
        prefer bfloat16 to float16, and lower `rollout.gpu_memory_utilization` only when the
        config shows it above the advised range.

    Known false positives:
        Mixed-precision loss scaling can produce an occasional inf gradient by design (the
        scaler then lowers its scale); a handful of isolated warnings early in training is
        normal there.

    References:
        verl:workers/actor/dp_actor.py (step skipped on a non-finite grad norm);
        seed:grpo-pitfalls §4.1.
    """

    title = "Optimizer steps skipped: gradient norm not finite"
    default_severity = "warning"
    groups = ("numerics",)
    pattern = GRAD_NORM_RE
    keywords = GRAD_NORM_KEYS

    error_steps: int = param(5, ge=1)
    error_consecutive: int = param(3, ge=1)

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        steps = sorted({h.step for h in hits if h.step is not None})
        ranks = sorted({int(h.match.group(1)) for h in hits if h.match.group(1)})
        # a stretch of k unit gaps between the steps is k + 1 consecutive steps
        gaps = stretches(np.diff(steps) == 1)
        longest = 1 + max((b - a for a, b in gaps), default=0) if steps else 0
        distinct = len(steps) if steps else len(hits)
        many = distinct >= self.error_steps or longest >= self.error_consecutive
        values = sorted({h.match.group(2) for h in hits})
        count = occurrences(hits)
        # A reader may keep only the first N identical events; it counts all of them in meta.
        counted = (run.meta.get("event_counts") or {}).get("grad-norm-not-finite", 0)
        extra: dict[str, Any] = {}
        if isinstance(counted, int) and counted > count:
            extra = {"count": counted, "count_kept_as_events": count}
            count = counted
            many = True if counted >= 2 * self.error_steps else many
        if steps:
            span = (
                f"on {plural(len(steps), 'step')} (step hints {steps[0]}–{steps[-1]}, "
                f"longest run {longest})"
            )
        else:
            span = plural(len(hits), "time")
        message = f"verl skipped optimizer steps because grad_norm was {'/'.join(values)}: {plural(count, 'warning line')} {span}, first at {where(hits[0])}."
        role = "critic" if any("critic" in h.text.lower() for h in hits) else "actor"
        return self.signature_finding(
            hits,
            message,
            severity="error" if many else "warning",
            evidence={
                "distinct_steps": len(steps),
                "longest_consecutive": longest,
                "ranks": ranks,
                "values": values,
                **extra,
            },
            advice=non_finite_advice(run, role),
            references=cite_all(["verl:workers/actor/dp_actor.py", f"{SEED_GRPO} §4.1"]),
        )
