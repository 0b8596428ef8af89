"""Parity across sources (issue 5): one simulated verl run with four injected pathologies is
written through each real writer — verl's console text, verl's file-logger JSONL (orjson), the
wandb SDK in offline mode, TensorBoard's EventFileWriter — and read back by `logscope.ingest.load`
(so each file is also recognised as what it is).

Each source must give back the simulated metrics (TensorBoard: to float32 precision) and the
same metric findings. Findings that need the log text (detectors reading events: verl's
`grad_norm is not finite` warnings) or the config (config lint, LS5xx) can only come from sources
that carry them — the console log, and W&B, which captures the console and the config — so those
are compared between the console, W&B and the simulated truth only.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

pytest.importorskip("tensorboard")
pytest.importorskip("wandb")

from logscope.detectors.registry import find

from logscope.analyze import analyze_run
from logscope.ingest import load
from logscope.synthetic import Injection, format_step_line, simulate, write_console_log

try:
    from _ingest_writers import write_tensorboard, write_verl_jsonl, write_wandb_offline
except ImportError:  # tests/ imported as a package
    from tests._ingest_writers import write_tensorboard, write_verl_jsonl, write_wandb_offline

VERSION = "0.5"  # repr-printed values (0.5+), so the console carries full precision
INJECT = [
    Injection("kl-jump", 50),
    Injection("grad-norm-spike", 80),
    Injection("response-length-collapse", 115),
    Injection("grad-norm-not-finite", 135),  # NaN grad norms + WARN lines in the log
]
TEXT_SOURCES = ("wandb", "console")


def _rows(sim) -> list[tuple[int, dict[str, float]]]:
    """Per step, the metrics dict verl's Tracking.log receives, in verl's key order."""
    order = {name: i for i, name in enumerate(sim.metric_order)}
    rows = []
    for (step,), part in sim.metrics.sort("step").partition_by("step", as_dict=True).items():
        items = sorted(
            zip(part["metric"].to_list(), part["value"].to_list(), strict=True),
            key=lambda kv: order.get(kv[0], len(order)),
        )
        rows.append((int(step), dict(items)))
    return sorted(rows)


@pytest.fixture(scope="module")
def parity(tmp_path_factory):
    root = tmp_path_factory.mktemp("parity")
    sim = simulate(160, "grpo", seed=7, inject=INJECT, version=VERSION)
    rows = _rows(sim)
    walls = sim.metrics.group_by("step").agg(pl.col("wall_time").max()).sort("step").rows()
    runs = {}
    # verl file logger (0.7+ writes with orjson; NaN → null)
    (runs["jsonl"],) = load(write_verl_jsonl(root / "files" / "proj" / "exp.jsonl", rows))
    # TensorBoard, as torch's SummaryWriter.add_scalar (simple_value) called by verl
    tb_dir = root / "tensorboard_log" / "proj" / "exp"
    write_tensorboard(tb_dir, rows, wall_times={s: w or 0.0 for s, w in walls})
    (runs["tensorboard"],) = load(root / "tensorboard_log")
    # W&B offline: verl's wandb.init(config=...) + wandb.log(data, step); the console logger's
    # step line is printed in the same process, so wandb captures it
    console = {step: [format_step_line(step, data, VERSION)] for step, data in rows}
    for step, text in sim.events:
        console.setdefault(step, []).append(text)
    folder = write_wandb_offline(
        root / "wb", rows, config=sim.config, project="proj", name="exp", console=console
    )
    (runs["wandb"],) = load(folder.parent)  # the wandb/ directory
    log = root / "run.log"
    write_console_log(sim, log)
    (runs["console"],) = load(log)
    return sim, runs


SOURCES = ["jsonl", "tensorboard", "wandb", "console"]


@pytest.mark.parametrize("source", SOURCES)
def test_same_metrics(parity, source):
    sim, runs = parity
    run = runs[source]
    kind = {"jsonl": "verl-jsonl", "wandb": "wandb-offline", "console": "verl-console"}
    assert run.source.kind == kind.get(source, source)
    want = sim.metrics.select("step", "metric", "value").sort("step", "metric")
    got = run.metrics.select("step", "metric", "value").sort("step", "metric")
    assert got.select("step", "metric").equals(want.select("step", "metric"))
    a, b = got["value"].to_numpy(), want["value"].to_numpy()
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    finite = np.isfinite(b)
    rtol = 1e-6 if source == "tensorboard" else 1e-12
    np.testing.assert_allclose(a[finite], b[finite], rtol=rtol, atol=1e-30)


def _findings(run, reads: set[str]) -> set[tuple[str, str, str | None, int | None]]:
    """(code, name, metric, step) of the findings of detectors that read `reads`."""
    report = analyze_run(run)
    assert not report.errors, report.errors
    return {
        (f.code, f.name, f.metric, f.step)
        for f in report.findings
        if find(f.code).reads in reads and not f.code.startswith("LS5")
    }


def test_same_metric_findings(parity):
    sim, runs = parity
    expected = _findings(sim.to_run(), {"metrics"})
    names = {name for _, name, _, _ in expected}
    for inj in INJECT[:3]:  # the metric pathologies are found in the first place
        assert inj.kind in names, (inj.kind, sorted(names))
    assert "non-finite-metric" in names  # the NaN grad norms of the 4th
    for source, run in runs.items():
        assert _findings(run, {"metrics"}) == expected, source


def test_same_log_findings_where_the_log_is_carried(parity):
    sim, runs = parity
    expected = _findings(sim.to_run(), {"events"})
    assert any(name.startswith("grad-norm-not-finite") for _, name, _, _ in expected), expected
    for source in TEXT_SOURCES:
        assert _findings(runs[source], {"events"}) == expected, source


def test_config_findings_where_config_is_carried(parity):
    sim, runs = parity
    lint = {
        (f.code, f.name) for f in analyze_run(sim.to_run()).findings if f.code.startswith("LS5")
    }
    assert lint, "the simulated config should trip at least one config rule"
    for source in TEXT_SOURCES:
        got = {
            (f.code, f.name) for f in analyze_run(runs[source]).findings if f.code.startswith("LS5")
        }
        assert got == lint, source
