"""LS201 reward-sawtooth, LS202 reward-plateau, LS203 validation-drop on simulated runs.

Tolerances: validation-drop must place the turn within 5 steps of the truth (the first
validation step at or after the injection); sawtooth within one period of the injected start on
every case and within 5 steps in the median over the cases; reward-plateau is a tail-of-run
verdict, located within 10% of the run.
"""

from __future__ import annotations

import numpy as np
import pytest
from logscope.detectors.reward import RewardPlateau, RewardSawtooth, ValidationDrop

from logscope.model import ConfigSegment
from logscope.synthetic import Injection, simulate
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

DETECTORS = [RewardSawtooth(), RewardPlateau(), ValidationDrop()]
CASES = [  # (seed, n, algorithm, magnitude)
    (1, 150, "grpo", 1.0),
    (2, 150, "ppo", 0.8),
    (3, 2000, "grpo", 1.5),
    (4, 2000, "ppo", 0.8),
    (5, 600, "grpo", 2.0),
]


@pytest.mark.parametrize(("seed", "n", "algorithm", "magnitude"), CASES)
def test_sawtooth_found_at_its_start(seed, n, algorithm, magnitude):
    run, truth = sim_run("reward-sawtooth", n, algorithm, seed, magnitude=magnitude)
    found = named(RewardSawtooth().detect(run), "reward-sawtooth")
    assert found, "sawtooth not found"
    f = found[0]
    assert 8 <= f.evidence["period_steps"] <= 16  # the generator draws periods of 8-16 steps
    assert abs(f.step - truth) <= f.evidence["period_steps"]
    assert f.severity == "warning"
    check_advice(f)


def test_sawtooth_period_scores_do_not_depend_on_how_many_rows_are_batched(monkeypatch):
    """Periods are scored in batches of rows (bounded memory on long grids): one row at a time
    and all at once give the same floats, so the same findings."""
    import logscope.detectors.reward as reward

    run, _ = sim_run("reward-sawtooth", 600, "grpo", 3, magnitude=1.0)
    vals = np.asarray(run.series("critic/score/mean")[1], dtype=np.float64)
    scored = {}
    for cells in (1, 1 << 30):
        monkeypatch.setattr(reward, "_SCORE_CELLS", cells)
        scored[cells] = RewardSawtooth()._score_periods(vals, range(2, 40))
        scored[cells, "finding"] = [f.to_dict() for f in RewardSawtooth().detect(run)]
    one, many = scored[1], scored[1 << 30]
    assert len(one) == len(many) > 30
    for a, b in zip(one, many, strict=True):
        assert {k: v for k, v in a.items() if k != "resid"} == {
            k: v for k, v in b.items() if k != "resid"
        }
        assert np.array_equal(a["resid"], b["resid"])
    assert scored[1, "finding"] == scored[1 << 30, "finding"] != []


def test_sawtooth_median_step_error_within_5():
    errors = []
    for seed, n, algorithm, magnitude in CASES:
        for extra in (0, 50):
            run, truth = sim_run("reward-sawtooth", n, algorithm, seed + extra, magnitude=magnitude)
            (f,) = named(RewardSawtooth().detect(run), "reward-sawtooth")
            errors.append(abs(f.step - truth))
    assert np.median(errors) <= 5, errors


def test_sawtooth_after_kl_coef_change_points_at_the_change():
    sim = simulate(400, "grpo", seed=3, inject=[Injection("kl-coef-changed-midrun", 200, 1.5)])
    run = sim.to_run()
    (f,) = RewardSawtooth().detect(run)
    assert abs(f.step - sim.truth[0].step) <= 5
    assert f.evidence["kl_coef_changes"]
    key = f.evidence["kl_coef_changes"][0]["parameter"]
    assert f.advice[0].parameter == key
    assert "kl" in f.message.lower()


def test_sawtooth_lr_advice_is_three_quarters_of_the_configured_lr():
    run, _ = sim_run("reward-sawtooth", 300, "grpo", 7)
    lr = run.config_value("actor_rollout_ref.actor.optim.lr")
    (f,) = RewardSawtooth().detect(run)
    (advice,) = f.advice
    assert advice.parameter == "actor_rollout_ref.actor.optim.lr"
    assert advice.current == lr
    assert advice.suggested == pytest.approx(lr * 0.75, rel=0.05)


