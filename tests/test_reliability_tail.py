"""`logscope tail` under faults: the log deleted and recreated, the file replaced under it, the
webhook down for a stretch, SIGTERM in the middle of a send. Every alert is delivered exactly
once: never lost, never doubled.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from logscope.alerts import Notifier, Outbox, SlackSender, slack_control_escape
from logscope.analyze import analyze_run
from logscope.ingest import load
from logscope.synthetic import Injection, simulate, write_console_log
from logscope.tail import TailOptions, TailSession
from tests._reliability import logscope_argv, subprocess_env
from tests.slack_server import SlackStandIn

A_INJECTED = [Injection("memory-leak", 60), Injection("entropy-collapse", 150)]
B_INJECTED = [Injection("grad-norm-spike", 90), Injection("kl-jump", 160)]


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tailfaults")
    out = []
    for name, seed, inject in (("a", 11, A_INJECTED), ("b", 12, B_INJECTED)):
        sim = simulate(n_steps=220, algorithm="grpo", seed=seed, inject=inject, version="0.5")
        path = folder / f"{name}.log"
        write_console_log(sim, path, version="0.5")
        out.append(path)
    return out[0], out[1]


def _chunks(data: bytes, n: int) -> list[bytes]:
    lines = data.splitlines(keepends=True)
    size = max(1, len(lines) // n)
    return [b"".join(lines[i : i + size]) for i in range(0, len(lines), size)]


def _keys(report) -> set:
    return {(f.name, f.metric, f.step) for f in report.findings}


def _analyze(path: Path):
    (run,) = load(path, source="verl-console")
    return run, analyze_run(run)


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as fh:
        fh.write(data)


def test_log_deleted_and_recreated(logs, tmp_path) -> None:
    """A new run written to the same name: followed from its start, read as a run of its own
    (the same findings as `analyze` of the new file), nothing of the old run alerted twice."""
    a, b = logs
    target = tmp_path / "live.log"
    session = TailSession(target, TailOptions(from_start=True))
    sent = []
    for chunk in _chunks(a.read_bytes(), 8):
        _append(target, chunk)
        sent += session.cycle()
    target.unlink()
    sent += session.cycle()
    assert any("waiting for" in n for n in session.status.notes)
    for chunk in _chunks(b.read_bytes(), 8):
        _append(target, chunk)
        sent += session.cycle()
    sent += session.cycle()
    run_b, expected = _analyze(b)
    assert session.report is not None
    assert _keys(session.report) == _keys(expected)
    assert session.run.steps.tolist() == run_b.steps.tolist()
    assert len(session.run.events) == len(run_b.events)
    ids = [alert.id for alert in sent]
    assert len(ids) == len(set(ids)), "an alert was raised twice"
    texts = "\n".join(alert.text for alert in sent)
    for inj in B_INJECTED:  # the new run's problems were alerted
        assert inj.kind in texts or any(f.name == inj.kind for f in expected.findings)


def _replace_with(target: Path, data: bytes) -> None:
    """What rsync/cp-then-mv do: a new file (new inode) renamed over the followed one."""
    tmp = target.with_name(f".{target.name}.sync")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def test_file_replaced_by_a_synced_copy(logs, tmp_path) -> None:
    """The disk view changes under the follower: every sync writes a new inode holding the same
    prefix plus more; once a stale shorter copy appears. Nothing is read twice, nothing is
    alerted twice, and the result is what `analyze` of the final file says."""
    a, _ = logs
    data = a.read_bytes()
    target = tmp_path / "live.log"
    session = TailSession(target, TailOptions(from_start=True))
    cuts = [len(b"".join(_chunks(data, 10)[: i + 1])) for i in range(10)]
    sent = []
    notes = []
    for i, cut in enumerate(cuts):
        _replace_with(target, data[:cut])
        sent += session.cycle()
        notes += session.status.notes
        if i == 5:  # a stale copy from an earlier sync (shorter): re-read, then the fresh one
            _replace_with(target, data[: cuts[2]])
            sent += session.cycle()
            notes += session.status.notes
    sent += session.cycle()
    assert any("copy of what was read" in n for n in notes), notes
    run, expected = _analyze(a)
    assert _keys(session.report) == _keys(expected)
    assert len(session.run.events) == len(run.events), "lines were read twice"
    assert session.run.parse_stats.step_lines == run.parse_stats.step_lines
    ids = [alert.id for alert in sent]
    assert len(ids) == len(set(ids))
    titles = collections.Counter((alert.kind, alert.title, alert.step) for alert in sent)
    assert all(n == 1 for n in titles.values()), titles


def _stand_in_down() -> tuple[SlackStandIn, int]:
    """A stand-in whose port is closed (connection refused) until `_bring_up`."""
    slack = SlackStandIn()
    port = slack.server.server_address[1]
    slack.server.server_close()
    return slack, port


def _bring_up(slack: SlackStandIn, port: int) -> None:
    handler = slack.server.RequestHandlerClass
    slack.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    slack.thread = threading.Thread(target=slack.server.serve_forever, daemon=True)
    slack.thread.start()


@pytest.mark.parametrize("outage", ["http-503", "connection-refused"])
def test_webhook_down_for_a_stretch_then_back(logs, tmp_path, outage) -> None:
    a, _ = logs
    data = a.read_bytes()
    target = tmp_path / "live.log"
    if outage == "http-503":
        slack = SlackStandIn([(503, {})] * 10_000)
        slack.thread.start()
        url = slack.url
    else:
        slack, port = _stand_in_down()
        url = f"http://127.0.0.1:{port}/services/T000/B000/secret-token-xyz"
    try:
        sender = SlackSender(url, timeout=2, max_retries=0)
        notifier = Notifier(Outbox(tmp_path / "box"), sender, min_interval_s=0, retry_after_s=0)
        session = TailSession(target, TailOptions(from_start=True), notifier, tmp_path / "s.json")
        chunks = _chunks(data, 12)
        raised = []
        for i, chunk in enumerate(chunks):
            if i == 9:  # back up
                if outage == "http-503":
                    slack.plan.clear()
                else:
                    _bring_up(slack, port)
            _append(target, chunk)
            raised += session.cycle()
            if i == 8:
                assert notifier.failures, "the outage was not noticed"
                assert len(notifier.outbox.pending()) == len(raised) > 0, "alerts were lost"
        for _ in range(20):
            raised += session.cycle()
            if not notifier.outbox.pending():
                break
        assert notifier.outbox.pending() == []
        assert raised
        expected = collections.Counter(slack_control_escape(alert.text[:3000]) for alert in raised)
        got = collections.Counter(body["text"] for body in slack.received)
        assert got == expected, "not every alert delivered exactly once"
    finally:
        slack.server.shutdown()
        slack.server.server_close()


class _SlowSlack(SlackStandIn):
    """A stand-in that takes `delay` seconds before it handles (and answers) each request."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.started = threading.Event()
        stand_in = self
        base = self.server.RequestHandlerClass

        class Slow(base):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:
                stand_in.started.set()
                time.sleep(stand_in.delay)
                super().do_POST()

        self.server.RequestHandlerClass = Slow


