"""Which non-step console lines matter: event kinds and the patterns that classify a line.

`classify(text)` gives the kind of a cleaned line (ANSI codes, decorations and the Ray prefix
removed) or None. The parser keeps an event per classified line (and every traceback); the
detectors then match their own signatures in the events' text, so a kind here only decides
what is kept, not what is diagnosed.
"""

from __future__ import annotations

import re

# (kind, pattern), first match wins; searched in the cleaned text of lines that are not steps.
EVENT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        ("grad-norm-not-finite", r"grad_norm is not finite"),
        (
            "cuda-oom",
            r"CUDA out of memory|(?i:CUDA error: out of memory)|torch\.(?:cuda\.)?OutOfMemoryError"
            r"|RayTaskError\(OutOfMemoryError\)|OutOfMemoryError: CUDA",
        ),
        (
            "cuda-error",
            r"CUDA error: |CUDA kernel errors might be asynchronously reported"
            r"|c10_cuda_check_implementation|device-side assert|illegal memory access"
            r"|CUBLAS_STATUS_|CUDNN_STATUS_|CUDA_ERROR_\w+|cudaError\w+",
        ),
        (
            "host-oom",
            r"killed due to memory pressure|ray\.exceptions\.OutOfMemoryError"
            r"|running low on memory|Out of memory: Killed process|oom-kill"
            # Ray's report: the node's memory, then its top memory users (`PID MEM(GB) COMMAND`)
            r"|^Memory on the node \(IP: |^[0-9]+\s+[0-9.]+\s+ray::[\w.]+$",
        ),
        (
            "nccl-error",
            r"NCCL (?:operation failed|error|timeout|watchdog)|nccl(?:InternalError"
            r"|UnhandledCudaError|SystemError|InvalidUsage|InvalidArgument|RemoteError)"
            r"|Watchdog caught collective operation timeout|NCCL communicator was aborted"
            r"|ProcessGroupNCCL.*(?:[Tt]imeout|[Ee]rror)"
            # NCCL's detail on the lines after an error: `Last error:` and what failed
            r"|^Last error:|\bsocket(?:Start|Poll)?Connect\b|progressing operation=",
        ),
        (
            "vllm-error",
            r"failed to be inspected|No available memory for the cache blocks"
            r"|EngineDeadError|EngineCore (?:encountered|failed)|^Process EngineCore_\w*:"
            r"|Engine core initialization failed|cumem_allocator"
            r"|model context length should be greater|max_num_batched_tokens is smaller",
        ),
        (
            "config-error",
            r"must be divisible by|only support equal (?:chunk|split)|Please set at least one of"
            r"|You have set both|should be larger than 0 after normalization"
            r"|should be divisible by|should be larger than|must be >= |Invalid loss_agg_mode"
            r"|is not supported|Error executing job with overrides|ConfigAttributeError"
            r"|ConfigKeyError|Could not override|has been removed\. Please set"
            r"|tensor parallel size should be|is not divisible by infer_world_size"
            r"|Expected all tensors to be on the same device|must enable use_remove_padding"
            r"|should be greater than 0 when enabling do_sample|is not divisible by infer_tp"
            r"|Key '[^']*' (?:is )?not in |Missing mandatory value|mismatched input '"
            r"|LexerNoViableAltException|Could not (?:append to|delete from) config"
            r"|Interpolation key '|could not be converted to |^\s*full_key: "
            r"|MissingMandatoryValue|ConfigCompositionException|^To append to your config use",
        ),
        (
            "ray-error",
            r"(?:Failed|Unable) to register worker|ray\.exceptions\.\w+|RayActorError"
            r"|ActorDiedError|RaySystemError|The actor died|actor died unexpectedly"
            r"|WorkerCrashedError|GCS (?:server )?(?:failed|died|connection)"
            r"|A worker died or was killed|The actor is dead|Worker exit type: "
            r"|Owner's node has crashed|^Job '[^']+' failed|Job entrypoint command failed"
            r"|^\s*class_name: \S",  # the dead actor's class, on a line of its own
        ),
        (
            "fatal",
            r"hit an exception|^Process EngineCore_\w*:|HYDRA_FULL_ERROR=1 for a complete",
        ),
        ("total-training-steps", r"^Total training steps: [0-9]+"),
        ("dataloader-size", r"^Size of train dataloader: ?[0-9]+"),
        (
            "checkpoint-load",
            r"Load from checkpoint folder|^Resuming from |Setting global step to"
            r"|[Ll]oading checkpoint|[Ll]oaded checkpoint",
        ),
        ("checkpoint-save", r"^local_global_step_folder: |[Ss]aving checkpoint"),
        ("validation-metrics", r"^\(?['\"]?(?:Initial|Final) validation metrics: "),
        (
            "killed",
            r"\bKilled\b|SIGKILL|SIGTERM|SIGABRT|SIGSEGV|[Ss]egmentation fault|core dumped"
            r"|Fatal Python error: |^Aborted$|terminate called after throwing"
            r"|^\[F [^\]\s]+:[0-9]+\] ",  # a fatal C++ log (glog, Ray): the process aborts
        ),
        (
            "warning",
            r"^WARN(?:ING)?\b|\bWARNING\b|Warning:|^\[W |UserWarning|DeprecationWarning"
            r"|FutureWarning|RuntimeWarning|^NOTICE:",
        ),
        (
            "error",
            r"^(?:[A-Za-z_][\w.]*)?(?:Error|Exception)(?:\([^)]*\))?: |^ERROR\b|\bERROR\b"
            r"|^\[E |\bFATAL\b|^Error ",
        ),
    )
)
EVENT_KINDS: tuple[str, ...] = (
    "traceback",
    *(kind for kind, _ in EVENT_PATTERNS),
    "restart",
    "config-dump-unparsed",
    "sample-response",  # a response a reward manager printed (console_parser.py)
)
TOTAL_STEPS_RE = re.compile(r"Total training steps: ([0-9]+)")
DATALOADER_RE = re.compile(r"Size of train dataloader: ?([0-9]+)")  # batches (steps) per epoch


