"""Shared helpers of the bench scripts: timing, results, the machine's description.

Every script prints medians of repeated timings and ratios against a baseline timed in the same
run, and can write its results as JSON (`--json FILE`) for `python -m bench`, which turns them
into docs/performance.md. A result line is a `Check`: a measured value, its target, pass/fail.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
WORKDIR = Path(os.environ.get("LOGSCOPE_BENCH_DIR", Path(tempfile.gettempdir()) / "logscope-bench"))
# Commands are timed as an installed package runs them: with bytecode caches (pip compiles them
# at install). Where PYTHONDONTWRITEBYTECODE is set, every fresh process would compile every
# module again (~0.6 s of a small run), which no installed copy pays.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def fix_sys_path() -> None:
    """`python bench/x.py` puts bench/ first on sys.path, where bench/tensorboard.py would shadow
    the tensorboard package; use the repository root instead."""
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH]
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def workdir(*parts: str) -> Path:
    path = WORKDIR.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def cpu_seconds() -> float:
    """CPU time (user + system) of this process, all its threads, and its waited-for children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@dataclass
class Timing:
    """Repeated timings of one contender: wall seconds (what the targets use) and CPU seconds
    (less sensitive to other processes on a shared machine)."""

    walls: list[float]
    cpus: list[float]
    result: Any = None

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus)


def timed(fn: Callable[[], Any], repeat: int) -> Timing:
    """`repeat` calls of `fn`, each timed (wall and CPU); keeps the last result."""
    walls: list[float] = []
    cpus: list[float] = []
    result = None
    for _ in range(repeat):
        c = cpu_seconds()
        t = time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - t)
        cpus.append(cpu_seconds() - c)
    return Timing(walls, cpus, result)


def fmt_times(times: list[float]) -> str:
    return "[" + ", ".join(f"{t:.3f}" for t in times) + "]"


@dataclass
class Check:
    """One line of the performance table."""

    topic: str
    what: str
    value: float | None
    unit: str  # "x", "s", "MB", "%"
    target: str  # e.g. ">= 5x"
    passed: bool | None  # None: not measured (see note)
    note: str = ""

    def line(self) -> str:
        verdict = {True: "PASS", False: "MISS", None: "n/a"}[self.passed]
        val = (
            "—"
            if self.value is None
            else f"{self.value:,.2f}{'' if self.unit == 'x' else ' '}{self.unit}"
        )
        note = f"  ({self.note})" if self.note else ""
        return f"[{verdict}] {self.what}: {val}  target {self.target}{note}"


@dataclass
class Results:
    """What a script hands to the runner."""

    topic: str
    command: str
    checks: list[Check] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # the printed table, for the doc

    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def check(self, *args: Any, **kwargs: Any) -> Check:
        c = Check(self.topic, *args, **kwargs)
        self.checks.append(c)
        self.say(c.line())
        return c

    def write(self, path: Path | None) -> None:
        if path is None:
            return
        data = {
            "topic": self.topic,
            "command": self.command,
            "checks": [asdict(c) for c in self.checks],
            "lines": self.lines,
        }
        Path(path).write_text(json.dumps(data, indent=1))

    def exit_code(self) -> int:
        return 0 if all(c.passed is not False for c in self.checks) else 1


def command_line() -> str:
    return "python " + " ".join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]])


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024**2
    except OSError:
        pass
    return None


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


PACKAGES = (
    "logscope",
    "polars",
    "pyarrow",
    "numpy",
    "ruptures",
    "protobuf",
    "tensorboard",
    "tbparse",
    "wandb",
    "slack_sdk",
    "streamlit",
)


def machine() -> dict[str, Any]:
    """nproc, memory, CPU model, OS, Python and key package versions, load average."""
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    mem = _mem_total_gb()
    return {
        "nproc": os.cpu_count(),
        "memory_gb": round(mem, 1) if mem else None,
        "cpu_model": _cpu_model(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "packages": {p: _version(p) for p in PACKAGES},
        "loadavg": [round(x, 2) for x in load] if load else None,
    }


def console_log(
    steps: int,
    *,
    algorithm: str = "ppo",
    seed: int = 1,
    inject: tuple[tuple[str, float], ...] = (("kl-jump", 0.6),),
    ansi: bool = True,
    tag: str = "",
) -> Path:
    """A generated verl console log (logscope.synthetic), cached in the bench work folder.

    `inject` holds (pathology, position as a fraction of the run)."""
    from logscope.synthetic import Injection, simulate, write_console_log

    kinds = "-".join(f"{k}@{f:g}" for k, f in inject) or "healthy"
    path = workdir("logs") / f"{algorithm}_{steps}_{seed}_{kinds}{tag}.log"
    if not path.exists():
        injections = [Injection(k, max(1, int(steps * f))) for k, f in inject]
        sim = simulate(steps, algorithm, seed=seed, inject=injections)
        tmp = path.with_suffix(".tmp")
        write_console_log(sim, tmp, ansi=ansi)
        tmp.replace(path)
    return path


def run_child(cmd: list[str], **kwargs: Any) -> tuple[float, float, float, int]:
    """Run `cmd` to completion: (wall s, CPU s, peak RSS MB, exit code) of that child alone."""
    import subprocess

    t = time.perf_counter()
    proc = subprocess.Popen(cmd, **kwargs)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def console_log_in_child(steps: int) -> Path:
    """`console_log(steps)` made in a child process, so its memory is not charged to the bench."""
    code = "import sys; from bench._common import console_log; print(console_log(int(sys.argv[1])))"
    out = subprocess.run(
        [sys.executable, "-c", code, str(steps)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return Path(out.stdout.strip().splitlines()[-1])


def percentile(values: list[float], q: float) -> float:
    """The q-quantile of `values`, linear between the two nearest ranks (numpy's default)."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
