"""`logscope tail`: follow a live verl log and alert (Slack or terminal) once per incident."""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from logscope.cli.common import (
    ConfigOption,
    FailOn,
    OnlyOption,
    SkipOption,
    StoreOption,
    split_codes,
    user_errors,
)
from logscope.exceptions import LogscopeError
from logscope.wake import ChangeWaiter

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr)?\s*$", re.I)


def parse_duration(text: str) -> float:
    """'90', '90s', '10m', '1.5h' → seconds."""
    m = _DURATION.match(text)
    if not m:
        raise LogscopeError(f"--stall-after {text!r}: expected a duration like 600, 10m or 1h")
    value, unit = float(m.group(1)), (m.group(2) or "s").lower()
    return value * {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600}[unit]


def tail(
    path: Annotated[
        Path,
        typer.Argument(
            help="What verl writes while it trains: its console log (the tee output), its JSONL "
            "file-logger file, or a TensorBoard event file or run folder."
        ),
    ],
    slack_webhook: Annotated[
        str | None,
        typer.Option(
            "--slack-webhook",
            envvar="LOGSCOPE_SLACK_WEBHOOK",
            show_default=False,
            help="Slack incoming-webhook URL (a secret: never printed). Without it, alerts go to the terminal.",
        ),
    ] = None,
    from_start: Annotated[
        bool, typer.Option("--from-start", help="Alert on what the file already holds too.")
    ] = False,
    min_severity: Annotated[
        FailOn, typer.Option("--min-severity", help="Alert at or above this severity.")
    ] = FailOn.warning,
    cooldown_steps: Annotated[
        int, typer.Option("--cooldown-steps", help="Don't re-alert a diagnosis within N steps.")
    ] = 50,
    stall_after: Annotated[
        str | None,
        typer.Option(
            "--stall-after",
            help="Alert when no new step came for this long: a duration such as 90s, 30m or 2h "
            "(a bare number is seconds). Default: 5× the median step time, at least 5m.",
        ),
    ] = None,
    state_file: Annotated[
        Path | None, typer.Option("--state-file", help="Remember what was alerted across restarts.")
    ] = None,
    outbox: Annotated[
        Path | None,
        typer.Option(
            "--outbox",
            help="Folder for undelivered alerts, filed per followed run so tails can share it "
            "(default: $XDG_STATE_HOME/logscope/outbox, else ~/.local/state/logscope/outbox).",
        ),
    ] = None,
    once: Annotated[
        bool, typer.Option("--once", help="Process what is there now, deliver alerts, exit.")
    ] = False,
    poll_interval: Annotated[
        float,
        typer.Option(
            "--poll-interval",
            help="Seconds between file checks. On a local disk a change also wakes logscope at "
            "once (inotify) and checks run every 5 s at least.",
        ),
    ] = 0.5,
    only: OnlyOption = None,
    skip: SkipOption = None,
    store: StoreOption = None,
    config: ConfigOption = None,
    live: Annotated[
        bool, typer.Option("--live/--no-live", help="Show the live status view on a terminal.")
    ] = True,
) -> None:
    """Follow a growing verl log (console, JSONL or TensorBoard); alert once per incident, with
    the advice `analyze` gives.

    When tail stops, the run it followed is saved in the store (--store) as analyze caches it,
    for dashboard and compare.

    Example: LOGSCOPE_SLACK_WEBHOOK=https://hooks.slack.com/services/... logscope tail verl.log --state-file tail.json
    """
    from logscope import settings
    from logscope.alerts import Notifier, Outbox, SlackSender
    from logscope.tail import FOLLOWED, TailOptions, TailSession, default_outbox, run_key

    console = Console(stderr=True)
    with user_errors():
        if min_severity == FailOn.never:
            raise LogscopeError(
                "--min-severity never would never alert; choose info, warning, error or critical"
            )
        options = TailOptions(
            min_severity=min_severity.value,
            cooldown_steps=cooldown_steps,
            stall_after_s=parse_duration(stall_after) if stall_after else None,
            from_start=from_start,
            only=split_codes(only),
            skip=split_codes(skip),
        )
        notifier = None
        if slack_webhook:
            if not slack_webhook.startswith(("http://", "https://")):
                raise LogscopeError(
                    "--slack-webhook / LOGSCOPE_SLACK_WEBHOOK is not an http(s) URL"
                )
            box = Outbox(outbox or default_outbox(), run_key(path))
            notifier = Notifier(box, SlackSender(slack_webhook))
        with settings.using(config):
            session = TailSession(path, options, notifier, state_file)

    stop = {"now": False}
    waiter = ChangeWaiter(path, poll_interval)

    def _stop(signum, frame):
        # Graceful: the send in flight finishes (its outcome decides whether the alert leaves
        # the outbox), then the loop ends; undelivered alerts stay in the outbox for next time.
        stop["now"] = True
        waiter.wake()
        if notifier is not None:
            notifier.stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    target = "Slack" if notifier else "the terminal"
    what = f" ({FOLLOWED[session.kind]})" if session.kind else ""
    console.print(
        Text(f"logscope tail: following {path}{what}; alerts go to {target}", style="bold")
    )
    show_live = live and console.is_terminal and not once
    finished = False  # not when the source turned out not followable
    try:
        with user_errors():  # a source found not followable once it appeared
            if show_live:
                with Live(
                    _view(session), console=console, refresh_per_second=2, transient=False
                ) as view:
                    _loop(session, console, once, waiter, stop, lambda: view.update(_view(session)))
            else:
                _loop(session, console, once, waiter, stop, lambda: None)
        finished = True
    except KeyboardInterrupt:
        finished = True
        if notifier is not None:
            notifier.stopping = True
    finally:
        waiter.close()
        _print_alerts(console, session.close())  # the last full pass's, if window passes ran
        if finished:
            _save_to_store(session, store, console)
        if notifier is not None:
            notifier.flush()
            pending = len(notifier.outbox.pending())
            if pending:
                # failures are already scrubbed of the webhook URL by SlackSender
                why = f" (last error: {notifier.failures[-1]})" if notifier.failures else ""
                console.print(
                    Text(
                        f"{pending} alert(s) not yet delivered{why}; kept in "
                        f"{notifier.outbox.folder}",
                        style="yellow",
                    )
                )


