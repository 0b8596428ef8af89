"""A fleet: one `logscope analyze runs/` over many small runs vs a shell loop of single calls.

    python bench/fleet.py [--runs 1000] [--steps 500] [--loop-sample 20]

Generates RUNS verl console logs of STEPS steps (logscope.synthetic, GRPO; every fifth with a KL
jump, every seventh with NaN losses; cached in the bench work folder). Then, in fresh
processes with empty stores:
- `python -m logscope analyze FOLDER --format json` (the whole fleet, one command);
- the shell loop a user would write, `for f in FOLDER/*.log; do logscope analyze $f; done`, on
  the first LOOP_SAMPLE logs, its time scaled to RUNS (each call pays the same process start and
  imports, so the per-call cost is what scales).
The fleet's findings must equal the single calls' findings for the sampled runs. Target: the
fleet in ≤ 60 s on 2 cores for 1,000 × 500 steps, ≥ 5× faster than the loop.

CPU is counted for the whole process tree (the command, its forkserver and pool workers: this
script makes itself their subreaper and reaps them), so on a shared machine the CPU seconds
per run, and the wall time they imply on idle cores, are the figures to compare.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
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

from bench._common import Results, command_line, workdir

TARGET_SECONDS = 60.0
TARGET_RATIO = 5.0


def make_fleet(runs: int, steps: int) -> Path:
    """RUNS generated logs in one folder (made once, reused)."""
    from logscope.synthetic import Injection, simulate, write_console_log

    folder = workdir("fleet", f"{runs}x{steps}")
    for i in range(runs):
        path = folder / f"run{i:04d}.log"
        if path.exists():
            continue
        inject = []
        if i % 5 == 1:
            inject.append(Injection("kl-jump", steps // 2))
        if i % 7 == 3:
            inject.append(Injection("nan-loss", steps * 3 // 4))
        tmp = path.with_suffix(".tmp")
        write_console_log(simulate(steps, "grpo", seed=i, inject=inject), tmp, ansi=False)
        tmp.replace(path)
    return folder


PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux), so that the CPU time
    of the command's forkserver and pool workers ends up in RUSAGE_CHILDREN."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def analyze(paths: list[str], store: Path, out: Path) -> tuple[float, float]:
    """(wall s, CPU s of the command and every process it started) of one `logscope analyze`."""
    cmd = [sys.executable, "-m", "logscope", "analyze", *paths, "--format", "json"]
    cmd += ["--store", str(store), "--output", str(out), "--fail-on", "never"]
    before = _children_cpu()
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status = os.waitpid(proc.pid, 0)
    wall = time.perf_counter() - t
    while True:  # its orphans (the forkserver, which reaped the workers; resource tracker)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"logscope analyze exited {os.waitstatus_to_exitcode(status)}")
    return wall, _children_cpu() - before


def _findings(report: dict) -> list[tuple]:
    return sorted((f["code"], f["step"], f["message"]) for f in report["findings"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--loop-sample", type=int, default=20)
    ap.add_argument("--json", type=Path, default=None, help="write the results here (runner)")
    args = ap.parse_args(argv)
    res = Results("fleet", command_line())
    tree = _become_subreaper()
    folder = make_fleet(args.runs, args.steps)
    logs = sorted(folder.glob("*.log"))[: args.runs]
    size = sum(p.stat().st_size for p in logs) / 1e6
    res.say(f"== {len(logs)} runs × {args.steps} steps, {size:.0f} MB in {folder} ==")
    with tempfile.TemporaryDirectory(prefix="logscope-bench-fleet-") as tmp:
        out = Path(tmp) / "fleet.json"
        fleet_wall, fleet_cpu = analyze([str(folder)], Path(tmp) / "store", out)
        fleet = json.loads(out.read_text())
        by_path = {r["run"]["source"]["path"]: r for r in fleet["reports"]}
        loop_wall = loop_cpu = 0.0
        same = True
        sample = logs[: args.loop_sample]
        for n, log in enumerate(sample):
            one = Path(tmp) / f"one{n}.json"
            wall, cpu = analyze([str(log)], Path(tmp) / f"store{n}", one)
            loop_wall += wall
            loop_cpu += cpu
            same &= _findings(json.loads(one.read_text())) == _findings(by_path[str(log)])
    scale = len(logs) / len(sample)
    loop_wall, loop_cpu = loop_wall * scale, loop_cpu * scale
    cores = len(os.sched_getaffinity(0))
    res.say(f"{'':44s}{'wall s':>9s}{'cpu s':>9s}{'cpu ms/run':>12s}{'cpu/cores s':>13s}")
    for label, wall, cpu in (
        ("one analyze of the folder", fleet_wall, fleet_cpu),
        (f"shell loop ({len(sample)} calls × {scale:g})", loop_wall, loop_cpu),
    ):
        per_run = cpu / len(logs) * 1000
        res.say(f"{label:44s}{wall:9.1f}{cpu:9.1f}{per_run:12.0f}{cpu / cores:13.1f}")
    res.say(
        f"(cpu: the command and {'every process it started' if tree else 'its waited children'}"
        f"; cpu/cores: the wall time on {cores} idle cores, a lower bound)"
    )
    res.say(f"runs in the fleet report: {fleet['summary']['runs']}; by worst severity: "
            f"{fleet['summary']['by_worst_severity']}")  # fmt: skip
    res.say(f"same findings as single calls for the {len(sample)} sampled runs: {same}")
    full = args.runs >= 1000 and args.steps >= 500
    ratio = loop_wall / fleet_wall
    res.check(
        f"{len(logs):,} runs × {args.steps} steps: one analyze of the folder (wall)",
        fleet_wall,
        "s",
        f"<= {TARGET_SECONDS:g} s",
        (fleet_wall <= TARGET_SECONDS) if full else None,
        note=f"{fleet_wall / len(logs) * 1000:.0f} ms per run; CPU {fleet_cpu:.1f} s with the "
        f"pool workers ({fleet_cpu / len(logs) * 1000:.0f} ms per run, "
        f"{fleet_cpu / cores:.0f} s on {cores} idle cores)"
        + ("" if full else "; the target is for 1,000 × 500 steps"),
    )
    res.check(
        "fleet vs a shell loop of single analyze calls (wall)",
        ratio,
        "x",
        f">= {TARGET_RATIO:g}x, same findings",
        (ratio >= TARGET_RATIO and same) if full else (None if same else False),
        note=f"loop timed on {len(sample)} calls and scaled to {len(logs):,}; "
        f"CPU ratio {loop_cpu / fleet_cpu:.1f}x",
    )
    res.write(args.json)
    return res.exit_code()


if __name__ == "__main__":
    sys.exit(main())
