"""Store safety: atomic writes, concurrent writers, writers killed mid-write, damaged entries.

The store is a cache: whatever happens to it, `load()` must return what parsing the source
returns, and repair the entry so the next `load()` reads Parquet again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

import logscope.ingest
from logscope import store as store_mod
from logscope.store import Store, source_key
from tests._reliability import logscope_argv, subprocess_env


@pytest.fixture(scope="module")
def log_file(tmp_path_factory) -> Path:
    from logscope.synthetic import Injection, simulate, write_console_log

    sim = simulate(n_steps=400, seed=3, inject=[Injection("kl-jump", 250)])
    path = tmp_path_factory.mktemp("storelog") / "train.log"
    write_console_log(sim, path)
    return path


@pytest.fixture(scope="module")
def parsed(log_file):
    (run,) = logscope.ingest.load(log_file)
    return run


class IngestSpy:
    """Counts how often the store had to parse the source (a cache miss)."""

    def __init__(self, monkeypatch, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail
        real = logscope.ingest.load

        def spy(*args, **kwargs):
            self.calls += 1
            if self.fail:
                raise AssertionError("parsed the source although the store holds it")
            return real(*args, **kwargs)

        monkeypatch.setattr(logscope.ingest, "load", spy)


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob(".*.tmp")]


def _same_run(a, b) -> None:
    assert a.id == b.id
    assert_frame_equal(a.metrics, b.metrics)
    assert a.events == b.events
    assert [s.first_step for s in a.config_segments] == [s.first_step for s in b.config_segments]


# ---- atomic writes ---------------------------------------------------------------------------


def test_every_store_file_is_renamed_into_place(tmp_path, monkeypatch, log_file, parsed) -> None:
    renames: list[tuple[Path, Path]] = []
    real_replace = os.replace

    def recording_replace(src, dst):
        renames.append((Path(src), Path(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(store_mod.os, "replace", recording_replace)
    store = Store(tmp_path / "store")
    (run,) = store.load(log_file)
    _same_run(run, parsed)
    written = {p for p in (tmp_path / "store").rglob("*") if p.is_file()}
    assert written == {dst for _, dst in renames}
    for src, dst in renames:
        assert src.parent == dst.parent and src.name.startswith(f".{dst.name}.")
        assert not src.exists()
    assert _temp_files(tmp_path / "store") == []


class _FullDisk:
    """`os.fdopen` of a file on a full disk: every write fails with ENOSPC."""

    def __init__(self, fd: int, mode: str = "rb") -> None:
        store_mod.os.close(fd)

    def __enter__(self) -> _FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def write(self, data: bytes) -> int:
        raise OSError(28, "No space left on device")


def test_a_failed_write_keeps_the_old_entry_and_no_temp(tmp_path, monkeypatch, parsed) -> None:
    store = Store(tmp_path / "store")
    store.put_run(parsed)
    before = (store.run_dir(parsed.id) / "run.json").read_bytes()

    monkeypatch.setattr(store_mod.os, "fdopen", _FullDisk)
    with pytest.raises(OSError):
        store.put_run(parsed)
    assert (store.run_dir(parsed.id) / "run.json").read_bytes() == before
    assert _temp_files(tmp_path / "store") == []
    got = store.get_run(parsed.id)
    assert got is not None
    _same_run(got, parsed)


def test_a_full_disk_does_not_stop_the_analysis(tmp_path, monkeypatch, log_file) -> None:
    monkeypatch.setattr(store_mod.os, "fdopen", _FullDisk)
    (run,) = Store(tmp_path / "store").load(log_file)
    assert any("not cached" in n and "No space" in n for n in run.parse_stats.notes)
    assert _temp_files(tmp_path / "store") == []


# ---- two analyze processes at once ----------------------------------------------------------


def test_two_concurrent_analyze_processes(tmp_path, monkeypatch, log_file, parsed) -> None:
    root = tmp_path / "store"
    argv = logscope_argv("analyze", str(log_file), "-f", "json", "--store", str(root))
    argv += ["--fail-on", "never", "--only", "non-finite-metric"]  # parsing is what races
    env = subprocess_env()
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()
    a, b = (json.loads(out) for out, _ in outputs)
    assert a == b
    # one consistent entry
    store = Store(root)
    assert store.run_ids() == [parsed.id]
    assert len(list((root / "sources").glob("*.json"))) == 1
    assert _temp_files(root) == []
    key = source_key(log_file)
    assert key is not None
    (cached,) = store.get_source(key) or [None]
    assert cached is not None
    _same_run(cached, parsed)
    # a third run reads it from the cache
    IngestSpy(monkeypatch, fail=True)
    (third,) = Store(root).load(log_file)
    _same_run(third, parsed)


# ---- a writer killed mid-write --------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import os, sys, time
    import logscope.store as store
    stall_at = int(sys.argv[3])
    real_fdopen, calls = os.fdopen, [0]

    class Stall:
        def __init__(self, fh):
            self.fh = fh
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            return self.fh.__exit__(*exc)
        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            self.fh.flush()
            print("STALLED", flush=True)
            time.sleep(600)
        def __getattr__(self, name):
            return getattr(self.fh, name)

    def fdopen(fd, *args, **kwargs):
        fh = real_fdopen(fd, *args, **kwargs)
        calls[0] += 1
        return Stall(fh) if calls[0] == stall_at else fh

    store.os.fdopen = fdopen
    store.Store(sys.argv[2]).load(sys.argv[1])
    print("DONE", flush=True)
    """
)

