"""`logscope compare` and `logscope dashboard` (the server start is stubbed here; the real one
runs in test_browser.py)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from logscope.cli import dashboard as dashboard_mod
from logscope.cli.main import app

runner = CliRunner()


def test_compare_json(seeded) -> None:
    root, ids = seeded
    res = runner.invoke(app, ["compare", *ids, "--store", str(root), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["schema"] == "logscope.compare/1"
    assert [r["id"] for r in data["runs"]] == ids
    rows = {r["label"]: r for r in data["key_metrics"]}
    assert rows["throughput (tokens/s)"]["deltas"][1] > 0
    assert data["divergence"][0]["step"] is not None


def test_compare_rich_and_markdown(seeded) -> None:
    root, ids = seeded
    res = runner.invoke(app, ["compare", *ids, "--store", str(root)])
    assert res.exit_code == 0, res.output
    assert "throughput (tokens/s)" in res.stdout and "Config diff" in res.stdout
    md = runner.invoke(app, ["compare", *ids, "--store", str(root), "-f", "markdown"])
    assert md.exit_code == 0 and md.stdout.startswith("# logscope compare")


def test_compare_needs_two_runs(seeded) -> None:
    root, ids = seeded
    res = runner.invoke(app, ["compare", ids[0], "--store", str(root)])
    assert res.exit_code == 2
    assert "at least two runs" in res.stderr


def test_dashboard_ingests_then_runs_streamlit_on_localhost(seeded, monkeypatch) -> None:
    root, _ = seeded
    calls = []

    def fake_call(cmd, env):
        calls.append((cmd, env))
        return 0

    monkeypatch.setattr(dashboard_mod, "serve", fake_call)
    res = runner.invoke(app, ["dashboard", "--store", str(root), "--port", "8765"])
    assert res.exit_code == 0, res.output
    [(cmd, env)] = calls
    # streamlit's own CLI, after pandas/plotly are imported in the server process (two sessions
    # importing them at once could see a partly initialised pandas)
    assert cmd[1:4] == ["-c", dashboard_mod.SERVE, "run"]
    assert cmd[2].index("pandas") < cmd[2].index("streamlit.web")
    assert Path(cmd[4]).name == "app.py" and Path(cmd[4]).is_file()
    args = dict(zip(cmd[5::2], cmd[6::2], strict=True))
    assert args["--server.port"] == "8765"
    assert args["--server.address"] == "127.0.0.1"  # local by default
    assert args["--server.headless"] == "true"
    assert args["--browser.gatherUsageStats"] == "false"
    assert env["LOGSCOPE_STORE"] == str(root.resolve())
    assert env["LOGSCOPE_RUNS"] == ""


def test_dashboard_preselects_the_runs_of_its_paths(tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "run.jsonl"
    log.write_text(
        "\n".join(json.dumps({"step": s, "data": {"critic/score/mean": s}}) for s in range(1, 9))
    )
    calls = []
    monkeypatch.setattr(dashboard_mod, "serve", lambda cmd, env: calls.append(env) or 0)
    store = tmp_path / "store"
    res = runner.invoke(app, ["dashboard", str(log), "--store", str(store)])
    assert res.exit_code == 0, res.output
    from logscope.store import Store

    assert calls[0]["LOGSCOPE_RUNS"].split(",") == Store(store).run_ids()


def _record_loads(monkeypatch) -> list[object]:
    """Replace Store.load with a recorder that returns no runs (nothing is fetched)."""
    from logscope.store import Store

    seen: list[object] = []

    def fake_load(self, path, source=None, use_cache=True, progress=None):
        seen.append(path)
        return []

    monkeypatch.setattr(Store, "load", fake_load)
    return seen


def test_dashboard_passes_a_wandb_uri_through_intact(tmp_path: Path, monkeypatch) -> None:
    # Path("wandb://ent/proj/run1") would become "wandb:/ent/proj/run1"
    seen = _record_loads(monkeypatch)
    monkeypatch.setattr(dashboard_mod, "serve", lambda cmd, env: 0)
    uri = "wandb://ent/proj/run1"
    res = runner.invoke(app, ["dashboard", uri, "--store", str(tmp_path / "store")])
    assert res.exit_code == 0, res.output
    assert seen == [uri]


def test_compare_passes_a_wandb_uri_through_intact(tmp_path: Path, monkeypatch) -> None:
    seen = _record_loads(monkeypatch)
    uris = ["wandb://ent/proj/run1", "wandb://ent/proj/run2"]
    res = runner.invoke(app, ["compare", *uris, "--store", str(tmp_path / "store")])
    assert res.exit_code == 2  # the recorder returns no runs
    assert seen == uris
