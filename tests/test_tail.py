"""`logscope tail`: parity with analyze, one alert per incident, restarts, faults, stalls.

A simulated run with injected pathologies is written as a verl console log; a writer appends it
to the followed file chunk by chunk (in a thread at a realistic pace for the Slack test), while
the session polls it. Slack is a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from logscope.alerts import Notifier, Outbox, SlackSender
from logscope.analyze import analyze_run
from logscope.ingest import load
from logscope.synthetic import Injection, simulate, write_console_log
from logscope.tail import TailOptions, TailSession
from tests.slack_server import SlackStandIn

INJECTED = [
    Injection("memory-leak", 60),
    Injection("grad-norm-spike", 150),
    Injection("entropy-collapse", 220),
]


@pytest.fixture(scope="module")
def full_log(tmp_path_factory) -> Path:
    sim = simulate(n_steps=300, algorithm="grpo", seed=7, inject=INJECTED, version="0.5")
    path = tmp_path_factory.mktemp("tail") / "full.log"
    write_console_log(sim, path, version="0.5")
    return path


def _chunks(path: Path, n: int) -> list[bytes]:
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    size = max(1, len(lines) // n)
    return [b"".join(lines[i : i + size]) for i in range(0, len(lines), size)]


def _keys(report) -> set:
    return {(f.name, f.metric, f.step) for f in report.findings}


def test_parity_with_analyze(full_log: Path, tmp_path: Path) -> None:
    target = tmp_path / "live.log"
    session = TailSession(target, TailOptions(from_start=True))
    for chunk in _chunks(full_log, 40):
        with target.open("ab") as fh:
            fh.write(chunk)
        session.cycle()
    session.cycle()
    (run,) = load(full_log, source="verl-console")
    expected = analyze_run(run)
    assert session.report is not None
    assert _keys(session.report) == _keys(expected)
    assert {f.name for f in expected.findings} >= {i.kind for i in INJECTED}


def _write_at_pace(src: Path, dst: Path, seconds: float, stop: threading.Event) -> None:
    chunks = _chunks(src, 60)
    for chunk in chunks:
        if stop.is_set():
            return
        with dst.open("ab") as fh:
            fh.write(chunk)
        time.sleep(seconds / len(chunks))


def _follow(session: TailSession, writer: threading.Thread, settle: int = 4) -> None:
    idle = 0
    while writer.is_alive() or idle < settle:
        before = session.follower.state.offset
        session.cycle()
        idle = idle + 1 if session.follower.state.offset == before and not writer.is_alive() else 0
        time.sleep(0.02)


def _incident_names(received: list[dict]) -> list[str]:
    return [b["text"].split(":", 1)[0] for b in received]


def test_one_alert_per_incident_through_slack(full_log: Path, tmp_path: Path) -> None:
    target = tmp_path / "live.log"
    with SlackStandIn([(429, {"Retry-After": "1"}), (500, {})]) as slack:
        notifier = Notifier(
            Outbox(tmp_path / "box"), SlackSender(slack.url), min_interval_s=0, retry_after_s=0
        )
        session = TailSession(target, TailOptions(from_start=True), notifier)
        stop = threading.Event()
        writer = threading.Thread(target=_write_at_pace, args=(full_log, target, 3.0, stop))
        writer.start()
        try:
            _follow(session, writer)
        finally:
            stop.set()
            writer.join()
        for _ in range(20):
            if not notifier.outbox.pending():
                break
            notifier.flush()
            time.sleep(0.1)
        assert notifier.outbox.pending() == []
        report = session.report
        assert report is not None
        expected = [
            inc for inc in report.incidents if inc.severity in ("warning", "error", "critical")
        ]
        incident_msgs = [b for b in slack.received if not b["text"].startswith("Update")]
        # one message per incident, and every injected pathology is in one of them
        assert len(incident_msgs) == len(expected)
        texts = "\n".join(b["text"] for b in slack.received)
        # each incident's message names its first mover and the step where it began
        for inc in expected:
            assert any(
                inc.first_mover in json.dumps(b["blocks"]) and f"step {inc.step}" in b["text"]
                for b in incident_msgs
            ), inc
        # every injected pathology is found by the live run, within 5 steps of the truth
        for inj in INJECTED:
            steps = [f.step for f in report.findings if f.name == inj.kind and f.step is not None]
            assert steps and min(abs(s - inj.step) for s in steps) <= 5, (inj, steps)
        ids = [b["text"] for b in slack.received]
        assert len(ids) == len(set(ids)), "an alert was sent twice"
        assert slack.url not in texts


def test_restart_sends_nothing_twice(full_log: Path, tmp_path: Path) -> None:
    target = tmp_path / "live.log"
    state = tmp_path / "state.json"
    chunks = _chunks(full_log, 20)
    with SlackStandIn() as slack:

        def session() -> TailSession:
            n = Notifier(Outbox(tmp_path / "box"), SlackSender(slack.url), min_interval_s=0)
            return TailSession(target, TailOptions(from_start=True), n, state)

        first = session()
        for chunk in chunks[: len(chunks) // 2]:
            with target.open("ab") as fh:
                fh.write(chunk)
            first.cycle()
        first.close()
        sent_before = len(slack.received)
        second = session()
        second.cycle()
        assert len(slack.received) == sent_before  # nothing re-sent on restart
        for chunk in chunks[len(chunks) // 2 :]:
            with target.open("ab") as fh:
                fh.write(chunk)
            second.cycle()
        second.cycle()
        texts = [b["text"] for b in slack.received]
        assert len(texts) == len(set(texts))
        assert len(texts) > sent_before  # the second half still alerted what was new


def test_without_from_start_existing_content_is_context(full_log: Path, tmp_path: Path) -> None:
    target = tmp_path / "live.log"
    target.write_bytes(full_log.read_bytes())
    session = TailSession(target, TailOptions())
    assert session.cycle() == []
    assert session.report is not None and session.report.findings


def test_truncation_and_rotation_are_followed(full_log: Path, tmp_path: Path) -> None:
    target = tmp_path / "live.log"
    chunks = _chunks(full_log, 10)
    session = TailSession(target, TailOptions(from_start=True))
    with target.open("ab") as fh:
        fh.write(b"".join(chunks[:3]))
    session.cycle()
    seen = session.status.steps_seen
    target.rename(tmp_path / "live.log.1")  # rotation
    target.write_bytes(b"".join(chunks[3:6]))
    session.cycle()
    assert session.status.steps_seen > seen
    assert any("replaced" in n for n in session.status.notes)
    target.write_bytes(chunks[6])  # truncation: smaller than what was read
    session.cycle()
    assert any("truncated" in n or "replaced" in n for n in session.status.notes)


def test_stall_and_recovery(full_log: Path, tmp_path: Path) -> None:
    now = [1000.0]
    target = tmp_path / "live.log"
    chunks = _chunks(full_log, 30)
    session = TailSession(
        target, TailOptions(from_start=True, stall_after_s=60), clock=lambda: now[0]
    )
    for chunk in chunks[:10]:
        with target.open("ab") as fh:
            fh.write(chunk)
        now[0] += 5
        session.cycle()
    now[0] += 61
    stalled = session.cycle()
    assert [a.kind for a in stalled] == ["stalled"]
    assert session.cycle() == []  # said once
    with target.open("ab") as fh:
        fh.write(b"".join(chunks[10:12]))
    now[0] += 1
    recovered = session.cycle()
    assert "recovered" in [a.kind for a in recovered]
