"""Write fixtures/diagnoses/LS###.<ext>: one small input per diagnosis, on which it fires.

Usage:
    python scripts/gen_diagnosis_fixtures.py           # regenerate
    python scripts/gen_diagnosis_fixtures.py --check   # CI: exit 1 when a file is stale or missing

Every registered diagnosis has exactly one recipe, in one of three tables:

- SIMULATED: the console log (`.log`) of a short simulated run (`logscope.synthetic`) with a
  pathology injected or a healthy level moved, logging only the metrics the diagnosis reads
  (and `keep`), values rounded to 6 significant digits (the same bytes on every machine).
- CRASHES: the console log of a short healthy simulated run that ends in the text verl prints
  when it dies that way (the detector's catalogue Example, whole log lines; `{driver}` and
  `{worker}` are the run's Ray pids).
- COMMANDS: a launch script (`.sh`) with one verl command whose overrides trip the config rule.
  A new config rule is one line here: its code and the overrides that trip it.

tests/test_catalogue.py asserts that each diagnosis fires on its file.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
from logscope.detectors.registry import detector_classes

from logscope.aliases import ALIASES
from logscope.synthetic import Injection, simulate, write_console_log
from logscope.synthetic.config import family_overrides
from logscope.synthetic.versions import ray_pids

DEFAULT = Path(__file__).resolve().parents[1] / "fixtures" / "diagnoses"
SIGNIFICANT = 6
SEED = 0


@dataclass(frozen=True)
class Simulated:
    """A simulated run: `kind` injected at step `at` (None: healthy), `levels` moved."""

    kind: str | None
    steps: int = 80
    at: int = 50
    algorithm: str = "grpo"
    levels: dict[str, float] = field(default_factory=dict)
    keep: tuple[str, ...] = ()  # prefixes of further metrics to log
    config_dump: bool = False
    version: str = "0.5"
    config: dict[str, object] = field(default_factory=dict)  # dotted overrides (families)


SIMULATED: dict[str, Simulated] = {
    "LS001": Simulated("nan-loss", keep=("actor/pg_loss", "actor/grad_norm")),
    "LS010": Simulated("cuda-oom", steps=40, at=30, keep=("actor/pg_loss",)),
    "LS016": Simulated("grad-norm-not-finite", steps=40, at=30, keep=("actor/grad_norm",)),
    "LS101": Simulated("kl-jump"),
    "LS102": Simulated("kl-out-of-band"),
    "LS103": Simulated("ppo-kl-too-low"),
    "LS110": Simulated("entropy-collapse"),
    "LS111": Simulated(None, steps=40, levels={"entropy": 5.0}),
    "LS120": Simulated("clip-ratio-spike"),
    "LS130": Simulated("grad-norm-spike"),
    "LS131": Simulated(None, steps=60, levels={"grad_norm": 7.0}, keep=("actor/pg_clipfrac",)),
    "LS140": Simulated("response-length-collapse", keep=("response_length/max",)),
    "LS141": Simulated(None, steps=40, levels={"clip_ratio": 0.2}, keep=("response_length/",)),
    "LS150": Simulated(
        "train-inference-mismatch", version="0.9", config=family_overrides(mismatch=True)
    ),
    "LS201": Simulated("reward-sawtooth"),
    "LS202": Simulated("reward-plateau"),
    "LS203": Simulated(
        "validation-drop", steps=100, at=60, keep=("critic/score/mean", "val-core/")
    ),
    "LS210": Simulated("critic-value-error", algorithm="ppo"),
    "LS211": Simulated("advantage-collapse", keep=("critic/score/mean", "critic/advantages/")),
    "LS301": Simulated("memory-leak"),
    "LS302": Simulated("rollout-bottleneck", keep=("timing_s/step",)),
    "LS303": Simulated("throughput-drop"),
    "LS304": Simulated("async-imbalance", version="0.9", config=family_overrides(fully_async=True)),
    "LS305": Simulated(
        "staleness-high",
        version="0.9",
        config=family_overrides(fully_async=True),
        config_dump=True,
    ),
    "LS306": Simulated(
        "dynamic-sampling-waste",
        version="0.9",
        config={**family_overrides(filter_groups=True), "trainer.use_v1": False},
    ),
    "LS307": Simulated("aborted-responses", version="0.9"),
    "LS515": Simulated("kl-coef-changed-midrun", keep=("actor/kl_loss",), config_dump=True),
}

CRASHES: dict[str, str] = {
    "LS011": """\
(raylet) [2025-05-02 10:11:12,345 E 123 123] (raylet) node_manager.cc:3049: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 5f1c2e, IP: 10.0.0.2) over the last time period.
ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.
""",
    "LS012": """\
