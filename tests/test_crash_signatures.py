"""Crash signatures in made-up (real-shaped) log text: the run-crashed verdict with its phase and
innermost cause, the specific diagnoses (cuda-oom, ray-actor-died, vllm-error,
hydra-config-error, …), normal shutdown, nested RayTaskError chains and cut-off text.

Runs are built from text with the console reader and analysed with the whole pipeline.
"""

from __future__ import annotations

import pytest
from logscope.detectors._crash_story import crash_story
from logscope.detectors._signatures import phase_at, phase_of_call
from logscope.detectors.hydra_errors import closest_key

from logscope.analyze import analyze_run
from logscope.ingest.console import read_text
from logscope.ingest.verl_events import classify
from logscope.model import ConfigSegment, severity_at_least

W = "(WorkerDict pid=3141)"
T = "(TaskRunner pid=2231)"
HEADER = "(pid=3141, ip=10.0.0.2, actor_id=7d1c0f6b, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f2c>)"


def steps(*numbers: int) -> str:
    return "".join(f"{T} step:{n} - actor/pg_loss:0.04 - actor/grad_norm:0.31\n" for n in numbers)


def run_of(text: str, config: dict | None = None, meta: dict | None = None):
    run = read_text(text)
    if config is not None:
        run.config_segments = [ConfigSegment(0, config)]
    run.meta.update(meta or {})
    return run


def findings_of(text: str, config: dict | None = None, meta: dict | None = None):
    return analyze_run(run_of(text, config, meta)).findings


def by_name(findings) -> dict:
    return {f.name: f for f in findings}


def loud(findings) -> set[str]:
    return {f.name for f in findings if severity_at_least(f.severity, "warning")}


def advice_for(finding, parameter):
    found = [a for a in finding.advice if a.parameter == parameter]
    assert found, [a.parameter for a in finding.advice]
    return found[0]


CONFIG_7B = {
    "data": {"train_batch_size": 256, "max_prompt_length": 512, "max_response_length": 1024},
    "actor_rollout_ref": {
        "model": {"path": "Qwen/Qwen2-7B-Instruct"},
        "rollout": {
            "gpu_memory_utilization": 0.8,
            "n": 4,
            "log_prob_micro_batch_size_per_gpu": 32,
            "tensor_model_parallel_size": 2,
            "free_cache_engine": False,
        },
        "ref": {"log_prob_micro_batch_size_per_gpu": 16},
        "actor": {"ppo_micro_batch_size_per_gpu": 8, "ppo_mini_batch_size": 64},
    },
    "trainer": {"n_gpus_per_node": 8, "nnodes": 1},
}

# ---- GPU out of memory ---------------------------------------------------------------------------

OOM_LOG_PROB = steps(11, 12) + (
    f"{T} Traceback (most recent call last):\n"
    f'{T}   File "/verl/trainer/ppo/ray_trainer.py", line 1002, in fit\n'
    f"{T}     old_log_prob = self.actor_rollout_wg.compute_log_prob(batch)\n"
    f'{T}   File "/verl/single_controller/ray/base.py", line 48, in __call__\n'
    f"{T}     output = ray.get(output)\n"
    f"{T} ray.exceptions.RayTaskError(OutOfMemoryError): "
    f"ray::WorkerDict.actor_rollout_compute_log_prob() {HEADER}\n"
    f'{T}   File "/verl/workers/fsdp_workers.py", line 760, in compute_log_prob\n'
    f"{T}     output = self.actor.compute_log_prob(data=data)\n"
    f'{T}   File "/verl/workers/actor/dp_actor.py", line 300, in compute_log_prob\n'
    f"{T}     logits = self.actor_module(input_ids)\n"
    f"{T} torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a "
    "total capacity of 79.15 GiB of which 1.20 GiB is free. Of the allocated memory 70.10 GiB is "
    "allocated by PyTorch, and 512.00 MiB is reserved by PyTorch but unallocated.\n"
)

OOM_WAKE_UP = steps(19, 20) + (
    f"{T} Traceback (most recent call last):\n"
    f'{T}   File "/verl/trainer/ppo/ray_trainer.py", line 980, in fit\n'
    f"{T}     gen_batch_output = self.actor_rollout_wg.generate_sequences(gen_batch)\n"
    f"{T} ray.exceptions.RayTaskError(RuntimeError): "
    f"ray::WorkerDict.actor_rollout_generate_sequences() {HEADER}\n"
    f'{T}   File "/verl/workers/fsdp_workers.py", line 700, in generate_sequences\n'
    f"{T}     with self.rollout_sharding_manager:\n"
    f'{T}   File "/verl/workers/sharding_manager/fsdp_vllm.py", line 120, in __enter__\n'
    f"{T}     self.inference_engine.wake_up()\n"
    f'{T}   File "/usr/lib/python3/site-packages/vllm/device_allocator/cumem.py", line 230, '
    "in wake_up\n"
    f"{T}     create_and_map(handle)\n"
    f"{T} RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n"
)

OOM_BACKWARD_FRAGMENTED = (
    f'{W}   File "/usr/lib/python3/site-packages/torch/_tensor.py", line 648, in backward\n'
    f"{W}     torch.autograd.backward(\n"
    f'{W}   File "/usr/lib/python3/site-packages/torch/autograd/graph.py", line 824, '
    "in _engine_run_backward\n"
    f"{W}     return Variable._execution_engine.run_backward(\n"
    f"{W} torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.12 GiB. GPU 0 has a "
    "total capacity of 79.19 GiB of which 2.11 GiB is free. Of the allocated memory 43.48 GiB is "
    "allocated by PyTorch, and 30.59 GiB is reserved by PyTorch but unallocated. If reserved but "
    "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.\n"
    f"{W} wandb: Run history:\n"
    f"{W} wandb:   actor/entropy_loss ██▇▇▇\n"
)


def test_oom_in_compute_log_prob_advises_log_prob_micro_batch_and_crash_verdict():
    found = by_name(findings_of(OOM_LOG_PROB, config=CONFIG_7B))
    oom = found["cuda-oom"]
    assert oom.evidence["phase"] == "log-prob"
    micro = advice_for(oom, "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu")
    assert micro.current == 32 and micro.suggested == 16  # golden floor(24·1024/1536) = 16
    params = [a.parameter for a in oom.advice]
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu" not in params
    assert "env:PYTORCH_CUDA_ALLOC_CONF" not in params  # 512 MiB is not fragmentation
    crash = found["run-crashed"]
    assert crash.severity == "error"
    assert crash.message.startswith(
        "The run crashed during the old log-prob computation (compute_log_prob) after step 12:"
    )
    assert "CUDA out of memory (see cuda-oom)" in crash.message
    assert crash.evidence["exception_type"] == "torch.OutOfMemoryError"
    assert crash.evidence["exception_chain"][0] == "ray.exceptions.RayTaskError(OutOfMemoryError)"
    assert crash.step == 12


def test_cumem_allocator_oom_on_wake_up_is_weight_sync_with_memory_share_advice():
    found = by_name(findings_of(OOM_WAKE_UP, config=CONFIG_7B))
    oom = found["cuda-oom"]
    assert oom.evidence["phase"] == "weight-sync"
    assert advice_for(oom, "actor_rollout_ref.rollout.gpu_memory_utilization").suggested == 0.4
    assert advice_for(oom, "actor_rollout_ref.rollout.free_cache_engine").suggested is True
    params = [a.parameter for a in oom.advice]
    assert not any("micro_batch" in p for p in params)
    assert "weight sync" in found["run-crashed"].message


def test_backward_oom_with_fragmentation_advises_expandable_segments():
    found = by_name(findings_of(OOM_BACKWARD_FRAGMENTED))
    oom = found["cuda-oom"]
    assert oom.evidence["phase"] == "backward"
    assert oom.evidence["reserved_unallocated"] == "30.59 GiB"
    env = advice_for(oom, "env:PYTORCH_CUDA_ALLOC_CONF")
    assert env.suggested == "expandable_segments:True"
    assert advice_for(oom, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    assert "backward pass" in oom.message and "fragmented" in oom.message
    # W&B's end-of-run block after the crash does not make it a normal shutdown
    assert found["run-crashed"].severity == "error"


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: out of memory",
        "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.",
        "torch.cuda.OutOfMemoryError: CUDA out of memory.",
    ],
)
def test_cuda_oom_wordings(line):
    assert "cuda-oom" in by_name(findings_of(f"{W} {line}\n"))


# ---- vLLM / SGLang rollout engines ----------------------------------------------------------

ENGINE_CORE_FAILED = (
    "(AsyncvLLMServer pid=5222) Process EngineCore_0:\n"
    "(AsyncvLLMServer pid=5222) Traceback (most recent call last):\n"
    '(AsyncvLLMServer pid=5222)   File "/envs/verl/lib/python3.10/multiprocessing/process.py", '
    "line 314, in _bootstrap\n"
    "(AsyncvLLMServer pid=5222)     self.run()\n"
    '(AsyncvLLMServer pid=5222)   File "/envs/verl/lib/python3.10/site-packages/vllm/v1/engine/'
    'core.py", line 329, in __init__\n'
    "(AsyncvLLMServer pid=5222)     self.model_executor = executor_class(vllm_config)\n"
    "(AsyncvLLMServer pid=5222) ImportError: libcudart.so.12: cannot open shared object file: "
    "No such file or directory\n"
    "(AsyncvLLMServer pid=5222) ERROR 05-02 10:00:00 [core.py:396] EngineCore failed to start.\n"
    f"{T} ray.exceptions.RayTaskError(RuntimeError): ray::AsyncvLLMServer.init_engine() {HEADER}\n"
    f"{T} RuntimeError: Engine core initialization failed. See root cause above.\n"
)

VLLM_USE_V1 = (
    "Traceback (most recent call last):\n"
    '  File "/verl/trainer/main_ppo.py", line 40, in main\n'
    "    run_ppo(config)\n"
    f"ray.exceptions.RayTaskError(ValueError): ray::AsyncvLLMServer.init_engine() {HEADER}\n"
    '  File "/verl/workers/rollout/vllm_rollout/vllm_async_server.py", line 267, in init_engine\n'
    "    self.engine = AsyncLLM.from_vllm_config(vllm_config)\n"
    '  File "/usr/lib/python3/site-packages/vllm/v1/engine/async_llm.py", line 143, '
    "in from_vllm_config\n"
    "    raise ValueError(\n"
    "ValueError: Using V1 AsyncLLMEngine, but envs.VLLM_USE_V1=False. This should not happen.\n"
)

SGLANG_CRASH = steps(29, 30) + (
    f"{W} [2025-08-15 00:16:56] Scheduler hit an exception: Traceback (most recent call last):\n"
    f'{W}   File "/opt/site-packages/sglang/srt/managers/scheduler.py", line 3000, '
    "in run_scheduler_process\n"
    f"{W}     scheduler.event_loop_overlap()\n"
    f'{W}   File "/opt/site-packages/sglang/srt/managers/scheduler.py", line 839, '
    "in event_loop_overlap\n"
    f"{W}     batch = self.get_next_batch_to_run()\n"
    f'{W}   File "/opt/site-packages/sglang/srt/managers/scheduler.py", line 1683, '
    "in update_running_batch\n"
    f"{W}     batch.filter_batch()\n"
    f"{W} RuntimeError: CUDA error: an illegal memory access was encountered\n"
)


