"""Realistic resolved verl configs (what `OmegaConf.to_container(config, resolve=True)` gives).

The base follows verl's `ppo_trainer.yaml` of the 0.4/0.5 releases; `default_config` adjusts the
keys that differ by version (verl_formats.md §1.7, §6) and sets a GSM8K recipe like verl's examples.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from logscope.synthetic.versions import at_least, check_version
from logscope.verl_config import delete_key, get
from logscope.verl_config import set_key as set_dotted

GSM8K_TRAIN_PROMPTS = 7473
GSM8K_TEST_PROMPTS = 1319


def _fsdp(offload: bool = False) -> dict[str, Any]:
    return {
        "fsdp_size": -1,
        "offload_policy": False,
        "optimizer_offload": False,
        "param_offload": offload,
        "reshard_after_forward": True,
        "wrap_policy": {"min_num_params": 0},
    }


def _optim(lr: float, **extra: Any) -> dict[str, Any]:
    """An actor's or critic's `optim` block: `lr`, any `extra` keys, verl's defaults."""
    return {
        "lr": lr,
        **extra,
        "lr_warmup_steps_ratio": 0.0,
        "min_lr_ratio": None,
        "total_training_steps": -1,
        "warmup_style": "constant",
        "weight_decay": 0.01,
    }


