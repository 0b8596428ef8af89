"""LS101 kl-jump, LS102 kl-out-of-band, LS103 ppo-kl-too-low on simulated and hand-built runs.

Injected pathologies must be found under the right name within STEP_TOLERANCE steps of the
simulator's ground truth (the step where the injection first shows); healthy runs must stay
silent at warning and above.
"""

from __future__ import annotations

import numpy as np
import pytest
from logscope.detectors.kl import KLJump, KLOutOfBand, PPOKLTooLow

import logscope.synthetic as synthetic
from logscope.exceptions import BadDetectorParameters
from tests._ls1xx import (
    check_finding_shape,
    nearest,
    rounded,
    truncated,
    warnings_of,
    with_gaps,
)
from tests.helpers import make_run

Injection, simulate = synthetic.Injection, synthetic.simulate

STEP_TOLERANCE = 5
DETECTORS = {"kl-jump": KLJump, "kl-out-of-band": KLOutOfBand, "ppo-kl-too-low": PPOKLTooLow}
KL_CONCEPTS = ("actor/kl_loss", "critic/kl")


def _inject(kind: str, n: int, algorithm: str, seed: int, magnitude: float, **kw):
    step = int(n * (0.3 + 0.3 * ((seed * 7919) % 100) / 100))
    sim = simulate(n, algorithm, seed=seed, inject=[Injection(kind, step, magnitude)], **kw)
    return sim, sim.truth[0].step


@pytest.mark.parametrize("kind", sorted(DETECTORS))
@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
@pytest.mark.parametrize("n", [150, 2000])
@pytest.mark.parametrize(("seed", "magnitude"), [(1, 0.8), (2, 1.3), (3, 2.0)])
def test_injected_found_at_the_right_step(kind, algorithm, n, seed, magnitude):
    det = DETECTORS[kind]()
    sim, truth = _inject(kind, n, algorithm, seed, magnitude)
    run = sim.to_run()
    findings = det.detect(run)
    hit = nearest(findings, kind, truth)
    assert hit is not None, f"{kind} not found (truth step {truth})"
    assert abs(hit.step - truth) <= STEP_TOLERANCE, (hit.step, truth, hit.message)
    assert hit.severity != "info" or kind == "kl-out-of-band"
    for f in findings:
        check_finding_shape(det, f)


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
@pytest.mark.parametrize("seed", range(10))
def test_healthy_runs_are_silent(algorithm, seed):
    n = (150, 400, 1200)[seed % 3]
    run = simulate(n, algorithm, seed=100 + seed, noise=0.7 + 0.07 * seed).to_run()
    for cls in DETECTORS.values():
        assert warnings_of(cls().detect(run)) == []


@pytest.mark.parametrize("kind", ["kl-jump", "kl-out-of-band"])
def test_found_in_a_3f_rounded_log(kind):
    sim, truth = _inject(kind, 400, "grpo", 5, 1.2, version="0.4")
    run = rounded(sim.to_run())
    hit = nearest(DETECTORS[kind]().detect(run), kind, truth)
    assert hit is not None and abs(hit.step - truth) <= STEP_TOLERANCE


def test_ppo_kl_too_low_never_warns_on_rounded_zeros():
    """A .3f log prints healthy ppo_kl (3e-4..5e-4) as 0.000 mostly: not a reason to warn."""
    for seed in range(6):
        run = rounded(simulate(300, "grpo", seed=seed, version="0.4").to_run())
        assert run.value_resolution == 0.0005
        assert warnings_of(PPOKLTooLow().detect(run)) == []


def test_ppo_kl_too_low_on_rounded_log_is_info_cannot_judge():
    sim, truth = _inject("ppo-kl-too-low", 600, "grpo", 4, 1.5, version="0.4")
    findings = PPOKLTooLow().detect(rounded(sim.to_run()))
    assert findings, "a drop to all-0.000 prints after 0.001s should be reported as info"
    assert all(f.severity == "info" for f in findings)
    assert "cannot judge" in findings[0].message.lower()
    assert findings[0].evidence["judged"] is False
    assert abs(findings[0].step - truth) <= 3 * STEP_TOLERANCE


