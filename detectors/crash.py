"""The crash verdict: the run ended with an error, in which phase, after which step, and why."""

from __future__ import annotations

import re
from typing import Any

from logscope.advice import advise, current_value
from logscope.detector import Detector
from logscope.model import Advice, Finding, Run
from logscope.sources import cite, cite_all
from logscope.verl_config import RO, divisor_at_most
from logscope.words import plural

from ._common import LogLine, env_advice, gpu_memory_advice, log_lines, quote
from ._crash_story import CrashStory, crash_story
from ._signatures import (
    CUDA_ERROR_RE,
    FILTER_EXHAUSTED_RE,
    FRAME_RE,
    KILLED_RE,
    SIGNATURE_BY_KIND,
    TP_WORLD_RE,
    engine_path,
    ints_of,
)
from .sampling import filter_advice

SIGNALS = {
    "Killed": "SIGKILL",
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
}
# What each signal usually means in a training job (the shell and Python name it for us).
SIGNAL_HINTS = {
    "SIGKILL": " A bare SIGKILL is usually the Linux OOM killer (host memory, see "
    "host-oom-worker-killed) or the job scheduler.",
    "SIGABRT": " A SIGABRT is a native abort: a failed check in C++ code (PyTorch, NCCL, CUDA, "
    "the rollout engine) or an uncaught C++ exception; the failing worker's own log "
    "(or the lines before this one) names it.",
    "SIGSEGV": " A SIGSEGV is a crash in native code (a CUDA kernel, an extension built for "
    "another torch or CUDA version); the failing worker's own log names the library.",
}
# Kinds whose message is worth quoting after the signature's own wording.
QUOTED_KINDS = ("vllm-engine", "hydra", "tp-world", "sglang", "device-mismatch", "cuda-error")
WATCHDOG = "watchdog thread terminated with exception"
RAY_LOGS = "/tmp/ray/session_latest/logs"

#: Ray tracebacks (`RayTaskError(...)`) and where each worker's log is.
RAY_DEBUG_DOC = "ray:ray-observability/user-guides/debug-apps/debug-failures"