def _base() -> dict[str, Any]:
    model_path = "Qwen/Qwen2.5-7B-Instruct"
    return {
        "actor_rollout_ref": {
            "actor": {
                "checkpoint": {"contents": ["model", "optimizer", "extra"]},
                "clip_ratio": 0.2,
                "clip_ratio_c": 3.0,
                "clip_ratio_high": 0.2,
                "clip_ratio_low": 0.2,
                "entropy_coeff": 0,
                "fsdp_config": {**_fsdp(), "fsdp_size": -1},
                "grad_clip": 1.0,
                "kl_loss_coef": 0.001,
                "kl_loss_type": "low_var_kl",
                "loss_agg_mode": "token-mean",
                "optim": _optim(1e-06, lr_warmup_steps=-1),
                "ppo_epochs": 1,
                "ppo_max_token_len_per_gpu": 16384,
                "ppo_micro_batch_size": None,
                "ppo_micro_batch_size_per_gpu": 4,
                "ppo_mini_batch_size": 256,
                "shuffle": False,
                "strategy": "fsdp",
                "ulysses_sequence_parallel_size": 1,
                "use_dynamic_bsz": False,
                "use_kl_loss": True,
                "use_torch_compile": True,
            },
            "hybrid_engine": True,
            "model": {
                "enable_gradient_checkpointing": True,
                "external_lib": None,
                "override_config": {},
                "path": model_path,
                "use_liger": False,
                "use_remove_padding": True,
            },
            "ref": {
                "fsdp_config": {
                    "param_offload": True,
                    "reshard_after_forward": True,
                    "wrap_policy": {"min_num_params": 0},
                },
                "log_prob_max_token_len_per_gpu": 16384,
                "log_prob_micro_batch_size": None,
                "log_prob_micro_batch_size_per_gpu": 16,
                "log_prob_use_dynamic_bsz": False,
                "strategy": "fsdp",
                "ulysses_sequence_parallel_size": 1,
                "use_torch_compile": True,
            },
            "rollout": {
                "disable_log_stats": True,
                "do_sample": True,
                "dtype": "bfloat16",
                "enable_chunked_prefill": True,
                "enforce_eager": True,
                "engine_kwargs": {"swap_space": None},
                "free_cache_engine": True,
                "gpu_memory_utilization": 0.4,
                "ignore_eos": False,
                "load_format": "dummy_dtensor",
                "log_prob_max_token_len_per_gpu": 16384,
                "log_prob_micro_batch_size": None,
                "log_prob_micro_batch_size_per_gpu": 16,
                "log_prob_use_dynamic_bsz": False,
                "max_model_len": None,
                "max_num_batched_tokens": 8192,
                "max_num_seqs": 1024,
                "mode": "sync",
                "n": 1,
                "name": "vllm",
                "prompt_length": 512,
                "response_length": 1024,
                "temperature": 1.0,
                "tensor_model_parallel_size": 2,
                "top_k": -1,
                "top_p": 1,
                "val_kwargs": {
                    "do_sample": False,
                    "n": 1,
                    "temperature": 0,
                    "top_k": -1,
                    "top_p": 1.0,
                },
            },
        },
        "algorithm": {
            "adv_estimator": "gae",
            "gamma": 1.0,
            "kl_ctrl": {"horizon": 10000, "kl_coef": 0.001, "target_kl": 0.1, "type": "fixed"},
            "kl_penalty": "kl",
            "lam": 1.0,
            "norm_adv_by_std_in_grpo": True,
            "use_kl_in_reward": False,
        },
        "critic": {
            "checkpoint": {"contents": ["model", "optimizer", "extra"]},
            "cliprange_value": 0.5,
            "forward_max_token_len_per_gpu": 32768,
            "forward_micro_batch_size": None,
            "forward_micro_batch_size_per_gpu": 4,
            "grad_clip": 1.0,
            "model": {
                "enable_gradient_checkpointing": True,
                "external_lib": None,
                "fsdp_config": _fsdp(),
                "override_config": {},
                "path": model_path,
                "tokenizer_path": model_path,
                "use_remove_padding": True,
            },
            "optim": _optim(1e-05),
            "ppo_epochs": 1,
            "ppo_max_token_len_per_gpu": 32768,
            "ppo_micro_batch_size": None,
            "ppo_micro_batch_size_per_gpu": 4,
            "ppo_mini_batch_size": 256,
            "rollout_n": 1,
            "shuffle": False,
            "strategy": "fsdp",
            "ulysses_sequence_parallel_size": 1,
            "use_dynamic_bsz": False,
        },
        "custom_reward_function": {"name": "compute_score", "path": None},
        "data": {
            "custom_cls": {"name": None, "path": None},
            "filter_overlong_prompts": True,
            "filter_overlong_prompts_workers": 1,
            "image_key": "images",
            "max_prompt_length": 512,
            "max_response_length": 1024,
            "prompt_key": "prompt",
            "return_raw_chat": False,
            "return_raw_input_ids": False,
            "reward_fn_key": "data_source",
            "shuffle": True,
            "tokenizer": None,
            "train_batch_size": 1024,
            "train_files": "/root/data/gsm8k/train.parquet",
            "truncation": "error",
            "val_batch_size": None,
            "val_files": "/root/data/gsm8k/test.parquet",
            "video_key": "videos",
        },
        "ray_init": {"num_cpus": None},
        "reward_model": {
            "enable": False,
            "forward_max_token_len_per_gpu": 32768,
            "launch_reward_fn_async": False,
            "max_length": None,
            "micro_batch_size": None,
            "micro_batch_size_per_gpu": None,
            "model": {
                "external_lib": None,
                "fsdp_config": {
                    "fsdp_size": -1,
                    "param_offload": False,
                    "reshard_after_forward": True,
                    "wrap_policy": {"min_num_params": 0},
                },
                "input_tokenizer": model_path,
                "path": "~/models/FsfairX-LLaMA3-RM-v0.1",
                "use_remove_padding": False,
            },
            "reward_manager": "naive",
            "strategy": "fsdp",
            "ulysses_sequence_parallel_size": 1,
            "use_dynamic_bsz": False,
        },
        "trainer": {
            "balance_batch": True,
            "critic_warmup": 0,
            "default_hdfs_dir": None,
            "default_local_dir": "checkpoints/verl_examples/gsm8k",
            "del_local_ckpt_after_load": False,
            "experiment_name": "gsm8k",
            "log_val_generations": 0,
            "logger": ["console", "wandb"],
            "max_actor_ckpt_to_keep": None,
            "max_critic_ckpt_to_keep": None,
            "n_gpus_per_node": 8,
            "nnodes": 1,
            "project_name": "verl_examples",
            "ray_wait_register_center_timeout": 300,
            "resume_from_path": None,
            "resume_mode": "auto",
            "rollout_data_dir": None,
            "save_freq": -1,
            "test_freq": 10,
            "total_epochs": 15,
            "total_training_steps": None,
            "val_before_train": True,
            "validation_data_dir": None,
        },
    }


