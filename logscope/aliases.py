"""Metric concepts detectors need, mapped to the names verl used across versions.

Metric names stay verl's own; this table only says which name to look for. The first name
present in a run wins (newest verl naming first). The data is the metric registry's
(`logscope/data/metrics.toml`, read by `logscope.metric_registry`); these are views of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logscope.metric_registry import load as _load_registry

if TYPE_CHECKING:
    from logscope.model import Run

_registry = _load_registry()

#: concept → the names verl used for it, newest first (the registry's [concepts] table)
ALIASES: dict[str, tuple[str, ...]] = dict(_registry.concepts)

# Metric families that must stay finite (non-finite-metric). Prefix match on verl names: the
# `finite` prefixes of the registry's entries, in its order.
LOSS_LIKE_PREFIXES: tuple[str, ...] = _registry.loss_like_prefixes()

VALIDATION_PREFIXES: tuple[str, ...] = ("val-core/", "val/test_score/", "val-aux/")


def resolve(run: Run, concept: str) -> str | None:
    """The metric name this run uses for `concept` (in its framework's profile), or None."""
    from logscope.frameworks import profile_of

    profile = profile_of(run)
    if profile.is_verl:
        for name in ALIASES[concept]:
            if run.has_metric(name):
                return name
        return None
    return profile.resolve(run, concept)


def name_of(run: Run, concept: str) -> str:
    """The name `run` logs `concept` under; else its framework's first name for it, else the
    concept (for messages about a metric that may be absent)."""
    from logscope.frameworks import profile_of

    names = profile_of(run).names(concept)
    return resolve(run, concept) or (names[0] if names else concept)


def pair_name(run: Run, first: str, second: str) -> str:
    """Two concepts' names for a message: `critic/advantages/max and /min` when they share a
    folder, else both in full."""
    a, b = name_of(run, first), name_of(run, second)
    folder = a.rpartition("/")[0]
    if folder and b.rpartition("/")[0] == folder:
        return f"{a} and /{b.rpartition('/')[2]}"
    return f"{a} and {b}"


def validation_metrics(run: Run) -> list[str]:
    """Validation score metrics, core ones first (`val-core/…` then `val/test_score/…`)."""
    names = run.metric_names
    core = [n for n in names if n.startswith("val-core/") and "/mean@" in n]
    if not core:
        core = [n for n in names if n.startswith("val-core/")]
    legacy = [n for n in names if n.startswith("val/test_score/")]
    return core + legacy