def test_hand_built_ppo_kl_all_zero_rounded_series_is_not_judged():
    run = make_run({"actor/ppo_kl": np.zeros(200)}, meta={"value_resolution": 0.0005})
    assert PPOKLTooLow().detect(run) == []


@pytest.mark.parametrize("kind", sorted(DETECTORS))
def test_nan_gaps_and_irregular_logging(kind):
    sim, truth = _inject(kind, 800, "ppo", 6, 1.3)
    run = with_gaps(sim.to_run(), seed=1, drop=0.1, nan=0.05, keep_step=truth)
    hit = nearest(DETECTORS[kind]().detect(run), kind, truth)
    assert hit is not None and abs(hit.step - truth) <= STEP_TOLERANCE + 2


@pytest.mark.parametrize("n_steps", [0, 1, 3, 8])
def test_short_runs_never_raise(n_steps):
    sim, _ = _inject("kl-jump", 200, "grpo", 1, 1.0)
    run = truncated(sim.to_run(), n_steps)
    for cls in DETECTORS.values():
        assert cls().detect(run) == []


def test_all_nan_and_constant_series():
    run = make_run({"actor/kl_loss": [np.nan] * 50, "actor/ppo_kl": [0.0003] * 50})
    for cls in DETECTORS.values():
        cls().detect(run)  # no exception
    assert KLJump().detect(run) == []


def test_values_near_the_float_limit_never_raise():
    # noise σ ~ 1e300: σ² overflows a Python float (the penalty used to raise OverflowError)
    rng = np.random.default_rng(3)
    wild = rng.choice([0.0, 1e300, -1e300, 5e-324], 60)
    run = make_run({"actor/kl_loss": np.abs(wild), "actor/ppo_kl": wild})
    for cls in DETECTORS.values():
        cls().detect(run)  # no exception


def test_kl_jump_hand_built_level_shift_and_evidence():
    rng = np.random.default_rng(0)
    kl = 0.015 * np.exp(rng.normal(0, 0.08, 300))
    kl[180:] *= 3.0
    run = make_run({"actor/kl_loss": kl})
    (f,) = KLJump().detect(run)
    assert abs(f.step - 181) <= 1  # index 180 is step 181
    ev = f.evidence
    assert ev["level_before"] == pytest.approx(0.015, rel=0.1)
    assert ev["level_after"] == pytest.approx(0.045, rel=0.1)
    assert ev["ratio"] >= KLJump().min_ratio


def test_kl_jump_advice_follows_the_mechanics():
    """KL to the reference too high → raise the coefficient (never lower), and lower the LR."""
    sim, _ = _inject("kl-jump", 300, "grpo", 2, 1.5)
    run = sim.to_run()
    found = [f for f in KLJump().detect(run) if f.metric == "actor/kl_loss"]
    assert found
    by_key = {a.parameter: a for a in found[0].advice}
    coef = by_key["actor_rollout_ref.actor.kl_loss_coef"]
    assert coef.current == run.config_value("actor_rollout_ref.actor.kl_loss_coef")
    assert coef.suggested > coef.current
    lr = by_key["actor_rollout_ref.actor.optim.lr"]
    assert lr.suggested < lr.current


def test_ppo_kl_jump_advice_tightens_clip_and_lr():
    sim, _ = _inject("kl-jump", 300, "ppo", 3, 1.0)
    f = next(f for f in KLJump().detect(sim.to_run()) if f.metric == "actor/ppo_kl")
    by_key = {a.parameter: a for a in f.advice}
    clip = by_key["actor_rollout_ref.actor.clip_ratio"]
    assert clip.current == 0.2 and clip.suggested == pytest.approx(0.15)
    assert "kl_ctrl" not in " ".join(by_key)  # not the article's kl_coef/target_kl advice