SECRET_PATH = "/services/T0SECRET/B0SECRET/sEcReT-tOkEn-0123456789"


def _secret_url(slack: SlackStandIn) -> str:
    host, port = slack.server.server_address[:2]
    return f"http://{host}:{port}{SECRET_PATH}"


def test_sigterm_during_a_send(logs, tmp_path) -> None:
    """SIGTERM while Slack is answering: that send completes and leaves the outbox, the alerts
    behind it stay there, the next run delivers them; each exactly once, nothing lost."""
    a, _ = logs
    log_before = a.read_bytes()
    state, box = tmp_path / "state.json", tmp_path / "outbox"
    base = ["tail", str(a), "--from-start", "--state-file", str(state), "--outbox", str(box)]
    with _SlowSlack(delay=1.5) as slack:
        env = subprocess_env(LOGSCOPE_SLACK_WEBHOOK=_secret_url(slack))
        proc = subprocess.Popen(
            logscope_argv(*base, "--no-live", "--poll-interval", "0.2"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        try:
            assert slack.started.wait(60), "tail never sent anything"
            time.sleep(0.3)  # mid-request: Slack has the request and has not answered
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
        assert proc.returncode == 0, err.decode()
        first = [body["text"] for body in slack.received]
        assert len(first) == 1, "the send in flight did not complete, or more were sent"
        pending = {
            slack_control_escape(json.loads(p.read_text())["text"][:3000])
            for p in box.glob("*.json")
        }
        assert pending, "the alerts behind the interrupted send should wait in the outbox"
        assert first[0] not in pending
        slack.delay = 0.0
        second = subprocess.run(
            logscope_argv(*base, "--once"), capture_output=True, env=env, timeout=120
        )
        assert second.returncode == 0, second.stderr.decode()
    texts = [body["text"] for body in slack.received]
    assert len(texts) == len(set(texts)), "an alert was delivered twice"
    assert set(texts) == set(first) | pending
    assert list(box.glob("*.json")) == []
    for blob in (out, err, second.stdout, second.stderr, state.read_bytes()):
        assert b"sEcReT" not in blob
    for blob in (err, second.stderr):  # stopped cleanly: no warning, no traceback
        assert b"InotifyEmitter" not in blob and b"Traceback" not in blob, blob.decode()
    assert a.read_bytes() == log_before, "tail modified the log it follows"


def test_unreadable_path_is_noted_once_then_followed(tmp_path) -> None:
    """The path turns into something unreadable (here a directory; as non-root also chmod 000):
    one note, no exception, no repeat on every poll; once it is a log again, it is followed."""
    from logscope.follow import LineFollower

    target = tmp_path / "live.log"
    target.mkdir()
    follower = LineFollower(target)
    first = follower.poll()
    assert [n for n in first.notes if "cannot read" in n], first.notes
    assert follower.poll().notes == []  # said once
    target.rmdir()
    target.write_text("step:1 - a:1\nstep:2 - a:2\n")
    polled = follower.poll()
    assert [text for _, text in polled.lines] == ["step:1 - a:1", "step:2 - a:2"]


def test_tail_on_a_directory_is_a_user_error(tmp_path) -> None:
    from tests._reliability import cli

    result = cli("tail", str(tmp_path), "--once", "--no-live")
    assert result.exit_code == 2
    assert "isadirectory" in result.message and str(tmp_path) in result.message


def test_stopping_the_wake_up_watch_logs_nothing(tmp_path, caplog) -> None:
    """SIGTERM stops the inotify watch while the log is being written: watchdog's emitter may
    be reading an event at that moment; stopping must stay silent (no InotifyEmitter error)."""
    import logging

    from logscope.wake import ChangeWaiter

    log = tmp_path / "train.log"
    log.write_text("")
    if not ChangeWaiter(log, 0.5).watching:
        pytest.skip("a polled file system: no inotify watch to stop")
    stop = threading.Event()

    def write() -> None:
        with log.open("a") as fh:
            while not stop.is_set():
                fh.write("step:1 - a:1\n")
                fh.flush()

    writer = threading.Thread(target=write)
    writer.start()
    caplog.set_level(logging.DEBUG, logger="watchdog")
    try:
        for _ in range(60):  # the race hits about one stop in ten
            ChangeWaiter(log, 0.5).close()
    finally:
        stop.set()
        writer.join()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
