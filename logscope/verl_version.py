"""verl versions as a small type: one release (`0.4.1`, `v0.9`, `0.3.0.post1`) or the range a
reader guessed from a log (`0.5-0.7`). Runs keep the text in `meta["verl_version"]`; code that
compares versions parses it here, never with its own regex.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Numbers = tuple[int, int, int]

_PART = re.compile(r"v?(\d+(?:\.\d+){0,2})")


def _numbers(text: str) -> tuple[Numbers, int]:
    """((major, minor, patch) zero-padded, how many parts were written)."""
    parts = [int(p) for p in text.split(".")]
    major, minor, patch = [*parts, 0, 0, 0][:3]
    return (major, minor, patch), len(parts)


@dataclass(frozen=True)
class VerlVersion:
    """A verl version, or the range a reader guessed (`0.5-0.7`).

    `low` is (major, minor, patch) of the version, or of the range's oldest version, and
    `precision` how many of its parts were written (`0.5` → 2: any 0.5.x). A range compares by
    its oldest version: logscope then assumes the older behaviour, which every version of the
    range still accepts.
    """

    text: str
    low: Numbers
    precision: int

    @classmethod
    def parse(cls, text: object) -> VerlVersion | None:
        """The version in `text` (None for None, "", or text without a version number)."""
        if text is None:
            return None
        raw = str(text).strip()
        first = _PART.search(raw.split("post")[0].split("dev")[0])
        if first is None:
            return None
        low, precision = _numbers(first.group(1))
        return cls(raw, low, precision)

    def at_least(self, other: str) -> bool:
        """This version (a range: its oldest) is `other` or later."""
        return self.low >= _numbers(other)[0]

    def in_series(self, series: str) -> bool:
        """This version (a range: its oldest) is a release of `series` (`0.9` → 0.9.x)."""
        numbers, written = _numbers(series)
        return self.low[:written] == numbers[:written]

    def __str__(self) -> str:
        return self.text


def parse(text: object) -> VerlVersion | None:
    """`VerlVersion.parse(text)`."""
    return VerlVersion.parse(text)


def at_least(text: object, other: str) -> bool:
    """Whether the version in `text` is `other` or later (False when there is none)."""
    version = VerlVersion.parse(text)
    return version is not None and version.at_least(other)


def older_than(text: object, other: str) -> bool:
    """Whether the version in `text` is older than `other` (False when there is none)."""
    version = VerlVersion.parse(text)
    return version is not None and not version.at_least(other)
