"""ROLL's console: `StdoutTracker` logs `metrics_tag: {"step": N, "metrics": {...}}` as JSON.

`roll/utils/tracking.py:161` (`logger.info(f"metrics_tag: {json.dumps({'step': step, 'metrics':
values})}")`) behind ROLL's logging prefix (`[time] [file (line)] [INFO] [DRIVER 0 / 1][PID n]`).
The keys are ROLL's own, with the `@sum`/`@mean` reducer tags already stripped by the tracker
(`_strip_metric_tag`); nested dicts (`add_scalars`) are flattened with `/`. `json.dumps` writes
NaN/inf as the bare tokens `NaN`/`Infinity`, which read back as NaN/inf.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from logscope.ingest import _framework as fw
from logscope.model import Run

KIND = "roll-console"
DESCRIPTION = 'ROLL console log (metrics_tag: {"step": N, "metrics": {...}} lines)'
FRAMEWORK = "roll"
MARKER = 'metrics_tag: {"step": '


def sniff(path: Path) -> bool:
    return MARKER in fw.head(path)


def _record(body: str) -> tuple[int, dict[str, float]] | None:
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("metrics"), dict):
        return None
    step = obj.get("step")
    if isinstance(step, bool) or not isinstance(step, int):
        return None
    return step, dict(fw.flatten(obj["metrics"]))


def read(path: Path, *, progress: Any = None) -> list[Run]:
    run, text, cols = fw.open_run(KIND, path)
    stats = run.parse_stats
    step: int | None = None
    for line_no, line in fw.lines(text, progress, stats):
        at = line.find("metrics_tag: ")
        if at < 0:
            cols.event(line_no, step, line)
            continue
        record = _record(line[at + len("metrics_tag: ") :])
        if record is None:
            stats.skip(line_no, line, "metrics_tag line that is not whole JSON")
            continue
        step, values = record
        stats.step_lines += 1
        cols.add_all(step, values)
    return fw.build_run(run, cols, FRAMEWORK, expected="ROLL metrics_tag line")
