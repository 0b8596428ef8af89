"""Asynchronous training: the rollouter and the trainer of verl's fully-async recipe out of balance."""

from __future__ import annotations

from logscope.advice import advise, current_value
from logscope.detector import param
from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all

from ._levels import Excursion, SustainedLevel
from ._stats import fmt

SRC_ASYNC = "verl:experimental/fully_async_policy/fully_async_rollouter.py"
SRC_DOCS = "verl:docs/advance/fully_async"


class AsyncImbalance(SustainedLevel):
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

    code = "LS304"
    name = "async-imbalance"
    title = "Fully-async rollouter and trainer out of balance"
    concepts = ("async_rollouter_idle", "async_trainer_idle")
    default_severity = "warning"
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
    """Per-node GPU counts that keep the idle side's busy share (single-node sides only)."""
    keys = {side: f"{side}.n_gpus_per_node" for side in (idle, busy)}
    gpus = {side: current_value(run, key) for side, key in keys.items()}
    nodes = {side: current_value(run, f"{side}.nnodes") for side in keys}
    suggest: dict[str, int | None] = {idle: None, busy: None}
    if all(isinstance(g, int) and g > 0 for g in gpus.values()) and all(
        n in (None, 1) for n in nodes.values()
    ):
        total = int(gpus[idle]) + int(gpus[busy])  # type: ignore[arg-type]
        keep = max(1, round(int(gpus[idle]) * (1 - idle_ratio)))  # type: ignore[arg-type]
        if keep < int(gpus[idle]):  # type: ignore[arg-type]
            suggest = {idle: keep, busy: total - keep}
    why = (
        f"The idle side needs about {fmt((1 - idle_ratio) * 100)}% of its GPUs to keep pace; "
        "verl's fully-async docs: give the waiting side fewer GPUs and the busy side more."
    )
    rule = "fewer GPUs for the idle side, more for the busy one"
    return [
        advise(run, keys[idle], why, SRC_DOCS, suggest=suggest[idle], rule=rule),
        advise(run, keys[busy], why, SRC_DOCS, suggest=suggest[busy], rule=rule),
    ]
