"""W&B offline reader, on runs written at test time by the installed wandb SDK (WANDB_MODE=offline).

One real run per module (each wandb.init takes seconds); damaged copies are made from it.
"""

from __future__ import annotations

import math
import os
import shutil

import numpy as np
import pytest

pytest.importorskip("wandb")

from logscope.exceptions import IngestError
from logscope.ingest import wandb_offline

try:
    from _ingest_writers import write_wandb_offline
except ImportError:  # tests/ imported as a package
    from tests._ingest_writers import write_wandb_offline

N_STEPS = 150
CONFIG = {
    "data": {"train_batch_size": 64, "max_prompt_length": 512, "max_response_length": 1024},
    "actor_rollout_ref": {
        "actor": {"kl_loss_coef": 0.001, "use_kl_loss": True, "optim": {"lr": 1e-6}},
        "rollout": {"n": 8, "name": "vllm"},
        "model": {"path": "Qwen/Qwen2.5-0.5B-Instruct"},
    },
    "algorithm": {"adv_estimator": "grpo"},
    "trainer": {"project_name": "gsm8k", "experiment_name": "qwen-grpo", "n_gpus_per_node": 8},
}


def _value(step: int, k: int) -> float:
    if k == 1 and step in (40, 41):
        return float("nan")
    return round(math.sin(step / 7 + k) + k, 6)


METRICS = [f"actor/m{k}" for k in range(20)] + ["critic/score/mean", "response_length/mean"]


def _rows():
    for s in range(1, N_STEPS + 1):
        yield s, {name: _value(s, k) for k, name in enumerate(METRICS)}


@pytest.fixture(scope="module")
def wandb_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("wb")
    console = {s: [f"step:{s} - actor/m0:{_value(s, 0):.3f}"] for s in (1, 2, 3, 75)}
    console[75].append("WARNING: something odd happened")
    console[100] = [
        f"step:100 - actor/m0:{_value(100, 0)!r}",
        "Traceback (most recent call last):",
        '  File "verl/trainer/main_ppo.py", line 42, in main',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    ]
    folder = write_wandb_offline(
        root,
        _rows(),
        config=CONFIG,
        project="gsm8k",
        name="qwen-grpo",
        console=console,
        table_step=10,
    )
    (wandb_file,) = folder.glob("run-*.wandb")
    return root / "wandb", folder, wandb_file


def test_reads_history_config_console(wandb_run):
    _wandb_dir, folder, wandb_file = wandb_run
    assert wandb_offline.sniff(wandb_file) and wandb_offline.sniff(folder)
    (run,) = wandb_offline.read(wandb_file)
    assert run.source.kind == "wandb-offline"
    assert run.meta["project"] == "gsm8k" and run.meta["experiment"] == "qwen-grpo"
    assert run.meta["algorithm"] == "grpo" and run.meta["state"] == "finished"
    assert run.meta["wandb_version"]
    assert set(run.metric_names) == set(METRICS)  # the wandb.Table at step 10 is not a metric
    assert run.n_steps == N_STEPS
    for k, name in enumerate(METRICS[:3] + METRICS[-2:]):
        k = METRICS.index(name)
        steps, values = run.series(name)
        assert list(steps) == list(range(1, N_STEPS + 1))
        expected = np.array([_value(s, k) for s in steps])
        np.testing.assert_array_equal(np.isnan(values), np.isnan(expected))
        np.testing.assert_allclose(values[~np.isnan(values)], expected[~np.isnan(expected)])
    _, m1 = run.series("actor/m1")
    assert math.isnan(m1[39]) and math.isnan(m1[40]) and not math.isnan(m1[41])
    # config: verl's nested dict, as passed to wandb.init, without wandb's own _wandb key
    (segment,) = run.config_segments
    assert segment.first_step == 1
    assert segment.config == CONFIG
    assert run.config_value("actor_rollout_ref.actor.optim.lr") == 1e-6
    # wall time from _timestamp: present and non-decreasing
    _, walls = run.wall_times()
    assert len(walls) == N_STEPS and np.all(np.diff(walls) >= 0)
    # captured console output → events, classified as the console reader does, with the step
    # hint from the printed step lines
    warning = next(e for e in run.events if "something odd" in e.text)
    assert warning.step_hint == 75 and warning.kind == "warning"
    crash = next(e for e in run.events if "OutOfMemoryError" in e.text)
    assert crash.step_hint == 100 and crash.kind == "traceback"
    assert not any(e.text.startswith("step:") for e in run.events)  # step lines are not events
    assert run.parse_stats.skipped_lines == 0 and run.parse_stats.step_lines == N_STEPS
    # summary: the last logged values
    assert run.meta["wandb_summary"]["actor/m0"] == pytest.approx(_value(N_STEPS, 0))
    assert not any(k.startswith("val/generations") for k in run.meta["wandb_summary"])


