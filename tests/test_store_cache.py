"""The store's shortcuts: source keys remembered by file status, findings kept per input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import logscope.analyze as analyze_mod
from logscope.analyze import analyze_paths
from logscope.report import reports_to_json
from logscope.store import Store, StoredRun, source_key


@pytest.fixture(scope="module")
def log_file(tmp_path_factory) -> Path:
    from logscope.synthetic import Injection, simulate, write_console_log

    sim = simulate(n_steps=300, seed=5, inject=[Injection("kl-jump", 200)])
    path = tmp_path_factory.mktemp("cachelog") / "train.log"
    write_console_log(sim, path)
    return path


def test_key_is_the_content_hash_and_is_remembered(tmp_path, monkeypatch, log_file) -> None:
    store = Store(tmp_path / "store")
    assert store.key(log_file) == source_key(log_file)
    import logscope.store as store_mod

    def no_hashing(path):
        raise AssertionError("hashed an unchanged file again")

    monkeypatch.setattr(store_mod, "source_key", no_hashing)
    assert Store(tmp_path / "store").key(log_file) is not None


def test_a_changed_file_gets_a_new_key(tmp_path, log_file) -> None:
    copy = tmp_path / "copy.log"
    copy.write_bytes(log_file.read_bytes())
    store = Store(tmp_path / "store")
    first = store.key(copy)
    with copy.open("a") as fh:
        fh.write("one more line\n")
    assert store.key(copy) != first
    assert store.key(copy) == source_key(copy)


def test_second_analysis_reuses_findings_and_gives_the_same_report(
    tmp_path, monkeypatch, log_file
) -> None:
    first = analyze_paths([log_file], store_dir=tmp_path / "store")
    assert first[0].findings, "the injected KL jump should be found"

    def no_detectors(*args, **kwargs):
        raise AssertionError("ran the detectors on an unchanged input")

    monkeypatch.setattr(analyze_mod, "analyze_run", no_detectors)
    second = analyze_paths([log_file], store_dir=tmp_path / "store")
    assert json.loads(reports_to_json(second)) == json.loads(reports_to_json(first))
    run = second[0].run
    assert isinstance(run, StoredRun)
    assert run.metrics.height == first[0].run.metrics.height  # read on first use
    assert run.summary() == first[0].run.summary()


def test_a_cached_analyze_imports_neither_polars_nor_the_detectors(tmp_path, log_file) -> None:
    """A re-analysis of an unchanged file only shows the stored report: it reads JSON and file
    sizes, so it pays for no polars, numpy or detector import (the ≤ 0.4 s small-run target)."""
    import subprocess
    import sys

    store, out = tmp_path / "store", tmp_path / "report.json"
    args = ["analyze", str(log_file), "-f", "json", "-o", str(out), "--store", str(store)]
    args += ["--fail-on", "never"]
    first = subprocess.run([sys.executable, "-m", "logscope", *args], capture_output=True)
    assert first.returncode == 0, first.stderr
    report = out.read_bytes()
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['logscope', *{args!r}]\n"
        "try:\n    runpy.run_module('logscope', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "heavy = ('polars', 'numpy', 'pyarrow', 'logscope.detectors', 'logscope.metric_registry')\n"
        "print(sorted(m for m in sys.modules if m in heavy))\n"
    )
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "[]"
    assert out.read_bytes() == report


def test_tables_format_is_the_digest_of_the_table_schemas() -> None:
    """The cached path checks the fleet tables by tables.json, without reading their schema: a
    schema change must come with a new TABLES_FORMAT, or old tables would pass as current."""
    from logscope.schemas import tables_digest
    from logscope.store import TABLES_FORMAT

    assert TABLES_FORMAT == tables_digest()


def test_a_foreign_metrics_file_behind_cached_findings_is_damage(tmp_path, log_file) -> None:
    """Another (valid) Parquet file in place of a run's metrics has another size: the cached
    run reads as damaged and the source is read again."""
    import polars as pl

    store = Store(tmp_path / "store")
    (first,) = analyze_paths([log_file], store_dir=store.root)
    metrics = store.run_dir(first.run.id) / "metrics.parquet"
    pl.DataFrame({"x": [1.0, 2.0]}).write_parquet(metrics)
    assert store.get_lazy_run(first.run.id) is None
    (again,) = analyze_paths([log_file], store_dir=store.root)
    assert again.run.metrics.height == first.run.metrics.height
    assert store.get_lazy_run(first.run.id) is not None  # rewritten


def test_selection_and_code_changes_are_new_entries(tmp_path, log_file) -> None:
    store_dir = tmp_path / "store"
    everything = analyze_paths([log_file], store_dir=store_dir)
    only = analyze_paths([log_file], store_dir=store_dir, only=["LS001"])
    assert {f.code for f in only[0].findings} <= {"LS001"}
    assert len(everything[0].skipped) != len(only[0].skipped)
    # a detector module edited since: the kept findings are not reused
    analyze_mod._FINGERPRINT[:] = ["changed code"]
    try:
        calls = []
        real = analyze_mod.analyze_run

        def counting(*args, **kwargs):
            calls.append(1)
            return real(*args, **kwargs)

        analyze_mod.analyze_run = counting
        analyze_paths([log_file], store_dir=store_dir)
        assert calls
    finally:
        analyze_mod.analyze_run = real
        analyze_mod._FINGERPRINT.clear()


def test_damaged_results_are_a_miss(tmp_path, log_file) -> None:
    store_dir = tmp_path / "store"
    first = analyze_paths([log_file], store_dir=store_dir)
    for f in (store_dir / "results").glob("*.json"):
        f.write_text("{not json")
    again = analyze_paths([log_file], store_dir=store_dir)
    assert [f.key for f in again[0].findings] == [f.key for f in first[0].findings]
    assert os.listdir(store_dir / "results")


def test_saving_behind_the_analysis_still_notes_a_full_disk(
    tmp_path, monkeypatch, log_file
) -> None:
    import logscope.store as store_mod

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_mod, "write_atomic", disk_full)
    (report,) = analyze_paths([log_file], store_dir=tmp_path / "store")
    assert any("not cached" in n for n in report.run.parse_stats.notes)
    assert report.findings
    assert Store(tmp_path / "store").run_ids() == []


def test_a_copy_is_shown_under_the_path_the_user_gave(tmp_path, log_file) -> None:
    """Same bytes, another name: the cache entry is shared (content key) but the report, its
    JSON and the run read from the store name the copy, never the first file's path."""
    store_dir = tmp_path / "store"
    (first,) = analyze_paths([log_file], store_dir=store_dir)
    copy = tmp_path / "elsewhere" / "other.log"
    copy.parent.mkdir()
    copy.write_bytes(log_file.read_bytes())
    (again,) = analyze_paths([copy], store_dir=store_dir)  # findings from the cache
    assert again.run.id == first.run.id
    assert again.run.source.path == str(copy)
    data = json.loads(reports_to_json([again]))
    assert data["run"]["source"]["path"] == str(copy)
    (run,) = Store(store_dir).load(copy)
    assert run.source.path == str(copy)
    (original,) = Store(store_dir).load(log_file)
    assert original.source.path == str(log_file)


def test_runs_below_a_folder_move_with_the_folder() -> None:
    from logscope.model import Run, Source
    from logscope.store import relocate

    run = Run(id="r", source=Source("tensorboard", "tb/exp1/events.out.tfevents.1"))
    relocate(run, "tb", "/data/copy_of_tb/")
    assert run.source.path == "/data/copy_of_tb/exp1/events.out.tfevents.1"
    single = Run(id="s", source=Source("verl-console", "a.log"))
    relocate(single, "a.log", "b.log")
    assert single.source.path == "b.log"


def test_a_missing_path_never_hits_the_cache(tmp_path) -> None:
    """A missing path has no content: it must not hash like an empty folder and be served the
    cached entry of some empty input analysed before."""
    from logscope.exceptions import IngestError

    store_dir = tmp_path / "store"
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "empty.log").write_text("")
    analyze_paths([tmp_path / "empty.log"], store_dir=store_dir)
    assert source_key(tmp_path / "missing.log") is None
    with pytest.raises(IngestError, match="no such file"):
        Store(store_dir).load(tmp_path / "missing.log")
    (report,) = analyze_paths([tmp_path / "missing.log"], store_dir=store_dir)
    assert not report.readable and "no such file" in report.errors[0]
