"""Secrets in a log never leave through logscope: redacted once at ingest (logscope/redact.py).

One console log (fixtures/verl_tuned.log with secrets added: env lines, config values, a
traceback) holds one of each secret kind. No secret appears in any report format, in any file of
the store, in what `tail` posts to a local webhook, its state file or its outbox; the
`[redacted: …]` labels do appear; the metrics are those of the log without the secrets. Every
secret here is fake (pattern-valid only).
"""

from __future__ import annotations

import html
import json
import re
import time
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logscope import redact as redact_module
from logscope.alerts import Notifier, Outbox, SlackSender
from logscope.analyze import analyze_paths
from logscope.ingest import console_parser, load
from logscope.redact import _redact_all, redact, redact_value
from logscope.tail import TailOptions, TailSession
from tests._reliability import ROOT, cli
from tests.slack_server import SlackStandIn

SECRETS = {
    "W&B API key": "5f3c9e1a7b2d4c6e8f0a1b3c5d7e9f1a2b4c6d8e",
    "HF token": "hf_FakeTokenForTestsOnly0123456789abcd",
    "AWS access key id": "AKIAIOSFODNN7EXAMPLE",
    "AWS secret key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "Slack webhook": "https://hooks.slack.com/services/T0FAKE000/B0FAKE000/FAKEfakeFAKEfake12345678",
    "GitHub token": "ghp_FAKE0123456789abcdefghijklmnopqrstuv",
    "OpenAI key": "sk-proj-FAKEabcdefghijklmnop0123456789XYZ",
    "bearer token": "fake.bearer.Token-0123456789abcdef",
    "password in URL": "n0t-a-real-pass",
    "password=": "fake-Passw0rd-123",
    "MY_SERVICE_TOKEN=": "fake-service-token-abc123",
    "config HF token": "hf_FakeConfigTokenOnly0123456789wxyz",
    "config api_key": "cfg-fake-api-key-42",
    "config URL password": "cfg-pass-99",
}
S = SECRETS
#: labels the test log must show (each secret kind's replacement)
LABELS = [
    "W&B API key",
    "Hugging Face token",
    "AWS access key",
    "AWS secret key",
    "Slack webhook URL",
    "GitHub token",
    "OpenAI key",
    "bearer token",
    "password in URL",
    "value of password",
    "value of MY_SERVICE_TOKEN",
    "value of api_key",
]


