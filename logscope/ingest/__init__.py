"""Readers: one module per source, each turning a path into `Run`s.

Each reader module defines:
    KIND: str                      -- source kind, e.g. "verl-console"
    DESCRIPTION: str               -- what it reads, for error messages and --help
    def sniff(path: Path) -> bool  -- cheap check: is this path this reader's format?
    def read(path: Path, *, progress=None) -> list[Run]
`load()` picks the reader from what the path is (first sniff that says yes), or by `source`.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from logscope.exceptions import IngestError, UnknownSource
from logscope.model import Run

# Module names under logscope.ingest, in sniffing order (most specific first).
READER_MODULES: tuple[str, ...] = (
    "wandb_online",
    "wandb_offline",
    "tensorboard",
    "jsonl",
    "prime_rl_jsonl",
    "hf_trainer_state",
    "wandb_csv",
    "tables",
    "hf_trainer_log",
    "roll",
    "slime",
    "skyrl",
    "prime_rl",
    "nemo_rl",
    "areal",
    "console",
)

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Sniffed:
    """The reader a file's sniffs chose (`kind`), for that version of the file (size, mtime):
    a fleet's parent sniffs each file once, and its workers read it without sniffing again."""

    kind: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: str | Path, kind: str) -> Sniffed | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return cls(kind, st.st_size, st.st_mtime_ns)

    def holds_for(self, path: Path) -> bool:
        """Whether `path` is still the file that was sniffed (else it is sniffed again)."""
        try:
            st = os.stat(path)
        except OSError:
            return False
        return (st.st_size, st.st_mtime_ns) == (self.size, self.mtime_ns)


def reader_modules() -> list[ModuleType]:
    return [importlib.import_module(f"logscope.ingest.{name}") for name in READER_MODULES]


def kinds() -> dict[str, str]:
    """{source kind: description} of every reader."""
    return {m.KIND: m.DESCRIPTION for m in reader_modules()}


def accepted_formats() -> str:
    return "; ".join(f"{k} ({d})" for k, d in kinds().items())


def check_source(source: str | None, path: str | Path) -> None:
    """Raise UnknownSource (naming `path`) for a `--source` that names no reader."""
    if source is not None and source not in kinds():
        raise UnknownSource(
            str(path), f"unknown --source {source!r}; choose one of: {', '.join(kinds())}"
        )


def load(
    path: str | Path,
    source: str | None = None,
    progress: Progress | None = None,
    reader: Sniffed | None = None,
) -> list[Run]:
    """Read `path` into one or more Runs. Raises IngestError when nothing can be read.

    A folder that is one source (a W&B run folder or `wandb/`, a TensorBoard log folder) goes to
    its reader; any other folder is searched for runs (`discover`) and each is read.
    `reader`: what sniffing a file found before (a fleet's parent sniffed it), used while the
    file is unchanged instead of every reader's sniff (~8 ms per log); unlike `source`, it
    forces nothing.
    Every run's kept text passes `logscope.redact` here, once, whichever reader made it, and
    every run gets its framework (`logscope.frameworks.assign`: the reader's, else detected).
    """
    from logscope.frameworks import assign
    from logscope.redact import redact, redact_runs

    try:
        runs = redact_runs(_load(path, source, progress, reader))
    except IngestError as exc:  # its message may quote the input (a CSV parser's error)
        exc.args = tuple(redact(a) if isinstance(a, str) else a for a in exc.args)
        raise
    for run in runs:
        assign(run)
    return runs


def _load(
    path: str | Path, source: str | None, progress: Progress | None, reader: Sniffed | None = None
) -> list[Run]:
    raw = str(path)
    if "://" not in raw:
        p = Path(path)
        if not p.exists():
            raise IngestError(raw, "no such file or directory")
        _check_readable(p)
    else:
        p = Path(raw)
    check_source(source, raw)
    modules = reader_modules()
    if source is not None:
        (module,) = (m for m in modules if m.KIND == source)
        return module.read(p, progress=progress)
    if p.is_dir():
        return _load_folder(p, progress)
    if reader is not None and reader.holds_for(p):
        hinted = next((m for m in modules if m.KIND == reader.kind), None)
        if hinted is not None:
            return hinted.read(p, progress=progress)
    for module in modules:
        if module.sniff(p):
            return module.read(p, progress=progress)
    raise UnknownSource(raw, _not_a_format(p))


def _not_a_format(p: Path) -> str:
    """What the input looked like, and how to force a reader (for a file no reader claims)."""
    from logscope.ingest.files import read_head

    head = read_head(p, 4096) if p.is_file() else b""
    if p.is_file() and p.stat().st_size == 0:
        what = "the file is empty"
    elif p.is_file() and b"\x00" in head:
        what = f"binary data ({_hex(head[:8])}…), not a log, event file or W&B file"
    else:
        what = "not a format logscope recognises"
    modules = reader_modules()
    files = [m.KIND for m in modules if not hasattr(m, "FRAMEWORK") and m.KIND != "wandb-online"]
    return (
        f"{what}. Force a reader with --source KIND: {', '.join(files)}, … "
        f"(all {len(modules)}: `analyze --help`)"
    )


