"""Made-up verl console excerpts of one to three steps, for the point-in-time judgements and the
health table (tests/test_point_in_time.py, tests/test_health.py). Not copies of real logs."""

from __future__ import annotations

import pprint
from typing import Any

from logscope.analyze import analyze_run
from logscope.ingest.console import read_text
from logscope.model import Run
from logscope.report import Report

PREFIX = "(TaskRunner pid=4242) "

#: a healthy GRPO step (verl 0.5-style repr values)
HEALTHY: dict[str, float] = {
    "actor/entropy": 0.412,
    "actor/kl_loss": 0.0013,
    "actor/pg_loss": 0.0412,
    "actor/pg_clipfrac": 0.0021,
    "actor/ppo_kl": 0.00031,
    "actor/pg_clipfrac_lower": 0.0,
    "actor/grad_norm": 0.31,
    "perf/mfu/actor": 0.35,
    "perf/max_memory_allocated_gb": 50.1,
    "perf/max_memory_reserved_gb": 60.5,
    "actor/lr": 1e-06,
    "critic/score/mean": 0.55,
    "critic/score/max": 1.0,
    "critic/score/min": 0.0,
    "critic/advantages/mean": 0.01,
    "critic/advantages/max": 2.47,
    "critic/advantages/min": -2.47,
    "response_length/mean": 400.1,
    "response_length/max": 1024.0,
    "response_length/min": 20.0,
    "response_length/clip_ratio": 0.03,
    "timing_s/gen": 30.2,
    "timing_s/old_log_prob": 10.1,
    "timing_s/ref": 9.0,
    "timing_s/update_actor": 35.0,
    "timing_s/step": 90.0,
}

#: the PPO critic's keys, healthy
CRITIC: dict[str, float] = {
    "critic/vf_loss": 0.05,
    "critic/vf_explained_var": 0.45,
    "critic/grad_norm": 2.1,
    "critic/values/mean": 0.52,
    "critic/returns/mean": 0.55,
    "critic/returns/max": 1.0,
    "critic/returns/min": 0.0,
}


def value(v: float, three: bool) -> str:
    return f"{v:.3f}" if three else repr(v)


def step_line(
    step: int, metrics: dict[str, float], three: bool = False, prefix: str = PREFIX
) -> str:
    body = " - ".join(f"{k}:{value(v, three)}" for k, v in metrics.items())
    return f"{prefix}step:{step} - {body}\n"


def config_dump(config: dict[str, Any], prefix: str = PREFIX) -> str:
    return "".join(prefix + line + "\n" for line in pprint.pformat(config).splitlines())


def excerpt(
    *steps: dict[str, float],
    first: int = 1,
    three: bool = False,
    config: dict[str, Any] | None = None,
    prefix: str = PREFIX,
) -> Run:
    """A run read from made-up console text: an optional config dump, then one line per step."""
    text = config_dump(config, prefix) if config else ""
    text += "".join(step_line(first + i, metrics, three, prefix) for i, metrics in enumerate(steps))
    return read_text(text)


def healthy(**changes: float) -> dict[str, float]:
    """The healthy step with some metrics changed (a value of None drops the key)."""
    out = {**HEALTHY, **changes}
    return {k: v for k, v in out.items() if v is not None}


def analyze(run: Run) -> Report:
    return analyze_run(run)


def warnings_plus(report: Report) -> list[str]:
    return sorted(f.name for f in report.findings if f.severity != "info")


def named(report: Report, name: str) -> list:
    return [f for f in report.findings if f.name == name]


def grpo_config(**data: Any) -> dict[str, Any]:
    """A small verl config dump (GRPO, max_response_length 1024 unless given)."""
    return {
        "actor_rollout_ref": {
            "actor": {"grad_clip": 1.0, "loss_agg_mode": "token-mean", "optim": {"lr": 1e-06}},
            "rollout": {"n": 8, "response_length": 1024, "temperature": 1.0},
        },
        "algorithm": {"adv_estimator": "grpo"},
        "data": {"max_prompt_length": 512, "max_response_length": 1024, **data},
        "trainer": {"n_gpus_per_node": 8, "nnodes": 1},
    }
