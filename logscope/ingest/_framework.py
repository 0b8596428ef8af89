"""Pieces the console readers of other RL frameworks share (ROLL, slime, SkyRL, prime-rl, …).

Each of those readers walks the cleaned lines of a log (`lines`: ANSI codes, the Ray prefix and
Ray's dedup suffix removed, `\\r`-split tqdm segments apart), collects `(step, key, value)` with
the framework's own keys (`Columns`), and builds one Run (`build_run`) that says which framework
wrote it in `meta["framework"]`. Sniffs look for a format's marker in the first MiB (`head`,
read once per file for all of them).
"""

from __future__ import annotations

import ast
import functools
import gzip
import io
import math
import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logscope.exceptions import IngestError
from logscope.ingest._common import metrics_frame, new_run, read_bytes, to_float
from logscope.ingest.files import GZIP_MAGIC, read_head
from logscope.ingest.verl_events import classify
from logscope.ingest.verl_text import segments, split_prefix, strip_ansi, strip_tail
from logscope.model import Event, ParseStats, Run

#: how much of a file the sniffs look at: startup output (configs, model loading) comes first
SNIFF_BYTES = 1 << 20


@functools.lru_cache(maxsize=8)
def _head(path: str, mtime_ns: int, size: int) -> str:
    return read_head(path, SNIFF_BYTES).decode("utf-8", "replace")


def head(path: Path) -> str:
    """The first MiB of a regular file as text ("" for anything else); cached per file version,
    so the framework sniffs tried one after another read it once."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return ""
    if not stat.S_ISREG(st.st_mode):
        return ""
    return _head(str(path), st.st_mtime_ns, st.st_size)


def head_lines(path: Path, needle: str) -> Iterator[tuple[str, str]]:
    """(cleaned line, cleaned next line) of each line of `head(path)` whose raw text holds
    `needle`; only those lines are cleaned, so a sniff costs little on a log without it."""
    text = head(path)
    start = text.find(needle)
    while start >= 0:
        begin = text.rfind("\n", 0, start) + 1
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        after = text.find("\n", end + 1)
        following = text[end + 1 : len(text) if after < 0 else after]
        for segment in segments(text[begin:end]):
            if needle in segment:
                yield clean(segment), clean(segments(following)[0]) if following else ""
        start = text.find(needle, end)


def read_text(path: Path) -> tuple[bytes, str, bool]:
    """(bytes as stored, decoded text, whether a .gz ended early) of a plain or gzip log; of a
    truncated .gz, what decoded before the damage. IngestError when unreadable."""
    raw = read_bytes(path)
    if not raw.startswith(GZIP_MAGIC):
        return raw, raw.decode("utf-8", "replace"), False
    parts: list[bytes] = []
    damaged = False
    with gzip.GzipFile(fileobj=io.BytesIO(raw)) as stream:
        while True:
            try:
                block = stream.read1(1 << 20)
            except (OSError, EOFError):
                damaged = True
                break
            if not block:
                break
            parts.append(block)
    return raw, b"".join(parts).decode("utf-8", "replace"), damaged


def clean(segment: str) -> str:
    """A segment without ANSI codes, Ray prefix, trailing blanks and Ray's dedup suffix."""
    return strip_tail(split_prefix(strip_ansi(segment))[1])


def lines(
    text: str, progress: Any = None, stats: ParseStats | None = None
) -> Iterator[tuple[int, str]]:
    """(1-based line number, cleaned segment) of every `\\r`-split segment of `text`, each
    counted in `stats.lines_read`; `progress(lines done, lines)` now and then."""
    raw_lines = text.split("\n")
    for line_no, raw in enumerate(raw_lines, 1):
        if progress is not None and line_no % 20_000 == 0:
            progress(line_no, len(raw_lines))
        for segment in segments(raw):
            if stats is not None:
                stats.lines_read += 1
            yield line_no, clean(segment)


