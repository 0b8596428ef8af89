"""The config rules on the seed articles' own examples, with the values the articles compute."""

from __future__ import annotations

from pathlib import Path

import pytest

from logscope.check import check_command, check_path, check_yaml, fixed_overrides
from logscope.exceptions import ConfigParseError
from logscope.report import Report

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "check"
GRPO = "algorithm.adv_estimator=grpo"
ACT = "actor_rollout_ref.actor"
RO = "actor_rollout_ref.rollout"


def lint(*overrides: str, version: str | None = None) -> Report:
    [report] = check_command(
        ["python3", "-m", "verl.trainer.main_ppo", *overrides], version=version
    )
    return report


def named(report: Report, name: str):
    return [f for f in report.findings if f.name == name]


def one(report: Report, name: str):
    found = named(report, name)
    assert len(found) == 1, [f.message for f in report.findings]
    return found[0]


def overrides_of(finding) -> list[str]:
    return [a.override for a in finding.advice if a.override]


# ---- seed 000 §1: micro batch -------------------------------------------------------------------


def test_seed000_s1_micro_64_on_7b_is_an_oom_risk_with_golden_16():
    report = lint(
        f"{ACT.rsplit('.', 1)[0]}.model.path=/models/Qwen2-7B-Instruct",
        "data.max_prompt_length=512",
        "data.max_response_length=1024",
        f"{ACT}.ppo_micro_batch_size_per_gpu=64",
    )
    f = one(report, "micro-batch-oom-risk")
    assert f.code == "LS501" and f.severity == "error" and f.step is None
    ev = f.evidence
    assert ev["tokens_per_micro_step"] == 64 * 1536 == 98_304
    assert ev["golden_micro_batch"] == 24 * 1024 // 1536 == 16
    assert ev["rules_fired"] == [
        "above 12,000 tokens per GPU per micro-step",
        "above the golden formula floor(24·1024 / (prompt + response))",
    ]
    assert "12,000-token limit" in f.message and "golden formula" in f.message
    assert "98,304" in f.message
    # A3 with the article's hidden size for Qwen2-7B (4096)
    assert ev["model_size_b"] == 7 and ev["hidden_size"] == 4096
    assert ev["memory_estimate"] == pytest.approx(64 * 1536 * 4096 * 2.5)
    assert overrides_of(f) == [f"{ACT}.ppo_micro_batch_size_per_gpu=16"]
    assert f.advice[0].current == 64


def test_model_size_from_a_qwen25_path():
    report = lint(
        "actor_rollout_ref.model.path=/hf/Qwen/Qwen2.5-7B-Instruct",
        "data.max_response_length=1024",
        f"{ACT}.ppo_micro_batch_size_per_gpu=64",
    )
    ev = one(report, "micro-batch-oom-risk").evidence
    assert ev["model_size_b"] == 7.0
    assert ev["hidden_size"] == 3584  # Qwen2.5-7B's real hidden size


def test_only_the_token_limit_fires_for_golden_value_on_long_sequences():
    # 16 × 1536 = 24,576 > 12,000, yet 16 is the golden formula's own value: the rules disagree
    report = lint("data.max_response_length=1024", f"{ACT}.ppo_micro_batch_size_per_gpu=16")
    f = one(report, "micro-batch-oom-risk")
    assert f.severity == "info"  # the value logscope itself suggests is not a warning
    assert f.evidence["rules_fired"] == ["above 12,000 tokens per GPU per micro-step"]
    assert f.advice == []  # no second value to fight the golden formula's


def test_small_micro_batch_is_quiet():
    report = lint("data.max_response_length=1024", f"{ACT}.ppo_micro_batch_size_per_gpu=4")
    assert named(report, "micro-batch-oom-risk") == []