def test_engine_core_failure_names_the_root_cause_not_the_wrapper():
    found = by_name(findings_of(ENGINE_CORE_FAILED))
    vllm = found["vllm-error"]
    assert vllm.evidence["exception"].startswith("ImportError: libcudart.so.12")
    assert vllm.evidence["phase"] == "init"
    crash = found["run-crashed"]
    assert crash.evidence["exception_type"] == "ImportError"  # not "Engine core initialization…"
    assert "(see vllm-error)" in crash.message and "initialisation" in crash.message
    assert loud(found.values()) == {"vllm-error", "run-crashed"}


def test_error_raised_in_vllm_code_is_a_vllm_error_with_env_advice():
    found = by_name(findings_of(VLLM_USE_V1))
    vllm = found["vllm-error"]
    assert "from_vllm_config (vllm/v1/engine/async_llm.py)" in vllm.message
    assert advice_for(vllm, "env:VLLM_USE_V1").suggested == 1
    assert found["run-crashed"].evidence["explained_by"] == "vllm-error"
    assert found["run-crashed"].evidence["phase"] == "init"


def test_error_raised_in_verl_code_is_not_a_vllm_error():
    text = VLLM_USE_V1.replace("/usr/lib/python3/site-packages/vllm/v1/engine/", "/verl/utils/")
    found = by_name(findings_of(text))
    assert "vllm-error" not in found
    assert found["run-crashed"].evidence["exception_type"] == "ValueError"


def test_kv_cache_error_is_the_specific_diagnosis_not_vllm_error():
    text = VLLM_USE_V1.replace(
        "ValueError: Using V1 AsyncLLMEngine, but envs.VLLM_USE_V1=False. This should not happen.",
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.",
    )
    found = by_name(findings_of(text))
    assert "vllm-kv-cache-no-memory" in found and "vllm-error" not in found
    assert "(see vllm-kv-cache-no-memory)" in found["run-crashed"].message


def test_engine_dead_during_generation_is_rollout_phase():
    text = steps(7, 8) + (
        f"{T} Traceback (most recent call last):\n"
        f'{T}   File "/verl/trainer/ppo/ray_trainer.py", line 980, in fit\n'
        f"{T} ray.exceptions.RayTaskError(EngineDeadError): "
        f"ray::WorkerDict.actor_rollout_generate_sequences() {HEADER}\n"
        f'{T}   File "/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py", line 300, '
        "in generate_sequences\n"
        f"{T} vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
        "stack trace (above) for the root cause.\n"
    )
    found = by_name(findings_of(text))
    assert found["vllm-error"].evidence["phase"] == "rollout"
    assert "rollout (generate_sequences) after step 8" in found["run-crashed"].message


def test_sglang_scheduler_crash_is_run_crashed_only_with_sglang_advice():
    found = findings_of(SGLANG_CRASH)
    assert loud(found) == {"run-crashed"}
    crash = by_name(found)["run-crashed"]
    assert crash.evidence["phase"] == "rollout"
    assert "SGLang" in crash.message and "illegal memory access" in crash.message
    params = {a.parameter for a in crash.advice}
    assert "env:sglang" in params
    overlap = advice_for(
        crash, "actor_rollout_ref.rollout.engine_kwargs.sglang.disable_overlap_schedule"
    )
    assert overlap.override.startswith("++") and "event_loop_overlap" in overlap.rationale


# ---- Ray --------------------------------------------------------------------------------------

ACTOR_DIED = steps(4, 5) + (
    f"{T} Traceback (most recent call last):\n"
    f'{T}   File "/verl/trainer/ppo/ray_trainer.py", line 1021, in fit\n'
    f"{T}     actor_output = self.actor_rollout_wg.update_actor(batch)\n"
    f'{T}   File "/verl/single_controller/ray/base.py", line 42, in func\n'
    f"{T}     output = ray.get(output)\n"
    f"{T} ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
    f"{T}         class_name: create_colocated_worker_cls.<locals>.WorkerDict\n"
    f"{T}         name: 07GxnAWorkerDict_0:3\n"
    f"{T} The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR "
    "Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. "
    "There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer "
    "due to high memory usage. (2) ray stop --force is called.\n"
)

RAYLET_SIGTERM = (
    "(raylet) A worker died or was killed while executing a task by an unexpected system error. "
    "To troubleshoot the problem, check the logs for the dead worker. Worker PID: 269812 Worker "
    "exit type: SYSTEM_ERROR Worker exit detail: Worker exits unexpectedly by a signal. "
    "SystemExit is raised (sys.exit is called). Exit code: 1. The process receives a SIGTERM.\n"
)


def test_actor_died_vanished_process_explained_with_host_memory_advice():
    offload = {"actor_rollout_ref": {"actor": {"fsdp_config": {"param_offload": True}}}}
    found = by_name(findings_of(ACTOR_DIED, config=offload))
    died = found["ray-actor-died"]
    assert died.severity == "error"
    assert died.evidence["exit_type"] == "SYSTEM_ERROR" and died.evidence["vanished"] is True
    assert died.evidence["actor_name"] == "07GxnAWorkerDict_0:3"
    assert died.evidence["phase"] == "update-actor"
    assert "OOM killer" in died.message and "ray stop --force" in died.message
    assert "env:dmesg" in {a.parameter for a in died.advice}
    assert advice_for(died, "actor_rollout_ref.actor.fsdp_config.param_offload").suggested is False
    crash = found["run-crashed"]
    assert "during the actor update (update_actor) after step 5" in crash.message
    assert "(see ray-actor-died)" in crash.message


def test_worker_death_message_cut_mid_sentence():
    text = steps(1, 2) + "(raylet) A worker died or was killed while executing a task by an unex\n"
    found = by_name(findings_of(text))
    died = found["ray-actor-died"]
    assert died.evidence["message_cut"] is True and "cut off" in died.message
    assert found["run-crashed"].evidence["explained_by"] == "ray-actor-died"


def test_sigterm_while_training_is_a_stop_from_outside_a_warning():
    """Like a KeyboardInterrupt: the run ended, by no error of its own."""
    found = by_name(findings_of(steps(1, 2, 3) + RAYLET_SIGTERM))
    died = found["ray-actor-died"]
    assert died.severity == "warning" and died.evidence["signal"] == "SIGTERM"
    assert "stopped from outside" in died.message
    assert "env:job-scheduler" in {a.parameter for a in died.advice}
    crash = found["run-crashed"]
    assert crash.severity == "warning"
    assert crash.message.startswith("The run was stopped from outside after step 3")


@pytest.mark.parametrize(
    "line",
    [
        "[2025-07-06 07:14:27,052 C 2915798 2915798] task_receiver.cc:219:  Check failed: "
        "objects_valid",  # Ray's C++ logger: C is RAY_LOG(FATAL)
        "[F1106 10:41:32.123456789 ProcessGroupNCCL.cpp:1594] Check failed: comm != nullptr",
    ],
)
def test_a_fatal_cpp_log_is_a_native_abort(line):
    text = steps(1, 2) + f"{T} {line}\n{T} *** StackTrace Information ***\n"
    crash = by_name(findings_of(text))["run-crashed"]
    assert crash.severity == "error" and crash.evidence["exception_type"] == "SIGABRT"
    assert "a fatal C++ log at " in crash.message and "Check failed: " in crash.message
    assert "after step 2" in crash.message


def test_a_cpp_error_or_warning_log_is_no_abort():
    text = steps(1, 2, 3) + f"{T} [2025-07-06 07:14:27,052 W 29 29] core_worker.cc:80: slow\n"
    assert "run-crashed" not in by_name(findings_of(text))


@pytest.mark.parametrize(
    ("task", "engine"),
    [("vLLMHttpServer.launch_server", "vllm-error"), ("WorkerDict.update_actor", None)],
)
def test_a_cause_only_rays_header_names_is_the_engines_when_its_task_is(task, engine):
    """A traceback cut above the worker's own exception: Ray's `RayTaskError(X): ray::A.m()`
    header names the cause, and the remote task's actor says whose it was."""
    text = (
        f"{T} Traceback (most recent call last):\n"
        f'{T}   File "/x/verl/workers/rollout/replica.py", line 132, in init_hybrid\n'
        f"{T}     await self.launch_servers()\n"
        f'{T}   File "/usr/lib/python3.12/asyncio/tasks.py", line 684, in _wrap_awaitable\n'
        f"{T}     return await awaitable\n"
        f"{T} ray.exceptions.RayTaskError(RuntimeError): ray::{task}() (pid=27062, "
        "ip=10.0.0.1, actor_id=ad73)\n"
    )
    found = by_name(findings_of(text))
    assert found["run-crashed"].evidence["exception_type"] == "RuntimeError"
    if engine is None:
        assert "vllm-error" not in found
        return
    vllm = found[engine]
    assert f"in ray::{task}(), the vLLM server's Ray task" in vllm.message
    assert "_wrap_awaitable" not in vllm.message
    assert found["run-crashed"].evidence["explained_by"] == engine


def test_sigterm_after_an_error_is_still_the_error():
    """A worker ended by SIGTERM after a traceback: the traceback is the crash."""
    text = steps(1, 2, 3) + 'Traceback (most recent call last):\n  File "x.py", line 1, in f\n'
    found = by_name(findings_of(text + "ValueError: bad batch\n" + RAYLET_SIGTERM))
    assert found["run-crashed"].severity == found["ray-actor-died"].severity == "error"
    assert found["run-crashed"].evidence["exception_type"] == "ValueError"


@pytest.mark.parametrize(
    ("line", "signal"),
    [
        (
            "ray.exceptions.WorkerCrashedError: The worker died unexpectedly while executing this "
            "task. Check python-core-worker-*.log files for more information.",
            None,
        ),
        (
            "(raylet) A worker died or was killed while executing a task by an unexpected system "
            "error. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker exits with an exit "
            "code 137.",
            "SIGKILL",
        ),
        (
            "ray.exceptions.RayActorError: The actor died because its owner has died. Owner's "
            "node has crashed.",
            None,
        ),
    ],
)
def test_death_wordings(line, signal):
    found = by_name(findings_of(steps(1) + line + "\n"))
    assert found["ray-actor-died"].evidence["signal"] == signal
    assert found["run-crashed"].evidence["cause_kind"] == "actor-died"


def test_death_with_host_oom_is_explained_by_host_memory():
    text = steps(30) + (
        "(raylet) [2025-05-02 10:11:12,345 E 123 123] node_manager.cc:3049: 1 Workers (tasks / "
        "actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at "
        "node (ID: 5f1e2d, IP: 10.0.0.2) over the last time period.\n"
        + ACTOR_DIED.split("\n", 2)[2]
    )
    found = by_name(findings_of(text))
    assert found["run-crashed"].evidence["explained_by"] == "host-oom-worker-killed"
    assert "host-oom-worker-killed" in found["ray-actor-died"].message


