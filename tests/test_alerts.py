"""Alert delivery against a real HTTP server on 127.0.0.1: retries, outbox, no secret leaks."""

from __future__ import annotations

import json

from logscope.alerts import Alert, Notifier, Outbox, SlackSender, mrkdwn_escape
from tests.slack_server import SlackStandIn


def _alert(i: int) -> Alert:
    return Alert(
        id=f"incident:kl-jump@{i}:1",
        kind="incident",
        severity="error",
        run_name="run <b>&",
        title="KL jumped",
        step=i,
        text=f"KL jumped at step {i}",
        blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn_escape("a<b>&*x*")}}],
    )


def test_delivers_and_records_body(tmp_path) -> None:
    with SlackStandIn() as slack:
        n = Notifier(Outbox(tmp_path / "box"), SlackSender(slack.url), min_interval_s=0)
        n.submit(_alert(1))
        assert n.flush() == 1
        assert slack.received[0]["text"] == "KL jumped at step 1"
        assert slack.received[0]["blocks"][0]["text"]["text"].startswith("a&lt;b&gt;&amp;")
        assert n.outbox.pending() == []


def test_429_with_retry_after_then_delivered(tmp_path) -> None:
    with SlackStandIn([(429, {"Retry-After": "1"})]) as slack:
        n = Notifier(Outbox(tmp_path / "box"), SlackSender(slack.url), min_interval_s=0)
        n.submit(_alert(1))
        assert n.flush() == 1
        assert len(slack.attempts) == 2
        assert slack.attempts[1] - slack.attempts[0] >= 0.9  # honoured Retry-After
        assert len(slack.received) == 1


def test_outage_keeps_alerts_in_outbox_until_back(tmp_path) -> None:
    down = [(500, {})] * 20
    with SlackStandIn(down) as slack:
        sender = SlackSender(slack.url, max_retries=1)
        n = Notifier(Outbox(tmp_path / "box"), sender, min_interval_s=0, retry_after_s=0)
        for i in range(3):
            n.submit(_alert(i))
        assert n.flush() == 0
        assert len(n.outbox.pending()) == 3
        slack.plan.clear()  # the webhook works again
        assert n.flush() == 3
        assert [b["text"] for b in slack.received] == [f"KL jumped at step {i}" for i in range(3)]


def test_connection_refused_then_restart_delivers_once(tmp_path) -> None:
    box = tmp_path / "box"
    dead = SlackSender("http://127.0.0.1:9/services/T/B/secret-token-xyz", timeout=1, max_retries=1)
    n = Notifier(Outbox(box), dead, min_interval_s=0, retry_after_s=0)
    n.submit(_alert(7))
    assert n.flush() == 0
    assert n.failures and all("secret-token-xyz" not in f for f in n.failures)
    # a new process with the same outbox delivers it, once
    with SlackStandIn() as slack:
        n2 = Notifier(Outbox(box), SlackSender(slack.url), min_interval_s=0)
        assert n2.flush() == 1
        assert n2.flush() == 0
        assert len(slack.received) == 1


def test_secret_never_in_outbox_or_repr(tmp_path) -> None:
    with SlackStandIn([(500, {})] * 10) as slack:
        sender = SlackSender(slack.url, max_retries=0)
        n = Notifier(Outbox(tmp_path / "box"), sender, min_interval_s=0)
        n.submit(_alert(1))
        n.flush()
        assert "secret-token-xyz" not in repr(sender)
        for f in (tmp_path / "box").iterdir():
            assert "secret-token-xyz" not in f.read_text()
        assert all("secret-token-xyz" not in x for x in n.failures)
        json.dumps([a.to_dict() for a in n.outbox.pending()])
