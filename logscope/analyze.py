"""The pipeline: readers (through the store) → detectors → incidents → Report."""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from logscope import gc_hold
from logscope.exceptions import IngestError
from logscope.incidents import group_incidents
from logscope.model import SEVERITY_RANK, Finding, Run, jsonable
from logscope.report import Report, Skipped

if TYPE_CHECKING:
    from logscope.detector import Detector
    from logscope.ingest import Sniffed
    from logscope.store import Store

Progress = Callable[[int, int], None]


def run_detectors(
    run: Run, detectors: Sequence[Detector]
) -> tuple[list[Finding], list[Skipped], list[str]]:
    """Findings of every applicable detector, the skipped ones with reasons, and failures.

    A detector that raises is a bug; it is reported in `errors` rather than stopping the rest.
    On a long run the detectors run in threads (`detector_threads`); the outcome is the same,
    in the same order.
    """
    threads = detector_threads(run)
    if threads > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads, thread_name_prefix="logscope-detect") as pool:
            outcomes = list(pool.map(lambda det: _run_detector(run, det), detectors))
    else:
        outcomes = [_run_detector(run, det) for det in detectors]
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    errors: list[str] = []
    for found, skip, error in outcomes:
        findings.extend(found)
        skipped.extend(skip)
        errors.extend(error)
    findings.sort(key=_finding_order)
    return findings, skipped, errors


def _run_detector(run: Run, det: Detector) -> tuple[list[Finding], list[Skipped], list[str]]:
    """One detector's (findings, [skipped], [error])."""
    reason = det.skip_reason(run)
    if reason:
        return [], [Skipped(det.code, det.name, reason)], []
    try:
        return det.detect(run), [], []
    except Exception as exc:
        return [], [], [f"{det.code} {det.name} failed: {type(exc).__name__}: {exc}"]


# From this many metric rows (~15,000 steps of a verl log) detectors run in threads: their time
# is then in numpy, which releases the GIL, so a second core takes ~30 % off (0.64 → 0.44 s at
# 100,000 steps). Below it, the threads' cost is more than they save (and a fleet's workers
# already fill the cores). Detectors share only caches that any of them may fill (the run's
# series index, its log lines), each written whole.
THREADED_ROWS = 1_000_000
DETECTOR_THREADS = 2


def detector_threads(run: Run) -> int:
    """How many threads `run_detectors` uses for `run` (1: none)."""
    if run.metrics.height < THREADED_ROWS:
        return 1
    return max(1, min(DETECTOR_THREADS, _cores()))


def _cores() -> int:
    """The cores this process may run on."""
    import os

    affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere every core counts
    return len(affinity(0)) if affinity else (os.cpu_count() or 1)


def _finding_order(f: Finding) -> tuple[int, float, str]:
    return (-SEVERITY_RANK[f.severity], float(f.step) if f.step is not None else -1.0, f.code)


def analyze_run(
    run: Run,
    detectors: Sequence[Detector] | None = None,
    only: list[str] | None = None,
    skip: list[str] | None = None,
) -> Report:
    """Run detectors on one Run and group their findings into incidents.

    Without `detectors`: those the run's settings select (`settings.for_input` of its source),
    narrowed by `only`/`skip`."""
    if detectors is None:
        from logscope.settings import for_input

        detectors = for_input(run.source.path).detectors(only, skip)
    findings, skipped, errors = run_detectors(run, detectors)
    from logscope.health import health_table  # on use: a cached report needs no registry

    incidents = group_incidents(findings, run.n_steps)
    try:
        health = health_table(run)
    except Exception as exc:  # a bug, reported like a detector's
        health = []
        errors.append(f"health table failed: {type(exc).__name__}: {exc}")
    from logscope.frameworks import unknown_metrics

    return Report(
        run=run,
        findings=findings,
        incidents=incidents,
        skipped=skipped,
        errors=errors,
        health=health,
        unknown_metrics=unknown_metrics(run),
    )