def test_death_that_training_survived_is_info():
    found = by_name(findings_of(steps(1, 2) + RAYLET_SIGTERM + steps(3, 4)))
    assert found["ray-actor-died"].severity == "info"
    assert "run-crashed" not in found


@pytest.mark.parametrize(
    ("ending", "no_such_file"),
    [(". No such file or directory", True), (". End of file", False), ("", False)],
)
def test_ray_registration_variants(ending, no_such_file):
    text = (
        "2025-04-16 17:59:03,445\tINFO worker.py:1743 -- Started a local Ray instance.\n"
        "[2025-04-16 18:02:10,426 E 4034584 4034584] core_worker.cc:228: Failed to register worker "
        "01000000ffffffffffffffffffffffffffffffffffffffffffffffff to Raylet. IOError: "
        f"[RayletClient] Unable to register worker with raylet{ending}\n"
    )
    found = by_name(findings_of(text))
    reg = found["ray-worker-registration-failed"]
    params = {a.parameter for a in reg.advice}
    assert ("env:RAY_TMPDIR" in params) is no_such_file
    assert ("env:ray" in params) is not no_such_file
    assert "ray_init.num_cpus" in params
    assert found["run-crashed"].evidence["explained_by"] == "ray-worker-registration-failed"


def test_nccl_timeout_with_earlier_cuda_oom_is_explained_by_the_oom():
    text = steps(98, 99) + (
        f"{W} torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n"
        f"(WorkerDict pid=812) [rank3]:[E502 10:11:12.0 ProcessGroupNCCL.cpp:616] [Rank 3] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, "
        "Timeout(ms)=600000) ran for 600043 milliseconds before timing out.\n"
    )
    found = by_name(findings_of(text))
    assert {"cuda-oom", "nccl-error"} <= set(found)
    assert found["run-crashed"].evidence["explained_by"] == "cuda-oom"


# ---- Hydra / OmegaConf ----------------------------------------------------------------------

HYDRA_OVERRIDE = (
    "Could not override 'actor_rollout_ref.actor.ppo_micro_batch_size_per_gp'.\n"
    "To append to your config use +actor_rollout_ref.actor.ppo_micro_batch_size_per_gp=8\n"
    "Key 'ppo_micro_batch_size_per_gp' is not in struct\n"
    "    full_key: actor_rollout_ref.actor.ppo_micro_batch_size_per_gp\n"
    "    object_type=dict\n"
    "\n"
    "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
)


def test_hydra_override_typo_suggests_the_closest_key_from_the_config_dump():
    found = by_name(findings_of(HYDRA_OVERRIDE, config=CONFIG_7B))
    hydra = found["hydra-config-error"]
    assert hydra.evidence["full_key"] == "actor_rollout_ref.actor.ppo_micro_batch_size_per_gp"
    assert hydra.evidence["closest_key"] == "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"
    advice = hydra.advice[0]
    assert advice.parameter == "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"
    assert advice.override == "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8"
    assert loud(findings_of(HYDRA_OVERRIDE)) == {"hydra-config-error", "run-crashed"}


def test_hydra_error_without_a_config_dump_names_the_key_without_guessing():
    hydra = by_name(findings_of(HYDRA_OVERRIDE))["hydra-config-error"]
    assert hydra.evidence["closest_key"] is None
    assert "'actor_rollout_ref.actor.ppo_micro_batch_size_per_gp'" in hydra.message
    assert hydra.advice[0].override is None


@pytest.mark.parametrize(
    ("text", "error", "key"),
    [
        (
            f"{W} omegaconf.errors.ConfigKeyError: Key 'enable_activation_offloading' not in "
            f"'HFModelConfig'\n{W}     full_key: enable_activation_offloading\n"
            f"{W}     object_type=HFModelConfig\n",
            "cls",
            "enable_activation_offloading",
        ),
        (
            "omegaconf.errors.ConfigAttributeError: Key 'rollout_n' is not in struct\n"
            "    full_key: actor_rollout_ref.rollout_n\n    object_type=dict\n",
            "key",
            "rollout_n",
        ),
        (
            "omegaconf.errors.MissingMandatoryValue: Missing mandatory value: "
            "actor_rollout_ref.rollout.name\n    full_key: actor_rollout_ref.rollout.name\n",
            "missing",
            "actor_rollout_ref.rollout.name",
        ),
        (
            "Could not append to config. An item is already at 'trainer.total_epochs'.\n",
            "append",
            "trainer.total_epochs",
        ),
        (
            "hydra.errors.OverrideParseException: mismatched input '=' expecting <EOF>\n"
            "See https://hydra.cc/docs/1.2/advanced/override_grammar/basic for details\n",
            "token",
            None,
        ),
    ],
)
def test_hydra_and_omegaconf_wordings(text, error, key):
    found = by_name(findings_of(text))
    hydra = found["hydra-config-error"]
    assert hydra.evidence["error"] == error and hydra.evidence["key"] == key
    assert found["run-crashed"].evidence["explained_by"] == "hydra-config-error"


def test_lexer_error_is_a_grammar_error():
    text = "hydra.errors.OverrideParseException: LexerNoViableAltException: data.files=[a\n"
    hydra = by_name(findings_of(text))["hydra-config-error"]
    assert hydra.advice[0].parameter == "env:hydra-override"


def test_error_executing_job_alone_is_not_a_hydra_error():
    text = (
        steps(0).replace("actor/pg_loss:0.04 - actor/grad_norm:0.31", "val/test_score/x:0.86")
        + "Error executing job with overrides: ['data.train_batch_size=32', "
        "'actor_rollout_ref.rollout.tensor_model_parallel_size=2']\n"
    )
    found = findings_of(text)
    assert loud(found) == {"run-crashed"}
    crash = by_name(found)["run-crashed"]
    assert "the cause is not in the log" in crash.message
    assert "Error executing job with overrides" in crash.message
    assert "initial validation (step 0)" in crash.message
    assert advice_for(crash, "env:HYDRA_FULL_ERROR").suggested == 1


def test_closest_key_uses_siblings_then_leaves():
    known = ["a.b.lr", "a.b.clip_ratio", "a.c.clip_ratio_high", "trainer.total_epochs"]
    assert closest_key("a.b.clip_ratoi", known) == "a.b.clip_ratio"
    assert closest_key("total_epoch", known) == "trainer.total_epochs"
    assert closest_key("something_else", known) is None
    assert closest_key("a.b.lr", []) is None


# ---- verl's own checks ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: 'AssertionError: only support equal chunk. Got size of DataProto 1020 and "
        "chunk 8.'",
        'Traceback (most recent call last):\\n  File "/verl/protocol.py", line 500, in chunk\\n'
        "    assert len(self) % chunks == 0\\nAssertionError: only support equal chunk. Got size "
        "of DataProto 1020 and chunk 8.",
    ],
    ids=["quoted", "flattened"],
)
def test_batch_checks_match_quoted_and_flattened_text(line):
    found = by_name(findings_of(steps(1) + f"{T} {line}\n"))
    batch = found["batch-size-divisibility-error"]
    assert batch.evidence["numbers"] == [1020, 8]
    assert found["run-crashed"].evidence["explained_by"] == "batch-size-divisibility-error"


