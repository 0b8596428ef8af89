"""The simulated-run generator: determinism, injections with ground truth, healthy bands, and the
console log it writes (verl's own formatting, config dump, restart, events)."""

from __future__ import annotations

import ast
import gzip
import math
import numbers
import pprint
import re
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from logscope.model import Run
from logscope.schemas import METRICS_SCHEMA
from logscope.synthetic import (
    PATHOLOGIES,
    VERSIONS,
    Injection,
    SimRun,
    format_step_line,
    not_applicable,
    simulate,
    write_console_log,
)
from logscope.synthetic.console import step_value

ISSUE3_DIAGNOSES = {
    "kl-jump", "kl-out-of-band", "reward-sawtooth", "clip-ratio-spike", "memory-leak",
    "grad-norm-spike", "entropy-collapse", "response-length-collapse", "rollout-bottleneck",
    "throughput-drop", "critic-value-error", "advantage-collapse", "ppo-kl-too-low",
    "reward-plateau", "validation-drop",
}  # fmt: skip
EXTRA_KINDS = {"nan-loss", "cuda-oom", "grad-norm-not-finite", "kl-coef-changed-midrun"}


# ---- verl's concat_dict_to_str, copied by meaning from verl_formats.md §1.1/§1.2 --------------
def verl_concat_dict_to_str_3f(data: dict, step: int) -> str:  # verl 0.1 - 0.4.1
    output = [f"step:{step}"]
    for k, v in data.items():
        if isinstance(v, numbers.Number):
            output.append(f"{k}:{v:.3f}")
    return " - ".join(output)


def verl_concat_dict_to_str_repr(data: dict, step: int) -> str:  # verl 0.5.0 - 0.9.1
    output = [f"step:{step}"]
    for k, v in data.items():
        if isinstance(v, numbers.Number):
            output.append(f"{k}:{pprint.pformat(v)}")
    return " - ".join(output)


def _series(sim: SimRun, metric: str) -> tuple[np.ndarray, np.ndarray]:
    steps, values = sim.series(metric)
    assert len(steps), f"{metric} missing"
    return steps, values


def _window(sim: SimRun, metric: str, lo: int, hi: int) -> np.ndarray:
    steps, values = _series(sim, metric)
    return values[(steps >= lo) & (steps < hi)]


# ---- determinism and shape ---------------------------------------------------------------
def test_same_seed_same_run_and_other_seed_differs():
    a = simulate(120, "grpo", seed=7, inject=[Injection("kl-jump", 60)])
    b = simulate(120, "grpo", seed=7, inject=[Injection("kl-jump", 60)])
    c = simulate(120, "grpo", seed=8, inject=[Injection("kl-jump", 60)])
    assert a.metrics.equals(b.metrics)
    assert a.events == b.events and a.truth == b.truth
    assert not a.metrics.equals(c.metrics)
    ppo = simulate(120, "ppo", seed=7)
    assert not np.allclose(_series(ppo, "actor/grad_norm")[1], _series(a, "actor/grad_norm")[1])


def test_metrics_frame_schema_and_wall_time():
    sim = simulate(80, "ppo", seed=1)
    assert dict(sim.metrics.schema) == METRICS_SCHEMA
    assert sim.metrics.select(pl.struct("step", "metric").is_unique().all()).item()
    steps, walls = sim.to_run().wall_times()
    assert np.all(np.diff(walls) > 0), "wall time is cumulative"
    _, step_time = _series(sim, "timing_s/step")
    # consecutive training steps are one step time apart
    assert np.allclose(np.diff(walls[steps >= 1]), step_time[1:], rtol=1e-9)


def test_to_run():
    sim = simulate(
        50, "grpo", seed=2, version="0.4", inject=[Injection("grad-norm-not-finite", 20)]
    )
    run = sim.to_run()
    assert isinstance(run, Run)
    assert run.source.kind == "synthetic"
    assert run.meta["verl_version"] == "0.4" and run.meta["algorithm"] == "grpo"
    assert run.config_value("algorithm.adv_estimator") == "grpo"
    assert run.metrics.equals(sim.metrics)
    assert any(e.step_hint == 20 and "not finite" in e.text for e in run.events)


