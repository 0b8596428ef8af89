"""Shared helpers for the LS1xx (KL and policy) detector tests."""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from logscope.detector import Detector
from logscope.model import Finding, Run, severity_at_least

HYDRA_OVERRIDE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+=[^\s=]+$")


def rounded(run: Run, decimals: int = 3) -> Run:
    """The run as a verl ≤ 0.4 console log prints it: every value `.3f`-rounded."""
    metrics = run.metrics.with_columns(pl.col("value").round(decimals))
    meta = {**run.meta, "value_resolution": 0.5 * 10**-decimals}
    return Run(run.id, run.source, meta, run.config_segments, metrics, run.events)


def with_gaps(
    run: Run, seed: int = 0, drop: float = 0.1, nan: float = 0.05, keep_step: int | None = None
) -> Run:
    """Irregular logging: drop a share of (step, metric) rows and turn some values into NaN
    (except at `keep_step`, e.g. the one step an isolated spike lives on)."""
    rng = np.random.default_rng(seed)
    m = run.metrics
    spared = (m.get_column("step") == keep_step).to_numpy()
    keep = (rng.random(m.height) >= drop) | spared
    m = m.filter(pl.Series(keep))
    spared = (m.get_column("step") == keep_step).to_numpy()
    make_nan = pl.Series((rng.random(m.height) < nan) & ~spared)
    m = m.with_columns(
        pl.when(make_nan).then(float("nan")).otherwise(pl.col("value")).alias("value")
    )
    return Run(run.id, run.source, run.meta, run.config_segments, m, run.events)


def truncated(run: Run, n_steps: int) -> Run:
    """Only the first `n_steps` logged steps."""
    first = run.steps[: max(n_steps, 1)]
    m = run.metrics.filter(pl.col("step").is_in(first.tolist()))
    return Run(run.id, run.source, run.meta, run.config_segments, m, run.events)


def warnings_of(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if severity_at_least(f.severity, "warning")]


def nearest(findings: list[Finding], name: str, step: int) -> Finding | None:
    """The finding called `name` closest to `step` (None when there is none)."""
    same = [f for f in findings if f.name == name and f.step is not None]
    return min(same, key=lambda f: abs(f.step - step)) if same else None


#: How a cited article or verl source reads once resolved (`logscope.sources.cite`).
CITED = ('Article "', "verl source: https://")


def check_finding_shape(det: Detector, f: Finding) -> None:
    """What every LS1xx finding must carry."""
    assert f.code == det.code and f.name == det.name
    assert f.step is not None and f.end_step is not None and f.end_step >= f.step
    assert f.metric and f.message and any(ch.isdigit() for ch in f.message)
    assert f.evidence and f.references
    assert all(r.startswith(CITED) for r in f.references), f.references
    for a in f.advice:
        assert a.parameter.count(".") >= 1
        assert a.source.startswith(CITED), a.source
        if a.override is not None:
            assert HYDRA_OVERRIDE.match(a.override), a.override
            assert a.override.startswith(a.parameter + "=")
