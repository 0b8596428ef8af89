"""End-to-end `logscope analyze` (read + store + every detector + report JSON) at 10k–1M steps.

    python bench/analyze.py [--sizes 10000,100000] [--big] [--repeat 3] [--detector-repeat 1]

Generates verl console logs with logscope.synthetic (a PPO run, ~70 metrics per step, Ray
prefixes, ANSI colours, tqdm, validation every 10 steps, a KL jump at 60 %; cached in the bench
work folder). Each size is analysed by the real CLI, `python -m logscope analyze LOG --format json`
with an empty store, in a fresh process per repetition; the wall time, CPU time and peak RSS of
that process (os.wait4) are reported as medians, with:

- the baseline measured in the same run: the same CLI on a 100-step log (process start, imports,
  fixed costs); times are also given as ratios to it;
- the per-line parse alone at 100k steps: bench/ingest.py's straightforward per-line Python
  regex parser (no store, no detector, no report) on the same log, in a fresh process;
- growth ratios 10k→100k and 100k→1M (`--big` adds 1M steps: a 2.7 GB log, minutes to write);
- per-detector timings at 100k steps (in-process, on the run as read), the top 5 printed.

Targets (issue 22): 100k steps in ≤ 2.5 s wall and ≥ 2× faster than the per-line parse alone;
time and peak memory ratio 100k→1M ≤ 12× (no faster than linear).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path[:] = [
        p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent
    ]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    ROOT,
    Results,
    command_line,
    console_log_in_child,
    fmt_times,
    run_child,
)

TARGET_100K_S = 2.5
TARGET_VS_PER_LINE = 2.0
TARGET_GROWTH = 12.0


def analyze_once(log: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one `logscope analyze` in a fresh process, empty store."""
    with tempfile.TemporaryDirectory(prefix="logscope-bench-store-") as store:
        wall, cpu, rss, code = run_child(
            [
                sys.executable,
                "-m",
                "logscope",
                "analyze",
                str(log),
                "--format",
                "json",
                "--store",
                store,
                "--output",
                str(Path(store) / "report.json"),
            ],
            stdout=subprocess.DEVNULL,
        )
        if code not in (0, 1):  # 1: findings at/above --fail-on (the KL jump): a normal outcome
            raise RuntimeError(f"logscope analyze {log} exited {code}")
        if not (Path(store) / "report.json").stat().st_size:
            raise RuntimeError("empty report")
    return wall, cpu, rss


def per_line_once(log: Path) -> tuple[float, float]:
    """(wall s, CPU s) of bench/ingest.py's per-line Python parse of `log`, in a fresh process."""
    code = "import sys, pathlib; from bench.ingest import baseline; baseline(pathlib.Path(sys.argv[1]))"
    wall, cpu, _, exit_code = run_child([sys.executable, "-c", code, str(log)], cwd=ROOT)
    if exit_code != 0:
        raise RuntimeError(f"per-line parse of {log} exited {exit_code}")
    return wall, cpu


