"""The crash story of a run, computed once and shared by every crash detector.

Did the log end in an error after the last training step? If so: where the final error
starts, its exception chain and innermost cause, the fatal signatures in it, the training phase,
the last step logged before it, and whether training had already finished (then the error is a
normal shutdown, not a crash). Cached on the run like `_common.log_lines`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from logscope.model import Run

from ._common import LogLine, log_lines, quote
from ._signatures import (
    FRAME_RE,
    SIGNATURE_BY_KIND,
    SIGNATURES,
    TRACEBACK_KEYS,
    TRACEBACK_RE,
    Phase,
    batch_arithmetic,
    exception_of,
    phase_at,
    signature_kinds,
    source_index,
)

# Training finished: verl prints the final validation after the last step's metrics. (tqdm's bar
# at 100% and W&B's end-of-run block are never events: the reader notes them in meta.run_end,
# and W&B's block, printed at any exit, only counts when no error came before it.)
FINISHED_RE = re.compile(r"Final validation metrics")
WRAPPER_RE = re.compile(r"RayTaskError|RaySystemError")
ROOT_ABOVE_RE = re.compile(r"root cause above|See root cause", re.I)
SHUTDOWN_EXCEPTIONS = ("SystemExit", "KeyboardInterrupt")
SHUTDOWN_KINDS = ("actor-died", "killed", "nccl", "hccl", "dist-store")
SIGTERM_RE = re.compile(r"\bSIGTERM\b")
RAY_TASK_RE = re.compile(r"\bray::(\w+)\.\w+\(\)")  # the actor class of a remote task
LAUNCHER_PATH_RE = re.compile(r"/hydra/|/runpy\.py|main_\w+\.py")


@dataclass(frozen=True)
class Exc:
    """An exception line of the final error."""

    type: str
    message: str | None
    line: LogLine
    index: int  # position in CrashStory.lines
    from_wrapper: bool = False  # only Ray's `RayTaskError(Type)` header names it

    @property
    def name(self) -> str:
        """The class name without its module (`ConfigKeyError`)."""
        return self.type.rsplit(".", 1)[-1]

    def text(self, limit: int = 200) -> str:
        """`Type: message`, shortened."""
        return f"{self.type}: {quote(self.message, limit)}" if self.message else self.type


@dataclass
class CrashStory:
    """How a run's log ends. `crashed`: it ended with an error while training was unfinished."""

    crashed: bool = False
    shutdown: bool = False  # an error (a worker death, SIGTERM) only after training finished
    lines: list[LogLine] = field(default_factory=list)  # the final error, to the end of the log
    exceptions: list[Exc] = field(default_factory=list)
    cause: Exc | None = None  # the innermost non-wrapper exception
    kind: str | None = None  # the signature kind that explains it (see SIGNATURES)
    kinds: dict[str, LogLine] = field(default_factory=dict)  # every fatal kind, its first line
    #: "vllm"/"sglang": the cause was raised in that engine's code (or, for a traceback cut
    #: before its exception, its innermost frame shown is the engine's: see `cut_in`)
    raised_in: str | None = None
    #: a traceback cut before its exception whose innermost frame shown is the engine's:
    #: (engine, index of that frame in `lines`)
    cut_in: tuple[str, int] | None = None
    phase: Phase | None = None
    last_step: int | None = None  # the last training step logged before the error
    finished_line: int | None = None  # training had finished before this line
    finish_note: str = ""
    missing: str | None = None  # why the cause is not in the log
    tracebacks: int = 0

    @property
    def start(self) -> LogLine | None:
        return self.lines[0] if self.lines else None

    @property
    def interrupted(self) -> bool:
        return self.cause is not None and self.cause.name == "KeyboardInterrupt"

    @property
    def terminated(self) -> bool:
        """The error is only Ray's report of a worker stopped by SIGTERM: no exception, no
        traceback, no other failure (what `ray stop`, a scheduler or the end of a job sends)."""
        return (
            self.kind == "actor-died"
            and set(self.kinds) == {"actor-died"}
            and self.cause is None
            and not self.tracebacks
            and any(SIGTERM_RE.search(x.text) for x in self.lines)
        )

    def finished_before(self, line_no: int) -> bool:
        """Whether training had finished before log line `line_no` (shutdown from there on)."""
        return self.finished_line is not None and line_no > self.finished_line

    def in_final_error(self, line_no: int) -> bool:
        return bool(self.lines) and line_no >= self.lines[0].line_no


