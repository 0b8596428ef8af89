"""Follow a growing log file by stat-polling: complete new lines only, across truncation and rotation.

Polling (not inotify) works on NFS/Lustre, where training logs often live. A partial last line
waits for its newline; a file that does not exist yet is waited for; a file that shrinks is read
again from the start; a file replaced by a new one (new inode: rotation, `tee` restarted) is
drained to its end first and then the new file is followed from its start. A replacement that
holds the same bytes as what was read (a copy or sync tool such as rsync rewrote the file under
a new inode) is not a restart: following goes on at the same offset.

Sources that are read whole (verl's JSONL file logger, TensorBoard event files) only need to know
*that* they changed: `GrowthWatcher` compares the status of the file, or of every file in a
folder, between polls.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_READ_CHUNK = 1 << 20
# Bytes compared at the start and just before the offset to recognise a copy of the same log.
_SAME_WINDOW = 1 << 20


@dataclass
class FollowState:
    """Where the follower is: enough to resume after a restart."""

    inode: int | None = None
    offset: int = 0
    line_no: int = 0
    generation: int = 0  # bumped at every truncation/replacement: line numbers restart

    def to_dict(self) -> dict[str, int | None]:
        return {
            "inode": self.inode,
            "offset": self.offset,
            "line_no": self.line_no,
            "generation": self.generation,
        }

    @classmethod
    def from_dict(cls, data: dict) -> FollowState:
        return cls(
            data.get("inode"),
            int(data.get("offset", 0)),
            int(data.get("line_no", 0)),
            int(data.get("generation", 0)),
        )


@dataclass
class Poll:
    """What one poll found: new complete lines (line_no, text) and notes about the file."""

    lines: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    restarted: bool = False  # the file was truncated or replaced: downstream state should reset
    restart_at: int = 0  # when restarted: index in `lines` of the new file's first line


class LineFollower:
    """Yields complete new lines of `path` on each `poll()`."""

    def __init__(self, path: str | Path, state: FollowState | None = None) -> None:
        self.path = Path(path)
        self.state = state or FollowState()
        self._fh = None  # type: ignore[var-annotated]
        self._partial = b""
        self._missing_noted = False
        self._error_noted: str | None = None

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _open(self, offset: int) -> None:
        self.close()
        self._fh = open(self.path, "rb")  # noqa: SIM115 - kept open between polls on purpose
        st = os.fstat(self._fh.fileno())
        if offset > st.st_size:
            offset = 0
        self._fh.seek(offset)
        self.state.inode = st.st_ino
        self.state.offset = offset

    def _read_available(self, out: Poll) -> None:
        assert self._fh is not None
        while True:
            chunk = self._fh.read(_READ_CHUNK)
            if not chunk:
                break
            self.state.offset += len(chunk)
            data = self._partial + chunk
            parts = data.split(b"\n")
            self._partial = parts.pop()
            for raw in parts:
                self.state.line_no += 1
                out.lines.append((self.state.line_no, raw.decode("utf-8", errors="replace")))

    def _restart(self, out: Poll, why: str) -> None:
        out.notes.append(why)
        out.restarted = True
        out.restart_at = len(out.lines)
        self._partial = b""
        self.state.line_no = 0
        self.state.generation += 1
        self._open(0)

    def _same_content(self) -> bool:
        """Does the file now at `path` start with exactly the bytes read from the open one?"""
        assert self._fh is not None
        offset = self.state.offset
        try:
            with open(self.path, "rb") as new:
                if os.fstat(new.fileno()).st_size < offset:
                    return False
                starts = sorted({0, max(0, offset - _SAME_WINDOW)})
                for start in starts:
                    size = min(_SAME_WINDOW, offset - start)
                    self._fh.seek(start)
                    new.seek(start)
                    if self._fh.read(size) != new.read(size):
                        return False
                return True
        except OSError:
            return False
        finally:
            self._fh.seek(offset)

    def _switch(self, out: Poll) -> None:
        """Follow the replacement at the same offset (it holds what was already read)."""
        out.notes.append(
            f"{self.path} was replaced by a copy of what was read so far (copied or synced); "
            f"continuing at byte {self.state.offset}"
        )
        offset, partial = self.state.offset, self._partial
        self._open(offset)
        self._partial = partial

    def poll(self) -> Poll:
        """Read what is new since the last poll."""
        out = Poll()
        try:
            self._poll(out)
            self._error_noted = None
        except OSError as exc:  # permissions changed, I/O error: say so (once) and try again
            self.close()
            note = f"cannot read {self.path}: {exc.strerror or exc}"
            if note != self._error_noted:
                out.notes.append(note)
                self._error_noted = note
        return out

    def _poll(self, out: Poll) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._fh is not None:
                self._read_available(out)  # drain what the old file still had
                self.close()
            if not self._missing_noted:
                out.notes.append(f"waiting for {self.path} to appear")
                self._missing_noted = True
            return
        self._missing_noted = False

        if self._fh is None:
            if self.state.inode is not None and self.state.inode != st.st_ino:
                self._restart(
                    out, f"{self.path} was replaced; following the new file from its start"
                )
            else:
                resume = self.state.offset if self.state.inode == st.st_ino else 0
                if resume and st.st_size < resume:
                    self._restart(
                        out, f"{self.path} shrank (truncated); reading it again from the start"
                    )
                else:
                    self._open(resume)
        elif st.st_ino != self.state.inode:
            self._read_available(out)  # drain the old file to its end first
            if self._same_content():
                self._switch(out)
            else:
                self._restart(out, f"{self.path} was replaced (rotated); following the new file")
        elif st.st_size < self.state.offset:
            self._restart(out, f"{self.path} shrank (truncated); reading it again from the start")
        elif st.st_size == self.state.offset:
            return  # nothing new: the common idle poll stays a single stat
        self._read_available(out)


# ---- sources read whole ------------------------------------------------------------------

FileStatus = tuple[int, int, int]  # inode, size, mtime in ns


@dataclass
class Change:
    """What one poll of a `GrowthWatcher` found."""

    changed: bool = False  # something was written: read the source again
    restarted: bool = False  # a file shrank, vanished or was replaced: what is read is a new run
    notes: list[str] = field(default_factory=list)


class GrowthWatcher:
    """Notices changes of a file, or of the files in a folder (recursively), by stat-polling."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.seen: dict[str, FileStatus] | None = None  # None: not looked at yet, or missing
        self._missing_noted = False

    def _files(self) -> Iterator[tuple[str, Path]]:
        if not self.path.is_dir():
            yield "", self.path
            return
        for dirpath, dirnames, filenames in os.walk(self.path):
            dirnames.sort()
            for name in filenames:
                file = Path(dirpath) / name
                yield str(file.relative_to(self.path)), file

    def status(self) -> dict[str, FileStatus] | None:
        """{relative name: status} of what is there now; None when the path does not exist."""
        if not self.path.exists():
            return None
        out: dict[str, FileStatus] = {}
        for name, file in self._files():
            try:
                st = os.stat(file)
            except OSError:  # vanished between listing and stat
                continue
            out[name] = (st.st_ino, st.st_size, st.st_mtime_ns)
        return out

    def poll(self) -> Change:
        now = self.status()
        out = Change()
        if now is None:
            if not self._missing_noted:
                out.notes.append(f"waiting for {self.path} to appear")
                self._missing_noted = True
            return out
        self._missing_noted = False
        before, self.seen = self.seen, now
        if before == now:
            return out
        out.changed = True
        for name, (inode, size, _) in (before or {}).items():
            shown = self.path / name if name else self.path
            if name not in now:
                out.notes.append(f"{shown} was removed; reading what is there again")
            elif now[name][0] != inode:
                out.notes.append(f"{shown} was replaced; reading the new file")
            elif now[name][1] < size:
                out.notes.append(f"{shown} shrank (truncated); reading it again from the start")
            else:
                continue
            out.restarted = True
        return out