def per_detector(
    log: Path, small: Path, repeat: int
) -> tuple[dict[str, float], list[tuple[float, str]]]:
    """Phase times and (median seconds, 'CODE name') of every detector (skip check + detect).

    The detectors first run once on the small log, so that the libraries they import lazily
    (ruptures, scipy) are not charged to whichever detector happens to run first. Then the
    whole `analyze_run` is timed once on the freshly read run (the per-run caches cold, as in
    the CLI), then each detector on its own (caches warm)."""
    from logscope.detectors.registry import all_detectors

    from logscope.analyze import analyze_run
    from logscope.ingest import load

    phases: dict[str, float] = {}
    t = time.perf_counter()
    tiny = load(small)[0]
    for det in all_detectors():
        if not det.skip_reason(tiny):
            det.detect(tiny)
    phases["imports + every detector on the 100-step log"] = time.perf_counter() - t
    t = time.perf_counter()
    run = load(log)[0]
    phases["reading the log (logscope.ingest.load)"] = time.perf_counter() - t
    detectors = all_detectors()
    t = time.perf_counter()
    analyze_run(run, detectors)
    phases["analyze_run: every detector + incidents, once"] = time.perf_counter() - t
    out = []
    for det in detectors:
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            if not det.skip_reason(run):
                det.detect(run)
            times.append(time.perf_counter() - t)
        out.append((statistics.median(times), f"{det.code} {det.name}"))
    out.sort(reverse=True)
    return phases, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="10000,100000", help="steps, comma-separated")
    ap.add_argument("--big", action="store_true", help="add 1,000,000 steps")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--big-repeat", type=int, default=1, help="repetitions at 1M steps")
    ap.add_argument("--detector-repeat", type=int, default=1)
    ap.add_argument("--no-detectors", action="store_true", help="skip the per-detector table")
    ap.add_argument("--json", type=Path, default=None, help="write the results here (runner)")
    args = ap.parse_args(argv)
    res = Results("analyze", command_line())
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.big and 1_000_000 not in sizes:
        sizes.append(1_000_000)

    # Generated in a child: a child forked from a big parent inherits its RSS high-water mark
    # (ru_maxrss), so this process stays small until the timed children have run.
    logs = {}
    for n in [100, *sizes]:
        t = time.perf_counter()
        logs[n] = console_log_in_child(n)
        if time.perf_counter() - t > 10:  # else it was already there (the child's start is ~2 s)
            res.say(f"generated {logs[n].name} in {time.perf_counter() - t:.0f} s")

    rows: dict[int, tuple[float, float, float, list[float]]] = {}
    for n in [100, *sizes]:
        reps = args.big_repeat if n >= 1_000_000 else args.repeat
        runs = [analyze_once(logs[n]) for _ in range(reps)]
        walls = [r[0] for r in runs]
        rows[n] = (
            statistics.median(walls),
            statistics.median(r[1] for r in runs),
            max(r[2] for r in runs),
            walls,
        )
    base = rows[100][0]
    res.say(
        f"{'steps':>9s}{'log MB':>9s}{'wall s':>9s}{'cpu s':>8s}{'peak MB':>9s}"
        f"{'vs 100':>9s}   wall runs"
    )
    for n, (wall, cpu, rss, walls) in rows.items():
        mb = logs[n].stat().st_size / 1e6
        res.say(
            f"{n:9,d}{mb:9.1f}{wall:9.2f}{cpu:8.2f}{rss:9.0f}{wall / base:8.1f}x   {fmt_times(walls)}"
        )
    res.say(
        "(baseline: the same command on a 100-step log = process start + imports + fixed costs)"
    )

    if 100_000 in rows:
        wall, cpu = rows[100_000][0], rows[100_000][1]
        res.check(
            "analyze 100k steps, wall (median, fresh process)",
            wall,
            "s",
            f"<= {TARGET_100K_S:g} s",
            wall <= TARGET_100K_S,
            note=f"CPU {cpu:.2f} s; {wall / base:.1f}x the 100-step baseline",
        )
        lines = [per_line_once(logs[100_000]) for _ in range(args.repeat)]
        line_wall = statistics.median(w for w, _ in lines)
        line_cpu = statistics.median(c for _, c in lines)
        res.say(f"per-line parse alone, 100k steps: {line_wall:.2f} s wall, {line_cpu:.2f} s CPU")
        res.check(
            "analyze 100k steps vs the per-line parse alone (wall)",
            line_wall / wall,
            "x",
            f">= {TARGET_VS_PER_LINE:g}x",
            line_wall / wall >= TARGET_VS_PER_LINE,
            note=f"per-line parse {line_wall:.2f} s, analyze {wall:.2f} s; CPU ratio "
            f"{line_cpu / cpu:.1f}x",
        )
    for a, b in ((10_000, 100_000), (100_000, 1_000_000)):
        if a in rows and b in rows:
            for what, i in (("wall time", 0), ("peak RSS", 2)):
                ratio = rows[b][i] / rows[a][i]
                res.check(
                    f"growth {a // 1000}k→{b // 1000}k steps, {what}",
                    ratio,
                    "x",
                    f"<= {TARGET_GROWTH:g}x",
                    ratio <= TARGET_GROWTH,
                    note=f"{rows[a][i]:.2f} → {rows[b][i]:.2f} {'s' if i == 0 else 'MB'}"
                    + (f"; CPU time {rows[b][1] / rows[a][1]:.1f}x" if i == 0 else ""),
                )
        elif a == 100_000 and b == 1_000_000:
            res.check(
                "growth 100k→1M steps, wall time and peak RSS",
                None,
                "x",
                f"<= {TARGET_GROWTH:g}x",
                None,
                note="not run: add --big (writes a 2.7 GB log)",
            )

    if not args.no_detectors and 100_000 in logs:
        phases, dets = per_detector(logs[100_000], logs[100], args.detector_repeat)
        total = sum(t for t, _ in dets)
        res.say(f"in-process wall times at 100k steps ({len(dets)} detectors):")
        for label, secs in phases.items():
            res.say(f"  {label:52s}{secs:8.2f} s")
        res.say(f"  {'sum of the detectors timed one by one (warm caches)':52s}{total:8.2f} s")
        res.say(f"{'detector':40s}{'seconds':>9s}{'share':>8s}")
        for t, name in dets[:5]:
            res.say(f"{name:40s}{t:9.3f}{t / total:8.0%}")
    res.write(args.json)
    return res.exit_code()


if __name__ == "__main__":
    sys.exit(main())
