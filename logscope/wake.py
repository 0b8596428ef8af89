"""Waiting between polls of a followed file: inotify wake-ups on local file systems.

`logscope tail` stat-polls (follow.py), which works everywhere, NFS and Lustre included. Where
the file lies on a local file system and watchdog's inotify observer runs, a change of the file
wakes the loop at once, and the stat poll only runs every `SAFETY_INTERVAL_S` as a safety net:
alerts come sooner and an idle tail costs almost no CPU. Elsewhere the loop sleeps
`poll_interval` between polls, as before. A followed folder (TensorBoard run folder) wakes the
loop on a change of any file inside it.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

SAFETY_INTERVAL_S = 5.0
# File systems whose changes inotify reports (network and FUSE ones are polled).
LOCAL_FILESYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "tmpfs", "overlay", "ramfs"}
)


class _ShutdownRace(logging.Filter):
    """Drops the error watchdog's inotify emitter logs when an event read was in flight as the
    observer stopped (its thread checks "running" before it reads): the event is of no use any
    more, and the message would tell a user that stopped `tail` cleanly that something broke."""

    MESSAGE = "InotifyEmitter.queue_events() called when the thread is inactive"

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != self.MESSAGE


_INOTIFY_LOGGER = logging.getLogger("watchdog.observers.inotify")
if not any(isinstance(f, _ShutdownRace) for f in _INOTIFY_LOGGER.filters):
    _INOTIFY_LOGGER.addFilter(_ShutdownRace())


def filesystem_type(path: str | Path, mountinfo: str | None = None) -> str | None:
    """Type of the file system holding `path` (from /proc/self/mountinfo), or None if unknown."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    target = os.path.realpath(path)
    best, best_type = "", None
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields = head.split()
        if not sep or len(fields) < 5 or not tail.split():
            continue
        mount = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, best_type = mount, tail.split()[0]
    return best_type


class ChangeWaiter:
    """`wait()` returns when the followed file changed (inotify) or its interval has passed."""

    def __init__(self, path: str | Path, poll_interval: float) -> None:
        self.path = os.path.abspath(path)
        # A symlinked log is written through its target: events come from the target's folder.
        self._names = {self.path, os.path.realpath(self.path)}
        # A followed folder: any change below it counts.
        self._trees = {os.path.realpath(self.path)} if os.path.isdir(self.path) else set()
        self._event = threading.Event()
        self._observer: Any = None
        self.interval = poll_interval
        if filesystem_type(os.path.dirname(self.path)) in LOCAL_FILESYSTEMS:
            self._observer = self._watch()
            if self._observer is not None:
                self.interval = max(poll_interval, SAFETY_INTERVAL_S)

    @property
    def watching(self) -> bool:
        return self._observer is not None

    def _watch(self) -> Any:
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:
            return None
        waiter = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                paths = (event.src_path, getattr(event, "dest_path", ""))
                if any(waiter._concerns(os.fsdecode(p)) for p in paths if p):
                    waiter.wake()

        observer = Observer()
        try:
            for folder in sorted({os.path.dirname(name) for name in self._names}):
                observer.schedule(Handler(), folder, recursive=False)
            for tree in sorted(self._trees):
                observer.schedule(Handler(), tree, recursive=True)
            observer.start()
        except (OSError, RuntimeError):  # no such folder yet, inotify limits reached, …
            return None
        return observer

    def _concerns(self, path: str) -> bool:
        return path in self._names or any(path.startswith(t + os.sep) for t in self._trees)

    def wait(self) -> None:
        self._event.wait(self.interval)
        self._event.clear()

    def wake(self) -> None:
        self._event.set()

    def close(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=2)
            self._observer = None
