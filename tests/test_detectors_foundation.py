"""The first detectors: non-finite-metric (LS001) and the log signatures (LS010–LS017).

Each is checked on injected cases (found, right step/line) and on healthy runs/logs (silent at
warning and above). Log text is real-shaped (Ray prefixes, RayTaskError tracebacks, ANSI codes);
it goes into Run.events directly, and through the console reader and the simulator.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
from logscope.detectors.batch_errors import (
    BatchSizeDivisibilityError,
    MaxNumBatchedTokensTooSmall,
    PromptTooLong,
)
from logscope.detectors.crash import RunCrashed
from logscope.detectors.dist_errors import NcclError
from logscope.detectors.non_finite import GradNormNotFiniteStepSkipped, NonFiniteMetric
from logscope.detectors.oom import CudaOom, HostOomWorkerKilled, VllmKvCacheNoMemory
from logscope.detectors.runtime_errors import (
    RayWorkerRegistrationFailed,
    TensorsOnDifferentDevices,
    VllmModelInspectionFailed,
)

import logscope.synthetic as syn
from logscope.exceptions import BadDetectorParameters
from logscope.ingest import load
from logscope.ingest.console import read_text
from logscope.model import ConfigSegment, severity_at_least
from tests import _foundation_logs as L

SIGNATURE_DETECTORS = [
    CudaOom,
    HostOomWorkerKilled,
    RayWorkerRegistrationFailed,
    VllmModelInspectionFailed,
    NcclError,
    BatchSizeDivisibilityError,
    GradNormNotFiniteStepSkipped,
    RunCrashed,
    VllmKvCacheNoMemory,
    PromptTooLong,
    MaxNumBatchedTokensTooSmall,
    TensorsOnDifferentDevices,
]
ALL_MINE = [NonFiniteMetric, *SIGNATURE_DETECTORS]
KV_CACHE_TEXT = (
    "(WorkerDict pid=5521) ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine.\n"
)


def run_from_log(text: str, config=None, series=None, steps=None):
    return L.make_run(series=series, steps=steps, events=L.events_from_text(text), config=config)


def only(findings, code):
    chosen = [f for f in findings if f.code == code]
    assert len(chosen) == 1, [f.code for f in findings]
    return chosen[0]


def advice_for(finding, parameter):
    matches = [a for a in finding.advice if a.parameter == parameter]
    assert matches, [a.parameter for a in finding.advice]
    return matches[0]


def line_of(text: str, needle: str) -> int:
    """1-based line number of the first line containing `needle`."""
    for i, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return i
    raise AssertionError(needle)


# ---- LS001 non-finite-metric ----------------------------------------------------------------


def test_nan_loss_persisting_to_end_is_critical_with_first_step():
    series = L.healthy_series(120)
    series["actor/pg_loss"][79:] = np.nan  # steps 80..120
    run = L.make_run(series, config=L.CONFIG_7B_8GPU)
    findings = NonFiniteMetric().detect(run)
    f = only(findings, "LS001")
    assert f.metric == "actor/pg_loss"
    assert f.step == 80 and f.end_step == 120
    assert f.evidence["count"] == 41
    assert f.evidence["last_finite_step"] == 79
    assert f.evidence["last_finite_value"] == pytest.approx(series["actor/pg_loss"][78])
    assert f.severity == "critical"
    assert "step 80" in f.message and "41" in f.message


def test_family_grouping_names_first_metric_and_lists_others():
    series = L.healthy_series(100)
    series["actor/grad_norm"][56:] = np.nan  # step 57
    series["critic/score/mean"][70:75] = np.inf
    series["critic/advantages/mean"][71:73] = -np.inf
    run = L.make_run(series)
    findings = NonFiniteMetric().detect(run)
    by_family = {f.evidence["family"]: f for f in findings}
    assert set(by_family) == {"grad-norm", "reward"}
    assert by_family["grad-norm"].step == 57
    reward = by_family["reward"]
    assert reward.metric == "critic/score/mean" and reward.step == 71
    assert reward.evidence["first_value"] == "inf"
    assert set(reward.evidence["metrics"]) == {"critic/score/mean", "critic/advantages/mean"}
    assert reward.severity == "error"  # recovered, not a loss
    assert [f.step for f in findings] == sorted(f.step for f in findings)


def test_transient_grad_norm_is_warning_and_short_loss_nan_is_error():
    series = L.healthy_series(100)
    series["actor/grad_norm"][30] = np.nan
    series["actor/pg_loss"][40:43] = np.nan
    findings = NonFiniteMetric().detect(L.make_run(series))
    by_family = {f.evidence["family"]: f for f in findings}
    assert by_family["grad-norm"].severity == "warning"
    assert by_family["grad-norm"].step == 31
    assert by_family["loss"].severity == "error"
    assert by_family["loss"].evidence["non_finite_at_end"] is False


def test_loss_nan_on_many_steps_is_critical_even_if_recovered():
    series = L.healthy_series(100)
    series["actor/pg_loss"][20:35] = np.nan
    f = NonFiniteMetric(critical_count=10).detect(L.make_run(series))[0]
    assert f.severity == "critical"
    f = NonFiniteMetric(critical_count=20).detect(L.make_run(series))[0]
    assert f.severity == "error"


def test_non_finite_advice_uses_run_config():
    series = L.healthy_series(60)
    series["actor/pg_loss"][30:] = np.nan
    f = NonFiniteMetric().detect(L.make_run(series, config=L.CONFIG_7B_8GPU))[0]
    mem = advice_for(f, "actor_rollout_ref.rollout.gpu_memory_utilization")
    # 7B on 8 GPUs: A9 says 0.3–0.4, the run has 0.8
    assert mem.current == 0.8 and mem.suggested == 0.4
    assert mem.override == "actor_rollout_ref.rollout.gpu_memory_utilization=0.4"
    lr = advice_for(f, "actor_rollout_ref.actor.optim.lr")
    assert lr.current == 1e-6 and lr.suggested == pytest.approx(5e-7)
    clip = advice_for(f, "actor_rollout_ref.actor.grad_clip")
    assert clip.current == 1.0 and clip.suggested == 0.5


def test_sft_trainer_nan_loss_is_found_with_its_own_config_keys():
    """verl's SFT trainer logs train/loss and train/grad_norm; its config is optim.lr and
    optim.clip_grad, not the actor's."""
    run = read_text(
        "".join(
            f"step:{n} - train/loss:nan - train/grad_norm:0.0 - train/lr:1e-06 - train/mfu:0.0\n"
            for n in range(1, 6)
        )
    )
    run.config_segments = [ConfigSegment(0, {"optim": {"lr": 1e-5, "clip_grad": 1.0}})]
    f = only(NonFiniteMetric().detect(run), "LS001")
    assert f.metric == "train/loss" and f.evidence["family"] == "loss"
    assert f.evidence["count"] == 5
    assert advice_for(f, "optim.lr").suggested == pytest.approx(5e-6)
    assert advice_for(f, "optim.clip_grad").suggested == 0.5
    assert not any(a.parameter.startswith("actor_rollout_ref.") for a in f.advice)
    assert "trainer.resume_from_path" not in {a.parameter for a in f.advice}  # NaN from step 1


