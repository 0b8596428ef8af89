"""Collections held off while `analyze` loads its code (logscope.gc_hold), and only then."""

from __future__ import annotations

import gc
from pathlib import Path

from typer.testing import CliRunner

from logscope import gc_hold
from logscope.analyze import analyze_paths
from logscope.cli.main import app

LOG = Path(__file__).resolve().parent.parent / "fixtures" / "verl_tuned.log"


def test_held_until_loaded_then_frozen_and_afterwards_as_before() -> None:
    assert gc.isenabled()
    with gc_hold.held():
        assert not gc.isenabled()
        gc_hold.loaded()
        assert gc.isenabled() and gc.get_freeze_count() > 0
        gc_hold.loaded()  # once only
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()
    try:
        with gc_hold.held():
            pass
        assert not gc.isenabled()  # the caller's choice is kept
    finally:
        gc.enable()


def test_a_library_call_leaves_the_collector_alone(tmp_path) -> None:
    gc.disable()
    try:
        analyze_paths([LOG], store_dir=tmp_path)
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()
    analyze_paths([LOG], store_dir=tmp_path / "2")
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_the_cli_collects_again_once_the_pipeline_is_loaded(tmp_path, monkeypatch) -> None:
    seen: list[tuple[bool, bool]] = []
    loaded = gc_hold.loaded

    def spy() -> None:
        before = gc.isenabled()
        loaded()
        seen.append((before, gc.isenabled() and gc.get_freeze_count() > 0))

    monkeypatch.setattr(gc_hold, "loaded", spy)
    args = ["analyze", str(LOG), "--store", str(tmp_path), "--format", "json", "--fail-on", "never"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert seen == [(False, True)]  # held while loading, then frozen and collecting
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_the_console_entry_point_leaves_shutdown_nothing_to_walk_again(tmp_path) -> None:
    """After the command, `main()` freezes what is alive: interpreter shutdown does not walk
    it again (what an `atexit` handler, which runs before that, sees)."""
    import subprocess
    import sys

    child = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count()))\n"
        f"sys.argv = ['logscope', 'analyze', {str(LOG)!r}, '--store', {str(tmp_path)!r},\n"
        "            '--format', 'json', '--fail-on', 'never']\n"
        "from logscope.cli.main import main\n"
        "main()\n"
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    frozen = int(out.stdout.strip().splitlines()[-1].split(":")[1])
    assert frozen > 10_000  # the modules, the run, the report: everything the command left
