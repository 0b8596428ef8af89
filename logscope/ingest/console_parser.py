"""Line-by-line verl console parser: the reference semantics, used for tailing a live log.

`ConsoleParser.feed(lines)` takes physical lines in file order; `result()` gives what it read (a
`ParsedLog` snapshot) and `to_run(source)` the Run that `console_run.build_run` makes of it.
`logscope.ingest.console.read` runs the same parser over the lines its bulk (polars) path does not
handle itself, so both give the same Run (tests/test_console_reader.py checks this).

`to_run(source, since_step=S)` is the same Run cut to the steps from S on (what `tail` runs its
detectors on between full passes): its metric rows and events are those of steps ≥ S, its
config segments, metadata and parse stats the whole run's. It costs what those steps cost, not
what the run does: rows move into frames every `compact_rows` rows, each frame's step range is
kept, and the step marks are kept as arrays as they come.
"""

from __future__ import annotations

import copy
import re
from collections import Counter, deque
from collections.abc import Container, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from logscope.ingest import pasted
from logscope.ingest import verl_events as ve
from logscope.ingest import verl_text as vt
from logscope.ingest.console_run import (
    ConfigDump,
    FastPart,
    ParsedLog,
    ValueCounts,
    build_run,
    note_if_nothing_found,
    rows_frame,
)
from logscope.model import Event, ParseStats, Run, Source
from logscope.redact import redact_run

PER_SIGNATURE = 2000  # events kept per (kind, text with digits masked)
MAX_EVENTS = 50_000
MAX_EVENT_TEXT = 4000
TB_HEAD, TB_TAIL = 1500, 2500  # a longer traceback keeps its head and its tail (two events)
MAX_BLOCK_LINES = 400  # traceback lines kept (more are counted)
TB_TAIL_LINES = 50  # ... and the last lines of a longer one (its final exception)
MAX_DUMP_LINES = 50_000
COMPACT_ROWS = 200_000  # metric rows kept as Python lists before moving them into a frame
CONFIG_KEYS = ("actor_rollout_ref", "trainer", "data", "algorithm", "worker")
# The first line of a config printed as YAML (EasyR1's `Config` then `yaml.dump(config)`): a
# top-level config section with nothing after its colon
YAML_CONFIG_START_RE = re.compile(r"^(?:" + "|".join(CONFIG_KEYS) + r"):$")
YAML_LINE_RE = re.compile(r"^(?:[ \t]|[A-Za-z_][\w.\-]*:(?: |$))")
DIGITS_RE = re.compile(r"[0-9]+")
EXCEPTION_RE = re.compile(r"[A-Za-z_][\w.]*(?:\([\w.]*\))?: ")
# Lines that open a traceback block besides `Traceback (most recent call last):` (anywhere in the
# line: `Scheduler hit an exception: Traceback ...`): Ray's report of a failed task, and a frame
# line when the excerpt starts in the middle of a traceback.
TRACEBACK_START_RE = re.compile(
    r"Traceback \(most recent call last\)|Unhandled error \(suppress with"
    r"|^ray\.exceptions\.\w+(?:\([\w.]*\))?: ray::|^[ \t]+File \"[^\"]*\", line [0-9]+"
    r"|^File \"[^\"]*\", line [0-9]+, in "  # a frame pasted without its indentation
    # a C++ exception's stack (torch's c10::Error, SGLang's scheduler), maybe cut at the top
    r"|^Exception raised from .* \(most recent call first\):|^frame #[0-9]+: "
)
# torch's C++ log record head, as `pasted.strip_decorations` leaves it
GLOG_HEAD_RE = re.compile(r"\[[IWEF] [^\]\s]+:[0-9]+\] ")
# Override keys whose values are never kept (credentials passed on the command line).
SECRET_KEY_RE = re.compile(r"(?i)(?:key|token|secret|passw(?:or)?d|credential)s?$")


_BLANKS = " \t"
_LEVEL_INITIALS = frozenset("DIWEC")  # DEBUG, INFO, WARNING, ERROR, CRITICAL


def _rows_since(
    frames: list[pl.DataFrame], spans: list[tuple[int, int]], rows: pl.DataFrame, since: int
) -> list[pl.DataFrame]:
    """The metric rows of steps ≥ `since` and of step 0, from the frames whose step span holds
    any (`spans`: each frame's lowest and highest step) and the rows not yet in a frame."""
    wanted = (pl.col("step") >= since) | (pl.col("step") == 0)
    out = [
        f.filter(wanted)
        for f, (lo, hi) in zip(frames, spans, strict=True)
        if hi >= since or lo <= 0
    ]
    out.append(rows.filter(wanted))
    return [f for f in out if f.height]


def _starts_traceback(text: str) -> bool:
    """`TRACEBACK_START_RE.search(text)`, with cheap tests first (most lines start nothing)."""
    if (
        "Traceback" in text
        or "Unhandled error (" in text  # anywhere: a paste may cut the Ray prefix in front
        or text.startswith(("ray.exceptions.", "Exception raised from", "frame #"))
    ):
        return TRACEBACK_START_RE.search(text) is not None
    return text[:1] in " \tF" and 'File "' in text and TRACEBACK_START_RE.search(text) is not None


PROGRESS_DONE = "100%|"
PROGRESS_DONE_RE = re.compile(r"Training Progress: *100%\|")
# verl's bar: `Training Progress:   0%|          | 0/125 [04:45<?, ?it/s]` (done, total, elapsed)
PROGRESS_BAR_RE = re.compile(
    r"Training Progress: *[0-9]{1,3}%\|[^|]*\| *([0-9]+)/([0-9]+) \[([0-9:]+)"
)
OVERRIDES_RE = re.compile(r"Error executing job with overrides: \[(.*)")
# A line a copy cut off (no blank at the cut) before the rest that follows it.
WRAP_MIN_LENGTH = 60
NOTICE_RE = re.compile(r"[ \t]*\(Ray deduplicates logs by default\..*$")


