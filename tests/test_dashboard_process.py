"""`logscope dashboard` as a process: a busy port is exit 2 naming it; SIGTERM/SIGINT stop
Streamlit and free the port."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logscope.cli.main import app

pytest.importorskip("streamlit")

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_a_busy_port_is_exit_2_naming_it(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(
            app, ["dashboard", "--port", str(port), "--store", str(tmp_path)]
        )
    assert result.exit_code == 2
    assert f"port {port} on 127.0.0.1 is in use" in " ".join(result.output.split())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_streamlit_and_frees_the_port(tmp_path: Path, sig: int) -> None:
    port = free_port()
    env = {**os.environ, "LOGSCOPE_STORE": str(tmp_path)}
    cmd = [sys.executable, "-m", "logscope", "dashboard", str(ROOT / "fixtures" / "verl_tuned.log")]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the signal goes to logscope alone, as `kill PID` would
    )
    try:
        deadline = time.monotonic() + 120
        while bindable(port):  # until Streamlit listens
            assert proc.poll() is None, "the dashboard exited before serving"
            assert time.monotonic() < deadline, "Streamlit never listened"
            time.sleep(0.2)
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 0
        deadline = time.monotonic() + 10
        while not bindable(port):
            assert time.monotonic() < deadline, f"port {port} still taken after the signal"
            time.sleep(0.2)
    finally:  # whatever happened, nothing of the group (Streamlit included) outlives the test
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
