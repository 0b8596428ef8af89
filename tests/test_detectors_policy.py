"""LS110 entropy-collapse, LS120 clip-ratio-spike, LS130 grad-norm-spike, LS140
response-length-collapse on simulated and hand-built runs.

Injected pathologies must be found under the right name within STEP_TOLERANCE steps of the
simulator's ground truth; healthy runs must stay silent at warning and above.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
from logscope.detectors.kl import KLJump, KLOutOfBand, PPOKLTooLow
from logscope.detectors.policy import (
    ClipRatioSpike,
    EntropyCollapse,
    GradNormSpike,
    ResponseLengthCollapse,
)

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
DETECTORS = {
    "entropy-collapse": EntropyCollapse,
    "clip-ratio-spike": ClipRatioSpike,
    "grad-norm-spike": GradNormSpike,
    "response-length-collapse": ResponseLengthCollapse,
}
ALL_LS1XX = (KLJump, KLOutOfBand, PPOKLTooLow, *DETECTORS.values())
CONFIG = {
    "actor_rollout_ref": {
        "actor": {"optim": {"lr": 1e-6}, "grad_clip": 1.0, "clip_ratio": 0.2, "entropy_coeff": 0}
    },
    "data": {"max_response_length": 1024},
}


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
    findings = det.detect(sim.to_run())
    hit = nearest(findings, kind, truth)
    assert hit is not None, f"{kind} not found (truth step {truth})"
    assert abs(hit.step - truth) <= STEP_TOLERANCE, (hit.step, truth, hit.message)
    assert hit.severity in ("warning", "error")
    for f in findings:
        check_finding_shape(det, f)


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
@pytest.mark.parametrize("seed", range(10))
def test_healthy_runs_are_silent(algorithm, seed):
    n = (150, 400, 1200)[seed % 3]
    version = ("0.4", "0.5", "0.8", "0.9")[seed % 4]
    run = simulate(n, algorithm, seed=200 + seed, noise=0.7 + 0.07 * seed, version=version)
    run = run.to_run()
    if version == "0.4":
        run = rounded(run)
    for cls in DETECTORS.values():
        assert warnings_of(cls().detect(run)) == []


@pytest.mark.parametrize("kind", sorted(DETECTORS))
def test_found_in_a_3f_rounded_log(kind):
    sim, truth = _inject(kind, 500, "grpo", 5, 1.2, version="0.4")
    run = rounded(sim.to_run())
    assert run.value_resolution == 0.0005
    hit = nearest(DETECTORS[kind]().detect(run), kind, truth)
    assert hit is not None and abs(hit.step - truth) <= STEP_TOLERANCE


@pytest.mark.parametrize("kind", sorted(DETECTORS))
def test_nan_gaps_and_irregular_logging(kind):
    sim, truth = _inject(kind, 800, "ppo", 6, 1.3)
    run = with_gaps(sim.to_run(), seed=2, drop=0.1, nan=0.05, keep_step=truth)
    hit = nearest(DETECTORS[kind]().detect(run), kind, truth)
    assert hit is not None and abs(hit.step - truth) <= STEP_TOLERANCE + 2


@pytest.mark.parametrize("n_steps", [0, 1, 3, 8])
def test_short_runs_never_raise(n_steps):
    sim, _ = _inject("entropy-collapse", 200, "ppo", 1, 1.0)
    run = truncated(sim.to_run(), n_steps)
    for cls in DETECTORS.values():
        assert cls().detect(run) == []


def test_all_nan_constant_and_zero_series():
    n = 60
    run = make_run(
        {
            "actor/entropy": [np.nan] * n,
            "actor/grad_norm": [0.0] * n,
            "response_length/clip_ratio": [0.0] * n,
            "actor/pg_clipfrac": [0.002] * n,
            "response_length/mean": [300.0] * n,
        }
    )
    for cls in DETECTORS.values():
        assert cls().detect(run) == []


def test_entropy_collapse_hand_built_exponential():
    rng = np.random.default_rng(0)
    t = np.arange(400)
    ent = 0.8 * np.exp(rng.normal(0, 0.03, 400))
    ent[250:] *= 0.03 + 0.97 * np.exp(-(t[250:] - 250) / 12)
    (f,) = EntropyCollapse().detect(make_run({"actor/entropy": ent}, config=CONFIG))
    assert abs(f.step - 251) <= 2  # index 250 is step 251
    assert f.severity == "error"  # ends below 10% of its level
    assert f.evidence["level_before"] == pytest.approx(0.8, rel=0.05)
    assert f.evidence["steps_to_half"] <= 12
    by_key = {a.parameter: a for a in f.advice}
    assert by_key["actor_rollout_ref.actor.entropy_coeff"].suggested == 0.001
    assert by_key["actor_rollout_ref.actor.clip_ratio_high"].suggested == 0.28
    assert by_key["actor_rollout_ref.actor.optim.lr"].suggested == 5e-7


def test_slow_healthy_entropy_decline_is_not_a_collapse():
    """Entropy falling 1.0 → 0.35 steadily over 2,000 steps is not a collapse."""
    rng = np.random.default_rng(1)
    t = np.arange(2000)
    ent = (0.35 + 0.65 * np.exp(-t / 700)) * np.exp(rng.normal(0, 0.02, 2000))
    assert EntropyCollapse().detect(make_run({"actor/entropy": ent})) == []


def test_clip_ratio_truncation_advice_raises_cap_with_rollout_length_equal():
    sim, truth = _inject(
        "clip-ratio-spike",
        300,
        "grpo",
        3,
        1.0,
        config={
            "data.max_response_length": 1024,
            "actor_rollout_ref.rollout.response_length": 1024,
        },
    )
    run = sim.to_run()
    f = nearest(ClipRatioSpike().detect(run), "clip-ratio-spike", truth)
    assert f.metric == "response_length/clip_ratio"
    by_key = {a.parameter: a for a in f.advice}
    cap = by_key["data.max_response_length"]
    assert cap.current == 1024 and cap.suggested == 1536
    assert by_key["actor_rollout_ref.rollout.response_length"].suggested == 1536


def test_pg_clipfrac_spike_advice_lr_and_grad_clip():
    rng = np.random.default_rng(2)
    cf = 0.005 * np.exp(rng.normal(0, 0.2, 200))
    cf[90:92] = 0.08
    (f,) = ClipRatioSpike().detect(make_run({"actor/pg_clipfrac": cf}, config=CONFIG))
    assert f.step == 91 and f.end_step == 92
    by_key = {a.parameter: a for a in f.advice}
    assert by_key["actor_rollout_ref.actor.grad_clip"].suggested == 0.5  # B6: 1.0 → 0.5
    assert by_key["actor_rollout_ref.actor.optim.lr"].suggested == 5e-7


def test_grad_norm_spike_and_explosion_severities():
    rng = np.random.default_rng(3)
    gn = 0.5 * np.exp(rng.normal(0, 0.15, 400))
    gn[100] *= 9  # isolated spike
    gn[300:] *= 6  # lasting rise: explosion
    found = GradNormSpike().detect(make_run({"actor/grad_norm": gn}, config=CONFIG))
    spike = nearest(found, "grad-norm-spike", 101)
    boom = nearest(found, "grad-norm-spike", 301)
    assert spike.step == 101 and spike.severity == "warning" and spike.evidence["kind"] == "spike"
    assert abs(boom.step - 301) <= 1 and boom.severity == "error"
    clip = next(a for a in spike.advice if a.parameter.endswith("grad_clip"))
    assert clip.override == "actor_rollout_ref.actor.grad_clip=0.5"


def test_critic_grad_norm_advice_uses_critic_keys():
    rng = np.random.default_rng(4)
    gn = 2.0 * np.exp(rng.normal(0, 0.15, 200))
    gn[120] *= 10
    (f,) = GradNormSpike().detect(make_run({"critic/grad_norm": gn}, config=CONFIG))
    assert all(a.parameter.startswith("critic.") for a in f.advice)


def test_response_length_explosion_to_the_cap():
    """30% of simulated response-length injections run up to the cap instead of collapsing."""
    for seed in range(30):
        sim, truth = _inject("response-length-collapse", 300, "grpo", seed, 1.0)
        if sim.details["response-length-collapse"]["mode"] == "explode":
            break
    else:
        pytest.skip("no explode-mode seed")
    run = sim.to_run()
    f = nearest(ResponseLengthCollapse().detect(run), "response-length-collapse", truth)
    assert f is not None and abs(f.step - truth) <= STEP_TOLERANCE
    assert f.evidence["direction"] == "to-cap"
    cap = run.config_value("data.max_response_length")
    assert f.evidence["cap"] == cap
    assert f.advice[0].parameter == "data.max_response_length"
    assert f.advice[0].suggested > cap
    # the same run without a config: the cap comes from response_length/max
    run.config_segments = []
    f2 = nearest(ResponseLengthCollapse().detect(run), "response-length-collapse", truth)
    assert f2 is not None and f2.advice[0].override is None


def test_100k_step_run_is_fast():
    sim = simulate(
        100_000,
        "ppo",
        seed=11,
        inject=[Injection("grad-norm-spike", 60_000, 1.0)],
    )
    run = sim.to_run()
    run.series("actor/grad_norm")  # the run's per-metric split is the reader's cost, not ours
    t0 = time.perf_counter()
    findings = [f for cls in ALL_LS1XX for f in cls().detect(run)]
    elapsed = time.perf_counter() - t0
    assert elapsed < 5.0, f"LS1xx detectors took {elapsed:.1f} s on 100k steps"
    assert nearest(findings, "grad-norm-spike", 60_000).step == 60_000
    assert not [f for f in warnings_of(findings) if f.name != "grad-norm-spike"]


def test_bad_parameters_rejected():
    with pytest.raises(BadDetectorParameters):
        EntropyCollapse(max_ratio=1.5)
    with pytest.raises(BadDetectorParameters):
        ClipRatioSpike(min_ratio=0.5)
    with pytest.raises(BadDetectorParameters):
        GradNormSpike(z_threshold=0)
    with pytest.raises(BadDetectorParameters):
        ResponseLengthCollapse(cap_fraction=2)


_METRICS = (
    "actor/kl_loss",
    "actor/ppo_kl",
    "actor/entropy",
    "actor/grad_norm",
    "actor/pg_clipfrac",
    "response_length/clip_ratio",
    "response_length/mean",
)


def test_never_raises_on_arbitrary_series():
    """Property: any finite/NaN/inf/negative/constant values, any length, rounded or not."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    values = st.lists(
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True, width=64),
            st.sampled_from([0.0, 1e-5, 0.001, 0.5, 1e6, -1.0]),
        ),
        min_size=0,
        max_size=80,
    )

    @settings(max_examples=40, deadline=None)
    @given(st.lists(values, min_size=len(_METRICS), max_size=len(_METRICS)), st.booleans())
    def check(columns, is_rounded):
        series = {m: v for m, v in zip(_METRICS, columns, strict=True) if v}
        meta = {"value_resolution": 0.0005} if is_rounded else {}
        run = make_run(series, meta=meta, config=CONFIG) if series else make_run({})
        for cls in ALL_LS1XX:
            det = cls()
            if det.skip_reason(run) is None:
                for f in det.detect(run):
                    assert f.step is not None

    check()