def _hex(data: bytes) -> str:
    return " ".join(f"{b:02x}" for b in data)


# ---- folders ------------------------------------------------------------------------------
#: file names read as console logs when found in a folder (any text given by name is read)
LOG_SUFFIXES = (".log", ".out", ".err", ".log.gz", ".out.gz")
#: a rotated log: `verl.log.3` (logrotate), `verl.log.1.gz`, `train.out.2`
ROTATED_LOG = re.compile(r"^(?P<base>.+\.(?:log|out|err|txt))\.(?P<n>\d+)(?:\.gz)?$")


def discover(folder: Path) -> tuple[list[tuple[Path, ModuleType]], list[tuple[Path, str]]]:
    """The runs in a folder, each with its reader, and the files passed over (with why).

    W&B run folders and `wandb/` directories are one source each; a logscope store is skipped; TensorBoard event files are
    read together by the TensorBoard reader (it splits them into runs by folder); a Hugging Face
    output dir (`trainer_state.json` or `checkpoint-N/trainer_state.json` in it) is one source,
    its latest state file, and its checkpoints are not searched further; other files by the first reader whose sniff accepts
    them, console logs by name (`LOG_SUFFIXES`).
    """
    from logscope.ingest import hf_trainer_state, tensorboard, wandb_offline
    from logscope.store import is_store

    found: list[tuple[Path, ModuleType]] = []
    passed: list[tuple[Path, str]] = []
    if wandb_offline.sniff(folder):
        return [(folder, wandb_offline)], []
    file_readers = [
        m for m in reader_modules() if m.KIND not in ("wandb-online", "tensorboard", "verl-console")
    ]
    console = importlib.import_module("logscope.ingest.console")
    events = False
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        dirnames.sort()
        for name in list(dirnames):
            child = here / name
            if name == "latest-run" or child.is_symlink() or is_store(child):
                dirnames.remove(name)
            elif wandb_offline.sniff(child):
                found.append((child, wandb_offline))
                dirnames.remove(name)
        checkpoints = [d for d in dirnames if hf_trainer_state.CHECKPOINT.match(d)]
        state_here = hf_trainer_state.STATE_NAME in filenames or any(
            (here / d / hf_trainer_state.STATE_NAME).is_file() for d in checkpoints
        )
        if state_here:  # the latest state file, so a cache key hashes it, not the weights
            latest = hf_trainer_state.latest_state(here)
            if latest is not None:
                found.append((latest, hf_trainer_state))
            for name in checkpoints:  # weights and optimizer state, not logs
                dirnames.remove(name)
        for name in sorted(filenames):
            file = here / name
            if state_here and name == hf_trainer_state.STATE_NAME:
                continue
            if tensorboard.sniff(file):
                events = True
                continue
            reader = next((m for m in file_readers if m.sniff(file)), None)
            logname = name.lower().endswith(LOG_SUFFIXES) or ROTATED_LOG.match(name)
            if reader is None and logname and console.sniff(file):
                reader = console
            if reader is not None:
                found.append((file, reader))
            else:
                passed.append((file, "not a log logscope reads"))
    if events:
        found.insert(0, (folder, tensorboard))
    return found, passed


def _load_folder(folder: Path, progress: Progress | None) -> list[Run]:
    found, passed = discover(folder)
    if len(found) == 1 and found[0][0] == folder:  # the folder is one source
        return found[0][1].read(folder, progress=progress)
    runs: list[Run] = []
    failed: list[str] = []
    for path, module in found:
        try:
            runs += module.read(path, progress=progress)
        except IngestError as exc:
            failed.append(str(exc))
    rel = [str(p.relative_to(folder)) for p, _ in passed]
    if not runs:
        looked = (
            f"{len(found)} candidate(s) could not be read: " + "; ".join(failed)
            if failed
            else ("no verl log, JSONL, TensorBoard or W&B run in it")
        )
        skipped = (
            f" (passed over: {', '.join(rel[:10])}{' …' if len(rel) > 10 else ''})" if rel else ""
        )
        raise IngestError(str(folder), looked + skipped)
    note = f"read from folder {folder}: {len(runs)} run(s)"
    if rel:
        note += f"; passed over {len(rel)} file(s): {', '.join(rel[:10])}" + (
            " …" if len(rel) > 10 else ""
        )
    if failed:
        note += f"; could not read {len(failed)}: " + "; ".join(failed)
    for run in runs:
        run.parse_stats.notes.append(note)
    return runs


def _check_readable(path: Path) -> None:
    """Fail with the OS's reason (e.g. permission denied) before sniffers swallow it."""
    try:
        if path.is_dir():
            with os.scandir(path) as entries:
                next(entries, None)
        else:
            with open(path, "rb") as fh:
                fh.read(1)
    except OSError as exc:
        raise IngestError(str(path), f"cannot read it: {exc.strerror or exc}") from exc
