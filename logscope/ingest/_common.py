"""Helpers shared by the structured readers (TensorBoard, W&B, JSONL, CSV).

Readers collect columns in plain Python lists and build the polars frame once here.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from logscope.exceptions import IngestError
from logscope.model import Run, Source
from logscope.schemas import METRICS_SCHEMA, empty_metrics
from logscope.verl_config import set_path

NAN = float("nan")


def new_hasher() -> Any:
    """xxh3-64 when xxhash is installed (as the console reader uses), else blake2b-64."""
    try:
        import xxhash

        return xxhash.xxh3_64()
    except ImportError:  # pragma: no cover - xxhash is optional
        return hashlib.blake2b(digest_size=8)


def content_hash(*chunks: bytes | str) -> str:
    """A run id from the bytes it was read from (16 hex digits, like the console reader's): the
    store keys runs by it, so two different files never share an id and a re-read one keeps it."""
    digest = new_hasher()
    for chunk in chunks:
        digest.update(chunk.encode("utf-8", "surrogateescape") if isinstance(chunk, str) else chunk)
        digest.update(b"\0")
    return digest.hexdigest()


def read_bytes(path: Path) -> bytes:
    """The bytes of `path` as stored; IngestError naming it when it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise IngestError(str(path), f"cannot read: {exc.strerror or exc}") from exc


def new_run(kind: str, path: Path, raw: bytes | str) -> Run:
    """An empty Run of `kind` for `path`, its id from what it is read from (`content_hash`)."""
    return Run(id=content_hash(kind, raw), source=Source(kind, str(path)))


def to_float(value: Any) -> float | None:
    """A logged value as float: None/NaN-ish → NaN; bool/number → float; anything else → None
    (meaning: not a scalar, skip it)."""
    if value is None:
        return NAN
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return math.copysign(math.inf, value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("nan", "-nan"):
            return NAN
        if low in ("inf", "infinity", "+inf", "+infinity"):
            return math.inf
        if low in ("-inf", "-infinity"):
            return -math.inf
    return None


def metrics_frame(
    steps: Sequence[int],
    metrics: Sequence[str],
    values: Sequence[float],
    wall_times: Sequence[float | None] | None = None,
) -> pl.DataFrame:
    """The canonical long frame from columns; a (step, metric) seen twice keeps the later value."""
    if not steps:
        return empty_metrics()
    columns = {
        "step": pl.Series("step", steps, dtype=pl.Int64),
        "metric": pl.Series("metric", metrics, dtype=pl.Utf8),
        "value": pl.Series("value", values, dtype=pl.Float64, strict=False),
        "wall_time": pl.Series(
            "wall_time",
            wall_times if wall_times is not None else [None] * len(steps),
            dtype=pl.Float64,
            strict=False,
        ),
    }
    frame = pl.DataFrame(columns).with_columns(pl.col("value").fill_null(NAN))
    return (
        frame.unique(subset=["step", "metric"], keep="last", maintain_order=True)
        .sort(["step", "metric"])
        .select(list(METRICS_SCHEMA))
    )


def nest_dotted(flat: dict[str, Any]) -> dict[str, Any]:
    """{"a.b": 1} → {"a": {"b": 1}} (keys without dots stay as they are)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        set_path(out, str(key).split("."), value)
    return out


def meta_from_config(config: dict[str, Any]) -> dict[str, Any]:
    """project, experiment and algorithm as far as a verl config tells them."""
    meta: dict[str, Any] = {}
    trainer = config.get("trainer") if isinstance(config, dict) else None
    if isinstance(trainer, dict):
        if trainer.get("project_name"):
            meta["project"] = str(trainer["project_name"])
        if trainer.get("experiment_name"):
            meta["experiment"] = str(trainer["experiment_name"])
    algorithm = config.get("algorithm") if isinstance(config, dict) else None
    if isinstance(algorithm, dict) and algorithm.get("adv_estimator"):
        estimator = str(algorithm["adv_estimator"])
        meta["algorithm"] = "ppo" if estimator == "gae" else estimator
    return meta


def version_and_algorithm(
    names: set[str], config: dict[str, Any], *, before_08: str | None
) -> dict[str, Any]:
    """`verl_version` and `algorithm` meta, by the console reader's rules where it is installed.

    Structured sources print no numbers, so the `.3f` evidence that dates 0.1-0.4 console logs is
    missing: the console rules' "0.5-0.7" answer becomes `before_08` (what the source allows,
    e.g. "0.6-0.7" for the file logger, which appeared in 0.6).
    """
    meta: dict[str, Any] = {}
    try:
        from logscope.ingest.console_run import _algorithm, guess_version
    except ImportError:  # pragma: no cover - console reader absent
        meta.update({k: v for k, v in meta_from_config(config).items() if k == "algorithm"})
        return meta
    version = guess_version(names, {}, config) if names else None
    meta["verl_version"] = before_08 if version == "0.5-0.7" else version
    meta.update(_algorithm(names, config))
    return meta


def first_step(frame: pl.DataFrame) -> int:
    """The first step with a metric, 0 for an empty frame."""
    if frame.height == 0:
        return 0
    return int(frame.get_column("step").min())
