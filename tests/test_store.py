"""The store: round-trip, content-hash cache, Hive layout, damaged entries ignored."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from polars.testing import assert_frame_equal

from logscope.model import Event
from logscope.store import Store, source_key
from tests.helpers import make_run


def _run(run_id: str = "abc"):
    run = make_run(
        {"actor/pg_loss": np.array([0.1, np.nan, 0.3]), "critic/score/mean": [0.5, 0.6, 0.7]},
        config={"trainer": {"project_name": "p"}},
        run_id=run_id,
        meta={"verl_version": "0.5-0.7"},
    )
    run.events.append(Event(3, 2, "traceback", "Traceback ...\nValueError: x"))
    run.parse_stats.skip(7, "step:3 - garbled")
    return run


def test_run_round_trips(tmp_path) -> None:
    store = Store(tmp_path)
    run = _run()
    store.put_run(run)
    back = store.get_run("abc")
    assert back is not None
    assert_frame_equal(back.metrics, run.metrics)
    assert back.config_segments[0].config == run.config_segments[0].config
    assert back.events == run.events
    assert back.parse_stats.skipped_examples == [(7, "step:3 - garbled")]
    assert back.meta == run.meta
    assert (tmp_path / "runs" / "run_id=abc" / "metrics.parquet").is_file()


def test_hive_scan_over_runs(tmp_path) -> None:
    store = Store(tmp_path)
    store.put_run(_run("r1"))
    store.put_run(_run("r2"))
    frame = store.scan_metrics().collect()
    assert set(frame.get_column("run_id").unique().to_list()) == {"r1", "r2"}
    assert frame.height == 12
    assert store.run_ids() == ["r1", "r2"]


def test_damaged_entry_is_ignored(tmp_path) -> None:
    store = Store(tmp_path)
    store.put_run(_run())
    (tmp_path / "runs" / "run_id=abc" / "metrics.parquet").write_bytes(b"not parquet")
    assert store.get_run("abc") is None


def test_source_key_follows_content(tmp_path) -> None:
    f = tmp_path / "a.log"
    f.write_text("step:1 - x:1\n")
    k1 = source_key(f)
    f.write_text("step:1 - x:2\n")
    assert source_key(f) != k1
    f.write_text("step:1 - x:1\n")
    assert source_key(f) == k1


def test_metrics_schema_is_kept(tmp_path) -> None:
    store = Store(tmp_path)
    store.put_run(_run())
    back = store.get_run("abc")
    assert back is not None and back.metrics.schema["step"] == pl.Int64


def test_every_writer_renames_a_fsynced_temporary_into_place(tmp_path, monkeypatch) -> None:
    """The outbox, tail's state file and the store all write through `write_atomic`."""
    import os

    from logscope.alerts import Outbox, status_alert
    from logscope.tail import TailSession

    synced, renamed = [], []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: renamed.append(b) or real_replace(a, b))
    outbox = Outbox(tmp_path / "outbox")
    outbox.put(status_alert("stalled", "run", 3, "no step", "error"))
    log = tmp_path / "train.log"
    log.write_text("step:1 - critic/score/mean:0.5\n")
    TailSession(log, state_file=tmp_path / "state.json").save_state()
    alert_file, state_file = (Path(p) for p in renamed)
    assert alert_file.parent == tmp_path / "outbox" and alert_file.name.startswith("stalled_3")
    assert state_file == tmp_path / "state.json"
    assert len(synced) >= 2  # each file's bytes before its rename
    assert not [p for p in tmp_path.rglob("*.tmp")]
