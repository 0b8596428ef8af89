"""`logscope tail`: parity with analyze, one alert per incident, restarts, faults, stalls.

A simulated run with injected pathologies is written as a verl console log; a writer appends it
to the followed file chunk by chunk (in a thread at a realistic pace for the Slack test), while
the session polls it. Slack is a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import json
import re
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


# ---- what verl writes besides the console log: JSONL file logger, TensorBoard --------------

COLLAPSE = [Injection("entropy-collapse", 80)]
# what the TensorBoard test logs (tensorboardX's pure-Python writer is slow for every metric)
TB_METRICS = ("actor/entropy", "actor/pg_loss", "critic/score/mean", "timing_s/step")


@pytest.fixture(scope="module")
def records() -> list[dict]:
    """verl's `Tracking.log` calls of a short run whose entropy collapses at step 80."""
    sim = simulate(n_steps=140, algorithm="grpo", seed=5, inject=COLLAPSE, version="0.5")
    by_step: dict[int, dict[str, float]] = {}
    for step, metric, value in sim.metrics.select("step", "metric", "value").iter_rows():
        by_step.setdefault(step, {})[metric] = value
    return [{"step": step, "data": data} for step, data in sorted(by_step.items())]


def _parts(items: list, n: int) -> list[list]:
    size = -(-len(items) // n)
    return [items[i : i + size] for i in range(0, len(items), size)]


def _analyze_finished(path: Path):
    (run,) = load(path)
    return analyze_run(run)


def _alerted(alerts) -> set[str]:
    return {a.id.split(":")[1].split("@")[0] for a in alerts if a.kind == "incident"}


def test_jsonl_file_logger_is_followed_like_analyze(records, tmp_path: Path) -> None:
    target = tmp_path / "verl_grpo" / "exp1.jsonl"
    target.parent.mkdir()
    session = TailSession(target, TailOptions(from_start=True))
    alerts = session.cycle()  # verl has not created the file yet
    assert any("waiting for" in n for n in session.status.notes)
    with target.open("w") as fh:  # verl's file logger: json.dumps + "\n" per Tracking.log call
        fh.write(json.dumps(records[0])[:30])  # the first line, half written: JSONL or text?
        fh.flush()
        alerts += session.cycle()
        assert session.kind is None  # not decided on half a line
        fh.seek(0)
        fh.truncate()
        for part in _parts(records, 4):
            for record in part:
                fh.write(json.dumps(record) + "\n")
            half = json.dumps(part[-1])[:20]
            fh.write(half)  # a line being written: not a step yet
            fh.flush()
            alerts += session.cycle()
            fh.seek(fh.tell() - len(half))
            fh.truncate()
    alerts += session.cycle()
    expected = _analyze_finished(target)
    assert session.report is not None and expected.findings
    assert _keys(session.report) == _keys(expected)
    assert session.run.metrics.equals(expected.run.metrics)  # the run analyze reads: all steps
    assert session.kind == "verl-jsonl"
    assert "entropy-collapse" in _alerted(alerts)


@pytest.mark.parametrize("followed", ["run folder", "event file"])
def test_tensorboard_events_are_followed_like_analyze(records, tmp_path, followed) -> None:
    from tensorboardX import SummaryWriter

    logdir = tmp_path / "tensorboard_log" / "verl_grpo" / "exp1"
    writer = SummaryWriter(str(logdir))
    (event_file,) = logdir.iterdir()
    target = logdir if followed == "run folder" else event_file
    session = TailSession(target, TailOptions(from_start=True))
    alerts = []
    try:
        for part in _parts(records, 4):
            for record in part:
                for tag in TB_METRICS:
                    if tag in record["data"]:
                        writer.add_scalar(tag, record["data"][tag], record["step"])
            writer.flush()
            alerts += session.cycle()
    finally:
        writer.close()  # the last events reach the file
    alerts += session.cycle()
    expected = _analyze_finished(target)
    assert session.report is not None and expected.findings
    assert _keys(session.report) == _keys(expected)
    assert session.run.metrics.equals(expected.run.metrics)
    assert session.kind == "tensorboard"
    assert "entropy-collapse" in _alerted(alerts)


@pytest.fixture
def keep_signal_handlers():
    """The CLI installs SIGTERM/SIGINT handlers; put pytest's back afterwards."""
    import signal

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_cli_follows_jsonl_and_keeps_the_run_in_the_store(
    records, tmp_path, keep_signal_handlers
) -> None:
    from logscope.store import Store
    from tests._reliability import cli

    log = tmp_path / "exp1.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    store = tmp_path / "store"
    result = cli("tail", str(log), "--from-start", "--once", "--no-live", "--store", str(store))
    assert result.exit_code == 0, result.stderr
    assert "JSONL file-logger" in result.stderr
    assert "entropy" in result.stderr.lower()  # the collapse, alerted on the terminal
    saved = Store(store).get_source(Store(store).key(log))  # as analyze caches it
    assert saved is not None, "the followed run was not saved"
    assert saved[0].metrics.equals(load(log)[0].metrics)


def test_a_source_that_does_not_grow_is_refused(tmp_path, keep_signal_handlers) -> None:
    """A W&B chart export is written once: tail says so, names the format and what to run."""
    import csv

    from tests._reliability import cli

    export = tmp_path / "wandb_export_entropy.csv"
    with export.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["Step", "exp1 - actor/entropy", "exp1 - actor/entropy__MIN"])
        out.writerows([s, 0.5 - s / 1000, 0.49 - s / 1000] for s in range(1, 50))
    result = cli("tail", str(export), "--once", "--no-live")
    assert result.exit_code == 2, result.stderr
    for words in ("wandb-csv", "doesnotfollow", f"logscopeanalyze{export}"):
        assert "".join(words.split()) in result.message, result.stderr
    assert "following" not in result.stderr


