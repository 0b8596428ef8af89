"""A dashboard safe to share (issue 20, item 3): the access token, paths confined to
`--allow-dir`, upload limits, and `logscope dashboard` refusing an unsafe start.

The app is driven through AppTest with the shared mode forced on by the environment variables
`logscope dashboard` sets for its Streamlit process; the CLI is run with CliRunner and the
server start stubbed (tests/test_browser.py opens a real shared server in Chromium).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("streamlit")
pytest.importorskip("plotly")

from streamlit.testing.v1 import AppTest

from logscope.cli import app as cli_app
from logscope.cli import dashboard as dashboard_mod
from logscope.store import Store
from tests.dashboard_data import APP, open_page

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "t0ken-for-the-tests-Zq8xW2"
runner = CliRunner()


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return folder


@pytest.fixture
def shared(seeded, allowed: Path, monkeypatch: pytest.MonkeyPatch):
    """Open the app as a shared dashboard would run it; `token=` puts ?token= in the URL."""
    root, _ = seeded
    monkeypatch.setenv("LOGSCOPE_STORE", str(root))
    monkeypatch.delenv("LOGSCOPE_RUNS", raising=False)
    monkeypatch.setenv(dashboard_mod.ENV_EXPOSED, "1")
    monkeypatch.setenv(dashboard_mod.ENV_TOKEN, TOKEN)
    monkeypatch.setenv(dashboard_mod.ENV_ALLOW_DIRS, str(allowed.resolve()))
    monkeypatch.setenv(dashboard_mod.ENV_MAX_UPLOAD_MB, "200")
    monkeypatch.delenv(dashboard_mod.ENV_UPLOAD_QUOTA_MB, raising=False)

    def open_app(token: str | None = None, page: str | None = None) -> AppTest:
        query = {"token": token} if token is not None else None
        return open_page(root, monkeypatch, page, query=query)

    return open_app


def _everything(at: AppTest) -> str:
    """Every element the session was sent (protos, so tables and options are included)."""
    out: list[str] = []

    def walk(node) -> None:  # type: ignore[no-untyped-def]
        proto = getattr(node, "proto", None)
        if proto is not None:
            out.append(str(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(out)


def _labels(root: Path, ids: list[str]) -> list[str]:
    """What would identify the runs on a page: ids, source paths, the store folder."""
    st = Store(root)
    runs = [st.get_run(i) for i in ids]
    return [*ids, *(i[:8] for i in ids), *(r.source.path for r in runs if r), str(root)]


def _messages(at: AppTest) -> str:
    return "\n".join(_plain(e) for e in [*at.error, *at.warning, *at.info, *at.success])


def _plain(element) -> str:  # type: ignore[no-untyped-def]
    """A message's text without the Markdown escapes (md_escape) of what it quotes."""
    return str(element.value).replace("\\", "")


# ---- the token ----------------------------------------------------------------------------
@pytest.mark.parametrize("page", [None, "run", "metrics", "config", "compare", "live"])
def test_without_the_token_no_run_data(shared, seeded, page) -> None:
    root, ids = seeded
    at = shared(page=page) if page is None else _switch_unauthorised(shared, page)
    assert at.title[0].value == "Token required"
    text = _everything(at)
    for secret in _labels(root, ids):
        assert secret not in text, secret
    assert not at.dataframe and not at.get("plotly_chart") and not at.selectbox


def _switch_unauthorised(shared, page: str) -> AppTest:
    """Without the token the navigation has only the token page: a page asked for by path is
    not run (AppTest refuses the unknown page; a browser is sent to the token page)."""
    at = shared()
    # "Unable to find script ... Known pages: ..." (only the token page)
    with contextlib.suppress(ValueError):
        at.switch_page(f"pages/{page}.py").run()
    return at


@pytest.mark.parametrize("page", ["runs", "run", "metrics", "config", "compare", "live"])
def test_a_page_run_on_its_own_is_gated_too(shared, seeded, page) -> None:
    """Streamlit's legacy pages-folder mode (a fresh server's first visit is a deep link) runs a
    page without app.py: page_setup gates it."""
    root, ids = seeded
    at = AppTest.from_file(str(APP.parent / "pages" / f"{page}.py"), default_timeout=120).run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Token required" and len(at.title) == 1
    text = _everything(at)
    assert not any(secret in text for secret in _labels(root, ids))


def test_with_the_token_in_the_url_the_runs_show(shared, seeded) -> None:
    _, ids = seeded
    at = shared(token=TOKEN)
    assert at.title[0].value == "Runs"
    assert set(ids) <= set(at.dataframe[0].value["id"])
    assert "token" not in at.query_params  # dropped from the address bar once used
    at.run()  # the next run of the same session: kept in session_state
    assert at.title[0].value == "Runs" and not at.exception
    at.switch_page("pages/run.py").run()
    assert at.title[0].value == "Run" and not at.exception
    assert ids[0][:8] in _everything(at)


def test_a_wrong_token_shows_nothing(shared, seeded) -> None:
    root, ids = seeded
    at = shared(token=TOKEN[:-1] + "x")
    assert at.title[0].value == "Token required"
    assert "not the one" in _messages(at)
    assert not any(s in _everything(at) for s in _labels(root, ids))


def test_the_token_can_be_pasted_into_the_form(shared, seeded) -> None:
    _, ids = seeded
    at = shared()
    at.text_input[0].set_value(TOKEN)
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Runs"
    assert set(ids) <= set(at.dataframe[0].value["id"])


def test_shared_without_a_configured_token_lets_nobody_in(shared, monkeypatch) -> None:
    monkeypatch.delenv(dashboard_mod.ENV_TOKEN)
    at = shared(token="")
    assert at.title[0].value == "Token required"
    assert "no access token" in _messages(at)
    assert not at.dataframe


def test_the_token_is_compared_in_constant_time(monkeypatch) -> None:
    from logscope.app import _common as ui

    calls = []
    real = ui.hmac.compare_digest
    monkeypatch.setattr(ui.hmac, "compare_digest", lambda a, b: calls.append(1) or real(a, b))
    monkeypatch.setenv(dashboard_mod.ENV_TOKEN, TOKEN)
    assert ui.token_ok(TOKEN) and not ui.token_ok(TOKEN + "x") and not ui.token_ok(None)
    assert len(calls) == 2


def test_on_loopback_nothing_is_asked(seeded, monkeypatch) -> None:
    root, ids = seeded
    monkeypatch.setenv("LOGSCOPE_STORE", str(root))
    for name in dashboard_mod.SHARE_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    assert at.title[0].value == "Runs" and set(ids) <= set(at.dataframe[0].value["id"])


# ---- typed paths ----------------------------------------------------------------------------
def _jsonl(n: int = 30) -> str:
    return "\n".join(
        json.dumps({"step": s, "data": {"critic/score/mean": 0.1 * s, "actor/entropy": 1.0}})
        for s in range(1, n + 1)
    )


def _add_path(shared, path: str) -> AppTest:
    at = shared(token=TOKEN)
    at.text_input[0].set_value(path).run()
    at.button[0].click().run()
    assert not at.exception, at.exception
    return at


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A readable log outside the allowed folder."""
    secret = tmp_path / "elsewhere" / "private.jsonl"
    secret.parent.mkdir()
    secret.write_text(_jsonl(25))
    return secret


def _refused(at: AppTest, before: set[str], root: Path, word: str) -> None:
    assert any(word in _plain(e) for e in at.error), _messages(at)
    assert not at.success
    assert set(Store(root).run_ids()) == before  # nothing was read into the store


def test_a_path_inside_the_allowed_folder_is_read(shared, seeded, allowed: Path) -> None:
    root, _ = seeded
    log = allowed / "mine.jsonl"
    log.write_text(_jsonl(33))
    before = set(Store(root).run_ids())
    at = _add_path(shared, "mine.jsonl")  # relative: to the first allowed folder
    assert at.success and "Added 1 run(s)" in str(at.success[0].value)
    assert len(set(Store(root).run_ids()) - before) == 1


def test_a_path_outside_the_allowed_folders_is_refused(shared, seeded, outside: Path) -> None:
    root, _ = seeded
    before = set(Store(root).run_ids())
    _refused(_add_path(shared, str(outside)), before, root, "outside the folders")


def test_dot_dot_is_refused(shared, seeded, allowed: Path, outside: Path) -> None:
    root, _ = seeded
    before = set(Store(root).run_ids())
    sneaky = f"{allowed}/../elsewhere/{outside.name}"
    _refused(_add_path(shared, sneaky), before, root, "'..'")
    (allowed / "sub").mkdir()
    (allowed / "sub" / "ok.jsonl").write_text(_jsonl(12))
    _refused(_add_path(shared, f"{allowed}/sub/../sub/ok.jsonl"), before, root, "'..'")


def test_a_symlink_out_of_the_folder_is_refused(shared, seeded, allowed, outside) -> None:
    root, _ = seeded
    before = set(Store(root).run_ids())
    (allowed / "link.jsonl").symlink_to(outside)
    _refused(_add_path(shared, str(allowed / "link.jsonl")), before, root, "outside the folders")
    (allowed / "linked_dir").symlink_to(outside.parent, target_is_directory=True)
    path = str(allowed / "linked_dir" / outside.name)
    _refused(_add_path(shared, path), before, root, "outside the folders")


def test_a_folder_holding_a_link_out_is_refused(shared, seeded, allowed, outside) -> None:
    root, _ = seeded
    before = set(Store(root).run_ids())
    (allowed / "team").mkdir()
    (allowed / "team" / "good.jsonl").write_text(_jsonl(14))
    (allowed / "team" / "private.jsonl").symlink_to(outside)
    _refused(_add_path(shared, str(allowed / "team")), before, root, "link out")


def test_a_symlink_within_the_folder_is_fine(shared, allowed) -> None:
    (allowed / "real.jsonl").write_text(_jsonl(17))
    (allowed / "alias.jsonl").symlink_to(allowed / "real.jsonl")
    at = _add_path(shared, str(allowed / "alias.jsonl"))
    assert at.success, _messages(at)


def test_uris_are_refused(shared, seeded) -> None:
    root, _ = seeded
    before = set(Store(root).run_ids())
    _refused(_add_path(shared, "wandb://team/project/abc123"), before, root, "not URIs")


def test_the_live_page_is_confined_too(shared, outside: Path, allowed: Path) -> None:
    at = shared(token=TOKEN, page="live")
    at.text_input(key="live_path").set_value(str(outside)).run()
    assert not at.exception, at.exception
    assert any("outside the folders" in _plain(e) for e in at.error), _messages(at)
    assert not at.metric
    (allowed / "growing.jsonl").write_text(_jsonl(20))
    at.text_input(key="live_path").set_value(str(allowed / "growing.jsonl")).run()
    assert not at.exception and not at.error, _messages(at)
    assert at.metric[0].value == "20"


# ---- uploads -------------------------------------------------------------------------------
def test_an_upload_over_the_size_limit_is_refused(shared, seeded, monkeypatch) -> None:
    root, _ = seeded
    monkeypatch.setenv(dashboard_mod.ENV_MAX_UPLOAD_MB, "0.001")  # 1,000 bytes
    data = _jsonl(40).encode()
    assert len(data) > 1000
    at = shared(token=TOKEN)
    at.file_uploader[0].set_value(("big.jsonl", data, "application/json")).run()
    assert not at.exception, at.exception
    assert any("up to 0.001 MB" in _plain(e) for e in at.error), _messages(at)
    assert not any((root / "uploads").glob("*.jsonl")) or all(
        f.read_bytes() != data for f in (root / "uploads").glob("*.jsonl")
    )


def test_uploads_count_against_the_quota(shared, seeded, monkeypatch) -> None:
    root, _ = seeded
    uploads = root / "uploads"
    used = sum(f.stat().st_size for f in uploads.glob("*") if f.name != "names.json")
    first, second = _jsonl(21).encode(), _jsonl(22).encode()
    quota = (used + len(first) + len(second) // 2) / 1e6
    monkeypatch.setenv(dashboard_mod.ENV_UPLOAD_QUOTA_MB, f"{quota:.6f}")
    at = shared(token=TOKEN)
    at.file_uploader[0].set_value(("one.jsonl", first, "application/json")).run()
    assert at.success and not at.error, _messages(at)
    at.file_uploader[0].set_value(("two.jsonl", second, "application/json")).run()
    assert any("quota" in _plain(e) for e in at.error), _messages(at)
    assert not any(f.read_bytes() == second for f in uploads.glob("*.jsonl"))


# ---- the command ---------------------------------------------------------------------------
def _no_server(monkeypatch) -> list[tuple[list[str], dict[str, str]]]:
    calls: list[tuple[list[str], dict[str, str]]] = []
    monkeypatch.setattr(dashboard_mod, "serve", lambda cmd, env: calls.append((cmd, env)) or 0)
    return calls


def test_off_loopback_without_allow_dir_is_refused(tmp_path: Path, monkeypatch) -> None:
    calls = _no_server(monkeypatch)
    res = runner.invoke(
        cli_app,
        ["dashboard", "--host", "0.0.0.0", str(ROOT / "fixtures" / "verl_tuned.log"),
         "--store", str(tmp_path / "store")],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    message = " ".join(res.stderr.split())
    assert "--allow-dir" in message
    assert "logscope dashboard --host 0.0.0.0 --allow-dir /runs" in message
    assert "reverse proxy" in message
    assert calls == []  # no server started
    assert not (tmp_path / "store").exists()  # and nothing read


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_is_not_shared(host: str, tmp_path: Path, monkeypatch) -> None:
    calls = _no_server(monkeypatch)
    monkeypatch.setenv(dashboard_mod.ENV_ALLOW_DIRS, "/")  # stale settings are not passed on
    monkeypatch.delenv(dashboard_mod.ENV_TOKEN, raising=False)
    monkeypatch.delenv(dashboard_mod.ENV_EXPOSED, raising=False)
    res = runner.invoke(cli_app, ["dashboard", "--host", host, "--store", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    [(_, env)] = calls
    assert dashboard_mod.ENV_EXPOSED not in env and dashboard_mod.ENV_TOKEN not in env
    assert dashboard_mod.ENV_ALLOW_DIRS not in env
    assert "token" not in res.stderr


def test_shared_start_generates_the_token_and_prints_it_once(tmp_path, monkeypatch) -> None:
    calls = _no_server(monkeypatch)
    monkeypatch.delenv(dashboard_mod.ENV_TOKEN, raising=False)
    runs = tmp_path / "runs"
    runs.mkdir()
    res = runner.invoke(
        cli_app,
        ["dashboard", "--host", "0.0.0.0", "--allow-dir", str(runs), "--allow-dir", str(tmp_path),
         "--store", str(tmp_path / "store"), "--max-upload-mb", "50"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    [(cmd, env)] = calls
    token = env[dashboard_mod.ENV_TOKEN]
    assert len(token) >= 40
    assert res.stderr.count(token) == 1 and f"?token={token}" in res.stderr
    assert token not in " ".join(cmd)  # never on a command line (ps shows those)
    assert env[dashboard_mod.ENV_EXPOSED] == "1"
    assert env[dashboard_mod.ENV_ALLOW_DIRS].split(os.pathsep) == [
        str(runs.resolve()),
        str(tmp_path.resolve()),
    ]
    assert env[dashboard_mod.ENV_MAX_UPLOAD_MB] == "50"
    assert env[dashboard_mod.ENV_UPLOAD_QUOTA_MB] == str(dashboard_mod.DEFAULT_UPLOAD_QUOTA_MB)
    args = dict(zip(cmd[5::2], cmd[6::2], strict=True))
    assert args["--server.address"] == "0.0.0.0"
    assert args["--server.maxUploadSize"] == "50"
    assert args["--server.enableXsrfProtection"] == "true"
    # a second start has another token
    runner.invoke(cli_app, ["dashboard", "--host", "0.0.0.0", "--allow-dir", str(runs),
                            "--store", str(tmp_path / "store")])  # fmt: skip
    assert calls[1][1][dashboard_mod.ENV_TOKEN] != token


def test_a_given_token_is_used_and_never_printed(tmp_path: Path, monkeypatch) -> None:
    calls = _no_server(monkeypatch)
    monkeypatch.setenv(dashboard_mod.ENV_TOKEN, TOKEN)
    res = runner.invoke(
        cli_app,
        ["dashboard", "--exposed", "--allow-dir", str(tmp_path),
         "--store", str(tmp_path / "store")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    [(_, env)] = calls
    assert env[dashboard_mod.ENV_TOKEN] == TOKEN and env[dashboard_mod.ENV_EXPOSED] == "1"
    assert TOKEN not in res.output + res.stderr
    help_text = runner.invoke(cli_app, ["dashboard", "--help"]).output
    assert TOKEN not in help_text


def test_a_short_token_and_a_missing_folder_are_refused(tmp_path: Path, monkeypatch) -> None:
    calls = _no_server(monkeypatch)
    base = ["dashboard", "--host", "0.0.0.0", "--store", str(tmp_path / "store")]
    res = runner.invoke(cli_app, [*base, "--allow-dir", str(tmp_path), "--token", "short"])
    assert res.exit_code == 2 and "at least 16 characters" in res.stderr
    res = runner.invoke(cli_app, [*base, "--allow-dir", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "not a folder" in res.stderr
    assert calls == []
