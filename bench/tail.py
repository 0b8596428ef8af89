"""`logscope tail`: alert latency to a local Slack stand-in, and CPU while idle.

    python bench/tail.py [--sessions 20] [--pace 0.2] [--idle 20]

Latency. For each session a verl console log is simulated (logscope.synthetic, 100 steps) with
one pathology (CUDA OOM traceback, non-finite grad norm warnings, NaN losses, KL jump, memory
leak, … in turn). The line that completes it is found first, offline: the shortest prefix of the
log on which logscope's own tail pipeline (`TailSession`, fed the prefix) raises an alert. Then
the real CLI runs in a subprocess,

    logscope tail LOG --slack-webhook http://127.0.0.1:PORT/... --from-start --no-live

against an HTTP Slack stand-in in this process (tests/slack_server.py), and a writer appends the
log: the lines up to 10 steps before the completing line at once (history), then the rest at
`--pace` seconds per step line (a compressed training pace), recording when each line was
written. Latency = arrival of the first POST − write of the completing line. Median and p95 over
the sessions (one alert each). Target p95 ≤ 1 s.

Idle CPU. The same command on a finished 100-step log that no longer grows: after it has read
the file, its CPU time (utime + stime from /proc/PID/stat) over `--idle` seconds of wall time.
Target < 1 % of a core.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path[:] = [
        p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent
    ]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Results, command_line, percentile, workdir

TARGET_P95_S = 1.0
TARGET_IDLE_PCT = 1.0
KINDS = ("cuda-oom", "grad-norm-not-finite", "nan-loss", "kl-jump", "memory-leak")
STEPS = 100


def scenario_log(index: int) -> tuple[Path, str]:
    from logscope.synthetic import Injection, simulate, write_console_log

    kind = KINDS[index % len(KINDS)]
    path = workdir("tail") / f"s{index:02d}_{kind}.log"
    if not path.exists():
        sim = simulate(STEPS, "grpo", seed=100 + index, inject=[Injection(kind, 55 + index % 20)])
        write_console_log(sim, path)
    return path, kind


def alerts_on_prefix(lines: list[str], k: int) -> int:
    """How many alerts logscope's tail pipeline raises on the first `k` lines."""
    from logscope.tail import TailOptions, TailSession

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prefix.log"
        path.write_text("".join(lines[:k]))
        session = TailSession(path, TailOptions(from_start=True))
        try:
            return len(session.cycle())
        finally:
            session.close()


def completing_line(lines: list[str]) -> int | None:
    """Index of the line that completes the first alerted pathology (binary search, checked)."""
    if not alerts_on_prefix(lines, len(lines)):
        return None
    lo, hi = 0, len(lines)  # no alert on lines[:lo]; an alert on lines[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if alerts_on_prefix(lines, mid):
            hi = mid
        else:
            lo = mid
    return hi - 1


