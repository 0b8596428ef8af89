"""Damaged binary inputs: whatever bytes are flipped or cut, the TensorBoard and W&B readers
keep what is readable and never fail with anything but IngestError (hypothesis)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logscope.exceptions import IngestError
from logscope.ingest import jsonl, tensorboard, wandb_offline

try:
    from _ingest_writers import write_tensorboard, write_verl_jsonl
except ImportError:  # tests/ imported as a package
    from tests._ingest_writers import write_tensorboard, write_verl_jsonl

WANDB_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "wandb_sdk" / "wandb-0.22.3.wandb"
ROWS = [(s, {"actor/pg_loss": 0.1 * s, "actor/entropy": 1.0 / s}) for s in range(1, 30)]

damage = st.tuples(
    st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), max_size=6),  # (where, xor)
    st.one_of(st.none(), st.floats(0, 1)),  # cut at
)


def _damaged(data: bytes, spec: tuple[list[tuple[float, int]], float | None]) -> bytes:
    flips, cut = spec
    out = bytearray(data)
    for where, xor in flips:
        out[min(int(where * len(out)), len(out) - 1)] ^= xor
    if cut is not None:
        out = out[: int(cut * len(out))]
    return bytes(out)


@pytest.fixture(scope="module")
def tb_bytes(tmp_path_factory):
    pytest.importorskip("tensorboard")
    logdir = write_tensorboard(tmp_path_factory.mktemp("tb"), ROWS)
    (path,) = logdir.glob("events.out.tfevents.*")
    return path.name, path.read_bytes()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(spec=damage)
def test_tensorboard_survives_damage(tb_bytes, tmp_path_factory, spec):
    name, data = tb_bytes
    folder = tmp_path_factory.mktemp("tbd")
    (folder / name).write_bytes(_damaged(data, spec))
    try:
        (run,) = tensorboard.read(folder)
    except IngestError:
        return
    assert run.n_steps <= len(ROWS)
    if spec == ([], None):
        assert run.n_steps == len(ROWS)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(spec=damage)
def test_wandb_survives_damage(tmp_path_factory, spec):
    data = WANDB_FILE.read_bytes()
    path = tmp_path_factory.mktemp("wbd") / "run-x.wandb"
    path.write_bytes(_damaged(data, spec))
    try:
        (run,) = wandb_offline.read(path)
    except IngestError:
        return
    assert run.n_steps <= 40


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(spec=damage)
def test_jsonl_survives_damage(tmp_path_factory, spec):
    folder = tmp_path_factory.mktemp("jd")
    path = write_verl_jsonl(folder / "run.jsonl", ROWS)
    path.write_bytes(_damaged(path.read_bytes(), spec))
    try:
        (run,) = jsonl.read(path)
    except IngestError:
        return
    assert run.n_steps <= len(ROWS) + 1  # a flipped digit in a step number makes a new step