class RunCrashed(Detector, code="LS017", name="run-crashed"):
    """The run ended with an error: where (phase), when (last step) and the innermost cause.

    What it detects:
        A log that ends in an error after its last training step: a Python traceback, a Ray
        `RayTaskError(...)` chain or `Unhandled error`, Hydra's `Error executing job with
        overrides`, an actor or worker death, a fatal Ray/vLLM/SGLang/NCCL/OOM signature, a
        CUDA error (`CUDA error: an illegal memory access was encountered`, `device-side assert
        triggered`, a cuBLAS/cuDNN status, also when only NCCL's watchdog thread or PyTorch's
        C++ check `c10_cuda_check_implementation` reports it), or a process that died without
        a Python traceback: the shell's `Killed` / `Segmentation fault (core dumped)`, `Fatal
        Python error: Aborted`, `*** SIGABRT received`, C++'s `terminate called after
        throwing`. It
        fires also when a specific diagnosis (cuda-oom, hydra-config-error, …) explains the
        error, and names it. The message gives the phase (from the Ray task headers and the
        frames of the final traceback, innermost first: initialisation, rollout, old/ref
        log-prob, actor/critic update, weight sync or sleep/wake, validation, checkpoint,
        shutdown), the last step logged before the error, and the innermost cause (the last
        exception that is not a `RayTaskError` wrapper). When the cause is not in the text (a
        traceback cut before its exception, only Hydra's wrapper line, only Ray's
        `RayTaskError(X)` header), it says so, and `cause_in_log` is false; a cut traceback
        whose innermost frame shown is vLLM's or SGLang's is that engine's failure. Ray's
        `RayTaskError(OutOfMemoryError)` alone is read as a CUDA OOM but says that GPU or host
        memory is not shown; `RayTaskError(DistBackendError)` is an NCCL failure. Evidence:
        exception type, message and chain, line, phase, the explaining diagnosis. A
        `KeyboardInterrupt` is a warning (stopped by hand), and so is a log whose only error is
        Ray's report of a worker ended by SIGTERM (stopped from outside). An error after
        training finished (final validation printed, last step reached, W&B's end-of-run block)
        is not a crash when it is a worker death or a signal (normal shutdown); another
        exception there is a warning.

    Why it matters:
        The run did not finish. The phase and the innermost exception are what to search for;
        the step it stopped at tells how much compute was lost.

    Example:
        (TaskRunner pid=2231) Traceback (most recent call last):
        (TaskRunner pid=2231)   File "verl/trainer/ppo/ray_trainer.py", line 1021, in fit
        (TaskRunner pid=2231) KeyError: 'acc'

    Advice:
        The specific diagnosis named in the message carries the advice for its cause. For
        causes without one: a rollout tensor-parallel size that does not divide the GPU count
        (`rollout world_size: 2 is not divisible by infer_tp: 4`) →
        `actor_rollout_ref.rollout.tensor_model_parallel_size` = the largest divisor of the GPU
        count not above the current value; an SGLang scheduler crash → another SGLang version,
        or overlap scheduling / CUDA graphs off through `engine_kwargs.sglang`; a CUDA error →
        `CUDA_LAUNCH_BLOCKING=1` for a rerun that names the failing kernel (CUDA reports faults
        late, at another call), and in the rollout `actor_rollout_ref.rollout.enforce_eager=True`
        (no CUDA graphs; verl's FAQ sends illegal memory accesses in the rollout to vLLM's
        troubleshooting); a CUDA setup error (`no kernel image is available`, `invalid device
        ordinal`, an old driver, an ECC error) → the build, GPU count, driver or GPU to fix, not
        a debug rerun; DAPO's `num_gen_batches=N >= max_num_gen_batches=N` (dynamic sampling
        gave up) → data the model solves part of the time, and a larger `rollout.n`; a bare
        SIGKILL → the kernel log (OOM killer); a SIGABRT → the failing
        worker's log (a native abort); an SGLang crash while it starts (initialisation) → the
        SGLang version verl pins, `rollout.gpu_memory_utilization` and CUDA graphs off; a cause
        not in the log → `HYDRA_FULL_ERROR=1` (only when the log shows Hydra: its messages or
        frames, or verl's TaskRunner / main_task driver; forks without Hydra, such as EasyR1's
        `Runner`, are not told to set it) and the workers' logs under
        /tmp/ray/session_latest/logs.

    Known false positives:
        A log that was copied while the run was still going, and ends just after a traceback
        the run survived, reads as a crash.

    References:
        ray:ray-observability/user-guides/debug-apps/debug-failures (Ray tracebacks, worker
        logs); verl:utils/config.py (config checks, raised inside the TaskRunner before verl
        0.9); pytorch:notes/cuda#asynchronous-execution (CUDA_LAUNCH_BLOCKING);
        verl:docs/faq/faq#illegal-memory-access.
    """

    title = "Run crashed"
    reads = "events"
    default_severity = "error"
    groups = ("crash",)

    def detect(self, run: Run) -> list[Finding]:
        story = crash_story(run)
        if not story.crashed:
            return []
        if story.kind == "killed" and story.cause is None:
            return [self._killed(run, story)]
        line = self._line(story)
        cause, advice = self._cause(run, story)
        during = f" during {story.phase.label}" if story.phase else ""
        when = _when(run, story.last_step)
        severity = "error"
        if story.interrupted:
            severity = "warning"
            message = f"The run was interrupted (KeyboardInterrupt){during} {when}."
        elif story.terminated:
            severity = "warning"
            message = (
                f"The run was stopped from outside{during} {when}: Ray reports a worker ended by "
                "SIGTERM (see ray-actor-died) and no error of the run's own. `ray stop`, the job "
                "scheduler (preemption, a time limit) or the driver's shutdown at the end of "
                "training sends it."
            )
        elif story.finished_line is not None:
            severity = "warning"
            message = (
                f"Training had finished ({story.finish_note}), then the run ended{during} "
                f"with {_unperiod(cause)}."
            )
        else:
            message = f"The run crashed{during} {when}: {_unperiod(cause)}."
        return [
            self.finding(
                severity=severity,
                message=message,
                step=line.step,
                evidence=self._evidence(run, story, line),
                advice=advice,
                references=cite_all([RAY_DEBUG_DOC]),
            )
        ]

    @staticmethod
    def _line(story: CrashStory) -> LogLine:
        if story.cause is not None:
            return story.cause.line
        if story.kind is not None:
            return story.kinds[story.kind]
        return story.lines[0]

    def _cause(self, run: Run, story: CrashStory) -> tuple[str, list[Advice]]:
        """The cause in words, and advice when no specific diagnosis gives it."""
        sig = SIGNATURE_BY_KIND.get(story.kind) if story.kind else None
        exc = story.cause.text() if story.cause else None
        wrapped = story.cause is not None and story.cause.from_wrapper
        if sig is None:
            if exc and wrapped:
                return f"{exc}; its message is not in the log ({story.missing})", [
                    _full_error_advice(run)
                ]
            if exc:
                return exc, []
            missing = story.missing or "no exception line is in the excerpt"
            return f"the cause is not in the log ({missing})", [_full_error_advice(run)]
        text = sig.cause
        if story.kind == "cuda-oom" and wrapped and _wrapper_only(story):
            text = WRAPPED_OOM
        elif story.kind == "nccl" and wrapped:
            text = WRAPPED_DIST
        if story.kind == "cuda-error":
            text += _cuda_detail(story)
        engine_phase = story.phase is not None and story.phase.tier == 2  # names the frame
        if (
            story.cut_in is not None
            and story.kind in ("vllm-engine", "sglang")
            and not engine_phase
        ):
            text += _cut_detail(story)
        quoted = story.kind in QUOTED_KINDS or (  # a check that failed without a message
            story.kind == "batch" and story.cause is not None and not _own_kind(story)
        )
        if exc and quoted and not wrapped:
            text += f": {exc}"
        if sig.finding:
            text += f" (see {sig.finding})"
        advice: list[Advice] = []
        if story.kind == "tp-world":
            advice = [_tp_advice(run, story.kinds["tp-world"].text)]
        elif story.kind == "sglang":
            advice = _sglang_advice(story, run)
        elif story.kind == "cuda-error":
            advice = _cuda_advice(run, story)
        elif story.kind == "filter-exhausted":
            advice = _filter_advice(run, story)
        if story.missing and (story.cause is None or wrapped):
            text += f"; its exception is not in the log ({story.missing})"
            advice.append(_full_error_advice(run))
        return text, advice

    @staticmethod
    def _evidence(run: Run, story: CrashStory, line: LogLine) -> dict[str, Any]:
        sig = SIGNATURE_BY_KIND.get(story.kind) if story.kind else None
        cause = story.cause
        evidence: dict[str, Any] = {
            "exception_type": cause.type if cause else None,
            "exception_message": quote(cause.message, 160) if cause and cause.message else None,
            "exception_chain": [e.type for e in story.exceptions[:10]],
            "line": line.line_no,
            "tracebacks": story.tracebacks,
            "last_step_logged": _last_step(run),
            "phase": story.phase.id if story.phase else None,
            "phase_method": story.phase.method if story.phase else None,
            "cause_kind": story.kind,
            "explained_by": sig.finding if sig else None,
            # a signature names the cause unless the text says it is cut off (a wrapper's
            # header, a traceback ending before its exception line)
            "cause_in_log": story.missing is None
            and ((cause is not None and not cause.from_wrapper) or story.kind is not None),
        }
        evidence["quote"] = quote(line.text, 200)
        if story.missing:
            evidence["missing"] = story.missing
        return evidence

    def _killed(self, run: Run, story: CrashStory) -> Finding:
        line = story.kinds["killed"]
        what, signal = _signal_of(line.text)
        hint = SIGNAL_HINTS.get(signal, "")
        advice = [
            env_advice(
                "dmesg",
                "dmesg -T | grep -iE 'killed process|out of memory'",
                "The kernel log says whether the OOM killer sent the signal, and how much memory "
                "the process held.",
                "linux:admin-guide/mm/concepts#oom-killer",
            )
        ]
        return self.finding(
            message=(
                f"The run crashed {_when(run, line.step)}: the process died ({what}) without a "
                f"Python traceback at line {line.line_no}.{hint}"
            ),
            step=line.step,
            evidence={
                "exception_type": signal,
                "exception_message": None,
                "line": line.line_no,
                "quote": quote(line.text),
                "tracebacks": 0,
                "last_step_logged": _last_step(run),
                "phase": story.phase.id if story.phase else None,
                "cause_kind": "killed",
            },
            advice=advice if signal == "SIGKILL" else [],
            references=cite_all([RAY_DEBUG_DOC]),
        )


