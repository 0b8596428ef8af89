"""Fixture writers for the ingest tests: each goes through the real writer of its format.

Rows are `(step, {metric: value})`. Nothing here writes format bytes by hand; corrupted copies
are made by the tests themselves from real files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

Rows = Iterable[tuple[int, Mapping[str, float]]]


def write_tensorboard(
    logdir: Path,
    rows: Rows,
    *,
    style: str = "simple",
    wall_time0: float = 1_700_000_000.0,
    wall_times: Mapping[int, float] | None = None,
    text: Mapping[str, str] | None = None,
) -> Path:
    """Event file in `logdir` through tensorboard's EventFileWriter.

    style "simple": `Summary.Value(simple_value=...)`, what torch's add_scalar (and so verl) writes.
    style "tf2": a 0-d float32 tensor in `tensor_content` with the `scalars` plugin metadata on
    the first event of each tag only, as TF2's summary writer does (C++ `AsProtoTensorContent`).
    style "tensor-mixed": the same, but even tags hold the value in `float_val` instead (as
    Python-side `make_tensor_proto` writers do).
    """
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    logdir.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(logdir))
    seen: set[str] = set()
    import numpy as np

    for step, metrics in rows:
        values = []
        for index, (tag, v) in enumerate(metrics.items()):
            if style == "simple":
                values.append(summary_pb2.Summary.Value(tag=tag, simple_value=float(v)))
                continue
            if style == "tf2" or index % 2:
                tensor = tensor_pb2.TensorProto(
                    dtype=1,
                    tensor_shape=tensor_shape_pb2.TensorShapeProto(),
                    tensor_content=np.array(v, dtype="<f4").tobytes(),
                )
            else:
                tensor = tensor_pb2.TensorProto(
                    dtype=1, tensor_shape=tensor_shape_pb2.TensorShapeProto(), float_val=[v]
                )
            value = summary_pb2.Summary.Value(tag=tag, tensor=tensor)
            if tag not in seen:
                value.metadata.plugin_data.plugin_name = "scalars"
                seen.add(tag)
            values.append(value)
        writer.add_event(
            event_pb2.Event(
                wall_time=wall_time0 + (wall_times[step] if wall_times else step),
                step=step,
                summary=summary_pb2.Summary(value=values),
            )
        )
    for tag, body in (text or {}).items():
        tensor = tensor_pb2.TensorProto(dtype=7, string_val=[body.encode()])
        value = summary_pb2.Summary.Value(tag=f"{tag}/text_summary", tensor=tensor)
        value.metadata.plugin_data.plugin_name = "text"
        writer.add_event(
            event_pb2.Event(
                wall_time=wall_time0, step=0, summary=summary_pb2.Summary(value=[value])
            )
        )
    writer.close()
    return Path(writer.get_logdir())


def write_verl_jsonl(path: Path, rows: Rows, *, version: str = "0.7") -> Path:
    """verl's file logger: 0.7+ orjson with OPT_SERIALIZE_NUMPY (NaN/inf → null); 0.6 stdlib json."""
    import orjson

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        for step, metrics in rows:
            record = {"step": step, "data": dict(metrics)}
            if version >= "0.7":
                fh.write(orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
            else:
                fh.write((json.dumps(record) + "\n").encode())
    return path


_WANDB_SCRIPT = textwrap.dedent(
    """
    import json, math, sys
    import wandb
    spec = json.load(open(sys.argv[1]))
    resume = {"id": spec["id"], "resume": "allow"} if spec.get("id") else {}
    run = wandb.init(project=spec["project"], name=spec["name"], config=spec["config"], **resume)
    printed = dict((int(k), v) for k, v in spec.get("console", {}).items())
    for step, metrics in spec["rows"]:
        for line in printed.get(step, []):
            print(line, flush=True)
        data = {k: (float("nan") if v == "NaN" else v) for k, v in metrics.items()}
        if step == spec.get("table_step"):  # verl logs validation generations as a wandb.Table
            data["val/generations"] = wandb.Table(
                columns=["step", "input", "output", "score"], data=[[step, "1+1?", "2", 1.0]]
            )
        wandb.log(data, step=step)
    wandb.finish()
    """
)


def write_wandb_offline(
    wandb_dir: Path,
    rows: Rows,
    *,
    config: Mapping[str, Any],
    project: str = "proj",
    name: str = "exp",
    console: Mapping[int, list[str]] | None = None,
    table_step: int | None = None,
    python: str = sys.executable,
    run_id: str | None = None,
) -> Path:
    """A real offline W&B run (wandb SDK in a subprocess, WANDB_MODE=offline); returns its
    run folder. `console` lines are printed before the step's wandb.log (captured by wandb).
    With `run_id`, `wandb.init(id=run_id, resume="allow")`: a resume of that run."""
    wandb_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "project": project,
        "name": name,
        "config": config,
        "rows": [[s, {k: ("NaN" if v != v else v) for k, v in m.items()}] for s, m in rows],
        "console": {str(k): v for k, v in (console or {}).items()},
        "table_step": table_step,
        "id": run_id,
    }
    spec_path = wandb_dir / f"spec-{name}.json"
    spec_path.write_text(json.dumps(spec))
    script = wandb_dir / "write_run.py"
    script.write_text(_WANDB_SCRIPT)
    env = dict(os.environ)
    env.update(
        WANDB_MODE="offline",
        WANDB_DIR=str(wandb_dir),
        WANDB_SILENT="true",
        WANDB_CONSOLE="wrap",
        WANDB_DISABLE_GIT="true",
        WANDB_CACHE_DIR=str(wandb_dir / ".cache"),
        WANDB_CONFIG_DIR=str(wandb_dir / ".config"),
    )
    before = set((wandb_dir / "wandb").glob("offline-run-*"))
    subprocess.run(
        [python, str(script), str(spec_path)],
        env=env,
        check=True,
        capture_output=True,
        timeout=180,
    )
    after = set((wandb_dir / "wandb").glob("offline-run-*"))
    (new,) = after - before
    return new
