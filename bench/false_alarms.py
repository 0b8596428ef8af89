"""False alarms on healthy realistic runs, and on healthy runs with two perturbations.

Simulates healthy verl runs with realistic dynamics (bench/detection.py's `Case` and
`simulate_case`: 60-800 steps, verl 0.3-0.9, GRPO 70 % / PPO 30 %, validation every 5-50 steps),
writes each as a verl console log, reads it back and analyses it. A run is alarmed when it has a
warning-or-worse finding that is not config lint (LS5xx). Modes:

- healthy: the run as simulated;
- dip: the mean response length dips 30-50 % over the first 15-25 % of the run, then grows back
  past its start (to 1.05-1.5x) by the end;
- trunc: responses start truncated (15-45 % at the cap) and learn to fit: the clip ratio falls
  to the run's own over the first 15-35 %, the mean length with it.

    python bench/false_alarms.py                      # 40 runs per mode, all three modes
    python bench/false_alarms.py --runs 12 --mode healthy dip --workers 2
    python bench/false_alarms.py --runs 40 --mode trunc --dump /tmp/fa-logs   # keep the logs
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl

# Run as a script, this folder is sys.path[0]; keep its modules from shadowing packages
# (bench/tensorboard.py vs the tensorboard package).
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parent.parent)  # `bench` importable, not bench/*

from bench.detection import Case, simulate_case

MODES = ("healthy", "dip", "trunc")
VERSIONS = ("0.3", "0.4", "0.5", "0.7", "0.8", "0.9")


def make_cases(seed: int, runs: int, uniform: bool = False) -> list[Case]:
    """`runs` healthy realistic cases; lengths log-uniform in 60..800 (uniform: plain uniform)."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(runs):
        if uniform:
            n = int(rng.uniform(60, 800))
        else:
            n = int(math.exp(rng.uniform(math.log(60), math.log(800))))
        cases.append(
            Case(
                kind=None,
                seed=int(rng.integers(0, 2**31)),
                n_steps=n,
                algorithm="grpo" if rng.random() < 0.7 else "ppo",
                version=str(rng.choice(VERSIONS)),
                noise=float(rng.uniform(0.7, 1.4)),
                step=0,
                magnitude=1.0,
                realistic=True,
                test_freq=int(rng.choice([5, 10, 20, 50])),
            )
        )
    return cases


def _replace(metrics: pl.DataFrame, metric: str, values: np.ndarray) -> pl.DataFrame:
    """`metrics` with `metric`'s values (sorted by step) replaced by `values`."""
    part = metrics.filter(pl.col("metric") == metric).sort("step")
    part = part.with_columns(pl.Series("value", values, dtype=pl.Float64))
    rest = metrics.filter(pl.col("metric") != metric)
    return pl.concat([rest, part.select(metrics.columns)]).sort("step")


def _trend(v: np.ndarray) -> np.ndarray:
    """A running mean over a tenth of the series (edges padded), kept positive."""
    w = max(5, len(v) // 10)
    t = np.convolve(np.pad(v, (w // 2, w - 1 - w // 2), mode="edge"), np.ones(w) / w, "valid")
    return np.where(t > 0, t, np.maximum(np.abs(v), 1.0))


def perturb(sim, mode: str, rng: np.random.Generator):
    """The simulated run with mode's perturbation applied to its response lengths."""
    from logscope.verl_config import get

    if mode == "healthy":
        return sim
    steps, mean = sim.series("response_length/mean")
    if len(steps) == 0:
        return sim
    s0, span = float(steps[0]), max(float(steps[-1] - steps[0]), 1.0)
    u = (steps - s0) / span
    if mode == "dip":
        depth, dip_end, end_gain = (
            rng.uniform(0.3, 0.5),
            rng.uniform(0.15, 0.25),
            rng.uniform(1.05, 1.5),
        )
        low = 1 - depth
        factor = np.where(
            u <= dip_end,
            1 - depth * u / dip_end,
            low + (end_gain - low) * (u - dip_end) / (1 - dip_end),
        )
        # the simulator's own trend replaced by the start level times the factor; noise kept
        base = np.median(mean[: max(3, len(mean) // 20)])
        sim.metrics = _replace(
            sim.metrics, "response_length/mean", base * factor * mean / _trend(mean)
        )
    elif mode == "trunc":
        cap = float(get(sim.config, "data.max_response_length", 1024) or 1024)
        c0, fall_end = rng.uniform(0.15, 0.45), rng.uniform(0.15, 0.35)
        _, clip = sim.series("response_length/clip_ratio")
        extra = c0 * np.clip(1 - u / fall_end, 0, None) ** 1.5  # 0 after fall_end
        extra = extra * np.exp(rng.normal(0, 0.1, len(extra)))
        if len(clip) == len(extra):
            sim.metrics = _replace(
                sim.metrics, "response_length/clip_ratio", np.clip(clip + extra, 0, 1)
            )
        sim.metrics = _replace(
            sim.metrics, "response_length/mean", (1 - extra) * mean + extra * cap
        )
    return sim


def run_case(
    job: tuple[int, Case, str, str | None],
) -> tuple[int, Case, list[tuple[str, str, int | None]]]:
    """(index, case, its alarms as (diagnosis, severity, step))."""
    from logscope.analyze import analyze_run
    from logscope.ingest import load
    from logscope.synthetic import write_console_log

    i, case, mode, dump = job
    sim = perturb(simulate_case(case), mode, np.random.default_rng([case.seed, 99]))
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(dump or tmp) / f"{mode}_{i:03d}.log"
        write_console_log(sim, log, version=case.version)
        (run,) = load(log)
        report = analyze_run(run)
    alarms = [
        (f.name, f.severity, f.step)
        for f in report.findings
        if f.severity != "info" and not f.is_config
    ]
    return i, case, alarms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=40, help="runs per mode")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--mode", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--uniform", action="store_true", help="run lengths uniform, not log-uniform"
    )
    parser.add_argument("--show", type=int, default=5, help="alarmed runs listed per mode")
    parser.add_argument("--dump", type=Path, help="keep the console logs in this folder")
    args = parser.parse_args(argv)
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
    cases = make_cases(args.seed, args.runs, args.uniform)
    dump = str(args.dump) if args.dump else None
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for mode in args.mode:
            results = list(pool.map(run_case, [(i, c, mode, dump) for i, c in enumerate(cases)]))
            alarmed = [r for r in results if r[2]]
            counts = Counter(name for _, _, alarms in alarmed for name in {a[0] for a in alarms})
            rate = 100 * len(alarmed) / max(len(results), 1)
            print(f"\nmode {mode}: {len(results)} runs, {len(alarmed)} alarmed ({rate:.1f} %)")
            for name, k in counts.most_common():
                print(f"  {name:<28} {k} runs")
            if alarmed:
                print(
                    f"  first alarmed runs (logs {mode}_NNN.log with --seed {args.seed} "
                    f"--runs {args.runs} --mode {mode} --dump DIR):"
                )
            for i, case, alarms in alarmed[: args.show]:
                found = ", ".join(f"{n} ({sev}) at step {st}" for n, sev, st in alarms)
                print(
                    f"    #{i} seed={case.seed} steps={case.n_steps} verl {case.version} "
                    f"{case.algorithm} test_freq={case.test_freq} noise={case.noise:.2f}: {found}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