def _secret_log(folder: Path, with_secrets: bool = True) -> Path:
    """verl_tuned.log with secrets in env lines, config values and a traceback (or, without
    secrets, the same log with the same lines holding harmless text)."""
    s = SECRETS if with_secrets else {k: "plain" for k in SECRETS}
    head = [
        f"export WANDB_API_KEY={s['W&B API key']}\n",
        f"HF_TOKEN={s['HF token']}\n",
        f"password={s['password=']}\n",
        f"MY_SERVICE_TOKEN={s['MY_SERVICE_TOKEN=']}\n",
    ]
    body = []
    for line in (ROOT / "fixtures" / "verl_tuned.log").read_text().splitlines(keepends=True):
        if "'project_name'" in line:
            pad = line[: line.index("'project_name'")]
            body.append(f"{pad}'hf_token': '{s['config HF token']}',\n")
            body.append(
                f"{pad}'notify_url': 'https://bob:{s['config URL password']}@hooks.example.com/x',\n"
            )
            body.append(f"{pad}'api_key': '{s['config api_key']}',\n")
        body.append(line)
    p = "(TaskRunner pid=50514) "
    tail = [
        f"{p}Traceback (most recent call last):\n",
        f'{p}  File "/opt/launch.py", line 7, in main\n',
        f'{p}    os.environ.update(WANDB_API_KEY="{s["W&B API key"]}", HF_TOKEN="{s["HF token"]}")\n',
        f'{p}  File "/opt/launch.py", line 9, in main\n',
        f'{p}    run("login password={s["password="]} MY_SERVICE_TOKEN={s["MY_SERVICE_TOKEN="]}")\n',
        f'{p}  File "/opt/notify.py", line 12, in post\n',
        f'{p}    requests.post("{s["Slack webhook"]}", '
        f"headers={{'Authorization': 'Bearer {s['bearer token']}'}})\n",
        f'{p}  File "/opt/upload.py", line 40, in push\n',
        f"{p}    pull('https://alice:{s['password in URL']}@artifacts.example.com/simple', "
        f"'{s['GitHub token']}', '{s['OpenAI key']}')\n",
        f"{p}botocore.exceptions.ClientError: An error occurred (SignatureDoesNotMatch): "
        f"AWS_ACCESS_KEY_ID={s['AWS access key id']} "
        f"AWS_SECRET_ACCESS_KEY={s['AWS secret key']}\n",
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ("secret.log" if with_secrets else "clean.log")
    path.write_text("".join(head + body + tail))
    return path


def _plain(blob: bytes | str) -> str:
    """The text as a reader sees it: HTML entities and Markdown escapes undone."""
    text = blob.decode("utf-8", "replace") if isinstance(blob, bytes) else blob
    return html.unescape(text).replace("\\", "")


def _leaks(blob: bytes | str) -> list[str]:
    data = blob if isinstance(blob, bytes) else blob.encode()
    text = _plain(blob)
    flat = "".join(text.split())  # a terminal may wrap a long line anywhere
    return [k for k, v in SECRETS.items() if v.encode() in data or v in text or v in flat]


def _labels(blob: bytes | str) -> set[str]:
    return set(re.findall(r"\[redacted: ([^\]]+)\]", _plain(blob)))


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


@pytest.fixture(scope="module")
def secret_log(tmp_path_factory) -> Path:
    return _secret_log(tmp_path_factory.mktemp("secrets"))


# ---- the redactor ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "label"),
    [
        (f"export WANDB_API_KEY={S['W&B API key']}", "W&B API key"),
        (f"wandb login {S['W&B API key']}", "W&B API key"),
        (f"HF_TOKEN={S['HF token']}", "Hugging Face token"),
        (f"key id {S['AWS access key id']} rejected", "AWS access key"),
        (f"aws_secret_access_key = {S['AWS secret key']}", "AWS secret key"),
        (f"post {S['Slack webhook']} failed", "Slack webhook URL"),
        (
            "https://discord.com/api/webhooks/123456789012345678/FAKE-fake_Fake",
            "Discord webhook URL",
        ),
        ("xoxb-123456789012-1234567890123-fakefakefakefake", "Slack token"),
        (f"token {S['GitHub token']}", "GitHub token"),
        (f"Incorrect API key provided: {S['OpenAI key']}", "OpenAI key"),
        (f"Authorization: Bearer {S['bearer token']}", "bearer token"),
        (f"https://alice:{S['password in URL']}@host.example.com/x", "password in URL"),
        (f"password={S['password=']}", "value of password"),
        (f"MY_SERVICE_TOKEN={S['MY_SERVICE_TOKEN=']}", "value of MY_SERVICE_TOKEN"),
        ('{"api_key": "abcd1234efgh"}', "value of api_key"),
        ("db_password: s3cr3t-Value", "value of db_password"),
        ("GOOGLE_API_KEY=AIzaSyA-FAKEfakeFAKEfake0123456789abcde", "GCP API key"),
        ("AccountName=a;AccountKey=RkFLRWZha2VGQUtFZmFrZQ==;EndpointSuffix=x", "Azure key"),
        (
            '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEfake\\n-----END PRIVATE KEY-----\\n"',
            "private key",
        ),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmYWtlIn0.ZmFrZXNpZ25hdHVyZQ", "JSON web token"),
    ],
)
def test_each_kind_is_redacted_and_named(text: str, label: str) -> None:
    out = redact(text)
    assert f"[redacted: {label}]" in out, out
    assert redact(out) == out  # idempotent: ingest may see a text twice


@pytest.mark.parametrize(
    "text",
    [
        "data.prompt_key=prompt data.reward_fn_key=data_source",
        "full_key: actor_rollout_ref.model.enable_activation_offloading",
        "KeyError: 'actor/entropy' not found; max_token_len: 16384",
        "Setting `pad_token_id` to `eos_token_id`:2 for open-end generation.",
        "step:3 - actor/entropy:0.512 - critic/score/mean:0.25",
        "PWD=/home/me/run password=None api_key=${oc.env:KEY}",
        "commit 0123456789abcdef0123456789abcdef01234567 at 127.0.0.1:8265",
    ],
)
def test_what_is_not_a_secret_stays(text: str) -> None:
    assert redact(text) == text


_FRAGMENTS = [
    *SECRETS.values(),
    *(f"{k}=" for k in ("HF_TOKEN", "api_key", "password", "AccountKey", "x_secret", "pw")),
    *('"token": ', "'api_key': ", "key ", "Bearer ", "https://", "u:p@", "://", "sk-", "hf_"),
    *("eyJ", "AKIA", "ghp_", "glpat-", "xoxb-", "-us1", "sig=", "BEGIN RSA PRIVATE KEY"),
    *("KeyError", "tokenizer", "step:3 - a/b:0.1", " ", "\n", "=", ":", '"', "'", "0123456789"),
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789",
]


@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=12))
@settings(max_examples=300, deadline=None)
def test_hint_selection_misses_nothing(parts: list[str]) -> None:
    """Running only the patterns the text's hints select equals running every pattern."""
    text = "".join(parts)
    assert redact(text) == _redact_all(text)


def test_hint_selection_on_real_text(secret_log: Path) -> None:
    lines = secret_log.read_text().splitlines()
    for path in sorted((ROOT.parent / "shared" / "real_logs").glob("*.log"))[:20]:
        lines += [e.text for run in load(path) for e in run.events]
    for text in lines:
        assert redact(text) == _redact_all(text), text


def test_every_detect_secrets_plugin_has_its_hints() -> None:
    """A plugin without hints would be run only when another plugin's hint loads them all: a
    detect-secrets release with a new plugin fails here until its hints are listed."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    names = {p.__name__ for p in get_mapping_from_secret_type_to_class().values()}
    listed = set(redact_module._PLUGIN_NEEDS) | set(redact_module._SKIPPED_PLUGINS)
    assert names <= listed, sorted(names - listed)


def test_a_project_hint_alone_does_not_load_detect_secrets() -> None:
    """`logger: ['console', 'wandb']` holds the W&B hint, which only a project pattern needs:
    the ~0.3 s detect-secrets import is not paid for it (and an API key is still found)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from logscope.redact import redact\n"
        "assert redact(\"trainer.logger: ['console', 'wandb']\") == \"trainer.logger: ['console', 'wandb']\"\n"
        "print('detect_secrets' in sys.modules)\n"
        f"print(redact('WANDB_API_KEY={'a1' * 20}'))\n"
        "print('detect_secrets' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    before, shown, after = out.stdout.splitlines()
    assert before == "False"
    assert "a1a1" not in shown and "W&B API key" in shown
    assert after == "True"  # a `key=` hint: detect-secrets' keyword plugins need it


def test_config_keys_stay_and_values_go() -> None:
    config = {
        "data": {"prompt_key": "prompt", "max_prompt_length": 512},
        "trainer": {"api_key": "abc12345", "hf_token": S["config HF token"], "n": 3},
    }
    out = redact_value(config)
    assert out["data"] == config["data"]
    assert out["trainer"]["n"] == 3
    assert set(out["trainer"]) == set(config["trainer"])
    assert out["trainer"]["api_key"] == "[redacted: value of api_key]"
    assert out["trainer"]["hf_token"] == "[redacted: Hugging Face token]"


# ---- analyze: every format, the store ----------------------------------------------------------


