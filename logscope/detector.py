"""The detector contract. Concrete detectors live in `logscope.detectors` (the detectors/ folder).

A detector is a small class with a stable `code` (e.g. LS201) and `name` slug (e.g. `kl-jump`),
the metric concepts it reads, explicit keyword parameters with defaults, and
`detect(run) -> list[Finding]`. Its docstring is its catalogue entry with the sections in
`CATALOGUE_SECTIONS`, in that order.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from logscope.aliases import resolve
from logscope.model import Finding, Run, Severity

CATALOGUE_SECTIONS: tuple[str, ...] = (
    "What it detects",
    "Why it matters",
    "Example",
    "Advice",
    "Known false positives",
    "References",
)


class Detector(ABC):
    """Base class for every diagnosis."""

    code: ClassVar[str]
    name: ClassVar[str]
    title: ClassVar[str]
    #: metric concepts (keys of `logscope.aliases.ALIASES`); the detector is skipped when
    #: none resolves in a run. Empty for detectors that read events or config only.
    concepts: ClassVar[tuple[str, ...]] = ()
    #: "metrics" (per-step series), "events" (log text), or "config" (config segments)
    reads: ClassVar[str] = "metrics"
    default_severity: ClassVar[Severity] = "warning"
    groups: ClassVar[tuple[str, ...]] = ()

    def skip_reason(self, run: Run) -> str | None:
        """Why this detector cannot run on `run` (None when it can)."""
        if (
            self.reads == "metrics"
            and self.concepts
            and not any(resolve(run, c) for c in self.concepts)
        ):
            from logscope.aliases import ALIASES

            wanted = sorted({n for c in self.concepts for n in ALIASES[c]})
            return "none of its metrics is in the run (" + ", ".join(wanted) + ")"
        if self.reads == "config" and not run.config_segments:
            return "the run has no config"
        return None

    @abstractmethod
    def detect(self, run: Run) -> list[Finding]:
        """Findings on `run`. Never raises on short, NaN-padded or irregular series."""

    def finding(self, **fields: Any) -> Finding:
        """A Finding pre-filled with this detector's code, name, title and severity."""
        fields.setdefault("severity", self.default_severity)
        fields.setdefault("title", self.title)
        return Finding(code=self.code, name=self.name, **fields)

    def params(self) -> dict[str, Any]:
        """The detector's keyword parameters and their current values."""
        sig = inspect.signature(type(self).__init__)
        return {p: getattr(self, p) for p in sig.parameters if p != "self" and hasattr(self, p)}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"

    @classmethod
    def catalogue_entry(cls) -> dict[str, str]:
        """The docstring split into its catalogue sections."""
        return parse_sections(inspect.getdoc(cls) or "")


def parse_sections(doc: str) -> dict[str, str]:
    """Split a docstring into {section title: text}; the first paragraph is 'Summary'."""
    sections: dict[str, str] = {}
    current = "Summary"
    lines: list[str] = []
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.endswith(":") and stripped[:-1] in CATALOGUE_SECTIONS:
            sections[current] = "\n".join(lines).strip()
            current, lines = stripped[:-1], []
        else:
            lines.append(line)
    sections[current] = "\n".join(lines).strip()
    return sections
