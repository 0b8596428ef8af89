"""A Ray actor or worker died: which, in which phase, and what its exit details say."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all

from ._common import Hit, context, env_advice, quote, where
from ._crash_story import crash_story
from ._signatures import (
    ACTOR_DIED_RE,
    HOST_OOM_RE,
    Phase,
    SignatureDetector,
    phase_near,
)
from .oom import offload_advice

RAY_LOGS = "/tmp/ray/session_latest/logs"
EXIT_TYPE_RE = re.compile(r"Worker exit type: (\w+)")
EXIT_DETAIL_RE = re.compile(
    r"Worker exit detail: (.+?)(?=\s+(?:There are some potential root causes|Some common causes)|$)"
)
EXIT_CODE_RE = re.compile(r"[Ee]xit code:? (-?\d+)")
OWNER_DIED_RE = re.compile(r"because its owner has died")
OWNER_EXIT_RE = re.compile(r"Owner worker exit type: ([A-Z_]+)\b")
SIGNAL_RE = re.compile(r"\b(SIGTERM|SIGKILL|SIGSEGV|SIGABRT|SIGBUS|SIGINT)\b")
ACTOR_RE = re.compile(r"^\s*(class_name|name|pid): (\S+)")
EXIT_CODES = {137: "SIGKILL", 139: "SIGSEGV", 134: "SIGABRT", 143: "SIGTERM", -9: "SIGKILL"}


@dataclass(frozen=True)
class Exit:
    """What Ray says about how the worker process ended."""

    exit_type: str | None
    detail: str | None
    code: int | None
    signal: str | None
    vanished: bool  # connection error / End of file: gone without a Python exception
    cut: bool  # the message ends mid-sentence
    owner_died: bool = False  # Ray removed it because the process that created it ended
    owner_exit: str | None = None  # how that owner ended


def read_exit(text: str) -> Exit:
    """The exit type, detail, exit code and signal in Ray's death message(s)."""
    m = EXIT_TYPE_RE.search(text)
    d = EXIT_DETAIL_RE.search(text)
    c = EXIT_CODE_RE.search(text)
    code = int(c.group(1)) if c else None
    sig = SIGNAL_RE.search(d.group(1) if d else text)
    signal = sig.group(1) if sig else EXIT_CODES.get(code) if code is not None else None
    vanished = bool(re.search(r"connection error code|End of file", text))
    last = text.rstrip().splitlines()[-1] if text.strip() else ""
    owner = OWNER_EXIT_RE.search(text)
    owner_died = OWNER_DIED_RE.search(text) is not None
    return Exit(
        exit_type=m.group(1) if m else None,
        detail=d.group(1).strip() if d else None,
        code=code,
        signal=signal,
        vanished=vanished,
        cut=not owner_died
        and bool(last)
        and last[-1] not in ".)]'\""
        and ACTOR_DIED_RE.search(last) is not None,
        owner_died=owner_died,
        owner_exit=owner.group(1) if owner else None,
    )


def explain(exit_: Exit, host_oom: bool, cuda_line: int | None = None) -> str:
    """What the exit details mean (`cuda_line`: a CUDA error came first, at that line)."""
    if exit_.owner_died:
        how = f" ({exit_.owner_exit})" if exit_.owner_exit else ""
        return (
            f"Its owner, the process that created it, had ended{how}, and Ray removes an actor "
            "with its owner: a secondary death. The real failure is whatever ended the owner, "
            "earlier in this log or in the owner's own log."
        )
    if cuda_line is not None and not host_oom and exit_.signal != "SIGTERM":
        return (
            f"It died after the CUDA error at line {cuda_line}: a CUDA fault leaves the process "
            "unusable and it exits, so the death is that error's consequence, not a memory kill "
            "(see run-crashed)."
        )
    if host_oom:
        return (
            "Ray's memory monitor killed it for lack of host memory (see host-oom-worker-killed)."
        )
    if exit_.signal == "SIGTERM":
        return (
            "It was stopped from outside by SIGTERM: `ray stop`, the job scheduler (preemption, "
            "time limit) or the driver shutting down."
        )
    if exit_.signal == "SIGSEGV":
        return "It crashed in native code (SIGSEGV): vLLM, NCCL or a CUDA extension."
    if exit_.vanished or exit_.signal == "SIGKILL":
        return (
            "The process vanished without a Python exception: killed by SIGKILL (most often "
            "the Linux OOM killer when host or cgroup memory runs out), `ray stop --force`, or "
            "a crash in native code (SIGSEGV)."
        )
    if exit_.exit_type and exit_.exit_type.startswith("INTENDED"):
        return f"Ray calls it an intended exit ({exit_.exit_type})."
    if exit_.exit_type == "USER_ERROR":
        return "An exception in the actor's own code ended it; its traceback is in the log above."
    if exit_.cut:
        return "The message is cut off before Ray's exit details."
    return "The text does not say why."