def test_each_spike_of_a_metric_is_its_own_finding_at_its_step():
    """Well-separated spikes are one finding each (a burst of adjacent steps stays one); every
    message names the others. Was one finding dated at the first spike (acceptance change)."""
    rng = np.random.default_rng(7)
    gn = 0.5 * np.exp(rng.normal(0, 0.15, 300))
    for i, k in ((60, 8), (150, 7), (151, 7), (240, 9)):
        gn[i] *= k
    found = GradNormSpike().detect(make_run({"actor/grad_norm": gn}, config=CONFIG))
    assert [(f.step, f.end_step) for f in found] == [(61, 61), (151, 152), (241, 241)]
    assert all(f.evidence["spike_count"] == 3 for f in found)
    assert [f.evidence["spike_number"] for f in found] == [1, 2, 3]
    assert "the others at steps 151, 241" in found[0].message
    assert "the others at steps 61, 151" in found[2].message


# ---- realistic dynamics (logscope.synthetic.realistic) ----------------------------------------


def _realistic(seed: int, n: int, algorithm: str, noise: float = 1.0, inject=(), **changes):
    """A run with the dynamics of real runs drawn for `seed` (some knobs fixed by `changes`)."""
    dyn, config = synthetic.realistic(np.random.default_rng([seed, 7]), n, algorithm)
    batch = changes.pop("train_batch_size", None)
    if batch:
        config["data.train_batch_size"] = batch
    dyn = dataclasses.replace(dyn, resume_step=None, **changes)
    sim = simulate(n, algorithm, seed=seed, noise=noise, inject=list(inject), config=config,
                   dynamics=dyn)  # fmt: skip
    return sim, dyn


