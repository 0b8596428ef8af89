"""verl config facts: dotted-key access, verl's defaults for the keys logscope reads, Hydra values,
and the tables the advice is computed from (batch-size arithmetic, advised values by model size).

Defaults come from verl 0.9.1's `_generated_ppo_trainer.yaml` unless a version differs
(`verl_formats.md` §6).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from logscope import verl_version

AR = "actor_rollout_ref"
ACT = f"{AR}.actor"
RO = f"{AR}.rollout"
REF = f"{AR}.ref"

# key → default (0.9.1). A value of `_VERSIONED` maps version prefixes to defaults.
DEFAULTS: dict[str, Any] = {
    "data.train_batch_size": 1024,
    "data.max_prompt_length": 512,
    "data.max_response_length": 512,
    "data.shuffle": True,
    f"{RO}.n": 1,
    f"{RO}.gpu_memory_utilization": 0.5,
    f"{RO}.tensor_model_parallel_size": 2,
    f"{RO}.free_cache_engine": True,
    f"{RO}.enforce_eager": False,
    f"{RO}.max_num_batched_tokens": 8192,
    f"{RO}.max_num_seqs": 1024,
    f"{RO}.log_prob_micro_batch_size_per_gpu": None,
    f"{REF}.log_prob_micro_batch_size_per_gpu": None,
    f"{ACT}.ppo_mini_batch_size": 256,
    f"{ACT}.ppo_micro_batch_size_per_gpu": None,
    f"{ACT}.use_dynamic_bsz": False,
    f"{ACT}.use_kl_loss": False,
    f"{ACT}.kl_loss_coef": 0.001,
    f"{ACT}.kl_loss_type": "low_var_kl",
    f"{ACT}.grad_clip": 1.0,
    f"{ACT}.optim.lr": 1e-6,
    f"{ACT}.clip_ratio": 0.2,
    f"{ACT}.loss_agg_mode": "token-mean",
    f"{ACT}.entropy_coeff": 0,
    f"{ACT}.shuffle": False,
    f"{ACT}.ppo_epochs": 1,
    "critic.ppo_micro_batch_size_per_gpu": None,
    "critic.forward_micro_batch_size_per_gpu": None,
    "critic.optim.lr": 1e-5,
    "algorithm.adv_estimator": "gae",
    "algorithm.use_kl_in_reward": False,
    "algorithm.kl_ctrl.type": "fixed",
    "algorithm.kl_ctrl.kl_coef": 0.001,
    "algorithm.kl_ctrl.target_kl": 0.1,
    "algorithm.norm_adv_by_std_in_grpo": True,
    "trainer.n_gpus_per_node": 8,
    "trainer.nnodes": 1,
    "trainer.test_freq": -1,
    "trainer.save_freq": -1,
    "trainer.total_epochs": 30,
    "trainer.val_before_train": True,
    "trainer.seed": None,
    # read by the config rules (detectors/config_*.py)
    f"{ACT}.strategy": "fsdp",
    f"{ACT}.ppo_micro_batch_size": None,
    f"{RO}.log_prob_micro_batch_size": None,
    f"{REF}.log_prob_micro_batch_size": None,
    f"{RO}.enable_chunked_prefill": True,
}

#: the advantage estimators that compute GRPO's group-relative advantage
GRPO_ESTIMATORS = frozenset({"grpo", "grpo_passk", "grpo_vectorized", "gdpo"})

# Defaults that changed across verl versions: key → [(first version, value)], newest last.
VERSIONED_DEFAULTS: dict[str, list[tuple[str, Any]]] = {
    f"{RO}.enforce_eager": [("0.1", True), ("0.6", False)],
    f"{ACT}.entropy_coeff": [("0.1", 0.001), ("0.4", 0)],
    "trainer.test_freq": [("0.1", 2), ("0.2", -1)],
}

_MISSING = object()


def get(config: dict[str, Any], key: str, default: Any = None) -> Any:
    """Value of a dotted key in a nested config dict, or `default`."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def set_path(config: dict[str, Any], parts: Sequence[str], value: Any) -> None:
    """config[parts[0]]…[parts[-1]] = value, making (or replacing non-dict) levels on the way."""
    node = config
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def set_key(config: dict[str, Any], key: str, value: Any) -> None:
    """Set a dotted key, creating intermediate dicts (like Hydra's `+key=value`)."""
    set_path(config, key.split("."), value)


def delete_key(config: dict[str, Any], key: str) -> None:
    """Remove a dotted key if present (like Hydra's `~key`)."""
    node: Any = config
    parts = key.split(".")
    for part in parts[:-1]:
        if not isinstance(node, dict) or part not in node:
            return
        node = node[part]
    if isinstance(node, dict):
        node.pop(parts[-1], None)


def has(config: dict[str, Any], key: str) -> bool:
    return get(config, key, _MISSING) is not _MISSING


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{dotted key: value} of every non-dict value in a nested config."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def changed_keys(a: dict[str, Any], b: dict[str, Any], limit: int = 20) -> list[str]:
    """Dotted keys whose values differ between two nested configs (first `limit`)."""
    flat_a, flat_b = flatten(a), flatten(b)
    keys = sorted(
        k for k in set(flat_a) | set(flat_b) if flat_a.get(k, _MISSING) != flat_b.get(k, _MISSING)
    )
    return keys[:limit]


