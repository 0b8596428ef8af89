"""Properties of the verl console reader (hypothesis).

- it never raises on arbitrary text or bytes (only IngestError: "not a verl log");
- the bulk path and the line-by-line parser give the same Run on messy verl-ish text (with the
  items read by the C tokenizer, and by the polars query);
- step lines printed the way verl prints them (`.3f` era and repr era) read back to the same
  values (repr exactly, `.3f` within 5e-4).
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logscope.exceptions import IngestError
from logscope.ingest import console, console_items
from tests.test_console_reader import incremental, run_key

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read(data: bytes):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.txt"
        path.write_bytes(data)
        try:
            run = console.read(path)[0]
        except IngestError:
            return None, None
        return run, incremental(path, pieces=3)


@SETTINGS
@given(st.binary(max_size=3000))
def test_never_raises_on_bytes(data):
    run, twin = _read(data)
    if run is not None:
        assert run_key(twin) == run_key(run)


@SETTINGS
@given(st.text(max_size=2000))
def test_never_raises_on_text(text):
    run, twin = _read(text.encode("utf-8", errors="surrogatepass"))
    if run is not None:
        assert run_key(twin) == run_key(run)


# Verl-ish fragments, so generated text hits the interesting paths (prefixes, wraps, \r, dumps).
FRAGMENTS = st.sampled_from(
    [
        "step:",
        "step:3 - ",
        "step:12 - actor/pg_loss:0.5",
        " - ",
        "-",
        ":",
        "actor/kl_loss",
        "0.125",
        "1e-06",
        "nan",
        "-inf",
        "inf",
        "+1.5",
        "NaN",
        "Infinity",
        "True",
        "np.float64(",
        ")",
        "\n",
        "\n",
        "\n",
        "\r",
        "\r\n",
        " ",
        "\t",
        "\x00",
        "\x1b[36m",
        "\x1b[0m",
        "(TaskRunner pid=1) ",
        "(WorkerDict pid=2, ip=10.0.0.1) ",
        "(raylet) ",
        "Training Progress:  50%|█   | 1/2 [00:01<00:01,  1.00s/it]",
        " [repeated 3x across cluster]",
        " (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable.)",
        ":+2",
        "a|b:1",
        "Traceback (most recent call last):\n",
        '  File "x.py", line 1, in f\n',
        "ValueError: boom\n",
        "CUDA out of memory",
        "WARN: grad_norm is not finite: nan",
        "{'trainer': {'project_name': 'p',\n",
        " 'total_epochs': 2}}\n",
        "Total training steps: 7",
        "é",
        "|",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(FRAGMENTS, max_size=80))
def test_both_paths_agree_on_verlish_text(parts):
    run, twin = _read("".join(parts).encode("utf-8"))
    if run is not None:
        assert run_key(twin) == run_key(run)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(FRAGMENTS, max_size=80))
def test_both_paths_agree_without_the_c_tokenizer(parts):
    """The same, with the items read by the polars query (no C compiler at install)."""
    with mock.patch.object(console_items, "native", None):
        run, twin = _read("".join(parts).encode("utf-8"))
    if run is not None:
        assert run_key(twin) == run_key(run)


# ---- round trip ---------------------------------------------------------------------------------

KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_/@.-", min_size=1, max_size=24).filter(
    lambda k: k != "-" or True
)
VALUE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.booleans(),
    st.floats(min_value=-1e-3, max_value=1e-3),  # the values `.3f` rounds to 0.000
)
STEPS = st.lists(st.dictionaries(KEY, VALUE, min_size=1, max_size=12), min_size=1, max_size=6)
PREFIX = st.sampled_from(["", "(TaskRunner pid=42) ", "\x1b[36m(TaskRunner pid=42)\x1b[0m "])


@SETTINGS
@given(STEPS, st.booleans(), PREFIX)
def test_verl_printed_step_lines_round_trip(steps, three, prefix):
    lines = []
    for step, data in enumerate(steps, start=1):
        items = [f"{k}:{v:.3f}" if three else f"{k}:{v!r}" for k, v in data.items()]
        lines.append(f"{prefix}step:{step} - " + " - ".join(items) + "\n")
    run, twin = _read("".join(lines).encode())
    assert run is not None
    assert run_key(twin) == run_key(run)
    assert run.parse_stats.skipped_lines == 0
    frame = {(s, m): v for s, m, v in run.metrics.select("step", "metric", "value").iter_rows()}
    for step, data in enumerate(steps, start=1):
        for key, v in data.items():
            got = frame[(step, key)]
            want = float(v)
            if math.isnan(want):
                assert math.isnan(got)
            elif three:
                assert math.isclose(got, want, rel_tol=1e-12, abs_tol=5e-4 + 1e-12), (key, v, got)
            else:
                assert got == want, (key, v, got)
    assert len(frame) == sum(len(d) for d in steps)
    if three and any(
        not isinstance(v, float) or math.isfinite(v) for d in steps for v in d.values()
    ):
        assert run.meta.get("value_resolution") == 0.0005