# ---- pathologies -------------------------------------------------------------------------
def test_pathology_catalogue_covers_the_issue():
    assert ISSUE3_DIAGNOSES | EXTRA_KINDS == set(PATHOLOGIES)
    assert all(PATHOLOGIES[k] for k in PATHOLOGIES)


def _effect(sim: SimRun, kind: str, t: int) -> None:
    """Assert the injected effect is visible from the truth step `t` on."""
    last = int(sim.steps[-1])
    if kind == "kl-jump":
        assert np.median(_window(sim, "actor/kl_loss", t, t + 10)) > 2 * np.median(
            _window(sim, "actor/kl_loss", t - 10, t)
        )
        assert np.median(_window(sim, "actor/ppo_kl", t, t + 10)) > 3 * np.median(
            _window(sim, "actor/ppo_kl", t - 10, t)
        )
    elif kind == "kl-out-of-band":
        assert np.median(_window(sim, "actor/kl_loss", t - 10, t - 1)) < 0.03
        assert np.median(_window(sim, "actor/kl_loss", t + 10, last + 1)) > 0.05
    elif kind == "reward-sawtooth":
        period = sim.details[kind]["period"]
        x = _window(sim, "critic/score/mean", t, last + 1)
        x = x - np.convolve(x, np.ones(period) / period, mode="same")
        x = x[period:-period]
        ac = np.corrcoef(x[:-period], x[period:])[0, 1]
        assert ac > 0.5
    elif kind == "clip-ratio-spike":
        assert _window(sim, "response_length/clip_ratio", t, t + 1)[0] > 0.08
        assert np.median(_window(sim, "response_length/clip_ratio", 1, t)) < 0.02
    elif kind == "memory-leak":
        mem = _window(sim, "perf/max_memory_reserved_gb", t - 1, last + 1)
        assert mem[-1] - mem[0] > 0.8 * sim.details[kind]["rate_gb_per_step"] * (last - t)
        assert np.ptp(_window(sim, "perf/max_memory_reserved_gb", 1, t)) < 0.5
    elif kind == "grad-norm-spike":
        gn = _window(sim, "actor/grad_norm", 1, last + 1)
        assert _window(sim, "actor/grad_norm", t, t + 1)[0] > 5 * np.median(gn)
    elif kind == "entropy-collapse":
        assert _window(sim, "actor/entropy", last, last + 1)[0] < 0.2 * np.median(
            _window(sim, "actor/entropy", t - 10, t)
        )
    elif kind == "response-length-collapse":
        before = np.median(_window(sim, "response_length/mean", t - 10, t))
        end = np.median(_window(sim, "response_length/mean", last - 10, last + 1))
        if sim.details[kind]["mode"] == "collapse":
            assert end < 0.5 * before
        else:
            assert end > 0.9 * sim.config["data"]["max_response_length"]
            assert np.median(_window(sim, "response_length/clip_ratio", last - 10, last + 1)) > 0.5
    elif kind == "rollout-bottleneck":
        share = _window(sim, "timing_s/gen", 1, last + 1) / _window(
            sim, "timing_s/step", 1, last + 1
        )
        assert np.median(share[: t - 1]) < 0.56
        assert np.median(share[t + 3 :]) > 0.7
    elif kind == "throughput-drop":
        assert np.median(_window(sim, "perf/throughput", t, last + 1)) < 0.75 * np.median(
            _window(sim, "perf/throughput", 1, t)
        )
    elif kind == "critic-value-error":
        assert np.median(_window(sim, "critic/vf_loss", t + 5, last + 1)) > 0.1
        assert np.median(_window(sim, "critic/vf_explained_var", t + 5, last + 1)) < 0
        assert abs(np.median(_window(sim, "critic/advantages/mean", t + 5, last + 1))) > 0.03
    elif kind == "advantage-collapse":
        for stat in ("mean", "max", "min"):
            assert (
                np.max(np.abs(_window(sim, f"critic/advantages/{stat}", t + 10, last + 1))) < 0.01
            )
        assert np.std(_window(sim, "critic/score/mean", t + 10, last + 1)) > 0.005
        assert np.all(_window(sim, "critic/score/max", t + 10, last + 1) == 1.0)
    elif kind == "ppo-kl-too-low":
        assert np.median(_window(sim, "actor/ppo_kl", t + 5, last + 1)) < 1e-4
        assert np.median(_window(sim, "actor/ppo_kl", 1, t)) > 1e-4
    elif kind == "reward-plateau":
        after = _window(sim, "critic/score/mean", t, last + 1)
        slope = np.polyfit(np.arange(len(after)), after, 1)[0]
        assert abs(slope) * len(after) < 0.03
        rise = np.median(_window(sim, "critic/score/mean", t - 10, t)) - np.median(
            _window(sim, "critic/score/mean", 1, 11)
        )
        assert rise > 0.15
    elif kind == "validation-drop":
        steps, val = _series(sim, "val-core/openai/gsm8k/acc/mean@1")
        assert t in steps
        assert val[steps == t][0] < val[steps < t][-1] - 0.02
        assert val[-1] < val[steps < t][-1] - 0.06
        score = _window(sim, "critic/score/mean", t, last + 1)
        assert np.polyfit(np.arange(len(score)), score, 1)[0] > 0
    elif kind == "nan-loss":
        gn = _window(sim, "actor/grad_norm", t, t + 1)[0]
        assert not math.isfinite(gn)
        assert np.all(np.isnan(_window(sim, "actor/pg_loss", t, last + 1)))
        assert np.all(np.isfinite(_window(sim, "actor/pg_loss", 1, t)))
    elif kind == "cuda-oom":
        assert last == t
        assert any(s == t and "CUDA out of memory" in text for s, text in sim.events)
        assert "RayTaskError(OutOfMemoryError)" in sim.events[-1][1]
    elif kind == "grad-norm-not-finite":
        assert np.isnan(_window(sim, "actor/grad_norm", t, t + 1)[0])
        warn = [text for s, text in sim.events if s == t]
        assert warn and "grad_norm is not finite: nan" in warn[0]
        assert np.isnan(_window(sim, "actor/grad_norm", 1, last + 1)).sum() == len(sim.events)
    elif kind == "kl-coef-changed-midrun":
        assert len(sim.config_segments) == 2
        (first, cfg0), (resume, cfg1) = sim.config_segments
        assert resume == t and first < t
        key = sim.details[kind]["key"].split(".")
        old, new = cfg0, cfg1
        for part in key:
            old, new = old[part], new[part]
        assert old != new
        coef = _series(sim, "actor/kl_coef")
        assert np.all(coef[1][coef[0] >= t] == new) and np.all(coef[1][coef[0] < t] == old)
        assert sim.superseded is not None
        redo = sim.superseded.get_column("step").unique().sort().to_list()
        assert redo[0] == t and redo[-1] == sim.restart["last_printed"]
    else:  # pragma: no cover
        raise AssertionError(f"no effect check for {kind}")