def test_heavy_tailed_healthy_grad_norm_is_no_spike():
    """Student-t (df 3.4), autocorrelated grad-norm noise: one step at 5× the running median
    (the old detector's spike) is within a healthy run's own tail."""
    sim, dyn = _realistic(15, 300, "ppo", noise=1.3)
    assert dyn.tail_df < 4
    run = sim.to_run()
    _, gn = run.series("actor/grad_norm")
    assert gn.max() > 4 * np.median(gn)  # a heavy-tailed excursion is there
    assert warnings_of(GradNormSpike().detect(run)) == []


def test_realistic_grad_norm_spikes_each_found_at_their_step():
    sim, _ = _realistic(4, 300, "grpo", inject=[Injection("grad-norm-spike", 120, 1.5)])
    truth = sim.details["grad-norm-spike"]["spike_steps"]
    assert len(truth) >= 2
    found = GradNormSpike().detect(sim.to_run())
    assert [f.step for f in found] == truth
    assert all(f.severity == "warning" for f in found)


def test_small_batch_truncation_count_noise_is_no_spike():
    """PPO, 128 responses a step, responses growing 3.4× so truncation rises: 1/128 → 6/128 in
    one step is count noise (the old detector's 5.9× spike)."""
    sim, dyn = _realistic(1, 160, "ppo", noise=1.2)
    assert dyn.length_growth > 3
    run = rounded(sim.to_run())
    assert run.config_value("data.train_batch_size") == 128
    assert warnings_of(ClipRatioSpike().detect(run)) == []


