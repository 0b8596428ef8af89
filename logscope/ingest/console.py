"""verl console log reader (`… 2>&1 | tee train.log`), plain or gzip: verl_formats.md §1.

Two paths, one meaning. `ConsoleParser` (console_parser.py) reads line by line and defines what
every line means; it serves `logscope tail`. `read()` is the fast path for whole files: it reads
byte chunks, splits and flags their lines in one polars query each, and parses in bulk only
the clean step lines (Ray prefix and ANSI codes before `step:`, nothing odd after it, not
followed by a wrapped fragment). Every other line that matters — startup lines, the config
dump, tracebacks, wrapped or garbled step lines — goes through the same `ConsoleParser`, in
file order; tqdm bars and blank lines are dropped in bulk. Chunks are 16 MB (memory stays
bounded, progress is reported); the items of one chunk's step lines are read in a worker thread
(console_items.py: a C tokenizer, or polars without it) while the next chunk is classified. If
the bulk path fails on some input, the whole file is read line by line instead (same result).
Tests check that both paths give the same Run (tests/test_console_reader.py, _props.py).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import polars as pl

from logscope.exceptions import IngestError
from logscope.ingest import console_items
from logscope.ingest import verl_text as vt
from logscope.ingest.console_parser import PROGRESS_DONE, ConsoleParser
from logscope.ingest.console_run import FastPart, looks_like_verl
from logscope.ingest.files import ByteChunks, read_head
from logscope.model import Run, Source

T = TypeVar("T")

__all__ = ["DESCRIPTION", "KIND", "ConsoleParser", "read", "read_text", "sniff"]

KIND = "verl-console"
DESCRIPTION = (
    "verl console log, or any other text (.log/.txt/.out, optionally .gz): the fallback for text"
)
EXPECTED = (
    "expected text, such as a verl console log: lines like `step:1 - actor/pg_loss:0.1 - ...` "
    "or verl/Ray start-up and crash output"
)
CHUNK_BYTES = 16 << 20
SNIFF_BYTES = 256 << 10

Progress = Callable[[int, int], None]


def sniff(path: str | Path) -> bool:
    """A regular file (or .gz) whose first 256 KB are text: the console reader is the fallback for
    any text that no other reader claims (pasted excerpts rarely look like a whole log)."""
    p = Path(path)
    return p.is_file() and is_text(read_head(p, SNIFF_BYTES), empty=p.stat().st_size == 0)


def is_text(head: bytes, empty: bool = False) -> bool:
    """Text, not binary: no NUL byte near the start and at most 1% undecodable bytes."""
    if not head:
        return empty  # an empty file is text; an unreadable or undecodable .gz is not
    if b"\x00" in head[:4096]:
        return False
    text = head.decode("utf-8", errors="replace")
    return text.count("\ufffd") <= max(16, len(text) // 100)


def read(path: str | Path, *, progress: Progress | None = None) -> list[Run]:
    """Read a verl console log (or any text) into one Run; a text with nothing verl in it gives
    an empty Run that says so. Raises IngestError only when the file cannot be read as text."""
    p = Path(path)
    if not p.is_file():
        raise IngestError(str(path), f"not a regular file; {EXPECTED}")
    try:
        run = _read_bulk(p, progress)
    except (IngestError, OSError):
        raise
    except Exception as exc:  # a polars corner case: the line-by-line parser means the same
        run = _read_lines(p)
        run.parse_stats.notes.append(
            f"bulk reader failed ({type(exc).__name__}); read line by line"
        )
    if not looks_like_verl(run) and not sniff(p):
        # forced with --source on binary data: nothing to show (a damaged log that still holds
        # verl output is read as far as it goes)
        raise IngestError(str(p), f"binary data, not text; {EXPECTED}")
    return [run]


def _read_lines(p: Path) -> Run:
    """The whole file through ConsoleParser (the reference path; slower)."""
    parser = ConsoleParser()
    with ByteChunks(p, CHUNK_BYTES) as chunks:
        line_no = 0
        for data, end in chunks:
            lines = data[:end].decode("utf-8", errors="replace").split("\n")[:-1]
            parser.feed(lines, first_line_no=line_no + 1)
            line_no += len(lines)
        if chunks.tail:
            parser.feed([chunks.tail.decode("utf-8", errors="replace")], first_line_no=line_no + 1)
        run_id = chunks.hexdigest()
    source = Source(KIND, str(p))
    return parser.to_run(source, run_id, ended_mid_line=bool(chunks.tail), final=True)


def _read_bulk(p: Path, progress: Progress | None) -> Run:
    parser = ConsoleParser()
    fast = FastPart()
    line_no = 0
    try:
        chunks = ByteChunks(p, CHUNK_BYTES)
    except OSError as exc:
        raise IngestError(str(p), f"cannot open: {exc.strerror or exc}") from exc
    # The items of a chunk are read in a worker thread (polars and _items.c release the GIL) while
    # the next chunk is split and classified; at most one is in flight.
    with chunks, ThreadPoolExecutor(max_workers=1) as pool:
        # one chunk: nothing to overlap, so no thread to start
        submit = _done_now if chunks.one_chunk else pool.submit
        queue: deque[tuple[pl.DataFrame, Future[tuple[pl.DataFrame, list[str]]], bool]] = deque()
        for data, end in chunks:
            line_no, steps, data = _chunk(data, end, line_no, parser, fast)
            if steps.height:
                # while every value so far is `.3f`, the items say which are not
                need_three = (
                    fast.counts.not_three_decimals + parser.counts.not_three_decimals
                ) == 0
                job = submit(console_items.items, steps, data, need_three)
                queue.append((steps, job, need_three))
            while len(queue) > 1:
                _add_items(*queue.popleft(), fast, parser)
            if progress is not None:
                progress(chunks.done, chunks.total)
        while queue:
            _add_items(*queue.popleft(), fast, parser)
        tail = chunks.tail
        if tail:  # the last line has no newline: it may have been cut off mid-write
            parser.feed([tail.decode("utf-8", errors="replace")], first_line_no=line_no + 1)
        run_id = chunks.hexdigest()
        if chunks.damaged:
            parser.notes.append("the gzip stream is truncated or corrupt; read what decoded")
        if progress is not None:
            progress(chunks.total, chunks.total)
    return parser.to_run(
        Source(KIND, str(p)), run_id, ended_mid_line=bool(tail), fast=fast, final=True
    )


def _done_now(fn: Callable[..., T], *args: Any) -> Future[T]:
    """`fn(*args)` run now, as a finished Future (what `ThreadPoolExecutor.submit` returns)."""
    job: Future[T] = Future()
    try:
        job.set_result(fn(*args))
    except Exception as exc:
        job.set_exception(exc)
    return job


def read_text(text: str, source: str = "<text>") -> Run:
    """Parse console text already in memory (line by line; for tests and small inputs)."""
    parser = ConsoleParser()
    parser.feed(text.splitlines(keepends=True))
    return parser.to_run(
        Source(KIND, source), ended_mid_line=bool(text) and not text.endswith("\n"), final=True
    )


# ---- the bulk path -----------------------------------------------------------------------------


def _scan(data: bytes, end: int) -> pl.DataFrame:
    """The complete lines in `data[:end]` (as `verl_text.segments()` sees them, before the `\\r`
    split) with their `_flags`, in one streaming query."""
    try:
        lines = pl.scan_csv(
            data,
            has_header=False,
            separator="\x00",
            quote_char=None,
            schema={"raw": pl.String},
            encoding="utf8-lossy",
            truncate_ragged_lines=True,
        )
        frame = _flags(lines).collect(engine="streaming")
    except pl.exceptions.PolarsError:  # polars' CSV reader is a fast path, not a requirement
        text = data[:end].decode("utf-8", errors="replace")
        rows = [x[:-1] if x.endswith("\r") else x for x in text.split("\n")[:-1]]
        return _flags(pl.LazyFrame({"raw": rows}, schema={"raw": pl.String})).collect()
    # `data` goes on with a partial line (read again with the next chunk): one more row.
    return frame.head(frame.height - 1) if end < len(data) else frame


# After `step:`, these make the line mean something else to the parser: ANSI codes and Ray's
# suffixes are removed before it reads the items, a `|` may end a tqdm bar glued in front.
ODD = r"\x1b|\||\[repeated |\(Ray deduplicates| step:[0-9]"  # the last: step lines a paste joined


def _flags(lines: pl.LazyFrame) -> pl.LazyFrame:
    """Per line (raw): pos (of the first `step:`), step (the number after it), ascii, cr (has a
    `\\r`), and cand: a step line that the bulk path may parse, as far as the line tells —
    ASCII (polars finds byte offsets but slices characters), no `\\r`, no trailing blank,
    nothing ODD after `step:` — with head, the text before `step:` (`_candidates` checks it).
    Conservative: a line not parsed in bulk goes to ConsoleParser, which decides."""
    raw = pl.col("raw")
    pos = pl.col("pos")
    step = raw.str.slice(pos, 26).str.extract(r"^step:([0-9]{1,18})(?: - |$)", 1).cast(pl.Int64)
    body = raw.str.slice(pos)
    return (
        lines.select(raw=raw.fill_null(""))
        .with_columns(pos=raw.str.find("step:", literal=True))
        .with_columns(
            step=step,
            ascii=raw.str.len_bytes() == raw.str.len_chars(),
            cr=raw.str.contains("\r", literal=True),
        )
        .with_columns(
            cand=(
                pl.col("step").is_not_null()
                & pl.col("ascii")
                & ~pl.col("cr")
                & ~raw.str.ends_with(" ")
                & ~raw.str.ends_with("\t")
                & ~body.str.contains(ODD)
            ),
        )
        .with_columns(head=pl.when("cand").then(raw.str.slice(0, pos)))
    )


def _chunk(
    data: bytes, end: int, line_no: int, parser: ConsoleParser, fast: FastPart
) -> tuple[int, pl.DataFrame, bytes]:
    """Read the lines in `data[:end]` (the first is line `line_no + 1`): every line but the clean
    step lines goes through `parser` now. Returns the last line number, the clean step lines
    (seq, step, raw, head, at: index of the line in the chunk) and the chunk as read (NUL bytes
    are dropped)."""
    if b"\x00" in data:
        parser.nul_bytes += data.count(b"\x00", 0, end)
        data = data[:end].replace(b"\x00", b"")
        end = len(data)
    frame = _scan(data, end)
    n = frame.height
    parser.lines_read += n
    frame = frame.with_columns(ln=pl.int_range(line_no + 1, line_no + n + 1, dtype=pl.Int64))
    wide = frame.filter(~pl.col("ascii")).get_column("raw")
    if wide.len() and wide.str.contains("\ufffd", literal=True).any():
        parser.undecodable += int(wide.str.count_matches("\ufffd", literal=True).sum())

    cand = _candidates(frame)
    # Every other line, split on `\r`, without noise: what the line-by-line parser reads.
    rows, fast.saw_progress = _split_cr(frame.filter(~cand), fast.saw_progress)
    rows = rows.filter(~_drop(rows))
    is_fast = cand & ~_wrapped(frame, cand, rows)
    if not is_fast.equals(cand):  # step lines that go to the parser after all
        demoted = frame.filter(cand & ~is_fast).select(
            "ln", "raw", sub=pl.lit(0, pl.Int64), last=pl.lit(True)
        )
        rows = pl.concat([rows, demoted.select(rows.columns)]).sort(["ln", "sub"])

    # Each of them with the last step the bulk path saw before it.
    seq = pl.col("ln") * (1 << vt.SUB_BITS)
    at = pl.col("ln") - (line_no + 1)
    steps = frame.filter(is_fast).select(seq.alias("seq"), "step", "raw", "head", at=at)
    if rows.height:
        rows = rows.with_columns(seq=seq + pl.col("sub").clip(upper_bound=vt.MAX_SUB))
        marks = steps.select("seq", prev_seq="seq", prev_step="step")
        rows = rows.join_asof(marks, on="seq", strategy="backward", check_sortedness=False)
        for ln, sub, last, text, pseq, pstep in rows.select(
            "ln", "sub", "last", "raw", "prev_seq", "prev_step"
        ).iter_rows():
            if pseq is not None:
                parser.sync_step(pseq, pstep)
            parser.segment(ln, sub, last, text)
    if steps.height:
        parser.sync_step(steps.get_column("seq")[-1], steps.get_column("step")[-1])
    return line_no + n, steps, data


# A `\r`-separated segment that `_noise` calls noise for sure (blank, or a tqdm bar without
# ANSI codes), and a line of nothing else (also without `step:`, tested apart).
_NOISE_SEGMENT = (
    "(?:"
    + vt.EMPTYISH_BODY
    + "|[^\r\x1b]*(?:"
    + vt.TQDM.replace("[^|]", "[^|\r\x1b]")
    + ")[^\r\x1b]*)"
)
ALL_NOISE = "^" + _NOISE_SEGMENT + "(?:\r" + _NOISE_SEGMENT + ")*$"


def _split_cr(frame: pl.DataFrame, bar_seen: bool) -> tuple[pl.DataFrame, bool]:
    """Split lines (ln, raw, cr: has a `\\r`) on `\\r` (tqdm) into segments (ln, raw, sub: index
    in the line, last); lines whose segments are all noise are dropped. Also says whether a
    `Training Progress` bar has been seen. Lines without `\\r` (nearly all) are not copied.
    """
    has_cr = frame.get_column("cr")
    frame = frame.select("ln", "raw", sub=pl.lit(0, pl.Int64), last=pl.lit(True))
    if not has_cr.any():
        return frame, bar_seen
    # Most such lines are a Ray prefix and a tqdm bar: all noise, told by one regex pass.
    bar = pl.col("raw").str.contains("Training Progress", literal=True)
    lines = frame.filter(has_cr).with_columns(quiet=_all_noise(pl.col("raw")), bar=bar)
    split = (  # one query: a small chunk pays polars' fixed cost per query, not per row
        lines.lazy()
        .filter(~pl.col("quiet"))
        .with_columns(pl.col("raw").str.split("\r"))
        .with_columns(
            sub=pl.int_ranges(0, pl.col("raw").list.len(), dtype=pl.Int64),
            n=pl.col("raw").list.len(),
        )
        .explode(["raw", "sub"])
        .with_columns(last=pl.col("sub") == pl.col("n") - 1)
        .select(*frame.columns, noise=_noise(pl.col("raw")), bar=bar)
        .collect()
    )
    noise = split.get_column("noise")
    if not bar_seen:
        bar_seen = bool(
            (lines.get_column("quiet") & lines.get_column("bar")).any()
            or (noise & split.get_column("bar")).any()
        )
    kept = split.filter(~noise).select(frame.columns)
    rows = frame.filter(~has_cr)
    if kept.height:
        rows = pl.concat([rows, kept]).sort(["ln", "sub"])
    return rows, bar_seen


def _all_noise(raw: pl.Expr) -> pl.Expr:
    """A line of `\\r`-joined noise segments (tqdm bars, blanks) and no `step:`."""
    return (
        raw.str.contains(ALL_NOISE)
        & ~raw.str.contains("step:", literal=True)
        & ~raw.str.contains(PROGRESS_DONE, literal=True)
    )


def _noise(raw: pl.Expr) -> pl.Expr:
    """Segments ConsoleParser ignores for sure: blank, only a prefix, a tqdm bar (but not one at
    100%: the parser notes where training ended)."""
    return (
        (raw == "")
        | raw.str.contains(vt.EMPTYISH)
        | (
            ~raw.str.contains("step:", literal=True)
            & ~raw.str.contains("\x1b", literal=True)
            & ~raw.str.contains(PROGRESS_DONE, literal=True)
            & (raw.str.contains("%|", literal=True) | raw.str.contains("it [", literal=True))
            & raw.str.contains(vt.TQDM)
        )
    )


def _drop(segments: pl.DataFrame) -> pl.Series:
    """Noise among segments (of lines that were not split on `\\r`, only those without `step:`
    are tested; the split ones are clean of it already)."""
    raw = pl.col("raw")
    maybe = (
        (pl.col("sub") == 0)
        & pl.col("last")
        & ~raw.str.contains("step:", literal=True)
        # a whole-line verl bar (a pasted copy): the parser reads how far training got
        & ~raw.str.contains("Training Progress", literal=True)
    )
    return segments.select(drop=maybe & _noise(raw)).to_series()


HEAD_RE = re.compile(vt.HEAD)


def _head_ok(head: str) -> bool:
    """The text before `step:` is what a clean step line may have: ANSI codes, a Ray prefix, a
    tqdm bar."""
    return ":" not in head and " - " not in head and bool(HEAD_RE.match(vt.strip_ansi(head)))


def _candidates(frame: pl.DataFrame) -> pl.Series:
    """Lines that are clean step lines by their own text (`cand` of `_flags`, with the text
    before `step:` checked once per distinct value)."""
    cand = frame.get_column("cand")
    heads = frame.get_column("head").drop_nulls().unique().to_list()
    bad = [h for h in heads if not _head_ok(h)]
    if bad:
        cand = cand & ~frame.get_column("head").is_in(bad).fill_null(False)
    return cand


def _wrapped(frame: pl.DataFrame, cand: pl.Series, rows: pl.DataFrame) -> pl.Series:
    """Candidates whose next line may begin with the wrapped rest of them (if not sure: it may),
    and the last line of the chunk (its rest may be in the next one).

    The next line is either a candidate too, or gives the parser its first segment (`rows`:
    split on `\\r`, noise removed); if it gives none, it is noise and cannot be a fragment.
    """
    n = frame.height
    line0 = frame.get_column("ln")[0] if n else 0
    is_cand = cand.to_numpy()
    wrapped = np.zeros(n, dtype=bool)
    if n:
        wrapped[-1] = is_cand[-1]
    after_cand = np.zeros(n, dtype=bool)
    after_cand[1:] = is_cand[:-1]
    # Segment 0 of a line after a candidate, in `rows` (sorted by line) or else the line itself.
    first = rows.filter(pl.col("sub") == 0)
    at = first.get_column("ln").to_numpy() - line0
    from_rows = after_cand[at]
    texts = pl.concat(
        [
            frame.get_column("raw").filter(pl.Series(after_cand & is_cand)),
            first.get_column("raw").filter(pl.Series(from_rows)),
        ]
    )
    if texts.len():
        where = np.concatenate([np.flatnonzero(after_cand & is_cand), at[from_rows]])
        maybe = _may_continue(texts).to_numpy()
        wrapped[where[maybe] - 1] = True
    return pl.Series("wrapped", wrapped)


def _may_continue(text: pl.Series) -> pl.Series:
    """Could each segment be the wrapped rest of the step line before it? Not when it starts
    with a Ray prefix, nor when it has no ANSI code and starts with `step:N` or does not look
    like items (`CONT`, or one item of a Markdown list: asked last, they read whole lines)."""
    raw = pl.col("raw")
    frame = text.alias("raw").to_frame()
    ansi = text.str.contains("\x1b", literal=True)
    maybe = frame.select(
        ~raw.str.slice(0, 64).str.replace_all(vt.ANSI, "").str.contains(vt.PREFIX)
        & (ansi | ~raw.str.contains(vt.STEP_START))
    ).to_series()
    plain = maybe & ~ansi
    if plain.any():
        idx = plain.arg_true()
        items = raw.str.contains(vt.CONT) | raw.str.contains(vt.ONE_ITEM)
        maybe = maybe.scatter(idx, frame.gather(idx).select(items).to_series())
    return maybe


def _add_items(
    steps: pl.DataFrame,
    job: Future[tuple[pl.DataFrame, list[str]]],
    need_three: bool,
    fast: FastPart,
    parser: ConsoleParser,
) -> None:
    """Add the bulk-parsed items of clean step lines to `fast`.

    Same rules as `verl_text.parse_items`; a line with any item those rules reject (truncated,
    garbled, a Ray suffix, trailing blanks, ...) is handed to `parser` whole, so the line-by-line
    rules decide and count it.
    """
    fast.mark_seqs.append(steps.get_column("seq").to_numpy().astype(np.int64))
    fast.mark_steps.append(steps.get_column("step").to_numpy().astype(np.int64))
    heads = steps.get_column("head").unique()
    for head in heads.to_list():
        name = vt.prefix_name(vt.split_prefix(vt.strip_ansi(head))[0])
        if name:
            fast.ray_actors.add(name)
    items, metric_names = job.result()
    ok = items.get_column("ok")
    fixed: list[tuple[int, bool, bool]] = []  # (seq, numpy-wrapped, not `.3f`) of values fixed
    bad: set[int] = set()
    if not ok.all():
        # The few items the regex rejects: True/False and numpy wrappers are values (fixed
        # here, as parse_items does); anything else hands its whole line to the parser.
        # nan/inf under a key (common in a diverging run) are read right by the cast.
        special = (pl.col("metric") != "") & pl.col("v").is_in(["nan", "inf", "-inf"])
        ok = ok | items.select(special.fill_null(False)).to_series()
        items = items.with_columns(ok=ok)
    if not ok.all():
        idx = (~ok).arg_true()
        odd = items.select("seq", "metric", "v").gather(idx)
        values = []
        for seq, key, text in odd.iter_rows():
            plain = vt.unwrap(text) if text is not None else None
            value = vt.value_of(plain) if key and plain is not None else None
            values.append(value)
            if value is None:
                bad.add(seq)
            else:
                fixed.append((seq, plain is not text, vt.THREE_DECIMALS_RE.match(plain) is None))
        items = items.with_columns(items.get_column("value").scatter(idx, values))
    if bad:
        for seq, text in (
            steps.filter(pl.col("seq").is_in(sorted(bad))).select("seq", "raw").iter_rows()
        ):
            parser.step_line(seq >> vt.SUB_BITS, seq & vt.MAX_SUB, text)
        items = items.filter(~pl.col("seq").is_in(sorted(bad)))
        metric_names = items.get_column("metric").unique().to_list()
        fixed = [f for f in fixed if f[0] not in bad]
    counts = fast.counts
    counts.step_lines += steps.height - len(bad)
    counts.values += items.height
    counts.numpy_wrapped += sum(wrapped for _, wrapped, _ in fixed)
    if need_three:
        regex_ok = items.filter("ok")
        counts.not_three_decimals += int((~regex_ok.get_column("three")).sum()) + sum(
            not_three for _, _, not_three in fixed
        )
    fast.frames.append(items.select("seq", "step", "metric", "value"))
    fast.metric_names.update(metric_names)
