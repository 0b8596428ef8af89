"""The items of clean step lines, `step:N - k:v - k:v - …`, for the console reader's bulk path.

Two implementations, one meaning (`verl_text.parse_items`): the C tokenizer `_items.c`, which
splits and converts in one pass over the chunk's bytes, and a polars query, used where the C
extension was not built (it is optional; `pip install` needs a C compiler for it) or refuses a
chunk. tests/test_console_items.py checks that both give the same frame.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from logscope.ingest import verl_text as vt

try:
    from logscope.ingest import _items as native
except ImportError:  # built without a C compiler
    native = None

# Item flags, as _items.c names them:
NEEDS_TEXT = 1  # not converted in C: the value text is read in Python
NOT_THREE = 2  # the value is not printed as `.3f`
SPECIAL = frozenset({"nan", "inf", "-inf"})


def _powers_of_ten() -> tuple[bytes, bytes]:
    """The 128-bit mantissas of 10^q, q in [-348, 347], normalized and truncated (for
    Eisel-Lemire in _items.c), as (high words, low words)."""
    hi, lo = [], []
    for q in range(-348, 348):
        if q >= 0:
            v = 10**q
            bits = v.bit_length()
            m = v >> (bits - 128) if bits > 128 else v << (128 - bits)
        else:
            d = 10**-q
            m = (1 << (127 + d.bit_length())) // d  # 2^k / d has exactly 128 bits
        hi.append(m >> 64)
        lo.append(m & ((1 << 64) - 1))
    return np.array(hi, dtype="<u8").tobytes(), np.array(lo, dtype="<u8").tobytes()


if native is not None:
    native.set_powers(*_powers_of_ten())


def items(steps: pl.DataFrame, data: bytes, need_three: bool) -> tuple[pl.DataFrame, list[str]]:
    """The items of clean step lines (`steps`: seq, step, raw, at: index of the line in `data`,
    the chunk they were read from): seq, step, metric, value, ok, v (text where not ok)[, three];
    and the distinct metric names among them.

    `ok` means a finite value not starting with `+` under a non-empty key, which then matches
    `verl_text.NUMERIC`. Other items (nan, inf, wrapped or garbled values, `1e400`) take the
    road through the reader's fix-up, which applies the line parser's rules.
    """
    if native is not None:
        try:
            return items_native(steps, data, need_three)
        except ValueError:  # the lines are not where polars said: let polars read them
            pass
    frame = items_polars(steps, need_three)
    return frame, frame.get_column("metric").unique().to_list()


def items_native(
    steps: pl.DataFrame, data: bytes, need_three: bool
) -> tuple[pl.DataFrame, list[str]]:
    """`items` by the C tokenizer (raises ValueError if the lines are not where `at` says)."""
    if native is None:
        raise RuntimeError("logscope.ingest._items was not built")
    raw = pl.col("raw")
    where = steps.select(
        pl.col("at").cast(pl.Int64),
        body=(raw.str.find(" - ", literal=True) + 3).fill_null(-1).cast(pl.Int64),
        length=raw.str.len_bytes().cast(pl.Int64),
    )
    line, key, value, flag, vstart, vend, keys = native.items(
        data, *(np.ascontiguousarray(where.get_column(c).to_numpy()) for c in where.columns)
    )
    line = np.frombuffer(line, dtype=np.int32)
    flag = np.frombuffer(flag, dtype=np.uint8)
    ok = (flag & NEEDS_TEXT) == 0
    three = (flag & NOT_THREE) == 0
    value = np.frombuffer(value, dtype=np.float64)
    key = np.frombuffer(key, dtype=np.int32)
    names = [k.decode() for k in keys]
    starts, ends = np.frombuffer(vstart, np.int64), np.frombuffer(vend, np.int64)
    left = np.flatnonzero(~ok)
    if len(left):
        value = value.copy()
    texts: dict[int, str] = {}  # of the items left not ok
    for i in left.tolist():  # an item without ':' has no value text
        start = int(starts[i])
        if start < 0:
            continue
        t = data[start : int(ends[i])].decode()
        three[i] = vt.THREE_DECIMALS_RE.match(t) is not None
        if vt.DECIMAL_RE.fullmatch(t) or t in SPECIAL:  # what C left undecided; nan, inf
            value[i] = float(t)
            ok[i] = names[key[i]] != "" and math.isfinite(value[i])
        if not ok[i]:
            texts[i] = t
    v = pl.repeat(None, len(flag), dtype=pl.String, eager=True)
    if texts:
        v = v.scatter(list(texts), list(texts.values()))
    columns = {
        "seq": steps.get_column("seq").to_numpy()[line],
        "step": steps.get_column("step").to_numpy()[line],
        "metric": pl.Series("metric", names, dtype=pl.String).gather(key),
        "value": value,
        "ok": ok,
        "v": v,
    }
    if need_three:
        columns["three"] = three
    return pl.DataFrame(columns), names


def items_polars(steps: pl.DataFrame, need_three: bool) -> pl.DataFrame:
    """`items` by a polars query: polars' float cast reads a superset of `verl_text.NUMERIC` (a
    leading `+`, any-case nan/inf/infinity), so `ok` also asks for a finite value and no `+`."""
    raw = pl.col("raw")
    items = raw.str.slice(raw.str.find(" - ", literal=True) + 3)  # `_head_ok`: none before
    item = pl.col("item")
    v = pl.col("v")
    x = pl.col("value")
    key = pl.col("pair").struct.field("field_0")
    ok = ((key != "") & x.is_finite() & ~v.str.starts_with("+")).fill_null(False)
    columns = ["seq", "step", key.alias("metric"), x, ok.alias("ok")]
    columns.append(pl.when(~ok).then(v).alias("v"))  # the text only where it is needed
    if need_three:
        columns.append(v.str.contains(vt.THREE_DECIMALS).alias("three"))
    return (
        steps.lazy()
        .select("seq", "step", item=items.str.split(" - "))
        .explode("item")
        .filter(item.is_not_null())
        .select("seq", "step", pair=item.str.splitn(":", 2))
        .with_columns(v=pl.col("pair").struct.field("field_1"))
        .with_columns(value=v.cast(pl.Float64, strict=False))
        .select(columns)
        .collect(engine="streaming")
    )