class RayActorDied(SignatureDetector, code="LS022", name="ray-actor-died"):
    """A Ray actor or worker process died (a verl WorkerDict, a vLLM server, a task worker).

    What it detects:
        `ray.exceptions.ActorDiedError` / `RayActorError`, `The actor died unexpectedly before
        finishing this task`, `The actor is dead because its worker process has died`, the
        raylet's `A worker died or was killed while executing a task` (also when cut off
        mid-sentence), `Owner's node has crashed` and `WorkerCrashedError`. Ray's exit details
        are read and explained: `Worker exit type: SYSTEM_ERROR` with `connection error code 2`
        / `End of file` (the process vanished: SIGKILL by the OOM killer, `ray stop --force`,
        or a segfault), `by a signal … SIGTERM` (stopped from outside), exit codes (137 =
        SIGKILL, 139 = SIGSEGV), intended exits. Evidence: exit type, detail, code, signal, the
        dead actor's class and name, and the phase it died in (`sleep` of the async vLLM
        server, `update_actor`, …). A death that follows a CUDA error in the same crash is
        named as that error's consequence (no memory-kill guess, see run-crashed).

    Why it matters:
        verl's workers are Ray actors: one dead worker stops the whole run, and the Python
        traceback the driver prints only says that it died. What killed it is in Ray's exit
        details, the kernel log or the worker's own log.

    Example:
        ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.
                class_name: create_colocated_worker_cls.<locals>.WorkerDict
        The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR
        Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file.

    Advice:
        For a vanished process (connection error, End of file, SIGKILL): check host memory
        first — `dmesg -T | grep -i 'killed process'` shows the OOM killer — and turn off CPU
        offload where it is on (`actor.fsdp_config.param_offload`, `optimizer_offload`,
        `ref.fsdp_config.param_offload`); read the worker's log and `raylet.out` in
        /tmp/ray/session_latest/logs. For SIGTERM while training: look at the job scheduler
        (preemption, time limit) and whatever else runs `ray stop`. A death in the vLLM
        server's `sleep`/`wake_up` that is not a memory kill is a vLLM sleep-mode crash: use
        the vLLM version your verl release pins.

    Known false positives:
        Ray kills its workers when the driver exits: a death after training finished (final
        validation printed) is reported at info as a normal shutdown; so is a death that training
        survived (an idle worker Ray restarted).

    References:
        ray:ray-core/fault_tolerance/actors (exit types);
        ray:ray-observability/user-guides/debug-apps/debug-failures (worker logs);
        ray:ray-observability/user-guides/configure-logging (the `(Name pid=…)` prefix).
    """

    title = "A Ray actor or worker died"
    groups = ("ray", "crash")

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        story = crash_story(run)
        near = "\n".join(context(run, h.line_no, 0, 8) for h in hits[:5])
        exit_ = read_exit("\n".join(h.text for h in hits[:20]))
        host_oom = bool(HOST_OOM_RE.search(context(run, hits[0].line_no, 80, 80)))
        final = story.crashed and story.in_final_error(hits[-1].line_no)
        cuda = story.kinds.get("cuda-error") if final else None
        cuda_line = cuda.line_no if cuda is not None and cuda.line_no < hits[0].line_no else None
        phase = story.phase if final else phase_near(run, hits[0].line_no, 80, 20)
        actor = {m.group(1): m.group(2) for m in map(ACTOR_RE.match, near.splitlines()) if m}
        evidence = self._evidence(exit_, actor, phase, host_oom)
        evidence["after_cuda_error_line"] = cuda_line
        message = self._message(hits, exit_, actor, phase, host_oom, cuda_line)
        severity = "warning" if final and story.terminated else "error"
        if not final and not story.finished_before(hits[0].line_no):
            severity = "info"  # Ray replaced it, or it was not one of training's workers
            message += " Training went on after it."
        return self.signature_finding(
            hits,
            message,
            severity=severity,
            evidence=evidence,
            advice=self._advice(run, exit_, phase, host_oom, cuda_line),
            references=cite_all(["ray:ray-core/fault_tolerance/actors"]),
        )

    @staticmethod
    def _message(
        hits: list[Hit],
        exit_: Exit,
        actor: dict[str, str],
        phase: Phase | None,
        host_oom: bool,
        cuda_line: int | None,
    ) -> str:
        who = "A Ray actor" if any("actor" in h.text for h in hits) else "A Ray worker"
        name = actor.get("name") or actor.get("class_name")
        if name:
            who += f" ({quote(name, 60)})"
        during = f" during {phase.label}" if phase else ""
        details = [x for x in (exit_.exit_type, exit_.detail) if x]
        said = f" ({quote('; '.join(details), 160)})" if details else ""
        why = explain(exit_, host_oom, cuda_line)
        return f"{who} died{during} at {where(hits[0])}{said}. {why}"

    @staticmethod
    def _evidence(
        exit_: Exit, actor: dict[str, str], phase: Phase | None, host_oom: bool
    ) -> dict[str, Any]:
        return {
            "exit_type": exit_.exit_type,
            "exit_detail": quote(exit_.detail) if exit_.detail else None,
            "exit_code": exit_.code,
            "signal": exit_.signal,
            "vanished": exit_.vanished,
            "message_cut": exit_.cut,
            "actor_class": actor.get("class_name"),
            "actor_name": actor.get("name"),
            "phase": phase.id if phase else None,
            "host_oom_logged": host_oom,
        }

    @staticmethod
    def _advice(
        run: Run, exit_: Exit, phase: Phase | None, host_oom: bool, cuda_line: int | None
    ) -> list[Advice]:
        logs = env_advice(
            "ray-logs",
            f"{RAY_LOGS}/raylet.out and the dead worker's worker-*.err",
            "Ray's own log of the death, and the worker's last output before it.",
            "ray:ray-observability/user-guides/configure-logging",
        )
        if exit_.signal == "SIGTERM":
            return [
                env_advice(
                    "job-scheduler",
                    "the scheduler's log for preemption or a time limit",
                    "SIGTERM comes from outside the worker: the job scheduler, `ray stop`, or "
                    "the driver exiting.",
                    "ray:ray-core/fault_tolerance/actors",
                ),
                logs,
            ]
        if exit_.owner_died or (cuda_line is not None and not host_oom):
            return [logs]  # the cause is elsewhere: the owner's end, the CUDA error
        out: list[Advice] = []
        if not host_oom and exit_.signal != "SIGSEGV":
            out.append(
                env_advice(
                    "dmesg",
                    "dmesg -T | grep -iE 'killed process|out of memory'",
                    "A process that vanishes without a Python exception is most often killed by "
                    "the kernel's OOM killer (host or cgroup memory); the kernel log says so.",
                    "linux:admin-guide/mm/concepts#oom-killer",
                )
            )
        if host_oom or exit_.vanished or exit_.signal == "SIGKILL" or exit_.cut:
            out.extend(offload_advice(run))
        if phase is not None and phase.id == "weight-sync":
            out.append(
                env_advice(
                    "vllm",
                    "the vLLM version your verl release pins",
                    "A worker that dies while vLLM sleeps or wakes up, without a memory kill, "
                    "is a crash in vLLM's sleep mode (its cumem allocator).",
                    "verl:workers/rollout/vllm_rollout",
                )
            )
        out.append(logs)
        return out
