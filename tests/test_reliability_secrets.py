"""Secrets and injection.

The Slack webhook URL never appears in output, reports, exceptions, the state file, the outbox
or the store. Log content (metric names, file names, error lines, config values) with HTML,
Markdown, Slack mrkdwn or rich-markup control characters is shown as text by every renderer:
terminal, Markdown, HTML, Slack blocks and the dashboard.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from logscope.alerts import Notifier, Outbox, SlackSender, incident_alert, status_alert
from logscope.analyze import analyze_paths
from tests._reliability import cli, logscope_argv, subprocess_env
from tests.helpers import block_texts
from tests.slack_server import SlackStandIn

TOKEN = "xXsEcReTtOkEn4242Xx"
SECRET_PATH = f"/services/T0{TOKEN}/B0{TOKEN}/{TOKEN}"

HOSTILE = [
    "<script>alert(1)</script>",
    "[bold]b[/bold]",
    "[red]r[/red]",
    "*star*",
    "_under_",
    "`tick`",
    "a|b",
    "<!channel>",
    "&amp;",
    "<@U123>",
    "<http://evil.example|click>",
    "~strike~",
]
HOSTILE_LINE = " ".join(HOSTILE)


# ---- a log full of hostile text ---------------------------------------------------------------


def _hostile_log(folder: Path) -> Path:
    """Hostile text in the file name, the experiment name, an error line, a garbled step line."""
    from logscope.synthetic import Injection, simulate, write_console_log

    folder.mkdir(parents=True, exist_ok=True)
    sim = simulate(
        n_steps=160,
        seed=5,
        inject=[Injection("kl-jump", 100)],
        config={"trainer.experiment_name": "exp " + HOSTILE_LINE},
    )
    path = folder / "run [bold]B[red] <img src=x onerror=alert(1)> *s* _u_ |p|.log"
    write_console_log(sim, path)
    with path.open("a") as fh:
        fh.write(f"step:161 - actor/pg_loss:0.1 - x:{HOSTILE_LINE} - y:2\n")
        fh.write("Traceback (most recent call last):\n")
        fh.write('  File "train.py", line 1, in <module>\n')
        fh.write(f"RuntimeError: boom {HOSTILE_LINE}\n")
    return path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    path = _hostile_log(folder)
    (report,) = analyze_paths([path], store_dir=folder / "store")
    messages = " ".join(f.message for f in report.findings)
    assert "<script>" in messages, "the test log should put hostile text into a finding"
    assert report.run.parse_stats.skipped_examples, "and into a skipped line"
    assert "<script>" in str(report.run.meta.get("experiment")), report.run.meta
    return path, report, folder / "store"


# ---- secrets ------------------------------------------------------------------------------


def _files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


def _assert_no_secret(blobs: dict[str, bytes]) -> None:
    for name, blob in blobs.items():
        assert TOKEN.encode() not in blob, f"the webhook secret leaked into {name}"


def test_webhook_url_is_never_written(tmp_path, hostile) -> None:
    """tail (Slack up, then Slack down) and analyze (every format, to files and stdout) with a
    recognisable secret URL: no output and no file written holds it."""
    path, _, _ = hostile
    work = tmp_path / "work"
    work.mkdir()
    blobs: dict[str, bytes] = {}
    tail = ["tail", str(path), "--from-start", "--once", "--state-file", str(work / "s.json")]
    tail += ["--outbox", str(work / "outbox")]
    # Slack up, and the same URL with Slack gone (its own state, so every alert is attempted
    # and fails); both at once.
    down_tail = [a if a != str(work / "s.json") else str(work / "s2.json") for a in tail]
    down_tail = [a if a != str(work / "outbox") else str(work / "outbox2") for a in down_tail]
    with SlackStandIn() as slack:
        host, port = slack.server.server_address[:2]
        url = f"http://{host}:{port}{SECRET_PATH}"
        store_env = {"LOGSCOPE_STORE": str(work / "store")}
        runs = [
            (logscope_argv(*tail), subprocess_env(LOGSCOPE_SLACK_WEBHOOK=url, **store_env)),
            (
                logscope_argv(*down_tail, "--slack-webhook", url.replace(f":{port}/", ":9/")),
                subprocess_env(**store_env),
            ),
        ]
        procs = [
            subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            for argv, env in runs
        ]
        (up_out, up_err), (down_out, down_err) = (p.communicate(timeout=120) for p in procs)
        assert procs[0].returncode == 0, up_err.decode()
        assert slack.received, "nothing was sent: the secret path was not exercised"
    assert b"not yet delivered (last error:" in down_err, down_err.decode()
    up = subprocess.CompletedProcess(runs[0][0], procs[0].returncode, up_out, up_err)
    down = subprocess.CompletedProcess(runs[1][0], procs[1].returncode, down_out, down_err)
    blobs.update(tail_up_out=up.stdout, tail_up_err=up.stderr)
    blobs.update(tail_down_out=down.stdout, tail_down_err=down.stderr)
    for fmt in ("rich", "json", "markdown", "html"):
        result = cli(
            "analyze", str(path), "-f", fmt, "--store", str(work / "store"),
            "-o", str(work / f"report.{fmt}"), "--fail-on", "never",
            env={"LOGSCOPE_SLACK_WEBHOOK": url},
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        blobs[f"analyze_{fmt}"] = (result.stdout + result.stderr).encode()
    helped = cli("tail", "--help", env={"LOGSCOPE_SLACK_WEBHOOK": url})
    blobs["tail_help"] = helped.stdout.encode()
    written = _files_under(work)
    assert any(p.name == "s.json" for p in written) and any(p.suffix == ".parquet" for p in written)
    for file in written:
        blobs[str(file.relative_to(work))] = file.read_bytes()
    _assert_no_secret(blobs)


def test_bad_webhook_value_is_not_echoed() -> None:
    result = cli("tail", "x.log", "--slack-webhook", f"hooks.slack.com{SECRET_PATH}", "--once")
    assert result.exit_code == 2
    assert "not an http(s) URL" in result.stderr
    _assert_no_secret({"stderr": result.stderr.encode(), "stdout": result.stdout.encode()})


@pytest.mark.parametrize(
    "url",
    [
        f"http://127.0.0.1:9{SECRET_PATH}",  # connection refused
        f"http://no-such-host.invalid{SECRET_PATH}",  # DNS failure
        f"http://[::1{SECRET_PATH}",  # malformed: the client raises
    ],
)
def test_send_errors_are_scrubbed(tmp_path, url) -> None:
    sender = SlackSender(url, timeout=1, max_retries=0)
    notifier = Notifier(Outbox(tmp_path / "box"), sender, min_interval_s=0)
    notifier.submit(status_alert("stalled", "run", 3, "no step", "error"))
    assert notifier.flush() == 0
    assert notifier.failures
    blobs = {"failures": "\n".join(notifier.failures).encode()}
    blobs["repr"] = (repr(sender) + repr(notifier.__dict__)).encode()
    for file in _files_under(tmp_path):
        blobs[file.name] = file.read_bytes()
    _assert_no_secret(blobs)


# ---- terminal (rich) ------------------------------------------------------------------------


def _rich_text(report) -> str:
    from logscope.cli.render import render_report

    buf = io.StringIO()
    render_report(report, Console(file=buf, width=400, force_terminal=False, color_system=None))
    return buf.getvalue()


def test_terminal_prints_markup_literally(hostile) -> None:
    path, report, _ = hostile
    text = _rich_text(report)
    assert path.name in text  # `[bold]B[red]` in the file name printed as is
    for token in ("[bold]b[/bold]", "[red]r[/red]", "<script>alert(1)</script>", "<!channel>"):
        assert token in text, token


def test_terminal_error_messages_print_markup_literally(tmp_path) -> None:
    path = tmp_path / "[bold]nope[red]x.log"
    result = cli("analyze", str(path))
    assert result.exit_code == 2
    assert "[bold]nope[red]x.log" in result.message


def test_tail_terminal_alerts_print_markup_literally(hostile, tmp_path) -> None:
    path, _, _ = hostile
    result = cli("tail", str(path), "--from-start", "--once", "--no-live")
    assert result.exit_code == 0, result.stderr
    assert "[bold]b[/bold]" in result.stderr + result.stdout


# ---- Markdown ------------------------------------------------------------------------------


def _markdown_html(text: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table").render(text)


def test_markdown_escapes_log_text(hostile) -> None:
    _, report, _ = hostile
    md = report.to_markdown()
    html_out = _markdown_html(md)
    assert "<script" not in html_out
    assert "<img" not in html_out  # from the file name
    for marked in ("<em>star</em>", "<em>under</em>", "<em>s</em>", "<em>u</em>"):
        assert marked not in html_out, marked
    assert "<a " not in html_out  # `<http://evil|click>` did not become a link
    # a `|` from the log does not add table cells: every table row has two cells
    for row in re.findall(r"<tr>(.*?)</tr>", html_out, flags=re.S):
        assert len(re.findall(r"<t[dh]>", row)) == 2, row
    # and the text is still there to read
    plain = re.sub(r"<[^>]+>", "", html_out)
    import html as html_mod

    plain = html_mod.unescape(plain)
    assert "<script>alert(1)</script>" in plain and "*star*" in plain


# ---- HTML ----------------------------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.add(tag)

    def handle_data(self, data) -> None:
        self.text.append(data)


def test_html_escapes_log_text(hostile) -> None:
    _, report, _ = hostile
    parser = _Tags()
    parser.feed(report.to_html())
    allowed = {"html", "head", "meta", "title", "style", "body", "h1", "h3", "table", "tr"}
    allowed |= {"th", "td", "div", "span", "code", "p", "ul", "li", "em", "pre"}
    assert parser.tags <= allowed, parser.tags - allowed
    text = "".join(parser.text)
    assert "<script>alert(1)</script>" in text and "<!channel>" in text


# ---- Slack ---------------------------------------------------------------------------------


def test_slack_blocks_escape_log_text(hostile, tmp_path) -> None:
    _, report, _ = hostile
    run_name = report.run.meta["experiment"]
    alerts = [incident_alert(report, inc, run_name) for inc in report.incidents]
    alerts.append(status_alert("stalled", run_name, 3, HOSTILE_LINE, "error"))
    assert any(
        "<script>" in a.text for a in alerts
    )  # the content is there, unescaped, for terminals
    for alert in alerts:
        for text in block_texts(alert.blocks, "mrkdwn"):
            stripped = re.sub(r"&(amp|lt|gt);", "", text)
            assert not re.search(r"[<>&]", stripped), text
            for mark in ("*star*", "_under_", "`tick`", "~strike~"):
                assert mark not in text, (mark, text)
    # what actually reaches Slack: no mention, no link, no tag anywhere in the body
    with SlackStandIn() as slack:
        notifier = Notifier(Outbox(tmp_path / "box"), SlackSender(slack.url), min_interval_s=0)
        for alert in alerts:
            notifier.submit(alert)
        assert notifier.flush() == len(alerts)
        body = json.dumps(slack.received)
    for raw in ("<!channel>", "<@U123>", "<http://evil", "<script>"):
        assert raw not in body, raw
    assert "&lt;!channel&gt;" in body


# ---- dashboard -----------------------------------------------------------------------------


def _walk(node):
    yield node
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for child in children.values():
            yield from _walk(child)


def test_dashboard_shows_log_text_as_text(hostile, monkeypatch) -> None:
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    _, report, store = hostile
    monkeypatch.setenv("LOGSCOPE_STORE", str(store))
    monkeypatch.delenv("LOGSCOPE_RUNS", raising=False)
    app = Path(__file__).resolve().parents[1] / "app" / "app.py"
    checked = hostile_seen = 0
    for page in (None, "run", "metrics", "config"):
        at = AppTest.from_file(str(app), default_timeout=120)
        at.session_state["run_id"] = report.run.id
        at.run()
        if page:
            at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, at.exception
        assert not list(at.get("html")), "st.html with log content"
        for node in _walk(at._tree):
            proto = getattr(node, "proto", None)
            # st.text / st.code bodies are shown verbatim; everything else is Markdown
            verbatim = type(node).__name__ in ("Text", "Code", "Json")
            body = None if verbatim else getattr(proto, "body", None)
            label = getattr(proto, "label", None)
            for text in (body, label):
                if not isinstance(text, str) or not text:
                    continue
                checked += 1
                hostile_seen += "onerror" in text or "script" in text
                assert not getattr(proto, "allow_html", False), text
                rendered = _markdown_html(text)
                assert "<script" not in rendered, text
                assert "<img" not in rendered and "<em>star</em>" not in rendered, text
    assert checked > 10
    assert hostile_seen, "no Markdown element showed the hostile run name: the check proved nothing"