def test_non_finite_advice_skips_gpu_memory_when_in_range_and_uses_critic_keys():
    config = {
        "actor_rollout_ref": {
            "model": {"path": "Qwen/Qwen2.5-0.5B-Instruct"},
            "rollout": {"gpu_memory_utilization": 0.6},
        },
        "critic": {"optim": {"lr": 1e-5}, "grad_clip": 0.5},
        "trainer": {"n_gpus_per_node": 2},
    }
    series = L.healthy_series(60)
    series["critic/vf_loss"] = np.full(60, 0.05)
    series["critic/vf_loss"][50:] = -np.inf
    f = only(NonFiniteMetric().detect(L.make_run(series, config=config)), "LS001")
    params = [a.parameter for a in f.advice]
    assert "actor_rollout_ref.rollout.gpu_memory_utilization" not in params  # 0.6 ≤ 0.65 (0.5B)
    assert "critic.grad_clip" not in params  # already 0.5
    lr = advice_for(f, "critic.optim.lr")
    assert lr.suggested == pytest.approx(5e-6)


def test_non_finite_advice_leads_with_resume_lr_clip_and_precision():
    """No config in the log: resume before the NaN, halve the LR, clip, check the precision;
    no gpu_memory_utilization advice (nothing shows it above the advised range)."""
    series = L.healthy_series(40)
    series["actor/pg_loss"][20:] = np.nan
    f = NonFiniteMetric().detect(L.make_run(series))[0]
    assert [a.parameter for a in f.advice] == [
        "trainer.resume_from_path",
        "actor_rollout_ref.actor.optim.lr",
        "actor_rollout_ref.actor.grad_clip",
        "actor_rollout_ref.rollout.dtype",
    ]
    assert "before step 21" in f.advice[0].suggested
    # with the config: the checkpoint folder before the first NaN, bfloat16 for float16
    config = {
        "actor_rollout_ref": {
            "actor": {"optim": {"lr": 1e-6}, "grad_clip": 1.0},
            "rollout": {"dtype": "float16", "gpu_memory_utilization": 0.4},
        },
        "trainer": {"save_freq": 8, "default_local_dir": "/ckpt/run", "n_gpus_per_node": 8},
    }
    f = NonFiniteMetric().detect(L.make_run(series, config=config))[0]
    resume = advice_for(f, "trainer.resume_from_path")
    assert resume.override == "trainer.resume_from_path=/ckpt/run/global_step_16"
    assert advice_for(f, "actor_rollout_ref.rollout.dtype").suggested == "bfloat16"
    assert "actor_rollout_ref.rollout.gpu_memory_utilization" not in [a.parameter for a in f.advice]


def test_non_finite_uses_optim_clip_grad_from_verl_08():
    series = L.healthy_series(40)
    series["actor/pg_loss"][20:] = np.nan
    run = L.make_run(series, config=L.CONFIG_7B_8GPU, meta={"verl_version": "0.9.1"})
    f = NonFiniteMetric().detect(run)[0]
    clip = advice_for(f, "actor_rollout_ref.actor.optim.clip_grad")
    assert clip.current == 1.0 and clip.suggested == 0.5


def test_non_finite_without_config_gives_rules_not_overrides():
    series = L.healthy_series(40)
    series["actor/pg_loss"][20:] = np.nan
    f = NonFiniteMetric().detect(L.make_run(series))[0]
    assert f.advice
    assert all(a.override is None and a.current is None for a in f.advice)


def test_non_finite_ignores_unwatched_metrics_and_healthy_runs():
    series = L.healthy_series(100)
    series["timing_s/gen"] = np.full(100, np.nan)
    series["response_length/clip_ratio"] = np.full(100, np.inf)
    assert NonFiniteMetric().detect(L.make_run(series)) == []
    assert NonFiniteMetric().detect(L.make_run(L.healthy_series(300, seed=3))) == []