def crash_story(run: Run) -> CrashStory:
    """The run's crash story (computed once per events list and metrics frame)."""
    cached = run.__dict__.get("_logscope_crash_story")
    if (
        cached is not None
        and cached[0] is run.events
        and cached[1] == len(run.events)
        and cached[2] is run.metrics
    ):
        return cached[3]
    story = _build(run)
    run.__dict__["_logscope_crash_story"] = (run.events, len(run.events), run.metrics, story)
    return story


def _build(run: Run) -> CrashStory:
    lines = log_lines(run)
    steps = run.steps
    last_step = int(steps[-1]) if len(steps) else None
    tail = lines[_tail_start(lines, last_step) :]
    fatal = [i for i, x in enumerate(tail) if is_fatal(x.text)]
    finish, note = _finish(run, tail, fatal, last_step)
    story = CrashStory(last_step=last_step)
    if finish is not None:
        story.finished_line = tail[finish].line_no if finish >= 0 else tail[0].line_no - 1
        story.finish_note = note
    region = [i for i in fatal if finish is None or i > finish]
    if not region:
        return story
    story.lines = tail[region[0] :]  # flattened text was unfolded by the reader
    story.last_step = story.lines[0].step
    _read_error(story)
    story.shutdown = finish is not None and _is_shutdown(story)
    story.crashed = not story.shutdown
    return story


def is_fatal(text: str) -> bool:
    """Whether a cleaned log line belongs to an error: traceback, exception or fatal signature."""
    if any(k in text for k in TRACEBACK_KEYS) and TRACEBACK_RE.search(text):
        return True
    if text.startswith("File ") and FRAME_RE.match(text):
        return True
    return exception_of(text) is not None or bool(signature_kinds(text))


def _tail_start(lines: list[LogLine], last_step: int | None) -> int:
    """Index of the first line after the last training step (len(lines): none)."""
    if last_step is None or not lines:
        return 0
    last = lines[-1].step
    if last is None or last < last_step:
        return len(lines)  # steps were logged after the last event
    i = len(lines)
    while i > 0 and lines[i - 1].step == last:
        i -= 1
    return i


def _finish(
    run: Run, tail: list[LogLine], fatal: list[int], last_step: int | None
) -> tuple[int | None, str]:
    """(index in `tail` after which training had finished, -1: from its start; a note)."""
    total = run.meta.get("total_training_steps")
    for i, x in enumerate(tail):
        m = FINISHED_RE.search(x.text)
        if m is not None:
            return i, f"'{m.group(0)}' at line {x.line_no}"
    if isinstance(total, int) and last_step is not None and last_step >= total > 0 and tail:
        return -1, f"the last step, {last_step} of {total}, was logged"
    # the reader notes where lines it does not keep as events showed the end of training (after
    # the last step: a bar that reached 100% before a resume does not count)
    ends = run.meta.get("run_end") or {}
    labels = {"progress_done": "the progress bar at 100%", "wandb_footer": "W&B's end-of-run block"}
    for key, label in labels.items():
        mark = ends.get(key) or {}
        line = mark.get("line")
        if not isinstance(line, int) or not tail or mark.get("after_step") != last_step:
            continue
        before = [i for i, x in enumerate(tail) if x.line_no < line]
        if not any(tail[f].line_no < line for f in fatal):
            return (before[-1] if before else -1), f"{label} at line {line}"
    return None, ""