def test_unset_actor_micro_batch_is_verls_error():
    f = one(lint(), "micro-batch-oom-risk")
    assert f.severity == "error" and "Please set at least one of" in f.message
    # golden for 512+512 is 24; 16 is the largest ≤ 24 dividing each GPU's 256 × 1 ÷ 8 = 32
    assert overrides_of(f) == [f"{ACT}.ppo_micro_batch_size_per_gpu=16"]
    dynamic = lint(f"{ACT}.use_dynamic_bsz=true")
    assert named(dynamic, "micro-batch-oom-risk") == []


def test_micro_batch_not_multiple_of_tp():
    f = one(lint(f"{ACT}.ppo_micro_batch_size_per_gpu=3"), "micro-batch-tp-mismatch")  # TP 2
    assert f.severity == "warning" and overrides_of(f) == [f"{ACT}.ppo_micro_batch_size_per_gpu=2"]
    report = lint(f"{ACT}.ppo_micro_batch_size_per_gpu=3", f"{RO}.tensor_model_parallel_size=1")
    assert named(report, "micro-batch-tp-mismatch") == []


# ---- seed 000 §2: rollout.n ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, severity, suggested",
    [(1, "error", 4), (2, "warning", 4), (5, "info", 4), (16, "warning", 8), (32, "warning", 8)],
)
def test_seed000_s2_group_size(n, severity, suggested):
    f = one(lint(GRPO, f"{RO}.n={n}"), "grpo-group-size")
    assert f.severity == severity
    assert f.evidence["rollout_n"] == n
    assert f"{RO}.n={suggested}" in overrides_of(f)


@pytest.mark.parametrize("n", [4, 8])
def test_seed000_s2_recommended_group_sizes_are_quiet(n):
    assert named(lint(GRPO, f"{RO}.n={n}"), "grpo-group-size") == []


def test_group_size_rule_is_for_grpo_only():
    assert named(lint(f"{RO}.n=1"), "grpo-group-size") == []  # gae (PPO) default


def test_seed000_s2_train_batch_500_with_n_8():
    report = lint(GRPO, f"{RO}.n=8", "data.train_batch_size=500")
    [f] = named(report, "batch-not-divisible-by-n")
    assert f.code == "LS504" and f.severity == "warning"
    assert f.evidence["remainder"] == 500 % 8 == 4
    assert overrides_of(f) == ["data.train_batch_size=496"]
    # verl's own check passes: 500 × 8 = 4000 is divisible by 8 GPUs
    assert "real_train_batch_size" not in f.message.split("verl checks")[0]


def test_verl_real_train_batch_size_check():
    report = lint("data.train_batch_size=500", "trainer.n_gpus_per_node=8")  # n = 1
    [f] = named(report, "batch-not-divisible-by-n")
    assert f.severity == "error"
    assert "real_train_batch_size (500) must be divisible by minimal possible batch size (8)" in (
        f.message
    )
    assert overrides_of(f) == ["data.train_batch_size=496"]
    # with dynamic batch size verl skips the check
    dyn = lint("data.train_batch_size=500", f"{ACT}.use_dynamic_bsz=true")
    assert named(dyn, "batch-not-divisible-by-n") == []


# ---- seed 000 §3: KL ---------------------------------------------------------------------------


def test_seed000_s3_kl_loss_coef_zero():
    report = lint(
        GRPO,
        f"{RO}.n=8",
        f"{ACT}.use_kl_loss=True",
        f"{ACT}.kl_loss_coef=0",
        "actor_rollout_ref.model.path=Qwen2-7B-Instruct",
    )
    f = one(report, "kl-coef-zero")
    assert f.code == "LS507" and f.severity == "error"
    assert overrides_of(f) == [f"{ACT}.kl_loss_coef=0.001"]


def test_kl_loss_coef_zero_without_kl_loss_is_a_warning_for_grpo():
    f = one(lint(GRPO, f"{ACT}.kl_loss_coef=0"), "kl-coef-zero")
    assert f.severity == "warning"
    assert f"{ACT}.use_kl_loss=true" in overrides_of(f)


