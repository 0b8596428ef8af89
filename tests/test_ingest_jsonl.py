"""verl file-logger JSONL, written as verl writes it (0.7+: orjson, NaN→null; 0.6: stdlib json)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from logscope.exceptions import IngestError
from logscope.ingest import jsonl

try:
    from _ingest_writers import write_verl_jsonl
except ImportError:  # tests/ imported as a package
    from tests._ingest_writers import write_verl_jsonl


def _rows(n: int):
    for s in range(1, n + 1):
        yield (
            s,
            {
                "actor/pg_loss": np.float32(0.25) * s,  # numpy scalars, as verl's metrics are
                "actor/grad_norm": float("nan") if s == 4 else 1.5,
                "critic/score/mean": float("inf") if s == 5 else np.int64(s),
                "timing_s/step": 12.5,
            },
        )


@pytest.mark.parametrize("version", ["0.7", "0.6"])
def test_roundtrip(tmp_path, version):
    rows = _rows(10)
    if version == "0.6":  # stdlib json cannot serialize numpy scalars; 0.6 metrics were floats
        rows = ((s, {k: float(v) for k, v in m.items()}) for s, m in rows)
    path = write_verl_jsonl(tmp_path / "proj" / "exp.jsonl", rows, version=version)
    text = path.read_text()
    assert ("null" in text) == (version == "0.7") and ("NaN" in text) == (version == "0.6")
    assert jsonl.sniff(path)
    (run,) = jsonl.read(path)
    assert run.source.kind == "verl-jsonl"
    assert run.meta["project"] == "proj" and run.meta["experiment"] == "exp"
    assert run.n_steps == 10
    steps, loss = run.series("actor/pg_loss")
    assert list(steps) == list(range(1, 11))
    np.testing.assert_allclose(loss, [0.25 * s for s in range(1, 11)])
    _, gn = run.series("actor/grad_norm")
    assert math.isnan(gn[3]) and gn[2] == 1.5
    _, score = run.series("critic/score/mean")
    # 0.7's null loses the sign of inf (NaN); 0.6 keeps Infinity
    assert math.isnan(score[4]) if version == "0.7" else score[4] == math.inf
    assert run.parse_stats.step_lines == 10 and run.parse_stats.skipped_lines == 0


def test_truncated_last_line(tmp_path):
    path = write_verl_jsonl(tmp_path / "run.jsonl", _rows(6))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 20])  # cut inside the last record
    (run,) = jsonl.read(path)
    assert run.n_steps == 5
    assert run.parse_stats.skipped_lines == 1
    assert "cut off" in run.parse_stats.notes[0]


def test_garbled_middle_line_counted(tmp_path):
    path = write_verl_jsonl(tmp_path / "run.jsonl", _rows(4))
    lines = path.read_text().splitlines()
    lines.insert(2, "{not json")
    path.write_text("\n".join(lines) + "\n")
    (run,) = jsonl.read(path)
    assert run.n_steps == 4
    assert run.parse_stats.skipped_examples[0][0] == 3


def test_sniff_rejects_other_jsonl(tmp_path):
    other = tmp_path / "x.jsonl"
    other.write_text('{"_step": 1, "loss": 2}\n')
    assert not jsonl.sniff(other)
    with pytest.raises(IngestError):
        jsonl.read(other)


def test_bulk_path_equals_per_line_path(tmp_path, monkeypatch):
    """The polars bulk path (clean 0.7+ files) reads what the per-line path reads: keys that
    come and go (validation every 5 steps), null, ints, bools, a step logged twice."""
    rows = []
    for s in range(0, 40):
        data = {"actor/pg_loss": 0.1 * s, "actor/grad_norm": None if s % 7 == 3 else 1.0 + s}
        if s % 5 == 0:
            data["val-core/openai/gsm8k/acc/mean@1"] = 0.4 + 0.01 * s
        data["training/global_step"] = s
        data["training/is_val"] = s % 5 == 0
        rows.append((s, data))
    rows.append((39, {"actor/pg_loss": -1.0}))  # logged again: the later value wins
    path = write_verl_jsonl(tmp_path / "run.jsonl", rows)
    (bulk,) = jsonl.read(path)
    monkeypatch.setattr(jsonl, "_fast_frame", lambda body: None)
    (per_line,) = jsonl.read(path)
    assert bulk.metrics.equals(per_line.metrics, null_equal=True)
    assert bulk.parse_stats.step_lines == per_line.parse_stats.step_lines == 41
    assert bulk.series("actor/pg_loss")[1][-1] == -1.0
    assert len(bulk.series("val-core/openai/gsm8k/acc/mean@1")[0]) == 8


@pytest.mark.parametrize(
    "separators", [(",", ":"), (", ", ": "), (",  ", " :  ")], ids=["compact", "json.dumps", "odd"]
)
def test_null_is_nan_whatever_the_whitespace(tmp_path, separators):
    """`": null"` (Python's json.dumps default) and `":null"` (orjson) are the same value: a NaN
    at that step, never "not logged"."""
    lines = [
        json.dumps(
            {"step": s, "data": {"actor/pg_loss": None if s == 3 else 0.1 * s}},
            separators=separators,
        )
        for s in range(1, 6)
    ]
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines) + "\n")
    (run,) = jsonl.read(path)
    steps, values = run.series("actor/pg_loss")
    assert list(steps) == [1, 2, 3, 4, 5]
    assert np.isnan(values[2]) and not np.isnan(values[[0, 1, 3, 4]]).any()


def test_easyr1_file_logger_records_are_joined_at_slash(tmp_path):
    """EasyR1's `experiment_log.jsonl`: `{"step": N, **metrics}` nested at `/`."""
    path = tmp_path / "experiment_log.jsonl"
    rows = [
        {"step": s, "actor": {"pg_loss": 0.01, "entropy_loss": 0.5 - 0.001 * s},
         "critic": {"score": {"mean": 0.3 + 0.001 * s}}, "reward": {"overall": 0.3}}
        for s in range(1, 41)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert jsonl.sniff(path)
    (run,) = jsonl.read(path)
    assert run.n_steps == 40
    steps, values = run.series("critic/score/mean")
    assert steps.tolist()[0] == 1 and values[-1] == pytest.approx(0.34)
    assert {"actor/entropy_loss", "reward/overall"} <= set(run.metric_names)
    assert "step" not in run.metric_names
    assert run.meta["framework"] == "easyr1"
