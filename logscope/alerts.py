"""Alerts: one message per incident, to Slack (Block Kit via slack_sdk's webhook client) or the terminal.

Delivery is at-least-once and loses nothing: every alert is first written to an outbox folder,
then sent; it leaves the outbox only after Slack answered 200. Failed sends (429 with
Retry-After, 5xx, connection refused) are retried by slack_sdk's retry handlers with backoff,
and whatever is still undelivered stays in the outbox for the next attempt (also after a
restart). A global rate limit spaces messages out. The webhook URL is a secret: it is never
printed, logged, or written anywhere; error texts are scrubbed of it.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from logscope.atomic import write_atomic
from logscope.exceptions import OptionalDependencyMissing
from logscope.present import evidence_text, fmt_value, overrides

SEVERITY_EMOJI = {
    "critical": ":rotating_light:",
    "error": ":red_circle:",
    "warning": ":warning:",
    "info": ":information_source:",
}
_MRKDWN_CONTROL = re.compile(r"[&<>]")
# A run key has no "_", so "<run_key>__" ends exactly where the key does.
_RUN_KEY = re.compile(r"[A-Za-z0-9.-]+")
# Slack's limits: header text 150 characters, section and context text 3000.
_HEADER_MAX = 150
_TEXT_MAX = 2900


def slack_control_escape(text: Any) -> str:
    """Escape Slack's control characters (&, <, >), the only escaping Slack asks for: `<!channel>`,
    `<@U1>` and `<url|x>` in a log line stay text (no ping, no link), and nothing else changes."""
    return _MRKDWN_CONTROL.sub(
        lambda m: {"&": "&amp;", "<": "&lt;", ">": "&gt;"}[m.group()], str(text)
    )


def _fit(text: Any, limit: int) -> str:
    """`text` escaped, cut so that the escaped form fits `limit` (never inside an entity)."""
    raw = str(text)
    out = slack_control_escape(raw)
    while len(out) > limit:
        raw = raw[: max(0, len(raw) - (len(out) - limit))]
        out = slack_control_escape(raw)
    return out


def plain(text: Any, limit: int = _TEXT_MAX) -> dict[str, Any]:
    """A plain_text object: text from the log (run names, messages, evidence) shown exactly as
    it is, never formatted (no bold, links, emoji codes)."""
    return {"type": "plain_text", "text": _fit(text, limit), "emoji": False}


def mrkdwn(text: str) -> dict[str, Any]:
    """A mrkdwn object for logscope's own formatting; its parts are escaped by the caller."""
    return {"type": "mrkdwn", "text": text[:_TEXT_MAX]}


def code(text: Any) -> str:
    """An identifier (parameter key, value, diagnosis name) as inline code, so Slack never
    formats it: copied from the message, it is the key itself."""
    s = slack_control_escape(text)
    return f"`{s}`" if s and "`" not in s else s


@dataclass
class Alert:
    """One message: a new incident, a follow-up on one, a stall, or a recovery."""

    id: str  # unique and stable: re-sending the same id is a duplicate
    kind: str  # incident | update | stalled | recovered
    severity: str
    run_name: str
    title: str
    step: int | None
    text: str  # plain-text summary (terminal, Slack fallback)
    blocks: list[dict[str, Any]] = field(default_factory=list)
    created: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _advice_blocks(advice: list[Any]) -> list[dict[str, Any]]:
    """Per advice: the key and values as code, then the rationale and its source as text."""
    blocks: list[dict[str, Any]] = []
    for adv in advice[:3]:
        line = (
            f"{code(adv.parameter)}: current {code(_short(adv.current))} → "
            f"suggested {code(_short(adv.suggested))}"
        )
        blocks.append({"type": "section", "text": mrkdwn(line)})
        why = f"{adv.rationale} ({adv.source})" if adv.source else adv.rationale
        if why:
            blocks.append({"type": "context", "elements": [plain(why)]})
    if ovs := overrides(advice):
        block = slack_control_escape("\n".join(ovs).replace("```", "'''"))
        blocks.append({"type": "section", "text": mrkdwn(f"```{block}```")})
    return blocks


