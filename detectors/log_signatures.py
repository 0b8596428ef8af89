"""Failure signatures in the log text (tuning_knowledge.md §C): OOM, Ray, vLLM, NCCL, batch sizes.

Each detector reads `Run.events` and matches the text of each line with its own patterns (not
the reader's event kinds), so a log holding only a crash still gets its diagnosis. One finding
per signature: first occurrence (line, last step logged before it), how often it was printed,
and the matched line quoted.
"""

from __future__ import annotations

import math
import re
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from logscope import verl_config
from logscope.advice import SEED_GRPO, SEED_PPO, advise, current_value
from logscope.aliases import resolve
from logscope.detector import Detector
from logscope.exceptions import BadDetectorParameters
from logscope.model import Advice, Finding, Run
from logscope.verl_config import ACT, REF, RO

from ._common import (
    Hit,
    LogLine,
    context,
    find_lines,
    gpu_memory_advice,
    iter_windows,
    log_lines,
    micro_batch_advice,
    non_finite_advice,
    quote,
    signature_evidence,
    where,
    window,
)

RAY_OOM_DOC = "ray:ray-core/scheduling/ray-oom-prevention"

# ---- patterns --------------------------------------------------------------------------------

CUDA_OOM_RE = re.compile(
    r"CUDA out of memory|CUDA error: out of memory|torch\.(?:cuda\.)?OutOfMemoryError"
    r"|RayTaskError\(OutOfMemoryError\)|\bOutOfMemoryError: CUDA"
)
HOST_OOM_RE = re.compile(
    r"killed due to memory pressure \(OOM\)|ray\.exceptions\.OutOfMemoryError"
    r"|Task was killed due to the node running low on memory"
)
RAY_REGISTER_RE = re.compile(r"(?:Failed|Unable) to register worker\b")
VLLM_INSPECT_RE = re.compile(
    r"Model architectures? (\[[^\]]*\]) failed to be inspected|failed to be inspected"
)
NCCL_RE = re.compile(
    r"NCCL operation failed|NCCL error|nccl(?:InternalError|UnhandledCudaError|SystemError"
    r"|InvalidUsage|InvalidArgument|RemoteError)|Watchdog caught collective operation timeout"
    r"|NCCL communicator was aborted|NCCL (?:watchdog )?timeout"
)
# Literals every match of the pattern contains (a cheap pre-filter for long logs).
CUDA_OOM_KEYS = ("out of memory", "OutOfMemoryError")
HOST_OOM_KEYS = ("memory pressure", "OutOfMemoryError", "running low on memory")
RAY_REGISTER_KEYS = ("register worker",)
VLLM_INSPECT_KEYS = ("failed to be inspected",)
NCCL_KEYS = ("NCCL", "nccl", "Watchdog")
BATCH_KEYS = ("batch_size", "equal chunk")
GRAD_NORM_KEYS = ("grad_norm is not finite",)
GRAD_NORM_RE = re.compile(r"WARN: (?:rank (\d+) )?grad_norm is not finite: (\S+)")

# (kind, pattern) for verl's batch-size checks (verl_formats.md §6) and the article's wording.
BATCH_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "real-batch-minimal",
        re.compile(
            r"real_train_batch_size \((\d+)\) must be divisible by minimal possible batch size \((\d+)\)"
        ),
    ),
    (
        "real-batch-n-gpus",
        re.compile(r"real_train_batch_size \((\d+)\) must be divisible by total n_gpus \((\d+)\)"),
    ),
    (
        "equal-chunk",
        re.compile(r"only support equal chunk\. Got size of DataProto (\d+) and chunk (\d+)"),
    ),
    (
        "train-lt-mini",
        re.compile(r"train_batch_size \((\d+)\) must be >= actor\.ppo_mini_batch_size \((\d+)\)"),
    ),
    (
        "mini-micro-divisible",
        re.compile(
            r"normalized ppo_mini_batch_size (\d+) should be divisible by ppo_micro_batch_size_per_gpu (\d+)"
        ),
    ),
    (
        "mini-lt-micro",
        re.compile(
            r"normalized ppo_mini_batch_size (\d+) should be larger than ppo_micro_batch_size_per_gpu (\d+)"
        ),
    ),
    (
        "mini-zero",
        re.compile(r"ppo_mini_batch_size (\d+) should be larger than 0 after normalization"),
    ),
    (
        "legacy-mini-micro",
        re.compile(
            r"ppo_mini_batch_size \((\d+)\) must be divisible by ppo_micro_batch_size \((\d+)\)"
        ),
    ),
    (
        "sync-step",
        re.compile(
            r"train_batch_size \((\d+)\) must be divisible by parameter_sync_step \((\d+)\)"
        ),
    ),
    ("article-n", re.compile(r"batch_size must be divisible by n\b")),
)
BATCH_RE = re.compile("|".join(f"(?:{p.pattern})" for _, p in BATCH_PATTERNS))

# verl worker methods → training phase, for naming where a GPU OOM happened.
PHASES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"generate_sequences|wake_up|rebuild_kv_cache|_run_engine"), "rollout"),
    (re.compile(r"compute_ref_log_prob"), "ref-log-prob"),
    (re.compile(r"compute_log_prob"), "log-prob"),
    (re.compile(r"update_actor"), "update-actor"),
    (re.compile(r"update_critic"), "update-critic"),
    (re.compile(r"compute_values"), "critic-values"),
    (re.compile(r"compute_rm_score"), "reward-model"),
)
PHASE_LABELS = {
    "rollout": "rollout (generate_sequences)",
    "ref-log-prob": "reference log-prob (compute_ref_log_prob)",
    "log-prob": "old log-prob (compute_log_prob)",
    "update-actor": "actor update (update_actor)",
    "update-critic": "critic update (update_critic)",
    "critic-values": "critic values (compute_values)",
    "reward-model": "reward model (compute_rm_score)",
}
RAY_HEADER_RE = re.compile(r"ray::[\w.]*?\.(\w+)\(")
TRACEBACK_RE = re.compile(
    r"Traceback \(most recent call last\)|RayTaskError|Error executing job with overrides"
)
EXCEPTION_RE = re.compile(
    r"^(?P<type>(?:[A-Za-z_][\w]*\.)*(?:[A-Z]\w*(?:Error|Exception|Interrupt|Exit)|RayTaskError)"
    r"(?:\([\w.]+\))?)(?::\s*(?P<msg>.*))?$"
)


def _phase(run: Run, hit: Hit, before: int, after: int) -> str | None:
    """The training phase of a traceback near `hit`: Ray task header first, else nearest frame."""
    near = window(run, hit.line_no, before, after)
    headers: list[tuple[int, str]] = []
    frames: list[tuple[int, str]] = []
    for line in near:
        for m in RAY_HEADER_RE.finditer(line.text):
            for pattern, phase in PHASES:
                if pattern.search(m.group(1)):
                    headers.append((abs(line.line_no - hit.line_no), phase))
                    break
        if not headers:
            for pattern, phase in PHASES:
                if pattern.search(line.text):
                    frames.append((abs(line.line_no - hit.line_no), phase))
                    break
    chosen = headers or frames
    return min(chosen)[1] if chosen else None


