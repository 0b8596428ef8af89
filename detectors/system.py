"""System diagnoses: GPU/CPU memory climbing, generation dominating the step, throughput dropping."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from logscope.advice import SEED_GRPO, SEED_PPO, advise, current_value
from logscope.aliases import resolve
from logscope.detector import Detector
from logscope.exceptions import BadDetectorParameters
from logscope.model import Advice, Finding, Run
from logscope.verl_config import RO, model_size_b, n_gpus

from ._common import gpu_memory_advice, gpu_memory_bound
from ._signal import (
    best_split,
    binned,
    clean_series,
    concept_series,
    hinge_fit,
    noise_floor,
)
from ._stats import changepoints, fmt, mann_kendall, robust_sigma, rolling_median, theil_sen

#: Usual GPU memory sizes (GB); capacity is guessed as the smallest ≥ 1.05 × the max seen.
GPU_SIZES_GB = (24.0, 40.0, 48.0, 80.0, 94.0, 141.0)

#: timing_s/* entries that are part of a step but are not its compute phases.
_NOT_PHASES = {"step", "testing", "save_checkpoint", "start_profile", "stop_profile"}
#: sub-timings of generation that the rollout adds on top of `gen`.
_GEN_PARTS = ("generate_sequences", "generation_timing", "agent_loop", "gen_max")


def _positive(label: str, value: float) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise BadDetectorParameters(f"{label} must be a positive number, got {value!r}")


def _timing_prefix(run: Run) -> str:
    return "timing/" if resolve(run, "time_step") == "timing/step" else "timing_s/"


def _phase_metrics(run: Run) -> dict[str, str]:
    """{phase: metric} of the step's compute phases (gen, update_actor, old_log_prob, …)."""
    out = {}
    for name in run.metric_names:
        for prefix in ("timing_s/", "timing/"):
            if name.startswith(prefix):
                phase = name[len(prefix) :]
                if phase in _NOT_PHASES or phase.startswith(_GEN_PARTS) or "/" in phase:
                    continue
                out.setdefault(phase, name)
    return out


def _aligned(steps: np.ndarray, src_steps: np.ndarray, src_values: np.ndarray) -> np.ndarray:
    out = np.full(len(steps), np.nan)
    if len(src_steps) == 0:
        return out
    idx = np.clip(np.searchsorted(src_steps, steps), 0, len(src_steps) - 1)
    hit = src_steps[idx] == steps
    out[hit] = src_values[idx[hit]]
    return out


def _extra_seconds(run: Run, steps: np.ndarray) -> np.ndarray:
    """Seconds of validation and checkpoint saving inside each step's time (0 where none)."""
    out = np.zeros(len(steps))
    prefix = _timing_prefix(run)
    for phase in ("testing", "save_checkpoint"):
        s, v = clean_series(run, prefix + phase)
        extra = _aligned(steps, s, v)
        out += np.where(np.isfinite(extra) & (extra > 0), extra, 0.0)
    return out


