"""The README's `logscope analyze` examples print what the README shows (finding titles and
the verdict line), so the examples cannot drift from the program."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logscope.cli import app

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```console\n\$ (logscope analyze [^\n|]+)\n(.*?)```", re.S)
EXAMPLES = BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8"))


def test_the_readme_has_analyze_examples() -> None:
    assert len(EXAMPLES) >= 2


@pytest.mark.parametrize(("command", "shown"), EXAMPLES, ids=[c for c, _ in EXAMPLES])
def test_readme_example_output_is_what_analyze_prints(command: str, shown: str, tmp_path) -> None:
    args = shlex.split(command)[1:]
    args = [str(ROOT / a) if (ROOT / a).exists() else a for a in args]
    result = CliRunner().invoke(
        app, [*args, "--store", str(tmp_path)], env={"COLUMNS": "100"}, catch_exceptions=False
    )
    printed = result.stdout
    titles = [line for line in shown.splitlines() if re.match(r"╭─\s+[A-Z]+\s+LS\d{3}", line)]
    assert titles, command
    for title in titles:
        code = re.search(r"LS\d{3} \S+(?:  step \S+)?", title)[0]
        assert code in printed, (command, code)
    verdicts = [line for line in shown.splitlines() if "finding(s):" in line]
    assert verdicts and verdicts[-1] in printed, (command, verdicts)
    if "none logged" in shown:  # the example of a run that logged no step
        assert re.search(r"steps\s+none logged", printed), command


def test_the_no_step_example_is_a_run_without_steps() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text[text.index("even when it logged no step at all") :]
    command, shown = BLOCK.search(after).groups()
    assert re.search(r"steps\s+none logged", shown), command