@pytest.mark.parametrize(
    "model, suggested",
    [("Qwen2-0.5B-Instruct", 0.0005), ("Qwen2-72B-Instruct", 0.002)],
)
def test_seed000_s3_default_coefficient_vs_model_size(model, suggested):
    report = lint(f"actor_rollout_ref.model.path=/m/{model}", f"{ACT}.use_kl_loss=true")
    f = one(report, "kl-coef-scale-mismatch")
    assert f.severity == "info" and f.advice[0].suggested == suggested
    assert (
        named(
            lint("actor_rollout_ref.model.path=/m/Qwen2-7B", f"{ACT}.use_kl_loss=true"),
            "kl-coef-scale-mismatch",
        )
        == []
    )


# ---- seed 000 §4: gpu_memory_utilization ---------------------------------------------------------


def test_seed000_s4_gpu_memory_09_on_8_gpus():
    f = one(
        lint(f"{RO}.gpu_memory_utilization=0.9", "trainer.n_gpus_per_node=8"),
        "gpu-memory-utilization-risk",
    )
    assert f.code == "LS509" and f.severity == "error"
    assert f.evidence["recommended_range"] == [0.3, 0.4]
    assert f.advice[0].suggested == 0.4
    assert "0.3–0.4" in f.message
    offloaded = lint(
        f"{RO}.gpu_memory_utilization=0.8",
        f"{ACT}.fsdp_config.param_offload=True",
        f"{ACT}.fsdp_config.optimizer_offload=True",
    )
    assert one(offloaded, "gpu-memory-utilization-risk").severity == "warning"


def test_gpu_memory_range_depends_on_gpus_and_model_size():
    single = one(
        lint(f"{RO}.gpu_memory_utilization=0.6", "trainer.n_gpus_per_node=1"),
        "gpu-memory-utilization-risk",
    )
    assert single.severity == "warning" and single.evidence["recommended_range"] == [0.4, 0.5]
    small = lint(
        f"{RO}.gpu_memory_utilization=0.65",
        "trainer.n_gpus_per_node=2",
        "actor_rollout_ref.model.path=/m/Qwen2.5-0.5B-Instruct",
    )
    assert named(small, "gpu-memory-utilization-risk") == []
    assert named(lint(f"{RO}.gpu_memory_utilization=0.35"), "gpu-memory-utilization-risk") == []


# ---- seed 000 §5: shuffle, seed ----------------------------------------------------------------


def test_seed000_s5_shuffle_mismatch():
    f = one(lint("data.shuffle=True", f"{ACT}.shuffle=False"), "shuffle-mismatch")
    assert f.severity == "warning"
    assert overrides_of(f) == [f"{ACT}.shuffle=true"]
    assert named(lint("data.shuffle=True", f"{ACT}.shuffle=True"), "shuffle-mismatch") == []
    assert one(lint(), "shuffle-mismatch").severity == "info"  # verl's defaults differ


def test_seed_unset():
    f = one(lint(), "seed-unset")
    assert f.severity == "info" and overrides_of(f) == ["++data.seed=42"]
    assert named(lint("++data.seed=1"), "seed-unset") == []


# ---- seed 003 §5 --------------------------------------------------------------------------------


@pytest.mark.parametrize("tbs, mini", [(256, 64), (512, 128)])
def test_seed003_s51_article_batches_use_all_data(tbs, mini):
    # The article reports 92% → 99.7% data use for 256/64 → 512/128, but both divide exactly
    # (256/64 = 4, 512/128 = 4): by A7's arithmetic neither leaves a remainder, so no finding.
    report = lint(f"data.train_batch_size={tbs}", f"{ACT}.ppo_mini_batch_size={mini}")
    assert named(report, "mini-batch-not-divisor") == []


