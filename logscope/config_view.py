"""A verl config as the config rules read it (`ConfigView`), and one rule violation (`Hit`).

Unset keys take verl's defaults (per version where they differ) through `verl_config.effective`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from logscope import verl_config
from logscope.model import Advice, Severity


@dataclass
class Hit:
    """One rule violation, before it becomes a Finding (the rule adds code/name/step)."""

    severity: Severity
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    advice: list[Advice] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    title: str | None = None
    #: the failure this hit predicts (`a CUDA OOM in the update`), when it predicts one: on a log
    #: whose config got through enough training steps without failing, it was not observed
    predicts: str | None = None


@dataclass
class ConfigView:
    """A config as the rules read it.

    `explicit`: the dotted keys the user set (a command or YAML); None for a full config dump
    from a log, where every key is present. `preflight`: the run has not started yet, so verl's
    own start-up checks are worth repeating (on a log that ran, verl already passed them).
    """

    config: dict[str, Any]
    version: str | None = None
    explicit: frozenset[str] | None = None
    preflight: bool = True

    def get(self, key: str) -> Any:
        """The key's value; verl's default when unset on a command/YAML. A full dump from a log
        is complete, so a key absent there did not exist in that verl version: None."""
        if self.explicit is None and not verl_config.has(self.config, key):
            return None
        return verl_config.effective(self.config, key, self.version)[0]

    def num(self, key: str) -> float | None:
        return as_number(self.get(key))

    def int_(self, key: str) -> int | None:
        value = self.num(key)
        return int(value) if value is not None and value == int(value) else None

    def flag(self, key: str) -> bool:
        value = self.get(key)
        if isinstance(value, str):
            return value.strip().lower() == "true"
        return bool(value)

    def is_set(self, key: str) -> bool:
        if self.explicit is not None:
            return key in self.explicit
        return verl_config.has(self.config, key) and verl_config.get(self.config, key) is not None

    def model_size(self) -> float | None:
        return verl_config.model_size_b(self.config)

    def n_gpus(self) -> int | None:
        return verl_config.n_gpus(self.config)

    def advice(
        self, key: str, suggested: Any, rationale: str, source: str, prefix: str = ""
    ) -> Advice:
        """Advice to set `key` to `suggested`, with a ready Hydra override."""
        current = self.get(key)
        return Advice(
            parameter=key,
            current=current,
            suggested=suggested,
            override=prefix + verl_config.override(key, suggested),
            rationale=rationale,
            source=source,
        )


def as_number(value: Any) -> float | int | None:
    """A finite number from a config value (None for strings like `$VAR`, bools, null)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return value if math.isfinite(value) else None
    try:
        out = float(str(value))
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def fmt(value: Any) -> str:
    """A number as a user would type it (16, 0.0005, 98,304)."""
    if isinstance(value, float) and value == int(value) and abs(value) < 1e15:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