@pytest.mark.parametrize(("seed", "n", "algorithm", "magnitude"), CASES)
def test_plateau_found_near_its_start(seed, n, algorithm, magnitude):
    run, truth = sim_run("reward-plateau", n, algorithm, seed, at=0.4, magnitude=magnitude)
    found = named(RewardPlateau().detect(run), "reward-plateau")
    assert found
    f = found[0]
    assert f.severity == "info"
    assert abs(f.step - truth) <= 0.1 * n
    assert f.evidence["change_across_plateau"] is not None
    check_advice(f)


def test_plateau_silent_while_reward_still_climbs():
    steps = np.arange(1, 301)
    rng = np.random.default_rng(0)
    run = make_run({"critic/score/mean": 0.2 + 0.002 * steps + 0.01 * rng.standard_normal(300)})
    assert RewardPlateau().detect(run) == []


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plateau_silent_while_a_saturating_reward_still_rises(seed):
    """A saturating rise, still +0.03 per 100 steps at the end with Mann–Kendall p < 1e-8 over
    the last third: converging, not flat; no advice to cut epochs (it used to fire here)."""
    steps = np.arange(1, 601)
    rng = np.random.default_rng(seed)
    score = 0.8 - 0.5 * np.exp(-steps / 400) + 0.03 * rng.standard_t(4, 600)
    assert RewardPlateau().detect(make_run({"critic/score/mean": score})) == []


@pytest.mark.parametrize(("seed", "n", "algorithm", "magnitude"), CASES)
def test_validation_drop_found_at_the_turn(seed, n, algorithm, magnitude):
    run, truth = sim_run("validation-drop", n, algorithm, seed, magnitude=magnitude)
    found = named(ValidationDrop().detect(run), "validation-drop")
    assert found
    f = found[0]
    assert abs(f.step - truth) <= 5
    assert f.evidence["train_change_after_turn"] > 0  # training reward kept rising
    check_advice(f)


def test_validation_drop_skips_runs_without_validation():
    run = make_run({"critic/score/mean": np.linspace(0.2, 0.8, 100)})
    assert ValidationDrop().skip_reason(run)
    assert ValidationDrop().detect(run) == []


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_healthy_runs_are_silent(seed, algorithm):
    n = (150, 400, 1200)[seed % 3]
    run, _ = sim_run(None, n, algorithm, seed=100 + seed, noise=0.7 + 0.07 * seed)
    for det in DETECTORS:
        assert loud(det.detect(run)) == [], det.name


@pytest.mark.parametrize(
    ("kind", "det"),
    [
        ("reward-sawtooth", RewardSawtooth()),
        ("reward-plateau", RewardPlateau()),
        ("validation-drop", ValidationDrop()),
    ],
)
def test_rounded_gappy_irregular_logs(kind, det):
    for transform in (rounded, with_gaps, every_other_step):
        run, truth = sim_run(kind, 500, "ppo", seed=11, version="0.4", magnitude=1.2)
        found = named(det.detect(transform(run)), kind)
        assert found, transform.__name__
        tolerance = 50 if kind == "reward-plateau" else 6
        assert abs(found[0].step - truth) <= tolerance, transform.__name__


@pytest.mark.parametrize("n", [0, 1, 3, 12])
def test_short_series_never_raise(n):
    series = {
        "critic/score/mean": [0.5, float("nan"), 0.7][:n] + [0.6] * max(0, n - 3),
        "val-core/openai/gsm8k/acc/mean@1": [0.4] * n,
    }
    run = make_run({k: v for k, v in series.items() if len(v)}) if n else make_run({})
    for det in DETECTORS:
        assert det.detect(run) == [] or all(f.step is not None for f in det.detect(run))


def test_unknown_config_gives_the_rule():
    run, _ = sim_run("reward-sawtooth", 300, "grpo", 7)
    run.config_segments = []
    (f,) = RewardSawtooth().detect(run)
    check_advice(f, config_known=False)
    assert "no value is computed" in f.advice[0].rationale


def test_kl_change_read_from_config_segments():
    base = {"actor_rollout_ref": {"actor": {"kl_loss_coef": 0.001}}}
    changed = {"actor_rollout_ref": {"actor": {"kl_loss_coef": 0.002}}}
    run = make_run({"critic/score/mean": [0.5] * 10}, config=base)
    run.config_segments.append(ConfigSegment(5, changed))
    from logscope.detectors.reward import kl_coef_changes

    (change,) = kl_coef_changes(run)
    assert change == {
        "parameter": "actor_rollout_ref.actor.kl_loss_coef",
        "from": 0.001,
        "to": 0.002,
        "step": 5,
    }