def incident_alert(
    report: Any, incident: Any, run_name: str, kind: str = "incident", new: list[int] | None = None
) -> Alert:
    """An Alert for one incident of a Report: first mover's numbers, advice, other findings."""
    findings = [report.findings[i] for i in incident.findings]
    first = findings[0]
    emoji = SEVERITY_EMOJI.get(incident.severity, "")
    head = f"{incident.severity.upper()}: {first.title}"
    if kind == "update":
        head = f"Update: {first.title}"
    where = f"step {incident.step}" if incident.step is not None else "run-level"
    lines = [f"{head} ({run_name}, {where})", first.message]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": plain(head, _HEADER_MAX)},
        {
            "type": "section",
            "fields": [
                plain(f"Run\n{run_name}", 2000),
                mrkdwn(f"*Severity*\n{emoji} {incident.severity}"),
                mrkdwn(f"*Step*\n{where}"),
                mrkdwn(f"*Diagnosis*\n{first.code} {code(first.name)}"),
            ],
        },
        {"type": "section", "text": plain(first.message)},
    ]
    if first.evidence:
        ev = evidence_text(first.evidence, digits=4, missing="None", limit=8)
        blocks.append({"type": "context", "elements": [plain(ev)]})
    blocks += _advice_blocks(first.advice)
    for adv in first.advice[:3]:
        lines.append(f"  {adv.parameter}: {_short(adv.current)} → {_short(adv.suggested)}")
    if ovs := overrides(first.advice):
        lines.append("  override: " + " ".join(ovs))
    others = findings[1:]
    if others:
        label = "New in this incident" if kind == "update" else "Also in this incident"
        listed = "\n".join(f"• {f.code} {f.name} at step {f.step}: {f.title}" for f in others[:10])
        blocks.append({"type": "section", "text": plain(f"{label}:\n{listed}")})
        lines += [f"  also: {f.name} at step {f.step}" for f in others]
    return Alert(
        id=f"{kind}:{incident.id}:{len(findings)}",
        kind=kind,
        severity=incident.severity,
        run_name=run_name,
        title=head,
        step=incident.step,
        text="\n".join(lines),
        blocks=blocks,
    )


def status_alert(kind: str, run_name: str, step: int | None, text: str, severity: str) -> Alert:
    """A stall or recovery message."""
    title = "Training stalled" if kind == "stalled" else "Training resumed"
    return Alert(
        id=f"{kind}:{step}:{int(time.time())}",
        kind=kind,
        severity=severity,
        run_name=run_name,
        title=title,
        step=step,
        text=f"{title} ({run_name}): {text}",
        blocks=[
            {"type": "header", "text": plain(title, _HEADER_MAX)},
            {"type": "section", "text": plain(f"{run_name}: {text}")},
        ],
    )


def _short(value: Any) -> str:
    """A value in an alert: 4 significant digits, a missing one as `None`."""
    return fmt_value(value, digits=4, missing="None")


class Outbox:
    """A folder of alerts not yet delivered, one JSON file each, written atomically.

    With `run_key`, the alerts are filed under that run (`<run_key>__<alert id>.json`) and only
    that run's alerts are listed: tails of different runs can share one folder, each delivering
    its own alerts only.
    """

    def __init__(self, folder: Path, run_key: str | None = None) -> None:
        if run_key is not None and not _RUN_KEY.fullmatch(run_key):
            raise ValueError(f"run key {run_key!r}: letters, digits, '.' and '-' only")
        self.folder = folder
        self.run_key = run_key
        folder.mkdir(parents=True, exist_ok=True)

    @property
    def _prefix(self) -> str:
        return f"{self.run_key}__" if self.run_key else ""

    def _path(self, alert_id: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.@-]", "_", alert_id)
        return self.folder / f"{self._prefix}{safe}.json"

    def put(self, alert: Alert) -> None:
        write_atomic(self._path(alert.id), json.dumps(alert.to_dict()))

    def remove(self, alert_id: str) -> None:
        self._path(alert_id).unlink(missing_ok=True)

    def pending(self) -> list[Alert]:
        """This run's undelivered alerts, oldest first (with no run key: every alert)."""
        out = []
        for file in self.folder.glob(f"{self._prefix}*.json"):
            try:
                out.append(Alert(**json.loads(file.read_text())))
            except (OSError, ValueError, TypeError):
                continue
        return sorted(out, key=lambda a: a.created)