def test_seed003_s51_remainder_share_is_reported():
    f = one(
        lint("data.train_batch_size=500", f"{ACT}.ppo_mini_batch_size=128"),
        "mini-batch-not-divisor",
    )
    assert f.evidence["remainder"] == 500 - 3 * 128 == 116
    assert f.evidence["data_used_share"] == pytest.approx(384 / 500)
    assert "76.8%" in f.message
    assert overrides_of(f) == [f"{ACT}.ppo_mini_batch_size=125"]  # largest divisor of 500 ≤ 128


def test_mini_batch_larger_than_batch():
    f = one(
        lint("data.train_batch_size=128", f"{ACT}.ppo_mini_batch_size=256"),
        "mini-batch-larger-than-batch",
    )
    assert f.severity == "error" and overrides_of(f) == [f"{ACT}.ppo_mini_batch_size=128"]
    assert "must be >= actor.ppo_mini_batch_size" in f.message


def test_seed003_s52_response_length_mismatch():
    f = one(
        lint(f"{RO}.response_length=256", "data.max_response_length=200"),
        "response-length-mismatch",
    )
    assert f.code == "LS512" and f.severity == "warning"
    assert f.evidence["difference"] == 56  # the article says 64; 256 − 200 = 56
    assert overrides_of(f) == ["data.max_response_length=256"]  # what the article did
    # unset response_length follows data.max_response_length (verl's interpolation)
    assert named(lint("data.max_response_length=200"), "response-length-mismatch") == []
    interp = lint(
        f"{RO}.response_length=${{oc.select:data.max_response_length,512}}",
        "data.max_response_length=200",
    )
    assert named(interp, "response-length-mismatch") == []


def test_rollout_batching():
    f = one(lint(f"{RO}.max_num_seqs=1896"), "rollout-batching-mismatch")
    assert f.severity == "info"
    assert overrides_of(f) == [f"{RO}.max_num_batched_tokens=15168"]  # 8192 × 1896/1024
    bad = lint(f"{RO}.max_num_batched_tokens=512", f"{RO}.max_num_seqs=1024")
    messages = " ".join(f.message for f in named(bad, "rollout-batching-mismatch"))
    assert "must be greater than or equal to max_num_seqs" in messages
    assert "smaller than max_model_len" in messages  # 512 < 512 + 512


def test_log_prob_micro_batch():
    f = one(lint(f"{RO}.log_prob_micro_batch_size_per_gpu=8"), "log-prob-micro-batch")
    assert f.severity == "info" and overrides_of(f) == [
        f"{RO}.log_prob_micro_batch_size_per_gpu=16"
    ]
    f = one(lint(f"{RO}.log_prob_micro_batch_size_per_gpu=32"), "log-prob-micro-batch")
    assert "padding" in f.message
    unset = [f for f in named(lint(), "log-prob-micro-batch") if f.severity == "error"]
    assert len(unset) == 1  # rollout only: no reference model without a KL term
    with_ref = lint(f"{ACT}.use_kl_loss=true", f"{RO}.log_prob_micro_batch_size_per_gpu=16")
    [ref] = named(with_ref, "log-prob-micro-batch")
    assert "ref.log_prob_micro_batch_size_per_gpu" in ref.message


# ---- seed 003 §6: the tuned command and its baseline ----------------------------------------------


def test_seed003_s6_tuned_script_has_no_error():
    [report] = check_path(FIXTURES / "run_ppo_tuned.sh")
    assert report.run.source.kind == "verl-command"
    assert report.run.meta["entry"] == "verl.trainer.main_ppo"
    config = report.run.config()
    assert config["data"]["train_batch_size"] == 512
    assert config["trainer"]["logger"] == ["console"]
    assert config["actor_rollout_ref"]["actor"]["optim"]["lr"] == 1.5e-6
    assert not report.fails("warning"), [(f.name, f.message) for f in report.findings]


