"""Simulated runs of other frameworks: a simulated verl run under another framework's names.

The dynamics (and the injected pathologies with their ground truth) are the verl simulator's;
each verl metric a detector reads through a concept is renamed to the name the framework's
profile gives that concept, and metrics the framework does not log are dropped. The config
becomes the framework's own parameters (`Profile.parameters`, flat), so advice can name
current values.

    sim = simulate(300, "grpo", seed=1, inject=[Injection("kl-jump", 150)])
    run = as_framework(sim, "trl", channel="train/")   # W&B/TB names: train/kl, ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from logscope.frameworks import get
from logscope.model import ConfigSegment, Run, Source

if TYPE_CHECKING:
    from logscope.frameworks import Profile
    from logscope.synthetic.simulate import SimRun

#: what a pattern's wildcard becomes in a simulated key (prime-rl nests env/agent names)
WILDCARD_NAME = "default"


def renames(profile: Profile, verl_names: list[str], channel: str = "") -> dict[str, str]:
    """{verl metric → the framework's name} for the verl metrics that have a counterpart.

    A verl metric is renamed through the first concept (in the verl profile's order) that names
    it and that the framework logs; the framework's name is its first one under `channel`
    (a prefix such as TRL's `train/`), a pattern filled with `WILDCARD_NAME`.
    """
    verl = get("verl")
    out: dict[str, str] = {}
    taken: set[str] = set()
    for concept, names in verl.concepts.items():
        targets = _channel_names(profile.names(concept), channel)
        if not targets:
            continue
        for name in names:
            if name in verl_names and name not in out and targets[0] not in taken:
                out[name] = targets[0]
                taken.add(targets[0])
                break
    return out


def _channel_names(names: tuple[str, ...], channel: str) -> list[str]:
    """The names that carry `channel` as their prefix (all of them when none does)."""
    with_channel = [n for n in names if channel and n.startswith(channel)]
    chosen = with_channel or [n for n in names if not channel or not n.startswith("train/")]
    return [_fill(n) for n in (chosen or list(names))]


def _fill(name: str) -> str:
    for wildcard in ("**", "*", "?"):
        name = name.replace(wildcard, WILDCARD_NAME)
    return name


def framework_config(profile: Profile, config: dict[str, Any]) -> dict[str, Any]:
    """The framework's own parameters with the values of their verl counterparts in `config`."""
    from logscope.verl_config import effective

    out: dict[str, Any] = {}
    for verl_key, parameter in profile.parameters.items():
        if not parameter.name:
            continue
        value, _ = effective(config, verl_key, None)
        if isinstance(value, bool) and parameter.inverted:
            value = not value
        if value is not None:
            out[parameter.name] = value
    return out


def as_framework(sim: SimRun, framework: str, channel: str = "") -> Run:
    """`sim` as a run of `framework` (source kind "synthetic-FRAMEWORK")."""
    profile = get(framework)
    base = sim.to_run()
    names = renames(profile, base.metric_names, channel)
    metrics = base.metrics.filter(pl.col("metric").is_in(list(names))).with_columns(
        pl.col("metric").replace_strict(names, return_dtype=pl.Utf8)
    )
    segments = [
        ConfigSegment(seg.first_step, framework_config(profile, seg.config))
        for seg in base.config_segments
    ]
    return Run(
        id=base.id.replace("synthetic-", f"synthetic-{framework}-", 1),
        source=Source(kind=f"synthetic-{framework}", path=base.source.path),
        meta={"framework": framework, "algorithm": base.meta.get("algorithm")},
        config_segments=segments,
        metrics=metrics,
        events=[],
    )
