"""W&B's chart "Export CSV": a `Step` column, then `<run name> - <metric>` columns, each with
`__MIN`/`__MAX` companions (the band of a sampled/grouped line; equal to the value for a
single run). The plain value columns are kept, the companions dropped; one Run per run name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from logscope.exceptions import IngestError
from logscope.ingest._common import content_hash, version_and_algorithm
from logscope.ingest.tables import _header, long_from_wide, read_csv_strings
from logscope.model import Run, Source

KIND = "wandb-csv"
DESCRIPTION = "W&B chart 'Export CSV' (Step, '<run> - <metric>' and __MIN/__MAX columns)"

_SEP = " - "
_COMPANIONS = ("__MIN", "__MAX")


def _split(column: str) -> tuple[str, str] | None:
    """('run name', 'metric') of a value column; None for Step and the __MIN/__MAX companions."""
    if column.endswith(_COMPANIONS) or _SEP not in column:
        return None
    run, _, metric = column.partition(_SEP)
    return (run.strip(), metric.strip()) if run.strip() and metric.strip() else None


def sniff(path: Path) -> bool:
    if not path.is_file() or path.suffix != ".csv":
        return False
    try:
        header = _header(path)
    except (OSError, ValueError):
        return False
    return bool(header) and header[0] == "Step" and any(_split(c) for c in header[1:])


def read(path: Path, *, progress: Any = None) -> list[Run]:
    path = Path(path)
    frame = read_csv_strings(path)
    if "Step" not in frame.columns:
        raise IngestError(str(path), "no 'Step' column: not a W&B chart export")
    by_run: dict[str, dict[str, str]] = {}
    for column in frame.columns:
        parts = _split(column)
        if parts:
            by_run.setdefault(parts[0], {})[column] = parts[1]
    if not by_run:
        raise IngestError(str(path), "no '<run> - <metric>' columns: not a W&B chart export")
    companions = sum(c.endswith(_COMPANIONS) for c in frame.columns)
    runs: list[Run] = []
    raw = path.read_bytes()
    for name, metrics in by_run.items():
        run = Run(
            id=content_hash(KIND, raw, name),
            source=Source(KIND, str(path)),
            meta={"experiment": name},
        )
        run.metrics = long_from_wide(frame, "Step", metrics)
        run.meta.update(version_and_algorithm(set(run.metric_names), {}, before_08=None))
        run.parse_stats.lines_read = frame.height
        run.parse_stats.step_lines = run.n_steps
        if companions:
            run.parse_stats.notes.append(f"{companions} __MIN/__MAX companion columns ignored")
        runs.append(run)
    return runs
