"""Every dashboard page through Streamlit's AppTest, with the store seeded (see dashboard_data)."""

from __future__ import annotations

import base64
import functools
import html
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")

from streamlit.testing.v1 import AppTest

from logscope.model import Event, Source
from logscope.store import Store
from tests.dashboard_data import APP, FIXTURES, build_run, open_page


@pytest.fixture(scope="module")
def store_dir(seeded: tuple[Path, list[str]]) -> Path:
    return seeded[0]


@pytest.fixture(scope="module")
def ids(seeded: tuple[Path, list[str]]) -> list[str]:
    """[baseline id, tuned id]."""
    return seeded[1]


@pytest.fixture
def app(store_dir: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("LOGSCOPE_RUNS", raising=False)
    return functools.partial(open_page, store_dir, monkeypatch)


def _charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _arr(value) -> np.ndarray:
    """A plotly JSON array: a list, or plotly's typed array {"dtype", "bdata"}."""
    if isinstance(value, dict) and "bdata" in value:
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    return np.asarray(value)


def _texts(at: AppTest) -> str:
    return "\n".join(str(t.value) for t in at.text)


def test_runs_page_lists_runs_with_severity(app, ids) -> None:
    at = app()
    assert at.title[0].value == "Runs"
    table = at.dataframe[0].value
    assert set(ids) <= set(table["id"])
    row = table.set_index("id").loc[ids[0]]
    assert row["worst severity"] in {"info", "warning", "error", "critical"}
    assert row["steps"] > 0 and row["last step time"]
    assert list(at.multiselect[0].value) == ids[:2]


def test_runs_page_preselects_from_env(app, ids, monkeypatch) -> None:
    monkeypatch.setenv("LOGSCOPE_RUNS", f"{ids[1]},{ids[0]}")
    at = app()
    assert list(at.multiselect[0].value) == [ids[1], ids[0]]


def _jsonl(n: int = 30) -> bytes:
    lines = [
        json.dumps({"step": s, "data": {"critic/score/mean": 0.1 * s, "actor/entropy": 1.0}})
        for s in range(1, n + 1)
    ]
    return ("\n".join(lines) + "\n").encode()


def test_upload_is_saved_into_the_store_not_over_user_files(
    app, store_dir: Path, tmp_path: Path
) -> None:
    at = app()
    before = set(Store(store_dir).run_ids())
    at.file_uploader[0].set_value(("my_run.jsonl", _jsonl(), "application/json")).run()
    assert not at.exception, at.exception
    saved = list((store_dir / "uploads").glob("*.jsonl"))
    assert len(saved) == 1 and saved[0].read_bytes() == _jsonl()
    after = set(Store(store_dir).run_ids())
    assert len(after - before) == 1
    assert "my_run.jsonl" in set(at.dataframe[0].value["name"])


def test_add_run_by_path(app, store_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "by_path.jsonl"
    log.write_bytes(_jsonl(40))
    at = app()
    at.text_input[0].set_value(str(log)).run()
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert any("Added 1 run" in s.value for s in at.success)
    assert log.read_bytes() == _jsonl(40)  # the user's file is untouched
    assert str(log) in " ".join(at.dataframe[0].value["source"])


def test_run_page_findings_incidents_overrides(app, ids) -> None:
    at = app("run", run_id=ids[0])
    assert at.title[0].value == "Run"
    # Each finding is a card whose header names severity, code, name and steps.
    headers = [m.value for m in at.markdown if "** · `LS" in m.value]
    assert any("**ERROR** · `LS001` · non\\-finite\\-metric · step 121" in h for h in headers)
    # Overrides are copyable code blocks holding Hydra `key=value` strings.
    codes = [c.value for c in at.code]
    assert any("actor_rollout_ref." in c and "=" in c for c in codes)
    # The incident timeline is a chart of findings on the step axis.
    [timeline] = _charts(at)
    assert any(t.get("type") == "bar" for t in timeline["data"])
    # Every located finding links to its metric chart at its step.
    from urllib.parse import parse_qs

    queries = [parse_qs(p.proto.query_string) for p in at.get("page_link")]
    nan_link = {"run": [ids[0]], "metric": ["actor/pg_loss"], "step": ["121"], "end": ["121"]}
    assert nan_link in queries, queries
    assert "first mover" in _texts(at)


def test_metrics_page_groups_markers_spans(app, ids) -> None:
    at = app("metrics", run_id=ids[0])
    labels = [e.label for e in at.expander]
    for group in ("Reward / score", "KL & clipping", "Entropy", "Lengths", "Timing", "Memory"):
        assert any(group in x for x in labels), labels
    assert any("Validation" in x for x in labels)
    # One chart per metric: the KL jump is marked on actor/ppo_kl's own panel.
    charts = _charts(at)
    titles = [html.unescape(c["layout"]["title"]["text"]) for c in charts]
    kl = next(c for c, t in zip(charts, titles, strict=True) if t == "actor/ppo_kl")
    markers = [t for t in kl["data"] if t.get("name") == "findings"]
    # The KL jump starts at step 150; detectors may place it a step either side.
    xs = np.concatenate([_arr(m["x"]) for m in markers]) if markers else np.array([])
    assert len(xs) and np.min(np.abs(xs - 150)) <= 2
    shapes = kl["layout"].get("shapes", [])
    assert any(s["type"] == "rect" for s in shapes) and any(s["type"] == "line" for s in shapes)


def test_metrics_smoothing_toggle_and_focus_link(app, ids) -> None:
    at = app("metrics", run_id=ids[0])
    n_plain = sum(len(c["data"]) for c in _charts(at))
    at.slider(key="_smoothing_slider").set_value(0.8).run()
    assert not at.exception
    charts = _charts(at)
    assert any(t["name"].endswith("(raw)") for c in charts for t in c["data"])
    assert sum(len(c["data"]) for c in charts) > n_plain
    at.query_params["metric"] = "actor/kl_loss"
    at.query_params["step"] = "150"
    at.run()
    assert not at.exception
    focus = _charts(at)[0]
    assert focus["layout"]["title"]["text"].startswith("actor/kl_loss")
    xs = np.concatenate([_arr(t["x"]) for t in focus["data"]])
    assert xs.min() >= 100 and xs.max() <= 200


def test_config_page_search_lint_and_restart_diff(app, ids) -> None:
    at = app("config", run_id=ids[0])
    table = at.dataframe[0].value
    assert "algorithm.kl_ctrl.kl_coef" in set(table["key"])
    at.text_input(key="config_search").set_value("kl_coef").run()
    filtered = at.dataframe[0].value
    assert 0 < len(filtered) < len(table)
    assert all("kl_coef" in k for k in filtered["key"])
    # Config-lint findings (LS5xx) are listed, or the page says there are none.
    lint = [m.value for m in at.markdown if "** · `LS5" in m.value]
    assert lint or any("No config findings" in s.value for s in at.success)
    # The baseline was restarted at step 200 with a new kl_coef: the diff shows it.
    assert "segment from step 0 → segment from step 200" in _texts(at)
    diff = at.dataframe[-1].value
    assert list(diff["key"]) == ["algorithm.kl_ctrl.kl_coef"]


def test_compare_page_table_divergence_config_diff(app, ids) -> None:
    at = app("compare", selected_runs=ids[:2])
    table = at.dataframe[0].value
    assert "throughput (tokens/s)" in set(table["metric"])
    delta_cols = [c for c in table.columns if c.startswith("Δ ")]
    assert len(delta_cols) == 1
    tp = table.set_index("metric").loc["throughput (tokens/s)"]
    assert tp[delta_cols[0]].startswith("+")  # the tuned run is faster (cells are text)
    assert "than the reference from step" in _texts(at)
    overlays = _charts(at)
    assert overlays and all(len(c["data"]) == 2 for c in overlays)  # both runs on every chart
    diff = at.dataframe[-1].value
    assert "algorithm.kl_ctrl.target_kl" in set(diff["key"])


def test_compare_page_asks_for_two_runs(app, ids) -> None:
    at = app()
    at.switch_page("pages/compare.py").run()
    at.sidebar.multiselect[0].set_value([ids[0]]).run()
    assert not at.exception
    assert any("at least two runs" in i.value for i in at.info)


def test_live_page_follows_a_growing_file(app, tmp_path: Path) -> None:
    log = tmp_path / "growing.jsonl"
    log.write_bytes(_jsonl(20))
    at = app("live")
    at.text_input(key="live_path").set_value(str(log)).run()
    assert not at.exception, at.exception
    assert next(m.value for m in at.metric) == "20"
    assert _curve_lengths(at) == {"critic/score/mean": 20, "actor/entropy": 20}
    log.write_bytes(_jsonl(35))
    at.run()
    assert next(m.value for m in at.metric) == "35"
    assert _curve_lengths(at) == {"critic/score/mean": 35, "actor/entropy": 35}  # curves grow


def _curve_lengths(at) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """{metric: points} of the curves drawn on the page (one plotly chart per metric)."""
    out = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        for trace in spec["data"]:
            if trace.get("name") != "findings":
                x = trace["x"]  # plotly sends arrays as {"bdata": base64, "dtype": ...}
                raw = base64.b64decode(x["bdata"]) if isinstance(x, dict) else None
                out[trace["name"]] = len(x) if raw is None else len(np.frombuffer(raw, x["dtype"]))
    return out


def test_live_page_without_a_file(app) -> None:
    at = app("live")
    assert any("Give the path" in i.value for i in at.info)


def test_empty_store_every_page_explains(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LOGSCOPE_STORE", str(tmp_path / "empty"))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception
    for page in ("run", "metrics", "config", "compare"):
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, page
        assert at.info, page


def test_log_content_is_never_rendered_as_markup(tmp_path: Path, monkeypatch) -> None:
    evil = "<img src=x onerror=alert(1)> **bold** [link](javascript:alert(1))"
    run = build_run("evil0000000000000000000000", seed=5)
    run.events.append(Event(line_no=7, step_hint=3, kind="error", text=evil))
    run.meta["experiment"] = evil
    run.source = Source("verl-console", "/data/[run](javascript:alert(1)).log")
    # A metric whose name is markup, with a NaN so a finding (and its chart link) points at it.
    frame = run.metrics.filter(pl.col("metric") == "actor/pg_loss").with_columns(
        pl.lit("actor/pg_loss/[x](javascript:alert(1))").alias("metric")
    )
    run.metrics = pl.concat([run.metrics, frame])
    Store(tmp_path).put_run(run)
    monkeypatch.setenv("LOGSCOPE_STORE", str(tmp_path))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.session_state["run_id"] = run.id
    at.run()
    at.switch_page("pages/run.py").run()
    assert not at.exception
    assert evil in _texts(at)  # shown, as text
    assert not any(evil in m.value or "onerror" in m.value for m in at.markdown)
    # Markdown-read labels (subheader, page links) carry the escaped text, never a live link.
    labels = [e.value for e in at.subheader] + [p.proto.label for p in at.get("page_link")]
    assert any("javascript" in x for x in labels)
    assert not any("](javascript" in x for x in labels)
    app_dir = APP.parent
    for source in [APP, *app_dir.glob("pages/*.py"), app_dir / "_common.py"]:
        assert "unsafe_allow_html" not in source.read_text(), source


def test_every_page_on_the_committed_fixtures(tmp_path: Path, monkeypatch) -> None:
    store = Store(tmp_path)
    ids = [run.id for path in FIXTURES for run in store.load(path)]
    monkeypatch.setenv("LOGSCOPE_STORE", str(tmp_path))
    monkeypatch.setenv("LOGSCOPE_RUNS", ",".join(ids))
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    assert not at.exception, at.exception
    assert set(ids) <= set(at.dataframe[0].value["id"])
    for page in ("run", "metrics", "config", "compare", "live"):
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        if page in ("metrics", "compare"):
            assert _charts(at), page
    at.switch_page("pages/compare.py").run()
    table = at.dataframe[0].value
    assert len([c for c in table.columns if c.startswith("Δ ")]) == len(ids) - 1


def test_switching_runs_keeps_each_runs_groups(app, ids, store_dir: Path) -> None:
    from tests.helpers import make_run

    small = make_run({"critic/score/mean": np.arange(50.0)}, run_id="small0000000000000")
    Store(store_dir).put_run(small)
    try:
        at = app("metrics", run_id=ids[0])
        n_full = len(_charts(at))
        at.sidebar.selectbox[0].set_value(small.id).run()
        assert not at.exception and len(_charts(at)) == 1
        at.sidebar.selectbox[0].set_value(ids[1]).run()
        assert at.session_state["run_id"] == ids[1]
        # Each run keeps its own groups (the small run's one group did not stick).
        assert len(_charts(at)) > 1 and len(at.expander) > 1
        at.sidebar.selectbox[0].set_value(ids[0]).run()
        assert len(_charts(at)) == n_full
    finally:
        import shutil

        shutil.rmtree(Store(store_dir).run_dir(small.id))
