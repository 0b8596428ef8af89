"""Hugging Face Trainer / TRL `trainer_state.json`: `log_history`, one dict per logging event.

The Trainer writes it into every `checkpoint-N/` (and `trainer.save_state()` into the output
dir) with `json.dumps(indent=2, sort_keys=True)`; each entry has a `step` (the global step)
and the keys as logged: training metrics, `eval_*` at an evaluation, and a last summary entry
(`train_runtime`, `train_loss`, ...). Keys are kept as they are (the framework profile maps
them to concepts); NaN/±inf are JSON's bare tokens, `null` (a TRL metric with no valid value)
reads as NaN.

Given a folder (an output dir or a checkpoint), the state with the highest `global_step` is
read: a resumed run's latest checkpoint holds the whole history. A file cut off mid-write, or
an entry that is not JSON, loses only the entries it damages; they are counted (by line in
the file; in a file that parses as a whole, by entry number in `log_history`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from logscope.exceptions import IngestError
from logscope.ingest._common import metrics_frame, new_run, read_bytes, to_float
from logscope.ingest._hf import framework_meta, kind_of
from logscope.ingest.files import read_head
from logscope.model import Run

KIND = "hf-trainer-state"
FRAMEWORK = "trl"
DESCRIPTION = (
    "Hugging Face / TRL trainer_state.json (log_history), or an output dir of checkpoint-*/"
)

STATE_NAME = "trainer_state.json"
CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_GLOBAL_STEP = re.compile(rb'"global_step":\s*(\d+)')
_HISTORY = re.compile(rb'"log_history":\s*\[')
_ENTRY_START = re.compile(r"\n\s*\{")  # a line that opens a log_history entry
#: top-level fields kept in `meta["hf_trainer_state"]`
_STATE_FIELDS = (
    "global_step",
    "max_steps",
    "num_train_epochs",
    "logging_steps",
    "eval_steps",
    "save_steps",
    "train_batch_size",
    "best_metric",
    "best_global_step",
)


def state_files(folder: Path) -> list[Path]:
    """`trainer_state.json` in `folder` and in its `checkpoint-N/` folders."""
    found = [folder / STATE_NAME] if (folder / STATE_NAME).is_file() else []
    try:
        children = sorted(folder.iterdir())
    except OSError:
        return found
    found += [
        child / STATE_NAME
        for child in children
        if CHECKPOINT.match(child.name) and (child / STATE_NAME).is_file()
    ]
    return found


def _rank(file: Path) -> tuple[int, int]:
    """(global step, 1 for the output dir's own state): the latest wins, the final one on a tie
    (it adds the summary entry). The step comes from the file's head, else its folder's name."""
    match = _GLOBAL_STEP.search(read_head(file, 8192))
    if match:
        return int(match.group(1)), int(CHECKPOINT.match(file.parent.name) is None)
    folder = CHECKPOINT.match(file.parent.name)
    return (int(folder.group(1)) if folder else -1), 0


def latest_state(folder: Path) -> Path | None:
    """The state file with the highest global step under `folder`, or None."""
    files = state_files(folder)
    return max(files, key=_rank) if files else None


def sniff(path: Path) -> bool:
    """A `trainer_state.json` (or a .json whose head has `global_step` and `log_history`), or a
    folder holding one or `checkpoint-N/` folders that do."""
    if path.is_dir():
        return bool(state_files(path))
    if not path.is_file():
        return False
    if path.name == STATE_NAME:
        return True
    if path.suffix != ".json":
        return False
    head = read_head(path, 8192)
    return b'"global_step"' in head and _HISTORY.search(head) is not None


def _entries(raw: bytes, stats: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the state's other fields, log_history entries); a damaged file gives what is whole."""
    text = raw.decode("utf-8", "replace")
    try:
        state = json.loads(text)
    except ValueError:
        state = None
    if isinstance(state, dict) and isinstance(state.get("log_history"), list):
        history = state.pop("log_history")
        stats.lines_read = len(history)
        good = [e for e in history if isinstance(e, dict)]
        for index, entry in enumerate(history):
            if not isinstance(entry, dict):
                stats.skip(index + 1, repr(entry), "not an object")
        return state, good
    return _salvage(text, stats)


def _salvage(text: str, stats: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Entries of a `log_history` that is not valid JSON as a whole, decoded one by one; after a
    bad entry, decoding goes on at the next line that opens one."""
    match = re.search(r'"log_history":\s*\[', text)
    if match is None:
        return {}, []
    head = {k: int(v) for k, v in re.findall(r'"(global_step|max_steps)":\s*(\d+)', text[:4096])}
    decoder = json.JSONDecoder()
    entries: list[dict[str, Any]] = []
    pos, end = match.end(), len(text)
    line_no, counted_to = 1, 0
    while pos < end:
        while pos < end and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= end or text[pos] == "]":
            break
        line_no += text.count("\n", counted_to, pos)
        counted_to = pos
        stats.lines_read += 1
        try:
            entry, pos = decoder.raw_decode(text, pos)
        except ValueError:
            resume = _ENTRY_START.search(text, pos + 1)
            cut = resume is None
            snippet = text[pos : pos + 200]
            stats.skip(line_no, snippet, "cut off" if cut else "not JSON")
            if cut:
                stats.notes.append(
                    f"line {line_no}: log_history is cut off here (file still "
                    "being written, or killed while writing?)"
                )
                break
            pos = resume.start() + 1
            continue
        if isinstance(entry, dict):
            entries.append(entry)
        else:
            stats.skip(line_no, repr(entry)[:200], "not an object")
    return head, entries


def _columns(entries: list[dict[str, Any]], stats: Any) -> tuple[list[int], list[str], list[float]]:
    steps: list[int] = []
    names: list[str] = []
    values: list[float] = []
    for index, entry in enumerate(entries):
        step = entry.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            stats.skip(index + 1, json.dumps(entry, default=str)[:200], "no step")
            continue
        stats.step_lines += kind_of(entry) == "train"
        for key, value in entry.items():
            number = to_float(value)
            if key != "step" and number is not None:
                steps.append(step)
                names.append(str(key))
                values.append(number)
    return steps, names, values


def read(path: Path, *, progress: Any = None) -> list[Run]:
    path = Path(path)
    file = latest_state(path) if path.is_dir() else path
    if file is None:
        raise IngestError(str(path), f"no {STATE_NAME} in it or in checkpoint-*/ below it")
    raw = read_bytes(file)
    run = new_run(KIND, file, raw)
    stats = run.parse_stats
    state, entries = _entries(raw, stats)
    run.metrics = metrics_frame(*_columns(entries, stats))
    if run.metrics.height == 0:
        raise IngestError(str(file), "no log_history entries with a step and a number")
    run_dir = file.parent.parent if CHECKPOINT.match(file.parent.name) else file.parent
    states = state_files(run_dir)
    if len(states) > 1:
        latest = max(states, key=_rank)
        stats.notes.append(
            f"read {file.relative_to(run_dir)}, the latest of {len(states)} trainer states in "
            f"{run_dir}"
            if latest == file
            else f"read {file.relative_to(run_dir)}; a later one is {latest.relative_to(run_dir)}"
        )
    run.meta.update({"experiment": run_dir.name, "project": run_dir.parent.name})
    run.meta.update(framework_meta())
    kept = {k: state[k] for k in _STATE_FIELDS if state.get(k) is not None}
    if kept:
        run.meta["hf_trainer_state"] = kept
    return [run]
