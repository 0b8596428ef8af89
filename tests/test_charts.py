"""Chart builders: groups, EMA smoothing, spike-preserving downsampling, markers and spans."""

from __future__ import annotations

import time

import numpy as np
import pytest

from logscope.charts import (
    downsample,
    downsample_indices,
    ema,
    figure_points,
    group_figures,
    group_of,
    headline_names,
    marker_steps,
    matches_query,
    metric_figure,
    metric_groups,
    overlay_figure,
    panel_groups,
    spans_decades,
    value_format,
    visible_by_default,
    zoom_range,
)
from logscope.model import Finding, Incident
from logscope.present import fmt_number
from tests.helpers import make_run


@pytest.mark.parametrize(
    ("metric", "group"),
    [
        ("critic/score/mean", "reward"),
        ("critic/rewards/mean", "reward"),
        ("actor/kl_loss", "kl"),
        ("actor/reward_kl_penalty", "kl"),
        ("critic/kl_coeff", "kl"),
        ("actor/ppo_kl", "kl"),
        ("actor/pg_clipfrac", "kl"),
        ("response_length/clip_ratio", "kl"),
        ("actor/entropy", "entropy"),
        ("actor/entropy_loss", "entropy"),
        ("response_length/mean", "lengths"),
        ("prompt_length/max", "lengths"),
        ("timing_s/gen", "timing"),
        ("timing/gen", "timing"),
        ("perf/max_memory_reserved_gb", "memory"),
        ("actor/perf/max_memory_allocated_gb", "memory"),
        ("perf/throughput", "throughput"),
        ("val-core/openai/gsm8k/reward/mean@1", "validation"),
        ("val/test_score/openai/gsm8k", "validation"),
        ("actor/grad_norm", "losses"),
        ("critic/vf_loss", "losses"),
        ("actor/lr(1e-4)", "losses"),
        ("something/else", "other"),
    ],
)
def test_groups_map_verl_names_across_versions(metric: str, group: str) -> None:
    assert group_of(metric).key == group


def test_metric_groups_keep_group_order() -> None:
    groups = metric_groups(["timing_s/gen", "critic/score/mean", "actor/entropy", "x"])
    assert list(groups) == ["reward", "entropy", "timing", "other"]


def _tb_ema(values: list[float], w: float) -> list[float]:
    # TensorBoard's loop (vz_line_chart2 smoothing), written out as the reference.
    last, n, out = 0.0, 0, []
    for v in values:
        if not np.isfinite(v):
            out.append(v)
            continue
        last = last * w + (1 - w) * v
        n += 1
        out.append(last / (1 - w**n))
    return out


def test_ema_matches_tensorboard_loop_and_is_debiased() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(5.0, 1.0, 500)
    x[[10, 200]] = np.nan
    got = ema(x, 0.9)
    np.testing.assert_allclose(got, _tb_ema(list(x), 0.9), rtol=1e-10)
    # Debiased: the first smoothed value is the first value, not 0.1 of it.
    assert got[0] == pytest.approx(x[0])
    assert np.isnan(got[10]) and np.isnan(got[200])
    # Smoothing reduces the jitter.
    assert np.nanstd(np.diff(got)) < 0.5 * np.nanstd(np.diff(x))


def test_ema_weight_zero_is_identity_and_bad_weight_raises() -> None:
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(ema(x, 0.0), x)
    with pytest.raises(ValueError):
        ema(x, 1.0)


def test_downsampling_keeps_the_spike_and_bounds_points() -> None:
    rng = np.random.default_rng(0)
    n = 100_000
    steps = np.arange(1, n + 1)
    y = rng.normal(0.0, 1.0, n)
    y[73_421] = 50.0  # the spike a finding points at
    y[12_345] = -40.0
    s, v = downsample(steps, y, max_points=1000)
    assert len(s) <= 1000 + 2
    assert 73_422 in s and v[list(s).index(73_422)] == 50.0
    assert 12_346 in s
    assert v.max() == y.max() and v.min() == y.min()
    assert s[0] == 1 and s[-1] == n
    assert np.all(np.diff(s) > 0)


def test_downsampling_keeps_requested_steps_and_nan() -> None:
    y = np.sin(np.linspace(0, 20, 50_000))
    y[30_000] = np.nan
    idx = downsample_indices(y, 500, keep=[4_321])
    assert 4_321 in idx and 30_000 in idx
    s, _ = downsample(np.arange(50_000) * 2, y, 500, keep_steps=[8_642, 10**9])
    assert 8_642 in s


def test_downsampling_is_fast_on_long_runs() -> None:
    y = np.random.default_rng(2).normal(size=1_000_000)
    t = time.perf_counter()
    downsample_indices(y, 2000)
    assert time.perf_counter() - t < 0.5


def test_short_series_untouched() -> None:
    idx = downsample_indices(np.arange(10.0), 100)
    np.testing.assert_array_equal(idx, np.arange(10))


