"""`logscope analyze` end to end: exit codes, formats, errors a user can cause, the cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from logscope.cli import app

ROOT = Path(__file__).resolve().parent.parent
TUNED = ROOT / "fixtures" / "verl_tuned.log"
BASELINE = ROOT / "fixtures" / "verl_baseline.log"
FIXTURES_EXCERPTS = ROOT / "fixtures" / "excerpts"
SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text())

runner = CliRunner()


def _run(*args: str, store: Path) -> tuple[int, str, str]:
    result = runner.invoke(app, ["analyze", *args, "--store", str(store)])
    return result.exit_code, result.stdout, result.stderr


def test_readme_command_prints_a_report(tmp_path: Path) -> None:
    """The quick-start command, through the installed console script."""
    proc = subprocess.run(
        [sys.executable, "-m", "logscope.cli", "analyze", str(TUNED), "--store", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode in (0, 1), proc.stderr
    out = proc.stdout
    assert "verl_tuned.log" in out
    assert "steps" in out and "config" in out
    assert "parsed" in out  # parse stats


def test_json_output_validates_and_describes_the_run(tmp_path: Path) -> None:
    code, out, _ = _run(str(TUNED), "--format", "json", "--fail-on", "never", store=tmp_path)
    assert code == 0
    data = json.loads(out)
    jsonschema.validate(data, SCHEMA)
    assert data["run"]["source"]["kind"] == "verl-console"
    assert data["run"]["steps"]["count"] > 100
    assert data["run"]["config_segments"], "the config dump was recovered"
    assert data["run"]["meta"]["algorithm"] in ("ppo", "gae")


def test_two_inputs_give_one_fleet_object(tmp_path: Path) -> None:
    code, out, _ = _run(
        str(BASELINE), str(TUNED), "--format", "json", "--fail-on", "never", store=tmp_path
    )
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == "logscope.fleet/1" and data["summary"]["runs"] == 2
    assert len(data["reports"]) == 2 and len(data["runs"]) == 2
    for item in data["reports"]:
        jsonschema.validate(item, SCHEMA)


def test_baseline_shows_the_problems_the_article_fixed(tmp_path: Path) -> None:
    code, out, _ = _run(str(BASELINE), "--format", "json", "--fail-on", "never", store=tmp_path)
    assert code == 0
    names = {f["name"] for f in json.loads(out)["findings"]}
    # the article's baseline: timid updates (ppo_kl < 1e-4) and a grad norm ×7 above the clip
    assert {"ppo-kl-too-low", "grad-norm-above-clip"} <= names


def test_text_that_is_not_a_verl_log_gets_an_empty_report(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("shopping list\neggs\nmilk\n")
    code, out, _ = _run(str(other), "-f", "json", store=tmp_path / "store")
    assert code == 0
    report = json.loads(out)
    assert report["run"]["source"]["path"] == str(other) and report["findings"] == []
    assert report["run"]["parse_stats"]["notes"] == [
        "no verl step lines or errors found in 3 lines"
    ]


def test_binary_data_exits_2_naming_the_file(tmp_path: Path) -> None:
    other = tmp_path / "blob.log"
    other.write_bytes(bytes(range(256)) * 20)
    code, _, err = _run(str(other), store=tmp_path / "store")
    assert code == 2
    err = " ".join(err.split())
    assert "blob.log" in err and "binary data" in err


def test_stdin_is_read_with_a_dash(tmp_path: Path) -> None:
    text = (FIXTURES_EXCERPTS / "verl_0.9_grpo_oom.log").read_text()
    store = tmp_path / "store"
    result = runner.invoke(app, ["analyze", "-", "-f", "json", "--store", str(store)], input=text)
    report = json.loads(result.stdout)
    assert report["run"]["source"] == {"kind": "verl-console", "path": "<stdin>"}
    assert "cuda-oom" in {f["name"] for f in report["findings"]}
    assert not (store / "runs").exists()  # standard input is never cached


def test_missing_file_exits_2(tmp_path: Path) -> None:
    code, _, err = _run(str(tmp_path / "nope.log"), store=tmp_path)
    assert code == 2
    assert "nope.log" in err


def test_crash_only_log_is_analysed(tmp_path: Path) -> None:
    log = tmp_path / "crash.log"
    log.write_text(
        "(TaskRunner pid=4242) Training from scratch\n"
        "Traceback (most recent call last):\n"
        '  File "/verl/trainer/main_ppo.py", line 64, in main\n'
        "    run_ppo(config)\n"
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_update_actor() "
        "(pid=5151, ip=10.0.0.2, actor_id=abc, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f>)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 79.15 GiB of which 1.02 GiB is free.\n"
    )
    code, out, _ = _run(str(log), "--format", "json", store=tmp_path / "s")
    data = json.loads(out)
    assert "cuda-oom" in {f["name"] for f in data["findings"]}
    assert code == 1  # an error-level finding with the default --fail-on error


def test_fail_on_thresholds(tmp_path: Path) -> None:
    code_never, _, _ = _run(str(BASELINE), "--fail-on", "never", "--format", "json", store=tmp_path)
    code_info, out, _ = _run(str(BASELINE), "--fail-on", "info", "--format", "json", store=tmp_path)
    assert code_never == 0
    assert code_info == (1 if json.loads(out)["findings"] else 0)


def test_only_and_skip(tmp_path: Path) -> None:
    _, out, _ = _run(
        str(BASELINE),
        "--format",
        "json",
        "--fail-on",
        "never",
        "--only",
        "LS001,LS010",
        store=tmp_path,
    )
    codes = {f["code"] for f in json.loads(out)["findings"]}
    assert codes <= {"LS001", "LS010"}
    code, _, err = _run(str(BASELINE), "--only", "LS000", store=tmp_path)
    assert code == 2 and "LS000" in err


def test_markdown_and_html_to_file(tmp_path: Path) -> None:
    md = tmp_path / "r.md"
    html = tmp_path / "r.html"
    assert (
        _run(str(TUNED), "-f", "markdown", "-o", str(md), "--fail-on", "never", store=tmp_path)[0]
        == 0
    )
    assert (
        _run(str(TUNED), "-f", "html", "-o", str(html), "--fail-on", "never", store=tmp_path)[0]
        == 0
    )
    assert md.read_text().startswith("# logscope analyze")
    assert "<html>" in html.read_text()


def test_refuses_to_overwrite_an_input(tmp_path: Path) -> None:
    copy = tmp_path / "in.log"
    copy.write_bytes(TUNED.read_bytes())
    before = copy.read_bytes()
    code, _, err = _run(str(copy), "-o", str(copy), store=tmp_path / "s")
    assert code == 2 and "refusing" in err
    assert copy.read_bytes() == before


def test_cache_is_used_and_no_cache_bypasses_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _run(str(TUNED), "--fail-on", "never", store=store)
    entries = list((store / "runs").iterdir())
    assert len(entries) == 1
    assert list((store / "sources").glob("*.json"))
    fresh = tmp_path / "fresh"
    _run(str(TUNED), "--fail-on", "never", "--no-cache", store=fresh)
    assert not fresh.exists() or not list(fresh.rglob("*.parquet"))


@pytest.mark.parametrize("fmt", ["rich", "json", "markdown", "html"])
def test_input_is_never_modified(tmp_path: Path, fmt: str) -> None:
    copy = tmp_path / "in.log"
    copy.write_bytes(BASELINE.read_bytes())
    before = (copy.read_bytes(), copy.stat().st_mtime_ns)
    _run(str(copy), "-f", fmt, "--fail-on", "never", store=tmp_path / "s")
    assert (copy.read_bytes(), copy.stat().st_mtime_ns) == before


def test_readme_pasted_excerpt_example(tmp_path: Path) -> None:
    """The README's pasted excerpt: a Markdown-quoted, wrapped step line with a question above."""
    paste = ROOT / "fixtures" / "pasted" / "grpo_step37_quoted.txt"
    code, out, _ = _run(str(paste), "-f", "json", store=tmp_path)
    report = json.loads(out)
    assert code == 0 and report["run"]["steps"] == {"count": 1, "first": 37, "last": 37}
    assert [f["name"] for f in report["findings"]] == ["response-length-clipped"]
    assert report["findings"][0]["advice"][0]["override"] == "data.max_response_length=2048"
    verdicts = {row["metric"]: row["verdict"] for row in report["health"]}
    assert verdicts["perf/mfu/actor"] == "not measured"
    code, out, _ = _run(str(paste), store=tmp_path)
    assert "Health of the last training step (step 37)" in out


