"""verl's file logger: one `{"step": N, "data": {metric: value, ...}}` object per line.

EasyR1's (a verl fork: `experiment_log.jsonl`) writes `{"step": N, **metrics}` with the metric
keys split at `/` into nested objects (`{"step": 3, "actor": {"pg_loss": …}}`); they are joined
back (`actor/pg_loss`) and the run is EasyR1's.

verl 0.7+ writes with orjson (`OPT_SERIALIZE_NUMPY`), so NaN/±inf become `null`; 0.6.x used the
stdlib json, which writes the bare tokens `NaN`/`Infinity`. Both read back as NaN/inf here
(null → NaN). A half-written last line (the run is still going, or was killed) is tolerated
and counted. The file is truncated by verl on restart, so one file is one run.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from logscope.exceptions import IngestError
from logscope.ingest._common import (
    metrics_frame,
    new_run,
    read_bytes,
    to_float,
    version_and_algorithm,
)
from logscope.ingest._framework import flatten
from logscope.model import ParseStats, Run
from logscope.schemas import METRICS_SCHEMA

KIND = "verl-jsonl"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
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


def _is_easyr1_record(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and "step" in obj
        and "data" not in obj
        and any(isinstance(v, dict) for v in obj.values())
    )


def _is_record(obj: Any) -> bool:
    return _is_verl_record(obj) or _is_easyr1_record(obj)


def _values(obj: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(metric, value) of a record: verl's `data`, or EasyR1's nested objects joined at `/`."""
    if "data" in obj:
        yield from obj["data"].items()
        return
    for key, value in obj.items():
        if isinstance(value, dict):
            yield from flatten(value, f"{key}/")
        elif key != "step":
            yield key, value


def _first_record(head: bytes) -> Any:
    """The first non-empty line of `head` as JSON (None when it is not JSON)."""
    for line in head.splitlines():
        if line.strip():
            try:
                return _loads(line)
            except ValueError:
                return None
    return None


def sniff(path: Path) -> bool:
    """A file whose first non-empty line is a verl (or EasyR1) file-logger record."""
    if not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return False
    return _is_record(_first_record(head))


# null (verl 0.7+: NaN/inf) becomes this number on the polars path, then NaN; absent keys stay null
_NULL_SENTINEL = -1.2345678901234567e307


def _fast_frame(body: bytes) -> tuple[pl.DataFrame, int] | None:
    """The long frame of whole, clean verl 0.7+ lines through polars' JSON reader (~10x the
    per-line path), or None when the file needs the per-line path (bare NaN of 0.6, odd lines,
    values that are not numbers)."""
    if b"NaN" in body or b"Infinity" in body:
        return None
    sentinel = b":%r" % _NULL_SENTINEL
    body = body.replace(b":null", sentinel)
    if b": null" in body:  # Python's json.dumps writes `": "`
        body = body.replace(b": null", sentinel)
    if b"null" in body:  # another spacing (or a string holding "null"): the per-line path decides
        return None
    try:
        frame = pl.read_ndjson(io.BytesIO(body), infer_schema_length=None)
        if set(frame.columns) != {"step", "data"} or not isinstance(
            frame.schema["data"], pl.Struct
        ):
            return None
        wide = frame.select(
            pl.col("step").cast(pl.Int64, strict=True), pl.col("data").struct.unnest()
        )
        if wide.get_column("step").null_count():
            return None
        metrics = sorted(c for c in wide.columns if c != "step")
        bad = [
            c for c in metrics if not wide.schema[c].is_numeric() and wide.schema[c] != pl.Boolean
        ]
        if bad:
            return None
        # metrics in sorted column order → unpivot yields (metric, row) order; a stable sort by
        # step then gives (step, metric) without sorting 5M strings
        long = (
            wide.select("step", *[pl.col(c).cast(pl.Float64) for c in metrics])
            .unpivot(index="step", variable_name="metric", value_name="value")
            .drop_nulls("value")
            .with_columns(
                pl.when(pl.col("value") == _NULL_SENTINEL)
                .then(float("nan"))
                .otherwise(pl.col("value"))
                .alias("value"),
                pl.lit(None, dtype=pl.Float64).alias("wall_time"),
            )
        )
        steps = wide.get_column("step")
        if steps.is_duplicated().any():  # a step logged twice: the later value wins
            long = long.unique(subset=["step", "metric"], keep="last", maintain_order=True).sort(
                ["step", "metric"]
            )
        else:
            long = long.sort("step", maintain_order=True)
    except (pl.exceptions.PolarsError, ValueError, TypeError, OSError):
        # OSError: polars takes a body that starts with gzip's magic bytes for a .gz stream
        return None
    return long, frame.height


def _per_line(
    lines: list[bytes],
    first_index: int,
    raw_ends_in_newline: bool,
    stats: ParseStats,
    progress: Any,
) -> tuple[list[int], list[str], list[float]]:
    """Columns of verl records in `lines` (line numbers from first_index + 1), parsed one by one."""
    steps: list[int] = []
    names: list[str] = []
    values: list[float] = []
    last_content = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    total = len(lines)
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        line_no = first_index + index + 1
        stats.lines_read += 1
        try:
            obj = _loads(line)
        except ValueError:
            stats.skip(line_no, line.decode("utf-8", "replace"))
            if index == last_content and not raw_ends_in_newline:
                stats.notes.append(
                    f"line {line_no}: last line is cut off (file still being written?); ignored"
                )
            continue
        if not _is_record(obj):
            stats.skip(line_no, line.decode("utf-8", "replace"))
            continue
        try:
            step = int(obj["step"])
        except (TypeError, ValueError, OverflowError):
            step = None
        if step is None or not _INT64_MIN <= step <= _INT64_MAX:  # steps are Int64
            stats.skip(line_no, line.decode("utf-8", "replace"))
            continue
        stats.step_lines += 1
        for key, value in _values(obj):
            number = to_float(value)
            if number is None:
                continue
            steps.append(step)
            names.append(key)
            values.append(number)
        if progress is not None and index % 1000 == 0:
            progress(index, total)
    return steps, names, values


def read(path: Path, *, progress: Any = None) -> list[Run]:
    path = Path(path)
    raw = read_bytes(path)
    run = new_run(KIND, path, raw)
    stats = run.parse_stats
    ends_in_newline = raw.endswith(b"\n")
    body_end = raw.rfind(b"\n") + 1
    fast = _fast_frame(raw[:body_end]) if body_end else None
    if fast is not None:
        frame, n_rows = fast
        stats.lines_read = stats.step_lines = n_rows
        n_lines = raw.count(b"\n", 0, body_end)
        tail = _per_line([raw[body_end:]], n_lines, ends_in_newline, stats, None)
        if tail[0]:  # a whole record after the last newline
            frame = (
                pl.concat([frame, metrics_frame(*tail)], how="vertical_relaxed")
                .unique(subset=["step", "metric"], keep="last", maintain_order=True)
                .sort(["step", "metric"])
            )
        run.metrics = frame.select(list(METRICS_SCHEMA))
    else:
        columns = _per_line(raw.split(b"\n"), 0, ends_in_newline, stats, progress)
        run.metrics = metrics_frame(*columns)
    if stats.step_lines == 0:
        raise IngestError(str(path), "no verl file-logger records ({'step': N, 'data': {...}})")
    run.meta.update({"experiment": path.stem, "project": path.parent.name})
    if _is_easyr1_record(_first_record(raw[: 1 << 16])):
        run.meta["framework"] = "easyr1"

    run.meta.update(version_and_algorithm(set(run.metric_names), {}, before_08="0.6-0.7"))
    return [run]
