"""`logscope query "SQL"`: DuckDB (embedded) over the store's Parquet, as a fleet database.

Views: `runs` (one row per analysed run: `summary.parquet`), `findings` (one row per finding:
`findings.parquet`), `metrics` (the long metrics frames, `run_id` from the Hive path) and
`config` (the leaves of each run's config as `run_id, key, value`). DuckDB reads the files in
place; nothing is loaded into logscope. A damaged file reads as absent (the query is run again
without it). No detector is imported.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import math
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from logscope.cli.common import OutputOption, StoreOption, emit, err_console, user_errors
from logscope.exceptions import LogscopeError, OptionalDependencyMissing

if TYPE_CHECKING:
    import duckdb

SCHEMA = "logscope.query/1"


class QueryFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"


#: view name → file in each run folder (`metrics` takes its run_id from the Hive path)
VIEW_FILES = {
    "runs": "summary.parquet",
    "findings": "findings.parquet",
    "metrics": "metrics.parquet",
}

#: the `config` view: each run's config flattened to its leaves (a list is one leaf per item)
CONFIG_VIEW = """
CREATE VIEW config AS
SELECT r.run_id, substr(t.fullkey, 3) AS key, json_extract_string(t.atom, '$') AS value,
       t.type AS type
FROM runs r, json_tree(r.config) t
WHERE t.atom IS NOT NULL
"""


def query(
    sql: Annotated[
        str,
        typer.Argument(
            metavar="SQL",
            help="A DuckDB query over the views runs, findings, metrics and config.",
        ),
    ],
    store: StoreOption = None,
    format: Annotated[
        QueryFormat, typer.Option("--format", "-f", help="Output format.")
    ] = QueryFormat.table,
    output: OutputOption = None,
) -> None:
    """Ask the store questions across runs, in SQL (DuckDB, embedded; needs logscope[query]).

    Views: runs (a row per analysed run: source, project, experiment, steps, worst severity,
    diagnoses, config as JSON, ...), findings (a row per finding, the report's fields),
    metrics (run_id, step, metric, value, wall_time) and config (run_id, key, value).
    See docs/fleet.md for the columns and example queries.

    Example: logscope query "SELECT name, count(*) AS runs FROM findings GROUP BY name"

    Example: logscope query "SELECT experiment, n_steps FROM runs" --format csv
    """
    from logscope.store import Store

    with user_errors():
        columns, rows = run_query(sql, Store(store).root)
        emit(
            "rich" if format == QueryFormat.table else format.value,
            output,
            lambda console: console.print(_rich_table(columns, rows)),
            csv=lambda: to_csv(columns, rows),
            json=lambda: to_json(columns, rows),
            markdown=lambda: to_markdown(columns, rows),
        )


# ---- the engine ---------------------------------------------------------------------------------
def _duckdb() -> Any:
    try:
        import duckdb
    except ImportError as exc:
        raise OptionalDependencyMissing("duckdb", "query", "logscope query") from exc
    return duckdb


def connect(root: Path, exclude: frozenset[Path] = frozenset()) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the store's views (`exclude`: files to leave out)."""
    from logscope.schemas import FINDINGS_SCHEMA, METRICS_SCHEMA, RUNS_SCHEMA

    duckdb = _duckdb()
    con = duckdb.connect(":memory:")
    schemas = {
        "runs": RUNS_SCHEMA,
        "findings": FINDINGS_SCHEMA,
        "metrics": {**METRICS_SCHEMA, "run_id": None},
    }
    runs_dir = root / "runs"
    for view, name in VIEW_FILES.items():
        files = sorted(runs_dir.glob(f"run_id=*/{name}"))
        kept = [f for f in files if f not in exclude]
        if not kept:
            con.execute(f"CREATE VIEW {view} AS {_empty_select(schemas[view])}")
            continue
        source = _sql_text(str(runs_dir / "run_id=*" / name)) if kept == files else _sql_list(kept)
        hive = (
            "hive_partitioning = true, hive_types = {'run_id': VARCHAR}"
            if view == "metrics"
            else "hive_partitioning = false"
        )
        con.execute(
            f"CREATE VIEW {view} AS SELECT * FROM read_parquet({source}, {hive}, "
            "union_by_name = true)"
        )
    con.execute(CONFIG_VIEW)
    return con


def run_query(sql: str, root: Path) -> tuple[list[str], list[tuple[Any, ...]]]:
    """(column names, rows) of `sql` over the store at `root`; LogscopeError with DuckDB's
    message when the query fails. A damaged Parquet file is left out (and named on stderr)."""
    if not (root / "runs").is_dir():
        raise LogscopeError(f"no store at {root} (logscope analyze --store {root} RUNS fills one)")
    duckdb = _duckdb()
    try:
        return _execute(connect(root), sql)
    except duckdb.Error as exc:
        damaged = _damaged_files(root)
        if not damaged:
            raise LogscopeError(f"query failed: {exc}") from None
        for path in sorted(damaged):
            err_console.print(f"logscope: left out a damaged file: {path}", highlight=False)
        try:
            return _execute(connect(root, frozenset(damaged)), sql)
        except duckdb.Error as again:
            raise LogscopeError(f"query failed: {again}") from None


def _execute(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    try:
        rel = con.sql(sql)
        if rel is None:  # a statement without a result (SET, CREATE, COPY ...)
            return [], []
        return list(rel.columns), rel.fetchall()
    finally:
        con.close()


def _damaged_files(root: Path) -> set[Path]:
    """The store's Parquet files whose footer cannot be read."""
    import polars as pl

    from logscope.schemas import DAMAGE

    bad = set()
    for name in VIEW_FILES.values():
        for path in (root / "runs").glob(f"run_id=*/{name}"):
            try:
                pl.read_parquet_schema(path)
            except DAMAGE:
                bad.add(path)
    return bad


def _duck_type(dtype: Any) -> str:
    """The DuckDB type of a polars one (a class or an instance; None: VARCHAR)."""
    import polars as pl

    if dtype is None or dtype == pl.Utf8:
        return "VARCHAR"
    if isinstance(dtype, pl.List):
        return _duck_type(dtype.inner) + "[]"
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMPTZ" if dtype.time_zone else "TIMESTAMP"
    known = {pl.Int64: "BIGINT", pl.Float64: "DOUBLE", pl.Boolean: "BOOLEAN"}
    return next(name for t, name in known.items() if dtype == t)


def _empty_select(schema: dict[str, Any]) -> str:
    """`SELECT` of no rows with the columns of `schema` (a store with no such files yet)."""
    cols = ", ".join(f"CAST(NULL AS {_duck_type(t)}) AS {n}" for n, t in schema.items())
    return f"SELECT {cols} WHERE false"


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sql_list(paths: list[Path]) -> str:
    return "[" + ", ".join(_sql_text(str(p)) for p in paths) + "]"


# ---- output -------------------------------------------------------------------------------------
def plain(value: Any) -> Any:
    """A JSON value for a DuckDB one: times as ISO 8601, decimals as floats, NaN as null."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)  # UUID, intervals ...


def cell(value: Any) -> str:
    """The text of a value in a table, CSV or Markdown cell (lists and structs as JSON)."""
    value = plain(value)
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def to_json(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    """`{"schema", "columns", "rows": [{column: value}]}`."""
    body = {
        "schema": SCHEMA,
        "columns": columns,
        "rows": [dict(zip(columns, (plain(v) for v in row), strict=True)) for row in rows],
    }
    return json.dumps(body, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def to_csv(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_csv_cell(v) for v in row])
    return buf.getvalue()


def _csv_cell(value: Any) -> str:
    """Floats in full precision (a table cell rounds them), else as `cell`."""
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return cell(value)


def to_markdown(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    def esc(text: str) -> str:
        return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(c) for c in columns) + " |"]
    lines.append("|" + "---|" * len(columns))
    lines += ["| " + " | ".join(esc(cell(v)) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _rich_table(columns: list[str], rows: list[tuple[Any, ...]]) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(show_lines=False, caption=f"{len(rows):,} row{'s' if len(rows) != 1 else ''}")
    for name, sample in zip(columns, rows[0] if rows else [None] * len(columns), strict=True):
        numeric = isinstance(sample, int | float | decimal.Decimal) and not isinstance(sample, bool)
        table.add_column(name, justify="right" if numeric else "left", overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell(v)) for v in row))
    return table
