"""W&B chart CSV export, generic CSV/JSONL tables, and W&B online rows → Run."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from logscope.exceptions import IngestError, OptionalDependencyMissing
from logscope.ingest import tables, wandb_csv, wandb_online


def _write_wandb_export(path, runs: dict[str, dict[str, list[float | None]]], steps):
    """The W&B UI's "Export CSV" of a line chart: every field quoted, a `Step` column, then per
    run and metric `<run> - <metric>`, `<run> - <metric>__MIN`, `<run> - <metric>__MAX`; cells are
    empty where a run has no point at that step. (No writer library exists for this UI export,
    so it is written with the csv module in the layout the UI produces.)"""
    header = ["Step"]
    for run, metrics in runs.items():
        for metric in metrics:
            header += [f"{run} - {metric}", f"{run} - {metric}__MIN", f"{run} - {metric}__MAX"]
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL)
        writer.writerow(header)
        for i, step in enumerate(steps):
            row = [step]
            for metrics in runs.values():
                for values in metrics.values():
                    v = values[i]
                    cell = "" if v is None else ("NaN" if v != v else repr(v))
                    row += [cell, cell, cell]
            writer.writerow(row)


def test_wandb_csv_export_two_runs(tmp_path):
    steps = list(range(0, 50, 5))
    kl_a = [0.001 * i for i in range(10)]
    kl_b = [None if i > 6 else 0.002 * i for i in range(10)]  # run b stopped earlier
    ent_a = [1.0 - 0.05 * i for i in range(10)]
    ent_a[3] = float("nan")
    path = tmp_path / "wandb_export_2026-11-30.csv"
    _write_wandb_export(
        path,
        {
            "qwen-grpo-a": {"actor/kl_loss": kl_a, "actor/entropy": ent_a},
            "qwen-grpo-b": {"actor/kl_loss": kl_b, "actor/entropy": ent_a},
        },
        steps,
    )
    assert wandb_csv.sniff(path)
    runs = {r.meta["experiment"]: r for r in wandb_csv.read(path)}
    assert set(runs) == {"qwen-grpo-a", "qwen-grpo-b"}
    a, b = runs["qwen-grpo-a"], runs["qwen-grpo-b"]
    assert a.source.kind == "wandb-csv"
    assert sorted(a.metric_names) == ["actor/entropy", "actor/kl_loss"]  # no __MIN/__MAX
    s, v = a.series("actor/kl_loss")
    assert list(s) == steps
    np.testing.assert_allclose(v, kl_a)
    _, ent = a.series("actor/entropy")
    assert math.isnan(ent[3]) and ent[4] == pytest.approx(0.8)
    s_b, _ = b.series("actor/kl_loss")
    assert list(s_b) == steps[:7]  # empty cells are "not logged", not NaN
    assert any("__MIN/__MAX" in n for n in a.parse_stats.notes)


def test_generic_csv(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text(
        "global_step,loss,lr,note,_runtime\n"
        "1,0.5,1e-6,ok,1.0\n"
        "2,nan,1e-6,ok,2.0\n"
        "3,,1e-6,hmm,3.0\n"
        "4,0.25,inf,ok,4.0\n"
    )
    assert tables.sniff(path) and not wandb_csv.sniff(path)
    (run,) = tables.read(path)
    assert run.metric_names == ["loss", "lr"]
    s, v = run.series("loss")
    assert list(s) == [1, 2, 4] and math.isnan(v[1])
    assert run.series("lr")[1][-1] == math.inf
    assert any("note" in n for n in run.parse_stats.notes)


def test_generic_jsonl(tmp_path):
    path = tmp_path / "history.jsonl"
    rows = [
        {"_step": s, "_timestamp": 1e9 + s, "loss": 1 / s, "table": {"_type": "table-file"}}
        for s in range(1, 6)
    ]
    rows[2]["loss"] = None  # a null in a JSON table is a NaN that was written as null
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert tables.sniff(path)
    (run,) = tables.read(path)
    assert run.metric_names == ["loss"]
    s, v = run.series("loss")
    assert list(s) == [1, 2, 3, 4, 5] and math.isnan(v[2])
    assert run.wall_times()[1][0] == 1e9 + 1


def test_table_without_step_column(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    assert not tables.sniff(path)
    with pytest.raises(IngestError, match="no step column"):
        tables.read(path)


# ---- W&B online -----------------------------------------------------------------------------

# Rows as `wandb.Api().run(...).scan_history()` yields them for a verl run: every logged key
# of that step, plus _step/_runtime/_timestamp; the validation-generations table is a dict.
# W&B cannot be reached from the test machines, so these rows are recorded, not fetched: this
# tests the boundary between the API and logscope (rows_to_run), not the network call.
RECORDED_ROWS = [
    {
        "_step": 0,
        "_runtime": 41.2,
        "_timestamp": 1764500000.5,
        "val-core/openai/gsm8k/reward/mean@1": 0.412,
        "val/generations": {
            "_type": "table-file",
            "path": "media/table/val/generations_0_5a1b.table.json",
            "ncols": 4,
            "nrows": 10,
            "sha256": "5a1b",
            "size": 9123,
        },
    },
    {
        "_step": 1,
        "_runtime": 95.0,
        "_timestamp": 1764500054.3,
        "actor/pg_loss": -0.0123,
        "actor/grad_norm": 0.71,
        "actor/entropy": 0.653,
        "critic/score/mean": 0.41,
        "response_length/mean": 231.5,
        "timing_s/step": 53.8,
    },
    {
        "_step": 2,
        "_runtime": 149.1,
        "_timestamp": 1764500108.4,
        "actor/pg_loss": 0.0087,
        "actor/grad_norm": "NaN",
        "actor/entropy": 0.641,
        "critic/score/mean": 0.44,
        "response_length/mean": 240.0,
        "timing_s/step": 54.1,
    },
    {
        "_step": 3,
        "_runtime": 203.7,
        "_timestamp": 1764500162.9,
        "actor/pg_loss": float("nan"),
        "actor/grad_norm": "Infinity",
        "actor/entropy": 0.602,
        "critic/score/mean": None,
        "response_length/mean": 251.25,
        "timing_s/step": 54.6,
    },
]
RECORDED_CONFIG = {
    "data": {"train_batch_size": 256, "max_response_length": 1024},
    "algorithm": {"adv_estimator": "grpo"},
    "actor_rollout_ref": {"actor": {"kl_loss_coef": 0.001}},
    # older servers/SDKs hand config sections over wrapped as {"value": ..., "desc": ...}
    "trainer": {
        "value": {"project_name": "verl_grpo_gsm8k", "experiment_name": "qwen2_5_3b"},
        "desc": None,
    },
}


def test_rows_to_run_from_recorded_api_rows():
    """Recorded scan_history() rows and run.config (W&B is unreachable here) → Run."""
    run = wandb_online.rows_to_run(
        iter(RECORDED_ROWS),
        RECORDED_CONFIG,
        {"run_id": "a1b2c3d4", "project": "verl_grpo_gsm8k", "experiment": "qwen2_5_3b"},
        source="wandb://team/verl_grpo_gsm8k/a1b2c3d4",
    )
    assert run.meta["run_id"] == "a1b2c3d4" and run.source.kind == "wandb-online"
    assert "val/generations" not in run.metric_names and "_runtime" not in run.metric_names
    assert list(run.steps) == [0, 1, 2, 3]
    _, gn = run.series("actor/grad_norm")
    assert gn[0] == 0.71 and math.isnan(gn[1]) and gn[2] == math.inf
    assert math.isnan(run.series("actor/pg_loss")[1][2])
    assert list(run.series("critic/score/mean")[0]) == [1, 2]  # None = not logged
    assert run.wall_times()[1][1] == pytest.approx(1764500054.3)
    assert run.config_value("actor_rollout_ref.actor.kl_loss_coef") == 0.001
    assert run.config_value("trainer.experiment_name") == "qwen2_5_3b"
    assert run.config_segments[0].first_step == 0
    assert run.meta["algorithm"] == "grpo"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("wandb://team/proj/abc123", ("team", "proj", "abc123")),
        ("wandb:/team/proj/abc123", ("team", "proj", "abc123")),  # as Path() spells it
        ("https://wandb.ai/team/proj/runs/abc123", ("team", "proj", "abc123")),
        ("https://wandb.ai/team/proj/runs/abc123?nw=nwuser", ("team", "proj", "abc123")),
        ("https://wandb.ai/team/proj/runs/abc123/overview", ("team", "proj", "abc123")),
        ("https://wandb.ai/team/proj/workspace", None),
        ("logs/run.log", None),
    ],
)
def test_parse_target(text, expected):
    assert wandb_online.parse_target(text) == expected


def test_online_without_wandb_gives_install_hint(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_wandb(name, *args, **kwargs):
        if name == "wandb" or name.startswith("wandb."):
            raise ImportError("no wandb")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    with pytest.raises(OptionalDependencyMissing, match=r"pip install 'logscope\[wandb\]'"):
        wandb_online.read("wandb://team/proj/abc123")
