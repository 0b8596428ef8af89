"""LS131 grad-norm-above-clip: the PPO article's baseline (grad norm ≈ 7 with clip 1.0) vs tuned."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from logscope.detectors.gradients import GradNormAboveClip

from logscope.ingest import load
from logscope.synthetic import simulate
from tests.helpers import make_run

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_article_baseline_fires_and_tuned_is_silent() -> None:
    (baseline,) = load(FIXTURES / "verl_baseline.log")
    (tuned,) = load(FIXTURES / "verl_tuned.log")
    found = GradNormAboveClip().detect(baseline)
    assert len(found) == 1
    f = found[0]
    assert f.severity == "info"
    assert f.evidence["ratio"] > 5
    assert f.advice[0].parameter == "actor_rollout_ref.actor.grad_clip"
    assert f.advice[0].current == 1.0 and f.advice[0].suggested == 0.5
    assert f.step is not None and f.step <= 20  # the whole run is clipped, not just the tail
    assert GradNormAboveClip().detect(tuned) == []


def test_uses_the_configured_clip() -> None:
    norms = np.full(60, 3.0)
    clipped = make_run(
        {"actor/grad_norm": norms, "actor/pg_clipfrac": np.full(60, 0.01)},
        config={"actor_rollout_ref": {"actor": {"grad_clip": 0.5}}},
    )
    loose = make_run(
        {"actor/grad_norm": norms, "actor/pg_clipfrac": np.full(60, 0.01)},
        config={"actor_rollout_ref": {"actor": {"grad_clip": 1.0}}},
    )
    assert GradNormAboveClip().detect(clipped)  # 6× the clip
    assert not GradNormAboveClip().detect(loose)  # 3× the clip


def test_inactive_ppo_clipping_means_no_finding() -> None:
    run = make_run({"actor/grad_norm": np.full(60, 8.0), "actor/pg_clipfrac": np.zeros(60)})
    assert GradNormAboveClip().detect(run) == []


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
@pytest.mark.parametrize("seed", range(5))
def test_healthy_runs_are_silent(algorithm: str, seed: int) -> None:
    run = simulate(300, algorithm, seed=seed).to_run()
    assert GradNormAboveClip().detect(run) == []


def test_short_and_nan_series_do_not_raise() -> None:
    assert GradNormAboveClip().detect(make_run({"actor/grad_norm": [np.nan] * 30})) == []
    # a short run is judged on all its steps (one is enough): 9 is 9× verl's default clip 1.0
    (short,) = GradNormAboveClip().detect(make_run({"actor/grad_norm": [9.0, 9.0]}))
    assert short.severity == "info" and short.evidence["ratio"] == 9.0
    assert GradNormAboveClip().detect(make_run({"actor/grad_norm": [4.0]})) == []