def test_non_finite_skip_reason():
    assert NonFiniteMetric().skip_reason(L.make_run({"timing_s/gen": [1.0, 2.0]}))
    assert NonFiniteMetric().skip_reason(L.make_run(L.healthy_series(5))) is None


@pytest.mark.parametrize("bad", [-1, 1.5, "3"])
def test_non_finite_rejects_bad_parameters(bad):
    with pytest.raises(BadDetectorParameters):
        NonFiniteMetric(critical_trailing=bad)


# ---- LS010 cuda-oom ----------------------------------------------------------------------------


def test_cuda_oom_in_update_actor_with_golden_micro_batch():
    run = run_from_log(L.OOM_UPDATE_ACTOR, config=L.CONFIG_7B_8GPU)
    f = only(CudaOom().detect(run), "LS010")
    assert f.evidence["phase"] == "update-actor"
    assert f.evidence["line"] == line_of(L.OOM_UPDATE_ACTOR, "RayTaskError(OutOfMemoryError)")
    assert f.step == 57
    assert f.evidence["count"] == 2  # the RayTaskError header and torch's line
    assert f.evidence["tried_to_allocate"] == "2.31 GiB"
    assert f.evidence["gpu_capacity"] == "39.38 GiB"
    micro = advice_for(f, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    # golden formula A2: floor(24*1024 / (512 + 1024)) = 16 < the run's 32
    assert micro.current == 32 and micro.suggested == 16
    mem = advice_for(f, "actor_rollout_ref.rollout.gpu_memory_utilization")
    assert mem.suggested == 0.4
    assert "update_actor" in f.message and "line" in f.message


def test_cuda_oom_micro_batch_already_below_golden_is_halved():
    config = {**L.CONFIG_7B_8GPU}
    config["actor_rollout_ref"] = {
        **config["actor_rollout_ref"],
        "actor": {"ppo_micro_batch_size_per_gpu": 8},
    }
    f = CudaOom().detect(run_from_log(L.OOM_UPDATE_ACTOR, config=config))[0]
    micro = advice_for(f, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    assert micro.current == 8 and micro.suggested == 4


def test_cuda_oom_in_rollout_advises_memory_share_not_actor_micro_batch():
    run = run_from_log(L.OOM_ROLLOUT, config=L.CONFIG_7B_8GPU)
    f = CudaOom().detect(run)[0]
    assert f.evidence["phase"] == "rollout"
    assert f.step == 12
    assert f.evidence["gpu_capacity"] == "79.15 GiB"
    params = [a.parameter for a in f.advice]
    assert params[0] == "actor_rollout_ref.rollout.gpu_memory_utilization"
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu" not in params


def test_cuda_oom_in_ref_log_prob_names_ref_key():
    f = CudaOom().detect(run_from_log(L.OOM_REF, config=L.CONFIG_7B_8GPU))[0]
    assert f.evidence["phase"] == "ref-log-prob"
    micro = advice_for(f, "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu")
    assert micro.current == 16 and micro.suggested == 8


def test_cuda_oom_with_climbing_memory_reports_leak():
    n = 60
    series = {"actor/perf/max_memory_reserved_gb": np.linspace(45.0, 48.0, n)}
    run = run_from_log(L.OOM_UPDATE_ACTOR, config=L.CONFIG_7B_8GPU, series=series)
    f = CudaOom().detect(run)[0]
    leak = f.evidence["memory_reserved_climb"]
    assert leak["start_gb"] < 46 and leak["end_gb"] > 47
    eager = advice_for(f, "actor_rollout_ref.rollout.enforce_eager")
    assert eager.suggested is True
    flat = {"actor/perf/max_memory_reserved_gb": np.full(n, 45.0)}
    f = CudaOom().detect(run_from_log(L.OOM_UPDATE_ACTOR, config=L.CONFIG_7B_8GPU, series=flat))[0]
    assert "memory_reserved_climb" not in f.evidence


def test_cuda_oom_unknown_phase_and_no_config():
    text = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.\n"
    f = CudaOom().detect(run_from_log(text))[0]
    assert f.evidence["phase"] is None
    assert f.step is None and f.evidence["line"] == 1
    micro = advice_for(f, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    assert micro.override is None and "24·1024" in str(micro.suggested)


def test_host_oom_is_not_a_cuda_oom():
    run = run_from_log(L.HOST_OOM)
    assert CudaOom().detect(run) == []
    f = only(HostOomWorkerKilled().detect(run), "LS011")
    assert f.step == 30
    assert f.evidence["line"] == line_of(L.HOST_OOM, "killed due to memory pressure")
    assert f.evidence["workers_killed"] == 2
    assert f.evidence["node_memory_used_gb"] == 240.51
    assert f.evidence["memory_usage_threshold"] == 0.95
    assert f.evidence["count"] == 2  # raylet summary + ray.exceptions.OutOfMemoryError


def test_host_oom_advice_offload():
    config = {"actor_rollout_ref": {"actor": {"fsdp_config": {"param_offload": True}}}}
    f = HostOomWorkerKilled().detect(run_from_log(L.HOST_OOM, config=config))[0]
    off = advice_for(f, "actor_rollout_ref.actor.fsdp_config.param_offload")
    assert off.current is True and off.suggested is False
    assert off.override == "actor_rollout_ref.actor.fsdp_config.param_offload=false"


# ---- LS012–LS014 ---------------------------------------------------------------------------------


def test_ray_worker_registration_failed():
    f = only(RayWorkerRegistrationFailed().detect(run_from_log(L.RAY_REGISTER)), "LS012")
    assert f.evidence["line"] == 2 and f.evidence["end_of_file"] is True
    assert f.step is None
    assert any("ray[default]>=2.33.0" in str(a.suggested) for a in f.advice)


def test_vllm_model_inspection_failed():
    f = only(VllmModelInspectionFailed().detect(run_from_log(L.VLLM_INSPECT)), "LS013")
    assert f.evidence["architectures"] == "['Qwen2ForCausalLM']"
    assert f.evidence["line"] == 3
    assert "Qwen2ForCausalLM" in f.message


def test_nccl_watchdog_timeout_counts_repeats():
    f = only(NcclError().detect(run_from_log(L.NCCL_TIMEOUT, config=L.CONFIG_7B_8GPU)), "LS014")
    assert f.evidence["kind"] == "timeout"
    assert f.evidence["collective"] == "_ALLGATHER_BASE"
    assert f.evidence["timeout_ms"] == 600000
    assert f.evidence["count"] == 1 + 7  # second line carries [repeated 6x across cluster]
    assert f.step == 99
    assert f.evidence["cuda_oom_logged"] is False
    assert advice_for(f, "actor_rollout_ref.rollout.gpu_memory_utilization").suggested == 0.4


def test_nccl_error_notes_cuda_oom_as_root_cause():
    f = NcclError().detect(run_from_log(L.OOM_UPDATE_ACTOR + L.NCCL_ERROR))[0]
    assert f.evidence["kind"] == "error" and f.evidence["cuda_oom_logged"] is True
    assert "CUDA OOM" in f.message


# ---- LS015 batch-size-divisibility-error ------------------------------------------------------


def _divisible_after(suggested: int, n: int, unit: int) -> bool:
    return (suggested * n) % unit == 0


@pytest.mark.parametrize(
    ("message", "tbs", "n", "unit"),
    [
        (
            "AssertionError: real_train_batch_size (1020) must be divisible by minimal possible batch size (8)",
            255,
            4,
            8,
        ),
        (
            "AssertionError: real_train_batch_size (60) must be divisible by total n_gpus (8).",
            12,
            5,
            8,
        ),
        (
            "AssertionError: only support equal chunk. Got size of DataProto 1020 and chunk 8.",
            255,
            4,
            8,
        ),
        (
            "AssertionError: real_train_batch_size (700) must be divisible by minimal possible batch size (6)",
            100,
            7,
            6,
        ),
    ],
)
def test_batch_divisibility_suggests_a_train_batch_that_divides(message, tbs, n, unit):
    config = {"data": {"train_batch_size": tbs}, "actor_rollout_ref": {"rollout": {"n": n}}}
    text = f"(TaskRunner pid=1) step:0 - val-core/x/acc/mean@1:0.5\n(TaskRunner pid=1) {message}\n"
    f = only(BatchSizeDivisibilityError().detect(run_from_log(text, config=config)), "LS015")
    assert f.evidence["line"] == 2 and f.step == 0
    advice = advice_for(f, "data.train_batch_size")
    assert advice.current == tbs
    suggested = advice.suggested
    assert isinstance(suggested, int) and 0 < suggested <= max(tbs, unit)
    assert _divisible_after(suggested, n, unit)
    # the nearest such value: nothing between it and the current value works
    assert not any(_divisible_after(v, n, unit) for v in range(suggested + 1, tbs + 1))
    assert advice.override == f"data.train_batch_size={suggested}"


def test_batch_divisibility_without_config_reports_nearest_real_sizes():
    run = run_from_log(L.CONFIG_ERROR_09)
    f = BatchSizeDivisibilityError().detect(run)[0]
    assert f.evidence["real_train_batch_size"] == 1020 and f.evidence["divisor"] == 8
    assert f.evidence["nearest_real_batch_sizes"] == [1016, 1024]
    assert f.advice[0].override is None
    assert f.evidence["line"] == line_of(L.CONFIG_ERROR_09, "must be divisible")


def test_batch_train_smaller_than_mini():
    text = "ValueError: train_batch_size (128) must be >= actor.ppo_mini_batch_size (256)\n"
    f = BatchSizeDivisibilityError().detect(run_from_log(text))[0]
    assert f.evidence["check"] == "train-lt-mini"
    assert advice_for(f, "actor_rollout_ref.actor.ppo_mini_batch_size").suggested == 128
    assert advice_for(f, "data.train_batch_size").suggested == 256


def test_batch_normalized_mini_not_divisible_by_micro():
    text = (
        "(WorkerDict pid=5) AssertionError: normalized ppo_mini_batch_size 48 should be "
        "divisible by ppo_micro_batch_size_per_gpu 10\n"
    )
    f = BatchSizeDivisibilityError().detect(run_from_log(text))[0]
    micro = advice_for(f, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    assert micro.suggested == 8  # largest divisor of 48 not above 10


def test_batch_article_wording():
    config = {"data": {"train_batch_size": 100}, "actor_rollout_ref": {"rollout": {"n": 8}}}
    text = "ValueError: batch_size must be divisible by n\n"
    f = BatchSizeDivisibilityError().detect(run_from_log(text, config=config))[0]
    assert f.evidence["check"] == "article-n"
    assert advice_for(f, "data.train_batch_size").suggested == 96


# ---- LS016 grad-norm-not-finite-step-skipped -------------------------------------------------


def test_grad_norm_warning_few_is_warning():
    f = only(GradNormNotFiniteStepSkipped().detect(run_from_log(L.GRAD_NORM_FEW)), "LS016")
    assert f.severity == "warning"
    assert f.step == 10 and f.evidence["line"] == 2
    assert f.evidence["count"] == 9  # 1 + (1 + 7 repeats)
    assert f.evidence["ranks"] == [0, 1]
    assert f.evidence["distinct_steps"] == 1


def test_grad_norm_warning_many_consecutive_is_error():
    text = L.grad_norm_many(20, 24)
    f = GradNormNotFiniteStepSkipped().detect(run_from_log(text))[0]
    assert f.severity == "error"
    assert f.step == 19  # last step logged before the first warning
    assert f.evidence["longest_consecutive"] == 5
    assert f.evidence["distinct_steps"] == 5


def test_grad_norm_warning_verl_09_wording():
    text = L.grad_norm_many(30, 31, modern=True)
    f = GradNormNotFiniteStepSkipped().detect(run_from_log(text))[0]
    assert f.evidence["values"] == ["inf"] and f.evidence["ranks"] == []
    assert f.severity == "warning"
    f = GradNormNotFiniteStepSkipped(error_consecutive=2).detect(run_from_log(text))[0]
    assert f.severity == "error"


# ---- LS017 run-crashed -----------------------------------------------------------------------


def test_run_crashed_generic_exception_at_end():
    series = {"actor/pg_loss": [0.04] * 41}
    run = run_from_log(L.GENERIC_CRASH, series=series)
    f = only(RunCrashed().detect(run), "LS017")
    assert f.evidence["exception_type"] == "KeyError"
    assert f.evidence["exception_message"] == "'acc'"
    assert f.evidence["line"] == line_of(L.GENERIC_CRASH, "KeyError")
    assert f.step == 41 and f.severity == "error"


def test_run_crashed_silent_when_training_continued_names_specific_signature():
    series = {"actor/pg_loss": [0.04] * 7}
    assert RunCrashed().detect(run_from_log(L.SURVIVED_TRACEBACK, series=series)) == []
    # a specific diagnosis explains the crash: run-crashed is the verdict and names it
    f = only(RunCrashed().detect(run_from_log(L.OOM_UPDATE_ACTOR)), "LS017")
    assert f.evidence["explained_by"] == "cuda-oom" and "(see cuda-oom)" in f.message
    assert f.evidence["phase"] == "update-actor" and "after step 57" in f.message
    f = only(RunCrashed().detect(run_from_log(L.CONFIG_ERROR_09)), "LS017")
    assert f.evidence["explained_by"] == "batch-size-divisibility-error"
    assert f.evidence["exception_type"] == "AssertionError"


def test_run_crashed_keyboard_interrupt_is_warning():
    text = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nKeyboardInterrupt\n'
    f = RunCrashed().detect(run_from_log(text))[0]
    assert f.severity == "warning" and "interrupted" in f.message


# ---- healthy logs and crash-only logs -----------------------------------------------------------


@pytest.mark.parametrize("cls", ALL_MINE, ids=lambda c: c.name)
def test_healthy_log_is_silent(cls):
    run = run_from_log(L.HEALTHY_LOG, config=L.CONFIG_7B_8GPU, series=L.healthy_series(3))
    assert cls().detect(run) == []


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (L.OOM_UPDATE_ACTOR.split("\n", 2)[2], "LS010"),
        (L.HOST_OOM.split("\n", 1)[1], "LS011"),
        (L.RAY_REGISTER, "LS012"),
        (L.VLLM_INSPECT, "LS013"),
        (L.NCCL_ERROR, "LS014"),
        (L.CONFIG_ERROR_09, "LS015"),
        (L.GENERIC_CRASH.split("\n", 2)[2], "LS017"),
        ("Traceback (most recent call last):\n" + KV_CACHE_TEXT, "LS018"),
        ("RuntimeError: Prompt length 1311 is longer than 1024.\n", "LS019"),
    ],
)
def test_crash_only_log_yields_exactly_its_signature(text, code):
    """A log with no step lines still gets its diagnosis, one specific diagnosis and the
    run-crashed verdict naming it."""
    run = run_from_log(text)
    findings = [f for cls in ALL_MINE for f in cls().detect(run)]
    crash_codes = {f.code for f in findings} - {"LS016"}
    assert crash_codes == {code, "LS017"}
    assert all(severity_at_least(f.severity, "warning") for f in findings)
    verdict = only(findings, "LS017")
    named = {f.name for f in findings if f.code == code}
    assert code == "LS017" or verdict.evidence["explained_by"] in named


def test_findings_are_json_serialisable():
    import json

    text = L.OOM_UPDATE_ACTOR + L.NCCL_TIMEOUT + L.GRAD_NORM_FEW + L.HOST_OOM
    series = L.healthy_series(50)
    series["actor/pg_loss"][10:] = np.nan
    run = run_from_log(text, config=L.CONFIG_7B_8GPU, series=series)
    for cls in ALL_MINE:
        for f in cls().detect(run):
            json.dumps(f.to_dict(), allow_nan=False)


# ---- through the console reader and the simulator -------------------------------------------


def _analyze(run):
    return [f for cls in ALL_MINE for f in cls().detect(run)]


@pytest.mark.parametrize(
    ("text", "code", "step"),
    [
        (L.OOM_UPDATE_ACTOR, "LS010", 57),
        (L.HOST_OOM, "LS011", 30),
        (L.NCCL_TIMEOUT, "LS014", 99),
        (L.GRAD_NORM_FEW, "LS016", 10),
        (L.GENERIC_CRASH, "LS017", 41),
        (L.RAY_REGISTER, "LS012", None),
    ],
)
def test_signatures_through_console_reader(tmp_path, text, code, step):
    header = "".join(
        L.step_line(s, **{"actor/pg_loss": 0.01, "actor/grad_norm": 0.3}) + "\n" for s in (1, 2)
    )
    body = text if step is None else header + text
    path = tmp_path / "verl.log"
    path.write_text(body, encoding="utf-8")
    # a log holding only Ray's start-up failure has no verl line to sniff: name the reader
    runs = load(path, source=None if step is not None else "verl-console")
    assert runs
    findings = [f for f in _analyze(runs[0]) if f.code == code]
    assert len(findings) == 1, [f.code for f in _analyze(runs[0])]
    f = findings[0]
    if step is not None:
        # the reader may attach the event to the step it belongs to (last logged + 1)
        assert f.step is not None and abs(f.step - step) <= 1
    # the quoted line is in the file, on the reported line
    lines = body.splitlines()
    assert f.evidence["quote"][:40] in lines[f.evidence["line"] - 1]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (L.OOM_UPDATE_ACTOR.split("\n", 2)[2], "LS010"),
        (L.VLLM_INSPECT, "LS013"),
        (L.CONFIG_ERROR_09, "LS015"),
        (L.GENERIC_CRASH.split("\n", 2)[2], "LS017"),
    ],
)
def test_crash_only_console_log_is_read_and_diagnosed(tmp_path, text, code):
    """Acceptance: a log that only holds a crash (no step lines) reports its signature."""
    path = tmp_path / "crash.log"
    path.write_text(text, encoding="utf-8")
    run = load(path)[0]
    assert run.n_steps == 0
    codes = {f.code for f in _analyze(run)}
    assert code in codes and "LS017" in codes  # the specific diagnosis and the verdict
    assert not ({"LS010", "LS011", "LS012", "LS013", "LS014", "LS015"} - {code}) & codes