def test_wandb_dir_and_latest_run_not_doubled(wandb_run):
    wandb_dir, _folder, _ = wandb_run
    assert (wandb_dir / "latest-run").is_symlink()
    runs = wandb_offline.read(wandb_dir)
    assert len(runs) == 1
    (via_link,) = wandb_offline.read(wandb_dir / "latest-run")
    assert via_link.id == runs[0].id


def test_cut_in_the_middle_of_a_block(wandb_run, tmp_path):
    _, _, wandb_file = wandb_run
    data = wandb_file.read_bytes()
    assert len(data) > 3 * 32768, "fixture too small to cut inside a later block"
    cut = 2 * 32768 + 32768 // 2 + 3  # inside the third block, not on a record boundary
    partial = tmp_path / wandb_file.name
    partial.write_bytes(data[:cut])
    (run,) = wandb_offline.read(partial)
    (full,) = wandb_offline.read(wandb_file)
    assert 0 < run.n_steps < N_STEPS
    # what was read is exactly the start of the full run
    last = int(run.steps[-1])
    head = full.metrics.filter(full.metrics["step"] <= last - 1)
    got = run.metrics.filter(run.metrics["step"] <= last - 1)
    assert got.select("step", "metric").equals(head.select("step", "metric"))
    assert run.meta["state"] == "running or killed"
    assert any("ends inside a record" in n for n in run.parse_stats.notes)
    assert run.config_segments[0].config == CONFIG


def test_bad_crc_skips_to_next_block(wandb_run, tmp_path):
    _, _, wandb_file = wandb_run
    data = bytearray(wandb_file.read_bytes())
    data[32768 + 2000] ^= 0x55  # inside block 1
    damaged = tmp_path / wandb_file.name
    damaged.write_bytes(bytes(data))
    (run,) = wandb_offline.read(damaged)
    stats = run.parse_stats
    assert stats.skipped_lines >= 1 and any("CRC" in n for n in stats.notes)
    # later blocks are read again: the end of the run is there, only a stretch is missing
    assert int(run.steps[-1]) == N_STEPS
    assert N_STEPS - 60 < run.n_steps < N_STEPS


def test_future_format_version_is_a_clear_error(wandb_run, tmp_path):
    _, _, wandb_file = wandb_run
    data = bytearray(wandb_file.read_bytes())
    data[6] = 1
    future = tmp_path / wandb_file.name
    future.write_bytes(bytes(data))
    assert wandb_offline.sniff(future)
    with pytest.raises(IngestError, match="version 1"):
        wandb_offline.read(future)


def test_not_wandb(tmp_path):
    other = tmp_path / "x.wandb"
    other.write_bytes(b"hello world, not a log")
    assert not wandb_offline.sniff(other)
    with pytest.raises(IngestError, match="not a W&B"):
        wandb_offline.read(other)
    assert not wandb_offline.sniff(tmp_path)


def test_no_wandb_import_at_read_time(wandb_run):
    """Reading must not import wandb (slow, and it replaces sys.stdout.write)."""
    import subprocess
    import sys

    _, _, wandb_file = wandb_run
    code = (
        "import sys; from pathlib import Path; from logscope.ingest import wandb_offline;"
        f"wandb_offline.read(Path({str(wandb_file)!r})); print('wandb' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert out.stdout.strip() == "False"


def test_copied_run_folder(wandb_run, tmp_path):
    _, folder, _ = wandb_run
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy, symlinks=True)
    (run,) = wandb_offline.read(copy)
    assert run.n_steps == N_STEPS


def test_wandb_dir_with_an_empty_run_reads_the_others(wandb_run, tmp_path):
    wandb_dir, _, _ = wandb_run
    copy = tmp_path / "wandb"
    shutil.copytree(wandb_dir, copy, symlinks=True)
    starting = copy / "offline-run-20991231_000000-zzzzzzzz"
    starting.mkdir()
    (starting / "run-zzzzzzzz.wandb").write_bytes(b"")  # wandb.init has just created it
    (run,) = wandb_offline.read(copy)
    assert run.n_steps == N_STEPS
    assert any("run-zzzzzzzz.wandb" in n for n in run.parse_stats.notes)
    with pytest.raises(IngestError, match="empty"):
        wandb_offline.read(starting)