@pytest.mark.parametrize(
    ("frame", "parameter"),
    [
        ("compute_log_prob", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"),
        ("update_policy", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"),
    ],
)
def test_equal_split_of_a_worker_batch_names_the_micro_batch(frame, parameter):
    """`DataProto.split` (verl/protocol.py): a worker's 146 rows cut into micro batches of 4."""
    text = (
        f'{T}   File "/verl/workers/actor/dp_actor.py", line 325, in {frame}\n'
        f"{T}     micro_batches = data.split(micro_batch_size)\n"
        f'{T}   File "/verl/protocol.py", line 739, in split\n'
        f"{T}     assert len(self) % split_size == 0, (\n"
        f"{T} AssertionError: only support equal split. Got size of DataProto 146 and chunk 4.\n"
    )
    found = by_name(findings_of(text))
    batch = found["batch-size-divisibility-error"]
    assert batch.evidence["check"] == "equal-split"
    (advice,) = batch.advice
    assert advice.parameter == parameter and advice.suggested == 2
    assert found["run-crashed"].evidence["explained_by"] == "batch-size-divisibility-error"


def test_flattened_traceback_yields_its_innermost_exception():
    text = (
        "ray.exceptions.RayTaskError(KeyError): ray::TaskRunner.run()\\n  File "
        '"/verl/trainer/ppo/ray_trainer.py", line 720, in _validate\\n    x = d["acc"]\\n'
        "KeyError: 'acc'\n"
    )
    story = crash_story(run_of(text))
    assert story.crashed and story.cause.type == "KeyError"
    assert story.phase.id == "validation"


def test_tp_not_dividing_world_size_is_run_crashed_with_tp_advice():
    text = (
        f"ray.exceptions.RayTaskError(AssertionError): ray::WorkerDict.actor_rollout_init_model() "
        f"{HEADER}\n"
        '  File "/verl/workers/fsdp_workers.py", line 471, in _build_rollout\n'
        "    assert self.world_size % infer_tp == 0, (\n"
        "AssertionError: rollout world_size: 8 is not divisible by infer_tp: 3\n"
    )
    found = findings_of(text)
    assert loud(found) == {"run-crashed"}  # not a batch-size error
    crash = by_name(found)["run-crashed"]
    assert crash.evidence["phase"] == "init"
    tp = advice_for(crash, "actor_rollout_ref.rollout.tensor_model_parallel_size")
    assert tp.suggested == 2  # the largest divisor of 8 not above 3
    # from the run's own config when the message has no numbers
    overrides = {
        "trainer.n_gpus_per_node": 6,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 4,
    }
    text = text.replace(
        "rollout world_size: 8 is not divisible by infer_tp: 3",
        "tensor parallel size should be less than or equal to the world size",
    )
    crash = by_name(findings_of(text, meta={"overrides": overrides}))["run-crashed"]
    tp = advice_for(crash, "actor_rollout_ref.rollout.tensor_model_parallel_size")
    assert tp.current == 4 and tp.suggested == 3


# ---- phases -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("func", "path", "phase"),
    [
        ("generate_sequences", "/verl/workers/fsdp_workers.py", "rollout"),
        ("compute_log_prob", "/verl/workers/actor/dp_actor.py", "log-prob"),
        ("compute_ref_log_prob", "/verl/workers/fsdp_workers.py", "ref-log-prob"),
        ("update_policy", "/verl/workers/actor/dp_actor.py", "update-actor"),
        ("update_critic", "/verl/workers/fsdp_workers.py", "update-critic"),
        ("compute_values", "/verl/workers/critic/dp_critic.py", "critic-values"),
        ("wake_up", "/vllm/entrypoints/llm.py", "weight-sync"),
        ("sleep", "/verl/workers/rollout/vllm_rollout/vllm_async_server.py", "weight-sync"),
        ("__enter__", "/verl/workers/sharding_manager/fsdp_vllm.py", "weight-sync"),
        ("update_weights", "/verl/workers/rollout/sglang_rollout.py", "weight-sync"),
        ("_validate", "/verl/trainer/ppo/ray_trainer.py", "validation"),
        ("_save_checkpoint", "/verl/trainer/ppo/ray_trainer.py", "checkpoint"),
        ("init_model", "/verl/workers/fsdp_workers.py", "init"),
        ("_initialize_llm_servers", "/verl/experimental/agent_loop/agent_loop.py", "init"),
        ("from_pretrained", "/transformers/modeling_utils.py", "init"),
        ("__init__", "/site-packages/vllm/v1/engine/core.py", "init"),
        ("event_loop_overlap", "/site-packages/sglang/srt/managers/scheduler.py", "rollout"),
        ("step", "/site-packages/vllm/v1/engine/llm_engine.py", "rollout"),
        ("shutdown", "/site-packages/vllm/v1/engine/core_client.py", "shutdown"),
        ("backward", "/site-packages/torch/_tensor.py", "backward"),
    ],
)
def test_phase_of_call(func, path, phase):
    assert phase_of_call(func, path).id == phase


@pytest.mark.parametrize(
    ("func", "path"),
    [("sleep", "/usr/lib/python3.10/asyncio/tasks.py"), ("fit", "/verl/trainer/ray_trainer.py")],
)
def test_phase_of_generic_calls_is_none(func, path):
    assert phase_of_call(func, path) is None


def frame(func: str, path: str = "/verl/workers/fsdp_workers.py") -> str:
    return f'File "{path}", line 1, in {func}'


def test_phase_at_prefers_verl_methods_then_innermost():
    torch = "/site-packages/torch/autograd/__init__.py"
    texts = [frame("update_actor"), frame("update_policy"), frame("backward", torch), "X"]
    assert phase_at(texts, 3).id == "update-actor"  # specific beats the generic backward
    texts = [frame("generate_sequences"), frame("__enter__", "/x/sharding_manager/a.py"), "E"]
    assert phase_at(texts, 2).id == "weight-sync"  # innermost of the same tier
    texts = [frame("_validate"), "Traceback (most recent call last):", frame("backward"), "E"]
    assert phase_at(texts, 3).id == "backward"  # not across the start of its traceback
    header = (
        f"Unhandled error (suppress with 'X'): ray::WorkerDict.actor_rollout_init_model() {HEADER}"
    )
    assert phase_at(
        [frame("_raise", "/omegaconf/_utils.py"), "ConfigKeyError: k", header], 1
    ).id == ("init")  # a Ray task header printed after the exception
    assert phase_at([], 0) is None


# ---- normal shutdown, chains, cut-off text -------------------------------------------------


FINISHED = steps(209, 210) + (
    f"{T} (\"Final validation metrics: {{'val-core/openai/gsm8k/acc/mean@1': 0.71}}\")\n"
)


def test_sigterm_after_final_validation_is_a_normal_shutdown():
    found = findings_of(FINISHED + RAYLET_SIGTERM)
    assert "run-crashed" not in by_name(found)
    died = by_name(found)["ray-actor-died"]
    assert died.severity == "info" and "normal shutdown" in died.message
    assert not loud(found)


def test_death_after_the_last_step_or_wandb_end_is_a_normal_shutdown():
    total = findings_of(steps(9, 10) + RAYLET_SIGTERM, meta={"total_training_steps": 10})
    assert not loud(total) and by_name(total)["ray-actor-died"].severity == "info"
    # W&B's end-of-run block (the console reader notes where it began)
    wandb = steps(9, 10) + "wandb: Run summary:\nwandb:   actor/pg_loss 0.04\n" + RAYLET_SIGTERM
    story = crash_story(run_of(wandb))
    assert story.shutdown and not story.crashed and "W&B" in story.finish_note


@pytest.mark.parametrize(
    "ending",
    [
        f"{T} Training Progress: 100%|██████████| 10/10 [10:00<00:00, 60.0s/it]\n",
        f"{T} wandb: Run summary:\n{T} wandb:   actor/pg_loss 0.04\n",
    ],
)
def test_end_of_training_that_is_not_an_event_still_makes_a_shutdown(tmp_path, ending):
    """The console reader drops tqdm bars and reads W&B's footer as a summary; it notes where
    they stood (meta.run_end), through both of its paths."""
    from logscope.ingest import load

    log = tmp_path / "train.log"
    log.write_text(steps(9, 10) + ending + RAYLET_SIGTERM)
    for run in (load(log)[0], read_text(log.read_text())):
        assert run.meta["run_end"]
        found = analyze_run(run).findings
        assert not loud(found) and by_name(found)["ray-actor-died"].severity == "info"
    crashed = findings_of(steps(9) + RAYLET_SIGTERM + ending)  # the death came first
    assert "run-crashed" in loud(crashed)
    resumed = findings_of(steps(9, 10) + ending + steps(11) + RAYLET_SIGTERM)  # then a resume
    assert "run-crashed" in loud(resumed)


def test_real_exception_after_training_finished_is_a_warning():
    text = FINISHED + (
        f"{T} Traceback (most recent call last):\n"
        f'{T}   File "/verl/trainer/ppo/ray_trainer.py", line 1200, in _save_checkpoint\n'
        f"{T} OSError: [Errno 28] No space left on device\n"
    )
    crash = by_name(findings_of(text))["run-crashed"]
    assert crash.severity == "warning" and "Training had finished" in crash.message
    assert crash.evidence["phase"] == "checkpoint"


def test_nested_ray_task_error_chain_and_cut_inner_exception():
    chain = (
        "Traceback (most recent call last):\n"
        '  File "/verl/trainer/main_ppo.py", line 77, in run_ppo\n'
        f"ray.exceptions.RayTaskError(ValueError): ray::TaskRunner.run() {HEADER}\n"
        '  File "/verl/trainer/ppo/ray_trainer.py", line 866, in init_workers\n'
        f"ray.exceptions.RayTaskError(ValueError): ray::WorkerDict.actor_rollout_init_model() {HEADER}\n"
        '  File "/verl/workers/reward_manager/custom.py", line 12, in __init__\n'
        "ValueError: reward function 'compute_score' not found in my_reward.py\n"
    )
    story = crash_story(run_of(chain))
    assert [e.type for e in story.exceptions][:2] == ["ray.exceptions.RayTaskError(ValueError)"] * 2
    assert story.cause.type == "ValueError" and "compute_score" in story.cause.message
    assert story.phase.id == "init"
    cut = chain.rsplit("\n", 3)[0] + "\n"  # the worker's frames and exception lost
    story = crash_story(run_of(cut))
    assert story.cause.type == "ValueError" and story.cause.message is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            f"{T} Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
            f"ray::WorkerDict.actor_rollout_ref_update_actor() {HEADER}\n"
            f'{T}   File "/EasyR1/verl/workers/fsdp_workers.py", line 504, in update_actor\n'
            f"{T}     metrics = self.actor.update_policy(data=data)\n",
            "ends inside the traceback",
        ),
        (
            "Traceback (most recent call last):\n"
            '  File "/usr/lib/python3.10/runpy.py", line 196, in _run_module_as_main\n'
            '  File "/verl/trainer/main_ppo.py", line 262, in <module>\n'
            '  File "/usr/lib/python3/site-packages/hydra/_internal/utils.py", line 223, '
            "in run_and_report\n"
            "    raise ex\n",
            "only the top of the traceback",
        ),
    ],
    ids=["cut-frames", "launcher-only"],
)
def test_cut_off_traceback_says_the_cause_is_not_in_the_log(text, says):
    crash = by_name(findings_of(text))["run-crashed"]
    assert "the cause is not in the log" in crash.message and says in crash.message
    assert crash.evidence["cause_in_log"] is False
    if "update_actor" in text:
        assert crash.evidence["phase"] == "update-actor"


def test_keyboard_interrupt_is_a_warning_and_story_is_cached():
    run = run_of(
        steps(3)
        + 'Traceback (most recent call last):\n  File "x.py", line 1, in fit\nKeyboardInterrupt\n'
    )
    assert crash_story(run) is crash_story(run)
    crash = by_name(analyze_run(run).findings)["run-crashed"]
    assert crash.severity == "warning" and "interrupted" in crash.message


def test_healthy_run_ending_normally_has_no_crash_findings():
    text = FINISHED + "wandb: Run summary:\nwandb:   actor/pg_loss 0.04\n"
    assert not {f.name for f in findings_of(text)} & {"run-crashed", "ray-actor-died"}
    assert not crash_story(run_of(text)).crashed


# ---- the console parser keeps these lines ------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "A worker died or was killed while executing a task by an unex",
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR",
        "Process EngineCore_0:",
        "Scheduler hit an exception: boom",
        "Key 'x' is not in struct",
        "    full_key: actor_rollout_ref.actor.x",
        "Missing mandatory value: actor_rollout_ref.rollout.name",
        "Job 'raysubmit_7wNNGHdVi92R8wt2' failed",
        "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
        "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.",
    ],
)
def test_crash_lines_are_classified_as_events(line):
    assert classify(line) is not None


def test_a_crash_before_the_first_step_quotes_the_error_not_the_raising_code():
    """vLLM fails at engine start (no step logged): the KV-cache finding quotes the printed
    `ValueError:` line, not the traceback's `raise ValueError("…")` source line above it."""
    from pathlib import Path

    from logscope.ingest import load

    path = Path(__file__).resolve().parents[1] / "fixtures/excerpts/verl_0.9_vllm_no_kv_cache.log"
    (run,) = load(path)
    assert run.n_steps == 0
    found = {f.name: f for f in analyze_run(run).findings}
    kv = found["vllm-kv-cache-no-memory"]
    assert kv.evidence["quote"].startswith("ValueError: No available memory")
    assert kv.evidence["count"] == 1
    assert found["run-crashed"].evidence["phase"] == "init"
    assert {a.parameter: a.suggested for a in kv.advice}[
        "actor_rollout_ref.rollout.gpu_memory_utilization"
    ] == 0.4


# ---- CUDA errors and native aborts -------------------------------------------------------------

CUDA_FIXED_TEXT = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)


def _prefixed(prefix: str, text: str) -> str:
    return "".join(f"{prefix} {line}\n" for line in text.splitlines())


def test_cuda_error_reported_only_by_the_nccl_watchdog_is_the_crash_cause():
    # glog's `[E1201 10:00:00.1 ProcessGroupNCCL.cpp:1595]` stamp is stripped as a decoration,
    # so the line keeps no NCCL name: the reader must keep it for its CUDA error.
    watchdog = (
        "[rank3]:[E1201 10:00:00.123456789 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID "
        "0(default_pg) Rank 3] Process group watchdog thread terminated with exception: CUDA "
        "error: an illegal memory access was encountered\n"
        + CUDA_FIXED_TEXT
        + "Exception raised from c10_cuda_check_implementation at "
        "/pytorch/c10/cuda/CUDAException.cpp:43 (most recent call first):\n"
        "frame #3: c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const + 0x56\n"
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "*** SIGABRT received at time=1733047200 on cpu 17 ***\n"
    )
    found = by_name(findings_of(steps(12, 13) + _prefixed(W, watchdog)))
    crash = found["run-crashed"]
    assert crash.severity == "error" and crash.step == 13
    assert "CUDA error" in crash.message and "illegal memory access" in crash.message
    assert "watchdog" in crash.message
    assert crash.evidence["cause_kind"] == "cuda-error"
    assert advice_for(crash, "env:CUDA_LAUNCH_BLOCKING").suggested == 1
    assert "nccl-error" not in found  # the watchdog only carried the CUDA error