def test_seed003_baseline_script_gets_the_findings_the_article_fixed():
    [report] = check_path(FIXTURES / "run_ppo_baseline.sh")
    assert report.run.config()["actor_rollout_ref"]["model"]["path"] == (
        "/models/Qwen2.5-0.5B-Instruct"  # from $MODEL
    )
    fixes = set(fixed_overrides(report))
    article = {
        f"{RO}.gpu_memory_utilization=0.65",  # §2.1
        f"{RO}.max_num_batched_tokens=16384",  # §2.2
        f"{RO}.max_num_seqs=1896",  # §2.2
        f"{RO}.log_prob_micro_batch_size_per_gpu=16",  # §2.3
        "algorithm.kl_ctrl.kl_coef=0.0005",  # §4.2
        "data.max_response_length=256",  # §5.2
    }
    assert article <= fixes
    names = {f.name for f in report.findings}
    assert {
        "gpu-memory-utilization-risk",
        "rollout-batching-mismatch",
        "log-prob-micro-batch",
        "kl-coef-scale-mismatch",
        "response-length-mismatch",
    } <= names
    # after the fixes, nothing the article fixed is flagged again
    relinted = lint(*fixed_overrides(report))
    assert not relinted.fails("warning")


# ---- YAML input ---------------------------------------------------------------------------------


def test_yaml_config_and_flat_override_file(tmp_path):
    nested = tmp_path / "ppo.yaml"
    nested.write_text(
        "defaults:\n  - ppo_trainer\n  - _self_\n"
        "algorithm:\n  adv_estimator: grpo\n"
        "actor_rollout_ref:\n  rollout:\n    n: 1\n    gpu_memory_utilization: 0.9\n"
    )
    [report] = check_yaml(nested)
    assert report.run.source.kind == "verl-yaml"
    assert {"grpo-group-size", "gpu-memory-utilization-risk"} <= {f.name for f in report.findings}
    flat = tmp_path / "overrides.yml"
    flat.write_text("data.shuffle: true\nactor_rollout_ref.actor.shuffle: false\n")
    [report] = check_path(flat)
    assert one(report, "shuffle-mismatch").severity == "warning"


def test_bad_yaml_names_the_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("data:\n  train_batch_size: [1, 2\n")
    with pytest.raises(ConfigParseError) as info:
        check_path(bad)
    assert "bad.yaml:" in str(info.value)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n")
    with pytest.raises(ConfigParseError):
        check_path(scalar)


def test_script_without_verl_is_an_error(tmp_path):
    script = tmp_path / "prep.sh"
    script.write_text("python3 examples/data_preprocess/gsm8k.py --local_dir ~/data\n")
    with pytest.raises(ConfigParseError) as info:
        check_path(script)
    assert "no verl trainer command" in str(info.value)


def test_config_name_yaml_next_to_the_script_is_the_base(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "my_grpo.yaml").write_text(
        "algorithm:\n  adv_estimator: grpo\nactor_rollout_ref:\n  rollout:\n    n: 2\n"
    )
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo --config-path=config --config-name=my_grpo "
        "data.train_batch_size=64\n"
    )
    [report] = check_path(script)
    assert one(report, "grpo-group-size").evidence["rollout_n"] == 2
    assert report.run.config()["data"]["train_batch_size"] == 64


# ---- robustness: any override list lints or raises a user error ----------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from logscope.exceptions import LogscopeError  # noqa: E402

