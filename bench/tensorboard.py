"""TensorBoard event files: logscope's reader vs tbparse vs TensorBoard's EventAccumulator.

    python bench/tensorboard.py [--steps 2000] [--tags 50] [--repeat 3]

Writes two event files with tensorboard's own EventFileWriter and summary protos (cached in the
bench work folder): `simple_value` scalars (torch's SummaryWriter, i.e. what verl writes) and
TF2-style tensor scalars (0-d float32 tensor, `scalars` plugin metadata on each tag's first
value). Then times, median of --repeat runs, on the same file:

- logscope: `logscope.ingest.tensorboard.read` (a polars long frame of every point);
- tbparse: `SummaryReader(dir).scalars` (simple_value) / `.tensors` (tensor style);
- EventAccumulator with `size_guidance={'scalars': 0, 'tensors': 0}` (keep every point), `Reload()`
  and every tag's `Scalars()` / `Tensors()`.

Each must return every point (steps × tags); the counts are printed and checked. Target: logscope
≥ 5× faster than both.
"""

from __future__ import annotations

import argparse
import random
import sys
from functools import partial
from pathlib import Path

if __package__ in (None, ""):
    sys.path[:] = [
        p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent
    ]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Results, command_line, fmt_times, timed, workdir

TARGET = 5.0


def write_events(folder: Path, steps: int, tags: int, style: str, seed: int = 0) -> Path:
    """An event file in `folder` through tensorboard's EventFileWriter."""
    import numpy as np
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder.mkdir(parents=True, exist_ok=True)
    names = [f"group{i % 7}/metric_{i}" for i in range(tags)]
    rng = random.Random(seed)
    writer = EventFileWriter(str(folder), max_queue_size=1000)
    scalar_shape = tensor_shape_pb2.TensorShapeProto()
    for step in range(1, steps + 1):
        values = []
        for tag in names:
            v = rng.gauss(0.0, 1.0)
            if style == "simple":
                values.append(summary_pb2.Summary.Value(tag=tag, simple_value=v))
                continue
            tensor = tensor_pb2.TensorProto(
                dtype=1, tensor_shape=scalar_shape, tensor_content=np.float32(v).tobytes()
            )
            value = summary_pb2.Summary.Value(tag=tag, tensor=tensor)
            if step == 1:
                value.metadata.plugin_data.plugin_name = "scalars"
            values.append(value)
        writer.add_event(
            event_pb2.Event(
                wall_time=1.7e9 + step, step=step, summary=summary_pb2.Summary(value=values)
            )
        )
    writer.close()
    return folder


def prepare(steps: int, tags: int, style: str) -> Path:
    folder = workdir("tensorboard", f"{style}_{steps}x{tags}")
    done = folder / ".complete"
    if not done.exists():
        for f in folder.glob("events.out.tfevents.*"):
            f.unlink()
        write_events(folder, steps, tags, style)
        done.write_text("ok")
    return folder


def read_logscope(folder: Path) -> int:
    from logscope.ingest import tensorboard

    runs = tensorboard.read(folder)
    return sum(r.metrics.height for r in runs)


def read_tbparse(folder: Path, style: str) -> int:
    from tbparse import SummaryReader

    reader = SummaryReader(str(folder))
    frame = reader.scalars if style == "simple" else reader.tensors
    return len(frame)


def read_event_accumulator(folder: Path, style: str) -> int:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()
    if style == "simple":
        return sum(len(acc.Scalars(t)) for t in tags["scalars"])
    return sum(len(acc.Tensors(t)) for t in tags["tensors"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--tags", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="write the results here (runner)")
    args = ap.parse_args(argv)
    res = Results("tensorboard", command_line())
    expected = args.steps * args.tags

    for style, label in (("simple", "simple_value"), ("tf2", "TF2 tensor scalars")):
        folder = prepare(args.steps, args.tags, style)
        size = sum(f.stat().st_size for f in folder.glob("events.out.tfevents.*")) / 1e6
        res.say(
            f"== {label}: {args.steps:,} steps x {args.tags} tags = {expected:,} points, "
            f"{size:.1f} MB =="
        )
        # Warm the imports once so that the first timed repetition is not an import.
        read_logscope(folder)
        contenders = {
            "logscope tensorboard.read": partial(read_logscope, folder),
            "tbparse SummaryReader": partial(read_tbparse, folder, style),
            "EventAccumulator (no sampling)": partial(read_event_accumulator, folder, style),
        }
        t = {name: timed(fn, args.repeat) for name, fn in contenders.items()}
        ours = t["logscope tensorboard.read"]
        res.say(
            f"{'':32s}{'wall s':>8s}{'ratio':>8s}{'cpu s':>8s}{'ratio':>8s}{'points':>10s}   wall runs"
        )
        for name, x in t.items():
            res.say(
                f"{name:32s}{x.wall:8.3f}{x.wall / ours.wall:7.1f}x{x.cpu:8.3f}"
                f"{x.cpu / ours.cpu:7.1f}x{x.result:10,d}   {fmt_times(x.walls)}"
            )
        for name in ("tbparse SummaryReader", "EventAccumulator (no sampling)"):
            short = name.split(" ")[0]
            ratio = t[name].wall / ours.wall
            same = t[name].result == ours.result == expected
            res.check(
                f"{label}: logscope vs {short} (wall)",
                ratio,
                "x",
                f">= {TARGET:g}x, same point count",
                ratio >= TARGET and same,
                note=(
                    f"CPU-time ratio {t[name].cpu / ours.cpu:.1f}x; points logscope "
                    f"{ours.result:,}, {short} {t[name].result:,}, expected {expected:,}"
                ),
            )
    res.write(args.json)
    return res.exit_code()


if __name__ == "__main__":
    sys.exit(main())
