"""Batched forms of per-window loops give exactly what the loop gave, window by window."""

from __future__ import annotations

import numpy as np
import pytest
from logscope.detectors._series import moving_average, moving_averages
from logscope.detectors.reward import RewardSawtooth


def _moving_average_loop(v: np.ndarray, window: int) -> np.ndarray:
    """The one-window moving average as it was written before the batch."""
    n = len(v)
    window = max(1, min(int(window), n))
    if window <= 1 or n == 0:
        return v.copy()
    c = np.concatenate([[0.0], np.cumsum(v)])
    i = np.arange(n)
    lo = np.clip(i - window // 2, 0, n)
    hi = np.clip(i + window - window // 2, 0, n)
    return (c[hi] - c[lo]) / (hi - lo)


def _score_period_loop(det: RewardSawtooth, vals: np.ndarray, p: int) -> dict | None:
    """reward-sawtooth's period score, one period at a time (the form before the batch)."""
    resid = vals - _moving_average_loop(vals, p)
    a, b, c = resid[:-p] * resid[p:], resid[:-p] ** 2, resid[p:] ** 2
    sa, sb, sc = (np.cumsum(t[::-1])[::-1] for t in (a, b, c))
    last_start = len(a) - max(det.min_cycles * p, 12)
    if last_start < 0:
        return None
    starts = np.arange(0, last_start + 1)
    denom = np.sqrt(sb[starts] * sc[starts])
    corr = np.where(denom > 0, sa[starts] / np.where(denom > 0, denom, 1.0), 0.0)
    need = np.maximum(det.min_autocorr, det.noise_z / np.sqrt(len(a) - starts))
    margin = corr - need
    k = int(np.argmax(margin))
    return {"period": p, "corr": float(corr[k]), "tail_start": int(starts[k]),
            "significant": bool(margin[k] > 0), "resid": resid}  # fmt: skip


@pytest.mark.parametrize("n", [0, 1, 2, 5, 40, 501])
def test_moving_averages_equal_the_one_window_average(n: int) -> None:
    v = np.random.default_rng(n).normal(size=n) * 1e3
    windows = np.array([1, 2, 3, 4, 7, 30, n, n + 5])
    batch = moving_averages(v, windows)
    for row, w in zip(batch, windows, strict=True):
        np.testing.assert_array_equal(row, _moving_average_loop(v, int(w)))
        np.testing.assert_array_equal(moving_average(v, int(w)), row)


@pytest.mark.parametrize("seed", range(6))
def test_sawtooth_scores_every_period_as_the_loop_did(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(20, 600))
    vals = np.cumsum(rng.normal(size=m)) + 3 * np.sin(np.arange(m) * 2 * np.pi / rng.uniform(3, 30))
    if seed == 0:
        vals[: m // 2] = 1.0  # flat stretch: zero denominators
    det = RewardSawtooth()
    periods = range(2, 60)
    batch = {c["period"]: c for c in det._score_periods(vals, periods)}
    for p in periods:
        ref = _score_period_loop(det, vals, p)
        if ref is None:
            assert p not in batch
            continue
        got = batch[p]
        np.testing.assert_array_equal(got.pop("resid"), ref.pop("resid"))
        assert {k: got[k] for k in ref} == ref
