"""Shared pytest setup: the hypothesis profiles, and the dashboard tests' seeded store.

CI (`HYPOTHESIS_PROFILE=ci`, exported by .ci/run, or any `CI` environment) draws the same
examples on every run, so a red CI is a real failure that the next run shows again, not the
luck of a seed. Locally the default profile keeps exploring new examples (and remembers the
failing ones in .hypothesis/).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, max_examples=100, print_blob=True
)
settings.register_profile("dev", deadline=None)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A store of hand-built runs with known faults, so assertions can name steps (see
    tests/dashboard_data.py); one per test module, as modules add runs to it. With the ids
    [baseline, tuned]."""
    from tests.dashboard_data import seed_store

    root = tmp_path_factory.mktemp("store")
    return root, seed_store(root, prefer_fixtures=False)
