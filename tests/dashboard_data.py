"""Runs for the dashboard tests: the committed fixtures when they can be read, else built here.

`seed_store(root)` puts a baseline and a tuned PPO run into a store and returns their ids. It
prefers fixtures/verl_baseline.log and fixtures/verl_tuned.log (read through Store.load, as the
dashboard does); with `prefer_fixtures=False` (the tests, whose assertions name steps) it builds
two runs by hand with the same story: the baseline has a NaN loss at step 121 and a KL jump at
step 150; the tuned run has higher throughput, lower gen time and a better score from step ~100
on.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import polars as pl

from logscope.ingest import load
from logscope.model import ConfigSegment, Run, Source
from logscope.schemas import METRICS_SCHEMA
from logscope.store import Store

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = [ROOT / "fixtures" / "verl_baseline.log", ROOT / "fixtures" / "verl_tuned.log"]

BASE_CONFIG = {
    "data": {"train_batch_size": 512, "max_prompt_length": 512, "max_response_length": 256},
    "actor_rollout_ref": {
        "actor": {
            "optim": {"lr": 1e-6},
            "ppo_mini_batch_size": 64,
            "ppo_micro_batch_size_per_gpu": 4,
            "grad_clip": 1.0,
            "use_kl_loss": False,
        },
        "rollout": {"gpu_memory_utilization": 0.5, "log_prob_micro_batch_size_per_gpu": 8},
        "ref": {"log_prob_micro_batch_size_per_gpu": 8},
    },
    "critic": {"optim": {"lr": 1e-5}, "ppo_micro_batch_size_per_gpu": 4},
    "algorithm": {"adv_estimator": "gae", "kl_ctrl": {"kl_coef": 0.001, "target_kl": 0.1}},
    "trainer": {"n_gpus_per_node": 2, "nnodes": 1, "test_freq": 10, "total_epochs": 15},
}


def _tuned_config() -> dict:
    import copy

    cfg = copy.deepcopy(BASE_CONFIG)
    actor = cfg["actor_rollout_ref"]["actor"]
    actor["optim"]["lr"] = 1.5e-6
    actor["ppo_mini_batch_size"] = 128
    actor["ppo_micro_batch_size_per_gpu"] = 8
    actor["grad_clip"] = 0.5
    cfg["actor_rollout_ref"]["rollout"]["log_prob_micro_batch_size_per_gpu"] = 16
    cfg["actor_rollout_ref"]["ref"]["log_prob_micro_batch_size_per_gpu"] = 16
    cfg["critic"]["ppo_micro_batch_size_per_gpu"] = 8
    cfg["algorithm"]["kl_ctrl"] = {"kl_coef": 0.0005, "target_kl": 0.05}
    return cfg


def build_run(
    run_id: str,
    n_steps: int = 300,
    tuned: bool = False,
    seed: int = 0,
    faults: bool = True,
) -> Run:
    """A PPO-like run with verl's metric names (every step logs every training metric)."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, n_steps + 1, dtype=np.float64)
    steps = t.astype(np.int64)
    gain = 0.14 if tuned else 0.0
    after = np.clip((t - 100) / 60, 0, 1)
    score = 0.35 + 0.25 * (1 - np.exp(-t / 120)) + gain * after + rng.normal(0, 0.02, n_steps)
    kl = np.abs(0.0005 + 0.00001 * t / 10 + rng.normal(0, 0.00005, n_steps))
    entropy = 1.2 * np.exp(-t / 900) + rng.normal(0, 0.01, n_steps)
    pg_loss = rng.normal(0.0, 0.05, n_steps)
    grad = np.abs(rng.normal(4.5 if tuned else 7.2, 0.3, n_steps))
    if faults and not tuned:
        pg_loss[120] = np.nan  # step 121
        kl[149:] *= 6.0  # KL jumps at step 150 and stays up
        grad[149] = 40.0
    series: dict[str, np.ndarray] = {
        "critic/score/mean": score,
        "critic/rewards/mean": score - 0.01,
        "critic/score/max": score + 0.3,
        "critic/score/min": score - 0.3,
        "critic/advantages/mean": rng.normal(0, 0.01, n_steps),
        "critic/vf_loss": np.abs(rng.normal(0.052 if tuned else 0.081, 0.005, n_steps)),
        "critic/grad_norm": np.abs(rng.normal(2, 0.2, n_steps)),
        "actor/pg_loss": pg_loss,
        "actor/grad_norm": grad,
        "actor/ppo_kl": kl / 2,
        "actor/kl_loss": kl,
        "actor/pg_clipfrac": np.abs(rng.normal(0.005, 0.001, n_steps)),
        "actor/entropy": entropy,
        "actor/lr": np.full(n_steps, 1.5e-6 if tuned else 1e-6),
        "response_length/mean": 180 + rng.normal(0, 5, n_steps),
        "response_length/max": np.full(n_steps, 256.0),
        "response_length/clip_ratio": np.abs(rng.normal(0.02 if tuned else 0.05, 0.005, n_steps)),
        "prompt_length/mean": 120 + rng.normal(0, 3, n_steps),
        "timing_s/gen": np.abs(rng.normal(30 if tuned else 40, 1.5, n_steps)),
        "timing_s/step": np.abs(rng.normal(70 if tuned else 85, 2, n_steps)),
        "timing_s/update_actor": np.abs(rng.normal(20, 1, n_steps)),
        "perf/throughput": rng.normal(1320 if tuned else 1176, 15, n_steps),
        "perf/max_memory_reserved_gb": 45 + 0.002 * t + rng.normal(0, 0.05, n_steps),
        "perf/max_memory_allocated_gb": 40 + rng.normal(0, 0.05, n_steps),
        "perf/cpu_memory_used_gb": 60 + rng.normal(0, 0.1, n_steps),
    }
    start = 1_764_500_000.0
    frames = [
        pl.DataFrame(
            {
                "step": steps,
                "metric": [name] * n_steps,
                "value": values.astype(np.float64),
                "wall_time": start + t * (70 if tuned else 85),
            },
            schema=METRICS_SCHEMA,
        )
        for name, values in series.items()
    ]
    val_steps = steps[steps % 10 == 0]
    val = 0.45 + 0.12 * (1 - np.exp(-val_steps / 150)) + (0.06 if tuned else 0.0)
    frames.append(
        pl.DataFrame(
            {
                "step": val_steps,
                "metric": ["val-core/openai/gsm8k/reward/mean@1"] * len(val_steps),
                "value": val,
                "wall_time": start + val_steps * 85.0,
            },
            schema=METRICS_SCHEMA,
        )
    )
    config = _tuned_config() if tuned else BASE_CONFIG
    segments = [ConfigSegment(0, config, 1)]
    if not tuned:
        # The baseline was restarted from a checkpoint at step 200 with a lower KL coefficient.
        import copy

        restarted = copy.deepcopy(config)
        restarted["algorithm"]["kl_ctrl"]["kl_coef"] = 0.0007
        segments.append(ConfigSegment(200, restarted, 4000))
    name = "verl_tuned.log" if tuned else "verl_baseline.log"
    return Run(
        id=run_id,
        source=Source("synthetic", f"/data/{name}"),
        meta={"algorithm": "ppo", "verl_version": "0.5", "experiment": name[:-4]},
        config_segments=segments,
        metrics=pl.concat(frames),
    )