@pytest.mark.parametrize("on_policy", [True, False])
def test_truncation_bursts_alone_suffice_after_critic_warmup(on_policy):
    """PPO with critic warm-up, 64 responses a step; on-policy runs log pg_clipfrac 0. The
    burst (3 adjacent steps) and each later spike are one finding each, at their steps."""
    sim, _ = _realistic(
        3,
        150,
        "ppo",
        inject=[Injection("clip-ratio-spike", 60, 1.0)],
        on_policy=on_policy,
        critic_warmup=10,
        train_batch_size=64,
    )
    steps = sim.details["clip-ratio-spike"]["spike_steps"]
    firsts = [x for i, x in enumerate(steps) if i == 0 or x - steps[i - 1] > 2]
    assert steps[0] == 60 and len(firsts) == 3  # a burst from step 60, then two spikes
    run = sim.to_run()
    if on_policy:
        assert not run.series("actor/pg_clipfrac")[1].any()
    found = ClipRatioSpike().detect(run)
    assert [f.step for f in found] == firsts
    assert found[0].end_step == max(x for x in steps if x - 60 <= 2)  # the burst's last step
    assert all(f.metric == "response_length/clip_ratio" for f in found)
    assert found[0].evidence["responses_per_step"] == 64
    assert "of 64 responses cut" in found[0].message
    run.config_segments = []  # without the config, N comes from the values' granularity (1/64)
    assert [f.step for f in ClipRatioSpike().detect(run)] == firsts


@pytest.mark.parametrize(
    ("peak", "width", "severity"),
    [(0.054, 1, "info"), (0.07, 3, "info"), (0.2, 1, "warning"), (0.07, 6, "warning")],
)
def test_a_short_truncation_burst_under_a_tenth_is_info(peak, width, severity):
    """2048 responses a step at ~1.7% truncation: one to three steps at 5–7% are significant
    count-wise but a draw of long prompts (info); 20%, or six steps, is a warning."""
    rng = np.random.default_rng(5)
    n, responses = 200, 2048
    clip = rng.binomial(responses, 0.017, n) / responses
    clip[120 : 120 + width] = round(peak * responses) / responses
    (f,) = ClipRatioSpike().detect(make_run({"response_length/clip_ratio": clip}))
    assert f.step == 121 and f.severity == severity  # index 120 (steps from 1)
    assert ("draw of long prompts" in f.message) == (severity == "info")


@pytest.mark.parametrize(
    ("peak", "width", "severity"),
    [(0.27, 1, "info"), (0.29, 3, "info"), (0.36, 1, "warning"), (0.27, 6, "warning")],
)
def test_a_short_burst_at_an_already_high_truncation_is_info(peak, width, severity):
    """A run truncating ~20% of 4096 responses a step: one to three steps at under 1.5× that
    (27–29%) are significant count-wise but a draw of long prompts (info); 36% is a warning,
    and so is a rise that lasts six steps."""
    rng = np.random.default_rng(7)
    n, responses = 200, 4096
    clip = rng.binomial(responses, 0.2, n) / responses
    clip[120 : 120 + width] = round(peak * responses) / responses
    (f,) = ClipRatioSpike().detect(make_run({"response_length/clip_ratio": clip}))
    assert f.step == 121 and f.severity == severity
    assert ("draw of long prompts" in f.message) == (severity == "info")