_KEYS = st.sampled_from(
    [
        "data.train_batch_size",
        "data.max_prompt_length",
        "data.max_response_length",
        f"{ACT}.ppo_micro_batch_size_per_gpu",
        f"{ACT}.ppo_mini_batch_size",
        f"{ACT}.kl_loss_coef",
        f"{ACT}.use_kl_loss",
        f"{RO}.n",
        f"{RO}.gpu_memory_utilization",
        f"{RO}.tensor_model_parallel_size",
        f"{RO}.max_num_seqs",
        f"{RO}.response_length",
        "trainer.n_gpus_per_node",
        "algorithm.adv_estimator",
        "actor_rollout_ref.model.path",
    ]
)
_VALUES = st.one_of(
    st.integers(-5, 5000).map(str),
    st.sampled_from(
        [
            "0",
            "0.0",
            "1e-6",
            "null",
            "true",
            "grpo",
            "$N",
            "${X}",
            "[1,2]",
            "",
            "nan",
            "inf",
            "-1",
            "Qwen2.5-0.5B",
            "{a:1}",
        ]
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_KEYS, _VALUES), max_size=8))
def test_any_values_lint_without_crashing(pairs):
    try:
        report = lint(*(f"{k}={v}" for k, v in pairs))
    except LogscopeError:
        return
    assert report.errors == []  # no rule raised


@settings(max_examples=15, deadline=None)  # --fix lints again ~10 times per example
@given(st.lists(st.tuples(_KEYS, _VALUES), max_size=8))
def test_any_values_fix_without_crashing(pairs):
    try:
        report = lint(*(f"{k}={v}" for k, v in pairs))
    except LogscopeError:
        return
    fixed_overrides(report)


def test_symbolic_values_are_skipped_and_noted():
    report = lint(
        GRPO,
        "actor_rollout_ref.rollout.n=$N",
        "$@",
        f"{RO}.response_length=${{data.max_response_length}}",
    )
    assert named(report, "grpo-group-size") == []  # n unknown: nothing assumed
    notes = " ".join(report.run.parse_stats.notes)
    assert "actor_rollout_ref.rollout.n=$N" in notes and "$@" in notes
    assert "response_length" not in notes  # an OmegaConf interpolation, not a shell variable


def test_normalized_mini_batch_must_split_into_micro_batches():
    args = [f"{ACT}.ppo_mini_batch_size=256", f"{RO}.n=5", f"{ACT}.ppo_micro_batch_size_per_gpu=64"]
    f = one(lint(*args), "normalized-mini-batch-mismatch")
    assert f.evidence["normalized_mini_batch"] == 256 * 5 // 8 == 160
    assert f.severity == "warning" and overrides_of(f) == [f"{ACT}.ppo_micro_batch_size_per_gpu=40"]
    assert one(lint(*args, version="0.5"), "normalized-mini-batch-mismatch").severity == "error"
    tiny = lint(f"{ACT}.ppo_mini_batch_size=2", f"{ACT}.ppo_micro_batch_size_per_gpu=1")
    assert "larger than 0" in one(tiny, "normalized-mini-batch-mismatch").message  # 2 ÷ 8 = 0
    assert (
        named(lint(f"{ACT}.ppo_micro_batch_size_per_gpu=8"), "normalized-mini-batch-mismatch") == []
    )


def test_micro_batch_set_twice_is_verls_error():
    report = lint(f"{ACT}.ppo_micro_batch_size=64", f"{ACT}.ppo_micro_batch_size_per_gpu=8")
    f = one(report, "micro-batch-oom-risk")
    assert f.severity == "error" and "You have set both" in f.message
    assert overrides_of(f) == [f"~{ACT}.ppo_micro_batch_size"]
    report = lint(
        f"{RO}.log_prob_micro_batch_size=64", f"{RO}.log_prob_micro_batch_size_per_gpu=16"
    )
    assert "You have set both" in one(report, "log-prob-micro-batch").message


# ---- issue 17: one consistent suggestion per rule, and a --fix fixed point ----------------------

import re  # noqa: E402

from logscope.check import check_text, fix_text, plan_fixes  # noqa: E402
from logscope.hydra_overrides import parse_override  # noqa: E402


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w.])\d+(?![\w.])", text))


