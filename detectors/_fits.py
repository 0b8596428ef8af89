"""Least-squares fits of the reward and system detectors: a continuous two-piece line (`hinge_fit`),
lines over every prefix and suffix, and polynomial and isotonic fits over every prefix, each in
O(n) or O(n · degree³) with cumulative sums.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class Hinge:
    """A continuous piecewise-linear fit with one break at `at`: slopes before and after."""

    at: float
    level: float  # fitted value at the break
    slope_before: float
    slope_after: float
    rss: float
    rss_line: float  # residual sum of squares of one straight line, for comparison


def hinge_fit(
    x: np.ndarray,
    y: np.ndarray,
    mode: str = "free",
    candidates: np.ndarray | None = None,
    min_side: int = 3,
) -> Hinge | None:
    """Least-squares continuous two-piece linear fit, break searched over `candidates`.

    `mode`: "free" (both slopes), "flat_after" (plateau: slope 0 after the break) or
    "flat_before" (flat, then a ramp). O(n + candidates) with prefix sums.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = len(x)
    if n < 2 * min_side + 1:
        return None
    if candidates is None:
        candidates = x[min_side : n - min_side + 1]
    c = np.asarray(candidates, dtype=np.float64)
    k = np.searchsorted(x, c, side="left")  # points with x < c are the left side
    ok = (k >= min_side) & (n - k >= min_side)
    c, k = c[ok], k[ok]
    if len(c) == 0:
        return None

    def prefix(a: np.ndarray) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(a)])

    px, pxx, py, pxy = prefix(x), prefix(x * x), prefix(y), prefix(x * y)
    nl = k.astype(np.float64)
    nr = n - nl
    sx_l, sxx_l, sy_l, sxy_l = px[k], pxx[k], py[k], pxy[k]
    sx_r, sxx_r, sy_r, sxy_r = px[-1] - sx_l, pxx[-1] - sxx_l, py[-1] - sy_l, pxy[-1] - sxy_l
    su = sx_l - c * nl
    suu = sxx_l - 2 * c * sx_l + c * c * nl
    suy = sxy_l - c * sy_l
    sv = sx_r - c * nr
    svv = sxx_r - 2 * c * sx_r + c * c * nr
    svy = sxy_r - c * sy_r
    sy = py[-1]
    syy = float(np.sum(y * y))
    m = len(c)
    if mode == "flat_after":
        a = np.zeros((m, 2, 2))
        a[:, 0, 0], a[:, 0, 1], a[:, 1, 0], a[:, 1, 1] = n, su, su, suu
        b = np.stack([np.full(m, sy), suy], axis=1)
    elif mode == "flat_before":
        a = np.zeros((m, 2, 2))
        a[:, 0, 0], a[:, 0, 1], a[:, 1, 0], a[:, 1, 1] = n, sv, sv, svv
        b = np.stack([np.full(m, sy), svy], axis=1)
    else:
        a = np.zeros((m, 3, 3))
        a[:, 0, 0], a[:, 0, 1], a[:, 0, 2] = n, su, sv
        a[:, 1, 0], a[:, 1, 1] = su, suu
        a[:, 2, 0], a[:, 2, 2] = sv, svv
        b = np.stack([np.full(m, sy), suy, svy], axis=1)
    a += np.eye(a.shape[1]) * 1e-12 * (1 + np.abs(a).max(axis=(1, 2), keepdims=True))
    try:
        beta = np.linalg.solve(a, b[..., None])[..., 0]
    except np.linalg.LinAlgError:
        return None
    rss = syy - np.sum(beta * b, axis=1)
    best = int(np.argmin(rss))
    coef = beta[best]
    if mode == "flat_after":
        before, after = coef[1], 0.0
    elif mode == "flat_before":
        before, after = 0.0, coef[1]
    else:
        before, after = coef[1], coef[2]
    xm = x - x.mean()
    sxx = float(np.sum(xm * xm))
    slope = float(np.sum(xm * (y - y.mean())) / sxx) if sxx > 0 else 0.0
    rss_line = float(np.sum((y - y.mean() - slope * xm) ** 2))
    return Hinge(
        at=float(c[best]),
        level=float(coef[0]),
        slope_before=float(before),
        slope_after=float(after),
        rss=float(max(rss[best], 0.0)),
        rss_line=rss_line,
    )


