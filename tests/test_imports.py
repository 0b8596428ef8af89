"""Small runs stay fast: a command imports what it runs, not what the other commands need."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "fixtures" / "verl_tuned.log"

#: modules only other commands need (tail's live display, rules' catalogue, query's DuckDB,
#: the dashboard's Streamlit and plotly)
OTHERS = (
    "logscope.cli.tail",
    "logscope.cli.rules",
    "logscope.cli.query",
    "logscope.cli.dashboard",
    "logscope.cli.explain",
    "logscope.catalogue",
    "rich.live",
    "duckdb",
    "streamlit",
    "plotly",
)


def _modules_after(args: list[str]) -> list[str]:
    """The modules loaded once `logscope ARGS` ran in a fresh interpreter."""
    code = (
        "import json, sys\n"
        f"sys.argv = ['logscope', *{args!r}]\n"
        "from logscope.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_analyze_imports_neither_other_commands_nor_their_libraries(tmp_path: Path) -> None:
    args = ["analyze", str(LOG), "-f", "json", "-o", str(tmp_path / "r.json")]
    loaded = _modules_after([*args, "--store", str(tmp_path / "store")])
    assert "logscope.cli.analyze" in loaded
    assert [m for m in OTHERS if m in loaded] == []
    assert "detect_secrets" not in loaded  # nothing in this log needs the redactor's patterns
    # the detectors' statistics come from scipy.special and ruptures' compiled core only, and a
    # short run like this one needs no scipy at all (running medians are numpy's, binomial
    # tails only where a rise is large enough to test)
    heavy = ("scipy.stats", "scipy.optimize", "scipy.signal", "scipy.spatial", "ruptures")
    assert [m for m in heavy if m in loaded] == []
    assert [m for m in loaded if m == "scipy" or m.startswith("scipy.")] == []
    assert json.loads((tmp_path / "r.json").read_text())["findings"]  # it did analyse


def test_a_cached_analysis_imports_no_detector_library(tmp_path: Path) -> None:
    args = ["analyze", str(LOG), "-f", "json", "-o", str(tmp_path / "r.json")]
    args += ["--store", str(tmp_path / "store")]
    first = _modules_after(args)
    assert "ruptures.detection._detection.ekcpd" in first  # the detectors ran
    again = _modules_after(args)
    assert [
        m
        for m in again
        if m.startswith(("ruptures", "scipy", "logscope.detectors", "rich.console"))
    ] == []


def test_help_still_lists_every_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "logscope", "--help"], capture_output=True, text=True, check=True
    ).stdout
    from logscope.cli.main import COMMANDS

    for name in COMMANDS:
        assert name in out
