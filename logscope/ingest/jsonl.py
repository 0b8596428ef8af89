"""verl's file logger: one `{"step": N, "data": {metric: value, ...}}` object per line.

verl 0.7+ writes with orjson (`OPT_SERIALIZE_NUMPY`), so NaN/±inf become `null`; 0.6.x used the
stdlib json, which writes the bare tokens `NaN`/`Infinity`. Both read back as NaN/inf here
(null → NaN). A half-written last line (the run is still going, or was killed) is tolerated
and counted. The file is truncated by verl on restart, so one file is one run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from logscope.exceptions import IngestError
from logscope.ingest._common import content_hash, metrics_frame, to_float, version_and_algorithm
from logscope.model import Run, Source

KIND = "verl-jsonl"
DESCRIPTION = 'verl file-logger JSONL, one {"step": N, "data": {...}} per line'

try:  # orjson is ~3x faster; it rejects the bare NaN of verl 0.6, so json.loads is the fallback
    import orjson

    _fast_loads: Any = orjson.loads
except ImportError:  # pragma: no cover - orjson is optional
    _fast_loads = json.loads


def _loads(line: bytes) -> Any:
    try:
        return _fast_loads(line)
    except ValueError:
        return json.loads(line)


def _is_verl_record(obj: Any) -> bool:
    return isinstance(obj, dict) and "step" in obj and isinstance(obj.get("data"), dict)


def sniff(path: Path) -> bool:
    """A file whose first non-empty line is a verl file-logger record."""
    if not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return False
    for line in head.splitlines():
        if line.strip():
            try:
                return _is_verl_record(_loads(line))
            except ValueError:
                return False
    return False


def read(path: Path, *, progress: Any = None) -> list[Run]:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise IngestError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    run = Run(id=content_hash(KIND, raw), source=Source(KIND, str(path)))
    stats = run.parse_stats
    steps: list[int] = []
    names: list[str] = []
    values: list[float] = []
    lines = raw.split(b"\n")
    last_content = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    total = len(lines)
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        line_no = index + 1
        stats.lines_read += 1
        try:
            obj = _loads(line)
        except ValueError:
            stats.skip(line_no, line.decode("utf-8", "replace"))
            if index == last_content and not raw.endswith(b"\n"):
                stats.notes.append(
                    f"line {line_no}: last line is cut off (file still being written?); ignored"
                )
            continue
        if not _is_verl_record(obj):
            stats.skip(line_no, line.decode("utf-8", "replace"))
            continue
        try:
            step = int(obj["step"])
        except (TypeError, ValueError):
            stats.skip(line_no, line.decode("utf-8", "replace"))
            continue
        stats.step_lines += 1
        for key, value in obj["data"].items():
            number = to_float(value)
            if number is None:
                continue
            steps.append(step)
            names.append(key)
            values.append(number)
        if progress is not None and index % 1000 == 0:
            progress(index, total)
    if stats.step_lines == 0:
        raise IngestError(str(path), "no verl file-logger records ({'step': N, 'data': {...}})")
    run.metrics = metrics_frame(steps, names, values)
    run.meta.update({"experiment": path.stem, "project": path.parent.name})
    run.meta.update(version_and_algorithm(set(run.metric_names), {}, before_08="0.6-0.7"))
    return [run]