def test_kl_out_of_band_high_is_warning_and_raises_coef():
    sim, _ = _inject("kl-out-of-band", 400, "grpo", 8, 1.0)
    (f,) = KLOutOfBand().detect(sim.to_run())
    assert f.severity == "warning" and f.evidence["direction"] == "high"
    coef = next(a for a in f.advice if a.parameter.endswith("kl_loss_coef"))
    assert coef.current == 0.001 and coef.suggested == pytest.approx(0.0014)
    assert coef.override == "actor_rollout_ref.actor.kl_loss_coef=0.0014"


def test_kl_out_of_band_low_is_info_only():
    """A policy that barely moves (KL below 0.005 after warm-up) is info, not a warning."""
    rng = np.random.default_rng(3)
    kl = 0.002 * np.exp(rng.normal(0, 0.1, 200))
    cfg = {"actor_rollout_ref": {"actor": {"use_kl_loss": True, "kl_loss_coef": 0.001}}}
    (f,) = KLOutOfBand().detect(make_run({"actor/kl_loss": kl}, config=cfg))
    assert f.severity == "info" and f.evidence["direction"] == "low"
    (advice,) = f.advice
    assert advice.suggested < advice.current  # by the mechanics: loosen, not tighten


def test_kl_out_of_band_early_low_kl_is_warmup():
    """KL rising from 0 into the band within the warm-up steps gives nothing."""
    t = np.arange(200)
    kl = 0.02 * (1 - np.exp(-t / 5.0))
    assert KLOutOfBand().detect(make_run({"actor/kl_loss": kl})) == []


def test_ppo_kl_too_low_skipped_when_one_update_per_step():
    cfg = {
        "data": {"train_batch_size": 256},
        "actor_rollout_ref": {"actor": {"ppo_mini_batch_size": 256, "ppo_epochs": 1}},
    }
    run = make_run({"actor/ppo_kl": np.full(100, 1e-6)}, config=cfg)
    det = PPOKLTooLow()
    assert "by construction" in det.skip_reason(run)
    assert det.detect(run) == []


def test_ppo_kl_too_low_advice_raises_lr():
    sim, _ = _inject("ppo-kl-too-low", 300, "grpo", 9, 1.0)
    (f,) = PPOKLTooLow().detect(sim.to_run())
    lr = next(a for a in f.advice if a.parameter.endswith("optim.lr"))
    assert lr.suggested == pytest.approx(lr.current * 1.5)


def test_config_change_mid_run_is_named():
    """A restart with a new LR right before a KL jump: the finding names the change (A16)."""
    from logscope.model import ConfigSegment

    rng = np.random.default_rng(4)
    ppo_kl = 3e-4 * np.exp(rng.normal(0, 0.2, 300))
    ppo_kl[150:] *= 6
    run = make_run({"actor/ppo_kl": ppo_kl})
    old = {"actor_rollout_ref": {"actor": {"optim": {"lr": 1e-6}}}}
    new = {"actor_rollout_ref": {"actor": {"optim": {"lr": 4e-6}}}}
    run.config_segments = [ConfigSegment(0, old), ConfigSegment(149, new)]
    (f,) = KLJump().detect(run)
    assert f.evidence["config_change"]["actor_rollout_ref.actor.optim.lr"] == [1e-6, 4e-6]
    assert "config changed at step 149" in f.message
    lr = next(a for a in f.advice if a.parameter.endswith("optim.lr"))
    assert lr.current == 4e-6 and lr.suggested == 2e-6


def test_bad_parameters_rejected():
    with pytest.raises(BadDetectorParameters):
        KLJump(min_ratio=0.5)
    with pytest.raises(BadDetectorParameters):
        KLOutOfBand(band_low=0.05, band_high=0.03)
    with pytest.raises(BadDetectorParameters):
        PPOKLTooLow(threshold=-1)


