"""Run's derived views: the sorted step list, the per-metric series and their caches."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from logscope.model import Run, Source
from logscope.schemas import METRICS_SCHEMA


def _run_of(rows: list[tuple[int, str | None, float | None]]) -> Run:
    """A run of (step, metric, value) rows, in the order given."""
    metrics = pl.DataFrame(
        {
            "step": [r[0] for r in rows],
            "metric": [r[1] for r in rows],
            "value": [r[2] for r in rows],
            "wall_time": [None] * len(rows),
        },
        schema=METRICS_SCHEMA,
    )
    return Run(id="r", source=Source("test", "<mem>"), metrics=metrics)


def _run(steps: list[int]) -> Run:
    return _run_of([(step, "a", 1.0) for step in steps])


def test_steps_are_sorted_and_distinct_for_dense_sparse_and_negative_steps() -> None:
    for steps in ([5, 3, 3, 1, 4], [0, 10**15, 7, 7], [-3, 2, -3, 0], [10**12 + 3, 10**12], []):
        run = _run(steps)
        assert run.steps.tolist() == sorted(set(steps))
        assert run.n_steps == len(set(steps))


def test_steps_follow_a_replaced_metrics_frame_and_are_read_only() -> None:
    run = _run([1, 2, 3])
    first = run.steps
    assert not first.flags.writeable
    assert run.steps is first  # built once per frame
    run.metrics = _run([7, 9]).metrics
    assert run.steps.tolist() == [7, 9]
    assert np.array_equal(first, [1, 2, 3])


def test_advice_that_changes_nothing_is_not_advice():
    """`free_cache_engine: True → True` is dropped from a finding; a real change, or advice on
    an unknown config (current None), stays."""
    from logscope.model import Advice, Finding

    def advice(current, suggested):
        return Advice("actor_rollout_ref.rollout.x", current, suggested, None, "why", "src")

    kept = [advice(None, True), advice(16, 6), advice(1e-3, 7e-4)]
    noop = [advice(True, True), advice(True, "True"), advice(1, 1.0), advice("vllm", "vllm")]
    finding = Finding("LS100", "x", "warning", "t", "m", advice=noop + kept)
    assert finding.advice == kept


rows = st.lists(
    st.tuples(
        st.integers(-5, 40),
        st.sampled_from(["actor/kl", "critic/score", "x", "é/ü", None]),
        st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none()),
    ),
    max_size=60,
)


@given(rows)
def test_series_are_each_metrics_rows_in_step_order_as_a_plain_filter_and_stable_sort_gives(
    data: list[tuple[int, str | None, float | None]],
) -> None:
    """The index (one sort of category codes, out-of-order metrics reordered in place) equals
    the obvious per-metric filter + stable sort, for rows in any order, repeated steps, NaN,
    null values and null names (which belong to no metric)."""
    run = _run_of(data)
    names = sorted({r[1] for r in data if r[1] is not None})
    assert run.metric_names == names
    for name in names:
        mine = [(s, v) for s, m, v in data if m == name]
        mine.sort(key=lambda r: r[0])  # stable: a repeated step keeps its rows' order
        steps, values = run.series(name)
        assert steps.tolist() == [s for s, _ in mine]
        want = np.array([np.nan if v is None else v for _, v in mine], dtype=np.float64)
        assert np.array_equal(values, want, equal_nan=True)
        assert not steps.flags.writeable and not values.flags.writeable
    assert run.series("absent")[0].size == 0