def _signal_of(text: str) -> tuple[str, str]:
    """(what the line says, the signal it means) for a `killed` line."""
    m = KILLED_RE.search(text)
    what = next((g for g in m.groups() if g), "Killed") if m else "Killed"
    if what.startswith("terminate called"):
        return what, "SIGABRT"  # std::terminate calls abort()
    if text.startswith("[F "):
        file, _, message = what.partition("] ")
        return f"a fatal C++ log at {file}: {message}", "SIGABRT"  # glog's FATAL aborts
    if text.startswith("Fatal Python error"):
        return f"Fatal Python error: {what}", SIGNALS.get(what, what)
    return what, SIGNALS.get(what, what)


def _cuda_detail(story: CrashStory) -> str:
    """` (an illegal memory access was encountered, reported by NCCL's watchdog thread)`."""
    matches = (CUDA_ERROR_RE.search(x.text) for x in story.lines)
    what = next((m["what"].strip() for m in matches if m and m["what"]), None)
    where = [what] if what else []
    if any(WATCHDOG in x.text for x in story.lines):
        where.append("reported by the NCCL watchdog thread, which only carries it")
    elif story.raised_in:
        engine = "vLLM" if story.raised_in == "vllm" else "SGLang"
        where.append(
            f"raised in {engine}'s code" + (", see vllm-error" if engine == "vLLM" else "")
        )
    return f" ({', '.join(where)})" if where else ""