def _ints(m: re.Match[str]) -> list[int]:
    return [int(g) for g in m.groups() if g is not None and g.isdigit()]


class _Signature(Detector):
    """Base for log-signature detectors: find lines, build one finding."""

    reads = "events"
    default_severity = "error"
    pattern: ClassVar[re.Pattern[str]]
    keywords: ClassVar[tuple[str, ...]] = ()

    def hits(self, run: Run) -> list[Hit]:
        return find_lines(run, self.pattern, self.keywords)

    def detect(self, run: Run) -> list[Finding]:
        hits = self.hits(run)
        if not hits:
            return []
        return [self.build(run, hits)]

    @abstractmethod
    def build(self, run: Run, hits: list[Hit]) -> Finding:
        """The finding for a run whose log holds `hits` (at least one)."""

    def signature_finding(self, hits: list[Hit], message: str, **fields: Any) -> Finding:
        evidence = signature_evidence(hits)
        evidence.update(fields.pop("evidence", {}))
        return self.finding(
            message=message,
            step=hits[0].step,
            end_step=max((h.step for h in hits if h.step is not None), default=None),
            evidence=evidence,
            **fields,
        )


def _check_window(label: str, value: int) -> None:
    if not isinstance(value, int) or value < 0:
        raise BadDetectorParameters(f"{label} must be a non-negative integer, got {value!r}")


class CudaOom(_Signature):
    """The GPU ran out of memory (CUDA OOM), with the training phase it happened in.

    What it detects:
        `CUDA out of memory`, `torch.OutOfMemoryError` / `torch.cuda.OutOfMemoryError`, and
        `RayTaskError(OutOfMemoryError)` lines. The phase is read from the traceback around the
        first one: the Ray task header (`ray::WorkerDict.actor_rollout_update_actor()`) or the
        nearest verl frame (`generate_sequences`, `compute_log_prob`, `compute_ref_log_prob`,
        `update_actor`, `update_critic`, `compute_values`). Evidence adds the allocation that
        failed and the GPU's capacity when torch printed them, and whether the reserved GPU
        memory metric climbed over the run (a leak).

    Why it matters:
        The run stops. Which phase ran out decides the fix: the rollout (vLLM's KV cache share),
        the log-prob passes (their micro batches) or the actor/critic update (the PPO micro
        batch times the sequence length).

    Example:
        (WorkerDict pid=3141) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate
        2.31 GiB. GPU 0 has a total capacity of 39.38 GiB of which 1.02 GiB is free.
        ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_update_actor()
        (pid=3141, ip=10.0.0.2, actor_id=..., repr=<verl.single_controller.ray.base.WorkerDict ...>)

    Advice:
        For the phase that ran out: the actor update → `actor.ppo_micro_batch_size_per_gpu` no
        larger than the golden formula floor(24·1024 / (max_prompt_length +
        max_response_length)) (halved when already below it); the log-prob passes →
        `rollout.log_prob_micro_batch_size_per_gpu` / `ref.log_prob_micro_batch_size_per_gpu`;
        the critic → its micro batches. Always: `rollout.gpu_memory_utilization` into the
        advised range (or 0.1 lower). When the reserved GPU memory climbed over the steps before
        the crash, suspect a vLLM KV-cache leak: `rollout.free_cache_engine=True` and
        `rollout.enforce_eager=True`.

    Known false positives:
        A worker that caught an OOM and retried with a smaller batch still prints the message;
        the finding is then about a near miss, not a crash. An OOM caused by another process on
        the same GPU looks the same.

    References:
        seed:grpo-pitfalls §1.2–1.3 (micro batch, golden formula), §4.1 (gpu_memory_utilization);
        seed:ppo-tuning §7.3 (KV-cache leak: memory climbing 45 → 48 GB, then OOM);
        tuning_knowledge.md C1, A1, A2, A9, B10.
    """

    code = "LS010"
    name = "cuda-oom"
    title = "GPU out of memory (CUDA OOM)"
    groups = ("memory", "crash")
    pattern = CUDA_OOM_RE
    keywords = CUDA_OOM_KEYS

    def __init__(
        self, *, context_before: int = 150, context_after: int = 60, leak_growth: float = 0.05
    ) -> None:
        _check_window("cuda-oom: context_before", context_before)
        _check_window("cuda-oom: context_after", context_after)
        if not (isinstance(leak_growth, (int, float)) and leak_growth > 0):
            raise BadDetectorParameters(f"cuda-oom: leak_growth must be > 0, got {leak_growth!r}")
        self.context_before = context_before
        self.context_after = context_after
        self.leak_growth = leak_growth

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
            phase = _phase(run, hit, self.context_before, self.context_after)
            if phase:
                break
        blob = "\n".join(h.text for h in hits[:50])
        evidence: dict[str, Any] = {"phase": phase}
        m = re.search(r"Tried to allocate ([\d.]+ ?[KMGT]i?B)", blob)
        if m:
            evidence["tried_to_allocate"] = m.group(1)
        m = re.search(
            r"total capacity of ([\d.]+ ?[KMGT]i?B)|([\d.]+ ?[KMGT]i?B) total capacity", blob
        )
        if m:
            evidence["gpu_capacity"] = m.group(1) or m.group(2)
        leak = self._leak(run)
        if leak:
            evidence["memory_reserved_climb"] = leak
        where_phase = f" during the {PHASE_LABELS[phase]}" if phase else ""
        message = f"CUDA out of memory{where_phase} at {where(first)}"
        if "tried_to_allocate" in evidence:
            message += f", trying to allocate {evidence['tried_to_allocate']}"
        message += f"; printed {signature_evidence(hits)['count']} time(s)."
        if leak:
            message += (
                f" {leak['metric']} climbed from {leak['start_gb']} to {leak['end_gb']} GB over "
                "the run: a leak, not a one-off peak."
            )
        return self.signature_finding(
            hits,
            message,
            evidence=evidence,
            advice=self._advice(run, phase, leak),
            references=[f"{SEED_GRPO} §1.2", f"{SEED_GRPO} §4.1", f"{SEED_PPO} §7.3"],
        )

    def _advice(self, run: Run, phase: str | None, leak: dict[str, float] | None) -> list[Advice]:
        out: list[Advice] = []
        why_micro = "Activation memory grows with micro batch × sequence length."
        if phase == "log-prob":
            out.append(
                micro_batch_advice(
                    run, f"{RO}.log_prob_micro_batch_size_per_gpu", why_micro, f"{SEED_PPO} §2.3"
                )
            )
        elif phase == "ref-log-prob":
            out.append(
                micro_batch_advice(
                    run, f"{REF}.log_prob_micro_batch_size_per_gpu", why_micro, f"{SEED_PPO} §2.3"
                )
            )
        elif phase == "update-critic":
            out.append(
                micro_batch_advice(
                    run, "critic.ppo_micro_batch_size_per_gpu", why_micro, f"{SEED_GRPO} §1.2"
                )
            )
        elif phase == "critic-values":
            out.append(
                micro_batch_advice(
                    run, "critic.forward_micro_batch_size_per_gpu", why_micro, f"{SEED_GRPO} §1.2"
                )
            )
        elif phase != "rollout":
            out.append(
                micro_batch_advice(
                    run,
                    f"{ACT}.ppo_micro_batch_size_per_gpu",
                    why_micro
                    + " Above ~12,000 tokens per GPU per micro step the OOM risk is high.",
                    f"{SEED_GRPO} §1.2",
                )
            )
        why_mem = (
            "vLLM's KV cache is too big for the rollout to leave room."
            if phase == "rollout"
            else "The memory vLLM keeps is memory the training passes cannot use."
        )
        mem = gpu_memory_advice(run, why_mem, always=True)
        if mem is not None:
            out.append(mem)
        leak_note = (
            f"Reserved GPU memory climbed {leak['start_gb']} → {leak['end_gb']} GB: "
            if leak
            else "If perf/max_memory_reserved_gb climbs slowly over the steps before an OOM, "
        )
        for key, label in (
            (f"{RO}.free_cache_engine", "free the KV cache after generation"),
            (f"{RO}.enforce_eager", "disable CUDA graphs"),
        ):
            current = current_value(run, key)
            if current is True:
                continue
            explicit_off = key.endswith("free_cache_engine") and current is False
            if leak or phase == "rollout" or explicit_off:
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


