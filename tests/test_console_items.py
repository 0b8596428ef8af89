"""The item tokenizer of the bulk console reader (logscope/ingest/console_items.py).

- the C extension converts every value in the number grammar to exactly what float() gives
  (or leaves it to Python), including 17-digit reprs, halfway cases and the ends of the range;
- the C extension and the polars query give the same items on arbitrary step-line bodies;
- lines that are not where the frame says are refused, and the polars query reads them instead.
"""

from __future__ import annotations

import math
import random
import struct
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from logscope.ingest import console_items as ci

needs_c = pytest.mark.skipif(ci.native is None, reason="the C extension was not built")


def chunk(bodies: list[str], prefix: str = "(TaskRunner pid=1) ") -> tuple[pl.DataFrame, bytes]:
    """Clean step lines with these bodies, as `console._chunk` hands them over, and their chunk
    (with a non-step line between them, so line indices and byte offsets differ)."""
    lines, at = [], []
    for i, body in enumerate(bodies):
        lines.append(f"{prefix}step:{i + 1} - {body}")
        at.append(len(lines) - 1)
        lines.append("Training Progress: 1%|")
    steps = pl.DataFrame(
        {
            "seq": [(a + 1) << 10 for a in at],
            "step": list(range(1, len(bodies) + 1)),
            "raw": [lines[a] for a in at],
            "head": [prefix] * len(bodies),
            "at": at,
        }
    )
    return steps, "".join(line + "\n" for line in lines).encode()


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


def converted(texts: list[str]) -> list[float | None]:
    """What the C tokenizer itself makes of each value (None: left to Python)."""
    body = " - ".join(f"k{i}:{t}" for i, t in enumerate(texts))
    data = f"step:1 - {body}\n".encode()
    where = [np.array([x], dtype=np.int64) for x in (0, 9, len(data) - 1)]
    _, _, values, flags, *_ = ci.native.items(data, *where)
    values, flags = np.frombuffer(values, np.float64), np.frombuffer(flags, np.uint8)
    return [None if f & ci.NEEDS_TEXT else float(v) for v, f in zip(values, flags, strict=True)]


EDGES = [
    "0", "-0", "-0.0", "0.000", "0e999", "00001", "1.", ".5", "-.5", "5e-1", "1E+05", "1e5",
    "9007199254740992", "9007199254740993", "9007199254740995", "18446744073709551615",
    "1e22", "1e23", "123456789012345678", "0.1", "0.3", "2.5e-06", "-8.163164312320433e-06",
    "1.7976931348623157e308", "2.2250738585072014e-308", "2.2250738585072011e-308",
    "4.9e-324", "5e-324", "1e-400", "1e400", "1e308", "8.98846567431158e307",
    "0.0423969010153086", "458966.5", "-0.000", "501736.750", "1.000", "1234567890123456789",
    "12345678901234567890", "0.00000000000000000000000000001", "7.450580596923828e-09",
]  # fmt: skip


@needs_c
def test_edge_values_convert_exactly_or_go_to_python():
    for text, value in zip(EDGES, converted(EDGES), strict=True):
        if value is not None:
            assert bits(value) == bits(float(text)), text
    # Only what needs Python's care is left to it: subnormals and overflow, more than 19
    # significant digits, and what Eisel-Lemire cannot decide (halfway cases, 1e23).
    left = {t for t, v in zip(EDGES, converted(EDGES), strict=True) if v is None}
    assert left == {
        *("4.9e-324", "5e-324", "2.2250738585072011e-308", "1e-400", "1e400"),
        *("18446744073709551615", "9007199254740993", "1e23"),
    }


@needs_c
def test_random_doubles_in_every_format_convert_exactly():
    rng = random.Random(7)
    xs = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(20000)]
    xs = [x for x in xs if math.isfinite(x)]
    xs += [rng.gauss(0, 1) * 10 ** rng.randint(-12, 12) for _ in range(20000)]
    texts = (
        [repr(x) for x in xs] + [f"{x:.17g}" for x in xs[:5000]] + [f"{x:.3f}" for x in xs[-5000:]]
    )
    texts += [f"{rng.randrange(10**17)}e{rng.randint(-340, 300)}" for _ in range(5000)]
    values = converted(texts)
    for text, value in zip(texts, values, strict=True):
        if value is not None:
            assert bits(value) == bits(float(text)), text
    # Python is rarely needed: subnormals (|x| < 2.2e-308, from the random bit patterns),
    # .3f prints of huge numbers (> 19 digits) and cases Eisel-Lemire leaves undecided.
    normal = [t for t, v in zip(texts, values, strict=True) if abs(float(t)) > 2.3e-308]
    left = [t for t, v in zip(texts, values, strict=True) if v is None and t in set(normal)]
    assert len(left) < len(normal) / 200


def normalized(items: pl.DataFrame) -> pl.DataFrame:
    """Values and the .3f flag only where the reader uses them (ok items, and nan/inf)."""
    used = pl.col("ok") | pl.col("v").is_in(list(ci.SPECIAL)).fill_null(False)
    columns = [c for c in ("value", "three") if c in items.columns]
    return items.with_columns(pl.when(used).then(c).alias(c) for c in columns)