# CUDA errors that are not a kernel's fault: the setup is wrong, and no debug rerun helps.
# (text in the error, what to look at, what it means)
CUDA_SETUP_ERRORS = (
    (
        "no kernel image is available",
        "a torch / vLLM / flash-attn build with kernels for this GPU's architecture",
        "The installed build has no kernels for this GPU's compute capability (a wheel built "
        "for older GPUs, or for another CUDA version): install one built for this GPU.",
    ),
    (
        "invalid device ordinal",
        "CUDA_VISIBLE_DEVICES and trainer.n_gpus_per_node matching the GPUs the node has",
        "A process asked for a GPU index that does not exist: more GPUs per node requested than "
        "are visible to it.",
    ),
    (
        "driver version is insufficient",
        "an NVIDIA driver at least as new as the CUDA runtime of the installed torch",
        "The NVIDIA driver is older than the CUDA runtime torch was built with.",
    ),
    (
        "ECC error",
        "`nvidia-smi -q -d ECC` and the kernel log's Xid errors for that GPU",
        "The GPU reported a memory (ECC) error: a hardware fault; take the GPU out of the job.",
    ),
)


def _cuda_advice(run: Run, story: CrashStory) -> list[Advice]:
    """Find the failing kernel; in the rollout, run the engine without CUDA graphs. For a setup
    error (no kernel image, wrong device, old driver, ECC), what to fix instead."""
    texts = [x.text for x in story.lines]
    for text, suggested, why in CUDA_SETUP_ERRORS:
        if any(text in t for t in texts):
            return [env_advice("cuda-setup", suggested, why, "pytorch:notes/cuda")]
    assert_hit = any("device-side assert" in t for t in texts)
    why = (
        "CUDA reports a kernel's fault at a later call, so the traceback may point at the wrong "
        "place. With CUDA_LAUNCH_BLOCKING=1 (slow: for a debugging rerun only) the error is "
        "raised by the kernel that failed."
    )
    if assert_hit:
        why += (
            " A device-side assert is usually an index out of range: a token id at or above the "
            "model's vocabulary size (a tokenizer that does not match the model), or a label "
            "outside the valid range."
        )
    advice = [
        env_advice("CUDA_LAUNCH_BLOCKING", 1, why, "pytorch:notes/cuda#asynchronous-execution")
    ]
    if story.raised_in == "sglang" or "sglang" in story.kinds:
        return advice + _sglang_advice(story)  # SGLang's own switches (CUDA graphs, overlap)
    rollout = story.raised_in is not None or (
        story.phase is not None and story.phase.id == "rollout"
    )
    if rollout or any("/vllm/" in t for t in texts):
        advice.append(
            advise(
                run,
                f"{RO}.enforce_eager",
                "An illegal memory access in the rollout is most often a fault inside a replayed "
                "CUDA graph or an attention kernel of the engine's version: eager mode (no CUDA "
                "graphs, no torch.compile) avoids the first and names the kernel for the second; "
                "if it persists, another vLLM release or attention backend.",
                "verl:docs/faq/faq#illegal-memory-access",
                suggest=True,
            )
        )
    return advice