def test_healthy_console_log_is_silent(tmp_path):
    path = tmp_path / "verl.log"
    path.write_text(L.HEALTHY_LOG, encoding="utf-8")
    run = load(path)[0]
    assert [f for f in _analyze(run) if severity_at_least(f.severity, "warning")] == []


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_simulated_healthy_runs_are_silent(algorithm):
    for seed in (0, 1):
        run = syn.simulate(n_steps=150, algorithm=algorithm, seed=seed).to_run()
        loud = [f for f in _analyze(run) if severity_at_least(f.severity, "warning")]
        assert loud == [], [(f.code, f.message) for f in loud]


@pytest.mark.parametrize(
    ("kind", "code"),
    [("nan-loss", "LS001"), ("cuda-oom", "LS010"), ("grad-norm-not-finite", "LS016")],
)
def test_simulated_injections_are_found_at_their_step(kind, code):
    assert kind in syn.PATHOLOGIES
    sim = syn.simulate(n_steps=150, algorithm="grpo", seed=2, inject=[syn.Injection(kind, step=90)])
    found = [f for f in _analyze(sim.to_run()) if f.code == code]
    assert found, [(f.code, f.step) for f in _analyze(sim.to_run())]
    assert found[0].step is not None and abs(found[0].step - 90) <= 1


