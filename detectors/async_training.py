"""Asynchronous training: the rollouter and the trainer out of balance, trajectories too stale."""

from __future__ import annotations

import math

from logscope.advice import advise, current_value
from logscope.detector import param
from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all

from ._levels import Excursion, SustainedLevel
from ._stats import fmt

SRC_ASYNC = "verl:experimental/fully_async_policy/fully_async_rollouter.py"
SRC_DOCS = "verl:docs/advance/fully_async"


class AsyncImbalance(SustainedLevel, code="LS304", name="async-imbalance"):
    """One side of fully-async training waits for the other: its GPUs are idle.

    Reads `fully_async/rollouter/idle_ratio` (the share of a parameter version the rollouter
    spent waiting) and `fully_async/trainer/idle_ratio` (`timing_s/gen / timing_s/step`, the
    trainer's wait for samples); the docs' names `rollouter/idle_ratio` and
    `trainer/idle_ratio` are read too.

    What it detects:
        After `warmup_steps` (the trainer waits for the first batch at step 1), either idle
        ratio above `idle_max` (0.3), smoothed by a running median of `smooth_steps`, for at
        least `min_steps` logged steps. One finding per side that idles, at the step it starts.

    Why it matters:
        The fully-async recipe splits the GPUs between a rollouter and a trainer. An idle
        rollouter means the trainer cannot consume samples as fast as they are generated
        (samples grow stale, rollout GPUs wait); an idle trainer means generation is the
        bottleneck. Either way a share of the cluster does nothing.

    Example:
        step:120 - fully_async/rollouter/idle_ratio:0.52 - fully_async/trainer/idle_ratio:0.01 - ...

    Advice:
        verl's tuning rule (docs/advance/fully_async.md): rollouter idle high and trainer idle
        low → give the trainer more GPUs and the rollouter fewer (`rollout.n_gpus_per_node`,
        `trainer.n_gpus_per_node`), and the reverse. The suggested split keeps the busy share
        of the idle side: about (1 − idle ratio) of its GPUs, the rest to the other side.

    Known false positives:
        The first steps of a run (the trainer waits for the first batch; raise `warmup_steps`
        for a slow start), validation or checkpoint steps inside the trainer, and a rollouter
        paused on purpose by `staleness_threshold`.

    References:
        verl:docs/advance/fully_async (Key Metrics, tuning);
        verl:experimental/fully_async_policy/fully_async_rollouter.py (idle_ratio);
        verl:experimental/fully_async_policy/detach_utils.py (trainer idle_ratio).
    """

    title = "Fully-async rollouter and trainer out of balance"
    concepts = ("async_rollouter_idle", "async_trainer_idle")
    groups = ("system", "async")

    idle_max: float = param(0.3, gt=0, lt=1)

    def detect(self, run: Run) -> list[Finding]:
        out = []
        for concept, side, other in (
            ("async_rollouter_idle", "rollout", "trainer"),
            ("async_trainer_idle", "trainer", "rollout"),
        ):
            e = self.excursion(run, concept, lambda v: v > self.idle_max, high=True)
            if e is not None:
                out.append(self._finding(run, e, side, other))
        return out

    def _finding(self, run: Run, e: Excursion, idle: str, busy: str) -> Finding:
        who = "rollouter" if idle == "rollout" else "trainer"
        waits_for = "the trainer to consume samples" if idle == "rollout" else "samples"
        message = (
            f"The {who} is idle {fmt(e.level * 100)}% of the time from step {e.first_step} "
            f"({e.metric} above {fmt(self.idle_max)} for {e.steps} logged steps, peak "
            f"{fmt(e.extreme)}): it waits for {waits_for}. Move GPUs from the {who} to the "
            f"{'trainer' if idle == 'rollout' else 'rollouter'}."
        )
        return self.finding_at(
            e,
            message,
            evidence={**e.evidence(self.idle_max), "idle_side": who},
            advice=split_advice(run, idle, busy, e.level),
            references=cite_all([SRC_DOCS, SRC_ASYNC]),
        )


def split_advice(run: Run, idle: str, busy: str, idle_ratio: float) -> list[Advice]:
    """Per-node GPU counts that keep the idle side's busy share: about (1 − idle ratio) of its
    GPUs, the freed ones to the busy side when they fit on its node (single-node sides; a node
    holds as many GPUs as the larger side uses)."""
    keys = {side: f"{side}.n_gpus_per_node" for side in (idle, busy)}
    gpus = {side: current_value(run, key) for side, key in keys.items()}
    nodes = {side: current_value(run, f"{side}.nnodes") for side in keys}
    suggest: dict[str, int | None] = {idle: None, busy: None}
    if all(isinstance(g, int) and g > 0 for g in gpus.values()) and all(
        n in (None, 1) for n in nodes.values()
    ):
        g_idle, g_busy = int(gpus[idle]), int(gpus[busy])  # type: ignore[arg-type]
        keep = max(1, round(g_idle * (1 - idle_ratio)))
        if keep < g_idle:
            suggest[idle] = keep
            if g_busy + g_idle - keep <= max(g_idle, g_busy):
                suggest[busy] = g_busy + g_idle - keep
    why = (
        f"The idle side needs about {fmt((1 - idle_ratio) * 100)}% of its GPUs to keep pace; "
        "verl's fully-async docs: give the waiting side fewer GPUs and the busy side more "
        "(the busy side's nodes are full here when no value is given: add a node, `nnodes`)."
    )
    rule = "fewer GPUs for the idle side, more for the busy one"
    return [
        advise(run, keys[idle], why, SRC_DOCS, suggest=suggest[idle], rule=rule),
        advise(run, keys[busy], why, SRC_DOCS, suggest=suggest[busy], rule=rule),
    ]


