"""Config lint inside `analyze`: config dumps of logs, restarts, the registry and catalogue."""

from __future__ import annotations

import numpy as np
import pytest
from logscope.detectors import config_lint
from logscope.detectors.registry import detector_classes

from logscope.analyze import analyze_run
from logscope.detector import CATALOGUE_SECTIONS
from logscope.model import ConfigSegment, Run, Source

RULE_NAMES = [
    "micro-batch-oom-risk",
    "micro-batch-tp-mismatch",
    "grpo-group-size",
    "batch-not-divisible-by-n",
    "mini-batch-not-divisor",
    "mini-batch-larger-than-batch",
    "kl-coef-zero",
    "kl-coef-scale-mismatch",
    "gpu-memory-utilization-risk",
    "shuffle-mismatch",
    "seed-unset",
    "response-length-mismatch",
    "rollout-batching-mismatch",
    "log-prob-micro-batch",
    "kl-coef-changed-midrun",
    "normalized-mini-batch-mismatch",
    "unknown-config-key",
    "config-value-type",
    "max-model-len-too-short",
    "dapo-filter-on-shaped-reward",
    "fully-async-lr-without-horizon",
    "log-prob-micro-batch-ratio",
]


def test_codes_in_order_and_registered():
    rules = [c for c in detector_classes() if issubclass(c, config_lint.ConfigRule)]
    assert [c.name for c in rules] == RULE_NAMES
    assert [c.code for c in rules] == [f"LS{501 + i}" for i in range(len(RULE_NAMES))]
    assert all(c.reads == "config" for c in rules)


@pytest.mark.parametrize("name", RULE_NAMES)
def test_catalogue_docstring_sections(name):
    cls = next(c for c in detector_classes() if c.name == name)
    entry = cls.catalogue_entry()
    assert entry["Summary"]
    assert list(entry)[1:] == list(CATALOGUE_SECTIONS)
    assert all(entry[s].strip() for s in CATALOGUE_SECTIONS)
    cls()  # default parameters construct


def grpo_config(**over) -> dict:
    config = {
        "algorithm": {"adv_estimator": "grpo", "kl_ctrl": {"kl_coef": 0.001}},
        "data": {
            "train_batch_size": 256,
            "max_prompt_length": 512,
            "max_response_length": 1024,
            "shuffle": True,
            "seed": 1,
        },
        "actor_rollout_ref": {
            "model": {"path": "/models/Qwen2.5-7B-Instruct"},
            "actor": {
                "ppo_micro_batch_size_per_gpu": 4,
                "ppo_mini_batch_size": 64,
                "use_kl_loss": True,
                "kl_loss_coef": 0.001,
                "shuffle": True,
            },
            "rollout": {
                "n": 8,
                "gpu_memory_utilization": 0.4,
                "tensor_model_parallel_size": 2,
                "log_prob_micro_batch_size_per_gpu": 16,
                "response_length": 1024,
            },
            "ref": {"log_prob_micro_batch_size_per_gpu": 16},
        },
        "trainer": {"n_gpus_per_node": 8, "nnodes": 1},
    }
    for key, value in over.items():
        node = config
        parts = key.split(".")
        for p in parts[:-1]:
            node = node[p]
        node[parts[-1]] = value
    return config


def log_run(*segments: tuple[int, dict]) -> Run:
    return Run(
        id="log",
        source=Source("verl-console", "x.log"),
        meta={"verl_version": "0.5"},
        config_segments=[ConfigSegment(step, cfg) for step, cfg in segments],
    )


def config_findings(report):
    return [f for f in report.findings if f.code.startswith("LS5")]


def test_clean_log_config_is_quiet():
    report = analyze_run(log_run((1, grpo_config())))
    assert config_findings(report) == []


def test_log_findings_carry_the_segment_step_and_are_not_repeated():
    bad = grpo_config(**{"actor_rollout_ref.rollout.n": 1})
    report = analyze_run(log_run((1, bad), (50, bad)))
    found = [f for f in report.findings if f.name == "grpo-group-size"]
    assert [(f.step, f.severity) for f in found] == [(1, "error")]


def test_kl_coef_changed_between_dumps_is_reported_at_the_restart():
    after = grpo_config(**{"actor_rollout_ref.actor.kl_loss_coef": 0.002})
    report = analyze_run(log_run((1, grpo_config()), (121, after)))
    [f] = [f for f in report.findings if f.name == "kl-coef-changed-midrun"]
    assert f.code == "LS515" and f.step == 121 and f.severity == "warning"
    assert (f.evidence["before"], f.evidence["after"]) == (0.001, 0.002)
    assert f.advice[0].override == "actor_rollout_ref.actor.kl_loss_coef=0.001"


def test_unchanged_restart_is_not_flagged():
    report = analyze_run(log_run((1, grpo_config()), (121, grpo_config())))
    assert [f for f in report.findings if f.name == "kl-coef-changed-midrun"] == []


