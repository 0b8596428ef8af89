"""Fuzzing the readers and the launch-script parser: no input may end in a traceback.

Every reader either returns Runs (damage counted in `parse_stats`) or raises a `LogscopeError`
whose message names the file. Structured formats are fuzzed at the byte level from valid files
written by their real writers (tensorboard's EventFileWriter, the wandb SDK offline); both
formats carry CRCs, so a changed byte must be noticed, and what is still read must be values
the original file holds (damage may lose rows, never invent or alter them).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from logscope.exceptions import LogscopeError
from logscope.model import Run

# CI runs a fixed, derandomised sample; LOGSCOPE_FUZZ_EXAMPLES=500 runs a longer random search.
_DEEP = int(os.environ.get("LOGSCOPE_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=_DEEP or 40,
    derandomize=not _DEEP,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _checked(runs: list[Run]) -> None:
    """What a caller does with a Run must work too: summary, series, JSON."""
    for run in runs:
        assert isinstance(run, Run)
        summary = run.summary()
        json.dumps(summary, default=str)
        ps = run.parse_stats
        assert ps.skipped_lines >= 0 and ps.lines_read >= 0
        for name in run.metric_names[:5]:
            steps, values = run.series(name)
            assert len(steps) == len(values)


def _read_or_user_error(read, path: Path) -> list[Run] | None:
    try:
        runs = read(path)
    except LogscopeError as exc:
        assert str(path) in str(exc) or path.name in str(exc), str(exc)
        return None
    _checked(runs)
    return runs


# ---- console reader ------------------------------------------------------------------------

_PIECES = st.sampled_from(
    [
        "step:",
        "step:1",
        "step:12 - ",
        " - ",
        "actor/pg_loss:",
        "critic/score/mean:",
        "0.123",
        "-1e+30",
        "nan",
        "inf",
        "-inf",
        "np.float64(0.5)",
        "True",
        "(TaskRunner pid=1) ",
        "\x1b[36m",
        "\x1b[0m",
        "\r",
        "\n",
        "\r\n",
        "\t",
        "Training Progress:  10%|█  | 1/10 [00:01<00:09]",
        "Traceback (most recent call last):\n",
        '  File "x.py", line 1, in <module>\n',
        "torch.OutOfMemoryError: CUDA out of memory.\n",
        "{'actor_rollout_ref': {'actor': {'ppo_mini_batch_size': 256}}}\n",
        " [repeated 3x across cluster]",
        "\x00",
        "\ufffd",
        "é😀",
        ":",
        "::",
        "step:99999999999999999999999 - a:1\n",
    ]
)
_CONSOLE_TEXT = st.lists(st.one_of(_PIECES, st.text(max_size=12)), max_size=40).map("".join)


@FUZZ
@given(_CONSOLE_TEXT)
def test_console_text_never_raises_unexpectedly(text: str) -> None:
    from logscope.ingest.console import read_text

    run = read_text(text)
    _checked([run])


@FUZZ
@given(st.one_of(_CONSOLE_TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary()))
def test_console_file_bytes(data: bytes) -> None:
    from logscope.ingest import console

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.log"
        path.write_bytes(data)
        _read_or_user_error(console.read, path)


@FUZZ
@given(st.binary(min_size=1, max_size=200), st.integers(min_value=0, max_value=1 << 14))
def test_console_bytes_around_a_real_log(noise: bytes, where: int) -> None:
    """A real-shaped log with bytes inserted somewhere: still read, step lines kept."""
    from logscope.ingest import console

    base = Path(__file__).parents[1] / "fixtures" / "verl_tuned.log"
    data = base.read_bytes()[: 1 << 15]
    where = min(where, len(data))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.log"
        mixed = data[:where] + noise + data[where:]
        path.write_bytes(mixed)
        runs = _read_or_user_error(console.read, path)
        if mixed[:2] == b"\x1f\x8b":  # now it claims to be gzip: a user error is right
            return
        assert runs is not None and runs[0].parse_stats.step_lines > 0


# ---- JSONL / CSV ---------------------------------------------------------------------------

_SCALAR = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
# Steps beyond int64 are tracked by test_jsonl_step_beyond_int64 (xfail) and kept out of here.
_RECORD = st.fixed_dictionaries(
    {
        "step": st.one_of(
            st.integers(-5, 1 << 40),
            st.floats(min_value=-1e15, max_value=1e15) | st.sampled_from([float("nan")]),
            st.text(max_size=3),
            st.none(),
        )
    },
    optional={"data": st.dictionaries(st.text(max_size=12), _SCALAR, max_size=6)},
)


def _jsonl_line(record: dict) -> bytes:
    return json.dumps(record, allow_nan=True).encode()


@FUZZ
@given(
    st.lists(
        st.one_of(_RECORD.map(_jsonl_line), st.binary(max_size=30)),
        min_size=1,
        max_size=15,
    ),
    st.booleans(),
)
@example([b"\x1f\x8b", b"", b""], False)  # gzip's magic bytes: polars tried to decompress them
def test_jsonl_reader(lines: list[bytes], cut_last: bool) -> None:
    from logscope.ingest import jsonl, tables

    data = b"\n".join(lines)
    if cut_last and len(data) > 3:
        data = data[:-3]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "metrics.jsonl"
        path.write_bytes(data)
        _read_or_user_error(jsonl.read, path)
        flat = Path(tmp) / "history.jsonl"  # the generic table reader (wandb history exports)
        flat.write_bytes(data.replace(b'"data": {', b'"_step": 1, "x": {'))
        _read_or_user_error(tables.read, flat)


@pytest.mark.parametrize(
    "step", ["9.223372036854776e+18", "3.402823669209385e+38", "18446744073709551616"]
)
def test_jsonl_step_beyond_int64(tmp_path, step) -> None:
    from logscope.ingest import jsonl

    path = tmp_path / "metrics.jsonl"
    path.write_text(
        f'{{"step": 1, "data": {{"a": 1.0}}}}\n{{"step": {step}, "data": {{"a": 2.0}}}}\n'
    )
    runs = _read_or_user_error(jsonl.read, path)
    assert runs is None or runs[0].parse_stats.skipped_lines == 1


_CELL = st.one_of(
    st.sampled_from(["", "nan", "NaN", "inf", "-inf", "1e400", "0.5", "-3", '"x,y"', "null"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6),
)


@FUZZ
@given(
    st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=5),
    st.lists(st.lists(_CELL, max_size=7), max_size=12),
    st.sampled_from(["step", "_step", "Step", "global_step"]),
)
def test_csv_tables(columns: list[str], rows: list[list[str]], step_name: str) -> None:
    from logscope.ingest import tables, wandb_csv

    header = ",".join([step_name, *[c.replace("\n", " ") for c in columns]])
    body = "\n".join(",".join(r) for r in rows)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "export.csv"
        path.write_text(header + "\n" + body, encoding="utf-8", errors="surrogatepass")
        _read_or_user_error(tables.read, path)
        _read_or_user_error(wandb_csv.read, path)


# ---- check: the shell / Hydra parser --------------------------------------------------------

_SHELL_PIECES = st.sampled_from(
    [
        "python3 -m verl.trainer.main_ppo ",
        "torchrun --nproc_per_node=8 -m verl.trainer.main_ppo ",
        "ray job submit -- python3 -m verl.trainer.main_ppo ",
        "actor_rollout_ref.actor.ppo_mini_batch_size=",
        "data.train_batch_size=",
        "trainer.n_gpus_per_node=",
        "actor_rollout_ref.rollout.n=",
        "algorithm.adv_estimator=grpo ",
        "+x.y=",
        "~a.b ",
        "[1,2,{a:3}]",
        "${oc.env:HOME}",
        "$N",
        "${N:-4}",
        "$(nproc)",
        "N=8 ",
        "export M=2\n",
        "'",
        '"',
        "\\\n",
        "\\",
        "#",
        " | tee log\n",
        " && ",
        ";",
        "--config-path=cfg --config-name=x ",
        "256 ",
        "1e-6 ",
        "null ",
        "\n",
        "{",
        "}",
        "[",
        "]",
        "=",
    ]
)
_SCRIPT = st.lists(st.one_of(_SHELL_PIECES, st.text(max_size=6)), max_size=30).map("".join)


@FUZZ
@given(_SCRIPT)
def test_check_text_parses_or_explains(text: str) -> None:
    from logscope.check import check_text

    try:
        reports = check_text(text)
    except LogscopeError as exc:
        assert str(exc)
        return
    for report in reports:
        report.to_json()


@FUZZ
@given(st.lists(st.one_of(_SHELL_PIECES.map(str.strip), st.text(max_size=10)), max_size=12))
def test_check_command_argv(argv: list[str]) -> None:
    from logscope.check import check_command

    try:
        reports = check_command(["python3", "-m", "verl.trainer.main_ppo", *argv])
    except LogscopeError as exc:
        assert str(exc)
        return
    for report in reports:
        report.to_json()


# ---- byte-level fuzz of the structured readers, from valid files ----------------------------

_ROWS = [
    (s, {"actor/pg_loss": 0.01 * s, "critic/score/mean": 0.5 + 0.001 * s, "actor/entropy": 1.0})
    for s in range(1, 41)
]


def _triples(run: Run) -> set[tuple[int, str, float | str]]:
    out = set()
    for step, metric, value in run.metrics.select("step", "metric", "value").iter_rows():
        out.add((step, metric, "nan" if value is None or math.isnan(value) else value))
    return out


def _damaged(run: Run) -> bool:
    ps = run.parse_stats
    return ps.skipped_lines > 0 or any(
        word in note for note in ps.notes for word in ("cut off", "CRC", "not ", "ends inside")
    )


_MUTATION = st.one_of(
    st.tuples(st.just("flip"), st.integers(min_value=0), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(min_value=0), st.just(0)),
    st.tuples(st.just("insert"), st.integers(min_value=0), st.integers(0, 255)),
)


def _mutate(data: bytes, mutation: tuple[str, int, int]) -> bytes:
    kind, pos, byte = mutation
    pos %= len(data)
    if kind == "flip":
        return data[:pos] + bytes([data[pos] ^ byte]) + data[pos + 1 :]
    if kind == "truncate":
        return data[:pos]
    return data[:pos] + bytes([byte]) + data[pos:]


@pytest.fixture(scope="module")
def tb_event_file(tmp_path_factory) -> tuple[bytes, set]:
    pytest.importorskip("tensorboard")
    from logscope.ingest import tensorboard
    from tests._ingest_writers import write_tensorboard

    logdir = write_tensorboard(tmp_path_factory.mktemp("tbfuzz") / "run", _ROWS)
    (event,) = sorted(logdir.glob("events.out.tfevents.*"))
    (run,) = tensorboard.read(event)
    return event.read_bytes(), _triples(run)


def _record_ends(data: bytes) -> set[int]:
    """Byte offsets where a TFRecord ends (length u64, its CRC, payload, payload CRC)."""
    ends, pos = {0}, 0
    while pos + 12 <= len(data):
        pos += 12 + int.from_bytes(data[pos : pos + 8], "little") + 4
        ends.add(pos)
    return ends


@FUZZ
@given(mutation=_MUTATION)
def test_tensorboard_bytes(tb_event_file, mutation) -> None:
    from logscope.ingest import tensorboard

    original, truth = tb_event_file
    data = _mutate(original, mutation)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.out.tfevents.1700000000.host.1.0"
        path.write_bytes(data)
        runs = _read_or_user_error(tensorboard.read, path)
    if runs is None:
        return
    (run,) = runs
    got = _triples(run)
    assert got <= truth, "a damaged event file produced values the original does not hold"
    if not data:  # an empty event file (just created by the writer) is not damage
        assert not got
        return
    if mutation[0] == "truncate" and len(data) in _record_ends(original):
        return  # cut between records: indistinguishable from a file still being written
    if got != truth:
        assert _damaged(run), (mutation, run.parse_stats)
    if mutation[0] == "flip":  # every byte is under a CRC: a change is always noticed
        assert _damaged(run), mutation


@pytest.fixture(scope="module")
def wandb_file(tmp_path_factory) -> tuple[bytes, set]:
    pytest.importorskip("wandb")
    from logscope.ingest import wandb_offline
    from tests._ingest_writers import write_wandb_offline

    folder = write_wandb_offline(
        tmp_path_factory.mktemp("wbfuzz"),
        _ROWS[:15],
        config={"algorithm": {"adv_estimator": "grpo"}},
    )
    (file,) = sorted(folder.glob("run-*.wandb"))
    (run,) = wandb_offline.read(file)
    return file.read_bytes(), _triples(run)


@FUZZ
@given(mutation=_MUTATION)
def test_wandb_bytes(wandb_file, mutation) -> None:
    from logscope.ingest import wandb_offline

    original, truth = wandb_file
    data = _mutate(original, mutation)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run-abc123.wandb"
        path.write_bytes(data)
        runs = _read_or_user_error(wandb_offline.read, path)
    if runs is None:
        return
    (run,) = runs
    got = _triples(run)
    assert got <= truth, "a damaged .wandb file produced values the original does not hold"
    if got != truth and mutation[0] != "truncate":  # a cut between records is not damage
        assert _damaged(run), (mutation, run.parse_stats)


def test_wandb_future_version_is_a_precise_error(wandb_file, tmp_path) -> None:
    """A `.wandb` file from an unknown future format version: exit 2 naming file and version."""
    from typer.testing import CliRunner

    from logscope.cli.main import app

    original, _ = wandb_file
    folder = tmp_path / "wandb" / "offline-run-20990101_000000-future1"
    folder.mkdir(parents=True)
    path = folder / "run-future1.wandb"
    path.write_bytes(original[:6] + bytes([original[6] + 1]) + original[7:])
    result = CliRunner().invoke(app, ["analyze", str(path), "--no-cache", "-f", "json"])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert str(path) in message.replace(" ", "") or path.name in message
    assert "version" in message and "newer" in message
    shutil.rmtree(folder)