CASES = [
    (kind, alg)
    for kind in sorted(PATHOLOGIES)
    for alg in ("grpo", "ppo")
    if not_applicable(kind, alg, "0.5") is None
]


@pytest.mark.parametrize(("kind", "algorithm"), CASES)
def test_injection_shows_at_truth_step(kind, algorithm):
    sim = simulate(200, algorithm, seed=11, inject=[Injection(kind, 100)])
    assert len(sim.truth) == 1 and sim.truth[0].kind == kind
    t = sim.truth[0].step
    steps = sim.steps
    assert steps[0] <= t <= steps[-1]
    assert abs(t - 100) <= 10, "truth stays near the requested step"
    _effect(sim, kind, t)


def test_meaningful_kinds_per_algorithm():
    assert not_applicable("critic-value-error", "grpo", "0.5")
    assert not_applicable("advantage-collapse", "ppo", "0.5")
    with pytest.raises(ValueError, match="critic"):
        simulate(50, "grpo", inject=[Injection("critic-value-error", 20)])
    with pytest.raises(ValueError, match="unknown pathology"):
        simulate(50, "grpo", inject=[Injection("made-up", 20)])
    with pytest.raises(ValueError, match="outside the run"):
        simulate(50, "grpo", inject=[Injection("kl-jump", 80)])


@pytest.mark.parametrize("magnitude", [0.7, 2.0])
@pytest.mark.parametrize("noise", [0.5, 2.0])
def test_every_kind_at_bench_magnitudes_and_noise(magnitude, noise):
    for kind in sorted(PATHOLOGIES):
        for algorithm in ("grpo", "ppo"):
            if not_applicable(kind, algorithm, "0.5"):
                continue
            sim = simulate(
                150, algorithm, seed=5, noise=noise, inject=[Injection(kind, 70, magnitude)]
            )
            t = sim.truth[0].step
            assert 1 <= t <= int(sim.steps[-1])


