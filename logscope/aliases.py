"""Metric concepts detectors need, mapped to the names verl used across versions.

Metric names stay verl's own; this table only says which name to look for. The first name
present in a run wins (newest verl naming first).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from logscope.model import Run

ALIASES: dict[str, tuple[str, ...]] = {
    # KL
    "kl_ref": ("actor/kl_loss", "critic/kl", "actor/reward_kl_penalty"),
    "kl_loss": ("actor/kl_loss",),
    "kl_coef": ("actor/kl_coef", "critic/kl_coeff", "actor/reward_kl_penalty_coeff"),
    "ppo_kl": ("actor/ppo_kl",),
    "critic_kl": ("critic/kl",),
    # reward
    "score_mean": ("critic/score/mean",),
    "reward_mean": ("critic/rewards/mean",),
    "score_max": ("critic/score/max",),
    "score_min": ("critic/score/min",),
    # clipping / lengths
    "response_clip_ratio": ("response_length/clip_ratio",),
    "prompt_clip_ratio": ("prompt_length/clip_ratio",),
    "pg_clipfrac": ("actor/pg_clipfrac",),
    "pg_clipfrac_lower": ("actor/pg_clipfrac_lower",),
    "response_length_mean": ("response_length/mean",),
    "response_length_max": ("response_length/max",),
    # losses and gradients
    "pg_loss": ("actor/pg_loss",),
    "actor_grad_norm": ("actor/grad_norm",),
    "critic_grad_norm": ("critic/grad_norm",),
    "entropy": ("actor/entropy", "actor/entropy_loss"),
    "vf_loss": ("critic/vf_loss",),
    "vf_explained_var": ("critic/vf_explained_var",),
    "advantages_mean": ("critic/advantages/mean",),
    "advantages_max": ("critic/advantages/max",),
    "advantages_min": ("critic/advantages/min",),
    "returns_mean": ("critic/returns/mean",),
    "returns_max": ("critic/returns/max",),
    "returns_min": ("critic/returns/min",),
    "values_mean": ("critic/values/mean", "critic/vpred_mean"),
    "lr": ("actor/lr", "actor/lr(1e-4)"),
    # memory
    "gpu_mem_reserved": ("actor/perf/max_memory_reserved_gb", "perf/max_memory_reserved_gb"),
    "gpu_mem_allocated": ("actor/perf/max_memory_allocated_gb", "perf/max_memory_allocated_gb"),
    "cpu_mem_used": ("actor/perf/cpu_memory_used_gb", "perf/cpu_memory_used_gb"),
    # timing / throughput
    "time_gen": ("timing_s/gen", "timing/gen"),
    "time_step": ("timing_s/step", "perf/time_per_step", "timing/step"),
    "time_per_step": ("perf/time_per_step", "timing_s/step", "timing/step"),
    "throughput": ("perf/throughput",),
    "mfu": ("perf/mfu/actor", "mfu/actor"),
    "num_preempted": (
        "timing_s/agent_loop/num_preempted/max",
        "timing_s/agent_loop/slowest/num_preempted",
    ),
}

# Metric families that must stay finite (non-finite-metric). Prefix match on verl names.
LOSS_LIKE_PREFIXES: tuple[str, ...] = (
    "actor/pg_loss",
    "actor/loss",
    "actor/kl_loss",
    "actor/ppo_kl",
    "actor/grad_norm",
    "actor/entropy",
    "critic/vf_loss",
    "critic/loss",
    "critic/grad_norm",
    "critic/kl",
    "critic/score/",
    "critic/rewards/",
    "critic/advantages/",
    "critic/returns/",
    "critic/values/",
)

VALIDATION_PREFIXES: tuple[str, ...] = ("val-core/", "val/test_score/", "val-aux/")


def resolve(run: Run, concept: str) -> str | None:
    """The metric name this run uses for `concept`, or None when the run has none."""
    for name in ALIASES[concept]:
        if run.has_metric(name):
            return name
    return None


def validation_metrics(run: Run) -> list[str]:
    """Validation score metrics, core ones first (`val-core/…` then `val/test_score/…`)."""
    names = run.metric_names
    core = [n for n in names if n.startswith("val-core/") and "/mean@" in n]
    if not core:
        core = [n for n in names if n.startswith("val-core/")]
    legacy = [n for n in names if n.startswith("val/test_score/")]
    return core + legacy