def test_ls501_states_one_suggestion_that_satisfies_the_rule():
    # 1600-token sequences with TP 2: floor(24·1024/1600) = 15 → 14 (TP multiple, and a divisor
    # of each GPU's mini-batch 112 × 1 ÷ 8 = 14)
    args = [
        "data.max_prompt_length=512",
        "data.max_response_length=1088",
        f"{ACT}.ppo_mini_batch_size=112",
    ]
    f = one(lint(*args, f"{ACT}.ppo_micro_batch_size_per_gpu=64"), "micro-batch-oom-risk")
    assert f.severity == "error"
    [advice] = f.advice
    assert advice.suggested == 14 and advice.override == f"{ACT}.ppo_micro_batch_size_per_gpu=14"
    assert "Suggested: 14 (the largest value ≤ 15 that is a multiple of the rollout TP size 2" in (
        f.message
    )
    assert f.message.count("Suggested") == 1
    assert not re.search(r"\bA\d\b|A\d-safe", f.message + advice.rationale)  # no opaque labels
    # no second value (12,000 ÷ 1600 = 7, or 6 as a TP multiple, as before)
    assert not {"6", "7"} & _numbers(f.message) and "safe value" not in f.message
    # the suggested value is the rule's: checking it again gives nothing to apply or fix
    again = lint(*args, f"{ACT}.ppo_micro_batch_size_per_gpu=14")
    assert all(
        f.severity == "info" and not overrides_of(f) for f in named(again, "micro-batch-oom-risk")
    )


def test_ls501_above_12000_tokens_but_within_the_golden_formula_names_no_other_value():
    # was: "The A1-safe value is 7" and "A1 alone asks for ≤ 6" in one finding
    args = ["data.max_prompt_length=512", "data.max_response_length=1088"]
    f = one(lint(*args, f"{ACT}.ppo_micro_batch_size_per_gpu=14"), "micro-batch-oom-risk")
    assert f.severity == "info" and overrides_of(f) == []
    assert "7" not in _numbers(f.message) and "6" not in _numbers(f.message)
    assert "12,000" in f.message and "golden formula" in f.message


def test_ls504_says_the_gpu_count_is_verls_default_when_unset():
    f = one(lint("data.train_batch_size=500"), "batch-not-divisible-by-n")
    assert "8 GPUs (verl's default" in f.message
    f = one(
        lint("data.train_batch_size=500", "trainer.n_gpus_per_node=8"), "batch-not-divisible-by-n"
    )
    assert "default" not in f.message and "8 GPUs" in f.message


def test_counts_of_one_are_singular():
    f = one(
        lint("data.train_batch_size=12", f"{ACT}.ppo_mini_batch_size=8"), "mini-batch-not-divisor"
    )
    assert "1 full mini-batch uses 8 of 12" in f.message
    assert "1 full mini-batches" not in f.message
    f = one(
        lint("data.train_batch_size=7", "trainer.n_gpus_per_node=2", f"{RO}.n=1"),
        "batch-not-divisible-by-n",
    )
    assert "the 2 GPUs" in f.message
    g = one(
        lint(f"{RO}.response_length=201", "data.max_response_length=200"),
        "response-length-mismatch",
    )
    assert "up to 1 generated token per response" in g.message


def _applicable(finding) -> bool:
    """An advice `--fix` could apply: an override that changes the current value."""
    for advice in finding.advice:
        if not advice.override:
            continue
        ov = parse_override(advice.override)
        if ov.op == "delete" or finding.evidence.get("replaces"):
            return True
        current = advice.current
        if isinstance(current, str):
            from logscope.hydra_overrides import convert

            current = convert(current)
        if ov.value != current:
            return True
    return False


def _fixable(reports) -> list[str]:
    return [f"{f.code} {f.message}" for r in reports for f in r.findings if _applicable(f)]


def _assert_fixed_point(*overrides: str) -> None:
    [report] = check_command(["python3", "-m", "verl.trainer.main_ppo", *overrides])
    fixed = fix_text(report)
    assert _fixable(check_text(fixed)) == [], fixed