def test_score_count_reads_the_validation_set_size_from_the_values():
    from logscope.detectors.reward import score_count

    rng = np.random.default_rng(0)
    for size in (30, 100, 1319):
        values = rng.binomial(size, 0.6, 40) / size
        assert score_count(values, None) == size
    # a .3f print: k/30 is still recognisable, k/1319 is not (too fine for 3 decimals)
    assert score_count(np.round(rng.binomial(30, 0.6, 40) / 30, 3), 0.0005) == 30
    assert score_count(np.round(rng.binomial(1319, 0.6, 40) / 1319, 3), 0.0005) is None
    assert score_count(rng.uniform(0, 1, 40), None) is None  # not a mean of 0/1 scores


@pytest.mark.parametrize("seed", [19, 0, 1, 2])
def test_validation_noise_of_a_small_set_on_a_plateau_is_not_a_drop(seed):
    from logscope.synthetic import Dynamics

    # 30 prompts: ±0.09 between validations; seed 19 fires without the sampling-noise floor
    sim = simulate(
        600, "grpo", seed=seed, test_freq=20, dynamics=Dynamics(val_size=30, tail_df=4.0)
    )
    assert ValidationDrop().detect(sim.to_run()) == []


def test_a_steady_decline_over_many_validations_is_found_below_four_sigma():
    from logscope.synthetic import Dynamics

    sim = simulate(
        1200,
        "grpo",
        seed=3,
        test_freq=5,
        dynamics=Dynamics(val_size=100),
        inject=[Injection("validation-drop", 700, 0.5)],
    )
    (finding,) = ValidationDrop().detect(sim.to_run())
    assert abs(finding.step - sim.truth[0].step) <= 40
    assert finding.evidence["val_set_size_from_values"] == 100
    assert finding.evidence["drop"] < 4 * finding.evidence["val_noise_sigma"]


# ---- healthy realistic runs (bench/detection.py's healthy set): weak chance cycles, one-point dips


def _healthy_realistic(seed, n, algorithm, version, noise, test_freq, inject=()):
    """A run as `bench/detection.py` simulates a realistic case (dynamics drawn from `seed`)."""
    from logscope.synthetic import realistic

    dyn, config = realistic(np.random.default_rng([seed, 7]), n, algorithm)
    return simulate(n, algorithm, seed=seed, noise=noise, version=version, config=config,
                    dynamics=dyn, test_freq=test_freq, inject=list(inject))  # fmt: skip


# (seed, n, algorithm, version, noise, test_freq): healthy runs of the stress set that fired
SAWTOOTH_BY_CHANCE = [
    # period 12, ±0.018, 4 cycles, corr 0.71
    (899810784, 138, "grpo", "0.9", 1.3401672110789145, 50),
    # period 11, 4 cycles, corr 0.60
    (2128297217, 259, "grpo", "0.3", 1.1621585576269433, 20),
    # period 8, 4 cycles
    (1166824861, 63, "grpo", "0.7", 0.8099049575102061, 5),
    # period 12, 5 cycles
    (2004083065, 74, "ppo", "0.5", 1.3657160868370595, 10),
    # period 21, 5 cycles, AR noise phi 0.71
    (643115783, 305, "grpo", "0.8", 0.7337421167779085, 5),
]


@pytest.mark.parametrize("case", SAWTOOTH_BY_CHANCE)
def test_a_few_cycles_of_autocorrelated_noise_are_no_sawtooth(case):
    """Autocorrelated, heavy-tailed batch noise correlates with itself ~0.6-0.7 one "period"
    later over 4-5 cycles; the cycle's shape read from it is well below 2.5× what noise alone draws
    for so few cycles (1.5-1.9×; the injected sawtooths: 3× and more)."""
    sim = _healthy_realistic(*case)
    assert RewardSawtooth().detect(sim.to_run()) == []


