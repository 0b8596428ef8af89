"""TensorBoard reader, on event files written at test time by tensorboard's EventFileWriter."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("tensorboard")

from logscope.ingest import tensorboard

try:
    from _ingest_writers import write_tensorboard
except ImportError:  # tests/ imported as a package
    from tests._ingest_writers import write_tensorboard


def _rows(n: int, offset: float = 0.0):
    for s in range(1, n + 1):
        yield (
            s,
            {
                "actor/pg_loss": 0.01 * s + offset,
                "actor/entropy": 1.0 / s,
                "critic/score/mean": float("nan") if s == 3 else 0.5 + offset,
            },
        )


def test_directory_with_two_runs(tmp_path):
    root = tmp_path / "tensorboard_log"
    write_tensorboard(root / "proj" / "exp_a", _rows(20))
    write_tensorboard(root / "proj" / "exp_b", _rows(15, offset=1.0))
    assert tensorboard.sniff(root)
    runs = sorted(tensorboard.read(root), key=lambda r: r.meta["run_name"])
    assert [r.meta["run_name"] for r in runs] == ["proj/exp_a", "proj/exp_b"]
    assert len({r.id for r in runs}) == 2  # content hashes, the store's keys
    a, b = runs
    assert a.source.kind == "tensorboard"
    assert a.meta["project"] == "proj" and a.meta["experiment"] == "exp_a"
    steps, values = a.series("actor/pg_loss")
    assert list(steps) == list(range(1, 21))
    # simple_value is float32: equal to float32 rounding, not to the float64 we logged
    np.testing.assert_allclose(values, [0.01 * s for s in range(1, 21)], rtol=1e-6)
    assert values[4] == float(np.float32(0.05))
    _, scores = a.series("critic/score/mean")
    assert math.isnan(scores[2]) and not math.isnan(scores[3])
    assert b.n_steps == 15
    assert b.series("critic/score/mean")[1][0] == pytest.approx(1.5)
    # wall time comes from the event
    _, walls = a.wall_times()
    assert walls[0] == pytest.approx(1_700_000_001.0)
    assert a.parse_stats.skipped_lines == 0


def test_single_event_file(tmp_path):
    logdir = write_tensorboard(tmp_path / "run", _rows(5))
    (event_file,) = logdir.glob("events.out.tfevents.*")
    assert tensorboard.sniff(event_file)
    (run,) = tensorboard.read(event_file)
    assert run.n_steps == 5 and set(run.metric_names) == {
        "actor/pg_loss",
        "actor/entropy",
        "critic/score/mean",
    }


@pytest.mark.parametrize("style", ["tf2", "tensor-mixed"])
def test_tf2_tensor_scalars(tmp_path, style):
    """TF2 writes scalars as 0-d tensors (tensor_content; float_val from Python writers) with the
    scalars plugin metadata only on a tag's first event; later events carry no metadata."""
    write_tensorboard(tmp_path / "tf2", _rows(12), style=style)
    (run,) = tensorboard.read(tmp_path / "tf2")
    for name in ("actor/pg_loss", "actor/entropy", "critic/score/mean"):
        steps, _ = run.series(name)
        assert list(steps) == list(range(1, 13)), name
    _, ent = run.series("actor/entropy")  # tensor_content
    np.testing.assert_allclose(ent, [1.0 / s for s in range(1, 13)], rtol=1e-6)
    _, loss = run.series("actor/pg_loss")  # float_val in the mixed style
    np.testing.assert_allclose(loss, [0.01 * s for s in range(1, 13)], rtol=1e-6)


def test_restart_files_merged_latest_wins(tmp_path):
    logdir = tmp_path / "tensorboard_log" / "p" / "e"
    write_tensorboard(logdir, _rows(10))
    # a resumed run re-logs steps 8..12 in a second event file, created later
    import time

    time.sleep(1.1)  # event file names carry the creation second
    write_tensorboard(logdir, ((s, {"actor/pg_loss": -1.0}) for s in range(8, 13)))
    (run,) = tensorboard.read(tmp_path / "tensorboard_log")
    steps, values = run.series("actor/pg_loss")
    assert list(steps) == list(range(1, 13))
    assert list(values[7:]) == [-1.0] * 5
    assert values[6] == pytest.approx(0.07)
    assert any("2 event files merged" in n for n in run.parse_stats.notes)


def test_corrupted_crc_keeps_what_precedes(tmp_path):
    logdir = write_tensorboard(tmp_path / "good", _rows(30))
    (src,) = logdir.glob("events.out.tfevents.*")
    data = bytearray(src.read_bytes())
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    # flip a byte in the middle of the file: one record's data CRC fails, the rest is read
    middle = len(data) // 2
    data[middle] ^= 0xFF
    (bad_dir / src.name).write_bytes(bytes(data))
    (run,) = tensorboard.read(bad_dir)
    assert run.parse_stats.skipped_lines == 1
    assert run.parse_stats.notes and "CRC" in run.parse_stats.notes[0]
    assert 28 <= run.n_steps <= 30  # at most the step of the damaged record is lost
    # truncated copy: the cut-off last record is reported, everything before it kept
    cut_dir = tmp_path / "cut"
    cut_dir.mkdir()
    (cut_dir / src.name).write_bytes(src.read_bytes()[:-10])
    (run,) = tensorboard.read(cut_dir)
    assert run.parse_stats.skipped_lines == 1
    assert "cut off" in run.parse_stats.notes[0]
    assert run.n_steps == 29