def test_simulated_nan_loss_through_console_log(tmp_path):
    sim = syn.simulate(
        n_steps=120, algorithm="grpo", seed=4, inject=[syn.Injection("nan-loss", step=70)]
    )
    path = tmp_path / "nan.log"
    syn.write_console_log(sim, path)
    run = load(path)[0]
    found = [f for f in NonFiniteMetric().detect(run) if f.evidence["family"] == "loss"]
    assert found and abs(found[0].step - 70) <= 1
    assert not math.isnan(found[0].evidence["count"])


def test_nan_cascade_at_one_onset_is_one_finding_led_by_the_loss():
    series = L.healthy_series(100)
    for name in ("actor/pg_loss", "actor/grad_norm", "actor/kl_loss", "actor/entropy"):
        series[name][59:] = np.nan  # step 60
    series["actor/grad_norm"][59] = np.inf
    series["actor/ppo_kl"][60:] = np.nan  # one step later: same onset
    findings = NonFiniteMetric().detect(L.make_run(series))
    assert len(findings) == 1
    f = findings[0]
    assert f.metric == "actor/pg_loss" and f.step == 60
    assert set(f.evidence["families"]) == {"loss", "grad-norm", "kl", "entropy"}
    assert f.evidence["metrics"]["actor/ppo_kl"]["first_step"] == 61
    assert f.severity == "critical"
    # a later, separate onset is its own finding
    series["critic/score/mean"][90:95] = np.nan
    assert [x.step for x in NonFiniteMetric().detect(L.make_run(series))] == [60, 91]
    assert len(NonFiniteMetric(merge_within=0).detect(L.make_run(series))) == 3


