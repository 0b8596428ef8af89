"""Log-signature machinery shared by the event-reading detectors: patterns, the base class.

Each signature detector reads `Run.events` and matches the text of each line with its own
patterns (not the reader's event kinds), so a log holding only a crash still gets its
diagnosis. One finding per signature: first occurrence (line, last step logged before it), how
often it was printed, and the matched line quoted.
"""

from __future__ import annotations

import math
import re
from abc import abstractmethod
from typing import Any, ClassVar

from logscope.detector import Detector
from logscope.exceptions import BadDetectorParameters
from logscope.model import Finding, Run

from ._common import (
    Hit,
    find_lines,
    signature_evidence,
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


def _phase_named(text: str) -> str | None:
    """The first phase whose worker-method pattern occurs in `text`."""
    return next((phase for pattern, phase in PHASES if pattern.search(text)), None)


def phase_of(run: Run, hit: Hit, before: int, after: int) -> str | None:
    """The training phase of a traceback near `hit`: Ray task header first, else nearest frame."""
    headers: list[tuple[int, str]] = []
    frames: list[tuple[int, str]] = []
    for line in window(run, hit.line_no, before, after):
        distance = abs(line.line_no - hit.line_no)
        for m in RAY_HEADER_RE.finditer(line.text):
            if phase := _phase_named(m.group(1)):
                headers.append((distance, phase))
        if not headers and (phase := _phase_named(line.text)):
            frames.append((distance, phase))
    chosen = headers or frames
    return min(chosen)[1] if chosen else None


def ints_of(m: re.Match[str]) -> list[int]:
    return [int(g) for g in m.groups() if g is not None and g.isdigit()]


class SignatureDetector(Detector):
    """Base for log-signature detectors: find lines, build one finding."""

    reads = "events"
    default_severity = "error"
    pattern: ClassVar[re.Pattern[str]]
    keywords: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        """No tunables; a subclass that has some declares them as keyword arguments."""

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


def check_window(label: str, value: int) -> None:
    if not isinstance(value, int) or value < 0:
        raise BadDetectorParameters(f"{label} must be a non-negative integer, got {value!r}")


def batch_for(tbs: int, n: int, unit: int) -> int:
    """A train_batch_size near `tbs` (not above it unless needed) with tbs × n divisible by unit."""
    step = unit // math.gcd(n, unit)
    return max(step, tbs // step * step)


KV_CACHE_RE = re.compile(r"No available memory for the cache blocks")
KV_CACHE_KEYS = ("No available memory for the cache blocks",)
PROMPT_LONG_RE = re.compile(r"Prompt length (\d+) is longer than (\d+)")
PROMPT_LONG_KEYS = ("Prompt length",)
CHUNKED_PREFILL_RE = re.compile(
    r"max_num_batched_tokens(?: \(?(\d+)\)?)? is smaller than max_model_len(?: \(?(\d+)\)?)?"
)
CHUNKED_PREFILL_KEYS = ("max_num_batched_tokens",)
DEVICE_MISMATCH_RE = re.compile(r"Expected all tensors to be on the same device")
DEVICE_MISMATCH_KEYS = ("Expected all tensors to be on the same device",)


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
