"""Write a simulated run (`synthetic.frameworks.as_framework`) in its framework's own files.

    path = write(run, folder)          # the framework's native file where logscope reads one
    write_tensorboard(run, folder)     # TensorBoard event files, by TensorBoard's own writer

Frameworks whose only local metrics are their trackers (OpenRLHF, NeMo-RL, AReaL) get
TensorBoard event files with the keys as their TensorBoard logger writes them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from logscope.model import Run


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


#: framework → writer of its native local file (the rest: TensorBoard)
WRITERS: dict[str, Callable[[Run, Path], Path]] = {}


def write(run: Run, folder: Path) -> Path:
    """`run` in its framework's native format under `folder`; the path logscope should read."""
    writer = WRITERS.get(run.meta.get("framework", ""), write_tensorboard)
    return writer(run, folder)