def test_tail_help_says_how_to_write_values() -> None:
    import typer

    from logscope.cli.main import app
    from logscope.cli.tail import parse_duration

    params = {p.name: p for p in typer.main.get_command(app).commands["tail"].params}
    assert "comma-separated" in params["only"].help and "comma-separated" in params["skip"].help
    assert params["store"].envvar == "LOGSCOPE_STORE"
    examples = re.findall(r"\b\d+[smh]\b", params["stall_after"].help)
    assert len(examples) >= 3
    assert all(parse_duration(e) > 0 for e in examples)


def test_restart_after_a_stall_resumes_only_on_a_new_step(full_log: Path, tmp_path: Path) -> None:
    now = [1000.0]
    target = tmp_path / "live.log"
    state = tmp_path / "state.json"
    chunks = _chunks(full_log, 30)

    def session() -> TailSession:
        options = TailOptions(from_start=True, stall_after_s=60)
        return TailSession(target, options, state_file=state, clock=lambda: now[0])

    first = session()
    for chunk in chunks[:8]:
        with target.open("ab") as fh:
            fh.write(chunk)
        now[0] += 5
        first.cycle()
    now[0] += 61
    assert [a.kind for a in first.cycle()] == ["stalled"]
    first.close()
    second = session()  # restarted: reads the same history again, no new step
    for step in (1, 1, 61):  # ... nor a second stall alert: it was said before the restart
        now[0] += step
        assert [a.kind for a in second.cycle()] == []
    assert second.status.stalled
    with target.open("ab") as fh:
        fh.write(chunks[8])
    now[0] += 1
    assert [a.kind for a in second.cycle() if a.kind in ("stalled", "recovered")] == ["recovered"]


