"""Alert delivery against a real HTTP server on 127.0.0.1: retries, outbox, no secret leaks."""

from __future__ import annotations

import json

from logscope.alerts import Alert, Notifier, Outbox, SlackSender, plain
from tests.helpers import block_texts
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
        blocks=[{"type": "section", "text": plain("a<b>&*x*")}],
    )


def test_delivers_and_records_body(tmp_path) -> None:
    with SlackStandIn() as slack:
        n = Notifier(Outbox(tmp_path / "box"), SlackSender(slack.url), min_interval_s=0)
        n.submit(_alert(1))
        assert n.flush() == 1
        assert slack.received[0]["text"] == "KL jumped at step 1"
        assert slack.received[0]["blocks"][0]["text"]["text"] == "a&lt;b&gt;&amp;*x*"
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


def test_identifiers_reach_slack_unaltered(tmp_path) -> None:
    """Parameter keys, overrides and the run name in the message Slack receives are exactly the
    run's own (copyable); only &, <, > are escaped, as Slack requires."""
    from logscope.alerts import incident_alert
    from logscope.analyze import analyze_run
    from logscope.synthetic import Injection, simulate

    sim = simulate(n_steps=200, algorithm="grpo", seed=3, inject=[Injection("kl-jump", 120)])
    report = analyze_run(sim.to_run())
    incident = next(i for i in report.incidents if i.first_mover == "kl-jump")
    first = report.findings[incident.findings[0]]
    assert any("_" in a.parameter for a in first.advice)
    run_name = "qwen_7b_*grpo*_a<b>&c"
    with SlackStandIn() as slack:
        n = Notifier(Outbox(tmp_path / "box"), SlackSender(slack.url), min_interval_s=0)
        n.submit(incident_alert(report, incident, run_name))
        assert n.flush() == 1
        (body,) = slack.received
    assert "\u200b" not in json.dumps(body, ensure_ascii=False)
    mrkdwn = "\n".join(block_texts(body["blocks"], "mrkdwn"))
    for adv in first.advice:
        assert f"`{adv.parameter}`" in mrkdwn, adv.parameter  # in code: never auto-formatted
        assert adv.override in mrkdwn
    plain = block_texts(body["blocks"], "plain_text")
    assert any("qwen_7b_*grpo*_a&lt;b&gt;&amp;c" in t for t in plain), plain
    assert first.message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in plain


def test_outbox_files_alerts_per_run(tmp_path) -> None:
    """Runs sharing one folder each list and deliver only their own alerts."""
    a, b = Outbox(tmp_path, "a.log-0123456789ab"), Outbox(tmp_path, "b.log-ba9876543210")
    a.put(_alert(1))
    b.put(_alert(1))  # the same incident id in another run is another alert
    b.put(_alert(2))
    assert [x.step for x in a.pending()] == [1]
    assert sorted(x.step for x in b.pending()) == [1, 2]
    with SlackStandIn() as slack:
        assert Notifier(a, SlackSender(slack.url), min_interval_s=0).flush() == 1
    assert a.pending() == [] and len(b.pending()) == 2
    assert all(p.name.startswith(("a.log-", "b.log-")) for p in tmp_path.glob("*.json"))