class MemoryLeak(Detector):
    """GPU (or host) memory climbs steadily step after step: a leak heading for an OOM.

    Reports the step where the climb starts, its rate per step (Theil–Sen), the Mann–Kendall
    trend test, and an estimated step at which the GPU runs out of memory.

    What it detects:
        A continuous "flat, then a steady ramp" fit on `perf/max_memory_reserved_gb` (or
        `actor/perf/…` in verl ≥ 0.8; allocated memory when reserved is absent; host memory
        `perf/cpu_memory_used_gb` separately) whose ramp adds at least `min_rise_gb` and
        `min_rise_sigma` noise sigmas, with a Mann–Kendall upward trend (p < `trend_p`) after
        the start, lasting at least `min_fraction` of the run, and fitting better than a single
        jump (a one-off rise to a new level, e.g. when vLLM's cache warms up, is not a leak).
        A series pinned at a ceiling at the end is fitted up to where it reaches it.
        The projected OOM step extrapolates the Theil–Sen rate to a capacity guessed as the
        smallest usual GPU size (24/40/48/80/94/141 GB) at least 5% above the highest value
        seen: an estimate, since the log does not say which GPU it ran on.

    Why it matters:
        A slow climb (the PPO article: 45 → 48 GB → OOM) ends in a CUDA out-of-memory crash hours
        into the run, usually the vLLM KV cache not being freed between rollouts. The rate
        tells how long the run has left.

    Example:
        step:100 - perf/max_memory_reserved_gb:45.12 ...
        step:300 - perf/max_memory_reserved_gb:46.60 ...
        step:500 - perf/max_memory_reserved_gb:48.07 ...  (+0.0074 GB/step since ~step 100)

    Advice:
        Set `actor_rollout_ref.rollout.free_cache_engine=True` (verl's default, but some images
        do not honour it) and `actor_rollout_ref.rollout.enforce_eager=True` (CUDA graphs keep
        memory), and lower `actor_rollout_ref.rollout.gpu_memory_utilization` into the advised
        range.

    Known false positives:
        `max_memory_*` are peaks: a run whose batches keep getting longer (response length
        growing) raises its peak memory legitimately; check `response_length/mean` over the same
        steps. Host memory grows with Ray object store use and dataset caching.

    References:
        seed:ppo-tuning §7.3 (reserved memory creeping 45 → 48 GB → OOM; free_cache_engine,
        enforce_eager); seed:grpo-pitfalls §4 (gpu_memory_utilization); tuning_knowledge.md B10.
    """

    code = "LS301"
    name = "memory-leak"
    title = "Memory climbing steadily (leak)"
    concepts = ("gpu_mem_reserved", "gpu_mem_allocated", "cpu_mem_used")
    default_severity = "warning"
    groups = ("system", "memory")

    def __init__(
        self,
        *,
        min_rise_gb: float = 0.5,
        min_rise_sigma: float = 5.0,
        trend_p: float = 0.001,
        min_fraction: float = 0.1,
        min_points: int = 10,
        max_points: int = 2000,
    ) -> None:
        for label, value in (
            ("min_rise_gb", min_rise_gb),
            ("min_rise_sigma", min_rise_sigma),
            ("trend_p", trend_p),
            ("min_fraction", min_fraction),
            ("min_points", min_points),
            ("max_points", max_points),
        ):
            _positive(f"memory-leak: {label}", value)
        self.min_rise_gb = min_rise_gb
        self.min_rise_sigma = min_rise_sigma
        self.trend_p = trend_p
        self.min_fraction = min_fraction
        self.min_points = min_points
        self.max_points = max_points

    def detect(self, run: Run) -> list[Finding]:
        findings = []
        gpu = self._one(run, ("gpu_mem_reserved", "gpu_mem_allocated"), gpu=True)
        if gpu is not None:
            findings.append(gpu)
        cpu = self._one(run, ("cpu_mem_used",), gpu=False)
        if cpu is not None:
            findings.append(cpu)
        return findings

    def _one(self, run: Run, concepts: tuple[str, ...], gpu: bool) -> Finding | None:
        metric, steps, values = concept_series(run, *concepts)
        if metric is None or len(steps) < self.min_points:
            return None
        sigma = noise_floor(values, run.value_resolution)
        # memory pinned at a ceiling (the allocator's limit) ends the ramp: fit up to it
        top = float(values.max())
        at_top = np.flatnonzero(values >= top - 3 * sigma)
        if len(at_top) > 3 and at_top[0] < len(values) - 3:
            cut = int(at_top[0]) + 1
            if cut >= self.min_points:
                steps, values = steps[:cut], values[:cut]
        x, y = binned(steps, values, self.max_points)
        n = len(x)
        span = float(x[-1] - x[0])
        if span <= 0 or n < self.min_points:
            return None
        latest = x[-1] - self.min_fraction * span
        fit = hinge_fit(x, y, mode="flat_before", candidates=x[x <= latest], min_side=3)
        if fit is None or fit.slope_after <= 0:
            return None
        rise = fit.slope_after * (x[-1] - fit.at)
        if rise < max(self.min_rise_gb, self.min_rise_sigma * sigma):
            return None
        # a ramp, not one jump: the hinge must beat the best single level shift
        k, _ = best_split(y, min_side=3)
        if k > 0:
            rss_step = float(
                ((y[:k] - y[:k].mean()) ** 2).sum() + ((y[k:] - y[k:].mean()) ** 2).sum()
            )
            if rss_step <= fit.rss:
                return None
        after_raw = steps >= fit.at
        ya = values[after_raw]
        z, p = mann_kendall(ya)
        if z <= 0 or p >= self.trend_p:
            return None
        rate, _ = theil_sen(steps[after_raw], ya)
        if rate <= 0:
            return None
        start = self._refine(steps, values, fit.at, span)
        peak = float(values.max())
        last_step = int(steps[-1])
        level_now = float(np.median(values[-max(3, min(20, len(values) // 20)) :]))
        capacity = None
        oom_step = None
        if gpu:
            capacity = next((c for c in GPU_SIZES_GB if c >= peak * 1.05), None)
            if capacity is not None:
                oom_step = int(last_step + max(0.0, capacity - level_now) / rate)
        kind = "GPU" if gpu else "host"
        msg = (
            f"{metric} climbs steadily from step {start}: +{fmt(rate)} GB/step "
            f"(Theil–Sen; +{fmt(rise)} GB since, Mann–Kendall p={p:.1e}), now {fmt(level_now)} GB."
        )
        if oom_step is not None:
            msg += (
                f" At this rate a {capacity:g} GB GPU fills around step {oom_step} "
                f"(estimate: capacity guessed from the highest value seen, {fmt(peak)} GB)."
            )
        elif gpu:
            msg += " No usual GPU size fits the highest value seen, so no OOM step is projected."
        advice: list[Advice] = []
        if gpu:
            advice.append(
                advise(
                    run,
                    f"{RO}.free_cache_engine",
                    "A GPU memory peak creeping up every step is the vLLM KV cache not being "
                    "released between rollouts; free_cache_engine frees it (verl's default is "
                    "True, but some images do not honour it — set it explicitly).",
                    f"{SEED_PPO} §7.3",
                    suggest=True,
                )
            )
            advice.append(
                advise(
                    run,
                    f"{RO}.enforce_eager",
                    "CUDA graphs captured by vLLM pin memory across rollouts; eager mode "
                    "avoids them.",
                    f"{SEED_PPO} §7.3",
                    suggest=True,
                )
            )
            mem = gpu_memory_advice(
                run, "Until the leak is fixed, a smaller vLLM share delays the OOM.", always=True
            )
            if mem is not None:
                advice.append(mem)
        else:
            advice.append(
                advise(
                    run,
                    f"{RO}.free_cache_engine",
                    "Host memory climbing each step points at objects kept alive across steps "
                    "(rollout outputs in the Ray object store, offloaded cache); make sure the "
                    "rollout cache is freed after each generation.",
                    f"{SEED_PPO} §7.3",
                    suggest=True,
                )
            )
        evidence: dict[str, Any] = {
            "start_step": start,
            "rate_gb_per_step": rate,
            "rise_gb": rise,
            "level_at_start_gb": fit.level,
            "level_now_gb": level_now,
            "max_seen_gb": peak,
            "noise_sigma_gb": sigma,
            "mann_kendall_z": z,
            "mann_kendall_p": p,
            "memory": kind,
            "capacity_guess_gb": capacity,
            "projected_oom_step": oom_step,
            "projection_is_estimate": True,
        }
        return self.finding(
            message=msg,
            metric=metric,
            step=start,
            end_step=last_step,
            evidence=evidence,
            advice=advice,
            references=[f"{SEED_PPO} §7.3", f"{SEED_GRPO} §4"],
        )

    def _refine(self, steps: np.ndarray, values: np.ndarray, approx: float, span: float) -> int:
        """The hinge again on raw points near the coarse break (long runs are binned)."""
        width = span / max(self.max_points - 1, 1)
        at = approx
        if width > 1.5:
            half = max(40 * width, 50.0)
            win = (steps >= approx - half) & (steps <= approx + half)
            cand = np.arange(approx - 15 * width, approx + 15 * width + 1)
            fit = hinge_fit(steps[win], values[win], mode="flat_before", candidates=cand)
            at = fit.at if fit is not None else approx
        # the ramp is 0 at the kink: the first step that shows it is the next one
        return int(steps[min(int(np.searchsorted(steps, at + 1e-9)), len(steps) - 1)])


class RolloutBottleneck(Detector):
    """Generation (rollout) takes most of every step and dwarfs the other phases.

    Judged by generation's share of the step time and by how it compares with the next slowest
    phase, not by an absolute number of seconds (any 7B run spends more than 5 s generating).

    What it detects:
        `timing_s/gen` ÷ `timing_s/step` (median over a lasting stretch, validation and
        checkpoint steps left out) at or above `min_share`, with generation at least
        `min_ratio` × the slowest other phase (`update_actor`, `old_log_prob`, `ref`,
        `update_critic`, …). When the share rose mid-run the start is the best upward shift of
        the share; otherwise the first step. Evidence: the share and gen seconds before and
        after, and the slowest other phase. A run with fewer than `min_duration` timed steps
        (an excerpt) is judged on the same two rules over its steps that did not also run
        validation or save a checkpoint (`timing_s/testing`, `timing_s/save_checkpoint` > 0).

    Why it matters:
        Rollout is the largest phase of PPO/GRPO; when it dominates, the trainer GPUs idle while
        vLLM generates. The PPO article's settings took `timing_s/gen` from 5.72 s to 3.21 s
        (2.45 s with TP=2) and throughput from 842 to 1176 tokens/s, without touching the
        actor's learning rate.

    Example:
        step:50 - timing_s/gen:41.8 - timing_s/update_actor:9.7 - timing_s/step:58.3 ...
        (generation is 72% of the step and 4.3× the actor update)

    Advice:
        Raise `actor_rollout_ref.rollout.gpu_memory_utilization` within the range for this
        run's GPUs and model (0.4–0.5 on one GPU, 0.3–0.4 with 8-GPU FSDP, up to 0.65 for small
        models; above 0.7 risks OOM); raise `rollout.max_num_seqs` and
        `rollout.max_num_batched_tokens` together (8192/1024 → 16384/1896 gave +22%); use
        tensor parallelism for generation (`rollout.tensor_model_parallel_size=2` on two GPUs
        cut gen time 3.21 → 2.45 s) when the model supports it.

    Known false positives:
        Runs with very long responses (long reasoning chains) are generation-bound by nature;
        the advice still applies but gains are smaller. Async/agent-loop rollouts overlap
        generation with other work, so their share overstates the cost.

    References:
        seed:ppo-tuning §2, §2.1, §2.2, §5.3 (gpu_memory_utilization 0.4 → 0.65,
        max_num_seqs/max_num_batched_tokens, TP=2); seed:grpo-pitfalls §4.2 (ranges by GPU
        count); tuning_knowledge.md A9, A13, A15, B9.
    """

    code = "LS302"
    name = "rollout-bottleneck"
    title = "Generation dominates the step time"
    concepts = ("time_gen",)
    default_severity = "warning"
    groups = ("system", "throughput")

    def __init__(
        self,
        *,
        min_share: float = 0.6,
        min_ratio: float = 2.0,
        min_duration: int = 10,
        min_fraction: float = 0.1,
        max_points: int = 2000,
    ) -> None:
        for label, value in (
            ("min_share", min_share),
            ("min_ratio", min_ratio),
            ("min_duration", min_duration),
            ("min_fraction", min_fraction),
            ("max_points", max_points),
        ):
            _positive(f"rollout-bottleneck: {label}", value)
        self.min_share = min_share
        self.min_ratio = min_ratio
        self.min_duration = min_duration
        self.min_fraction = min_fraction
        self.max_points = max_points

    def skip_reason(self, run: Run) -> str | None:
        if resolve(run, "time_gen") is None or resolve(run, "time_step") is None:
            return "needs timing_s/gen and timing_s/step (or perf/time_per_step)"
        return None

    def detect(self, run: Run) -> list[Finding]:
        gen_name, step_name = resolve(run, "time_gen"), resolve(run, "time_step")
        if gen_name is None or step_name is None:
            return []
        gs, gv = clean_series(run, gen_name)
        ss, sv = clean_series(run, step_name)
        steps = np.intersect1d(gs, ss)
        if len(steps) < max(self.min_duration, 6):
            return self._short(run, gen_name, step_name, steps)
        gen = _aligned(steps, gs, gv)
        # a step's time includes validation and checkpoint saving when they ran: take them out
        total = _aligned(steps, ss, sv) - _extra_seconds(run, steps)
        ok = np.isfinite(gen) & np.isfinite(total) & (total > 0) & (gen <= 1.05 * total)
        steps, gen, total = steps[ok], gen[ok], total[ok]
        if len(steps) < max(self.min_duration, 6):
            return []
        share = np.clip(gen / total, 0.0, 1.5)
        others = {}
        for phase, name in _phase_metrics(run).items():
            if name == gen_name or phase == "gen":
                continue
            s, v = clean_series(run, name)
            if len(s):
                others[phase] = _aligned(steps, s, v)
        x, bs = binned(steps, share, self.max_points)
        start_i = 0
        k, score = best_split(bs, min_side=max(3, len(bs) // 20), direction=+1)
        if k > 0 and score > 6:
            before, after = np.median(bs[:k]), np.median(bs[k:])
            if before < self.min_share <= after:
                start_i = k
        start_x = float(x[start_i])
        sel = steps >= start_x
        if (steps[sel][-1] - start_x) < max(
            self.min_duration, self.min_fraction * (steps[-1] - steps[0])
        ):
            return []
        share_after = float(np.median(share[sel]))
        if share_after < self.min_share:
            return []
        gen_after = float(np.median(gen[sel]))
        slowest, slowest_s = None, 0.0
        for phase, vals in others.items():
            v = vals[sel]
            v = v[np.isfinite(v)]
            if len(v) and float(np.median(v)) > slowest_s:
                slowest, slowest_s = phase, float(np.median(v))
        if slowest is not None and gen_after < self.min_ratio * slowest_s:
            return []
        start = int(steps[sel][0])
        if start_i > 0:
            # refine on raw shares near the coarse split
            half = max(10.0, 3 * float(np.median(np.diff(x))))
            win = (steps >= start_x - half) & (steps <= start_x + half)
            kk, _ = best_split(share[win], min_side=3, direction=+1)
            if kk > 0:
                start = int(steps[win][kk])
        share_before = float(np.median(share[steps < start])) if start_i > 0 else None
        return [
            self._finding(
                run,
                gen_name,
                step_name,
                start,
                int(steps[-1]),
                share_after,
                share_before,
                gen_after,
                float(np.median(total[sel])),
                slowest,
                slowest_s,
            )
        ]

    def _short(self, run: Run, gen_name: str, step_name: str, steps: np.ndarray) -> list[Finding]:
        """Too few steps for a lasting stretch: the median over the steps that did not also run
        validation or save a checkpoint (their step time is not the rollout's story)."""
        if len(steps) == 0:
            return []
        gs, gv = clean_series(run, gen_name)
        ss, sv = clean_series(run, step_name)
        gen, total = _aligned(steps, gs, gv), _aligned(steps, ss, sv)
        plain = _extra_seconds(run, steps) == 0
        ok = plain & np.isfinite(gen) & np.isfinite(total) & (total > 0) & (gen <= 1.05 * total)
        if not ok.any():
            return []
        steps, gen, total = steps[ok], gen[ok], total[ok]
        share = float(np.median(gen / total))
        if share < self.min_share:
            return []
        gen_s = float(np.median(gen))
        slowest, slowest_s = None, 0.0
        for phase, name in _phase_metrics(run).items():
            if name == gen_name or phase == "gen":
                continue
            v = _aligned(steps, *clean_series(run, name))
            v = v[np.isfinite(v)]
            if len(v) and float(np.median(v)) > slowest_s:
                slowest, slowest_s = phase, float(np.median(v))
        if slowest is None or gen_s < self.min_ratio * slowest_s:
            return []  # one step needs both rules: no other phase logged, no comparison
        finding = self._finding(
            run,
            gen_name,
            step_name,
            int(steps[0]),
            int(steps[-1]),
            share,
            None,
            gen_s,
            float(np.median(total)),
            slowest,
            slowest_s,
            short=len(steps),
        )
        return [finding]

    def _finding(
        self,
        run: Run,
        gen_name: str,
        step_name: str,
        start: int,
        end: int,
        share: float,
        share_before: float | None,
        gen_s: float,
        step_s: float,
        slowest: str | None,
        slowest_s: float,
        short: int | None = None,
    ) -> Finding:
        if short is None:
            msg = f"Generation ({gen_name}) takes {share:.0%} of each step from step {start} "
            msg += f"(median {fmt(gen_s)} s of {fmt(step_s)} s)"
        else:
            where = f"step {start}" if short == 1 else f"steps {start}–{end}"
            msg = (
                f"Generation ({gen_name}) takes {share:.0%} of the step time in {where} "
                f"(median {fmt(gen_s)} s of {fmt(step_s)} s; steps that also ran validation or "
                "saved a checkpoint left out)"
            )
        if share_before is not None:
            msg += f", up from {share_before:.0%} before"
        if slowest is not None:
            msg += f"; the slowest other phase, {slowest}, takes {fmt(slowest_s)} s "
            msg += f"({fmt(gen_s / max(slowest_s, 1e-9))}× less)."
        else:
            msg += "."
        bound, range_text = gpu_memory_bound(run)
        config = run.config()
        size = model_size_b(config) if config else None
        gpus = n_gpus(config) if config else None
        advice: list[Advice] = [
            advise(
                run,
                f"{RO}.gpu_memory_utilization",
                "A larger vLLM share holds more sequences in the KV cache at once, so each "
                f"rollout needs fewer passes; advised range here: {range_text} (above 0.7 risks "
                "OOM). The PPO article took it 0.4 → 0.65 on Qwen2.5-0.5B: timing_s/gen 5.72 → "
                "3.21 s.",
                f"{SEED_PPO} §2.1; {SEED_GRPO} §4.2",
                suggest=lambda cur: bound if float(cur) < bound else None,
                rule="0.4–0.5 on one GPU, 0.3–0.4 with 8-GPU FSDP, up to 0.65 for small models; "
                "≤ 0.7",
            ),
        ]
        for key, factor_text in (
            (f"{RO}.max_num_batched_tokens", "8192 → 16384"),
            (f"{RO}.max_num_seqs", "1024 → 1896"),
        ):
            advice.append(
                advise(
                    run,
                    key,
                    "Change max_num_seqs and max_num_batched_tokens together, so tokens ÷ seqs "
                    "stays near the mean prompt+response length; the PPO article doubled both "
                    f"({factor_text}) for +22% throughput.",
                    f"{SEED_PPO} §2.2",
                    suggest=lambda cur: int(cur) * 2,
                    rule="double together with its partner",
                )
            )
        tp_key = f"{RO}.tensor_model_parallel_size"
        tp = current_value(run, tp_key)
        per_node = current_value(run, "trainer.n_gpus_per_node")
        suggest_tp = None
        try:
            if tp is not None and per_node is not None and int(per_node) >= 2 * int(tp):
                suggest_tp = 2 * int(tp)
        except (TypeError, ValueError):
            suggest_tp = None
        advice.append(
            advise(
                run,
                tp_key,
                "Tensor parallelism splits generation over GPUs (the article: TP=2 on two GPUs "
                "cut gen time 3.21 → 2.45 s), if the model supports it.",
                f"{SEED_PPO} §5.3",
                suggest=suggest_tp,
                rule="2 on a 2-GPU node (a divisor of trainer.n_gpus_per_node)",
            )
        )
        evidence: dict[str, Any] = {
            "start_step": start,
            "gen_share_of_step": share,
            "gen_share_before": share_before,
            "gen_seconds": gen_s,
            "step_seconds": step_s,
            "slowest_other_phase": slowest,
            "slowest_other_phase_seconds": slowest_s,
            "n_gpus": gpus,
            "model_size_b": size,
        }
        if short is not None:
            evidence["judged_on"] = f"{short} step(s) without validation or checkpointing"
        return self.finding(
            message=msg,
            metric=gen_name,
            step=start,
            end_step=end,
            evidence=evidence,
            advice=advice,
            references=[f"{SEED_PPO} §2", f"{SEED_GRPO} §4.2"],
        )


class ThroughputDrop(Detector):
    """Throughput drops (or step time rises) to a new level and stays there.

    A lasting level shift, not a single slow step: validation and checkpoint steps are left
    out and isolated spikes are filtered before changepoints are searched.

    What it detects:
        Changepoints (ruptures KernelCPD, penalty from the series' own noise) in the log of
        `perf/throughput` (or of `perf/time_per_step` / `timing_s/step` when throughput is not
        logged), after dropping steps that ran validation (`timing_s/testing`) or saved a
        checkpoint (`timing_s/save_checkpoint`) and a 5-step rolling median. A change counts
        when the level right after it is at least `min_change` worse (relative) than right
        before, and the worse level lasts (through later segments, until a recovery) at least
        `min_duration` steps and `min_fraction` of the run. Evidence: levels before and after, and which timing phase grew the most.

    Why it matters:
        A run that suddenly takes longer per step burns GPU hours: a 30% drop over the rest of
        a long run costs as much as a third more hardware. The phase that grew points at the
        cause (generation: vLLM memory pressure or preemption; update: offload; everything: a
        slow node or storage).

    Example:
        step:399 - perf/throughput:1182 - timing_s/gen:31.0 - timing_s/step:60.1 ...
        step:401 - perf/throughput:846 - timing_s/gen:52.2 - timing_s/step:83.9 ...

    Advice:
        When generation grew: keep the KV cache from thrashing — `rollout.free_cache_engine=True`
        and `rollout.gpu_memory_utilization` in the advised range. Otherwise check what changed
        at that step (a restart with a different config, another job on the node).

    Known false positives:
        Step time grows legitimately when responses get longer (throughput per token is then
        flat; prefer `perf/throughput` when logged). A planned change (a curriculum stage with
        longer prompts) shows the same shape.

    References:
        seed:ppo-tuning §2 (rollout is the largest phase; gen time and throughput figures);
        verl:trainer/ppo/metric_utils.py (compute_throughout_metrics: tokens / (time × GPUs)).
    """

    code = "LS303"
    name = "throughput-drop"
    title = "Lasting drop in throughput"
    concepts = ("throughput", "time_per_step")
    default_severity = "warning"
    groups = ("system", "throughput")

    def __init__(
        self,
        *,
        min_change: float = 0.15,
        min_duration: int = 10,
        min_fraction: float = 0.05,
        penalty_scale: float = 3.0,
        max_points: int = 2000,
        max_findings: int = 3,
    ) -> None:
        for label, value in (
            ("min_change", min_change),
            ("min_duration", min_duration),
            ("min_fraction", min_fraction),
            ("penalty_scale", penalty_scale),
            ("max_points", max_points),
            ("max_findings", max_findings),
        ):
            _positive(f"throughput-drop: {label}", value)
        self.min_change = min_change
        self.min_duration = min_duration
        self.min_fraction = min_fraction
        self.penalty_scale = penalty_scale
        self.max_points = max_points
        self.max_findings = max_findings

    def detect(self, run: Run) -> list[Finding]:
        metric = resolve(run, "throughput")
        sign = -1  # throughput drops
        if metric is None:
            metric = resolve(run, "time_per_step")
            sign = +1  # step time rises
        steps, values = clean_series(run, metric)
        if len(steps) < 2 * self.min_duration:
            return []
        values = self._without_occasional(run, metric, sign, steps, values)
        pos = np.isfinite(values) & (values > 0)
        steps, values = steps[pos], values[pos]
        if len(steps) < 2 * self.min_duration:
            return []
        logv = np.log(values)
        # isolated slow steps are clipped to the local level, so only lasting shifts remain
        base = rolling_median(logv, 5)
        noise = robust_sigma(logv)
        filt = np.clip(logv, base - 3 * noise, base + 3 * noise)
        x, y = binned(steps, filt, self.max_points)
        n = len(x)
        span = float(x[-1] - x[0])
        cps = changepoints(y, penalty_scale=self.penalty_scale, min_size=max(3, n // 200))
        bounds = [0, *cps, n]
        need = max(self.min_duration, self.min_fraction * span)
        findings: list[Finding] = []
        for i, cp in enumerate(cps):
            seg_prev = (bounds[i], cp)
            seg_next = (cp, bounds[i + 2])
            w = max(3, min(cp - seg_prev[0], seg_next[1] - cp, max(3, n // 40)))
            before = float(np.median(y[max(seg_prev[0], cp - w) : cp]))
            after = float(np.median(y[cp : min(seg_next[1], cp + w)]))
            delta = sign * (after - before)
            if delta < math.log1p(self.min_change) or delta < 4 * noise / math.sqrt(w):
                continue
            # lasting: the following segments stay at the worse level (until a recovery)
            end = seg_next[1]
            j = i + 2
            while j < len(bounds) - 1:
                nxt = float(np.median(y[bounds[j] : bounds[j + 1]]))
                if sign * (nxt - before) < 0.5 * math.log1p(self.min_change):
                    break
                end = bounds[j + 1]
                j += 1
            seg_level = float(np.median(y[cp:end]))
            if sign * (seg_level - before) < 0.5 * math.log1p(self.min_change):
                continue
            last = x[end - 1]
            if last - x[cp] + 1 < need:
                continue
            step = self._refine(steps, logv, float(x[cp]), x, sign)
            findings.append(
                self._finding(run, metric, sign, step, int(last), before, after, seg_level)
            )
            if len(findings) >= self.max_findings:
                break
        return findings

    @staticmethod
    def _without_occasional(
        run: Run, metric: str, sign: int, steps: np.ndarray, values: np.ndarray
    ) -> np.ndarray:
        """Values as if the step had not run validation or saved a checkpoint.

        Step time: minus those seconds. Throughput (tokens / step time): rescaled by the step
        time without them; NaN (dropped) where the step time is not logged.
        """
        extra = _extra_seconds(run, steps)
        if not (extra > 0).any():
            return values
        if sign > 0:
            out = values - extra
            return np.where(out > 0, out, np.nan)
        step_name = resolve(run, "time_step")
        ts, tv = clean_series(run, step_name)
        total = _aligned(steps, ts, tv)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            scale = total / (total - extra)
            fixed = np.where(np.isfinite(scale) & (scale > 0), values * scale, np.nan)
        return np.where(extra > 0, fixed, values)

    def _refine(
        self, steps: np.ndarray, logv: np.ndarray, approx: float, x: np.ndarray, sign: int
    ) -> int:
        width = float(np.median(np.diff(x))) if len(x) > 1 else 1.0
        half = max(8.0, 3 * width)
        win = (steps >= approx - half) & (steps <= approx + half)
        ws = steps[win]
        if len(ws) < 8:
            return int(steps[min(int(np.searchsorted(steps, approx - 1e-9)), len(steps) - 1)])
        wv = rolling_median(logv[win], 3)
        k, _ = best_split(wv, min_side=3, direction=sign)
        if k < 0:
            return int(ws[min(int(np.searchsorted(ws, approx - 1e-9)), len(ws) - 1)])
        return int(ws[k])

    def _finding(
        self,
        run: Run,
        metric: str,
        sign: int,
        step: int,
        end: int,
        before_log: float,
        after_log: float,
        seg_log: float,
    ) -> Finding:
        before, after, seg = math.exp(before_log), math.exp(after_log), math.exp(seg_log)
        rel = after / before - 1
        what = "drops" if sign < 0 else "rises"
        msg = (
            f"{metric} {what} from {fmt(before)} to {fmt(after)} at step {step} "
            f"({rel:+.0%}) and stays there (median {fmt(seg)} through step {end})."
        )
        grew = self._phase_growth(run, step)
        uniform = None
        if grew:
            total = sum(g["before_s"] for g in grew) or 1.0
            ratios = [
                g["after_s"] / g["before_s"]
                for g in grew
                if g["before_s"] >= 0.05 * total and g["before_s"] > 0
            ]
            if len(ratios) >= 2 and max(ratios) > 1.1 and min(ratios) >= 0.75 * max(ratios):
                uniform = float(np.median(ratios))
        if uniform is not None:
            msg += (
                f" Every phase slowed by about ×{uniform:.2f} (generation, log-probs and updates "
                "alike): the cause is outside any one phase — the node, storage, network or "
                "another job."
            )
        elif grew:
            top = grew[0]
            msg += (
                f" The phase that grew most: {top['phase']} ({fmt(top['before_s'])} → "
                f"{fmt(top['after_s'])} s)."
            )
        advice: list[Advice] = []
        if uniform is None and grew and grew[0]["phase"] == "gen":
            advice.append(
                advise(
                    run,
                    f"{RO}.free_cache_engine",
                    "Generation got slower and stayed slow: vLLM preempting sequences or "
                    "recomputing its cache under memory pressure looks like this; make sure the "
                    "cache is freed between rollouts.",
                    f"{SEED_PPO} §7.3",
                    suggest=True,
                )
            )
            mem = gpu_memory_advice(
                run,
                "Keep the vLLM share in the advised range so the trainer side is not pushed "
                "into CPU offload (3–5× slower).",
                always=False,
            )
            if mem is not None:
                advice.append(mem)
        changed = [s for s in run.config_segments[1:] if abs(s.first_step - step) <= 5]
        note = (
            f" A new config segment starts at step {changed[0].first_step} (a restart): compare "
            "its settings with the previous one."
            if changed
            else ""
        )
        advice.append(
            advise(
                run,
                "trainer.n_gpus_per_node",
                "A lasting slowdown with no config change usually comes from outside the run "
                "(another job on the node, a slow disk or network, a GPU throttling); check the "
                f"node at that step.{note}",
                "verl:trainer/ppo/metric_utils.py",
                suggest=None,
                rule="unchanged; look for what changed on the hardware at that step",
            )
        )
        evidence = {
            "change_step": step,
            "level_before": before,
            "level_after": after,
            "level_rest_of_segment": seg,
            "relative_change": rel,
            "segment_end_step": end,
            "phase_growth": grew[:3],
        }
        return self.finding(
            message=msg,
            metric=metric,
            step=step,
            end_step=end,
            evidence=evidence,
            advice=advice,
            references=["verl:trainer/ppo/metric_utils.py", f"{SEED_PPO} §2"],
        )

    def _phase_growth(self, run: Run, step: int, window: int = 20) -> list[dict[str, Any]]:
        """Timing phases ranked by how many seconds they grew across `step`."""
        out = []
        for phase, name in _phase_metrics(run).items():
            s, v = clean_series(run, name)
            b = v[(s < step) & (s >= step - window)]
            a = v[(s >= step) & (s < step + window)]
            if len(b) >= 2 and len(a) >= 2:
                out.append(
                    {
                        "phase": phase,
                        "before_s": float(np.median(b)),
                        "after_s": float(np.median(a)),
                    }
                )
        out.sort(key=lambda d: d["before_s"] - d["after_s"])
        return out
