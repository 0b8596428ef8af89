"""Write a simulated run (`synthetic.frameworks.as_framework`) in its framework's own files.

    path = write(run, folder)          # the framework's native file where logscope reads one
    write_tensorboard(run, folder)     # TensorBoard event files, by TensorBoard's own writer

Native writers follow the code that prints each format (file and line in each docstring):
TRL's `trainer_state.json`, ROLL's `metrics_tag:` JSON lines, SkyRL's pprint step blocks,
slime's dict lines and EasyR1's YAML step blocks. Frameworks whose only local metrics are their
trackers (OpenRLHF, prime-rl, NeMo-RL, AReaL here) get TensorBoard event files with the keys as
their loggers write them.
"""

from __future__ import annotations

import copy
import json
import math
import pprint
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from logscope.model import Run

#: the simulated wall clock: step N is logged START + N × STEP_SECONDS
START = 1_780_000_000.0
STEP_SECONDS = 96.0


def write_tensorboard(run: Run, folder: Path) -> Path:
    """The run's metrics as TensorBoard event files in `folder` (TensorBoard's EventFileWriter)."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(folder))
    wide = run.metrics.pivot(on="metric", index="step", values="value").sort("step")
    names = [c for c in wide.columns if c != "step"]
    start = time.time()
    for row in wide.iter_rows():
        step, values = row[0], row[1:]
        summary = summary_pb2.Summary(
            value=[
                summary_pb2.Summary.Value(tag=name, simple_value=float(v))
                for name, v in zip(names, values, strict=True)
                if v is not None
            ]
        )
        event = event_pb2.Event(step=int(step), wall_time=start + float(step), summary=summary)
        writer.add_event(event)
    writer.close()
    return folder


def _rows(run: Run) -> Iterator[tuple[int, dict[str, float]]]:
    """(step, {metric: value}) per logged step, in step order."""
    wide = run.metrics.pivot(on="metric", index="step", values="value").sort("step")
    names = [c for c in wide.columns if c != "step"]
    for row in wide.iter_rows():
        yield int(row[0]), {n: v for n, v in zip(names, row[1:], strict=True) if v is not None}


def _clock(step: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(START + step * STEP_SECONDS))


def write_trl(run: Run, folder: Path) -> Path:
    """`checkpoint-N/trainer_state.json` as the HF Trainer saves it (transformers
    `trainer_callback.py` `TrainerState.save_to_json`: `json.dumps(asdict(self), indent=2,
    sort_keys=True)`); one `log_history` entry per step with `step` and `epoch`."""
    history: list[dict[str, Any]] = []
    rows = list(_rows(run))
    last = rows[-1][0] if rows else 0
    for step, values in rows:
        history.append({**values, "epoch": round(step / max(last, 1), 4), "step": step})
    state = {
        "best_metric": None,
        "epoch": 1.0,
        "global_step": last,
        "is_world_process_zero": True,
        "log_history": history,
        "logging_steps": 1,
        "max_steps": last,
        "num_train_epochs": 1,
        "train_batch_size": 8,
    }
    path = folder / f"checkpoint-{last}" / "trainer_state.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(state, indent=2, sort_keys=True)  # NaN as JSON's bare NaN, as Python does
    path.write_text(text + "\n", encoding="utf-8")
    return path


def write_roll(run: Run, folder: Path) -> Path:
    """ROLL's stdout tracker (`roll/utils/tracking.py:161`): `metrics_tag: {json}` per step
    behind its logging prefix (`roll/utils/logging.py:57`)."""
    lines = []
    for step, values in _rows(run):
        tag = json.dumps({"step": step, "metrics": values})
        lines.append(
            f"[{_clock(step)}] [tracking.py (161)] [INFO] [DRIVER 0 / 1][PID 4242] "
            f"metrics_tag: {tag}"
        )
    return _write_lines(folder / "roll_pipeline.log", lines)


def _four_decimals(obj: object) -> object:
    """skyrl/train/utils/tracking.py:194-204 (ConsoleLogger.stringify_floats)."""
    if isinstance(obj, float):
        return f"{obj:.4f}"
    if isinstance(obj, dict):
        return {k: _four_decimals(v) for k, v in obj.items()}
    return obj


def write_skyrl(run: Run, folder: Path) -> Path:
    """SkyRL's console logger (`skyrl/train/utils/tracking.py:186-189`:
    `logger.info(f"Step {step}: \\n{pprint.pformat(data)}")`) in loguru's format."""
    lines = []
    for step, values in _rows(run):
        head = f"{_clock(step)}.000 | INFO     | skyrl.train.utils.tracking:log:189 - Step {step}: "
        lines.append(head)
        lines.append(pprint.pformat(_four_decimals(values)))
    return _write_lines(folder / "skyrl_train.log", lines)