def test_magnitude_scales_the_effect():
    small = simulate(200, "grpo", seed=3, inject=[Injection("grad-norm-spike", 100, 0.7)])
    big = simulate(200, "grpo", seed=3, inject=[Injection("grad-norm-spike", 100, 2.0)])
    assert (
        _window(big, "actor/grad_norm", 100, 101)[0]
        > 2 * _window(small, "actor/grad_norm", 100, 101)[0]
    )
    small = simulate(200, "ppo", seed=3, inject=[Injection("memory-leak", 50, 0.7)])
    big = simulate(200, "ppo", seed=3, inject=[Injection("memory-leak", 50, 2.0)])
    assert (
        big.details["memory-leak"]["rate_gb_per_step"]
        > 2 * small.details["memory-leak"]["rate_gb_per_step"]
    )


def test_several_injections_in_one_run():
    sim = simulate(
        300,
        "grpo",
        seed=4,
        inject=[
            Injection("clip-ratio-spike", 100),
            Injection("kl-jump", 104),
            Injection("entropy-collapse", 110),
        ],
    )
    assert [t.kind for t in sim.truth] == ["clip-ratio-spike", "kl-jump", "entropy-collapse"]
    for inj in sim.truth:
        _effect(sim, inj.kind, inj.step)


def test_memory_leak_rate_stays_below_capacity_on_long_runs():
    sim = simulate(5000, "grpo", seed=1, inject=[Injection("memory-leak", 1000, 2.0)])
    _, mem = _series(sim, "perf/max_memory_reserved_gb")
    assert mem.max() < sim.details["memory-leak"]["capacity_gb"]
    assert mem[-1] - mem[990] > 10


# ---- healthy runs ------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
@pytest.mark.parametrize(("n_steps", "noise"), [(30, 1.0), (300, 0.5), (300, 2.0), (2000, 1.0)])
def test_healthy_run_stays_in_band(algorithm, n_steps, noise):
    for seed in range(3):
        sim = simulate(n_steps, algorithm, seed=seed, noise=noise)
        assert sim.truth == [] and sim.events == []
        last = int(sim.steps[-1])

        def rolling_median(metric, sim=sim, last=last, lo=21, width=9):
            x = _window(sim, metric, lo, last + 1)
            return np.array(
                [np.median(x[i : i + width]) for i in range(0, max(1, len(x) - width + 1))]
            )

        kl = rolling_median("actor/kl_loss")
        assert kl.min() >= 0.01 and kl.max() <= 0.03
        assert 1e-4 < np.median(_window(sim, "actor/ppo_kl", 1, last + 1)) < 1e-3
        ent = _window(sim, "actor/entropy", 1, last + 1)
        assert np.median(ent[-5:]) > 0.55 * np.median(ent[:5])
        gn = _window(sim, "actor/grad_norm", 1, last + 1)
        assert gn.max() < 4.5 * np.median(gn)
        mem = _window(sim, "perf/max_memory_reserved_gb", 1, last + 1)
        assert np.ptp(mem) < 0.5
        share = _window(sim, "timing_s/gen", 1, last + 1) / _window(
            sim, "timing_s/step", 1, last + 1
        )
        assert 0.38 < np.median(share) < 0.56
        thr = _window(sim, "perf/throughput", 1, last + 1)
        assert np.median(thr[-20:]) > 0.85 * np.median(thr[:20])
        assert np.median(_window(sim, "response_length/clip_ratio", 1, last + 1)) < 0.02
        resp = _window(sim, "response_length/mean", 1, last + 1)
        assert 0.75 < np.median(resp[-10:]) / np.median(resp[:10]) < 1.1
        score = _window(sim, "critic/score/mean", 1, last + 1)
        assert np.median(score[-5:]) > np.median(score[:5])
        val = _series(sim, "val-core/openai/gsm8k/acc/mean@1")[1]
        assert val[-1] > val[0]
        if algorithm == "ppo":
            assert np.median(_window(sim, "critic/vf_loss", 21, last + 1)) < 0.1 or last < 21
            assert np.median(_window(sim, "critic/vf_explained_var", 21, last + 1)) > 0 or last < 21
            assert abs(np.median(_window(sim, "critic/advantages/mean", 1, last + 1))) < 0.01
        else:
            assert not any(m.startswith(("critic/vf", "critic/values")) for m in sim.metric_order)
            n = sim.config["actor_rollout_ref"]["rollout"]["n"]
            amax = _window(sim, "critic/advantages/max", 1, last + 1)
            assert np.allclose(amax, (n - 1) / math.sqrt(n), rtol=1e-4)


