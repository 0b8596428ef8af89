"""Real-shaped verl console excerpts and Run builders for the foundation detector tests.

Shapes follow verl_formats.md: Ray prefixes `(TaskRunner pid=…)` / `(WorkerDict pid=…)` /
`(raylet)`, `ray.exceptions.RayTaskError(X): ray::WorkerDict.<method>() (pid=…, ip=…, …)`,
repr-era step lines, and Ray's `[repeated Nx across cluster]` suffix.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

from logscope.model import ConfigSegment, Event, Run, Source
from logscope.schemas import METRICS_SCHEMA

STEP_RE = re.compile(r"step:(\d+) - ")


def step_line(step: int, **metrics: float) -> str:
    body = " - ".join(f"{k}:{v!r}" for k, v in metrics.items())
    return f"(TaskRunner pid=2231) step:{step} - {body}"


def events_from_text(text: str, first_line: int = 1) -> list[Event]:
    """One Event per non-step line, step_hint = last step logged before it (None before any)."""
    events = []
    step = None
    for i, line in enumerate(text.splitlines()):
        m = STEP_RE.search(line)
        if m:
            step = int(m.group(1))
            continue
        if line.strip():
            events.append(Event(first_line + i, step, "log", line))
    return events


def make_run(
    series: dict[str, list[float] | np.ndarray] | None = None,
    steps: list[int] | np.ndarray | None = None,
    events: list[Event] | None = None,
    config: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Run:
    """A Run from {metric: values} (all on the same steps, 1..n by default)."""
    rows: dict[str, list] = {"step": [], "metric": [], "value": [], "wall_time": []}
    for metric, values in (series or {}).items():
        values = list(values)
        st = list(steps) if steps is not None else list(range(1, len(values) + 1))
        rows["step"] += [int(s) for s in st]
        rows["metric"] += [metric] * len(values)
        rows["value"] += [float(v) for v in values]
        rows["wall_time"] += [None] * len(values)
    frame = pl.DataFrame(rows, schema=METRICS_SCHEMA)
    return Run(
        id="test",
        source=Source("test", "memory"),
        meta=dict(meta or {}),
        config_segments=[ConfigSegment(0, config)] if config is not None else [],
        metrics=frame,
        events=list(events or []),
    )


def healthy_series(n: int = 120, seed: int = 0) -> dict[str, np.ndarray]:
    """Noisy but healthy GRPO-like metrics."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return {
        "actor/pg_loss": 0.02 * rng.standard_normal(n),
        "actor/grad_norm": 0.3 + 0.05 * rng.standard_normal(n) ** 2,
        "actor/kl_loss": 0.001 + 0.01 * t / n + 0.0005 * rng.random(n),
        "actor/ppo_kl": 0.0003 + 0.0001 * rng.random(n),
        "actor/entropy": 0.6 - 0.2 * t / n + 0.01 * rng.standard_normal(n),
        "critic/score/mean": 0.3 + 0.4 * t / n + 0.03 * rng.standard_normal(n),
        "critic/advantages/mean": 0.01 * rng.standard_normal(n),
        "actor/perf/max_memory_reserved_gb": 45 + 0.1 * rng.standard_normal(n),
    }


CONFIG_7B_8GPU: dict[str, Any] = {
    "data": {"train_batch_size": 255, "max_prompt_length": 512, "max_response_length": 1024},
    "actor_rollout_ref": {
        "model": {"path": "Qwen/Qwen2-7B-Instruct"},
        "rollout": {"gpu_memory_utilization": 0.8, "n": 4, "log_prob_micro_batch_size_per_gpu": 16},
        "ref": {"log_prob_micro_batch_size_per_gpu": 16},
        "actor": {
            "ppo_micro_batch_size_per_gpu": 32,
            "ppo_mini_batch_size": 64,
            "grad_clip": 1.0,
            "optim": {"lr": 1e-6},
        },
    },
    "critic": {"optim": {"lr": 1e-5}, "ppo_micro_batch_size_per_gpu": 8},
    "trainer": {"n_gpus_per_node": 8, "nnodes": 1},
}

