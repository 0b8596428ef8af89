"""The diagnoses of verl 0.6-0.10's metric families (LS150, LS304-LS307) on simulated runs:
found at the injected step, quiet on healthy runs that log every family, advice on verl's keys."""

from __future__ import annotations

import numpy as np
import pytest
from logscope.detectors.registry import find

from logscope.analyze import analyze_run
from logscope.synthetic import Injection, realistic, simulate
from logscope.synthetic.config import family_overrides

EVERY_FAMILY = family_overrides(
    rollout_corr="decoupled", fully_async=True, filter_groups=True, agent_loop=True
)
# kind → (code, the family it needs, an advised key)
CASES = {
    "train-inference-mismatch": (
        "LS150",
        family_overrides(mismatch=True),
        "algorithm.rollout_correction.rollout_is",
    ),
    "async-imbalance": ("LS304", family_overrides(fully_async=True), "trainer.n_gpus_per_node"),
    "staleness-high": (
        "LS305",
        family_overrides(fully_async=True),
        "async_training.staleness_threshold",
    ),
    "dynamic-sampling-waste": (
        "LS306",
        family_overrides(filter_groups=True),
        "actor_rollout_ref.rollout.n",
    ),
    "aborted-responses": (
        "LS307",
        family_overrides(agent_loop=True),
        "actor_rollout_ref.rollout.gpu_memory_utilization",
    ),
}


def realistic_run(seed: int, n: int, config: dict, inject: list[Injection], version: str):
    dyn, cfg = realistic(np.random.default_rng(500 + seed), n, "grpo")
    return simulate(
        n, "grpo", seed=seed, version=version, config={**cfg, **config}, dynamics=dyn, inject=inject
    )


@pytest.mark.parametrize("kind", sorted(CASES))
@pytest.mark.parametrize("magnitude", [0.7, 1.5])
def test_found_at_the_injected_step_with_advice_on_the_verl_key(kind, magnitude):
    code, config, key = CASES[kind]
    for seed, version in ((1, "0.9"), (2, "0.10")):
        sim = realistic_run(seed, 300, config, [Injection(kind, 150, magnitude)], version)
        findings = find(code)().detect(sim.to_run())
        assert findings, (kind, seed)
        assert abs(findings[0].step - sim.truth[0].step) <= 5
        assert key in [a.parameter for a in findings[0].advice]


@pytest.mark.parametrize("seed", range(4))
def test_healthy_runs_logging_every_family_have_no_warning(seed):
    version = "0.10" if seed % 2 else "0.9"
    sim = realistic_run(seed, 400, EVERY_FAMILY, [], version)
    report = analyze_run(sim.to_run())
    loud = [f for f in report.findings if f.severity in ("warning", "error", "critical")]
    assert loud == [], [(f.code, f.message) for f in loud]


def test_bypass_mode_names_are_read():
    sim = realistic_run(
        3,
        300,
        family_overrides(rollout_corr="bypass"),
        [Injection("train-inference-mismatch", 150, 1.5)],
        "0.9",
    )
    assert any(m.startswith("actor/rollout_corr/") for m in sim.metric_order)
    (finding,) = find("LS150")().detect(sim.to_run())
    metrics = {s["metric"] for s in finding.evidence["signals"]}
    assert any(m.startswith("actor/rollout_corr/") for m in metrics), metrics


def test_staleness_without_a_bound_in_the_config_is_not_judged():
    sim = realistic_run(
        4, 300, family_overrides(fully_async=True), [Injection("staleness-high", 150)], "0.9"
    )
    run = sim.to_run()
    run.config_segments = []  # a log without its config dump
    assert find("LS305")().detect(run) == []


def test_async_split_advice_keeps_the_idle_sides_busy_share():
    sim = realistic_run(
        5, 300, family_overrides(fully_async=True), [Injection("async-imbalance", 150)], "0.9"
    )
    (finding,) = find("LS304")().detect(sim.to_run())
    advice = {a.parameter: a for a in finding.advice}
    idle = "rollout" if finding.evidence["idle_side"] == "rollouter" else "trainer"
    busy = "trainer" if idle == "rollout" else "rollout"
    before = {s: sim.config[s]["n_gpus_per_node"] for s in (idle, busy)}
    after = {s: advice[f"{s}.n_gpus_per_node"].suggested for s in (idle, busy)}
    assert isinstance(after[idle], int) and after[idle] < before[idle]
    node = max(before.values())
    if isinstance(after[busy], int):  # the freed GPUs fit on the busy side's node: none lost
        assert after[idle] + after[busy] == before[idle] + before[busy] <= 2 * node
        assert after[busy] <= node
    else:  # its node is full: no per-node count beyond a node's GPUs is ever suggested
        assert before[busy] + before[idle] - after[idle] > node


def test_split_moves_freed_gpus_only_onto_room_on_the_busy_node():
    from logscope.detectors.async_training import split_advice

    from logscope.model import ConfigSegment, Run, Source

    def run(rollout: int, trainer: int) -> Run:
        config = {
            "rollout": {"nnodes": 1, "n_gpus_per_node": rollout},
            "trainer": {"nnodes": 1, "n_gpus_per_node": trainer},
        }
        return Run(id="r", source=Source("x", "x"), config_segments=[ConfigSegment(1, config)])

    moved = {a.parameter: a.suggested for a in split_advice(run(8, 4), "rollout", "trainer", 0.5)}
    assert moved == {"rollout.n_gpus_per_node": 4, "trainer.n_gpus_per_node": 8}
    full = {a.parameter: a for a in split_advice(run(8, 8), "rollout", "trainer", 0.5)}
    assert full["rollout.n_gpus_per_node"].suggested == 4
    assert full["trainer.n_gpus_per_node"].override is None  # 12 would not fit on a node of 8


def test_rollout_bottleneck_in_one_step_off_training_is_the_trainers_wait():
    pool = {"rollout.nnodes": 1, "rollout.n_gpus_per_node": 8}
    sim = realistic_run(6, 300, pool, [Injection("rollout-bottleneck", 150, 1.5)], "0.9")
    (finding,) = find("LS302")().detect(sim.to_run())
    assert finding.evidence["one_step_off"] is True
    assert "one-step-off" in finding.message
    advised = [a.parameter for a in finding.advice]
    assert advised[:2] == ["trainer.n_gpus_per_node", "rollout.n_gpus_per_node"]
    plain = realistic_run(6, 300, {}, [Injection("rollout-bottleneck", 150, 1.5)], "0.9")
    (finding,) = find("LS302")().detect(plain.to_run())
    assert "one_step_off" not in finding.evidence


def test_dynamic_sampling_waste_that_passed_early_is_info():
    """Three generation rounds per step at steps 7-13 of a DAPO run on hard data, one or two
    from then on: a passing stretch (info); three rounds to the end of the log: a warning."""
    from tests.helpers import make_run

    waste = find("dynamic-sampling-waste")()
    early = np.where((np.arange(1, 201) >= 7) & (np.arange(1, 201) <= 13), 3.0, 1.0)
    early[50::7] = 2.0
    (f,) = waste.detect(make_run({"train/num_gen_batches": early}))
    assert f.severity == "info" and f.evidence["passed"] and f.step == 7
    late = early.copy()
    late[150:] = 3.0
    (g,) = waste.detect(make_run({"train/num_gen_batches": late}))
    assert g.severity == "warning" and not g.evidence["passed"]