# ---- LS018–LS020: vLLM KV cache, prompt length, max_num_batched_tokens ----------------------

KV_CACHE = KV_CACHE_TEXT


def test_vllm_kv_cache_no_memory_raises_share_or_tp():
    config = {
        "actor_rollout_ref": {
            "rollout": {"gpu_memory_utilization": 0.3, "tensor_model_parallel_size": 1}
        },
        "trainer": {"n_gpus_per_node": 2},
    }
    f = only(VllmKvCacheNoMemory().detect(run_from_log(KV_CACHE, config=config)), "LS018")
    mem = advice_for(f, "actor_rollout_ref.rollout.gpu_memory_utilization")
    assert mem.current == 0.3 and mem.suggested == 0.4
    assert advice_for(f, "actor_rollout_ref.rollout.tensor_model_parallel_size").suggested == 2
    config["actor_rollout_ref"]["rollout"]["gpu_memory_utilization"] = 0.7
    f = VllmKvCacheNoMemory().detect(run_from_log(KV_CACHE, config=config))[0]
    assert advice_for(f, "actor_rollout_ref.rollout.gpu_memory_utilization").override is None
    assert CudaOom().detect(run_from_log(KV_CACHE)) == []


def test_prompt_too_long():
    text = (
        "(TaskRunner pid=1201) RuntimeError: Prompt length 1311 is longer than 1024.\n"
        "(TaskRunner pid=1201) RuntimeError: Prompt length 1500 is longer than 1024.\n"
    )
    f = only(
        PromptTooLong().detect(run_from_log(text, config={"data": {"max_prompt_length": 1024}})),
        "LS019",
    )
    assert f.evidence["prompt_length"] == 1500 and f.evidence["max_prompt_length"] == 1024
    length = advice_for(f, "data.max_prompt_length")
    assert length.current == 1024 and length.suggested == 1536  # 1500 rounded up to 64
    assert (
        advice_for(f, "data.filter_overlong_prompts").override
        == "data.filter_overlong_prompts=true"
    )


