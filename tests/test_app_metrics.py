"""The Metrics page (one chart per metric) and the smoothing it shares with Compare (AppTest).

The store holds the hand-built runs of tests/dashboard_data.py (300 steps): the baseline has a
NaN pg_loss at step 121 and a KL jump at step 150; the tuned run has actor/lr = 1.5e-6.
"""

from __future__ import annotations

import base64
import functools
import html
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")

from streamlit.testing.v1 import AppTest

from logscope.analyze import analyze_run
from logscope.charts import ema, panel_groups
from logscope.store import Store
from tests.dashboard_data import open_page


@pytest.fixture
def app(seeded: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("LOGSCOPE_RUNS", raising=False)
    return functools.partial(open_page, seeded[0], monkeypatch)


def _spec(chart) -> dict:  # type: ignore[no-untyped-def]
    return json.loads(chart.proto.spec)


def _charts(at) -> list[dict]:  # type: ignore[no-untyped-def]
    return [_spec(c) for c in at.get("plotly_chart")]


def _title(spec: dict) -> str:
    return html.unescape(spec["layout"]["title"]["text"])


def _titles(at) -> list[str]:  # type: ignore[no-untyped-def]
    return [_title(c) for c in _charts(at)]


def _arr(value) -> np.ndarray:  # type: ignore[no-untyped-def]
    if isinstance(value, dict) and "bdata" in value:
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    return np.asarray(value)


def _curves(spec: dict) -> list[dict]:
    return [t for t in spec["data"] if t.get("name") != "findings"]


def _report(seeded: tuple[Path, list[str]], i: int = 0):  # type: ignore[no-untyped-def]
    return analyze_run(Store(seeded[0]).get_run(seeded[1][i]))  # type: ignore[arg-type]


def _open_key(at: AppTest, group: str) -> str:
    return next(k for k in at.session_state if k.endswith(f"-open-{group}"))


def test_one_chart_per_panel_shown_flagged_groups_and_panels_first(app, seeded) -> None:
    from logscope.app._plots import ALWAYS_OPEN, OPEN_GROUPS

    at = app("metrics", run_id=seeded[1][0])
    groups = panel_groups(_report(seeded).run.metric_names, _report(seeded).findings)
    open_groups = [g for i, g in enumerate(groups) if i < OPEN_GROUPS or g.key in ALWAYS_OPEN]
    titles = _titles(at)
    # One chart per panel shown: the default panels of the open groups, in their order.
    assert titles == [n for g in open_groups for n in g.default]
    assert all(len(_curves(c)) == 1 for c in _charts(at))  # one metric (own y-axis) each
    # Groups holding findings first, and inside a group the metrics with findings first.
    labels = [e.label for e in at.expander]
    assert len(labels) == len(groups)
    with_findings = [i for i, g in enumerate(groups) if g.flagged]
    assert with_findings == list(range(len(with_findings))) and with_findings
    assert "with findings" in labels[0] and "with findings" not in labels[-1]
    for box, group in zip(at.expander, groups, strict=True):
        drawn = [_title(_spec(c)) for c in box.get("plotly_chart")]
        flags = [n in group.flagged for n in drawn]
        assert flags == sorted(flags, reverse=True), (group.key, drawn)
    # The NaN at step 121 is a finding on actor/pg_loss: its panel leads the first group.
    assert titles[0] == "actor/pg_loss"
    kl = next(c for c in _charts(at) if _title(c) == "actor/ppo_kl")  # the KL jump
    xs = _arr(next(t for t in kl["data"] if t.get("name") == "findings")["x"])
    assert np.min(np.abs(xs - 150)) <= 2
    kinds = {s["type"] for s in kl["layout"].get("shapes", [])}
    assert kinds == {"rect", "line"}  # incident span and changepoint line on the panel


def test_validation_defaults_to_its_score_not_aux_metrics(seeded) -> None:
    run = _report(seeded).run
    names = [*run.metric_names, "val-aux/num_turns/mean", "val-aux/openai/gsm8k/reward/std@1"]
    val = next(g for g in panel_groups(names) if g.key == "validation")
    assert val.default == ("val-core/openai/gsm8k/reward/mean@1",)
    assert len(val.names) == 3


def test_search_filters_metric_names_across_groups(app, seeded) -> None:
    at = app("metrics", run_id=seeded[1][0])
    at.text_input(key="metric_search").set_value("grad_norm").run()
    assert not at.exception
    titles = _titles(at)
    # Every match is drawn (groups open while searching), and nothing else.
    assert sorted(titles) == ["actor/grad_norm", "critic/grad_norm"]
    at.text_input(key="metric_search").set_value("KL").run()
    assert sorted(_titles(at)) == ["actor/kl_loss", "actor/ppo_kl"]
    at.text_input(key="metric_search").set_value("no such metric").run()
    assert _titles(at) == [] and any("No metric name holds" in i.value for i in at.info)


def test_show_all_and_collapsed_groups(app, seeded) -> None:
    at = app("metrics", run_id=seeded[1][0])
    titles = _titles(at)
    assert "critic/score/mean" in titles and "critic/score/max" not in titles
    reward = next(e for e in at.expander if e.label.startswith("Reward"))
    reward.toggle[0].set_value(True).run()
    titles = _titles(at)
    assert {"critic/score/max", "critic/score/min", "critic/advantages/mean"} <= set(titles)
    # A collapsed group builds no chart until it is opened.
    assert "val-core/openai/gsm8k/reward/mean@1" not in titles
    at.session_state[_open_key(at, "validation")] = True
    at.run()
    assert "val-core/openai/gsm8k/reward/mean@1" in _titles(at)
    assert len(_titles(at)) == len(titles) + 1


@pytest.mark.parametrize(
    ("step", "end", "window"),
    [("150", None, (125, 175)), ("150", "200", (125, 225)), ("50", "250", (-50, 350))],
)
def test_focus_link_zooms_on_the_window_with_context(app, seeded, step, end, window) -> None:
    at = app("metrics", run_id=seeded[1][0])
    at.query_params["metric"] = "actor/kl_loss"
    at.query_params["step"] = step
    if end:
        at.query_params["end"] = end
    at.run()
    assert not at.exception
    focus = _charts(at)[0]
    assert _title(focus).startswith("actor/kl_loss · steps")
    assert tuple(focus["layout"]["xaxis"]["range"]) == window
    assert focus["layout"]["xaxis"]["autorange"] is False
    xs = _arr(_curves(focus)[0]["x"])
    assert xs.min() >= max(window[0], 1) and xs.max() <= min(window[1], 300)
    [shade] = [s for s in focus["layout"]["shapes"] if s.get("name") == "focus window"]
    assert (shade["x0"], shade["x1"]) == (int(step) - 0.5, int(end or step) + 0.5)


def test_focus_link_to_a_metric_the_run_lacks(app, seeded) -> None:
    at = app("metrics", run_id=seeded[1][0])
    at.query_params["metric"] = "no/such_metric"
    at.query_params["step"] = "5"
    at.run()
    assert not at.exception
    assert any("no metric no/such\\_metric" in w.value for w in at.warning)
    assert not _titles(at)[0].startswith("no/such")


def test_values_formatted_by_magnitude(app, seeded) -> None:
    at = app("metrics", run_id=seeded[1][1])  # the tuned run: actor/lr = 1.5e-6
    at.text_input(key="metric_search").set_value("actor/lr").run()
    [lr] = _charts(at)
    assert _arr(_curves(lr)[0]["y"])[0] == pytest.approx(1.5e-6)
    assert lr["layout"]["yaxis"]["hoverformat"] == ".3~e"  # 1.5e-6, not 0.000002
    assert lr["layout"]["yaxis"]["tickformat"] == ".3~e"
    at.text_input(key="metric_search").set_value("throughput").run()
    [tp] = _charts(at)
    assert tp["layout"]["yaxis"]["hoverformat"] == ",.0f"  # 1,320
    # Compare's key-metric table: each cell by its own magnitude.
    at = app("compare", selected_runs=seeded[1][:2])
    table = at.dataframe[0].value.set_index("metric")
    base, tuned = [c for c in table.columns if c != "metric" and not c.startswith(("Δ ", "% "))]
    assert "," in table.loc["throughput (tokens/s)", base]  # e.g. 1,176
    assert table.loc["actor ppo_kl", base].startswith("0.00")  # 0.002311
    assert table.loc["actor ppo_kl", tuned].endswith("e-04")  # ~4e-4, not 0.0004
    pct = next(c for c in table.columns if c.startswith("% "))
    assert table.loc["throughput (tokens/s)", pct].endswith("%")


def test_one_smoothing_setting_for_metrics_and_compare(app, seeded) -> None:
    base, tuned = seeded[1][:2]
    at = app("metrics", run_id=base, selected_runs=[base, tuned])
    assert at.sidebar.slider(key="_smoothing_slider").value == 0.0  # raw by default
    assert not any(t["name"].endswith("(raw)") for c in _charts(at) for t in c["data"])
    at.sidebar.slider(key="_smoothing_slider").set_value(0.8).run()
    assert at.session_state["smoothing"] == 0.8
    assert any(t["name"].endswith("(raw)") for c in _charts(at) for t in c["data"])
    # Compare reads the same value, and smooths its overlays with it.
    at.switch_page("pages/compare.py").run()
    assert not at.exception
    assert at.sidebar.slider(key="_smoothing_slider").value == 0.8
    overlay = next(c for c in _charts(at) if _title(c) == "perf/throughput")
    _, raw = Store(seeded[0]).get_run(base).series("perf/throughput")  # type: ignore[union-attr]
    np.testing.assert_allclose(_arr(overlay["data"][0]["y"]), ema(raw, 0.8))
    # Set on Compare, read on Metrics.
    at.sidebar.slider(key="_smoothing_slider").set_value(0.3).run()
    at.switch_page("pages/metrics.py").run()
    assert at.sidebar.slider(key="_smoothing_slider").value == 0.3
    assert at.session_state["smoothing"] == 0.3


def test_grid_draws_a_report_not_in_the_store(seeded) -> None:
    """metric_grid takes a Report directly (the Live page's growing run is not cached)."""
    root, ids = seeded
    script = f"""
import streamlit as st
from logscope.analyze import analyze_run
from logscope.app import _plots
from logscope.store import Store
report = analyze_run(Store({str(root)!r}).get_run({ids[0]!r}))
n = _plots.metric_grid(report, ["actor/kl_loss", "actor/entropy", "nope"], key="live")
st.text(f"drawn {{n}}")
"""
    at = AppTest.from_string(script, default_timeout=60).run()
    assert not at.exception, at.exception
    assert at.text[0].value == "drawn 2"
    assert _titles(at) == ["actor/kl_loss", "actor/entropy"]
