"""The metric registry: what each verl metric key family means, as data (`data/metrics.toml`).

One entry per key family (verl 0.1 – 0.10): its names and fnmatch patterns, renames across
versions, concept, meaning, unit, versions and trainers, the healthy ranges known for it, what a
NaN means, and its traps. The tables detectors read are views of it: `logscope.aliases.ALIASES`
and `LOSS_LIKE_PREFIXES`, `logscope.health.REFERENCES` and `TRAPS`. `logscope explain` and
docs/metrics.md show it.

    from logscope.metric_registry import lookup
    lookup("rollout_corr/chi2_token").meaning
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

Range = tuple[float | None, float | None]


@dataclass(frozen=True)
class Rename:
    """The same quantity under another name (`old` in older versions or other docs)."""

    old: str
    new: str
    note: str = ""


@dataclass(frozen=True)
class RangeNote:
    """A healthy range known for one key of a family, as text, with its source."""

    key: str
    healthy: str
    source: str


@dataclass(frozen=True)
class MetricEntry:
    """One metric key family."""

    id: str
    concept: str
    meaning: str
    unit: str
    versions: str
    source: str
    keys: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    trainers: tuple[str, ...] = ()
    renames: tuple[Rename, ...] = ()
    ranges: tuple[RangeNote, ...] = ()
    finite: tuple[str, ...] = ()  # prefixes that must stay finite (LS001)
    nan: str = ""  # "divergence" | "empty selection" | "" (not said)
    traps: tuple[str, ...] = ()

    def matches(self, key: str) -> bool:
        return key in self.keys or any(fnmatch.fnmatchcase(key, p) for p in self.patterns)

    def names(self) -> tuple[str, ...]:
        """Its exact names, then its patterns."""
        return self.keys + self.patterns


@dataclass(frozen=True)
class ReferenceData:
    """A judged healthy range of a concept and what to do beyond it (`logscope.health.Reference`
    is it with its source cited)."""

    key: str
    label: str
    concept: str  # a key of logscope.aliases.ALIASES
    unit: str
    healthy: Range = (None, None)
    by_algorithm: dict[str, Range] = field(default_factory=dict)
    alarm_low: float | None = None  # below: a finding from one step
    alarm_high: float | None = None  # above: a finding from one step
    rule: str = ""
    source: str = ""

    def healthy_range(self, algorithm: str | None = None) -> Range:
        return self.by_algorithm.get(algorithm or "", self.healthy)


@dataclass(frozen=True)
class TrapData:
    """A value that does not mean what it says: metrics matching `pattern` (fnmatch) when `when`
    holds get `verdict` instead of a range judgement (`logscope.health.Trap` is it with its
    source cited)."""

    pattern: str
    when: str  # a key of logscope.health._CONDITIONS
    verdict: str
    meaning: str
    source: str
    note: str = ""  # the meaning in a few words, for the health table


@dataclass(frozen=True)
class Registry:
    entries: tuple[MetricEntry, ...]
    concepts: dict[str, tuple[str, ...]]  # concept → metric names, newest verl naming first
    references: tuple[ReferenceData, ...]
    traps: tuple[TrapData, ...]

    def entry(self, id: str) -> MetricEntry:
        for e in self.entries:
            if e.id == id:
                return e
        raise KeyError(id)

    def lookup(self, key: str) -> MetricEntry | None:
        """The entry of `key`: the one naming it exactly, else the one whose matching pattern is
        the most specific (the longest text before its first wildcard); None when unknown."""
        best: tuple[int, int, MetricEntry] | None = None
        for i, e in enumerate(self.entries):
            if key in e.keys:
                return e
            for p in e.patterns:
                if fnmatch.fnmatchcase(key, p):
                    rank = (len(p.split("*", 1)[0]), -i)
                    if best is None or rank > best[:2]:
                        best = (*rank, e)
        return best[2] if best else None

    def known(self, key: str) -> bool:
        return self.lookup(key) is not None

    def all_names(self) -> list[str]:
        """Every exact name and pattern (for close matches of an unknown key)."""
        return [n for e in self.entries for n in e.names()]

    def concepts_of(self, entry: MetricEntry) -> tuple[str, ...]:
        """The concepts (keys of `concepts`) with a name that is `entry`'s, its own first."""
        found = [entry.concept] if entry.concept in self.concepts else []
        for concept, names in self.concepts.items():
            if concept not in found and any(self.lookup(n) is entry for n in names):
                found.append(concept)
        return tuple(found)

    def references_of(self, entry: MetricEntry) -> tuple[ReferenceData, ...]:
        """The judged ranges of `entry`'s concepts."""
        concepts = self.concepts_of(entry)
        return tuple(r for r in self.references if r.concept in concepts)

    def traps_of(self, entry: MetricEntry) -> tuple[TrapData, ...]:
        """The value traps whose pattern is specific to `entry` (not the catch-all ones)."""
        return tuple(
            t
            for t in self.traps
            if t.pattern != "*" and any(fnmatch.fnmatchcase(n, t.pattern) for n in entry.names())
        )

    def loss_like_prefixes(self) -> tuple[str, ...]:
        return tuple(p for e in self.entries for p in e.finite)


def _range(value: dict[str, float] | None) -> Range:
    if not value:
        return (None, None)
    unknown = set(value) - {"low", "high"}
    if unknown:
        raise ValueError(f"metrics.toml: a range has only low/high, not {sorted(unknown)}")
    low, high = value.get("low"), value.get("high")
    return (None if low is None else float(low), None if high is None else float(high))


def _entry(raw: dict[str, Any]) -> MetricEntry:
    data = dict(raw)
    for name in ("keys", "patterns", "trainers", "finite", "traps"):
        data[name] = tuple(data.get(name, ()))
    data["renames"] = tuple(Rename(**r) for r in data.get("renames", ()))
    data["ranges"] = tuple(RangeNote(**r) for r in data.get("ranges", ()))
    return MetricEntry(**data)


def _reference(raw: dict[str, Any]) -> ReferenceData:
    data = dict(raw)
    data["healthy"] = _range(data.get("healthy"))
    data["by_algorithm"] = {k: _range(v) for k, v in data.get("by_algorithm", {}).items()}
    for name in ("alarm_low", "alarm_high"):
        if data.get(name) is not None:
            data[name] = float(data[name])
    return ReferenceData(**data)


def parse(text: str) -> Registry:
    """A registry from the text of a metrics.toml."""
    raw = tomllib.loads(text)
    return Registry(
        entries=tuple(_entry(e) for e in raw.get("metric", ())),
        concepts={k: tuple(v) for k, v in raw.get("concepts", {}).items()},
        references=tuple(_reference(r) for r in raw.get("reference", ())),
        traps=tuple(TrapData(**t) for t in raw.get("trap", ())),
    )


@cache
def load() -> Registry:
    """The registry shipped with logscope (`logscope/data/metrics.toml`), read once."""
    text = resources.files("logscope").joinpath("data/metrics.toml").read_text(encoding="utf-8")
    return parse(text)


def unknown(names: Iterable[str]) -> list[str]:
    """The metric names the registry does not know, sorted."""
    registry = load()
    return sorted(n for n in set(names) if not registry.known(n))


def lookup(key: str) -> MetricEntry | None:
    """The registry entry of a metric key (exact or by pattern), None when unknown."""
    return load().lookup(key)