def number(value: Any) -> float | None:
    """A logged scalar as float: numbers, bools, numeric strings (SkyRL's `'0.1234'`), nan/inf."""
    got = to_float(value)
    if got is not None or not isinstance(value, str):
        return got
    try:
        return float(value.strip().rstrip("%"))
    except ValueError:
        return None


def flatten(mapping: Mapping[Any, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """(key, value) of the scalars in a possibly nested dict; nested keys joined with `/`
    (how TensorBoard's `add_scalars` names them); non-scalars are left out."""
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten(value, name + "/")
        elif (got := number(value)) is not None:
            yield name, got


# `'key': value` pairs of a Python dict repr, for reprs `ast.literal_eval` refuses
# (`nan`, `inf`, `np.float64(0.5)`, `tensor(0.5, device='cuda:0')`)
_PAIR_RE = re.compile(
    r"""(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\s*:\s*"""
    r"""((?:np\.\w+|tensor)\([^()]*\)|'[^']*'|"[^"]*"|[^,{}]+)"""
)
_WRAPPED_RE = re.compile(r"^(?:np\.\w+|tensor)\(([^,()]*)")
_BARE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "True": 1.0, "False": 0.0}


def parse_dict_repr(text: str) -> dict[str, float] | None:
    """The scalars of a printed Python dict (`{'train/loss': 0.5, ...}`), or None when `text`
    is not a whole dict (a truncated or garbled line). A flat dict is read by one regex (30x
    `ast.literal_eval`, which also refuses `nan`); a nested one by `ast.literal_eval`."""
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    if text.count("{") > 1:
        try:
            obj = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            return dict(flatten(obj))
    found: dict[str, float] = {}
    for single, double, raw in _PAIR_RE.findall(text[1:-1]):
        token = raw.strip()
        if (wrapped := _WRAPPED_RE.match(token)) is not None:
            token = wrapped.group(1).strip()
        value = _BARE.get(token)
        if value is None:
            value = number(token[1:-1] if token[:1] in "'\"" else token)
        if value is not None:
            found[single or double] = value
    return found if found or text[1:-1].strip() == "" else None


@dataclass
class Columns:
    """(step, metric, value, wall time) columns collected by a reader, and the events it kept."""

    steps: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    wall: list[float | None] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def add(self, step: int, name: str, value: float, wall: float | None = None) -> None:
        self.steps.append(step)
        self.names.append(name)
        self.values.append(value)
        self.wall.append(wall)

    def add_all(self, step: int, items: Mapping[str, float], wall: float | None = None) -> None:
        for name, value in items.items():
            self.add(step, name, value, wall)

    def event(self, line_no: int, step: int | None, text: str) -> None:
        """Keep `text` as an event when it is one (OOM, NCCL, Ray errors: `verl_events`)."""
        kind = classify(text)
        if kind is not None:
            self.events.append(Event(line_no, step, kind, text[:2000]))


def open_run(kind: str, path: Path | str) -> tuple[Run, str, Columns]:
    """A new Run for `path` (its id from the bytes as stored), the text to parse, and the
    empty Columns to collect its values in (for `build_run`)."""
    path = Path(path)
    raw, text, damaged = read_text(path)
    run = new_run(kind, path, raw)
    if damaged:
        run.parse_stats.notes.append("the .gz file ends early: read as far as it decoded")
    return run, text, Columns()


def build_run(run: Run, columns: Columns, framework: str, *, expected: str) -> list[Run]:
    """Fill `run` from `columns`; IngestError (naming what was expected) when nothing was read."""
    if not columns.steps:
        seen = run.parse_stats.step_lines
        why = f"{seen} {expected}(s), but no value in them" if seen else f"no {expected}"
        raise IngestError(run.source.path, f"{why} could be read" if seen else f"{why} found")
    wall = columns.wall if any(w is not None for w in columns.wall) else None
    run.metrics = metrics_frame(columns.steps, columns.names, columns.values, wall)
    run.events = columns.events
    path = Path(run.source.path)
    run.meta.update({"framework": framework, "experiment": path.stem, "project": path.parent.name})
    return [run]