class SlackSender:
    """Posts alerts to a Slack incoming webhook with retries; scrubs the URL from every error."""

    def __init__(self, webhook_url: str, timeout: int = 10, max_retries: int = 3) -> None:
        try:
            from slack_sdk.http_retry.builtin_handlers import (
                ConnectionErrorRetryHandler,
                RateLimitErrorRetryHandler,
                ServerErrorRetryHandler,
            )
            from slack_sdk.webhook import WebhookClient
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise OptionalDependencyMissing("slack_sdk", "slack", "Slack alerts") from exc
        self._url = webhook_url
        self._client = WebhookClient(
            webhook_url,
            timeout=timeout,
            retry_handlers=[
                ConnectionErrorRetryHandler(max_retry_count=max_retries),
                RateLimitErrorRetryHandler(max_retry_count=max_retries),
                ServerErrorRetryHandler(max_retry_count=max_retries),
            ],
        )

    def __repr__(self) -> str:
        return "SlackSender(<webhook hidden>)"

    def scrub(self, text: str) -> str:
        return text.replace(self._url, "<webhook>") if self._url else text

    def send(self, alert: Alert) -> tuple[bool, str]:
        """(delivered, detail). Never raises for network or HTTP failures."""
        try:
            text = slack_control_escape(alert.text[:3000])
            resp = self._client.send(text=text, blocks=alert.blocks)
        except Exception as exc:
            return False, self.scrub(f"{type(exc).__name__}: {exc}")
        if resp.status_code == 200:
            return True, "ok"
        return False, self.scrub(f"HTTP {resp.status_code}: {str(resp.body)[:200]}")


class Notifier:
    """Queues alerts in the outbox and delivers them, respecting a global rate limit."""

    def __init__(
        self,
        outbox: Outbox,
        sender: SlackSender | None,
        min_interval_s: float = 1.0,
        retry_after_s: float = 30.0,
    ) -> None:
        self.outbox = outbox
        self.sender = sender
        self.min_interval_s = min_interval_s
        self.retry_after_s = retry_after_s
        self._last_send = 0.0
        self._next_attempt = 0.0
        self.delivered: list[str] = []
        self.failures: list[str] = []
        # Set on SIGTERM/SIGINT: the send in flight completes (so its outcome is known and the
        # outbox stays exact), nothing more is sent; the rest waits in the outbox.
        self.stopping = False
        # False once a flush left the outbox empty, until the next submit: idle polls then skip
        # listing the outbox folder (alerts left by an earlier run are found by the first flush).
        self._maybe_pending = True

    def submit(self, alert: Alert) -> None:
        if self.sender is not None:
            self.outbox.put(alert)
            self._maybe_pending = True

    def flush(self, now: float | None = None) -> int:
        """Try to deliver pending alerts; returns how many were delivered."""
        if self.sender is None:
            return 0
        now = time.monotonic() if now is None else now
        if now < self._next_attempt or not self._maybe_pending:
            return 0
        sent = 0
        pending = self.outbox.pending()
        for alert in pending:
            wait = self._last_send + self.min_interval_s - time.monotonic()
            if wait > 0 and not self.stopping:
                time.sleep(wait)
            if self.stopping:
                break
            ok, detail = self.sender.send(alert)
            self._last_send = time.monotonic()
            if not ok:
                self.failures.append(detail)
                self._next_attempt = time.monotonic() + self.retry_after_s
                break
            self.outbox.remove(alert.id)
            self.delivered.append(alert.id)
            sent += 1
        self._maybe_pending = sent < len(pending)
        return sent