def test_grpo_group_size_shows_in_advantages():
    sim = simulate(40, "grpo", seed=0, config={"actor_rollout_ref.rollout.n": 8})
    amax = _series(sim, "critic/advantages/max")[1]
    assert np.allclose(amax, 7 / math.sqrt(8), rtol=1e-4)
    assert np.allclose(_series(sim, "critic/returns/max")[1], amax)


# ---- versions ----------------------------------------------------------------------------
def test_version_specific_metric_names():
    names = {v: set(simulate(30, "ppo", seed=0, version=v).metric_order) for v in VERSIONS}
    steps01 = simulate(30, "ppo", seed=0, version="0.1").steps
    assert steps01[0] == 0
    assert {"timing/gen", "actor/entropy_loss", "actor/lr(1e-4)", "critic/kl"} <= names["0.1"]
    assert not any(n.startswith(("timing_s/", "perf/", "training/")) for n in names["0.1"])
    assert "mfu/actor" in names["0.2"] and "timing_per_token_ms/gen" in names["0.2"]
    assert "perf/throughput" in names["0.3"] and "perf/max_memory_reserved_gb" in names["0.3"]
    assert "val/test_score/openai/gsm8k" in names["0.3"]
    for v in ("0.4", "0.5", "0.7", "0.8", "0.9"):
        assert "actor/entropy" in names[v] and "training/global_step" in names[v]
        assert "val-core/openai/gsm8k/acc/mean@1" in names[v]
        assert "actor/pg_clipfrac_lower" in names[v]
    assert "val-aux/num_turns/mean" in names["0.5"] and "val-aux/num_turns/mean" not in names["0.4"]
    assert "timing_s/update_weights" in names["0.7"]
    for v in ("0.8", "0.9"):
        assert "actor/perf/max_memory_reserved_gb" in names[v]
        assert "perf/max_memory_reserved_gb" not in names[v]
    assert simulate(30, "ppo", seed=0, version="0.4.1").version == "0.4"
    with pytest.raises(ValueError, match="unknown verl version"):
        simulate(30, "ppo", version="1.7")


def test_version_config_keys():
    top = {v: set(simulate(20, "grpo", version=v).config) for v in VERSIONS}
    assert top["0.1"] == {
        "actor_rollout_ref",
        "algorithm",
        "critic",
        "data",
        "reward_model",
        "trainer",
    }
    assert "custom_reward_function" in top["0.3"] and "ray_init" not in top["0.3"]
    assert "ray_init" in top["0.5"]
    assert {"global_profiler", "ray_kwargs", "transfer_queue"} <= top["0.7"]
    assert {"distillation", "skip"} <= top["0.9"]
    cfg = simulate(20, "grpo", version="0.9").config
    assert cfg["actor_rollout_ref"]["actor"]["_target_"] == "verl.workers.config.FSDPActorConfig"


def test_config_overrides_and_interpolation():
    sim = simulate(
        30,
        "ppo",
        config={"data.max_response_length": 2048, "actor_rollout_ref.actor.kl_loss_coef": 0.002},
    )
    assert sim.config["actor_rollout_ref"]["rollout"]["response_length"] == 2048
    assert sim.config["actor_rollout_ref"]["actor"]["kl_loss_coef"] == 0.002
    assert np.all(_series(sim, "actor/kl_coef")[1] == 0.002)
    assert _series(sim, "response_length/max")[1].max() <= 2048