class HostOomWorkerKilled(_Signature):
    """Ray killed a worker because the node ran out of host (CPU) memory.

    What it detects:
        Ray's memory monitor lines: `(raylet) ... N Workers (tasks / actors) killed due to memory
        pressure (OOM)`, `Worker killed ... due to memory pressure (OOM)`, and
        `ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on
        memory`. Evidence: workers killed (summed over the raylet summaries), the node's memory
        use and Ray's threshold when printed, and the peak of `perf/cpu_memory_used_gb`.

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
        Ray docs, "Out-Of-Memory Prevention" (memory monitor, RAY_memory_usage_threshold);
        verl config `actor_rollout_ref.*.fsdp_config.*_offload`.
    """

    code = "LS011"
    name = "host-oom-worker-killed"
    title = "Ray killed a worker: host memory exhausted"
    groups = ("memory", "crash", "ray")
    pattern = HOST_OOM_RE
    keywords = HOST_OOM_KEYS

    def __init__(self) -> None:
        pass

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
        m = re.search(r"IP: ([0-9a-fA-F.:]+)\)", near)
        if m:
            evidence["node_ip"] = m.group(1)
        cpu = resolve(run, "cpu_mem_used")
        if cpu is not None:
            _, values = run.series(cpu)
            values = values[np.isfinite(values)]
            if len(values):
                evidence["peak_cpu_memory_used_gb"] = float(values.max())
        message = f"Ray killed worker(s) for lack of host memory at {where(hits[0])}"
        if killed:
            message += f"; {killed} worker(s) killed in total"
        if "node_memory_used_gb" in evidence:
            message += (
                f"; node memory {evidence['node_memory_used_gb']} / "
                f"{evidence['node_memory_total_gb']} GB"
            )
        message += "."
        return self.signature_finding(
            hits, message, evidence=evidence, advice=self._advice(run), references=[RAY_OOM_DOC]
        )

    def _advice(self, run: Run) -> list[Advice]:
        out: list[Advice] = []
        keys = [f"{ACT}.fsdp_config.param_offload"]
        if run.config_segments:
            keys += [f"{ACT}.fsdp_config.optimizer_offload", f"{REF}.fsdp_config.param_offload"]
        for key in keys:
            current = run.config_value(key) if run.config_segments else None
            if run.config_segments and current is not True:
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
        out.append(
            Advice(
                parameter="env:RAY_memory_usage_threshold",
                current=None,
                suggested=None,
                override=None,
                rationale=(
                    "Ray kills the most recent task above this share of host memory (0.95 by "
                    "default). Raise it (e.g. 0.98) only for a short spike; find and fix a leak "
                    "otherwise (custom reward function, dataloader workers)."
                ),
                source=RAY_OOM_DOC,
            )
        )
        return out


class RayWorkerRegistrationFailed(_Signature):
    """Ray workers could not register with the raylet, so the cluster never came up.

    What it detects:
        `Failed to register worker ... to Raylet` and `Unable to register worker with raylet`
        (often followed by `End of file`), usually printed before the first step.

    Why it matters:
        Training never starts. The seed article traces it to a Ray version conflict (verl 0.2
        wants ray ≥ 2.33, and an old protobuf in some CUDA images breaks it), not to the network;
        asking Ray for more CPUs than the node has gives the same symptom.

    Example:
        [2025-03-01 12:00:01,234 E 4321 4321] core_worker.cc:499: Failed to register worker
        01000000ffffffffffffffffffffffffffffffffffffffffffffffff to Raylet. IOError:
        [RayletClient] Unable to register worker with raylet. End of file

    Advice:
        Reinstall Ray with its dependencies: `pip install --force-reinstall "ray[default]>=2.33.0"`,
        delete `/tmp/ray`, and retry. Set `ray_init.num_cpus` to the CPUs the node really has.

    Known false positives:
        A worker that fails to register during a normal shutdown (after the last step) prints
        the same line; check the evidence's step hint.

    References:
        seed:ppo-tuning §7.1; tuning_knowledge.md C2.
    """

    code = "LS012"
    name = "ray-worker-registration-failed"
    title = "Ray worker failed to register with the raylet"
    groups = ("ray", "crash", "environment")
    pattern = RAY_REGISTER_RE
    keywords = RAY_REGISTER_KEYS

    def __init__(self) -> None:
        pass

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        eof = any("End of file" in h.text for h in hits)
        message = f"Ray could not register a worker with the raylet at {where(hits[0])}"
        message += " (End of file: usually a Ray/protobuf version conflict)." if eof else "."
        advice = [
            Advice(
                parameter="env:ray",
                current=None,
                suggested='pip install --force-reinstall "ray[default]>=2.33.0"; rm -rf /tmp/ray',
                override=None,
                rationale="Conflicting Ray/protobuf versions stop workers from registering; "
                "reinstall Ray with its extras and clear its temp dir.",
                source=f"{SEED_PPO} §7.1",
            ),
            advise(
                run,
                "ray_init.num_cpus",
                "Requesting more CPUs than the node has also stops workers from starting.",
                f"{SEED_PPO} §7.1",
                rule="the number of CPUs the node really has",
            ),
        ]
        return self.signature_finding(
            hits,
            message,
            evidence={"end_of_file": eof},
            advice=advice,
            references=[f"{SEED_PPO} §7.1"],
        )


