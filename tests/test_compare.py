"""compare_runs: config diff, key-metric table, divergence step."""

from __future__ import annotations

import json

import numpy as np
import pytest

from logscope.compare import (
    compare_runs,
    config_diff,
    divergence_step,
    flatten,
    segment_diffs,
    tail_median,
)
from logscope.model import ConfigSegment
from tests.helpers import make_run

N = 400


def _pair(shift_at: int | None, shift: float = 0.1, seed: int = 0):
    rng = np.random.default_rng(seed)
    trend = 0.3 + 0.3 * (1 - np.exp(-np.arange(N) / 150))
    a = trend + rng.normal(0, 0.03, N)
    b = trend + rng.normal(0, 0.03, N)
    if shift_at is not None:
        b[shift_at:] += shift
    return a, b


def test_flatten_and_config_diff() -> None:
    a = {"actor": {"lr": 1e-6, "clip": 1.0}, "n": 8, "same": [1, 2]}
    b = {"actor": {"lr": 2e-6, "clip": 1}, "same": [1, 2], "new": True}
    assert flatten(a) == {"actor.lr": 1e-6, "actor.clip": 1.0, "n": 8, "same": [1, 2]}
    diff = {r.key: r.values for r in config_diff([a, b])}
    # 1.0 and 1 are the same setting; missing keys show as <unset>.
    assert diff == {"actor.lr": [1e-6, 2e-6], "n": [8, "<unset>"], "new": ["<unset>", True]}


def test_tail_median_uses_the_last_fifth() -> None:
    v = np.concatenate([np.full(80, 100.0), np.full(20, 1.0)])
    v[-1] = 1e9  # a last-step blip does not move the median
    assert tail_median(v) == 1.0
    assert tail_median(np.array([np.nan, 3.0])) == 3.0
    assert tail_median(np.array([])) is None


def test_key_metric_table_deltas_against_first_run() -> None:
    base = make_run(
        {
            "perf/throughput": np.full(100, 1176.0),
            "timing_s/gen": np.full(100, 40.0),
            "critic/vf_loss": np.full(100, 0.081),
            "val-core/openai/gsm8k/reward/mean@1": np.linspace(0.4, 0.55, 100),
        },
        run_id="base",
    )
    tuned = make_run(
        {
            "perf/throughput": np.full(100, 1320.0),
            "timing_s/gen": np.full(100, 30.0),
            "critic/vf_loss": np.full(100, 0.052),
            "val-core/openai/gsm8k/reward/mean@1": np.linspace(0.4, 0.631, 100),
        },
        run_id="tuned",
    )
    cmp = compare_runs([base, tuned])
    rows = {r.label: r for r in cmp.rows}
    tp = rows["throughput (tokens/s)"]
    assert tp.values == [1176.0, 1320.0]
    assert tp.deltas[1] == pytest.approx(144.0)
    assert tp.pct[1] == pytest.approx(144 / 1176 * 100)
    assert rows["critic vf_loss"].pct[1] == pytest.approx((0.052 - 0.081) / 0.081 * 100)
    assert rows["validation score"].values == pytest.approx([0.55, 0.631])
    assert "actor ppo_kl" not in rows  # neither run has it
    data = json.loads(json.dumps(cmp.to_dict()))
    assert data["schema"] == "logscope.compare/1"
    md = cmp.to_markdown()
    assert "+12.2%" in md and "| validation score |" in md


def test_divergence_found_near_the_shift() -> None:
    a, b = _pair(shift_at=250)
    steps = np.arange(1, N + 1)
    step, direction, sigma, _thr, w, _ = divergence_step(steps, a, steps, b)
    assert direction == "higher"
    assert step is not None and abs(step - 251) <= w
    # sigma is the noise of the difference of two runs with noise 0.03 each.
    assert sigma == pytest.approx(0.03 * np.sqrt(2), rel=0.25)


@pytest.mark.parametrize("seed", range(5))
def test_no_divergence_when_runs_agree_within_noise(seed: int) -> None:
    a, b = _pair(shift_at=None, seed=seed)
    steps = np.arange(1, N + 1)
    assert divergence_step(steps, a, steps, b)[0] is None


def test_divergence_ignores_a_transient_blip() -> None:
    a, b = _pair(shift_at=None)
    b[100:115] += 0.3  # a blip that recovers is not a divergence
    steps = np.arange(1, N + 1)
    assert divergence_step(steps, a, steps, b)[0] is None


def test_divergence_aligns_on_shared_steps() -> None:
    a, b = _pair(shift_at=200, shift=-0.15)
    sa = np.arange(1, N + 1)
    sb = sa[::2]  # the other run logged every other step
    step, direction, *_ = divergence_step(sa, a, sb, b[::2])
    assert direction == "lower" and step is not None and 180 <= step <= 215


def test_compare_runs_reports_divergence_per_run() -> None:
    a, b = _pair(shift_at=250)
    _, c = _pair(shift_at=None, seed=7)
    runs = [
        make_run({"critic/score/mean": a}, run_id="a", config={"x": 1}),
        make_run({"critic/score/mean": b}, run_id="b", config={"x": 2}),
        make_run({"critic/score/mean": c}, run_id="c", config={"x": 1}),
    ]
    cmp = compare_runs(runs)
    by_id = {d.run_id: d for d in cmp.divergence}
    assert by_id["b"].step is not None and by_id["c"].step is None
    assert cmp.first_divergence == by_id["b"].step
    assert [r.key for r in cmp.config_diff] == ["x"]


def test_compare_needs_two_runs_and_handles_unknown_config() -> None:
    r = make_run({"critic/score/mean": np.ones(10)})
    with pytest.raises(ValueError):
        compare_runs([r])
    cmp = compare_runs([r, make_run({"critic/score/mean": np.ones(10)}, run_id="b")])
    assert cmp.config_diff == [] and cmp.config_known == [False, False]
    assert "config unknown" in cmp.to_markdown()


def test_segment_diffs_of_a_restarted_run() -> None:
    run = make_run({"critic/score/mean": np.ones(10)}, config={"kl": 0.001})
    run.config_segments.append(ConfigSegment(6, {"kl": 0.0005}))
    [(start, restart, diff)] = segment_diffs(run)
    assert (start, restart) == (0, 6)
    assert diff[0].key == "kl" and diff[0].values == [0.001, 0.0005]