def _word_char(c: str) -> bool:
    """A character a cut inside a word or name falls between (`from_vllm` / `_config`)."""
    return c.isalnum() or c == "_"


@dataclass
class _Pending:
    """A step line held back until the next segment shows whether it was wrapped."""

    seq: int
    line_no: int
    sub: int
    last: bool
    text: str
    step: int
    headless: bool = False  # the `step:N - ` was cut off (a copy starting mid-line)
    joined: bool = False  # rejoined from lines a terminal or a copy cut
    per_line: bool = False  # a bare `step:N`: its items may follow one per line
    prefix: str | None = None
    indent: str = ""  # the head line's indentation (a pasted code block): its rest shares it


# verl's reward managers print a few samples per step: `[prompt] …`, `[response] …` (each maybe
# many lines), then `[ground_truth] …` and `[score] …` (or one `[key] value` per score field).
SAMPLE_TAG_RE = re.compile(r"\[(prompt|response|ground_truth|gt|score|data_source)\]", re.I)
SAMPLE_END_TAGS = ("ground_truth", "gt", "score")
MAX_SAMPLE_LINES = 2000  # a sample whose end never comes stops being one


@dataclass
class _Sample:
    """A printed sample (prompt and response): the model's text, never log events."""

    step_hint: int | None
    response_line: int | None = None
    response: list[str] = field(default_factory=list)
    lines: int = 0


HEADLESS_HEAD = "step:0 - "  # in front of a headless record's items until its step is known


@dataclass
class _Traceback:
    """The lines of a traceback block (one Ray actor's), read until a line does not belong."""

    first_line: int
    step_hint: int | None
    lines: list[tuple[int, str]] = field(default_factory=list)
    state: str = "frames"
    kept: bool = True  # False: the stack a warning printed (read, but no event)
    lines_not_kept: int = 0
    tail: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=TB_TAIL_LINES))
    joined: set[int] = field(default_factory=set)  # lines a copy cut off, joined to the one before

    def take(self, line_no: int, text: str) -> bool:
        """Consume a line of the same Ray actor if it belongs to this traceback."""
        if text.startswith("wandb:"):
            return False  # W&B's end-of-run block follows a crash
        if text[:1] == "[" and GLOG_HEAD_RE.match(text):
            return False  # a new record of torch's C++ logger (`[W TCPStore.cpp:125] …`)
        if text.startswith((" ", "\t", 'File "', "Traceback (most recent call last)", "frame #")):
            self.state = "frames"
        elif text[:1] in ("^", "~") and not text.strip("^~ "):
            pass  # Python 3.11's markers under a frame's code, unindented in a collapsed paste
        elif self.state == "frames" or EXCEPTION_RE.match(text):
            self.state = "exception"  # the first unindented line after frames, or a cause
        elif text.startswith(
            ("During handling of the above exception", "The above exception was the direct")
        ):
            self.state = "chain"
        else:
            return False
        if len(self.lines) < MAX_BLOCK_LINES:
            self.lines.append((line_no, text.rstrip()))
        else:
            if len(self.tail) == TB_TAIL_LINES:
                self.lines_not_kept += 1
            self.tail.append((line_no, text.rstrip()))
        return True


def _consecutive(
    lines: Iterable[tuple[int, str]], joined: Container[int] = ()
) -> list[list[tuple[int, str]]]:
    """(line_no, text) pairs → runs of consecutive line numbers (the lines of one physical line,
    flattened or joined, are consecutive too; so are two with only `joined` lines between them:
    lines a copy cut off, joined to the line before)."""
    runs: list[list[tuple[int, str]]] = []
    for line_no, text in lines:
        last = runs[-1][-1][0] if runs else None
        if last is not None and all(k in joined for k in range(last + 1, line_no)):
            runs[-1].append((line_no, text))
        else:
            runs.append([(line_no, text)])
    return runs


def _tail_start(part: list[tuple[int, str]], lo: int) -> int:
    """Index of the first of the last lines of `part` (not before `lo`, but at least the last
    line) that fit in TB_TAIL characters."""
    start, size = len(part) - 1, len(part[-1][1])
    while start > lo and size + 1 + len(part[start - 1][1]) <= TB_TAIL:
        start -= 1
        size += 1 + len(part[start][1])
    return start


@dataclass
class _Dump:
    """The lines of a config dict verl pprints, read until its brackets close; or of a config
    printed as a YAML mapping (`yaml`), read while its lines are indented or `key:` lines."""

    first_line: int
    seq: int
    step_hint: int | None
    lines: list[str] = field(default_factory=list)
    brackets: vt.Brackets = field(default_factory=vt.Brackets)
    done: bool = False
    yaml: bool = False

    def take(self, text: str) -> bool:
        """Consume a line of the dump; pprint indents every line after the first."""
        if self.yaml:
            if self.lines and not YAML_LINE_RE.match(text):
                return False
            self.lines.append(text)
            self.done = len(self.lines) >= MAX_DUMP_LINES
            return True
        if self.lines and not text.startswith((" ", "\t")):
            return False  # not a continuation: the dump was cut off
        self.lines.append(text)
        self.done = self.brackets.feed(text) or len(self.lines) >= MAX_DUMP_LINES
        return True


