"""Small builders shared by tests (no fixtures magic: plain functions)."""

from __future__ import annotations

import numpy as np
import polars as pl

from logscope.model import ConfigSegment, Run, Source
from logscope.schemas import METRICS_SCHEMA


def make_run(
    series: dict[str, np.ndarray | list[float]],
    steps: np.ndarray | None = None,
    config: dict | None = None,
    run_id: str = "test-run",
    meta: dict | None = None,
) -> Run:
    """A Run from {metric: values}; all series share `steps` (default 1..n)."""
    n = max(len(v) for v in series.values()) if series else 0
    if steps is None:
        steps = np.arange(1, n + 1)
    frames = [
        pl.DataFrame(
            {
                "step": np.asarray(steps[: len(v)], dtype=np.int64),
                "metric": [name] * len(v),
                "value": np.asarray(v, dtype=np.float64),
                "wall_time": [None] * len(v),
            },
            schema=METRICS_SCHEMA,
        )
        for name, v in series.items()
    ]
    metrics = pl.concat(frames) if frames else pl.DataFrame(schema=METRICS_SCHEMA)
    return Run(
        id=run_id,
        source=Source("synthetic", "<test>"),
        meta=dict(meta or {}),
        config_segments=[ConfigSegment(0, config)] if config is not None else [],
        metrics=metrics,
    )


def block_texts(blocks: list[dict], kind: str) -> list[str]:
    """Every text object of `kind` (mrkdwn or plain_text) in Block Kit blocks."""
    out: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if node.get("type") == kind and isinstance(node.get("text"), str):
                out.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(blocks)
    return out
