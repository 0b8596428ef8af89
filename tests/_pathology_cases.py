"""Shared builders for the reward/critic/system detector tests: simulated runs, rounding, gaps."""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from logscope.model import Finding, Run
from logscope.synthetic import Injection, simulate

#: `key=value` with a dotted verl key and a non-empty Hydra value
HYDRA_OVERRIDE = re.compile(r"^[a-z_]+(\.[a-z_0-9]+)+=(\S+)$")


def sim_run(
    kind: str | None,
    n: int,
    algorithm: str = "grpo",
    seed: int = 0,
    at: float = 0.5,
    magnitude: float = 1.0,
    noise: float = 1.0,
    version: str = "0.5",
) -> tuple[Run, int | None]:
    """A simulated run with `kind` injected at `at`·n (none when kind is None), and the truth."""
    inject = [] if kind is None else [Injection(kind, max(30, int(at * n)), magnitude)]
    sim = simulate(
        n_steps=n, algorithm=algorithm, seed=seed, noise=noise, inject=inject, version=version
    )
    truth = sim.truth[0].step if sim.truth else None
    return sim.to_run(), truth


def rounded(run: Run, decimals: int = 3) -> Run:
    """The run as a `.3f`-era log prints it (values rounded, resolution in meta)."""
    run.metrics = run.metrics.with_columns(pl.col("value").round(decimals))
    run.meta["value_resolution"] = 0.5 * 10**-decimals
    return run


def with_gaps(run: Run, fraction: float = 0.05, seed: int = 0) -> Run:
    """NaN for `fraction` of every metric's values and a few steps missing altogether."""
    rng = np.random.default_rng(seed)
    frame = run.metrics
    nan_mask = rng.random(frame.height) < fraction
    steps = np.unique(frame.get_column("step").to_numpy())
    dropped = rng.choice(steps, size=max(1, len(steps) // 50), replace=False)
    frame = frame.with_columns(
        pl.when(pl.Series(nan_mask)).then(float("nan")).otherwise(pl.col("value")).alias("value")
    ).filter(~pl.col("step").is_in(dropped.tolist()))
    run.metrics = frame
    return run


def every_other_step(run: Run) -> Run:
    """Irregular logging: only odd steps, plus a random sprinkle of even ones."""
    frame = run.metrics
    steps, names = frame.get_column("step"), frame.get_column("metric")
    # validation keeps its own schedule (every test_freq steps)
    keep = (steps % 2 == 1) | (steps % 14 == 0) | names.str.starts_with("val")
    run.metrics = frame.filter(keep)
    return run


def named(findings: list[Finding], name: str) -> list[Finding]:
    return [f for f in findings if f.name == name]


def loud(findings: list[Finding]) -> list[Finding]:
    """Findings at warning or above."""
    return [f for f in findings if f.severity != "info"]


def check_advice(finding: Finding, config_known: bool = True) -> None:
    """Every advice names a real dotted key; overrides are valid Hydra; values come from config."""
    assert finding.advice, finding
    for advice in finding.advice:
        assert "." in advice.parameter
        assert advice.rationale and advice.source
        assert advice.source.startswith(('Article "', "verl source: https://")), advice.source
        if advice.override is not None:
            assert HYDRA_OVERRIDE.match(advice.override), advice.override
            assert advice.override.startswith(advice.parameter + "=")
        if not config_known:
            # nothing is read from a config that is not there; computed values need it
            assert advice.current is None
            assert advice.override is None or advice.suggested in (True, False)