# Per kind, literals one of which occurs in every text its pattern matches: a cheap `in` test
# decides whether the regex needs to run (most lines match no pattern).
EVENT_KEYWORDS: dict[str, tuple[str, ...]] = {
    "grad-norm-not-finite": ("grad_norm is not finite",),
    "cuda-oom": ("CUDA", "OutOfMemoryError"),
    "cuda-error": ("CUDA", "c10_cuda", "device-side", "illegal memory", "STATUS_", "cudaError"),
    "host-oom": ("memory", "Memory on the node", "OutOfMemoryError", "oom-kill", "ray::"),
    "nccl-error": ("NCCL", "nccl", "Watchdog caught", "Last error:", "Connect", "operation="),
    "vllm-error": (
        "failed to be inspected",
        "No available memory",
        "Engine",
        "model context length",
        "max_num_batched_tokens",
        "cumem_allocator",
    ),
    "config-error": (
        "must ",
        "only support",
        "Please set",
        "You have set both",
        "should be",
        "Invalid loss_agg_mode",
        "is not supported",
        "Error executing job",
        "Config",
        "Could not override",
        "is not divisible",
        "Expected all tensors",
        "Key '",
        "Missing mandatory",
        "mismatched input",
        "LexerNoViableAlt",
        "Could not",
        "Interpolation key",
        "could not be converted",
        "full_key: ",
        "To append",
    ),
    "ray-error": (
        "to register worker",
        "ray.exceptions.",
        "RayActorError",
        "ActorDiedError",
        "RaySystemError",
        "actor died",
        "WorkerCrashedError",
        "GCS ",
        "worker died",
        "actor is dead",
        "Worker exit type",
        "node has crashed",
        "Job ",
        "class_name: ",
    ),
    "fatal": ("hit an exception", "Process EngineCore", "HYDRA_FULL_ERROR"),
    "total-training-steps": ("Total training steps: ",),
    "dataloader-size": ("Size of train dataloader",),
    "checkpoint-load": ("checkpoint", "Resuming from ", "Setting global step to"),
    "checkpoint-save": ("local_global_step_folder: ", "aving checkpoint"),
    "validation-metrics": ("validation metrics: ",),
    "killed": (
        "Killed",
        "SIGKILL",
        "SIGTERM",
        "SIGABRT",
        "SIGSEGV",
        "egmentation fault",
        "core dumped",
        "Fatal Python error",
        "Aborted",
        "terminate called",
        "[F ",
    ),
    "warning": ("WARN", "Warning", "[W ", "NOTICE:"),
    "error": ("Error", "Exception", "ERROR", "[E ", "FATAL"),
}
_GATED = tuple((kind, EVENT_KEYWORDS[kind], pattern) for kind, pattern in EVENT_PATTERNS)


def classify(text: str) -> str | None:
    """Event kind of a cleaned non-step line, or None when it does not matter."""
    for kind, keywords, pattern in _GATED:
        for keyword in keywords:
            if keyword in text:
                if pattern.search(text):
                    return kind
                break
    return None