@pytest.mark.parametrize(
    "overrides",
    [
        # the issue's: micro 64 on 7B, n odd, batch not a multiple of n
        (
            GRPO,
            "data.train_batch_size=64",
            "data.max_response_length=1024",
            f"{ACT}.ppo_mini_batch_size=16",
            f"{ACT}.ppo_micro_batch_size_per_gpu=64",
            f"{RO}.n=5",
            "actor_rollout_ref.model.path=/models/Qwen2.5-7B-Instruct",
        ),
        ("data.train_batch_size=2", f"{ACT}.ppo_mini_batch_size=2", "trainer.n_gpus_per_node=8"),
        (GRPO, f"{RO}.n=3", "trainer.n_gpus_per_node=8", f"{ACT}.ppo_mini_batch_size=3"),
        (f"{ACT}.ppo_micro_batch_size=64", "data.max_response_length=20000"),
        (
            "actor_rollout_ref.model.path=/m/Qwen2.5-72B",
            f"{ACT}.use_kl_loss=true",
            f"{ACT}.kl_loss_coef=0.0001",
        ),
        (
            "actor_rollout_ref.model.path=/m/Qwen2.5-0.5B",
            "algorithm.use_kl_in_reward=true",
            "algorithm.kl_ctrl.kl_coef=0.01",
        ),
        (f"{RO}.max_num_batched_tokens=512", "data.max_response_length=2048"),
    ],
)
def test_check_of_the_fixed_command_has_nothing_left_to_fix(overrides):
    _assert_fixed_point(*overrides)


from hypothesis import given  # noqa: E402
from hypothesis import settings as hsettings  # noqa: E402
from hypothesis import strategies as hst  # noqa: E402


@hsettings(max_examples=15, deadline=None, derandomize=True)
@given(
    tbs=hst.integers(1, 1024),
    n=hst.integers(1, 17),
    mini=hst.integers(1, 512),
    micro=hst.integers(1, 128),
    gpus=hst.sampled_from([1, 2, 4, 6, 8]),
    nodes=hst.sampled_from([1, 2]),
    tp=hst.sampled_from([1, 2, 4]),
    response=hst.sampled_from([256, 1024, 3000, 12_000]),
    estimator=hst.sampled_from(["grpo", "gae"]),
)
def test_fix_reaches_a_fixed_point(tbs, n, mini, micro, gpus, nodes, tp, response, estimator):
    _assert_fixed_point(
        f"algorithm.adv_estimator={estimator}",
        f"data.train_batch_size={tbs}",
        f"data.max_response_length={response}",
        f"{RO}.n={n}",
        f"{ACT}.ppo_mini_batch_size={mini}",
        f"{ACT}.ppo_micro_batch_size_per_gpu={micro}",
        f"trainer.n_gpus_per_node={gpus}",
        f"trainer.nnodes={nodes}",
        f"{RO}.tensor_model_parallel_size={tp}",
    )


def test_fix_applies_the_smallest_set_of_changes():
    # n 5 → 4 alone makes 64 a multiple of n and 16 × 4 ÷ 8 = 8 a multiple of the micro batch 4
    report = lint(
        GRPO,
        "data.train_batch_size=64",
        f"{ACT}.ppo_mini_batch_size=16",
        f"{ACT}.ppo_micro_batch_size_per_gpu=4",
        f"{RO}.n=5",
        f"{RO}.log_prob_micro_batch_size_per_gpu=16",
        "data.seed=1",
        f"{ACT}.shuffle=true",
        f"{RO}.gpu_memory_utilization=0.4",
    )
    advised = {f.code for f in report.findings if _applicable(f)}
    assert {"LS503", "LS504", "LS516"} <= advised  # three findings, one cause
    assert [fix.override for fix in plan_fixes(report)] == [f"{RO}.n=4"]
