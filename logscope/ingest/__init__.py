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
from collections.abc import Callable
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
    "wandb_csv",
    "tables",
    "console",
)

Progress = Callable[[int, int], None]


def reader_modules() -> list[ModuleType]:
    return [importlib.import_module(f"logscope.ingest.{name}") for name in READER_MODULES]


def kinds() -> dict[str, str]:
    """{source kind: description} of every reader."""
    return {m.KIND: m.DESCRIPTION for m in reader_modules()}


def accepted_formats() -> str:
    return "; ".join(f"{k} ({d})" for k, d in kinds().items())


def load(
    path: str | Path, source: str | None = None, progress: Progress | None = None
) -> list[Run]:
    """Read `path` into one or more Runs. Raises IngestError when nothing can be read."""
    raw = str(path)
    if "://" not in raw:
        p = Path(path)
        if not p.exists():
            raise IngestError(
                raw, f"no such file or directory. logscope reads: {accepted_formats()}"
            )
        _check_readable(p)
    else:
        p = Path(raw)
    modules = reader_modules()
    if source is not None:
        for module in modules:
            if module.KIND == source:
                return module.read(p, progress=progress)
        raise UnknownSource(
            raw, f"unknown --source {source!r}; choose one of: {', '.join(kinds())}"
        )
    for module in modules:
        if module.sniff(p):
            return module.read(p, progress=progress)
    what = "binary data, not text, and" if p.is_file() else "a folder that is"
    raise UnknownSource(
        raw, f"{what} not a format logscope reads. Expected one of: {accepted_formats()}"
    )


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