HEALTHY_LOG = """\
(TaskRunner pid=2231) TaskRunner hostname: node-1, PID: 2231
(TaskRunner pid=2231) [validate_config] All configuration checks passed successfully!
(TaskRunner pid=2231) Size of train dataloader: 14, Size of val dataloader: 1
(TaskRunner pid=2231) Total training steps: 210
(WorkerDict pid=3141) NCCL version 2.20.5+cuda12.4
(TaskRunner pid=2231) WARNING: val_batch_size is deprecated. Validation datasets are sent to inference engines as a whole batch, which will schedule the memory themselves.
(WorkerDict pid=3141) INFO 05-02 10:00:00 model_runner.py:1000] Graph capturing finished in 12 secs.
(TaskRunner pid=2231) step:1 - actor/pg_loss:0.012 - actor/grad_norm:0.31 - critic/score/mean:0.4
(TaskRunner pid=2231) step:2 - actor/pg_loss:-0.004 - actor/grad_norm:0.29 - critic/score/mean:0.42
(TaskRunner pid=2231) local_global_step_folder: /ckpt/global_step_2
(TaskRunner pid=2231) step:3 - actor/pg_loss:0.008 - actor/grad_norm:0.33 - critic/score/mean:0.45
(TaskRunner pid=2231) 'Final validation metrics: None'
wandb: Run summary:
wandb:   actor/grad_norm 0.33
"""

OOM_UPDATE_ACTOR = """\
(TaskRunner pid=2231) step:56 - actor/pg_loss:0.041 - actor/grad_norm:0.31
(TaskRunner pid=2231) step:57 - actor/pg_loss:0.039 - actor/grad_norm:0.30
(TaskRunner pid=2231) Traceback (most recent call last):
(TaskRunner pid=2231)   File "/verl/trainer/main_ppo.py", line 180, in run
(TaskRunner pid=2231)     trainer.fit()
(TaskRunner pid=2231)   File "/verl/trainer/ppo/ray_trainer.py", line 1021, in fit
(TaskRunner pid=2231)     actor_output = self.actor_rollout_wg.update_actor(batch)
(TaskRunner pid=2231)   File "/verl/single_controller/ray/base.py", line 48, in __call__
(TaskRunner pid=2231)     output = ray.get(output)
(TaskRunner pid=2231) ray.exceptions.RayTaskError(OutOfMemoryError): \x1b[36mray::WorkerDict.actor_rollout_update_actor()\x1b[39m (pid=3141, ip=10.0.0.2, actor_id=7d1c0f6b0e2a, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f2c1c1d2e50>)
(TaskRunner pid=2231)   File "/verl/workers/fsdp_workers.py", line 610, in update_actor
(TaskRunner pid=2231)     metrics = self.actor.update_policy(data=data)
(TaskRunner pid=2231)   File "/verl/workers/actor/dp_actor.py", line 412, in update_policy
(TaskRunner pid=2231)     loss.backward()
(TaskRunner pid=2231) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.31 GiB. GPU 0 has a total capacity of 39.38 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 38.35 GiB memory in use.
"""

OOM_ROLLOUT = """\
(TaskRunner pid=2231) step:12 - actor/pg_loss:0.041
\x1b[36m(WorkerDict pid=3141)\x1b[0m Traceback (most recent call last):
\x1b[36m(WorkerDict pid=3141)\x1b[0m   File "/verl/workers/fsdp_workers.py", line 720, in generate_sequences
\x1b[36m(WorkerDict pid=3141)\x1b[0m     output = self.rollout.generate_sequences(prompts=prompts)
\x1b[36m(WorkerDict pid=3141)\x1b[0m torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB (GPU 0; 79.15 GiB total capacity; 70.02 GiB already allocated; 500.00 MiB free)
ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_generate_sequences() (pid=3141, ip=10.0.0.2, actor_id=7d1c, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f>)
"""

OOM_REF = """\
(TaskRunner pid=2231) step:3 - actor/pg_loss:0.041
ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_compute_ref_log_prob() (pid=3141, ip=10.0.0.2, actor_id=7d1c, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f>)
  File "/verl/workers/fsdp_workers.py", line 800, in compute_ref_log_prob
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.
"""

HOST_OOM = """\
(TaskRunner pid=2231) step:30 - actor/pg_loss:0.041
(raylet) [2025-05-02 10:11:12,345 E 123 123] (raylet) node_manager.cc:3049: 2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 5f1e2d, IP: 10.0.0.2) over the last time period. To see more information about the Workers killed on this node, use `ray logs raylet.out -ip 10.0.0.2`
(raylet)
(raylet) Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html.
Traceback (most recent call last):
  File "/verl/trainer/main_ppo.py", line 64, in main
    ray.get(runner.run.remote(config))
ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.
Memory on the node (IP: 10.0.0.2, ID: 5f1e2d) where the task (actor ID: 7d1c, name=WorkerDict.__init__, pid=3141, memory used=61.2GB) was running was 240.51GB / 251.60GB (0.955926), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: 9e8f) because it was the most recently scheduled task; to see more information about memory usage on this node, use `ray logs raylet.out -ip 10.0.0.2`.
"""

