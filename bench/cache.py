"""The store's cache: a second `logscope analyze` of an unchanged file vs the first.

    python bench/cache.py [--steps 100000] [--repeat 3]

Generates a verl console log (logscope.synthetic, PPO, a KL jump; cached in the bench work
folder). Each repetition uses a new, empty store and runs the real CLI twice in fresh processes:
`python -m logscope analyze LOG --format json --store STORE` — the first parses the log and fills
the store, the second finds the unchanged file in it. Both reports must be identical. Prints the
medians and the ratio first / second. Target ≥ 10×.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path[:] = [
        p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent
    ]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    Results,
    command_line,
    console_log_in_child,
    fmt_times,
    run_child,
)

TARGET = 10.0


def analyze(log: Path, store: Path, out: Path) -> tuple[float, float]:
    wall, cpu, _, code = run_child(
        [
            sys.executable,
            "-m",
            "logscope",
            "analyze",
            str(log),
            "--format",
            "json",
            "--store",
            str(store),
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
    )
    if code not in (0, 1):
        raise RuntimeError(f"logscope analyze exited {code}")
    return wall, cpu


def _comparable(path: Path) -> dict:
    data = json.loads(path.read_text())
    data.pop("generated_at", None)  # a timestamp, if the report carries one
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="write the results here (runner)")
    args = ap.parse_args(argv)
    res = Results("cache", command_line())
    log = console_log_in_child(args.steps)
    res.say(f"== {log.name}: {args.steps:,} steps, {log.stat().st_size / 1e6:.1f} MB ==")

    first, second, same = [], [], True
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="logscope-bench-cache-") as tmp:
            store = Path(tmp) / "store"
            first.append(analyze(log, store, Path(tmp) / "first.json"))
            second.append(analyze(log, store, Path(tmp) / "second.json"))
            same &= _comparable(Path(tmp) / "first.json") == _comparable(Path(tmp) / "second.json")
    w1, w2 = (statistics.median(w for w, _ in x) for x in (first, second))
    c1, c2 = (statistics.median(c for _, c in x) for x in (first, second))
    res.say(f"{'':34s}{'wall s':>8s}{'cpu s':>8s}   wall runs")
    res.say(
        f"{'first analyze (parse + store)':34s}{w1:8.2f}{c1:8.2f}   {fmt_times([w for w, _ in first])}"
    )
    res.say(
        f"{'second analyze (unchanged file)':34s}{w2:8.2f}{c2:8.2f}   {fmt_times([w for w, _ in second])}"
    )
    res.say(f"reports identical: {same}")
    res.check(
        "second analyze of an unchanged file vs the first (wall)",
        w1 / w2,
        "x",
        f">= {TARGET:g}x, same report",
        (w1 / w2 >= TARGET and same) if args.steps >= 100_000 else (None if same else False),
        note=f"{w1:.2f} s → {w2:.2f} s; CPU-time ratio {c1 / c2:.1f}x"
        + ("" if args.steps >= 100_000 else "; the target is for 100,000 steps"),
    )
    res.write(args.json)
    return res.exit_code()


if __name__ == "__main__":
    sys.exit(main())