def test_max_num_batched_tokens_too_small():
    text = (
        "(WorkerDict pid=5521) ValueError: Enable chunked prefill, max_num_batched_tokens is "
        "smaller than max_model_len, please increase max_num_batched_tokens or disable chunked prefill\n"
    )
    config = {"data": {"max_prompt_length": 1024, "max_response_length": 4096}}
    f = only(MaxNumBatchedTokensTooSmall().detect(run_from_log(text, config=config)), "LS020")
    advice = advice_for(f, "actor_rollout_ref.rollout.max_num_batched_tokens")
    assert advice.suggested == 5120 and advice.current == 8192  # verl default
    verdict = RunCrashed().detect(run_from_log("Traceback (most recent call last):\n" + text))
    assert only(verdict, "LS017").evidence["explained_by"] == "max-num-batched-tokens-too-small"


def test_long_traceback_keeps_its_final_exception_line(tmp_path):
    lines = [
        L.step_line(1, **{"actor/pg_loss": 0.1}),
        "(TaskRunner pid=1) Traceback (most recent call last):",
    ]
    for i in range(80):
        lines.append(
            f'(TaskRunner pid=1)   File "/usr/lib/python3.10/site-packages/verl/deep/module_{i}.py", '
            f"line {100 + i}, in function_{i}"
        )
        lines.append(
            f"(TaskRunner pid=1)     result = call_something_else_{i}(argument_one, argument_two)"
        )
    lines.append(
        "(TaskRunner pid=1) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    )
    path = tmp_path / "long.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = load(path)[0]
    f = only(CudaOom().detect(run), "LS010")
    assert f.evidence["line"] == len(lines)


# ---- property: log-signature detectors never raise on arbitrary text ------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FRAGMENTS = [
    "Traceback (most recent call last):",
    "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_(",
    "CUDA out of memory. Tried to allocate GiB",
    "real_train_batch_size (",
    ") must be divisible by minimal possible batch size (",
    "only support equal chunk. Got size of DataProto 7 and chunk 0",
    "normalized ppo_mini_batch_size 0 should be divisible by ppo_micro_batch_size_per_gpu 0",
    "ppo_mini_batch_size (0) must be divisible by ppo_micro_batch_size (0)",
    "train_batch_size (0) must be divisible by parameter_sync_step (0)",
    "WARN: rank x grad_norm is not finite: ",
    "Prompt length 0 is longer than 0",
    "Workers (tasks / actors) killed due to memory pressure (OOM)",
    "(WorkerDict pid=1) ",
    "\x1b[36m",
    " [repeated 3x across cluster]",
    "KeyboardInterrupt",
    "ValueError: ",
]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=10_000),
            st.one_of(st.none(), st.integers(min_value=-5, max_value=500)),
            st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=40)), max_size=6),
        ),
        max_size=12,
    )
)
def test_signature_detectors_never_raise_on_arbitrary_events(raw):
    from logscope.model import Event

    events = [Event(line, hint, "x", "".join(parts)) for line, hint, parts in raw]
    config = {"data": {"train_batch_size": 0}, "actor_rollout_ref": {"rollout": {"n": 0}}}
    for cfg in (None, config, L.CONFIG_7B_8GPU):
        run = L.make_run(events=events, config=cfg)
        for cls in SIGNATURE_DETECTORS:
            for f in cls().detect(run):
                assert f.code == cls.code


# ---- LS021 and process deaths without a traceback ----------------------------------------------