def test_tails_in_one_folder_deliver_only_their_own_alerts(
    tmp_path, monkeypatch, keep_signal_handlers
) -> None:
    """Two runs followed from the same folder: run a's alerts wait (its webhook rejects them);
    tail b, with a webhook that works, delivers b's alerts and none of a's. Undelivered alerts
    wait in the user's state folder, filed under their run; nothing is written to the folder."""
    from tests._reliability import cli

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for name, inj in (
        ("a", Injection("memory-leak", 60)),
        ("b", Injection("entropy-collapse", 80)),
    ):
        config = {"trainer.experiment_name": f"run-{name}"}
        sim = simulate(n_steps=120, algorithm="grpo", seed=3, inject=[inj], config=config)
        write_console_log(sim, work / f"{name}.log")
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    args = ["--from-start", "--once", "--no-live", "--store", str(tmp_path / "store")]
    with SlackStandIn([(400, {})] * 100) as rejecting, SlackStandIn() as slack:
        a = cli("tail", "a.log", *args, env={**env, "LOGSCOPE_SLACK_WEBHOOK": rejecting.url})
        assert a.exit_code == 0 and "not yet delivered" in a.stderr, a.stderr
        b = cli("tail", "b.log", *args, env={**env, "LOGSCOPE_SLACK_WEBHOOK": slack.url})
        assert b.exit_code == 0, b.stderr
    assert rejecting.attempts and slack.received
    texts = [body["text"] for body in slack.received]
    assert all("(run-b," in t for t in texts), texts
    assert sorted(p.name for p in work.iterdir()) == ["a.log", "b.log"]
    waiting = list((tmp_path / "state" / "logscope" / "outbox").glob("*.json"))
    assert waiting and all(p.name.startswith("a.log-") for p in waiting)


def test_a_source_slow_to_read_is_read_again_at_most_at_its_budget(
    records, tmp_path, monkeypatch
) -> None:
    """Re-reading a big JSONL/TensorBoard source is paced by its own read time (here every read
    counts as slow); the change is read, later, not lost."""
    import logscope.tail as tail_mod

    monkeypatch.setattr(tail_mod, "THROTTLE_FROM_S", 0.0)
    now = [0.0]
    target = tmp_path / "exp1.jsonl"
    first, second = records[:50], records[50:60]
    target.write_text("".join(json.dumps(r) + "\n" for r in first))
    session = TailSession(target, TailOptions(from_start=True), clock=lambda: now[0])
    session.cycle()
    assert session.status.steps_seen == len(first)
    with target.open("a") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in second))
    session.cycle()  # too soon after the last read
    assert session.status.steps_seen == len(first)
    now[0] += 3600.0
    session.cycle()
    assert session.status.steps_seen == len(first) + len(second)


def test_the_live_view_finds_its_metrics_through_the_alias_layer(tmp_path: Path) -> None:
    """Entropy logged the older way (`actor/entropy_loss`) and the step time as
    `perf/time_per_step` are shown, and the step time sets the stall threshold."""
    target = tmp_path / "old.log"
    target.write_text(
        "".join(
            f"step:{i} - critic/score/mean:0.{i} - actor/entropy_loss:1.{i} - "
            f"perf/time_per_step:30.0\n"
            for i in range(1, 6)
        )
    )
    options = TailOptions(from_start=True, stall_k=5.0, stall_floor_s=1.0)
    session = TailSession(target, options)
    session.cycle()
    assert set(session.status.last_metrics) == {
        "critic/score/mean",
        "actor/entropy_loss",
        "perf/time_per_step",
    }
    assert session.status.last_metrics["actor/entropy_loss"] == pytest.approx(1.5)
    assert session.stall_threshold() == pytest.approx(150.0)


def test_the_state_file_holds_only_what_a_restart_reads(full_log: Path, tmp_path: Path) -> None:
    target = tmp_path / "live.log"
    target.write_bytes(_chunks(full_log, 10)[0])
    state = tmp_path / "state.json"
    session = TailSession(target, TailOptions(from_start=True), state_file=state)
    session.cycle()
    session.close()
    saved = json.loads(state.read_text())
    assert set(saved) == {
        "version",
        "path",
        "alerted",
        "sent_ids",
        "stalled",
        "stall_seen",
        "stall_step",
    }
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []
