"""TensorBoard and W&B offline readers against the field's own readers (issue 8, items 2-3).

    python bench/structured.py [--steps 2000] [--metrics 50] [--repeat 3]

Writes (once per size, cached in the temp dir) through the real writers: TensorBoard event files
with `simple_value` scalars (torch/verl style) and with TF2 tensor scalars, and an offline W&B run
(wandb SDK, WANDB_MODE=offline). Then times, median of `--repeat` runs each, both wall and CPU
time (CPU time is the fairer number on a shared machine; `wandb leet` runs as a child process and
its CPU is counted too):

- TensorBoard: logscope vs tbparse (`.scalars`, or `.tensors` for tensor scalars) vs
  TensorBoard's EventAccumulator with no sampling (size_guidance 0). Point counts must match.
- W&B offline: logscope vs `wandb leet inspect --json` (wandb's own offline reader); history
  row counts must match.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Run as a script, bench/ is sys.path[0]: keep bench/tensorboard.py from shadowing the package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT / "tests"))

from _ingest_writers import write_tensorboard, write_wandb_offline  # noqa: E402


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """(median wall s, median CPU s, last result)."""
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        c0, w0 = _cpu(), time.perf_counter()
        out = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(_cpu() - c0)
    return statistics.median(walls), statistics.median(cpus), out


def rows(steps: int, metrics: int) -> list[tuple[int, dict[str, float]]]:
    return [
        (s, {f"actor/m{k}": math.sin(s / 10 + k) + 0.001 * s for k in range(metrics)})
        for s in range(1, steps + 1)
    ]


def inputs(steps: int, metrics: int) -> tuple[Path, Path, Path]:
    base = Path(tempfile.gettempdir()) / f"logscope-bench-structured-{steps}x{metrics}"
    done = base / "done"
    if not done.exists():
        shutil.rmtree(base, ignore_errors=True)
        data = rows(steps, metrics)
        write_tensorboard(base / "tb_simple" / "run", data)
        write_tensorboard(base / "tb_tf2" / "run", data, style="tf2")
        write_wandb_offline(base / "wb", data, config={"trainer": {"project_name": "bench"}})
        done.write_text("ok")
    (wandb_file,) = (base / "wb" / "wandb").glob("offline-run-*/run-*.wandb")
    return base / "tb_simple", base / "tb_tf2", wandb_file


def line(
    name: str, wall: float, cpu: float, count: int, ours: tuple[float, float], unit: str = "points"
) -> str:
    """One contender; the ratio is its time over logscope's (how many times slower it is)."""
    ratio = f"x{wall / ours[0]:5.1f} wall, x{cpu / ours[1]:5.1f} CPU" if ours[0] else ""
    return f"  {name:<34} {wall:7.3f} s wall {cpu:7.3f} s CPU  {count:>9,} {unit:<6}  {ratio}"


def bench_tensorboard(folder: Path, style: str, repeat: int) -> None:
    from tbparse import SummaryReader
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from logscope.ingest import tensorboard

    wall, cpu, runs = timed(lambda: tensorboard.read(folder), repeat)
    ours = (wall, cpu)
    n_ours = sum(r.metrics.height for r in runs)
    print(f"TensorBoard, {style} scalars ({folder}):")
    print(line("logscope", wall, cpu, n_ours, (0, 0)))

    def tbp() -> int:
        reader = SummaryReader(str(folder))
        return len(reader.tensors if style == "tensor" else reader.scalars)

    wall, cpu, n = timed(tbp, repeat)
    print(line("tbparse", wall, cpu, n, ours) + ("" if n == n_ours else "  COUNT MISMATCH"))

    def ea() -> int:
        acc = EventAccumulator(str(folder / "run"), size_guidance={"scalars": 0, "tensors": 0})
        acc.Reload()
        tags = acc.Tags()
        return sum(len(acc.Scalars(t)) for t in tags["scalars"]) + sum(
            len(acc.Tensors(t)) for t in tags["tensors"]
        )

    wall, cpu, n = timed(ea, repeat)
    print(
        line("EventAccumulator (no sampling)", wall, cpu, n, ours)
        + ("" if n == n_ours else "  COUNT MISMATCH")
    )


def bench_wandb(wandb_file: Path, repeat: int) -> None:
    from logscope.ingest import wandb_offline

    wall, cpu, runs = timed(lambda: wandb_offline.read(wandb_file), repeat)
    ours = (wall, cpu)
    n_rows = runs[0].parse_stats.step_lines
    print(f"W&B offline ({wandb_file.stat().st_size / 1e6:.1f} MB):")
    print(line("logscope", wall, cpu, n_rows, (0, 0), "rows"))
    leet = shutil.which("wandb")
    if leet is None:
        print("  wandb CLI not installed: no baseline")
        return

    def inspect() -> int:
        out = subprocess.run(
            [leet, "leet", "inspect", "--json", str(wandb_file)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "WANDB_SILENT": "true"},
        )
        return sum('"type":"history"' in ln for ln in out.stdout.splitlines())

    wall, cpu, n = timed(inspect, repeat)
    print(
        line("wandb leet inspect --json", wall, cpu, n, ours)
        + ("" if n == n_rows else "  COUNT MISMATCH")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--metrics", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    simple, tf2, wandb_file = inputs(args.steps, args.metrics)
    print(f"{args.steps} steps x {args.metrics} metrics, median of {args.repeat}\n")
    bench_tensorboard(simple, "simple_value", args.repeat)
    bench_tensorboard(tf2, "tensor", args.repeat)
    bench_wandb(wandb_file, args.repeat)


if __name__ == "__main__":
    main()