def analyze_paths(
    paths: Sequence[str | Path],
    source: str | None = None,
    only: list[str] | None = None,
    skip: list[str] | None = None,
    store_dir: str | Path | None = None,
    use_cache: bool = True,
    progress: Progress | None = None,
    framework: str | None = None,
    reader: Sniffed | None = None,
) -> list[Report]:
    """Read every path (through the store's cache) and analyse each run found.

    `reader`: what sniffing the (one) path found before (`ingest.Sniffed`), so it is not
    sniffed again while unchanged.

    `framework` forces the profile detectors read metrics through (`logscope.frameworks`);
    by default each run has the one its reader set or its keys identify.

    Each path is analysed with its settings (`settings.for_input`: the `--config` file or the
    one found upward from it). A path that cannot be read becomes an unreadable entry
    (`Report.unreadable`, with the reason) and the others are still analysed. With the cache,
    the findings of an unchanged input analysed by the same detector code with the same
    selection and settings are kept in the store too, so a second analysis reads them back
    instead of running the detectors again (and does not import them).
    """
    from logscope.ingest import check_source
    from logscope.store import Store

    if framework is not None:
        from logscope.frameworks import get

        get(framework)  # ValueError naming the known ones

    if paths:
        check_source(source, paths[0])
    from logscope.settings import for_input

    store = Store(store_dir)
    built: dict[str, Sequence[Detector]] = {}  # by settings: paths may have their own
    reports: list[Report] = []
    for path in paths:
        settings = for_input(path)
        skey = store.key(path, source) if use_cache else None
        key = _results_key(skey, only, skip, settings.fingerprint(), framework)
        cached = _cached_reports(store, key, skey, path) if key and skey else None
        full = not only and not skip  # the fleet tables hold full analyses only
        if cached is not None:
            _force_framework([report.run for report in cached], framework)
            reports.extend(cached)
            if full:
                _restore_tables(store, cached, settings.fingerprint())
            continue
        if not built and _long_input(path):
            prefetch_detector_imports()
        detectors = built.get(settings.fingerprint())
        if detectors is None:
            detectors = built[settings.fingerprint()] = settings.detectors(only, skip)
        try:
            runs = store.load(
                path,
                source=source,
                use_cache=use_cache,
                progress=progress,
                write_behind=True,
                reader=reader,
            )
        except IngestError as exc:
            reports.append(Report.unreadable(str(path), _reason(exc, path)))
            continue
        _force_framework(runs, framework)
        gc_hold.loaded()  # the detectors and the reader are imported
        try:
            found = [analyze_run(run, detectors) for run in runs]
        finally:
            store.wait()  # the store's entry is complete (or its failure noted) from here on
        reports.extend(found)
        if key and runs and not any(r.errors for r in found):
            entry = _results_to_json(found)
            for report, data in zip(found, entry["reports"], strict=True):
                report.__dict__[AS_DICT] = data
            store.put_results(key, entry)
            if full:
                for run, data in zip(runs, entry["reports"], strict=True):
                    store.put_tables(data, run, settings.fingerprint())
    return reports


def _force_framework(runs: Sequence[Run], framework: str | None) -> None:
    """Read `runs` through the profile of `framework` (None: keep theirs)."""
    if framework is not None:
        from logscope.frameworks import assign

        for run in runs:
            assign(run, framework)


def _restore_tables(store: Store, reports: list[Report], settings: str) -> None:
    """Write the fleet tables of cached reports whose tables are missing, damaged or made
    with other settings (entries stored before the tables existed get them here)."""
    for report in reports:
        if store.tables_settings(report.run.id) != settings:
            store.put_tables(jsonable(report.to_dict()), report.run, settings)


def _reason(exc: IngestError, path: str | Path) -> str:
    """The error without the path it starts with (the entry names the path)."""
    text = str(exc)
    prefix = f"{exc.path}: "
    return text[len(prefix) :] if text.startswith(prefix) and exc.path == str(path) else text