# The writes of one single-run source, in order: metrics.parquet, run.json, the source index.
PHASES = {1: "metrics.parquet", 2: "run.json", 3: "source index"}


@pytest.mark.parametrize("stall_at", sorted(PHASES), ids=list(PHASES.values()))
def test_writer_killed_mid_write(tmp_path, monkeypatch, log_file, parsed, stall_at) -> None:
    root = tmp_path / "store"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(log_file), str(root), str(stall_at)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
    )
    try:
        line = child.stdout.readline()
        assert line.strip() == b"STALLED", (line, child.stderr.read() if line == b"" else "")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    orphans = _temp_files(root)
    assert len(orphans) == 1  # the half-written temporary file
    store = Store(root)
    key = source_key(log_file)
    assert key is not None and store.get_source(key) is None  # partial entry: a cache miss
    expected_complete = [parsed.id] if stall_at == 3 else []
    assert store.run_ids() == expected_complete
    # the next run ignores the partial entry, parses again, repairs it and sweeps the orphan
    spy = IngestSpy(monkeypatch)
    (run,) = store.load(log_file)
    _same_run(run, parsed)
    assert spy.calls == 1
    assert _temp_files(root) == []
    spy.fail = True
    (again,) = Store(root).load(log_file)
    _same_run(again, parsed)


# ---- damaged entries are detected and rebuilt ------------------------------------------------


def _truncate_parquet(root: Path, run_id: str) -> None:
    path = root / "runs" / f"run_id={run_id}" / "metrics.parquet"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _empty_parquet(root: Path, run_id: str) -> None:
    (root / "runs" / f"run_id={run_id}" / "metrics.parquet").write_bytes(b"")


def _garble_run_json(root: Path, run_id: str) -> None:
    path = root / "runs" / f"run_id={run_id}" / "run.json"
    data = bytearray(path.read_bytes())
    for i in range(0, len(data), 7):
        data[i] = (data[i] * 31 + 7) % 256
    path.write_bytes(bytes(data))


def _wrong_shape_run_json(root: Path, run_id: str) -> None:
    (root / "runs" / f"run_id={run_id}" / "run.json").write_text('{"id": 1, "events": 3}')


def _delete_run_json(root: Path, run_id: str) -> None:
    (root / "runs" / f"run_id={run_id}" / "run.json").unlink()


def _garble_index(root: Path, run_id: str) -> None:
    (index,) = (root / "sources").glob("*.json")
    index.write_text("[1, 2]")


DAMAGE = {
    "truncated-parquet": _truncate_parquet,
    "empty-parquet": _empty_parquet,
    "garbled-run-json": _garble_run_json,
    "wrong-shape-run-json": _wrong_shape_run_json,
    "missing-run-json": _delete_run_json,
    "garbled-source-index": _garble_index,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_entry_is_rebuilt_from_the_source(
    tmp_path, monkeypatch, log_file, parsed, damage
) -> None:
    root = tmp_path / "store"
    Store(root).load(log_file)
    DAMAGE[damage](root, parsed.id)
    spy = IngestSpy(monkeypatch)
    (run,) = Store(root).load(log_file)
    assert spy.calls == 1, "the damaged entry was used instead of re-parsing"
    _same_run(run, parsed)
    # rewritten: the entry reads back, and the next load does not parse
    fixed = Store(root).get_run(parsed.id)
    assert fixed is not None
    _same_run(fixed, parsed)
    spy.fail = True
    (again,) = Store(root).load(log_file)
    _same_run(again, parsed)


def test_stale_temp_files_of_live_writers_are_kept(tmp_path) -> None:
    """The sweep removes only orphans: a temp of a live process (this one) stays."""
    folder = tmp_path / "runs" / "run_id=x"
    folder.mkdir(parents=True)
    from logscope.atomic import HOST as host

    mine = folder / f".run.json.{host}.{os.getpid()}.abc123.tmp"
    other_host = folder / ".run.json.otherhost.1.abc123.tmp"
    dead = folder / f".run.json.{host}.999999999.abc123.tmp"
    for p in (mine, other_host, dead):
        p.write_bytes(b"partial")
    old = folder / ".run.json.otherhost.2.abc123.tmp"
    old.write_bytes(b"partial")
    os.utime(old, (0, 0))
    assert store_mod.sweep_temp_files(folder) == 2
    assert mine.exists() and other_host.exists()
    assert not dead.exists() and not old.exists()


@pytest.mark.parametrize(
    "damage", ["truncated-parquet", "garbled-run-json", "wrong-shape-run-json"]
)
def test_damage_behind_cached_findings_is_rebuilt(tmp_path, log_file, parsed, damage) -> None:
    """`analyze` keeps findings per input too; a damaged run entry under them is still noticed:
    the report is the same as before the damage, and the entry is rewritten."""
    from tests._reliability import cli

    root = tmp_path / "store"
    args = ("analyze", str(log_file), "-f", "json", "--store", str(root), "--fail-on", "never")
    first = cli(*args)
    assert first.exit_code == 0, first.stderr
    assert cli(*args).json() == first.json()  # from the cached findings
    DAMAGE[damage](root, parsed.id)
    again = cli(*args)
    assert again.exception is None and again.exit_code == 0, again.stderr
    assert again.json()["findings"] == first.json()["findings"]
    assert again.json()["run"]["steps"] == first.json()["run"]["steps"]
    fixed = Store(root).get_run(parsed.id)
    assert fixed is not None
    _same_run(fixed, parsed)