ITEM_TEXT = st.text(alphabet="ab/_-:.e+E019 n()pfTrueinx\t", max_size=12)
BODY = st.lists(
    st.one_of(
        ITEM_TEXT,
        st.builds(lambda k, v: f"{k}:{v}", ITEM_TEXT, ITEM_TEXT),
        st.builds(lambda k, x: f"{k}:{x!r}", st.sampled_from(["a", "actor/kl", ""]), st.floats()),
        st.sampled_from(["actor/kl:np.float64(0.5)", "x:nan", "x:-inf", "x:1.500", "x:True"]),
    ),
    max_size=8,
).map(" - ".join)


@needs_c
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(BODY, min_size=1, max_size=6), st.booleans())
def test_native_and_polars_give_the_same_items(bodies, need_three):
    bodies = [b.rstrip(" \t") for b in bodies]  # clean step lines end in neither
    steps, data = chunk(bodies)
    native, names = ci.items_native(steps, data, need_three)
    polars = ci.items_polars(steps, need_three)
    assert_frame_equal(normalized(native), normalized(polars))
    assert sorted(names) == sorted(polars.get_column("metric").unique())


@needs_c
def test_lines_out_of_place_are_refused_and_read_by_polars():
    steps, data = chunk(["a:1 - b:2", "a:3 - b:4.5"])
    moved = steps.with_columns(at=pl.col("at") + 1)
    with pytest.raises(ValueError):
        ci.items_native(moved, data, need_three=False)
    frame, names = ci.items(moved, data, need_three=False)
    assert_frame_equal(frame, ci.items_polars(steps, False))
    assert sorted(names) == ["a", "b"]
    assert ci.items(steps, data, False)[0].get_column("value").to_list() == [1.0, 2.0, 3.0, 4.5]


LINE = st.lists(
    st.one_of(
        st.binary(max_size=6),
        st.sampled_from([b" - ", b":", b"1.5", b"-", b" ", b"e9", b"\r"]),
    ),
    max_size=12,
).map(b"".join)


def accepted(line: bytes, body: int, length: int) -> bool:
    """The lengths _items.c takes for `line`: all its bytes up to the newline, or those less a
    final '\r' (the length polars gives, as it drops a '\r' before a newline); and the items must
    start inside the claimed line."""
    full = len(line)
    return (length == full or (length == full - 1 and line.endswith(b"\r"))) and body <= length


def assert_items_inside(data: bytes, where: list[np.ndarray], starts: np.ndarray) -> None:
    """Every item the C tokenizer finds lies between its line's body and its claimed end."""
    at, body, length = where
    line, _key, _value, _flag, vstart, vend, _keys = ci.native.items(data, *where)
    for i, s, e in zip(
        np.frombuffer(line, np.int32),
        np.frombuffer(vstart, np.int64),
        np.frombuffer(vend, np.int64),
        strict=True,
    ):
        first, last = starts[at[i]] + body[i], starts[at[i]] + length[i]
        assert first <= e <= last
        assert s == -1 or first < s <= e


@needs_c
@settings(max_examples=300, deadline=None)
@given(
    st.lists(LINE.filter(lambda x: b"\n" not in x), max_size=6),
    st.lists(st.integers(0, 2**16), min_size=6, max_size=6),
    st.integers(0, 5),
    st.sampled_from([-1, 1]),
)
@example(lines=[b" - \r"], picks=[0] * 6, k=0, off=-1)  # found by hypothesis: polars's length
def test_native_reads_any_bytes_where_the_lines_are(lines, picks, k, off):
    """Any bytes (not only ASCII step lines), items starting after any " - " of a line: every
    item lies inside its line; a length off by one is refused unless it is the line without its
    final '\r', and then the items lie inside that shorter line."""
    data = b"".join(line + b"\n" for line in lines)
    starts = np.cumsum([0] + [len(x) + 1 for x in lines])
    at, body = [], []
    for i, line in enumerate(lines):
        seps = [j + 3 for j in range(len(line)) if line.startswith(b" - ", j)]
        if seps:
            at.append(i)
            body.append(seps[picks[i] % len(seps)])
    length = [len(lines[i]) for i in at]
    where = [np.array(x, dtype=np.int64) for x in (at, body, length)]
    assert_items_inside(data, where, starts)
    if at:
        k %= len(at)
        wrong = [x.copy() for x in where]
        wrong[2][k] += off  # a length off by one
        if accepted(lines[at[k]], body[k], int(wrong[2][k])):
            assert_items_inside(data, wrong, starts)
        else:
            with pytest.raises(ValueError):
                ci.native.items(data, *wrong)


def test_the_ci_profile_draws_the_same_examples_on_every_run():
    """CI is not red at random: the profile .ci/run selects replays the same examples."""
    ci_run = (Path(__file__).parent.parent / ".ci" / "run").read_text()
    assert "export HYPOTHESIS_PROFILE=ci" in ci_run

    def draws() -> list[bytes]:
        seen = []

        @settings(settings.get_profile("ci"), max_examples=30)
        @given(LINE)
        def record(line):
            seen.append(line)

        record()
        return seen

    assert settings.get_profile("ci").derandomize
    assert draws() == draws()