class StalenessHigh(SustainedLevel, code="LS305", name="staleness-high"):
    """Trajectories lag more policy versions behind the trainer than the config allows.

    Reads `training/off_policy/trajectory_staleness/max` (verl 0.9+: how many model versions
    the freshest weights a trajectory used lag behind the current policy, per batch).

    What it detects:
        The lag above the bound the config sets, smoothed by a running median of
        `smooth_steps`, for at least `min_steps` logged steps after `warmup_steps`. The bound:
        in the fully-async recipe, max(1, ⌈`async_training.staleness_threshold`⌉) versions (the
        rollouter may produce (1 + threshold) × the samples of one parameter version before it
        pauses, so below 1 a sample lags one version at most); on the V1 trainer,
        `trainer.v1.sampler.max_off_policy_threshold` versions. No bound in the config (none
        set, or version control off with `null`): nothing is judged.

    Why it matters:
        Every version of lag makes the update more off-policy: PPO's ratio and the rollout
        correction then work on samples the current policy would no longer produce. A lag the
        config was meant to prevent says the bound is not holding (partial rollouts resumed
        across syncs, a sampler strategy that waits instead of dropping, a misread threshold).

    Example:
        step:200 - training/off_policy/trajectory_staleness/max:4 - ...

    Advice:
        Keep `async_training.staleness_threshold` below 1 (verl's fully-async docs) and
        synchronise parameters more often (`async_training.trigger_parameter_sync_step`: smaller
        is closer to on-policy); on the V1 trainer, drop trajectories beyond the bound
        (`trainer.v1.sampler.max_off_policy_strategy=drop`).

    Known false positives:
        The first steps after a resume (the buffer holds samples of the checkpoint's versions).

    References:
        verl:experimental/fully_async_policy/fully_async_rollouter.py (max_required_samples);
        verl:trainer/ppo/v1/trainer_base.py (trajectory_staleness); verl:trainer/ppo/v1/replay_buffer.py
        (max_off_policy_threshold); verl:docs/advance/fully_async.
    """

    title = "Trajectories staler than the config allows"
    concepts = ("staleness_max",)
    groups = ("system", "async")

    def detect(self, run: Run) -> list[Finding]:
        bound, where = staleness_bound(run)
        if bound is None:
            return []
        e = self.excursion(run, "staleness_max", lambda v: v > bound, high=True)
        if e is None:
            return []
        message = (
            f"Trajectories lag up to {fmt(e.extreme)} policy versions from step {e.first_step} "
            f"({e.metric} above {bound} for {e.steps} logged steps, median {fmt(e.level)}); "
            f"{where} allows {bound}."
        )
        return [
            self.finding_at(
                e,
                message,
                evidence={**e.evidence(bound), "bound_from": where},
                advice=staleness_advice(run),
                references=cite_all([SRC_DOCS, "verl:trainer/ppo/v1/trainer_base.py", SRC_ASYNC]),
            )
        ]


def staleness_bound(run: Run) -> tuple[int | None, str]:
    """(versions of lag the config allows, the setting it comes from); None: no bound."""
    if isinstance(run.config_value("async_training"), dict):
        threshold = run.config_value("async_training.staleness_threshold", 1)  # verl's default
        if isinstance(threshold, (int, float)) and not isinstance(threshold, bool):
            allowed = max(1, math.ceil(float(threshold) - 1e-9))
            return allowed, f"async_training.staleness_threshold={threshold:g}"
    threshold = run.config_value("trainer.v1.sampler.max_off_policy_threshold")
    if isinstance(threshold, int) and not isinstance(threshold, bool) and threshold > 0:
        return threshold, f"trainer.v1.sampler.max_off_policy_threshold={threshold}"
    return None, ""


def staleness_advice(run: Run) -> list[Advice]:
    if isinstance(run.config_value("async_training"), dict):
        trigger = current_value(run, "async_training.trigger_parameter_sync_step")
        return [
            advise(
                run,
                "async_training.staleness_threshold",
                "The share of extra samples the rollouter may run ahead; verl's fully-async docs "
                "keep it below 1.",
                SRC_DOCS,
                suggest=lambda t: min(float(t), 0.5) if float(t) >= 1 else None,
                rule="below 1",
            ),
            advise(
                run,
                "async_training.trigger_parameter_sync_step",
                "Synchronising weights more often keeps samples closer to on-policy.",
                SRC_DOCS,
                suggest=max(1, trigger // 2) if isinstance(trigger, int) and trigger > 1 else None,
                rule="halve it",
            ),
        ]
    return [
        advise(
            run,
            "trainer.v1.sampler.max_off_policy_strategy",
            "`drop` discards trajectories beyond max_off_policy_threshold; `wait` trains on "
            "them once they finish.",
            "verl:trainer/ppo/v1/replay_buffer.py",
            suggest="drop",
        )
    ]