def test_one_unreadable_input_does_not_stop_the_others(tmp_path: Path) -> None:
    """`analyze a.log b.jsonl c.bin`: the good inputs are reported, the bad one is an entry with
    its reason; exit 2 only when nothing at all could be read."""
    blob = tmp_path / "c.bin"
    blob.write_bytes(b"\x00\x01\x02binary")
    jsonl = tmp_path / "b.jsonl"
    jsonl.write_text(json.dumps({"step": 1, "data": {"actor/pg_loss": 0.1}}) + "\n")
    code, out, _ = _run(str(TUNED), str(jsonl), str(blob), "-f", "json", store=tmp_path / "s")
    assert code == 0
    reports = json.loads(out)["reports"]  # worst first: the unreadable input leads
    for report in reports:
        jsonschema.validate(report, SCHEMA)
    kinds = {Path(r["run"]["source"]["path"]).name: r["run"]["source"]["kind"] for r in reports}
    assert kinds == {TUNED.name: "verl-console", "b.jsonl": "verl-jsonl", "c.bin": "unreadable"}
    assert "binary data" in reports[0]["errors"][0]
    code, _, err = _run(str(blob), str(tmp_path / "missing.log"), store=tmp_path / "s")
    assert code == 2
    err = " ".join(err.split())
    assert "c.bin" in err and "missing.log: no such file" in err


@pytest.mark.parametrize("fmt", ["rich", "markdown", "html"])
def test_unreadable_entry_is_shown_in_every_format(tmp_path: Path, fmt: str) -> None:
    blob = tmp_path / "c.bin"
    blob.write_bytes(b"\x00\x01\x02binary")
    args = ["analyze", str(TUNED), str(blob), "-f", fmt, "--store", str(tmp_path / "s")]
    result = runner.invoke(app, args, env={"COLUMNS": "400"})  # no wrapping inside a path
    assert result.exit_code == 0
    text = " ".join(result.stdout.split()).replace("\\", "")  # Markdown escapes `.` and `_`
    assert "c.bin" in text and "binary data" in text and "verl_tuned.log" in text


def test_auto_detection_failure_says_what_the_file_looked_like(tmp_path: Path) -> None:
    blob = tmp_path / "weights.bin"
    blob.write_bytes(b"\x89PNG\x00\x00")
    code, _, err = _run(str(blob), store=tmp_path / "s")
    err = " ".join(err.split())
    assert code == 2
    assert "binary data (89 50 4e 47" in err and "--source KIND" in err
    assert len(err) < 300  # one sentence, not a list of every format's description