class VllmModelInspectionFailed(_Signature):
    """vLLM could not inspect the model architecture (vLLM/transformers version mismatch).

    What it detects:
        `Model architectures ['Qwen2ForCausalLM'] failed to be inspected`, raised by vLLM when
        the rollout engine starts. Evidence names the architectures.

    Why it matters:
        The rollout engine never starts, so training cannot begin. The model is fine: the
        installed vLLM does not support it together with the installed transformers.

    Example:
        (WorkerDict pid=5521) ValueError: Model architectures ['Qwen2ForCausalLM'] failed to be
        inspected. Please check the logs for more details.

    Advice:
        Install the vLLM version your verl release pins, with a matching transformers. The seed
        article (verl 0.2 era, Qwen2) pins `vllm==0.6.3.post1` with `transformers>=4.41.0`:
        Qwen2 needs vLLM ≥ 0.6.0 and 0.6.4 had a bug.

    Known false positives:
        A real problem in a custom model's code makes vLLM print the same message; the lines
        above it in the log then show the model's own exception.

    References:
        seed:ppo-tuning §7.2; tuning_knowledge.md C3.
    """

    code = "LS013"
    name = "vllm-model-inspection-failed"
    title = "vLLM failed to inspect the model architecture"
    groups = ("vllm", "crash", "environment")
    pattern = VLLM_INSPECT_RE
    keywords = VLLM_INSPECT_KEYS

    def __init__(self) -> None:
        pass

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        archs = next((h.match.group(1) for h in hits if h.match.group(1)), None)
        what = f"Model architectures {archs}" if archs else "The model architecture"
        message = f"{what} failed to be inspected by vLLM at {where(hits[0])}: vLLM and transformers versions do not match the model."
        advice = [
            Advice(
                parameter="env:vllm",
                current=None,
                suggested='pip install "vllm==0.6.3.post1" "transformers>=4.41.0"',
                override=None,
                rationale="The article's stable pin for Qwen2 models with verl 0.2; with a newer "
                "verl, install the vLLM version that release pins instead.",
                source=f"{SEED_PPO} §7.2",
            )
        ]
        return self.signature_finding(
            hits,
            message,
            evidence={"architectures": archs},
            advice=advice,
            references=[f"{SEED_PPO} §7.2"],
        )


class NcclError(_Signature):
    """An NCCL collective failed or timed out.

    What it detects:
        `NCCL operation failed`, `NCCL error`, NCCL result codes (`ncclInternalError`,
        `ncclUnhandledCudaError`, `ncclSystemError`, …), `NCCL communicator was aborted`, and
        the process-group watchdog's `Watchdog caught collective operation timeout:
        WorkNCCL(... OpType=ALLGATHER ... Timeout(ms)=600000)`. Evidence: error or timeout,
        the collective and its timeout when printed, and whether a CUDA OOM was logged too.

    Why it matters:
        A failed collective stops every rank. With vLLM colocated, a too-large
        `gpu_memory_utilization` leaves FSDP's communication buffers without memory; a watchdog
        timeout means one rank stopped answering (crashed, hung, or much slower than the rest).

    Example:
        (WorkerDict pid=812) torch.distributed.DistBackendError: NCCL error in:
        ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled cuda error, NCCL version 2.20.5
        ncclUnhandledCudaError: Call to CUDA function failed.

    Advice:
        Lower `actor_rollout_ref.rollout.gpu_memory_utilization` into the advised range (or 0.1
        below the current value) so FSDP has room for its buffers. For a timeout, look for the
        rank that failed first (often a CUDA OOM, reported separately).

    Known false positives:
        A job killed from outside (preemption, Ctrl-C on one node) makes the surviving ranks
        report NCCL errors; the NCCL error is then a consequence.

    References:
        seed:grpo-pitfalls §4.1 (FSDP buffers starved → NCCL operation failed);
        tuning_knowledge.md C4.
    """

    code = "LS014"
    name = "nccl-error"
    title = "NCCL communication error or timeout"
    groups = ("distributed", "crash")
    pattern = NCCL_RE
    keywords = NCCL_KEYS

    def __init__(self) -> None:
        pass

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        timeout = any("timeout" in h.text.lower() for h in hits)
        evidence: dict[str, Any] = {"kind": "timeout" if timeout else "error"}
        blob = "\n".join(h.text for h in hits)
        m = re.search(r"OpType=(\w+)", blob)
        if m:
            evidence["collective"] = m.group(1)
        m = re.search(r"Timeout\(ms\)=(\d+)", blob)
        if m:
            evidence["timeout_ms"] = int(m.group(1))
        oom = find_lines(run, CUDA_OOM_RE, CUDA_OOM_KEYS)
        evidence["cuda_oom_logged"] = bool(oom)
        what = "NCCL collective timed out" if timeout else "NCCL operation failed"
        message = (
            f"{what} at {where(hits[0])}; printed {signature_evidence(hits)['count']} time(s)."
        )
        if oom:
            message += (
                f" A CUDA OOM is logged too (line {oom[0].line_no}): probably the root cause."
            )
        mem = gpu_memory_advice(
            run,
            "NCCL failures with vLLM colocated usually mean FSDP's communication buffers are starved.",
            always=True,
        )
        return self.signature_finding(
            hits,
            message,
            evidence=evidence,
            advice=[mem] if mem else [],
            references=[f"{SEED_GRPO} §4.1"],
        )


def _divisor_at_most(n: int, limit: int) -> int:
    """The largest divisor of n that is ≤ limit (at least 1)."""
    for d in range(max(1, min(n, limit)), 0, -1):
        if n % d == 0:
            return d
    return 1


