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


#: The day each verl series was first tagged (volcengine/verl's git tags: v0.1 … v0.7.0); no
#: later series was tagged by KNOWN_UNTIL, the newest commit read.
FIRST_RELEASED: tuple[tuple[str, str], ...] = (
    ("0.1", "2024-12-12"),
    ("0.2", "2025-02-15"),
    ("0.3", "2025-03-25"),
    ("0.4", "2025-06-06"),
    ("0.5", "2025-07-23"),
    ("0.6", "2025-10-15"),
    ("0.7", "2026-01-05"),
)
KNOWN_UNTIL = ("0.8", "2026-01-29")


def newest_on(day: str | None) -> str | None:
    """The newest verl series a log written on `day` (YYYY-MM-DD) can come from: the series
    main was developing then (the first tagged after it), None when unknown or too late."""
    if not day:
        return None
    for series, released in (*FIRST_RELEASED, KNOWN_UNTIL):
        if day < released:
            return series
    return None


def cap(guess: str | None, newest: str | None) -> str | None:
    """A guessed range (`0.5-0.7`) without the series newer than `newest` (`0.5-0.6`). A guess
    whose oldest is newer than `newest` stays as it is: its keys outweigh a clock."""
    if guess is None or newest is None or "-" not in guess:
        return guess
    low, high = guess.split("-", 1)
    if low == newest:
        return low
    if at_least(high, newest) and not at_least(low, newest):
        return f"{low}-{newest}"
    return guess