# ---- format_step_line --------------------------------------------------------------------
def _random_dict(rng: np.random.Generator) -> dict:
    data = {}
    for i in range(int(rng.integers(1, 25))):
        kind = rng.integers(0, 9)
        key = f"k{i}/{'abc'[i % 3]}@{i}"
        if kind == 0:
            data[key] = float(rng.normal() * 10.0 ** int(rng.integers(-9, 7)))
        elif kind == 1:
            data[key] = int(rng.integers(-(10**6), 10**6))
        elif kind == 2:
            data[key] = bool(rng.integers(0, 2))
        elif kind == 3:
            data[key] = [float("nan"), float("inf"), float("-inf"), -0.0][int(rng.integers(0, 4))]
        elif kind == 4:
            data[key] = np.float64(rng.normal())
        elif kind == 5:
            data[key] = np.int64(rng.integers(0, 100))
        elif kind == 6:
            data[key] = "not a number"
        elif kind == 7:
            data[key] = None
        else:
            data[key] = [1, 2]
    return data


@pytest.mark.parametrize("version", VERSIONS)
def test_format_step_line_matches_verl(version):
    rng = np.random.default_rng(0)
    reference = verl_concat_dict_to_str_repr if version >= "0.5" else verl_concat_dict_to_str_3f
    for _ in range(200):
        data = _random_dict(rng)
        step = int(rng.integers(0, 10**5))
        assert format_step_line(step, data, version) == reference(data, step)


def test_format_step_line_examples():
    data = {
        "actor/lr": 1e-06,
        "training/global_step": 34,
        "actor/ppo_kl": -8.163164312320433e-06,
        "x": True,
    }
    assert format_step_line(34, data, "0.4") == (
        "step:34 - actor/lr:0.000 - training/global_step:34.000 - actor/ppo_kl:-0.000 - x:1.000"
    )
    assert format_step_line(34, data, "0.8") == (
        "step:34 - actor/lr:1e-06 - training/global_step:34 - actor/ppo_kl:-8.163164312320433e-06 - x:True"
    )


# ---- the console log ---------------------------------------------------------------------
PREFIX = re.compile(r"^\((?P<name>[A-Za-z_][\w.]*)(?: pid=\d+)?(?:, ip=[0-9.]+)?\) ")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _driver_lines(text: str, name: str) -> list[str]:
    out = []
    for raw in re.split(r"[\r\n]", ANSI.sub("", text)):
        m = PREFIX.match(raw)
        if m and m.group("name") == name:
            out.append(raw[m.end() :])
    return out


def _config_dumps(lines: list[str]) -> list[dict]:
    dumps, i = [], 0
    while i < len(lines):
        if lines[i].startswith("{'actor_rollout_ref'"):
            j, depth, chunk = i, 0, []
            while True:
                chunk.append(lines[j])
                depth += lines[j].count("{") - lines[j].count("}")
                j += 1
                if depth == 0:
                    break
            dumps.append(ast.literal_eval("\n".join(chunk)))
            i = j
        else:
            i += 1
    return dumps


def _parse_steps(lines: list[str]) -> dict[int, dict[str, str]]:
    steps: dict[int, dict[str, str]] = {}
    for line in lines:
        m = re.match(r"^step:(\d+) - (.*)$", line)
        if m:
            items = dict(item.rsplit(":", 1) for item in m.group(2).split(" - "))
            steps.setdefault(int(m.group(1)), {}).update(items)
    return steps


