"""The console of a Hugging Face Trainer / TRL run: the log dicts it prints, one per line.

`Trainer.log` hands each logging event to the progress callback, which prints the dict's repr:
`{'loss': 0.0123, 'grad_norm': 0.5, ..., 'epoch': 0.5}` (transformers 4.x: raw floats) or
`{'loss': '0.01234', ...}` (transformers 5.x: floats as `.4g` strings), written through tqdm
(`training_bar.write`), so a captured log has `\\r` progress bars and cursor moves on the same
line. Each dict is read as a Python literal, with `nan`/`inf`, `np.float64(x)` and
`tensor(x)` allowed as values; a line that opens a dict but does not parse (cut off, garbled)
is counted and skipped.

The printed dict carries no step (only `trainer_state.json` does): a training dict takes the
step shown by the training progress bar just before it on its line (`| 10/200 [`; a bar that
goes back is a resumed run appended to the log), else the next count (1, 2, ... as with
`logging_steps=1`); an eval or summary dict takes the step of the training dict before it.
The run's notes say which. A dict with its own `step` key keeps it. A training dict that
cannot be read still takes its step, so the dicts after it keep theirs.
"""

from __future__ import annotations

import ast
import contextlib
import math
import re
import warnings
from pathlib import Path
from typing import Any

from logscope.exceptions import IngestError
from logscope.ingest._common import NAN, metrics_frame, new_run, read_bytes
from logscope.ingest._hf import EVAL_PREFIXES, SUMMARY_KEYS, TRAINER_KEYS, framework_meta, kind_of
from logscope.ingest.files import read_head
from logscope.model import Event, Run

KIND = "hf-trainer-log"
FRAMEWORK = "trl"
DESCRIPTION = "Hugging Face / TRL console log: the printed {'loss': ..., 'epoch': ...} dicts"

SNIFF_BYTES = 1 << 20
#: a printed log dict opens like this (after tqdm's \r and cursor moves, or a logging prefix)
_DICT_START = re.compile(r"\{'[^']{1,200}': ")
#: the training bar tqdm redraws before it writes the dict: no description, `N/T [`
_BAR = re.compile(r"(?:^|\r)\s*\d{1,3}%\|[^|\r]*\|\s*(\d+)/(\d+) \[")
#: verl's console step line (`step:12 - actor/pg_loss:...`): that log belongs to the verl reader
_VERL_STEP = re.compile(rb"(?m)(?:^|[\s:])step:\d+ - [\w/@.\-]+:")
_PAIR = re.compile(
    r"'([^'\\]*)': (?:'([^'\\]*)'|([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|-?nan|-?inf"
    r"|None|True|False))(, |\})"
)
_BARE = {"nan": NAN, "-nan": NAN, "inf": math.inf, "-inf": -math.inf, "None": NAN}
_BARE |= {"True": 1.0, "False": 0.0}
_NAMES = {"nan": NAN, "NaN": NAN, "inf": math.inf, "Infinity": math.inf, "None": NAN}
_WRAPPERS = {"float", "float32", "float64", "float16", "bfloat16", "int64", "int32", "tensor"}
#: how a Trainer's dict opens (or its `epoch`): a line like this that does not parse is damage
_TRAINER_LIKE = re.compile(
    r"^\{'(?:loss|grad_norm|learning_rate|eval_|test_|train_runtime)|'epoch': "
)
_EVAL_OR_SUMMARY = re.compile(r"\{'(?:eval_|test_|train_runtime')")
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _number(node: ast.expr) -> float | None:
    """The float a printed value stands for, or None (not a number: the key is dropped)."""
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None:
            return NAN
        if isinstance(value, (bool, int, float)):
            try:
                return float(value)
            except OverflowError:
                return math.copysign(math.inf, value)
        if isinstance(value, str):
            try:
                return float(value)  # transformers 5 prints f"{v:.4g}" ('nan', 'inf' too)
            except ValueError:
                return None
        return None
    if isinstance(node, ast.Name):
        return _NAMES.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number(node.operand)
        if inner is None:
            return None
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Call) and len(node.args) == 1:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return _number(node.args[0]) if name in _WRAPPERS else None  # np.float64(x), tensor(x)
    return None


def flat_dict(text: str) -> dict[str, float] | None:
    """The common case, ~10x faster than `ast`: a flat dict of numbers, number strings, nan,
    inf, None or booleans. None for anything else (`parse_dict` then asks `ast`)."""
    out: dict[str, float] = {}
    pos, end = 1, len(text)
    if not text.startswith("{"):
        return None
    while pos < end:
        pair = _PAIR.match(text, pos)
        if pair is None:
            return None
        key, quoted, bare, sep = pair.groups()
        if quoted is not None:
            with contextlib.suppress(ValueError):  # a string that is not a number: left out
                out[key] = float(quoted)
        else:
            out[key] = _BARE[bare] if bare in _BARE else float(bare)
        pos = pair.end()
        if sep == "}":
            return out if pos == end else None
    return None


def parse_dict(text: str) -> dict[str, float] | None:
    """The printed dict in `text` (from its `{` to its last `}`) as {key: float}; non-number
    values are left out. None when it is not a dict literal (cut off, garbled)."""
    text = text.strip()
    flat = flat_dict(text)
    return flat if flat is not None else literal_dict(text)


def literal_dict(text: str) -> dict[str, float] | None:
    """`parse_dict` through Python's parser: any dict literal, values as `_number` reads them."""
    try:
        with warnings.catch_warnings():  # e.g. "invalid escape sequence" in a garbled line
            warnings.simplefilter("ignore")
            node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not isinstance(node, ast.Dict):
        return None
    out: dict[str, float] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        number = _number(value)
        if number is not None:
            out[key.value] = number
    return out