def _read_error(story: CrashStory) -> None:
    """Fill the exception chain, cause, signature kinds, phase and what is missing."""
    texts = [x.text for x in story.lines]
    for i, x in enumerate(story.lines):
        m = exception_of(x.text)
        if m is not None:
            story.exceptions.append(Exc(m.group("type"), m.group("msg") or None, x, i))
        for kind in signature_kinds(x.text):
            story.kinds.setdefault(kind, x)
    story.tracebacks = sum("Traceback (most recent call last)" in t for t in texts)
    story.cause = _cause(story.exceptions)
    story.raised_in = _raised_in(texts, story.cause)
    if story.cause is None:
        story.cut_in = _cut_in(texts)
        story.raised_in = story.cut_in[0] if story.cut_in else None
    elif not story.cause.from_wrapper:
        src = source_index(texts, story.cause.index)
        if src is not None and batch_arithmetic(story.cause.name, texts[src]):
            story.kinds.setdefault("batch", story.lines[src])
    story.kind = _kind(story)
    if story.cut_in is not None and story.kind is not None and story.kind not in story.kinds:
        story.kinds[story.kind] = story.lines[story.cut_in[1]]  # the engine's frame tells it
    story.phase = phase_at(texts, _anchor(story))
    if story.cause is None:
        story.missing = _missing(texts)
    elif story.cause.from_wrapper:
        story.missing = (
            f"only Ray's `RayTaskError({story.cause.type})` header names it; the worker's own "
            f"`{story.cause.name}: …` line is not in the excerpt"
        )


def _cause(chain: list[Exc]) -> Exc | None:
    """The innermost cause: the last exception that is not a Ray wrapper; when it only says
    "see root cause above" (vLLM's engine), the one before it."""
    real = [e for e in chain if not WRAPPER_RE.search(e.type)]
    if real:
        last = real[-1]
        consequence = last.name == "EngineDeadError" or ROOT_ABOVE_RE.search(last.message or "")
        if consequence and len(real) > 1:
            return real[-2]
        return last
    for e in reversed(chain):  # only wrappers: `RayTaskError(ValueError)` names the type
        m = re.search(r"\(([\w.]+)\)", e.type)
        if m:
            return Exc(m.group(1), None, e.line, e.index, from_wrapper=True)
    return None


# An import that fails on the engine's own module (`cannot import name 'x' from 'vllm.y'`, `No
# module named 'vllm._C'`): the installed engine is not the one this verl was written for.
ENGINE_IMPORT_RE = re.compile(r"""['"](vllm|sglang)[.'"]""")
IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError")


def _raised_in(texts: list[str], cause: Exc | None) -> str | None:
    """ "vllm"/"sglang" when the frame just above the cause is in that engine's code (an excerpt
    that starts at the cause: the innermost frame of the traceback it caused), the cause is
    an import of the engine's module that failed, or only Ray's header of a task of the
    engine's server names the cause."""
    if cause is None:
        return None
    if cause.from_wrapper and (task := RAY_TASK_RE.search(cause.line.text)) is not None:
        # only Ray's header names it: the remote task that raised it is the engine's server's
        # (`RayTaskError(RuntimeError): ray::vLLMHttpServer.launch_server()`)
        engine = next((e for e in ("vllm", "sglang") if e in task.group(1).lower()), None)
        if engine is not None:
            return engine
    if cause.name in IMPORT_ERRORS and cause.message:
        m = ENGINE_IMPORT_RE.search(cause.message)
        if m is not None:
            return m.group(1)
    for text in reversed(texts[: cause.index]):
        m = FRAME_RE.match(text)
        if m is not None:
            path = m.group("path")
            return next((e for e in ("vllm", "sglang") if f"/{e}/" in path), None)
        if "Traceback (most recent call last)" in text:
            return None
    # The excerpt starts at the cause, above its frames: the frames right after it are of the
    # traceback it caused (Ray's report of the remote call: it ends in a wrapper or is cut, the
    # cause being the last real exception), and they run down to where it was raised. Another
    # traceback (its own `Traceback` header) is another failure.
    after = texts[cause.index + 1 :]
    other = next((i for i, t in enumerate(after) if "Traceback (most recent call last)" in t), None)
    cut = _cut_in(after[:other])
    return cut[0] if cut else None


