"""`logscope tail`: CPU per new step at 1k, 10k and 100k steps (its growth with the run).

    python bench/tail_growth.py [--sizes 1000,10000,100000] [--new 20]

For each size N a verl console log of N steps is simulated (logscope.synthetic, as the other
benches make them). A `TailSession` follows a file holding its first N − k steps (the history:
read and analysed once, not timed), then the k last steps are appended one at a time, each as it
would arrive (its lines, then one `cycle()`), and the CPU time (`time.process_time`) of each
cycle is recorded. Printed per size: median and p95 CPU per new step, and the CPU of one full
pass over the N steps (`TailSession.full_pass`) with what it adds per step when it runs every
time the run grows by `logscope.tail.FULL_PASS_GROWTH` (amortised). Targets (issue 22): the
median at 100k steps ≤ 0.1 s, and ≤ 2× the median at 1k steps.

Why it stays flat: between full passes `tail` reruns only the detectors that judge recent steps,
over the last 420 steps (`logscope/tail_window.py`: twice the longest look-back read from the
detectors' parameters), on a Run the console parser cuts to those steps at their cost
(`ConsoleParser.to_run(since_step=...)`). Every detector runs over the whole run, as `analyze`
does, on the first analysis, whenever the run has grown by 10 % since the last full pass, when a
restart prints a new config, when the log has been quiet for 10× the last full pass's CPU time,
and when tail stops; so step-local alerts come on the cycle that shows them and the last report
is `analyze`'s, while what only the whole run shows (slow leaks, plateaus, config rules) waits
for the next full pass.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path[:] = [
        p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent
    ]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Results, command_line, console_log_in_child, percentile

TARGET_S = 0.1
TARGET_RATIO = 2.0


def step_offsets(path: Path) -> list[int]:
    """Byte offset of the line after each step line (where that step's lines end)."""
    ends: list[int] = []
    pos = 0
    with path.open("rb") as fh:
        for line in fh:
            pos += len(line)
            if b"step:" in line and b" - " in line:
                ends.append(pos)
    return ends


def measure(path: Path, new: int) -> tuple[list[float], float, float, int]:
    """(CPU s of each of the `new` last steps, CPU s of a full pass, history CPU s, steps)."""
    from logscope.tail import TailOptions, TailSession

    ends = step_offsets(path)
    cut = ends[-new - 1]
    with tempfile.TemporaryDirectory(prefix="logscope-bench-tail-growth-") as tmp:
        live = Path(tmp) / "train.log"
        with path.open("rb") as src, live.open("wb") as dst:
            remaining = cut
            while remaining:
                chunk = src.read(min(remaining, 1 << 24))
                dst.write(chunk)
                remaining -= len(chunk)
            t = time.process_time()
            session = TailSession(live, TailOptions(from_start=True))
            session.cycle()
            history = time.process_time() - t
            per_step = []
            for end in ends[-new:]:
                dst.write(src.read(end - src.tell()))
                dst.flush()
                t = time.process_time()
                session.cycle()
                per_step.append(time.process_time() - t)
            full = getattr(session, "full_pass", None)
            t = time.process_time()
            if full is not None:
                full()
            full_cpu = time.process_time() - t if full is not None else float("nan")
            session.close()
    return per_step, full_cpu, history, len(ends)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="1000,10000,100000", help="run lengths in steps")
    ap.add_argument("--new", type=int, default=20, help="new steps timed, one cycle each")
    ap.add_argument("--json", type=Path, default=None, help="write the results here (runner)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    res = Results("tail_growth", command_line())
    try:
        from logscope.tail import FULL_PASS_GROWTH
    except ImportError:  # a tail that reruns everything on every step
        FULL_PASS_GROWTH = None
    res.say(
        f"{'steps':>8s} {'median s':>9s} {'p95 s':>8s} {'max s':>8s} {'full pass s':>12s} "
        f"{'amortised s':>12s} {'history s':>10s}"
    )
    medians: dict[int, float] = {}
    for n in sizes:
        log = console_log_in_child(n)
        per_step, full_cpu, history, steps = measure(log, args.new)
        med, p95 = statistics.median(per_step), percentile(per_step, 0.95)
        medians[n] = med
        amortised = full_cpu / (FULL_PASS_GROWTH * steps) if FULL_PASS_GROWTH else float("nan")
        res.say(
            f"{steps:8d} {med:9.3f} {p95:8.3f} {max(per_step):8.3f} {full_cpu:12.3f} "
            f"{amortised:12.4f} {history:10.1f}"
        )
    big, small = max(sizes), min(sizes)
    ratio = medians[big] / medians[small] if medians[small] > 0 else float("inf")
    res.say(f"ratio median CPU per new step {big:,} / {small:,} steps: {ratio:.2f}x")
    res.check(
        f"tail CPU per new step at {big:,} steps (median of {args.new})",
        medians[big],
        "s",
        f"<= {TARGET_S:g} s",
        medians[big] <= TARGET_S,
    )
    res.check(
        f"tail CPU per new step, {big:,} / {small:,} steps",
        ratio,
        "x",
        f"<= {TARGET_RATIO:g}x",
        ratio <= TARGET_RATIO,
    )
    res.write(args.json)
    return res.exit_code()


if __name__ == "__main__":
    sys.exit(main())
