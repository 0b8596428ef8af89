"""`Detector.requires`: a metric detector that reads several concepts together is skipped, with
the names it looked for, when one of them is missing."""

from __future__ import annotations

import polars as pl
from logscope.detectors.registry import find

from logscope.analyze import analyze_run
from logscope.model import Run, Source
from logscope.schemas import METRICS_SCHEMA


def run_with(*metrics: str) -> Run:
    rows = [{"step": s, "metric": m, "value": 1.0} for s in range(1, 31) for m in metrics]
    return Run(id="r", source=Source("x", "x"), metrics=pl.DataFrame(rows, schema=METRICS_SCHEMA))


def test_a_missing_required_concept_is_the_skip_reason():
    reason = find("LS302")().skip_reason(run_with("timing_s/gen"))
    assert reason == "needs timing_s/step or perf/time_per_step or timing/step"
    assert find("LS302")().skip_reason(run_with("timing_s/gen", "timing_s/step")) is None


def test_the_report_lists_it_among_the_skipped():
    report = analyze_run(run_with("critic/advantages/max"))
    skipped = {s.code: s.reason for s in report.skipped}
    assert skipped["LS211"] == "needs critic/advantages/min"