def _truncation_learning_to_fit(seed: int, n: int = 300) -> np.ndarray:
    """4096 responses a step at 0.4% truncation, plus a start at 35% that falls (with 10%
    multiplicative noise, not k/N) to nothing over the first quarter: responses learning to fit."""
    rng = np.random.default_rng(seed)
    u = np.arange(n) / n
    base = rng.binomial(4096, 0.004, n) / 4096
    extra = 0.35 * np.clip(1 - u / 0.25, 0, None) ** 1.5 * np.exp(rng.normal(0, 0.1, n))
    return np.clip(base + extra, 0, 1)


def test_truncation_falling_from_a_high_start_is_no_spike():
    """The early noise of a high, falling truncation is many times the late noise, and an
    early step's one-sided window holds only the later, lower steps: neither makes a spike
    (the old detector warned on 8 of 60 such runs, at steps 3-13)."""
    for seed in range(20):
        clip = _truncation_learning_to_fit(seed)
        run = make_run({"response_length/clip_ratio": clip})
        assert warnings_of(ClipRatioSpike().detect(run)) == [], seed
    clip[200] = 0.1  # 25× the late level: still a spike
    (f,) = warnings_of(ClipRatioSpike().detect(make_run({"response_length/clip_ratio": clip})))
    assert f.step == 201


def test_r1_style_entropy_fall_to_a_plateau_is_no_collapse():
    """Entropy falling by half early (R1-style) and settling is healthy."""
    sim, dyn = _realistic(3, 60, "grpo", noise=1.3)
    assert dyn.entropy_drop > 0.45
    assert warnings_of(EntropyCollapse().detect(sim.to_run())) == []


def test_realistic_entropy_collapse_dated_where_it_starts_after_the_healthy_fall():
    """Injected at step 20 of 80, while the healthy early fall still runs: the collapse is
    dated where the steep part starts (the flat-then-straight knee alone said step 10)."""
    sim, _ = _realistic(6, 80, "grpo", inject=[Injection("entropy-collapse", 20, 1.0)])
    (f,) = EntropyCollapse().detect(sim.to_run())
    assert abs(f.step - 20) <= 2 and f.severity == "error"


def test_entropy_still_falling_at_the_end_is_a_collapse():
    """The log ends 12 steps into a collapse (44% of the level so far): still falling."""
    rng = np.random.default_rng(0)
    t = np.arange(200)
    ent = 0.6 * np.exp(rng.normal(0, 0.03, 200) - np.maximum(0, t - 188) / 10)
    (f,) = EntropyCollapse().detect(make_run({"actor/entropy": ent}))
    assert abs(f.step - 190) <= 2
    assert f.evidence["ratio"] > 0.25 and f.evidence["still_falling"]["lost"] > 0.2
    assert "still falling at the end of the log" in f.message
    # the same fall, settling at 30% of the level for 30 steps: a plateau, not a collapse
    settled = np.concatenate([ent, ent[-1] * np.exp(rng.normal(0, 0.03, 30))])
    assert EntropyCollapse().detect(make_run({"actor/entropy": settled})) == []


def test_a_climb_out_of_a_dip_back_to_the_usual_grad_norm_is_no_explosion():
    # a realistic healthy PPO run (noisy, autocorrelated critic grad norm) whose critic/grad_norm
    # dips to 0.58 and climbs back to ~1.8: 3.1x the dip, not above its usual ~1.5
    from logscope.synthetic import realistic

    seed, n = 1578779529, 825
    dyn, config = realistic(np.random.default_rng([seed, 7]), n, "ppo")
    sim = simulate(
        n, "ppo", seed=seed, noise=1.368, version="0.8", test_freq=5, config=config, dynamics=dyn
    )
    errors = [f for f in GradNormSpike().detect(sim.to_run()) if f.severity != "info"]
    assert errors == []


# ---- response length: dips that recover, truncated starts that learn to fit (LS140) ------------


def _healthy_realistic(seed: int, n: int, algorithm: str = "grpo"):
    """A healthy realistic run as `bench/detection.py` draws one (dynamics from `seed`)."""
    from logscope.synthetic import realistic

    dyn, config = realistic(np.random.default_rng([seed, 7]), n, algorithm)
    return simulate(
        n, algorithm, seed=seed, version="0.8", test_freq=10, config=config, dynamics=dyn
    )