def test_ppo_kl_too_low_after_entropy_collapse_gives_no_lr_raise():
    """Two co-occurring symptoms must not get opposite LR advice (entropy collapse lowers it)."""
    rng = np.random.default_rng(5)
    n = 300
    ppo_kl = 3e-4 * np.exp(rng.normal(0, 0.2, n))
    ppo_kl[150:] = 3e-5 * np.exp(rng.normal(0, 0.2, n - 150))
    entropy = 0.6 * np.exp(rng.normal(0, 0.02, n))
    entropy[140:] *= 0.05
    cfg = {"actor_rollout_ref": {"actor": {"optim": {"lr": 1e-6}, "use_kl_loss": True}}}
    run = make_run({"actor/ppo_kl": ppo_kl, "actor/entropy": entropy}, config=cfg)
    (f,) = PPOKLTooLow().detect(run)
    assert "collapsed" in f.message
    assert not [a for a in f.advice if a.parameter.endswith("optim.lr")]
    assert not [a for a in f.advice if a.parameter.endswith("kl_loss_coef")]


def test_ppo_kl_too_low_keeps_kl_coef_when_kl_already_high():
    rng = np.random.default_rng(6)
    ppo_kl = 3e-5 * np.exp(rng.normal(0, 0.2, 200))
    kl = 0.06 * np.exp(rng.normal(0, 0.05, 200))
    cfg = {"actor_rollout_ref": {"actor": {"optim": {"lr": 1e-6}, "use_kl_loss": True}}}
    (f,) = PPOKLTooLow().detect(make_run({"actor/ppo_kl": ppo_kl, "actor/kl_loss": kl}, config=cfg))
    keys = {a.parameter for a in f.advice}
    assert "actor_rollout_ref.actor.optim.lr" in keys
    assert "actor_rollout_ref.actor.kl_loss_coef" not in keys


def test_in_reward_kl_with_adaptive_controller_lowers_target_kl():
    t = np.arange(200)
    kl = 0.02 + 0.05 * (t >= 100)
    cfg = {
        "algorithm": {
            "use_kl_in_reward": True,
            "kl_ctrl": {"type": "adaptive", "kl_coef": 0.001, "target_kl": 0.1},
        }
    }
    run = make_run({"actor/reward_kl_penalty": kl}, config=cfg)
    (f,) = KLOutOfBand().detect(run)
    (target,) = [a for a in f.advice if a.parameter.startswith("algorithm.")]
    assert target.parameter == "algorithm.kl_ctrl.target_kl"
    assert target.current == 0.1 and target.suggested == pytest.approx(0.07)


# ---- realistic dynamics: heavy tails, autocorrelation, LR schedules, on-policy ---------------

Dynamics = synthetic.Dynamics


def _heavy(**kw) -> Dynamics:
    """Realistic noise (Student-t df 3.5, AR(1) φ 0.7) and √t KL, plus the knobs given."""
    return Dynamics(**{"tail_df": 3.5, "noise_phi": 0.7, "kl_sqrt": True, **kw})