def test_cuda_error_in_vllm_names_eager_mode_and_explains_the_worker_death():
    text = (
        steps(3) + f"{W} ERROR 12-01 10:11:12 model_runner_base.py:143] Failed to pickle inputs of "
        "failed execution: CUDA error: an illegal memory access was encountered\n"
        + f"{W} Traceback (most recent call last):\n"
        + f'{W}   File "/usr/lib/python3/dist-packages/vllm/worker/model_runner.py", line 1654, '
        "in execute_model\n"
        + f"{W}     hidden_or_intermediate_states = model_executable(\n"
        + f"{W} RuntimeError: CUDA error: an illegal memory access was encountered\n"
        + _prefixed(W, CUDA_FIXED_TEXT)
        + "(raylet) A worker died or was killed while executing a task by an unexpected system "
        "error. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits "
        "with a connection error code 2. End of file.\n"
    )
    found = by_name(findings_of(text))
    crash = found["run-crashed"]
    assert crash.evidence["cause_kind"] == "cuda-error"
    assert "vLLM" in crash.message and crash.evidence["phase"] == "rollout"
    eager = advice_for(crash, "actor_rollout_ref.rollout.enforce_eager")
    assert eager.suggested is True and "enforce_eager" in (eager.override or "")
    assert "vllm-error" in found  # raised in vLLM's own frame
    died = found["ray-actor-died"]
    assert "CUDA error" in died.message and "OOM killer" not in died.message
    assert died.evidence["after_cuda_error_line"] == 2
    assert [a.parameter for a in died.advice] == ["env:ray-logs"]


def test_device_side_assert_explains_the_usual_index_out_of_range():
    text = steps(1) + _prefixed(
        W,
        "Traceback (most recent call last):\n"
        '  File "/root/verl/verl/workers/fsdp_workers.py", line 600, in update_actor\n'
        "    metrics = self.actor.update_policy(data=data)\n"
        "RuntimeError: CUDA error: device-side assert triggered\n" + CUDA_FIXED_TEXT,
    )
    crash = by_name(findings_of(text))["run-crashed"]
    assert crash.evidence["phase"] == "update-actor"
    blocking = advice_for(crash, "env:CUDA_LAUNCH_BLOCKING")
    assert "vocabulary" in blocking.rationale
    assert not [a for a in crash.advice if a.parameter.endswith("enforce_eager")]


def test_cuda_out_of_memory_stays_cuda_oom_not_a_cuda_error():
    text = steps(5) + _prefixed(W, "RuntimeError: CUDA error: out of memory\n" + CUDA_FIXED_TEXT)
    found = by_name(findings_of(text))
    assert "cuda-oom" in found
    assert found["run-crashed"].evidence["cause_kind"] == "cuda-oom"


@pytest.mark.parametrize(
    ("line", "signal"),
    [
        ("Fatal Python error: Aborted", "SIGABRT"),
        ("Fatal Python error: Segmentation fault", "SIGSEGV"),
        ("*** SIGABRT received at time=1733047200 on cpu 17 ***", "SIGABRT"),
        ("terminate called after throwing an instance of 'c10::Error'", "SIGABRT"),
    ],
)
def test_native_death_without_traceback_is_a_crash_with_its_signal(line, signal):
    text = (
        steps(6, 7)
        + f"{W} {line}\n{W} \n{W} Thread 0x00007f00 (most recent call first):\n"
        + f'{W}   File "/usr/lib/python3.10/threading.py", line 324 in wait\n'
    )
    assert classify(line) == "killed"
    crash = by_name(findings_of(text))["run-crashed"]
    assert crash.evidence["exception_type"] == signal
    assert crash.step == 7 and "native" in crash.message


# ---- pasted shapes of real threads: lost ESC bytes, unindented frames, cut wrappers -----------


def test_colour_codes_without_their_escape_byte_still_leave_the_ray_prefix():
    # GitHub drops ESC and shows `[36m(WorkerDict pid=1)[0m text`
    text = steps(3).replace(T, f"[36m{T[:-1]}[0m") + (
        f"[36m{W}[0m Fatal Python error: Aborted\n[36m{W}[0m\n"
        "Traceback (most recent call last):\n"
        ' File "/verl/verl/trainer/main_ppo.py", line 153, in main\n'
    )
    run = run_of(text)
    assert run.steps.tolist() == [3]
    crash = by_name(analyze_run(run).findings)["run-crashed"]
    assert crash.evidence["exception_type"] == "SIGABRT"
    assert "WorkerDict" in run.meta.get("ray_actors", [])


def test_frames_pasted_without_indentation_still_give_the_phase():
    text = (
        'File "verl/workers/megatron_workers.py", line 909, in compute_log_prob\n'
        '    is_lora = data.meta_info.pop("is_lora", False)\n'
        "AttributeError: 'TensorDict' object has no attribute 'meta_info'\n"
    )
    crash = by_name(findings_of(text))["run-crashed"]
    assert crash.evidence["phase"] == "log-prob"
    assert crash.evidence["exception_type"] == "AttributeError"


def test_a_ray_wrapper_header_alone_is_not_the_cause_in_the_log():
    text = steps(2) + (
        f"{T} ray.exceptions.RayTaskError(RuntimeError): ray::WorkerDict.actor_rollout_update_"
        "actor() (pid=289274, ip=10.66.163.32, actor_id=7d1c)\n"
        f'{T}   File "/opt/megatron/core/pipeline_parallel/schedules.py", line 1781, in '
        "forward_backward_pipelining_without_interleaving\n"
        f"{T}     output_tensor, num_tokens = forward_step(\n"
    )
    crash = by_name(findings_of(text))["run-crashed"]
    assert crash.evidence["cause_in_log"] is False
    assert "RuntimeError" in crash.message and "not in the log" in crash.message
    assert advice_for(crash, "env:HYDRA_FULL_ERROR").suggested == 1


def test_vllm_prompt_longer_than_the_engine_context_is_prompt_too_long():
    text = "ValueError: Prompt length of 558 is longer than the maximum model length of 512.\n"
    config = {"data": {"max_prompt_length": 512, "max_response_length": 1024}}
    found = by_name(findings_of(text, config=config))
    prompt = found["prompt-too-long"]
    assert prompt.evidence == {**prompt.evidence, "prompt_length": 558, "max_model_len": 512}
    assert advice_for(prompt, "data.filter_overlong_prompts").suggested is True
    assert advice_for(prompt, "actor_rollout_ref.rollout.max_model_len").suggested == 1600
    assert found["run-crashed"].evidence["explained_by"] == "prompt-too-long"


def test_import_error_from_a_vllm_module_is_a_vllm_version_mismatch():
    text = (
        'File "/verl/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py", line 54, in '
        "<module>\n"
        "from vllm.model_executor.model_loader.utils import process_weights_after_loading\n"
        "ImportError: cannot import name 'process_weights_after_loading' from "
        "'vllm.model_executor.model_loader.utils' (/venv/site-packages/vllm/utils.py)\n"
    )
    found = by_name(findings_of(text))
    vllm = found["vllm-error"]
    assert "could not import from the installed vLLM" in vllm.message
    assert advice_for(vllm, "env:vllm")
    assert "vllm-error" in found["run-crashed"].message


def test_an_actor_removed_with_its_owner_is_a_secondary_death():
    text = steps(7) + (
        f"{W} ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this "
        "task. [repeated 100x across cluster]\n"
        f"{W} \tclass_name: TokenBucketWorker [repeated 100x across cluster]\n"
        f"{W} \tname: rate-limiter [repeated 100x across cluster]\n"
        f"{W} The actor is dead because its owner has died. Owner Id: 7f4b Owner Ip address: "
        "10.21.175.69 Owner worker exit type: INTENDED_SYSTEM_EXIT Worke\n"
    )
    died = by_name(findings_of(text))["ray-actor-died"]
    assert died.evidence["actor_class"] == "TokenBucketWorker"
    assert died.evidence["message_cut"] is False
    assert "owner" in died.message and "INTENDED_SYSTEM_EXIT" in died.message
    assert [a.parameter for a in died.advice] == ["env:ray-logs"]  # no OOM-killer guess


def _watchdog(seq: int, timeout_ms: int) -> str:
    return steps(9) + (
        f"{W} [rank38]:[E809 14:59:30.41 ProcessGroupNCCL.cpp:629] [Rank 38] Watchdog caught "
        f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=2, "
        f"NumelOut=2, Timeout(ms)={timeout_ms}) ran for {timeout_ms + 15} milliseconds before "
        "timing out.\n"
    )


def test_nccl_timeout_on_the_first_collective_points_at_the_network():
    nccl = by_name(findings_of(_watchdog(1, 600000)))["nccl-error"]
    assert nccl.evidence["seq_num"] == 1 and "never connected" in nccl.message
    params = [a.parameter for a in nccl.advice]
    assert params == ["env:NCCL_DEBUG", "env:NCCL_SOCKET_IFNAME"]  # not GPU memory


def test_nccl_timeout_already_long_does_not_advise_more_time():
    config = {"actor_rollout_ref": {"nccl_timeout": 7200}}
    nccl = by_name(findings_of(_watchdog(10, 7200000), config=config))["nccl-error"]
    assert "already 2 h" in nccl.message
    params = [a.parameter for a in nccl.advice]
    assert params[0] == "env:NCCL_DEBUG" and "actor_rollout_ref.nccl_timeout" not in params
    short = by_name(
        findings_of(_watchdog(10, 600000), config={"actor_rollout_ref": {"nccl_timeout": 600}})
    )
    assert advice_for(short["nccl-error"], "actor_rollout_ref.nccl_timeout").suggested == 1800


