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
    marker_steps,
    metric_figure,
    metric_groups,
)
from logscope.model import Finding, Incident
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
