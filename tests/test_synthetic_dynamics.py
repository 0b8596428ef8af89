"""Realistic dynamics of the simulator (`logscope.synthetic.dynamics`), and logscope reading them.

Each knob is checked on the series it shapes; the console logs of realistic runs round-trip
through logscope's reader in every print format of verl 0.2-0.9.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.stats import kurtosis

from logscope.ingest import load
from logscope.synthetic import Dynamics, Injection, realistic, simulate, write_console_log

REALISTIC_VERSIONS = ("0.2", "0.3", "0.4", "0.5", "0.7", "0.8", "0.9")


def _values(sim, metric: str) -> np.ndarray:
    return sim.series(metric)[1]


def test_default_dynamics_are_the_tame_simulator():
    assert Dynamics().tame
    tame = simulate(120, "grpo", seed=4)
    same = simulate(120, "grpo", seed=4, dynamics=Dynamics())
    assert tame.metrics.equals(same.metrics)
    assert not Dynamics(tail_df=4.0).tame


@pytest.mark.parametrize(
    "bad",
    [
        {"lr_schedule": "step"},
        {"tail_df": 2.0},
        {"noise_phi": 1.0},
        {"lr_warmup_ratio": 1.0},
        {"entropy_drop": 1.0},
        {"dynamic_sampling": 0},
        {"length_growth": 0.0},
    ],
)
def test_out_of_range_knobs_raise(bad):
    with pytest.raises(ValueError):
        Dynamics(**bad)


def test_noise_is_heavy_tailed_and_autocorrelated():
    tame = simulate(3000, "grpo", seed=1)
    real = simulate(3000, "grpo", seed=1, dynamics=Dynamics(tail_df=3.5, noise_phi=0.7))
    for sim, heavy in ((tame, False), (real, True)):
        # log grad norm around its (slowly decaying) centre
        g = np.log(_values(sim, "actor/grad_norm"))
        resid = g - np.convolve(g, np.ones(101) / 101, mode="same")
        resid = resid[100:-100]
        lag1 = float(np.corrcoef(resid[:-1], resid[1:])[0, 1])
        assert (kurtosis(resid) > 1.5) == heavy
        assert (lag1 > 0.4) == heavy


def test_lr_schedule_is_logged_and_update_size_follows_it():
    n = 400
    dyn = Dynamics(lr_warmup_ratio=0.05, lr_schedule="cosine", min_lr_ratio=0.0)
    sim = simulate(n, "grpo", seed=2, dynamics=dyn)
    lr = _values(sim, "actor/lr")
    assert lr[0] == pytest.approx(1e-6 / 20)  # step 1 of a 20-step warm-up
    assert lr[19] == pytest.approx(1e-6)
    assert lr[-1] < 0.01 * lr.max()
    cfg = sim.config["actor_rollout_ref"]["actor"]["optim"]
    assert cfg["warmup_style"] == "cosine" and cfg["lr_warmup_steps_ratio"] == 0.05
    ppo_kl = _values(sim, "actor/ppo_kl")
    assert np.median(ppo_kl[-40:]) < 0.05 * np.median(ppo_kl[40:80])
    linear = Dynamics(lr_schedule="linear", min_lr_ratio=0.1).lr_factor(np.arange(1.0, 101), 100)
    assert linear[0] == pytest.approx(1.0, rel=0.02) and linear[-1] == pytest.approx(0.1)


def test_reasoning_lengths_grow_and_truncation_rises_with_them():
    sim = simulate(
        600,
        "grpo",
        seed=3,
        config={"data.max_response_length": 4096},
        dynamics=Dynamics(length_growth=3.0, tail_df=4.0),
    )
    length = _values(sim, "response_length/mean")
    assert 2.3 < np.median(length[-50:]) / np.median(length[:20]) < 3.7
    clip = _values(sim, "response_length/clip_ratio")
    assert np.mean(clip[-100:]) > 3 * np.mean(clip[:100]) + 1e-4
    samples = 1024 * 8
    assert np.allclose(clip * samples, np.round(clip * samples))  # k of N samples


def test_entropy_falls_then_plateaus_and_kl_grows_like_sqrt_t():
    sim = simulate(1000, "grpo", seed=5, dynamics=Dynamics(entropy_drop=0.5, kl_sqrt=True))
    ent = _values(sim, "actor/entropy")
    early, mid, late = (float(np.median(ent[a : a + 50])) for a in (0, 450, 950))
    assert mid < 0.65 * early and abs(late - mid) < 0.05 * mid
    kl = _values(sim, "actor/kl_loss")
    assert kl[0] < 0.1 * np.median(kl[-50:])
    quarter, full = np.median(kl[225:275]), np.median(kl[-50:])
    assert 0.4 < quarter / full < 0.6  # √(1/4) = 0.5


def test_critic_warmup_hides_the_actor_and_lengthens_later_steps():
    sim = simulate(60, "ppo", seed=6, dynamics=Dynamics(critic_warmup=10))
    steps, _ = sim.series("actor/pg_loss")
    assert steps[0] == 10
    assert sim.series("critic/vf_loss")[0][0] == 1
    assert sim.series("actor/entropy")[0][0] == 1
    assert sim.series("timing_s/update_actor")[0][0] == 10
    step_time = _values(sim, "timing_s/step")
    assert np.median(step_time[12:30]) > 1.08 * np.median(step_time[1:9])
    assert sim.config["trainer"]["critic_warmup"] == 10


def test_on_policy_ppo_kl_is_noise_around_zero():
    sim = simulate(200, "grpo", seed=7, dynamics=Dynamics(on_policy=True, tail_df=4.0))
    ppo_kl = _values(sim, "actor/ppo_kl")
    assert 0.3 < np.mean(ppo_kl < 0) < 0.7 and np.abs(ppo_kl).max() < 1e-4
    assert np.all(_values(sim, "actor/pg_clipfrac") == 0)
    actor = sim.config["actor_rollout_ref"]["actor"]
    assert actor["ppo_mini_batch_size"] == sim.config["data"]["train_batch_size"]
    with pytest.raises(ValueError, match="on-policy"):
        simulate(
            200,
            "grpo",
            dynamics=Dynamics(on_policy=True),
            inject=[Injection("ppo-kl-too-low", 50)],
        )


def test_dynamic_sampling_repeats_generation_more_as_the_score_rises():
    sim = simulate(800, "grpo", seed=8, dynamics=Dynamics(dynamic_sampling=3))
    gen = _values(sim, "timing_s/gen")
    base = simulate(800, "grpo", seed=8)
    ratio = gen / _values(base, "timing_s/gen")
    assert ratio.max() > 2.0 and ratio.min() < 1.3
    assert np.mean(ratio[-100:]) > np.mean(ratio[:100])


def test_memory_warms_up_then_saws():
    dyn = Dynamics(memory_warmup_steps=10, memory_sawtooth_gb=1.0, memory_sawtooth_period=8)
    sim = simulate(200, "grpo", seed=9, version="0.8", dynamics=dyn)
    mem = _values(sim, "actor/perf/max_memory_reserved_gb")
    assert mem[0] < 0.85 * np.median(mem[50:])
    late = mem[100:]
    assert 0.7 < np.ptp(late) < 1.3
    assert abs(np.polyfit(np.arange(len(late)), late, 1)[0]) < 0.002  # flat: no leak


def test_small_validation_sets_move_in_steps_of_one_over_n():
    sim = simulate(300, "grpo", seed=10, test_freq=10, dynamics=Dynamics(val_size=30))
    _, acc = sim.series("val-core/openai/gsm8k/acc/mean@1")
    assert np.allclose(acc * 30, np.round(acc * 30))
    assert np.std(np.diff(acc[-10:])) > 0.04  # ±0.09 noise at 30 prompts


def test_resume_logs_the_steps_after_the_checkpoint_twice(tmp_path):
    dyn = Dynamics(resume_step=47, tail_df=4.0)
    sim = simulate(80, "grpo", seed=11, config={"trainer.save_freq": 20}, dynamics=dyn)
    assert sim.restart == {"checkpoint_step": 40, "resume_step": 41, "last_printed": 46}
    assert sim.config_segments[0][1] == sim.config_segments[1][1]
    text = write_console_log(sim, tmp_path / "resume.log").read_text()
    assert text.count(" step:41 - ") == 2 and text.count(" step:40 - ") == 1
    assert "Setting global step to 40" in text
    (run,) = load(tmp_path / "resume.log")
    assert sorted(run.metrics["step"].unique().to_list())[-1] == 80
    with pytest.raises(ValueError, match="resume"):
        simulate(80, "grpo", dynamics=dyn, inject=[Injection("cuda-oom", 60)])


def test_resumed_processes_warm_their_gpu_memory_up_again():
    """A restart starts new processes: GPU memory drops back to where a launch starts and
    warms up to the same plateau again."""
    dyn = Dynamics(resume_step=121, memory_warmup_steps=10)
    sim = simulate(200, "grpo", seed=3, config={"trainer.save_freq": 20}, dynamics=dyn)
    steps, mem = sim.series("perf/max_memory_reserved_gb")
    resumed = int(np.searchsorted(steps, sim.restart["resume_step"]))
    plateau = np.median(mem[resumed - 20 : resumed])
    assert mem[resumed] < 0.8 * plateau and mem[0] < 0.8 * plateau
    assert np.median(mem[-20:]) == pytest.approx(plateau, rel=0.02)


@pytest.mark.parametrize("version", REALISTIC_VERSIONS)
def test_realistic_runs_round_trip_through_the_reader(version, tmp_path):
    rng = np.random.default_rng([12, int(version[2])])
    dyn, config = realistic(rng, 150, "ppo")
    dyn = dataclasses.replace(dyn, critic_warmup=8, resume_step=None)
    sim = simulate(150, "ppo", seed=12, version=version, config=config, dynamics=dyn)
    path = write_console_log(sim, tmp_path / "run.log")
    (run,) = load(path)
    assert run.parse_stats.skipped_lines == 0
    got = run.metrics.drop_nulls("value")
    for metric in ("actor/pg_loss", "critic/vf_loss", "actor/lr"):
        if metric not in sim.metric_order:
            continue
        want_steps, want = sim.series(metric)
        rows = got.filter(got["metric"] == metric).sort("step")
        assert rows["step"].to_list() == want_steps.tolist()
        assert np.allclose(rows["value"].to_numpy(), want, rtol=1e-3, atol=6e-4)


def test_realistic_draws_stay_in_their_documented_ranges():
    for seed in range(40):
        rng = np.random.default_rng(seed)
        algo = ("grpo", "ppo")[seed % 2]
        dyn, config = realistic(rng, 500, algo)
        assert 3 <= dyn.tail_df <= 6 and 0.3 <= dyn.noise_phi <= 0.8
        assert dyn.lr_warmup_ratio <= 0.1 and 0.3 <= dyn.entropy_drop <= 0.6
        assert 0.7 <= dyn.length_growth <= 4.0 and dyn.val_size in (30, 60, 100, 500, 1319)
        assert dyn.critic_warmup == 0 or algo == "ppo"
        assert dyn.dynamic_sampling == 1 or algo == "grpo"
        assert dyn.resume_step is None or 150 <= dyn.resume_step <= 400
        assert ("actor_rollout_ref.actor.ppo_mini_batch_size" in config) != dyn.on_policy