@functools.cache
def fixtures_readable() -> bool:
    """True when every committed fixture reads as a run; a broken reader raises, not False."""
    return all(p.is_file() and len(load(p)) >= 1 for p in FIXTURES)


def seed_store(root: str | Path, prefer_fixtures: bool = True) -> list[str]:
    """Put a baseline and a tuned run into the store at `root`; return [baseline id, tuned id]."""
    store = Store(root)
    if prefer_fixtures and fixtures_readable():
        ids = []
        for path in FIXTURES:
            ids += [r.id for r in store.load(path)]
        if len(ids) >= 2:
            return ids
    base = build_run("baseline0000000000000000", seed=1)
    tuned = build_run("tuned00000000000000000000", tuned=True, seed=2)
    store.put_run(base)
    store.put_run(tuned)
    return [base.id, tuned.id]


APP = Path(__file__).resolve().parent.parent / "app" / "app.py"


def open_page(store: Path, monkeypatch, page: str | None = None, query=None, **state):  # type: ignore[no-untyped-def]
    """The dashboard (AppTest) on `store`, with `state` in its session, switched to `page`
    (pages/<page>.py; None: the default page), `query` in its address; no exception on the
    way. LOGSCOPE_RUNS (the preselected runs) is left as the caller set it."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("LOGSCOPE_STORE", str(store))
    at = AppTest.from_file(str(APP), default_timeout=120)
    for key, value in state.items():
        at.session_state[key] = value
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    if page:
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, at.exception
    return at