def test_an_hccl_failure_names_its_call_and_code_and_the_device_log():
    # torch_npu on Ascend (verl's ascend recipes): the communicator's set-up fails in init
    text = (
        f"{W} RuntimeError: create_config:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:102 "
        "HCCL function error: hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, "
        "&(comm->hcclComm_)), error code is 4\n"
        f"{W} [ERROR] 2025-10-29-02:17:03 (PID:144556, Device:0, RankID:0) ERR02200 DIST call "
        "hccl api failed.\n"
    )
    found = by_name(findings_of(text))
    hccl = found["nccl-error"]
    assert hccl.evidence["backend"] == "HCCL" and hccl.evidence["error_code"] == 4
    assert hccl.evidence["code_name"] == "HCCL_E_INTERNAL"
    assert "hcclCommInitRootInfoConfig returned 4" in hccl.message and "NCCL " not in hccl.message
    params = [a.parameter for a in hccl.advice]
    assert params == ["env:ASCEND_GLOBAL_LOG_LEVEL", "env:HCCL_CONNECT_TIMEOUT"]  # no GPU memory
    assert found["run-crashed"].evidence["cause_kind"] == "hccl"
    # a socket failure points at the interface first
    socket = text.replace("hcclCommInitRootInfoConfig", "hcclAllReduce").replace("is 4", "is 11")
    socket_hccl = by_name(findings_of(socket))["nccl-error"]
    assert socket_hccl.evidence["failure"] == "network"
    assert socket_hccl.advice[0].parameter == "env:HCCL_SOCKET_IFNAME"


@pytest.mark.parametrize(
    ("line", "failure", "first_advice"),
    [
        (
            "torch.distributed.DistNetworkError: The server socket has failed to listen on any "
            "local network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, "
            "message: address already in use",
            "port-in-use",
            "env:MASTER_PORT",
        ),
        (
            "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. "
            "1/2 clients joined.",
            "timeout",
            "env:TORCH_DISTRIBUTED_DEBUG",
        ),
        (
            "frame #3: c10d::TCPStore::ping() + 0x92 (0x7f3d702e0812 in /usr/lib/libtorch_cpu.so)",
            "host-gone",
            "env:TORCH_DISTRIBUTED_DEBUG",
        ),
    ],
)
def test_a_rendezvous_store_failure_says_why(line, failure, first_advice):
    found = by_name(findings_of(f"{W} {line}\n"))
    store = found["nccl-error"]
    assert store.evidence["backend"] == "c10d-store" and store.evidence["failure"] == failure
    assert "rendezvous store" in store.message and "NCCL" not in store.message
    assert store.advice[0].parameter == first_advice
    assert found["run-crashed"].evidence["cause_kind"] == "dist-store"


@pytest.mark.parametrize(
    "warning",
    [
        "[W socket.cpp:663] [c10d] The client socket has failed to connect to "
        "[::ffff:127.0.0.1]:41011 (errno: 97 - Address family not supported by protocol).",
        # the NCCL heartbeat at teardown
        '[rank1]:[W ProcessGroupNCCL.cpp:1496] [PG 0 Rank 1] Failed to check the "should dump" '
        "flag on TCPStore, (maybe TCPStore server has shut down too early), with error: Failed "
        "to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or "
        "crash?",
    ],
)
def test_store_warnings_are_no_failure(warning):
    found = by_name(findings_of(steps(9) + f"{W} {warning}\n"))
    assert "nccl-error" not in found and "run-crashed" not in found


def test_host_oom_reads_node_memory_and_the_top_users_phase():
    text = steps(4) + (
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
        "Memory on the node (IP: 10.20.49.141, ID: 4748aa6d) where the task (actor ID: 9e43, "
        "name=WorkerDict.__init__, pid=4100606, memory used=56.57GB) was running was 246.41GB / "
        "251.54GB (0.979583), which exceeds the memory usage threshold of 0.95.\n"
        "PID     MEM(GB) COMMAND\n"
        "4100606 56.57   ray::WorkerDict.actor_rollout_generate_sequences\n"
        "4100605 56.36   ray::WorkerDict.actor_rollout_generate_sequences\n"
    )
    oom = by_name(findings_of(text))["host-oom-worker-killed"]
    assert oom.evidence["node_memory_used_gb"] == 246.41
    assert oom.evidence["memory_usage_threshold"] == 0.95
    assert oom.evidence["top_memory_user"]["memory_gb"] == 56.57
    assert oom.evidence["phase"] == "rollout" and "during the rollout" in oom.message


@pytest.mark.parametrize(
    ("error", "hint"),
    [
        ("no kernel image is available for execution on the device", "compute capability"),
        ("invalid device ordinal", "GPU index"),
        ("CUDA driver version is insufficient for CUDA runtime version", "driver"),
    ],
)
def test_cuda_setup_errors_get_their_fix_not_a_debug_rerun(error, hint):
    text = steps(1) + _prefixed(W, f"RuntimeError: CUDA error: {error}\n" + CUDA_FIXED_TEXT)
    crash = by_name(findings_of(text))["run-crashed"]
    assert crash.evidence["cause_kind"] == "cuda-error"
    assert [a.parameter for a in crash.advice] == ["env:cuda-setup"]
    assert hint in crash.advice[0].rationale


def test_dapo_dynamic_sampling_giving_up_names_the_data():
    text = steps(40) + (
        f"{T} ray.exceptions.RayTaskError(ValueError): ray::TaskRunner.run()\n"
        f'{T}   File "/recipe/dapo/dapo_ray_trainer.py", line 209, in fit\n'
        f"{T}     raise ValueError(\n"
        f"{T} ValueError: num_gen_batches=10 >= max_num_gen_batches=10. Generated too many. "
        "Please check your data.\n"
    )
    config = {"actor_rollout_ref": {"rollout": {"n": 8}}}
    crash = by_name(findings_of(text, config=config))["run-crashed"]
    assert crash.evidence["cause_kind"] == "filter-exhausted"
    assert "dynamic sampling" in crash.message and crash.step == 40
    assert "10 generation rounds" in advice_for(crash, "env:data").rationale
    assert advice_for(crash, "actor_rollout_ref.rollout.n").suggested == 16


def test_a_process_prefix_inside_an_actor_prefix_is_read():
    """vLLM's engine process inside its HTTP server actor: `(vLLMHttpServer pid=1)
    (EngineCore_DP0 pid=2) RuntimeError: …` (verl ≥ 0.6): the error is the engine's."""
    inner = "(vLLMHttpServer pid=27062) (EngineCore_DP0 pid=28191)"
    text = (
        f"{inner} Process EngineCore_DP0:\n"
        f"{inner} Traceback (most recent call last):\n"
        f'{inner}   File "vllm/v1/engine/core.py", line 712, in run_engine_core\n'
        f"{inner} RuntimeError: CUDASymmetricMemoryAllocator::rendezvous: detected allocations "
        "from overlapping devices from different ranks.\n"
    )
    found = by_name(findings_of(text))
    assert "vllm-error" in found
    assert "CUDASymmetricMemoryAllocator" in found["run-crashed"].message


def test_a_ray_prefix_with_a_host_name_for_its_ip():
    prefix = "(WorkerDict pid=1216, ip=train-1328222047368962304-a3a7fgd5t0jk-worker-0)"
    text = steps(1, 2) + f"{prefix} Fatal Python error: Aborted\n"
    found = by_name(findings_of(text))
    assert found["run-crashed"].severity == "error"
    assert "Aborted" in found["run-crashed"].message


# ---- Ray wrappers, cut tracebacks in the engine, NCCL kinds, batch arithmetic, code config ----


def test_a_dist_backend_error_named_only_by_ray_is_an_nccl_failure_at_init():
    text = (
        f'{T}   File "/opt/verl/verl/single_controller/ray/base.py", line 50, in __call__\n'
        f"{T}     output = ray.get(output)\n"
        f"{T} ray.exceptions.RayTaskError(DistBackendError): "
        f"ray::WorkerDict.actor_rollout_init_model() {HEADER}\n"
        f'{T}   File "/opt/verl/verl/workers/megatron_workers.py", line 400, in init_model\n'
        f"{T}     self._build_model_optimizer(\n"
        f'{T}   File "/venv/lib/python3.11/site-packages/mbridge/core/util.py", line 200, in '
        "get_model\n"
        f"{T}     module.broadcast_params()\n"
    )
    found = by_name(findings_of(text))
    nccl = found["nccl-error"]
    assert nccl.evidence["failure"] == "unknown" and nccl.evidence["phase"] == "init"
    assert "DistBackendError" in nccl.message and "not in the text" in nccl.message
    assert nccl.advice[0].parameter == "env:NCCL_DEBUG"  # find the message first
    crash = found["run-crashed"]
    assert crash.evidence["explained_by"] == "nccl-error"
    assert crash.evidence["cause_in_log"] is False
    assert "not in the log" in crash.message


@pytest.mark.parametrize(
    "error",
    [
        "RuntimeError: NCCL is not available.",  # Ray's collective groups (ray.util.collective)
        "RuntimeError: Distributed package doesn't have NCCL built in",  # torch without NCCL
    ],
)
def test_nccl_missing_from_the_platform_asks_for_a_matching_backend(error):
    """An NPU host (HCCL only) or a CPU-only torch build: NCCL is missing, not failing; the
    advice is the backend, not memory or NCCL_DEBUG."""
    text = (
        f"{T} ray.exceptions.RayTaskError(RuntimeError): ray::OneStepTaskRunner.run() {HEADER}\n"
        f'{T}   File "/verl/recipe/one_step_off_policy/ray_trainer.py", line 215, in '
        "_create_weight_sync_group\n"
        f"{T}     collective.create_collective_group(\n"
        f"{T} {error}\n"
    )
    found = by_name(findings_of(text))
    nccl = found["nccl-error"]
    assert nccl.evidence["failure"] == "unavailable"
    assert nccl.message.startswith("NCCL is not available")
    assert [a.parameter for a in nccl.advice] == ["env:collective-backend"]
    assert found["run-crashed"].evidence["explained_by"] == "nccl-error"


def test_an_oom_named_only_by_ray_says_gpu_or_host_is_not_shown():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/work/verl/verl/trainer/main_ppo.py", line 60, in main\n'
        "    run_ppo(config)\n"
        '  File "/venv/lib/python3.10/site-packages/ray/_private/worker.py", line 900, in '
        "get_objects\n"
        "    raise value.as_instanceof_cause()\n"
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::main_task() (pid=4242, "
        "ip=10.0.0.7)\n"
        '  File "/work/verl/verl/trainer/ppo/ray_trainer.py", line 880, in fit\n'
        "    actor_output = self.actor_rollo\n"
    )
    found = by_name(findings_of(text))
    oom = found["cuda-oom"]
    assert oom.evidence["wrapper_only"] is True and oom.evidence["phase"] == "update-actor"
    assert "host" in oom.message and "does not show GPU or host" in oom.message
    assert oom.advice[0].parameter == "env:ray-logs"  # tell GPU from host first
    crash = found["run-crashed"]
    assert crash.evidence["cause_in_log"] is False  # the message says it is not in the excerpt
    assert "does not show which" in crash.message and "not in the log" in crash.message
    # torch's own line is a CUDA OOM, told as such
    full = text + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    oom = by_name(findings_of(full))["cuda-oom"]
    assert oom.evidence["wrapper_only"] is False and oom.message.startswith("CUDA out of memory")