def write_slime(run: Run, folder: Path) -> Path:
    """slime's dict lines (`slime/utils/logging_utils.py:20` prefix): `rollout R: {...}` for the
    rollout axis (`train_metric_utils.py:135`), `perf R: {...}` (`:401`) and `step S: {...}` for
    train steps (`backends/megatron_utils/model.py:918`), one train step per rollout."""
    lines = []
    for step, values in _rows(run):
        parts = {"rollout": {}, "perf": {}, "step": {}}
        for key, value in values.items():
            part = (
                "rollout"
                if key.startswith("rollout/")
                else "perf"
                if key.startswith("perf/")
                else "step"
            )
            parts[part][key] = value
        where = {
            "rollout": "train_metric_utils.py:135",
            "perf": "train_metric_utils.py:401",
            "step": "model.py:918",
        }
        for part in ("rollout", "step", "perf"):
            if parts[part]:
                body = {**parts[part], "train/step": step} if part == "step" else parts[part]
                lines.append(
                    f"(MegatronTrainRayActor pid=1900) [{_clock(step)}] {where[part]} - "
                    f"{part} {step}: {_py_repr(body)}"
                )
    return _write_lines(folder / "slime_train.log", lines)


#: EasyR1's examples/config.yaml, in part (the sections its console logger prints)
EASYR1_CONFIG: dict[str, Any] = {
    "data": {"max_prompt_length": 2048, "max_response_length": 2048, "rollout_batch_size": 512},
    "algorithm": {"adv_estimator": "grpo", "use_kl_loss": True, "kl_coef": 1.0e-2},
    "worker": {
        "actor": {"global_batch_size": 128, "optim": {"lr": 1.0e-6}, "max_grad_norm": 1.0},
        "rollout": {"n": 5, "gpu_memory_utilization": 0.6, "tensor_parallel_size": 2},
    },
    "trainer": {"logger": ("console", "wandb"), "nnodes": 1, "n_gpus_per_node": 8},
}


def _nested(values: dict[str, Any]) -> dict[str, Any]:
    """EasyR1's `unflatten_dict` (verl/utils/py_functional.py): keys split at `/`."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        *parents, leaf = key.split("/")
        level = out
        for part in parents:
            level = level.setdefault(part, {})
        level[leaf] = value
    return out


def write_easyr1(run: Run, folder: Path) -> Path:
    """EasyR1's console logger (`verl/utils/logger/logger.py`, ConsoleLogger): `Config` and
    `yaml.dump` of the config, then per step `Step N` and `yaml.dump` of the metrics nested at
    `/` (`convert_dict_to_str`: `yaml.dump(data, indent=2)`), printed by the `Runner` actor."""
    import yaml

    config = copy.deepcopy(EASYR1_CONFIG)
    for key, value in run.config().items():  # the run's own values (dotted EasyR1 keys)
        *parents, leaf = key.split(".")
        level = config
        for part in parents:
            level = level.setdefault(part, {})
        level[leaf] = value
    text = "Config\n" + yaml.dump(config, indent=2)
    for step, values in _rows(run):
        text += f"Step {step}\n" + yaml.dump(_nested(values), indent=2)
    return _write_lines(
        folder / "easyr1_train.log", [f"(Runner pid=2211) {line}" for line in text.splitlines()]
    )


def _py_repr(values: dict[str, Any]) -> str:
    """A dict as Python prints it (`nan`, `inf` for non-finite floats)."""
    return repr(
        {
            k: (float(v) if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in values.items()
        }
    )


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


#: framework → writer of its native local file (the rest: TensorBoard)
WRITERS: dict[str, Callable[[Run, Path], Path]] = {
    "trl": write_trl,
    "roll": write_roll,
    "skyrl": write_skyrl,
    "slime": write_slime,
    "easyr1": write_easyr1,
}


def write(run: Run, folder: Path) -> Path:
    """`run` in its framework's native format under `folder`; the path logscope should read."""
    writer = WRITERS.get(run.meta.get("framework", ""), write_tensorboard)
    return writer(run, folder)