def _expected_line(sim: SimRun, step: int, version: str) -> str:
    rows = sim.metrics.filter(pl.col("step") == step)
    values = dict(
        zip(rows.get_column("metric").to_list(), rows.get_column("value").to_list(), strict=True)
    )
    data = {
        name: step_value(name, values[name], version) for name in sim.metric_order if name in values
    }
    return format_step_line(step, data, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_console_log_round_trips(version, tmp_path):
    sim = simulate(45, "ppo", seed=3, version=version)
    path = write_console_log(sim, tmp_path / "run.log")
    text = path.read_text()
    driver = {"0.1": "main_task", "0.2": "main_task", "0.9": "TaskRunnerV1"}.get(
        version, "TaskRunner"
    )
    lines = _driver_lines(text, driver)
    assert lines, "driver prefix"
    dumps = _config_dumps(lines)
    assert dumps == [sim.config]
    steps = _parse_steps(lines)
    expected_steps = sorted(sim.steps.tolist())
    assert sorted(steps) == expected_steps
    for step in (expected_steps[0], expected_steps[1], 10, expected_steps[-1]):
        line = next(x for x in lines if x.startswith(f"step:{step} - "))
        assert line == _expected_line(sim, step, version)
    assert f"Total training steps: {45}" in text
    assert ("Training Progress:" in text) == (version >= "0.3")
    step0 = next(x for x in lines if x.startswith("step:0 - "))
    # 0.1 counts training steps from 0; later versions log only validation at step 0
    assert ("actor/pg_loss" in step0) == (version == "0.1")
    if version >= "0.5":
        frame = sim.metrics
        for step, items in steps.items():
            for key, raw in items.items():
                value = float(re.sub(r"^np\.\w+\((.*)\)$", r"\1", raw))
                expected = frame.filter((pl.col("step") == step) & (pl.col("metric") == key))[
                    "value"
                ][0]
                assert value == expected or (math.isnan(value) and math.isnan(expected))
    if version == "0.9":
        assert "val-core/openai/gsm8k/acc/mean@1:np.float64(" in text
        assert re.search(r"global_seqlen/min:\d+\.0 ", text)
    if version >= "0.4":
        assert "[validate_config]" in text
        assert "Final validation metrics: {" in text


def test_console_log_options(tmp_path):
    sim = simulate(30, "grpo", seed=1, inject=[Injection("grad-norm-not-finite", 12)])
    plain = write_console_log(
        sim, tmp_path / "plain.log", ray_prefix=False, tqdm=False, config_dump=False
    )
    text = plain.read_text()
    assert "(TaskRunner" not in text and "Training Progress" not in text
    assert "{'actor_rollout_ref'" not in text
    assert "\nWARN: rank 0 grad_norm is not finite: nan\n" in text
    ansi = write_console_log(sim, tmp_path / "ansi.log", ansi=True).read_text()
    assert "\x1b[36m(TaskRunner pid=" in ansi
    assert "\x1b[32m [repeated 3x across cluster]\x1b[0m" in ansi
    gz = write_console_log(sim, tmp_path / "run.log.gz", gz=True)
    with gzip.open(gz, "rt") as fh:
        assert fh.read() == write_console_log(sim, tmp_path / "same.log").read_text()
    lines = write_console_log(sim, tmp_path / "run.log").read_bytes().decode().split("\n")
    i = next(i for i, x in enumerate(lines) if x.startswith("(TaskRunner") and " step:12 - " in x)
    assert "WARN: rank 0 grad_norm is not finite: nan" in lines[i + 1]
    assert "actor/grad_norm:nan" in lines[i]
    assert any("[repeated 3x across cluster]" in x for x in lines)
    assert any("\rTraining Progress:" in x and x.count("\r") >= 2 for x in lines), (
        "joined tqdm updates"
    )


def test_console_log_restart(tmp_path):
    sim = simulate(60, "grpo", seed=2, inject=[Injection("kl-coef-changed-midrun", 35)])
    text = write_console_log(sim, tmp_path / "restart.log").read_text()
    lines = _driver_lines(text, "TaskRunner")
    dumps = _config_dumps(lines)
    assert dumps == [cfg for _, cfg in sim.config_segments]
    ckpt = sim.restart["checkpoint_step"]
    assert f"Setting global step to {ckpt}" in text
    assert (
        f"Load from checkpoint folder: /root/{sim.config['trainer']['default_local_dir']}/global_step_{ckpt}"
        in text
    )
    step_lines = [x for x in lines if x.startswith("step:")]
    numbers_ = [int(x.split(" ", 1)[0][5:]) for x in step_lines]
    # steps after the checkpoint are printed twice: first attempt, then after the restart
    assert numbers_.count(ckpt + 1) == 2 and numbers_.count(ckpt) == 1
    # the latest print of each step holds the values in sim.metrics
    latest = _parse_steps(step_lines)
    assert (
        float(latest[ckpt + 1]["actor/kl_coef"])
        == sim.config_segments[1][1]["actor_rollout_ref"]["actor"]["kl_loss_coef"]
    )


def test_console_log_oom_ends_the_run(tmp_path):
    sim = simulate(60, "ppo", seed=2, version="0.3", inject=[Injection("cuda-oom", 40)])
    text = write_console_log(sim, tmp_path / "oom.log").read_text()
    assert "torch.OutOfMemoryError: CUDA out of memory." in text
    assert "ray.exceptions.RayTaskError(OutOfMemoryError): ray::TaskRunner.run()" in text
    assert "step:41 " not in text and "Final validation metrics" not in text
    tail = text.rstrip("\n").split("\n")[-1]
    assert tail.startswith("Set the environment variable HYDRA_FULL_ERROR=1")


# ---- committed fixtures ------------------------------------------------------------------
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_fixtures_are_fresh(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for path in module.build(tmp_path):
        committed = FIXTURES / path.relative_to(tmp_path)
        assert committed.exists(), f"{committed} missing: run python fixtures/make_fixtures.py"
        assert _same_but_last_bits(committed.read_text(), path.read_text()), (
            f"{committed} is stale: run python fixtures/make_fixtures.py"
        )
        assert committed.stat().st_size < 700_000


_FLOAT_RE = re.compile(r"-?[0-9]+\.[0-9]+(?:e[-+]?[0-9]+)?")


def _same_but_last_bits(a: str, b: str) -> bool:
    """Equal text, except floats may differ in their last bits: numpy's vectorised exp/log give
    results that depend on the CPU's instruction set (AVX2 vs AVX-512), so a regenerated fixture
    can differ from the committed one in the 16th digit on another machine."""
    if a == b:
        return True
    if _FLOAT_RE.sub("#", a) != _FLOAT_RE.sub("#", b):
        return False
    xs, ys = _FLOAT_RE.findall(a), _FLOAT_RE.findall(b)
    return all(
        math.isclose(float(x), float(y), rel_tol=1e-12, abs_tol=1e-300)
        for x, y in zip(xs, ys, strict=True)
    )


def _fixture_series(name: str) -> dict[str, np.ndarray]:
    steps = _parse_steps(_driver_lines((FIXTURES / name).read_text(), "TaskRunner"))
    keys = {k for items in steps.values() for k in items}
    return {
        k: np.array([float(items[k]) for _, items in sorted(steps.items()) if k in items])
        for k in keys
    }


def test_fixtures_reproduce_the_seed_numbers():
    base, tuned = _fixture_series("verl_baseline.log"), _fixture_series("verl_tuned.log")
    med = np.median
    assert len(base["actor/pg_loss"]) == len(tuned["actor/pg_loss"]) == 210
    assert med(base["perf/throughput"]) == pytest.approx(842, rel=0.03)
    assert med(tuned["perf/throughput"]) == pytest.approx(1176, rel=0.03)
    assert med(base["timing_s/gen"]) == pytest.approx(5.72, rel=0.03)
    assert med(tuned["timing_s/gen"]) == pytest.approx(3.21, rel=0.03)
    assert med(base["response_length/clip_ratio"]) == pytest.approx(0.012, abs=0.002)
    assert med(tuned["response_length/clip_ratio"]) == pytest.approx(0.003, abs=0.0015)
    assert med(base["actor/grad_norm"]) == pytest.approx(7.16, rel=0.05)
    assert 4.2 <= med(tuned["actor/grad_norm"]) <= 4.8
    assert med(base["critic/vf_loss"]) == pytest.approx(0.081, rel=0.05)
    assert med(tuned["critic/vf_loss"]) == pytest.approx(0.052, rel=0.05)
    assert np.mean(base["actor/ppo_kl"] < 1e-4) > 0.8
    assert 3e-4 <= med(tuned["actor/ppo_kl"]) <= 8e-4
    assert med(base["actor/pg_clipfrac"]) > 0.003 > 0.001 > med(tuned["actor/pg_clipfrac"])
    assert base["val-core/openai/gsm8k/acc/mean@1"][-1] == pytest.approx(0.583, abs=0.01)
    assert tuned["val-core/openai/gsm8k/acc/mean@1"][-1] == pytest.approx(0.631, abs=0.01)
    assert np.std(base["actor/pg_loss"]) > 1.2 * np.std(tuned["actor/pg_loss"])


# ---- speed -------------------------------------------------------------------------------
def test_long_runs_are_fast():
    start = time.perf_counter()
    sim = simulate(100_000, "ppo", seed=0, inject=[Injection("memory-leak", 60_000)])
    elapsed = time.perf_counter() - start
    assert sim.metrics.filter(pl.col("metric") == "actor/pg_loss").height == 100_000
    assert elapsed < 10, f"100k steps took {elapsed:.1f}s"