def _window_medians(values: np.ndarray, width: int = 15) -> np.ndarray:
    return np.array([np.median(values[i : i + width]) for i in range(len(values) - width + 1)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cosine_decay_lowering_ppo_kl_is_not_timid_updates_nor_a_jump(seed):
    """ppo_kl ∝ lr²: the decay takes it to ~1e-5, where a doubling is a change of 1e-5."""
    dyn = _heavy(lr_schedule="cosine", update_lr_power=2.0, lr_warmup_ratio=0.05)
    run = simulate(600, "grpo", seed=seed, noise=1.3, dynamics=dyn).to_run()
    _, ppo_kl = run.series("actor/ppo_kl")
    assert np.median(ppo_kl[-200:]) < 5e-5  # a fixed 1e-4 bar would call the tail timid
    assert warnings_of(PPOKLTooLow().detect(run)) == []
    assert warnings_of(KLJump().detect(run)) == []


@pytest.mark.parametrize(("seed", "schedule"), [(3, "linear"), (4, "cosine"), (5, "constant")])
def test_ppo_kl_too_low_found_while_a_decaying_lr_is_still_high(seed, schedule):
    dyn = _heavy(lr_schedule=schedule, update_lr_power=1.8)
    sim = simulate(
        500,
        "ppo",
        seed=seed,
        noise=1.3,
        dynamics=dyn,
        inject=[Injection("ppo-kl-too-low", 140, 0.8)],
    )
    hit = nearest(PPOKLTooLow().detect(sim.to_run()), "ppo-kl-too-low", sim.truth[0].step)
    assert hit is not None and hit.severity == "warning"
    assert abs(hit.step - sim.truth[0].step) <= STEP_TOLERANCE, hit.message


def test_on_policy_signature_without_a_config_is_skipped():
    """One update per step: ppo_kl is numerics noise around 0 and nothing is clipped."""
    rng = np.random.default_rng(0)
    ppo_kl = 3e-6 * rng.standard_normal(300)
    ppo_kl[150:] *= 15  # noise of another size, not an update that moved the policy
    kl = 0.015 * np.exp(rng.normal(0, 0.05, 300))
    run = make_run(
        {"actor/ppo_kl": ppo_kl, "actor/pg_clipfrac": np.zeros(300), "actor/kl_loss": kl}
    )
    assert "on-policy" in PPOKLTooLow().skip_reason(run)
    assert PPOKLTooLow().detect(run) == []
    assert KLJump().detect(run) == []


def test_ppo_kl_too_low_states_a_normal_entropy_fall_without_calling_it_a_collapse():
    rng = np.random.default_rng(5)
    n = 300
    ppo_kl = 3e-4 * np.exp(rng.normal(0, 0.2, n))
    ppo_kl[150:] = 3e-5 * np.exp(rng.normal(0, 0.2, n - 150))
    entropy = 0.6 * (1 - 0.58 * (1 - np.exp(-np.arange(n) / 30))) * np.exp(rng.normal(0, 0.02, n))
    cfg = {"actor_rollout_ref": {"actor": {"optim": {"lr": 1e-6}}}}
    run = make_run({"actor/ppo_kl": ppo_kl, "actor/entropy": entropy}, config=cfg)
    (f,) = PPOKLTooLow().detect(run)
    assert "Entropy fell from" in f.message and "collapse" not in f.message
    assert [a for a in f.advice if a.parameter.endswith("optim.lr")]


@pytest.mark.parametrize("seed", [6, 7, 8])
def test_heavy_tailed_ppo_kl_wandering_2x_is_not_a_jump(seed):
    dyn = Dynamics(tail_df=3.0, noise_phi=0.8, kl_sqrt=True)
    run = simulate(1500, "ppo", seed=seed, noise=1.4, dynamics=dyn).to_run()
    _, ppo_kl = run.series("actor/ppo_kl")
    meds = _window_medians(ppo_kl)
    assert (meds[15:] / meds[:-15]).max() > 2  # 15-step medians a window apart differ 2×
    assert warnings_of(KLJump().detect(run)) == []


def _wandering_ppo_kl(seed: int, n: int = 400) -> np.ndarray:
    """ppo_kl at 4e-4 × exp(AR(1) noise: φ 0.7, Student-t df 5 innovations of scale 0.25)."""
    rng = np.random.default_rng(seed)
    e = 0.25 * rng.standard_t(5, n)
    z = np.zeros(n)
    for i in range(1, n):
        z[i] = 0.7 * z[i - 1] + e[i]
    return 4e-4 * np.exp(z)


@pytest.mark.parametrize("seed", [13, 71, 122, 137, 179])
def test_ppo_kl_climbing_out_of_a_dip_back_to_its_usual_level_is_no_jump(seed):
    """Autocorrelated heavy-tailed ppo_kl wanders into dips (these seeds: at steps 10-390) and
    climbs back out: measured from the dip that is a 3× rise, measured from everything logged
    before it none. The same noise with a real 8× step at step 200 is a jump."""
    v = _wandering_ppo_kl(seed)
    assert warnings_of(KLJump().detect(make_run({"actor/ppo_kl": v}))) == []
    v[199:] *= 8
    found = warnings_of(KLJump().detect(make_run({"actor/ppo_kl": v})))
    assert any(abs(f.step - 200) <= 3 for f in found)


@pytest.mark.parametrize("seed", [11, 13, 17])
def test_lr_warmup_and_kl_growing_like_sqrt_t_are_not_jumps(seed):
    """ppo_kl rises with the LR while it warms up, and KL to the reference (√t from 0) grows
    fastest once the LR has warmed up: neither is a step."""
    dyn = _heavy(lr_warmup_ratio=0.1, lr_schedule="linear", update_lr_power=1.8)
    run = simulate(200, "grpo", seed=seed, dynamics=dyn).to_run()
    _, kl = run.series("actor/kl_loss")
    _, ppo_kl = run.series("actor/ppo_kl")
    assert np.median(kl[20:35]) > 2 * np.median(kl[5:20])  # KL more than doubles early on
    assert np.median(ppo_kl[20:35]) > 2 * np.median(ppo_kl[:10])  # so does ppo_kl
    assert warnings_of(KLJump().detect(run)) == []


@pytest.mark.parametrize(("seed", "algorithm"), [(12, "grpo"), (13, "ppo")])
def test_kl_jump_found_in_heavy_tailed_runs(seed, algorithm):
    dyn = _heavy(lr_schedule="cosine", update_lr_power=1.5)
    inject = [Injection("kl-jump", 300, 0.8)]
    sim = simulate(700, algorithm, seed=seed, noise=1.3, dynamics=dyn, inject=inject)
    findings = KLJump().detect(sim.to_run())
    hit = nearest(findings, "kl-jump", sim.truth[0].step)
    assert hit is not None and abs(hit.step - sim.truth[0].step) <= STEP_TOLERANCE
    assert {f.metric for f in findings} >= {"actor/kl_loss"}
    for f in findings:
        check_finding_shape(KLJump(), f)


def test_rounded_log_reads_the_clip_fraction_and_the_config_lr_schedule():
    """.3f: healthy ppo_kl (~3e-4) prints 0.000 almost always and actor/lr prints 0.000;
    the clip fraction (0.002) still shows when updates shrink, the config gives the LR."""
    from logscope.detectors.kl import _lr_share

    dyn = _heavy(lr_schedule="cosine", lr_warmup_ratio=0.05, min_lr_ratio=0.1)
    sim = simulate(
        400, "grpo", seed=14, dynamics=dyn, version="0.4", inject=[Injection("ppo-kl-too-low", 80)]
    )
    run = rounded(sim.to_run())
    steps, lr = run.series("actor/lr")
    assert not lr.any()  # printed as 0.000
    share = _lr_share(run, steps)
    assert share is not None
    assert np.allclose(share, sim.dynamics.lr_factor(steps.astype(float), 400), atol=0.02)
    (f,) = PPOKLTooLow().detect(run)
    assert f.severity == "info" and "actor/pg_clipfrac" in f.message
    assert abs(f.step - sim.truth[0].step) <= STEP_TOLERANCE


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_kl_jump_evidence_states_its_noise_on_the_levels_scale(algorithm):
    """z counts spreads of the same change elsewhere; the spread is given on the levels' own
    scale (a factor for a log-scale series), so levels, z and spread agree by arithmetic."""
    sim = simulate(300, algorithm, seed=0, inject=[Injection("kl-jump", 150, 1.0)])
    findings = [f for f in KLJump().detect(sim.to_run()) if f.evidence["kind"] == "level shift"]
    assert findings
    for f in findings:
        e = f.evidence
        assert not any("sigma" in key for key in e)  # no bare σ of an unnamed scale
        if e["scale"] == "log":
            rise = np.log(e["level_after"] / e["level_before"])
            assert rise == pytest.approx(e["z"] * np.log(e["spread_factor"]), rel=0.1)
            assert f"×{e['spread_factor']:.3g}" in f.message
        else:
            rise = e["level_after"] - e["level_before"]
            assert rise == pytest.approx(e["z"] * e["spread"], rel=0.1)


# ---- healthy shapes that are not alarms (a healthy-run simulator's false alarms) ----------
def _learning_run(n: int, seed: int, **metrics: np.ndarray):
    """A run that learns: score rising 0.25 → 0.5, entropy steady near 0.3."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    score = 0.25 + 0.25 * (1 - np.exp(-t / (n / 3))) + rng.normal(0, 0.02, n)
    entropy = 0.3 * np.exp(rng.normal(0, 0.03, n))
    return {"critic/score/mean": score, "actor/entropy": entropy, **metrics}


def test_ppo_kl_low_while_the_run_learns_is_not_a_warning():
    """Several mini-batches: ppo_kl ~5e-5 from the start (the first mini-batch is ~0 by
    construction) while the score rises and KL to the reference grows."""
    n, rng = 150, np.random.default_rng(11)
    ppo_kl = 5e-5 * np.exp(rng.normal(0, 0.3, n))
    kl = 0.002 + 0.008 * np.sqrt(np.arange(n) / n) * np.exp(rng.normal(0, 0.05, n))
    cfg = {"actor_rollout_ref": {"actor": {"optim": {"lr": 5e-7}, "use_kl_loss": True}}}
    run = make_run(
        _learning_run(n, 11, **{"actor/ppo_kl": ppo_kl, "actor/kl_loss": kl}), config=cfg
    )
    findings = PPOKLTooLow().detect(run)
    assert warnings_of(findings) == []
    (f,) = findings
    assert f.severity == "info" and f.evidence["learning"] is True
    assert f.advice[0].parameter == "actor_rollout_ref.actor.optim.lr"  # a lever
    assert "learning" in f.message


def test_ppo_kl_low_on_a_run_that_does_not_learn_still_warns():
    n, rng = 150, np.random.default_rng(12)
    ppo_kl = 5e-5 * np.exp(rng.normal(0, 0.3, n))
    score = 0.3 + rng.normal(0, 0.02, n)
    kl = 0.004 * np.exp(rng.normal(0, 0.05, n))
    cfg = {"actor_rollout_ref": {"actor": {"optim": {"lr": 5e-7}}}}
    metrics = {"actor/ppo_kl": ppo_kl, "critic/score/mean": score, "actor/kl_loss": kl}
    (f,) = PPOKLTooLow().detect(make_run(metrics, config=cfg))
    assert f.severity == "warning" and "learning" not in f.evidence


def test_ppo_kl_low_on_a_run_that_learned_and_levelled_off_is_info():
    """ppo_kl at 1.3e-4 while the score rises over the first 60 steps (0.3 → 0.8), then
    settling to 8e-5 (no abrupt fall) while the score holds: a converged policy updates
    little, not an alarm."""
    n, rng = 150, np.random.default_rng(12)
    ppo_kl = np.where(np.arange(n) < 60, 1.3e-4, 8e-5) * np.exp(rng.normal(0, 0.3, n))
    score = 0.3 + 0.5 * np.minimum(np.arange(n) / 60, 1.0) + rng.normal(0, 0.02, n)
    kl = 0.004 * np.exp(rng.normal(0, 0.05, n))
    cfg = {"actor_rollout_ref": {"actor": {"optim": {"lr": 5e-7}}}}
    metrics = {"actor/ppo_kl": ppo_kl, "critic/score/mean": score, "actor/kl_loss": kl}
    (f,) = PPOKLTooLow().detect(make_run(metrics, config=cfg))
    assert f.severity == "info" and f.evidence["converged"] and "levelled off" in f.message


def test_ppo_kl_abrupt_fall_warns_even_while_the_score_rises():
    """A sudden fall of the update size at a constant LR is a change to explain."""
    n, rng = 300, np.random.default_rng(13)
    ppo_kl = 4e-4 * np.exp(rng.normal(0, 0.2, n))
    ppo_kl[120:] = 3e-5 * np.exp(rng.normal(0, 0.2, n - 120))
    cfg = {"actor_rollout_ref": {"actor": {"optim": {"lr": 1e-6}}}}
    (f,) = PPOKLTooLow().detect(
        make_run(_learning_run(n, 13, **{"actor/ppo_kl": ppo_kl}), config=cfg)
    )
    assert f.severity == "warning" and abs(f.step - 120) <= STEP_TOLERANCE


def _slow_kl_drift(n: int, seed: int) -> np.ndarray:
    """KL to the reference drifting 0.01 → ~0.08 over hundreds of steps (cumulative drift)."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1)
    return 0.08 * (1 - np.exp(-t / (n / 2.5))) * np.exp(rng.normal(0, 0.08, n))


def test_kl_above_band_by_slow_drift_while_learning_is_info():
    n = 500
    run = make_run(_learning_run(n, 21, **{"actor/kl_loss": _slow_kl_drift(n, 21)}))
    (f,) = KLOutOfBand().detect(run)
    assert f.severity == "info" and f.evidence["direction"] == "high"
    assert f.evidence["corroboration"] == {} and "slow drift" in f.message


def test_kl_above_band_with_entropy_collapsing_is_a_warning():
    n = 500
    metrics = _learning_run(n, 22, **{"actor/kl_loss": _slow_kl_drift(n, 22)})
    metrics["actor/entropy"] = metrics["actor/entropy"] * np.where(np.arange(n) > 150, 0.05, 1.0)
    (f,) = KLOutOfBand().detect(make_run(metrics))
    assert f.severity == "warning" and "entropy_collapsing" in f.evidence["corroboration"]


def test_kl_above_band_with_the_score_falling_is_a_warning():
    n, rng = 500, np.random.default_rng(23)
    score = 0.5 - 0.3 * np.arange(n) / n + rng.normal(0, 0.02, n)
    metrics = {"actor/kl_loss": _slow_kl_drift(n, 23), "critic/score/mean": score}
    (f,) = KLOutOfBand().detect(make_run(metrics))
    assert f.severity == "warning" and "score_falling" in f.evidence["corroboration"]


@pytest.mark.parametrize("warmup", [0, 20])
@pytest.mark.parametrize("seed", [31, 32, 33])
def test_smooth_kl_ramp_from_zero_at_the_start_is_not_a_jump(warmup, seed):
    """kl_loss climbing ~0.001 → 0.022 over the first ~35 steps (with or without an LR
    warm-up), then flat and drifting slowly: 15-step differences early in the ramp are large
    against the flat curve later, but nothing jumped."""
    n, rng = 300, np.random.default_rng(seed)
    t = np.arange(1, n + 1)
    kl = (0.022 * np.minimum(1, t / 35) ** 0.9 + 0.00004 * t) * np.exp(rng.normal(0, 0.06, n))
    metrics = {"actor/kl_loss": kl}
    if warmup:
        metrics["actor/lr"] = 2e-6 * np.minimum(1.0, t / warmup)
    assert warnings_of(KLJump().detect(make_run(metrics))) == []


def test_kl_jump_right_after_the_startup_ramp_is_still_found():
    n, rng = 300, np.random.default_rng(34)
    t = np.arange(1, n + 1)
    kl = 0.015 * np.minimum(1, t / 25) * np.exp(rng.normal(0, 0.06, n))
    kl[59:] *= 3.5
    found = [f for f in KLJump().detect(make_run({"actor/kl_loss": kl})) if f.severity != "info"]
    assert found and any(abs(f.step - 60) <= STEP_TOLERANCE for f in found), found


@pytest.mark.parametrize("n", [150, 320])
def test_kl_climbing_steadily_from_zero_past_the_band_is_not_a_fast_rise(n):
    """KL to the reference growing linearly from 0 (0.0008 a step) passes 0.05 around step 62,
    2.3× its level 30 steps before: the pace of a steady climb, not a fast rise."""
    rng = np.random.default_rng(7)
    kl = np.minimum(0.0008 * np.arange(n), 0.09) * np.exp(rng.normal(0, 0.05, n)) + 1e-4
    run = make_run(_learning_run(n, 7, **{"actor/kl_loss": kl}))
    (f,) = KLOutOfBand().detect(run)
    assert f.severity == "info" and f.evidence["corroboration"] == {}