# Frames a cut traceback passes through on its way down that do not tell whose code failed
# (Ray's own: a driver waiting in `ray.get` for the remote call that failed).
# A C++ stack frame (torch prints them innermost first): `frame #3: sym + 0x92 (0x7f… in lib)`.
NATIVE_FRAME_RE = re.compile(r"^frame #[0-9]+: .*\(0x[0-9a-f]+ in (?P<where>[^)]+)\)$")
PASS_THROUGH_RE = re.compile(
    r"/torch/|/contextlib\.py|/functools\.py|/threading\.py|/ray/_private/"
)


def _cut_in(texts: list[str]) -> tuple[str, int] | None:
    """(engine, frame index) when a traceback cut before its exception last shows a frame of
    vLLM's or SGLang's code (verl's `third_party/vllm` included), torch's frames skipped; or a
    C++ stack (no Python frame) runs in an engine's process (`… in sglang::scheduler_TP0)`)."""
    for i in range(len(texts) - 1, -1, -1):
        m = FRAME_RE.match(texts[i])
        if m is None:
            continue
        path = m.group("path")
        if PASS_THROUGH_RE.search(path):
            continue
        engine = next((e for e in ("vllm", "sglang") if f"/{e}/" in path), None)
        return (engine, i) if engine else None
    for i, text in enumerate(texts):
        m = NATIVE_FRAME_RE.match(text)
        engine = m and next((e for e in ("vllm", "sglang") if e in m.group("where").lower()), None)
        if engine:
            return engine, i
    return None


def _kind(story: CrashStory) -> str | None:
    """The signature that explains the crash: the cause's own, else the first root cause in
    the error, else the engine the cause came from, else a consequence (a death, NCCL)."""
    own = signature_kinds(story.cause.line.text) if story.cause else []
    roots = [s.kind for s in SIGNATURES if s.kind in story.kinds and not s.consequence]
    for kind in own:
        if not SIGNATURE_BY_KIND[kind].consequence:
            return kind
    if roots:
        return roots[0]
    if not own and story.raised_in:
        return "vllm-engine" if story.raised_in == "vllm" else "sglang"
    if own:
        return own[0]
    return next((s.kind for s in SIGNATURES if s.kind in story.kinds), None)


def _anchor(story: CrashStory) -> int:
    """Where the phase is read from: the cause, else the innermost frame, else the signature."""
    if story.cause is not None:
        return story.cause.index
    frames = [i for i, x in enumerate(story.lines) if FRAME_RE.match(x.text)]
    if frames:
        return frames[-1]
    if story.kind is not None:
        return story.lines.index(story.kinds[story.kind])
    return 0


def _missing(texts: list[str]) -> str | None:
    """Why the exception is not in the log (None: the error is not a traceback)."""
    frames = [m for m in map(FRAME_RE.match, texts) if m is not None]
    if frames and all(LAUNCHER_PATH_RE.search(m.group("path")) for m in frames):
        return (
            "the excerpt holds only the top of the traceback, the launcher's frames (Hydra, "
            "main_ppo); the exception itself is cut off"
        )
    if frames:
        return "the excerpt ends inside the traceback, before its exception line"
    if any("Error executing job with overrides" in t for t in texts):
        return (
            "the excerpt holds only Hydra's `Error executing job with overrides: [...]` line, "
            "which Hydra prints for any exception; the traceback is not in it"
        )
    return None


def _is_shutdown(story: CrashStory) -> bool:
    """An error after training finished is a normal shutdown when it is a death or a signal."""
    if story.kind in SHUTDOWN_KINDS:
        return True
    if story.kind is not None:
        return False
    return story.cause is None or story.cause.name in SHUTDOWN_EXCEPTIONS
