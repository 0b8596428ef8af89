"""LS210 critic-value-error (PPO) and LS211 advantage-collapse (GRPO) on simulated runs.

Tolerance: the reported start within 5 steps of the injected step on every case.
"""

from __future__ import annotations

import numpy as np
import pytest
from logscope.detectors.critic import AdvantageCollapse, CriticValueError

from tests._pathology_cases import (
    check_advice,
    every_other_step,
    loud,
    named,
    rounded,
    sim_run,
    with_gaps,
)
from tests.helpers import make_run

CASES = [(1, 150, 1.0), (2, 150, 0.8), (3, 2000, 1.5), (4, 2000, 0.8), (5, 600, 2.0)]


@pytest.mark.parametrize(("seed", "n", "magnitude"), CASES)
def test_critic_value_error_found_at_its_start(seed, n, magnitude):
    run, truth = sim_run("critic-value-error", n, "ppo", seed, magnitude=magnitude)
    (f,) = named(CriticValueError().detect(run), "critic-value-error")
    assert abs(f.step - truth) <= 5
    assert f.evidence["vf_loss_after"] > 0.1
    assert f.evidence["explained_var_after"] < 0
    check_advice(f)
    micro = next(a for a in f.advice if a.parameter == "critic.ppo_micro_batch_size_per_gpu")
    configured = run.config_value("critic.ppo_micro_batch_size_per_gpu")
    assert micro.current == configured
    if configured is not None:
        assert micro.suggested == 2 * configured


@pytest.mark.parametrize(("seed", "n", "magnitude"), CASES)
def test_advantage_collapse_found_at_its_start(seed, n, magnitude):
    run, truth = sim_run("advantage-collapse", n, "grpo", seed, magnitude=magnitude)
    (f,) = named(AdvantageCollapse().detect(run), "advantage-collapse")
    assert abs(f.step - truth) <= 5
    assert f.severity == "error"
    assert "scores" in f.message
    check_advice(f)
    n_advice = next(a for a in f.advice if a.parameter.endswith("rollout.n"))
    current = run.config_value("actor_rollout_ref.rollout.n")
    assert n_advice.current == current
    assert n_advice.suggested >= 4 and n_advice.suggested % 2 == 0


def test_grpo_run_skips_critic_value_error():
    run, _ = sim_run(None, 200, "grpo", 3)
    assert CriticValueError().skip_reason(run)
    assert CriticValueError().detect(run) == []


def test_critic_warm_up_is_not_reported():
    steps = np.arange(1, 201)
    rng = np.random.default_rng(1)
    vf = 0.05 + 0.6 * np.exp(-steps / 25) * np.exp(0.1 * rng.standard_normal(200))
    ev = 0.5 - 1.5 * np.exp(-steps / 25)
    run = make_run({"critic/vf_loss": vf, "critic/vf_explained_var": ev})
    assert CriticValueError().detect(run) == []


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_healthy_runs_are_silent(seed, algorithm):
    n = (150, 400, 1200)[seed % 3]
    run, _ = sim_run(None, n, algorithm, seed=200 + seed, noise=0.7 + 0.07 * seed)
    for det in (CriticValueError(), AdvantageCollapse()):
        assert loud(det.detect(run)) == [], det.name


@pytest.mark.parametrize(
    ("kind", "algorithm", "det"),
    [
        ("critic-value-error", "ppo", CriticValueError()),
        ("advantage-collapse", "grpo", AdvantageCollapse()),
    ],
)
def test_rounded_gappy_irregular_logs(kind, algorithm, det):
    for transform in (rounded, with_gaps, every_other_step):
        run, truth = sim_run(kind, 500, algorithm, seed=11, version="0.4", magnitude=1.2)
        found = named(det.detect(transform(run)), kind)
        assert found, transform.__name__
        assert abs(found[0].step - truth) <= 6, transform.__name__


@pytest.mark.parametrize("n", [0, 1, 3])
def test_short_series_never_raise(n):
    vals = [0.0, float("nan"), 0.0][:n]
    series = {
        "critic/vf_loss": vals,
        "critic/vf_explained_var": vals,
        "critic/advantages/max": vals,
        "critic/advantages/min": vals,
    }
    run = make_run(series) if n else make_run({})
    assert CriticValueError().detect(run) == []  # explained var 0 is not "strongly negative"
    found = AdvantageCollapse().detect(run)
    if n == 0:
        assert found == []
    else:  # every finite step has advantages 0: the short-run judgement (tests/test_point_in_time)
        assert [f.severity for f in found] == ["warning"]
        assert found[0].evidence["judged_on"].startswith("every logged step")


def test_unknown_config_gives_the_rule():
    run, _ = sim_run("advantage-collapse", 300, "grpo", 7)
    run.config_segments = []
    (f,) = AdvantageCollapse().detect(run)
    check_advice(f, config_known=False)


def test_advantages_all_zero_at_a_nan_step_are_a_consequence():
    """A step whose losses are NaN, every sample scored -1 and every advantage is 0: the NaN is
    the story, not the reward function."""
    series = {
        "actor/pg_loss": [np.nan],
        "actor/kl_loss": [np.nan],
        "critic/score/max": [-1.0],
        "critic/score/min": [-1.0],
        "critic/advantages/max": [0.0],
        "critic/advantages/min": [0.0],
    }
    (f,) = AdvantageCollapse().detect(make_run(series, np.array([83])))
    assert f.severity == "info" and f.advice == []
    assert f.evidence["consequence_of"] == {
        "name": "non-finite-metric",
        "metric": "actor/pg_loss",
        "step": 83,
    }
    finite = {**series, "actor/pg_loss": [0.0], "actor/kl_loss": [0.001]}
    (g,) = AdvantageCollapse().detect(make_run(finite, np.array([83])))
    assert g.severity == "warning" and "consequence_of" not in g.evidence
