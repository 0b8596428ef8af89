"""The polars schemas of logscope's frames and Parquet tables.

Kept apart from `logscope.model` and `logscope.store` because their types are polars': whatever
builds or reads a frame imports this module (and polars, ~0.3 s), while a cached `analyze`,
which shows a stored report, imports neither.
"""

from __future__ import annotations

import polars as pl

#: the long metrics frame of a `Run`: one row per (step, metric)
METRICS_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64,
    "metric": pl.Utf8,
    "value": pl.Float64,
    "wall_time": pl.Float64,
}


def empty_metrics() -> pl.DataFrame:
    """An empty long metrics frame with the canonical schema."""
    return pl.DataFrame(schema=METRICS_SCHEMA)


#: what reading a damaged store entry raises (it then reads as absent and is rebuilt)
DAMAGE = (
    OSError,
    ValueError,
    KeyError,
    TypeError,
    AttributeError,
    pl.exceptions.PolarsError,
    pl.exceptions.PanicException,  # a BaseException: polars' Rust side gave up on the bytes
)


#: one row per finding: the report schema's finding fields (docs/report.schema.json), with
#: `evidence` and `advice` as JSON text (their values have any type), plus where it belongs
FINDINGS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.Utf8(),
    "position": pl.Int64(),  # index in the report's findings (incidents list these)
    "code": pl.Utf8(),
    "name": pl.Utf8(),
    "severity": pl.Utf8(),
    "title": pl.Utf8(),
    "message": pl.Utf8(),
    "metric": pl.Utf8(),
    "step": pl.Int64(),
    "end_step": pl.Int64(),
    "evidence": pl.Utf8(),  # JSON object
    "advice": pl.Utf8(),  # JSON array of advice objects
    "references": pl.List(pl.Utf8()),
    "incident": pl.Utf8(),  # id of the incident holding it (null: none)
    "settings": pl.Utf8(),  # fingerprint of the settings that made it (`Settings.fingerprint`)
}

_UTC = pl.Datetime("us", "UTC")
#: the run's row of the `runs` table
RUNS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.Utf8(),
    "source_kind": pl.Utf8(),
    "source_path": pl.Utf8(),
    "project": pl.Utf8(),
    "experiment": pl.Utf8(),
    "algorithm": pl.Utf8(),
    "framework": pl.Utf8(),
    "verl_version": pl.Utf8(),
    "n_steps": pl.Int64(),
    "first_step": pl.Int64(),
    "last_step": pl.Int64(),
    "wall_time_s": pl.Float64(),
    "n_gpus": pl.Int64(),
    "worst_severity": pl.Utf8(),  # null: no finding
    "findings": pl.Int64(),
    "diagnoses": pl.List(pl.Utf8()),  # finding names, worst first, each once
    "first_incident_step": pl.Int64(),
    "config_segments": pl.Int64(),
    "config": pl.Utf8(),  # JSON: the resolved config in force at the last step
    "source_modified_at": _UTC,  # the input's modification time (a folder: its newest file)
    "analysed_at": _UTC,
    "settings": pl.Utf8(),
    "logscope_version": pl.Utf8(),
}


def tables_digest() -> str:
    """A digest of the fleet tables' schemas (`store.TABLES_FORMAT` is pinned to it)."""
    import hashlib

    text = repr(sorted(FINDINGS_SCHEMA.items())) + repr(sorted(RUNS_SCHEMA.items()))
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()