@pytest.mark.parametrize(("seed", "magnitude", "n"), [(5, 0.8, 200), (6, 0.8, 120), (7, 1.0, 900)])
def test_realistic_sawtooth_still_found(seed, magnitude, n):
    """The injected sawtooth (0.12·m peak to peak) on realistic dynamics, few cycles included."""
    sim = _healthy_realistic(
        seed, n, "grpo", "0.8", 1.2, 10, inject=[Injection("reward-sawtooth", n // 2, magnitude)]
    )
    (f,) = RewardSawtooth().detect(sim.to_run())
    assert abs(f.step - sim.truth[0].step) <= f.evidence["period_steps"]
    assert f.evidence["amplitude"] >= 2.5 * f.evidence["amplitude_by_chance"]


VALIDATION_DIP_BY_CHANCE = [
    # 60 prompts: 0.883, 0.85, then 0.683, back to 0.78
    (1504290878, 61, "grpo", "0.8", 0.8497855051788792, 5),
    # 1319 prompts, .3f print: 0.779, 0.729, back to 0.776
    (14135213, 672, "grpo", "0.4", 1.0529394620157673, 50),
    # 60 prompts: 0.833 then 0.6, back to 0.73-0.87
    (880965706, 80, "grpo", "0.3", 1.3160868926007026, 5),
    # 100 prompts: 0.84, 0.78, 0.67, back to 0.8
    (1833900854, 83, "ppo", "0.5", 1.156241738089169, 5),
]


@pytest.mark.parametrize("case", VALIDATION_DIP_BY_CHANCE)
def test_a_one_point_validation_dip_that_comes_back_is_no_drop(case):
    """A low validation right after a high one makes a deep "turn" (the level after it is
    extrapolated from that point), but the later validations come back to the level: the last
    third after the turn is within 2.5σ of it. Not over-fitting."""
    sim = _healthy_realistic(*case)
    assert ValidationDrop().detect(sim.to_run()) == []


def test_hand_built_validation_dip_that_comes_back_is_no_drop():
    """The first case above as bare numbers: 60 prompts, validation every 5 steps."""
    steps = np.array([0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 61])
    k = np.array([28, 27, 30, 41, 43, 44, 47, 53, 51, 41, 48, 46, 47, 46])  # correct of 60
    train = 0.38 + 0.4 * (1 - np.exp(-np.arange(1, 62) / 15))
    run = make_run({"critic/score/mean": train})
    run.metrics = run.metrics.vstack(
        make_run({"val-core/openai/gsm8k/acc/mean@1": k / 60}, steps=steps).metrics
    )
    assert ValidationDrop().detect(run) == []


@pytest.mark.parametrize(
    ("seed", "size", "magnitude"), [(41, 60, 0.8), (42, 100, 0.8), (43, 1319, 0.9)]
)
def test_realistic_validation_drop_that_stays_down_is_found(seed, size, magnitude):
    """Over-fitting on realistic dynamics: validation falls and stays down while training rises."""
    import dataclasses

    from logscope.synthetic import realistic

    n = 300
    dyn, config = realistic(np.random.default_rng([seed, 7]), n, "grpo")
    dyn = dataclasses.replace(dyn, val_size=size, resume_step=None)
    sim = simulate(n, "grpo", seed=seed, config=config, dynamics=dyn, test_freq=10,
                   inject=[Injection("validation-drop", 150, magnitude)])  # fmt: skip
    (f,) = ValidationDrop().detect(sim.to_run())
    assert abs(f.step - sim.truth[0].step) <= 10


def test_score_max_stuck_at_a_partial_score_is_a_plateau_variant():
    """Three sparse steps: every step's best sample scores the 0.1 format score while the mean
    moves below it; no sample ever got the full reward."""
    series = {
        "critic/score/mean": [0.038, 0.094, 0.094],
        "critic/score/max": [0.1, 0.1, 0.1],
        "critic/score/min": [0.0, 0.0, 0.0],
    }
    (f,) = RewardPlateau().detect(make_run(series, np.array([52, 92, 122])))
    assert f.severity == "warning" and f.step == 52 and f.end_step == 122
    assert f.evidence["score_max"] == 0.1 and "format score" in f.message
    assert f.advice and f.advice[0].parameter == "custom_reward_function.path"
    # a max of 1.0 (the full reward) at every step is a healthy run's, and two steps too few
    full = {**series, "critic/score/max": [1.0, 1.0, 1.0]}
    assert RewardPlateau().detect(make_run(full, np.array([52, 92, 122]))) == []
    two = {k: v[:2] for k, v in series.items()}
    assert RewardPlateau().detect(make_run(two, np.array([52, 92]))) == []


def test_one_score_for_every_sample_at_a_nan_step_is_a_consequence():
    series = {
        "actor/pg_loss": [np.nan],
        "critic/score/mean": [0.0],
        "critic/score/max": [0.0],
        "critic/score/min": [0.0],
    }
    (f,) = RewardPlateau().detect(make_run(series, np.array([3663])))
    assert f.severity == "info" and f.advice == []
    assert f.evidence["consequence_of"]["name"] == "non-finite-metric"
    (g,) = RewardPlateau().detect(make_run({**series, "actor/pg_loss": [0.01]}, np.array([3663])))
    assert g.severity == "warning" and g.advice


# ---- healthy shapes from an independent simulator: unshuffled epochs, validation noise


def _unshuffled_epochs(epoch: int, epochs: int, seed: int = 0, total: int | None = None):
    """A healthy rising reward whose batches repeat every epoch (data.shuffle=False): each of
    the `epoch` batches has its own difficulty, replayed in the same order every epoch."""
    rng = np.random.default_rng(seed)
    n = total or epoch * epochs
    t = np.arange(n)
    difficulty = rng.normal(0, 0.02, epoch)
    reward = 0.45 + 0.35 * (1 - np.exp(-t / 60)) + difficulty[t % epoch]
    return reward + rng.normal(0, 0.008, n)


def _config(shuffle, epochs, total=None):
    return {
        "data": {"shuffle": shuffle, "train_batch_size": 1024},
        "trainer": {"total_epochs": epochs, "total_training_steps": total},
    }


@pytest.mark.parametrize(("epoch", "epochs", "seed"), [(7, 60, 34), (11, 36, 61), (14, 25, 146)])
def test_a_period_of_one_unshuffled_epoch_is_info(epoch, epochs, seed):
    """seeds 34/61/146 of the healthy simulator: shuffle off, the period is the epoch length
    (total steps / epochs, total_training_steps unset). Reported as info, without advice."""
    run = make_run(
        {"critic/score/mean": _unshuffled_epochs(epoch, epochs, seed)},
        config=_config(False, epochs),
    )
    (f,) = RewardSawtooth().detect(run)
    assert abs(f.evidence["period_steps"] - epoch) <= 1
    assert f.severity == "info" and not f.advice
    assert f.evidence["epoch_length"]["epoch_steps"] == pytest.approx(epoch)
    assert "data.shuffle=False" in f.message and "epoch" in f.message


def test_the_same_period_with_shuffled_data_is_still_a_warning():
    """Shuffled data cannot replay its batches: the same curve stays a warning with advice."""
    run = make_run({"critic/score/mean": _unshuffled_epochs(11, 36, 61)}, config=_config(True, 36))
    (f,) = RewardSawtooth().detect(run)
    assert f.severity == "warning" and f.advice
    assert f.evidence["epoch_length"] is None


def test_a_period_other_than_the_epoch_is_still_a_warning():
    """Shuffle off but the epoch is 40 steps long (400 steps / 10 epochs): a period of 11
    steps is not the data repeating."""
    run = make_run(
        {"critic/score/mean": _unshuffled_epochs(11, 36, 61)[:400]}, config=_config(False, 10)
    )
    (f,) = RewardSawtooth().detect(run)
    assert f.severity == "warning"


def test_a_hand_set_total_bounds_the_epoch_from_below():
    """Seed 47: 29 batches per epoch, 14 epochs, total_training_steps=357 set by hand (the
    run stops inside epoch 13), so 357/14 = 25.5 only bounds the epoch; with shuffle off a
    period from the first step at least that long is info."""
    reward = _unshuffled_epochs(29, 14, 47, total=357)
    run = make_run({"critic/score/mean": reward}, config=_config(False, 14, 357))
    (f,) = RewardSawtooth().detect(run)
    assert abs(f.evidence["period_steps"] - 29) <= 1
    assert f.severity == "info"
    assert f.evidence["epoch_length"]["epoch_steps_at_least"] == pytest.approx(25.5)


def test_shuffle_unknown_needs_a_known_epoch_length():
    """No config: the dataloader's size (when the reader keeps it) makes it info; without
    it nothing tells an epoch from an oscillation."""
    reward = {"critic/score/mean": _unshuffled_epochs(11, 36, 61)}
    (f,) = RewardSawtooth().detect(make_run(reward))
    assert f.severity == "warning"
    (f,) = RewardSawtooth().detect(make_run(reward, meta={"train_dataloader_size": 11}))
    assert f.severity == "info"
    assert "data.shuffle unknown" in f.message


def _val_run(steps, values, metric, train_rise=0.15):
    n = int(steps[-1])
    train = 0.3 + train_rise * np.arange(1, n + 1) / n
    run = make_run({"critic/score/mean": train})
    run.metrics = run.metrics.vstack(make_run({metric: values}, steps=steps).metrics)
    run.meta["value_resolution"] = 0.0005
    return run


def test_one_high_validation_on_a_rising_curve_is_no_drop():
    """Seed 83 (MATH, 5000 problems, .3f print): the true curve rises throughout; the 0.653
    at step 240 is one +3σ point, and the last five validations rise again."""
    steps = np.array([0, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200, 220, 240, 260, 280,
                      300, 320, 330])  # fmt: skip
    vals = np.array([0.442, 0.464, 0.487, 0.525, 0.536, 0.558, 0.571, 0.583, 0.605, 0.611,
                     0.636, 0.628, 0.653, 0.62, 0.633, 0.635, 0.637, 0.642])  # fmt: skip
    run = _val_run(steps, vals, "val-core/lighteval/MATH/acc/mean@1", train_rise=0.02)
    assert ValidationDrop().detect(run) == []


@pytest.mark.parametrize("seed", range(6))
def test_rising_validation_with_one_outlier_is_no_drop(seed):
    """The same shape drawn anew (a guard: the old detector passed these too): a saturating
    rise with 5000-problem sampling noise, one +3σ validation two thirds of the way in and a
    −2σ one right after it."""
    rng = np.random.default_rng(seed)
    steps = np.arange(0, 341, 20)
    true = 0.42 + 0.3 * (1 - np.exp(-steps / 250))
    sd = np.sqrt(true * (1 - true) / 5000)
    vals = true + rng.normal(0, sd)
    vals[12] = true[12] + 3 * sd[12]
    vals[13] = true[13] - 2 * sd[13]
    run = _val_run(steps, np.round(vals, 3), "val-core/lighteval/MATH/acc/mean@1")
    assert ValidationDrop().detect(run) == []


def test_a_flat_aime_score_with_one_lucky_reading_is_no_drop():
    """Seed 81: AIME-25 (30 problems, mean@16) flat at ~0.025; one 0.068 reading is one or
    two problems more solved, not a level to fall from (binomial noise √(p(1−p)/30))."""
    steps = np.arange(10, 171, 10)
    vals = np.array([0.0287, 0.017, 0.0015, 0.007, 0.0348, 0.0241, 0.0801, 0.024, 0.0447,
                     0.0346, 0.0193, 0.0079, 0.0235, 0.0251, 0.0224, 0.0, 0.0186])  # fmt: skip
    run = _val_run(steps, vals, "val-core/aime25/acc/mean@16")
    run.meta["value_resolution"] = None
    assert ValidationDrop().detect(run) == []


def test_a_lasting_fall_on_a_small_benchmark_is_still_found():
    """AIME at 0.5 falling to ~0.1 and staying there: far beyond 30-problem noise."""
    steps = np.arange(10, 241, 10)
    rng = np.random.default_rng(5)
    true = np.where(steps < 120, 0.3 + 0.2 * steps / 120, 0.1)
    vals = rng.binomial(30 * 16, true) / (30 * 16)
    run = _val_run(steps, vals, "val-core/aime24/acc/mean@16")
    run.meta["value_resolution"] = None
    (f,) = ValidationDrop().detect(run)
    assert 110 <= f.step <= 130
    assert f.evidence["val_problems_for_noise"] == 30


def test_benchmark_size_for_the_noise_floor():
    from logscope.detectors.reward import benchmark_size

    assert benchmark_size("val-core/aime25/acc/mean@16", 480, 0.03) == 30
    assert benchmark_size("val-core/openai/gsm8k/acc/mean@1", 1319, 0.7) == 1319
    assert benchmark_size("val-core/math500/acc/mean@4", 2000, 0.5) == 500
    assert benchmark_size("val-core/amc23/acc/mean@8", None, 0.4) == 40
    assert benchmark_size("val-core/x/acc/mean@1", None, 0.02) == 50
    assert benchmark_size("val-core/x/acc/mean@1", None, 0.5) is None
