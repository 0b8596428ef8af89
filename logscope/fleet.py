"""Many runs in one command: find the runs under the given paths, analyse them in parallel and
sum them up as a triage table, worst first.

`inputs` turns files, folders and globs into one entry per source (a console log, a JSONL file,
a W&B run folder, a TensorBoard log folder, ...); `analyze_inputs` analyses every entry with
`analyze_paths` (so the store's cache and each input's settings apply as for one file), in a
process pool or on Ray when there is enough work; `stitch_reports` joins the segments of
resumed runs; `triage` makes one row per run.
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logscope import gc_hold
from logscope.model import SEVERITY_RANK
from logscope.report import Report

if TYPE_CHECKING:
    from logscope.ingest import Sniffed
    from logscope.store import Store

#: one input: the path and the reader to use (None: the reader sniffs)
Input = tuple[str, str | None]


class Entry(tuple):  # type: ignore[type-arg]
    """An `Input` found in a folder, which also carries what `discover` sniffed it to be
    (`reader`, an `ingest.Sniffed`): the worker reads it without sniffing every reader again
    while the file is unchanged. It unpacks, compares and hashes as the plain (path, kind)."""

    reader: Sniffed | None = None

    @classmethod
    def of(cls, path: str, kind: str | None, reader: Sniffed | None) -> Entry:
        entry = cls((path, kind))
        entry.reader = reader
        return entry


Done = Callable[[int, int], None]

SCHEMA = "logscope.fleet/1"
CRASH_CODE = "LS017"


def inputs(paths: Sequence[str]) -> tuple[list[Input], list[str]]:
    """One entry per source under `paths`, and what was passed over (files in folders that no
    reader takes). A file or a URI is one entry as given, and so is a folder that is one source
    (a W&B run, a TensorBoard log folder); any other folder is searched (`ingest.discover`); a
    path that does not exist but is a glob pattern is expanded (matching nothing, it stays an
    entry, whose report then says there is no such file)."""
    from logscope.ingest import Sniffed, discover

    found: list[Input] = []
    passed: list[str] = []
    for raw in paths:
        if "://" in raw or os.path.lexists(raw) or not glob.has_magic(raw):
            expanded = [raw]
        else:
            # a pattern that matches nothing stays an entry: its report says no such file
            expanded = sorted(glob.glob(raw, recursive=True)) or [raw]
        for path in expanded:
            p = Path(path)
            if "://" in path or not p.is_dir():
                found.append((path, None))
                continue
            sources, skipped = discover(p)
            if len(sources) <= 1:  # one source (or none: the reader says why)
                found.append((path, None))
                continue
            for s, m in sources:
                if s.is_dir():
                    found.append((str(s), m.KIND))
                else:  # what its sniff found goes with it, for the worker
                    found.append(Entry.of(str(s), None, Sniffed.of(s, m.KIND)))
            passed += [str(f) for f, _ in skipped]
    return list(dict.fromkeys(found)), passed


def analyze_inputs(
    entries: Sequence[Input],
    jobs: int | None = None,
    done: Done | None = None,
    executor: str = "process",
    ray_address: str | None = None,
    **options: Any,
) -> list[Report]:
    """Reports of every entry, in the order of `entries` (`options` go to `analyze_paths`).

    With `jobs` != 1 and enough work (`POOL_MIN_ENTRIES` entries or `POOL_MIN_BYTES` of input):
    a pool of `jobs` processes (default: the machine's cores), each importing logscope once.
    `executor="ray"`: one Ray task per entry instead, on the cluster at `ray_address` (None:
    the one Ray finds, else a local instance). An entry that cannot be read is an unreadable
    Report, never the end of the command. `done(finished, total)` is called as entries finish."""
    if executor == "ray":
        gc_hold.loaded()
        return _on_ray(entries, _for_workers(options), ray_address, done)
    jobs = jobs or os.cpu_count() or 1
    results: list[list[Report]] = [[] for _ in entries]
    if jobs == 1 or not _worth_a_pool(entries):
        for n, entry in enumerate(entries):
            results[n] = _analyze_one(entry, options)
            if done:
                done(n + 1, len(entries))
        return [r for rs in results for r in rs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    options = _for_workers(options)
    gc_hold.loaded()  # this process only gathers the workers' reports from here on
    # forkserver, not fork: the parent's polars thread pool would deadlock a forked child
    context = multiprocessing.get_context("forkserver")
    workers = min(jobs, len(entries))
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_start) as pool:
        futures = {pool.submit(_analyze_to_send, e, options): n for n, e in enumerate(entries)}
        for finished, future in enumerate(as_completed(futures), 1):
            n = futures[future]
            try:
                results[n] = future.result()
            except Exception as exc:  # a worker died (killed, out of memory): that entry only
                reason = f"analysis failed: {type(exc).__name__}: {exc}"
                results[n] = [Report.unreadable(entries[n][0], reason)]
            if done:
                done(finished, len(entries))
    return [r for rs in results for r in rs]


def _for_workers(options: dict[str, Any]) -> dict[str, Any]:
    """What a worker cannot inherit: the --config file in force here; no progress callback."""
    from logscope.settings import explicit_file

    return {**{k: v for k, v in options.items() if k != "progress"}, "config": explicit_file()}


def _on_ray(
    entries: Sequence[Input], options: dict[str, Any], address: str | None, done: Done | None
) -> list[Report]:
    """One Ray task per entry (each reads its input and writes the store: both must be on
    storage every node sees); Ray schedules them. A local instance started here is stopped."""
    try:
        import ray
    except ImportError:
        from logscope.exceptions import OptionalDependencyMissing

        raise OptionalDependencyMissing("ray", "ray", "--executor ray") from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(_analyze_to_send)
        # whole runs: a node may mount the shared store under another path than this one
        refs = {task.remote(entry, options, False): n for n, entry in enumerate(entries)}
        results: list[list[Report]] = [[] for _ in entries]
        pending, finished = list(refs), 0
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                n = refs[ref]
                try:
                    results[n] = ray.get(ref)
                except Exception as exc:  # a task or its node failed: that entry only
                    reason = f"analysis failed on Ray: {type(exc).__name__}: {exc}"
                    results[n] = [Report.unreadable(entries[n][0], reason)]
                finished += 1
                if done:
                    done(finished, len(entries))
    finally:
        if started:
            ray.shutdown()
    return [r for rs in results for r in rs]


#: below both, starting worker processes (each imports logscope: ~1.5 s) costs more than it saves
POOL_MIN_ENTRIES = 16
POOL_MIN_BYTES = 50_000_000


def _worker_start() -> None:
    """A pool worker: one BLAS thread, and the detectors' heavy imports made while it starts
    (paid once per worker, so every run it analyses uses scipy's faster filters)."""
    from logscope.analyze import prefetch_detector_imports
    from logscope.blas import single_threaded

    single_threaded()
    prefetch_detector_imports()


def _worth_a_pool(entries: Sequence[Input]) -> bool:
    if len(entries) < 2:
        return False
    if len(entries) >= POOL_MIN_ENTRIES:
        return True
    size = 0
    for path, _ in entries:
        with contextlib.suppress(OSError):
            size += _size(Path(path))
    return size >= POOL_MIN_BYTES


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def _analyze_one(entry: Input, options: dict[str, Any]) -> list[Report]:
    from logscope import settings
    from logscope.analyze import analyze_paths

    path, source = entry
    rest = {k: v for k, v in options.items() if k not in ("source", "config")}
    reader = getattr(entry, "reader", None)
    with settings.using(options.get("config")):
        return analyze_paths([path], source=options.get("source") or source, reader=reader, **rest)


def _analyze_to_send(entry: Input, options: dict[str, Any], stored: bool = True) -> list[Report]:
    """`_analyze_one` in a worker, its reports made light to send back (see `_light`; with
    `stored` False, runs are sent whole)."""
    from logscope.store import Store

    reports = _analyze_one(entry, options)
    cached = stored and options.get("use_cache", True)
    store = Store(options.get("store_dir")) if cached else None
    return [_light(report, store) for report in reports]


#: where a worker leaves a report's triage row (`triage_row` made where the run's metrics are)
#: and its JSON text (`report_json`: encoded by the pool, not one by one in the parent)
_ROW = "_triage_row"
_JSON = "_json"


def _light(report: Report, store: Store | None) -> Report:
    """`report` as the parent needs it: its triage row made here, and a stored run sent as its
    place in the store rather than its metrics (`StoredRun`: read again only if the parent
    stitches or draws it). Without a store (--no-cache, or Ray) a run is sent whole."""
    import dataclasses

    from logscope.model import Run
    from logscope.store import StoredRun

    row = triage_row(report)
    text = report_json(report)  # before the run is replaced: the analysis' dict is on `report`
    run = report.run
    folder = store.run_dir(run.id) if store is not None and report.readable else None
    if folder is not None and isinstance(run, StoredRun):
        run.metrics = None  # read for the row (GPU-hours): the parent reads it again if need be
    elif folder is not None and (folder / "run.json").is_file():
        fields = {f.name: getattr(run, f.name) for f in dataclasses.fields(Run)}
        del fields["metrics"]
        path = (folder / "metrics.parquet").absolute()
        light = StoredRun(metrics_path=path, summary=run.summary(), **fields)
        report = dataclasses.replace(report, run=light)
    report.__dict__[_ROW] = row
    report.__dict__[_JSON] = text
    return report


def analyze_all(entries: Sequence[Input], stitch: bool = True, **kwargs: Any) -> list[Report]:
    """`analyze_inputs` (its arguments in `kwargs`), then with `stitch` the segments of each
    resumed or rotated run joined (`stitch_reports`)."""
    reports = analyze_inputs(entries, **kwargs)
    if not stitch:
        return reports
    options = {k: v for k, v in kwargs.items() if k in ("only", "skip")}
    return stitch_reports(reports, **options)


def require_readable(reports: Sequence[Report]) -> None:
    """LogscopeError naming every input and its reason when none could be read."""
    if not any(r.readable for r in reports):
        from logscope.exceptions import LogscopeError

        lines = [f"{r.run.source.path}: {e}" for r in reports for e in r.errors]
        raise LogscopeError("\n".join(lines) or "no input to analyse")


def stitch_reports(
    reports: Sequence[Report], only: list[str] | None = None, skip: list[str] | None = None
) -> list[Report]:
    """`reports` with the per-node runs of each multi-node run (`logscope.stitch.node_groups`)
    and the segments of each resumed or rotated run (`chains`) replaced by one report of the
    joined run, where its first part stood."""
    readable = [r.run for r in reports if r.readable]
    if len(readable) < 2:
        return list(reports)
    from logscope.analyze import analyze_run
    from logscope.stitch import chains, join_nodes, node_groups, stitch

    found = [(nodes, join_nodes) for nodes in node_groups(readable)]
    taken = {id(run) for nodes, _ in found for run in nodes}
    found += [(chain, stitch) for chain in chains([r for r in readable if id(r) not in taken])]
    if not found:
        return list(reports)
    first_of = {id(group[0]): (group, join) for group, join in found}
    merged = {id(run) for group, _ in found for run in group}
    out = []
    for report in reports:
        group = first_of.get(id(report.run))
        if group is not None:
            runs, join = group
            out.append(analyze_run(join(runs), only=only, skip=skip))
        elif id(report.run) not in merged:
            out.append(report)
    return out


# ---- the triage table -------------------------------------------------------------------------
@dataclass
class TriageRow:
    """One run of a fleet, as a team lead scans it."""

    run: str
    path: str
    framework: str
    version: str | None
    steps: int
    last_step: int | None
    worst: str | None
    findings: int
    diagnoses: list[str] = field(default_factory=list)
    first_incident: str | None = None
    first_incident_step: int | None = None
    first_mover: str | None = None
    crash_cause: str | None = None
    gpu_hours_since_incident: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def triage_row(report: Report) -> TriageRow:
    """The row of one report: its worst findings first among the diagnoses (the one a pool
    worker made, when it did)."""
    made = report.__dict__.get(_ROW)
    if made is not None:
        return made
    run = report.run
    steps = run.summary()["steps"]  # a run read back from the store keeps its summary
    by_severity = sorted(report.findings, key=lambda f: -SEVERITY_RANK[f.severity])
    incidents = [i for i in report.timed_incidents() if i.step is not None]
    first = min(incidents, key=lambda i: i.step) if incidents else None  # type: ignore[arg-type, return-value]
    crash = next((f for f in report.findings if f.code == CRASH_CODE), None)
    return TriageRow(
        run=run.id[:12],
        path=run.source.path,
        framework=str(run.meta.get("framework") or "verl"),
        version=run.meta.get("verl_version"),
        steps=steps["count"],
        last_step=steps["last"],
        worst=report.worst_severity,
        findings=len(report.findings),
        diagnoses=list(dict.fromkeys(f.name for f in by_severity)),
        first_incident=first.title if first else None,
        first_incident_step=first.step if first else None,
        first_mover=first.first_mover if first else None,
        crash_cause=_crash_cause(crash.evidence) if crash else None,
        gpu_hours_since_incident=_gpu_hours_since(report, first.step) if first else None,
        error="; ".join(report.errors) if not report.readable else None,
    )


def _crash_cause(evidence: dict[str, Any]) -> str | None:
    cause = evidence.get("explained_by") or evidence.get("cause_kind")
    return str(cause or evidence.get("exception_type") or "unknown")


def _gpu_hours_since(report: Report, step: int | None) -> float | None:
    """GPU-hours the run spent from `step` on: its step times × the configured GPU count."""
    import numpy as np

    from logscope.aliases import resolve
    from logscope.verl_config import n_gpus

    run = report.run
    name = resolve(run, "time_step")
    gpus = n_gpus(run.config) if run.config else None
    if step is None or name is None or not gpus:
        return None
    steps, seconds = run.series(name)
    after = seconds[(steps >= step) & np.isfinite(seconds)]
    return round(float(after.sum()) * gpus / 3600, 2) if after.size else None


def triage(reports: Sequence[Report]) -> list[tuple[TriageRow, Report]]:
    """(row, report) of every report, worst first: unreadable, then by severity, number of
    findings and the earliest incident."""
    pairs = [(triage_row(r), r) for r in reports]

    def order(pair: tuple[TriageRow, Report]) -> tuple[int, int, int, int, str]:
        row = pair[0]
        first = row.first_incident_step if row.first_incident_step is not None else 1 << 62
        return (
            0 if row.error else 1,
            -SEVERITY_RANK.get(row.worst or "", -1),
            -row.findings,
            first,
            row.path,
        )

    return sorted(pairs, key=order)


def summary(rows: Sequence[TriageRow], passed: Sequence[str] = ()) -> dict[str, Any]:
    """Counts over the fleet: runs, runs by worst severity, unreadable, diagnoses by runs."""
    by_worst: dict[str, int] = {}
    by_diagnosis: dict[str, int] = {}
    for row in rows:
        key = "unreadable" if row.error else (row.worst or "healthy")
        by_worst[key] = by_worst.get(key, 0) + 1
        for name in row.diagnoses:
            by_diagnosis[name] = by_diagnosis.get(name, 0) + 1
    hours = [r.gpu_hours_since_incident for r in rows if r.gpu_hours_since_incident is not None]
    return {
        "runs": len(rows),
        "by_worst_severity": by_worst,
        "diagnoses": dict(sorted(by_diagnosis.items(), key=lambda kv: (-kv[1], kv[0]))),
        "gpu_hours_since_first_incident": round(sum(hours), 2) if hours else None,
        "passed_over": list(passed),
    }


def fleet_dict(reports: Sequence[Report], passed: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON of a fleet: schema, summary, the triage rows, every report."""
    from logscope.model import jsonable

    pairs = triage(reports)
    reports_data = [jsonable(report.to_dict()) for _, report in pairs]
    return {**_head(pairs, passed), "reports": reports_data}


def _head(pairs: Sequence[tuple[TriageRow, Report]], passed: Sequence[str]) -> dict[str, Any]:
    rows = [row for row, _ in pairs]
    return {"schema": SCHEMA, "summary": summary(rows, passed), "runs": [r.to_dict() for r in rows]}


def report_json(report: Report) -> str:
    """A report's JSON as the fleet JSON holds it (`Report.to_dict`, indented by 2; the text a
    pool worker encoded, when it did)."""
    made = report.__dict__.get(_JSON)
    if made is not None:
        return made
    import json

    from logscope.analyze import AS_DICT
    from logscope.model import jsonable

    data = report.__dict__.get(AS_DICT)
    if data is None:
        data = jsonable(report.to_dict())
    return json.dumps(data, indent=2, allow_nan=False)


def fleet_json(reports: Sequence[Report], passed: Sequence[str] = ()) -> str:
    """`json.dumps(fleet_dict(reports, passed), indent=2)`, each report's text taken from
    `report_json` (the pure-Python encoder that `indent` needs is slow: a fleet's reports are
    encoded in parallel by the pool workers)."""
    import json

    pairs = triage(reports)
    text = json.dumps({**_head(pairs, passed), "reports": []}, indent=2, allow_nan=False)
    if not pairs:
        return text
    inner = ",\n".join(_indented(report_json(report), "    ") for _, report in pairs)
    return text[: -len("[]\n}")] + "[\n" + inner + "\n  ]\n}"


def _indented(text: str, prefix: str) -> str:
    # JSON strings hold no raw newline: every line of the text is a line of the encoding
    return "\n".join(prefix + line for line in text.split("\n"))


# ---- the triage table as text (every renderer draws these cells) ------------------------------
COLUMNS = (
    "run",
    "framework",
    "steps",
    "last",
    "worst",
    "diagnoses",
    "first incident",
    "crash",
    "GPU-h after",
)
SHOWN_DIAGNOSES = 3


def table(rows: Sequence[TriageRow]) -> list[list[str]]:
    """The cells of the triage table (`COLUMNS`), runs named relative to their common folder."""
    names = _short_names([r.path for r in rows])
    out = []
    for row, name in zip(rows, names, strict=True):
        if row.error:
            out.append([name, "", "", "", "unreadable", row.error, "", "", ""])
            continue
        diagnoses = ", ".join(row.diagnoses[:SHOWN_DIAGNOSES])
        if len(row.diagnoses) > SHOWN_DIAGNOSES:
            diagnoses += f" +{len(row.diagnoses) - SHOWN_DIAGNOSES}"
        first = f"{row.first_incident_step}: {row.first_mover}" if row.first_incident else ""
        hours = row.gpu_hours_since_incident
        out.append(
            [
                name,
                f"{row.framework} {row.version}" if row.version else row.framework,
                f"{row.steps:,}",
                "" if row.last_step is None else f"{row.last_step:,}",
                row.worst or "healthy",
                diagnoses,
                first,
                row.crash_cause or "",
                "" if hours is None else f"{hours:,.1f}",
            ]
        )
    return out


def _short_names(paths: Sequence[str]) -> list[str]:
    """Paths relative to the folder they share (as given when they share none)."""
    local = [p for p in paths if "://" not in p and not p.startswith("<")]
    if len(local) < 2 or len(local) != len(paths):
        return list(paths)
    try:
        common = os.path.commonpath([os.path.abspath(p) for p in paths])
    except ValueError:
        return list(paths)
    if os.path.isfile(common):
        common = os.path.dirname(common)
    return [os.path.relpath(os.path.abspath(p), common) for p in paths]


@dataclass
class Overview:
    """What every renderer of a fleet draws: (row, report) worst first, the headline and the
    table's cells (`COLUMNS`)."""

    pairs: list[tuple[TriageRow, Report]]
    headline: str
    cells: list[list[str]]


def overview(reports: Sequence[Report], passed: Sequence[str] = ()) -> Overview:
    pairs = triage(reports)
    rows = [row for row, _ in pairs]
    return Overview(pairs, headline(summary(rows, passed)), table(rows))


def headline(summary: dict[str, Any]) -> str:
    """`12 runs: 2 critical, 3 warning, 7 healthy; 1 unreadable`."""
    counts = summary["by_worst_severity"]
    order = ["critical", "error", "warning", "info", "healthy", "unreadable"]
    parts = [f"{counts[k]} {k}" for k in order if counts.get(k)]
    text = f"{summary['runs']} runs: " + ", ".join(parts)
    if summary["gpu_hours_since_first_incident"]:
        text += f"; {summary['gpu_hours_since_first_incident']:,.1f} GPU-h after first incidents"
    if summary["passed_over"]:
        text += f"; passed over {len(summary['passed_over'])} path(s)"
    return text
