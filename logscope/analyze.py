"""The pipeline: readers (through the store) → detectors → incidents → Report."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from logscope.detector import Detector
from logscope.incidents import group_incidents
from logscope.model import SEVERITY_RANK, Finding, Run
from logscope.report import Report, Skipped

Progress = Callable[[int, int], None]


def run_detectors(
    run: Run, detectors: Sequence[Detector]
) -> tuple[list[Finding], list[Skipped], list[str]]:
    """Findings of every applicable detector, the skipped ones with reasons, and failures.

    A detector that raises is a bug; it is reported in `errors` rather than stopping the rest.
    """
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    errors: list[str] = []
    for det in detectors:
        reason = det.skip_reason(run)
        if reason:
            skipped.append(Skipped(det.code, det.name, reason))
            continue
        try:
            findings.extend(det.detect(run))
        except Exception as exc:
            errors.append(f"{det.code} {det.name} failed: {type(exc).__name__}: {exc}")
    findings.sort(key=_finding_order)
    return findings, skipped, errors


def _finding_order(f: Finding) -> tuple[int, float, str]:
    return (-SEVERITY_RANK[f.severity], float(f.step) if f.step is not None else -1.0, f.code)


def analyze_run(
    run: Run,
    detectors: Sequence[Detector] | None = None,
    only: list[str] | None = None,
    skip: list[str] | None = None,
) -> Report:
    """Run detectors on one Run and group their findings into incidents."""
    if detectors is None:
        from logscope.detectors.registry import select

        detectors = select(only, skip)
    findings, skipped, errors = run_detectors(run, detectors)
    incidents = group_incidents(findings, run.n_steps)
    return Report(run=run, findings=findings, incidents=incidents, skipped=skipped, errors=errors)


def analyze_paths(
    paths: Sequence[str | Path],
    source: str | None = None,
    only: list[str] | None = None,
    skip: list[str] | None = None,
    store_dir: str | Path | None = None,
    use_cache: bool = True,
    progress: Progress | None = None,
) -> list[Report]:
    """Read every path (through the store's cache) and analyse each run found."""
    from logscope.detectors.registry import select
    from logscope.store import Store

    store = Store(store_dir)
    detectors = select(only, skip)
    reports = []
    for path in paths:
        for run in store.load(path, source=source, use_cache=use_cache, progress=progress):
            reports.append(analyze_run(run, detectors))
    return reports