def _print_alerts(console: Console, alerts: list) -> None:
    for alert in alerts:
        style = "bold red" if alert.severity in ("error", "critical") else "yellow"
        console.print(Text(alert.text, style=style))


def _loop(session, console: Console, once: bool, waiter: ChangeWaiter, stop: dict, refresh) -> None:
    idle_cycles = 0
    while not stop["now"]:
        before = session.position
        alerts = session.cycle()
        for note in session.status.notes:
            console.print(Text(f"note: {note}", style="dim"))
        _print_alerts(console, alerts)
        refresh()
        if once:
            idle_cycles = idle_cycles + 1 if session.position == before else 0
            if idle_cycles >= 2:
                break
            continue
        waiter.wait()


def _save_to_store(session, store: Path | None, console: Console) -> None:
    """Keep the followed run in the store, read as `analyze` reads (and caches) it."""
    from logscope.store import Store

    if session.kind is None or not session.path.exists():
        return
    try:
        Store(store).load(session.path)
    except LogscopeError as exc:
        console.print(Text(f"note: not saved to the store: {exc}", style="dim"))


def _view(session) -> Group:
    st = session.status
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("file", Text(str(session.path)))
    table.add_row(
        "step", Text(str(st.step) if st.step is not None else "waiting for the first step")
    )
    if st.steps_per_min:
        table.add_row("steps/min", Text(f"{st.steps_per_min:.2f}"))
    for name, value in st.last_metrics.items():
        table.add_row(name, Text(f"{value:.4g}"))
    table.add_row(
        "stalled", Text("yes" if st.stalled else "no", style="red" if st.stalled else "green")
    )
    incidents = Text("\n".join(st.open_incidents) or "none")
    return Group(table, Text("open incidents:", style="bold"), incidents)
