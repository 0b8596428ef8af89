"""Helpers for the reliability tests: the CLI in-process, the CLI as a process with its peak RSS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None

    @property
    def message(self) -> str:
        """stderr with every blank removed (rich wraps long paths at any column)."""
        return "".join(self.stderr.split())

    def json(self) -> Any:
        return json.loads(self.stdout)


def cli(*args: str, env: dict[str, str] | None = None) -> CliResult:
    """`logscope ARGS` in this process (typer's CliRunner); tracebacks surface as `exception`."""
    from logscope.cli.main import app

    result = CliRunner().invoke(app, list(args), env=env)
    exc = result.exception
    if isinstance(exc, SystemExit):
        exc = None
    return CliResult(result.exit_code, result.stdout, result.stderr, exc)


def analyze_json(path: str | Path, *extra: str) -> CliResult:
    return cli("analyze", str(path), "-f", "json", "--no-cache", "--fail-on", "critical", *extra)


def assert_no_traceback(result: CliResult) -> None:
    assert result.exception is None, f"traceback: {result.exception!r}"
    assert "Traceback" not in result.stderr, result.stderr


def assert_user_error(result: CliResult, path: str | Path) -> None:
    """Exit 2 with a one-line message that names `path`."""
    assert_no_traceback(result)
    assert result.exit_code == 2, (result.exit_code, result.stdout[:500], result.stderr)
    assert "".join(str(path).split()) in result.message, result.stderr


@dataclass
class ProcResult:
    returncode: int | None  # None: killed at the timeout
    peak_rss_mb: float
    seconds: float
    stdout: bytes
    stderr: bytes


def _vm_hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_measured(
    argv: list[str], timeout: float, env: dict[str, str] | None = None, cwd: str | None = None
) -> ProcResult:
    """Run `argv`; its peak RSS is the kernel's (wait4 ru_maxrss), or, when it is killed at
    `timeout`, the high-water mark (VmHWM) sampled until then."""
    import tempfile

    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=cwd
        )
        peak_kb, code = 0, None
        while True:
            peak_kb = max(peak_kb, _vm_hwm_kb(proc.pid))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                peak_kb = max(peak_kb, usage.ru_maxrss)
                code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() - start > timeout:
                proc.kill()
                os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        proc.returncode = code if code is not None else -9  # reaped here, not by Popen
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return ProcResult(code, peak_kb / 1024, seconds, out.read(), err.read())


def logscope_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "logscope", *args]


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env
