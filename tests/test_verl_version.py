"""The verl version type: releases, guessed ranges and what comparisons mean for each."""

from __future__ import annotations

import pytest

from logscope import verl_version
from logscope.verl_version import VerlVersion


@pytest.mark.parametrize(
    ("text", "low", "precision"),
    [
        ("0.4.1", (0, 4, 1), 3),
        ("v0.9", (0, 9, 0), 2),
        ("0.3.0.post1", (0, 3, 0), 3),
        ("0.5-0.7", (0, 5, 0), 2),
        ("0.10", (0, 10, 0), 2),
        (" 0.8.0 ", (0, 8, 0), 3),
    ],
)
def test_parse_reads_the_oldest_version_and_how_much_was_written(text, low, precision):
    version = VerlVersion.parse(text)
    assert version is not None
    assert (version.low, version.precision, str(version)) == (low, precision, text.strip())


@pytest.mark.parametrize("text", [None, "", "unknown", "v"])
def test_no_version_number_is_none(text):
    assert VerlVersion.parse(text) is None
    assert not verl_version.at_least(text, "0.1")
    assert not verl_version.older_than(text, "9.0")


def test_minor_versions_compare_as_numbers_not_text():
    assert verl_version.at_least("0.10", "0.9")  # "0.10" < "0.9" as strings
    assert verl_version.older_than("0.9.1", "0.10")


def test_a_range_compares_by_its_oldest_version():
    assert verl_version.older_than("0.5-0.7", "0.6")
    assert not verl_version.at_least("0.3-0.8", "0.8")
    assert verl_version.at_least("0.5-0.7", "0.5")


def test_in_series_matches_every_patch_release_only():
    assert VerlVersion.parse("0.9.1").in_series("0.9")
    assert VerlVersion.parse("0.9").in_series("0.9")
    assert not VerlVersion.parse("0.10").in_series("0.1")
    assert not VerlVersion.parse("0.8.0").in_series("0.9")


@pytest.mark.parametrize(
    ("day", "newest"),
    [
        ("2024-11-30", "0.1"),
        ("2025-07-22", "0.5"),  # main before the 0.5.0 tag was developing 0.5
        ("2025-09-29", "0.6"),
        ("2026-01-10", "0.8"),
        ("2026-06-01", None),  # after what is known: no cap
        (None, None),
    ],
)
def test_newest_series_on_a_day(day, newest):
    assert verl_version.newest_on(day) == newest


@pytest.mark.parametrize(
    ("guess", "newest", "capped"),
    [
        ("0.5-0.7", "0.6", "0.5-0.6"),
        ("0.3-0.8", "0.5", "0.3-0.5"),
        ("0.6-0.7", "0.6", "0.6"),
        ("0.5-0.7", "0.8", "0.5-0.7"),  # nothing newer to cut
        ("0.8", "0.6", "0.8"),  # keys outweigh a clock
        ("0.5-0.7", None, "0.5-0.7"),
        (None, "0.6", None),
    ],
)
def test_a_guess_capped_by_the_newest_series(guess, newest, capped):
    assert verl_version.cap(guess, newest) == capped
