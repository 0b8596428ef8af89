"""Generic tables: a CSV or JSONL file with a step column and one column per metric.

Step column: the first of `step`, `_step`, `Step`, `global_step`. A wall-time column
(`_timestamp`, `wall_time`, `timestamp`) is kept as wall time; other `_`-prefixed columns
(`_runtime`, …) and non-numeric columns are dropped. Empty cells mean "not logged at that step".
W&B's chart "Export CSV" is handled by `wandb_csv` (same code, its own source kind).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from logscope.exceptions import IngestError
from logscope.ingest._common import content_hash, metrics_frame, to_float, version_and_algorithm
from logscope.model import Run, Source
from logscope.schemas import METRICS_SCHEMA, empty_metrics

KIND = "table"
DESCRIPTION = "CSV or JSONL table with a step column (step, _step, Step, global_step)"

STEP_COLUMNS = ("step", "_step", "Step", "global_step")
WALL_COLUMNS = ("_timestamp", "wall_time", "timestamp")
CSV_SUFFIXES = (".csv", ".tsv")
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")


def _header(path: Path) -> list[str]:
    with path.open("r", encoding="utf-8", errors="replace", newline="") as fh:
        line = fh.readline()
    sep = "\t" if path.suffix == ".tsv" else ","
    import csv

    return next(csv.reader([line], delimiter=sep), [])


def _first_json(path: Path) -> Any:
    with path.open("rb") as fh:
        for line in fh:
            if line.strip():
                return json.loads(line)
    return None


def step_column(columns: Iterable[str]) -> str | None:
    cols = list(columns)
    return next((c for c in STEP_COLUMNS if c in cols), None)


def sniff(path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        if path.suffix in CSV_SUFFIXES:
            return step_column(_header(path)) is not None
        if path.suffix in JSONL_SUFFIXES:
            first = _first_json(path)
            return isinstance(first, dict) and step_column(first) is not None
    except (OSError, ValueError):
        return False
    return False


# ---- frames from tables ---------------------------------------------------------------------


def read_csv_strings(path: Path) -> pl.DataFrame:
    """The CSV with every column as text (numbers are cast per column afterwards)."""
    try:
        return pl.read_csv(
            path,
            infer_schema=False,
            separator="\t" if path.suffix == ".tsv" else ",",
            truncate_ragged_lines=True,
        )
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise IngestError(str(path), f"cannot read as CSV: {exc}") from exc


def numeric(column: pl.Expr) -> pl.Expr:
    """Text → Float64: numbers, NaN/Infinity spellings; anything else → null."""
    text = column.str.strip_chars()
    low = text.str.to_lowercase()
    return (
        pl.when(low.is_in(["nan", "-nan"]))
        .then(float("nan"))
        .when(low.is_in(["inf", "infinity", "+inf", "+infinity"]))
        .then(float("inf"))
        .when(low.is_in(["-inf", "-infinity"]))
        .then(float("-inf"))
        .otherwise(text.cast(pl.Float64, strict=False))
    )


def long_from_wide(
    frame: pl.DataFrame, step: str, metrics: Mapping[str, str], wall: str | None = None
) -> pl.DataFrame:
    """Wide text frame → canonical long frame. `metrics` maps column → metric name."""
    if not metrics or frame.height == 0:
        return empty_metrics()
    cols = [numeric(pl.col(step)).alias("__step")]
    cols.append(numeric(pl.col(wall)).alias("__wall") if wall else pl.lit(None).alias("__wall"))
    cols += [numeric(pl.col(c)).alias(name) for c, name in metrics.items()]
    wide = frame.select(cols).filter(pl.col("__step").is_not_null() & pl.col("__step").is_finite())
    long = (
        wide.unpivot(index=["__step", "__wall"], variable_name="metric", value_name="value")
        .drop_nulls("value")
        .select(
            pl.col("__step").cast(pl.Int64).alias("step"),
            pl.col("metric").cast(pl.Utf8),
            pl.col("value").cast(pl.Float64),
            pl.col("__wall").cast(pl.Float64).alias("wall_time"),
        )
    )
    return (
        long.unique(subset=["step", "metric"], keep="last", maintain_order=True)
        .sort(["step", "metric"])
        .select(list(METRICS_SCHEMA))
    )


def rows_to_frame(
    rows: Iterable[Mapping[str, Any]], *, none_is_nan: bool = False
) -> tuple[pl.DataFrame, int, int]:
    """Dict rows (W&B history rows, generic JSONL) → (long frame, rows used, rows without step).

    The step is the first of STEP_COLUMNS present; `_timestamp` etc. is the wall time; keys
    starting with `_`, dicts (tables, histograms) and strings are not metrics. `None` is "not
    logged" unless `none_is_nan`.
    """
    steps: list[int] = []
    names: list[str] = []
    values: list[float] = []
    walls: list[float | None] = []
    used = missing = 0
    step_key: str | None = None
    for row in rows:
        if step_key is None or step_key not in row:
            step_key = step_column(row)
        raw_step = row.get(step_key) if step_key else None
        number_step = to_float(raw_step) if raw_step is not None else None
        if number_step is None or number_step != number_step:
            missing += 1
            continue
        step = int(number_step)
        wall = next((to_float(row[w]) for w in WALL_COLUMNS if row.get(w) is not None), None)
        used += 1
        for key, value in row.items():
            if key == step_key or key.startswith("_") or key in WALL_COLUMNS:
                continue
            number = to_float(value) if value is not None or none_is_nan else None
            if number is None:  # not logged, or not a scalar
                continue
            steps.append(step)
            names.append(key)
            values.append(number)
            walls.append(wall)
    return metrics_frame(steps, names, values, walls), used, missing


# ---- read -----------------------------------------------------------------------------------


def _read_csv(path: Path, run: Run) -> None:
    frame = read_csv_strings(path)
    step = step_column(frame.columns)
    if step is None:
        raise IngestError(str(path), f"no step column (expected one of {', '.join(STEP_COLUMNS)})")
    wall = next((c for c in WALL_COLUMNS if c in frame.columns), None)
    candidates = [c for c in frame.columns if c not in (step, wall) and not c.startswith("_")]
    numeric_cols = frame.select([numeric(pl.col(c)).alias(c) for c in candidates])
    metrics = {c: c for c in candidates if numeric_cols.get_column(c).null_count() < frame.height}
    dropped = [
        c
        for c in candidates
        if c not in metrics and frame.get_column(c).null_count() < frame.height
    ]
    run.metrics = long_from_wide(frame, step, metrics, wall)
    run.parse_stats.lines_read = frame.height
    run.parse_stats.step_lines = frame.height
    if dropped:
        run.parse_stats.notes.append(f"non-numeric columns ignored: {', '.join(dropped[:10])}")


def _iter_jsonl(path: Path, run: Run) -> Iterable[dict[str, Any]]:
    stats = run.parse_stats
    with path.open("rb") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            stats.lines_read += 1
            try:
                obj = json.loads(line)
            except ValueError:
                stats.skip(line_no, line.decode("utf-8", "replace"))
                continue
            if isinstance(obj, dict):
                yield obj
            else:
                stats.skip(line_no, line.decode("utf-8", "replace"))


def read(path: Path, *, progress: Any = None) -> list[Run]:
    path = Path(path)
    if not path.is_file():
        raise IngestError(str(path), "not a file")
    run = Run(
        id=content_hash(KIND, path.read_bytes()),
        source=Source(KIND, str(path)),
        meta={"experiment": path.stem},
    )
    if path.suffix in JSONL_SUFFIXES:
        frame, used, missing = rows_to_frame(_iter_jsonl(path, run), none_is_nan=True)
        run.metrics = frame
        run.parse_stats.step_lines = used
        if missing:
            run.parse_stats.notes.append(f"{missing} rows without a step column ignored")
    else:
        _read_csv(path, run)
    if run.metrics.height == 0:
        raise IngestError(str(path), "no numeric metric values with a step found")
    run.meta.update(version_and_algorithm(set(run.metric_names), {}, before_08=None))
    return [run]