def _finding(metric: str, step: int, severity: str = "error") -> Finding:
    return Finding(
        code="LS999",
        name="kl-jump",
        severity=severity,  # type: ignore[arg-type]
        title="KL jumped",
        message="kl went up",
        metric=metric,
        step=step,
        end_step=step + 3,
    )


def test_metric_figure_marks_findings_and_shades_incidents() -> None:
    n = 20_000
    y = np.random.default_rng(3).normal(0.001, 1e-4, n)
    y[15_000] = 0.05
    run = make_run({"actor/kl_loss": y, "actor/ppo_kl": y / 2})
    f = _finding("actor/kl_loss", 15_001)
    inc = Incident("kl-jump@15001", "KL jumped", "error", 15_001, 15_004, "kl-jump", [0])
    fig = metric_figure(
        run, ["actor/kl_loss", "actor/ppo_kl"], findings=[f], incidents=[inc], max_points=400
    )
    assert marker_steps(fig) == [15_001]
    marker = next(t for t in fig.data if t.name == "findings")
    assert marker.y[0] == pytest.approx(0.05)
    assert "KL jumped" in marker.text[0]
    kinds = sorted(s.type for s in fig.layout.shapes)
    assert kinds == ["line", "rect"]
    assert figure_points(fig) < 1000
    kl = next(t for t in fig.data if t.name == "actor/kl_loss")
    assert max(kl.y) == pytest.approx(0.05)


def test_smoothing_adds_a_faint_raw_trace() -> None:
    run = make_run({"critic/score/mean": np.random.default_rng(0).normal(size=300)})
    fig = metric_figure(run, ["critic/score/mean"], smoothing=0.8)
    assert [t.name for t in fig.data] == ["critic/score/mean (raw)", "critic/score/mean"]
    assert np.std(np.diff(fig.data[1].y)) < np.std(np.diff(fig.data[0].y))


def test_group_figures_one_per_group_with_step_range() -> None:
    x = np.linspace(0, 1, 500)
    run = make_run({"critic/score/mean": x, "actor/entropy": 1 - x, "timing_s/gen": x + 10})
    figs = group_figures(run, step_range=(100, 200))
    assert set(figs) == {"reward", "entropy", "timing"}
    xs = figs["reward"].data[0].x
    assert min(xs) == 100 and max(xs) == 200


def test_groups_draw_headline_metrics_and_flagged_ones_by_default() -> None:
    x = np.linspace(0, 1, 100)
    run = make_run(
        {
            "critic/score/mean": x,
            "critic/score/max": x + 1,
            "critic/advantages/max": x * 4,
            "critic/advantages/min": -x * 4,
        }
    )
    flagged = _finding("critic/advantages/max", 50)
    fig = group_figures(run)["reward"]
    visible = {t.name for t in fig.data if t.visible is not False and t.visible != "legendonly"}
    assert visible == {"critic/score/mean"}
    figs = group_figures(run, _Report(run, [flagged]))  # type: ignore[arg-type]
    shown = {
        t.name for t in figs["reward"].data if t.visible != "legendonly" and t.name != "findings"
    }
    assert shown == {"critic/score/mean", "critic/advantages/max"}


class _Report:
    def __init__(self, run, findings) -> None:  # type: ignore[no-untyped-def]
        self.run, self.findings, self.incidents = run, findings, []


def test_log_text_in_plotly_labels_is_not_markup() -> None:
    evil = "x/<a href='javascript:alert(1)'>click</a>"
    run = make_run({evil: np.arange(5.0)})
    fig = metric_figure(run, [evil], findings=[_finding(evil, 2)])
    names = [t.name for t in fig.data]
    assert "<a" not in " ".join(names) and "&lt;a href" in names[0]
    assert "<a" not in fig.layout.title.text
    marker = next(t for t in fig.data if t.name == "findings")
    assert marker.x == (2,)


# ---- one chart per metric: panel order, defaults, zoom, formats --------------------------
def test_panel_groups_put_findings_first_and_default_to_headline_metrics() -> None:
    names = [
        "critic/score/mean",
        "critic/score/max",
        "critic/advantages/max",
        "actor/entropy",
        "timing_s/gen",
        "timing_s/update_actor",
        "val-aux/num_turns/mean",
        "val-core/openai/gsm8k/reward/mean@1",
    ]
    groups = panel_groups(names, [_finding("timing_s/update_actor", 5, "warning")])
    assert [g.key for g in groups] == ["timing", "reward", "entropy", "validation"]
    timing, reward, _, val = groups
    assert timing.names[0] == "timing_s/update_actor" and timing.flagged == {
        "timing_s/update_actor"
    }
    assert timing.default == ("timing_s/update_actor", "timing_s/gen")
    assert reward.default == ("critic/score/mean",) and len(reward.names) == 3
    assert val.default == ("val-core/openai/gsm8k/reward/mean@1",)  # not val-aux/num_turns
    # A worse finding moves its group ahead.
    worse = [_finding("timing_s/gen", 5, "warning"), _finding("critic/score/max", 9, "critical")]
    assert [g.key for g in panel_groups(names, worse)][:2] == ["reward", "timing"]