WAKE_UP_CUT = (
    f"{T} Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
    f"ray::WorkerDict.actor_rollout_generate_sequences() {HEADER}\n"
    f'{T}   File "/opt/verl/verl/workers/fsdp_workers.py", line 470, in generate_sequences\n'
    f"{T}     with self.rollout_sharding_manager:\n"
    f'{T}   File "/opt/verl/verl/workers/sharding_manager/fsdp_vllm.py", line 80, in __enter__\n'
    f"{T}     self.inference_engine.wake_up()\n"
    f'{T}   File "/env/lib/python3.10/site-packages/vllm/entrypoints/llm.py", line 1200, in '
    "wake_up\n"
    f"{T}     self.llm_engine.wake_up()\n"
    f'{T}   File "/env/lib/python3.10/site-packages/vllm/engine/llm_eng\n'
)
STEP_CUT = (
    f"Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
    f"ray::WorkerDict.actor_rollout_generate_sequences() {HEADER}\n"
    '  File "/src/verl/verl/third_party/vllm/vllm_v_0_5_4/llm.py", line 180, in _run_engine\n'
    "    step_outputs = self.llm_engine.step()\n"
    '  File "/usr/lib/python3.10/dist-packages/vllm/engine/llm_engine.py", line 900, in step\n'
    "    output = self.model_executor.execute_model(\n"
    '  File "/usr/lib/python3.10/dist-packages/torch/utils/_contextlib.py", line 116, in '
    "decorate_context\n"
    "    return func(*args, **kwargs)\n"
    '  File "/src/verl/verl/third_p\n'
)


@pytest.mark.parametrize(
    ("text", "phase", "frame"),
    [
        (WAKE_UP_CUT, "weight-sync", "wake_up in vllm/entrypoints/llm.py"),
        (STEP_CUT, "rollout", "step in vllm/engine/llm_engine.py"),  # torch's frame skipped
    ],
)
def test_a_traceback_cut_inside_vllm_is_a_vllm_failure(text, phase, frame):
    found = by_name(findings_of(text))
    vllm = found["vllm-error"]
    assert vllm.evidence["phase"] == phase and vllm.evidence["vllm_frame"] == frame
    assert "cut before the exception" in vllm.message
    crash = found["run-crashed"]
    assert crash.evidence["explained_by"] == "vllm-error"
    assert crash.evidence["cause_in_log"] is False
    if phase == "weight-sync":  # waking up re-allocates memory
        assert advice_for(vllm, "actor_rollout_ref.rollout.gpu_memory_utilization")


def test_a_traceback_cut_in_verl_code_is_not_a_vllm_failure():
    text = WAKE_UP_CUT.replace("site-packages/vllm/entrypoints", "site-packages/verl/utils")
    text = text.replace("vllm/engine/llm_eng", "verl/utils/x")
    found = by_name(findings_of(text))
    assert "vllm-error" not in found
    assert found["run-crashed"].evidence["cause_kind"] is None


def test_bfloat16_refused_on_an_old_gpu_advises_float16_for_rollout_and_actor():
    from logscope.verl_schema import present_in

    text = (
        f"{W} ValueError: Bfloat16 is only supported on GPUs with compute capability of at "
        "least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead "
        "by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.\n"
    )
    found = by_name(findings_of(text))
    vllm = found["vllm-error"]
    assert vllm.evidence["gpu"] == "Tesla T4" and vllm.evidence["compute_capability"] == 7.5
    rollout = advice_for(vllm, "actor_rollout_ref.rollout.dtype")
    assert rollout.suggested == "float16"
    assert rollout.override == "actor_rollout_ref.rollout.dtype=float16"
    actor = advice_for(vllm, "actor_rollout_ref.actor.fsdp_config.dtype")
    assert actor.suggested == "float16"
    for advice in (rollout, actor):  # real verl keys
        assert present_in(advice.parameter), advice.parameter
    assert found["run-crashed"].evidence["explained_by"] == "vllm-error"


def test_sglang_crash_at_start_up_reads_its_phase_and_gets_start_up_advice():
    site = "/home/u/miniconda3/envs/sglang/lib/python3.10/site-packages/sglang/srt/managers"
    text = (
        f"{W} [2025-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent "
        "call last):\n"
        f'{W}   File "{site}/scheduler.py", line 1700, in run_scheduler_process\n'
        f"{W}     scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)\n"
        f'{W}   File "{site}/scheduler.py", line 200, in __init__\n'
        f"{W}     self.tp_worker = TpWorkerClass(\n"
        f'{W}   File "{site}/tp_worker_ove\n'
    )
    crash = by_name(findings_of(text))["run-crashed"]
    assert "(sglang/srt/managers/scheduler.py: __init__)" in crash.message
    assert "site-packages" not in crash.message and "miniconda" not in crash.message
    assert crash.evidence["phase"] == "init" and crash.evidence["cause_in_log"] is False
    params = [a.parameter for a in crash.advice]
    assert "actor_rollout_ref.rollout.gpu_memory_utilization" in params
    assert not any("disable_overlap_schedule" in p for p in params)  # a running-loop switch


@pytest.mark.parametrize(
    ("path", "short"),
    [
        ("/env/sglang/lib/python3.10/site-packages/sglang/srt/a.py", "sglang/srt/a.py"),
        (
            "/src/verl/verl/third_party/vllm/vllm_v_0_5_4/llm.py",
            "verl/third_party/vllm/vllm_v_0_5_4/llm.py",
        ),
        ("/vllm/v1/engine/core.py", "vllm/v1/engine/core.py"),
        ("/verl/workers/fsdp_workers.py", ""),
    ],
)
def test_engine_path_drops_the_environment_prefix(path, short):
    from logscope.detectors._signatures import engine_path

    assert engine_path(path) == short


def test_nccl_system_error_while_connecting_gets_network_advice_not_memory():
    text = (
        f'{W}   File "/venv/site-packages/torch/distributed/distributed_c10d.py", line 3900, '
        "in barrier\n"
        f"{W}     work = default_pg.barrier(opts=opts)\n"
        f"{W} torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/"
        "c10d/ProcessGroupNCCL.cpp:2000, unhandled system error (run with NCCL_DEBUG=INFO for "
        "details), NCCL version 2.21.5\n"
        f"{W} ncclSystemError: System call (e.g. socket, malloc) or external library call "
        "failed or device error.\n"
    )
    nccl = by_name(findings_of(text, config=CONFIG_7B))["nccl-error"]
    assert nccl.evidence["failure"] == "network" and "not GPU memory" in nccl.message
    params = [a.parameter for a in nccl.advice]
    assert params[:2] == ["env:NCCL_SOCKET_IFNAME", "env:NCCL_IB_DISABLE"]
    assert "env:NCCL_DEBUG" in params
    assert "actor_rollout_ref.rollout.gpu_memory_utilization" not in params
    joined = text.replace(
        "device error.\n",
        "device error. Last error: Error encountered progressing operation=Connect\n",
    )
    nccl = by_name(findings_of(joined))["nccl-error"]
    assert nccl.evidence["operation"] == "Connect" and "while connecting" in nccl.message
    # ... and NCCL's detail on lines of their own after the error, as its proxy prints them
    detail = (
        "Last error:\n[Service thread] Error encountered progressing operation=Connect, res=3\n"
    )
    apart = text.replace("device error.\n", "device error.\n" + detail)
    assert by_name(findings_of(apart))["nccl-error"].evidence["operation"] == "Connect"
    # a CUDA failure inside NCCL keeps the memory advice (the GRPO article's case)
    cuda = text.replace("unhandled system error", "unhandled cuda error").replace(
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed "
        "or device error.",
        "ncclUnhandledCudaError: Call to CUDA function failed.",
    )
    nccl = by_name(findings_of(cuda, config=CONFIG_7B))["nccl-error"]
    assert nccl.evidence["failure"] == "cuda"
    assert nccl.advice[0].parameter == "actor_rollout_ref.rollout.gpu_memory_utilization"


CRITIC_ZERO_DIVISION = (
    f'{T}   File "/src/verl/workers/fsdp_workers.py", line 690, in init_model\n'
    f"{T}     self.critic = DataParallelPPOCritic(config=self.config,\n"
    f'{T}   File "/src/verl/workers/critic/dp_critic.py", line 50, in __init__\n'
    f"{T}     assert self.config.ppo_mini_batch_size % self.config.ppo_micro_batch_size == 0\n"
    f"{T} ZeroDivisionError: integer division or modulo by zero\n"
)


def test_zero_division_in_a_batch_size_check_is_a_batch_size_error():
    config = {"trainer": {"n_gpus_per_node": 8, "nnodes": 1}, "critic": {"ppo_micro_batch_size": 4}}
    found = by_name(findings_of(CRITIC_ZERO_DIVISION, config=config))
    batch = found["batch-size-divisibility-error"]
    assert batch.evidence["check"] == "arithmetic-zero" and batch.evidence["role"] == "critic"
    assert "ppo_micro_batch_size was 0" in batch.message and batch.message.startswith(
        "A batch-size check"
    )
    micro = advice_for(batch, "critic.ppo_micro_batch_size")
    assert micro.current == 4 and micro.suggested == 8  # the GPU count: 8 // 8 = 1
    crash = found["run-crashed"]
    assert crash.evidence["explained_by"] == "batch-size-divisibility-error"
    assert "ZeroDivisionError" in crash.message


def test_a_failed_divisibility_assert_without_message_is_a_batch_size_error():
    text = CRITIC_ZERO_DIVISION.replace("critic/dp_critic.py", "actor/dp_actor.py").replace(
        "self.critic = DataParallelPPOCritic", "self.actor = DataParallelPPOActor"
    )
    text = text.replace("ZeroDivisionError: integer division or modulo by zero", "AssertionError")
    config = {
        "actor_rollout_ref": {"actor": {"ppo_mini_batch_size": 12, "ppo_micro_batch_size": 8}}
    }
    batch = by_name(findings_of(text, config=config))["batch-size-divisibility-error"]
    assert batch.evidence["check"] == "arithmetic-assert" and batch.evidence["role"] == "actor"
    assert advice_for(batch, "actor_rollout_ref.actor.ppo_micro_batch_size").suggested == 6


def test_a_zero_division_elsewhere_is_not_a_batch_size_error():
    text = CRITIC_ZERO_DIVISION.replace(
        "assert self.config.ppo_mini_batch_size % self.config.ppo_micro_batch_size == 0",
        "ratio = total_tokens / valid_tokens",
    )
    found = by_name(findings_of(text))
    assert "batch-size-divisibility-error" not in found
    assert found["run-crashed"].evidence["exception_type"] == "ZeroDivisionError"


def test_a_config_key_set_by_verl_code_is_not_called_a_typo():
    text = (
        "omegaconf.errors.ConfigKeyError: Key 'new_option' is not in struct\n"
        "    full_key: actor_rollout_ref.actor.loss_cfg.new_option\n"
        "    object_type=dict\n"
        'File "/src/verl/verl/trainer/ppo/ray_trainer.py", line 1100, in fit\n'
        "    apply_new_option(\n"
        'File "/src/verl/verl/trainer/ppo/helpers.py", line 90, in apply_new_option\n'
        '    loss_cfg["new_option"] = option_cfg\n'
        'File "/venv/site-packages/omegaconf/dictconfig.py", line 310, in __setitem__\n'
        "    self._format_and_raise(\n"
        "omegaconf.errors.ConfigKeyError: Key 'new_option' is not in struct\n"
    )
    hydra = by_name(findings_of(text))["hydra-config-error"]
    assert hydra.evidence["raised_by_code"] is True and hydra.evidence["access"] == "set"
    assert hydra.evidence["code_frame"] == "apply_new_option (verl/trainer/ppo/helpers.py)"
    assert "not a typo" in hydra.message and "called from fit" in hydra.message
    assert [a.parameter for a in hydra.advice] == ["env:verl"]
    # an override Hydra rejected is still the user's typo
    typo = by_name(
        findings_of("Could not override 'trainer.nnode'.\nKey 'nnode' is not in struct\n")
    )
    assert typo["hydra-config-error"].evidence["raised_by_code"] is False