def _batch_for(tbs: int, n: int, unit: int) -> int:
    """A train_batch_size near `tbs` (not above it unless needed) with tbs × n divisible by unit."""
    step = unit // math.gcd(n, unit)
    return max(step, tbs // step * step)


class BatchSizeDivisibilityError(_Signature):
    """verl refused the batch sizes: they do not divide as its checks require.

    What it detects:
        verl's batch-size checks (verl_formats.md §6): `real_train_batch_size (X) must be
        divisible by minimal possible batch size (Y)` (0.4+), `... must be divisible by total
        n_gpus (N).` (0.2–0.3), `only support equal chunk. Got size of DataProto X and chunk Y`,
        `train_batch_size (X) must be >= actor.ppo_mini_batch_size (Y)`, `normalized
        ppo_mini_batch_size A should be divisible by / larger than ppo_micro_batch_size_per_gpu
        B`, `ppo_mini_batch_size A should be larger than 0 after normalization`, the legacy
        `ppo_mini_batch_size (A) must be divisible by ppo_micro_batch_size (B)`,
        `train_batch_size (X) must be divisible by parameter_sync_step (Y)`, and the seed
        article's `batch_size must be divisible by n`. The numbers go into the evidence.

    Why it matters:
        The run stops at start-up (or at the first step, for the chunk check). The fix is
        arithmetic, and logscope can do it from the numbers in the message and the run's
        config.

    Example:
        ray.exceptions.RayTaskError(AssertionError): ray::TaskRunner.run() (pid=1201, ...)
        AssertionError: real_train_batch_size (1020) must be divisible by minimal possible batch
        size (8)

    Advice:
        For `real_train_batch_size = train_batch_size × rollout.n` not divisible by Y (the
        GPU count, or the chunk count): the nearest `data.train_batch_size` at or below the
        current one that makes the product divisible. For the mini/micro checks: a
        `ppo_micro_batch_size_per_gpu` that divides the normalized mini batch, or a larger
        `ppo_mini_batch_size`. For the article's message: a train batch that is a multiple of
        `rollout.n`.

    Known false positives:
        The same messages come from critic and reference workers; the advice names the actor's
        keys unless the traceback mentions the critic.

    References:
        verl:trainer/ppo/ray_trainer.py (`_validate_config`), verl:utils/config.py,
        verl:workers/fsdp_workers.py, verl:protocol.py (`DataProto.chunk`);
        seed:grpo-pitfalls §2.3; tuning_knowledge.md A6, C6.
    """

    code = "LS015"
    name = "batch-size-divisibility-error"
    title = "Batch sizes rejected by verl's divisibility checks"
    groups = ("config", "crash")
    pattern = BATCH_RE
    keywords = BATCH_KEYS

    def __init__(self) -> None:
        pass

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        first = hits[0]
        kind, numbers = "unknown", []
        for k, pattern in BATCH_PATTERNS:
            m = pattern.search(first.text)
            if m:
                kind, numbers = k, _ints(m)
                break
        near = context(run, first.line_no, 40, 40)
        role = (
            "critic"
            if re.search(r"critic", near, re.I) and kind.startswith(("mini", "legacy"))
            else "actor"
        )
        evidence: dict[str, Any] = {"check": kind, "numbers": numbers}
        advice, detail = self._advice(run, kind, numbers, role, evidence)
        message = (
            f"verl rejected the batch sizes at {where(first)}: {quote(first.match.group(0), 160)}."
        )
        if detail:
            message += f" {detail}"
        return self.signature_finding(
            hits,
            message,
            evidence=evidence,
            advice=advice,
            references=["verl:trainer/ppo/ray_trainer.py", f"{SEED_GRPO} §2.3"],
        )

    def _advice(
        self, run: Run, kind: str, numbers: list[int], role: str, evidence: dict[str, Any]
    ) -> tuple[list[Advice], str]:
        cfg = bool(run.config_segments)
        tbs = current_value(run, "data.train_batch_size") if cfg else None
        n = current_value(run, f"{RO}.n") if cfg else None
        tbs = tbs if isinstance(tbs, int) and tbs > 0 else None
        n = n if isinstance(n, int) and n > 0 else None
        source = "verl:trainer/ppo/ray_trainer.py"
        if any(x <= 0 for x in numbers):
            # a zero size in the message: nothing to compute, point at the batch settings
            return [
                advise(
                    run,
                    "data.train_batch_size",
                    "verl's batch-size check failed with a zero size; check the train, mini and "
                    "micro batch sizes against rollout.n and the number of GPUs.",
                    source,
                    rule="train_batch_size ≥ ppo_mini_batch_size ≥ micro batch, all > 0",
                )
            ], ""
        if kind in ("real-batch-minimal", "real-batch-n-gpus", "equal-chunk"):
            real, unit = numbers
            evidence.update(real_train_batch_size=real, divisor=unit)
            if n is None and tbs:
                n = real // tbs if real % tbs == 0 else None
            if tbs is None and n and real % n == 0:
                tbs = real // n
            evidence["nearest_real_batch_sizes"] = sorted(
                {max(unit, real // unit * unit), (real // unit + 1) * unit}
            )
            if tbs and n:
                suggested = _batch_for(tbs, n, unit)
                evidence["suggested_train_batch_size"] = suggested
                detail = (
                    f"train_batch_size {tbs} × rollout.n {n} = {tbs * n} is not a multiple of {unit}; "
                    f"train_batch_size={suggested} gives {suggested * n}."
                )
            else:
                suggested = None
                detail = f"{real} is not a multiple of {unit}."
            advice = advise(
                run,
                "data.train_batch_size",
                f"verl needs train_batch_size × rollout.n to be a multiple of {unit} (the number of GPUs / data-parallel chunks).",
                source,
                suggest=suggested,
                rule=f"train_batch_size × rollout.n divisible by {unit}",
            )
            return [advice], detail
        if kind == "train-lt-mini":
            train, mini = numbers
            evidence.update(train_batch_size=train, ppo_mini_batch_size=mini)
            return [
                advise(
                    run,
                    f"{ACT}.ppo_mini_batch_size",
                    f"A mini batch cannot be larger than the train batch ({train} prompts); a "
                    f"divisor of it also avoids silently dropped samples (A7).",
                    source,
                    suggest=train,
                ),
                advise(
                    run,
                    "data.train_batch_size",
                    "Or raise the train batch to at least the mini batch.",
                    source,
                    suggest=mini,
                ),
            ], f"train_batch_size {train} < ppo_mini_batch_size {mini}."
        if kind in ("mini-micro-divisible", "mini-lt-micro", "legacy-mini-micro"):
            mini, micro = numbers
            suggested = _divisor_at_most(mini, micro)
            evidence.update(
                ppo_mini_batch_size=mini,
                ppo_micro_batch_size=micro,
                suggested_micro_batch=suggested,
            )
            base = ACT if role == "actor" else "critic"
            key = (
                f"{base}.ppo_micro_batch_size"
                if kind == "legacy-mini-micro"
                else f"{base}.ppo_micro_batch_size_per_gpu"
            )
            return [
                advise(
                    run,
                    key,
                    f"The (normalized) mini batch {mini} must split into whole micro batches; "
                    f"{suggested} is the largest divisor of {mini} not above {micro}.",
                    "verl:workers/fsdp_workers.py",
                    suggest=suggested,
                )
            ], f"Use a micro batch of {suggested}."
        if kind == "mini-zero":
            (mini,) = numbers
            gpus = verl_config.n_gpus(run.config()) if cfg else None
            suggested = math.ceil(gpus / (n or 1)) if gpus else None
            evidence.update(ppo_mini_batch_size=mini, n_gpus=gpus)
            return [
                advise(
                    run,
                    f"{ACT}.ppo_mini_batch_size",
                    "ppo_mini_batch_size × rollout.n is divided by the GPU count; it must stay ≥ 1.",
                    "verl:workers/fsdp_workers.py",
                    suggest=suggested,
                    rule="ppo_mini_batch_size × rollout.n ≥ number of GPUs",
                )
            ], ""
        if kind == "sync-step":
            train, sync = numbers
            suggested = max(sync, train // sync * sync)
            evidence.update(train_batch_size=train, parameter_sync_step=sync)
            return [
                advise(
                    run,
                    "data.train_batch_size",
                    f"Must be a multiple of parameter_sync_step ({sync}).",
                    source,
                    suggest=suggested,
                )
            ], f"train_batch_size={suggested} works."
        # the article's wording: batch must be a multiple of n
        suggested = tbs // n * n if tbs and n and tbs >= n else (n if n else None)
        return [
            advise(
                run,
                "data.train_batch_size",
                "data.train_batch_size must be a multiple of rollout.n.",
                f"{SEED_GRPO} §2.3",
                suggest=suggested,
                rule="a multiple of actor_rollout_ref.rollout.n",
            )
        ], ""


class GradNormNotFiniteStepSkipped(_Signature):
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
        As for NaN/inf metrics: lower `rollout.gpu_memory_utilization` when above the advised
        range, clip gradients at 0.5 (`actor.grad_clip` / `actor.optim.clip_grad`), and halve
        `actor.optim.lr`.

    Known false positives:
        Mixed-precision loss scaling can produce an occasional inf gradient by design (the
        scaler then lowers its scale); a handful of isolated warnings early in training is
        normal there.

    References:
        verl workers/actor/dp_actor.py (step skipped on a non-finite grad norm);
        seed:grpo-pitfalls §4.1; tuning_knowledge.md B11.
    """

    code = "LS016"
    name = "grad-norm-not-finite-step-skipped"
    title = "Optimizer steps skipped: gradient norm not finite"
    default_severity = "warning"
    groups = ("numerics",)
    pattern = GRAD_NORM_RE
    keywords = GRAD_NORM_KEYS

    def __init__(self, *, error_steps: int = 5, error_consecutive: int = 3) -> None:
        for label, value in (
            ("error_steps", error_steps),
            ("error_consecutive", error_consecutive),
        ):
            if not isinstance(value, int) or value < 1:
                raise BadDetectorParameters(
                    f"grad-norm-not-finite-step-skipped: {label} must be an integer ≥ 1, got {value!r}"
                )
        self.error_steps = error_steps
        self.error_consecutive = error_consecutive

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        steps = sorted({h.step for h in hits if h.step is not None})
        ranks = sorted({int(h.match.group(1)) for h in hits if h.match.group(1)})
        longest = max((b - a + 1 for a, b in iter_windows(steps)), default=0)
        distinct = len(steps) if steps else len(hits)
        many = distinct >= self.error_steps or longest >= self.error_consecutive
        values = sorted({h.match.group(2) for h in hits})
        count = signature_evidence(hits)["count"]
        # A reader may keep only the first N identical events; it counts all of them in meta.
        counted = (run.meta.get("event_counts") or {}).get("grad-norm-not-finite", 0)
        extra: dict[str, Any] = {}
        if isinstance(counted, int) and counted > count:
            extra = {"count": counted, "count_kept_as_events": count}
            count = counted
            many = True if counted >= 2 * self.error_steps else many
        if steps:
            span = f"on {len(steps)} step(s) (step hints {steps[0]}–{steps[-1]}, longest run {longest})"
        else:
            span = f"{len(hits)} time(s)"
        message = f"verl skipped optimizer steps because grad_norm was {'/'.join(values)}: {count} warning line(s) {span}, first at {where(hits[0])}."
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
            references=["verl:workers/actor/dp_actor.py", f"{SEED_GRPO} §4.1"],
        )


KV_CACHE_RE = re.compile(r"No available memory for the cache blocks")
KV_CACHE_KEYS = ("No available memory for the cache blocks",)
PROMPT_LONG_RE = re.compile(r"Prompt length (\d+) is longer than (\d+)")
PROMPT_LONG_KEYS = ("Prompt length",)
CHUNKED_PREFILL_RE = re.compile(
    r"max_num_batched_tokens(?: \(?(\d+)\)?)? is smaller than max_model_len(?: \(?(\d+)\)?)?"
)
CHUNKED_PREFILL_KEYS = ("max_num_batched_tokens",)


class VllmKvCacheNoMemory(_Signature):
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
        verl_formats.md §6 (`.rollout.gpu_memory_utilization`); seed:grpo-pitfalls §4
        (advised ranges); seed:ppo-tuning §5.3 (tensor parallel rollout).
    """

    code = "LS018"
    name = "vllm-kv-cache-no-memory"
    title = "vLLM has no memory left for its KV cache"
    groups = ("memory", "vllm", "crash")
    pattern = KV_CACHE_RE
    keywords = KV_CACHE_KEYS

    def __init__(self, *, max_utilization: float = 0.7) -> None:
        if not (isinstance(max_utilization, (int, float)) and 0 < max_utilization <= 1):
            raise BadDetectorParameters(
                f"vllm-kv-cache-no-memory: max_utilization must be in (0, 1], got {max_utilization!r}"
            )
        self.max_utilization = max_utilization

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
            hits, message, advice=advice, references=["verl_formats.md §6", f"{SEED_GRPO} §4"]
        )


class PromptTooLong(_Signature):
    """A prompt is longer than `data.max_prompt_length` and the dataset refuses to truncate it.

    What it detects:
        verl's dataset error `Prompt length N is longer than M.` (raised with the default
        `data.truncation='error'`). Evidence: the longest prompt seen in the messages and the
        limit.

    Why it matters:
        The run stops at the first batch holding such a prompt, which can be many steps in
        when the data is shuffled.

    Example:
        (TaskRunner pid=1201) RuntimeError: Prompt length 1311 is longer than 1024.

    Advice:
        Raise `data.max_prompt_length` to cover the prompt (rounded up to a multiple of 64), or
        drop such prompts with `data.filter_overlong_prompts=True`, or truncate them with
        `data.truncation=left`. A longer prompt budget means more memory per sequence: check
        the micro batch against the golden formula afterwards.

    Known false positives:
        None known: the message is only raised for this.

    References:
        verl_formats.md §6 (`data.max_prompt_length`, verl utils/dataset/rl_dataset.py).
    """

    code = "LS019"
    name = "prompt-too-long"
    title = "Prompt longer than data.max_prompt_length"
    groups = ("config", "data", "crash")
    pattern = PROMPT_LONG_RE
    keywords = PROMPT_LONG_KEYS

    def __init__(self) -> None:
        pass

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        lengths = [int(h.match.group(1)) for h in hits]
        limit = int(hits[0].match.group(2))
        longest = max(lengths)
        suggested = -(-longest // 64) * 64
        message = (
            f"A prompt of {longest} tokens is longer than data.max_prompt_length={limit} "
            f"at {where(hits[0])}."
        )
        advice = [
            advise(
                run,
                "data.max_prompt_length",
                f"Covers the longest prompt seen ({longest} tokens).",
                "verl:utils/dataset/rl_dataset.py",
                suggest=suggested,
            ),
            advise(
                run,
                "data.filter_overlong_prompts",
                "Or drop the prompts that do not fit (verl's default is false).",
                "verl:utils/dataset/rl_dataset.py",
                suggest=True,
            ),
        ]
        return self.signature_finding(
            hits,
            message,
            evidence={"prompt_length": longest, "max_prompt_length": limit},
            advice=advice,
            references=["verl:utils/dataset/rl_dataset.py"],
        )


class MaxNumBatchedTokensTooSmall(_Signature):
    """vLLM refused `rollout.max_num_batched_tokens` smaller than the model length with chunked prefill off.

    What it detects:
        vLLM's `Enable chunked prefill, max_num_batched_tokens is smaller than max_model_len,
        please increase max_num_batched_tokens or disable chunked prefill` (and the variant with
        the numbers in brackets).

    Why it matters:
        The rollout engine does not start. verl sets vLLM's max_model_len from the prompt and
        response lengths, so raising those lengths without raising
        `max_num_batched_tokens` triggers it.

    Example:
        (WorkerDict pid=5521) ValueError: Enable chunked prefill, max_num_batched_tokens is
        smaller than max_model_len, please increase max_num_batched_tokens or disable chunked
        prefill

    Advice:
        Set `actor_rollout_ref.rollout.max_num_batched_tokens` to at least
        `data.max_prompt_length + data.max_response_length` (rounded up to a multiple of 1024),
        and keep `max_num_seqs` in step with it (seed: 8192/1024 → 16384/1896 gave +22%
        throughput on GSM8K).

    Known false positives:
        None known.

    References:
        verl_formats.md §6 (0.5 vLLM rollout); seed:ppo-tuning §2.2.
    """

    code = "LS020"
    name = "max-num-batched-tokens-too-small"
    title = "rollout.max_num_batched_tokens below the model length"
    groups = ("config", "vllm", "crash")
    pattern = CHUNKED_PREFILL_RE
    keywords = CHUNKED_PREFILL_KEYS

    def __init__(self) -> None:
        pass

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        m = hits[0].match
        evidence: dict[str, Any] = {}
        if m.group(1) and m.group(2):
            evidence.update(max_num_batched_tokens=int(m.group(1)), max_model_len=int(m.group(2)))
        need = evidence.get("max_model_len")
        if need is None and run.config_segments:
            prompt = current_value(run, "data.max_prompt_length")
            response = current_value(run, "data.max_response_length")
            if isinstance(prompt, int) and isinstance(response, int):
                need = prompt + response
        suggested = -(-need // 1024) * 1024 if need else None
        message = (
            f"vLLM rejected max_num_batched_tokens below max_model_len at {where(hits[0])}"
            + (f" (needs ≥ {need})." if need else ".")
        )
        advice = [
            advise(
                run,
                f"{RO}.max_num_batched_tokens",
                "Must cover one whole sequence (prompt + response) when chunked prefill is off.",
                f"{SEED_PPO} §2.2",
                suggest=suggested,
                rule="≥ data.max_prompt_length + data.max_response_length",
            )
        ]
        return self.signature_finding(
            hits, message, evidence=evidence, advice=advice, references=[f"{SEED_PPO} §2.2"]
        )


DEVICE_MISMATCH_RE = re.compile(r"Expected all tensors to be on the same device")
DEVICE_MISMATCH_KEYS = ("Expected all tensors to be on the same device",)


class TensorsOnDifferentDevices(_Signature):
    """A tensor op mixed devices (`Expected all tensors to be on the same device`).

    What it detects:
        PyTorch's `RuntimeError: Expected all tensors to be on the same device, but found at
        least two devices, cuda:0 and cpu!` anywhere in the log. Evidence names the devices.

    Why it matters:
        The run stops at the op. The seed article ties it to an actor micro batch that is not a
        multiple of the rollout tensor-parallel size (A4); other causes are CPU offload of
        parameters meeting GPU inputs, or custom reward/model code that forgets `.to(device)`.

    Example:
        (WorkerDict pid=3141) RuntimeError: Expected all tensors to be on the same device, but
        found at least two devices, cuda:0 and cpu!

    Advice:
        Make `actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu` a multiple of
        `actor_rollout_ref.rollout.tensor_model_parallel_size` (the article's rule; verl does not
        enforce it). If it already is, look at offload settings and custom code in the
        traceback.

    Known false positives:
        The message comes from any device mix-up, many unrelated to batch sizes; the advice is
        the article's, for the case it describes.

    References:
        seed:grpo-pitfalls §1.2; tuning_knowledge.md A4, C5.
    """

    code = "LS021"
    name = "tensors-on-different-devices"
    title = "Tensors on different devices"
    groups = ("crash", "config")
    pattern = DEVICE_MISMATCH_RE
    keywords = DEVICE_MISMATCH_KEYS

    def __init__(self) -> None:
        pass

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        m = re.search(r"devices?, (\S+) and (\S+?)!?$", hits[0].text)
        devices = [m.group(1), m.group(2)] if m else []
        micro = current_value(run, f"{ACT}.ppo_micro_batch_size_per_gpu")
        tp = current_value(run, f"{RO}.tensor_model_parallel_size")
        suggested = None
        evidence: dict[str, Any] = {"devices": devices}
        if isinstance(micro, int) and isinstance(tp, int) and micro > 0 and tp > 0:
            evidence.update(ppo_micro_batch_size_per_gpu=micro, tensor_model_parallel_size=tp)
            if micro % tp:
                suggested = max(tp, micro // tp * tp)
        message = f"Tensors on different devices at {where(hits[0])}" + (
            f" ({' and '.join(devices)})." if devices else "."
        )
        if suggested is not None:
            message += f" The micro batch {micro} is not a multiple of the rollout TP size {tp}."
        advice = [
            advise(
                run,
                f"{ACT}.ppo_micro_batch_size_per_gpu",
                "The seed article ties this error to a micro batch that is not a multiple of the "
                "rollout tensor-parallel size.",
                f"{SEED_GRPO} §1.2",
                suggest=suggested,
                rule="a multiple of actor_rollout_ref.rollout.tensor_model_parallel_size",
            )
        ]
        return self.signature_finding(
            hits, message, evidence=evidence, advice=advice, references=[f"{SEED_GRPO} §1.2"]
        )


# Signatures that explain a crash on their own; run-crashed stays silent when one is present.
SPECIFIC_CRASH_RES: tuple[re.Pattern[str], ...] = (
    CUDA_OOM_RE,
    HOST_OOM_RE,
    RAY_REGISTER_RE,
    VLLM_INSPECT_RE,
    NCCL_RE,
    BATCH_RE,
    KV_CACHE_RE,
    PROMPT_LONG_RE,
    CHUNKED_PREFILL_RE,
    DEVICE_MISMATCH_RE,
)
# The shell's report of a process killed by a signal (`bash: line 3: 4242 Killed  python3 …`).
KILLED_RE = re.compile(
    r"^(?:.*\b\d+ )?(Killed|Segmentation fault|Aborted|Bus error)(?: \(core dumped\))?(?:\s{2,}\S.*)?$"
    r"|^(Fatal Python error): "
)
KILLED_KEYS = ("Killed", "Segmentation fault", "Aborted", "Bus error", "Fatal Python error")
SPECIFIC_CRASH_RE = re.compile("|".join(f"(?:{p.pattern})" for p in SPECIFIC_CRASH_RES))
SPECIFIC_CRASH_KEYS = (
    *CUDA_OOM_KEYS,
    *HOST_OOM_KEYS,
    *RAY_REGISTER_KEYS,
    *VLLM_INSPECT_KEYS,
    *NCCL_KEYS,
    *BATCH_KEYS,
    *KV_CACHE_KEYS,
    *PROMPT_LONG_KEYS,
    *CHUNKED_PREFILL_KEYS,
    *DEVICE_MISMATCH_KEYS,
)


class RunCrashed(Detector):
    """The run ended with an exception that no more specific diagnosis explains.

    What it detects:
        A Python traceback (`Traceback (most recent call last):`), a Ray
        `RayTaskError(...)` or Hydra's `Error executing job with overrides` after which no
        training step was logged, when none of the specific signatures (cuda-oom,
        host-oom-worker-killed, ray-worker-registration-failed, vllm-model-inspection-failed,
        nccl-error, batch-size-divisibility-error, vllm-kv-cache-no-memory, prompt-too-long,
        max-num-batched-tokens-too-small, tensors-on-different-devices) is in the log. Evidence: the exception type
        and message (the last exception line of the last traceback), its line, and how many
        tracebacks the log holds. A `KeyboardInterrupt` is reported as a warning (stopped by
        hand). The shell's `Killed` / `Segmentation fault (core dumped)` / `Aborted` line and
        `Fatal Python error:` count as a crash too (the process died without a traceback).

    Why it matters:
        The run did not finish. The exception's last line is usually what to search for; the
        step it stopped at tells how much compute was lost.

    Example:
        (TaskRunner pid=2231) Traceback (most recent call last):
        (TaskRunner pid=2231)   File "verl/trainer/ppo/ray_trainer.py", line 1021, in fit
        (TaskRunner pid=2231) KeyError: 'acc'

    Advice:
        No parameter advice: read the quoted exception and the traceback above it. A crash that
        happens right after a config change or at the first validation is usually the change
        or the reward function.

    Known false positives:
        A traceback printed and survived at the very end of a finished run (e.g. in a W&B or
        Ray shutdown hook) is reported as a crash.

    References:
        verl_formats.md §1.4 (Ray traceback shape) and §6 (where config errors surface).
    """

    code = "LS017"
    name = "run-crashed"
    title = "Run ended with an unexplained exception"
    reads = "events"
    default_severity = "error"
    groups = ("crash",)

    def __init__(self) -> None:
        pass

    def detect(self, run: Run) -> list[Finding]:
        lines = log_lines(run)
        starts = [
            i
            for i, x in enumerate(lines)
            if ("Traceback" in x.text or "Error" in x.text) and TRACEBACK_RE.search(x.text)
        ]
        kills = [
            i
            for i, x in enumerate(lines)
            if any(k in x.text for k in KILLED_KEYS) and KILLED_RE.search(x.text)
        ]
        if not starts and not kills:
            return []
        if find_lines(run, SPECIFIC_CRASH_RE, SPECIFIC_CRASH_KEYS):
            return []
        steps = run.steps
        last_step = int(steps[-1]) if len(steps) else None
        last_index = max(starts[-1] if starts else -1, kills[-1] if kills else -1)
        last = lines[last_index]
        if last_step is not None and last.step is not None and last.step < last_step:
            return []  # training went on after the last traceback
        if kills and last_index == kills[-1]:
            return [self._killed(last, last_step)]
        exc = self._exception(lines, max(0, starts[-1] - 2))
        exc_type = exc[0] if exc else None
        exc_msg = exc[1] if exc else None
        exc_line = exc[2] if exc else last
        interrupted = bool(exc_type and exc_type.endswith("KeyboardInterrupt"))
        at = f"line {exc_line.line_no}"
        after = (
            f", after step {exc_line.step}"
            if exc_line.step is not None
            else ", before any step was logged"
        )
        if interrupted:
            message = f"The run was interrupted (KeyboardInterrupt) at {at}{after}."
        elif exc_type:
            message = (
                f"The run crashed with {exc_type}"
                + (f": {quote(exc_msg, 200)}" if exc_msg else "")
                + f" ({at}{after})."
            )
        else:
            message = f"The run ended in a traceback at {at}{after}."
        evidence = {
            "exception_type": exc_type,
            "exception_message": quote(exc_msg) if exc_msg else None,
            "line": exc_line.line_no,
            "quote": quote(exc_line.text),
            "tracebacks": sum("Traceback" in lines[i].text for i in starts),
            "last_step_logged": last_step,
        }
        return [
            self.finding(
                severity="warning" if interrupted else "error",
                message=message,
                step=exc_line.step,
                evidence=evidence,
                references=["verl_formats.md §1.4"],
            )
        ]

    def _killed(self, line: LogLine, last_step: int | None) -> Finding:
        m = KILLED_RE.search(line.text)
        what = next(g for g in m.groups() if g) if m else "Killed"
        signal = {"Killed": "SIGKILL", "Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT"}.get(
            what, what
        )
        after = (
            f", after step {line.step}" if line.step is not None else ", before any step was logged"
        )
        hint = (
            " A bare SIGKILL is usually the Linux OOM killer (host memory, see "
            "host-oom-worker-killed) or the job scheduler."
            if signal == "SIGKILL"
            else ""
        )
        return self.finding(
            message=f"The process died ({what}) at line {line.line_no}{after}.{hint}",
            step=line.step,
            evidence={
                "exception_type": signal,
                "exception_message": None,
                "line": line.line_no,
                "quote": quote(line.text),
                "tracebacks": 0,
                "last_step_logged": last_step,
            },
            references=["verl_formats.md §1.4"],
        )

    @staticmethod
    def _exception(lines: list[LogLine], first: int) -> tuple[str, str | None, LogLine] | None:
        """The last exception line from index `first` on (the last traceback, and a line before)."""
        found = None
        for x in lines[first:]:
            m = EXCEPTION_RE.match(x.text)
            if m:
                found = (m.group("type"), m.group("msg"), x)
        return found
