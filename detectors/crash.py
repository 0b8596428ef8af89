"""The catch-all crash diagnosis: a run that ended in an exception no specific signature explains."""

from __future__ import annotations

from logscope.detector import Detector
from logscope.model import Finding, Run

from ._common import (
    LogLine,
    find_lines,
    log_lines,
    quote,
)
from ._signatures import (
    EXCEPTION_RE,
    KILLED_KEYS,
    KILLED_RE,
    SPECIFIC_CRASH_KEYS,
    SPECIFIC_CRASH_RE,
    TRACEBACK_RE,
)


class RunCrashed(Detector):
    """The run ended with an exception that no more specific diagnosis explains.

    What it detects:
        A Python traceback (`Traceback (most recent call last):`), a Ray
        `RayTaskError(...)` or Hydra's `Error executing job with overrides` after which no
        training step was logged, when none of the specific signatures (cuda-oom,
        host-oom-worker-killed, ray-worker-registration-failed, vllm-model-inspection-failed,
        nccl-error, batch-size-divisibility-error, vllm-kv-cache-no-memory, prompt-too-long,
        max-num-batched-tokens-too-small, tensors-on-different-devices) is in the log.
        Evidence: the exception type and message (the last exception line of the last
        traceback), its line, and how many tracebacks the log holds. A `KeyboardInterrupt` is reported as a warning (stopped by
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