def test_tensors_on_different_devices_micro_batch_vs_tp():
    text = (
        "(WorkerDict pid=3141) RuntimeError: Expected all tensors to be on the same device, but "
        "found at least two devices, cuda:0 and cpu!\n"
    )
    config = {
        "actor_rollout_ref": {
            "actor": {"ppo_micro_batch_size_per_gpu": 6},
            "rollout": {"tensor_model_parallel_size": 4},
        }
    }
    f = only(TensorsOnDifferentDevices().detect(run_from_log(text, config=config)), "LS021")
    assert f.evidence["devices"] == ["cuda:0", "cpu"]
    assert advice_for(f, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu").suggested == 4
    config["actor_rollout_ref"]["actor"]["ppo_micro_batch_size_per_gpu"] = 8
    f = TensorsOnDifferentDevices().detect(run_from_log(text, config=config))[0]
    assert f.advice[0].override is None  # already a multiple: only the rule
    verdict = RunCrashed().detect(run_from_log("Traceback (most recent call last):\n" + text))
    assert only(verdict, "LS017").evidence["explained_by"] == "tensors-on-different-devices"


@pytest.mark.parametrize(
    ("last_line", "signal"),
    [
        (
            "run_grpo.sh: line 12: 48213 Killed                  python3 -m verl.trainer.main_ppo",
            "SIGKILL",
        ),
        ("Killed", "SIGKILL"),
        ("Segmentation fault (core dumped)", "SIGSEGV"),
        ("Fatal Python error: Aborted", "SIGABRT"),
    ],
)
def test_run_killed_without_traceback(last_line, signal):
    text = (
        L.grad_norm_many(5, 5).replace("WARN: rank 0 grad_norm is not finite: nan", "ok")
        + last_line
        + "\n"
    )
    series = {"actor/pg_loss": [0.04] * 5}
    f = only(RunCrashed().detect(run_from_log(text, series=series)), "LS017")
    assert f.evidence["exception_type"] == signal
    assert f.step == 5 and f.evidence["line"] == len(text.splitlines())
    # training that went on after the line is not a crash
    later = text + L.step_line(6, **{"actor/pg_loss": 0.04}) + "\n"
    assert RunCrashed().detect(run_from_log(later, series={"actor/pg_loss": [0.04] * 6})) == []


def test_killed_inside_other_words_is_not_a_crash():
    text = "(raylet) Killed worker 12 because it was idle\n(TaskRunner pid=1) step:3 - a:1\n"
    assert RunCrashed().detect(run_from_log(text, series={"a": [1.0] * 3})) == []


# ---- live parity: a finding seen on a prefix of the run keeps its identity ----------------------


def _prefix(run, last_step: int):
    import polars as pl

    from logscope.model import Run

    return Run(
        id=run.id,
        source=run.source,
        meta=dict(run.meta),
        config_segments=list(run.config_segments),
        metrics=run.metrics.filter(pl.col("step") <= last_step),
        events=[e for e in run.events if e.step_hint is None or e.step_hint <= last_step],
    )


@pytest.mark.parametrize("kind", ["nan-loss", "grad-norm-not-finite", "cuda-oom"])
def test_findings_on_prefixes_keep_their_identity(kind):
    """tail mode re-runs detectors on the run so far: (name, metric, step) must not move."""
    run = syn.simulate(
        n_steps=120, algorithm="ppo", seed=5, inject=[syn.Injection(kind, step=70)]
    ).to_run()
    detectors = [NonFiniteMetric(), GradNormNotFiniteStepSkipped(), CudaOom()]
    final = {f.key for d in detectors for f in d.detect(run)}
    assert final
    for last in range(60, 121, 5):
        seen = {f.key for d in detectors for f in d.detect(_prefix(run, last))}
        assert seen <= final, (last, seen - final)


# ---- test hygiene: a broken project import fails, it is never skipped -------------------------

PROJECT = ("logscope", "detectors", "app")
BROAD = {"Exception", "BaseException", "ImportError", "ModuleNotFoundError"}


def _is_project(name: object) -> bool:
    return isinstance(name, str) and name.split(".")[0] in PROJECT


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _imports_project(body: list[ast.stmt]) -> bool:
    """True when `body` imports a project module, by statement or through importlib."""
    for node in (n for stmt in body for n in ast.walk(stmt)):
        if isinstance(node, ast.Import) and any(_is_project(a.name) for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and _is_project(node.module):
            return True
        if isinstance(node, ast.Call) and _call_name(node) == "import_module":
            return True
    return False


def _catches_import_errors(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(getattr(t, "id", getattr(t, "attr", "")) in BROAD for t in types)


def skip_guards(source: str) -> list[int]:
    """Lines where a test file turns a failing import of the project into a skip or a False."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _call_name(node) in {"importorskip", "find_spec"}:
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and _is_project(first.value):
                lines.append(node.lineno)
        guarded = isinstance(node, ast.Try) and _imports_project(node.body)
        if guarded and any(_catches_import_errors(h) for h in node.handlers):
            lines.append(node.lineno)
    return sorted(lines)


def test_skip_guards_are_found() -> None:
    guarded = (
        "import pytest\n"
        "syn = pytest.importorskip('logscope.synthetic')\n"
        "def ok():\n"
        "    try:\n"
        "        import logscope.ingest.console\n"
        "    except Exception:\n"
        "        return False\n"
        "try:\n"
        "    from _writers import w\n"
        "except ImportError:\n"
        "    from tests._writers import w\n"
        "tb = pytest.importorskip('tensorboard')\n"
    )
    assert skip_guards(guarded) == [2, 4]


@pytest.mark.parametrize("path", sorted(Path(__file__).parent.glob("*.py")), ids=lambda p: p.name)
def test_no_test_file_skips_a_broken_project_import(path: Path) -> None:
    assert skip_guards(path.read_text(encoding="utf-8")) == [], path