[2025-03-01 12:00:01,234 E 4321 4321] core_worker.cc:499: Failed to register worker 01000000ffffffffffffffffffffffffffffffffffffffffffffffff to Raylet. IOError: [RayletClient] Unable to register worker with raylet. End of file
""",
    "LS013": """\
(WorkerDict pid={worker}) ValueError: Model architectures ['Qwen2ForCausalLM'] failed to be inspected. Please check the logs for more details.
""",
    "LS014": """\
(WorkerDict pid={worker}) torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled cuda error, NCCL version 2.20.5
(WorkerDict pid={worker}) ncclUnhandledCudaError: Call to CUDA function failed.
""",
    "LS015": """\
ray.exceptions.RayTaskError(AssertionError): ray::TaskRunner.run() (pid={driver}, ip=10.0.0.2)
AssertionError: real_train_batch_size (1020) must be divisible by minimal possible batch size (8)
""",
    "LS017": """\
(TaskRunner pid={driver}) Traceback (most recent call last):
(TaskRunner pid={driver})   File "verl/trainer/ppo/ray_trainer.py", line 1021, in fit
(TaskRunner pid={driver}) KeyError: 'acc'
""",
    "LS018": """\
(WorkerDict pid={worker}) ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.
""",
    "LS019": """\
(TaskRunner pid={driver}) RuntimeError: Prompt length 1311 is longer than 1024.
""",
    "LS020": """\
(WorkerDict pid={worker}) ValueError: Enable chunked prefill, max_num_batched_tokens is smaller than max_model_len, please increase max_num_batched_tokens or disable chunked prefill
""",
    "LS021": """\
(WorkerDict pid={worker}) RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
""",
    "LS022": """\
ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.
        class_name: create_colocated_worker_cls.<locals>.WorkerDict
The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file.
""",
    "LS023": """\
ray.exceptions.RayTaskError(ValueError): ray::AsyncvLLMServer.init_engine() (pid=588112, ip=10.0.0.2)
  File "/usr/local/lib/python3.10/dist-packages/vllm/v1/engine/async_llm.py", line 143, in from_vllm_config
ValueError: Using V1 AsyncLLMEngine, but envs.VLLM_USE_V1=False. This should not happen.
""",
    "LS024": """\
(TaskRunner pid={driver}) omegaconf.errors.ConfigKeyError: Key 'enable_activation_offloading' not in 'HFModelConfig'
(TaskRunner pid={driver})     full_key: enable_activation_offloading
""",
    "LS142": """\
(TaskRunner pid={driver}) [prompt] user
(TaskRunner pid={driver}) What is 2 + 3? Put the final answer after "####".
(TaskRunner pid={driver}) [response] !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
(TaskRunner pid={driver}) [ground_truth] 5
(TaskRunner pid={driver}) [score] 0.0
""",
}
CRASH_RUN = Simulated(None, steps=40, at=12, keep=("actor/pg_loss", "critic/score/mean"))

_7B = "actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct"
_05B = "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct"
COMMANDS: dict[str, str] = {
    "LS501": f"{_7B} data.max_prompt_length=512 data.max_response_length=1024 "
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64",
    "LS502": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3 "
    "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
    "LS503": "algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=1",
    "LS504": "data.train_batch_size=500 actor_rollout_ref.rollout.n=8",
    "LS505": "data.train_batch_size=500 actor_rollout_ref.actor.ppo_mini_batch_size=128",
    "LS506": "data.train_batch_size=128 actor_rollout_ref.actor.ppo_mini_batch_size=256",
    "LS507": "actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_coef=0",
    "LS508": f"{_05B} algorithm.kl_ctrl.kl_coef=0.001",
    "LS509": "actor_rollout_ref.rollout.gpu_memory_utilization=0.9 trainer.n_gpus_per_node=8",
    "LS510": "data.shuffle=True actor_rollout_ref.actor.shuffle=False",
    "LS511": "data.train_batch_size=256",
    "LS512": "actor_rollout_ref.rollout.response_length=256 data.max_response_length=200",
    "LS513": _05B,
    "LS514": "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
    "LS516": "actor_rollout_ref.actor.ppo_mini_batch_size=256 actor_rollout_ref.rollout.n=5 "
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64 trainer.n_gpus_per_node=8",
    "LS517": "actor_rollout_ref.actor.ppo_mirco_batch_size_per_gpu=8",
    "LS518": "data.train_batch_size=abc",
    "LS519": "data.max_prompt_length=1024 data.max_response_length=3072 "
    "actor_rollout_ref.rollout.max_model_len=3072",
    "LS520": "algorithm.filter_groups.enable=True reward.reward_manager.name=dapo "
    "+reward.reward_kwargs.overlong_buffer_cfg.enable=True",
    "LS521": "+async_training.trigger_parameter_sync_step=4 "
    "actor_rollout_ref.actor.optim.lr_scheduler_type=cosine",
    "LS522": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 "
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=64",
}


def read_metrics(code: str, recipe: Simulated) -> pl.Expr:
    """The metrics a fixture logs: those the diagnosis reads, and the recipe's `keep`."""
    cls = next(c for c in detector_classes() if c.code == code)
    names = sorted({name for concept in cls.concepts for name in ALIASES[concept]})
    wanted = pl.col("metric").is_in(names)
    for prefix in recipe.keep:
        wanted |= pl.col("metric").str.starts_with(prefix)
    return wanted