class ConsoleParser:
    """Incremental verl console parser (verl_formats.md §1)."""

    def __init__(self, compact_rows: int = COMPACT_ROWS) -> None:
        self.compact_rows = compact_rows
        # what the bulk path of console.py also counts (it reads past the parser)
        self.lines_read = 0
        self.notes: list[str] = []
        self.undecodable = 0  # byte sequences replaced (not UTF-8)
        self.nul_bytes = 0
        self.counts = ValueCounts()
        # where the parser is
        self._line_no = 0
        self._last_seq = -1
        self._pending: _Pending | None = None
        self._last_step: int | None = None
        self._last_step_seq = -1
        self._last_provisional = False
        # the indentation every line shares in an indented excerpt (a code block); "" when none
        self._block_indent: str | None = None
        self._blocks: dict[str | None, _Traceback | _Dump] = {}
        self._samples: dict[str | None, _Sample] = {}  # printed samples being read, by prefix
        self._wrappable: tuple[int, Any] | None = None  # (line_no, event or block) a cut may go on
        # (line_no, length, ends in a blank) of the last single-segment physical lines: a copy
        # that wraps at a fixed width leaves full lines of one length
        self._lengths: deque[tuple[int, int, bool]] = deque(maxlen=3)
        self._wrap_width: int | None = None  # the width a copy wrapped the lines at, once seen
        self._longest = 0  # the longest line read
        # step lines: metric rows (in lists, moved into frames now and then) and step marks
        self._rows_seq: list[int] = []
        self._rows_step: list[int] = []
        self._rows_metric: list[str] = []
        self._rows_value: list[float] = []
        self._frames: list[pl.DataFrame] = []
        self._frame_steps: list[tuple[int, int]] = []  # (lowest, highest) step of each frame
        self._frame_names: set[str] = set()  # the metrics of the frames
        self._frame_rows = 0  # their rows
        self._marks: list[tuple[int, int]] = []  # (seq, step)
        # the marks as arrays (seq row, step row) with room to grow; the first `_marks_synced`
        # are final (only the last mark may still change: a wrapped step line rejoined)
        self._mark_buf = np.empty((2, 0), dtype=np.int64)
        self._marks_synced = 0
        self._unnumbered: list[int] = []  # seqs of headless records numbered before any step
        self._incomplete_step_lines = 0
        self._skipped_lines = 0
        self._skipped_examples: list[tuple[int, str, str]] = []
        self._skip_reasons: Counter[str] = Counter()
        # everything else
        self._events: list[Event] = []
        self._event_counts: Counter[str] = Counter()
        self._signature_counts: Counter[tuple[str, str]] = Counter()
        self._dropped_events: Counter[str] = Counter()
        self._config_dumps: list[ConfigDump] = []
        self._unparsed_dumps = 0
        self._ray_actors: set[str] = set()
        self._saw_progress = False
        # the last progress bar before any step line: (line, done, total, elapsed)
        self._bar_before_steps: tuple[int, int, int, str] | None = None
        self._logger_lines = False
        self._log_date: str | None = None  # the latest day a `LEVEL:asctime:` line shows
        self._total_training_steps: int | None = None
        self._dataloader_size: int | None = None  # training steps per epoch
        # where the text shows training ended (the progress bar at 100%, W&B's footer)
        self._run_end: dict[str, dict[str, int | None]] = {}
        self._overrides: dict[str, Any] = {}  # from Hydra's `Error executing job with overrides`
        self._wandb = pasted.WandbFooter()
        self._loose = pasted.LooseMetrics()  # metric pairs before the first verl step line

    # ---- input ---------------------------------------------------------------------------
    def feed(self, lines: Iterable[str], first_line_no: int | None = None) -> None:
        """Consume physical lines (with or without their newline) in file order.

        Lines are split on `\\n` only, as in the file: open it with `newline=""` (Python's default
        text mode would also split on the `\\r` tqdm writes, shifting line numbers).
        """
        line_no = self._line_no if first_line_no is None else first_line_no - 1
        for line in lines:
            line_no += 1
            self.lines_read += 1
            if "\ufffd" in line:
                self.undecodable += line.count("\ufffd")
            if "\x00" in line:
                self.nul_bytes += line.count("\x00")
            segs = vt.segments(line)
            last = len(segs) - 1
            for sub, raw in enumerate(segs):
                self.segment(line_no, sub, sub == last, raw)
        self._line_no = line_no

    def sync_step(self, seq: int, step: int) -> None:
        """The bulk path logged `step` at `seq` (so later events get it as their step hint)."""
        if seq > self._last_step_seq:
            self._last_step, self._last_step_seq = step, seq
            self._last_provisional = False
            self._end_samples()
            self._block_indent = ""  # an unindented step line: the lines are not one block

    def segment(self, line_no: int, sub: int, last: bool, raw: str) -> None:
        """Consume one `\\r`-separated segment of a physical line."""
        if vt.NBSP in raw:  # (a line with one is not ASCII: never read in bulk)
            raw = raw.replace(vt.NBSP, " ")
        if sub == 0 and self._block_indent != "":
            raw = self._dedent(raw)
        if sub == 0 and last:
            n = len(raw)
            if self._lengths and self._lengths[-1][1] >= WRAP_MIN_LENGTH:
                self._note_wrap_width()
            self._lengths.append((line_no, n, raw[-1:].isspace()))
            if n > self._longest:
                self._longest = n
        held = pasted.record_lines(raw) if pasted.is_record(raw) else None
        if held is None:
            self._printed(line_no, sub, last, raw)
            return
        # collector JSON records: the lines they hold, `\r`s and all
        pieces = [piece for line in held for piece in line.split("\r")]
        for i, piece in enumerate(pieces):
            self._printed(line_no, sub, last and i == len(pieces) - 1, piece)

    def _printed(self, line_no: int, sub: int, last: bool, raw: str) -> None:
        """Consume a segment as the program printed it (maybe decorated, flattened, joined)."""
        seq = vt.seq_of(line_no, sub)
        self._last_seq = seq
        text = pasted.unlink(pasted.strip_decorations(vt.strip_ansi(raw)))
        pieces = None
        if "\\n" in text and pasted.is_flattened(text):
            pieces = pasted.unfold(text)
        elif " pid=" in text or " step:" in text:  # (split_joined looks closer)
            pieces = pasted.split_joined(text)
        if pieces is None:
            self._segment(line_no, sub, last, seq, text, raw)
            return
        for i, piece in enumerate(pieces):
            self._segment(line_no, sub, last and i == len(pieces) - 1, seq, piece, raw)

    def _dedent(self, raw: str) -> str:
        """`raw` without the indentation of an excerpt whose every line is indented (a Markdown
        or reST code block: 4+ blanks or a tab, the least of its first lines), until a line
        lacks it. Noise (blank, a bare prefix, a tqdm bar) decides nothing: the bulk path drops it."""
        noise = not raw.strip() or vt.EMPTYISH_RE.match(raw) is not None or vt.is_tqdm(raw)
        block = self._block_indent
        if block and raw.startswith(block):
            return raw[len(block) :]
        if noise:
            return raw
        lead = raw[: len(raw) - len(raw.lstrip(_BLANKS))]
        # the first line may be indented deeper than the block (a traceback's code line)
        fits = (block is None or block.startswith(lead)) and (len(lead) >= 4 or "\t" in lead)
        self._block_indent = lead if fits else ""
        return raw[len(lead) :] if fits else raw

    def _segment(self, line_no: int, sub: int, last: bool, seq: int, text: str, raw: str) -> None:
        indent = ""
        if text[:1] in _BLANKS:  # an indented (Markdown or reST code block) line
            body = text.lstrip(_BLANKS)
            p = self._pending
            if body[:1] == "(" or body.startswith("step:") or pasted.headless_items(body):
                indent, text = text[: len(text) - len(body)], body
            elif (
                p is not None
                and p.indent
                and (line_no, sub) == (p.line_no + 1, 0)
                and text.startswith(p.indent)
            ):
                text = text[len(p.indent) :]  # the record's next line, in the same block
        prefix, rest = vt.split_prefix(text)
        if prefix is not None and (rest[:1] in ("[", ">") or rest[:1].isdigit()):
            # `(WorkerDict pid=1) [2025-08-15 00:16:56] …`, `(raylet) [… E 1 1] (raylet) …`
            rest = pasted.strip_decorations(rest)
            if rest.startswith("("):
                rest = vt.split_prefix(rest)[1]
        clean = vt.strip_tail(rest)
        if "step:" in clean:
            at = vt.find_step(clean)
            m = vt.match_step(clean[at:]) if at >= 0 else None
            if m is not None:
                self._flush()
                self._end_samples()
                self._note_actor(prefix)
                step = int(m.group(1))
                bare = m.group(2) is None and at == 0
                self._pending = _Pending(
                    seq,
                    line_no,
                    sub,
                    last,
                    clean[at:],
                    step,
                    per_line=bare,
                    prefix=prefix,
                    indent=indent,
                )
                self._set_step(seq, step)
                return
        if vt.is_tqdm(raw):
            self._saw_progress = self._saw_progress or "Training Progress" in raw
            if sub == 0 and last and self._last_step is None:  # a whole line, before any step
                bar = PROGRESS_BAR_RE.search(raw)
                if bar is not None:
                    self._bar_before_steps = (line_no, int(bar[1]), int(bar[2]), bar[3])
            if PROGRESS_DONE in raw and PROGRESS_DONE_RE.search(raw):
                self._run_end["progress_done"] = {"line": line_no, "after_step": self._last_step}
            self._flush()
            return
        if not clean:
            self._flush()
            return
        p = self._pending
        if (
            p is not None
            and p.last
            and sub == 0
            and line_no == p.line_no + 1
            and prefix is None
            and vt.looks_like_continuation(text)
            and self._join(p, line_no, sub, last, vt.strip_tail(text))
        ):
            return
        if p is not None and p.per_line and self._item_line(p, line_no, sub, prefix, clean):
            return
        self._flush()
        if (prefix in self._samples or clean[:1] == "[") and self._sample_line(
            line_no, prefix, clean
        ):
            return
        if prefix is None and pasted.headless_items(clean):
            body = pasted.cut_first_item(clean.strip(" -") if clean.startswith(" -") else clean)
            self._pending = _Pending(
                seq, line_no, sub, last, HEADLESS_HEAD + body, 0, True, indent=indent
            )
            return
        if clean.startswith("step:"):
            self._skip(line_no, clean, "starts like a step line but is not one")
            return
        self._other(line_no, seq, prefix, rest, clean)

    def step_line(self, line_no: int, sub: int, raw: str) -> None:
        """Parse a whole step line now (the bulk path found an item it does not accept).

        Its step mark and the step hint were already recorded by the bulk path."""
        clean = vt.strip_tail(vt.split_prefix(vt.strip_ansi(raw))[1])
        m = vt.match_step(clean)
        if m is None:  # pragma: no cover - the bulk path only hands over step lines
            return
        held = self._pending
        self._pending = _Pending(
            vt.seq_of(line_no, sub), line_no, sub, True, clean, int(m.group(1))
        )
        self._flush()
        self._pending = held

    # ---- step lines ----------------------------------------------------------------------
    def _set_step(self, seq: int, step: int) -> None:
        self._last_step, self._last_step_seq = step, seq
        self._last_provisional = False
        self._marks.append((seq, step))

    @staticmethod
    def _item_line(p: _Pending, line_no: int, sub: int, prefix: str | None, clean: str) -> bool:
        """Take one `key:value` line of a record printed one item per line after a bare
        `step:N` (verl#2535: `step:2 ` then `actor/entropy:0.8662 ` on lines of their own)."""
        if sub != 0 or line_no != p.line_no + 1 or prefix not in (None, p.prefix):
            return False
        m = vt.ONE_ITEM_RE.match(clean)
        if m is None:
            return False
        p.text += " - " + m.group(1) + m.group(2)  # `- key: value` (a Markdown list) too
        p.line_no = line_no
        return True

    def _join(self, p: _Pending, line_no: int, sub: int, last: bool, tail: str) -> bool:
        joined = vt.join_wrapped(p.text, tail)
        m = vt.match_step(joined)
        if m is None:
            return False
        items = vt.parse_items(m.group(2))
        if items.garbled or (items.cut_last and " - " not in tail):
            return False
        p.text, p.line_no, p.sub, p.last, p.joined = joined, line_no, sub, last, True
        step = int(m.group(1))
        if step != p.step:
            p.step = step
            self._marks[-1] = (p.seq, step)
            self._last_step = step
        return True

    def _flush(self, drop_last: bool = False) -> None:
        p = self._pending
        if p is None:
            return
        self._pending = None
        m = vt.match_step(p.text)
        assert m is not None
        items = vt.parse_items(m.group(2), drop_last=drop_last)
        if (p.joined or p.headless) and vt.drop_cut_three_decimals(items):
            self._incomplete_step_lines += 1
        if p.headless:
            p.step = self._number_headless(p.seq, items)
        n = len(items.pairs)
        self._rows_seq.extend([p.seq] * n)
        self._rows_step.extend([p.step] * n)
        for key, value in items.pairs:
            self._rows_metric.append(key)
            self._rows_value.append(value)
        counts = self.counts
        counts.step_lines += 1
        counts.values += n
        counts.numpy_wrapped += items.numpy_wrapped
        counts.not_three_decimals += items.not_three_decimals
        if items.cut_last:
            self._incomplete_step_lines += 1
        if len(self._rows_seq) >= self.compact_rows:
            self._compact()
        if items.garbled:
            text = p.text[len(HEADLESS_HEAD) :] if p.headless else p.text
            self._skip(p.line_no, text, "step line with an item that is not key:number")

    def _number_headless(self, seq: int, items: vt.Items) -> int:
        """The step of a record whose `step:N` was cut off: its `training/global_step` item, else
        the step after the last one logged; before any step, 1 until `build_run` knows better."""
        logged = dict(items.pairs).get("training/global_step")
        provisional = False
        if logged is not None and logged == logged:
            step = int(logged)
        elif self._last_step is not None:
            step = self._last_step + 1
            provisional = self._last_provisional
        else:
            step, provisional = 1, True
        self._set_step(seq, step)
        if provisional:
            self._unnumbered.append(seq)
            self._last_provisional = True
        return step

    def _compact(self) -> None:
        """Move the collected rows into a polars frame (a long tail stays small in memory)."""
        self._frames.append(
            rows_frame(self._rows_seq, self._rows_step, self._rows_metric, self._rows_value)
        )
        self._frame_steps.append((min(self._rows_step), max(self._rows_step)))
        self._frame_names.update(self._rows_metric)
        self._frame_rows += len(self._rows_seq)
        self._rows_seq, self._rows_step, self._rows_metric, self._rows_value = [], [], [], []

    def size(self) -> tuple[int, int, int]:
        """(step lines, events kept, metric rows) read so far: grows when anything that counts
        was read."""
        return len(self._marks), len(self._events), self._frame_rows + len(self._rows_seq)

    def marks(self) -> tuple[np.ndarray, np.ndarray]:
        """(seq, step) of every step line read so far, in file order: read-only views of arrays
        kept as the marks come (the cost is that of the marks added since the last call), valid
        until the parser is fed again."""
        total, n = len(self._marks), self._marks_synced
        buf = self._mark_buf
        if total > buf.shape[1]:
            grown = np.empty((2, max(total, 2 * buf.shape[1], 1024)), dtype=np.int64)
            grown[:, :n] = buf[:, :n]
            self._mark_buf = buf = grown
        if total > n:
            buf[:, n:total] = np.array(self._marks[n:total], dtype=np.int64).T
        self._marks_synced = max(total - 1, 0)
        seqs, steps = buf[0, :total], buf[1, :total]
        seqs.flags.writeable = steps.flags.writeable = False
        return seqs, steps

    def _skip(self, line_no: int, text: str, reason: str) -> None:
        """Count a line that looked like metrics but could not be read, with why."""
        self._skipped_lines += 1
        self._skip_reasons[reason] += 1
        if len(self._skipped_examples) < ParseStats.MAX_EXAMPLES:
            self._skipped_examples.append((line_no, text[:200], reason))

    def _note_actor(self, prefix: str | None) -> None:
        name = vt.prefix_name(prefix)
        if name is not None:
            self._ray_actors.add(name)

    # ---- printed samples ------------------------------------------------------------------
    def _sample_line(self, line_no: int, prefix: str | None, clean: str) -> bool:
        """Take a line of a printed sample (True): its tags and the model's text, which may say
        anything (`Traceback …`, `CUDA out of memory`) and is not the log's. The response is
        kept as one `sample-response` event."""
        tag = SAMPLE_TAG_RE.match(clean)
        sample = self._samples.get(prefix)
        if tag is None:
            if sample is None:
                return False
            if prefix is None and _starts_traceback(clean):
                self._end_sample(prefix)  # no Ray prefix: the traceback may well be the log's
                return False
            sample.lines += 1
            if sample.response_line is not None:
                sample.response.append(clean)
            if sample.lines >= MAX_SAMPLE_LINES:
                self._end_sample(prefix)
            return True
        name = tag.group(1).lower()
        if name in SAMPLE_END_TAGS:
            if sample is not None:
                self._end_sample(prefix)
            return sample is not None
        if sample is None or name != "response" or sample.response_line is not None:
            if sample is not None:
                self._end_sample(prefix)  # the next sample begins
            sample = self._samples[prefix] = _Sample(self._last_step)
        if name == "response":
            sample.response_line = line_no
            sample.response = [clean]
        return True

    def _end_sample(self, prefix: str | None) -> None:
        sample = self._samples.pop(prefix)
        if sample.response_line is not None:
            text = "\n".join(sample.response)
            self._event(sample.response_line, "sample-response", text, 0, sample.step_hint)

    def _end_samples(self) -> None:
        for prefix in list(self._samples):
            self._end_sample(prefix)

    # ---- other lines ---------------------------------------------------------------------
    def _other(self, line_no: int, seq: int, prefix: str | None, rest: str, clean: str) -> None:
        self._note_actor(prefix)
        level = None
        if rest[:1] in _LEVEL_INITIALS and (m := vt.VLLM_LOGGER_RE.match(rest)) is not None:
            level, rest, clean = m.group(1), rest[m.end() :], clean[m.end() :]
        block = self._blocks.get(prefix)
        if block is not None:
            taken = block.take(rest) if isinstance(block, _Dump) else block.take(line_no, rest)
            if taken and not (isinstance(block, _Dump) and block.done):
                self._wrappable = (line_no, block) if isinstance(block, _Traceback) else None
                return
            self._close(prefix)
            if taken:
                return
        wrappable = self._wrappable
        if wrappable is not None:
            if (
                prefix is None
                and wrappable[0] == line_no - 1
                and self._continues_cut_line(line_no, clean)
            ):
                return
            self._wrappable = None
        if (clean.startswith("wandb:") or self._wandb.mode is not None) and self._wandb.take(
            line_no, clean
        ):
            if "wandb_footer" not in self._run_end:
                self._run_end["wandb_footer"] = {"line": line_no, "after_step": self._last_step}
            return
        body = clean
        m = vt.LOGGER_RE.match(clean)
        if m is not None:  # verl 0.9 V1 logger: LEVEL:asctime:message
            body = clean[m.end() :]
            day = m.group(2)[:10]
            self._log_date = day if self._log_date is None else max(self._log_date, day)
            # ... but a rank's checkpoint messages print so in earlier verl too
            self._logger_lines = self._logger_lines or not body.startswith("[Rank ")
            level = m.group(1)
        # (a step's metrics printed as YAML are not a config)
        yaml = (
            body[-1:] == ":"
            and YAML_CONFIG_START_RE.match(body) is not None
            and not self._loose.in_mapping
        )
        if body.startswith("{'") or yaml:
            dump = _Dump(line_no, seq, self._last_step, yaml=yaml)
            self._blocks[prefix] = dump
            dump.take(rest)
            if dump.done:
                self._close(prefix)
            return
        if _starts_traceback(rest):
            tb = _Traceback(line_no, self._last_step)
            # torch prints the C++ stack of an exception it caught with its warning
            last = self._events[-1] if self._events else None
            tb.kept = not (
                rest.startswith("Exception raised from")
                and last is not None
                and (last.kind, last.line_no) == ("warning", line_no - 1)
            )
            tb.lines.append((line_no, clean if not rest.startswith((" ", "\t")) else rest))
            self._blocks[prefix] = tb
            self._wrappable = (line_no, tb)
            return
        if self._last_step is None:
            self._loose.take(line_no, body)  # metrics in a layout that is not verl's
        kind = ve.classify(body)
        if kind is None and level in ("WARNING", "ERROR", "CRITICAL"):
            kind = "warning" if level == "WARNING" else "error"
        if kind is None:
            return
        if kind == "total-training-steps":
            t = ve.TOTAL_STEPS_RE.search(body)
            if t:
                self._total_training_steps = int(t.group(1))
        if kind == "dataloader-size":
            d = ve.DATALOADER_RE.search(body)
            if d:
                self._dataloader_size = int(d.group(1))
        if "Error executing job with overrides" in body:
            self._read_overrides(body)
        text = NOTICE_RE.sub("", rest).rstrip() if "(Ray dedup" in rest else rest.rstrip()
        if self._event(line_no, kind, text, vt.repeats(rest), self._last_step):
            self._wrappable = (line_no, self._events[-1])

    def _note_wrap_width(self) -> None:
        """The width a copy wrapped the log at, from the lines read so far: two consecutive
        full lines of one length that no line read is longer than (aligned table rows of one
        length among longer lines are no wrap)."""
        if len(self._lengths) > 1:
            (a, width, _), (b, n, _) = self._lengths[-2], self._lengths[-1]
            if b - a == 1 and width == n >= max(WRAP_MIN_LENGTH, self._longest):
                self._wrap_width = n
        if self._wrap_width is not None and self._longest > self._wrap_width:
            self._wrap_width = None

    def _continues_cut_line(self, line_no: int, clean: str) -> bool:
        """Join a line that a copy cut off from the long line before it (`… allocated by P` /
        `yTorch, with …`): an unprefixed line that starts no record of its own, right after a
        kept line that ends mid-word; or any unindented line after a line as long as the width a
        copy wrapped the log at (two consecutive full lines of one length seen before: `… IP
        address: 159.226.47` / `.239 Worker port: … Worker exit type: SYSTEM_ERROR …`)."""
        assert self._wrappable is not None
        target = self._wrappable[1]
        if isinstance(target, _Traceback):
            if not target.lines or target.tail:
                return False
            head = target.lines[-1][1]
        else:
            head = target.text.rsplit("\n", 1)[-1]
        full = [(n, blank) for i, n, blank in self._lengths if line_no - i in (1, 2)]
        if full and full[-1][0] == self._wrap_width:  # the line before is as long as the wrap
            if not clean[:1].strip() or _starts_traceback(clean):
                return False
            if full[-1][1]:
                clean = " " + clean  # the wrap fell on a blank
        elif (
            len(head) < WRAP_MIN_LENGTH
            or not _word_char(head[-1:])
            or not _word_char(clean[:1])
            or _starts_traceback(clean)
            or ve.classify(clean) is not None
        ):
            return False
        if isinstance(target, _Traceback):
            start, text = target.lines[-1]
            target.lines[-1] = (start, text + clean)
            target.joined.add(line_no)
        else:
            target.text += clean
        self._wrappable = (line_no, target)
        return True

    def _read_overrides(self, body: str) -> None:
        """Hydra's `Error executing job with overrides: ['k=v', ...]` (often cut off): the values
        a crashed run was started with, for advice when no config dump is in the log."""
        from logscope.exceptions import ConfigParseError
        from logscope.hydra_overrides import parse_override

        m = OVERRIDES_RE.search(body)
        if m is None:
            return
        for token in pasted.quoted_items(m.group(1)):
            try:
                override = parse_override(token)
            except ConfigParseError:
                continue
            if override.op != "delete" and not SECRET_KEY_RE.search(override.key):
                self._overrides[override.key] = override.value

    def _close(self, key: str | None) -> None:
        block = self._blocks.pop(key)
        if isinstance(block, _Dump):
            self._close_dump(block)
            return
        if not block.kept:
            return  # a warning's stack: the warning is the event
        # One event per run of consecutive lines, so line numbers stay exact.
        kept = False
        for part in _consecutive(block.lines, block.joined):
            kept = self._traceback_event(part, block.step_hint)
        # The last lines of a traceback too long to keep whole: kept with the lines before
        # them, not counted again.
        for part in _consecutive(block.tail):
            if kept and len(self._events) < MAX_EVENTS:
                start = _tail_start(part, 0)
                text = "\n".join(t for _, t in part[start:])[:TB_TAIL]
                self._events.append(Event(part[start][0], block.step_hint, "traceback", text))
        if block.lines_not_kept:
            self.notes.append(
                f"traceback at line {block.first_line}: {block.lines_not_kept} more lines not kept"
            )

    def _traceback_event(self, part: list[tuple[int, str]], hint: int | None) -> bool:
        """One event for consecutive traceback lines; when too long, its head and its tail (the
        final exception) as two events, so each event's lines stay the file's lines."""
        text = "\n".join(t for _, t in part)
        if len(text) <= MAX_EVENT_TEXT:
            return self._event(part[0][0], "traceback", text, 0, hint)
        head, size = 1, len(part[0][1])
        while head < len(part) and size + 1 + len(part[head][1]) <= TB_HEAD:
            size += 1 + len(part[head][1])
            head += 1
        start = _tail_start(part, head)
        kept = self._event(part[0][0], "traceback", "\n".join(t for _, t in part[:head]), 0, hint)
        # The tail belongs to the same traceback: kept with its head, not counted again.
        if kept and start >= head and len(self._events) < MAX_EVENTS:
            tail = "\n".join(t for _, t in part[start:])
            self._events.append(Event(part[start][0], hint, "traceback", tail[:TB_TAIL]))
        return kept

    def _close_dump(self, dump: _Dump) -> None:
        text = "\n".join(dump.lines)
        try:
            value = vt.load_yaml(text) if dump.yaml else vt.literal(text)
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            value = None
        if isinstance(value, dict) and any(k in value for k in CONFIG_KEYS):
            if self._config_dumps:
                self._event(
                    dump.first_line, "restart", "config printed again (restart)", 0, dump.step_hint
                )
            self._config_dumps.append(ConfigDump(dump.seq, dump.first_line, value))
            return
        if isinstance(value, dict):
            return  # some other dict that verl pprinted
        self._unparsed_dumps += 1
        self._event(dump.first_line, "config-dump-unparsed", dump.lines[0], 0, dump.step_hint)

    def _event(self, line_no: int, kind: str, text: str, rep: int, hint: int | None) -> bool:
        """Count an event and keep it (True) unless its signature or the total is over the cap."""
        self._event_counts[kind] += 1 + rep
        sig = (kind, DIGITS_RE.sub("#", text[:160]))
        self._signature_counts[sig] += 1
        if self._signature_counts[sig] > PER_SIGNATURE or len(self._events) >= MAX_EVENTS:
            self._dropped_events[kind] += 1
            return False
        self._events.append(Event(line_no, hint, kind, text[:MAX_EVENT_TEXT]))
        return True

    # ---- output --------------------------------------------------------------------------
    def finish(self, ended_mid_line: bool = False) -> None:
        """Flush what is held back (end of input). `ended_mid_line`: no final newline."""
        p = self._pending
        self._flush(drop_last=ended_mid_line and p is not None and p.seq == self._last_seq)
        for key in list(self._blocks):
            self._close(key)
        self._end_samples()

    def result(
        self, *, ended_mid_line: bool = False, final: bool = False, since_step: int | None = None
    ) -> ParsedLog:
        """What was read so far, with what is held back (a step line that may continue, an open
        traceback) flushed: in a copy, so the parser can be fed on, unless `final`.

        With `since_step`: only the metric rows of steps ≥ since_step (and of step 0, which the
        metadata reads), the events from the step before it on, and the step marks `build_run`
        needs for them and for the config segments."""
        if final:
            parser = self
            parser.finish(ended_mid_line)
            mark_seqs, mark_steps = self.marks()
        else:
            mark_seqs, mark_steps = self.marks()
            parser = self._copy()
            parser.finish(ended_mid_line)  # may number a held-back record: one more mark
            upto = max(len(self._marks) - 1, 0)
            if parser._marks[upto:] != self._marks[upto:]:
                more = np.array(parser._marks[upto:], dtype=np.int64).reshape(-1, 2)
                mark_seqs = np.concatenate([mark_seqs[:upto], more[:, 0]])
                mark_steps = np.concatenate([mark_steps[:upto], more[:, 1]])
        rows = rows_frame(
            parser._rows_seq, parser._rows_step, parser._rows_metric, parser._rows_value
        )
        if since_step is None:
            frames = [f for f in (*parser._frames, rows) if f.height]
            events: tuple[Event, ...] = tuple(parser._events)
        else:
            frames = _rows_since(parser._frames, parser._frame_steps, rows, since_step)
            events = tuple(
                e
                for e in parser._events
                if e.step_hint is not None and e.step_hint >= since_step - 1
            )
            if not parser._unnumbered:  # else every mark: renumbering reads them all
                keep = (mark_steps >= since_step) | (mark_steps == 0)
                after_dump = np.searchsorted(
                    mark_seqs, [d.seq for d in parser._config_dumps], side="right"
                )
                keep[after_dump[after_dump < len(keep)]] = True
                keep[-1:] = True  # a dump after every mark starts after the last one
                mark_seqs, mark_steps = mark_seqs[keep], mark_steps[keep]
        mark_seqs, mark_steps = mark_seqs.copy(), mark_steps.copy()  # a snapshot
        return ParsedLog(
            lines_read=parser.lines_read,
            notes=tuple(parser.notes),
            frames=tuple(frames),
            mark_seqs=mark_seqs,
            mark_steps=mark_steps,
            unnumbered=tuple(parser._unnumbered),
            counts=copy.copy(parser.counts),
            incomplete_step_lines=parser._incomplete_step_lines,
            skipped_lines=parser._skipped_lines,
            skipped_examples=tuple(parser._skipped_examples),
            skip_reasons=dict(parser._skip_reasons),
            events=events,
            event_counts=dict(parser._event_counts),
            dropped_events=dict(parser._dropped_events),
            config_dumps=tuple(parser._config_dumps),
            unparsed_dumps=parser._unparsed_dumps,
            ray_actors=frozenset(parser._ray_actors),
            saw_progress=parser._saw_progress,
            bar_before_steps=parser._bar_before_steps,
            logger_lines=parser._logger_lines,
            log_date=parser._log_date,
            total_training_steps=parser._total_training_steps,
            train_dataloader_size=parser._dataloader_size,
            run_end={k: dict(v) for k, v in parser._run_end.items()},
            overrides=dict(parser._overrides),
            wandb_summary=dict(parser._wandb.summary),
            wandb_line_no=parser._wandb.line_no,
            wandb_history=tuple(parser._wandb.history),
            wandb_last_step=parser._wandb.last_step,
            loose_steps=tuple(replace(r, pairs=dict(r.pairs)) for r in parser._loose.steps()),
            undecodable=parser.undecodable,
            nul_bytes=parser.nul_bytes,
        )

    def to_run(
        self,
        source: Source | None = None,
        run_id: str | None = None,
        *,
        ended_mid_line: bool = False,
        fast: FastPart | None = None,
        final: bool = False,
        since_step: int | None = None,
    ) -> Run:
        """The Run read so far (with `fast`, what the bulk path read itself). Unless `final`, the
        parser can keep being fed afterwards. With `since_step` (and no `fast`): that Run cut to
        the steps from `since_step` on (see the module's docstring)."""
        parsed = self.result(ended_mid_line=ended_mid_line, final=final, since_step=since_step)
        if since_step is not None:
            # The metadata reads every metric's name, not only those of the steps kept.
            names = self._frame_names | set(self._rows_metric)
            fast = FastPart(metric_names=names)
        run = build_run(parsed, source or Source("verl-console", "<stream>"), run_id, fast)
        if since_step is not None and since_step > 0:
            run.metrics = run.metrics.filter(pl.col("step") >= since_step)
        if final:
            note_if_nothing_found(run)
        return redact_run(run)  # tail reads through here, not `ingest.load`

    def _copy(self) -> ConsoleParser:
        """A twin to flush what is held back in, without touching this parser."""
        twin = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, (list, set, dict, Counter)):
                setattr(twin, name, copy.copy(value))
        twin.counts = copy.copy(self.counts)
        twin._pending = copy.copy(self._pending)
        twin._blocks = copy.deepcopy(self._blocks)
        twin._samples = copy.deepcopy(self._samples)
        return twin
