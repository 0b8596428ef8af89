"""Aborted responses: the inference engine preempts and aborts requests under KV-cache pressure."""

from __future__ import annotations

import numpy as np

from logscope.advice import advise
from logscope.detector import param
from logscope.model import Finding, Run
from logscope.sources import cite_all
from logscope.verl_config import RO

from ._common import gpu_memory_bound
from ._levels import SustainedLevel
from ._series import Series
from ._stats import fmt, sig

SRC_VLLM = "vllm:docs/configuration/optimization"
SRC_METRIC = "verl:trainer/ppo/metric_utils.py"


class AbortedResponses(SustainedLevel, code="LS307", name="aborted-responses"):
    """A share of each batch's responses is aborted (empty), usually because the inference
    engine ran out of KV cache and preempted requests.

    Reads `response/aborted_ratio` (verl 0.6+: the share of samples whose response is empty
    after an abort) and, as evidence, the agent loop's `timing_s/agent_loop/num_preempted/*`
    (vLLM preemptions; -1 = not available).

    What it detects:
        `response/aborted_ratio` above `max_ratio` (0.01), smoothed by a running median of
        `smooth_steps`, for at least `min_steps` logged steps after `warmup_steps`.

    Why it matters:
        Aborted responses are dropped from the loss, so the batch is smaller than configured
        and biased toward the short responses that finished; preemption also recomputes the
        evicted requests, which slows generation. vLLM preempts when the KV cache is full.

    Example:
        step:210 - response/aborted_ratio:0.083 - timing_s/agent_loop/num_preempted/max:31 - ...

    Advice:
        Give vLLM more KV cache (`actor_rollout_ref.rollout.gpu_memory_utilization`, within
        what the trainer leaves) or run fewer sequences at once
        (`actor_rollout_ref.rollout.max_num_seqs`); vLLM's optimization guide names both for
        preemption.

    Known false positives:
        Aborts made on purpose: partial rollouts of the fully-async recipe interrupted at a
        weight sync (`async_training.partial_rollout`), or a generation timeout set by the user.

    References:
        vllm:docs/configuration/optimization (Preemption); verl:trainer/ppo/metric_utils.py
        (aborted_ratio); verl:experimental/agent_loop/agent_loop.py (num_preempted).
    """

    title = "Responses aborted under KV-cache pressure"
    concepts = ("aborted_ratio",)
    groups = ("rollout", "memory")

    max_ratio: float = param(0.01, gt=0, lt=1)
    warmup_steps: int = param(0, ge=0)

    def detect(self, run: Run) -> list[Finding]:
        e = self.excursion(run, "aborted_ratio", lambda v: v > self.max_ratio, high=True)
        if e is None:
            return []
        evidence = e.evidence(self.max_ratio)
        preempted = Series.load(run, "num_preempted")
        note = ""
        if preempted is not None:
            during = preempted.values[(preempted.steps >= e.first_step) & (preempted.values >= 0)]
            if len(during):
                evidence["preempted_median"] = sig(float(np.median(during)))
                note = f"; vLLM preempted requests (median {fmt(evidence['preempted_median'])} per step)"
        message = (
            f"{fmt(e.level * 100)}% of responses are aborted from step {e.first_step} for "
            f"{e.steps} logged steps (peak {fmt(e.extreme * 100)}%){note}: the inference engine "
            "runs out of KV cache, and the aborted samples drop out of the batch."
        )
        current = run.config_value(f"{RO}.gpu_memory_utilization")
        bound, _ = gpu_memory_bound(run)
        more = None
        if isinstance(current, (int, float)) and current < bound:
            more = round(min(bound, current + 0.1), 2)
        seqs = run.config_value(f"{RO}.max_num_seqs")
        advice = [
            advise(
                run,
                f"{RO}.gpu_memory_utilization",
                "A larger share gives vLLM more KV cache, so fewer requests are preempted; stay "
                "within what FSDP needs for the model, gradients and optimizer state.",
                SRC_VLLM,
                suggest=more,
                rule=f"+0.1, up to {bound:g}",
            ),
            advise(
                run,
                f"{RO}.max_num_seqs",
                "Fewer sequences at once need less KV cache at the cost of batch parallelism.",
                SRC_VLLM,
                suggest=seqs // 2 if isinstance(seqs, int) and seqs > 1 else None,
                rule="halve it",
            ),
        ]
        return [
            self.finding_at(
                e,
                message,
                evidence=evidence,
                advice=advice,
                references=cite_all([SRC_VLLM, SRC_METRIC]),
            )
        ]
