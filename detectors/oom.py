"""Out-of-memory signatures in the log: GPU (CUDA OOM), host (Ray's OOM killer), vLLM KV cache."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from logscope import verl_config
from logscope.advice import SEED_GRPO, SEED_PPO, advise, current_value
from logscope.aliases import name_of, resolve
from logscope.detector import param
from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all
from logscope.verl_config import ACT, REF, RO
from logscope.words import plural

from ._common import (
    Hit,
    context,
    env_advice,
    find_lines,
    gpu_memory_advice,
    halve_advice,
    micro_batch_advice,
    occurrences,
    where,
)
from ._signatures import (
    CUDA_OOM_KEYS,
    CUDA_OOM_RE,
    HOST_OOM_RE,
    RAY_OOM_DOC,
    SignatureDetector,
    phase_near,
    phase_of_call,
)

# A row of Ray's "top 10 memory users" table: `4100606 56.57   ray::WorkerDict.generate_sequences`
TOP_USER_RE = re.compile(r"^([0-9]+)\s+([0-9.]+)\s+ray::([\w.]+)$", re.M)


class CudaOom(SignatureDetector, code="LS010", name="cuda-oom"):
    """The GPU ran out of memory (CUDA OOM), with the training phase it happened in.

    What it detects:
        `CUDA out of memory`, `torch.OutOfMemoryError` / `torch.cuda.OutOfMemoryError`,
        `CUDA error: out of memory` (also vLLM's cumem allocator's `CUDA Error: out of memory
        at …cumem_allocator.cpp`, raised when the rollout engine wakes up), and
        `RayTaskError(OutOfMemoryError)` lines. A `RayTaskError(OutOfMemoryError)` header alone
        (the task's own error line not in the text) is reported as a CUDA OOM, the likelier
        reading, and says that Ray's host-memory `OutOfMemoryError` (a worker killed by Ray's
        memory monitor, passed on by `ray.get`) has the same name (evidence `wrapper_only`); a
        host-OOM line nearby makes it host-oom-worker-killed instead. The phase is read from
        the traceback around the
        first one, innermost first: verl's methods (`generate_sequences`, `compute_log_prob`,
        `compute_ref_log_prob`, `update_actor`, `update_critic`, `compute_values`, `wake_up` /
        `sleep`, `init_model`) in frames and Ray task headers
        (`ray::WorkerDict.actor_rollout_update_actor()`), then the engine's, then `backward`
        alone (a training update's backward pass). Evidence adds the allocation that failed,
        the GPU's capacity, the memory PyTorch reserved but left unallocated (fragmentation),
        and whether the reserved GPU memory metric climbed over the run (a leak).

    Why it matters:
        The run stops. Which phase ran out decides the fix: the rollout or its wake-up (vLLM's
        share of GPU memory), the log-prob passes (their micro batches) or the actor/critic
        update (the PPO micro batch times the sequence length).

    Example:
        (WorkerDict pid=3141) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate
        2.31 GiB. GPU 0 has a total capacity of 39.38 GiB of which 1.02 GiB is free.
        ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_update_actor()
        (pid=3141, ip=10.0.0.2, actor_id=..., repr=<verl.single_controller.ray.base.WorkerDict ...>)

    Advice:
        For a wrapper-only OutOfMemoryError, first the worker's log (worker-*.err, raylet.out)
        to tell GPU from host. For the phase that ran out: the actor update (or a bare backward
        pass) →
        `actor.ppo_micro_batch_size_per_gpu` no larger than the golden formula
        floor(24·1024 / (max_prompt_length + max_response_length)) (halved when already below
        it), or a halved `actor.ppo_max_token_len_per_gpu` with dynamic batch sizes; the
        log-prob passes → `rollout.log_prob_micro_batch_size_per_gpu` /
        `ref.log_prob_micro_batch_size_per_gpu`; the critic → its micro batches; the rollout,
        its sleep/wake-up or the cumem allocator → `rollout.gpu_memory_utilization` lower and
        `rollout.free_cache_engine=True`. Always: `rollout.gpu_memory_utilization` into the
        advised range (or 0.1 lower). When torch reports a large share "reserved by PyTorch but
        unallocated": `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`. When the reserved GPU
        memory climbed over the steps before the crash, suspect a vLLM KV-cache leak:
        `rollout.free_cache_engine=True` and `rollout.enforce_eager=True`.

    Known false positives:
        A worker that caught an OOM and retried with a smaller batch still prints the message;
        the finding is then about a near miss, not a crash. An OOM caused by another process on
        the same GPU looks the same.

    References:
        seed:grpo-pitfalls §1.2–1.3 (micro batch, golden formula), §4.1 (gpu_memory_utilization);
        seed:ppo-tuning §7.3 (KV-cache leak: memory climbing 45 → 48 GB, then OOM);
        pytorch:notes/cuda#optimizing-memory-usage-with-pytorch-cuda-alloc-conf
        (expandable_segments).
    """

    title = "GPU out of memory (CUDA OOM)"
    groups = ("memory", "crash")

    context_before: int = param(150, ge=0)
    context_after: int = param(60, ge=0)
    leak_growth: float = param(0.05, gt=0)

    def hits(self, run: Run) -> list[Hit]:
        out = []
        for hit in find_lines(run, CUDA_OOM_RE, CUDA_OOM_KEYS):
            # RayTaskError(OutOfMemoryError) alone can wrap Ray's host OOM: keep GPU ones only.
            if "CUDA" not in hit.text and "torch" not in hit.text:
                blob = context(run, hit.line_no, self.context_after, self.context_after)
                if HOST_OOM_RE.search(blob) and "CUDA" not in blob:
                    continue
            out.append(hit)
        return out

    def _leak(self, run: Run) -> dict[str, float] | None:
        metric = resolve(run, "gpu_mem_reserved")
        if metric is None:
            return None
        _, values = run.series(metric)
        values = values[np.isfinite(values)]
        if len(values) < 8:
            return None
        q = max(2, len(values) // 4)
        start, end = float(np.median(values[:q])), float(np.median(values[-q:]))
        if start <= 0 or (end - start) / start < self.leak_growth:
            return None
        return {"metric": metric, "start_gb": round(start, 2), "end_gb": round(end, 2)}

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        first = hits[0]
        phase = None
        for hit in hits[:5]:  # the first tracebacks tell; later ones are repeats
            phase = phase_near(run, hit.line_no, self.context_before, self.context_after)
            if phase:
                break
        blob = "\n".join(h.text for h in hits[:50])
        evidence: dict[str, Any] = {"phase": phase.id if phase else None}
        if phase:
            evidence["phase_method"] = phase.method
        evidence.update(_memory_numbers(blob))
        leak = self._leak(run)
        if leak:
            evidence["memory_reserved_climb"] = leak
        where_phase = f" during {phase.label}" if phase else ""
        wrapped = all(_wrapper_only(h.text) for h in hits)
        evidence["wrapper_only"] = wrapped
        if wrapped:
            message = (
                f"An OutOfMemoryError{where_phase} at {where(first)}, named only by Ray's "
                "`RayTaskError(OutOfMemoryError)` header (the task's own error line is not in "
                "the text): most likely torch's CUDA out of memory raised in the task, but Ray's "
                "host-memory OutOfMemoryError (its memory monitor killed a worker, and ray.get "
                "passed the error on) has the same name; the text does not show GPU or host"
            )
        else:
            message = f"CUDA out of memory{where_phase} at {where(first)}"
        if "tried_to_allocate" in evidence:
            message += f", trying to allocate {evidence['tried_to_allocate']}"
        message += f"; printed {plural(occurrences(hits), 'time')}."
        if _fragmented(evidence):
            message += (
                f" {evidence['reserved_unallocated']} was reserved by PyTorch but unallocated: "
                "the memory is fragmented."
            )
        if leak:
            message += (
                f" {leak['metric']} climbed from {leak['start_gb']} to {leak['end_gb']} GB over "
                "the run: a leak, not a one-off peak."
            )
        advice = self._advice(run, phase.id if phase else None, leak)
        if _fragmented(evidence):
            advice.insert(0, _expandable_segments_advice(evidence))
        if wrapped:
            advice.insert(0, _which_memory_advice())
        return self.signature_finding(
            hits,
            message,
            evidence=evidence,
            advice=advice,
            references=cite_all([f"{SEED_GRPO} §1.2", f"{SEED_GRPO} §4.1", f"{SEED_PPO} §7.3"]),
        )

    def _advice(self, run: Run, phase: str | None, leak: dict[str, float] | None) -> list[Advice]:
        out: list[Advice] = []
        why_micro = "Activation memory grows with micro batch × sequence length."
        generation = phase in GENERATION_PHASES
        if phase in MICRO_BATCH_KEYS:
            key, source = MICRO_BATCH_KEYS[phase]
            out.append(micro_batch_advice(run, key, why_micro, source))
        elif phase in (None, "update-actor", "backward"):
            out.extend(_actor_update_advice(run, why_micro))
        why_mem = (
            "vLLM's KV cache (or waking it up) leaves the rollout no room."
            if generation
            else "The memory vLLM keeps is memory the training passes cannot use."
        )
        mem = gpu_memory_advice(run, why_mem, always=True)
        if mem is not None:
            out.append(mem)
        leak_note = (
            f"Reserved GPU memory climbed {leak['start_gb']} → {leak['end_gb']} GB: "
            if leak
            else f"If {name_of(run, 'gpu_mem_reserved')} climbs slowly over the steps before an OOM, "
        )
        for key, label in (
            (f"{RO}.free_cache_engine", "free the KV cache after generation"),
            (f"{RO}.enforce_eager", "disable CUDA graphs"),
        ):
            current = current_value(run, key)
            if current is True:
                continue
            explicit_off = key.endswith("free_cache_engine") and current is False
            if leak or generation or explicit_off:
                out.append(
                    advise(
                        run,
                        key,
                        f"{leak_note}that is a vLLM KV-cache leak; {label}.",
                        f"{SEED_PPO} §7.3",
                        suggest=True,
                    )
                )
        return out


# Phases whose memory is vLLM's: the rollout, waking it up / putting it to sleep, validation.
GENERATION_PHASES = ("rollout", "weight-sync", "validation", "init")
MICRO_BATCH_KEYS = {
    "log-prob": (f"{RO}.log_prob_micro_batch_size_per_gpu", f"{SEED_PPO} §2.3"),
    "ref-log-prob": (f"{REF}.log_prob_micro_batch_size_per_gpu", f"{SEED_PPO} §2.3"),
    "update-critic": ("critic.ppo_micro_batch_size_per_gpu", f"{SEED_GRPO} §1.2"),
    "critic-values": ("critic.forward_micro_batch_size_per_gpu", f"{SEED_GRPO} §1.2"),
}
SIZE = r"([\d.]+ ?[KMGT]i?B)"


def _wrapper_only(text: str) -> bool:
    """A `RayTaskError(OutOfMemoryError)` header that does not say whose memory ran out."""
    return "RayTaskError(OutOfMemoryError)" in text and "CUDA" not in text


def _which_memory_advice() -> Advice:
    return env_advice(
        "ray-logs",
        "the failing worker's worker-*.err and raylet.out under /tmp/ray/session_latest/logs",
        "Tell GPU from host first: torch's `OutOfMemoryError: CUDA out of memory. Tried to "
        "allocate …` in the worker's log is the GPU (the advice below); Ray's `Task was killed "
        "due to the node running low on memory` / raylet's `killed due to memory pressure "
        "(OOM)` is host RAM (see host-oom-worker-killed: CPU offload, dataloader and reward "
        "workers), and GPU settings will not fix it.",
        RAY_OOM_DOC,
    )


def _memory_numbers(blob: str) -> dict[str, str]:
    """Sizes torch printed: the failed allocation, the GPU's capacity, reserved-but-unallocated."""
    out: dict[str, str] = {}
    m = re.search(rf"Tried to allocate {SIZE}", blob)
    if m:
        out["tried_to_allocate"] = m.group(1)
    m = re.search(rf"total capacity of {SIZE}|{SIZE} total capacity", blob)
    if m:
        out["gpu_capacity"] = m.group(1) or m.group(2)
    m = re.search(rf"{SIZE} is reserved by PyTorch but unallocated", blob)
    if m:
        out["reserved_unallocated"] = m.group(1)
    return out


def _gib(size: str | None) -> float | None:
    m = re.match(r"([\d.]+) ?([KMGT])", size or "")
    if m is None:
        return None
    return float(m.group(1)) * {"K": 2**-20, "M": 2**-10, "G": 1.0, "T": 1024.0}[m.group(2)]


def _fragmented(evidence: dict[str, Any]) -> bool:
    """Reserved-but-unallocated memory as large as the failed allocation (or ≥ 1 GiB)."""
    free = _gib(evidence.get("reserved_unallocated"))
    wanted = _gib(evidence.get("tried_to_allocate"))
    return free is not None and free >= max(1.0, wanted or 0.0)


def _expandable_segments_advice(evidence: dict[str, Any]) -> Advice:
    return env_advice(
        "PYTORCH_CUDA_ALLOC_CONF",
        "expandable_segments:True",
        f"{evidence['reserved_unallocated']} was reserved by PyTorch but unallocated: enough "
        "memory, in pieces too small for the allocation. Expandable segments let the caching "
        "allocator grow segments instead of fragmenting (set it in the Ray runtime env so the "
        "workers get it).",
        "pytorch:notes/cuda#environment-variables",
    )


def _actor_update_advice(run: Run, why: str) -> list[Advice]:
    """The actor's micro batch, or its token budget when dynamic batch sizes are on."""
    dynamic = current_value(run, f"{ACT}.use_dynamic_bsz")
    out = []
    if dynamic is not True:
        out.append(
            micro_batch_advice(
                run,
                f"{ACT}.ppo_micro_batch_size_per_gpu",
                why + " Above ~12,000 tokens per GPU per micro step the OOM risk is high.",
                f"{SEED_GRPO} §1.2",
            )
        )
    if dynamic is not False:
        out.append(
            halve_advice(
                run,
                f"{ACT}.ppo_max_token_len_per_gpu",
                "With use_dynamic_bsz=True the micro batches are packed up to this many tokens "
                "per GPU: it is the update's activation budget.",
                f"{SEED_GRPO} §1.2",
            )
        )
    return out


class HostOomWorkerKilled(SignatureDetector, code="LS011", name="host-oom-worker-killed"):
    """Ray killed a worker because the node ran out of host (CPU) memory.

    What it detects:
        Ray's memory monitor lines: `(raylet) ... N Workers (tasks / actors) killed due to memory
        pressure (OOM)`, `Worker killed ... due to memory pressure (OOM)`, and
        `ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on
        memory`. Evidence: workers killed (summed over the raylet summaries), the node's memory
        use and Ray's threshold when printed, the biggest of Ray's top memory users (`PID
        MEM(GB) COMMAND` rows) and the phase its task names (`generate_sequences`: rollout), and
        the peak of `perf/cpu_memory_used_gb`.

    Why it matters:
        This is host RAM, not GPU memory: lowering GPU micro batches will not fix it. The killed
        worker is often a verl WorkerDict, so the run dies or hangs; CPU offload of parameters
        or optimizer state, many dataloader/reward workers, or a leak in a custom reward
        function are the usual culprits.

    Example:
        (raylet) [2025-05-02 10:11:12,345 E 123 123] (raylet) node_manager.cc:3049: 1 Workers
        (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other
        reasons at node (ID: 5f1..., IP: 10.0.0.2) over the last time period.
        ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.

    Advice:
        Turn off CPU offload where it is on (`actor.fsdp_config.param_offload`,
        `actor.fsdp_config.optimizer_offload`, `ref.fsdp_config.param_offload`): offloaded
        weights and Adam states live in host RAM. Ray kills at 95% host memory by default
        (`RAY_memory_usage_threshold`); raising it only helps with a short spike, not a leak.

    Known false positives:
        A machine shared with other jobs can push the node over Ray's threshold while verl
        itself is fine; the evidence's memory figure tells whose memory it was only when Ray
        printed the per-task usage.

    References:
        ray:ray-core/scheduling/ray-oom-prevention (memory monitor,
        RAY_memory_usage_threshold); verl:trainer/config/ppo_trainer.yaml
        (`actor_rollout_ref.*.fsdp_config.*_offload`).
    """

    title = "Ray killed a worker: host memory exhausted"
    groups = ("memory", "crash", "ray")

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        evidence: dict[str, Any] = {}
        killed = 0
        for hit in hits:
            m = re.search(
                r"(\d+) Workers? \(tasks / actors\) killed due to memory pressure", hit.text
            )
            if m:
                killed += int(m.group(1)) * hit.line.repeats
        if killed:
            evidence["workers_killed"] = killed
        near = context(run, hits[0].line_no, 20, 20)
        m = re.search(
            r"was (\d+(?:\.\d+)?) ?GB / (\d+(?:\.\d+)?) ?GB \((\d+(?:\.\d+)?)\), which exceeds "
            r"the memory usage threshold of (\d+(?:\.\d+)?)",
            near,
        )
        if m:
            evidence["node_memory_used_gb"] = float(m.group(1))
            evidence["node_memory_total_gb"] = float(m.group(2))
            evidence["memory_usage_threshold"] = float(m.group(4))
        m = re.search(r"IP: ([0-9a-fA-F.:]+)[,)]", near)
        if m:
            evidence["node_ip"] = m.group(1)
        users = TOP_USER_RE.findall(near)  # Ray's table of the node's top memory users
        phase = None
        if users:
            pid, gb, task = users[0]
            evidence["top_memory_user"] = {"pid": int(pid), "memory_gb": float(gb), "task": task}
            phase = phase_of_call(task.rsplit(".", 1)[-1])
            evidence["phase"] = phase.id if phase else None
        cpu = resolve(run, "cpu_mem_used")
        if cpu is not None:
            _, values = run.series(cpu)
            values = values[np.isfinite(values)]
            if len(values):
                evidence["peak_cpu_memory_used_gb"] = float(values.max())
        during = f" during {phase.label}" if phase else ""
        message = f"Ray killed a worker for lack of host memory{during} at {where(hits[0])}"
        if killed:
            message += f"; {plural(killed, 'worker')} killed in total"
        if "node_memory_used_gb" in evidence:
            message += (
                f"; node memory {evidence['node_memory_used_gb']} / "
                f"{evidence['node_memory_total_gb']} GB"
            )
        if users:
            message += f"; the biggest user, {users[0][2]}, held {users[0][1]} GB"
        message += "."
        return self.signature_finding(
            hits,
            message,
            evidence=evidence,
            advice=self._advice(run),
            references=cite_all([RAY_OOM_DOC]),
        )

    def _advice(self, run: Run) -> list[Advice]:
        out = offload_advice(run)
        out.append(
            env_advice(
                "RAY_memory_usage_threshold",
                None,
                "Ray kills the most recent task above this share of host memory (0.95 by "
                "default). Raise it (e.g. 0.98) only for a short spike; find and fix a leak "
                "otherwise (custom reward function, dataloader workers).",
                RAY_OOM_DOC,
            )
        )
        return out


OFFLOAD_KEYS = (
    f"{ACT}.fsdp_config.param_offload",
    f"{ACT}.fsdp_config.optimizer_offload",
    f"{REF}.fsdp_config.param_offload",
)


def offload_advice(run: Run) -> list[Advice]:
    """CPU offload turned off where the run has it on (without a config: the rule, once)."""
    known = bool(run.config_segments or run.meta.get("overrides"))
    out: list[Advice] = []
    for key in OFFLOAD_KEYS if known else OFFLOAD_KEYS[:1]:
        current = current_value(run, key)
        if known and current is not True:
            continue
        out.append(
            advise(
                run,
                key,
                "Offloaded parameters/optimizer state are kept in host RAM; with several GPUs "
                "per node that is several copies (the same holds for optimizer_offload and "
                "the reference model's param_offload).",
                "verl:workers/fsdp_workers.py",
                suggest=False if current is True else None,
                rule="false when host memory is short",
            )
        )
    return out


class VllmKvCacheNoMemory(SignatureDetector, code="LS018", name="vllm-kv-cache-no-memory"):
    """vLLM found no GPU memory left for its KV cache when the rollout engine started.

    What it detects:
        vLLM's `No available memory for the cache blocks. Try increasing
        gpu_memory_utilization when initializing the engine.`

    Why it matters:
        The rollout engine cannot start, so training never begins. vLLM may use
        `gpu_memory_utilization` × the GPU's memory; after the model weights and the profiling
        run nothing was left for the KV cache. This is the opposite failure of a CUDA OOM: the
        share is too small for the model, not too large.

    Example:
        (WorkerDict pid=5521) ValueError: No available memory for the cache blocks. Try
        increasing `gpu_memory_utilization` when initializing the engine.

    Advice:
        Raise `actor_rollout_ref.rollout.gpu_memory_utilization` by 0.1 (not above 0.7, where
        the training side starts to run out), or split the model over more GPUs with
        `actor_rollout_ref.rollout.tensor_model_parallel_size` so each holds fewer weights.

    Known false positives:
        Another process holding GPU memory at start-up (a previous run that did not exit)
        produces the same message; `nvidia-smi` tells.

    References:
        verl:trainer/config/ppo_trainer.yaml (`rollout.gpu_memory_utilization`, default
        0.5); seed:grpo-pitfalls §4
        (advised ranges); seed:ppo-tuning §5.3 (tensor parallel rollout).
    """

    title = "vLLM has no memory left for its KV cache"
    groups = ("memory", "vllm", "crash")

    max_utilization: float = param(0.7, gt=0, le=1)

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        key = f"{RO}.gpu_memory_utilization"
        current = current_value(run, key)
        suggested = None
        numeric = isinstance(current, (int, float)) and not isinstance(current, bool)
        if numeric and current < self.max_utilization:
            suggested = round(min(self.max_utilization, current + 0.1), 2)
        advice = [
            advise(
                run,
                key,
                "vLLM's share of GPU memory does not cover the model weights plus a KV cache.",
                f"{SEED_GRPO} §4",
                suggest=suggested,
                rule=f"0.1 higher, at most {self.max_utilization}",
            )
        ]
        tp = current_value(run, f"{RO}.tensor_model_parallel_size")
        gpus = verl_config.n_gpus(run.config()) if run.config_segments else None
        tp_suggested = None
        if isinstance(tp, int) and gpus and tp * 2 <= gpus and gpus % (tp * 2) == 0:
            tp_suggested = tp * 2
        if suggested is None or tp_suggested is not None:
            advice.append(
                advise(
                    run,
                    f"{RO}.tensor_model_parallel_size",
                    "Tensor parallelism splits the weights over GPUs, leaving each more room for "
                    "the KV cache (the model must support TP).",
                    f"{SEED_PPO} §5.3",
                    suggest=tp_suggested,
                    rule="double it, if the GPUs per node allow",
                )
            )
        message = f"vLLM found no memory for the KV cache at {where(hits[0])}"
        if suggested is not None:
            message += f"; gpu_memory_utilization is {current}"
        message += "."
        return self.signature_finding(
            hits,
            message,
            advice=advice,
            references=cite_all(["verl:trainer/config/ppo_trainer.yaml", f"{SEED_GRPO} §4"]),
        )