def start_tail(log: Path, url: str, poll: float) -> subprocess.Popen:
    argv = [
        sys.executable,
        "-m",
        "logscope",
        "tail",
        str(log),
        "--slack-webhook",
        url,
        "--from-start",
        "--no-live",
        "--poll-interval",
        str(poll),
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=log.parent
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()  # "logscope tail: following …" once the session is set up
    if "following" not in first:
        proc.kill()
        raise RuntimeError(f"logscope tail did not start: {first!r} {proc.stderr.read()[:500]}")
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # drain
    return proc


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def is_step_line(line: str) -> bool:
    return "step:" in line and " - " in line


def session(index: int, stand_in, pace: float, poll: float) -> tuple[str, float | None, str]:  # type: ignore[no-untyped-def]
    """(kind, latency s or None, note) of one tail session."""
    log_src, kind = scenario_log(index)
    lines = log_src.read_text().splitlines(keepends=True)
    k = completing_line(lines)
    if k is None:
        return kind, None, "no alert on the whole log"
    steps_before = [i for i in range(k) if is_step_line(lines[i])]
    start_paced = steps_before[-10] if len(steps_before) >= 10 else 0
    with tempfile.TemporaryDirectory(prefix="logscope-bench-tail-") as tmp:
        log = Path(tmp) / "train.log"
        log.write_text("")
        n_before = len(stand_in.attempts)
        proc = start_tail(log, stand_in.url, poll)
        written: dict[int, float] = {}
        try:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write("".join(lines[:start_paced]))
                fh.flush()
                time.sleep(2 * poll)  # the history is read before the live part starts
                end = min(len(lines), k + 40)
                for i in range(start_paced, end):
                    if is_step_line(lines[i]):
                        time.sleep(pace)
                    fh.write(lines[i])
                    fh.flush()
                    written[i] = time.monotonic()
                    if i > k and len(stand_in.attempts) > n_before:
                        break
            deadline = time.monotonic() + 20
            while len(stand_in.attempts) == n_before and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            stop(proc)
    if len(stand_in.attempts) == n_before:
        return kind, None, "no POST within 20 s"
    arrived = stand_in.attempts[n_before]
    return kind, arrived - written[k], f"completing line {k + 1}: {lines[k].strip()[:70]!r}"


def idle_cpu(stand_in, seconds: float, poll: float) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(CPU % of one core, wall s) of `logscope tail` on a log that does not grow."""
    log, _ = scenario_log(3)
    tick = os.sysconf("SC_CLK_TCK")

    def cpu(pid: int) -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick  # utime, stime

    proc = start_tail(log, stand_in.url, poll)
    try:
        time.sleep(5.0)  # read and analyse the file, send its alerts
        c0, t0 = cpu(proc.pid), time.monotonic()
        time.sleep(seconds)
        c1, t1 = cpu(proc.pid), time.monotonic()
    finally:
        stop(proc)
    return 100.0 * (c1 - c0) / (t1 - t0), t1 - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sessions", type=int, default=20, help="tail sessions (one alert each)")
    ap.add_argument("--pace", type=float, default=0.2, help="seconds between step lines")
    ap.add_argument("--poll", type=float, default=0.5, help="--poll-interval of logscope tail")
    ap.add_argument("--idle", type=float, default=20.0, help="seconds of idle tailing measured")
    ap.add_argument("--json", type=Path, default=None, help="write the results here (runner)")
    args = ap.parse_args(argv)
    res = Results("tail", command_line())
    from tests.slack_server import SlackStandIn

    latencies: list[float] = []
    with SlackStandIn() as stand_in:
        res.say(f"{'session':>8s}  {'pathology':22s}{'latency s':>10s}   completing line")
        for i in range(args.sessions):
            kind, latency, note = session(i, stand_in, args.pace, args.poll)
            shown = "—" if latency is None else f"{latency:.3f}"
            res.say(f"{i + 1:8d}  {kind:22s}{shown:>10s}   {note}")
            if latency is not None:
                latencies.append(latency)
        pct, wall = idle_cpu(stand_in, args.idle, args.poll)
    if latencies:
        med, p95 = statistics.median(latencies), percentile(latencies, 0.95)
        res.say(
            f"alerts: {len(latencies)} of {args.sessions} sessions; latency median {med:.3f} s, "
            f"p95 {p95:.3f} s, max {max(latencies):.3f} s (poll interval {args.poll} s)"
        )
        res.check(
            f"tail alert latency p95 (write of the completing line → POST), {len(latencies)} alerts",
            p95,
            "s",
            f"<= {TARGET_P95_S:g} s, >= 20 alerts",
            p95 <= TARGET_P95_S and len(latencies) >= 20,
            note=f"median {med:.3f} s; ratio p95 / poll interval {p95 / args.poll:.1f}",
        )
    else:
        res.check(
            "tail alert latency p95",
            None,
            "s",
            f"<= {TARGET_P95_S:g} s",
            False,
            note="no alert arrived",
        )
    res.check(
        f"tail idle CPU (file not growing, {wall:.0f} s)",
        pct,
        "%",
        f"< {TARGET_IDLE_PCT:g} % of a core",
        pct < TARGET_IDLE_PCT,
    )
    res.write(args.json)
    return res.exit_code()


if __name__ == "__main__":
    sys.exit(main())
