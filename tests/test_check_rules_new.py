"""The config rules of issue 19 item 5 (LS519–LS522): each fires on its bad config, is quiet on
the fixed one, on the check fixtures and on the real logs' configs, and `check --fix` clears it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from logscope.analyze import analyze_run
from logscope.check import (
    check_command,
    check_path,
    check_text,
    fix_text,
    plan_fixes,
)
from logscope.ingest import load
from logscope.ingest.pasted import quoted_items
from logscope.model import ConfigSegment, Run, Source
from logscope.report import Report

ROOT = Path(__file__).resolve().parents[1]
CHECK_FIXTURES = ROOT / "fixtures" / "check"
REAL_LOGS = ROOT.parent / "shared" / "real_logs"
NEW = ("LS519", "LS520", "LS521", "LS522")
ACT = "actor_rollout_ref.actor"
RO = "actor_rollout_ref.rollout"
REF = "actor_rollout_ref.ref"


def lint(*overrides: str, version: str | None = None) -> Report:
    [report] = check_command(
        ["python3", "-m", "verl.trainer.main_ppo", *overrides], version=version
    )
    return report


def found(report: Report, code: str):
    return [f for f in report.findings if f.code == code]


def one(report: Report, code: str):
    hits = found(report, code)
    assert len(hits) == 1, [(f.code, f.message) for f in report.findings]
    return hits[0]


def overrides_of(finding) -> list[str]:
    return [a.override for a in finding.advice if a.override]


def new_codes(reports) -> list[str]:
    return [f"{f.code} {f.message}" for r in reports for f in r.findings if f.code in NEW]


# The bad commands (one per rule), the fix each rule advises, and the code it trips.
BAD = {
    "LS519": (
        "data.max_prompt_length=1024",
        "data.max_response_length=3072",
        f"{RO}.max_model_len=3072",
    ),
    "LS520": (
        "algorithm.filter_groups.enable=True",
        "reward.reward_manager.name=dapo",
        "+reward.reward_kwargs.overlong_buffer_cfg.enable=True",
    ),
    "LS521": (
        "+async_training.trigger_parameter_sync_step=4",
        f"{ACT}.optim.lr_scheduler_type=cosine",
        "+rollout.total_rollout_steps=51200",
        f"{ACT}.ppo_mini_batch_size=32",
    ),
    "LS522": (
        f"{ACT}.ppo_micro_batch_size_per_gpu=8",
        f"{RO}.log_prob_micro_batch_size_per_gpu=64",
    ),
}
FIXED = {
    "LS519": f"{RO}.max_model_len=4096",
    "LS520": "algorithm.filter_groups.metric=acc",
    "LS521": f"{ACT}.optim.total_training_steps=1600",
    "LS522": f"{RO}.log_prob_micro_batch_size_per_gpu=16",
}


@pytest.mark.parametrize("code", NEW)
def test_fires_on_the_bad_command_and_advises_the_fix(code):
    f = one(lint(*BAD[code]), code)
    assert overrides_of(f) == [FIXED[code]]
    assert all(a.parameter == FIXED[code].split("=")[0] for a in f.advice)
    assert all(a.rationale and a.source for a in f.advice)
    assert f.references and f.step is None


@pytest.mark.parametrize("code", NEW)
def test_quiet_once_the_advice_is_applied(code):
    assert found(lint(*BAD[code], FIXED[code]), code) == []


@pytest.mark.parametrize("code", NEW)
def test_check_fix_clears_it(code):
    report = lint(*BAD[code])
    assert FIXED[code] in [fix.override for fix in plan_fixes(report)]
    fixed = fix_text(report)
    assert FIXED[code] in fixed
    assert [m for m in new_codes(check_text(fixed)) if m.startswith(code)] == []


def test_quiet_on_the_check_fixtures():
    scripts = sorted(CHECK_FIXTURES.glob("*.sh"))
    assert scripts
    for script in scripts:
        assert new_codes(check_path(script)) == [], script.name


def _launch_lines() -> list[tuple[str, str | None, list[str]]]:
    """(file, verl version from its name, overrides) of the real logs' `Error executing job
    with overrides` lines, as tests/test_check_schema.py reads them."""
    out = []
    for path in sorted(REAL_LOGS.glob("*.log")) if REAL_LOGS.is_dir() else []:
        text = path.read_text("utf-8", errors="replace")
        match = re.search(r"Error executing job with overrides: \[(.*)", text)
        version = re.search(r"verl(\d)(\d)", path.name)
        if match:
            release = f"{version.group(1)}.{version.group(2)}" if version else None
            out.append((path.name, release, quoted_items(match.group(1))))
    return out


@pytest.mark.skipif(not REAL_LOGS.is_dir(), reason=f"{REAL_LOGS} is absent")
def test_quiet_on_the_real_logs_configs():
    logs = sorted(REAL_LOGS.glob("*.log"))
    assert logs
    for log in logs:  # the config dumps analyze reads (most excerpts have none)
        for run in load(log):
            assert new_codes([analyze_run(run)]) == [], log.name
    launches = _launch_lines()
    assert launches
    for name, version, overrides in launches:  # the launch commands the logs quote
        assert new_codes([lint(*overrides, version=version)]) == [], name


def test_quiet_on_verl_defaults():
    assert new_codes([lint()]) == []


# ---- LS519 max-model-len-too-short --------------------------------------------------------------


def test_ls519_message_counts_the_response_tokens_left():
    f = one(lint(*BAD["LS519"]), "LS519")
    assert f.severity == "warning"
    assert f.evidence["shortfall"] == 1024 and f.evidence["prompt_plus_response"] == 4096
    assert "at most 2048 response tokens instead of 3072" in f.message
    assert "never counted" in f.message and "7823" in f.message


def test_ls519_context_no_longer_than_the_prompt_is_an_error():
    f = one(lint("data.max_prompt_length=1024", f"{RO}.max_model_len=1024"), "LS519")
    assert f.severity == "error" and "leaves no room to generate" in f.message
    assert overrides_of(f) == [f"{RO}.max_model_len=1536"]  # 1024 + verl's default 512


@pytest.mark.parametrize("value", ["null", "4096", "8192"])
def test_ls519_null_or_long_enough_is_quiet(value):
    report = lint(
        "data.max_prompt_length=1024",
        "data.max_response_length=3072",
        f"{RO}.max_model_len={value}",
    )
    assert found(report, "LS519") == []


# ---- LS520 dapo-filter-on-shaped-reward ---------------------------------------------------------


def test_ls520_default_metric_is_verl_09s_reward():
    f = one(lint(*BAD["LS520"]), "LS520")
    assert f.severity == "warning" and f.evidence["metric_defaulted"] is True
    assert "'reward' (verl 0.9's default)" in f.message
    assert "reward.reward_kwargs.overlong_buffer_cfg.enable=True" in f.message
    assert f.advice[0].current is None  # unset on the command line


@pytest.mark.parametrize("metric", ["seq_reward", "seq_final_reward"])
def test_ls520_recipe_metrics_with_the_recipe_overlong_buffer(metric):
    report = lint(
        "algorithm.filter_groups.enable=True",
        f"algorithm.filter_groups.metric={metric}",
        "reward_model.reward_manager=dapo",
        "+reward_model.overlong_buffer.enable=True",
    )
    f = one(report, "LS520")
    assert f.evidence["overlong_penalty_key"] == "reward_model.overlong_buffer.enable"
    assert overrides_of(f) == ["algorithm.filter_groups.metric=acc"]


def test_ls520_seq_final_reward_is_shaped_by_kl_in_reward_alone():
    report = lint(
        "algorithm.filter_groups.enable=True",
        "algorithm.filter_groups.metric=seq_final_reward",
        "algorithm.use_kl_in_reward=True",
    )
    assert "in-reward KL penalty" in one(report, "LS520").message


@pytest.mark.parametrize(
    "extra",
    [
        ("algorithm.filter_groups.metric=acc",),  # the recipe's choice
        ("algorithm.filter_groups.metric=score",),  # recorded before the overlong penalty
        ("algorithm.filter_groups.enable=False",),  # no dynamic sampling
        ("+reward.reward_kwargs.overlong_buffer_cfg.enable=False",),  # no shaping
        ("reward.reward_manager.name=naive",),  # the naive manager ignores the buffer
    ],
)
def test_ls520_quiet_without_a_shaped_metric(extra):
    assert found(lint(*BAD["LS520"], *extra), "LS520") == []


def test_ls520_overlong_buffer_without_the_dapo_manager_on_verl_09_is_quiet():
    report = lint(
        "algorithm.filter_groups.enable=True",
        "+reward.reward_kwargs.overlong_buffer_cfg.enable=True",
    )
    assert found(report, "LS520") == []  # verl 0.9's default manager (naive) adds no penalty


def test_ls520_no_default_metric_before_verl_09():
    args = ("algorithm.filter_groups.enable=True", "+reward_model.overlong_buffer.enable=True")
    assert found(lint(*args, version="0.5.0"), "LS520") == []
    assert found(
        lint(*args, "+algorithm.filter_groups.metric=seq_reward", version="0.5.0"), "LS520"
    )


def test_ls520_verls_dapo_v1_command_has_no_key_finding():
    """A verl 0.9 DAPO command (the reward keys of verl's fully-async DAPO example, run by
    main_ppo's V1 trainer): its keys are verl's or added with `+`, so LS517/LS518 stay quiet."""
    report = lint(
        "algorithm.adv_estimator=grpo",
        "algorithm.filter_groups.enable=True",
        "algorithm.filter_groups.metric=acc",
        "algorithm.filter_groups.max_inflight_gen_batches=1",
        "reward.reward_manager.name=dapo",
        "+reward.reward_kwargs.overlong_buffer_cfg.enable=True",
        "+reward.reward_kwargs.overlong_buffer_cfg.len=4096",
        "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0",
        "+reward.reward_kwargs.overlong_buffer_cfg.log=False",
        "+reward.reward_kwargs.max_resp_len=8192",
        "data.max_prompt_length=2048",
        "data.max_response_length=8192",
    )
    assert [f.message for f in report.findings if f.code in ("LS517", "LS518")] == []
    assert new_codes([report]) == []


# ---- LS521 fully-async-lr-without-horizon -------------------------------------------------------

# verl's own fully-async DAPO example (verl/experimental/fully_async_policy/shell/
# dapo_7b_math_fsdp2_8_8.sh), its shell variables expanded
FULLY_ASYNC_EXAMPLE = [
    "data.max_prompt_length=2048",
    "data.max_response_length=8192",
    "data.train_batch_size=0",
    "data.gen_batch_size=1",
    f"{RO}.n=16",
    "algorithm.adv_estimator=grpo",
    f"{ACT}.use_dynamic_bsz=True",
    f"{ACT}.optim.lr=1e-6",
    f"{ACT}.optim.lr_warmup_steps=10",
    f"{ACT}.optim.weight_decay=0.1",
    f"{ACT}.ppo_mini_batch_size=32",
    "reward.reward_manager.name=dapo",
    "+reward.reward_kwargs.overlong_buffer_cfg.enable=True",
    "+reward.reward_kwargs.overlong_buffer_cfg.len=4096",
    "rollout.total_rollout_steps=51200",
    "async_training.staleness_threshold=0.1",
    "async_training.trigger_parameter_sync_step=4",
    "async_training.require_batches=4",
    "async_training.partial_rollout=True",
]
ENTRY = "verl.experimental.fully_async_policy.fully_async_main"


def fully_async(*extra: str) -> Report:
    (report,) = check_command(["python3", "-m", ENTRY, *FULLY_ASYNC_EXAMPLE, *extra])
    assert report.run.meta["entry"] == ENTRY
    return report


def test_ls521_verls_fully_async_example_is_quiet_and_key_checks_skip_it():
    report = fully_async()
    assert new_codes([report]) == []  # constant LR (verl's default)
    assert [f for f in report.findings if f.code in ("LS517", "LS518")] == []


def test_ls521_the_example_with_a_cosine_schedule():
    f = one(fully_async(f"{ACT}.optim.lr_scheduler_type=cosine"), "LS521")
    assert f.severity == "warning"
    # 51,200 rollout samples / (32 prompts per mini batch × 4 batches per update) = 400 updates
    assert overrides_of(f) == [f"{ACT}.optim.total_training_steps=400"]
    assert f.evidence["trigger_parameter_sync_step"] == 4
    message = f.message
    assert "horizon is actor_rollout_ref.actor.optim.total_training_steps as configured (-1)" in (
        message
    )
    assert "min_lr" in message and "6683" in message
    assert "trainer.total_training_steps is not read" in message


def test_ls521_deprecated_warmup_style_is_the_key_advised():
    f = one(fully_async(f"{ACT}.optim.warmup_style=cosine"), "LS521")
    assert f.evidence["schedule_key"] == f"{ACT}.optim.warmup_style"


def test_ls521_without_total_rollout_steps_advises_a_constant_schedule():
    f = one(
        lint("+async_training.require_batches=1", f"{ACT}.optim.lr_scheduler_type=cosine"), "LS521"
    )
    assert overrides_of(f) == [f"{ACT}.optim.lr_scheduler_type=constant"]


@pytest.mark.parametrize(
    "extra",
    [
        (f"{ACT}.optim.lr_scheduler_type=constant",),
        (f"{ACT}.optim.lr_scheduler_type=cosine", f"{ACT}.optim.total_training_steps=400"),
    ],
)
def test_ls521_quiet_with_a_constant_schedule_or_a_horizon(extra):
    assert found(fully_async(*extra), "LS521") == []


def test_ls521_needs_the_fully_async_config():
    assert found(lint(f"{ACT}.optim.lr_scheduler_type=cosine"), "LS521") == []  # main_ppo sets it


def test_ls521_on_a_logged_config_dump():
    config = {
        "async_training": {"trigger_parameter_sync_step": 4, "require_batches": 1},
        "rollout": {"total_rollout_steps": 6400},
        "actor_rollout_ref": {
            "actor": {
                "ppo_mini_batch_size": 64,
                "optim": {"lr_scheduler_type": "cosine", "total_training_steps": -1},
            }
        },
        "critic": {"optim": {"lr_scheduler_type": "constant", "total_training_steps": -1}},
    }
    run = Run(
        id="log",
        source=Source("verl-console", "x.log"),
        meta={"verl_version": "0.9.1"},
        config_segments=[ConfigSegment(1, config)],
    )
    [f] = [f for f in analyze_run(run).findings if f.code == "LS521"]
    assert f.step == 1 and overrides_of(f) == [f"{ACT}.optim.total_training_steps=100"]


# ---- LS522 log-prob-micro-batch-ratio -----------------------------------------------------------


def test_ls522_message_is_about_the_ratio_not_ls514s_value():
    report = lint(*BAD["LS522"])
    f = one(report, "LS522")
    assert f.severity == "info" and f.evidence["ratio"] == 8 and f.evidence["band"] == [2, 32]
    assert "is 8× larger than actor.ppo_micro_batch_size_per_gpu=8" in f.message
    [ls514] = found(report, "LS514")  # 64 > 20: LS514's own (padding) finding, distinct
    assert "padding" in ls514.message and "ppo_micro" not in ls514.message
    assert f.message != ls514.message


def test_ls522_smaller_log_prob_micro_batch():
    f = one(
        lint(
            f"{ACT}.ppo_micro_batch_size_per_gpu=128", f"{RO}.log_prob_micro_batch_size_per_gpu=16"
        ),
        "LS522",
    )
    assert "smaller than" in f.message and overrides_of(f) == [
        f"{RO}.log_prob_micro_batch_size_per_gpu=32"
    ]


def test_ls522_reference_model_only_with_a_kl_term():
    args = (f"{ACT}.ppo_micro_batch_size_per_gpu=4", f"{RO}.log_prob_micro_batch_size_per_gpu=16")
    assert found(lint(*args, f"{REF}.log_prob_micro_batch_size_per_gpu=64"), "LS522") == []
    f = one(
        lint(*args, f"{REF}.log_prob_micro_batch_size_per_gpu=64", f"{ACT}.use_kl_loss=True"),
        "LS522",
    )
    assert f.evidence["parameter"] == f"{REF}.log_prob_micro_batch_size_per_gpu"


@pytest.mark.parametrize(
    "args",
    [
        (
            f"{ACT}.ppo_micro_batch_size_per_gpu=4",
            f"{RO}.log_prob_micro_batch_size_per_gpu=16",
        ),  # 4×
        (f"{ACT}.ppo_micro_batch_size_per_gpu=8", f"{RO}.log_prob_micro_batch_size_per_gpu=16"),
        (
            f"{ACT}.ppo_micro_batch_size_per_gpu=8",
            f"{RO}.log_prob_micro_batch_size_per_gpu=64",
            f"{ACT}.use_dynamic_bsz=True",
        ),
        (
            f"{ACT}.ppo_micro_batch_size_per_gpu=8",
            f"{RO}.log_prob_micro_batch_size_per_gpu=64",
            f"{RO}.log_prob_use_dynamic_bsz=True",
        ),
        (f"{RO}.log_prob_micro_batch_size_per_gpu=64",),  # PPO micro batch unset: LS501's
    ],
)
def test_ls522_quiet(args):
    assert found(lint(*args), "LS522") == []


def test_ls514_defers_to_ls522_when_its_value_would_break_the_ratio():
    # PPO micro batch 2: LS514's 16 is 8× away, so LS514 stays quiet and LS522 advises 8
    report = lint(
        f"{ACT}.ppo_micro_batch_size_per_gpu=2", f"{RO}.log_prob_micro_batch_size_per_gpu=16"
    )
    assert [f.severity for f in found(report, "LS514")] == []
    assert overrides_of(one(report, "LS522")) == [f"{RO}.log_prob_micro_batch_size_per_gpu=8"]
    assert (
        found(
            lint(
                f"{ACT}.ppo_micro_batch_size_per_gpu=2", f"{RO}.log_prob_micro_batch_size_per_gpu=8"
            ),
            "LS514",
        )
        == []
    )
    # within the band LS514 is unchanged
    assert found(
        lint(f"{ACT}.ppo_micro_batch_size_per_gpu=4", f"{RO}.log_prob_micro_batch_size_per_gpu=8"),
        "LS514",
    )


@pytest.mark.parametrize("ppo", [1, 2, 3, 4, 8, 64, 100, 256])
@pytest.mark.parametrize("logprob", [1, 4, 8, 16, 20, 64, 512])
def test_ls514_and_ls522_reach_a_fixed_point(ppo, logprob):
    report = lint(
        f"{ACT}.ppo_micro_batch_size_per_gpu={ppo}",
        f"{RO}.log_prob_micro_batch_size_per_gpu={logprob}",
        "data.max_response_length=256",
    )
    fixed = check_text(fix_text(report))
    left = [
        f"{f.code} {f.message}" for r in fixed for f in r.findings if f.code in ("LS514", "LS522")
    ]
    assert left == [], fix_text(report)