def _filter_advice(run: Run, story: CrashStory) -> list[Advice]:
    """Nearly every group was all-right or all-wrong: data the model solves only sometimes."""
    m = FILTER_EXHAUSTED_RE.search(story.kinds["filter-exhausted"].text)
    rounds = f"{m.group(1)} generation rounds" if m else "The generation rounds"
    return [
        env_advice(
            "data",
            "prompts the model solves part of the time (or a larger model)",
            f"{rounds} found too few groups with both right and wrong answers: the "
            "data is far too hard (or too easy) for this model. A higher "
            "algorithm.filter_groups.max_num_gen_batches (0: no cap) only postpones the stop.",
            "verl-recipe:dapo/dapo_ray_trainer.py",
        ),
        *filter_advice(run)[:1],  # more responses per prompt
    ]


def _last_step(run: Run) -> int | None:
    steps = run.steps
    return int(steps[-1]) if len(steps) else None


def _when(run: Run, step: int | None) -> str:
    """`after step 13`, `after the initial validation (step 0)`, or no step at all."""
    if step is None:
        return "with no training step in the log before it"
    names = run.metrics.filter(run.metrics["step"] == step).get_column("metric").to_list()
    if names and all(str(n).startswith("val") for n in names):
        return f"after the initial validation (step {step}), before any training step"
    return f"after step {step}"


# Ray's wrapper names only the class: torch's CUDA OOM raised in the task, or Ray's own
# `ray.exceptions.OutOfMemoryError` (its memory monitor killed a worker) passed on by ray.get.
WRAPPED_OOM = (
    "an OutOfMemoryError: most likely CUDA out of memory in the task, though Ray's host-memory "
    "OutOfMemoryError (a worker its memory monitor killed, passed on by ray.get) has the same "
    "name and the text does not show which"
)
WRAPPED_DIST = (
    "a torch.distributed backend error (DistBackendError; the backend of a GPU job is NCCL)"
)
# The log shows Hydra: its messages or frames, or verl's Hydra entry point (main_ppo and the
# driver it starts, TaskRunner / main_task).
HYDRA_SHOWN_RE = re.compile(
    r"HYDRA_FULL_ERROR|Error executing job with overrides|/hydra/|\bhydra\.|main_ppo\.py"
)
HYDRA_DRIVERS = ("TaskRunner", "TaskRunnerV1", "main_task")


def _own_kind(story: CrashStory) -> bool:
    """Whether the cause's own line is the one its signature matched."""
    line = story.kinds.get(story.kind) if story.kind else None
    return story.cause is not None and line is story.cause.line


def _wrapper_only(story: CrashStory) -> bool:
    """Whether the OOM is named only by Ray's `RayTaskError(OutOfMemoryError)` header."""
    line = story.kinds.get("cuda-oom")
    return line is not None and "CUDA" not in line.text and "torch" not in line.text


def _cut_detail(story: CrashStory) -> str:
    """` (the traceback ends in wake_up, vllm/entrypoints/llm.py)`: its innermost frame shown."""
    assert story.cut_in is not None
    m = FRAME_RE.match(story.lines[story.cut_in[1]].text)
    if m is None:
        return ""
    return f" (the traceback ends in {m.group('func')}, {engine_path(m.group('path'))})"


def shows_hydra(run: Run) -> bool:
    """Whether the log shows Hydra at work (verl's own launcher; forks such as EasyR1 use none)."""
    actors = set(run.meta.get("ray_actors") or ())
    if actors & set(HYDRA_DRIVERS) or run.meta.get("overrides"):
        return True
    return any(HYDRA_SHOWN_RE.search(x.text) for x in log_lines(run))


