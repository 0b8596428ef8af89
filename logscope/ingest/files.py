"""Opening log files: plain or gzip, read in byte chunks, with a content hash computed on the way.

The hash (xxh3-64, 16 hex digits) is over the bytes as stored on disk, so a store can compute
the same key without parsing (`content_id`).
"""

from __future__ import annotations

import gzip
import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
HASH_BYTES = 8
READ_SIZE = 1 << 20


def is_gzip(path: str | Path) -> bool:
    """True when the file starts with the gzip magic bytes (whatever its name)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except OSError:
        return False


def content_id(path: str | Path) -> str:
    """Content hash of the file's bytes on disk, 16 hex digits (the id `read()` gives the Run)."""
    h = _Hash()
    with open(path, "rb") as f:
        while block := f.read(16 * READ_SIZE):
            h.update(block)
    return h.hexdigest()


def _new_hash() -> Any:
    try:
        import xxhash  # a dependency; ~10x faster than hashlib on big logs

        return xxhash.xxh3_64()
    except ImportError:  # pragma: no cover - a broken install still gets ids
        return hashlib.blake2b(digest_size=HASH_BYTES)


class _Hash:
    """Content hash (xxh3-64, 16 hex digits), updated in a helper thread (it releases the GIL)
    unless `inline` (a small file: its hash takes less than starting a thread)."""

    def __init__(self, inline: bool = False) -> None:
        self._hash = _new_hash()
        self._pool = None if inline else ThreadPoolExecutor(max_workers=1)

    def update(self, data: bytes | memoryview) -> None:
        if self._pool is None:
            self._hash.update(data)
        else:
            self._pool.submit(self._hash.update, data)

    def hexdigest(self) -> str:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        return str(self._hash.hexdigest())


class _HashingReader:
    """A raw file wrapper that hashes what is read (for gzip: the compressed bytes)."""

    def __init__(self, raw: BinaryIO, digest: _Hash) -> None:
        self._raw = raw
        self._hash = digest
        self.position = 0

    def read(self, n: int = -1) -> bytes:
        block = self._raw.read(n)
        self.position += len(block)
        if block:
            self._hash.update(block)
        return block

    def readable(self) -> bool:
        return True


class ByteChunks:
    """The decompressed bytes of a log file in chunks that end at a line break.

    Iterating yields `(data, end)`: `data[:end]` holds complete lines (`data` may go on with a
    partial line that the next chunk repeats). A last line without a newline is left in `tail`.
    `done`/`total` count bytes on disk (for progress); `hexdigest()` is `content_id(path)`.
    """

    def __init__(self, path: str | Path, chunk_size: int) -> None:
        self.path = Path(path)
        self.chunk_size = chunk_size
        self.total = os.path.getsize(self.path)
        self._file = open(self.path, "rb")  # noqa: SIM115 - closed in close()
        self.gzipped = self._file.peek(2)[:2] == GZIP_MAGIC
        self.one_chunk = not self.gzipped and self.total <= chunk_size  # nothing to overlap
        self._hash = _Hash(inline=self.one_chunk)
        self.tail = b""
        self.damaged = False
        self._done = 0
        self._reader = _HashingReader(self._file, self._hash) if self.gzipped else None

    @property
    def done(self) -> int:
        return self._reader.position if self._reader is not None else self._done

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        return self._gzip_chunks() if self.gzipped else self._plain_chunks()

    def _plain_chunks(self) -> Iterator[tuple[bytes, int]]:
        # No copies: a chunk's partial last line is re-read as the start of the next one.
        while block := self._file.read(self.chunk_size):
            end = block.rfind(b"\n") + 1
            while end == 0 and (more := self._file.read(self.chunk_size)):
                block += more  # a line longer than a chunk
                end = block.rfind(b"\n") + 1
            if end == 0:
                self.tail = block
                self._hash.update(block)
                self._done += len(block)
                return
            self._hash.update(memoryview(block)[:end])
            self._done += end
            if end < len(block):
                self._file.seek(end - len(block), os.SEEK_CUR)
            yield block, end

    def _gzip_chunks(self) -> Iterator[tuple[bytes, int]]:
        stream = gzip.GzipFile(fileobj=self._reader, mode="rb")  # type: ignore[arg-type]
        carry = b""
        while True:
            parts = [carry]
            size = len(carry)
            while size < self.chunk_size:
                try:
                    block = stream.read1(READ_SIZE)
                except (OSError, EOFError):
                    self.damaged = True  # a truncated or corrupt .gz: keep what was decoded
                    block = b""
                if not block:
                    break
                parts.append(block)
                size += len(block)
            data = b"".join(parts)
            if len(data) == len(carry):
                self.tail = carry
                return
            end = data.rfind(b"\n") + 1
            carry = data[end:]
            if end:
                yield data, end

    def hexdigest(self) -> str:
        if self._reader is not None:
            while self._reader.read(16 * READ_SIZE):  # what the decompressor did not need
                pass
        else:
            while block := self._file.read(16 * READ_SIZE):
                self._hash.update(block)
        return self._hash.hexdigest()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> ByteChunks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_head(path: str | Path, size: int = 256 * 1024) -> bytes:
    """Up to `size` decompressed bytes from the start of the file (b"" when unreadable; of a
    damaged .gz, what decoded before the damage)."""
    try:
        if is_gzip(path):
            parts: list[bytes] = []
            got = 0
            with gzip.open(path, "rb") as f:
                while got < size:
                    try:
                        block = f.read1(size - got)
                    except (OSError, EOFError):
                        break  # truncated or corrupt: what decoded before the damage
                    if not block:
                        break
                    parts.append(block)
                    got += len(block)
            return b"".join(parts)
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""