# Heavy modules detectors import on first use on long runs (scipy.ndimage, ~0.5 s CPU: the bin
# medians of series longer than 2,000 points, running medians wider than numpy's; the detectors
# load ruptures' compiled core alone, without the package and the scipy.stats it imports). For an
# input of LONG_INPUT_BYTES or more they are imported in a helper thread while the log is read:
# the reader spends its time in polars, which releases the GIL. A short run needs none of them.
# Not the redactor's patterns (detect-secrets and the requests stack it loads, ~0.25 s CPU): most
# logs hold no text that needs them (`redact` imports them for the first one that does).
DETECTOR_IMPORTS = ("scipy.ndimage",)
LONG_INPUT_BYTES = 4 << 20  # a verl console log of ~2,000 steps


def _long_input(path: str | Path) -> bool:
    try:
        return Path(path).stat().st_size >= LONG_INPUT_BYTES
    except OSError:  # a URI or a missing path (a folder stats as small: no prefetch)
        return False


def prefetch_detector_imports() -> None:
    """Import `DETECTOR_IMPORTS` in a helper thread (a long run, a fleet's pool worker)."""

    def work() -> None:
        for name in DETECTOR_IMPORTS:
            with contextlib.suppress(Exception):  # a detector that needs it reports the error
                importlib.import_module(name)

    threading.Thread(target=work, name="logscope-imports", daemon=True).start()


# ---- cached findings ----------------------------------------------------------------------
# 2: reports carry the health table; 3: the entry is `Report.to_dict`; 4: with unknown metrics;
# 5: reports of runs whose text was redacted at ingest
RESULTS_FORMAT = "5"


def _results_key(
    source_key: str | None,
    only: list[str] | None,
    skip: list[str] | None,
    settings: str,
    framework: str | None = None,
) -> str | None:
    if source_key is None:
        return None
    import hashlib
    import json

    text = json.dumps(
        [RESULTS_FORMAT, source_key, _code_fingerprint(), only, skip, settings, framework]
    )
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


_FINGERPRINT: list[str] = []


def _code_fingerprint() -> str:
    """Status of every module of logscope and of its detectors, and of the data files they read
    (the metric registry, framework profiles): any change is a new key."""
    if _FINGERPRINT:
        return _FINGERPRINT[0]
    import hashlib
    import importlib.util

    from logscope import __version__

    roots = [Path(__file__).resolve().parent]
    spec = importlib.util.find_spec("logscope.detectors")
    if spec is not None and spec.submodule_search_locations:
        roots += [Path(p).resolve() for p in spec.submodule_search_locations]
    digest = hashlib.blake2b(__version__.encode(), digest_size=16)
    for root in dict.fromkeys(roots):
        files = sorted(root.rglob("*.py")) + sorted((root / "data").rglob("*.toml"))
        for file in files:
            st = file.stat()
            digest.update(f"{file}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    _FINGERPRINT.append(digest.hexdigest())
    return _FINGERPRINT[0]


#: where a report analysed here keeps the `jsonable(to_dict())` its cache entry holds, so that
#: a pool worker encoding it for the fleet JSON (`fleet.report_json`) does not build it again
AS_DICT = "_as_dict"


def _results_to_json(reports: list[Report]) -> dict:
    """The cache entry: the reports as `--format json` writes them (`Report.to_dict`)."""
    return {"format": RESULTS_FORMAT, "reports": [jsonable(r.to_dict()) for r in reports]}


def _cached_reports(
    store: Store, key: str, source_key: str, path: str | Path
) -> list[Report] | None:
    """Reports rebuilt from a cache entry (`Report.from_dict`) on the stored runs, their
    sources shown as `path`; None when anything is missing."""
    from logscope.store import relocate

    data = store.get_results(key)
    ids = store.source_run_ids(source_key)
    if data is None or data.get("format") != RESULTS_FORMAT or not ids:
        return None
    stored_root = store.source_path(source_key)
    out = []
    try:
        by_id = {r["run"]["id"]: r for r in data["reports"]}
        for run_id in ids:
            entry = by_id[run_id]
            run = store.get_lazy_run(run_id, entry["run"])
            if run is None:
                return None
            relocate(run, stored_root, path)
            out.append(Report.from_dict(entry, run=run))
    except (KeyError, TypeError, ValueError):
        return None
    return out
