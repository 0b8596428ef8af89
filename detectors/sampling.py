"""Dynamic sampling (DAPO): most generated groups are filtered away, so rollout is wasted."""

from __future__ import annotations

import numpy as np

from logscope.advice import advise, current_value
from logscope.detector import param
from logscope.health import training_steps
from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all
from logscope.verl_config import RO

from ._levels import SustainedLevel
from ._series import Series
from ._stats import fmt

FILTER = "algorithm.filter_groups"
SRC_V1 = "verl:trainer/ppo/v1/replay_buffer.py"
SRC_RECIPE = "verl-recipe:dapo/dapo_ray_trainer.py"


class DynamicSamplingWaste(SustainedLevel, code="LS306", name="dynamic-sampling-waste"):
    """DAPO's group filter discards most generated groups: each step pays for several rounds
    of generation.

    Reads the generation batches per step: `train/num_gen_batches` (the DAPO recipe trainer),
    or, on verl 0.9's V1 trainer, (train batch + `training/filter_groups/evicted_samples` +
    `training/filter_groups/discarded_surplus_samples`) ÷ `data.gen_batch_size` (both counters
    are logged only at steps where they are above 0).

    What it detects:
        Generation batches per step at or above `max_batches` (3), smoothed by a running
        median of `smooth_steps`, for at least `min_steps` logged steps after `warmup_steps`.
        A stretch that is over by the end (the median of the last `smooth_steps` logged steps
        below `max_batches`) is info: early steps on data the policy cannot yet solve.

    Why it matters:
        Dynamic sampling (DAPO §3.2) drops groups whose responses all got the same reward
        (all right or all wrong: no advantage signal) and generates again until the batch is
        full. When most groups are dropped, the data is too easy or too hard for the policy
        now, and generation (the largest share of a step) runs several times per step.

    Example:
        step:300 - train/num_gen_batches:5 - critic/score/mean:0.93 - ...

    Advice:
        More responses per prompt (`actor_rollout_ref.rollout.n`) make a group with mixed
        rewards likelier; cap the rounds with `algorithm.filter_groups.max_num_gen_batches`
        (the recipe trainer; verl's V1 trainer ignores it); refresh the data's difficulty (drop
        prompts the policy always solves).

    Known false positives:
        Curricula that filter on purpose, and the first steps of a run on a hard dataset
        (the policy solves nothing yet).

    References:
        paper:dapo §3.2 (dynamic sampling); verl:trainer/ppo/v1/replay_buffer.py
        (filter_groups metrics); verl-recipe:dapo/dapo_ray_trainer.py (num_gen_batches).
    """

    title = "Dynamic sampling discards most generated groups"
    concepts = ("gen_batches", "filter_evicted")
    groups = ("rollout", "sampling")

    max_batches: float = param(3.0, gt=1)
    warmup_steps: int = param(5, ge=0)

    def detect(self, run: Run) -> list[Finding]:
        s = Series.load(run, "gen_batches", min_points=self.min_steps) or v1_gen_batches(run)
        if s is None:
            return []
        e = self.excursion_of(s, lambda v: v >= self.max_batches, high=True)
        if e is None:
            return []
        kept = 1 / e.level
        message = (
            f"Dynamic sampling draws {fmt(e.level)} generation batches per step (median) from "
            f"step {e.first_step} for {e.steps} logged steps (peak {fmt(e.extreme)}): about "
            f"{fmt((1 - kept) * 100)}% of generated groups are filtered away, and generation "
            "runs that many times per step."
        )
        # over by the end (the last smooth_steps logged steps below the limit): the first steps
        # of a dataset the policy could not yet solve (or already solved), not a lasting waste
        passed = e.last_step < s.steps[-1] and (
            float(np.median(s.values[-self.smooth_steps :])) < self.max_batches
        )
        if passed:
            message += (
                f" It fell back below {fmt(self.max_batches)} after step {e.last_step} and is "
                "below it at the end of the log: a passing stretch, not a lasting waste."
            )
        return [
            self.finding_at(
                e,
                message,
                severity="info" if passed else self.default_severity,
                evidence={
                    **e.evidence(self.max_batches),
                    "kept_share": round(kept, 3),
                    "passed": passed,
                },
                advice=filter_advice(run),
                references=cite_all(["paper:dapo §3.2", SRC_V1, SRC_RECIPE]),
            )
        ]


def filter_advice(run: Run) -> list[Advice]:
    """More responses per prompt; a cap on the generation rounds (the recipe trainer)."""
    n = current_value(run, f"{RO}.n")
    advice = [
        advise(
            run,
            f"{RO}.n",
            "With more responses per prompt a group is likelier to hold both right and "
            "wrong answers, so fewer groups are filtered.",
            "paper:dapo §3.2",
            suggest=n * 2 if isinstance(n, int) and n > 0 else None,
            rule="double it",
        )
    ]
    if current_value(run, "trainer.use_v1") is not True:
        advice.append(
            advise(
                run,
                f"{FILTER}.max_num_gen_batches",
                "A cap on the generation rounds per step bounds the waste (0 is no cap).",
                SRC_RECIPE,
                suggest=None,
                rule="a small cap such as 4 (the run stops when it is reached)",
            )
        )
    return advice


def v1_gen_batches(run: Run) -> Series | None:
    """Generation batches per training step from verl 0.9's V1 filter counters."""
    evicted = Series.load(run, "filter_evicted")
    batch = current_value(run, "data.train_batch_size")
    if evicted is None or not isinstance(batch, int) or batch <= 0:
        return None
    gen = current_value(run, "data.gen_batch_size")
    gen = gen if isinstance(gen, int) and gen > 0 else batch
    steps = np.asarray(training_steps(run), dtype=np.int64)
    total = np.full(len(steps), float(batch))
    for part in (evicted, Series.load(run, "filter_surplus")):
        if part is not None:  # absent at a step: 0 that step
            total += np.nan_to_num(part.at(steps))
    return Series(evicted.metric, steps, total / gen, None)
