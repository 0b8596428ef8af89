"""Writing a file so that no reader ever sees half of it, and sweeping what killed writers left.

`write_atomic` writes to a temporary file beside the target (`.<name>.<host>.<pid>.*.tmp`),
fsyncs it, renames it over the target and fsyncs the folder: a reader sees the old file or the
new one, and a crash leaves at most the temporary file. A cache (the store) that reads a damaged
entry as absent writes with `durable=False`: the rename keeps readers safe, and the two fsyncs
(a few ms each, tens on NFS) would only protect against a power cut. `sweep_temp_files` deletes those
whose writer is gone. The store, the alert outbox, tail's state file and the dashboard's
uploads all write this way.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import time
from pathlib import Path

#: a temporary file older than this is an orphan (its writer died) whatever host wrote it
STALE_TEMP_S = 3600.0
HOST = socket.gethostname().replace(".", "_")


def write_atomic(target: Path, data: bytes | str, durable: bool = True) -> None:
    """Write `data` (text as UTF-8) to `target` through a temporary file renamed into place
    (`durable`: on disk before the call returns)."""
    payload = data.encode() if isinstance(data, str) else data
    target.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{target.name}.{HOST}.{os.getpid()}."
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        _fsync_dir(target.parent)


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _orphaned(tmp: Path, now: float) -> bool:
    """A temporary file whose writer is gone: dead pid on this host, or older than an hour."""
    try:
        age = now - tmp.stat().st_mtime
    except OSError:
        return False
    if age > STALE_TEMP_S:
        return True
    parts = tmp.name.rsplit(".", 4)  # [.<target>, host, pid, random, tmp]
    if len(parts) != 5 or parts[1] != HOST or not parts[2].isdigit():
        return False
    pid = int(parts[2])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def sweep_temp_files(folder: Path) -> int:
    """Delete orphaned temporary files in `folder` (left by a killed writer); how many."""
    removed = 0
    now = time.time()
    try:
        candidates = [p for p in folder.iterdir() if p.name.startswith(".") and p.suffix == ".tmp"]
    except OSError:
        return 0
    for tmp in candidates:
        if _orphaned(tmp, now):
            with contextlib.suppress(OSError):
                tmp.unlink()
                removed += 1
    return removed
