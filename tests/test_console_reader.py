"""verl console reader: one test per variant of verl_formats.md §1, with real-shaped lines.

Every test reads through both paths — `console.read` (bulk) and `ConsoleParser` fed line by line —
and checks they agree (`read_both`).
"""

from __future__ import annotations

import gzip
import math
import pprint
import random
from pathlib import Path

import polars as pl
import pytest

import logscope.synthetic as synthetic
from logscope.exceptions import IngestError
from logscope.ingest import console, load
from logscope.ingest.console_parser import ConsoleParser
from logscope.ingest.files import content_id
from logscope.model import Run

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "excerpts"
TR = "(TaskRunner pid=2231) "
CYAN = "\x1b[36m(TaskRunner pid=2231)\x1b[0m "


# ---- helpers -----------------------------------------------------------------------------------


def run_key(run: Run) -> dict:
    """Everything a Run says, in a comparable form (metrics sorted, NaN-safe)."""
    metrics = run.metrics.sort("step", "metric").with_columns(pl.col("value").fill_nan(-12345.678))
    return {
        "metrics": metrics.to_dicts(),
        "events": [(e.line_no, e.step_hint, e.kind, e.text) for e in run.events],
        "segments": [(s.first_step, s.line_no, repr(s.config)) for s in run.config_segments],
        "stats": run.parse_stats.to_dict(),
        "meta": repr(run.meta),  # a NaN in the W&B summary is never equal to itself
    }


