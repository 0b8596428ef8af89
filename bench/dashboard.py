"""How long the Metrics page of a 100,000-step run takes to render its charts.

Builds a simulated 100k-step PPO run (logscope.synthetic, ~76 metrics, a KL jump injected),
puts it in a temporary store, and times the Metrics page under Streamlit's AppTest (the page's
whole script run: store read, Report, grouping, downsampling, figure building and the plotly
JSON Streamlit sends to the browser). The page draws one chart per metric: the panels of the
groups open at first (groups with findings, the reward group), each group's headline metrics
and those with findings; collapsed groups build nothing until opened. Reported as the median
of --repeats runs:

- first render: the page's first run with the Report already built (the Runs page, where a
  user lands, builds it), so this is grouping, downsampling, figures and their JSON;
- open the other groups: every collapsed group opened at once (their panels built, the
  others cached), the worst case of a user's clicks;
- rerun: the page again after an interaction (figures cached);
- cold: the page run when nothing is cached (store read + the whole analysis + charts);
- baseline: a trivial one-title page under the same AppTest, so the ratio is machine-neutral.

Also checks that the spike a finding points at survives downsampling (its value is on the
chart) and prints the number of points drawn against the number of raw points.

    python bench/dashboard.py [--steps 100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app" / "app.py"
TARGET_S = 1.0


def _arr(value) -> np.ndarray:  # type: ignore[no-untyped-def]
    if isinstance(value, dict) and "bdata" in value:
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    return np.asarray(value if value is not None else [])


def make_run(steps: int):  # type: ignore[no-untyped-def]
    from logscope.synthetic import Injection, simulate

    sim = simulate(
        n_steps=steps, algorithm="ppo", seed=7, inject=[Injection("kl-jump", int(steps * 0.7))]
    )
    return sim.to_run()


def metrics_app(run_id: str):  # type: ignore[no-untyped-def]
    """An AppTest on the Metrics page (its one-off set-up, e.g. component discovery, done)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=600)
    at.session_state["run_id"] = run_id
    at.run()  # the landing page (Runs); it also builds the Report once
    at.switch_page("pages/metrics.py")
    return at


def timed_run(at) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    at.run()
    elapsed = time.perf_counter() - t0
    if at.exception:
        raise RuntimeError(at.exception)
    return elapsed


def time_trivial() -> float:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_string("import streamlit as st\nst.title('baseline')\n")
    at.run()
    t0 = time.perf_counter()
    at.run()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    t0 = time.perf_counter()
    run = make_run(args.steps)
    build_s = time.perf_counter() - t0
    print(
        f"run: {args.steps:,} steps, {len(run.metric_names)} metrics, "
        f"{run.metrics.height:,} values (simulated in {build_s:.1f} s)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        from logscope.store import Store

        Store(tmp).put_run(run)
        os.environ["LOGSCOPE_STORE"] = tmp
        import streamlit as st

        first, warm, opened, cold = [], [], [], []
        for _ in range(args.repeats):
            # First render of the page: Report cached (the Runs page built it), charts not.
            st.cache_data.clear()
            at = metrics_app(run.id)
            first.append(timed_run(at))
            warm.append(timed_run(at))  # an interaction: everything cached
            n_panels = len(at.get("plotly_chart"))
            groups_open = [k for k in at.session_state if "-open-" in k]
            shut = [k for k in groups_open if not at.session_state[k]]
            if shut:  # open every collapsed group, as clicks on their headers do
                for k in shut:
                    at.session_state[k] = True
                opened.append(timed_run(at))
                opened_panels = len(at.get("plotly_chart")) - n_panels
                for k in shut:
                    at.session_state[k] = False
                at.run()
        for _ in range(args.repeats):
            # Cold: store read + the whole analysis + charts, in the page run itself.
            st.cache_data.clear()
            st.cache_resource.clear()
            at = metrics_app(run.id)
            st.cache_resource.clear()
            st.cache_data.clear()
            cold.append(timed_run(at))
        trivial = statistics.median(time_trivial() for _ in range(args.repeats))

        # The chart the KL jump finding points at must show the spike.
        groups = len(at.expander)
        charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]  # type: ignore[union-attr]
        drawn = sum(len(_arr(t.get("x"))) for c in charts for t in c["data"])
        markers = [
            x
            for c in charts
            for t in c["data"]
            if t.get("name") == "findings"
            for x in _arr(t.get("x"))
        ]

    # Spike-preserving: every flagged metric's raw extreme values are on its chart.
    from logscope.analyze import analyze_run

    flagged = {f.metric for f in analyze_run(run).findings if f.metric}
    drawn_by_name = {
        t.get("name"): _arr(t.get("y")) for c in charts for t in c["data"] if t.get("name")
    }
    for name in sorted(flagged):
        _, raw = run.series(name)
        ys = drawn_by_name.get(name)
        ok = ys is not None and np.nanmax(raw) in ys and np.nanmin(raw) in ys
        print(f"extremes of {name} on the chart: {'yes' if ok else 'NO'}")
    first_m, warm_m, cold_m = (statistics.median(x) for x in (first, warm, cold))
    markers = [int(x) for x in markers]
    print(
        f"charts: {len(charts)} panels (one per metric) in {groups} groups, {drawn:,} points "
        f"drawn, finding markers at {markers}"
    )
    print(f"baseline (trivial page):             {trivial * 1000:8.1f} ms")
    rows = [
        ("Metrics page, first render", first, first_m),
        ("Metrics page, rerun (interaction)", warm, warm_m),
    ]
    if opened:
        label = f"open the {len(shut)} other groups (+{opened_panels})"
        rows.append((label, opened, statistics.median(opened)))
    rows.append(("Metrics page, cold (+read, analyse)", cold, cold_m))
    for label, xs, m in rows:
        print(
            f"{label:37s}{m:6.2f} s   ratio {m / trivial:6,.0f}x   "
            f"[{', '.join(f'{x:.2f}' for x in xs)}]"
        )
    verdict = "OK" if first_m <= TARGET_S else "OVER"
    print(f"target: first render of the charts <= {TARGET_S:.0f} s: {verdict}")
    if first_m > TARGET_S:
        sys.exit(1)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
