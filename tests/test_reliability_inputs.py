"""The bad-input matrix: one test per kind of bad input, each through `logscope analyze`.

Every case ends in exit 0/1 with a report whose damage is counted, or exit 2 with a one-line
message naming the path; never a traceback, and never a change to the input file.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests._reliability import (
    analyze_json,
    assert_no_traceback,
    assert_user_error,
    logscope_argv,
    run_measured,
    subprocess_env,
)

GOOD = (
    "step:1 - actor/pg_loss:0.1 - critic/score/mean:0.5\n"
    "step:2 - actor/pg_loss:0.2 - critic/score/mean:0.6\n"
    "step:3 - actor/pg_loss:0.3 - critic/score/mean:0.7\n"
)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _report_ok(path: Path, *extra: str) -> dict:
    """Analyse `path`, expect a report (exit 0/1), check the input was not modified."""
    before = _digest(path) if path.is_file() else None
    result = analyze_json(path, *extra)
    assert_no_traceback(result)
    assert result.exit_code in (0, 1), (result.exit_code, result.stderr)
    if before is not None:
        assert _digest(path) == before, "the input file was modified"
    report = result.json()
    assert report["schema"] == "logscope.report/1"
    assert report["errors"] == [], report["errors"]  # no detector crashed on it
    return report


def test_empty_file(tmp_path: Path) -> None:
    """An empty file is text: an empty report that says so, exit 0 (not a refusal)."""
    path = tmp_path / "train.log"
    path.write_bytes(b"")
    for extra in ((), ("--source", "verl-console")):
        report = _report_ok(path, *extra)
        assert report["findings"] == [] and report["run"]["steps"]["count"] == 0
        assert report["run"]["parse_stats"]["notes"][0] == "empty file"


def test_text_without_verl_output(tmp_path: Path) -> None:
    """Any text is read; with no step and no signature the report says so plainly."""
    path = tmp_path / "notes.md"
    path.write_text("# my notes\n\nthe run looked fine to me\n" + "x = 1\n" * 9)
    report = _report_ok(path)
    assert report["run"]["source"]["kind"] == "verl-console"
    assert report["findings"] == []
    assert report["run"]["parse_stats"]["notes"][0] == (
        "no verl step lines or errors found in 12 lines"
    )


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_bytes(bytes(range(256)) * 64 + os.urandom(4096))
    assert_user_error(analyze_json(path), path)
    assert_user_error(analyze_json(path, "--source", "verl-console"), path)


def test_non_utf8_bytes_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_bytes(
        GOOD.encode() + b"step:4 - actor/pg_loss:\xff\xfe0.4 - crit\xc3ic/score/mean:0.8\n"
        b"step:5 - actor/pg_loss:0.5 - critic/score/mean:0.9\n"
    )
    report = _report_ok(path)
    ps = report["run"]["parse_stats"]
    assert report["run"]["steps"]["count"] == 5
    assert ps["skipped_lines"] >= 1
    assert any("not UTF-8" in note for note in ps["notes"]), ps["notes"]


def test_crlf_line_ends_read_like_lf(tmp_path: Path) -> None:
    lf, crlf = tmp_path / "lf.log", tmp_path / "crlf.log"
    lf.write_text(GOOD)
    crlf.write_bytes(GOOD.replace("\n", "\r\n").encode())
    a, b = _report_ok(lf), _report_ok(crlf)
    assert a["run"]["steps"] == b["run"]["steps"]
    assert a["run"]["parse_stats"]["skipped_lines"] == b["run"]["parse_stats"]["skipped_lines"] == 0
    from logscope.ingest import load

    (ra,), (rb,) = load(lf), load(crlf)
    assert ra.metrics.equals(rb.metrics)


def test_directory_where_a_file_is_expected(tmp_path: Path) -> None:
    folder = tmp_path / "train.log"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello\n")
    assert_user_error(analyze_json(folder), folder)
    result = analyze_json(folder, "--source", "verl-console")
    assert_user_error(result, folder)
    assert "notaregularfile" in result.message


def test_file_where_a_directory_is_expected(tmp_path: Path) -> None:
    """--store pointing at a file: the analysis still runs and says it could not cache."""
    log = tmp_path / "train.log"
    log.write_text(GOOD)
    store = tmp_path / "store"
    store.write_text("I am a file")
    result = analyze_json(log)  # --no-cache run for reference
    assert result.exit_code in (0, 1)
    from tests._reliability import cli

    result = cli("analyze", str(log), "-f", "json", "--store", str(store), "--fail-on", "never")
    assert_no_traceback(result)
    assert result.exit_code == 0, result.stderr
    notes = result.json()["run"]["parse_stats"]["notes"]
    assert any(note.startswith("not cached:") for note in notes), notes
    assert store.read_text() == "I am a file"


def test_event_file_forced_on_a_text_log(tmp_path: Path) -> None:
    """--source tensorboard on a console log: nothing decodes, the damage is counted."""
    log = tmp_path / "train.log"
    log.write_text(GOOD)
    report = _report_ok(log, "--source", "tensorboard")
    ps = report["run"]["parse_stats"]
    assert report["run"]["steps"]["count"] == 0
    assert ps["skipped_lines"] >= 1 and any("CRC" in n for n in ps["notes"]), ps


def test_missing_path(tmp_path: Path) -> None:
    path = tmp_path / "nope.log"
    result = analyze_json(path)
    assert_user_error(result, path)
    assert "nosuchfileordirectory" in result.message


def _can_drop_dac() -> bool:
    return shutil.which("setpriv") is not None and sys.platform.startswith("linux")


def test_permission_denied(tmp_path: Path) -> None:
    """chmod 000. As root chmod does not deny, so the CLI runs without CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH (setpriv drops them from the bounding set; root's exec then loses them)."""
    folder = tmp_path / "logs"
    folder.mkdir()
    path = folder / "train.log"
    path.write_text(GOOD)
    path.chmod(0)
    try:
        argv = logscope_argv("analyze", str(path), "-f", "json", "--no-cache")
        if os.geteuid() == 0:
            if not _can_drop_dac():
                pytest.skip("running as root without setpriv: chmod 000 cannot deny a read")
            argv = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", *argv]
        forced = [*argv, "--source", "verl-console"]
        env = subprocess_env()
        with ThreadPoolExecutor(2) as pool:  # both at once: each is mostly interpreter start-up
            procs = list(pool.map(lambda cmd: run_measured(cmd, 60, env), (argv, forced)))
        for proc in procs:
            err = proc.stderr.decode()
            assert proc.returncode == 2, (proc.returncode, err)
            assert "Traceback" not in err
            assert str(path) in "".join(err.split())
        assert "permissiondenied" in "".join(err.split()).lower(), err  # the forced reader says why
    finally:
        path.chmod(0o644)


def test_permission_denied_message_says_so(tmp_path: Path) -> None:
    if os.geteuid() == 0 and not _can_drop_dac():
        pytest.skip("running as root without setpriv")
    path = tmp_path / "train.log"
    path.write_text(GOOD)
    tmp_path.chmod(0o755)
    path.chmod(0)
    argv = logscope_argv("analyze", str(path), "-f", "json", "--no-cache")
    if os.geteuid() == 0:
        argv = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", *argv]
    try:
        proc = run_measured(argv, timeout=60, env=subprocess_env())
    finally:
        path.chmod(0o644)
    assert proc.returncode == 2
    assert "permissiondenied" in "".join(proc.stderr.decode().split()).lower()


def test_symlink_loop_in_a_tensorboard_tree(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tests._ingest_writers import write_tensorboard

    root = tmp_path / "tb"
    rows = [(s, {"actor/pg_loss": 0.1 * s, "critic/score/mean": 0.5}) for s in range(1, 30)]
    write_tensorboard(root / "run1", rows)
    os.symlink(root, root / "run1" / "loop")  # a directory link back to an ancestor
    os.symlink(root / "b", root / "a")  # a <-> b: resolving either loops
    os.symlink(root / "a", root / "b")
    store = tmp_path / "store"
    from tests._reliability import cli

    for args in (("--no-cache",), ("--store", str(store))):  # the store hashes the tree too
        result = cli("analyze", str(root), "-f", "json", "--fail-on", "never", *args)
        assert_no_traceback(result)
        assert result.exit_code == 0, result.stderr
        report = result.json()
        assert report["run"]["steps"]["count"] == 29  # read once, not once per loop
    loop = root / "a"
    assert_user_error(analyze_json(loop), loop)
    with_store = cli("analyze", str(loop), "-f", "json", "--store", str(store))
    assert_user_error(with_store, loop)  # the store's key of a looping path: no traceback


def test_steps_duplicated_out_of_order_and_backwards(tmp_path: Path) -> None:
    """A restart re-logs steps: each step is kept once, the later line winning, in step order."""
    order = [1, 2, 2, 5, 3, 4, 1, 6]
    text = "".join(
        f"step:{s} - actor/pg_loss:{i}.0 - critic/score/mean:0.5\n" for i, s in enumerate(order)
    )
    path = tmp_path / "train.log"
    path.write_text(text)
    report = _report_ok(path)
    assert report["run"]["steps"] == {"count": 6, "first": 1, "last": 6}
    from logscope.ingest import load

    (run,) = load(path)
    steps, values = run.series("actor/pg_loss")
    assert list(steps) == [1, 2, 3, 4, 5, 6]
    last_line = {s: float(i) for i, s in enumerate(order)}
    assert list(values) == [last_line[s] for s in range(1, 7)]


def test_steps_duplicated_in_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    order = [3, 1, 2, 2, 1]
    path.write_text(
        "".join(f'{{"step": {s}, "data": {{"actor/pg_loss": {i}}}}}\n' for i, s in enumerate(order))
    )
    report = _report_ok(path)
    assert report["run"]["steps"] == {"count": 3, "first": 1, "last": 3}


def test_a_line_with_10000_metrics(tmp_path: Path) -> None:
    names = [f"group{i % 7}/metric_{i}" for i in range(10_000)]
    line = "step:1 - " + " - ".join(f"{n}:{i * 0.5}" for i, n in enumerate(names))
    path = tmp_path / "train.log"
    path.write_text(line + "\n" + line.replace("step:1", "step:2") + "\n")
    report = _report_ok(path)
    assert report["run"]["metrics_count"] == 10_000
    from logscope.ingest import load

    (run,) = load(path)
    assert set(run.metric_names) == set(names)
    assert run.series("group3/metric_9999")[1][-1] == pytest.approx(4999.5)


ODD_NAMES = ["a/b@c", "with space/x", "ünï/ç😀", "<script>alert(1)</script>", "[bold]x[/bold]"]


def test_metric_names_with_odd_characters(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    lines = [
        f"step:{s} - actor/pg_loss:0.{s} - " + " - ".join(f"{n}:{s}" for n in ODD_NAMES)
        for s in range(1, 4)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = _report_ok(path)
    from logscope.ingest import load

    (run,) = load(path)
    assert set(ODD_NAMES) <= set(run.metric_names)
    assert report["run"]["metrics_count"] == len(ODD_NAMES) + 1
    # the same names through the structured readers
    jsonl = tmp_path / "m.jsonl"
    import json

    jsonl.write_text(
        "".join(json.dumps({"step": s, "data": dict.fromkeys(ODD_NAMES, s)}) + "\n" for s in (1, 2))
    )
    (run,) = load(jsonl)
    assert set(run.metric_names) == set(ODD_NAMES)


def test_nan_and_inf_in_every_column(tmp_path: Path) -> None:
    """Every value non-finite: the run is read, detectors don't crash, non-finite is reported."""
    from logscope.aliases import ALIASES

    names = sorted({n for names in ALIASES.values() for n in names})
    tokens = ["nan", "inf", "-inf", "NaN"]
    lines = [
        f"step:{s} - " + " - ".join(f"{n}:{tokens[(s + i) % 4]}" for i, n in enumerate(names))
        for s in range(1, 81)
    ]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    report = _report_ok(path)
    assert report["run"]["steps"]["count"] == 80
    assert any(f["name"] == "non-finite-metric" for f in report["findings"]), report["findings"]
    from logscope.ingest import load

    (run,) = load(path)
    values = run.metrics.get_column("value").to_list()
    assert not any(math.isfinite(v) for v in values)
    # also in the structured readers
    csv = tmp_path / "t.csv"
    csv.write_text("step,a,b\n" + "".join(f"{s},nan,inf\n" for s in range(1, 20)))
    report = _report_ok(csv)
    assert report["run"]["steps"]["count"] == 19


def test_single_200mb_line_without_newline(tmp_path: Path) -> None:
    """Bounded memory (< 1.5 GB peak RSS: the line is held a few times over — bytes, text, one
    polars column — never per character) and done well within 60 s (about 5 s on an idle core: a
    hang guard, not a speed test — speed is in bench/); the file is deleted afterwards."""
    path = tmp_path / "one-line.log"
    block = b"abcdefghij" * 100_000
    with path.open("wb") as fh:
        fh.write(b"step:1 - actor/pg_loss:0.1 - junk:")
        for _ in range(200):
            fh.write(block)
    try:
        argv = logscope_argv("analyze", str(path), "-f", "json", "--no-cache")
        proc = run_measured(argv, timeout=60, env=subprocess_env())
    finally:
        path.unlink()
    assert proc.peak_rss_mb < 1536, f"peak RSS {proc.peak_rss_mb:.0f} MB"
    assert proc.returncode in (0, 1), (
        f"exit {proc.returncode} after {proc.seconds:.1f} s (killed at 60 s if None); "
        f"peak RSS so far {proc.peak_rss_mb:.0f} MB"
    )