def _full_error_advice(run: Run) -> Advice:
    logs = (
        f"read the failing worker's own log in {RAY_LOGS} (worker-*.err, raylet.out), where Ray "
        "keeps each worker's full output."
    )
    if not shows_hydra(run):
        return env_advice(
            "ray-logs",
            f"{RAY_LOGS}: the driver's full output and the failing worker's worker-*.err",
            f"The exception that ended the run is not in this text: {logs}",
            "ray:ray-observability/user-guides/configure-logging",
        )
    return env_advice(
        "HYDRA_FULL_ERROR",
        1,
        "The exception that ended the run is not in this text. Rerun with HYDRA_FULL_ERROR=1 for "
        f"the full traceback, and {logs}",
        "hydra:configure_hydra/logging",
    )


def _tp_advice(run: Run, text: str) -> Advice:
    """A rollout TP size that divides the rollout world size (the GPU count)."""
    key = f"{RO}.tensor_model_parallel_size"
    m = TP_WORLD_RE.search(text)
    numbers = ints_of(m) if m else []
    world, tp = numbers if len(numbers) == 2 else (None, None)
    per_node = current_value(run, "trainer.n_gpus_per_node")
    if world is None and isinstance(per_node, int):
        nodes = current_value(run, "trainer.nnodes")
        world = per_node * (nodes if isinstance(nodes, int) else 1)  # verl's default: 1 node
    current = current_value(run, key)
    tp = current if isinstance(current, int) and current > 0 else tp
    suggested = divisor_at_most(world, tp) if world and tp else None
    detail = f" ({plural(world, 'GPU')} here)" if world else ""
    return advise(
        run,
        key,
        f"The rollout engine splits each model over tensor_model_parallel_size GPUs, so it must "
        f"divide the number of GPUs{detail}.",
        "verl:workers/fsdp_workers.py",
        suggest=suggested,
        rule="a divisor of trainer.n_gpus_per_node × trainer.nnodes",
    )


def _sglang_override(key: str, why: str) -> Advice:
    parameter = f"{RO}.engine_kwargs.sglang.{key}"
    return Advice(
        parameter,
        None,
        True,
        f"++{parameter}=True",
        why,
        cite("sglang:advanced_features/server_arguments"),
    )


def _sglang_advice(story: CrashStory, run: Run | None = None) -> list[Advice]:
    overlap = any("event_loop_overlap" in x.text for x in story.lines)
    where = " (the crash is in event_loop_overlap)" if overlap else ""
    if story.phase is not None and story.phase.id == "init" and run is not None:
        return _sglang_init_advice(run)
    return [
        env_advice(
            "sglang",
            "another SGLang release (the one your verl release pins, or the next fix release)",
            "A crash inside SGLang's scheduler (update_running_batch, the event loops) is "
            "usually an SGLang bug, often a CUDA illegal memory access in multi-turn rollouts.",
            "verl:docs/workers/sglang_worker",
        ),
        _sglang_override(
            "disable_overlap_schedule",
            f"Overlap scheduling runs the next batch's scheduling alongside the GPU step{where}; "
            "turning it off avoids that code path at some speed cost.",
        ),
        _sglang_override(
            "disable_cuda_graph",
            "A fault inside a replayed CUDA graph surfaces in the scheduler; without CUDA graphs "
            "decoding is slower but the fault points at its real kernel.",
        ),
    ]


def _sglang_init_advice(run: Run) -> list[Advice]:
    """SGLang failed while building its workers: its version, its memory share, CUDA graphs."""
    advice = [
        env_advice(
            "sglang",
            "the SGLang version your verl release pins",
            "SGLang failed while starting its scheduler and TP workers (loading the model, "
            "reserving the KV cache, capturing CUDA graphs): most often an SGLang that does not "
            "match verl or torch, or too little GPU memory left beside the training side's.",
            "verl:docs/workers/sglang_worker",
        )
    ]
    mem = gpu_memory_advice(
        run,
        "SGLang reserves this share of GPU memory (its mem_fraction_static) at start-up, next "
        "to what FSDP already holds on the same GPU.",
    )
    if mem is not None:
        advice.append(mem)
    advice.append(
        _sglang_override(
            "disable_cuda_graph",
            "Capturing CUDA graphs at start-up takes memory and time; without them SGLang "
            "starts with less, at some decoding speed.",
        )
    )
    return advice


def _unperiod(text: str) -> str:
    """`text` without its one closing period (an ellipsis stays), to end a sentence with one."""
    return text[:-1] if text.endswith(".") and not text.endswith("..") else text