def test_no_hydra_advice_for_a_fork_whose_log_shows_no_hydra():
    runner = "(Runner pid=7001)"
    text = (
        f"{runner} wandb:   val/accuracy ▁▅█\n"
        "(pid=7001) Running step 3:   2%|▏ | 9/420 [0:41:10<31:20:02, 274s/it]\n"
        "Traceback (most recent call last):\n"
    )
    crash = by_name(findings_of(text))["run-crashed"]
    params = [a.parameter for a in crash.advice]
    assert "env:HYDRA_FULL_ERROR" not in params and "env:ray-logs" in params
    # verl's own driver (TaskRunner, started by main_ppo under Hydra) keeps it
    crash = by_name(findings_of(text.replace(runner, T)))["run-crashed"]
    assert advice_for(crash, "env:HYDRA_FULL_ERROR").suggested == 1


def test_a_trainer_source_line_cut_before_its_call_still_names_the_phase():
    texts = [frame("fit", "/verl/trainer/ppo/ray_trainer.py"), "actor_output = self.actor_rollo"]
    assert phase_at(texts, 1).id == "update-actor"
    texts = [frame("fit", "/verl/trainer/ppo/ray_trainer.py"), "old_log_prob = self.actor_rol"]
    assert phase_at(texts, 1).id == "log-prob"


def test_a_batch_size_check_on_names_verl_does_not_have_gets_no_made_up_key():
    text = CRITIC_ZERO_DIVISION.replace(
        "self.config.ppo_mini_batch_size % self.config.ppo_micro_batch_size",
        "self.mini_batch_size % self.micro_batch_size",
    )
    batch = by_name(findings_of(text))["batch-size-divisibility-error"]
    assert [a.parameter for a in batch.advice] == ["data.train_batch_size"]
    assert "micro_batch_size was 0" in batch.message


def test_a_cut_cpp_stack_in_sglangs_scheduler_is_an_sglang_crash():
    # only the C++ frames of a named actor survive the copy (verl issue shape: SGLang scheduler)
    named = "(qORZMeWorkerDict_0:0 WorkerDict pid=559716)"
    frames = "".join(
        f"{named} frame #{n}: _PyFunction_Vectorcall + 0x6c (0x5578c75db99c in "
        "sglang::scheduler_TP0)\n"
        for n in range(23, 30)
    )
    run = run_of(frames)
    assert run.meta["ray_actors"] == ["WorkerDict"]
    assert [e.kind for e in run.events] == ["traceback"]
    crash = by_name(analyze_run(run).findings)["run-crashed"]
    assert crash.evidence["cause_kind"] == "sglang"
    assert "SGLang" in crash.message


def test_a_cpp_stack_outside_an_engine_is_a_crash_of_unknown_cause():
    text = steps(4) + _prefixed(
        W,
        "Exception raised from index_select at /pytorch/aten/src/ATen/native/Indexing.cpp:12 "
        "(most recent call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f6c in "
        "/usr/lib/libc10.so)\n"
        "frame #3: at::native::index_select_out_cpu_() + 0x92 (0x7f3d in /usr/lib/libtorch_cpu.so)\n",
    )
    crash = by_name(findings_of(text))["run-crashed"]
    assert crash.step == 4 and crash.evidence["cause_kind"] is None


def test_a_vllm_traceback_with_its_logger_head_on_every_line_is_a_traceback():
    # vLLM's formatter repeats `ERROR MM-DD HH:MM:SS [file:line]` on each line of a message
    head = (
        "(vLLMHttpServer pid=1) (Worker_TP1 pid=2) ERROR 06-04 22:25:57 [multiproc_executor.py:932]"
    )
    text = (
        f"{head} WorkerProc hit an exception.\n"
        f"{head} Traceback (most recent call last):\n"
        f'{head}   File "/x/vllm/v1/executor/multiproc_executor.py", line 927, in worker_busy_loop\n'
        f"{head}     output = func(*args, **kwargs)\n"
        f'{head}   File "/x/torch/utils/_contextlib.py", line 120, in decorate_context\n'
        f"{head}     return func(*args, **kwargs)\n"
    )
    run = run_of(text)
    tracebacks = [e for e in run.events if e.kind == "traceback"]
    assert len(tracebacks) == 1 and tracebacks[0].text.startswith("Traceback (most recent")
    assert '  File "/x/vllm/v1/executor' in tracebacks[0].text  # the frame's indentation kept
    found = by_name(findings_of(text))
    assert "worker_busy_loop" in found["vllm-error"].message
    assert found["run-crashed"].evidence["cause_kind"] == "vllm-engine"


def test_an_excerpt_starting_at_the_cause_is_placed_by_the_frames_after_it():
    # the CUDA error first, its own frames cut off; Ray's report of the remote call follows
    text = (
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "The above exception was the direct cause of the following exception:\n"
        "ray::WorkerDict.actor_rollout_generate_sequences() (pid=1, ip=10.0.0.1)\n"
        '  File "/x/verl/workers/fsdp_workers.py", line 485, in generate_sequences\n'
        "    output = self.rollout.generate_sequences(prompts=prompts)\n"
        '  File "/x/vllm/entrypoints/llm.py", line 353, in generate\n'
        "    outputs = self._run_engine(use_tqdm=use_tqdm)\n"
    )
    found = by_name(findings_of(text))
    assert found["run-crashed"].evidence["cause_kind"] == "cuda-error"
    assert "vLLM raised RuntimeError: CUDA error" in found["vllm-error"].message


def test_a_driver_waiting_in_ray_get_does_not_hide_the_engine_frame():
    # the driver's and the engine actor's tracebacks interleaved, both cut before the exception
    engine = "(AsyncVLLMInferenceEngine pid=8)"
    text = (
        '  File "/x/skyrl_train/entrypoints/main_base.py", line 288, in main\n'
        "    ray.get(skyrl_entrypoint.remote(cfg))\n"
        f'{engine}   File "/x/vllm/v1/engine/utils.py", line 706, in launch_core_engines\n'
        '  File "/x/ray/_private/worker.py", line 2858, in get\n'
        "    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)\n"
    )
    found = by_name(findings_of(text))
    assert found["run-crashed"].evidence["cause_kind"] == "vllm-engine"
    assert "launch_core_engines" in found["vllm-error"].message


def test_a_cpp_stack_in_the_rendezvous_store_names_it():
    text = steps(4) + _prefixed(
        W,
        "Exception raised from ping at /pytorch/torch/csrc/distributed/c10d/TCPStore.cpp:530 "
        "(most recent call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f6c in "
        "/usr/lib/libc10.so)\n"
        "frame #3: c10d::TCPStore::ping() + 0x92 (0x7f3d in /usr/lib/libtorch_cpu.so)\n",
    )
    found = by_name(findings_of(text))
    assert found["run-crashed"].step == 4
    assert found["run-crashed"].evidence["cause_kind"] == "dist-store"
    assert found["nccl-error"].evidence["failure"] == "host-gone"


def test_the_backtick_closing_a_code_span_is_not_part_of_the_exception():
    text = (
        "I get `Traceback (most recent call last):\n"
        '  File "/x/verl/trainer/ppo/ray_trainer.py", line 9, in _validate\n'
        "    reward_tensor = self.val_reward_fn(test_batch)\n"
        "KeyError: 'reward_model'`\n"
    )
    crash = by_name(findings_of(text))["run-crashed"]
    assert crash.evidence["exception_message"] == "'reward_model'"
    assert crash.message.endswith("KeyError: 'reward_model'.")


def test_a_cause_is_not_placed_by_another_traceback_after_it():
    text = steps(1) + (
        "(TaskRunner pid=1) ValueError: reward function returned None for sample 3\n"
        "(WorkerDict pid=2) Traceback (most recent call last):\n"
        '(WorkerDict pid=2)   File "/x/vllm/v1/engine/core.py", line 10, in run_engine_core\n'
        "(WorkerDict pid=2)     engine_core.run_busy_loop()\n"
    )
    found = by_name(findings_of(text))
    assert "vllm-error" not in found
    assert found["run-crashed"].message.endswith(
        "ValueError: reward function returned None for sample 3."
    )


def test_an_ellipsis_ending_the_cause_is_kept():
    text = steps(1) + (
        "Traceback (most recent call last):\n"
        '  File "/x/verl/trainer/main_ppo.py", line 3, in main\n'
        "    run()\n"
        "ValueError: expected one of a, b, ...\n"
    )
    assert by_name(findings_of(text))["run-crashed"].message.endswith("a, b, ....")


def test_the_cpp_stack_torch_prints_with_a_warning_is_no_crash():
    # torch's heartbeat at teardown: a glog warning, the stack of the exception it caught, and
    # the next warning
    w = f"{W} [rank1]:"
    text = steps(20) + (
        f"{w}[W1106 10:41:32.123 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=86): "
        "Failed to recv, got 0 bytes. Connection was likely closed.\n"
        f"{W} Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:671 "
        "(most recent call first):\n"
        f"{W} frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f in libc10.so)\n"
        f"{W} frame #2: c10d::TCPStore::check(std::vector<std::string> const&) + 0x2a2 (0x7f in x.so)\n"
        f"{W} frame #3: c10d::ProcessGroupNCCL::heartbeatMonitor() + 0x379 (0x7f in x.so)\n"
        f'{w}[W1106 10:41:32.123456789 ProcessGroupNCCL.cpp:1496] Failed to check the "should dump" '
        "flag on TCPStore, (maybe TCPStore server has shut down too early)\n"
    )
    run = run_of(text)
    assert [e.kind for e in run.events if e.line_no > 20].count("traceback") == 0
    warnings = [e.text for e in run.events if e.kind == "warning"]
    assert warnings[0].startswith(
        "[W TCPStore.cpp:125] [c10d] recvValue failed"
    )  # glog's level kept
    assert not loud(findings_of(text))


def test_the_cpp_stack_of_an_error_is_still_a_crash():
    text = steps(4) + (
        f"{W} [rank1]:[E1106 10:41:32.123 TCPStore.cpp:125] [c10d] store failed\n"
        f"{W} Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:671 "
        "(most recent call first):\n"
        f"{W} frame #2: c10d::TCPStore::doWait() + 0x2a2 (0x7f in libtorch_cpu.so)\n"
    )
    assert by_name(findings_of(text))["run-crashed"].step == 4