def test_verl_startup_checks_are_not_repeated_on_a_log_that_ran():
    # unset log-prob micro batch: verl would refuse a *new* run, but this one ran (older verl)
    cfg = grpo_config()
    del cfg["actor_rollout_ref"]["rollout"]["log_prob_micro_batch_size_per_gpu"]
    report = analyze_run(log_run((1, cfg)))
    assert [f for f in report.findings if f.name == "log-prob-micro-batch"] == []


def test_synthetic_restart_with_new_kl_coef_links_to_reward_sawtooth(tmp_path):
    import logscope.synthetic as synthetic

    sim = synthetic.simulate(
        n_steps=120,
        algorithm="grpo",
        seed=1,
        inject=[synthetic.Injection("kl-coef-changed-midrun", 60)],
        config={"trainer.save_freq": 20},
    )
    truth = sim.truth[0].step  # the resume step after the checkpoint
    path = synthetic.write_console_log(sim, tmp_path / "restart.log")
    from logscope.ingest import load

    [run] = load(path)
    assert len(run.config_segments) == 2
    report = analyze_run(run)
    [f] = [f for f in report.findings if f.name == "kl-coef-changed-midrun"]
    assert f.step == truth
    from logscope.check import check_path

    [checked] = check_path(path)  # `logscope check` on the log: same finding, change noted
    assert [x.step for x in checked.findings if x.name == "kl-coef-changed-midrun"] == [truth]
    assert any(
        detail_key in note
        for note in checked.run.parse_stats.notes
        for detail_key in [sim.details["kl-coef-changed-midrun"]["key"]]
    )
    detail = sim.details["kl-coef-changed-midrun"]
    assert (f.evidence["before"], f.evidence["after"]) == (detail["old"], detail["new"])
    sawtooth = [i for i, x in enumerate(report.findings) if x.name == "reward-sawtooth"]
    if sawtooth:  # when the sawtooth detector fires, one incident holds both
        mine = report.findings.index(f)
        assert any(mine in inc.findings and sawtooth[0] in inc.findings for inc in report.incidents)


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
@pytest.mark.parametrize("version", ["0.1", "0.3", "0.5", "0.9"])
def test_healthy_synthetic_configs_are_quiet_at_warning(algorithm, version):
    import logscope.synthetic as synthetic

    sim = synthetic.simulate(n_steps=30, algorithm=algorithm, seed=5, version=version)
    run = sim.to_run()
    findings = [d.detect(run) for d in config_lint_detectors()]
    loud = [f for fs in findings for f in fs if f.severity not in ("info",)]
    assert loud == [], [(f.name, f.message) for f in loud]


def config_lint_detectors():
    return [c() for c in detector_classes() if issubclass(c, config_lint.ConfigRule)]


# ---- predicted failures on a log that got through them (RiskRule) ---------------------------

OOM_CONFIG = {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 64}  # 64 × 1536 tokens


def trained_run(n_steps: int, events: list | None = None, kind: str = "verl-console") -> Run:
    from tests.helpers import make_run

    run = make_run(
        {"actor/pg_loss": np.zeros(n_steps), "val-core/acc": np.zeros(n_steps)},
        config=grpo_config(**OOM_CONFIG),
    )
    run.source = Source(kind, "x.log")
    run.events = list(events or [])
    return run


def oom_risk(run: Run):
    from logscope.detectors.config_batch import MicroBatchOomRisk

    return MicroBatchOomRisk().detect(run)


def test_predicted_oom_is_info_on_a_log_that_trained_without_one():
    [f] = oom_risk(trained_run(12))
    assert f.severity == "info"
    assert f.evidence["steps_without_failure"] == 12
    assert "12 training steps" in f.message and "not observed" in f.message
    assert f.advice  # the suggestion stays: the config is still wasteful or risky


def test_predicted_oom_stays_an_error_when_the_log_holds_an_error():
    from logscope.model import Event

    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    [f] = oom_risk(trained_run(12, [Event(40, 12, "log", oom)]))
    assert f.severity == "error" and "steps_without_failure" not in f.evidence


def test_predicted_oom_stays_an_error_before_launch_or_after_few_steps():
    from logscope.detectors.config_batch import MicroBatchOomRisk

    assert [f.severity for f in oom_risk(trained_run(0, kind="verl-yaml"))] == ["error"]
    assert [f.severity for f in oom_risk(trained_run(4))] == ["error"]  # default: 5 steps
    lenient = MicroBatchOomRisk(survived_steps=4).detect(trained_run(4))
    assert [f.severity for f in lenient] == ["info"]


def test_only_the_steps_of_the_segment_with_the_risky_config_count():
    risky, safe = grpo_config(**OOM_CONFIG), grpo_config()
    run = trained_run(30)
    run.config_segments = [ConfigSegment(1, safe), ConfigSegment(28, risky)]
    [f] = oom_risk(run)
    assert f.step == 28 and f.severity == "error"  # 3 steps under the risky config
    run.config_segments = [ConfigSegment(1, risky), ConfigSegment(28, safe)]
    [f] = oom_risk(run)
    assert f.severity == "info" and f.evidence["steps_without_failure"] == 27