# Keys that verl derives from others through interpolation: follower → leader.
_LINKS: tuple[tuple[str, str], ...] = (
    ("actor_rollout_ref.rollout.prompt_length", "data.max_prompt_length"),
    ("actor_rollout_ref.rollout.response_length", "data.max_response_length"),
    ("critic.rollout_n", "actor_rollout_ref.rollout.n"),
    ("critic.ppo_mini_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size"),
    ("critic.model.tokenizer_path", "actor_rollout_ref.model.path"),
    ("reward_model.model.input_tokenizer", "actor_rollout_ref.model.path"),
    ("critic.ppo_epochs", "actor_rollout_ref.actor.ppo_epochs"),
    ("critic.shuffle", "actor_rollout_ref.actor.shuffle"),
)


def steps_per_epoch(config: dict[str, Any]) -> int:
    """Training steps per epoch on GSM8K (verl's train dataloader drops the last partial batch)."""
    batch = int(get(config, "data.train_batch_size", 1024) or 1024)
    return max(1, GSM8K_TRAIN_PROMPTS // max(1, batch))


def default_config(
    algorithm: str,
    version: str,
    n_steps: int,
    test_freq: int = 10,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A resolved verl config for a GSM8K `algorithm` run of `n_steps` on verl `version`."""
    version = check_version(version)
    cfg = _base()
    if algorithm == "grpo":
        set_dotted(cfg, "algorithm.adv_estimator", "grpo")
        set_dotted(cfg, "actor_rollout_ref.rollout.n", 8)
        set_dotted(cfg, "trainer.project_name", "verl_grpo_example_gsm8k")
        set_dotted(cfg, "trainer.experiment_name", "qwen2_5_7b_function_rm")
    else:
        set_dotted(cfg, "trainer.project_name", "verl_example_gsm8k")
        set_dotted(cfg, "trainer.experiment_name", "qwen2_5_7b_ppo")
    set_dotted(cfg, "trainer.test_freq", int(test_freq))
    for key, value in (overrides or {}).items():
        set_dotted(cfg, key, copy.deepcopy(value))
    given = set(overrides or {})
    for follower, leader in _LINKS:
        if follower not in given:
            set_dotted(cfg, follower, get(cfg, leader))
    proj, exp = get(cfg, "trainer.project_name"), get(cfg, "trainer.experiment_name")
    if "trainer.default_local_dir" not in given:
        set_dotted(cfg, "trainer.default_local_dir", f"checkpoints/{proj}/{exp}")
    if "trainer.total_epochs" not in given:
        set_dotted(cfg, "trainer.total_epochs", math.ceil(n_steps / steps_per_epoch(cfg)))
    if "trainer.total_training_steps" not in given:
        epochs_steps = steps_per_epoch(cfg) * int(get(cfg, "trainer.total_epochs"))
        set_dotted(
            cfg, "trainer.total_training_steps", None if epochs_steps == n_steps else n_steps
        )
    _version_keys(cfg, version, given)
    if isinstance(get(cfg, "async_training", None), dict):
        # the fully-async trainer builds its LR schedulers before it knows the step count: a
        # careful user gives the horizon (LS521 flags a decaying schedule without one)
        for role in ("actor_rollout_ref.actor", "critic"):
            key = f"{role}.optim.total_training_steps"
            if key not in given and isinstance(get(cfg, f"{role}.optim", None), dict):
                set_dotted(cfg, key, n_steps)
    return cfg


def _delete_unless_given(cfg: dict[str, Any], given: set[str], *keys: str) -> None:
    """Delete the dotted `keys` from `cfg`, except those the caller set (`given`)."""
    for key in keys:
        if key not in given:
            delete_key(cfg, key)


def _version_keys(cfg: dict[str, Any], version: str, given: set[str]) -> None:
    """Add/remove the keys that only some verl versions have (§1.7 top-level table, §6)."""
    if not at_least(version, "0.4"):
        _delete_unless_given(
            cfg,
            given,
            "ray_init",
            "algorithm.use_kl_in_reward",
            "algorithm.kl_ctrl.target_kl",
            "algorithm.kl_ctrl.horizon",
            "algorithm.norm_adv_by_std_in_grpo",
            "actor_rollout_ref.actor.clip_ratio_c",
            "actor_rollout_ref.actor.clip_ratio_low",
            "actor_rollout_ref.actor.clip_ratio_high",
            "actor_rollout_ref.actor.loss_agg_mode",
            "actor_rollout_ref.rollout.mode",
            "trainer.val_before_train",
            "reward_model.launch_reward_fn_async",
        )
        if "actor_rollout_ref.actor.entropy_coeff" not in given:
            set_dotted(cfg, "actor_rollout_ref.actor.entropy_coeff", 0.001)
    if not at_least(version, "0.3"):
        delete_key(cfg, "custom_reward_function")
    if version == "0.1":
        _delete_unless_given(
            cfg,
            given,
            "data.shuffle",
            "trainer.balance_batch",
            "actor_rollout_ref.actor.use_kl_loss",
            "actor_rollout_ref.actor.kl_loss_coef",
            "actor_rollout_ref.actor.kl_loss_type",
            "actor_rollout_ref.rollout.n",
            "critic.rollout_n",
        )
        if "trainer.logger" not in given:
            set_dotted(cfg, "trainer.logger", ["console", "tracking"])
    if at_least(version, "0.7"):
        ray_init = cfg.pop("ray_init", {"num_cpus": None})
        cfg["ray_kwargs"] = {"ray_init": {**ray_init, "timeline_json_file": None}}
        cfg["global_profiler"] = {
            "profile_continuous_steps": False,
            "save_path": "outputs/profile",
            "steps": None,
            "tool": None,
        }
        cfg["transfer_queue"] = {"enable": False}
        cfg["reward"] = {"reward_manager": get(cfg, "reward_model.reward_manager", "naive")}
        cfg["sandbox_fusion"] = {"max_concurrent": 64, "memory_limit_mb": 1024, "url": None}
        if "actor_rollout_ref.rollout.mode" not in given:
            set_dotted(cfg, "actor_rollout_ref.rollout.mode", "async")
        if "actor_rollout_ref.rollout.enforce_eager" not in given:
            set_dotted(cfg, "actor_rollout_ref.rollout.enforce_eager", False)
        set_dotted(
            cfg,
            "actor_rollout_ref.actor.optim.clip_grad",
            get(cfg, "actor_rollout_ref.actor.grad_clip", 1.0),
        )
    _family_keys(cfg, version, given)
    if at_least(version, "0.9"):
        actor = cfg["actor_rollout_ref"]["actor"]
        actor["_target_"] = "verl.workers.config.FSDPActorConfig"
        cfg["critic"]["_target_"] = "verl.workers.config.FSDPCriticConfig"
        cfg["actor_rollout_ref"]["rollout"]["_target_"] = "verl.workers.config.RolloutConfig"
        cfg["distillation"] = {"enable": False}
        cfg["skip"] = {"enable": False}
        set_dotted(cfg, "trainer.use_v1", get(cfg, "trainer.use_v1", True))


# ---- switches of the metric families verl 0.6-0.10 added (verl_metrics.md §1, §3-§5) ---------
# Each family is switched by the verl config key that makes verl log it. The simulator's runs of
# versions <= 0.9 keep all of them off unless the config sets them (so their output is unchanged);
# 0.10 runs follow verl's defaults: calculate_log_probs on, the rollout_correction block present
# (not configured), the agent-loop block present.
ROLLOUT_CORRECTION_DEFAULTS: dict[str, Any] = {
    "rollout_is": None,
    "rollout_is_threshold": 2.0,
    "rollout_rs": None,
    "rollout_rs_threshold": None,
    "bypass_mode": False,
    "loss_type": "ppo_clip",
    "rollout_is_batch_normalize": False,
}
ASYNC_TRAINING_DEFAULTS: dict[str, Any] = {  # fully_async_ppo_trainer.yaml (verl 0.9.1)
    "staleness_threshold": 0.1,
    "trigger_parameter_sync_step": 4,
    "require_batches": 1,
    "partial_rollout": True,
    "use_trainer_do_validate": False,
    "use_dynamic_resource_scheduling": False,
}
FILTER_GROUPS_DEFAULTS: dict[str, Any] = {
    "enable": False,
    "metric": "acc",
    "max_num_gen_batches": 0,
}
AGENT_DEFAULTS: dict[str, Any] = {"num_workers": 8, "default_agent_loop": "single_turn_agent"}


def _fill(cfg: dict[str, Any], prefix: str, defaults: dict[str, Any], given: set[str]) -> None:
    for key, value in defaults.items():
        dotted = f"{prefix}.{key}"
        if dotted not in given and get(cfg, dotted, _MISSING) is _MISSING:
            set_dotted(cfg, dotted, copy.deepcopy(value))


_MISSING = object()


def _family_keys(cfg: dict[str, Any], version: str, given: set[str]) -> None:
    """Complete the family blocks a config sets (and verl 0.10's defaults)."""
    rollout = "actor_rollout_ref.rollout"
    if version == "0.10":
        if f"{rollout}.calculate_log_probs" not in given:
            set_dotted(cfg, f"{rollout}.calculate_log_probs", True)
        _fill(cfg, "algorithm.rollout_correction", ROLLOUT_CORRECTION_DEFAULTS, given)
        _fill(cfg, f"{rollout}.agent", AGENT_DEFAULTS, given)
        _fill(cfg, "algorithm.filter_groups", FILTER_GROUPS_DEFAULTS, given)
    if isinstance(get(cfg, "algorithm.rollout_correction", None), dict):
        _fill(cfg, "algorithm.rollout_correction", ROLLOUT_CORRECTION_DEFAULTS, given)
    if isinstance(get(cfg, "async_training", None), dict):
        _fill(cfg, "async_training", ASYNC_TRAINING_DEFAULTS, given)
        # the recipe's own rollouter pool, beside the trainer's (fully_async_ppo_trainer.yaml)
        _fill(cfg, "rollout", {"nnodes": 1, "n_gpus_per_node": 8}, given)
    if isinstance(get(cfg, "algorithm.filter_groups", None), dict):
        _fill(cfg, "algorithm.filter_groups", FILTER_GROUPS_DEFAULTS, given)
    if isinstance(get(cfg, f"{rollout}.agent", None), dict):
        _fill(cfg, f"{rollout}.agent", AGENT_DEFAULTS, given)


def families(cfg: dict[str, Any], version: str) -> dict[str, Any]:
    """Which of the newer metric families a run of `version` with `cfg` logs.

    mismatch (0.6+, simulated from 0.7): `rollout.calculate_log_probs` → training/rollout_probs_*;
    rollout_corr: "decoupled" (`rollout_corr/*`) or "bypass" (`actor/rollout_corr/*`) when
    `algorithm.rollout_correction` sets rollout_is, rollout_rs or bypass_mode (needs mismatch);
    rollout_is: IS-weight metrics (`rollout_is` set); fully_async (0.9+): an `async_training` block
    (the fully-async recipe); dynamic_resource: its `use_dynamic_resource_scheduling`;
    filter_groups (0.9+, GRPO): `algorithm.filter_groups.enable`; agent_loop (0.9+): a
    `rollout.agent` block (agent-loop timings, response_length_non_aborted/*); staleness: V1
    staleness metrics (fully-async runs, and every 0.10 V1 run).
    """
    version = check_version(version)
    out: dict[str, Any] = {
        "mismatch": False,
        "rollout_corr": None,
        "rollout_is": False,
        "fully_async": False,
        "dynamic_resource": False,
        "filter_groups": False,
        "agent_loop": False,
        "staleness": False,
    }
    rc = get(cfg, "algorithm.rollout_correction", None)
    rc = rc if isinstance(rc, dict) else {}
    if at_least(version, "0.7") and bool(
        get(cfg, "actor_rollout_ref.rollout.calculate_log_probs", False)
    ):
        out["mismatch"] = True
        if rc.get("rollout_is") or rc.get("rollout_rs") or rc.get("bypass_mode"):
            out["rollout_corr"] = "bypass" if rc.get("bypass_mode") else "decoupled"
            out["rollout_is"] = bool(rc.get("rollout_is"))
    if at_least(version, "0.9"):
        out["fully_async"] = isinstance(get(cfg, "async_training", None), dict)
        out["dynamic_resource"] = out["fully_async"] and bool(
            get(cfg, "async_training.use_dynamic_resource_scheduling", False)
        )
        out["filter_groups"] = bool(get(cfg, "algorithm.filter_groups.enable", False))
        out["agent_loop"] = isinstance(get(cfg, "actor_rollout_ref.rollout.agent", None), dict)
        v1 = bool(get(cfg, "trainer.use_v1", True))
        out["staleness"] = out["fully_async"] or (version == "0.10" and v1)
    return out


def family_overrides(
    mismatch: bool = False,
    rollout_corr: str | None = None,
    rollout_is: str | None = "token",
    fully_async: bool = False,
    staleness_threshold: float = 0.1,
    dynamic_resource: bool = False,
    filter_groups: bool = False,
    gen_batch_size: int | None = None,
    agent_loop: bool = False,
) -> dict[str, Any]:
    """Dotted config overrides switching families on (`simulate(config=...)`).

    rollout_corr: None, "decoupled" or "bypass"; rollout_is: the IS level with rollout correction
    ("token", "sequence"; None: diagnostics only, with rejection sampling as the configured part).
    gen_batch_size: DAPO's `data.gen_batch_size`, prompts per generation batch (None: verl's
    default, the train batch size).
    """
    out: dict[str, Any] = {}
    if mismatch or rollout_corr:
        out["actor_rollout_ref.rollout.calculate_log_probs"] = True
    if rollout_corr:
        if rollout_corr not in ("decoupled", "bypass"):
            raise ValueError("rollout_corr must be None, 'decoupled' or 'bypass'")
        out["algorithm.rollout_correction.rollout_is"] = rollout_is
        if not rollout_is:
            out["algorithm.rollout_correction.rollout_rs"] = "token_k1"
            out["algorithm.rollout_correction.rollout_rs_threshold"] = 2.0
        out["algorithm.rollout_correction.bypass_mode"] = rollout_corr == "bypass"
    if fully_async:
        out["async_training.staleness_threshold"] = staleness_threshold
        out["async_training.use_dynamic_resource_scheduling"] = dynamic_resource
    if filter_groups:
        out["algorithm.filter_groups.enable"] = True
        if gen_batch_size:
            out["data.gen_batch_size"] = int(gen_batch_size)
    if agent_loop:
        out["actor_rollout_ref.rollout.agent.num_workers"] = 8
    return out