RAY_REGISTER = """\
2025-03-01 12:00:00,001\tINFO worker.py:1841 -- Started a local Ray instance.
[2025-03-01 12:00:01,234 E 4321 4321] core_worker.cc:499: Failed to register worker 01000000ffffffffffffffffffffffffffffffffffffffffffffffff to Raylet. IOError: [RayletClient] Unable to register worker with raylet. End of file
"""

VLLM_INSPECT = """\
(WorkerDict pid=5521) Traceback (most recent call last):
(WorkerDict pid=5521)   File "/vllm/model_executor/models/registry.py", line 380, in inspect_model_cls
(WorkerDict pid=5521) ValueError: Model architectures ['Qwen2ForCausalLM'] failed to be inspected. Please check the logs for more details.
"""

NCCL_TIMEOUT = """\
(TaskRunner pid=2231) step:99 - actor/pg_loss:0.041
(WorkerDict pid=812) [rank3]:[E502 10:11:12.000000000 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=51234, OpType=_ALLGATHER_BASE, NumelIn=1048576, NumelOut=8388608, Timeout(ms)=600000) ran for 600043 milliseconds before timing out.
(WorkerDict pid=813) [rank5]:[E502 10:11:12.000000000 ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=51234, OpType=_ALLGATHER_BASE, NumelIn=1048576, NumelOut=8388608, Timeout(ms)=600000) ran for 600051 milliseconds before timing out. [repeated 6x across cluster]
"""

NCCL_ERROR = """\
(WorkerDict pid=812) torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5
(WorkerDict pid=812) ncclUnhandledCudaError: Call to CUDA function failed.
"""

GRAD_NORM_FEW = """\
(TaskRunner pid=2231) step:10 - actor/pg_loss:0.041
(WorkerDict pid=4410) WARN: rank 0 grad_norm is not finite: nan
(WorkerDict pid=4411) WARN: rank 1 grad_norm is not finite: nan [repeated 7x across cluster]
(TaskRunner pid=2231) step:11 - actor/pg_loss:0.038
(TaskRunner pid=2231) step:12 - actor/pg_loss:0.037
"""


def grad_norm_many(first: int, last: int, modern: bool = False) -> str:
    lines = []
    for s in range(first - 1, last):
        lines.append(f"(TaskRunner pid=2231) step:{s} - actor/pg_loss:0.04")
        if modern:
            lines.append("(WorkerDict pid=4410) WARN: grad_norm is not finite: inf")
        else:
            lines.append("(WorkerDict pid=4410) WARN: rank 0 grad_norm is not finite: nan")
    lines.append(f"(TaskRunner pid=2231) step:{last} - actor/pg_loss:0.04")
    return "\n".join(lines) + "\n"


GENERIC_CRASH = """\
(TaskRunner pid=2231) step:40 - actor/pg_loss:0.041
(TaskRunner pid=2231) step:41 - actor/pg_loss:0.040
(TaskRunner pid=2231) Traceback (most recent call last):
(TaskRunner pid=2231)   File "/verl/trainer/ppo/ray_trainer.py", line 1098, in fit
(TaskRunner pid=2231)     val_metrics = self._validate()
(TaskRunner pid=2231)   File "/verl/trainer/ppo/ray_trainer.py", line 720, in _validate
(TaskRunner pid=2231)     reward_extra_infos_dict["acc"]
(TaskRunner pid=2231) KeyError: 'acc'
"""

SURVIVED_TRACEBACK = """\
(TaskRunner pid=2231) step:5 - actor/pg_loss:0.041
(WorkerDict pid=3141) Traceback (most recent call last):
(WorkerDict pid=3141)   File "/reward/fn.py", line 10, in compute_score
(WorkerDict pid=3141) ValueError: could not parse answer
(TaskRunner pid=2231) step:6 - actor/pg_loss:0.040
(TaskRunner pid=2231) step:7 - actor/pg_loss:0.040
"""

CONFIG_ERROR_09 = """\
Error executing job with overrides: ['data.train_batch_size=255', 'actor_rollout_ref.rollout.n=4']
Traceback (most recent call last):
  File "/verl/trainer/main_ppo.py", line 42, in main
    validate_config(config)
  File "/verl/utils/config.py", line 101, in validate_config
    assert real_train_batch_size % minimal_bsz == 0, (
AssertionError: real_train_batch_size (1020) must be divisible by minimal possible batch size (8)
"""