def incremental(path: Path, pieces: int = 3, seed: int = 0) -> Run:
    """ConsoleParser fed the file's lines in a few random-sized pieces."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    lines = data.decode("utf-8", errors="replace").split("\n")
    lines = [x + "\n" for x in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(len(lines) + 1), min(pieces, len(lines) + 1)))
    parser = ConsoleParser()
    start = 0
    for cut in [*cuts, len(lines)]:
        parser.feed(lines[start:cut], first_line_no=start + 1)
        start = cut
    return parser.to_run(ended_mid_line=not data.endswith(b"\n"), final=True)


def read_both(tmp_path: Path, text: str | bytes, name: str = "verl.log") -> Run:
    path = tmp_path / name
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    run = console.read(path)[0]
    assert run_key(incremental(path)) == run_key(run)
    return run


def value(run: Run, metric: str, step: int) -> float:
    steps, values = run.series(metric)
    assert step in steps.tolist(), (metric, step, steps)
    return float(values[steps.tolist().index(step)])


# ---- value formats -----------------------------------------------------------------------------


def test_three_decimal_era_marks_resolution(tmp_path):
    # verl 0.4 (verl#2060): `.3f`, actor/lr 1e-6 prints 0.000, global_step as 1.000
    text = (
        TR + "step:1 - global_seqlen/min:484245.000 - actor/entropy:0.323 - actor/ppo_kl:-0.000"
        " - actor/lr:0.000 - training/global_step:1.000 - training/epoch:0.000"
        " - critic/score/mean:0.558\n"
    )
    run = read_both(tmp_path, text)
    assert run.meta["value_resolution"] == 0.0005
    assert value(run, "actor/lr", 1) == 0.0
    assert value(run, "global_seqlen/min", 1) == 484245.0
    assert value(run, "critic/score/mean", 1) == 0.558
    assert run.meta["verl_version"] == "0.4"


def test_repr_era_values_are_exact_and_not_rounded(tmp_path):
    # verl ≥ 0.5 (verl#7412)
    text = (
        TR + "step:34 - global_seqlen/min:419336 - actor/pg_loss:0.042396901015308686"
        " - actor/lr:2e-06 - actor/ppo_kl:-8.163164312320433e-06 - perf/mfu/actor:0.0"
        " - training/global_step:34 - training/epoch:0 - critic/score/mean:-0.0182796623557806\n"
    )
    run = read_both(tmp_path, text)
    assert "value_resolution" not in run.meta
    assert value(run, "actor/pg_loss", 34) == 0.042396901015308686
    assert value(run, "actor/lr", 34) == 2e-06
    assert value(run, "actor/ppo_kl", 34) == -8.163164312320433e-06
    assert run.meta["verl_version"] == "0.5-0.7"


def test_numpy_wrappers_are_unwrapped(tmp_path):
    text = (
        "(TaskRunnerV1 pid=7) step:10 - actor/pg_loss:0.01 - num_turns/max:np.int32(3)"
        " - num_turns/min:np.int64(1) - val-core/openai/gsm8k/acc/mean@1:np.float64(0.508)"
        " - val-aux/x:np.float64(nan) - flag:np.True_\n"
    )
    run = read_both(tmp_path, text)
    assert value(run, "num_turns/max", 10) == 3
    assert value(run, "num_turns/min", 10) == 1
    assert value(run, "val-core/openai/gsm8k/acc/mean@1", 10) == 0.508
    assert math.isnan(value(run, "val-aux/x", 10))
    assert value(run, "flag", 10) == 1.0
    assert run.meta["verl_version"] == "0.9"


def test_nan_inf_and_booleans(tmp_path):
    text = (
        TR + "step:3 - actor/grad_norm:nan - actor/pg_loss:inf - critic/vf_loss:-inf"
        " - a/flag:True - b/flag:False - actor/kl_loss:0.5\n"
    )
    run = read_both(tmp_path, text)
    assert math.isnan(value(run, "actor/grad_norm", 3))
    assert value(run, "actor/pg_loss", 3) == math.inf
    assert value(run, "critic/vf_loss", 3) == -math.inf
    assert value(run, "a/flag", 3) == 1.0 and value(run, "b/flag", 3) == 0.0


def test_values_outside_verls_grammar(tmp_path):
    # polars would read `+1`, `NaN` or `-nan` as numbers; verl never prints them: not values
    text = TR + "step:4 - a/x:1e400 - b/x:+1 - c/x:NaN - d/x:-nan - e/x:Infinity - f/x:0.5\n"
    run = read_both(tmp_path, text)
    assert value(run, "a/x", 4) == math.inf
    assert run.metric_names == ["a/x", "f/x"]
    assert run.parse_stats.skipped_lines == 1


def test_three_decimal_nan_keeps_resolution(tmp_path):
    run = read_both(tmp_path, TR + "step:2 - actor/grad_norm:nan - actor/pg_loss:0.010\n")
    assert run.meta["value_resolution"] == 0.0005


# ---- Ray prefixes, ANSI, tqdm, dedup ------------------------------------------------------------


@pytest.mark.parametrize(
    "prefix",
    [
        "(TaskRunner pid=2231) ",
        "(TaskRunnerV1 pid=2231) ",
        "(main_task pid=28761, ip=10.0.0.2) ",
        "(main_task pid=28761) ",
        "",
        "\x1b[36m(TaskRunner pid=2231)\x1b[0m ",
        "\x1b[35m(TaskRunner pid=2231, ip=10.1.2.3)\x1b[0m ",
    ],
)
def test_ray_prefixes_and_ansi_on_step_lines(tmp_path, prefix):
    text = "".join(
        f"{prefix}step:{s} - actor/pg_loss:{0.1 * s!r} - actor/grad_norm:0.5\n" for s in (1, 2, 3)
    )
    run = read_both(tmp_path, text)
    assert run.parse_stats.step_lines == 3
    assert value(run, "actor/pg_loss", 3) == 0.1 * 3
    name = prefix.split("(")[1].split(" ")[0] if "(" in prefix else None
    if name:
        assert name in run.meta["ray_actors"]


def test_worker_raylet_and_autoscaler_lines(tmp_path):
    text = (
        TR + "step:1 - actor/pg_loss:0.1\n"
        "\x1b[36m(WorkerDict pid=3141)\x1b[0m WARN: rank 0 grad_norm is not finite: nan\n"
        "\x1b[33m(raylet)\x1b[0m [2025-05-02 10:11:12,345 E 1 1] (raylet) node_manager.cc:3049: "
        "2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed\n"
        "(raylet, ip=10.0.0.3) WARNING: 8 PYTHON worker processes have been started\n"
        "(autoscaler +1m2s) Warning: The following resource request cannot be scheduled\n"
    )
    run = read_both(tmp_path, text)
    kinds = {e.kind: e for e in run.events}
    assert kinds["grad-norm-not-finite"].text == "WARN: rank 0 grad_norm is not finite: nan"
    assert (
        kinds["grad-norm-not-finite"].line_no == 2 and kinds["grad-norm-not-finite"].step_hint == 1
    )
    assert kinds["host-oom"].line_no == 3
    assert not kinds["host-oom"].text.startswith("(raylet)")  # prefix removed
    assert {"WorkerDict", "raylet", "autoscaler"} <= set(run.meta["ray_actors"])
    assert sum(e.kind == "warning" for e in run.events) == 2


def test_tqdm_updates_joined_by_carriage_returns(tmp_path):
    text = (
        CYAN
        + "step:1 - actor/pg_loss:0.1\n"
        + CYAN
        + "\rTraining Progress:   0%|          | 0/3 [00:00<?, ?it/s]"
        "\rTraining Progress:  33%|███▎      | 1/3 [00:01<00:02,  1.00s/it]\n"
        # stdout and stderr in one file without Ray: the bar and the next step line share a line
        "\rTraining Progress:  67%|██████▋   | 2/3 [00:02<00:01,  1.00s/it]step:2 - actor/pg_loss:0.2\n"
        "step:3 - actor/pg_loss:0.3\rTraining Progress: 100%|██████████| 3/3 [00:03<00:00,  1.00s/it]\n"
    )
    run = read_both(tmp_path, text)
    assert run.steps.tolist() == [1, 2, 3]
    assert value(run, "actor/pg_loss", 2) == 0.2
    assert run.events == []
    assert run.parse_stats.skipped_lines == 0


def test_ray_repeated_suffix_and_dedup_notice(tmp_path):
    text = (
        TR + "step:10 - actor/pg_loss:0.1\n"
        "(WorkerDict pid=4411) WARN: rank 1 grad_norm is not finite: nan\x1b[32m [repeated 7x "
        "across cluster]\x1b[0m (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to "
        "disable log deduplication, or see https://docs.ray.io/en/master/ray-observability/"
        "user-guides/configure-logging.html#log-deduplication for more options.)\n"
        # a step line never repeats, but the suffix must not spoil its last value
         + TR + "step:11 - actor/pg_loss:0.2 [repeated 2x across cluster]\n"
    )
    run = read_both(tmp_path, text)
    (event,) = run.events
    assert event.text == "WARN: rank 1 grad_norm is not finite: nan [repeated 7x across cluster]"
    assert run.meta["event_counts"]["grad-norm-not-finite"] == 8
    assert value(run, "actor/pg_loss", 11) == 0.2


@pytest.mark.parametrize(
    "line, step, pairs",
    [
        # a bar glued after the first step: the parser reads the text after it as the step line
        ("step:1 - a/x:50%|x|y[z]step:2 - b/y:1.5", 2, {"b/y": 1.5}),
        ("step:3 - a/x:\x1b[32m0.5\x1b[0m - b/y:2", 3, {"a/x": 0.5, "b/y": 2.0}),  # colours
        ("step:4 - a/x:+1.5 - b/y:2", 4, {"b/y": 2.0}),  # `+1.5` is not a verl value
        ("step:5 - a|b:1.5 - c/d:2", 5, {"a|b": 1.5, "c/d": 2.0}),
    ],
)
def test_step_lines_with_odd_text_mean_what_the_parser_says(tmp_path, line, step, pairs):
    # Many clean lines around them, so the bulk path reads the file (not only the parser).
    clean = "".join(f"{CYAN}step:{s} - a/x:0.25 - b/y:{s}\n" for s in range(10, 40))
    run = read_both(tmp_path, clean + CYAN + line + "\n" + clean.replace("step:", "step:1"))
    for key, want in pairs.items():
        assert value(run, key, step) == want
    assert ("a/x" in pairs) == (step in run.series("a/x")[0].tolist())


# ---- damaged lines ----------------------------------------------------------------------------


def test_truncated_last_item_is_ignored_and_counted(tmp_path):
    text = (
        TR
        + "step:1 - actor/pg_loss:0.1 - actor/grad_norm:0.5 - actor/ent\n"  # pasted, cut
        + TR
        + "step:2 - actor/pg_loss:0.2 - actor/grad_norm:0.6"  # file ends mid-line
    )
    run = read_both(tmp_path, text)
    assert value(run, "actor/grad_norm", 1) == 0.5
    assert not run.has_metric("actor/ent")
    assert value(run, "actor/pg_loss", 2) == 0.2
    assert 2 not in run.series("actor/grad_norm")[0].tolist()  # 0.6 may be cut: dropped
    assert any("2 step line(s) ended in an incomplete item" in n for n in run.parse_stats.notes)
    assert run.parse_stats.skipped_lines == 0


def test_garbled_step_lines_are_skipped_with_examples(tmp_path):
    text = (
        TR
        + "step:1 - actor/pg_loss:0.1 - ###garbage### - actor/grad_norm:0.5\n"
        + TR
        + "step:abc - actor/pg_loss:0.1\n"
        + TR
        + "step:2 - actor/pg_loss:0.2\n"
    )
    run = read_both(tmp_path, text)
    stats = run.parse_stats
    assert stats.skipped_lines == 2
    assert [n for n, _ in stats.skipped_examples] == [1, 2]
    assert value(run, "actor/grad_norm", 1) == 0.5  # the good items of a garbled line are kept
    assert run.steps.tolist() == [1, 2]


def _wrap(line: str, width: int) -> str:
    return "\n".join(line[i : i + width] for i in range(0, len(line), width)) + "\n"


@pytest.mark.parametrize("width", [37, 80, 120, 200])
def test_lines_wrapped_by_a_terminal_are_rejoined(tmp_path, width):
    items = [
        ("actor/pg_loss", 0.042396901015308686),
        ("actor/lr", 2e-06),
        ("actor/ppo_kl", -8.163164312320433e-06),
        ("critic/score/mean", -0.0182796623557806),
        ("response_length/mean", 288.07421875),
        ("val-core/openai/gsm8k/acc/mean@1", 0.508),
        ("timing_s/step", 77.31245),
    ]
    lines = []
    for s in (5, 6):
        line = f"step:{s} - " + " - ".join(f"{k}:{v!r}" for k, v in items)
        lines.append(_wrap(line, width))
    text = TR + "Total training steps: 10\n" + "".join(lines) + TR + "Done\n"
    run = read_both(tmp_path, text)
    assert run.steps.tolist() == [5, 6]
    for k, v in items:
        assert value(run, k, 6) == v, k
    assert run.parse_stats.skipped_lines == 0


def test_a_wrap_before_a_parenthesis_is_rejoined(tmp_path):
    line = (
        "step:7 - actor/pg_loss:0.25 - val-core/acc:np.float64(0.508) - num_turns/max:np.int32(3)"
    )
    cut = line.index("(0.508)")
    run = read_both(tmp_path, TR + line[:cut] + "\n" + line[cut:] + "\n")
    assert value(run, "val-core/acc", 7) == 0.508
    assert value(run, "num_turns/max", 7) == 3


def test_a_line_that_is_not_a_fragment_is_not_joined(tmp_path):
    text = (
        "step:1 - actor/pg_loss:0.1 - actor/grad_norm:0.5\n"
        "Saving checkpoint to /ckpt/global_step_1\n"
        "step:2 - actor/pg_loss:0.2 - actor/grad_norm:0.6\n"
        "done\n"
    )
    run = read_both(tmp_path, text)
    assert value(run, "actor/grad_norm", 1) == 0.5
    assert value(run, "actor/grad_norm", 2) == 0.6
    assert any(e.kind == "checkpoint-save" for e in run.events)


@pytest.mark.parametrize(
    ("step_prefix", "item_prefix"), [("", ""), (TR, TR), (TR, ""), ("", " - ")]
)
def test_a_record_printed_one_item_per_line_after_a_bare_step(tmp_path, step_prefix, item_prefix):
    # verl#2535 shape: `step:2 ` alone, then each `key:value ` on a line of its own
    lines = []
    for step, grad in ((1, 0.4), (2, 127.3)):
        lines.append(f"{step_prefix}step:{step} ")
        lines += [
            f"{item_prefix}actor/entropy:0.866{step} ",
            f"{item_prefix}actor/grad_norm:{grad} ",
        ]
        lines.append(f"{item_prefix}critic/score/mean:0.{step} ")
    lines += ["Saving checkpoint to /ckpt/global_step_2", "actor/entropy:9.9"]
    run = read_both(tmp_path, "\n".join(lines) + "\n")
    assert run.steps.tolist() == [1, 2]
    assert value(run, "actor/grad_norm", 2) == 127.3
    assert value(run, "actor/entropy", 1) == 0.8661
    assert value(run, "critic/score/mean", 2) == 0.2
    # an item line that does not follow the record is not taken into it
    assert value(run, "actor/entropy", 2) == 0.8662


def test_items_after_a_step_line_with_items_are_not_taken_one_per_line(tmp_path):
    text = "step:1 - actor/pg_loss:0.1\nactor/grad_norm:0.5\n"
    run = read_both(tmp_path, text)
    assert "actor/grad_norm" not in run.metrics.get_column("metric").to_list()


def test_undecodable_bytes_and_nul_are_counted_not_fatal(tmp_path):
    data = (
        TR.encode() + b"step:1 - actor/pg_loss:0.1\n"
        b"\xff\xfe garbage \x00\x00\x00\n" + TR.encode() + b"step:2 - actor/pg_loss:0.2\n"
    )
    run = read_both(tmp_path, data)
    assert run.steps.tolist() == [1, 2]
    notes = " ".join(run.parse_stats.notes)
    assert "undecodable" in notes and "NUL" in notes


# ---- step semantics ---------------------------------------------------------------------------


def test_step0_validation_only_line(tmp_path):
    text = (
        TR + "step:0 - val-aux/openai/gsm8k/reward/mean@1:0.565 - "
        "val-aux/openai/gsm8k/score/mean@1:0.565 - val-core/openai/gsm8k/acc/mean@1:0.508\n"
        + TR
        + "step:1 - actor/pg_loss:0.012 - actor/entropy:0.600 - training/global_step:1.000\n"
    )
    run = read_both(tmp_path, text)
    assert value(run, "val-core/openai/gsm8k/acc/mean@1", 0) == 0.508
    assert run.series("actor/pg_loss")[0].tolist() == [1]
    assert run.meta["verl_version"] == "0.4"  # .3f + val-core; step 0 is not a training step


def test_validation_metrics_merged_into_a_step_line(tmp_path):
    text = "".join(
        TR
        + f"step:{s} - actor/pg_loss:0.01"
        + (" - val-core/openai/gsm8k/acc/mean@1:0.61 - timing_s/testing:19.1" if s == 10 else "")
        + f" - training/global_step:{s} - critic/score/mean:0.5\n"
        for s in (9, 10, 11)
    )
    run = read_both(tmp_path, text)
    assert run.series("val-core/openai/gsm8k/acc/mean@1")[0].tolist() == [10]
    assert value(run, "critic/score/mean", 10) == 0.5


def test_verl_01_trains_from_step_0(tmp_path):
    run = read_both(tmp_path, (FIXTURES / "verl_0.1.log").read_text())
    assert run.meta["verl_version"] == "0.1"
    assert run.steps.tolist()[0] == 0
    assert value(run, "actor/lr(1e-4)", 0) == 0.01
    assert value(run, "val/test_score/openai/gsm8k", 2) == 0.281
    assert run.meta["value_resolution"] == 0.0005


# ---- the config dump --------------------------------------------------------------------------


def config_091() -> dict:
    """A realistic verl 0.9.1-like resolved config (long strings, lists, None, floats, nesting)."""
    checkpoint = {"_target_": "verl.trainer.config.CheckpointConfig", "async_save": False,
                  "load_contents": ["model", "optimizer", "extra"],
                  "save_contents": ["model", "optimizer", "extra"]}  # fmt: skip
    optim = {"_target_": "verl.workers.config.FSDPOptimizerConfig", "betas": [0.9, 0.999],
             "clip_grad": 1.0, "lr": 1e-06, "lr_scheduler_type": "constant",
             "lr_warmup_steps": -1, "lr_warmup_steps_ratio": 0.0, "min_lr_ratio": 0.0,
             "num_cycles": 0.5, "optimizer": "AdamW", "optimizer_impl": "torch.optim",
             "override_optimizer_config": None, "total_training_steps": -1,
             "warmup_style": None, "weight_decay": 0.01}  # fmt: skip
    actor = {"_target_": "verl.workers.config.FSDPActorConfig", "checkpoint": checkpoint,
             "clip_ratio": 0.2, "clip_ratio_c": 3.0, "clip_ratio_high": 0.28,
             "clip_ratio_low": 0.2, "entropy_coeff": 0, "grad_clip": 1.0,
             "kl_loss_coef": 0.001, "kl_loss_type": "low_var_kl", "loss_agg_mode": "token-mean",
             "optim": optim, "ppo_epochs": 1, "ppo_max_token_len_per_gpu": 16384,
             "ppo_micro_batch_size": None, "ppo_micro_batch_size_per_gpu": 4,
             "ppo_mini_batch_size": 256, "shuffle": False, "strategy": "fsdp",
             "use_dynamic_bsz": False, "use_kl_loss": True, "use_torch_compile": True,
             "fsdp_config": {"_target_": "verl.workers.config.FSDPEngineConfig",
                             "forward_prefetch": False, "fsdp_size": -1, "offload_policy": False,
                             "optimizer_offload": False, "param_offload": False,
                             "reshard_after_forward": True, "wrap_policy": {"min_num_params": 0}},
             "profiler": {"_target_": "verl.utils.profiler.ProfilerConfig", "all_ranks": False,
                          "enable": False, "ranks": [], "save_path": "outputs/profile",
                          "tool": None, "tool_config": {"nsys": {"discrete": False}}}}  # fmt: skip
    rollout = {"_target_": "verl.workers.config.RolloutConfig", "calculate_log_probs": False,
               "dtype": "bfloat16", "enforce_eager": False, "free_cache_engine": True,
               "gpu_memory_utilization": 0.4, "ignore_eos": False, "load_format": "dummy",
               "log_prob_micro_batch_size_per_gpu": 16, "max_model_len": None,
               "max_num_batched_tokens": 8192, "mode": "async", "n": 8, "name": "vllm",
               "prompt_length": 512, "response_length": 1024, "temperature": 1.0, "top_k": -1,
               "top_p": 1, "tensor_model_parallel_size": 2,
               "engine_kwargs": {"sglang": {}, "vllm": {"swap_space": None}},
               "val_kwargs": {"do_sample": False, "n": 1, "temperature": 0, "top_k": -1, "top_p": 1.0},
               "agent": {"agent_loop_config_path": None, "default_agent_loop": "single_turn_agent",
                         "num_workers": 8,
                         "custom_async_server": {"name": None, "path": None}}}  # fmt: skip
    return {
        "actor_rollout_ref": {
            "actor": actor,
            "hybrid_engine": True,
            "model": {
                "_target_": "verl.workers.config.HFModelConfig",
                "custom_chat_template": None,
                "external_lib": None,
                "override_config": {},
                "path": "/mnt/shared/models/Qwen/Qwen2.5-7B-Instruct-a-rather-long-directory-name",
                "target_modules": "all-linear",
                "use_remove_padding": True,
            },
            "ref": {"log_prob_micro_batch_size_per_gpu": 16, "strategy": "fsdp"},
            "rollout": rollout,
        },
        "algorithm": {
            "_target_": "verl.trainer.config.AlgoConfig",
            "adv_estimator": "grpo",
            "gamma": 1.0,
            "kl_ctrl": {"horizon": 10000, "kl_coef": 0.001, "target_kl": 0.1, "type": "fixed"},
            "lam": 1.0,
            "norm_adv_by_std_in_grpo": True,
            "use_kl_in_reward": False,
        },
        "critic": {"enable": None, "optim": {"lr": 1e-05}, "ppo_micro_batch_size_per_gpu": None},
        "custom_reward_function": {"name": "compute_score", "path": None},
        "data": {
            "max_prompt_length": 512,
            "max_response_length": 1024,
            "prompt_key": "prompt",
            "train_batch_size": 1024,
            "train_files": ["/data/gsm8k/train.parquet", "/data/math/train.parquet"],
            "truncation": "error",
            "val_files": "/data/gsm8k/test.parquet",
            "tokenizer": None,
            "filter_overlong_prompts": True,
            "dataloader_num_workers": 8,
        },
        "distillation": {"enable": False},
        "ray_kwargs": {"ray_init": {"num_cpus": None}, "timeline_json_file": None},
        "reward_model": {"enable": False, "reward_manager": "naive"},
        "skip": {"enable": False},
        "trainer": {
            "balance_batch": True,
            "critic_warmup": 0,
            "default_local_dir": "checkpoints/verl_grpo_example_gsm8k/qwen2_7b_function_rm_with_a_long_name",
            "experiment_name": "qwen2_7b_function_rm",
            "logger": ["console", "wandb"],
            "n_gpus_per_node": 8,
            "nnodes": 1,
            "project_name": "verl_grpo_example_gsm8k",
            "resume_mode": "auto",
            "save_freq": 20,
            "test_freq": 5,
            "total_epochs": 15,
            "total_training_steps": None,
            "use_v1": True,
            "val_before_train": True,
            "rollout_data_dir": None,
            "ray_wait_register_center_timeout": 300,
            "note": "a long free-text note that pprint has to split into implicitly "
            "concatenated chunks because it is much wider than eighty columns, with 'quotes'",
        },
    }


def dump_lines(config: dict, prefix: str) -> str:
    return "".join(prefix + line + "\n" for line in pprint.pformat(config).splitlines())


def test_config_dump_091_parses_back_equal(tmp_path):
    config = config_091()
    dumped = pprint.pformat(config)
    assert "('" in dumped or "\n" in dumped  # wrapped at 80 columns
    text = (
        dump_lines(config, "\x1b[36m(TaskRunnerV1 pid=7777)\x1b[0m ")
        + "(TaskRunnerV1 pid=7777) step:1 - actor/pg_loss:0.1\n"
    )
    run = read_both(tmp_path, text)
    (segment,) = run.config_segments
    assert segment.config == config
    assert segment.first_step == 1 and segment.line_no == 1
    assert run.meta["algorithm"] == "grpo"
    assert run.meta["project"] == "verl_grpo_example_gsm8k"
    assert run.meta["experiment"] == "qwen2_7b_function_rm"
    assert run.config_value("actor_rollout_ref.actor.optim.lr") == 1e-06


def test_config_dump_interleaved_with_other_actors_and_inf(tmp_path):
    config = {"actor_rollout_ref": {"actor": {"clip_ratio_c": float("inf"), "lr": 1e-06}},
              "trainer": {"project_name": "p", "logger": ["console"]}}  # fmt: skip
    lines = [TR + x + "\n" for x in pprint.pformat(config, width=30).splitlines()]
    lines.insert(2, "(WorkerDict pid=1) WARNING: something while the config prints\n")
    run = read_both(tmp_path, "".join(lines) + TR + "step:1 - actor/pg_loss:0.1\n")
    assert run.config_segments[0].config == config
    assert [e.kind for e in run.events] == ["warning"]


def test_a_cut_off_config_dump_does_not_swallow_what_follows(tmp_path):
    text = (
        TR
        + "{'actor_rollout_ref': {'actor': {'clip_ratio': 0.2,\n"
        + TR
        + "                                 'entropy_coeff': 0,\n"
        + TR
        + "Total training steps: 12\n"
        + TR
        + "step:1 - actor/pg_loss:0.1\n"
        + TR
        + "WARNING: something\n"
    )
    run = read_both(tmp_path, text)
    assert run.config_segments == []
    assert [e.kind for e in run.events] == [
        "config-dump-unparsed",
        "total-training-steps",
        "warning",
    ]
    assert run.meta["total_training_steps"] == 12


def test_restart_from_checkpoint_gives_two_segments_latest_values_win(tmp_path):
    c1 = {"algorithm": {"adv_estimator": "gae"}, "trainer": {"resume_mode": "disable"}}
    c2 = {"algorithm": {"adv_estimator": "gae"}, "trainer": {"resume_mode": "auto"}}
    text = (
        dump_lines(c1, TR)
        + "".join(
            TR + f"step:{s} - actor/pg_loss:{s / 10!r} - critic/vf_loss:1.0\n" for s in range(1, 6)
        )
        + "(raylet) node_manager.cc: 1 Workers (tasks / actors) killed due to memory pressure (OOM)\n"
        + dump_lines(c2, TR)
        + TR
        + "Load from checkpoint folder: /ckpt/global_step_3\n"
        + "".join(TR + f"step:{s} - actor/pg_loss:{s / 100!r}\n" for s in range(4, 8))
    )
    run = read_both(tmp_path, text)
    assert [s.first_step for s in run.config_segments] == [1, 4]
    assert run.config(2)["trainer"]["resume_mode"] == "disable"
    assert run.config(6)["trainer"]["resume_mode"] == "auto"
    assert value(run, "actor/pg_loss", 4) == 0.04  # logged again after the restart
    assert value(run, "actor/pg_loss", 3) == 0.3
    assert value(run, "critic/vf_loss", 5) == 1.0  # only logged before the restart
    assert run.metrics.group_by("step", "metric").len().get_column("len").max() == 1
    kinds = [e.kind for e in run.events]
    assert "restart" in kinds and "checkpoint-load" in kinds and "host-oom" in kinds


def test_restart_fixture_08(tmp_path):
    run = read_both(tmp_path, (FIXTURES / "verl_0.8.log").read_text())
    assert [s.first_step for s in run.config_segments] == [1, 3]
    assert value(run, "critic/vf_loss", 3) == 0.81
    assert run.meta["verl_version"] == "0.8"
    assert run.meta["algorithm"] == "ppo"


# ---- events -----------------------------------------------------------------------------------


def test_traceback_block_keeps_frames_and_final_exception(tmp_path):
    run = read_both(tmp_path, (FIXTURES / "verl_0.5-0.7.log").read_text())
    tracebacks = [e for e in run.events if e.kind == "traceback"]
    assert len(tracebacks) == 1
    tb = tracebacks[0].text.splitlines()
    assert tb[0].startswith("Traceback (most recent call last)")
    assert tb[-1].startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert any("RayTaskError(OutOfMemoryError)" in line for line in tb)
    assert "\x1b" not in tracebacks[0].text and "(TaskRunner" not in tracebacks[0].text
    assert tracebacks[0].step_hint == 3
    # the event's lines are the file's lines from line_no on
    lines = (FIXTURES / "verl_0.5-0.7.log").read_text().splitlines()
    for offset, text in enumerate(tb):
        assert text in console.vt.strip_ansi(lines[tracebacks[0].line_no - 1 + offset])


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("(WorkerDict pid=1) WARN: grad_norm is not finite: inf", "grad-norm-not-finite"),
        (
            "(WorkerDict pid=1) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB",
            "cuda-oom",
        ),
        (
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
            "host-oom",
        ),
        (
            "[2025 E 1 1] core_worker.cc:499: Failed to register worker 01 to Raylet. IOError: End of file",
            "ray-error",
        ),
        (
            "(WorkerDict pid=1) ValueError: Model architectures ['Qwen2ForCausalLM'] failed to be inspected.",
            "vllm-error",
        ),
        (
            "(WorkerDict pid=1) [rank3]:[E502] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5)",
            "nccl-error",
        ),
        (
            "AssertionError: real_train_batch_size (1020) must be divisible by minimal possible batch size (8)",
            "config-error",
        ),
        ("(TaskRunner pid=1) Total training steps: 435", "total-training-steps"),
        ("(TaskRunner pid=1) Load from checkpoint folder: /ckpt/global_step_20", "checkpoint-load"),
        (
            "(TaskRunner pid=1) Initial validation metrics: {'val-core/x': 0.5}",
            "validation-metrics",
        ),
        ("(TaskRunner pid=1) 'Final validation metrics: None'", "validation-metrics"),
        ("(TaskRunner pid=1) WARNING: val_batch_size is deprecated.", "warning"),
        ("(TaskRunner pid=1) Using dataset class: RLHFDataset", None),
        ("WARNING:2026-01-29 10:02:03,112:rollout is slow", "warning"),
        ("ERROR:2026-01-29 10:02:03,112:reward worker gone", "error"),
        ("INFO:2026-01-29 10:02:03,112:Checkpoint saved", None),
    ],
)
def test_event_kinds(tmp_path, line, kind):
    run = read_both(tmp_path, TR + "step:7 - actor/pg_loss:0.1\n" + line + "\n")
    kinds = [(e.kind, e.line_no, e.step_hint) for e in run.events]
    assert kinds == ([(kind, 2, 7)] if kind else [])
    if kind == "total-training-steps":
        assert run.meta["total_training_steps"] == 435


def test_logger_lines_of_verl_09(tmp_path):
    run = read_both(tmp_path, (FIXTURES / "verl_0.9.log").read_text())
    assert run.meta["total_training_steps"] == 435
    assert run.meta["verl_version"] == "0.9"
    assert value(run, "val-aux/num_turns/max", 0) == 2
    assert value(run, "num_turns/max", 2) == 3
    assert any(e.kind == "grad-norm-not-finite" for e in run.events)


def test_events_stay_bounded(tmp_path, monkeypatch):
    from logscope.ingest import console_parser

    monkeypatch.setattr(console_parser, "PER_SIGNATURE", 50)
    text = (
        TR
        + "step:1 - actor/pg_loss:0.1\n"
        + "".join(
            f"(WorkerDict pid=1) WARN: rank {i % 8} grad_norm is not finite: nan\n"
            for i in range(3000)
        )
    )
    run = read_both(tmp_path, text)
    assert len(run.events) == 50
    assert run.meta["event_counts"]["grad-norm-not-finite"] == 3000
    assert any("2950 more 'grad-norm-not-finite'" in n for n in run.parse_stats.notes)


# ---- files, sniffing, errors ------------------------------------------------------------------


def test_gzip_input_reads_like_plain(tmp_path):
    text = (FIXTURES / "verl_0.5-0.7.log").read_bytes()
    plain = tmp_path / "a.log"
    plain.write_bytes(text)
    packed = tmp_path / "a.log.gz"
    packed.write_bytes(gzip.compress(text))
    a, b = console.read(plain)[0], console.read(packed)[0]
    assert run_key(a) == run_key(b)
    assert run_key(incremental(packed)) == run_key(b)
    assert b.id == content_id(packed) != a.id == content_id(plain)
    assert console.sniff(packed)


def test_truncated_gzip_reads_what_decoded(tmp_path):
    text = "".join(TR + f"step:{s} - actor/pg_loss:{s!r}\n" for s in range(1, 2000)).encode()
    packed = gzip.compress(text)
    path = tmp_path / "cut.log.gz"
    path.write_bytes(packed[: len(packed) // 2])
    run = console.read(path)[0]
    assert 0 < run.n_steps < 1999
    assert any("gzip" in n for n in run.parse_stats.notes)


def test_small_chunks_give_the_same_run(tmp_path, monkeypatch):
    path = tmp_path / "v.log"
    text = (
        (FIXTURES / "verl_0.8.log").read_text()
        + _wrap("step:9 - " + " - ".join(f"k{i}/x:{i / 7!r}" for i in range(30)), 64)
        + (FIXTURES / "verl_0.5-0.7.log").read_text()
    )
    path.write_text(text)
    whole = console.read(path)[0]
    monkeypatch.setattr(console, "CHUNK_BYTES", 517)
    assert run_key(console.read(path)[0]) == run_key(whole)
    assert run_key(incremental(path, pieces=7)) == run_key(whole)


def test_fixtures_read_the_same_both_ways(tmp_path):
    for path in sorted(FIXTURES.glob("*.log")):
        run = console.read(path)[0]
        assert run_key(incremental(path, pieces=4, seed=len(path.name))) == run_key(run), path
        assert run.parse_stats.skipped_lines == 0, path


@pytest.mark.parametrize(
    ("name", "version", "algorithm"),
    [
        ("verl_0.1.log", "0.1", "ppo"),
        ("verl_0.2-0.3.log", "0.2-0.3", "grpo"),
        ("verl_0.4.log", "0.4", "grpo"),
        ("verl_0.5-0.7.log", "0.5-0.7", "grpo"),
        ("verl_0.8.log", "0.8", "ppo"),
        ("verl_0.9.log", "0.9", "grpo"),
    ],
)
def test_version_and_algorithm_guess(name, version, algorithm):
    run = console.read(FIXTURES / name)[0]
    assert run.meta["verl_version"] == version
    assert run.meta["algorithm"] == algorithm
    assert run.meta["project"] == "verl_examples"
    assert (run.meta.get("value_resolution") == 0.0005) == (version in ("0.1", "0.2-0.3", "0.4"))


def test_algorithm_from_metrics_without_config(tmp_path):
    ppo = read_both(tmp_path, "step:1 - critic/vf_loss:0.3 - actor/pg_loss:0.1\n", "ppo.log")
    grpo = read_both(tmp_path, "step:1 - actor/pg_loss:0.1\n", "grpo.log")
    assert (ppo.meta["algorithm"], grpo.meta["algorithm"]) == ("ppo", "grpo")
    assert ppo.meta["algorithm_source"] == "metrics"


def test_crash_only_log_is_accepted(tmp_path):
    text = (
        "2025-03-01 12:00:00,001\tINFO worker.py:1841 -- Started a local Ray instance.\n"
        "Traceback (most recent call last):\n"
        '  File "/verl/trainer/main_ppo.py", line 64, in main\n'
        "    ray.get(runner.run.remote(config))\n"
        "ray.exceptions.RayTaskError(AssertionError): ray::TaskRunner.run() (pid=1, ip=10.0.0.1)\n"
        "AssertionError: real_train_batch_size (1020) must be divisible by total n_gpus (8).\n"
    )
    path = tmp_path / "crash.log"
    path.write_text(text)
    assert console.sniff(path)
    run = read_both(tmp_path, text, "crash.log")
    assert run.n_steps == 0
    (tb,) = run.events
    assert tb.kind == "traceback" and tb.step_hint is None
    assert tb.text.splitlines()[-1].startswith("AssertionError: real_train_batch_size")
    assert load(path)[0].events == run.events


def test_text_without_verl_output_is_read_and_says_so(tmp_path):
    """The console reader is the fallback for any text: nothing verl in it is said, not refused."""
    path = tmp_path / "notes.txt"
    path.write_text("Dear diary,\ntoday I trained nothing.\n" * 50)
    assert console.sniff(path)
    (run,) = console.read(path)
    assert run.n_steps == 0 and run.events == []
    assert run.parse_stats.notes == ["no verl step lines or errors found in 100 lines"]


def test_a_generic_application_log_keeps_its_errors(tmp_path):
    path = tmp_path / "app.log"
    path.write_text("INFO starting\nWARNING: disk almost full\nERROR: request failed\n")
    (run,) = console.read(path)
    assert [e.kind for e in run.events] == ["warning", "error"]
    assert not any("no verl" in n for n in run.parse_stats.notes)


def test_binary_data_forced_on_the_console_reader_is_refused(tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(random.Random(1).randbytes(50_000))
    with pytest.raises(IngestError, match="binary data, not text"):
        console.read(path)


@pytest.mark.parametrize(
    "line",
    [
        "step:1 - actor/pg_loss:0.1",
        "\x1b[36m(AgentLoopWorker pid=9)\x1b[0m step:1 - actor/pg_loss:0.1",
        "\rTraining Progress:  50%|█  | 1/2 [00:01<00:01,  1.00s/it]step:1 - actor/pg_loss:0.1",
    ],
)
def test_sniff_finds_step_lines(tmp_path, line):
    path = tmp_path / "x.out"
    path.write_text("some preamble\n" * 20 + line + "\n")
    assert console.sniff(path)


def test_binary_file_is_not_sniffed(tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(random.Random(1).randbytes(50_000))
    assert not console.sniff(path)
    assert not console.sniff(tmp_path)  # a directory


def test_progress_is_reported_and_ends_at_the_total(tmp_path, monkeypatch):
    monkeypatch.setattr(console, "CHUNK_BYTES", 4096)
    path = tmp_path / "p.log"
    path.write_text("".join(TR + f"step:{s} - actor/pg_loss:{s!r}\n" for s in range(1, 1000)))
    calls = []
    console.read(path, progress=lambda done, total: calls.append((done, total)))
    assert len(calls) > 3
    assert calls[-1] == (path.stat().st_size, path.stat().st_size)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_run_id_is_the_content_hash(tmp_path):
    path = tmp_path / "a.log"
    path.write_text(TR + "step:1 - actor/pg_loss:0.1\n")
    run = console.read(path)[0]
    assert run.id == content_id(path) and len(run.id) == 16
    assert run.source.kind == "verl-console" and run.source.path == str(path)
    path.write_text(TR + "step:1 - actor/pg_loss:0.2\n")
    assert console.read(path)[0].id != run.id


def test_tailing_snapshot_does_not_disturb_the_parser(tmp_path):
    parser = ConsoleParser()
    line = "step:3 - " + " - ".join(f"a{i}/b:{i}.5" for i in range(12))
    head, tail = line[:50], line[50:]
    parser.feed([TR + "step:1 - actor/pg_loss:0.1\n", head + "\n"])
    early = parser.to_run()
    assert 1 in early.steps.tolist()
    parser.feed([tail + "\n"])
    run = parser.to_run(final=True)
    assert value(run, "a11/b", 3) == 11.5


def test_read_text_helper():
    run = console.read_text(TR + "step:1 - actor/pg_loss:0.1\n")
    assert value(run, "actor/pg_loss", 1) == 0.1


# ---- simulated logs (logscope.synthetic) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "algorithm", "ansi", "inject"),
    [
        ("0.1", "ppo", False, None),
        ("0.3", "grpo", True, "grad-norm-not-finite"),
        ("0.4", "grpo", False, "kl-coef-changed-midrun"),
        ("0.5", "ppo", True, "cuda-oom"),
        ("0.8", "grpo", False, "nan-loss"),
        ("0.9", "grpo", True, None),
    ],
)
def test_simulated_logs_read_back(tmp_path, version, algorithm, ansi, inject):
    injections = [synthetic.Injection(inject, step=40)] if inject else []
    sim = synthetic.simulate(
        n_steps=60, algorithm=algorithm, seed=3, version=version, inject=injections
    )
    path = synthetic.write_console_log(sim, tmp_path / "sim.log", ansi=ansi)
    run = console.read(path)[0]
    assert run_key(incremental(path, pieces=5)) == run_key(run)
    assert run.parse_stats.skipped_lines == 0
    expected = sim.to_run()
    assert len(run.config_segments) == len(expected.config_segments)
    assert run.config_segments[0].config == expected.config_segments[0].config
    want = expected.metrics.select("step", "metric", "value")
    got = run.metrics.select("step", "metric", "value")
    joined = want.join(got, on=["step", "metric"], how="left", suffix="_read")
    assert joined.get_column("value_read").null_count() == 0  # every simulated value was read
    tol = 5e-4 if version in ("0.1", "0.3", "0.4") else 1e-12
    diff = joined.select(
        ((pl.col("value") - pl.col("value_read")).abs() <= tol + 1e-9 * pl.col("value").abs())
        | (pl.col("value").is_nan() & pl.col("value_read").is_nan())
        | (pl.col("value") == pl.col("value_read"))
    ).to_series()
    assert diff.all(), joined.filter(~diff).head()


def test_line_by_line_fallback_reads_the_same(tmp_path, monkeypatch):
    path = FIXTURES / "verl_0.5-0.7.log"
    bulk = console.read(path)[0]

    def broken(*args, **kwargs):
        raise pl.exceptions.ComputeError("simulated polars failure")

    monkeypatch.setattr(console, "_candidates", broken)
    fallback = console.read(path)[0]
    assert fallback.parse_stats.notes[-1].startswith("bulk reader failed (ComputeError)")
    fallback.parse_stats.notes.pop()
    assert run_key(fallback) == run_key(bulk)
    assert fallback.id == bulk.id


def test_parser_compacts_rows_for_long_tails(tmp_path, monkeypatch):
    from logscope.ingest import console_parser

    monkeypatch.setattr(console_parser, "COMPACT_ROWS", 10)
    text = "".join(TR + f"step:{s} - a/x:{s!r} - b/y:{-s!r} - c/z:0.5\n" for s in range(1, 40))
    run = read_both(tmp_path, text)
    assert run.metrics.height == 39 * 3
    assert value(run, "b/y", 39) == -39


def test_a_partial_run_taken_again_gives_the_same_step_hints():
    """`tail` takes the run of a growing log many times: renumbering steps that lost their
    `step:N` must not shift the parser's own events again on every call (hints drifted 8, 15,
    22 …)."""
    parser = ConsoleParser()
    parser.feed(
        [
            "actor/pg_loss:0.1 - actor/kl:0.2 - critic/x:0.3\n",
            "WARNING: something bad happened here\n",
            "actor/pg_loss:0.1 - actor/kl:0.2 - critic/x:0.3\n",
            "step:10 - actor/pg_loss:0.1\n",
        ]
    )
    hints = [[e.step_hint for e in parser.to_run().events] for _ in range(3)]
    final = [e.step_hint for e in parser.to_run(final=True).events]
    assert hints[0] == hints[1] == hints[2] == final


def test_a_progress_bar_alone_says_how_far_training_got(tmp_path):
    bar = "Training Progress:   0%|          | 0/125 [04:45<?, ?it/s]"
    run = read_both(tmp_path, f"{TR}{bar}\n")
    assert run.steps.tolist() == []
    (note,) = [n for n in run.parse_stats.notes if "progress bar" in n]
    assert "0 of 125" in note and "04:45" in note and "inside step 1" in note
    # with a step line read, the bar adds nothing
    run = read_both(tmp_path, f"{TR}{bar}\n{TR}step:1 - actor/pg_loss:0.1\n", name="b.log")
    assert not [n for n in run.parse_stats.notes if "progress bar" in n]