def default_for(key: str, version: str | None = None) -> Any:
    """verl's default for `key` (for `version` when it differs by version)."""
    if version and key in VERSIONED_DEFAULTS:
        chosen = VERSIONED_DEFAULTS[key][0][1]
        for first, value in VERSIONED_DEFAULTS[key]:
            if verl_version.at_least(version, first):
                chosen = value
        return chosen
    return DEFAULTS.get(key)


def effective(config: dict[str, Any], key: str, version: str | None = None) -> tuple[Any, bool]:
    """(value, from_config): the config's value, else verl's default with from_config False."""
    value = get(config, key, _MISSING)
    if value is not _MISSING:
        return value, True
    return default_for(key, version), False


def hydra_value(value: Any) -> str:
    """Render a Python value as a Hydra override value (`null`, `true`, `1e-06`, `['a','b']`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = repr(value)
        return text
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    text = str(value)
    if re.fullmatch(r"[A-Za-z0-9_./\-:+@]+", text) and text.lower() not in {
        "null",
        "true",
        "false",
    }:
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def override(key: str, value: Any) -> str:
    """A ready Hydra override, e.g. `actor_rollout_ref.actor.kl_loss_coef=0.0007`."""
    return f"{key}={hydra_value(value)}"


def round_sig(x: float, digits: int = 2) -> float:
    """Round to significant digits, for suggested values a human would type (0.0007, not 0.000712)."""
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, -math.floor(math.log10(abs(x))) + digits - 1)


# Known model sizes (billions of parameters) and hidden sizes, from the model path.
_HIDDEN_BY_SIZE = {
    0.5: 896,
    1.5: 1536,
    3.0: 2048,
    7.0: 3584,
    8.0: 4096,
    14.0: 5120,
    32.0: 5120,
    72.0: 8192,
}


def model_size_b(config: dict[str, Any]) -> float | None:
    """Parameters in billions guessed from `actor_rollout_ref.model.path` (e.g. `Qwen2.5-7B` → 7)."""
    path = get(config, f"{AR}.model.path")
    if not isinstance(path, str):
        return None
    match = re.search(r"(?<![\d.])(\d+(?:\.\d+)?)\s*[Bb](?![a-zA-Z])", path.rsplit("/", 1)[-1])
    return float(match.group(1)) if match else None


def hidden_size(config: dict[str, Any]) -> int | None:
    """Hidden size for a known model family/size (Qwen2-7B: 4096 per the seed article)."""
    size = model_size_b(config)
    if size is None:
        return None
    path = str(get(config, f"{AR}.model.path", ""))
    if size == 7.0 and re.search(r"qwen2-7b", path, re.I):
        return 4096  # the seed article's figure for Qwen2-7B
    return _HIDDEN_BY_SIZE.get(size)


def n_gpus(config: dict[str, Any]) -> int | None:
    """trainer.n_gpus_per_node × trainer.nnodes (verl's defaults where unset)."""
    per_node, _ = effective(config, "trainer.n_gpus_per_node")
    nodes, _ = effective(config, "trainer.nnodes")
    try:
        return int(per_node) * int(nodes)
    except (TypeError, ValueError, OverflowError):
        return None


# ---- batch-size arithmetic ----------------------------------------------------------------------

#: tokens per GPU per micro-step of the GRPO article's golden formula (seed:grpo-pitfalls §1.2)
GOLDEN_BUDGET_TOKENS = 24 * 1024


def divisors(n: int) -> list[int]:
    """The divisors of n ≥ 1, ascending; O(√n)."""
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def divisor_at_most(n: int, limit: int) -> int:
    """The largest divisor of n that is ≤ limit (1 at least); O(√n)."""
    return max((d for d in divisors(n) if d <= limit), default=1)


# ---- advised values by model size and GPU count -------------------------------------------------


@cache
def gpu_memory_range(size: float | None, gpus: int | None) -> tuple[float, float, str]:
    """(low, high, why) of the advised rollout.gpu_memory_utilization."""
    from logscope.advice import SEED_GRPO, SEED_PPO  # advice imports this module

    if size is not None and size <= 1.5:
        return 0.5, 0.65, f"0.5–0.65 for a small model ({size:g}B; {SEED_PPO} §2.1)"
    if gpus == 1:
        return 0.4, 0.5, f"0.4–0.5 on a single GPU ({SEED_GRPO} §4.2)"
    if gpus is None or gpus >= 8:
        return 0.3, 0.4, f"0.3–0.4 with {gpus or 8}-GPU FSDP ({SEED_GRPO} §4.2)"
    return 0.4, 0.5, f"0.4–0.5 with {gpus} GPUs (between the GRPO article's 1- and 8-GPU figures)"


def suggested_kl_coef(size: float | None, small: float = 3.0, large: float = 30.0) -> float:
    """A starting KL coefficient by model size: 0.001 is tuned for ~7B (seed §3.1)."""
    if size is not None and size <= small:
        return 0.0005
    if size is not None and size >= large:
        return 0.002
    return 0.001
