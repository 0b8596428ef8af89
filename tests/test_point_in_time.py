"""Point-in-time judgements (issue 15): excerpts of one to three steps, where the change-based
detectors have no history, are judged by the recent level against `logscope.health`'s ranges.

Every judgement fires on a made-up step that shows it, stays quiet on the healthy neighbour
just inside the range, and respects its trap (V1 clip ratio, token-sum entropy, `.3f` zeros,
validation steps).
"""

from __future__ import annotations

import pytest

from logscope.health import REFERENCES
from logscope.ingest.console import read_text
from logscope.synthetic import simulate
from tests._short_logs import (
    CRITIC,
    analyze,
    excerpt,
    grpo_config,
    healthy,
    named,
    step_line,
    warnings_plus,
)

# ---- healthy steps stay quiet --------------------------------------------------------------


@pytest.mark.parametrize("three", [False, True], ids=["repr", ".3f"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_healthy_steps_are_quiet(n: int, three: bool) -> None:
    report = analyze(excerpt(*[healthy()] * n, three=three, config=grpo_config()))
    assert warnings_plus(report) == []
    assert not [f for f in report.findings if f.code in ("LS110", "LS111", "LS141", "LS211")]


def test_healthy_ppo_step_with_a_critic_is_quiet() -> None:
    report = analyze(excerpt(healthy(**CRITIC), first=120))
    assert report.findings == []


def test_long_healthy_run_is_unchanged() -> None:
    """The history detectors own long runs: the point-in-time paths add nothing there."""
    run = simulate(300, "grpo", seed=3).to_run()
    report = analyze(run)
    assert warnings_plus(report) == []
    assert not named(report, "response-length-clipped") and not named(report, "entropy-blowup")


# ---- entropy --------------------------------------------------------------------------------


def test_entropy_near_zero_in_one_step_is_a_collapse() -> None:
    (f,) = named(
        analyze(excerpt(healthy(**{"actor/entropy": 0.004}), first=1049)), "entropy-collapse"
    )
    assert f.severity == "warning" and f.step == 1049
    assert "0.004" in f.message and "too few to see the fall" in f.message
    assert f.evidence["alarm_below"] == REFERENCES["entropy"].alarm_low
    assert {a.parameter for a in f.advice} >= {"actor_rollout_ref.actor.entropy_coeff"}


def test_rounded_zero_entropy_of_a_3f_log_is_a_collapse() -> None:
    step = healthy(**{"actor/entropy": None, "actor/entropy_loss": 0.0})
    (f,) = named(analyze(excerpt(step, three=True)), "entropy-collapse")
    assert f.metric == "actor/entropy_loss" and "0.000 (|x| < 5e-4)" in f.message


@pytest.mark.parametrize("entropy", [0.098, 0.025])
def test_low_but_not_collapsed_entropy_is_quiet(entropy: float) -> None:
    report = analyze(excerpt(healthy(**{"actor/entropy": entropy})))
    assert not named(report, "entropy-collapse")
    (row,) = [r for r in report.health if r.key == "entropy"]
    assert row.verdict == "low"  # below the healthy 0.1–2 range, above the 0.02 alarm


def test_the_median_of_the_last_steps_decides() -> None:
    steps = [healthy(**{"actor/entropy": v}) for v in (0.3, 0.01, 0.01)]
    assert named(analyze(excerpt(*steps)), "entropy-collapse")
    steps = [healthy(**{"actor/entropy": v}) for v in (0.01, 0.3, 0.3)]
    assert not named(analyze(excerpt(*steps)), "entropy-collapse")


def test_nan_entropy_is_not_a_collapse_or_blowup() -> None:
    report = analyze(excerpt(healthy(**{"actor/entropy": float("nan")})))
    names = {f.name for f in report.findings}
    assert "non-finite-metric" in names
    assert not names & {"entropy-collapse", "entropy-blowup"}


@pytest.mark.parametrize(("entropy", "severity"), [(4.2, "warning"), (7.5, "error")])
def test_entropy_far_above_range_is_a_blowup(entropy: float, severity: str) -> None:
    (f,) = named(analyze(excerpt(healthy(**{"actor/entropy": entropy}))), "entropy-blowup")
    assert f.severity == severity and f.code == "LS111"
    assert "near-random" in f.message


def test_entropy_just_inside_the_range_is_quiet() -> None:
    assert not named(analyze(excerpt(healthy(**{"actor/entropy": 2.9}))), "entropy-blowup")


def test_token_sum_entropy_is_not_a_blowup() -> None:
    config = grpo_config()
    config["actor_rollout_ref"]["actor"]["loss_agg_mode"] = "seq-mean-token-sum"
    report = analyze(excerpt(healthy(**{"actor/entropy": 8.0}), config=config))
    assert not named(report, "entropy-blowup")
    (row,) = [r for r in report.health if r.key == "entropy"]
    assert row.verdict == "no range" and "loss_agg_mode=seq-mean-token-sum" in row.note
    # the same value with a per-token mean is a blow-up
    assert named(analyze(excerpt(healthy(**{"actor/entropy": 8.0}))), "entropy-blowup")


def test_entropy_above_any_vocabulary_is_a_sum_not_a_blowup() -> None:
    report = analyze(excerpt(healthy(**{"actor/entropy": 95.0})))  # no config to say so
    assert not named(report, "entropy-blowup")
    (row,) = [r for r in report.health if r.key == "entropy"]
    assert row.verdict == "no range" and "ln(vocabulary)" in row.note


# ---- KL and gradient norms between consecutive steps ----------------------------------------


def test_kl_rising_tenfold_above_its_band_between_two_steps_is_a_jump() -> None:
    steps = [healthy(**{"actor/kl_loss": v}) for v in (0.006, 0.09)]
    (f,) = named(analyze(excerpt(*steps, first=40)), "kl-jump")
    assert f.metric == "actor/kl_loss" and (f.step, f.end_step) == (40, 41)
    assert "15×" in f.message and "≤ 0.05" in f.message
    assert {a.parameter for a in f.advice} >= {"actor_rollout_ref.actor.optim.lr"}


def test_kl_rising_in_warm_up_or_within_its_band_is_quiet() -> None:
    warm = [healthy(**{"actor/kl_loss": v}) for v in (0.0001, 0.003, 0.009)]
    assert not named(analyze(excerpt(*warm)), "kl-jump")
    within = [healthy(**{"actor/kl_loss": v}) for v in (0.003, 0.04)]
    assert not named(analyze(excerpt(*within, first=50)), "kl-jump")


def test_kl_far_above_its_band_in_one_step_is_a_jump() -> None:
    (f,) = named(analyze(excerpt(healthy(**{"actor/kl_loss": 0.41}), first=300)), "kl-jump")
    assert "far out of band" in f.message
    assert not named(analyze(excerpt(healthy(**{"actor/kl_loss": 0.2}), first=300)), "kl-jump")


def test_ppo_kl_far_above_its_range_is_a_jump() -> None:
    (f,) = named(analyze(excerpt(healthy(**{"actor/ppo_kl": 0.15}), first=9)), "kl-jump")
    assert f.metric == "actor/ppo_kl"
    assert not named(analyze(excerpt(healthy(**{"actor/ppo_kl": 0.0104}))), "kl-jump")


def test_grad_norm_rising_tenfold_above_the_clip_is_a_spike() -> None:
    steps = [healthy(**{"actor/grad_norm": v}) for v in (0.42, 6.93, 0.45)]
    (f,) = named(analyze(excerpt(*steps, first=410)), "grad-norm-spike")
    assert f.step == 411 and f.severity == "warning" and f.evidence["clip"] == 1.0
    quiet = [healthy(**{"actor/grad_norm": v}) for v in (0.3, 2.9)]  # 10× but under 5× the clip
    assert not named(analyze(excerpt(*quiet, first=410)), "grad-norm-spike")
    first = [healthy(**{"actor/grad_norm": v}) for v in (0.4, 8.0)]  # warm-up
    assert not named(analyze(excerpt(*first)), "grad-norm-spike")


def test_one_large_critic_grad_norm_is_no_spike() -> None:
    """No step before it to compare with: the critic info (LS210) says it, not LS130."""
    report = analyze(excerpt(healthy(**{**CRITIC, "critic/grad_norm": 65.5}), first=1049))
    assert not named(report, "grad-norm-spike") and named(report, "critic-value-error")


# ---- responses at the length cap ------------------------------------------------------------


def test_clip_ratio_at_or_above_a_tenth_is_clipping_with_the_cap_from_the_log() -> None:
    step = healthy(**{"response_length/clip_ratio": 0.199, "response_length/max": 128.0})
    (f,) = named(analyze(excerpt(step)), "response-length-clipped")
    assert f.severity == "warning" and f.code == "LS141"
    assert "20% of the responses" in f.message and "is 128: the cap" in f.message
    (adv,) = f.advice
    assert adv.parameter == "data.max_response_length" and adv.current is None
    assert adv.suggested == 256 and adv.override == "data.max_response_length=256"


def test_clipping_advice_uses_the_config() -> None:
    step = healthy(**{"response_length/clip_ratio": 0.25})
    (f,) = named(analyze(excerpt(step, config=grpo_config())), "response-length-clipped")
    by_key = {a.parameter: a for a in f.advice}
    assert by_key["data.max_response_length"].current == 1024
    assert by_key["data.max_response_length"].override == "data.max_response_length=2048"
    assert by_key["actor_rollout_ref.rollout.response_length"].suggested == 2048


@pytest.mark.parametrize("ratio", [0.062, 0.074, 0.099])
def test_clip_ratio_below_a_tenth_is_quiet(ratio: float) -> None:
    report = analyze(
        excerpt(healthy(**{"response_length/clip_ratio": ratio}), config=grpo_config())
    )
    assert not named(report, "response-length-clipped")


def test_max_at_the_cap_alone_is_not_many() -> None:
    """Healthy runs reach the cap whenever one response is cut: the ratio says how many."""
    step = healthy(**{"response_length/clip_ratio": 0.004, "response_length/max": 1024.0})
    assert not named(analyze(excerpt(step, step, config=grpo_config())), "response-length-clipped")


def test_without_a_clip_ratio_the_cap_says_some_responses_are_cut() -> None:
    step = healthy(**{"response_length/clip_ratio": None, "response_length/max": 1024.0})
    (f,) = named(analyze(excerpt(step, step, config=grpo_config())), "response-length-clipped")
    assert f.severity == "info" and "not logged" in f.message


V1 = "(TaskRunnerV1 pid=7) "


def test_v1_clip_ratio_without_the_cap_reached_is_ignored() -> None:
    """verl 0.9 V1 compares with the padded batch max: 0.3 with max 900 < cap 1024 is noise."""
    step = healthy(**{"response_length/clip_ratio": 0.3, "response_length/max": 900.0})
    run = excerpt(step, step, config=grpo_config(), prefix=V1)
    assert run.meta["verl_version"] == "0.9"
    report = analyze(run)
    assert not named(report, "response-length-clipped")
    (row,) = [r for r in report.health if r.key == "response_clip_ratio"]
    assert row.value == 0.0 and row.verdict == "ok" and "V1" in row.note


def test_v1_clip_ratio_counts_on_steps_at_the_cap() -> None:
    step = healthy(**{"response_length/clip_ratio": 0.3, "response_length/max": 1024.0})
    (f,) = named(analyze(excerpt(step, config=grpo_config(), prefix=V1)), "response-length-clipped")
    assert f.evidence["judged_by"] == "max == cap (verl 0.9 V1)" and "V1" in f.message


def test_v1_without_a_config_cannot_judge_the_ratio() -> None:
    step = healthy(**{"response_length/clip_ratio": 0.3, "response_length/max": 900.0})
    report = analyze(excerpt(step, prefix=V1))
    assert not named(report, "response-length-clipped")
    (row,) = [r for r in report.health if r.key == "response_clip_ratio"]
    assert row.verdict == "unreliable"


def test_v0_trainer_on_09_trusts_the_ratio() -> None:
    step = healthy(**{"response_length/clip_ratio": 0.3, "training/num_turns/mean": 1.0})
    run = excerpt(step)  # TaskRunner (legacy trainer), dated 0.9 by a 0.9 key
    assert run.meta["verl_version"] == "0.9"
    assert named(analyze(run), "response-length-clipped")


def test_the_aborted_response_keys_date_a_log_from_06() -> None:
    step = healthy(**{"response/aborted_ratio": 0.0, "response_length_non_aborted/mean": 300.0})
    assert excerpt(step).meta["verl_version"] == "0.6-0.7"  # the keys came in verl 0.6.0


# ---- advantages and rewards ------------------------------------------------------------------

ZERO_REWARD = {
    "critic/score/mean": 0.0,
    "critic/score/max": 0.0,
    "critic/score/min": 0.0,
    "critic/advantages/mean": 0.0,
    "critic/advantages/max": 0.0,
    "critic/advantages/min": 0.0,
    "actor/pg_loss": 0.0,
}


def test_every_score_zero_and_no_advantage_is_a_collapse_where_the_reward_never_fires() -> None:
    report = analyze(excerpt(healthy(**ZERO_REWARD), three=True, first=4))
    (f,) = named(report, "advantage-collapse")
    assert f.severity == "warning" and f.step == 4
    assert "reward never fires" in f.message and "pg_loss is ~0" in f.message
    assert f.advice[0].parameter == "custom_reward_function.path"
    assert not named(report, "reward-plateau")  # one story, told once


def test_a_reward_stuck_at_zero_over_several_steps_is_also_a_plateau() -> None:
    zero = healthy(**ZERO_REWARD)
    report = analyze(excerpt(zero, zero, zero, first=11))
    assert named(report, "advantage-collapse")
    (f,) = named(report, "reward-plateau")
    assert f.severity == "warning" and "all 3 logged steps" in f.message
    # scores that are constant within each step but differ between steps do not stand still
    other = healthy(**{**ZERO_REWARD, "critic/score/max": 1.0, "critic/score/min": 1.0})
    assert not named(analyze(excerpt(zero, other, first=11)), "reward-plateau")


def test_a_constant_nonzero_score_is_stuck() -> None:
    score = {"critic/score/mean": 0.1, "critic/score/max": 0.1, "critic/score/min": 0.1}
    (f,) = named(analyze(excerpt(healthy(**{**ZERO_REWARD, **score}))), "advantage-collapse")
    assert "stuck at one value" in f.message and "format score" in f.message


def test_zero_advantages_with_varying_scores_point_at_the_group_size() -> None:
    step = healthy(**{k: v for k, v in ZERO_REWARD.items() if "score" not in k})
    (f,) = named(analyze(excerpt(step, step, config=grpo_config())), "advantage-collapse")
    assert f.advice[0].parameter == "actor_rollout_ref.rollout.n"


def test_zero_advantages_but_a_policy_loss_are_not_a_collapse() -> None:
    step = healthy(**{**ZERO_REWARD, "actor/pg_loss": 0.2})
    assert not named(analyze(excerpt(step)), "advantage-collapse")


def test_one_nonzero_advantage_step_among_three_is_not_a_collapse() -> None:
    steps = [healthy(**ZERO_REWARD), healthy(), healthy(**ZERO_REWARD)]
    assert not named(analyze(excerpt(*steps)), "advantage-collapse")


def test_a_reward_that_never_fires_with_a_critic_is_a_plateau_warning() -> None:
    score = {"critic/score/mean": 0.0, "critic/score/max": 0.0, "critic/score/min": 0.0}
    step = healthy(**{**CRITIC, **score})
    report = analyze(excerpt(step, step, first=30))
    (f,) = named(report, "reward-plateau")
    assert f.severity == "warning" and "reward never fires" in f.message
    assert not named(report, "advantage-collapse")  # the critic's advantages are not 0
    assert [a.parameter for a in f.advice] == ["custom_reward_function.path", "data.train_files"]


def test_a_score_that_varies_is_no_plateau() -> None:
    assert not named(analyze(excerpt(healthy(**CRITIC), first=30)), "reward-plateau")


# ---- rollout share of the step -------------------------------------------------------------

GEN_BOUND = {"timing_s/gen": 100.1, "timing_s/update_actor": 20.3, "timing_s/step": 131.6}


def test_generation_dominating_one_step_is_a_bottleneck() -> None:
    (f,) = named(analyze(excerpt(healthy(**GEN_BOUND), first=4)), "rollout-bottleneck")
    assert f.severity == "warning" and f.step == 4 and "76%" in f.message
    assert f.evidence["slowest_other_phase"] == "update_actor"


def test_a_step_that_also_ran_validation_is_judged_without_its_seconds() -> None:
    # 5.46 of the 8.8 s left once 21.2 s of validation are out: 62 %, 2.03× the update — a
    # pass of both rules by less than a step's own wander, so info, not a warning
    step = healthy(**{
        "timing_s/gen": 5.46, "timing_s/old_log_prob": 0.59, "timing_s/ref": None,
        "timing_s/update_actor": 2.69, "timing_s/testing": 21.2, "timing_s/step": 30.0,
    })  # fmt: skip
    report = analyze(excerpt(step))
    (f,) = named(report, "rollout-bottleneck")
    assert f.severity == "info" and "21.2 s of validation" in f.message
    (row,) = [r for r in report.health if r.key == "gen_share"]
    assert row.verdict == "unreliable" and "validation" in row.note


def test_steps_with_validation_count_once_its_seconds_are_out() -> None:
    with_val = healthy(**{**GEN_BOUND, "timing_s/testing": 80.0, "timing_s/step": 211.6})
    plain = healthy()  # gen 30 of 90 s
    assert not named(analyze(excerpt(plain, with_val)), "rollout-bottleneck")
    (f,) = named(analyze(excerpt(with_val, healthy(**GEN_BOUND))), "rollout-bottleneck")
    assert f.step == 1 and f.end_step == 2 and "76%" in f.message


def test_generation_share_needs_twice_the_next_phase() -> None:
    step = healthy(**{"timing_s/gen": 62.0, "timing_s/update_actor": 34.0, "timing_s/step": 100.0})
    assert not named(analyze(excerpt(step)), "rollout-bottleneck")


def test_with_no_other_phase_logged_the_rest_of_the_step_bounds_them() -> None:
    # a paste of two keys only (verl#6747 shape): gen 31.27 of 43.64 s → the rest is 12.4 s
    only = "step:94 - timing_s/step:43.64 - timing_s/gen:31.27\n"
    (f,) = named(analyze(read_text(only)), "rollout-bottleneck")
    assert f.evidence["slowest_other_phase"] == "rest-of-step"
    assert round(f.evidence["slowest_other_phase_seconds"], 2) == 12.37
    assert "no other phase's time is logged" in f.message
    # 62% of the step leaves 38%: generation is not twice the rest
    close = "step:94 - timing_s/step:100.0 - timing_s/gen:62.0\n"
    assert not named(analyze(read_text(close)), "rollout-bottleneck")


# ---- critic and gradients --------------------------------------------------------------------


def test_a_critic_far_off_in_one_step_is_info() -> None:
    critic = {**CRITIC, "critic/grad_norm": 65.55, "critic/values/mean": 0.516}
    score = {"critic/returns/mean": 0.104, "critic/returns/max": 0.133, "critic/returns/min": 0.1}
    (f,) = named(analyze(excerpt(healthy(**{**critic, **score}), first=1049)), "critic-value-error")
    assert f.severity == "info" and "66× the clip" in f.message
    assert "outside the returns' range" in f.message and "say little" in f.message
    assert "critic.optim.lr" in {a.parameter for a in f.advice}


def test_strongly_negative_explained_variance_is_info() -> None:
    step = healthy(**{**CRITIC, "critic/vf_explained_var": -1.4})
    (f,) = named(analyze(excerpt(step, first=200)), "critic-value-error")
    assert f.severity == "info" and "vf_explained_var -1.4" in f.message


def test_a_critic_in_its_warm_up_is_not_judged() -> None:
    step = healthy(**{**CRITIC, "critic/vf_explained_var": -1.4, "critic/grad_norm": 40.0})
    assert not named(analyze(excerpt(step, first=1)), "critic-value-error")


def test_grad_norm_far_above_the_clip_in_one_step_is_info() -> None:
    step = healthy(**{"actor/grad_norm": 7.16, "actor/pg_clipfrac": 0.005})
    (f,) = named(analyze(excerpt(step)), "grad-norm-above-clip")
    assert f.severity == "info" and f.evidence["ratio"] == 7.16


# ---- traps -----------------------------------------------------------------------------------


def test_validation_only_step_zero_is_not_a_training_step() -> None:
    val = {"val-core/gsm8k/acc/mean@1": 0.0, "val-aux/gsm8k/reward/mean@1": 0.0}
    text = step_line(0, val) + step_line(1, healthy(**{"response_length/clip_ratio": 0.2}))
    report = analyze(read_text(text))
    (f,) = named(report, "response-length-clipped")
    assert f.step == 1 and f.evidence["steps"] == [1]
    assert {r.step for r in report.health if r.step is not None} == {1}


def test_responses_of_a_few_tokens_are_a_length_collapse_from_one_step() -> None:
    short = {"response_length/mean": 2.7, "response_length/max": 9.0, "response_length/min": 1.0}
    (f,) = named(analyze(excerpt(healthy(**short), first=200)), "response-length-collapse")
    assert f.severity == "warning" and f.step == 200 and "(almost) empty" in f.message
    brief = {"response_length/mean": 12.0, "response_length/max": 40.0}  # a short-answer task
    assert not named(analyze(excerpt(healthy(**brief))), "response-length-collapse")


def test_truncation_that_starts_high_and_settles_is_no_spike() -> None:
    # responses start cut at the cap and learn to fit: no earlier level to spike from
    ratios = [0.333, 0.25, 0.2, 0.16, 0.14] + [0.13, 0.14, 0.12, 0.13, 0.14] * 3
    steps = [healthy(**{"response_length/clip_ratio": r}) for r in ratios]
    report = analyze(excerpt(*steps, config=grpo_config()))
    assert not named(report, "clip-ratio-spike")
    # the same jump after a settled start is one
    spiked = [*ratios[5:], 0.333, *ratios[5:]]
    steps = [healthy(**{"response_length/clip_ratio": r}) for r in spiked]
    assert named(analyze(excerpt(*steps, config=grpo_config())), "clip-ratio-spike")