def test_analyze_outputs_and_store_hold_no_secret(secret_log: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    blobs: dict[str, bytes] = {}
    for fmt in ("rich", "json", "markdown", "html"):
        for attempt in ("parsed", "cached"):  # the second reads the store's entries back
            result = cli(
                "analyze", str(secret_log), "-f", fmt, "--store", str(store),
                "--fail-on", "never",
            )  # fmt: skip
            assert result.exit_code == 0, result.stderr
            blobs[f"{fmt} ({attempt})"] = (result.stdout + result.stderr).encode()
    written = _files(store)
    assert any(p.name == "run.json" for p in written) and any(
        p.suffix == ".parquet" for p in written
    )
    for file in written:
        blobs[str(file.relative_to(store))] = file.read_bytes()
    leaked = {name: _leaks(blob) for name, blob in blobs.items()}
    assert not any(leaked.values()), {k: v for k, v in leaked.items() if v}
    # what was removed is named: in the store's run, every kind; in the reports, the quote
    (run_json,) = (b for name, b in blobs.items() if name.endswith("run.json"))
    assert set(LABELS) <= _labels(run_json), set(LABELS) - _labels(run_json)
    for fmt in ("json", "markdown", "html"):
        assert {"AWS access key", "AWS secret key"} <= _labels(blobs[f"{fmt} (parsed)"]), fmt


def test_without_redaction_the_secrets_would_leak(
    secret_log: Path, tmp_path: Path, monkeypatch
) -> None:
    """The control: the log does put secrets into a report and the store when nothing redacts."""
    monkeypatch.setattr(redact_module, "redact_run", lambda run: run)
    monkeypatch.setattr(console_parser, "redact_run", lambda run: run)
    (report,) = analyze_paths([secret_log], store_dir=tmp_path / "store")
    assert {"AWS access key id", "AWS secret key"} <= set(_leaks(json.dumps(report.to_dict())))
    (run_json,) = (p for p in _files(tmp_path / "store") if p.name == "run.json")
    assert len(_leaks(run_json.read_bytes())) == len(SECRETS)


def test_metrics_are_those_of_the_log_without_secrets(secret_log: Path, tmp_path: Path) -> None:
    (with_secrets,) = load(secret_log)
    (clean,) = load(_secret_log(tmp_path, with_secrets=False))
    order = ["step", "metric"]
    assert with_secrets.metrics.sort(order).equals(clean.metrics.sort(order))
    assert with_secrets.metrics.height > 0
    assert set(with_secrets.metrics.get_column("metric")) == set(clean.metrics.get_column("metric"))
    assert isinstance(with_secrets.metrics, pl.DataFrame)


def test_error_messages_are_redacted(tmp_path: Path) -> None:
    """A reader's error may quote the input; it passes the redactor too."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text(f'{{"HF_TOKEN": "{S["HF token"]}"}}\n')
    result = cli("analyze", str(bad), "--no-cache", "--source", "verl-jsonl")
    assert result.exit_code == 2
    assert not _leaks(result.stdout + result.stderr)


# ---- tail: request bodies, state file, outbox ---------------------------------------------------


def test_tail_posts_stores_and_queues_no_secret(secret_log: Path, tmp_path: Path) -> None:
    target = tmp_path / "live.log"
    state = tmp_path / "state.json"
    box = tmp_path / "outbox"
    data = secret_log.read_bytes()
    # Slack unreachable first: the alerts wait in the outbox (its files are checked)...
    down = Notifier(Outbox(box), SlackSender("http://127.0.0.1:9/services/T/B/x", max_retries=0))
    session = TailSession(target, TailOptions(from_start=True), down, state)
    half = data.index(b"\n", len(data) // 2) + 1
    for chunk in (data[:half], data[half:]):
        with target.open("ab") as fh:
            fh.write(chunk)
        session.cycle()
    session.cycle()
    assert session.report is not None and session.report.findings
    queued = _files(box)
    assert queued, "no alert was queued: the outbox path was not exercised"
    blobs = {f"outbox/{p.name}": p.read_bytes() for p in queued}
    blobs["state"] = state.read_bytes()
    session.close()
    # ...then delivered to a local webhook: every request body is checked.
    with SlackStandIn() as slack:
        up = Notifier(Outbox(box), SlackSender(slack.url), min_interval_s=0, retry_after_s=0)
        for _ in range(20):
            up.flush()
            if not up.outbox.pending():
                break
            time.sleep(0.05)
        assert slack.received, "nothing was posted"
        for i, body in enumerate(slack.received):
            blobs[f"request {i}"] = json.dumps(body).encode()
    blobs["state (after)"] = state.read_bytes()
    blobs.update({f"outbox (after)/{p.name}": p.read_bytes() for p in _files(box)})
    leaked = {name: _leaks(blob) for name, blob in blobs.items()}
    assert not any(leaked.values()), {k: v for k, v in leaked.items() if v}
    posted = "".join(json.dumps(b) for b in slack.received)
    assert {"AWS access key", "AWS secret key"} <= _labels(posted), posted[:2000]


def test_dashboard_pages_show_no_secret(secret_log: Path, tmp_path: Path, monkeypatch) -> None:
    """Every page of the dashboard on the analysed log: redacted text only, labels shown."""
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    from logscope.store import Store

    store = Store(tmp_path)
    (run,) = store.load(secret_log)
    monkeypatch.setenv("LOGSCOPE_STORE", str(tmp_path))
    monkeypatch.setenv("LOGSCOPE_RUNS", run.id)
    for name in ("LOGSCOPE_DASHBOARD_EXPOSED", "LOGSCOPE_DASHBOARD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    at = AppTest.from_file(str(ROOT / "app" / "app.py"), default_timeout=120)
    at.session_state["run_id"] = run.id
    at.run()
    shown = []
    for page in ("run", "metrics", "config", "live"):
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        for kind in ("text", "markdown", "code", "caption", "json", "subheader", "dataframe"):
            shown += [str(e.value) for e in at.get(kind)]
    page_text = "\n".join(shown)
    assert "redacted:" in page_text  # the run's events are on the pages, as redacted text
    assert _leaks(page_text) == []
