"""The metric families verl 0.6-0.10 added, in the simulator (`logscope.synthetic.families`).

Names per version and switch, healthy levels over realistic runs (verl_metrics.md §3-§5), each
family pathology's effect at its truth step, the console-log round trip, determinism, and the
unchanged output of runs without the new switches.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np
import polars as pl
import pytest

from logscope.ingest import load
from logscope.synthetic import (
    ALL_PATHOLOGIES,
    ALL_VERSIONS,
    FAMILY_PATHOLOGIES,
    PATHOLOGIES,
    Injection,
    family_overrides,
    not_applicable,
    realistic,
    simulate,
    write_console_log,
)
from logscope.synthetic.families import allowed_staleness

ALL_FAMILIES = family_overrides(
    rollout_corr="decoupled", fully_async=True, filter_groups=True, agent_loop=True
)
MISMATCH = ("training/rollout_probs_diff_mean", "training/rollout_actor_probs_pearson_corr")


def _names(sim) -> set[str]:
    return set(sim.metric_order)


def _train(sim, metric: str) -> tuple[np.ndarray, np.ndarray]:
    steps, values = sim.series(metric)
    keep = steps >= 1
    return steps[keep], values[keep]


def _window(sim, metric: str, lo: int, hi: int) -> np.ndarray:
    steps, values = sim.series(metric)
    return values[(steps >= lo) & (steps < hi)]


def _gen_batches(sim) -> np.ndarray:
    """Generation batches per training step from the V1 replay-buffer counters."""
    batch = int(sim.config["data"]["train_batch_size"])
    size = int(sim.config["data"].get("gen_batch_size") or batch)
    steps = sim.steps[sim.steps >= 1]
    total = np.full(len(steps), float(batch))
    for name in (
        "training/filter_groups/evicted_samples",
        "training/filter_groups/discarded_surplus_samples",
    ):
        st, v = sim.series(name)
        total[np.searchsorted(steps, st)] += v
    return total / size


# ---- names ---------------------------------------------------------------------------------
def test_defaults_up_to_09_log_none_of_the_new_families():
    new = ("rollout_corr/", "actor/rollout_corr/", "fully_async/", "training/rollout_")
    new += ("training/off_policy/", "training/filter_groups/", "timing_s/agent_loop/")
    new += ("response_length_non_aborted/", "timing_s/param_sync")
    for version in ("0.5", "0.7", "0.8", "0.9"):
        names = _names(simulate(20, "grpo", seed=0, version=version))
        assert not [n for n in names if n.startswith(new)], version
    assert "response/aborted_ratio" in _names(simulate(20, "grpo", version="0.9"))


def test_verl_010_is_simulated_with_its_defaults():
    assert "0.10" in ALL_VERSIONS
    sim = simulate(30, "grpo", seed=1, version="0.10.0.dev")
    assert sim.version == "0.10"
    rollout = sim.config["actor_rollout_ref"]["rollout"]
    assert rollout["calculate_log_probs"] is True and rollout["agent"]["num_workers"] == 8
    assert sim.config["algorithm"]["rollout_correction"]["rollout_is"] is None
    names = _names(sim)
    assert set(MISMATCH) <= names and "training/rollout_probs_diff_valid" in names
    assert "timing_s/agent_loop/num_preempted/mean" in names
    assert "response_length_non_aborted/mean" in names
    # V1 logs staleness for every run: a synchronous one is on-policy
    assert _train(sim, "training/off_policy/trajectory_staleness/max")[1].max() == 0
    assert np.all(_train(sim, "training/off_policy/trajectory_spans/mean")[1] == 1)
    # not configured: no rollout correction; never the separate-async trainer's keys
    assert not [n for n in names if "rollout_corr/" in n or n.startswith("separate_async/")]
    assert not [n for n in names if n.startswith("fully_async/")]
    off = simulate(
        30, "grpo", version="0.10", config={"actor_rollout_ref.rollout.calculate_log_probs": False}
    )
    assert not set(MISMATCH) & _names(off)


@pytest.mark.parametrize("version", ["0.7", "0.8", "0.9", "0.10"])
def test_names_when_switched_on(version):
    names = _names(simulate(20, "grpo", seed=2, version=version, config=ALL_FAMILIES))
    assert set(MISMATCH) <= names
    assert {"rollout_corr/kl", "rollout_corr/chi2_token", "rollout_corr/rollout_is_mean"} <= names
    assert {"rollout_corr/rollout_is_eff_sample_size", "rollout_corr/log_ppl_abs_diff"} <= names
    later = {
        "fully_async/trainer/idle_ratio",
        "fully_async/rollouter/idle_ratio",
        "fully_async/count/total_generated_samples",
        "training/off_policy/trajectory_staleness/mean",
        "training/off_policy/trajectory_spans/max",
        "timing_s/param_sync",
        "training/filter_groups/evicted_samples",
        "timing_s/agent_loop/num_preempted/min",
        "response_length_non_aborted/clip_ratio",
    }
    if version in ("0.9", "0.10"):
        assert later <= names
        assert "timing_s/wait_for_enough_samples" not in names  # dynamic resources only
    else:  # the simulator writes these families from 0.9 on
        assert not later & names
    assert not simulate(20, "grpo", version="0.5", config=ALL_FAMILIES).metric_order.count(
        MISMATCH[0]
    )


def test_rollout_correction_modes_and_options():
    bypass = _names(
        simulate(20, "ppo", version="0.9", config=family_overrides(rollout_corr="bypass"))
    )
    assert "actor/rollout_corr/kl" in bypass and "rollout_corr/kl" not in bypass
    diag = _names(
        simulate(
            20,
            "grpo",
            version="0.9",
            config=family_overrides(rollout_corr="decoupled", rollout_is=None),
        )
    )
    assert "rollout_corr/chi2_token" in diag and "rollout_corr/rollout_is_mean" not in diag
    plain = _names(simulate(20, "grpo", version="0.9", config=family_overrides(mismatch=True)))
    assert set(MISMATCH) <= plain and not [n for n in plain if "rollout_corr" in n]
    dyn = family_overrides(fully_async=True, dynamic_resource=True)
    assert "timing_s/wait_for_enough_samples" in _names(
        simulate(20, "grpo", version="0.9", config=dyn)
    )
    legacy = _names(
        simulate(
            20,
            "grpo",
            version="0.9",
            config={**family_overrides(filter_groups=True), "trainer.use_v1": False},
        )
    )
    assert (
        "train/num_gen_batches" in legacy and "training/filter_groups/evicted_samples" not in legacy
    )
    # the DAPO filter needs groups: PPO runs log nothing of it
    ppo = _names(simulate(20, "ppo", version="0.9", config=family_overrides(filter_groups=True)))
    assert not [n for n in ppo if "filter_groups" in n]
    sglang = simulate(
        20,
        "grpo",
        version="0.9",
        config={**family_overrides(agent_loop=True), "actor_rollout_ref.rollout.name": "sglang"},
    )
    assert np.all(_train(sglang, "timing_s/agent_loop/num_preempted/max")[1] == -1)


# ---- healthy levels over realistic runs ------------------------------------------------------
@pytest.fixture(scope="module")
def realistic_runs():
    runs = []
    for seed in range(6):
        algorithm = "ppo" if seed == 5 else "grpo"
        dyn, cfg = realistic(np.random.default_rng(200 + seed), 240, algorithm)
        version = "0.10" if seed % 2 else "0.9"
        sim = simulate(
            240, algorithm, seed=seed, version=version, config={**cfg, **ALL_FAMILIES}, dynamics=dyn
        )
        runs.append(sim)
    return runs


def test_healthy_mismatch_levels(realistic_runs):
    for sim in realistic_runs:
        _, pearson = _train(sim, "training/rollout_actor_probs_pearson_corr")
        assert 0.998 <= np.median(pearson) <= 0.9995 and pearson.min() > 0.99
        _, diff = _train(sim, "training/rollout_probs_diff_mean")
        assert 3e-3 <= np.median(diff) <= 5e-3
        q = len(diff) // 4
        assert 0.8 <= np.median(diff[-q:]) / np.median(diff[:q]) <= 1.25, "flat, no drift"
        assert np.all(_train(sim, "training/rollout_probs_diff_valid")[1] == 1)
        assert np.all(_train(sim, "training/rollout_probs_diff_std")[1] > diff)
        assert not np.allclose(diff, np.median(diff), rtol=0.01), "noisy, not a tidy line"


def test_healthy_rollout_correction_levels(realistic_runs):
    for sim in realistic_runs:
        rc = {n.split("/")[-1]: _train(sim, n)[1] for n in sim.metric_order if "rollout_corr/" in n}
        assert np.percentile(np.abs(rc["kl"]), 95) <= 0.01
        assert np.all(rc["k3_kl"] >= 0) and np.percentile(rc["k3_kl"], 95) <= 0.012
        assert np.percentile(rc["chi2_token"], 95) <= 0.1
        assert np.median(rc["log_ppl_abs_diff"]) < 0.02
        assert np.all(rc["training_ppl"] >= 1) and np.all(rc["rollout_ppl"] >= 1)
        assert np.all(np.abs(np.log(rc["rollout_ppl"] / rc["training_ppl"])) < 0.05)
        assert 0.97 <= np.median(rc["rollout_is_mean"]) <= 1.02
        assert 0.85 <= np.median(rc["rollout_is_eff_sample_size"]) <= 0.99
        assert np.all(rc["rollout_is_eff_sample_size"] > 0.3)
        assert np.all(rc["rollout_is_min"] < 1) and np.all(rc["rollout_is_max"] > 1)


def test_healthy_async_levels(realistic_runs):
    for sim in realistic_runs:
        steps, trainer = _train(sim, "fully_async/trainer/idle_ratio")
        assert trainer[steps >= 2].max() <= 0.2, "balanced: the trainer rarely waits"
        _, gen = _train(sim, "timing_s/gen")
        _, step = _train(sim, "timing_s/step")
        np.testing.assert_allclose(trainer, gen / step)  # verl's definition
        _, roll = _train(sim, "fully_async/rollouter/idle_ratio")
        assert roll.max() <= 0.2 and (roll == 0).any()
        allowed = allowed_staleness(sim.config)
        _, top = _train(sim, "training/off_policy/trajectory_staleness/max")
        _, mean = _train(sim, "training/off_policy/trajectory_staleness/mean")
        assert top.max() <= allowed and np.all(mean <= top) and np.all(mean >= 0)
        _, spans = _train(sim, "training/off_policy/trajectory_spans/mean")
        assert np.all((spans >= 1) & (spans <= 2))
        for name in ("total_generated_samples", "stale_samples_processed"):
            _, counter = _train(sim, f"fully_async/count/{name}")
            assert np.all(np.diff(counter) >= 0), "cumulative"
        assert _train(sim, "fully_async/count/dropped_stale_samples")[1].max() == 0
        assert np.median(_train(sim, "timing_s/param_sync")[1]) > 0


def test_healthy_dynamic_sampling_and_agent_loop(realistic_runs):
    for sim in realistic_runs:
        if sim.algorithm != "grpo":
            continue
        batches = _gen_batches(sim)
        assert 1 <= np.median(batches) <= 2 and np.percentile(batches, 95) <= 2.5
        steps = sim.steps[sim.steps >= 1]
        st, evicted = sim.series("training/filter_groups/evicted_samples")
        share = evicted / (
            batches[np.searchsorted(steps, st)] * sim.config["data"]["train_batch_size"]
        )
        assert 0.1 <= np.median(share) <= 0.5, "a modest discarded share"
        assert np.all(_train(sim, "response/aborted_ratio")[1] == 0)
        assert np.all(_train(sim, "timing_s/agent_loop/num_preempted/mean")[1] == 0)
        np.testing.assert_array_equal(
            _train(sim, "response_length_non_aborted/mean")[1],
            _train(sim, "response_length/mean")[1],
        )
    sim = simulate(
        120,
        "grpo",
        seed=3,
        version="0.9",
        config=family_overrides(filter_groups=True, gen_batch_size=1536),
    )
    assert set(np.unique(_gen_batches(sim))) <= {1.0, 2.0} and (_gen_batches(sim) == 1).any()


# ---- pathologies -----------------------------------------------------------------------------
def test_family_pathologies_are_catalogued_and_applicable():
    assert set(ALL_PATHOLOGIES) == set(PATHOLOGIES) | set(FAMILY_PATHOLOGIES)
    assert not set(PATHOLOGIES) & set(FAMILY_PATHOLOGIES)
    for kind in FAMILY_PATHOLOGIES:
        assert not_applicable(kind, "grpo", "0.5"), kind
        assert not_applicable(kind, "grpo", "0.9") is None
        if kind == "aborted-responses":  # response/aborted_ratio is logged by every 0.9 run
            sim = simulate(60, "grpo", version="0.9", inject=[Injection(kind, 30)])
            _effect(sim, kind, sim.truth[0].step)
            continue
        with pytest.raises(ValueError, match="cannot inject"):
            simulate(60, "grpo", version="0.9", inject=[Injection(kind, 30)])
    assert not_applicable("train-inference-mismatch", "grpo", "0.7") is None
    assert not_applicable("dynamic-sampling-waste", "ppo", "0.9")


def _effect(sim, kind: str, t: int) -> None:
    last = int(sim.steps[-1])
    pre, post = (t - 20, t - 1), (t + 10, last + 1)
    if kind == "train-inference-mismatch":
        p = "training/rollout_actor_probs_pearson_corr"
        assert _window(sim, p, *pre).min() > 0.99
        cross = sim.details[kind]["pearson_cross_step"]
        assert t <= cross <= t + 8  # Pearson follows the drift within a few steps
        assert np.median(_window(sim, p, cross, cross + 5)) < 0.99
        assert np.median(_window(sim, p, *post)) < 0.99
        d = "training/rollout_probs_diff_mean"
        # the truth step is where the drift starts: its first steps already sit above before
        assert np.median(_window(sim, d, t, t + 3)) > 1.2 * np.median(_window(sim, d, *pre))
        assert np.median(_window(sim, d, *post)) > 3 * np.median(_window(sim, d, *pre))
        if "rollout_corr/kl" in sim.metric_order:
            assert np.median(_window(sim, "rollout_corr/kl", *post)) > 0.1
            assert np.median(_window(sim, "rollout_corr/chi2_token", *post)) > 1
            assert np.median(_window(sim, "rollout_corr/kl", *pre)) < 0.01
    elif kind == "async-imbalance":
        roll, train = "fully_async/rollouter/idle_ratio", "fully_async/trainer/idle_ratio"
        assert _window(sim, roll, *pre).max() <= 0.2 and _window(sim, train, *pre).max() <= 0.2
        high, low = (roll, train)
        if sim.details[kind]["direction"] == "trainer-idle":
            high, low = train, roll
        assert _window(sim, high, t, t + 1)[0] > 0.2
        assert np.median(_window(sim, high, *post)) > 0.35
        assert np.median(_window(sim, low, *post)) < 0.05
    elif kind == "staleness-high":
        allowed = sim.details[kind]["allowed"]
        top = "training/off_policy/trajectory_staleness/max"
        assert _window(sim, top, *pre).max() <= allowed
        assert np.all(_window(sim, top, t, last + 1) > allowed)
        mean = "training/off_policy/trajectory_staleness/mean"
        assert np.median(_window(sim, mean, *post)) > allowed
    elif kind == "dynamic-sampling-waste":
        steps = sim.steps[sim.steps >= 1]
        batches = _gen_batches(sim)
        assert np.median(batches[(steps >= pre[0]) & (steps < pre[1])]) <= 2
        assert np.median(batches[steps >= post[0]]) >= 3
        st, evicted = sim.series("training/filter_groups/evicted_samples")
        batch = sim.config["data"]["train_batch_size"]
        share = evicted / (batches[np.searchsorted(steps, st)] * batch)
        assert np.median(share[st >= post[0]]) > 0.6
        assert np.median(_window(sim, "timing_s/gen", *post)) > np.median(
            _window(sim, "timing_s/gen", *pre)
        )
    elif kind == "aborted-responses":
        r = "response/aborted_ratio"
        assert np.all(_window(sim, r, 1, t) == 0) and _window(sim, r, t, t + 1)[0] > 0
        assert 0.05 <= np.median(_window(sim, r, *post)) <= 0.3
        if "timing_s/agent_loop/num_preempted/mean" in sim.metric_order:
            assert np.all(_window(sim, "timing_s/agent_loop/num_preempted/mean", 1, t) == 0)
            assert np.median(_window(sim, "timing_s/agent_loop/num_preempted/mean", *post)) > 0
            na = np.median(_window(sim, "response_length_non_aborted/mean", *post))
            assert np.median(_window(sim, "response_length/mean", *post)) < na
    else:  # pragma: no cover
        raise AssertionError(kind)


@pytest.mark.parametrize("kind", sorted(FAMILY_PATHOLOGIES))
@pytest.mark.parametrize("magnitude", [0.7, 1.0, 2.0])
def test_family_injection_shows_at_truth_step(kind, magnitude):
    for seed in (1, 2, 3):
        dyn, cfg = realistic(np.random.default_rng(seed), 200, "grpo")
        version = "0.10" if seed == 3 else "0.9"
        sim = simulate(
            200,
            "grpo",
            seed=seed,
            version=version,
            config={**cfg, **ALL_FAMILIES},
            dynamics=dyn,
            inject=[Injection(kind, 100, magnitude)],
        )
        (truth,) = sim.truth
        assert truth.kind == kind and 100 <= truth.step <= 110
        _effect(sim, kind, truth.step)


def test_mismatch_truth_without_rollout_correction_and_directions():
    sim = simulate(
        150,
        "grpo",
        seed=4,
        version="0.8",
        config=family_overrides(mismatch=True),
        inject=[Injection("train-inference-mismatch", 60)],
    )
    _effect(sim, "train-inference-mismatch", sim.truth[0].step)
    assert sim.details["train-inference-mismatch"]["kl_cross_step"] is None
    directions = set()
    for seed in range(8):
        sim = simulate(
            80,
            "grpo",
            seed=seed,
            version="0.9",
            config=family_overrides(fully_async=True),
            inject=[Injection("async-imbalance", 40)],
        )
        directions.add(sim.details["async-imbalance"]["direction"])
        _effect(sim, "async-imbalance", sim.truth[0].step)
    assert directions == {"rollouter-idle", "trainer-idle"}


def test_family_injection_next_to_classic_ones():
    sim = simulate(
        160,
        "grpo",
        seed=5,
        version="0.9",
        config=ALL_FAMILIES,
        inject=[
            Injection("kl-coef-changed-midrun", 70),
            Injection("aborted-responses", 100),
            Injection("train-inference-mismatch", 120),
        ],
    )
    assert [t.kind for t in sim.truth] == [
        "kl-coef-changed-midrun",
        "aborted-responses",
        "train-inference-mismatch",
    ]
    _effect(sim, "aborted-responses", sim.truth[1].step)


# ---- console log, determinism, unchanged defaults ---------------------------------------------
@pytest.mark.parametrize(
    ("version", "algorithm", "config", "inject"),
    [
        ("0.10", "grpo", {}, []),
        ("0.9", "grpo", ALL_FAMILIES, [Injection("dynamic-sampling-waste", 30)]),
        (
            "0.10",
            "ppo",
            family_overrides(rollout_corr="bypass", fully_async=True, dynamic_resource=True),
            [Injection("staleness-high", 30)],
        ),
        (
            "0.9",
            "grpo",
            {**family_overrides(agent_loop=True, filter_groups=True), "trainer.use_v1": False},
            [Injection("aborted-responses", 30)],
        ),
        (
            "0.8",
            "grpo",
            family_overrides(rollout_corr="decoupled"),
            [Injection("train-inference-mismatch", 20)],
        ),
    ],
)
def test_console_log_round_trips(version, algorithm, config, inject, tmp_path):
    sim = simulate(60, algorithm, seed=3, version=version, config=config, inject=inject)
    path = write_console_log(sim, tmp_path / "run.log")
    text = path.read_text()
    if version in ("0.9", "0.10"):
        assert "(TaskRunnerV1 pid=" in text
    (run,) = load(path)
    joined = sim.metrics.join(run.metrics, on=["step", "metric"], how="full", suffix="_read")
    assert joined.filter(pl.col("value").is_null() | pl.col("value_read").is_null()).height == 0
    differ = joined.filter(
        (pl.col("value") != pl.col("value_read"))
        & ~(pl.col("value").is_nan() & pl.col("value_read").is_nan())
    )
    assert differ.height == 0, differ.head(5)
    if "timing_s/agent_loop/num_preempted/min" in text:
        assert "timing_s/agent_loop/num_preempted/min:np.int64(" in text
    if "training/off_policy/trajectory_staleness/mean" in text:
        assert "training/off_policy/trajectory_staleness/mean:np.float64(" in text
        assert "training/off_policy/trajectory_staleness/max:np.int64(" in text


def test_deterministic_by_seed():
    def run(seed):
        return simulate(
            80,
            "grpo",
            seed=seed,
            version="0.9",
            config=ALL_FAMILIES,
            inject=[Injection("async-imbalance", 40)],
        )

    first, again, other = run(7), run(7), run(8)
    assert first.metrics.equals(again.metrics) and first.details == again.details
    assert not first.metrics.equals(other.metrics)


def test_families_do_not_disturb_the_runs_own_series():
    """Families draw from their own generator: the classic metrics keep their values."""
    plain = simulate(80, "grpo", seed=9, version="0.9")
    fam = simulate(80, "grpo", seed=9, version="0.9", config=family_overrides(mismatch=True))
    for name in ("actor/kl_loss", "critic/score/mean", "actor/grad_norm", "timing_s/step"):
        np.testing.assert_array_equal(plain.series(name)[1], fam.series(name)[1])


# sha256 prefixes of the metrics frame (as CSV) and of the console log, every decimal number in
# them rounded to 6 significant digits, of runs of versions <= 0.9 without the new switches. The
# full-precision bytes were checked equal to those of the code before the families were added;
# rounded, the fingerprint is the same on every machine (numpy's AVX-512 math differs from its
# AVX2 math in the last bit), while a changed draw still changes it.
BEFORE = [
    ("0.1", "grpo", "tame", "11f1a0944e1e7dc0", "d48678df11636664"),
    ("0.5", "ppo", "tame", "33505b0657f5076d", "2302bfe3baaad89a"),
    ("0.9", "grpo", "tame", "ddfe5ea435bc2af9", "1e94e3d9d0a277ec"),
    ("0.8", "grpo", "real", "a1f8bee56ffb5e12", "30a67baa2a992a7a"),
    ("0.9", "ppo", "real", "6355afb32453b956", "6575abc6d07b04c7"),
]

_DECIMAL = re.compile(rb"-?\d+\.\d+(?:[eE][-+]?\d+)?")


def _sha(data: bytes) -> str:
    """sha256 prefix of `data` with every decimal number rounded to 6 significant digits."""
    rounded = _DECIMAL.sub(lambda m: f"{float(m.group()):.6g}".encode(), data)
    return hashlib.sha256(rounded).hexdigest()[:16]


@pytest.mark.parametrize(("version", "algorithm", "kind", "frame", "log"), BEFORE)
def test_output_without_switches_is_unchanged(version, algorithm, kind, frame, log, tmp_path):
    if kind == "tame":
        sim = simulate(60, algorithm, seed=3, version=version)
    else:
        dyn, cfg = realistic(np.random.default_rng(7), 80, algorithm)
        sim = simulate(80, algorithm, seed=5, version=version, config=cfg, dynamics=dyn)
    assert _sha(sim.metrics.write_csv().encode()) == frame
    assert _sha(write_console_log(sim, tmp_path / "x.log").read_bytes()) == log
