"""prime-rl's metrics.jsonl: flat `{"step": N, "time": t, "perf/throughput": …}` rows.

`src/prime_rl/monitors/file.py` (`FileMonitor.log_metrics`): every `monitors.log` call appends one
row, so a step has several rows (trainer: perf/, optim/, tensor stats, time/, system/; the
orchestrator appends to the same `<run dir>/metrics.jsonl`), merged here by step (a key seen
twice at a step keeps the later value); `time` (epoch seconds) is the wall time. Told apart from
verl's file logger (`{"step", "data"}`) and generic tables by its keys: `step` and `time`, no
`data`, and prime-rl's namespaces.

`sanitize` drops NaN/inf before writing and the monitor logs `Dropping N non-finite value(s) from
metrics.jsonl: k1, k2, …` (at most five names). The process logs beside the file
(`logs/attempt_*/trainer.log` and `orchestrator.log`, `utils/pathing.py`) give those back as NaN:
the trainer logs its warning after its `Step N |` line, the orchestrator before its own.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from logscope.ingest import _framework as fw
from logscope.ingest.prime_rl import dropped_keys
from logscope.model import Run

KIND = "prime-rl-jsonl"
DESCRIPTION = 'prime-rl metrics.jsonl (flat {"step": N, "time": t, ...} rows)'
FRAMEWORK = "prime-rl"

NAMESPACES = (
    "perf/",
    "optim/",
    "loss/",
    "entropy/",
    "mismatch_kl/",
    "time/",
    "progress/",
    "off_policy/",
    "system/",
    "train/",
    "eval/",
)
SUFFIXES = (".jsonl", ".ndjson", ".json")


def _row(line: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def is_row(obj: dict[str, Any]) -> bool:
    step, time = obj.get("step"), obj.get("time")
    return (
        "data" not in obj
        and isinstance(step, int)
        and not isinstance(step, bool)
        and isinstance(time, (int, float))
        and time > 1e9
    )


def sniff(path: Path) -> bool:
    if not path.name.endswith(SUFFIXES + tuple(s + ".gz" for s in SUFFIXES)):
        return False
    rows = [_row(line) for line in fw.head(path).split("\n")[:20] if line.strip()]
    whole = [r for r in rows[:-1] or rows if r is not None]
    return (
        bool(whole)
        and all(is_row(r) for r in whole)
        and any(key.startswith(NAMESPACES) for r in whole for key in r)
    )


def _logs_beside(path: Path) -> list[Path]:
    folder = path.parent
    found = sorted(folder.glob("logs/attempt_*/*.log")) + sorted(folder.glob("*.log"))
    seen: set[Path] = set()
    out = []
    for log in found:
        if log.name in ("trainer.log", "orchestrator.log") and log.resolve() not in seen:
            seen.add(log.resolve())
            out.append(log)
    return out


def dropped_from_log(log: Path) -> tuple[list[tuple[int, str]], int]:
    """([(step, key)] a process log says were dropped as non-finite, how many it did not name).

    trainer.log: the warning follows the step's line (train.py:648 logs before monitors.log);
    orchestrator.log: it comes before (orchestrator.py:747 logs before log_train_batch)."""
    _, text, _ = fw.read_text(log)
    after = log.name == "trainer.log"
    found: list[tuple[int, str]] = []
    pending: list[str] = []
    unnamed = 0
    step: int | None = None
    for _, line in fw.lines(text):
        if "Step " in line and " | " in line:
            head = line.split(" | ", 1)[0]
            if (n := head.rsplit("Step ", 1)[-1]).isdigit():
                step = int(n)
                found += [(step, key) for key in pending]
                pending = []
            continue
        if "non-finite" in line and (dropped := dropped_keys(line)) is not None:
            count, names = dropped
            unnamed += max(0, count - len(names))
            if after and step is not None:
                found += [(step, key) for key in names]
            elif not after:
                pending += names
    return found, unnamed


def read(path: Path, *, progress: Any = None) -> list[Run]:
    path = Path(path)
    run, text, cols = fw.open_run(KIND, path)
    stats = run.parse_stats
    all_lines = text.split("\n")
    for line_no, line in enumerate(all_lines, 1):
        if not line.strip():
            continue
        stats.lines_read += 1
        obj = _row(line)
        if obj is None or not is_row(obj):
            stats.skip(line_no, line, "not a prime-rl metrics row")
            if line_no == len(all_lines) and not text.endswith("\n"):
                stats.notes.append(f"line {line_no}: last line is cut off; ignored")
            continue
        stats.step_lines += 1
        step, wall = obj.pop("step"), float(obj.pop("time"))
        for key, value in fw.flatten(obj):
            cols.add(step, key, value, wall)
    present = set(zip(cols.steps, cols.names, strict=True))
    logs = _logs_beside(path)
    restored = unnamed = 0
    for log in logs:
        found, missing = dropped_from_log(log)
        unnamed += missing
        for step, key in found:
            if (step, key) not in present:
                cols.add(step, key, math.nan)
                present.add((step, key))
                restored += 1
    if logs:
        stats.notes.append(
            f"{restored} non-finite value(s) dropped by prime-rl's FileMonitor restored as NaN "
            f"from {', '.join(str(p.relative_to(path.parent)) for p in logs)}"
            + (
                f"; {unnamed} more were not named (the warning lists at most five)"
                if unnamed
                else ""
            )
        )
    else:
        stats.notes.append(
            "prime-rl drops NaN/inf from metrics.jsonl (monitors/file.py) and no trainer.log or "
            "orchestrator.log is beside it: a metric missing at a step may have been non-finite"
        )
    return fw.build_run(run, cols, FRAMEWORK, expected="prime-rl metrics row")
