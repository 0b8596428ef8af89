"""Log-signature machinery shared by the event-reading detectors: patterns, phases, the base class.

Each signature detector reads `Run.events` and matches the text of each line with its own
patterns (not the reader's event kinds), so a log holding only a crash still gets its
diagnosis. One finding per signature: first occurrence (line, last step logged before it), how
often it was printed, and the matched line quoted.

`SIGNATURES` lists every fatal signature once, in root-cause order, with the diagnosis that
reports it; the crash story (`_crash_story.py`) reads the same table. `phase_at` names the
training phase of a traceback from its frames and Ray task headers; every crash detector uses it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from logscope.detector import Detector
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
    r"CUDA out of memory|(?i:CUDA error: out of memory)|torch\.(?:cuda\.)?OutOfMemoryError"
    r"|RayTaskError\(OutOfMemoryError\)|\bOutOfMemoryError: CUDA|CUDA_ERROR_OUT_OF_MEMORY"
)
HOST_OOM_RE = re.compile(
    r"killed due to memory pressure \(OOM\)|ray\.exceptions\.OutOfMemoryError"
    r"|Task was killed due to the node running low on memory"
    r"|Out of memory: Killed process|Memory cgroup out of memory"
)
RAY_REGISTER_RE = re.compile(r"(?:Failed|Unable) to register worker\b")
VLLM_INSPECT_RE = re.compile(
    r"Model architectures? (\[[^\]]*\]) failed to be inspected|failed to be inspected"
)
# torch.distributed's `DistBackendError` is an error of the process group's backend: NCCL for a
# GPU job (Ray's `RayTaskError(DistBackendError)` header alone names it when the message is cut).
NCCL_RE = re.compile(
    r"NCCL operation failed|NCCL error|nccl(?:InternalError|UnhandledCudaError|SystemError"
    r"|InvalidUsage|InvalidArgument|RemoteError)|Watchdog caught collective operation timeout"
    r"|NCCL communicator was aborted|NCCL (?:watchdog )?timeout"
    r"|NCCL is not available|Distributed package doesn't have NCCL built in"
    r"|RayTaskError\(DistBackendError\)|^(?:torch\.distributed\.)?DistBackendError\b"
)
# Ascend NPUs' collective library (torch_npu's `HCCL function error: hcclCommInitRootInfoConfig(…),
# error code is 4`, the device log's `ERR02200 DIST call hccl api failed`).
HCCL_RE = re.compile(
    r"HCCL function error|HCCL error in:|call hccl api failed|\bHCCL_E_[A-Z_]+"
    r"|\bhccl\w+\(.*\), error code is \d+"
    r"|HCCL (?:watchdog )?timeout|ProcessGroupHCCL\b.*\b(?:[Tt]imeout|[Ee]rror)"
)
# torch.distributed's rendezvous store (c10d TCPStore, hosted by rank 0). Only its errors: the
# `[W socket.cpp] … The client socket has failed to connect to …` warning is a retry, often
# benign, and the NCCL heartbeat's `Failed to check the "should dump" flag on TCPStore` warning
# (its stack runs through `TCPStore::check`) is printed at every teardown.
DIST_STORE_RE = re.compile(
    r"\bDist(?:Store|Network)Error\b|c10d::TCPStore::(?!check\b)\w+"
    r"|The client socket has timed out after|The server socket has failed to (?:listen|bind)"
)
# What nccl-error searches: any of the three.
DIST_RE = re.compile("|".join(f"(?:{p.pattern})" for p in (NCCL_RE, HCCL_RE, DIST_STORE_RE)))
ACTOR_DIED_RE = re.compile(
    r"ActorDiedError|RayActorError|The actor died unexpectedly|The actor is dead because"
    r"|A worker died or was killed\b|Owner's node has crashed|WorkerCrashedError"
    r"|The worker died unexpectedly"
)
VLLM_ENGINE_RE = re.compile(
    r"^Process EngineCore_\w*:|EngineCore failed to start|Engine core initialization failed"
    r"|\bEngineDeadError\b|EngineCore encountered (?:a fatal error|an issue)"
)
# vLLM's dtype check on a GPU older than Ampere (V100, T4): bf16 needs compute capability 8.0.
BF16_GPU_RE = re.compile(
    r"Bfloat16 is only supported on GPUs with compute capability of at least 8\.0"
    r"(?:\. Your (?P<gpu>.+?) GPU has compute capability (?P<cc>\d+\.\d+))?"
)
SGLANG_RE = re.compile(
    r"(?:Scheduler|TpModelWorkerClient|DetokenizerManager|DataParallelController) hit an exception"
)
HYDRA_RE = re.compile(
    r"Could not override '(?P<override>[^']+)'|Key '(?P<key>[^']+)' (?:is )?not in "
    r"(?:struct|'(?P<cls>\w+)')|Missing mandatory value: ?(?P<missing>[\w.]+)"
    r"|\bConfigKeyError\b|\bConfigAttributeError\b|\bMissingMandatoryValue\b"
    r"|mismatched input '(?P<token>[^']*)' expecting|LexerNoViableAltException"
    r"|Could not append to config\. An item is already at '(?P<append>[^']+)'"
    r"|Could not delete from config\. '?(?P<delete>[\w.]+)'?"
    r"|Interpolation key '(?P<interp>[^']+)' not found|ConfigCompositionException"
    r"|Value '(?P<value>[^']*)'(?: of type '\w+')? could not be converted to (?P<to>\w+)"
)
TP_WORLD_RE = re.compile(
    r"rollout world_size:? (\d+) is not divisible by infer_(?:tp|world_size):? (\d+)"
    r"|tensor parallel size should be less than or equal to the world size"
)
KV_CACHE_RE = re.compile(r"No available memory for the cache blocks")
# verl's dataset (`Prompt length 1311 is longer than 1024.`) and vLLM's engine (`Prompt length of
# 558 is longer than the maximum model length of 512.`)
PROMPT_LONG_RE = re.compile(
    r"Prompt length (?:of )?(\d+) is longer than (?P<engine>the maximum model length of )?(\d+)"
)
CHUNKED_PREFILL_RE = re.compile(
    r"max_num_batched_tokens(?: \(?(\d+)\)?)? is smaller than max_model_len(?: \(?(\d+)\)?)?"
)
# A CUDA fault other than out-of-memory (that is cuda-oom): PyTorch's `CUDA error: …` and the
# fixed text it prints after one, the C++ check that raised it, cuBLAS/cuDNN statuses.
CUDA_ERROR_RE = re.compile(
    r"CUDA error: (?!(?i:out of memory))(?P<what>[^.\n]+)|CUDA kernel errors might be asynchronously"
    r"|c10_cuda_check_implementation|device-side assert(?:ion)? triggered"
    r"|an illegal memory access was encountered|CUDA_ERROR_ILLEGAL_ADDRESS"
    r"|CUBLAS_STATUS_(?!SUCCESS)\w+|CUDNN_STATUS_(?!SUCCESS)\w+"
)
# The DAPO recipe's dynamic sampling gave up (`num_gen_batches=10 >= max_num_gen_batches=10.
# Generated too many. Please check your data.`)
FILTER_EXHAUSTED_RE = re.compile(r"num_gen_batches=(\d+) >= max_num_gen_batches=(\d+)")
DEVICE_MISMATCH_RE = re.compile(r"Expected all tensors to be on the same device")
# The shell's report of a process killed by a signal (`bash: line 3: 4242 Killed  python3 …`).
# Also Python's `Fatal Python error: Aborted`, absl's `*** SIGABRT received at time=…` and C++'s
# `terminate called after throwing an instance of 'c10::Error'` (std::terminate aborts), and a
# fatal C++ log, glog's or Ray's (`[F task_receiver.cc:219] Check failed: objects_valid`, read
# so by the console reader), which aborts after its stack.
KILLED_RE = re.compile(
    r"^(?:.*\b\d+ )?(Killed|Segmentation fault|Aborted|Bus error)(?: \(core dumped\))?(?:\s{2,}\S.*)?$"
    r"|^Fatal Python error: (Aborted|Segmentation fault|Bus error|\w[\w ]*)"
    r"|^\*\*\* (SIG[A-Z]+) received at time="
    r"|^(terminate called after throwing an instance of '[^']+')"
    r"|^\[F ([^\]\s]+:[0-9]+\] \S.{0,160}?)\s*$"
)

# Literals every match of a pattern contains (a cheap pre-filter for long logs).
CUDA_OOM_KEYS = ("ut of memory", "OutOfMemoryError", "OUT_OF_MEMORY")
HOST_OOM_KEYS = ("memory pressure", "OutOfMemoryError", "running low on memory", "ut of memory")
RAY_REGISTER_KEYS = ("register worker",)
VLLM_INSPECT_KEYS = ("failed to be inspected",)
NCCL_KEYS = ("NCCL", "nccl", "Watchdog", "DistBackendError")
HCCL_KEYS = ("HCCL", "hccl")
DIST_STORE_KEYS = ("DistStoreError", "DistNetworkError", "TCPStore", "socket has")
DIST_KEYS = NCCL_KEYS + HCCL_KEYS + DIST_STORE_KEYS
ACTOR_DIED_KEYS = (
    "ActorDiedError",
    "RayActorError",
    "actor died",
    "actor is dead",
    "worker died",
    "Owner's node",
    "WorkerCrashedError",
)
VLLM_ENGINE_KEYS = ("EngineCore", "Engine core", "EngineDead")
BF16_GPU_KEYS = ("Bfloat16 is only supported",)
SGLANG_KEYS = ("hit an exception",)
HYDRA_KEYS = (
    "Could not",
    "Key '",
    "Missing mandatory",
    "ConfigKeyError",
    "ConfigAttributeError",
    "MissingMandatoryValue",
    "mismatched input",
    "LexerNoViableAlt",
    "Interpolation key",
    "ConfigComposition",
    "could not be converted",
)
TP_WORLD_KEYS = ("is not divisible by infer_", "tensor parallel size should be")
KV_CACHE_KEYS = ("No available memory for the cache blocks",)
PROMPT_LONG_KEYS = ("Prompt length",)
CHUNKED_PREFILL_KEYS = ("max_num_batched_tokens",)
CUDA_ERROR_KEYS = (
    "CUDA error: ",
    "CUDA kernel errors",
    "c10_cuda_check",
    "device-side assert",
    "illegal memory access",
    "CUDA_ERROR_ILLEGAL",
    "_STATUS_",
)
FILTER_EXHAUSTED_KEYS = ("max_num_gen_batches",)
DEVICE_MISMATCH_KEYS = ("Expected all tensors to be on the same device",)
KILLED_KEYS = (
    "Killed",
    "Segmentation fault",
    "Aborted",
    "Bus error",
    "Fatal Python error",
    " received at time=",
    "terminate called after",
    "[F ",
)
BATCH_KEYS = ("batch_size", "equal chunk", "equal split")
GRAD_NORM_KEYS = ("grad_norm is not finite",)
GRAD_NORM_RE = re.compile(r"WARN: (?:rank (\d+) )?grad_norm is not finite: (\S+)")

# (kind, pattern) for verl's batch-size checks (verl_formats.md §6) and the article's wording.
# Matched anywhere in a line, so a quoted or flattened traceback (`'...\nAssertionError: …'`)
# matches too.
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
        "equal-split",
        re.compile(r"only support equal split\. Got size of DataProto (\d+) and chunk (\d+)"),
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
# A traceback's source line doing arithmetic on batch sizes (old verl's own check `assert
# self.config.ppo_mini_batch_size % self.config.ppo_micro_batch_size == 0`): the failing line and
# the exception type tell the check even when no message names it.
BATCH_ARITHMETIC_RE = re.compile(
    r"(?P<lhs>\w*batch_size\w*)\s*(?P<op>%|//|/)\s*\(?\s*(?:\w+\.)*(?P<rhs>\w+)"
)
BATCH_ARITHMETIC_EXCEPTIONS = ("ZeroDivisionError", "AssertionError")
CARET_RE = re.compile(r"^[\s~^]+$")


@dataclass(frozen=True)
class Signature:
    """A fatal log signature: what it is, how it reads, which diagnosis reports it."""

    kind: str
    pattern: re.Pattern[str]
    keywords: tuple[str, ...]
    finding: str | None  # the diagnosis that reports it (None: run-crashed explains it)
    cause: str  # what it means, for the crash verdict's message
    consequence: bool = False  # usually the result of another failure, not its root

    def search(self, text: str) -> re.Match[str] | None:
        if any(k in text for k in self.keywords):
            return self.pattern.search(text)
        return None


# Root causes first: when several are in one crash, the first one listed explains it.
SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "host-oom",
        HOST_OOM_RE,
        HOST_OOM_KEYS,
        "host-oom-worker-killed",
        "a worker was killed for lack of host memory",
    ),
    Signature("cuda-oom", CUDA_OOM_RE, CUDA_OOM_KEYS, "cuda-oom", "CUDA out of memory"),
    Signature(
        "kv-cache",
        KV_CACHE_RE,
        KV_CACHE_KEYS,
        "vllm-kv-cache-no-memory",
        "vLLM found no GPU memory for its KV cache",
    ),
    Signature(
        "chunked-prefill",
        CHUNKED_PREFILL_RE,
        CHUNKED_PREFILL_KEYS,
        "max-num-batched-tokens-too-small",
        "vLLM refused max_num_batched_tokens below max_model_len",
    ),
    Signature(
        "prompt-long",
        PROMPT_LONG_RE,
        PROMPT_LONG_KEYS,
        "prompt-too-long",
        "a prompt is longer than the run allows (data.max_prompt_length or the engine's "
        "max_model_len)",
    ),
    Signature(
        "batch",
        BATCH_RE,
        BATCH_KEYS,
        "batch-size-divisibility-error",
        "verl rejected the batch sizes",
    ),
    Signature(
        "tp-world",
        TP_WORLD_RE,
        TP_WORLD_KEYS,
        None,
        "the rollout tensor-parallel size does not divide the number of GPUs",
    ),
    Signature(
        "filter-exhausted",
        FILTER_EXHAUSTED_RE,
        FILTER_EXHAUSTED_KEYS,
        None,
        "DAPO's dynamic sampling gave up: its generation rounds could not fill the batch with "
        "groups whose rewards differ",
    ),
    Signature(
        "device-mismatch",
        DEVICE_MISMATCH_RE,
        DEVICE_MISMATCH_KEYS,
        "tensors-on-different-devices",
        "tensors on different devices",
    ),
    Signature(
        "hydra", HYDRA_RE, HYDRA_KEYS, "hydra-config-error", "Hydra/OmegaConf rejected the config"
    ),
    Signature(
        "vllm-inspect",
        VLLM_INSPECT_RE,
        VLLM_INSPECT_KEYS,
        "vllm-model-inspection-failed",
        "vLLM could not inspect the model architecture",
    ),
    Signature(
        "ray-register",
        RAY_REGISTER_RE,
        RAY_REGISTER_KEYS,
        "ray-worker-registration-failed",
        "Ray workers could not register with the raylet",
    ),
    Signature(
        "bf16-gpu",
        BF16_GPU_RE,
        BF16_GPU_KEYS,
        "vllm-error",
        "the rollout engine (vLLM) refused bfloat16 on a GPU older than Ampere",
    ),
    Signature("cuda-error", CUDA_ERROR_RE, CUDA_ERROR_KEYS, None, "a CUDA error on the GPU"),
    Signature(
        "vllm-engine",
        VLLM_ENGINE_RE,
        VLLM_ENGINE_KEYS,
        "vllm-error",
        "the vLLM engine failed",
        consequence=True,
    ),
    Signature(
        "sglang",
        SGLANG_RE,
        SGLANG_KEYS,
        None,
        "the SGLang rollout engine crashed",
        consequence=True,
    ),
    Signature("nccl", NCCL_RE, NCCL_KEYS, "nccl-error", "an NCCL collective failed", True),
    Signature(
        "hccl",
        HCCL_RE,
        HCCL_KEYS,
        "nccl-error",
        "an HCCL (Ascend NPU) collective failed",
        consequence=True,
    ),
    Signature(
        "dist-store",
        DIST_STORE_RE,
        DIST_STORE_KEYS,
        "nccl-error",
        "torch.distributed's rendezvous store (c10d TCPStore) failed",
        consequence=True,
    ),
    Signature(
        "actor-died", ACTOR_DIED_RE, ACTOR_DIED_KEYS, "ray-actor-died", "a Ray actor died", True
    ),
    Signature("killed", KILLED_RE, KILLED_KEYS, None, "the process was killed", True),
)
SIGNATURE_BY_KIND = {s.kind: s for s in SIGNATURES}
SIGNATURE_BY_FINDING = {s.finding: s for s in SIGNATURES if s.finding is not None}
#: the signatures of collective communication (NCCL, HCCL) and of the rendezvous store
DIST_KINDS = ("nccl", "hccl", "dist-store")
# Kinds that do not name a specific rollout-engine failure: the vLLM catch-all stays silent
# only for these vLLM-specific ones.
VLLM_SPECIFIC_KINDS = ("kv-cache", "chunked-prefill", "vllm-inspect")


def signature_kinds(text: str) -> list[str]:
    """Kinds of the fatal signatures in one line, in root-cause order."""
    return [s.kind for s in SIGNATURES if s.search(text)]


# ---- tracebacks --------------------------------------------------------------------------------

RAY_HEADER_RE = re.compile(r"ray::(?:[\w<>.]*?\.)?(\w+)\(\)")
# The driver's call into a worker group (`self.actor_rollout_wg.update_actor(batch)`).
WORKER_GROUP_CALL_RE = re.compile(r"\b\w+_wg\.(\w+)\(")
# What verl's trainer loop names the result of each worker-group call, for a source line cut
# before the call (`actor_output = self.actor_rollo`).
TRAINER_RESULTS = {
    "actor_output": "update-actor",
    "critic_output": "update-critic",
    "old_log_prob": "log-prob",
    "ref_log_prob": "ref-log-prob",
    "gen_batch_output": "rollout",
}
TRAINER_RESULT_RE = re.compile(rf"^({'|'.join(TRAINER_RESULTS)}) = self\.[\w.]*$")
FRAME_RE = re.compile(r'^File "(?P<path>[^"]*)", line \d+, in (?P<func>\S+)')
TRACEBACK_RE = re.compile(
    r"Traceback \(most recent call last\)|RayTaskError|Error executing job with overrides"
    r"|Unhandled error \(suppress with|^Process EngineCore_\w*:|hit an exception:"
    r"|Set the environment variable HYDRA_FULL_ERROR=1"
    r"|^Exception raised from .* \(most recent call first\)|^frame #[0-9]+: "  # a C++ stack
)
TRACEBACK_KEYS = (
    "Traceback",
    "RayTaskError",
    "Error executing job",
    "Unhandled error",
    "Process EngineCore",
    "hit an exception",
    "HYDRA_FULL_ERROR",
    "Exception raised from",
    "frame #",
)
EXCEPTION_RE = re.compile(
    r"^(?P<type>(?:[A-Za-z_][\w]*\.)*(?:[A-Z]\w*(?:Error|Exception|Interrupt|Exit)|RayTaskError)"
    r"(?:\([\w.]+\))?)(?::\s*(?P<msg>.*))?$"
)


def unquote(text: str) -> str:
    """A line of a quoted traceback without its quotes (`'ValueError: x',` → `ValueError: x`) or the
    backtick closing a Markdown code span around it."""
    text = text.strip()
    if text[:1] in ("'", '"'):
        return text.lstrip("'\"").rstrip("'\",")
    if text.endswith("`") and text.count("`") % 2:  # the end of a Markdown code span
        return text[:-1].rstrip()
    return text


def exception_of(text: str) -> re.Match[str] | None:
    """The exception-line match of a (possibly quoted) line, or None."""
    if not any(k in text for k in ("Error", "Exception", "Interrupt", "Exit")):
        return None
    return EXCEPTION_RE.match(unquote(text))


def source_index(texts: Sequence[str], index: int) -> int | None:
    """Index of the source line printed just above the exception at `texts[index]` (its
    innermost frame's code), skipping Python's `~~~^^^` markers; None when there is none."""
    for i in range(index - 1, max(index - 4, 0) - 1, -1):
        text = texts[i]
        if CARET_RE.match(text):
            continue
        if FRAME_RE.match(text) or exception_of(text) is not None:
            return None
        return i if i > 0 and FRAME_RE.match(texts[i - 1]) else None
    return None


def batch_arithmetic(exc_name: str, source: str | None) -> re.Match[str] | None:
    """The batch-size arithmetic in `source` that raised `exc_name`: a ZeroDivisionError whose
    divisor is a batch size (normalised to 0), or an `assert` of divisibility that failed."""
    if source is None or exc_name not in BATCH_ARITHMETIC_EXCEPTIONS or "batch_size" not in source:
        return None
    for m in BATCH_ARITHMETIC_RE.finditer(source):
        if exc_name == "ZeroDivisionError" and "batch_size" in m.group("rhs"):
            return m
        if exc_name == "AssertionError" and source.startswith("assert ") and m.group("op") == "%":
            return m
    return None


# ---- phases ------------------------------------------------------------------------------------

PHASE_NAMES = {
    "init": "initialisation",
    "rollout": "rollout",
    "log-prob": "old log-prob computation",
    "ref-log-prob": "reference log-prob computation",
    "update-actor": "actor update",
    "update-critic": "critic update",
    "critic-values": "critic value computation",
    "reward-model": "reward model scoring",
    "weight-sync": "weight sync / rollout sleep-wake",
    "validation": "validation",
    "checkpoint": "checkpoint save/load",
    "shutdown": "shutdown",
    "backward": "backward pass of a training update",
}
# The verl method a phase is known by (its label names it whatever frame matched).
PHASE_METHODS = {
    "rollout": "generate_sequences",
    "log-prob": "compute_log_prob",
    "ref-log-prob": "compute_ref_log_prob",
    "update-actor": "update_actor",
    "update-critic": "update_critic",
    "critic-values": "compute_values",
    "reward-model": "compute_rm_score",
    "backward": "backward",
}
# verl's Ray task names prefix the worker method with its role (`actor_rollout_init_model`).
ROLE_PREFIX_RE = re.compile(r"^(?:actor_rollout_ref|actor_rollout|actor|rollout|ref|critic|rm)_")
RAY = "<ray>"  # the path given to a Ray task header's method
ENGINE_PATH = r"/(?:vllm|sglang)/"


@dataclass(frozen=True)
class PhaseRule:
    tier: int  # 1: verl's methods, 2: the rollout engine's, 3: generic
    phase: str
    func: re.Pattern[str]
    path: re.Pattern[str] | None = None  # the frame's file must match
    not_path: re.Pattern[str] | None = None  # … and must not match


def _rule(
    tier: int, phase: str, func: str, path: str | None = None, not_path: str | None = None
) -> PhaseRule:
    return PhaseRule(
        tier,
        phase,
        re.compile(func),
        re.compile(path) if path else None,
        re.compile(not_path) if not_path else None,
    )


# Matched against a frame's function (or a Ray task's method) and the frame's file path.
PHASE_RULES: tuple[PhaseRule, ...] = (
    _rule(
        1,
        "weight-sync",
        r"^(?:wake_up|sleep|update_weights|sync_weights|_sync_weights|rebuild_kv_cache"
        r"|(?:off|on)load\w*|load_fsdp_\w+|resume_memory_occupation|release_memory_occupation)$",
        not_path=r"asyncio|/threading\.py",
    ),
    _rule(1, "weight-sync", r"^__(?:enter|exit)__$", path=r"sharding_manager"),
    _rule(1, "weight-sync", r".", path=r"device_allocator/cumem|cumem_allocator"),
    _rule(1, "ref-log-prob", r"compute_ref_log_prob$"),
    _rule(1, "log-prob", r"compute_(?:old_)?log_prob$"),
    _rule(1, "update-actor", r"update_actor$|^update_policy$"),
    _rule(1, "update-critic", r"update_critic$"),
    _rule(1, "critic-values", r"compute_values$"),
    _rule(1, "reward-model", r"compute_rm_score$"),
    _rule(1, "rollout", r"generate_sequences$|^_run_engine$|^run_agent_loop$"),
    _rule(1, "rollout", r"^generate$", path=r"verl|agent_loop|<ray>"),
    _rule(1, "validation", r"^_validate$"),
    _rule(1, "checkpoint", r"(?:save|load)_checkpoint$"),
    _rule(
        1,
        "init",
        r"init_model$|^init_workers$|^_build_rollout$|^_build_\w*model_optimizer$"
        r"|^init_engine$|^_initialize_llm_servers$|^from_pretrained$",
    ),
    _rule(1, "init", r"^__init__$", path=r"^<ray>$"),
    _rule(1, "shutdown", r"^shutdown$|^__del__$"),
    _rule(
        2,
        "init",
        r"^(?:__init__|from_engine_args|from_vllm_config|_initialize_kv_caches|initialize_cache"
        r"|determine_available_memory|profile_run|load_model|init_device|make_client"
        r"|_init_executor|launch_server|_launch_subprocesses)$",
        path=ENGINE_PATH,
    ),
    _rule(
        2,
        "rollout",
        r"^(?:step|run_busy_loop|_process_engine_step|execute_model|event_loop_normal"
        r"|event_loop_overlap|run_scheduler_process|update_running_batch|get_next_batch_to_run"
        r"|run_batch|forward_batch_generation|generate|_run_engine|process_batch_result\w*)$",
        path=ENGINE_PATH,
    ),
    _rule(3, "backward", r"^(?:backward|_engine_run_backward|run_backward)$"),
)


@dataclass(frozen=True)
class Phase:
    """The training phase a failure happened in, and the method that tells it."""

    id: str
    method: str
    tier: int = 1
    path: str = ""  # the frame's file, for an engine's method

    @property
    def label(self) -> str:
        """`the actor update (update_actor)`, `the rollout (vllm/v1/engine/core.py: step)`."""
        if self.tier == 2 and self.path:
            return f"the {PHASE_NAMES[self.id]} ({self.path}: {self.method})"
        method = PHASE_METHODS.get(self.id, self.method) if self.tier != 2 else self.method
        return f"the {PHASE_NAMES[self.id]} ({method})"


def phase_of_call(func: str, path: str = "") -> Phase | None:
    """The phase a function (in `path`) belongs to, or None."""
    for rule in PHASE_RULES:
        if not rule.func.search(func):
            continue
        if rule.path is not None and not rule.path.search(path):
            continue
        if rule.not_path is not None and rule.not_path.search(path):
            continue
        short = engine_path(path) if rule.tier == 2 else ""
        return Phase(rule.phase, func, rule.tier, short)
    return None


PACKAGES_RE = re.compile(r"(?:site|dist)-packages/")


def engine_path(path: str) -> str:
    """The rollout engine's file without the environment's prefix (`sglang/srt/managers/
    scheduler.py`, `verl/third_party/vllm/…/llm.py`); "" when `path` is not the engine's."""
    found = list(re.finditer(ENGINE_PATH, path))
    if not found:
        return ""
    packages = list(PACKAGES_RE.finditer(path))
    if packages and packages[-1].end() <= found[-1].start() + 1:
        return path[packages[-1].end() :]
    third_party = path.rfind("verl/third_party/")
    if third_party >= 0:
        return path[third_party:]
    return path[found[-1].start() + 1 :]


def phase_of_line(text: str) -> Phase | None:
    """The phase a traceback line names: a frame, a Ray task header, the driver's call into a
    worker group, or vLLM's cumem allocator."""
    m = FRAME_RE.match(text)
    if m is not None:
        return phase_of_call(m.group("func"), m.group("path"))
    if "ray::" in text:
        for h in RAY_HEADER_RE.finditer(text):
            phase = phase_of_call(ROLE_PREFIX_RE.sub("", h.group(1)), RAY)
            if phase is not None:
                return phase
    if "_wg." in text and (call := WORKER_GROUP_CALL_RE.search(text)):
        return phase_of_call(call.group(1), RAY)
    if " = self." in text and (m := TRAINER_RESULT_RE.match(text)):
        phase = TRAINER_RESULTS[m.group(1)]  # a source line cut before its call
        return Phase(phase, PHASE_METHODS[phase], tier=3)
    if "cumem_allocator" in text or "CuMemAllocator" in text:
        return Phase("weight-sync", "cumem allocator")
    return None


def phase_at(texts: Sequence[str], anchor: int) -> Phase | None:
    """The phase of the traceback around `texts[anchor]` (its final exception, or a signature).

    Innermost first: the frames printed before the anchor, walking up to the start of its
    traceback, then the lines printed after it (Ray's `Unhandled error … ray::X.method()`
    headers). verl's own methods win over the rollout engine's, which win over generic ones
    (`backward`); within a tier the innermost wins.
    """
    if not texts:
        return None
    anchor = max(0, min(anchor, len(texts) - 1))
    order: list[str] = []
    for i in range(anchor, -1, -1):
        text = texts[i]
        order.append(text)
        if i < anchor and "Traceback (most recent call last)" in text:
            break
    order.extend(texts[anchor + 1 :])
    found = [p for p in map(phase_of_line, order) if p is not None]
    return min(found, key=lambda p: p.tier) if found else None


def phase_near(run: Run, line_no: int, before: int, after: int) -> Phase | None:
    """The phase of a traceback around log line `line_no` (within `before`/`after` lines)."""
    lines = window(run, line_no, before, after)
    anchor = next((i for i, x in enumerate(lines) if x.line_no >= line_no), len(lines) - 1)
    return phase_at([x.text for x in lines], anchor)


def ints_of(m: re.Match[str]) -> list[int]:
    return [int(g) for g in m.groups() if g is not None and g.isdigit()]


class SignatureDetector(Detector):
    """Base for log-signature detectors: find lines, build one finding.

    A crash signature (`"crash"` in `groups`) printed only after training had finished (the
    crash story's rule: final validation, the last step, W&B's end-of-run block) is a normal
    shutdown: its finding is lowered to info and says so.
    """

    reads = "events"
    default_severity = "error"
    #: what it searches for: by default the `SIGNATURES` entry that names this diagnosis
    pattern: ClassVar[re.Pattern[str]]
    keywords: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        listed = SIGNATURE_BY_FINDING.get(getattr(cls, "name", ""))
        if listed is not None and "pattern" not in vars(cls):
            cls.pattern, cls.keywords = listed.pattern, listed.keywords

    def hits(self, run: Run) -> list[Hit]:
        return find_lines(run, self.pattern, self.keywords)

    def detect(self, run: Run) -> list[Finding]:
        hits = self.hits(run)
        if not hits:
            return []
        finding = self.build(run, hits)
        if "crash" in self.groups:
            finding = self.at_shutdown(run, hits, finding)
        return [finding]

    @abstractmethod
    def build(self, run: Run, hits: list[Hit]) -> Finding:
        """The finding for a run whose log holds `hits` (at least one)."""

    @staticmethod
    def at_shutdown(run: Run, hits: list[Hit], finding: Finding) -> Finding:
        """`finding` as info when all its lines came after training had finished."""
        from ._crash_story import crash_story

        story = crash_story(run)
        if not all(story.finished_before(h.line_no) for h in hits):
            return finding
        note = (
            f" It was printed after training had finished ({story.finish_note}): a normal "
            "shutdown, not a crash."
        )
        return dataclasses.replace(finding, severity="info", message=finding.message + note)

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


def batch_for(tbs: int, n: int, unit: int) -> int:
    """A train_batch_size near `tbs` (not above it unless needed) with tbs × n divisible by unit."""
    step = unit // math.gcd(n, unit)
    return max(step, tbs // step * step)
