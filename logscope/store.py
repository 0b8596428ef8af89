"""The embedded run store: Parquet metrics + a small JSON per run, keyed by content hash.

Layout (Hive-style, so DuckDB/Spark/Trino or polars can scan a fleet of runs in place):

    <root>/runs/run_id=<id>/metrics.parquet   long frame: step, metric, value, wall_time
    <root>/runs/run_id=<id>/run.json          source, meta, config segments, events, parse stats
    <root>/runs/run_id=<id>/findings.parquet  the run's findings, one row each (`FINDINGS_SCHEMA`)
    <root>/runs/run_id=<id>/summary.parquet   the run's row of the `runs` table (`RUNS_SCHEMA`)
    <root>/runs/run_id=<id>/tables.json       the settings and sizes the two tables were written with
    <root>/sources/<source key>.json          which runs a source (file or folder) produced

findings.parquet and summary.parquet are written by `logscope analyze` with every detector its
settings select (not with --only/--skip, whose findings are a part of the picture), so the
fleet tables (`logscope query`) always hold a run's full analysis; the row names the settings
fingerprint it was made with. They are rewritten when the analysis is redone (new detector code
or settings) and, when missing or damaged, from the cached analysis.

The source key hashes the input's bytes (and the reader format version), so re-analysing an
unchanged file reads Parquet instead of re-parsing. Every write goes to a temporary name first
and is renamed into place, so readers never see half-written entries; run.json is written last
and marks a run complete, the source index after all its runs. Processes writing the same entry
at once write the same bytes (the runs row differs by its `analysed_at` time, and by the path
when the same bytes are analysed under two names), and the last rename wins. A writer killed mid-write leaves at most
a temporary file (`.<name>.<host>.<pid>.*.tmp`), which readers never look at and later writers
sweep. A damaged entry (unreadable Parquet, bad JSON) reads as absent, so `load()` parses the
source again and rewrites it; that is also why the store writes without fsync (a power cut can
only damage entries, which are then rebuilt).

A cached `analyze` only shows a stored report, so that path reads JSON and file sizes, never
Parquet, and does not import polars (~0.3 s): run.json and tables.json record the size of each
Parquet file written before them, and a file of another size, or without Parquet's closing
magic bytes, is damage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import xxhash

from logscope import __version__
from logscope.atomic import sweep_temp_files, write_atomic
from logscope.model import (
    ConfigSegment,
    Event,
    ParseStats,
    Run,
    Source,
    SummarizedRun,
    jsonable,
)

if TYPE_CHECKING:
    import polars as pl

    from logscope.ingest import Sniffed

# Bump when readers change what they produce, so old cache entries are not reused.
# 2: pasted-text grammar (decorations, headless records, W&B summary); 3: secrets redacted at ingest;
# 4: run.json records the size of metrics.parquet
FORMAT_VERSION = "4"
#: the schemas of findings.parquet and summary.parquet (`schemas.tables_digest()`, pinned by a test)
TABLES_FORMAT = "f89cf51930ca"
#: what reading a damaged JSON entry raises (it then reads as absent and is rebuilt)
JSON_DAMAGE = (OSError, ValueError, KeyError, TypeError, AttributeError)
_HASH_CHUNK = 1 << 22


def default_root() -> Path:
    """`LOGSCOPE_STORE`, else the user's cache directory (`~/.cache/logscope`)."""
    env = os.environ.get("LOGSCOPE_STORE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "logscope"


def _iter_files(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
        return
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            yield Path(dirpath) / name


def source_key(path: str | Path) -> str | None:
    """Content hash of a file or of every file under a folder; None for URIs and missing paths
    (no caching: a missing path must not hash like an empty folder and hit its entry)."""
    raw = str(path)
    if "://" in raw:
        return None
    p = Path(path)
    if not p.exists():
        return None
    digest = xxhash.xxh3_128()  # ~10x faster than blake2b on big logs; a cache key, not a seal
    digest.update(f"logscope-store/{FORMAT_VERSION}/{__version__}".encode())
    for file in _iter_files(p):
        if p.is_dir():
            digest.update(str(file.relative_to(p)).encode("utf-8", "surrogateescape") + b"\0")
        try:
            with open(file, "rb") as fh:
                while chunk := fh.read(_HASH_CHUNK):
                    digest.update(chunk)
        except OSError:
            digest.update(b"<unreadable>")
    return digest.hexdigest()


def _json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`; None when it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def run_to_json(run: Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "source": {"kind": run.source.kind, "path": run.source.path},
        "meta": jsonable(run.meta),
        "config_segments": [
            {"first_step": s.first_step, "line_no": s.line_no, "config": jsonable(s.config)}
            for s in run.config_segments
        ],
        "events": [
            {"line_no": e.line_no, "step_hint": e.step_hint, "kind": e.kind, "text": e.text}
            for e in run.events
        ],
        "parse_stats": run.parse_stats.to_dict(),
    }


def run_from_json(data: dict[str, Any], metrics: pl.DataFrame | None) -> Run:
    return Run(
        id=data["id"],
        source=Source(**data["source"]),
        meta=data["meta"],
        config_segments=[
            ConfigSegment(s["first_step"], s["config"], s.get("line_no"))
            for s in data["config_segments"]
        ],
        metrics=metrics,
        events=[Event(**e) for e in data["events"]],
        parse_stats=ParseStats.from_dict(data["parse_stats"]),
    )


class StoredRun(SummarizedRun):
    """A Run from the store whose metrics are read from Parquet only when first used.

    `summary` (what `Run.summary()` gave when the run was analysed) is returned as long as the
    metrics have not been read, so showing a cached report does not read or scan them.
    """

    def __init__(
        self, *, metrics_path: Path, summary: dict[str, Any] | None = None, **fields: Any
    ) -> None:
        self.__dict__["_metrics_path"] = metrics_path
        super().__init__(summary=summary, metrics=None, **fields)

    @property  # type: ignore[override]
    def metrics(self) -> pl.DataFrame:
        frame = self.__dict__.get("_metrics")
        if frame is None:
            import polars as pl

            from logscope.schemas import METRICS_SCHEMA

            frame = pl.read_parquet(self.__dict__["_metrics_path"])
            if dict(frame.schema) != METRICS_SCHEMA:
                raise ValueError(f"{self.__dict__['_metrics_path']}: unexpected schema")
            self.__dict__["_metrics"] = frame
        return frame

    @metrics.setter
    def metrics(self, value: pl.DataFrame | None) -> None:
        self.__dict__["_metrics"] = value

    def metrics_read(self) -> bool:
        return self.__dict__.get("_metrics") is not None


def is_store(folder: Path) -> bool:
    """Whether `folder` is a logscope store (its `runs/` and `sources/`): never a run to read."""
    return (folder / "runs").is_dir() and (folder / "sources").is_dir()


class Store:
    """A folder of runs. `load()` is the cached way to read any path."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root).expanduser() if root else default_root()
        self._writers: list[threading.Thread] = []

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / f"run_id={run_id}"

    # ---- writing ------------------------------------------------------------------------
    def put_run(self, run: Run) -> None:
        """Write one run (metrics first, run.json last: run.json marks the entry complete)."""
        folder = self.run_dir(run.id)
        folder.mkdir(parents=True, exist_ok=True)
        sweep_temp_files(folder)
        buf = _parquet_bytes(run.metrics)
        write_atomic(folder / "metrics.parquet", buf, durable=False)
        entry = {**run_to_json(run), "metrics_bytes": len(buf)}
        payload = json.dumps(entry, allow_nan=False).encode()
        write_atomic(folder / "run.json", payload, durable=False)

    def put_source(self, key: str, path: str, runs: list[Run]) -> None:
        for run in runs:
            self.put_run(run)
        index = {"path": path, "runs": [r.id for r in runs], "format": FORMAT_VERSION}
        _sweep_once(self.root / "sources")
        write_atomic(
            self.root / "sources" / f"{key}.json", json.dumps(index).encode(), durable=False
        )

    # ---- reading ------------------------------------------------------------------------
    def get_run(self, run_id: str) -> Run | None:
        """A stored run, or None when absent or damaged (a damaged entry is rebuilt later)."""
        import polars as pl

        from logscope.schemas import DAMAGE, METRICS_SCHEMA

        folder = self.run_dir(run_id)
        try:
            data = json.loads((folder / "run.json").read_text(encoding="utf-8"))
            metrics = pl.read_parquet(folder / "metrics.parquet")
            if dict(metrics.schema) != METRICS_SCHEMA:
                return None
            return run_from_json(data, metrics)
        except DAMAGE:
            return None

    def get_lazy_run(self, run_id: str, summary: dict[str, Any] | None = None) -> Run | None:
        """A stored run whose metrics are read on first use (see `StoredRun`); None when absent."""
        folder = self.run_dir(run_id)
        try:
            data = json.loads((folder / "run.json").read_text(encoding="utf-8"))
            # a truncated or foreign file is damage, rebuilt by load()
            if not _parquet_intact(folder / "metrics.parquet", data["metrics_bytes"]):
                return None
            plain = run_from_json(data, None)
        except JSON_DAMAGE:
            return None
        fields = {f.name: getattr(plain, f.name) for f in dataclasses.fields(Run)}
        del fields["metrics"]
        return StoredRun(metrics_path=folder / "metrics.parquet", summary=summary, **fields)

    def source_run_ids(self, key: str) -> list[str] | None:
        """Ids of the runs a source produced, from its index (None when not stored)."""
        index = _json_object(self.root / "sources" / f"{key}.json")
        runs = index.get("runs") if index is not None else None
        return [str(r) for r in runs] if isinstance(runs, list) and runs else None

    def source_path(self, key: str) -> str | None:
        """The path a source was first stored under (runs from it keep paths below it)."""
        index = _json_object(self.root / "sources" / f"{key}.json")
        path = index.get("path") if index is not None else None
        return path if isinstance(path, str) else None

    def get_source(self, key: str, path: str | Path | None = None) -> list[Run] | None:
        """The runs stored for a source; with `path`, their sources say `path` (see `relocate`)."""
        index = _json_object(self.root / "sources" / f"{key}.json")
        if index is None:
            return None
        ids = index.get("runs")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return None
        runs = [self.get_run(rid) for rid in ids]
        if not runs or any(r is None for r in runs):
            return None
        if path is not None:
            for run in runs:
                relocate(run, index.get("path"), path)  # type: ignore[arg-type]
        return runs  # type: ignore[return-value]

    def run_ids(self) -> list[str]:
        """Ids of complete runs in the store."""
        if not self.runs_dir.is_dir():
            return []
        return sorted(
            d.name.split("=", 1)[1]
            for d in self.runs_dir.iterdir()
            if d.name.startswith("run_id=") and (d / "run.json").is_file()
        )

    def scan_metrics(self) -> pl.LazyFrame:
        """Every run's metrics as one lazy frame with a `run_id` column (Hive partitioning)."""
        import polars as pl

        return pl.scan_parquet(
            self.runs_dir / "run_id=*" / "metrics.parquet", hive_partitioning=True
        )

    # ---- the cached read ----------------------------------------------------------------
    def load(
        self,
        path: str | Path,
        source: str | None = None,
        use_cache: bool = True,
        progress: Callable[[int, int], None] | None = None,
        write_behind: bool = False,
        reader: Sniffed | None = None,
    ) -> list[Run]:
        """Runs of `path`: from the store when the content is unchanged, else parsed and saved
        (`reader`: what sniffing the file found before, see `ingest.load`; not part of the key).

        With `write_behind`, saving runs in a thread (Parquet encoding releases the GIL, so it
        overlaps with the caller's analysis); call `wait()` before relying on the entry or on
        the runs' `parse_stats.notes` (where a failure to save is noted).
        """
        from logscope.ingest import load as ingest_load

        key, pending = self._key(path, source) if use_cache else (None, None)
        if key is not None:
            cached = self.get_source(key, path)
            if cached is not None:
                return cached
        runs = ingest_load(path, source=source, progress=progress, reader=reader)
        if key is not None:
            if write_behind:
                writer = threading.Thread(
                    target=self._save, args=(key, str(path), runs, pending), daemon=False
                )
                writer.start()
                self._writers.append(writer)
            else:
                self._save(key, str(path), runs, pending)
        return runs

    def _save(self, key: str, path: str, runs: list[Run], pending: tuple[Path, str] | None) -> None:
        try:
            self.put_source(key, path, runs)
            self._remember_key(pending)
        except OSError as exc:  # a read-only or full store must not stop the analysis
            for run in runs:
                run.parse_stats.notes.append(f"not cached: {exc}")

    def wait(self) -> None:
        """Wait for the saves started by `load(..., write_behind=True)`."""
        while self._writers:
            self._writers.pop(0).join()

    # ---- source keys, remembered by file status -----------------------------------------
    def key(self, path: str | Path, source: str | None = None) -> str | None:
        """The store key of `path` (`source_key`, specialised by a forced reader), None for URIs.

        Hashing a large log costs a read of all of it, so the key is remembered under the
        files' status (path, size, mtime in ns, inode): an unchanged file is not hashed again.
        A file that changes while it is hashed is not remembered.
        """
        key, pending = self._key(path, source)
        self._remember_key(pending)
        return key

    def _key(
        self, path: str | Path, source: str | None
    ) -> tuple[str | None, tuple[Path, str] | None]:
        """(key, memo entry still to write or None)."""
        if "://" in str(path):
            return None, None
        before = _status_digest(path, source)
        memo = self.root / "keys" / f"{before}.txt" if before else None
        if memo is not None:
            try:
                known = memo.read_text().strip()
                if len(known) == 32 and all(c in "0123456789abcdef" for c in known):
                    return known, None
            except OSError:
                pass
        key = source_key(path)
        if key is not None and source is not None:
            key = hashlib.blake2b(f"{key}/{source}".encode(), digest_size=16).hexdigest()
        if key is None or memo is None or _status_digest(path, source) != before:
            return key, None
        return key, (memo, key)

    def _remember_key(self, pending: tuple[Path, str] | None) -> None:
        if pending is None:
            return
        # Only a shortcut: without it the file is hashed again next time.
        with contextlib.suppress(OSError):
            write_atomic(pending[0], pending[1].encode(), durable=False)

    # ---- the fleet tables ------------------------------------------------------------------
    def put_tables(self, report: dict[str, Any], run: Run, settings: str) -> None:
        """Write a report's findings.parquet and summary.parquet beside its run's metrics, then
        tables.json (their settings and sizes: it says the tables are there).

        Only for a stored run (its run.json is there); a failure to write is ignored (the
        tables are rebuilt from the cached analysis next time)."""
        import polars as pl

        folder = self.run_dir(run.id)
        if not (folder / "run.json").is_file():
            return
        try:
            findings = _parquet_bytes(findings_frame(report, settings))
            row = _parquet_bytes(runs_frame(report, run, settings))
            write_atomic(folder / FINDINGS_FILE, findings, durable=False)
            write_atomic(folder / SUMMARY_FILE, row, durable=False)
            marker = {
                "format": TABLES_FORMAT,
                "settings": settings,
                "bytes": {FINDINGS_FILE: len(findings), SUMMARY_FILE: len(row)},
            }
            write_atomic(folder / TABLES_FILE, json.dumps(marker).encode(), durable=False)
        except (OSError, ValueError, TypeError, KeyError, pl.exceptions.PolarsError):
            pass

    def tables_settings(self, run_id: str) -> str | None:
        """The settings fingerprint of a run's stored tables; None when either is missing,
        damaged or of another schema (then they are written again)."""
        folder = self.run_dir(run_id)
        marker = _json_object(folder / TABLES_FILE)
        try:
            if marker is None or marker["format"] != TABLES_FORMAT:
                return None
            sizes = marker["bytes"]
            if not all(
                _parquet_intact(folder / n, sizes[n]) for n in (FINDINGS_FILE, SUMMARY_FILE)
            ):
                return None
            return str(marker["settings"])
        except JSON_DAMAGE:
            return None

    # ---- cached analysis results ----------------------------------------------------------
    def get_results(self, key: str) -> dict[str, Any] | None:
        """What `put_results` stored under `key`, or None."""
        return _json_object(self.root / "results" / f"{key}.json")

    def put_results(self, key: str, data: dict[str, Any]) -> None:
        """Keep analysis results (plain JSON) under `key`; a failure to write is ignored."""
        try:
            payload = json.dumps(data, allow_nan=False).encode()
            write_atomic(self.root / "results" / f"{key}.json", payload, durable=False)
        except (OSError, ValueError, TypeError):
            pass


def relocate(run: Run, stored_root: str | None, given_root: str | Path) -> None:
    """Point a cached run's source at the path the user gave now.

    The store is keyed by content, so the same bytes under another name (a copy, another
    user's checkout, a shared store) hit the same entry; the entry remembers the first path.
    A run stored as `stored_root` (or a file below it) is shown under `given_root`.
    """
    given, path = str(given_root), run.source.path
    if stored_root is None or path == stored_root:
        path = given
    elif path.startswith(stored_root.rstrip("/") + "/"):
        path = given.rstrip("/") + path[len(stored_root.rstrip("/")) :]
    run.source = Source(run.source.kind, path)


def _status_digest(path: str | Path, source: str | None) -> str | None:
    """A digest of the status (path, size, mtime, inode) of every file a key would hash."""
    p = Path(path)
    digest = hashlib.blake2b(digest_size=16)
    try:
        resolved = p.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        return None
    digest.update(f"{FORMAT_VERSION}/{__version__}/{source}/{resolved}".encode())
    try:
        for file in _iter_files(p):
            st = file.stat()
            digest.update(f"{file}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0".encode())
    except OSError:
        return None
    return digest.hexdigest()


# ---- the fleet tables: findings and runs as Parquet beside the metrics ------------------------
FINDINGS_FILE = "findings.parquet"
SUMMARY_FILE = "summary.parquet"
TABLES_FILE = "tables.json"


def findings_frame(report: dict[str, Any], settings: str) -> pl.DataFrame:
    """The findings of a report (`Report.to_dict`) as `FINDINGS_SCHEMA` rows."""
    import polars as pl

    from logscope.schemas import FINDINGS_SCHEMA

    run_id = report["run"]["id"]
    incident_of = {k: inc["id"] for inc in report.get("incidents", []) for k in inc["findings"]}
    rows = [
        {
            "run_id": run_id,
            "position": n,
            **{k: f[k] for k in ("code", "name", "severity", "title", "message", "metric")},
            "step": f["step"],
            "end_step": f["end_step"],
            "evidence": json.dumps(f["evidence"], allow_nan=False, ensure_ascii=False),
            "advice": json.dumps(f["advice"], allow_nan=False, ensure_ascii=False),
            "references": list(f["references"]),
            "incident": incident_of.get(n),
            "settings": settings,
        }
        for n, f in enumerate(report["findings"])
    ]
    return pl.DataFrame(rows, schema=FINDINGS_SCHEMA)


def runs_frame(
    report: dict[str, Any], run: Run, settings: str, analysed_at: float | None = None
) -> pl.DataFrame:
    """The `runs` row of a report (`Report.to_dict`) on `run` (for its config)."""
    import datetime as dt
    import time

    import polars as pl

    from logscope.model import CONFIG_CODE_PREFIX, SEVERITY_RANK
    from logscope.schemas import RUNS_SCHEMA
    from logscope.verl_config import n_gpus

    summary, meta = report["run"], report["run"]["meta"]
    findings = report["findings"]
    worst_first = sorted(findings, key=lambda f: -SEVERITY_RANK[f["severity"]])
    timed = [
        i["step"]
        for i in report.get("incidents", [])
        if i["step"] is not None
        and not all(findings[k]["code"].startswith(CONFIG_CODE_PREFIX) for k in i["findings"])
    ]
    config = run.config()

    def text(value: Any) -> str | None:
        return None if value is None else str(value)

    def utc(seconds: float | None) -> dt.datetime | None:
        return None if seconds is None else dt.datetime.fromtimestamp(seconds, dt.UTC)

    row = {
        "run_id": summary["id"],
        "source_kind": summary["source"]["kind"],
        "source_path": summary["source"]["path"],
        "project": text(meta.get("project")),
        "experiment": text(meta.get("experiment")),
        "algorithm": text(meta.get("algorithm")),
        "framework": str(meta.get("framework") or "verl"),
        "verl_version": text(meta.get("verl_version")),
        "n_steps": summary["steps"]["count"],
        "first_step": summary["steps"]["first"],
        "last_step": summary["steps"]["last"],
        "wall_time_s": summary.get("wall_time_s"),
        "n_gpus": n_gpus(config) if config else None,
        "worst_severity": report["summary"]["worst_severity"],
        "findings": len(findings),
        "diagnoses": list(dict.fromkeys(f["name"] for f in worst_first)),
        "first_incident_step": min(timed) if timed else None,
        "config_segments": len(run.config_segments),
        "config": json.dumps(jsonable(config), sort_keys=True, default=str, allow_nan=False),
        "source_modified_at": utc(_modified(summary["source"]["path"])),
        "analysed_at": utc(time.time() if analysed_at is None else analysed_at),
        "settings": settings,
        "logscope_version": report.get("logscope_version", __version__),
    }
    return pl.DataFrame([row], schema=RUNS_SCHEMA)


def _modified(path: str) -> float | None:
    """The modification time of a file, the newest of a folder's files; None for URIs."""
    if "://" in path:
        return None
    try:
        p = Path(path)
        if p.is_file():
            return p.stat().st_mtime
        return max((f.stat().st_mtime for f in _iter_files(p)), default=None)
    except OSError:
        return None


def _parquet_intact(path: Path, size: int) -> bool:
    """Whether a Parquet file is there with the size it was written with and Parquet's closing
    magic bytes (what damage looks like without reading it: it is read only when used)."""
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size != size or size < 8:
                return False
            fh.seek(-4, os.SEEK_END)
            return fh.read(4) == b"PAR1"
    except OSError:
        return False


def _parquet_bytes(frame: pl.DataFrame) -> bytes:
    import io

    buf = io.BytesIO()
    # zstd level 1, not polars' default 3: a third less CPU for files <1 % larger (a 100k-step
    # run's 7M rows: 1.25 -> 0.83 s, 36.7 -> 37.0 MB); reading them costs the same.
    frame.write_parquet(buf, compression="zstd", compression_level=1)
    return buf.getvalue()


#: folders this process has swept of killed writers' temporary files
_SWEPT: set[Path] = set()


def _sweep_once(folder: Path) -> None:
    """`sweep_temp_files` on a shared folder once per process: `sources/` holds an entry per
    input (a fleet's thousands), and listing it for every run stored made the fleet quadratic."""
    if folder not in _SWEPT:
        sweep_temp_files(folder)
        _SWEPT.add(folder)