def _replace(sim, metric: str, shape) -> None:
    """Give `metric` the values `shape(u, v)` (u: the share of the run, 0..1; v: its values)."""
    import polars as pl

    steps, values = sim.series(metric)
    u = (steps - steps[0]) / (steps[-1] - steps[0])
    new = pl.DataFrame(
        {"step": steps, "metric": [metric] * len(steps), "value": shape(u, values)},
        schema={k: sim.metrics.schema[k] for k in ("step", "metric", "value")},
    )
    rest = sim.metrics.filter(pl.col("metric") != metric)
    if "wall_time" in sim.metrics.columns:
        new = new.join(
            sim.metrics.filter(pl.col("metric") == metric).select("step", "wall_time"), on="step"
        )
    sim.metrics = pl.concat([rest, new.select(sim.metrics.columns)]).sort("step")


def _relative_noise(v):
    """v's wiggle around its own moving average (1 = on the trend)."""
    w = max(5, len(v) // 10)
    trend = np.convolve(np.pad(v, (w // 2, w - 1 - w // 2), mode="edge"), np.ones(w) / w, "valid")
    return v / trend


@pytest.mark.parametrize(("seed", "n", "depth"), [(11, 300, 0.5), (12, 500, 0.45), (13, 200, 0.5)])
def test_an_early_length_dip_that_grows_back_is_no_collapse(seed, n, depth):
    """Real GRPO runs often shorten their answers first, then lengthen them: the mean falls by
    `depth` over the first fifth of the run and ends 30% above where it started (it used to be
    reported as a collapse at step ~5)."""
    sim = _healthy_realistic(seed, n)

    def dip(u, v):
        fall = np.where(
            u <= 0.2, 1 - depth * u / 0.2, (1 - depth) + (0.3 + depth) * (u - 0.2) / 0.8
        )
        return 400.0 * fall * _relative_noise(v)

    _replace(sim, "response_length/mean", dip)
    found = ResponseLengthCollapse().detect(sim.to_run())
    assert [f for f in found if f.evidence.get("direction") == "collapse"] == []


@pytest.mark.parametrize(("seed", "n"), [(21, 300), (24, 600), (23, 150)])
def test_truncated_responses_learning_to_fit_are_no_collapse(seed, n):
    """Responses start truncated (30% at the cap) and learn to fit over the first quarter: the
    mean falls with the clip ratio, by what the truncated share explains (mean = c·cap +
    (1 − c)·U), while U, the mean of the responses that fit, holds."""
    sim = _healthy_realistic(seed, n)
    cap = float(sim.config["data"]["max_response_length"])
    _, fit_mean = sim.series("response_length/mean")
    _, clip = sim.series("response_length/clip_ratio")
    steps = sim.series("response_length/mean")[0]
    u = (steps - steps[0]) / (steps[-1] - steps[0])
    extra = np.where(u <= 0.25, 0.3 * np.clip(1 - u / 0.25, 0, 1) ** 1.5, 0.0)
    _replace(sim, "response_length/clip_ratio", lambda u, v: np.clip(clip + extra, 0, 1))
    _replace(sim, "response_length/mean", lambda u, v: (1 - extra) * fit_mean + extra * cap)
    found = ResponseLengthCollapse().detect(sim.to_run())
    assert [f for f in found if f.evidence.get("direction") == "collapse"] == []


def test_a_truncated_start_whose_fitting_responses_collapse_too_is_a_collapse():
    """The clip ratio falls with the length, but the responses that fit shrink to a third too:
    truncation does not explain the fall, the policy stopped answering at length."""
    sim = _healthy_realistic(21, 300)
    cap = float(sim.config["data"]["max_response_length"])
    steps, fit_mean = sim.series("response_length/mean")
    _, clip = sim.series("response_length/clip_ratio")
    u = (steps - steps[0]) / (steps[-1] - steps[0])
    extra = np.where(u <= 0.25, 0.3 * np.clip(1 - u / 0.25, 0, 1) ** 1.5, 0.0)
    shrink = np.where(u <= 0.25, 1 - (2 / 3) * u / 0.25, 1 / 3)
    _replace(sim, "response_length/clip_ratio", lambda u, v: np.clip(clip + extra, 0, 1))
    _replace(
        sim, "response_length/mean", lambda u, v: (1 - extra) * fit_mean * shrink + extra * cap
    )
    (f,) = warnings_of(ResponseLengthCollapse().detect(sim.to_run()))
    assert f.evidence["direction"] == "collapse"


def test_a_collapse_after_a_recovered_dip_is_found_at_the_collapse():
    """A dip that grows back, then a real collapse to 10% that stays: the dip is passed over,
    the collapse is reported where it starts."""
    sim = _healthy_realistic(11, 400)
    steps = sim.series("response_length/mean")[0]

    def shape(u, v):
        dip = np.where(
            u <= 0.15, 1 - 0.45 * u / 0.15, np.minimum(1.2, 0.55 + 0.65 * (u - 0.15) / 0.2)
        )
        collapse = np.where(u < 0.6, 1.0, np.maximum(0.1, 1 - 0.9 * (u - 0.6) / 0.05))
        return 400.0 * dip * collapse * _relative_noise(v)

    _replace(sim, "response_length/mean", shape)
    (f,) = warnings_of(ResponseLengthCollapse().detect(sim.to_run()))
    at = int(steps[int(np.searchsorted((steps - steps[0]) / (steps[-1] - steps[0]), 0.6))])
    assert f.evidence["direction"] == "collapse"
    assert abs(f.step - at) <= STEP_TOLERANCE


@pytest.mark.parametrize(("seed", "magnitude"), [(31, 0.8), (32, 1.0), (33, 1.5)])
def test_realistic_length_collapse_still_found(seed, magnitude):
    """A collapse that stays down, on realistic dynamics (growing lengths, truncation)."""
    for attempt in range(20):
        s = seed + 100 * attempt
        from logscope.synthetic import realistic

        dyn, config = realistic(np.random.default_rng([s, 7]), 400, "grpo")
        sim = simulate(400, "grpo", seed=s, config=config, dynamics=dyn, version="0.8",
                       inject=[Injection("response-length-collapse", 180, magnitude)])  # fmt: skip
        if sim.details["response-length-collapse"]["mode"] == "collapse":
            break
    found = warnings_of(ResponseLengthCollapse().detect(sim.to_run()))
    assert found and abs(found[0].step - sim.truth[0].step) <= STEP_TOLERANCE
    assert found[0].evidence["direction"] == "collapse"


# ---- consequences of a NaN update or of garbage generation (a made-up excerpt's shape) --------
def _garbage_step(**changes: float) -> dict[str, list[float]]:
    """One logged step of a model writing garbage: every response at the 256 cap, score 0."""
    step = {
        "actor/pg_loss": 0.0,
        "actor/grad_norm": 1e-4,
        "actor/entropy": 0.4,
        "critic/score/mean": 0.0,
        "critic/score/max": 0.0,
        "critic/score/min": 0.0,
        "response_length/mean": 256.0,
        "response_length/max": 256.0,
        "response_length/min": 256.0,
        "response_length/clip_ratio": 1.0,
        **changes,
    }
    return {k: [v] for k, v in step.items()}


def test_length_cap_at_a_nan_step_is_a_consequence_without_cap_advice():
    from logscope.detectors.policy import ResponseLengthClipped

    run = make_run(_garbage_step(**{"actor/pg_loss": np.nan, "actor/ppo_kl": np.nan}), [3663])
    (f,) = ResponseLengthClipped().detect(run)
    assert f.severity == "info" and f.advice == []
    assert f.evidence["consequence_of"] == {
        "name": "non-finite-metric",
        "metric": "actor/pg_loss",
        "step": 3663,
    }
    assert "consequence of the NaN actor/pg_loss from step 3663" in f.message
    # the same step with finite losses is the cap's own finding, with its advice
    (g,) = ResponseLengthClipped().detect(make_run(_garbage_step(), [3663]))
    assert g.severity == "warning" and g.advice and "consequence_of" not in g.evidence


def test_entropy_far_above_range_with_lengths_at_cap_says_the_rollout_emits_garbage():
    from logscope.detectors.policy import EntropyBlowup, ResponseLengthClipped

    run = make_run(_garbage_step(**{"actor/entropy": 9.5}), [10])
    (f,) = EntropyBlowup().detect(run)
    assert "the rollout emits garbage" in f.message
    assert f.evidence["garbage_signs"]  # lengths at the cap and one score for every sample
    # no config in the log: the LoRA check leads, then the temperature, then the bonus
    params = [a.parameter for a in f.advice]
    assert params[:3] == [
        "actor_rollout_ref.rollout.load_format",
        "actor_rollout_ref.rollout.temperature",
        "actor_rollout_ref.actor.entropy_coeff",
    ]
    (clip,) = ResponseLengthClipped().detect(run)
    assert clip.severity == "info" and clip.evidence["consequence_of"]["name"] == "entropy-blowup"
    # a run whose config shows no LoRA gets no LoRA advice; high entropy alone is no garbage
    config = {
        "actor_rollout_ref": {"model": {"lora_rank": 0}},
        "data": {"max_response_length": 256},
    }
    f = EntropyBlowup().detect(make_run(_garbage_step(**{"actor/entropy": 9.5}), [10], config))[0]
    assert "actor_rollout_ref.rollout.load_format" not in [a.parameter for a in f.advice]
    lone = {"actor/entropy": [4.0], "response_length/clip_ratio": [0.0]}
    f = EntropyBlowup().detect(make_run(lone, [10]))[0]
    assert "garbage" not in f.message and f.advice[0].parameter.endswith("entropy_coeff")


def test_grad_norm_in_a_sparse_excerpt_is_no_spike_when_an_earlier_step_was_higher():
    """Three logged steps 52/92/122: 27 → 0.48 → 10.5 is noise around a high level, not a
    spike from 0.48; 0.5 → 0.45 → 10.5 is one."""
    steps = [52, 92, 122]
    assert GradNormSpike().detect(make_run({"critic/grad_norm": [27.0, 0.477, 10.5]}, steps)) == []
    (f,) = GradNormSpike().detect(make_run({"critic/grad_norm": [0.5, 0.45, 10.5]}, steps))
    assert f.step == 122 and f.evidence["level_before"] == 0.45
    # a higher value long before the last few steps counts too
    gn = [30.0, 0.4, 0.5, 0.45, 0.4, 0.5, 12.0]
    assert GradNormSpike().detect(make_run({"critic/grad_norm": gn}, list(range(10, 17)))) == []


def test_critic_grad_norm_falling_over_its_first_steps_is_a_value_head_learning():
    """verl's PPO quickstart (verl 0.1) logs critic/grad_norm 1023 then 943 at steps 0 and 1,
    an untrained value head's first errors falling: not a divergence. The same norms rising
    are one."""
    steps = {"critic/grad_norm": [1023.278, 942.924], "critic/vf_loss": [14.9, 18.5]}
    assert GradNormSpike().detect(make_run(steps, [0, 1])) == []
    rising = {**steps, "critic/grad_norm": [942.924, 1023.278]}
    (f,) = GradNormSpike().detect(make_run(rising, [0, 1]))
    assert f.metric == "critic/grad_norm" and f.step == 1


def test_critic_grad_norm_far_past_its_alarm_at_a_warmup_step_is_reported():
    """Step 2 of a PPO excerpt: the critic's norm 554× the clip with the value loss, explained
    variance and values all far off: the critic diverged (a warm-up explains 2–15×)."""
    step = {
        "critic/grad_norm": [554.0],
        "critic/vf_loss": [24.4],
        "critic/vf_explained_var": [-4866.8],
        "critic/values/mean": [6.47],
        "critic/returns/min": [-0.002],
        "critic/returns/max": [0.102],
        "actor/grad_norm": [1.0],
    }
    (f,) = GradNormSpike().detect(make_run(step, [2]))
    assert f.metric == "critic/grad_norm" and f.step == 2 and f.severity == "warning"
    assert "the critic diverged" in f.message and len(f.evidence["critic_signs"]) == 3
    assert [a.parameter for a in f.advice][:2] == ["critic.optim.lr", "trainer.critic_warmup"]
    # a large but plausible warm-up norm (20× the clip, under 200×) is left alone
    healthy_start = {**step, "critic/grad_norm": [40.0], "critic/vf_loss": [0.3]}
    assert GradNormSpike().detect(make_run(healthy_start, [2])) == []


def test_truncation_that_has_passed_is_info_with_the_length_then_and_now():
    """A sparse excerpt (steps 52, 92, 122): 28 % cut at step 52, 0-3 % later while the mean
    length fell 144 → 61: info that it passed, not a warning; never truncated, nothing."""
    from logscope.detectors.policy import ResponseLengthClipped

    steps = [52, 92, 122]
    run = make_run(
        {
            "response_length/clip_ratio": [0.281, 0.0, 0.031],
            "response_length/mean": [143.8, 58.0, 61.1],
        },
        steps,
    )
    (f,) = ResponseLengthClipped().detect(run)
    assert f.severity == "info" and f.step == 52 and f.end_step == 122
    assert f.evidence["clip_ratio_then"] == 0.281 and f.evidence["clip_ratio_now"] == 0.031
    assert "answering shorter" in f.message and f.advice == []
    calm = make_run({"response_length/clip_ratio": [0.02, 0.0, 0.031]}, steps)
    assert ResponseLengthClipped().detect(calm) == []
    # a long run: one noisy step at 12 % among 2 % is no truncated stretch
    rng = np.random.default_rng(0)
    ratio = rng.binomial(512, 0.02, 200) / 512
    ratio[50] = 0.12
    assert ResponseLengthClipped().detect(make_run({"response_length/clip_ratio": ratio})) == []