def _is_trainer_dict(d: dict[str, Any]) -> bool:
    """Does a parsed dict look like a Trainer log (not, say, a printed config)?"""
    keys = set(d)
    return bool(
        "epoch" in keys
        or keys & (TRAINER_KEYS | SUMMARY_KEYS)
        or any(k.startswith(EVAL_PREFIXES) for k in keys)
    )


def _split(line: str) -> tuple[str, str] | None:
    """(what precedes the dict on the line: bars, a prefix; the dict's text) or None."""
    match = _DICT_START.search(line)
    if match is None:
        return None
    close = line.rfind("}")
    dict_text = line[match.start() : close + 1] if close > match.start() else line[match.start() :]
    return line[: match.start()], dict_text


def sniff(path: Path) -> bool:
    """Text whose first MB holds a printed Trainer log dict with `epoch` or a Trainer key, and
    no verl step line (`step:N - key:value`)."""
    if not path.is_file():
        return False
    head = read_head(path, SNIFF_BYTES)
    if b"\x00" in head[:4096] or b"{'" not in head or _VERL_STEP.search(head):
        return False
    text = head.decode("utf-8", "replace")
    for line in text.splitlines():
        parts = _split(line)
        if parts is not None:
            parsed = parse_dict(parts[1])
            if parsed and _is_trainer_dict(parsed) and ("epoch" in parsed or "loss" in parsed):
                return True
    return False


def _read_text(path: Path) -> tuple[bytes, str]:
    raw = read_bytes(path)
    from logscope.ingest.files import GZIP_MAGIC

    if raw[:2] == GZIP_MAGIC:
        import gzip
        import zlib

        try:
            text = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            text = read_head(path, 1 << 40)  # what decodes before the damage
        return raw, text.decode("utf-8", "replace")
    return raw, raw.decode("utf-8", "replace")


class _Steps:
    """The step of each printed dict (see the module docstring), with a tally of how."""

    def __init__(self) -> None:
        self.last = 0
        self.bar_total: int | None = None
        self.how = {"step key": 0, "progress bar": 0, "counted": 0}
        self.restarts: list[tuple[int, int]] = []

    def train(self, before: str, logged: float | None) -> int:
        if logged is not None and logged.is_integer():
            self.how["step key"] += 1
            self.last = int(logged)
            return self.last
        bars = _BAR.findall(before)
        if bars:
            done, total = int(bars[-1][0]), int(bars[-1][1])
            if self.bar_total in (None, total):
                if done <= self.last:  # the bar went back: a resumed run, appended to this log
                    self.restarts.append((self.last, done))
                self.bar_total = total
                self.how["progress bar"] += 1
                self.last = done
                return done
        self.how["counted"] += 1
        self.last += 1
        return self.last

    def notes(self) -> list[str]:
        parts = [f"{n} {how}" for how, n in self.how.items() if n]
        out = [
            "steps of the printed dicts (they carry none): "
            + ", ".join(parts)
            + " (counted = 1 per training dict, as with logging_steps=1); eval and summary dicts"
            " take the step of the training dict before them"
        ]
        out += [
            f"the progress bar went back from step {a} to {b} (a resumed run?); the later "
            "values win"
            for a, b in self.restarts
        ]
        return out


def read(path: Path, *, progress: Any = None) -> list[Run]:
    from logscope.ingest.verl_events import classify

    path = Path(path)
    raw, text = _read_text(path)
    run = new_run(KIND, path, raw)
    stats = run.parse_stats
    steps_of = _Steps()
    steps: list[int] = []
    names: list[str] = []
    values: list[float] = []
    formatted = 0
    lines = text.split("\n")
    if lines and not lines[-1]:
        lines.pop()  # the text ends with a newline
    for index, line in enumerate(lines):
        stats.lines_read += 1
        parts = _split(line) if "{'" in line else None
        if parts is None:
            clean = _ESCAPES.sub("", line.rsplit("\r", 1)[-1]).strip()
            kind = classify(clean) if clean else None
            if kind is not None:
                run.events.append(Event(index + 1, steps_of.last or None, kind, clean[:500]))
            continue
        before, dict_text = parts
        parsed = parse_dict(dict_text)
        if parsed is None:
            if _TRAINER_LIKE.search(dict_text):  # else someone else's print: not ours to count
                stats.skip(index + 1, dict_text, "unreadable dict (cut off or garbled)")
                if not _EVAL_OR_SUMMARY.match(dict_text):
                    steps_of.train(before, None)  # it held a step: those after it keep theirs
            continue
        if not _is_trainer_dict(parsed):
            continue
        formatted += "': '" in dict_text
        what = kind_of(parsed)
        logged = parsed.pop("step", None)
        step = steps_of.train(before, logged) if what == "train" else steps_of.last
        stats.step_lines += 1
        for key, value in parsed.items():
            steps.append(step)
            names.append(key)
            values.append(float(value))
        if progress is not None and index % 1000 == 0:
            progress(index, len(lines))
    if not steps:
        raise IngestError(str(path), "no printed Trainer log dict ({'loss': ..., 'epoch': ...})")
    run.metrics = metrics_frame(steps, names, values)
    stats.notes.extend(steps_of.notes())
    if formatted:
        stats.notes.append(
            f"{formatted} dict(s) print values with 4 significant digits (transformers 5 formats"
            " floats as .4g); trainer_state.json has them in full"
        )
    run.meta.update({"experiment": path.stem, "project": path.parent.name})
    run.meta.update(framework_meta())
    return [run]