def test_panel_groups_search_matches_every_word_across_groups() -> None:
    names = ["actor/kl_loss", "actor/ppo_kl", "critic/kl_coeff", "actor/entropy", "timing_s/gen"]
    groups = panel_groups(names, query="KL actor")
    assert [(g.key, g.names, g.default) for g in groups] == [
        ("kl", ("actor/kl_loss", "actor/ppo_kl"), ("actor/kl_loss", "actor/ppo_kl"))
    ]
    assert panel_groups(names, query="nothing") == []
    assert matches_query("actor/grad_norm", "  GRAD  ") and not matches_query("x", "y")


def test_validation_headline_without_val_core() -> None:
    names = ["val-aux/num_turns/mean", "val/test_score/openai/gsm8k", "val/other"]
    assert headline_names("validation", names) == ["val/test_score/openai/gsm8k"]
    assert visible_by_default("validation", names) == {"val/test_score/openai/gsm8k"}


@pytest.mark.parametrize(
    ("first", "last", "start", "end", "expected"),
    [
        (1, 300, 150, None, (125, 175)),  # at least 25 steps of context
        (1, 300, 150, 200, (125, 225)),
        (1, 300, 50, 250, (-50, 350)),  # half the window
        (0, 100_000, 70_000, 70_010, (65_000, 75_010)),  # 5% of the run
        (1, 300, 150, 140, (125, 175)),  # an end before the start is ignored
    ],
)
def test_zoom_range_context(first, last, start, end, expected) -> None:  # type: ignore[no-untyped-def]
    assert zoom_range(first, last, start, end) == expected


def test_metric_figure_x_range_is_the_zoom() -> None:
    run = make_run({"actor/kl_loss": np.linspace(0, 1, 300)})
    fig = metric_figure(run, ["actor/kl_loss"], step_range=(125, 175), x_range=(125, 175))
    assert tuple(fig.layout.xaxis.range) == (125, 175) and fig.layout.xaxis.autorange is False
    assert min(fig.data[0].x) == 125 and max(fig.data[0].x) == 175
    assert fig.layout.showlegend is False  # one metric: its title names it


@pytest.mark.parametrize(
    ("values", "fmt"),
    [
        (np.full(10, 1.5e-6), ".3~e"),
        (np.abs(np.random.default_rng(0).normal(7e-5, 1e-5, 50)), ".3~e"),
        (np.array([0.0123, 0.02, 0.5]), ".4~g"),
        (np.array([1168.0, 1200.0, 1320.5]), ",.0f"),
        (np.array([0.0, np.nan]), ".4~g"),
        (np.array([2e15, 3e15]), ".3~e"),
    ],
)
def test_value_format_by_magnitude(values, fmt) -> None:  # type: ignore[no-untyped-def]
    assert value_format(values) == fmt


def test_figures_carry_hover_and_tick_formats() -> None:
    run = make_run({"actor/lr": np.full(100, 1.5e-6), "perf/throughput": np.full(100, 1168.0)})
    lr = metric_figure(run, ["actor/lr"])
    assert lr.layout.yaxis.hoverformat == ".3~e" and lr.layout.yaxis.tickformat == ".3~e"
    tp = overlay_figure([run, run], "perf/throughput")
    assert tp.layout.yaxis.hoverformat == ",.0f"


def test_log_axis_only_where_values_span_two_decades() -> None:
    grad = np.r_[np.full(50, 0.5), np.full(50, 400.0)]
    run = make_run({"actor/grad_norm": grad, "actor/pg_loss": grad - 1.0, "x/flat": grad / 400})
    assert spans_decades(grad) and not spans_decades(grad - 1.0)
    assert metric_figure(run, ["actor/grad_norm"], log_y=True).layout.yaxis.type == "log"
    assert metric_figure(run, ["actor/grad_norm"]).layout.yaxis.type != "log"
    assert metric_figure(run, ["actor/pg_loss"], log_y=True).layout.yaxis.type != "log"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.5e-6, "1.5e-06"),
        (2e-6, "2e-06"),
        (-7e-5, "-7e-05"),
        (0.0123, "0.0123"),
        (0.001, "0.001"),
        (12.3456, "12.35"),
        (1168, "1,168"),
        (1168.4, "1,168"),
        (np.float32(1.5e-6), "1.5e-06"),
        (np.int64(123456), "123,456"),
        (0.0, "0"),
        (float("nan"), "nan"),
        (None, "–"),
        ("text", "text"),
    ],
)
def test_fmt_number_by_magnitude(value, text) -> None:  # type: ignore[no-untyped-def]
    assert fmt_number(value) == text


def test_fmt_number_sign_for_deltas() -> None:
    assert fmt_number(144.0, sign=True) == "+144"
    assert fmt_number(-3e-7, sign=True) == "-3e-07"
    assert fmt_number(5e-7, sign=True) == "+5e-07"
