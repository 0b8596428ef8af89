"""Detectors and renderers on whatever a reader can hand them: short, NaN/inf-filled, huge,
constant or gappy series. No detector may raise (a raise is reported in `Report.errors`, which
must stay empty) and every renderer must produce its output.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logscope.aliases import ALIASES
from logscope.analyze import analyze_run
from tests.helpers import make_run

NAMES = sorted({name for names in ALIASES.values() for name in names})

_VALUE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0.0, -0.0, 1e300, -1e300, 5e-324, float("nan"), float("inf")]),
)


@st.composite
def _runs(draw):
    n = draw(st.integers(min_value=0, max_value=90))
    gaps = draw(st.lists(st.integers(1, 50), min_size=n, max_size=n))
    steps = np.cumsum(np.asarray(gaps, dtype=np.int64)) if n else np.zeros(0, dtype=np.int64)
    picked = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=12, unique=True))
    series = {}
    for name in picked:
        kind = draw(st.sampled_from(["random", "constant", "ramp", "nan-tail"]))
        if kind == "random":
            values = draw(st.lists(_VALUE, min_size=n, max_size=n))
        elif kind == "constant":
            values = [draw(_VALUE)] * n
        elif kind == "ramp":
            values = list(np.linspace(0, draw(st.floats(-1e6, 1e6)), n))
        else:
            k = draw(st.integers(0, n))
            values = list(np.linspace(1, 2, n))[:k] + [float("nan")] * (n - k)
        series[name] = values
    return make_run(series, steps=steps)


@settings(
    max_examples=15,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_runs())
def test_no_detector_raises_on_any_series(run) -> None:
    report = analyze_run(run)
    assert report.errors == [], report.errors
    report.to_json()
    report.to_markdown()
    report.to_html()


def test_a_clean_linear_reward_is_not_a_sawtooth() -> None:
    steps = np.arange(1, 61)
    run = make_run(
        {"critic/score/mean": list(steps / 10), "actor/pg_loss": list(steps * 0.01)},
        steps=steps,
    )
    names = {f.name for f in analyze_run(run).findings if f.severity != "info"}
    assert "reward-sawtooth" not in names