def rounded(value: float) -> float:
    """`value` to SIGNIFICANT digits: its repr is short and libm's last bit does not show."""
    return float(f"{value:.{SIGNIFICANT}g}")


def simulated_log(code: str, recipe: Simulated) -> str:
    """The console log of the recipe's simulated run."""
    inject = [] if recipe.kind is None else [Injection(recipe.kind, recipe.at)]
    sim = simulate(
        recipe.steps,
        recipe.algorithm,
        seed=SEED,
        inject=inject,
        levels=recipe.levels or None,
        version=recipe.version,
        config=recipe.config or None,
    )

    def printed(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.filter(read_metrics(code, recipe)).with_columns(
            pl.col("value").map_elements(rounded, return_dtype=pl.Float64)
        )

    # the values printed before a restart too: every number in the log is rounded
    superseded = None if sim.superseded is None else printed(sim.superseded)
    sim = dataclasses.replace(sim, metrics=printed(sim.metrics), superseded=superseded)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_console_log(
            sim, Path(tmp) / "run.log", tqdm=False, config_dump=recipe.config_dump
        )
        return path.read_text(encoding="utf-8")


def crash_log(code: str, text: str) -> str:
    """A healthy run's console log cut after step CRASH_RUN.at (of its .steps), then the crash."""
    lines = simulated_log(code, CRASH_RUN).splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if f"step:{CRASH_RUN.at} - " in line)
    driver, workers = ray_pids(SEED)
    return "".join(lines[: cut + 1]) + text.format(driver=driver, worker=workers[0])


def launch_script(code: str, overrides: str) -> str:
    """A launch script running verl's PPO trainer with `overrides`, one per line."""
    cls = next(c for c in detector_classes() if c.code == code)
    args = " \\\n    ".join(["python3 -m verl.trainer.main_ppo", *overrides.split()])
    return (
        f"#!/usr/bin/env bash\n# {code} {cls.name}: a positive example, written by "
        f"scripts/gen_diagnosis_fixtures.py\nset -x\n{args}\n"
    )


def fixtures(codes: list[str] | None = None) -> dict[str, str]:
    """{file name: text} for every registered diagnosis (or `codes`)."""
    out = {}
    for cls in detector_classes():
        code = cls.code
        if codes is not None and code not in codes:
            continue
        if code in SIMULATED:
            out[f"{code}.log"] = simulated_log(code, SIMULATED[code])
        elif code in CRASHES:
            out[f"{code}.log"] = crash_log(code, CRASHES[code])
        elif code in COMMANDS:
            out[f"{code}.sh"] = launch_script(code, COMMANDS[code])
        else:
            raise SystemExit(
                f"no fixture recipe for {code} ({cls.name}): add a line to COMMANDS (config "
                f"rules), CRASHES (log signatures) or SIMULATED (metrics) in {__file__}"
            )
    return out


def stale(wanted: dict[str, str], folder: Path, complete: bool) -> list[str]:
    """Files of `folder` that differ from `wanted` or are missing (and, if `complete`, extra)."""
    names = [
        name
        for name, text in wanted.items()
        if not (folder / name).is_file() or (folder / name).read_text(encoding="utf-8") != text
    ]
    if complete:
        names += sorted(p.name for p in folder.glob("LS*") if p.name not in wanted)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    parser.add_argument("--output", type=Path, default=DEFAULT, help=f"default: {DEFAULT}")
    parser.add_argument("--only", nargs="*", metavar="CODE", help="these codes only")
    args = parser.parse_args(argv)
    wanted = fixtures(args.only)
    if args.check:
        names = stale(wanted, args.output, complete=args.only is None)
        if names:
            print(
                f"{args.output}: stale, missing or unknown: {', '.join(names)}. Run "
                "`python scripts/gen_diagnosis_fixtures.py` and commit the result.",
                file=sys.stderr,
            )
            return 1
        print(f"{args.output}: {len(wanted)} fixtures up to date.")
        return 0
    args.output.mkdir(parents=True, exist_ok=True)
    for name, text in wanted.items():
        (args.output / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(wanted)} fixtures to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
