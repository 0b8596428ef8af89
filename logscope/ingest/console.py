"""verl console log reader (`… 2>&1 | tee train.log`), plain or gzip: verl_formats.md §1.

Two paths, one meaning. `ConsoleParser` (console_parser.py) reads line by line and defines what
every line means; it serves `logscope tail`. `read()` is the fast path for whole files: it reads
byte chunks, splits them into lines with polars, and parses in bulk only the clean step lines
(Ray prefix and ANSI codes before `step:`, nothing odd after it, not followed by a wrapped
fragment). Every other line that matters — startup lines, the config dump, tracebacks, wrapped
or garbled step lines — goes through the same `ConsoleParser`, in file order; tqdm bars and
blank lines are dropped in bulk. Chunks are 16 MB (memory stays bounded, progress is reported);
the item parse of one chunk runs in a worker thread while the next chunk is classified. If the
bulk path fails on some input, the whole file is read line by line instead (same result).
Tests check that both paths give the same Run (tests/test_console_reader.py, _props.py).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl

from logscope.exceptions import IngestError
from logscope.ingest import verl_text as vt
from logscope.ingest.console_parser import ConsoleParser, FastPart
from logscope.ingest.files import ByteChunks, read_head
from logscope.model import Run, Source

__all__ = ["DESCRIPTION", "KIND", "ConsoleParser", "read", "read_text", "sniff"]

KIND = "verl-console"
DESCRIPTION = "verl console log (.log/.txt/.out, optionally .gz)"
EXPECTED = (
    "expected a verl console log: lines like `step:1 - actor/pg_loss:0.1 - ...` "
    "(or verl/Ray start-up and crash output)"
)
CHUNK_BYTES = 16 << 20
SNIFF_BYTES = 256 << 10

Progress = Callable[[int, int], None]

# Text that only a verl / Ray / Python-crash log has (for sniffing a log without step lines).
MARKERS_RE = re.compile(
    r"(?m)^(?:\x1b\[[0-9;]*m)*\((?:TaskRunner|TaskRunnerV1|main_task|WorkerDict|raylet)\b"
    r"|Training Progress:|Total training steps: [0-9]+|\[validate_config\]"
    r"|^\{'actor_rollout_ref': |ray\.exceptions\.|RayTaskError|verl\.trainer|verl/trainer"
    r"|Traceback \(most recent call last\):"
)
# A step line after a line start, a Ray prefix, an ANSI code, `\r` or a tqdm bar.
STEP_LINE_RE = re.compile(r"(?m)(?:^|\) |\x1b\[[0-9;]*m ?|\r|\])step:[0-9]+ - [^ :]+:")


def sniff(path: str | Path) -> bool:
    """A regular file (or .gz) whose first 256 KB hold a verl step line or verl/Ray markers."""
    p = Path(path)
    if not p.is_file():
        return False
    head = read_head(p, SNIFF_BYTES)
    if not head or b"\x00" in head[:4096]:
        return False
    text = head.decode("utf-8", errors="replace")
    if text.count("\ufffd") > max(16, len(text) // 100):
        return False  # binary
    return bool(STEP_LINE_RE.search(text) or MARKERS_RE.search(text))


def read(path: str | Path, *, progress: Progress | None = None) -> list[Run]:
    """Read a verl console log into one Run. Raises IngestError when it is not one."""
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
    if not _looks_like_verl(run):
        raise IngestError(
            str(p), f"no verl output found in {run.parse_stats.lines_read} lines; {EXPECTED}"
        )
    return [run]


GENERIC_EVENTS = frozenset({"warning", "error", "killed"})


def _looks_like_verl(run: Run) -> bool:
    """Step lines, a config dump, Ray actor prefixes or a verl/Ray/crash signature."""
    return bool(
        run.parse_stats.step_lines
        or run.config_segments
        or run.meta.get("ray_actors")
        or any(e.kind not in GENERIC_EVENTS for e in run.events)
    )


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
    # The bulk item parse of a chunk runs in a worker thread (polars releases the GIL) while
    # the next chunk is split and classified; at most one is in flight.
    with chunks, ThreadPoolExecutor(max_workers=1) as pool:
        queue: deque[tuple[pl.DataFrame, Future[tuple[pl.DataFrame, pl.Series]], bool]] = deque()
        for data, end in chunks:
            line_no, steps = _chunk(data, end, line_no, parser, fast)
            if steps.height:
                need_three = fast.not_three == 0 and parser._not_three == 0
                queue.append((steps, pool.submit(_items_and_names, steps, need_three), need_three))
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
            parser.stats.notes.append("the gzip stream is truncated or corrupt; read what decoded")
        if progress is not None:
            progress(chunks.total, chunks.total)
    return parser.to_run(
        Source(KIND, str(p)), run_id, ended_mid_line=bool(tail), fast=fast, final=True
    )


def read_text(text: str, source: str = "<text>") -> Run:
    """Parse console text already in memory (line by line; for tests and small inputs)."""
    parser = ConsoleParser()
    parser.feed(text.splitlines(keepends=True))
    return parser.to_run(
        Source(KIND, source), ended_mid_line=bool(text) and not text.endswith("\n"), final=True
    )


# ---- the bulk path -----------------------------------------------------------------------------


def _lines(data: bytes, end: int, nul: bool) -> pl.Series:
    """The complete lines in `data[:end]` as strings, the way `verl_text.segments()` sees them."""
    if nul:
        data = data[:end].replace(b"\x00", b"")
        end = len(data)
    try:
        frame = pl.read_csv(
            data,
            has_header=False,
            separator="\x00",
            quote_char=None,
            new_columns=["raw"],
            schema={"raw": pl.String},
            encoding="utf8-lossy",
            truncate_ragged_lines=True,
        )
        lines = frame.get_column("raw").fill_null("")
        return lines.head(lines.len() - 1) if end < len(data) else lines
    except Exception:  # polars' CSV reader is a fast path, not a requirement
        text = data[:end].decode("utf-8", errors="replace")
        rows = [x[:-1] if x.endswith("\r") else x for x in text.split("\n")[:-1]]
        return pl.Series("raw", rows, dtype=pl.String)


def _chunk(
    data: bytes, end: int, line_no: int, parser: ConsoleParser, fast: FastPart
) -> tuple[int, pl.DataFrame]:
    """Read the lines in `data[:end]` (the first is line `line_no + 1`): every line but the clean
    step lines goes through `parser` now; return the last line number and the clean step lines."""
    nul = b"\x00" in data
    if nul:
        parser.nul_bytes += data.count(b"\x00", 0, end)
    raw = _lines(data, end, nul)
    n = raw.len()
    parser.stats.lines_read += n
    if raw.str.contains("\ufffd", literal=True).any():
        parser.damage += int(raw.str.count_matches("\ufffd", literal=True).sum())
    frame = pl.DataFrame({"ln": pl.int_range(line_no + 1, line_no + n + 1, eager=True), "raw": raw})
    frame, progress_bar = _split_cr(frame)
    fast.saw_progress = fast.saw_progress or progress_bar
    frame = _classify(frame)

    # Lines for the line-by-line parser, each with the last step the bulk path saw before it.
    seq = pl.col("ln") * (1 << vt.SUB_BITS) + pl.col("sub").clip(upper_bound=vt.MAX_SUB)
    frame = frame.with_columns(seq=seq)
    others = frame.filter(~pl.col("fast") & ~pl.col("drop"))
    if others.height:
        marks = frame.filter("fast").select("seq", prev_seq="seq", prev_step="step")
        others = others.join_asof(marks, on="seq", strategy="backward", check_sortedness=False)
        for ln, sub, last, text, pseq, pstep in others.select(
            "ln", "sub", "last", "raw", "prev_seq", "prev_step"
        ).iter_rows():
            if pseq is not None:
                parser.sync_step(pseq, pstep)
            parser.segment(ln, sub, last, text)
    steps = frame.filter("fast").select("seq", "step", "raw", "head")
    if steps.height:
        parser.sync_step(steps.get_column("seq")[-1], steps.get_column("step")[-1])
    return line_no + n, steps


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


def _split_cr(frame: pl.DataFrame) -> tuple[pl.DataFrame, bool]:
    """Split lines on `\\r` (tqdm) into segments: adds columns sub (index in the line), last,
    gone (a line whose segments are all noise), and says whether a `Training Progress` bar was
    seen. Only lines with a segment worth reading are replaced by their segments (rare), so the
    common case copies nothing.
    """
    frame = frame.with_columns(sub=pl.lit(0, pl.Int64), last=pl.lit(True), gone=pl.lit(False))
    has_cr = frame.get_column("raw").str.contains("\r", literal=True)
    if not has_cr.any():
        return frame, False
    # Most such lines are a Ray prefix and a tqdm bar: all noise, told by one regex pass.
    idx = has_cr.arg_true()
    lines = frame.get_column("raw").gather(idx).to_frame()
    quiet = lines.select(
        pl.col("raw").str.contains(ALL_NOISE) & ~pl.col("raw").str.contains("step:", literal=True)
    ).to_series()
    bar = lines.filter(quiet & pl.col("raw").str.contains("Training Progress", literal=True))
    idx = idx.filter(~quiet)
    if not idx.len():
        return frame.with_columns(gone=has_cr), bar.height > 0
    split = (
        frame.gather(idx)
        .with_columns(pl.col("raw").str.split("\r"))
        .with_columns(
            sub=pl.int_ranges(0, pl.col("raw").list.len(), dtype=pl.Int64),
            n=pl.col("raw").list.len(),
        )
        .explode(["raw", "sub"])
        .with_columns(last=pl.col("sub") == pl.col("n") - 1)
        .select(frame.columns)
    )
    noise = _noise(split)
    bars = (
        bar.height
        + split.filter(noise & pl.col("raw").str.contains("Training Progress", literal=True)).height
    )
    kept = split.filter(~noise)
    frame = frame.with_columns(gone=has_cr)
    if kept.height:
        frame = pl.concat([frame.filter(~pl.col("gone")), kept]).sort(["ln", "sub"])
    return frame, bars > 0


def _noise(frame: pl.DataFrame) -> pl.Series:
    """Segments ConsoleParser ignores for sure: blank, only a prefix, a tqdm bar."""
    raw = pl.col("raw")
    flags = frame.select(
        blank=(raw == "") | raw.str.contains(vt.EMPTYISH),
        tqdm=~raw.str.contains("step:", literal=True)
        & ~raw.str.contains("\x1b", literal=True)
        & (raw.str.contains("%|", literal=True) | raw.str.contains("it [", literal=True)),
    )
    maybe = flags.get_column("tqdm")
    if maybe.any():
        idx = maybe.arg_true()
        maybe = maybe.scatter(idx, frame.get_column("raw").gather(idx).str.contains(vt.TQDM))
    return flags.get_column("blank") | maybe


# After `step:`, these need the slow road (`:+` is a value polars reads and NUMERIC does not).
ODD = r"\x1b|\||\[repeated |\(Ray deduplicates|:\+"
ODD_RE = re.compile(ODD)
HEAD_RE = re.compile(vt.HEAD)


def _head_odd(head: str) -> int:
    """How often ODD occurs in the text before `step:`, or -1 when that text is not a Ray
    prefix / tqdm bar (with ANSI codes) that a clean step line may have."""
    if ":" in head or " - " in head or not HEAD_RE.match(vt.strip_ansi(head)):
        return -1
    return len(ODD_RE.findall(head))


def _classify(frame: pl.DataFrame) -> pl.DataFrame:
    """Add `fast` (a clean step line the bulk path parses), `drop` (surely noise), `step`.

    Everything here is conservative: a segment not marked fast or drop goes to ConsoleParser,
    which decides. `fast` needs: only ANSI codes and a Ray prefix / tqdm bar before `step:N`,
    no ANSI code or `|` after it, nothing `strip_tail` would remove, ASCII (polars finds byte
    offsets but slices characters), and a next line that cannot be the wrapped rest of it.
    (Items are checked in `_items` and `_add_items`.) Whole lines are scanned once or twice;
    what stands before `step:` is checked once per distinct text, and the noise tests only run
    on lines without `step:`.
    """
    raw = pl.col("raw")
    pos = raw.str.find("step:", literal=True)
    flags = (
        frame.lazy()
        .select(
            head=pl.when(pos.is_not_null()).then(raw.str.slice(0, pos)),
            step=raw.str.slice(pos, 26)
            .str.extract(r"^step:([0-9]{1,18})(?: - |$)", 1)
            .cast(pl.Int64),
            clean=(
                ~pl.col("gone")
                & (raw.str.len_bytes() == raw.str.len_chars())
                & ~raw.str.ends_with(" ")
                & ~raw.str.ends_with("\t")
            ),
            n_odd=raw.str.count_matches(ODD),
        )
        .collect(engine="streaming")
    )
    # The text before `step:` is nearly always the same few Ray prefixes: check each once.
    heads = flags.get_column("head").drop_nulls().unique().to_list()
    flags = flags.with_columns(
        head_odd=pl.col("head").replace_strict(
            heads, [_head_odd(h) for h in heads], default=-1, return_dtype=pl.Int64
        )
    )
    ok = flags.select(
        (
            pl.col("clean") & pl.col("step").is_not_null() & (pl.col("n_odd") == pl.col("head_odd"))
        ).fill_null(False)
    ).to_series()

    # Noise: blank lines and tqdm bars without `step:` (the others are not looked at).
    drop = frame.get_column("gone").clone()
    loose = flags.get_column("head").is_null() & ~drop
    if loose.any():
        idx = loose.arg_true()
        noise = (
            frame.select("raw")
            .gather(idx)
            .select(
                (raw == "")
                | raw.str.contains(vt.EMPTYISH)
                | (
                    ~raw.str.contains("\x1b", literal=True)
                    & (
                        raw.str.contains("%|", literal=True)
                        | raw.str.contains("it [", literal=True)
                    )
                    & raw.str.contains(vt.TQDM)
                )
            )
        )
        drop = drop.scatter(idx, noise.to_series())
    # Could the segment be the wrapped rest of a step line? (if not sure: yes) Only asked of
    # segments that follow a possible fast step line.
    not_cont = drop.clone()
    after = ok.shift(1, fill_value=False) & ~drop
    if after.any():
        idx = after.arg_true()
        rows = frame.select("raw").gather(idx)
        sure = rows.select(
            raw.str.slice(0, 64).str.replace_all(vt.ANSI, "").str.contains(vt.PREFIX)
            | (
                ~raw.str.contains("\x1b", literal=True)
                & (raw.str.contains(vt.STEP_START) | ~raw.str.contains(vt.CONT))
            )
        ).to_series()
        not_cont = not_cont.scatter(idx, sure)
    frame = frame.with_columns(head=flags.get_column("head"), ok=ok, drop=drop, not_cont=not_cont)
    nxt = (
        pl.col("last")
        & (pl.col("ln").shift(-1) == pl.col("ln") + 1)
        & (pl.col("sub").shift(-1) == 0)
        & ~pl.col("not_cont").shift(-1)
    )
    fast = pl.col("ok") & pl.col("ln").shift(-1).is_not_null() & ~nxt.fill_null(True)
    return frame.with_columns(fast=fast).with_columns(
        step=pl.when("fast").then(flags.get_column("step"))
    )


def _items(steps: pl.DataFrame, need_three: bool) -> pl.DataFrame:
    """The items of clean step lines: seq, step, metric, value, ok, v (text where not ok)[, three].

    `ok` means a finite value under a non-empty key, which then matches `verl_text.NUMERIC`:
    polars' float cast reads a superset of it (a leading `+`, any-case nan/inf/infinity), and
    what it reads beyond NUMERIC is either not finite or `+…` (`_classify` leaves lines with
    `:+` to the parser). Other items (nan, inf, wrapped or garbled values, `1e400`) take the
    road through `_add_items`' fix-up, which applies the regex rules.
    """
    body = pl.col("raw")
    item = pl.col("item")
    v = pl.col("v")
    x = pl.col("value")
    ok = ((pl.col("cp") > 0) & x.is_finite()).fill_null(False)
    columns = ["seq", "step", pl.col("key").alias("metric"), x, ok.alias("ok")]
    columns.append(pl.when(~ok).then(v).alias("v"))  # the text only where it is needed
    if need_three:
        columns.append(v.str.contains(vt.THREE_DECIMALS).alias("three"))
    return (
        steps.lazy()
        .select("seq", "step", item=body.str.split(" - ").list.slice(1))
        .explode("item")
        .filter(item.is_not_null())
        .with_columns(cp=item.str.find(":", literal=True))
        .with_columns(key=item.str.slice(0, pl.col("cp")), v=item.str.slice(pl.col("cp") + 1))
        .with_columns(value=v.cast(pl.Float64, strict=False))
        .select(columns)
        .collect(engine="streaming")
    )


def _items_and_names(steps: pl.DataFrame, need_three: bool) -> tuple[pl.DataFrame, pl.Series]:
    """`_items` and the distinct metric names among them (run in a worker thread)."""
    items = _items(steps, need_three)
    return items, items.get_column("metric").unique()


def _add_items(
    steps: pl.DataFrame,
    job: Future[tuple[pl.DataFrame, pl.Series]],
    need_three: bool,
    fast: FastPart,
    parser: ConsoleParser,
) -> None:
    """Add the bulk-parsed items of clean step lines to `fast`.

    Same rules as `verl_text.parse_items`; a line with any item those rules reject (truncated,
    garbled, a Ray suffix, trailing blanks, ...) is handed to `parser` whole, so the line-by-line
    rules decide and count it.
    """
    fast.step_seqs.append(steps.get_column("seq").to_numpy().astype(np.int64))
    fast.steps.append(steps.get_column("step").to_numpy().astype(np.int64))
    heads = steps.get_column("head").unique()
    for head in heads.to_list():
        name = vt.prefix_name(vt.split_prefix(vt.strip_ansi(head))[0])
        if name:
            fast.names.add(name)
    items, names = job.result()
    ok = items.get_column("ok")
    fixed: list[tuple[int, bool, bool]] = []  # (seq, was wrapped, not three decimals)
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
        names = items.get_column("metric").unique()
        fixed = [f for f in fixed if f[0] not in bad]
    fast.step_lines += steps.height - len(bad)
    fast.n_values += items.height
    fast.n_np += sum(f[1] for f in fixed)
    if need_three:
        regex_ok = items.filter("ok")
        fast.not_three += int((~regex_ok.get_column("three")).sum()) + sum(f[2] for f in fixed)
    fast.frames.append(items.select("seq", "step", "metric", "value"))
    fast.metric_names.update(names.to_list())