def line_rss(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RSS of a least-squares line over every prefix x[:k] and every suffix x[k:] (k = 0..n).

    Entries for fewer than 2 points are 0. O(n) with cumulative sums; x is centred first for
    numerical stability.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    x = x - x.mean() if len(x) else x
    y = y - y.mean() if len(y) else y

    def sums(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
        c = [
            np.concatenate([[0.0], np.cumsum(a)])
            for a in (np.ones_like(xs), xs, ys, xs * xs, ys * ys, xs * ys)
        ]
        n, sx, sy, sxx, syy, sxy = c
        with np.errstate(invalid="ignore", divide="ignore"):
            vxx = sxx - sx * sx / np.where(n > 0, n, 1)
            vyy = syy - sy * sy / np.where(n > 0, n, 1)
            vxy = sxy - sx * sy / np.where(n > 0, n, 1)
            rss = np.where(vxx > 1e-12, vyy - vxy * vxy / np.where(vxx > 1e-12, vxx, 1), vyy)
        rss[n < 2] = 0.0
        return np.maximum(rss, 0.0)

    prefix = sums(x, y)
    suffix = sums(x[::-1], y[::-1])[::-1]
    return prefix, suffix


def line_at(x: np.ndarray, y: np.ndarray, at: float) -> tuple[float, float]:
    """(value at `at`, slope) of the least-squares line through (x, y)."""
    if len(x) < 2 or float(np.ptp(x)) == 0:
        return (float(np.mean(y)) if len(y) else float("nan")), 0.0
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept + slope * at), float(slope)


def poly_prefix_fit(
    x: np.ndarray, y: np.ndarray, degree: int = 2
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least-squares polynomial of `degree` over every prefix x[:k] (k = 0..n).

    Returns (rss, value at the prefix's last point, slope there), each of length n + 1;
    prefixes with no more points than coefficients get rss 0 and NaN value/slope.
    Cumulative moment sums and one batched solve, so O(n · degree³).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = len(x)
    rss = np.zeros(n + 1)
    value = np.full(n + 1, np.nan)
    slope = np.full(n + 1, np.nan)
    d = degree + 1
    if n <= d:
        return rss, value, slope
    span = float(np.ptp(x)) or 1.0
    mid, scale = float(x.mean()), span / 2
    u = (x - mid) / scale
    ym = float(y.mean())
    yc = y - ym
    powers = np.stack([u**j for j in range(2 * degree + 1)])
    mom = np.concatenate([np.zeros((2 * degree + 1, 1)), np.cumsum(powers, axis=1)], axis=1)
    rhs = np.concatenate(
        [np.zeros((d, 1)), np.cumsum(np.stack([yc * u**j for j in range(d)]), axis=1)], axis=1
    )
    syy = np.concatenate([[0.0], np.cumsum(yc * yc)])
    ks = np.arange(d + 1, n + 1)
    a = np.empty((len(ks), d, d))
    for i in range(d):
        for j in range(d):
            a[:, i, j] = mom[i + j, ks]
    b = rhs[:, ks].T
    a += np.eye(d) * 1e-10 * ks[:, None, None]
    beta = np.linalg.solve(a, b[..., None])[..., 0]
    rss[ks] = np.maximum(syy[ks] - np.sum(beta * b, axis=1), 0.0)
    ue = u[ks - 1]
    value[ks] = ym + sum(beta[:, j] * ue**j for j in range(d))
    slope[ks] = sum(j * beta[:, j] * ue ** (j - 1) for j in range(1, d)) / scale
    return rss, value, slope


def isotonic_prefix_fit(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Non-decreasing least-squares fit over every prefix y[:k] (k = 0..n), by incremental PAVA.

    Returns (rss, fitted value at the prefix's last point), each of length n + 1 (NaN level for
    the empty prefix). Amortised O(n).
    """
    y = np.asarray(y, dtype=np.float64)
    n = len(y)
    rss = np.zeros(n + 1)
    level = np.full(n + 1, np.nan)
    sums: list[float] = []
    sqs: list[float] = []
    counts: list[int] = []
    total_sse = 0.0  # sum over blocks of within-block squared deviations

    def sse(s: float, q: float, c: int) -> float:
        return q - s * s / c

    for k, v in enumerate(y):
        s, q, c = float(v), float(v * v), 1
        while sums and sums[-1] / counts[-1] >= s / c:
            ps, pq, pc = sums.pop(), sqs.pop(), counts.pop()
            total_sse -= sse(ps, pq, pc)
            s, q, c = s + ps, q + pq, c + pc
        sums.append(s)
        sqs.append(q)
        counts.append(c)
        total_sse += sse(s, q, c)
        rss[k + 1] = max(total_sse, 0.0)
        level[k + 1] = s / c
    return rss, level


def minimize_bounded(
    func: Callable[[float], float], lo: float, hi: float, xatol: float = 1e-5, maxiter: int = 500
) -> tuple[float, float]:
    """(x, func(x)) at a minimum of `func` on [lo, hi]: Brent's bounded method, step for step
    scipy's `minimize_scalar(method="bounded")` (same evaluations, same result), which is
    ported here because importing scipy.optimize costs ~0.5 s, more than a small run's analysis.
    """
    sqrt_eps = math.sqrt(2.2e-16)
    golden_mean = 0.5 * (3.0 - math.sqrt(5.0))
    a, b = lo, hi
    fulc = a + golden_mean * (b - a)
    nfc = xf = fulc
    rat = e = 0.0
    fx = func(xf)
    num = 1
    ffulc = fnfc = fx
    xm = 0.5 * (a + b)
    tol1 = sqrt_eps * abs(xf) + xatol / 3.0
    tol2 = 2.0 * tol1
    while abs(xf - xm) > tol2 - 0.5 * (b - a):
        golden = True
        if abs(e) > tol1:  # try a parabola through the three best points
            golden = False
            r = (xf - nfc) * (fx - ffulc)
            q = (xf - fulc) * (fx - fnfc)
            p = (xf - fulc) * q - (xf - nfc) * r
            q = 2.0 * (q - r)
            if q > 0.0:
                p = -p
            q = abs(q)
            r, e = e, rat
            if abs(p) < abs(0.5 * q * r) and q * (a - xf) < p < q * (b - xf):
                rat = (p + 0.0) / q
                x = xf + rat
                if (x - a) < tol2 or (b - x) < tol2:
                    rat = tol1 * (np.sign(xm - xf) + ((xm - xf) == 0))
            else:
                golden = True
        if golden:
            e = a - xf if xf >= xm else b - xf
            rat = golden_mean * e
        x = xf + (np.sign(rat) + (rat == 0)) * max(abs(rat), tol1)
        fu = func(x)
        num += 1
        if fu <= fx:
            if x >= xf:
                a = xf
            else:
                b = xf
            fulc, ffulc = nfc, fnfc
            nfc, fnfc = xf, fx
            xf, fx = x, fu
        else:
            if x < xf:
                a = x
            else:
                b = x
            if fu <= fnfc or nfc == xf:
                fulc, ffulc = nfc, fnfc
                nfc, fnfc = x, fu
            elif fu <= ffulc or fulc in (xf, nfc):
                fulc, ffulc = x, fu
        xm = 0.5 * (a + b)
        tol1 = sqrt_eps * abs(xf) + xatol / 3.0
        tol2 = 2.0 * tol1
        if num >= maxiter:
            break
    return xf, fx
