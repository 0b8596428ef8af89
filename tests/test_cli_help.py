"""`--help` a newcomer can read: plain metavars, the same option spelled the same everywhere."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logscope import __version__
from logscope.cli import app

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ["analyze", "check", "compare", "dashboard", "rules", "tail"]
runner = CliRunner()


def help_text(*command: str) -> str:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_no_python_types(command: str) -> None:
    text = help_text(command)
    assert not re.search(r"<(bool|str|int|float|path|list\[)", text), text
    assert "{" not in text.split("\n\n")[0], text  # the usage line: PATH..., not {paths}


def option_help(text: str, option: str) -> str:
    """The help words of `option` in a rendered --help (box characters and wrapping removed)."""
    lines = [line.strip("│ ") for line in text.splitlines()]
    for i, line in enumerate(lines):
        if re.match(rf"{re.escape(option)}\b", line):
            words = [line]
            for follow in lines[i + 1 :]:
                if not follow or follow.startswith("-") or follow.startswith("╰"):
                    break
                words.append(follow)
            text = " ".join(" ".join(words).split()[1:])
            return re.sub(r"\s*\[default: [^]]*\]", "", text)  # defaults may differ
    raise AssertionError(f"{option} not in help")


@pytest.mark.parametrize("option", ["--store", "--no-cache", "--fail-on", "--output"])
def test_a_shared_option_reads_the_same_in_every_command(option: str) -> None:
    helps = {c: option_help(help_text(c), option) for c in COMMANDS if option in help_text(c)}
    assert len(helps) >= 2, helps
    assert len(set(helps.values())) == 1, helps


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"logscope {__version__}"


def test_compare_writes_html_and_json_to_a_file_and_fails_on_findings(tmp_path: Path) -> None:
    base, tuned = ROOT / "fixtures" / "verl_baseline.log", ROOT / "fixtures" / "verl_tuned.log"
    store = ["--store", str(tmp_path / "store")]
    page = tmp_path / "cmp.html"
    result = runner.invoke(
        app, ["compare", str(base), str(tuned), "-f", "html", "-o", str(page), *store]
    )
    assert result.exit_code == 0 and result.stdout == ""
    text = page.read_text()
    assert text.startswith("<!doctype html>") and "verl_tuned" in text and "Config diff" in text
    out = tmp_path / "cmp.json"
    args = ["compare", str(base), str(tuned), "-f", "json", "-o", str(out), *store]
    assert (
        runner.invoke(app, [*args, "--fail-on", "info"]).exit_code == 1
    )  # both have info findings
    assert json.loads(out.read_text())["schema"] == "logscope.compare/1"
    assert runner.invoke(app, [*args, "--fail-on", "critical"]).exit_code == 0


@pytest.mark.parametrize("command", ["analyze", "check", "compare", "rules"])
def test_every_report_command_takes_format_and_output(command: str) -> None:
    text = help_text(command)
    assert "--format" in text and "--output" in text


def test_rules_writes_every_format_to_a_file(tmp_path: Path) -> None:
    for fmt, name in (("json", "rules.json"), ("markdown", "ls010.md"), ("rich", "ls010.txt")):
        out = tmp_path / name
        code = [] if fmt == "json" else ["LS010"]
        result = runner.invoke(app, ["rules", *code, "-f", fmt, "-o", str(out)])
        assert result.exit_code == 0 and result.stdout == "", result.output
        assert out.read_text().strip()
    assert json.loads((tmp_path / "rules.json").read_text())[0]["code"] == "LS001"
    assert (tmp_path / "ls010.md").read_text().startswith("# LS010 `cuda-oom`")
    assert "What it detects" in (tmp_path / "ls010.txt").read_text()
