"""`.wandb` files from older wandb SDKs (0.16.6: Python backend, `key=`; 0.22.3: wandb-core,
`nested_key=`), written by those SDKs (fixtures/wandb_sdk/make_wandb_fixtures.py says how) and read
without wandb. The current SDK's files are covered by test_ingest_wandb_offline.py."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from logscope.ingest import wandb_offline

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "wandb_sdk"
_spec = importlib.util.spec_from_file_location("make_wandb", FIXTURES / "make_wandb_fixtures.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)


@pytest.mark.parametrize("version", ["0.16.6", "0.22.3"])
def test_old_sdk_files(version):
    path = FIXTURES / f"wandb-{version}.wandb"
    assert wandb_offline.sniff(path)
    (run,) = wandb_offline.read(path)
    assert run.meta["state"] == "finished" and run.parse_stats.skipped_lines == 0
    assert run.metric_names == sorted(make.NAMES)  # the wandb.Table is not a metric
    for k, name in enumerate(make.NAMES):
        steps, values = run.series(name)
        assert list(steps) == list(make.STEPS)
        for s, v in zip(steps, values, strict=True):
            want = make.value(int(s), k)
            assert (math.isnan(v) and math.isnan(want)) or v == want, (name, s)
    assert run.config() == make.CONFIG
    assert run.meta["algorithm"] == "grpo"
    (event,) = run.events
    assert event.kind == "grad-norm-not-finite" and event.step_hint == make.WARN_STEP
    assert run.meta["wandb_summary"]["actor/pg_loss"] == make.value(max(make.STEPS), 0)