def test_config_from_text_summary(tmp_path):
    cfg = (
        "actor_rollout_ref:\n  actor:\n    kl_loss_coef: 0.001\nalgorithm:\n  adv_estimator: grpo\n"
    )
    write_tensorboard(tmp_path / "r", _rows(3), text={"config": cfg})
    (run,) = tensorboard.read(tmp_path / "r")
    assert run.config_value("actor_rollout_ref.actor.kl_loss_coef") == 0.001
    assert run.meta["algorithm"] == "grpo"
    # the text summary is not a metric
    assert all("text_summary" not in m for m in run.metric_names)


def test_not_tensorboard(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    assert not tensorboard.sniff(tmp_path)
    assert not tensorboard.sniff(tmp_path / "notes.txt")


def test_pure_python_crc_fallback_agrees(tmp_path, monkeypatch):
    """Without a C crc32c package, tensorboard's own pure-Python crc32c is used: same result."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c as slow

    logdir = write_tensorboard(tmp_path / "r", _rows(8))
    (fast,) = tensorboard.read(logdir)
    monkeypatch.setattr(tensorboard, "_crc32c_function", lambda: slow)
    (slow_run,) = tensorboard.read(logdir)
    assert slow_run.metrics.equals(fast.metrics, null_equal=True)
    assert slow_run.parse_stats.skipped_lines == 0


def test_missing_tensorboard_gives_install_hint(tmp_path, monkeypatch):
    import builtins

    from logscope.exceptions import OptionalDependencyMissing

    logdir = write_tensorboard(tmp_path / "r", _rows(2))
    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name == "tensorboard" or name.startswith("tensorboard."):
            raise ImportError("no tensorboard")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    with pytest.raises(OptionalDependencyMissing, match=r"pip install 'logscope\[tensorboard\]'"):
        tensorboard.read(logdir)


def test_config_from_hparams(tmp_path):
    """hparams written by tensorboard's own hparams API (as torch's add_hparams does) → config."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.hparams import summary_v2 as hp
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    logdir = write_tensorboard(tmp_path / "r", _rows(3))
    writer = EventFileWriter(str(logdir), filename_suffix=".hparams")
    summary = hp.hparams_pb(
        {
            "actor_rollout_ref.actor.kl_loss_coef": 0.001,
            "actor_rollout_ref.actor.use_kl_loss": True,
            "algorithm.adv_estimator": "grpo",
        }
    )
    writer.add_event(event_pb2.Event(wall_time=1.0, step=0, summary=summary))
    writer.close()
    (run,) = tensorboard.read(logdir)
    assert run.config_value("actor_rollout_ref.actor.kl_loss_coef") == pytest.approx(0.001)
    assert run.config_value("actor_rollout_ref.actor.use_kl_loss") is True
    assert run.meta["algorithm"] == "grpo"
    assert run.n_steps == 3


def test_record_that_is_not_an_event(tmp_path):
    """A record with valid CRCs whose payload is not an Event is counted and skipped."""
    from tensorboard.summary.writer.record_writer import RecordWriter

    logdir = write_tensorboard(tmp_path / "r", _rows(4))
    with (logdir / "events.out.tfevents.9999999999.host.1.0").open("wb") as fh:
        writer = RecordWriter(fh)
        writer.write(b"\x0a\xff\x01")  # a length-delimited field cut short
        writer.flush()
    (run,) = tensorboard.read(logdir)
    assert run.n_steps == 4
    assert run.parse_stats.skipped_lines == 1
    assert any("not TensorBoard events" in n for n in run.parse_stats.notes)


def test_tensorboardx_writer_with_hparams(tmp_path):
    """tensorboardX's SummaryWriter (the torch-free twin of torch's, which verl uses): scalars,
    a text summary, and add_hparams, which writes to a `<run>/<time.time()>/` subfolder that
    belongs to the same run."""
    tbx = pytest.importorskip("tensorboardX")
    writer = tbx.SummaryWriter(str(tmp_path / "tensorboard_log" / "gsm8k" / "qwen"))
    for s in range(1, 11):
        writer.add_scalar("actor/pg_loss", 0.1 * s, s)
        writer.add_scalar("actor/grad_norm", float("nan") if s == 5 else 1.0, s)
    writer.add_text("val/generations", "Q: 1+1? A: 2", 10)
    writer.add_hparams(
        {"actor_rollout_ref.actor.kl_loss_coef": 0.001, "algorithm.adv_estimator": "grpo"},
        {"hparam/final_score": 0.5},
    )
    writer.close()
    (run,) = tensorboard.read(tmp_path / "tensorboard_log")
    assert run.meta["project"] == "gsm8k" and run.meta["experiment"] == "qwen"
    assert run.config_value("actor_rollout_ref.actor.kl_loss_coef") == pytest.approx(0.001)
    assert run.meta["algorithm"] == "grpo"
    steps, values = run.series("actor/pg_loss")
    assert list(steps) == list(range(1, 11))
    np.testing.assert_allclose(values, [0.1 * s for s in range(1, 11)], rtol=1e-6)
    assert math.isnan(run.series("actor/grad_norm")[1][4])
    assert not any("text_summary" in m for m in run.metric_names)
